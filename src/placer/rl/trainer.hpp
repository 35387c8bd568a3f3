// The training loop every learned placer shares (libtorch; internal to the rl layer): REINFORCE
// with a moving-average baseline, K sampled placements per update, an entropy bonus, gradient-norm
// clipping and Adam, against the simulator Environment. It honours the Budget (samples and/or
// seconds, threads), reports progress to the Observer and stops when it asks, writes the learning
// curve, keeps the best placement that fits, and checkpoints everything that decides the rest of
// the run (policy, optimizer, random state, baseline, best, curve) so that a resumed search ends
// where an uninterrupted one would. A new learned placer is an Agent plus a PlacerInfo.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "placer/algorithms/placer.hpp"
#include "placer/rl/policy.hpp"

namespace placer::rl {

// A policy over placements: samples a batch, then gives the differentiable log-probability of each
// sample of that batch.
class Agent {
 public:
  virtual ~Agent() = default;
  // Every trainable parameter (the optimizer's and the checkpoint's).
  virtual torch::nn::Module& module() = 0;
  // Draws k placements (one device per forward op each) with `rng`; remembers what log_probs needs.
  virtual std::vector<std::vector<DeviceId>> sample(std::size_t k, std::mt19937_64& rng) = 0;
  // Log-probabilities [k] of the last batch's samples and the mean entropy per decision; a policy
  // that decides at two levels (HDP: a group per op, then a device per group) returns the sum of
  // each level's mean.
  virtual LogProbs log_probs() = 0;
  // What the result's note should say about how the agent sees the problem ("" for nothing).
  virtual std::string note() const { return {}; }
  // What a checkpoint must match besides the policy's parameters and the options: how the agent
  // maps its decisions to ops where code, not an option, decides it (ColocRL: its groups). A
  // resume under another signature is refused. "" for nothing to match.
  virtual std::string signature() const { return {}; }
};

struct TrainOptions {
  std::string algo;                // written into checkpoints; a checkpoint of another algo is refused
  std::size_t batch = 4;           // K: placements per update
  double learning_rate = 0.1;
  double entropy_weight = 0.0;
  double baseline_decay = 0.9;
  double clip_norm = 1.0;
  double penalty = 2.0;            // factor on the step time of placements that do not fit
  std::size_t checkpoint_every = 50;  // updates between checkpoints
  std::size_t default_samples = 2000; // when the budget gives neither samples nor seconds
  // Every option the placer was given but checkpoint-every, as it acts ("key=value;...", sorted;
  // numbers in their shortest spelling, values equal to the option's default left out): a
  // checkpoint written under other options is refused on resume, one written with lr=0.10, lr=0.1
  // or no lr resumes under any of them (read_common_options fills it). `config_as_given`: the
  // same, spelled as given, which checkpoints written before 2026-11-25 hold.
  std::string config, config_as_given;
};

// The training hyper-parameters ColocRL and HDP share (HDP section 3 says it uses ColocRL's): Adam
// with a fixed learning rate of 0.1, gradient clipping at norm 1.0, the reference implementation's
// baseline decay 0.9, no entropy bonus; `batch` (K) is each placer's own.
TrainOptions paper_train_options(std::string algo, std::size_t batch);

// Trains `agent` and returns the best placement that fits. Throws Error if none fit. With
// budget.resume, continues from budget.checkpoint_path, which must have been written for the same
// problem (graph, op times, cluster routes, memory limits) and options.
PlacementResult train(const Problem& problem, const Budget& budget, Observer& observer, std::uint64_t seed,
                      const TrainOptions& options, Agent& agent);

// Options every learned placer takes, with their defaults; `read` fills TrainOptions from them.
std::vector<OptionDoc> common_option_docs(const TrainOptions& defaults);
// `docs`: every option the placer takes, with its default (what `config` leaves out).
TrainOptions read_common_options(const PlacerOptions& options, TrainOptions defaults, const std::vector<OptionDoc>& docs);

// One intra-op thread for torch and the BLAS under it, and freed tensor memory kept in the heap:
// what train() runs under (benchmarks call it to measure the same).
void single_threaded_math();

// Timing of the last train() call in this thread, for benchmarks and docs.
struct TrainStats {
  std::size_t samples = 0, updates = 0;
  double wall_s = 0.0, policy_s = 0.0, simulation_s = 0.0, simulation_wait_s = 0.0;
};
TrainStats last_train_stats();

}  // namespace placer::rl

namespace placer::rl {
// Options of the seq2seq placer (ColocRL, HDP): hidden, attention, tanh, temperature.
std::vector<OptionDoc> seq2seq_option_docs(const Seq2SeqOptions& defaults);
Seq2SeqOptions read_seq2seq_options(const PlacerOptions& options, Seq2SeqOptions defaults);
}  // namespace placer::rl

#include <functional>
#include <memory>

namespace placer::rl {
// A Placer that seeds torch (torch::manual_seed(seed), one intra-op thread), builds its agent for
// the problem, and trains it with `options`.
std::unique_ptr<Placer> make_learned_placer(TrainOptions options, std::function<std::unique_ptr<Agent>(const Problem&)> make_agent);
}  // namespace placer::rl
