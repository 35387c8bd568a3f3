// Differential tests: the fast Simulator against the plain reference implementation of the same
// rules (reference_simulator.hpp), on random graphs, clusters and placements built to produce
// ties, views, set-up values, several streams and shared links, and on the shared models' steps on
// the built-in presets. Every figure must agree exactly: a change that makes the simulator faster
// must not change a single schedule. PLACER_REFERENCE_TRIALS=N runs a longer campaign.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "placer/graph/training.hpp"
#include "placer/io/model.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/simulator.hpp"
#include "placer/util/error.hpp"
#include "sim/reference_simulator.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using test::reference_simulate;
using test::RefResult;

// Simulates `devices` with both implementations and compares every figure, the trace and the
// critical path. `reused`: a Simulator that has run other placements before (its scratch must not
// carry anything over), else a new one.
void expect_same(const Graph& g, const Cluster& c, const CostTable& costs, const std::vector<DeviceId>& devices,
                 Simulator* reused = nullptr, const SimOptions& options = {}) {
  const RefResult ref = reference_simulate(g, c, costs, devices, options);
  std::optional<Simulator> fresh;
  Simulator& sim = reused ? *reused : fresh.emplace(g, c, costs, options);
  const SimResult fast = sim.simulate(devices);
  const std::size_t nd = c.num_devices();

  ASSERT_EQ(fast.step_time_s, ref.step_time_s);
  bool fits = true;
  for (DeviceId d = 0; d < nd; ++d) {
    SCOPED_TRACE(c.device(d).name);
    EXPECT_EQ(fast.devices[d].busy_s, ref.busy_s[d]);
    EXPECT_EQ(fast.devices[d].ops, ref.ops[d]);
    EXPECT_EQ(fast.devices[d].static_memory_bytes, ref.static_bytes[d]);
    EXPECT_EQ(fast.devices[d].peak_memory_bytes, ref.peak_bytes[d]);
    fits = fits && ref.peak_bytes[d] <= fast.devices[d].capacity_bytes;
  }
  EXPECT_EQ(fast.fits, fits);
  EXPECT_EQ(fast.channel_bytes, ref.channel_bytes);
  EXPECT_EQ(fast.transfers, ref.transfers.size());
  EXPECT_EQ(fast.transfer_bytes, ref.transfer_bytes);

  // The traced run: every op at the same times, every transfer in the same order.
  std::vector<TraceEvent> trace;
  const SimResult& traced = sim.simulate(devices, trace);
  EXPECT_EQ(traced.step_time_s, ref.step_time_s);
  std::size_t ops = 0, k = 0;
  std::vector<std::uint64_t> memory_seen(fast.devices.size(), 0);
  for (const TraceEvent& e : trace) {
    if (e.kind == TraceEvent::Kind::op) {
      ++ops;
      ASSERT_LT(e.id, ref.op_times.size());
      const auto& t = ref.op_times[e.id];
      EXPECT_TRUE(t.ran) << g.op_name(e.id);
      EXPECT_EQ(e.device, devices[e.id]);
      EXPECT_EQ(e.start_s, t.start_s) << g.op_name(e.id);
      EXPECT_EQ(e.end_s, t.end_s) << g.op_name(e.id);
    } else if (e.kind == TraceEvent::Kind::memory) {
      ASSERT_LT(e.device, fast.devices.size());
      memory_seen[e.device] = std::max(memory_seen[e.device], e.bytes);
    } else {
      ASSERT_LT(k, ref.transfers.size());
      const auto& t = ref.transfers[k++];
      EXPECT_EQ(e.id, t.tensor);
      EXPECT_EQ(e.device, t.from);
      EXPECT_EQ(e.to, t.to);
      EXPECT_EQ(e.start_s, t.start_s) << g.tensor_name(t.tensor);
      EXPECT_EQ(e.end_s, t.end_s) << g.tensor_name(t.tensor);
    }
  }
  EXPECT_EQ(k, ref.transfers.size());
  EXPECT_EQ(ops, g.num_ops() - g.num_folded_ops());
  // The memory counters never pass the peak, nor fall below static memory. (They reach it but for
  // instants within one event, an op of no time holding its outputs before it frees its inputs:
  // random graphs of such ops have devices whose every activation lives only within one event;
  // SimulateCli.TraceIsAChromeTrace checks a model's counters reach its peaks.)
  for (std::size_t d = 0; d < memory_seen.size(); ++d) {
    EXPECT_LE(memory_seen[d], traced.devices[d].peak_memory_bytes);
    EXPECT_GE(memory_seen[d], traced.devices[d].static_memory_bytes);
  }

  // The critical path's ops ran when the reference says they did.
  for (const PathStep& s : sim.critical_path())
    if (s.kind == PathStep::Kind::op) {
      EXPECT_EQ(s.start_s, ref.op_times[s.id].start_s);
      EXPECT_EQ(s.end_s, ref.op_times[s.id].end_s);
    }
}

std::string named(const char* prefix, std::size_t i) { return prefix + std::to_string(i); }

int trials(int fallback) { return static_cast<int>(test::env_or("PLACER_REFERENCE_TRIALS", fallback)); }

// A cluster of 2-6 devices (CPUs and GPUs, 1-3 streams each) on 1-3 switches in a chain, some GPU
// pairs also joined directly; latencies and bandwidths from small sets. `dyadic`: powers of two
// (bandwidths in bytes/s, latencies in seconds, zero latency too), so that with dyadic op times and
// sizes every time is exact and arrivals tie with op finishes.
Cluster random_cluster(std::mt19937_64& rng, bool dyadic) {
  const std::size_t nd = 2 + rng() % 5, ns = 1 + rng() % 3;
  const double bandwidths[] = {dyadic ? 0x1p22 : 1e9, dyadic ? 0x1p23 : 2e9, dyadic ? 0x1p24 : 4e9};
  const double latencies[] = {dyadic ? 0.0 : 1e-6, dyadic ? 0x1p-12 : 2e-6, dyadic ? 0x1p-11 : 5e-6};
  auto pick_bw = [&] { return bandwidths[rng() % 3]; };
  std::vector<Device> devices;
  std::vector<std::string> switches;
  std::vector<Link> links;
  for (std::size_t s = 0; s < ns; ++s) {
    switches.push_back(named("sw", s));
    if (s > 0) links.push_back({.name = named("up", s), .a = named("sw", s - 1), .b = named("sw", s), .bandwidth_ab_bytes_per_s = pick_bw(),
                                .bandwidth_ba_bytes_per_s = pick_bw(), .latency_s = latencies[rng() % 3]});
  }
  for (std::size_t d = 0; d < nd; ++d) {
    const bool cpu = d == 0 && rng() % 2;
    const std::string name = cpu ? "cpu:0" : named("gpu:", d);
    devices.push_back(Device{.name = name, .kind = cpu ? DeviceKind::cpu : DeviceKind::gpu, .model = "test", .peak_flops = 1e12,
                             .memory_bandwidth_bytes_per_s = 1e11, .memory_bytes = 1'000'000 + rng() % 20'000'000,
                             .op_overhead_s = 0.0, .streams = static_cast<int>(1 + rng() % 3)});
    links.push_back({.name = named("l", d), .a = name, .b = switches[rng() % ns], .bandwidth_ab_bytes_per_s = pick_bw(),
                     .bandwidth_ba_bytes_per_s = pick_bw(), .latency_s = latencies[rng() % 3]});
  }
  for (std::size_t d = 1; d + 1 < nd; d += 2)
    if (rng() % 3 == 0)
      links.push_back({.name = named("nvlink", d), .a = devices[d].name, .b = devices[d + 1].name, .bandwidth_ab_bytes_per_s = 2e10,
                       .bandwidth_ba_bytes_per_s = 2e10, .latency_s = 1e-6});
  return Cluster::build("random", std::move(devices), std::move(switches), std::move(links));
}

// A random graph of `n` ops reading data, parameters and constants: timed ops (one or two inputs,
// one or two outputs; times from a small set, some zero; `dyadic`: sizes and times powers of two), views (Reshape) and chains of them,
// kernels with declared views of their input (AddGrad),
// zero-time ops that are not views, Shape ops (set-up values) and what reads them, graph outputs
// (some of them views).
struct RandomGraph {
  Graph g;
  Profile profile;
};
RandomGraph random_graph(std::mt19937_64& rng, std::size_t n, bool dyadic) {
  GraphBuilder b("random");
  Profile profile;
  std::vector<TensorId> values, setup;
  auto tensor = [&](const std::string& name, TensorKind kind = TensorKind::activation) {
    const std::int64_t sizes[] = {250, 1000, 4000, 62'500}, dyadic_sizes[] = {256, 1024, 4096, 65'536};  // float32 elements
    if (dyadic) return b.add_tensor(name, {dyadic_sizes[rng() % 4]}, DType::f32, kind);
    return b.add_tensor(name, {sizes[rng() % 4] + static_cast<std::int64_t>(rng() % 3)}, DType::f32, kind);
  };
  for (int i = 0; i < 2; ++i) values.push_back(tensor(named("x", i), TensorKind::data));
  for (int i = 0; i < 4; ++i) values.push_back(tensor(named("w", i), TensorKind::parameter));
  setup.push_back(tensor("k", TensorKind::constant));
  const double times[] = {0.0, dyadic ? 0x1p-12 : 1e-4, dyadic ? 0x1p-12 : 1e-4, dyadic ? 0x1p-11 : 2e-4, dyadic ? 0x1p-10 : 5e-4,
                         dyadic ? 0x3p-10 : 1e-3};
  auto any = [&](const std::vector<TensorId>& from) { return from[rng() % from.size()]; };
  // Recent values more often, so that chains form.
  auto recent = [&] { return rng() % 2 ? values[values.size() - 1 - rng() % std::min<std::size_t>(values.size(), 4)] : any(values); };
  for (std::size_t i = 0; i < n; ++i) {
    const std::string name = named("op", i);
    OpSpec spec{.name = name, .type = "Relu"};
    spec.work.op_class = OpClass::elementwise;
    const unsigned kind = rng() % 10;
    if (kind < 2) {  // a view of a recent value
      spec.type = "Reshape";
      spec.work.op_class = OpClass::alias;
      spec.inputs = {recent()};
      if (rng() % 2) spec.inputs.push_back(any(setup));
    } else if (kind == 2) {  // a set-up value: the shape of something
      spec.type = "Shape";
      spec.work.op_class = OpClass::alias;
      spec.inputs = {recent()};
    } else if (kind == 3) {  // no kernel, two outputs: takes no time but is no view
      spec.type = "Split";
      spec.work.op_class = OpClass::alias;
      spec.inputs = {recent()};
      spec.outputs.push_back(tensor(name + ".b"));
    } else if (kind == 4 && rng() % 2) {  // a kernel with declared views of its input (a gradient passed through)
      spec.type = "AddGrad";
      spec.inputs = {recent()};
      const auto shape = b.tensor_shape(spec.inputs[0]);
      spec.outputs.push_back(b.add_tensor(name + ".view", {shape.begin(), shape.end()}, DType::f32, TensorKind::activation));
      if (rng() % 2) spec.outputs.push_back(tensor(name + ".b"));
      spec.view_outputs = rng() % 2 ? 3u : 2u;  // the second output, and sometimes the first
      for (DeviceKind k : {DeviceKind::cpu, DeviceKind::gpu}) profile.set_by_name(k, name, times[rng() % 6] * (k == DeviceKind::cpu ? 4 : 1));
    } else {
      spec.inputs = {recent()};
      if (rng() % 2) spec.inputs.push_back(rng() % 4 ? any(values) : spec.inputs[0]);  // sometimes the same tensor twice
      if (rng() % 4 == 0) spec.inputs.push_back(any(setup));
      if (rng() % 5 == 0) spec.outputs.push_back(tensor(name + ".b"));
      spec.type = spec.inputs.size() == 1 ? "Relu" : spec.inputs.size() == 2 ? "Add" : "Sum";
      for (DeviceKind k : {DeviceKind::cpu, DeviceKind::gpu}) profile.set_by_name(k, name, times[rng() % 6] * (k == DeviceKind::cpu ? 4 : 1));
    }
    if (spec.type == "Reshape") {  // a view has its input's bytes (an alias of another size is no view)
      const auto shape = b.tensor_shape(spec.inputs[0]);
      spec.outputs.insert(spec.outputs.begin(), b.add_tensor(name + ".out", {shape.begin(), shape.end()}, DType::f32, TensorKind::activation));
    } else if (spec.type == "AddGrad") {  // the first output a view too, or a tensor of its own
      const auto shape = b.tensor_shape(spec.inputs[0]);
      spec.outputs.insert(spec.outputs.begin(), spec.view_outputs & 1u ? b.add_tensor(name + ".out", {shape.begin(), shape.end()}, DType::f32,
                                                                                           TensorKind::activation)
                                                                         : tensor(name + ".out"));
    } else {
      spec.outputs.insert(spec.outputs.begin(), tensor(name + ".out"));
    }
    const bool shape = spec.type == "Shape";
    const std::vector<TensorId> outs = spec.outputs;
    b.add_op(std::move(spec));
    for (TensorId t : outs) (shape ? setup : values).push_back(t);
  }
  std::vector<TensorId> outputs;
  for (std::size_t i = 0; i < 3; ++i) outputs.push_back(values[values.size() - 1 - i * 3 % values.size()]);
  // And one from early in the graph, which later ops read (often on other devices).
  outputs.push_back(values[rng() % (values.size() / 2 + 1)]);
  std::sort(outputs.begin(), outputs.end());
  outputs.erase(std::unique(outputs.begin(), outputs.end()), outputs.end());
  for (TensorId t : outputs) b.mark_output(t);
  return {std::move(b).build(), std::move(profile)};
}

TEST(SimulatorReference, RandomGraphsClustersAndPlacements) {
  std::mt19937_64 rng(2026);
  const int n = trials(300);
  for (int trial = 0; trial < n; ++trial) {
    SCOPED_TRACE(named("trial ", static_cast<std::size_t>(trial)));
    const bool dyadic = trial % 2;
    RandomGraph rg = random_graph(rng, 10 + rng() % 60, dyadic);
    const Cluster c = random_cluster(rng, dyadic);
    const CostTable costs(rg.g, c, CostModel::defaults(), &rg.profile);
    std::vector<DeviceId> devices(rg.g.num_ops());
    for (auto& d : devices) d = static_cast<DeviceId>(rng() % c.num_devices());
    expect_same(rg.g, c, costs, devices);
    if (::testing::Test::HasFailure()) return;  // one counterexample is enough to read
  }
}

TEST(SimulatorReference, RandomTrainingSteps) {
  // The same random graphs made into training steps: gradients, updates, optimizer state.
  std::mt19937_64 rng(77);
  const int n = trials(100);
  int derived = 0;
  for (int trial = 0; trial < n; ++trial) {
    SCOPED_TRACE(named("trial ", static_cast<std::size_t>(trial)));
    const bool dyadic = trial % 4 < 2;
    RandomGraph rg = random_graph(rng, 10 + rng() % 40, dyadic);
    Graph step;
    try {
      step = derive_training_step(rg.g, trial % 2 ? Optimizer::adam : Optimizer::sgd);
    } catch (const Error&) {
      continue;  // e.g. no output carries a gradient
    }
    ++derived;
    const Cluster c = random_cluster(rng, dyadic);
    const CostTable costs(step, c, CostModel::defaults(), &rg.profile);
    std::vector<DeviceId> fwd(step.num_forward_ops());
    for (auto& d : fwd) d = static_cast<DeviceId>(rng() % c.num_devices());
    // Every third: partial gradients summed out of place (libtorch 1.x).
    expect_same(step, c, costs, expand_placement(step, fwd), nullptr, SimOptions{.gradient_sums_out_of_place = trial % 3 == 0});
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(derived, n / 4);
}

// A preset with every device's streams set to `streams`.
Cluster with_streams(const Cluster& c, int streams) {
  std::vector<Device> devices(c.devices().begin(), c.devices().end());
  for (Device& d : devices) d.streams = streams;
  return Cluster::build(c.name(), std::move(devices), {c.switches().begin(), c.switches().end()}, {c.links().begin(), c.links().end()});
}

TEST(SimulatorReference, SharedModelsOnPresets) {
  if (!test::have_shared_models()) GTEST_SKIP() << "shared models not found";
  struct Case {
    const char* model;
    Mode mode;
    Optimizer optimizer;
    const char* cluster;
    int streams;
    bool sums_out_of_place = false;
  };
  const Case cases[] = {
      {"inception_v3", Mode::training, Optimizer::sgd, "k80x4", 1},  {"resnet50", Mode::training, Optimizer::adam, "p100x4", 1},
      {"rnnlm", Mode::training, Optimizer::momentum, "k80x8", 1, true},    {"nmt4", Mode::inference, Optimizer::sgd, "k80x4", 1},
      {"bert_base", Mode::training, Optimizer::adam, "dgx-h100", 1}, {"gpt2", Mode::inference, Optimizer::sgd, "h100-box", 2},
      {"nasnet_large", Mode::training, Optimizer::sgd, "k80x4", 3},  {"nmt", Mode::training, Optimizer::sgd, "p100x8", 2, true},
  };
  std::mt19937_64 rng(5);
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.model) + " on " + k.cluster);
    ModelOptions options;
    options.mode = k.mode;
    options.optimizer = k.optimizer;
    const Graph g = load_model(test::shared_model(k.model), options);
    const Cluster c = with_streams(cluster_preset(k.cluster), k.streams);
    const CostTable costs(g, c, CostModel::defaults());
    const std::size_t nf = g.num_forward_ops(), nd = c.num_devices();
    std::vector<DeviceId> fwd(nf);
    const SimOptions sim_options{.gradient_sums_out_of_place = k.sums_out_of_place};
    Simulator reused(g, c, costs, sim_options);  // one for all placements of the model, as a search uses it
    for (int placement = 0; placement < 4; ++placement) {
      SCOPED_TRACE(named("placement ", static_cast<std::size_t>(placement)));
      for (std::size_t o = 0; o < nf; ++o)
        switch (placement) {
          case 0: fwd[o] = static_cast<DeviceId>(rng() % nd); break;                  // every op anywhere
          case 1: fwd[o] = static_cast<DeviceId>(o * nd / nf); break;                 // contiguous blocks
          case 2: fwd[o] = rng() % 10 ? 1 % nd : static_cast<DeviceId>(rng() % nd); break;  // one device, a few moved
          default: fwd[o] = static_cast<DeviceId>((o / 50 + rng() % 2) % nd); break;  // chunks with ragged edges
        }
      expect_same(g, c, costs, expand_placement(g, fwd), &reused, sim_options);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace placer
