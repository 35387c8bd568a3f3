#include "placer/rl/policy.hpp"

#include <algorithm>
#include <cmath>

namespace placer::rl {
namespace {

// Rows of q processed together, so that a chunk of tanh activations (rows x G x A floats) stays in
// the cache instead of streaming B*T*G*A floats through memory.
constexpr std::int64_t kChunkElements = std::int64_t{1} << 16;

std::int64_t chunk_rows(const torch::Tensor& k) { return std::max<std::int64_t>(1, kChunkElements / (k.size(0) * k.size(1))); }

torch::Tensor attention_forward(const torch::Tensor& q2, const torch::Tensor& k, const torch::Tensor& v) {
  const std::int64_t rows = q2.size(0), step = chunk_rows(k);
  torch::Tensor out = torch::empty({rows, k.size(0)}, q2.options());
  for (std::int64_t r0 = 0; r0 < rows; r0 += step) {
    const std::int64_t r1 = std::min(rows, r0 + step);
    torch::Tensor th = (q2.slice(0, r0, r1).unsqueeze(1) + k.unsqueeze(0)).tanh_();  // [r, G, A]
    out.slice(0, r0, r1).copy_(th.matmul(v));
  }
  return out;
}

struct AdditiveAttention : torch::autograd::Function<AdditiveAttention> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor q2, torch::Tensor k, torch::Tensor v) {
    ctx->save_for_backward({q2, k, v});
    return attention_forward(q2, k, v);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q2 = saved[0], &k = saved[1], &v = saved[2];
    const torch::Tensor gs = grads[0].contiguous();  // [R, G]
    const std::int64_t rows = q2.size(0), a = k.size(1), step = chunk_rows(k);
    torch::Tensor gq = torch::empty_like(q2), gk = torch::zeros_like(k), gv = torch::zeros_like(v);
    for (std::int64_t r0 = 0; r0 < rows; r0 += step) {
      const std::int64_t r1 = std::min(rows, r0 + step);
      torch::Tensor th = (q2.slice(0, r0, r1).unsqueeze(1) + k.unsqueeze(0)).tanh_();  // recomputed
      const torch::Tensor g = gs.slice(0, r0, r1);                                     // [r, G]
      gv.add_(g.reshape({1, -1}).mm(th.reshape({-1, a})).squeeze(0));
      th.mul_(th).neg_().add_(1.0).mul_(g.unsqueeze(2)).mul_(v);  // d score / d (q + k)
      gq.slice(0, r0, r1).copy_(th.sum(1));
      gk.add_(th.sum(0));
    }
    return {gq, gk, gv};
  }
};

// LSTM forget-gate bias 1 (gate order i, f, g, o), as the reference implementation initializes it.
void forget_bias_one(torch::nn::LSTM& lstm) {
  torch::NoGradGuard no_grad;
  for (auto& p : lstm->named_parameters()) {
    if (p.key().rfind("bias_ih", 0) != 0) continue;
    const std::int64_t h = p.value().size(0) / 4;
    p.value().slice(0, h, 2 * h).fill_(1.0);
  }
}

}  // namespace

FeatureTensors to_tensors(const Features& f) {
  const auto rows = static_cast<std::int64_t>(f.rows);
  FeatureTensors t;
  t.types = torch::from_blob(const_cast<float*>(f.type_counts.data()), {rows, static_cast<std::int64_t>(f.num_types)}, torch::kFloat32).clone();
  t.numeric = torch::from_blob(const_cast<float*>(f.numeric.data()), {rows, static_cast<std::int64_t>(f.num_numeric)}, torch::kFloat32).clone();
  return t;
}

torch::Tensor additive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const std::int64_t b = q.size(0), t = q.size(1);
  const torch::Tensor q2 = q.reshape({b * t, q.size(2)}).contiguous();
  return AdditiveAttention::apply(q2, k.contiguous(), v).reshape({b, t, k.size(0)});
}

std::vector<std::int64_t> sample_rows(const torch::Tensor& probs, std::mt19937_64& rng) {
  const torch::Tensor p = probs.to(torch::kFloat64).contiguous();
  const auto a = p.accessor<double, 2>();
  std::vector<std::int64_t> out(static_cast<std::size_t>(p.size(0)));
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (std::int64_t r = 0; r < p.size(0); ++r) {
    double total = 0.0;
    for (std::int64_t j = 0; j < p.size(1); ++j) total += a[r][j];
    const double u = uniform(rng) * total;
    double acc = 0.0;
    std::int64_t pick = p.size(1) - 1;
    for (std::int64_t j = 0; j < p.size(1); ++j) {
      acc += a[r][j];
      if (u < acc) {
        pick = j;
        break;
      }
    }
    out[static_cast<std::size_t>(r)] = pick;
  }
  return out;
}

Seq2SeqPlacerImpl::Seq2SeqPlacerImpl(const Seq2SeqOptions& o) : options_(o) {
  const std::int64_t h = o.hidden, a = o.attention;
  embed_types_ = register_module("embed_types", torch::nn::Linear(torch::nn::LinearOptions(o.types, h).bias(false)));
  embed_numeric_ = register_module("embed_numeric", torch::nn::Linear(o.numeric, h));
  encoder_ = register_module("encoder", torch::nn::LSTM(torch::nn::LSTMOptions(h, h / 2).bidirectional(true)));
  decoder_ = register_module("decoder", torch::nn::LSTM(torch::nn::LSTMOptions(o.device_embedding + h, h)));
  device_embedding_ = register_module("device_embedding", torch::nn::Embedding(o.devices + 1, o.device_embedding));
  query_ = register_module("query", torch::nn::Linear(torch::nn::LinearOptions(h, a).bias(false)));
  key_ = register_module("key", torch::nn::Linear(h, a));
  out_ = register_module("out", torch::nn::Linear(2 * h, o.devices));
  attention_v_ = register_parameter("attention_v", torch::randn({a}) / std::sqrt(static_cast<double>(a)));
  forget_bias_one(encoder_);
  forget_bias_one(decoder_);
}

Encoded Seq2SeqPlacerImpl::encode(const FeatureTensors& x) {
  const torch::Tensor in = torch::relu(embed_types_(x.types) + embed_numeric_(x.numeric)).unsqueeze(1);  // [G, 1, H]
  auto [out, state] = encoder_->forward(in);
  const torch::Tensor& hn = std::get<0>(state);  // [2, 1, H/2]
  const torch::Tensor& cn = std::get<1>(state);
  Encoded e;
  e.enc = out.squeeze(1);
  e.keys = key_(e.enc);
  e.h0 = torch::cat({hn[0], hn[1]}, 1);
  e.c0 = torch::cat({cn[0], cn[1]}, 1);
  return e;
}

torch::Tensor Seq2SeqPlacerImpl::logits_of(const torch::Tensor& h, const torch::Tensor& ctx) {
  torch::Tensor z = out_(torch::cat({h, ctx}, -1)) / options_.temperature;
  return options_.tanh_constant > 0 ? torch::tanh(z) * options_.tanh_constant : z;
}

torch::Tensor Seq2SeqPlacerImpl::sample(const Encoded& e, std::int64_t k, std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  const std::int64_t groups = e.enc.size(0), h = options_.hidden;
  const torch::Tensor enc = e.enc.detach(), keys = e.keys.detach();
  torch::Tensor hs = e.h0.detach().expand({k, h}).contiguous(), cs = e.c0.detach().expand({k, h}).contiguous();
  auto params = decoder_->named_parameters();
  const torch::Tensor w_ih = params["weight_ih_l0"], w_hh = params["weight_hh_l0"], b_ih = params["bias_ih_l0"], b_hh = params["bias_hh_l0"];
  torch::Tensor prev = torch::full({k}, options_.devices, torch::kInt64);
  torch::Tensor actions = torch::empty({k, groups}, torch::kInt64);
  auto act = actions.accessor<std::int64_t, 2>();
  for (std::int64_t t = 0; t < groups; ++t) {
    const torch::Tensor in = torch::cat({device_embedding_(prev), enc[t].expand({k, h})}, 1);
    auto hc = torch::lstm_cell(in, {hs, cs}, w_ih, w_hh, b_ih, b_hh);
    hs = std::get<0>(hc);
    cs = std::get<1>(hc);
    const torch::Tensor alpha = torch::softmax(attention_forward(query_(hs), keys, attention_v_), 1);  // [k, G]
    const torch::Tensor probs = torch::softmax(logits_of(hs, alpha.mm(enc)), 1);
    const std::vector<std::int64_t> drawn = sample_rows(probs, rng);
    for (std::int64_t i = 0; i < k; ++i) act[i][t] = drawn[static_cast<std::size_t>(i)];
    prev = actions.select(1, t).clone();
  }
  return actions;
}

LogProbs Seq2SeqPlacerImpl::log_probs(const Encoded& e, const torch::Tensor& actions) {
  const std::int64_t k = actions.size(0), groups = actions.size(1), h = options_.hidden;
  const torch::Tensor prev = torch::cat({torch::full({k, 1}, options_.devices, torch::kInt64), actions.slice(1, 0, groups - 1)}, 1);
  const torch::Tensor in = torch::cat({device_embedding_(prev), e.enc.unsqueeze(0).expand({k, groups, h})}, 2).transpose(0, 1);
  auto [out, state] = decoder_->forward(in, std::make_tuple(e.h0.unsqueeze(0).expand({1, k, h}).contiguous(),
                                                            e.c0.unsqueeze(0).expand({1, k, h}).contiguous()));
  const torch::Tensor dec = out.transpose(0, 1);  // [K, G, H]
  const torch::Tensor alpha = torch::softmax(additive_attention(query_(dec), e.keys, attention_v_), -1);  // [K, G, G]
  const torch::Tensor log_p = torch::log_softmax(logits_of(dec, alpha.matmul(e.enc)), -1);                // [K, G, D]
  LogProbs r;
  r.log_prob = log_p.gather(2, actions.unsqueeze(2)).squeeze(2).sum(1);
  r.entropy = -(log_p.exp() * log_p).sum(-1).mean();
  return r;
}

GrouperImpl::GrouperImpl(const GrouperOptions& o) {
  embed_types_ = register_module("embed_types", torch::nn::Linear(torch::nn::LinearOptions(o.types, o.hidden).bias(false)));
  embed_numeric_ = register_module("embed_numeric", torch::nn::Linear(o.numeric, o.hidden));
  out_ = register_module("out", torch::nn::Linear(o.hidden, o.groups));
}

torch::Tensor GrouperImpl::logits(const FeatureTensors& ops) {
  return out_(torch::relu(embed_types_(ops.types) + embed_numeric_(ops.numeric)));
}

}  // namespace placer::rl
