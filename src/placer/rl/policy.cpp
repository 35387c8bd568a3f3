#include "placer/rl/policy.hpp"

#include <algorithm>
#include <cmath>

#include "placer/rl/kernels.hpp"

namespace placer::rl {
namespace {

// out[m, n] = (accumulate ? out : 0) + x[m, k] w[k, n] on row-major buffers, by libtorch (OpenBLAS).
void matmul(const float* x, std::int64_t m, std::int64_t k, const float* w, std::int64_t n, float* out, bool accumulate) {
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  const torch::Tensor xt = torch::from_blob(const_cast<float*>(x), {m, k}, f32);
  const torch::Tensor wt = torch::from_blob(const_cast<float*>(w), {k, n}, f32);
  torch::Tensor ot = torch::from_blob(out, {m, n}, f32);
  if (accumulate)
    ot.addmm_(xt, wt);
  else
    torch::mm_out(ot, xt, wt);
}

// Additive attention as one autograd node over the fused kernels: the backward pass recomputes tanh
// instead of storing rows x G x A activations.
struct AdditiveAttention : torch::autograd::Function<AdditiveAttention> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor q2, torch::Tensor k, torch::Tensor v) {
    q2 = q2.contiguous();
    v = v.contiguous();
    const torch::Tensor kt = k.t().contiguous();  // [A, G]
    const std::int64_t rows = q2.size(0), g = k.size(0), a = k.size(1);
    torch::Tensor s = torch::empty({rows, g}, q2.options());
    kernels::attention_scores(q2.data_ptr<float>(), rows, kt.data_ptr<float>(), g, a, v.data_ptr<float>(), s.data_ptr<float>());
    ctx->saved_data["q"] = q2;
    ctx->saved_data["kt"] = kt;
    ctx->saved_data["v"] = v;
    return s;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const torch::Tensor q2 = ctx->saved_data["q"].toTensor(), kt = ctx->saved_data["kt"].toTensor(), v = ctx->saved_data["v"].toTensor();
    const torch::Tensor ds = grads[0].contiguous();  // [R, G]
    const std::int64_t rows = q2.size(0), a = kt.size(0), g = kt.size(1);
    torch::Tensor dq = torch::empty_like(q2), dkt = torch::zeros_like(kt), dv = torch::zeros_like(v), scratch = torch::empty_like(kt);
    kernels::attention_backward(q2.data_ptr<float>(), rows, kt.data_ptr<float>(), g, a, v.data_ptr<float>(), ds.data_ptr<float>(),
                                dq.data_ptr<float>(), dkt.data_ptr<float>(), dv.data_ptr<float>(), scratch.data_ptr<float>());
    return {dq, dkt.t().contiguous(), dv};
  }
};

// A whole LSTM layer as one autograd node: the forward pass runs kernels::lstm_cell over the
// sequence (one small matmul per step) and keeps the activations; the backward pass is
// backpropagation through time written out (one small matmul per step, and one matmul over all
// steps for the recurrent weights' gradient), instead of a dozen autograd nodes per step each way.
struct LstmSequence : torch::autograd::Function<LstmSequence> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor xw, torch::Tensor h0,
                                                torch::Tensor c0, torch::Tensor w_hh) {
    xw = xw.contiguous();
    h0 = h0.contiguous();
    c0 = c0.contiguous();
    const std::int64_t t_len = xw.size(0), b = xw.size(1), hs = h0.size(1);
    const torch::Tensor w_t = w_hh.t().contiguous();  // [H, 4H]
    torch::Tensor act = torch::empty({t_len, b, 4 * hs}, xw.options());
    torch::Tensor out = torch::empty({t_len, b, hs}, xw.options());
    torch::Tensor cs = torch::empty({t_len, b, hs}, xw.options()), tcs = torch::empty({t_len, b, hs}, xw.options());
    act.copy_(xw);
    const float* h = h0.data_ptr<float>();
    const float* c = c0.data_ptr<float>();
    float* ap = act.data_ptr<float>();
    float* op = out.data_ptr<float>();
    float* cp = cs.data_ptr<float>();
    float* tp = tcs.data_ptr<float>();
    const float* wp = w_t.data_ptr<float>();
    const std::int64_t n = b * hs;
    for (std::int64_t t = 0; t < t_len; ++t) {
      float* gates = ap + t * 4 * n;
      matmul(h, b, hs, wp, 4 * hs, gates, /*accumulate=*/true);
      kernels::lstm_cell(gates, c, cp + t * n, tp + t * n, op + t * n, b, hs);
      h = op + t * n;
      c = cp + t * n;
    }
    ctx->save_for_backward({w_hh});
    ctx->saved_data["h0"] = h0;
    ctx->saved_data["c0"] = c0;
    ctx->saved_data["act"] = act;
    ctx->saved_data["cs"] = cs;
    ctx->saved_data["tcs"] = tcs;
    ctx->saved_data["out"] = out.clone();  // not the output itself, which the caller may view or modify
    return {out, cs.select(0, t_len - 1).clone()};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const torch::Tensor w_hh = ctx->get_saved_variables()[0];
    const torch::Tensor h0 = ctx->saved_data["h0"].toTensor(), c0 = ctx->saved_data["c0"].toTensor();
    const torch::Tensor act = ctx->saved_data["act"].toTensor(), cs = ctx->saved_data["cs"].toTensor(),
                        tcs = ctx->saved_data["tcs"].toTensor(), out = ctx->saved_data["out"].toTensor();
    const std::int64_t t_len = act.size(0), b = act.size(1), hs = h0.size(1), n = b * hs;
    const torch::Tensor g_out = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    torch::Tensor dh = torch::zeros({b, hs}, h0.options());
    const torch::Tensor w = w_hh.contiguous();
    torch::Tensor dc = grads[1].defined() ? grads[1].contiguous().clone() : torch::zeros({b, hs}, h0.options());
    torch::Tensor dgates = torch::empty_like(act);
    const float* go = g_out.defined() ? g_out.data_ptr<float>() : nullptr;
    const float* ap = act.data_ptr<float>();
    const float* csp = cs.data_ptr<float>();
    const float* tcp = tcs.data_ptr<float>();
    const float* c0p = c0.data_ptr<float>();
    float* dcp = dc.data_ptr<float>();
    float* dgp = dgates.data_ptr<float>();
    float* dhp = dh.data_ptr<float>();
    for (std::int64_t t = t_len - 1; t >= 0; --t) {
      const float* cprev = t > 0 ? csp + (t - 1) * n : c0p;
      for (std::int64_t r = 0; r < b; ++r) {
        const float* a = ap + (t * b + r) * 4 * hs;
        float* d = dgp + (t * b + r) * 4 * hs;
        for (std::int64_t j = 0; j < hs; ++j) {
          const std::int64_t idx = r * hs + j;
          const float dhv = dhp[idx] + (go ? go[t * n + idx] : 0.0f);
          const float i = a[j], f = a[hs + j], g = a[2 * hs + j], o = a[3 * hs + j], tc = tcp[t * n + idx];
          const float dcv = dcp[idx] + dhv * o * (1.0f - tc * tc);
          d[j] = dcv * g * i * (1.0f - i);
          d[hs + j] = dcv * cprev[idx] * f * (1.0f - f);
          d[2 * hs + j] = dcv * i * (1.0f - g * g);
          d[3 * hs + j] = dhv * tc * o * (1.0f - o);
          dcp[idx] = dcv * f;
        }
      }
      matmul(dgp + t * b * 4 * hs, b, 4 * hs, w.data_ptr<float>(), hs, dhp, /*accumulate=*/false);  // dh = dgates[t] W_hh
    }
    const torch::Tensor h_prev = t_len > 1 ? torch::cat({h0.unsqueeze(0), out.narrow(0, 0, t_len - 1)}, 0) : h0.unsqueeze(0);
    const torch::Tensor g_w = dgates.view({t_len * b, 4 * hs}).t().mm(h_prev.reshape({t_len * b, hs}));
    return {dgates, dh, dc, g_w};
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

// Draws an index from the distribution softmax(logits[0..n)) with a uniform double, by the inverse
// CDF as sample_rows does.
std::int64_t draw(const float* logits, std::int64_t n, std::mt19937_64& rng) {
  double p[64];
  double* probs = n <= 64 ? p : new double[static_cast<std::size_t>(n)];
  double top = logits[0], total = 0.0;
  for (std::int64_t j = 1; j < n; ++j) top = std::max(top, static_cast<double>(logits[j]));
  for (std::int64_t j = 0; j < n; ++j) total += probs[j] = std::exp(logits[j] - top);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double u = uniform(rng) * total;
  double acc = 0.0;
  std::int64_t pick = n - 1;
  for (std::int64_t j = 0; j < n; ++j) {
    acc += probs[j];
    if (u < acc) {
      pick = j;
      break;
    }
  }
  if (probs != p) delete[] probs;
  return pick;
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

std::vector<torch::Tensor> lstm_sequence(const torch::Tensor& xw, const torch::Tensor& h0, const torch::Tensor& c0, const torch::Tensor& w_hh) {
  return LstmSequence::apply(xw, h0, c0, w_hh);
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
  const std::int64_t h = options_.hidden, half = h / 2, e_size = options_.device_embedding;
  const torch::Tensor in = torch::relu(embed_types_(x.types) + embed_numeric_(x.numeric));  // [G, H]
  const std::int64_t groups = in.size(0);
  auto p = encoder_->named_parameters();
  // Both directions' input projections in one product; the backward direction runs on the reversed
  // sequence and its outputs are reversed back.
  const torch::Tensor xw = torch::addmm(torch::cat({p["bias_ih_l0"] + p["bias_hh_l0"], p["bias_ih_l0_reverse"] + p["bias_hh_l0_reverse"]}),
                                        in, torch::cat({p["weight_ih_l0"], p["weight_ih_l0_reverse"]}).t());  // [G, 2 x 4 x H/2]
  const torch::Tensor zero = torch::zeros({1, half});
  const auto fwd = lstm_sequence(xw.narrow(1, 0, 4 * half).unsqueeze(1), zero, zero, p["weight_hh_l0"]);
  const auto bwd = lstm_sequence(xw.narrow(1, 4 * half, 4 * half).flip(0).unsqueeze(1), zero, zero, p["weight_hh_l0_reverse"]);
  Encoded e;
  e.enc = torch::cat({fwd[0].squeeze(1), bwd[0].squeeze(1).flip(0)}, 1);  // [G, H]
  e.h0 = torch::cat({fwd[0][groups - 1], bwd[0][groups - 1]}, 1);         // final states of both directions
  e.c0 = torch::cat({fwd[1], bwd[1]}, 1);
  e.keys = key_(e.enc);
  // The decoder's input at step t is [embedding of the previous device; enc[t]]: its projection by
  // W_ih splits into a per-device table and a per-group table, both computed once per batch.
  auto d = decoder_->named_parameters();
  const torch::Tensor& w_ih = d["weight_ih_l0"];
  e.device_in = device_embedding_->weight.mm(w_ih.narrow(1, 0, e_size).t());                       // [D + 1, 4H]
  e.group_in = torch::addmm(d["bias_ih_l0"] + d["bias_hh_l0"], e.enc, w_ih.narrow(1, e_size, h).t());  // [G, 4H]
  // The logits' context part W_c (sum_g alpha_g enc_g) = sum_g alpha_g (W_c enc_g): one table [G, D].
  e.context_out = e.enc.mm(out_->weight.narrow(1, h, h).t());
  return e;
}

torch::Tensor Seq2SeqPlacerImpl::squash(const torch::Tensor& z) const {
  const torch::Tensor s = z / options_.temperature;
  return options_.tanh_constant > 0 ? torch::tanh(s) * options_.tanh_constant : s;
}

torch::Tensor Seq2SeqPlacerImpl::sample(const Encoded& e, std::int64_t k, std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  const std::int64_t groups = e.enc.size(0), h = options_.hidden, a = options_.attention, devices = options_.devices;
  const torch::Tensor keys_t = e.keys.detach().t().contiguous(), group_in = e.group_in.detach().contiguous(),
                      device_in = e.device_in.detach().contiguous(), context_out = e.context_out.detach().contiguous();
  // h_t times [W_hh; W_q; W_h]^T in one product: the next step's recurrent input, this step's
  // attention query and the logits' decoder part.
  const torch::Tensor w_all =
      torch::cat({decoder_->named_parameters()["weight_hh_l0"], query_->weight, out_->weight.narrow(1, 0, h)}).t().contiguous();
  const std::int64_t width = 4 * h + a + devices;
  const torch::Tensor v = attention_v_.detach().contiguous(), bias = out_->bias.detach().contiguous();
  const torch::Tensor h0 = e.h0.detach().expand({k, h}).contiguous(), c0 = e.c0.detach().expand({k, h}).contiguous();
  std::vector<float> hs(h0.data_ptr<float>(), h0.data_ptr<float>() + k * h), cs(c0.data_ptr<float>(), c0.data_ptr<float>() + k * h);
  std::vector<float> c_next(hs.size()), tanh_c(hs.size()), proj(static_cast<std::size_t>(k * width)), gates(static_cast<std::size_t>(k * 4 * h));
  std::vector<float> q(static_cast<std::size_t>(k * a)), scores(static_cast<std::size_t>(k * groups)), z(static_cast<std::size_t>(devices));
  std::vector<std::int64_t> prev(static_cast<std::size_t>(k), devices);  // the "go" embedding
  torch::Tensor actions = torch::empty({k, groups}, torch::kInt64);
  auto act = actions.accessor<std::int64_t, 2>();
  const float* gi = group_in.data_ptr<float>();
  const float* di = device_in.data_ptr<float>();
  const float* co = context_out.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  const float* wp = w_all.data_ptr<float>();
  const auto temperature = static_cast<float>(options_.temperature), tanh_constant = static_cast<float>(options_.tanh_constant);
  matmul(hs.data(), k, h, wp, width, proj.data(), false);
  for (std::int64_t t = 0; t < groups; ++t) {
    // gates = group_in[t] + device_in[previous device] + h W_hh^T
    for (std::int64_t r = 0; r < k; ++r) {
      const float* dr = di + prev[static_cast<std::size_t>(r)] * 4 * h;
      const float* gt = gi + t * 4 * h;
      const float* rr = proj.data() + r * width;
      float* out = gates.data() + r * 4 * h;
      for (std::int64_t j = 0; j < 4 * h; ++j) out[j] = gt[j] + dr[j] + rr[j];
    }
    kernels::lstm_cell(gates.data(), cs.data(), c_next.data(), tanh_c.data(), hs.data(), k, h);
    std::swap(cs, c_next);
    matmul(hs.data(), k, h, wp, width, proj.data(), false);
    for (std::int64_t r = 0; r < k; ++r) std::copy_n(proj.data() + r * width + 4 * h, a, q.data() + r * a);
    kernels::attention_scores(q.data(), k, keys_t.data_ptr<float>(), groups, a, v.data_ptr<float>(), scores.data());
    for (std::int64_t r = 0; r < k; ++r) {
      // alpha = softmax(scores[r]); z = W_h h + sum_g alpha_g context_out[g] + b; logits C tanh(z / T)
      const float* s = scores.data() + r * groups;
      const float top = *std::max_element(s, s + groups);
      const float* zh = proj.data() + r * width + 4 * h + a;
      std::fill(z.begin(), z.end(), 0.0f);
      float total = 0.0f;
      for (std::int64_t j = 0; j < groups; ++j) {
        const float w = std::exp(s[j] - top);
        total += w;
        for (std::int64_t d = 0; d < devices; ++d) z[static_cast<std::size_t>(d)] += w * co[j * devices + d];
      }
      for (std::int64_t d = 0; d < devices; ++d) {
        float& zd = z[static_cast<std::size_t>(d)];
        zd = (zd / total + zh[d] + bp[d]) / temperature;
        if (tanh_constant > 0) zd = std::tanh(zd) * tanh_constant;
      }
      const std::int64_t pick = draw(z.data(), devices, rng);
      act[r][t] = pick;
      prev[static_cast<std::size_t>(r)] = pick;
    }
  }
  return actions;
}

LogProbs Seq2SeqPlacerImpl::log_probs(const Encoded& e, const torch::Tensor& actions) {
  const std::int64_t k = actions.size(0), groups = actions.size(1), h = options_.hidden;
  const torch::Tensor prev = torch::cat({torch::full({k, 1}, options_.devices, torch::kInt64), actions.slice(1, 0, groups - 1)}, 1);
  // Decoder input projection [G, K, 4H]: the group's part plus the previous device's.
  const torch::Tensor xw = e.device_in.index_select(0, prev.t().reshape({-1})).view({groups, k, 4 * h}) + e.group_in.unsqueeze(1);
  const auto dec_out = lstm_sequence(xw, e.h0.expand({k, h}), e.c0.expand({k, h}), decoder_->named_parameters()["weight_hh_l0"]);
  const torch::Tensor dec = dec_out[0].transpose(0, 1);  // [K, G, H]
  const torch::Tensor alpha = torch::softmax(additive_attention(query_(dec), e.keys, attention_v_), -1);  // [K, G, G]
  const torch::Tensor z = torch::addmm(out_->bias, dec.reshape({k * groups, h}), out_->weight.narrow(1, 0, h).t()).view({k, groups, -1}) +
                          alpha.matmul(e.context_out);
  const torch::Tensor log_p = torch::log_softmax(squash(z), -1);  // [K, G, D]
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
