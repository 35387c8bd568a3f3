// HDP, the hierarchical planner (Mirhoseini et al., ICLR 2018): a feed-forward Grouper samples a
// group for every forward op (a softmax over min(256, 20 x devices) groups); the groups, embedded
// from their ops' features, are placed by the same seq2seq placer as ColocRL; both are trained
// together with REINFORCE on the same reward (the gradient flows through both log-probabilities).
// Hyper-parameters and their sources: docs/learned-placers.md#hdp.
#include "placer/rl/trainer.hpp"
#include "placer/util/error.hpp"

namespace placer::rl {
namespace {

class HdpModel : public torch::nn::Module {
 public:
  HdpModel(const GrouperOptions& go, const Seq2SeqOptions& so) {
    grouper = register_module("grouper", Grouper(go));
    placer = register_module("placer", Seq2SeqPlacer(so));
  }
  Grouper grouper{nullptr};
  Seq2SeqPlacer placer{nullptr};
};

class HdpAgent final : public Agent {
 public:
  HdpAgent(const Problem& problem, Seq2SeqOptions so, GrouperOptions go, std::size_t groups) : features_(problem), groups_(groups) {
    ops_ = to_tensors(features_.ops());
    so.types = go.types = static_cast<std::int64_t>(features_.num_types());
    so.numeric = go.numeric = static_cast<std::int64_t>(features_.num_numeric());
    so.devices = static_cast<std::int64_t>(problem.cluster.num_devices());
    go.groups = static_cast<std::int64_t>(groups);
    model_ = std::make_shared<HdpModel>(go, so);
  }
  torch::nn::Module& module() override { return *model_; }
  std::vector<std::vector<DeviceId>> sample(std::size_t k, std::mt19937_64& rng) override {
    // m = 1 grouping per update (the paper's m), shared by the k placements.
    const torch::Tensor log_p = torch::log_softmax(model_->grouper->logits(ops_), 1);  // [ops, groups]
    const std::vector<std::int64_t> drawn = sample_rows(log_p.detach().exp(), rng);
    const torch::Tensor index = torch::tensor(drawn, torch::kInt64).unsqueeze(1);
    group_log_prob_ = log_p.gather(1, index).sum();
    group_entropy_ = -(log_p.exp() * log_p).sum(1).mean();
    group_of_.assign(drawn.begin(), drawn.end());
    encoded_ = model_->placer->encode(to_tensors(features_.groups(group_of_, groups_)));
    actions_ = model_->placer->sample(encoded_, static_cast<std::int64_t>(k), rng);
    const auto a = actions_.accessor<std::int64_t, 2>();
    std::vector<std::vector<DeviceId>> out(k, std::vector<DeviceId>(group_of_.size()));
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t o = 0; o < group_of_.size(); ++o) out[i][o] = static_cast<DeviceId>(a[static_cast<std::int64_t>(i)][group_of_[o]]);
    return out;
  }
  LogProbs log_probs() override {
    LogProbs lp = model_->placer->log_probs(encoded_, actions_);
    lp.log_prob = lp.log_prob + group_log_prob_;
    lp.entropy = lp.entropy + group_entropy_;
    return lp;
  }

 private:
  FeatureBuilder features_;
  std::size_t groups_;
  FeatureTensors ops_;
  std::shared_ptr<HdpModel> model_;
  std::vector<std::uint32_t> group_of_;
  torch::Tensor group_log_prob_, group_entropy_;
  Encoded encoded_;
  torch::Tensor actions_;
};

TrainOptions defaults() { return paper_train_options("hdp", 4); }  // HDP: k = 4 placer samples per grouper sample (m = 1)

}  // namespace

PlacerInfo hdp_info() {
  PlacerInfo info;
  info.name = "hdp";
  info.family = "learned";
  info.summary = "HDP (Mirhoseini et al. 2018): feed-forward grouper + seq2seq placer trained jointly, REINFORCE";
  info.options = common_option_docs(defaults());
  for (auto& d : seq2seq_option_docs(Seq2SeqOptions{})) info.options.push_back(d);
  info.options.push_back({"groups", "0", "groups of the grouper's softmax (0: min(256, 20 x devices); at most 256, or the graph's forward ops where more)"});
  info.options.push_back({"grouper-hidden", "64", "hidden size of the feed-forward grouper (1 to 8192)"});
  info.make = [docs = info.options](const PlacerOptions& opts) {
    const TrainOptions train = read_common_options(opts, defaults(), docs);
    const Seq2SeqOptions so = read_seq2seq_options(opts, Seq2SeqOptions{});
    GrouperOptions go;
    go.hidden = opts.get_int("grouper-hidden", go.hidden);
    if (go.hidden < 1 || go.hidden > 8192) throw Error("option grouper-hidden must be from 1 to 8192");
    const std::int64_t groups = opts.get_int("groups", 0);
    if (groups < 0) throw Error("option groups must be >= 0");
    return make_learned_placer(train, [so, go, groups](const Problem& p) -> std::unique_ptr<Agent> {
      // Up to 256 groups as the default may be (some empty on a small graph); more than that only
      // up to the graph's forward ops (5000 groups took 2 GB for a 12-op model).
      const std::size_t forward = p.graph.num_forward_ops();
      if (static_cast<std::uint64_t>(groups) > std::max<std::size_t>(256, forward))
        throw Error("option groups is " + std::to_string(groups) + ", more than 256 and than the graph's " + std::to_string(forward) +
                    " forward ops (each group's softmax entry, embedding and decoder step would be for nothing)");
      const std::size_t n = groups > 0 ? static_cast<std::size_t>(groups) : std::min<std::size_t>(256, 20 * p.cluster.num_devices());
      return std::make_unique<HdpAgent>(p, so, go, n);
    });
  };
  return info;
}

}  // namespace placer::rl
