// Policy networks of the learned placers (libtorch; internal to the rl layer):
// - Seq2SeqPlacer (ColocRL, and HDP's placer): reads one row of features per group, encodes them
//   with a bidirectional LSTM and decodes one device per group with an LSTM and content-based
//   (Bahdanau, additive) attention over every encoder output; logits are C * tanh(z / T) (tanh
//   constant C, softmax temperature T).
// - Grouper (HDP): a feed-forward network from op features to a softmax over a fixed number of groups.
// Sampling runs step by step without gradients (sample()); learning recomputes the log-probabilities
// of the sampled devices in one teacher-forced pass (log_probs()): the decoder's inputs are known
// then, so the LSTM runs as one autograd node (lstm_sequence) and the attention of every step is one
// batched, chunked operation. Whatever depends on the groups only (attention keys, the decoder's
// input projection of every encoder output, the logits' context table) is computed once per batch
// by encode(). Not thread-safe; single intra-op thread recommended (torch::set_num_threads(1)).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <vector>

#include "placer/rl/features.hpp"

namespace placer::rl {

// Features as tensors: type counts [rows, types] and numeric [rows, numeric] (float32).
struct FeatureTensors {
  torch::Tensor types, numeric;
};
FeatureTensors to_tensors(const Features& f);

// Additive attention scores s[b,t,g] = v . tanh(q[b,t] + k[g]) for q [B,T,A], k [G,A], v [A], with
// a backward pass that recomputes tanh chunk by chunk instead of storing B*T*G*A activations.
torch::Tensor additive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// An LSTM layer (gate order i, f, g, o, as torch::nn::LSTM) over a sequence, from its input
// projection xw [T, B, 4H] (x W_ih^T + b_ih + b_hh), initial state h0, c0 [B, H] and recurrent
// weights w_hh [4H, H]. Returns {outputs [T, B, H], final cell state [B, H]} (the final hidden
// state is outputs[T - 1]). One autograd node: the backward pass is backpropagation through time
// written out, one matmul per step. float32 only.
std::vector<torch::Tensor> lstm_sequence(const torch::Tensor& xw, const torch::Tensor& h0, const torch::Tensor& c0, const torch::Tensor& w_hh);

// Draws one index from each row of `probs` [B, N] with `rng` (inverse CDF on a uniform double).
std::vector<std::int64_t> sample_rows(const torch::Tensor& probs, std::mt19937_64& rng);

struct Seq2SeqOptions {
  std::int64_t types = 0, numeric = 0, devices = 0;
  std::int64_t hidden = 256;     // encoder (both directions together) and decoder LSTM size
  std::int64_t attention = 64;   // additive attention size
  std::int64_t device_embedding = 32;
  double temperature = 10.0, tanh_constant = 5.0;
};

// What the decoder needs of one sequence of groups, computed once per batch (differentiable).
struct Encoded {
  torch::Tensor enc;          // [G, H] encoder outputs
  torch::Tensor keys;         // [G, A] attention keys (W_k enc)
  torch::Tensor group_in;     // [G, 4H] decoder input projection of enc[t], with the decoder's biases
  torch::Tensor device_in;    // [D + 1, 4H] decoder input projection of each device's embedding (D: "go")
  torch::Tensor context_out;  // [G, D] output layer's context columns times enc (logits = ... + alpha . this)
  torch::Tensor h0, c0;       // [1, H] decoder initial state
};

struct LogProbs {
  torch::Tensor log_prob;  // [K] log-probability of each sample (differentiable)
  torch::Tensor entropy;   // scalar: mean entropy per decision (differentiable)
};

class Seq2SeqPlacerImpl : public torch::nn::Module {
 public:
  explicit Seq2SeqPlacerImpl(const Seq2SeqOptions& options);
  Encoded encode(const FeatureTensors& x);
  // k placements (device per group), no gradient. [k, G] int64.
  torch::Tensor sample(const Encoded& e, std::int64_t k, std::mt19937_64& rng);
  LogProbs log_probs(const Encoded& e, const torch::Tensor& actions);
  const Seq2SeqOptions& options() const { return options_; }

 private:
  torch::Tensor squash(const torch::Tensor& z) const;  // C tanh(z / T)
  Seq2SeqOptions options_;
  torch::nn::Linear embed_types_{nullptr}, embed_numeric_{nullptr};
  torch::nn::LSTM encoder_{nullptr}, decoder_{nullptr};
  torch::nn::Embedding device_embedding_{nullptr};
  torch::nn::Linear query_{nullptr}, key_{nullptr}, out_{nullptr};
  torch::Tensor attention_v_;
};
TORCH_MODULE(Seq2SeqPlacer);

struct GrouperOptions {
  std::int64_t types = 0, numeric = 0, groups = 0;
  std::int64_t hidden = 64;
};

class GrouperImpl : public torch::nn::Module {
 public:
  explicit GrouperImpl(const GrouperOptions& options);
  torch::Tensor logits(const FeatureTensors& ops);  // [ops, groups]

 private:
  torch::nn::Linear embed_types_{nullptr}, embed_numeric_{nullptr}, out_{nullptr};
};
TORCH_MODULE(Grouper);

}  // namespace placer::rl
