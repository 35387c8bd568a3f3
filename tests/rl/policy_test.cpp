// The policy's hand-written pieces against plain libtorch: the LSTM layer (lstm_sequence) and the
// additive attention give torch::nn::LSTM's and autograd's values and gradients, and the seq2seq
// placer's log-probabilities (split input projections, precomputed tables) are those of the
// network as docs/learned-placers.md describes it, written out with torch::nn modules.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <random>

#include "placer/rl/kernels.hpp"
#include "placer/rl/policy.hpp"

namespace placer::rl {
namespace {

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>(), scale = std::max(1.0, b.abs().max().item<double>());
  EXPECT_LE(err, tol * scale) << what;
}

TEST(Kernels, FastTanhIsCloseToTanh) {
  for (float x = -12.0f; x <= 12.0f; x += 0.01f) EXPECT_NEAR(kernels::fast_tanh(x), std::tanh(x), 1e-6) << x;
}

TEST(LstmSequence, MatchesTorchLstmAndItsGradients) {
  torch::manual_seed(1);
  const std::int64_t t = 7, b = 3, in = 5, h = 6;
  torch::nn::LSTM ref(torch::nn::LSTMOptions(in, h));
  const torch::Tensor x = torch::randn({t, b, in}, torch::requires_grad());
  const torch::Tensor h0 = torch::randn({b, h}, torch::requires_grad()), c0 = torch::randn({b, h}, torch::requires_grad());
  const torch::Tensor gy = torch::randn({t, b, h}), gc = torch::randn({b, h});
  auto p = ref->named_parameters();

  auto [y_ref, state] = ref->forward(x, std::make_tuple(h0.unsqueeze(0), c0.unsqueeze(0)));
  const torch::Tensor c_ref = std::get<1>(state).squeeze(0);
  torch::autograd::backward({y_ref, c_ref}, {gy, gc});
  std::vector<torch::Tensor> want;
  for (const torch::Tensor& v : {x, h0, c0, p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"]}) want.push_back(v.grad().clone());
  for (auto& v : ref->parameters()) v.mutable_grad() = torch::Tensor();
  for (const torch::Tensor& v : {x, h0, c0}) const_cast<torch::Tensor&>(v).mutable_grad() = torch::Tensor();

  const torch::Tensor xw = torch::matmul(x, p["weight_ih_l0"].t()) + p["bias_ih_l0"] + p["bias_hh_l0"];
  const auto got = lstm_sequence(xw, h0, c0, p["weight_hh_l0"]);
  expect_close(got[0], y_ref.detach(), 1e-5, "outputs");
  expect_close(got[1], c_ref.detach(), 1e-5, "final cell state");
  torch::autograd::backward({got[0], got[1]}, {gy, gc});
  const char* names[] = {"x", "h0", "c0", "W_ih", "W_hh", "b_ih"};
  int i = 0;
  for (const torch::Tensor& v : {x, h0, c0, p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"]}) {
    expect_close(v.grad(), want[static_cast<std::size_t>(i)], 1e-5, std::string("gradient of ") + names[i]);
    ++i;
  }
}

TEST(AdditiveAttention, MatchesAutogradOfTheFormula) {
  torch::manual_seed(2);
  const torch::Tensor q = torch::randn({2, 5, 8}, torch::requires_grad()), k = torch::randn({21, 8}, torch::requires_grad()),
                      v = torch::randn({8}, torch::requires_grad());
  const torch::Tensor gs = torch::randn({2, 5, 21});
  const torch::Tensor ref = torch::tanh(q.unsqueeze(2) + k).matmul(v);
  const auto want = torch::autograd::grad({ref}, {q, k, v}, {gs});
  const torch::Tensor got = additive_attention(q, k, v);
  expect_close(got, ref.detach(), 1e-5, "scores");
  const auto grads = torch::autograd::grad({got}, {q, k, v}, {gs});
  expect_close(grads[0], want[0], 1e-5, "dq");
  expect_close(grads[1], want[1], 1e-5, "dk");
  expect_close(grads[2], want[2], 1e-5, "dv");
}

// The placer as documented: embedding, bidirectional LSTM encoder, decoder LSTM on [previous
// device's embedding; enc[t]] from the encoder's final state, additive attention, C tanh(W_o [h; ctx] / T).
TEST(Seq2SeqPlacer, LogProbsAreThoseOfTheDocumentedNetwork) {
  torch::manual_seed(4);
  Seq2SeqOptions o;
  o.types = 3;
  o.numeric = 4;
  o.devices = 3;
  o.hidden = 8;
  o.attention = 5;
  o.device_embedding = 4;
  Seq2SeqPlacer net(o);
  const std::int64_t g = 6, k = 4;
  FeatureTensors x{torch::rand({g, 3}), torch::randn({g, 4})};
  std::mt19937_64 rng(9);
  const Encoded e = net->encode(x);
  const torch::Tensor actions = net->sample(e, k, rng);
  ASSERT_EQ(actions.sizes(), (std::vector<std::int64_t>{k, g}));
  EXPECT_GE(actions.min().item<std::int64_t>(), 0);
  EXPECT_LT(actions.max().item<std::int64_t>(), o.devices);
  const LogProbs got = net->log_probs(e, actions);

  auto p = net->named_parameters();
  auto sub = [&](const std::string& name) { return p[name]; };
  torch::nn::LSTM enc_lstm(torch::nn::LSTMOptions(o.hidden, o.hidden / 2).bidirectional(true));
  torch::nn::LSTM dec_lstm(torch::nn::LSTMOptions(o.device_embedding + o.hidden, o.hidden));
  {
    torch::NoGradGuard no_grad;
    for (auto& q : enc_lstm->named_parameters()) q.value().copy_(sub("encoder." + q.key()));
    for (auto& q : dec_lstm->named_parameters()) q.value().copy_(sub("decoder." + q.key()));
  }
  const torch::Tensor emb = torch::relu(x.types.mm(sub("embed_types.weight").t()) + x.numeric.mm(sub("embed_numeric.weight").t()) +
                                        sub("embed_numeric.bias"));
  auto [enc3, st] = enc_lstm->forward(emb.unsqueeze(1));
  const torch::Tensor enc = enc3.squeeze(1);
  const torch::Tensor hn = std::get<0>(st), cn = std::get<1>(st);
  const torch::Tensor h0 = torch::cat({hn[0], hn[1]}, 1).expand({k, o.hidden}), c0 = torch::cat({cn[0], cn[1]}, 1).expand({k, o.hidden});
  const torch::Tensor keys = enc.mm(sub("key.weight").t()) + sub("key.bias");
  const torch::Tensor prev = torch::cat({torch::full({k, 1}, o.devices, torch::kInt64), actions.slice(1, 0, g - 1)}, 1);
  const torch::Tensor dev = sub("device_embedding.weight").index_select(0, prev.reshape({-1})).view({k, g, -1});
  const torch::Tensor in = torch::cat({dev, enc.unsqueeze(0).expand({k, g, o.hidden})}, 2).transpose(0, 1);
  auto [dec3, st2] = dec_lstm->forward(in, std::make_tuple(h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous()));
  const torch::Tensor dec = dec3.transpose(0, 1);  // [K, G, H]
  const torch::Tensor q = dec.matmul(sub("query.weight").t());
  const torch::Tensor alpha = torch::softmax(torch::tanh(q.unsqueeze(2) + keys).matmul(sub("attention_v")), -1);
  const torch::Tensor ctx = alpha.matmul(enc);
  const torch::Tensor z = torch::cat({dec, ctx}, 2).matmul(sub("out.weight").t()) + sub("out.bias");
  const torch::Tensor log_p = torch::log_softmax(torch::tanh(z / o.temperature) * o.tanh_constant, -1);
  const torch::Tensor want = log_p.gather(2, actions.unsqueeze(2)).squeeze(2).sum(1);
  expect_close(got.log_prob, want.detach(), 1e-4, "log-probabilities");
  expect_close(got.entropy, (-(log_p.exp() * log_p).sum(-1).mean()).detach(), 1e-4, "entropy");

  // And their gradients agree, for every parameter the reference uses directly.
  const auto g_got = torch::autograd::grad({got.log_prob.sum()}, {sub("query.weight"), sub("attention_v"), sub("out.weight"),
                                                                    sub("embed_numeric.weight"), sub("device_embedding.weight")});
  const auto g_want = torch::autograd::grad({want.sum()}, {sub("query.weight"), sub("attention_v"), sub("out.weight"),
                                                          sub("embed_numeric.weight"), sub("device_embedding.weight")});
  for (std::size_t i = 0; i < g_got.size(); ++i) expect_close(g_got[i], g_want[i], 1e-4, "gradient " + std::to_string(i));
}

}  // namespace
}  // namespace placer::rl
