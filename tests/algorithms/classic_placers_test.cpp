// The classic placers on hand-drawn graphs with known placements: Accelerate's memory maps
// (sequential, balanced), the human expert, and the METIS / Scotch partitioners; then every one of
// them on real models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "algorithms/small_problems.hpp"
#include "placer/algorithms/placer.hpp"
#include "placer/io/model.hpp"
#include "placer/sim/simulator.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

// "prefix" followed by the number (appended: GCC 12 warns, wrongly, about "literal" + std::string).
std::string name_of(const char* prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

// cpu:0 (id 0) and n GPUs (ids 1..n) around one switch, like the k80 presets.
Cluster cpu_and_gpus(int n, std::uint64_t gpu_memory, std::uint64_t cpu_memory = 1ull << 40, std::vector<double> gpu_flops = {},
                     double cpu_flops = 1e11, std::vector<std::uint64_t> gpu_memories = {}) {
  std::vector<Device> devices{Device{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = cpu_flops,
                                     .memory_bandwidth_bytes_per_s = 1e11, .memory_bytes = cpu_memory, .op_overhead_s = 0.0}};
  for (int i = 0; i < n; ++i)
    devices.push_back(Device{.name = name_of("gpu:", i), .kind = DeviceKind::gpu, .model = "t",
                             .peak_flops = gpu_flops.empty() ? 1e12 : gpu_flops[i], .memory_bandwidth_bytes_per_s = 1e12,
                             .memory_bytes = gpu_memories.empty() ? gpu_memory : gpu_memories[i], .op_overhead_s = 0.0});
  std::vector<Link> links;
  for (const auto& d : devices)
    links.push_back(Link{.a = d.name, .b = "sw", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 1e-6});
  return Cluster::build("test", std::move(devices), {"sw"}, std::move(links));
}

constexpr DeviceId kCpu = 0, kGpu0 = 1, kGpu1 = 2, kGpu2 = 3;

// A graph drawn op by op: u8 tensors sized in bytes; op times by name (GPUs; the CPU 10x slower),
// or, with seconds < 0, priced by the roofline from `flops`.
struct Sketch {
  GraphBuilder b{"sketch"};
  Profile profile;
  TensorId tensor(const std::string& name, std::int64_t bytes, TensorKind kind = TensorKind::activation) {
    return b.add_tensor(name, {bytes}, DType::u8, kind);
  }
  OpId op(const std::string& name, const std::string& type, std::vector<TensorId> in, std::vector<TensorId> out, double seconds,
          std::string module = "", std::uint32_t call = 0, double flops = 1e6) {
    if (seconds >= 0) {
      profile.set_by_name(DeviceKind::gpu, name, seconds);
      profile.set_by_name(DeviceKind::cpu, name, 10 * seconds);
    }
    OpSpec spec{.name = name, .type = type, .inputs = std::move(in), .outputs = std::move(out), .module = std::move(module), .call = call};
    spec.work = OpWork{.flops = flops, .bytes_read = 0, .bytes_written = 0, .op_class = OpClass::matmul};
    return b.add_op(std::move(spec));
  }
};

struct Priced {
  Graph g;
  Cluster c;
  CostTable costs;
  Priced(Sketch&& s, Cluster cluster) : g(std::move(s.b).build()), c(std::move(cluster)), costs(g, c, CostModel::defaults(), &s.profile) {}
  Problem problem(SimOptions sim = {}) const { return Problem{g, c, costs, std::move(sim)}; }
  DeviceId at(const std::string& op, const PlacementResult& r) const { return r.forward_devices.at(g.find_op(op)); }
};

PlacementResult run(const std::string& algo, const Problem& p, std::map<std::string, std::string> options = {}, std::uint64_t seed = 1) {
  NullObserver quiet;
  return make_placer(algo, PlacerOptions(std::move(options)))->place(p, Budget{}, quiet, seed);
}

// Modules "m0".."m{n-1}" in a chain, one MatMul each with a parameter of `param_bytes`; 10-byte
// activations, and a 10-byte data input read by m0.
Sketch module_chain(int n, std::int64_t param_bytes, std::vector<double> seconds = {}) {
  Sketch s;
  TensorId prev = s.tensor("x", 10, TensorKind::data);
  for (int i = 0; i < n; ++i) {
    const std::string m = name_of("m", i);
    TensorId w = s.tensor(m + ".w", param_bytes, TensorKind::parameter), out = s.tensor(m + ".out", 10);
    s.op(m + "/MatMul", "MatMul", {prev, w}, {out}, seconds.empty() ? 1.0 : seconds[i], m);
    prev = out;
  }
  return s;
}

std::vector<DeviceId> devices_of(const Priced& p, const PlacementResult& r, int n) {
  std::vector<DeviceId> out;
  for (int i = 0; i < n; ++i) out.push_back(p.at(name_of("m", i) + "/MatMul", r));
  return out;
}

using ::testing::ElementsAre;

// ---- sequential / balanced ----------------------------------------------------------------------

// Each module holds 300 B (m0 also the 10 B data) and keeps room for its 10 B output.
TEST(Sequential, FillsGpu0FirstThenTheNextGpu) {
  Priced p(module_chain(4, 300), cpu_and_gpus(2, 1000));
  const PlacementResult r = run("sequential", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu0, kGpu0, kGpu0, kGpu1));
  EXPECT_TRUE(r.sim.fits);
}

// Exporters list the alias of a shared parameter (an edge-less Identity the importer keeps as a
// record) before every op: ranked where it stands, its module, the last one here, became the first
// to be filled (VGG-16's classifier went to gpu:0, its first layers elsewhere). It runs where the
// alias is read.
TEST(Sequential, AParameterAliasListedFirstDoesNotReorderTheModules) {
  Sketch s;
  TensorId shared = s.tensor("m3.w2", 300, TensorKind::parameter);
  OpSpec alias{.name = "Identity_0", .type = "Identity", .module = "m3"};
  Attribute a{.name = "alias", .kind = Attribute::Kind::text};
  a.s = "m3.w2";
  alias.attrs.set(a);
  s.b.add_op(std::move(alias));
  TensorId prev = s.tensor("x", 10, TensorKind::data);
  for (int i = 0; i < 4; ++i) {
    const std::string m = name_of("m", i);
    TensorId w = s.tensor(m + ".w", 300, TensorKind::parameter), out = s.tensor(m + ".out", 10);
    std::vector<TensorId> in{prev, w};
    if (i == 3) in.push_back(shared);
    s.op(m + "/MatMul", "MatMul", in, {out}, 1.0, m);
    prev = out;
  }
  Priced p(std::move(s), cpu_and_gpus(2, 1000));
  for (const char* algo : {"sequential", "expert"}) {
    const PlacementResult r = run(algo, p.problem());
    const std::vector<DeviceId> d = devices_of(p, r, 4);
    EXPECT_TRUE(std::is_sorted(d.begin(), d.end())) << algo << ": modules out of order " << ::testing::PrintToString(d);
    EXPECT_EQ(d.front(), kGpu0) << algo;
  }
}

TEST(Sequential, OverflowsToTheCpu) {
  Priced p(module_chain(4, 300), cpu_and_gpus(2, 500));
  const PlacementResult r = run("sequential", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu0, kGpu1, kCpu, kCpu));
  EXPECT_TRUE(r.sim.fits);
}

TEST(Sequential, MaxMemoryFractionLowersEveryBudget) {
  Priced p(module_chain(4, 300), cpu_and_gpus(2, 1000));
  const PlacementResult r = run("sequential", p.problem(), {{"max-memory-fraction", "0.5"}});
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu0, kGpu1, kCpu, kCpu));
}

// "big" (600 B) does not fit in a 500 B GPU: it is split into big.a and big.b. "leaf" (two ops,
// 600 B, no child modules) cannot be split: it moves whole, past the GPUs, to the CPU.
TEST(Sequential, SplitsAModuleTooBigIntoItsChildrenButNotALeafModule) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data);
  auto add = [&](const std::string& name, const std::string& module, TensorId in) {
    TensorId w = s.tensor(name + ".w", 300, TensorKind::parameter), out = s.tensor(name + ".out", 10);
    s.op(name, "MatMul", {in, w}, {out}, 1.0, module);
    return out;
  };
  TensorId t = add("big.a/MatMul", "big.a", x);
  t = add("big.b/MatMul", "big.b", t);
  t = add("leaf/MatMul1", "leaf", t);
  add("leaf/MatMul2", "leaf", t);
  Priced p(std::move(s), cpu_and_gpus(2, 500));
  const PlacementResult r = run("sequential", p.problem());
  EXPECT_EQ(p.at("big.a/MatMul", r), kGpu0);
  EXPECT_EQ(p.at("big.b/MatMul", r), kGpu1);
  EXPECT_EQ(p.at("leaf/MatMul1", r), kCpu);
  EXPECT_EQ(p.at("leaf/MatMul2", r), kCpu);
  EXPECT_TRUE(r.sim.fits);
}

TEST(Sequential, SaysClearlyWhenAModuleFitsNowhere) {
  Priced p(module_chain(2, 300), cpu_and_gpus(2, 100, 100));
  try {
    run("sequential", p.problem());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("fits on no device"));
    // What is left on the last device, not its whole budget (it named the budget as what was left).
    EXPECT_THAT(e.what(), ::testing::HasSubstr("module 'm0' (320 B with its working set)"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("has 100 B of its 100 B of budget left (nothing else on it)"));
  }
}

// 8 modules of 100 B (810 B in all) on two roomy GPUs: sequential keeps them all on gpu:0;
// balanced caps gpu:0 at 810 / 2 + 1.25 x 101 (the mean leaf module) = 531 B: five modules.
TEST(Balanced, SpreadsModulesOverTheGpusWhereSequentialFillsOne) {
  Priced p(module_chain(8, 100), cpu_and_gpus(2, 1'000'000));
  EXPECT_THAT(devices_of(p, run("sequential", p.problem()), 8), ::testing::Each(kGpu0));
  const PlacementResult r = run("balanced", p.problem());
  EXPECT_THAT(devices_of(p, r, 8), ElementsAre(kGpu0, kGpu0, kGpu0, kGpu0, kGpu0, kGpu1, kGpu1, kGpu1));
  EXPECT_TRUE(r.sim.fits);
}

// Found by review: the share capped each GPU's working set too, and an item larger than a share
// skipped every GPU but the last, where everything after it followed (ResNet-50 in inference on
// k80x4: all 375 ops on gpu:3, its first layer's output alone outgrowing the share).
TEST(Balanced, AWorkingSetOrAnItemLargerThanAShareDoesNotSkipTheGpus) {
  // Eight modules m0..m7 under `prefix`, each a MatMul with a parameter, m0's parameter and output
  // of the given sizes (100 B and 10 B for the others).
  auto chain = [](std::int64_t m0_param, std::int64_t m0_out, const std::string& prefix) {
    Sketch s;
    TensorId prev = s.tensor("x", 10, TensorKind::data);
    for (int i = 0; i < 8; ++i) {
      const std::string m = name_of("m", i);
      TensorId w = s.tensor(m + ".w", i == 0 ? m0_param : 100, TensorKind::parameter), out = s.tensor(m + ".out", i == 0 ? m0_out : 10);
      s.op(m + "/MatMul", "MatMul", {prev, w}, {out}, 1.0, prefix + m);
      prev = out;
    }
    return s;
  };
  // m0's output is 1000 B, twice the share (531 B): it is transient, held against the GPU's whole
  // memory, not the share.
  Priced wide(chain(100, 1000, ""), cpu_and_gpus(2, 1'000'000));
  EXPECT_THAT(devices_of(wide, run("balanced", wide.problem()), 8), ElementsAre(kGpu0, kGpu0, kGpu0, kGpu0, kGpu0, kGpu1, kGpu1, kGpu1));
  // m0 holds 2000 B of parameters, more than a share of three GPUs (2710 / 3 + 1.25 x 339 = 1326 B):
  // it takes gpu:0 alone and the others share gpu:1.
  Priced big(chain(2000, 10, ""), cpu_and_gpus(3, 1'000'000));
  EXPECT_THAT(devices_of(big, run("balanced", big.problem()), 8), ElementsAre(kGpu0, kGpu1, kGpu1, kGpu1, kGpu1, kGpu1, kGpu1, kGpu1));
  // ... but a module larger than a share that can be split still is (found by review of the rule
  // above: every module under one wrapper, `model.m0` ... `model.m7`, went whole onto gpu:0).
  Priced wrapped(chain(100, 10, "model."), cpu_and_gpus(2, 1'000'000));
  EXPECT_THAT(devices_of(wrapped, run("balanced", wrapped.problem()), 8),
              ElementsAre(kGpu0, kGpu0, kGpu0, kGpu0, kGpu0, kGpu1, kGpu1, kGpu1));
}

// round-robin and random do not repair memory: a placement that does not fit says why in its note
// (it had none: a QA pass).
TEST(Baselines, PlacementsThatDoNotFitSayWhy) {
  Priced big(module_chain(8, 1'000'000), cpu_and_gpus(3, 1'000'000));  // 8 MB of parameters over GPUs of 1 MB
  const PlacementResult dealt = run("round-robin", big.problem());
  EXPECT_FALSE(dealt.sim.fits);
  EXPECT_THAT(dealt.note, ::testing::HasSubstr("without regard to memory"));
  NullObserver quiet;
  const PlacementResult drawn = make_placer("random", PlacerOptions{})->place(big.problem(), Budget{.samples = 3}, quiet, 1);
  EXPECT_FALSE(drawn.sim.fits);
  EXPECT_THAT(drawn.note, ::testing::HasSubstr("none of the 3 random placements drawn fits"));
  Priced small(module_chain(8, 1'000), cpu_and_gpus(3, 1'000'000));
  EXPECT_EQ(run("round-robin", small.problem()).note, "");
}

TEST(MemoryMaps, HonourMemoryInATrainingStep) {
  // A training step adds saved activations and gradients: the maps must still fit.
  GraphBuilder b("mlp");
  TensorId x = b.add_tensor("x", {64, 256}, DType::f32, TensorKind::data);
  for (int i = 0; i < 6; ++i) {
    const std::string m = name_of("fc", i);
    TensorId w = b.add_tensor(m + ".w", {256, 256}, DType::f32, TensorKind::parameter);
    TensorId y = b.add_tensor(m + ".y", {64, 256}, DType::f32, TensorKind::activation);
    OpSpec spec{.name = m + "/MatMul", .type = "MatMul", .inputs = {x, w}, .outputs = {y}, .module = m};
    spec.work = OpWork{.flops = 2.0 * 64 * 256 * 256, .bytes_read = 0, .bytes_written = 0, .op_class = OpClass::matmul};
    b.add_op(std::move(spec));
    x = y;
  }
  b.mark_output(x);
  const Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  // About 1.6 MB of parameters, 0.4 MB of saved activations: 1.5 MB GPUs need two or three of them.
  const Cluster c = cpu_and_gpus(3, 1'500'000);
  const CostTable costs(step, c, CostModel::defaults());
  const Problem problem{step, c, costs, {}};
  for (const char* algo : {"sequential", "balanced", "expert", "metis", "scotch"}) {
    const PlacementResult r = run(algo, problem);
    EXPECT_TRUE(r.sim.fits) << algo << ": " << r.note;
    std::set<DeviceId> used(r.forward_devices.begin(), r.forward_devices.end());
    EXPECT_GE(used.size(), 2u) << algo;
    EXPECT_EQ(used.count(kCpu), 0u) << algo;
  }
}

// The simulated peak of `step` run wholly on `device` of a roomy cluster of 2 GPUs.
std::uint64_t peak_alone_on(const Graph& step, DeviceId device) {
  const Cluster roomy = cpu_and_gpus(2, 1'000'000'000);
  const CostTable costs(step, roomy, CostModel::defaults());
  Simulator sim(step, roomy, costs);
  return sim.simulate(std::vector<DeviceId>(step.num_ops(), device)).devices[device].peak_memory_bytes;
}

// The maps' memory estimate counts a view as a copy and every forward output as alive until the
// backward pass: on GPT-2 (k80x4, --memory-fraction 0.07) about twice the simulated peak, so the
// GPUs ended half full and 562 ops overflowed to the CPU (found by a review). Here a step the
// simulator fits on one GPU with 5% to spare, which the estimate alone spread over several. The
// budgets now grow while the simulated map fits.

TEST(MemoryMaps, FillAGpuAsFarAsTheSimulatorAllows) {
  const Graph step = test::viewed_chain_step();
  const Cluster c = cpu_and_gpus(2, peak_alone_on(step, kGpu0) * 105 / 100);
  const CostTable costs(step, c, CostModel::defaults());
  const Problem problem{step, c, costs, {}};
  for (const char* algo : {"sequential", "balanced"}) {
    const PlacementResult r = run(algo, problem);
    EXPECT_TRUE(r.sim.fits) << algo << ": " << r.note;
    if (std::string(algo) == "sequential") {
      EXPECT_THAT(std::set<DeviceId>(r.forward_devices.begin(), r.forward_devices.end()), ::testing::ElementsAre(kGpu0));
    }
  }
}

// The estimate counts every forward output as kept until the backward pass (about twice what the
// simulator keeps): where it says the model fits nowhere, larger budgets are tried and the
// simulator judges (a model the CPU alone holds was refused: a review).
TEST(MemoryMaps, FitWhereOnlyTheEstimateSaysTheModelFitsNowhere) {
  const Graph step = test::viewed_chain_step();
  const Cluster c = cpu_and_gpus(2, 1000, peak_alone_on(step, kCpu) * 105 / 100);  // GPUs that hold nothing, a CPU that holds it all
  const CostTable costs(step, c, CostModel::defaults());
  const Problem problem{step, c, costs, {}};
  for (const char* algo : {"sequential", "balanced"}) {
    const PlacementResult r = run(algo, problem);
    EXPECT_TRUE(r.sim.fits) << algo << ": " << r.note;
  }
}

// Their simulations (the first fill, the growth steps, the repair rounds) stay within --samples:
// `sequential` with --samples 1 simulated six maps at 2% of k80x4's memory (a QA pass).
TEST(MemoryMaps, SimulateWithinTheSampleBudget) {
  NullObserver quiet;
  // Growth steps: the first fill of four 300 B modules fits one GPU's estimate share, then grows.
  // Repair rounds: four 600 B modules over GPUs of 1000 B.
  for (const std::uint64_t module_bytes : {300u, 600u}) {
    Priced p(module_chain(4, module_bytes), cpu_and_gpus(2, 1000));
    for (const char* algo : {"sequential", "balanced"}) {
      SCOPED_TRACE(std::string(algo) + " " + std::to_string(module_bytes));
      const std::size_t unbounded = run(algo, p.problem()).samples;
      for (std::size_t budget = 1; budget < unbounded; ++budget) {
        const PlacementResult r = make_placer(algo, PlacerOptions{})->place(p.problem(), Budget{.samples = budget}, quiet, 1);
        EXPECT_EQ(r.samples, budget);
        if (!r.sim.fits) {
          EXPECT_THAT(r.note, ::testing::HasSubstr("cut short by --samples"));
        }
      }
      if (std::string(algo) == "sequential") {
        EXPECT_GT(unbounded, 2u) << "a case that simulates several maps";
      }
    }
    // Nothing simulated but the result: repair-rounds=0 reports that one simulation (it said 0).
    EXPECT_EQ(run("sequential", p.problem(), {{"repair-rounds", "0"}}).samples, 1u);
  }
}

// The partitioners' repair says it was cut short only when --samples stopped it (it said so
// whenever --samples was under repair-rounds, even when nothing was left to move: a review).
TEST(Partitioners, SayTheRepairWasCutShortOnlyWhenItWas) {
  NullObserver quiet;
  Priced p(module_chain(4, 2000), cpu_and_gpus(2, 1000, 1000));  // fits nowhere
  for (const char* algo : {"metis", "scotch"}) {
    SCOPED_TRACE(algo);
    const PlacementResult full = run(algo, p.problem());
    ASSERT_FALSE(full.sim.fits);
    EXPECT_THAT(full.note, ::testing::HasSubstr("still overflows device memory after the repair pass"));
    EXPECT_THAT(full.note, ::testing::Not(::testing::HasSubstr("cut short")));
    const PlacementResult cut = make_placer(algo, PlacerOptions{})->place(p.problem(), Budget{.samples = 1}, quiet, 1);
    EXPECT_THAT(cut.note, ::testing::HasSubstr("(cut short by --samples)"));
    // Budgets above what the repair needs say nothing of a cut either.
    const PlacementResult ample = make_placer(algo, PlacerOptions{})->place(p.problem(), Budget{.samples = 20}, quiet, 1);
    EXPECT_THAT(ample.note, ::testing::Not(::testing::HasSubstr("cut short")));
  }
}

// optimal searches the GPUs by default and says when devices are left out; its hint to add them
// (devices=all) led to an error on a cluster of more than 8 devices, which it cannot take.
TEST(Optimal, SaysHowToUseTheDevicesItLeftOut) {
  Priced three(module_chain(4, 300), cpu_and_gpus(2, 1'000'000));
  EXPECT_THAT(run("optimal", three.problem()).note, ::testing::HasSubstr("on 2 of the 3 devices (option devices=all adds the others)"));
  Priced nine(module_chain(4, 300), cpu_and_gpus(8, 1'000'000));
  const PlacementResult r = run("optimal", nine.problem());
  EXPECT_THAT(r.note, ::testing::HasSubstr("on 8 of the 9 devices (optimal takes at most 8"));
  EXPECT_THROW(run("optimal", nine.problem(), {{"devices", "all"}}), Error);
}

// Eight GPUs (the 8-GPU presets' boxes; optimal took at most 4 until 2026-11-29): every group
// placement is searched, so nothing it returns is slower than one GPU.
TEST(Optimal, PlacesOnEightDevices) {
  Priced nine(module_chain(6, 300), cpu_and_gpus(8, 1'000'000));
  const PlacementResult r = run("optimal", nine.problem());
  EXPECT_TRUE(r.sim.fits) << r.note;
  Simulator sim(nine.g, nine.c, nine.costs);
  const double one_gpu = sim.simulate(std::vector<DeviceId>(nine.g.num_ops(), kGpu0)).step_time_s;
  EXPECT_LE(r.sim.step_time_s, one_gpu + 1e-12) << r.note;
}

// ---- expert ---------------------------------------------------------------------------------------

// An LSTM language model in miniature, unrolled over 3 steps: an embedding lookup split into
// steps, two layers of cells (Gemm, Sigmoid and Tanh gates, Mul), a projection per step, a Concat.
Sketch tiny_lstm(int time_steps = 3) {
  Sketch s;
  TensorId tokens = s.tensor("tokens", 12, TensorKind::data), table = s.tensor("embed.weight", 4000, TensorKind::parameter);
  TensorId emb = s.tensor("emb", 300);
  s.op("embed/Gather", "Gather", {table, tokens}, {emb}, 0.1, "embed");
  std::vector<TensorId> steps;
  for (int t = 0; t < time_steps; ++t) steps.push_back(s.tensor(name_of("emb_", t), 100));
  s.op("Split", "Split", {emb}, steps, 0.1);
  std::vector<TensorId> w, h(2, kNoId);
  for (int l = 0; l < 2; ++l) w.push_back(s.tensor(name_of("cells.", l) + ".w", 1000, TensorKind::parameter));
  TensorId proj_w = s.tensor("proj.weight", 2000, TensorKind::parameter);
  std::vector<TensorId> logits;
  for (int t = 0; t < time_steps; ++t) {
    TensorId in = steps[t];
    for (int l = 0; l < 2; ++l) {
      const std::string p = name_of("cells.", l) + name_of("_", t) + "/";
      const std::string module = name_of("cells.", l);
      std::vector<TensorId> ins{in, w[l]};
      if (h[l] != kNoId) ins.push_back(h[l]);
      TensorId gates = s.tensor(p + "gates", 400), sig = s.tensor(p + "sig", 100), th = s.tensor(p + "tanh", 100), out = s.tensor(p + "h", 100);
      s.op(p + "Gemm", "Gemm", ins, {gates}, 1.0, module, t);
      s.op(p + "Sigmoid", "Sigmoid", {gates}, {sig}, 0.1, module, t);
      s.op(p + "Tanh", "Tanh", {gates}, {th}, 0.1, module, t);
      s.op(p + "Mul", "Mul", {sig, th}, {out}, 0.1, module, t);
      h[l] = out;
      in = out;
    }
    logits.push_back(s.tensor(name_of("logits_", t), 200));
    s.op(name_of("proj_", t) + "/Gemm", "Gemm", {in, proj_w}, {logits.back()}, 0.5, "proj", t);
  }
  s.op("Concat", "Concat", logits, {s.tensor("out", 600)}, 0.1);
  return s;
}

TEST(Expert, PutsOneLstmLayerPerGpuWithTheEmbeddingFirstAndTheSoftmaxLast) {
  Priced p(tiny_lstm(), cpu_and_gpus(4, 1'000'000));
  const PlacementResult r = run("expert", p.problem());
  for (int t = 0; t < 3; ++t) {
    const std::string step = name_of("_", t) + "/";
    for (const char* op : {"Gemm", "Sigmoid", "Tanh", "Mul"}) {
      EXPECT_EQ(p.at("cells.0" + step + op, r), kGpu0);
      EXPECT_EQ(p.at("cells.1" + step + op, r), kGpu1);
    }
    EXPECT_EQ(p.at(name_of("proj_", t) + "/Gemm", r), kGpu1);
  }
  EXPECT_EQ(p.at("embed/Gather", r), kGpu0);
  EXPECT_EQ(p.at("Split", r), kGpu0);
  EXPECT_EQ(p.at("Concat", r), kGpu1);
  EXPECT_TRUE(r.sim.fits);
}

// Calls count from 0: a layer unrolled over two steps (calls 0 and 1) is recurrent too (it was
// taken for a model run once, all on one GPU: a review).
TEST(Expert, SeesALayerUnrolledOverTwoStepsAsRecurrent) {
  Priced p(tiny_lstm(2), cpu_and_gpus(4, 1'000'000));
  const PlacementResult r = run("expert", p.problem());
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(p.at("cells.0" + name_of("_", t) + "/Gemm", r), kGpu0);
    EXPECT_EQ(p.at("cells.1" + name_of("_", t) + "/Gemm", r), kGpu1);
  }
}

TEST(Expert, OptionsMoveTheHeadAndTheEmbedding) {
  Priced p(tiny_lstm(), cpu_and_gpus(4, 1'000'000));
  const PlacementResult next = run("expert", p.problem(), {{"head", "next-gpu"}});
  EXPECT_EQ(p.at("proj_2/Gemm", next), kGpu2);
  EXPECT_EQ(p.at("cells.1_2/Gemm", next), kGpu1);
  const PlacementResult cpu = run("expert", p.problem(), {{"head", "cpu"}, {"embedding", "cpu"}});
  EXPECT_EQ(p.at("proj_0/Gemm", cpu), kCpu);
  EXPECT_EQ(p.at("embed/Gather", cpu), kCpu);
  EXPECT_EQ(p.at("cells.0_0/Gemm", cpu), kGpu0);
  EXPECT_THROW(run("expert", p.problem(), {{"head", "gpu:7"}}), Error);
  // Two layers on two GPUs: no GPU comes after the last layer's. The head took gpu:0 again, beside
  // the first layer (found by a review); it stays with the last layer, and the note says why.
  Priced two(tiny_lstm(), cpu_and_gpus(2, 1'000'000));
  const PlacementResult full = run("expert", two.problem(), {{"head", "next-gpu"}});
  EXPECT_EQ(two.at("proj_2/Gemm", full), kGpu1);
  EXPECT_THAT(full.note, ::testing::HasSubstr("each of the 2 GPUs holds a recurrent layer"));
}

// On a cluster without a CPU, head=cpu and embedding=cpu were ignored without a word (found by a
// review): the placement stays the default one and the note says why.
TEST(Expert, AskingForACpuTheClusterLacksIsNoted) {
  std::vector<Device> devices;
  std::vector<Link> links;
  for (int i = 0; i < 2; ++i) {
    devices.push_back(Device{.name = name_of("gpu:", i), .kind = DeviceKind::gpu, .model = "t", .peak_flops = 1e12,
                             .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1'000'000, .op_overhead_s = 0.0});
    links.push_back(Link{.a = devices.back().name, .b = "sw", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 1e-6});
  }
  Priced p(tiny_lstm(), Cluster::build("gpus", std::move(devices), {"sw"}, std::move(links)));
  const PlacementResult plain = run("expert", p.problem());
  const PlacementResult cpu = run("expert", p.problem(), {{"head", "cpu"}, {"embedding", "cpu"}});
  EXPECT_EQ(cpu.forward_devices, plain.forward_devices);
  EXPECT_THAT(cpu.note, ::testing::HasSubstr("embedding=cpu: the cluster has no CPU, so the embedding stays with the first layer it feeds"));
  EXPECT_THAT(cpu.note, ::testing::HasSubstr("head=cpu: the cluster has no CPU, so the head stays with the last layer"));
  EXPECT_EQ(plain.note.find("no CPU"), std::string::npos);
}

// Neither one layer per GPU nor any split fits: the recurrent placement, with every placement
// simulated counted (it said 1 sample: a review) and the note saying that the splits failed too.
TEST(Expert, CountsTheSplitsItTriedWhenNothingFits) {
  Priced p(tiny_lstm(), cpu_and_gpus(4, 1'000));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_FALSE(r.sim.fits);
  EXPECT_GT(r.samples, 1u);
  EXPECT_THAT(r.note, ::testing::HasSubstr("one recurrent layer per GPU does not fit the memory limits"));
  EXPECT_THAT(r.note, ::testing::HasSubstr("no split of consecutive layers over the GPUs fits either"));
}

TEST(Expert, DealsLayersToGpusInTurnWhenThereAreMoreLayersThanGpus) {
  Priced p(tiny_lstm(), cpu_and_gpus(1, 1'000'000));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_EQ(p.at("cells.0_0/Gemm", r), kGpu0);
  EXPECT_EQ(p.at("cells.1_0/Gemm", r), kGpu0);
}

TEST(Expert, KeepsAModelThatFitsOnOneGpu) {
  Priced p(module_chain(4, 400), cpu_and_gpus(3, 1'000'000));
  EXPECT_THAT(devices_of(p, run("expert", p.problem()), 4), ::testing::Each(kGpu0));
}

// Equally fast GPUs, gpu:0 too small for the model (1600 B of parameters), gpu:1 large enough: the
// whole model on gpu:1, not split (only gpu:0 was tried alone: found by a review).
TEST(Expert, PutsTheModelOnTheGpuThatHoldsItWhenTheFirstDoesNot) {
  Priced p(module_chain(4, 400), cpu_and_gpus(2, 0, 1ull << 40, {}, 1e11, {500, 1'000'000}));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ::testing::Each(kGpu1));
  EXPECT_TRUE(r.sim.fits);
}

// No GPU holds it alone: split over the two largest of the equally fast GPUs (gpu:0 holds 500 B,
// less than half of it).
TEST(Expert, SplitsOverTheLargestOfEquallyFastGpus) {
  Priced p(module_chain(4, 400), cpu_and_gpus(3, 0, 1ull << 40, {}, 1e11, {500, 1000, 1000}));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu1, kGpu1, kGpu2, kGpu2));
  EXPECT_TRUE(r.sim.fits);
}

// The fastest GPU is too small for half of the model; the two slower ones hold half each: split
// over them (every split over the fastest GPUs overflowed it).
TEST(Expert, SplitsOverTheLargerGpusWhenTheFastestIsTooSmallForItsShare) {
  Priced p(module_chain(4, 400), cpu_and_gpus(3, 0, 1ull << 40, {4e12, 1e12, 1e12}, 1e11, {500, 1000, 1000}));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu1, kGpu1, kGpu2, kGpu2));
  EXPECT_TRUE(r.sim.fits);
}

// 4 x 400 B of parameters in 1000 B GPUs: one GPU is not enough, two are (2 + 2 modules).
TEST(Expert, SplitsConsecutiveLayersEvenlyOverAsFewGpusAsFit) {
  Priced p(module_chain(4, 400), cpu_and_gpus(3, 1000));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu0, kGpu0, kGpu1, kGpu1));
  EXPECT_TRUE(r.sim.fits);
  // gpu:0 alone, then the split: gpu:1 and gpu:2 hold no more than gpu:0, so they are not tried alone.
  EXPECT_EQ(r.samples, 2u);
}

// m0 takes 3 s, the others 1 s: split by compute ({m0} | {m1 m2 m3}) the second GPU overflows, so
// the expert splits by memory instead.
TEST(Expert, FallsBackToAMemoryBalancedSplitWhenTheComputeSplitOverflows) {
  Priced p(module_chain(4, 400, {3.0, 1.0, 1.0, 1.0}), cpu_and_gpus(2, 1000));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu0, kGpu0, kGpu1, kGpu1));
  EXPECT_TRUE(r.sim.fits);
}

// 3000 top-level ops of 100 B each (no modules): 300 kB over 120 kB GPUs takes three of them, each
// a consecutive run of about 1000 ops.
TEST(Expert, SplitsALongChainOfTopLevelOpsIntoConsecutiveRuns) {
  Sketch s;
  TensorId prev = s.tensor("x", 10, TensorKind::data);
  for (int i = 0; i < 3000; ++i) {
    TensorId w = s.tensor(name_of("w", i), 100, TensorKind::parameter), out = s.tensor(name_of("t", i), 10);
    s.op(name_of("op", i), "MatMul", {prev, w}, {out}, 0.001);
    prev = out;
  }
  Priced p(std::move(s), cpu_and_gpus(4, 120'000));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_TRUE(r.sim.fits);
  std::vector<DeviceId> runs{r.forward_devices[0]};
  for (DeviceId d : r.forward_devices)
    if (d != runs.back()) runs.push_back(d);
  EXPECT_THAT(runs, ElementsAre(kGpu0, kGpu1, kGpu2));
  for (DeviceId d : {kGpu0, kGpu1, kGpu2}) {
    const auto ops = std::count(r.forward_devices.begin(), r.forward_devices.end(), d);
    EXPECT_NEAR(static_cast<double>(ops), 1000.0, 10.0);
  }
}

// As every placer that draws a map: when no split fits, the one closest to fitting, marked (it
// threw, which the README's rule for `place` did not allow; found by review).
TEST(Expert, ReturnsTheSplitClosestToFittingWhenNoneFits) {
  Priced p(module_chain(4, 400), cpu_and_gpus(2, 500));
  const PlacementResult r = run("expert", p.problem());
  EXPECT_FALSE(r.sim.fits);
  EXPECT_THAT(devices_of(p, r, 4), ElementsAre(kGpu0, kGpu0, kGpu1, kGpu1));  // 2 x 400 B over each 500 B GPU, the least over
  EXPECT_THAT(r.note, ::testing::HasSubstr("no split of its layers over the 2 GPU(s) fits the memory limits"));
}

// ---- METIS and Scotch ------------------------------------------------------------------------------

// Two independent chains of three 1 s ops joined by 1 MB tensors.
Sketch two_chains() {
  Sketch s;
  for (const char* chain : {"a", "b"}) {
    TensorId prev = s.tensor(std::string(chain) + "_in", 1000, TensorKind::data);
    for (int i = 1; i <= 3; ++i) {
      const std::string name = chain + std::to_string(i);
      TensorId out = s.tensor(name + ".out", 1'000'000);
      s.op(name, "MatMul", {prev}, {out}, 1.0);
      prev = out;
    }
  }
  return s;
}

class Partitioner : public ::testing::TestWithParam<const char*> {};

// With fewer groups than devices, each group is a part of its own, as the note says (METIS left a
// part empty: two groups of RNNLM on k80x4 both went to one GPU).
TEST_P(Partitioner, FewerGroupsThanDevicesGivesEachGroupItsOwnDevice) {
  Priced p(two_chains(), cpu_and_gpus(3, 1'000'000'000));
  const PlacementResult r = run(GetParam(), p.problem(), {{"groups", "op"}, {"max-groups", "2"}});
  std::set<DeviceId> used(r.forward_devices.begin(), r.forward_devices.end());
  EXPECT_EQ(used.size(), 2u);
  EXPECT_THAT(r.note, ::testing::HasSubstr("one part per group"));
}

TEST_P(Partitioner, SplitsTwoIndependentHeavyChainsOntoTwoGpus) {
  for (const char* groups : {"op", "colocation"}) {
    Priced p(two_chains(), cpu_and_gpus(2, 1'000'000'000));
    const PlacementResult r = run(GetParam(), p.problem(), {{"groups", groups}});
    const DeviceId a = p.at("a1", r), b = p.at("b1", r);
    EXPECT_NE(a, b) << groups;
    EXPECT_NE(a, kCpu) << groups;
    EXPECT_NE(b, kCpu) << groups;
    for (const char* op : {"a2", "a3"}) EXPECT_EQ(p.at(op, r), a) << groups;
    for (const char* op : {"b2", "b3"}) EXPECT_EQ(p.at(op, r), b) << groups;
    EXPECT_NEAR(r.sim.step_time_s, 3.0, 1e-9) << groups;
  }
}

// Eight independent equal ops, a GPU three times faster than the other: about three quarters of
// the ops go to the fast one.
TEST_P(Partitioner, BalancesPartsByDeviceSpeed) {
  Sketch s;
  for (int i = 0; i < 8; ++i) {
    const std::string n = std::to_string(i);
    s.op("op" + n, "MatMul", {s.tensor("in" + n, 10, TensorKind::data)}, {s.tensor("out" + n, 10)}, -1, "", 0, 1e9);
  }
  Priced p(std::move(s), cpu_and_gpus(2, 1'000'000'000, 1ull << 40, {3e12, 1e12}));
  const PlacementResult r = run(GetParam(), p.problem(), {{"groups", "op"}});
  const auto fast = std::count(r.forward_devices.begin(), r.forward_devices.end(), kGpu0);
  const auto slow = std::count(r.forward_devices.begin(), r.forward_devices.end(), kGpu1);
  EXPECT_EQ(fast + slow, 8);
  EXPECT_GE(fast, 5);
  EXPECT_GE(slow, 1);
}

// Four 600 B modules, compute balanced 2 + 2 over GPUs of 1000 B and 1 MB.
Priced overflowing_partition() {
  Cluster c = cpu_and_gpus(2, 1000);
  std::vector<Device> devices(c.devices().begin(), c.devices().end());
  devices[kGpu1].memory_bytes = 1'000'000;
  std::vector<Link> links(c.links().begin(), c.links().end());
  return Priced(module_chain(4, 600), Cluster::build("test", devices, {"sw"}, links));
}

// The repair pass moves a module off the small GPU.
TEST_P(Partitioner, RepairsAPartitionThatOverflowsAGpu) {
  Priced p = overflowing_partition();
  const PlacementResult r = run(GetParam(), p.problem(), {{"groups", "op"}});
  EXPECT_TRUE(r.sim.fits) << r.note;
  EXPECT_LE(r.sim.devices[kGpu0].peak_memory_bytes, 1000u);
  std::set<DeviceId> used(r.forward_devices.begin(), r.forward_devices.end());
  EXPECT_EQ(used.count(kCpu), 0u);
}

// The repair rounds (a simulation each) stay within --samples (repair-rounds=100000 with
// --samples 10 ran 100,000, and past --seconds).
TEST_P(Partitioner, RepairStaysWithinTheSampleBudget) {
  Priced p = overflowing_partition();
  NullObserver quiet;
  const PlacementResult r = make_placer(GetParam(), PlacerOptions(std::map<std::string, std::string>{{"groups", "op"}}))
                                ->place(p.problem(), Budget{.samples = 1}, quiet, 1);
  EXPECT_LE(r.samples, 1u);
}

// A time budget past what the clock counts is no limit (--seconds 1e10 wrapped the deadline into
// the past, and the repair never ran: found by a review).
TEST_P(Partitioner, AHugeTimeBudgetStillRepairs) {
  Priced p = overflowing_partition();
  NullObserver quiet;
  const PlacementResult r = make_placer(GetParam(), PlacerOptions(std::map<std::string, std::string>{{"groups", "op"}}))
                                ->place(p.problem(), Budget{.seconds = 1e10}, quiet, 1);
  EXPECT_TRUE(r.sim.fits) << r.note;
}

TEST_P(Partitioner, HonoursTheMemoryFraction) {
  Priced p(module_chain(4, 600), cpu_and_gpus(2, 2000));
  SimOptions sim;
  sim.memory_fraction = 0.5;
  const PlacementResult r = run(GetParam(), p.problem(sim), {{"groups", "op"}});
  EXPECT_TRUE(r.sim.fits) << r.note;
  for (DeviceId d : {kGpu0, kGpu1}) EXPECT_LE(r.sim.devices[d].peak_memory_bytes, 1000u);
}

// A ladder of 60 ops: the same seed gives the same placement.
TEST_P(Partitioner, IsDeterministicUnderASeed) {
  Sketch s;
  TensorId left = s.tensor("x", 1000, TensorKind::data), right = s.tensor("y", 1000, TensorKind::data);
  for (int i = 0; i < 30; ++i) {
    const std::string n = std::to_string(i);
    TensorId l = s.tensor("l" + n, 1000 + 37 * i), r = s.tensor("r" + n, 2000 + 11 * i);
    s.op("L" + n, "MatMul", i % 4 == 3 ? std::vector<TensorId>{left, right} : std::vector<TensorId>{left}, {l}, 1.0 + i % 3);
    s.op("R" + n, "MatMul", {right}, {r}, 1.5);
    left = l, right = r;
  }
  Priced p(std::move(s), cpu_and_gpus(4, 1'000'000'000));
  for (std::uint64_t seed : {1u, 7u}) {
    const PlacementResult a = run(GetParam(), p.problem(), {{"groups", "op"}}, seed);
    const PlacementResult b = run(GetParam(), p.problem(), {{"groups", "op"}}, seed);
    EXPECT_EQ(a.forward_devices, b.forward_devices) << "seed " << seed;
    EXPECT_DOUBLE_EQ(a.sim.step_time_s, b.sim.step_time_s);
  }
}

// Scotch's mapping depends neither on the number of threads it may use (by default the machine's:
// SCOTCH_PTHREAD_NUMBER=1 gave another mapping than 2, 4 or 8, a review) nor only on the seed's
// upper bits (Scotch sets the lowest: seeds 2 and 3 gave one mapping).
TEST(Scotch, TheMappingDoesNotDependOnTheMachinesThreads) {
  const Graph graph = load_model(test::example("inception_v3.onnx"), ModelOptions{});
  const Cluster cluster = cluster_preset("k80x8");
  const CostTable costs(graph, cluster, CostModel::defaults());
  const Problem problem{graph, cluster, costs, {}};
  std::vector<std::vector<DeviceId>> mappings;
  for (const char* threads : {"1", "2", "8"}) {
    ::setenv("SCOTCH_PTHREAD_NUMBER", threads, 1);
    mappings.push_back(run("scotch", problem, {{"devices", "all"}}).forward_devices);
  }
  ::unsetenv("SCOTCH_PTHREAD_NUMBER");
  EXPECT_EQ(mappings[0], mappings[1]);
  EXPECT_EQ(mappings[0], mappings[2]);
  EXPECT_NE(run("scotch", problem, {{"devices", "all"}}, 2).forward_devices, run("scotch", problem, {{"devices", "all"}}, 3).forward_devices);
}

TEST_P(Partitioner, RejectsBadOptions) {
  Priced p(two_chains(), cpu_and_gpus(2, 1'000'000'000));
  EXPECT_THROW(run(GetParam(), p.problem(), {{"devices", "tpus"}}), Error);
  EXPECT_THROW(run(GetParam(), p.problem(), {{"groups", "layers"}}), Error);
  EXPECT_THROW(run(GetParam(), p.problem(), {{"max-groups", "-1"}}), Error);
  EXPECT_THROW(run(GetParam(), p.problem(), {{"no-such-option", "1"}}), Error);
}

// With the CPU as fast as the GPU (by peak FLOP/s), 'all' splits the chains between them.
TEST_P(Partitioner, UsesEveryDeviceWhenAsked) {
  Priced p(two_chains(), cpu_and_gpus(1, 1'000'000'000, 1ull << 40, {}, 1e12));
  const PlacementResult gpus = run(GetParam(), p.problem(), {{"groups", "op"}});
  EXPECT_THAT(gpus.forward_devices, ::testing::Each(kGpu0));
  const PlacementResult all = run(GetParam(), p.problem(), {{"groups", "op"}, {"devices", "all"}});
  std::set<DeviceId> used(all.forward_devices.begin(), all.forward_devices.end());
  EXPECT_EQ(used.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Classic, Partitioner, ::testing::Values("metis", "scotch"));

// The memory the memory-aware placers plan with agrees with the simulator about set-up values: a
// constant is in the memory of each family that reads it, and is no family's activation.
// family_memory of a graph on one CPU and one GPU.
FamilyMemory family_memory_of(const Graph& g) {
  const Cluster cl = cpu_and_gpus(1, 1 << 20);
  const CostTable costs(g, cl, CostModel::defaults());
  return family_memory(Problem{g, cl, costs, {}});
}

TEST(FamilyMemory, ChargesASetUpValueToEachFamilyThatReadsIt) {
  GraphBuilder b("fam");
  TensorId x = b.add_tensor("x", {100}, DType::u8, TensorKind::data);
  TensorId c = b.add_tensor("c", {64}, DType::u8, TensorKind::activation);
  TensorId y = b.add_tensor("y", {10}, DType::u8, TensorKind::activation);
  TensorId z = b.add_tensor("z", {10}, DType::u8, TensorKind::activation);
  b.add_op({.name = "const", .type = "Constant", .outputs = {c}});
  b.add_op({.name = "a", .type = "Add", .inputs = {x, c}, .outputs = {y}, .work = {.op_class = OpClass::elementwise}});
  b.add_op({.name = "b", .type = "Add", .inputs = {y, c}, .outputs = {z}, .work = {.op_class = OpClass::elementwise}});
  b.mark_output(z);
  const FamilyMemory m = family_memory_of(std::move(b).build());
  EXPECT_EQ(m.static_bytes[0], 0u);
  EXPECT_EQ(m.activation_bytes[0], 0u);
  EXPECT_EQ(m.static_bytes[1], 100u + 64u);  // x and c
  EXPECT_EQ(m.activation_bytes[1], 10u);
  EXPECT_EQ(m.static_bytes[2], 64u);
}

// A view (an alias op's output) takes no memory of its own, as in the simulator.
TEST(FamilyMemory, AViewIsNoActivation) {
  GraphBuilder b("view");
  TensorId x = b.add_tensor("x", {100}, DType::u8, TensorKind::data), y = b.add_tensor("y", {100}, DType::u8, TensorKind::activation);
  TensorId v = b.add_tensor("v", {100}, DType::u8, TensorKind::activation), z = b.add_tensor("z", {10}, DType::u8, TensorKind::activation);
  b.add_op({.name = "a", .type = "Relu", .inputs = {x}, .outputs = {y}, .work = {.op_class = OpClass::elementwise}});
  b.add_op({.name = "r", .type = "Reshape", .inputs = {y}, .outputs = {v}, .work = {.op_class = OpClass::alias}});
  b.add_op({.name = "s", .type = "ReduceSum", .inputs = {v}, .outputs = {z}, .work = {.op_class = OpClass::reduction}});
  b.mark_output(z);
  const FamilyMemory m = family_memory_of(std::move(b).build());
  EXPECT_EQ(m.activation_bytes[0], 100u);
  EXPECT_EQ(m.activation_bytes[1], 0u);
  EXPECT_EQ(m.activation_bytes[2], 10u);
}

TEST(Registry, ClassicPlacersDocumentTheirOptions) {
  for (const char* name : {"sequential", "balanced", "expert", "metis", "scotch"}) {
    const PlacerInfo& info = find_placer(name);
    EXPECT_FALSE(info.summary.empty()) << name;
    EXPECT_FALSE(info.options.empty()) << name;
    for (const auto& doc : info.options) EXPECT_FALSE(doc.help.empty()) << name << " " << doc.key;
  }
}

// ---- real models -------------------------------------------------------------------------------------

class ClassicRealModels : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassicRealModels, EveryClassicPlacerFitsOnK80x4) {
  REQUIRE_SHARED_MODELS();
  const Graph g = load_model(test::shared_model(GetParam()), ModelOptions{});
  const Cluster c = cluster_preset("k80x4");
  const CostTable costs(g, c, CostModel::defaults());
  const Problem problem{g, c, costs, {}};
  const PlacementResult single = run("single", problem);
  std::printf("  %-14s %-10s step %8.2f ms\n", GetParam(), "single", single.sim.step_time_s * 1e3);
  for (const char* algo : {"sequential", "balanced", "expert", "metis", "scotch"}) {
    const PlacementResult r = run(algo, problem);
    ASSERT_EQ(r.forward_devices.size(), g.num_forward_ops()) << algo;
    EXPECT_TRUE(r.sim.fits) << algo << ": " << r.note;
    std::set<DeviceId> used(r.forward_devices.begin(), r.forward_devices.end());
    std::printf("  %-14s %-10s step %8.2f ms  devices %zu  fits %d  %s\n", GetParam(), algo, r.sim.step_time_s * 1e3, used.size(),
                r.sim.fits ? 1 : 0, r.note.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Classic, ClassicRealModels, ::testing::Values("inception_v3", "rnnlm"));

// BERT-base's forward graph on p100x8, priced by the cost model.
struct BertOnP100x8 {
  Graph g = load_model(test::shared_model("bert_base"), ModelOptions{.mode = Mode::inference});
  Cluster c = cluster_preset("p100x8");
  CostTable costs{g, c, CostModel::defaults()};
};

// BERT in inference on p100x8 at --memory-fraction 0.01 (172 MB per GPU): the simulated GPUs took
// about twice the estimate, mostly working set, and sequential's repair cut each overflowing
// budget by its whole overflow, to almost nothing, so that GPUs ended empty and 243 ops went to
// the CPU (158.8 ms). Cut in proportion, the model stays on the GPUs. (Balanced's first fill fits
// here: it is checked as a guard.)
TEST(MemoryMapsRealModels, BertAtOnePercentStaysOnTheGpus) {
  REQUIRE_SHARED_MODELS();
  const BertOnP100x8 bert;
  const Cluster& c = bert.c;
  const Problem problem{bert.g, c, bert.costs, SimOptions{.memory_fraction = 0.01}};
  for (const char* algo : {"sequential", "balanced"}) {
    const PlacementResult r = run(algo, problem);
    EXPECT_TRUE(r.sim.fits) << algo << ": " << r.note;
    std::size_t on_cpu = 0;
    for (DeviceId d : r.forward_devices) on_cpu += c.device(d).kind == DeviceKind::cpu;
    EXPECT_EQ(on_cpu, 0u) << algo << ": " << r.sim.step_time_s * 1e3 << " ms";
  }
}

// max-memory-fraction (Accelerate's max_memory) holds for the simulated peaks, not only for the
// estimate: BERT in inference on p100x8 at --memory-fraction 0.02 with max-memory-fraction=0.5
// ended with gpu:1 at 97.8% of its limit, and no note (found by a review): only an overflow of
// the whole limit started the repair.
TEST(MemoryMapsRealModels, MaxMemoryFractionHoldsForTheSimulatedPeaks) {
  REQUIRE_SHARED_MODELS();
  const BertOnP100x8 bert;
  const Cluster& c = bert.c;
  const Problem problem{bert.g, c, bert.costs, SimOptions{.memory_fraction = 0.02}};
  const std::vector<std::uint64_t> limits = memory_limits(problem);
  for (const char* algo : {"sequential", "balanced"}) {
    const PlacementResult r = run(algo, problem, {{"max-memory-fraction", "0.5"}});
    EXPECT_TRUE(r.sim.fits) << algo << ": " << r.note;
    for (DeviceId d = 0; d < c.num_devices(); ++d)
      EXPECT_LE(static_cast<double>(r.sim.devices[d].peak_memory_bytes), 0.5 * static_cast<double>(limits[d])) << algo << " " << c.device(d).name;
  }
}

// The partitioners' repair under a twentieth of k80x4's memory (NMT, training) and VGG-16's forward
// pass under 3%: one group went back and forth between two GPUs for every round while the CPU had
// gigabytes free, and the last round's placement was kept, over its limit (a QA pass). A group now
// never goes back to a device it has been on, and the least overflowing placement is kept.
TEST(PartitionersRealModels, TheRepairReachesTheCpuInsteadOfGoingBackAndForth) {
  REQUIRE_SHARED_MODELS();
  const Cluster c = cluster_preset("k80x4");
  const Graph nmt = load_model(test::shared_model("nmt"), ModelOptions{});
  const CostTable nmt_costs(nmt, c, CostModel::defaults());
  const PlacementResult m = run("metis", Problem{nmt, c, nmt_costs, SimOptions{.memory_fraction = 0.05}});
  EXPECT_TRUE(m.sim.fits) << m.note;
  const Graph vgg = load_model(test::shared_model("vgg16"), ModelOptions{.mode = Mode::inference});
  const CostTable vgg_costs(vgg, c, CostModel::defaults());
  const PlacementResult s = run("scotch", Problem{vgg, c, vgg_costs, SimOptions{.memory_fraction = 0.03}});
  EXPECT_TRUE(s.sim.fits) << s.note;
}

TEST(ExpertRealModels, RnnlmGetsOneLayerPerGpu) {
  REQUIRE_SHARED_MODELS();
  const Graph g = load_model(test::shared_model("rnnlm"), ModelOptions{});
  const Cluster c = cluster_preset("k80x4");
  const CostTable costs(g, c, CostModel::defaults());
  const PlacementResult r = run("expert", Problem{g, c, costs, {}});
  const DeviceId gpu0 = c.device_id("gpu:0"), gpu1 = c.device_id("gpu:1");
  std::size_t layer0 = 0, layer1 = 0;
  for (OpId o = 0; o < g.num_forward_ops(); ++o) {
    const std::string& m = g.module_name(g.op_module(o));
    DeviceId expected = kNoId;
    if (m == "cells.0" || m == "embed") expected = gpu0;
    if (m == "cells.1" || m == "proj") expected = gpu1;
    layer0 += m == "cells.0";
    layer1 += m == "cells.1";
    if (expected != kNoId) {
      EXPECT_EQ(r.forward_devices[o], expected) << g.op_name(o);
    }
  }
  EXPECT_GT(layer0, 100u);
  EXPECT_GT(layer1, 100u);
}

}  // namespace
}  // namespace placer
