// Simulator throughput: simulated ops per second (items/s) on one core, for the shared models'
// training graphs (and nmt4's forward pass, the acceptance check's case) on k80x4, under a single-
// GPU placement and under random op-level placements (the worst case: most tensors cross devices).
//   build/release/bench_simulator --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>

#include "placer/io/model.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/simulator.hpp"

namespace {

using namespace placer;

struct Setup {
  Graph graph;
  Cluster cluster;
  CostTable costs;
};

Setup& setup(const std::string& model, Mode mode) {
  static std::map<std::string, std::unique_ptr<Setup>> cache;
  const std::string key = model + (mode == Mode::training ? "/train" : "/infer");
  auto& slot = cache[key];
  if (!slot) {
    ModelOptions options;
    options.mode = mode;
    Graph g = load_model(std::string(PLACER_SHARED_MODELS) + "/" + model + ".onnx", options);
    Cluster c = cluster_preset("k80x4");
    CostTable costs(g, c, CostModel::defaults());
    slot = std::make_unique<Setup>(Setup{std::move(g), std::move(c), std::move(costs)});
  }
  return *slot;
}

void run(benchmark::State& state, const std::string& model, Mode mode, bool random) {
  Setup& s = setup(model, mode);
  Simulator sim(s.graph, s.cluster, s.costs);
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<DeviceId> pick(0, static_cast<DeviceId>(s.cluster.num_devices() - 1));
  std::vector<std::vector<DeviceId>> placements(random ? 64 : 1);
  std::vector<DeviceId> fwd(s.graph.num_forward_ops(), 1);
  for (auto& p : placements) {
    if (random)
      for (auto& d : fwd) d = pick(rng);
    p = expand_placement(s.graph, fwd);
  }
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sim.simulate(placements[i++ % placements.size()]).step_time_s);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * s.graph.num_ops()));
  state.counters["ops"] = static_cast<double>(s.graph.num_ops());
  state.counters["folded"] = static_cast<double>(s.graph.num_folded_ops());
}

void register_all() {
  for (const char* model : {"inception_v3", "resnet50", "rnnlm", "nmt", "nmt4", "bert_base", "gpt2", "nasnet_large"}) {
    benchmark::RegisterBenchmark((std::string("train/") + model + "/one_gpu").c_str(),
                                 [model](benchmark::State& st) { run(st, model, Mode::training, false); })
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("train/") + model + "/random").c_str(),
                                 [model](benchmark::State& st) { run(st, model, Mode::training, true); })
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("infer/nmt4/random", [](benchmark::State& st) { run(st, "nmt4", Mode::inference, true); })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("infer/nmt4/one_gpu", [](benchmark::State& st) { run(st, "nmt4", Mode::inference, false); })
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
