#include "placer/sim/simulator.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>

#include "placer/sim/placement.hpp"
#include "placer/util/error.hpp"
#include "algorithms/small_problems.hpp"

namespace placer {
namespace {

using ::testing::ElementsAre;

using ::testing::DoubleNear;

// Two GPUs behind one switch: gpu:0 -> sw -> gpu:1 is two hops of 1 GB/s and 1 us each.
Cluster two_gpus(std::uint64_t memory_bytes = 1'000'000, int streams = 1, double bandwidth = 1e9, double latency = 1e-6) {
  auto gpu = [&](std::string name) {
    return Device{.name = std::move(name), .kind = DeviceKind::gpu, .model = "test", .peak_flops = 1e12,
                  .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = memory_bytes, .op_overhead_s = 0.0, .streams = streams};
  };
  Link l0{.name = "l0", .a = "gpu:0", .b = "sw", .bandwidth_ab_bytes_per_s = bandwidth, .bandwidth_ba_bytes_per_s = bandwidth, .latency_s = latency};
  Link l1{.name = "l1", .a = "gpu:1", .b = "sw", .bandwidth_ab_bytes_per_s = bandwidth, .bandwidth_ba_bytes_per_s = bandwidth, .latency_s = latency};
  return Cluster::build("test", {gpu("gpu:0"), gpu("gpu:1")}, {"sw"}, {l0, l1});
}

// A graph written op by op with exact op times (tests/algorithms/small_problems.hpp).
using test::Sketch;

struct Priced {
  Graph g;
  Cluster c;
  CostTable costs;
  Simulator sim;
  Priced(Sketch&& s, Cluster cluster, SimOptions options = {})
      : g(std::move(s.b).build()), c(std::move(cluster)), costs(g, c, CostModel::defaults(), &s.profile), sim(g, c, costs, std::move(options)) {}
  const SimResult& on(std::vector<DeviceId> devices) { return sim.simulate(devices); }
};

constexpr double kHop = 1e-6;                   // latency per hop
double xfer(double bytes) { return 2 * kHop + bytes / 1e9; }  // gpu:0 -> gpu:1, cut-through

// Ops that take no time and are made ready by one event run in turn (the one made ready last
// first), each allocating its outputs as it runs: z2 (28 KB) is freed, nobody reading it, before z1
// (20 KB) is allocated. Peak: x + a + z2 = 36 KB. They allocated when made ready, 56 KB (a review).
TEST(Simulator, OpsThatTakeNoTimeAllocateTheirOutputsInTurn) {
  Sketch s;
  TensorId x = s.tensor("x", 4000, TensorKind::data), a = s.tensor("a", 4000), z1 = s.tensor("z1", 20000), z2 = s.tensor("z2", 28000),
           b = s.tensor("b", 4000);
  s.op("A", {x}, {a}, 1.0);
  s.op("Z1", {a}, {z1}, 0.0);
  s.op("Z2", {a}, {z2}, 0.0);
  s.op("B", {a}, {b}, 1.0);
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(res.step_time_s, 2.0);
  EXPECT_EQ(res.devices[0].peak_memory_bytes, 36000u);
  EXPECT_EQ(res.devices[0].ops, 4u);
}

TEST(Simulator, ChainOnOneDeviceTakesTheSumOfItsOps) {
  Sketch s;
  TensorId x = s.tensor("x", 100, TensorKind::data), t1 = s.tensor("t1", 100), t2 = s.tensor("t2", 100), t3 = s.tensor("t3", 100);
  s.op("a", {x}, {t1}, 1.0);
  s.op("b", {t1}, {t2}, 2.0);
  s.op("c", {t2}, {t3}, 3.0);
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 0, 0});
  EXPECT_DOUBLE_EQ(res.step_time_s, 6.0);
  EXPECT_DOUBLE_EQ(res.devices[0].busy_s, 6.0);
  EXPECT_EQ(res.devices[0].ops, 3u);
  EXPECT_EQ(res.transfers, 0u);
  EXPECT_TRUE(res.fits);
}

TEST(Simulator, ForkJoinAcrossDevicesPaysTwoTransfers) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), ta = s.tensor("ta", 1000), tb = s.tensor("tb", 10), tc = s.tensor("tc", 2000),
           td = s.tensor("td", 10);
  s.op("a", {x}, {ta}, 1.0);
  s.op("b", {ta}, {tb}, 0.5);
  s.op("c", {ta}, {tc}, 2.0);
  s.op("d", {tb, tc}, {td}, 1.0);
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 0, 1, 0});
  // c waits for ta to reach gpu:1, d waits for tc to come back.
  EXPECT_THAT(res.step_time_s, DoubleNear(1.0 + xfer(1000) + 2.0 + xfer(2000) + 1.0, 1e-12));
  EXPECT_EQ(res.transfers, 2u);
  EXPECT_DOUBLE_EQ(res.transfer_bytes, 3000.0);
  // Both channels of each direction carried the bytes once.
  double total = 0;
  for (double bytes : res.channel_bytes) total += bytes;
  EXPECT_DOUBLE_EQ(total, 2 * 3000.0);
}

// split (1 s) makes p and q (1 MB each); use_p and use_q (0.1 ms) read them. Placed {0, 1, 1},
// both copies take the same link: q's waits for p's.
Priced two_copies_on_one_link(Cluster cluster = two_gpus()) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), p = s.tensor("p", 1'000'000), q = s.tensor("q", 1'000'000);
  TensorId op = s.tensor("op", 10), oq = s.tensor("oq", 10);
  s.op("split", {x}, {p, q}, 1.0);
  s.op("use_p", {p}, {op}, 0.0001);
  s.op("use_q", {q}, {oq}, 0.0001);
  return Priced(std::move(s), std::move(cluster));
}

TEST(Simulator, TransfersOnOneLinkWaitForEachOther) {
  Priced r = two_copies_on_one_link();
  const SimResult& res = r.on({0, 1, 1});
  // q's copy starts when p's ends: 1 + 2 * (2 us + 1 ms), then use_q.
  EXPECT_THAT(res.step_time_s, DoubleNear(1.0 + 2 * xfer(1e6) + 0.0001, 1e-12));
}

TEST(Simulator, ATensorIsSentOncePerDestinationDevice) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), t = s.tensor("t", 5000);
  TensorId o1 = s.tensor("o1", 10), o2 = s.tensor("o2", 10), o3 = s.tensor("o3", 10);
  s.op("make", {x}, {t}, 1.0);
  s.op("r1", {t}, {o1}, 1.0);
  s.op("r2", {t}, {o2}, 1.0);
  s.op("r3", {t}, {o3}, 1.0);
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 1, 1, 1});
  EXPECT_EQ(res.transfers, 1u);
  EXPECT_DOUBLE_EQ(res.transfer_bytes, 5000.0);
  EXPECT_THAT(res.step_time_s, DoubleNear(1.0 + xfer(5000) + 3.0, 1e-12));
}

TEST(Simulator, TwoHopRouteAddsLatenciesAndUsesTheBottleneck) {
  // gpu:0 -(10 GB/s)- sw -(1 GB/s)- gpu:1: the slower hop sets the pace.
  auto gpu = [](std::string name) {
    return Device{.name = std::move(name), .kind = DeviceKind::gpu, .model = "t", .peak_flops = 1e12,
                  .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1 << 20, .op_overhead_s = 0.0};
  };
  Cluster c = Cluster::build("hops", {gpu("gpu:0"), gpu("gpu:1")}, {"sw"},
                             {Link{.name = "fast", .a = "gpu:0", .b = "sw", .bandwidth_ab_bytes_per_s = 1e10,
                                   .bandwidth_ba_bytes_per_s = 1e10, .latency_s = 3e-6},
                              Link{.name = "slow", .a = "sw", .b = "gpu:1", .bandwidth_ab_bytes_per_s = 1e9,
                                   .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 5e-6}});
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), t = s.tensor("t", 4000), o = s.tensor("o", 10);
  s.op("a", {x}, {t}, 1.0);
  s.op("b", {t}, {o}, 1.0);
  Priced r(std::move(s), std::move(c));
  EXPECT_THAT(r.on({0, 1}).step_time_s, DoubleNear(1.0 + 8e-6 + 4000 / 1e9 + 1.0, 1e-12));
}

// gpu:0 and gpu:1 joined through `switches` switches in series (links of 1 GB/s, no latency).
Cluster chain_of_switches(int switches) {
  auto gpu = [](std::string name) {
    return Device{.name = std::move(name), .kind = DeviceKind::gpu, .model = "t", .peak_flops = 1e12,
                  .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1 << 30, .op_overhead_s = 0.0};
  };
  std::vector<std::string> names;
  std::vector<Link> links;
  std::string from = "gpu:0";
  for (int i = 0; i <= switches; ++i) {
    const std::string to = i == switches ? "gpu:1" : "s" + std::to_string(i);
    if (i < switches) names.push_back(to);
    links.push_back(Link{.name = "l" + std::to_string(i), .a = from, .b = to, .bandwidth_ab_bytes_per_s = 1e9,
                         .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 0.0});
    from = to;
  }
  return Cluster::build("chain", {gpu("gpu:0"), gpu("gpu:1")}, std::move(names), std::move(links));
}

// Channels that the same routes cross are reserved together: one stands for all in the event
// loop. Switches in series (20,000 held 20,000 channels per transfer: 9 s per simulation, a
// fuzzing review) then contend as one link, with every channel's bytes still counted.
TEST(Simulator, SwitchesInSeriesContendAsOneLink) {
  for (int switches : {1, 3, 20000}) {
    SCOPED_TRACE(switches);
    Priced r = two_copies_on_one_link(chain_of_switches(switches));
    const SimResult& res = r.on({0, 1, 1});
    // q's copy waits for p's on the chain: 1 + 2 ms, then use_q.
    EXPECT_THAT(res.step_time_s, DoubleNear(1.0 + 2 * 1e-3 + 0.0001, 1e-12));
    ASSERT_EQ(res.channel_bytes.size(), 2u * (switches + 1));
    for (std::size_t ch = 0; ch < res.channel_bytes.size(); ++ch) EXPECT_EQ(res.channel_bytes[ch], ch % 2 == 0 ? 2e6 : 0.0) << ch;
    // The critical path: use_q, q's copy, which waited for p's, p's, split.
    const auto path = r.sim.critical_path();
    ASSERT_EQ(path.size(), 4u);
    EXPECT_EQ(path[1].kind, PathStep::Kind::transfer);
    EXPECT_EQ(path[2].kind, PathStep::Kind::transfer);
    EXPECT_EQ(path[3].kind, PathStep::Kind::op);
  }
}

// Channels crossed by different routes are not merged: gpu:0 reaches gpu:1 and gpu:2 over one
// chain (gpu:0 - a - b), then each over its own link from b.
TEST(Simulator, OnlyChannelsOfTheSameRoutesAreMerged) {
  auto gpu = [](std::string name) {
    return Device{.name = std::move(name), .kind = DeviceKind::gpu, .model = "t", .peak_flops = 1e12,
                  .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1 << 30, .op_overhead_s = 0.0};
  };
  auto link = [](std::string a, std::string b) {
    return Link{.name = a + "-" + b, .a = a, .b = b, .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 0.0};
  };
  const Cluster c = Cluster::build("fork", {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")}, {"a", "b"},
                                   {link("gpu:0", "a"), link("a", "b"), link("b", "gpu:1"), link("b", "gpu:2")});
  // make0 (gpu:0) and make1 (gpu:1) each make 1 MB at 1 s, read on other devices.
  auto step = [&](DeviceId p_to, DeviceId r_to) {
    Sketch s;
    TensorId x0 = s.tensor("x0", 10, TensorKind::data), x1 = s.tensor("x1", 10, TensorKind::data);
    TensorId p = s.tensor("p", 1'000'000), r = s.tensor("r", 1'000'000), o1 = s.tensor("o1", 10), o2 = s.tensor("o2", 10);
    s.op("make0", {x0}, {p}, 1.0);
    s.op("make1", {x1}, {r}, 1.0);
    s.op("use_p", {p}, {o1}, 0.0001);
    s.op("use_r", {r}, {o2}, 0.0001);
    Priced priced(std::move(s), c);
    return priced.on({0, 1, p_to, r_to}).step_time_s;
  };
  // p over gpu:0 -> a -> b -> gpu:1 and r over gpu:1 -> b -> gpu:2 share no channel: both copies
  // take 1 ms at once.
  EXPECT_THAT(step(1, 2), DoubleNear(1.0 + 1e-3 + 0.0001, 1e-12));
  // p to gpu:2 and r to gpu:0 (gpu:1 -> b -> a -> gpu:0): opposite directions, no wait either.
  EXPECT_THAT(step(2, 0), DoubleNear(1.0 + 1e-3 + 0.0001, 1e-12));
  // p to gpu:2, r to gpu:2: both cross b -> gpu:2, the second waits.
  EXPECT_THAT(step(2, 2), DoubleNear(1.0 + 2e-3 + 0.0001, 1e-12));
}

TEST(Simulator, ParametersAreSentToRemoteReadersAtTimeZero) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), w = s.tensor("w", 1000, TensorKind::parameter);
  TensorId y = s.tensor("y", 10), z = s.tensor("z", 10);
  s.op("first", {x, w}, {y}, 1.0);   // home of w: gpu:0
  s.op("second", {y, w}, {z}, 1.0);  // reads w on gpu:1
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 1});
  EXPECT_EQ(res.transfers, 2u);  // w at time 0, y after "first"
  EXPECT_THAT(res.step_time_s, DoubleNear(1.0 + xfer(10) + 1.0, 1e-12));
}

// Folded ops (Graph::op_folded) run before the step: their values are in the memory of every
// device that reads them, and nobody waits for them or sends them.
TEST(Simulator, SetUpValuesAreNeitherWaitedForNorSent) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), k = s.tensor("k", 8, TensorKind::constant);
  TensorId c = s.tensor("c", 32), u = s.tensor("u", 32), y = s.tensor("y", 10), z = s.tensor("z", 10);
  s.b.add_op({.name = "const", .type = "Constant", .outputs = {c}});
  s.b.add_op({.name = "unsq", .type = "Unsqueeze", .inputs = {c, k}, .outputs = {u}});
  s.op("first", {x, u}, {y}, 1.0);
  s.op("second", {y, u, k}, {z}, 1.0);
  Priced r(std::move(s), two_gpus());
  ASSERT_TRUE(r.g.op_folded(0) && r.g.op_folded(1));
  const SimResult& res = r.on({1, 1, 0, 1});
  EXPECT_EQ(res.transfers, 1u);  // y only
  EXPECT_THAT(res.step_time_s, DoubleNear(1.0 + xfer(10) + 1.0, 1e-12));
  EXPECT_EQ(res.devices[0].static_memory_bytes, 10u + 32u);  // x, u
  EXPECT_EQ(res.devices[1].static_memory_bytes, 32u + 8u);   // u, k
  EXPECT_EQ(res.devices[0].ops + res.devices[1].ops, 2u);     // the folded ops run before the step
  // Wherever the folded ops are placed.
  EXPECT_THAT(r.on({0, 0, 0, 1}).step_time_s, DoubleNear(1.0 + xfer(10) + 1.0, 1e-12));
  EXPECT_EQ(r.sim.result().transfers, 1u);
  auto path = r.sim.critical_path();
  ASSERT_EQ(path.size(), 3u);  // second <- y's transfer <- first
  EXPECT_EQ(path.back().id, 2u);
}

// The common case in exported transformers: the shape of an activation feeds a reshape on another
// device. Shapes are static, so the reshape waits for nothing but its data, and nothing is sent
// for the shape; nor does the lower bound wait for it.
TEST(Simulator, AShapeIsKnownBeforeTheStepWhereverItsTensorIs) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), y = s.tensor("y", 1000), shp = s.tensor("shape", 16);
  TensorId w = s.tensor("w", 10, TensorKind::data), z = s.tensor("z", 10);
  s.op("a", {x}, {y}, 1.0);
  s.b.add_op({.name = "shape", .type = "Shape", .inputs = {y}, .outputs = {shp}});
  s.op("b", {w, shp}, {z}, 1.0);
  Priced r(std::move(s), two_gpus());
  ASSERT_TRUE(r.g.op_folded(1));
  const SimResult& res = r.on({0, 0, 1});
  EXPECT_EQ(res.transfers, 0u);
  EXPECT_DOUBLE_EQ(res.step_time_s, 1.0);  // a and b run side by side
  EXPECT_EQ(res.devices[1].static_memory_bytes, 10u + 16u);  // w and the shape
  const LowerBounds lb = lower_bounds(r.g, r.c, r.costs);
  EXPECT_DOUBLE_EQ(lb.critical_path_s, 1.0);
  EXPECT_LE(lb.best(), res.step_time_s + 1e-12);
}

TEST(SimulatorMemory, PeakCountsLiveActivationsByHand) {
  Sketch s;
  TensorId x = s.tensor("x", 100, TensorKind::data), t1 = s.tensor("t1", 200), t2 = s.tensor("t2", 300), t3 = s.tensor("t3", 50);
  s.op("a", {x}, {t1}, 1.0);
  s.op("b", {t1}, {t2}, 1.0);
  s.op("c", {t2}, {t3}, 1.0);
  s.b.mark_output(t3);
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 0, 0});
  // While b runs: x (static) + t1 (its input) + t2 (its output) = 600 bytes.
  EXPECT_EQ(res.devices[0].static_memory_bytes, 100u);
  EXPECT_EQ(res.devices[0].peak_memory_bytes, 600u);
  EXPECT_EQ(res.devices[1].peak_memory_bytes, 0u);
}

TEST(SimulatorMemory, ACopyOccupiesTheDestinationToo) {
  Sketch s;
  TensorId x = s.tensor("x", 100, TensorKind::data), t = s.tensor("t", 400), o = s.tensor("o", 30);
  s.op("a", {x}, {t}, 1.0);
  s.op("b", {t}, {o}, 1.0);
  Priced r(std::move(s), two_gpus());
  const SimResult& res = r.on({0, 1});
  EXPECT_EQ(res.devices[0].peak_memory_bytes, 500u);  // x + t until its copy is sent
  EXPECT_EQ(res.devices[1].peak_memory_bytes, 430u);  // the copy of t + o
}

// An alias op (Reshape here): no kernel, and its output is a view of its input's storage.
OpId view(Sketch& s, const std::string& name, TensorId in, TensorId out) {
  s.profile.set_by_name(DeviceKind::gpu, name, 0.0);
  OpSpec spec{.name = name, .type = "Reshape", .inputs = {in}, .outputs = {out}};
  spec.work.op_class = OpClass::alias;
  return s.b.add_op(std::move(spec));
}

TEST(SimulatorMemory, AViewSharesItsInputsStorage) {
  Sketch s;
  TensorId x = s.tensor("x", 100, TensorKind::data), t1 = s.tensor("t1", 200), t2 = s.tensor("t2", 200), t3 = s.tensor("t3", 50);
  s.op("a", {x}, {t1}, 1.0);
  view(s, "r", t1, t2);
  s.op("b", {t2}, {t3}, 1.0);
  s.b.mark_output(t3);
  Priced r(std::move(s), two_gpus());
  // While b runs: x + t1 (viewed by t2, so alive until b is done) + t3; t2 takes nothing.
  EXPECT_EQ(r.on({0, 0, 0}).devices[0].peak_memory_bytes, 350u);
  // Read on another device, the view is sent like any tensor (its storage stays on gpu:0 until the
  // copy has arrived) and the copy is memory of its own there.
  const SimResult& across = r.on({0, 0, 1});
  EXPECT_EQ(across.devices[0].peak_memory_bytes, 300u);
  EXPECT_EQ(across.devices[1].peak_memory_bytes, 250u);
  EXPECT_EQ(across.transfers, 1u);
  // A view placed away from its input views the input's copy there.
  const SimResult& moved = r.on({0, 1, 1});
  EXPECT_EQ(moved.devices[0].peak_memory_bytes, 300u);
  EXPECT_EQ(moved.devices[1].peak_memory_bytes, 250u);
}

// An alias op with a second output (an inference Dropout whose mask is read): its first output is
// a view, its mask memory of its own (both took memory before; found by a review).
TEST(SimulatorMemory, AnAliasOpsSecondOutputIsATensorOfItsOwn) {
  Sketch s;
  TensorId x = s.tensor("x", 1, TensorKind::data), t = s.tensor("t", 1000), d = s.tensor("d", 1000), mask = s.tensor("mask", 250);
  TensorId b = s.tensor("b", 1000);
  s.op("A", {x}, {t}, 1.0);
  s.profile.set_by_name(DeviceKind::gpu, "D", 0.0);
  OpSpec dropout{.name = "D", .type = "Dropout", .inputs = {t}, .outputs = {d, mask}};
  dropout.work.op_class = OpClass::alias;
  s.b.add_op(std::move(dropout));
  s.op("B", {d}, {b}, 1.0);
  s.b.mark_output(b);
  s.b.mark_output(mask);
  Priced r(std::move(s), two_gpus(1'000'000));
  // While B runs: x + t (viewed by d) + mask + b.
  EXPECT_EQ(r.on({0, 0, 0}).devices[0].peak_memory_bytes, 1u + 1000u + 250u + 1000u);
}

// A kernel whose outputs include declared views of its first input (Add's gradient passed
// through to both operands, with a third output of its own): the views take nothing, and the
// viewed storage lives until every view's readers (and transfers) are done.
TEST(SimulatorMemory, DeclaredViewsOfAKernelShareItsFirstInput) {
  Sketch s;
  TensorId x = s.tensor("x", 1, TensorKind::data), t = s.tensor("t", 1000), v1 = s.tensor("v1", 1000), v2 = s.tensor("v2", 1000);
  TensorId own = s.tensor("own", 10), b1 = s.tensor("b1", 100), c1 = s.tensor("c1", 100);
  s.op("A", {x}, {t}, 1.0);
  s.profile.set_by_name(DeviceKind::gpu, "P", 1.0);
  OpSpec pass{.name = "P", .type = "AddGrad", .inputs = {t}, .outputs = {v1, v2, own}, .view_outputs = 3u};
  pass.work.op_class = OpClass::elementwise;
  s.b.add_op(std::move(pass));
  s.op("B", {v1}, {b1}, 1.0);
  s.op("C", {v2}, {c1}, 1.0);
  for (TensorId out : {own, b1, c1}) s.b.mark_output(out);
  Priced r(std::move(s), two_gpus(1'000'000));
  // While C runs: x + t (viewed by v1 and v2) + own + b1 + c1.
  EXPECT_EQ(r.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 1000u + 10u + 100u + 100u);
  // C on gpu:1: v2 is sent (t stays on gpu:0 until it has left) and its copy is memory there.
  const SimResult& across = r.on({0, 0, 0, 1});
  EXPECT_EQ(across.devices[0].peak_memory_bytes, 1u + 1000u + 10u + 100u);
  EXPECT_EQ(across.devices[1].peak_memory_bytes, 1000u + 100u);
  EXPECT_EQ(across.transfers, 1u);
}

// A Transpose is a view (PyTorch's permute): a weight's transpose read by a matrix product takes
// no memory beside the weight (GPT-2's tied head: 154 MB counted twice before).
TEST(SimulatorMemory, ATransposeIsAViewOfItsInput) {
  Sketch s;
  TensorId x = s.tensor("x", 100, TensorKind::data), w = s.tensor("w", 1000, TensorKind::parameter);
  TensorId wt = s.tensor("wt", 1000), y = s.tensor("y", 10);
  s.profile.set_by_name(DeviceKind::gpu, "T", 1.0);
  OpSpec t{.name = "T", .type = "Transpose", .inputs = {w}, .outputs = {wt}};
  t.work.op_class = OpClass::data_movement;
  s.b.add_op(std::move(t));
  s.op("mm", {x, wt}, {y}, 1.0);
  s.b.mark_output(y);
  Priced r(std::move(s), two_gpus());
  EXPECT_EQ(r.on({0, 0}).devices[0].peak_memory_bytes, 100u + 1000u + 10u);
  // Read on another device, the view is sent (a copy of 1,000 bytes there).
  EXPECT_EQ(r.on({0, 1}).devices[1].peak_memory_bytes, 100u + 1000u + 10u);
}

// Three gradient ops A, B and C each write a 1000-byte partial (g1, g2, g3) of one tensor's
// gradient; S sums them; g2 and g3 are summed into g1 as they come when `accumulated`.
Sketch partial_sums(bool accumulated, double a_seconds = 1.0) {
  Sketch s;
  TensorId x = s.tensor("x", 1, TensorKind::data), g1 = s.tensor("g1", 1000, TensorKind::gradient);
  TensorId g2 = s.tensor("g2", 1000, TensorKind::gradient), g3 = s.tensor("g3", 1000, TensorKind::gradient);
  TensorId sum = s.tensor("sum", 10);
  s.op("A", {x}, {g1}, a_seconds);
  s.op("B", {x}, {g2}, 1.0);
  s.op("C", {x}, {g3}, 2.5);
  s.op("S", {g1, g2, g3}, {sum}, 1.0);
  s.b.mark_output(sum);
  if (accumulated) s.b.set_tensor_accumulated(g2), s.b.set_tensor_accumulated(g3);
  return s;
}

// Partial gradients summed as they arrive (Graph::tensor_accumulated, autograd's input buffer):
// each after the first is freed once it is available to its reader, not when the reader runs.
// A, B and C on gpu:0 (C on gpu:1 below: it ends after B).
TEST(SimulatorMemory, PartialGradientsSummedOnArrivalAreFreedThen) {
  auto sketch = [](bool accumulated) { return partial_sums(accumulated); };
  Priced held(sketch(false), two_gpus());
  // Without: all three live while S runs: x + 3 x 1000 + sum.
  EXPECT_EQ(held.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 3000u + 10u);
  Priced summed(sketch(true), two_gpus());
  // With: g2 lives only while B runs, g3 while C runs: the peak is x + g1 + one other (2,001), and
  // while S runs x + g1 + sum.
  EXPECT_EQ(summed.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 2000u);
  // C on gpu:1: g3 is made there (1,000 + x's copy), sent, and its copy on gpu:0 is freed when it
  // arrives; the schedule is the same as without the flag.
  const SimResult& across = summed.on({0, 0, 1, 0});
  EXPECT_EQ(across.devices[1].peak_memory_bytes, 1u + 1000u);
  EXPECT_EQ(across.devices[0].peak_memory_bytes, 1u + 2000u);
  EXPECT_EQ(across.step_time_s, held.on({0, 0, 1, 0}).step_time_s);
  // The step's memory back to its static part: everything taken was given back.
  EXPECT_EQ(summed.on({0, 0, 0, 0}).devices[0].static_memory_bytes, 1u);

  // Summed out of place (libtorch 1.x): as g2 is summed into g1, the new sum is written while both
  // are live (x + g1 + g2 + the sum: 3,001), and likewise for g3; nothing else changes.
  Priced copied(sketch(true), two_gpus(), SimOptions{.gradient_sums_out_of_place = true});
  EXPECT_EQ(copied.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 3000u);
  // g3 made on gpu:1: summed when its copy arrives on gpu:0 (x + g1 + the copy + the sum); gpu:1
  // only makes and sends it.
  const SimResult& copied_across = copied.on({0, 0, 1, 0});
  EXPECT_EQ(copied_across.devices[0].peak_memory_bytes, 1u + 3000u);
  EXPECT_EQ(copied_across.devices[1].peak_memory_bytes, 1u + 1000u);
  EXPECT_EQ(copied_across.step_time_s, held.on({0, 0, 1, 0}).step_time_s);
  // Without partials summed on arrival (all held), the option changes nothing.
  Priced held_copied(sketch(false), two_gpus(), SimOptions{.gradient_sums_out_of_place = true});
  EXPECT_EQ(held_copied.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 3000u + 10u);
}

// A partial that is there before its sum's first partial is held in the first's place (autograd's
// input buffer keeps the first partial to come, and adds each later one into it); it was freed at
// once, so that nothing of the gradient counted until the first came (a QA pass). As above, with A
// (which makes the first partial, g1) on gpu:1 and slower: B's g2 is made on gpu:0 at 1 s.
TEST(SimulatorMemory, APartialBeforeItsFirstIsHeldInItsPlace) {
  auto sketch = [](double a_seconds) { return partial_sums(true, a_seconds); };
  // g1 arrives at 2 s, while C runs: until then gpu:0 holds x's copy, g2 (held for g1), g3 and,
  // from 2 s, g1's copy.
  Priced r(sketch(2.0), two_gpus());
  const SimResult& res = r.on({1, 0, 0, 0});
  EXPECT_EQ(res.devices[0].peak_memory_bytes, 1u + 3000u);
  EXPECT_EQ(res.devices[1].peak_memory_bytes, 1u + 1000u);
  // Out of place: when g1 arrives, g2 + g1 is written beside both (and g3, being made): 4,001.
  Priced copied(sketch(2.0), two_gpus(), SimOptions{.gradient_sums_out_of_place = true});
  EXPECT_EQ(copied.on({1, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 4000u);
  // The first partial first (A on gpu:0 too, first in program order): nothing is held, as before.
  EXPECT_EQ(r.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 2000u);
  // g1 at 4 s, after g3 (3.5 s): one partial is held, g2; g3 is added into it and freed (both were
  // held: 3,001, a review). At most x + g2 + g3 while C runs, or x + g2 + g1's copy.
  Priced later(sketch(4.0), two_gpus());
  EXPECT_EQ(later.on({1, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 2000u);
  // Out of place, g3 into g2 and then g1 into that sum are each written beside both (x's copy is
  // gone by then, C being its last reader there): 3,000.
  Priced later_copied(sketch(4.0), two_gpus(), SimOptions{.gradient_sums_out_of_place = true});
  EXPECT_EQ(later_copied.on({1, 0, 0, 0}).devices[0].peak_memory_bytes, 3000u);
}

// A held partial that is a view keeps what it views (B's t, which P, its last reader, freed when
// it finished), until the first partial is there: it was counted as nothing (a review).
TEST(SimulatorMemory, AHeldPartialThatIsAViewKeepsWhatItViews) {
  Sketch s;
  TensorId x = s.tensor("x", 1, TensorKind::data), g1 = s.tensor("g1", 1000, TensorKind::gradient), t = s.tensor("t", 1000);
  TensorId v = s.tensor("v", 1000, TensorKind::gradient), sum = s.tensor("sum", 10);
  s.op("A", {x}, {g1}, 4.0);
  s.op("B", {x}, {t}, 1.0);
  s.profile.set_by_name(DeviceKind::gpu, "P", 1.0);
  OpSpec pass{.name = "P", .type = "AddGrad", .inputs = {t}, .outputs = {v}, .view_outputs = 1u};
  pass.work.op_class = OpClass::elementwise;
  s.b.add_op(std::move(pass));
  s.op("S", {g1, v}, {sum}, 1.0);
  s.b.mark_output(sum);
  s.b.set_tensor_accumulated(v);
  Priced r(std::move(s), two_gpus());
  // gpu:0 from 4 s: t (kept by v, held for g1) and g1's copy (x's copy went with B, its last reader
  // there); only x's copy and t before.
  EXPECT_EQ(r.on({1, 0, 0, 0}).devices[0].peak_memory_bytes, 2000u);
  // Made after g1 (all on gpu:0, A first): v is summed at once and t freed: x + g1 + t at most.
  EXPECT_EQ(r.on({0, 0, 0, 0}).devices[0].peak_memory_bytes, 1u + 2000u);
}

// A CPU convolution holds its workspace while it runs (CostTable::workspace_bytes: oneDNN's
// reordered operands, the larger of input and output plus the weight), freed when it ends; a GPU
// holds none. A stride-2 convolution of x [16,8,10,10] (51,200 bytes) into y [16,8,5,5] (12,800),
// weight 2,304 bytes, then a Relu.
TEST(SimulatorMemory, ACpuConvolutionHoldsItsWorkspaceWhileItRuns) {
  GraphBuilder b("conv");
  const TensorId x = b.add_tensor("x", {16, 8, 10, 10}, DType::f32, TensorKind::data);
  const TensorId w = b.add_tensor("w", {8, 8, 3, 3}, DType::f32, TensorKind::parameter);
  const TensorId y = b.add_tensor("y", {16, 8, 5, 5}, DType::f32, TensorKind::activation);
  const TensorId r = b.add_tensor("r", {16, 8, 5, 5}, DType::f32, TensorKind::activation);
  Attributes strided;
  strided.set(Attribute{.name = "strides", .kind = Attribute::Kind::integers, .ints = {2, 2}});
  b.add_op({.name = "conv", .type = "Conv", .inputs = {x, w}, .outputs = {y}, .attrs = strided, .work = {1e6, 1e5, 1e5, OpClass::conv}});
  b.add_op({.name = "relu", .type = "Relu", .inputs = {y}, .outputs = {r}, .work = {1e3, 1e4, 1e4, OpClass::elementwise}});
  b.mark_output(r);
  const Graph g = std::move(b).build();
  auto device = [](std::string name, DeviceKind kind) {
    return Device{.name = std::move(name), .kind = kind, .model = "test", .peak_flops = 1e12, .memory_bandwidth_bytes_per_s = 1e12,
                  .memory_bytes = 1'000'000};
  };
  const Cluster c = Cluster::build("t", {device("cpu:0", DeviceKind::cpu), device("gpu:0", DeviceKind::gpu)}, {},
                                   {Link{.a = "cpu:0", .b = "gpu:0", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9,
                                         .latency_s = 1e-6}});
  const CostTable costs(g, c, CostModel::defaults());
  // The larger of input and output: a first layer's 8 channels in blocks of 8 (the input as it
  // is), no blocked weight beside an input of under 16 channels; the output in blocks of 16.
  ASSERT_EQ(costs.workspace_bytes(0, 0), 51200u);
  Simulator sim(g, c, costs);
  // The GPU's peak: x, w, y and r while the Relu runs.
  EXPECT_EQ(sim.simulate(std::vector<DeviceId>{1, 1}).devices[1].peak_memory_bytes, 51200u + 2304u + 12800u + 12800u);
  // The CPU's: x, w, y and the workspace while the convolution runs; the workspace is gone by the Relu.
  const SimResult& on_cpu = sim.simulate(std::vector<DeviceId>{0, 0});
  EXPECT_EQ(on_cpu.devices[0].peak_memory_bytes, 51200u + 2304u + 12800u + 51200u);
  EXPECT_EQ(on_cpu.devices[0].static_memory_bytes, 51200u + 2304u);
  // Run twice: what the run took it gave back.
  EXPECT_EQ(sim.simulate(std::vector<DeviceId>{0, 0}).devices[0].peak_memory_bytes, 51200u + 2304u + 12800u + 51200u);
}

// Optimizer state is kept for the parameters the step updates: none for one no gradient reaches.
TEST(SimulatorMemory, OptimizerStateOnlyForUpdatedParameters) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), w = s.tensor("w", 100, TensorKind::parameter);
  TensorId k = s.tensor("k", 1000, TensorKind::parameter), y = s.tensor("y", 10), m = s.tensor("m", 10);
  s.op("f", {x, w}, {y}, 1.0);
  s.op("cmp", {k}, {m}, 1.0);
  s.profile.set_by_name(DeviceKind::gpu, "update/w", 1.0);
  s.b.add_op({.name = "update/w", .type = "AdamUpdate", .inputs = {w}, .outputs = {}, .role = OpRole::update, .param = w,
              .work = {1, 1, 1, OpClass::optimizer}});
  s.b.set_num_forward_ops(2);
  s.b.set_optimizer_state_copies(2);
  s.b.mark_output(y);
  s.b.mark_output(m);
  Priced r(std::move(s), two_gpus(1'000'000));
  EXPECT_EQ(r.on({0, 0, 0}).devices[0].static_memory_bytes, 10u + 100u + 2u * 100u + 1000u);
}

// A view that is a graph output keeps the storage it views to the end of the step.
TEST(SimulatorMemory, AViewThatIsAnOutputKeepsItsInput) {
  Sketch s;
  TensorId x = s.tensor("x", 100, TensorKind::data), t1 = s.tensor("t1", 200), t2 = s.tensor("t2", 200), t4 = s.tensor("t4", 300);
  s.op("a", {x}, {t1}, 1.0);
  view(s, "r", t1, t2);
  s.op("c", {x}, {t4}, 1.0);
  s.b.mark_output(t2);
  s.b.mark_output(t4);
  Priced r(std::move(s), two_gpus());
  EXPECT_EQ(r.on({0, 0, 0}).devices[0].peak_memory_bytes, 600u);  // x + t1 + t4 while c runs
}

// A graph output stays to the end on the device that made it; its copy on another device is freed
// after its last reader there, like any copy.
TEST(SimulatorMemory, AnOutputsCopyIsFreedAfterItsReaders) {
  // x -> a -> r1 -> b -> r2 -> c -> r3, outputs r1 and r3; a on gpu:0, b and c on gpu:1.
  auto peaks = [](std::int64_t r3_bytes) {
    Sketch s;
    TensorId x = s.tensor("x", 100, TensorKind::data), r1 = s.tensor("r1", 400), r2 = s.tensor("r2", 200), r3 = s.tensor("r3", r3_bytes);
    s.op("a", {x}, {r1}, 1.0);
    s.op("b", {r1}, {r2}, 1.0);
    s.op("c", {r2}, {r3}, 1.0);
    s.b.mark_output(r1);
    s.b.mark_output(r3);
    Priced r(std::move(s), two_gpus());
    const SimResult& res = r.on({0, 1, 1});
    return std::pair{res.devices[0].peak_memory_bytes, res.devices[1].peak_memory_bytes};
  };
  const auto [gpu0, gpu1] = peaks(50);
  EXPECT_EQ(gpu0, 500u);  // x + r1, which stays there
  // The copy of r1 + r2 while b runs; while c runs, r2 + r3 only (the copy of r1 is gone).
  EXPECT_EQ(gpu1, 600u);
  // Kept on gpu:1 too, the copy would have made c's peak 400 + 200 + r3.
  EXPECT_EQ(peaks(500).second, 700u);  // r2 + r3, not 1100 with the copy of r1
}

TEST(SimulatorMemory, OutOfMemoryIsReportedWithTheShortfall) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), w = s.tensor("w", 5000, TensorKind::parameter), y = s.tensor("y", 10);
  s.op("a", {x, w}, {y}, 1.0);
  Priced r(std::move(s), two_gpus(/*memory_bytes=*/4000));
  const SimResult& res = r.on({0});
  EXPECT_FALSE(res.fits);
  ASSERT_EQ(res.shortfalls.size(), 1u);
  EXPECT_EQ(res.shortfalls[0].first, 0u);
  EXPECT_EQ(res.shortfalls[0].second, 5000u + 10u + 10u - 4000u);
}

// A capacity near 2^64 is a limit near 2^64 (a conversion through double once made it 0).
TEST(SimulatorMemory, AHugeCapacityIsNoLimit) {
  Sketch s;
  TensorId x = s.tensor("x", 600, TensorKind::data), y = s.tensor("y", 10);
  s.op("a", {x}, {y}, 1.0);
  Priced r(std::move(s), two_gpus(std::numeric_limits<std::uint64_t>::max()));
  const SimResult& res = r.on({0});
  EXPECT_TRUE(res.fits);
  EXPECT_EQ(res.devices[0].capacity_bytes, std::numeric_limits<std::uint64_t>::max());
}

TEST(SimulatorMemory, MemoryFractionLowersTheLimit) {
  Sketch s;
  TensorId x = s.tensor("x", 600, TensorKind::data), y = s.tensor("y", 10);
  s.op("a", {x}, {y}, 1.0);
  Graph g = std::move(s.b).build();
  Cluster c = two_gpus(1000);
  CostTable costs(g, c, CostModel::defaults(), &s.profile);
  EXPECT_TRUE(Simulator(g, c, costs).simulate(std::vector<DeviceId>{0}).fits);
  EXPECT_FALSE(Simulator(g, c, costs, SimOptions{.memory_fraction = 0.5}).simulate(std::vector<DeviceId>{0}).fits);
}

TEST(Simulator, StreamsRunIndependentOpsTogether) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), a = s.tensor("ta", 10), b = s.tensor("tb", 10);
  s.op("a", {x}, {a}, 1.0);
  s.op("b", {x}, {b}, 1.0);
  Priced one(std::move(s), two_gpus(1'000'000, 1));
  EXPECT_DOUBLE_EQ(one.on({0, 0}).step_time_s, 2.0);
  Sketch s2;
  x = s2.tensor("x", 10, TensorKind::data), a = s2.tensor("ta", 10), b = s2.tensor("tb", 10);
  s2.op("a", {x}, {a}, 1.0);
  s2.op("b", {x}, {b}, 1.0);
  Priced two(std::move(s2), two_gpus(1'000'000, 2));
  EXPECT_DOUBLE_EQ(two.on({0, 0}).step_time_s, 1.0);
}

// (op, start) of every op of a sketch run all on gpu:0, in the order they started.
struct Start {
  std::uint32_t op;
  double start_s;
  bool operator==(const Start&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const Start& s) { return os << "op " << s.op << " at " << s.start_s; }
};
std::vector<Start> run_order(Sketch&& s) {
  Priced r(std::move(s), two_gpus());
  std::vector<TraceEvent> trace;
  r.sim.simulate(std::vector<DeviceId>(r.g.num_ops(), 0), trace);
  std::vector<Start> out;
  for (const TraceEvent& e : trace)
    if (e.kind == TraceEvent::Kind::op) out.push_back({e.id, e.start_s});
  return out;
}

TEST(Simulator, ReadyOpsStartInProgramOrder) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), a = s.tensor("ta", 10), b = s.tensor("tb", 10), c = s.tensor("tc", 10);
  s.op("first", {x}, {a}, 1.0);
  s.op("second", {x}, {b}, 1.0);
  s.op("third", {x}, {c}, 1.0);
  EXPECT_THAT(run_order(std::move(s)), ElementsAre(Start{0, 0.0}, Start{1, 1.0}, Start{2, 2.0}));
}

// Program order, not breadth-first: "second" reads "first"'s output and still runs before "third",
// which was ready from the start (the order the reviewer's case ran in until 2026-11-25: first,
// third, second).
TEST(Simulator, AnOpThatBecomesReadyLaterStillGoesFirstInProgramOrder) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), y = s.tensor("y", 10, TensorKind::data);
  TensorId a = s.tensor("ta", 10), b = s.tensor("tb", 10), c = s.tensor("tc", 10);
  s.op("first", {x}, {a}, 1.0);
  s.op("second", {a}, {b}, 1.0);
  s.op("third", {y}, {c}, 1.0);
  EXPECT_THAT(run_order(std::move(s)), ElementsAre(Start{0, 0.0}, Start{1, 1.0}, Start{2, 2.0}));
}

// An op whose input comes through an op of no time (a Reshape of a parameter) is ready at the same
// instant as the others and goes first in program order (found by an audit, 2026-11-28: the device
// started "third" before the alias had finished, so "second" ran after it), at time 0 and after
// an op finishes.
TEST(Simulator, AnOpReadyThroughAnAliasGoesFirstInProgramOrder) {
  Sketch s;
  TensorId w = s.tensor("w", 10, TensorKind::parameter), x = s.tensor("x", 10, TensorKind::data);
  TensorId v = s.tensor("v", 10), b = s.tensor("tb", 10), c = s.tensor("tc", 10);
  s.op("alias", {w}, {v}, 0.0);
  s.op("second", {v}, {b}, 1.0);
  s.op("third", {x}, {c}, 1.0);
  EXPECT_THAT(run_order(std::move(s)), ElementsAre(Start{0, 0.0}, Start{1, 0.0}, Start{2, 1.0}));

  Sketch later;  // the same after "first" finishes at 1
  TensorId x2 = later.tensor("x", 10, TensorKind::data), a = later.tensor("ta", 10), a2 = later.tensor("ta2", 10);
  TensorId b2 = later.tensor("tb", 10), c2 = later.tensor("tc", 10), d2 = later.tensor("td", 10);
  later.op("first", {x2}, {a}, 1.0);
  later.op("alias", {a}, {a2}, 0.0);
  later.op("second", {a2}, {b2}, 1.0);
  later.op("third", {x2}, {c2}, 1.0);
  later.op("fourth", {c2}, {d2}, 1.0);
  EXPECT_THAT(run_order(std::move(later)),
              ElementsAre(Start{0, 0.0}, Start{1, 1.0}, Start{2, 1.0}, Start{3, 2.0}, Start{4, 3.0}));
}

TEST(Simulator, CriticalPathFollowsTheTransfer) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), ta = s.tensor("ta", 1000), tb = s.tensor("tb", 10);
  s.op("a", {x}, {ta}, 1.0);
  s.op("b", {ta}, {tb}, 1.0);
  Priced r(std::move(s), two_gpus());
  r.on({0, 1});
  auto path = r.sim.critical_path();
  ASSERT_EQ(path.size(), 3u);
  EXPECT_EQ(path[0].kind, PathStep::Kind::op);
  EXPECT_EQ(path[0].id, 1u);
  EXPECT_EQ(path[1].kind, PathStep::Kind::transfer);
  EXPECT_EQ(path[2].id, 0u);
}

TEST(Simulator, CriticalPathGoesThroughTheTransferThatHeldTheLink) {
  // q's copy waited for p's, which waited for split.
  Priced r = two_copies_on_one_link();
  r.on({0, 1, 1});
  const TensorId p = r.g.find_tensor("p"), q = r.g.find_tensor("q");
  auto path = r.sim.critical_path();
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(path[0].kind, PathStep::Kind::op);
  EXPECT_EQ(path[0].id, 2u);  // use_q
  EXPECT_EQ(path[1].kind, PathStep::Kind::transfer);
  EXPECT_EQ(path[1].id, q);
  EXPECT_EQ(path[2].kind, PathStep::Kind::transfer);
  EXPECT_EQ(path[2].id, p);
  EXPECT_EQ(path[3].kind, PathStep::Kind::op);
  EXPECT_EQ(path[3].id, 0u);  // split
  EXPECT_DOUBLE_EQ(path[1].start_s, path[2].end_s);
}

std::string numbered(const char* prefix, int i) {
  std::string name = prefix;
  name += std::to_string(i);
  return name;
}

TEST(Simulator, CriticalPathHasNoGapsOnRandomGraphsAndPlacements) {
  // Each step of the path starts when the one before it (later in the vector) ends, from time 0 to
  // the step time: ops wait for an input, their device or nothing; transfers for their tensor or
  // the transfer that held a link of their route. Three GPUs behind one switch, so that copies
  // contend on the switch's links.
  auto gpu = [](std::string name) {
    return Device{.name = std::move(name), .kind = DeviceKind::gpu, .model = "test", .peak_flops = 1e12,
                  .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1'000'000'000, .op_overhead_s = 0.0, .streams = 1};
  };
  std::vector<Link> links;
  for (int i = 0; i < 3; ++i)
    links.push_back({.name = numbered("l", i), .a = numbered("gpu:", i), .b = "sw", .bandwidth_ab_bytes_per_s = 1e9,
                     .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 1e-6});
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(numbered("trial ", trial));
    Sketch s;
    std::vector<TensorId> made{s.tensor("x", 1000, TensorKind::data)};
    const int n = 40;
    for (int i = 0; i < n; ++i) {
      std::vector<TensorId> in{made[rng() % made.size()]};
      if (rng() % 2) in.push_back(made[rng() % made.size()]);
      if (in.size() == 2 && in[0] == in[1]) in.pop_back();
      const TensorId out = s.tensor(numbered("t", i), static_cast<std::int64_t>(1000 + rng() % 3'000'000));
      s.op(numbered("op", i), in, {out}, 1e-4 * static_cast<double>(1 + rng() % 50));
      made.push_back(out);
    }
    Priced r(std::move(s), Cluster::build("star", {gpu("gpu:0"), gpu("gpu:1"), gpu("gpu:2")}, {"sw"}, links));
    std::vector<DeviceId> devices(n);
    for (auto& d : devices) d = static_cast<DeviceId>(rng() % 3);
    const SimResult& res = r.on(devices);
    auto path = r.sim.critical_path();
    ASSERT_FALSE(path.empty());
    EXPECT_DOUBLE_EQ(path.front().end_s, res.step_time_s);
    EXPECT_DOUBLE_EQ(path.back().start_s, 0.0);
    for (std::size_t i = 0; i + 1 < path.size(); ++i) EXPECT_DOUBLE_EQ(path[i].start_s, path[i + 1].end_s) << "step " << i;
  }
}

TEST(Simulator, SameInputSameResult) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), ta = s.tensor("ta", 1000), tb = s.tensor("tb", 10), tc = s.tensor("tc", 10);
  s.op("a", {x}, {ta}, 1.0);
  s.op("b", {ta}, {tb}, 1.0);
  s.op("c", {ta}, {tc}, 1.0);
  Priced r(std::move(s), two_gpus());
  const double first = r.on({0, 1, 0}).step_time_s;
  r.on({1, 1, 1});
  EXPECT_DOUBLE_EQ(r.on({0, 1, 0}).step_time_s, first);
}

TEST(Simulator, RejectsAPlacementOfTheWrongSize) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), y = s.tensor("y", 10);
  s.op("a", {x}, {y}, 1.0);
  Priced r(std::move(s), two_gpus());
  EXPECT_THROW(r.on({0, 1}), Error);
  EXPECT_THROW(r.on({7}), Error);
}

TEST(Simulator, RefusesLinksTooSlowForATransferToHaveAFiniteTime) {
  for (double bandwidth : {1e-300, 1e-310}) {  // 1e9 bytes x 1/bandwidth overflows; 1/1e-310 alone is inf
    auto build = [bandwidth] {
      Sketch s;
      TensorId x = s.tensor("x", 10, TensorKind::data), y = s.tensor("y", 1'000'000'000), z = s.tensor("z", 10);
      s.op("a", {x}, {y}, 1.0);
      s.op("b", {y}, {z}, 1.0);
      Priced r(std::move(s), two_gpus(1'000'000, 1, bandwidth));
    };
    EXPECT_THAT(build, ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("sending 1000000000 bytes from gpu:0 to gpu:1"),
                                                                        ::testing::HasSubstr("bandwidth 1e-3"),
                                                                        ::testing::HasSubstr("check the links' latencies and bandwidths"))));
  }
  // A latency that overflows: the message gives it (it named the bandwidth alone, found by a review).
  auto build = [] {
    Sketch s;
    TensorId x = s.tensor("x", 10, TensorKind::data), y = s.tensor("y", 10), z = s.tensor("z", 10);
    s.op("a", {x}, {y}, 1.0);
    s.op("b", {y}, {z}, 1.0);
    Priced r(std::move(s), two_gpus(1'000'000, 1, 1e9, 1e308));
  };
  EXPECT_THAT(build, ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("route latency inf s, bandwidth 1e+09 bytes/s"),
                                                                      ::testing::HasSubstr("check the links' latencies"))));
}

TEST(Simulator, AStepTimeThatOverflowsIsAnError) {
  // Each copy takes 1e308 s, finite (a single copy past a double is refused at set-up, and op
  // times past it by the cost table); two in a row are not.
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), y = s.tensor("y", 10), z = s.tensor("z", 10), w = s.tensor("w", 10);
  s.op("a", {x}, {y}, 1.0);
  s.op("b", {y}, {z}, 1.0);
  s.op("c", {z}, {w}, 1.0);
  Priced r(std::move(s), two_gpus(1'000'000, 1, 1e-307));
  EXPECT_THAT([&] { r.on({0, 1, 0}); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("step time overflows")));
  EXPECT_THAT([&] { r.on({0, 1, 0}); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("step time overflows")));  // and again
  EXPECT_NO_THROW(r.on({0, 1, 1}));  // one copy: a step of about 1e308 s
}

TEST(LowerBounds, CriticalPathAndTotalWork) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), a = s.tensor("ta", 10), b = s.tensor("tb", 10), c = s.tensor("tc", 10);
  s.op("a", {x}, {a}, 1.0);
  s.op("b", {x}, {b}, 1.0);
  s.op("c", {a, b}, {c}, 1.0);
  Priced r(std::move(s), two_gpus());
  LowerBounds lb = lower_bounds(r.g, r.c, r.costs);
  EXPECT_DOUBLE_EQ(lb.critical_path_s, 2.0);
  EXPECT_NEAR(lb.total_work_s, 1.5, 1e-9);  // 3 s of work over two equal devices
  // No placement beats the bound.
  for (DeviceId a0 : {0u, 1u})
    for (DeviceId b0 : {0u, 1u})
      for (DeviceId c0 : {0u, 1u}) EXPECT_GE(r.on({a0, b0, c0}).step_time_s + 1e-12, lb.best());
}

// Total work on devices of 1 and 2 streams: six independent 1 s ops over three streams, 2 s (the
// weights 1/3 and 1/3). One search with a fixed step swung across that tie and kept less (8.48
// where 10 ms was reachable in a review's case).
TEST(LowerBounds, TotalWorkCountsEveryStream) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data);
  for (int i = 0; i < 6; ++i) s.op(std::string("op").append(std::to_string(i)), {x}, {s.tensor(std::string("t").append(std::to_string(i)), 10)}, 1.0);
  auto gpu = [](std::string name, int streams) {
    return Device{.name = std::move(name), .kind = DeviceKind::gpu, .model = "test", .peak_flops = 1e12,
                  .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = 1'000'000, .op_overhead_s = 0.0, .streams = streams};
  };
  Link l0{.name = "l0", .a = "gpu:0", .b = "gpu:1", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 1e-6};
  Priced r(std::move(s), Cluster::build("streams", {gpu("gpu:0", 1), gpu("gpu:1", 2)}, {}, {l0}));
  const LowerBounds lb = lower_bounds(r.g, r.c, r.costs);
  EXPECT_NEAR(lb.total_work_s, 2.0, 1e-6);
  EXPECT_GE(r.on({0, 0, 1, 1, 1, 1}).step_time_s + 1e-12, lb.best());  // 2 s: two ops on gpu:0, four on gpu:1
}

}  // namespace
}  // namespace placer
