// ColocRL (Mirhoseini et al., ICML 2017): the forward ops' co-location groups, coarsened to at most
// 256, are read by a seq2seq LSTM with additive attention that emits one device per group. Where
// co-location leaves fewer groups than the cluster has devices (a chain folds into one group), the
// groups are the ops themselves (coarsened likewise), as for local-search and optimal: one group
// would leave nothing to learn.
// Hyper-parameters and their sources: docs/learned-placers.md#colocrl.
#include <fmt/format.h>

#include "placer/algorithms/grouping.hpp"
#include "placer/rl/trainer.hpp"
#include "placer/util/error.hpp"
#include "placer/util/hash.hpp"

namespace placer::rl {
namespace {

class ColocAgent final : public Agent {
 public:
  ColocAgent(const Problem& problem, Seq2SeqOptions so, std::size_t max_groups)
      : grouping_(make_grouping_at_least(problem, "colocation", max_groups, problem.cluster.num_devices(), note_)) {
    const FeatureBuilder features(problem);
    x_ = to_tensors(features.groups(grouping_.group_of, grouping_.num_groups));
    so.types = static_cast<std::int64_t>(features.num_types());
    so.numeric = static_cast<std::int64_t>(features.num_numeric());
    so.devices = static_cast<std::int64_t>(problem.cluster.num_devices());
    net_ = Seq2SeqPlacer(so);
  }
  torch::nn::Module& module() override { return *net_; }
  std::vector<std::vector<DeviceId>> sample(std::size_t k, std::mt19937_64& rng) override {
    encoded_ = net_->encode(x_);
    actions_ = net_->sample(encoded_, static_cast<std::int64_t>(k), rng);
    std::vector<std::vector<DeviceId>> out(k);
    const auto a = actions_.accessor<std::int64_t, 2>();
    std::vector<DeviceId> groups(grouping_.num_groups);
    for (std::size_t i = 0; i < k; ++i) {
      for (std::size_t g = 0; g < groups.size(); ++g) groups[g] = static_cast<DeviceId>(a[static_cast<std::int64_t>(i)][static_cast<std::int64_t>(g)]);
      out[i] = expand_groups(grouping_, groups);
    }
    return out;
  }
  LogProbs log_probs() override { return net_->log_probs(encoded_, actions_); }
  std::string note() const override { return note_; }
  // The groups (how many, and an FNV-1a hash of each op's group): a checkpoint's decisions mean
  // nothing under another grouping.
  std::string signature() const override {
    Fnv1a h;
    for (std::uint32_t g : grouping_.group_of) h.u64(g);
    return fmt::format("{} groups, {:016x}", grouping_.num_groups, h.value());
  }

 private:
  std::string note_;  // before grouping_: its initialiser writes it
  Grouping grouping_;
  FeatureTensors x_;
  Seq2SeqPlacer net_{nullptr};
  Encoded encoded_;
  torch::Tensor actions_;
};

TrainOptions defaults() { return paper_train_options("colocrl", 8); }  // K = 8: ours (docs/learned-placers.md#colocrl)

}  // namespace

PlacerInfo colocrl_info() {
  PlacerInfo info;
  info.name = "colocrl";
  info.family = "learned";
  info.summary = "ColocRL (Mirhoseini et al. 2017): seq2seq LSTM with attention over co-location groups, REINFORCE";
  info.options = common_option_docs(defaults());
  for (auto& d : seq2seq_option_docs(Seq2SeqOptions{})) info.options.push_back(d);
  info.options.push_back({"groups", "256", "at most this many co-location groups (coarsened)"});
  info.make = [docs = info.options](const PlacerOptions& opts) {
    const TrainOptions train = read_common_options(opts, defaults(), docs);
    const Seq2SeqOptions so = read_seq2seq_options(opts, Seq2SeqOptions{});
    const std::int64_t groups = opts.get_int("groups", 256);
    if (groups < 1) throw Error("option groups must be at least 1");
    return make_learned_placer(train, [so, groups](const Problem& p) -> std::unique_ptr<Agent> {
      return std::make_unique<ColocAgent>(p, so, static_cast<std::size_t>(groups));
    });
  };
  return info;
}

}  // namespace placer::rl
