#include "placer/algorithms/grouping.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "placer/io/model.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::ElementsAre;

// "prefix" followed by the number (appended: GCC 12 warns, wrongly, about "literal" + std::string).
std::string name_of(const char* prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

// A graph drawn op by op: u8 tensors sized in bytes, every op 1 s on a GPU unless told otherwise.
struct Sketch {
  GraphBuilder b{"sketch"};
  Profile profile;
  TensorId tensor(const std::string& name, std::int64_t bytes, TensorKind kind = TensorKind::activation) {
    return b.add_tensor(name, {bytes}, DType::u8, kind);
  }
  OpId op(const std::string& name, std::vector<TensorId> in, std::vector<TensorId> out, double seconds = 1.0,
          std::string module = "", std::uint32_t call = 0, OpClass cls = OpClass::elementwise) {
    profile.set_by_name(DeviceKind::gpu, name, seconds);
    profile.set_by_name(DeviceKind::cpu, name, 10 * seconds);
    OpSpec spec{.name = name, .type = cls == OpClass::alias ? "Identity" : "Relu", .inputs = std::move(in), .outputs = std::move(out),
                .module = std::move(module), .call = call};
    spec.work.op_class = cls;
    if (cls != OpClass::alias) spec.work.flops = 1e6;
    return b.add_op(std::move(spec));
  }
};

Cluster two_gpus() {
  auto dev = [](std::string name, DeviceKind kind) {
    return Device{.name = std::move(name), .kind = kind, .model = "t", .peak_flops = 1e12, .memory_bandwidth_bytes_per_s = 1e12,
                  .memory_bytes = 1 << 30, .op_overhead_s = 0.0};
  };
  std::vector<Link> links;
  for (const char* n : {"cpu:0", "gpu:0", "gpu:1"})
    links.push_back(Link{.a = n, .b = "sw", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9, .latency_s = 1e-6});
  return Cluster::build("t", {dev("cpu:0", DeviceKind::cpu), dev("gpu:0", DeviceKind::gpu), dev("gpu:1", DeviceKind::gpu)}, {"sw"},
                        links);
}

struct Priced {
  Graph g;
  Cluster c;
  CostTable costs;
  Problem problem;
  explicit Priced(Sketch&& s) : g(std::move(s.b).build()), c(two_gpus()), costs(g, c, CostModel::defaults(), &s.profile), problem{g, c, costs, {}} {}
};

// The groups as sets of op names, in group id order.
std::vector<std::set<std::string>> members(const Graph& g, const Grouping& grouping) {
  std::vector<std::set<std::string>> out(grouping.num_groups);
  for (OpId o = 0; o < grouping.group_of.size(); ++o) out[grouping.group_of[o]].insert(g.op_name(o));
  return out;
}

// True when the groups, joined by forward data edges, form a DAG.
bool quotient_is_acyclic(const Graph& g, const Grouping& grouping) {
  const std::size_t n = grouping.num_groups;
  std::vector<std::set<std::uint32_t>> out(n);
  for (OpId o = 0; o < g.num_forward_ops(); ++o)
    for (OpId s : g.successors(o))
      if (s < g.num_forward_ops() && grouping.group_of[s] != grouping.group_of[o]) out[grouping.group_of[o]].insert(grouping.group_of[s]);
  std::vector<int> indeg(n, 0);
  for (const auto& s : out)
    for (auto t : s) ++indeg[t];
  std::vector<std::uint32_t> ready;
  for (std::uint32_t x = 0; x < n; ++x)
    if (indeg[x] == 0) ready.push_back(x);
  std::size_t done = 0;
  while (!ready.empty()) {
    auto x = ready.back();
    ready.pop_back();
    ++done;
    for (auto t : out[x])
      if (--indeg[t] == 0) ready.push_back(t);
  }
  return done == n;
}

// Dense ids, numbered in the order of each group's first op in topological order.
void expect_dense_and_ordered(const Graph& g, const Grouping& grouping) {
  std::uint32_t next = 0;
  std::vector<bool> seen(grouping.num_groups, false);
  for (OpId o : g.topological_order()) {
    if (o >= g.num_forward_ops()) continue;
    const auto grp = grouping.group_of[o];
    ASSERT_LT(grp, grouping.num_groups);
    if (!seen[grp]) {
      EXPECT_EQ(grp, next) << "group of " << g.op_name(o);
      seen[grp] = true;
      ++next;
    }
  }
  EXPECT_EQ(next, grouping.num_groups);
}

//      x -> a -> b -> c -> e          a feeds only b, c and d feed only e: {a, b} and {c, d, e}
//                 `-> d --^           alias w' (no edges) is read by d; constant k feeds b and d
TEST(Colocation, OpsJoinTheirOnlyConsumerAliasesTheirReaderConstantsTheirFirstReader) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), t1 = s.tensor("t1", 10), t2 = s.tensor("t2", 10), t3 = s.tensor("t3", 10),
           t4 = s.tensor("t4", 10), t5 = s.tensor("t5", 10), k = s.tensor("k", 8), w = s.tensor("w", 100, TensorKind::parameter),
           w_alias = s.tensor("w_alias", 100, TensorKind::parameter);
  s.op("k", {}, {k}, 0.0, "", 0, OpClass::alias);
  s.op("a", {x}, {t1});
  s.op("b", {t1, k}, {t2});
  s.op("c", {t2}, {t3});
  s.op("d", {t2, k, w_alias}, {t4});
  s.op("e", {t3, t4}, {t5});
  OpSpec alias{.name = "w_alias/Identity", .type = "Identity"};
  Attribute a{.name = "alias", .kind = Attribute::Kind::text};
  a.s = "w_alias";
  alias.attrs.set(a);
  s.b.add_op(std::move(alias));
  (void)w;
  Priced p(std::move(s));
  Grouping grouping = colocation_groups(p.g);
  EXPECT_THAT(members(p.g, grouping), ElementsAre(std::set<std::string>{"k", "a", "b"},
                                                  std::set<std::string>{"c", "d", "e", "w_alias/Identity"}));
  expect_dense_and_ordered(p.g, grouping);
}

// s (free) feeds c1 and c2; c2 -> m -> r, c2 -> z and c1 -> r, so {c1, m, r} is one group. Putting s with
// its first reader c1 would make {s, c1, m, r} -> c2 -> {s, c1, m, r} a cycle: s stays apart.
TEST(Colocation, AFreeOpDoesNotJoinAReaderWhenThatWouldCloseACycle) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), ts = s.tensor("ts", 10), t1 = s.tensor("t1", 10), t2 = s.tensor("t2", 10),
           tm = s.tensor("tm", 10), tr = s.tensor("tr", 10);
  s.op("s", {x}, {ts}, 0.0, "", 0, OpClass::alias);
  s.op("c1", {ts}, {t1});
  s.op("c2", {ts}, {t2});
  s.op("m", {t2}, {tm});
  s.op("z", {t2}, {s.tensor("tz", 10)});  // c2 feeds two ops: it stays a group of its own
  s.op("r", {t1, tm}, {tr});
  Priced p(std::move(s));
  Grouping grouping = colocation_groups(p.g);
  EXPECT_TRUE(quotient_is_acyclic(p.g, grouping));
  EXPECT_NE(grouping.group_of[p.g.find_op("s")], grouping.group_of[p.g.find_op("c1")]);
  EXPECT_EQ(grouping.group_of[p.g.find_op("c1")], grouping.group_of[p.g.find_op("r")]);
  EXPECT_EQ(grouping.group_of[p.g.find_op("m")], grouping.group_of[p.g.find_op("r")]);
  EXPECT_NE(grouping.group_of[p.g.find_op("c2")], grouping.group_of[p.g.find_op("r")]);
}

// Two modules, each called twice (time steps), and a top-level op.
Sketch unrolled() {
  Sketch s;
  TensorId prev = s.tensor("x", 10, TensorKind::data);
  for (int t = 0; t < 2; ++t)
    for (int layer = 0; layer < 2; ++layer) {
      const std::string name = name_of("cells.", layer) + name_of("_", t);
      TensorId out = s.tensor(name + "/out", 10);
      s.op(name + "/Gemm", {prev}, {out}, 1.0, name_of("cells.", layer), t);
      prev = out;
    }
  s.op("loss", {prev}, {s.tensor("loss", 4)});
  return s;
}

TEST(ModuleGroups, OneGroupPerModulePathAtADepth) {
  Priced p(unrolled());
  EXPECT_THAT(members(p.g, module_groups(p.g, 1, false)),
              ElementsAre(std::set<std::string>{"cells.0_0/Gemm", "cells.1_0/Gemm", "cells.0_1/Gemm", "cells.1_1/Gemm"},
                          std::set<std::string>{"loss"}));
  EXPECT_THAT(members(p.g, module_groups(p.g, 2, false)),
              ElementsAre(std::set<std::string>{"cells.0_0/Gemm", "cells.0_1/Gemm"}, std::set<std::string>{"cells.1_0/Gemm", "cells.1_1/Gemm"},
                          std::set<std::string>{"loss"}));
}

TEST(ModuleGroups, PerCallSplitsTimeSteps) {
  Priced p(unrolled());
  EXPECT_THAT(members(p.g, module_groups(p.g, 2, true)),
              ElementsAre(std::set<std::string>{"cells.0_0/Gemm"}, std::set<std::string>{"cells.1_0/Gemm"}, std::set<std::string>{"cells.0_1/Gemm"},
                          std::set<std::string>{"cells.1_1/Gemm"}, std::set<std::string>{"loss"}));
}

// A ladder: two chains of 20 ops with rungs between them every few steps, plus free constants.
Sketch ladder() {
  Sketch s;
  TensorId left = s.tensor("x", 1000, TensorKind::data), right = s.tensor("y", 1000, TensorKind::data);
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    TensorId l = s.tensor("l" + n, 1000 + i), r = s.tensor("r" + n, 2000 + i), k = s.tensor("k" + n, 4);
    s.op("k" + n, {}, {k}, 0.0, "", 0, OpClass::alias);
    if (i % 3 == 2) {
      s.op("L" + n, {left, right, k}, {l}, 1.0 + i % 4);
      s.op("R" + n, {right, left}, {r}, 2.0);
    } else {
      s.op("L" + n, {left, k}, {l}, 1.0 + i % 4);
      s.op("R" + n, {right}, {r}, 2.0);
    }
    left = l, right = r;
  }
  s.op("join", {left, right}, {s.tensor("out", 4)});
  return s;
}

// The time on gpu:0 of the heaviest group, and of all of them.
std::pair<double, double> heaviest_and_total(const Problem& problem, const Grouping& grouping) {
  const GroupGraph gg = group_graph(problem, grouping);
  double heaviest = 0, total = 0;
  for (std::size_t grp = 0; grp < gg.num_groups; ++grp) {
    heaviest = std::max(heaviest, gg.time_s[grp * gg.num_devices + 1]);
    total += gg.time_s[grp * gg.num_devices + 1];
  }
  return {heaviest, total};
}

TEST(Coarsen, NeverExceedsTheLimitCoversEveryOpAndStaysAcyclic) {
  Priced p(ladder());
  const Grouping singles = singleton_groups(p.g);
  ASSERT_EQ(singles.num_groups, p.g.num_forward_ops());
  for (std::size_t limit : {1u, 2u, 5u, 12u, 30u}) {
    const Grouping c = coarsen(p.problem, singles, limit);
    EXPECT_LE(c.num_groups, limit);
    EXPECT_GE(c.num_groups, 1u);
    ASSERT_EQ(c.group_of.size(), p.g.num_forward_ops());
    expect_dense_and_ordered(p.g, c);
    EXPECT_TRUE(quotient_is_acyclic(p.g, c)) << "limit " << limit;
  }
  // Nothing to do when the grouping is already small enough.
  EXPECT_EQ(coarsen(p.problem, singles, 1000).num_groups, singles.num_groups);
  EXPECT_EQ(coarsen(p.problem, singles, 0).num_groups, singles.num_groups);
}

TEST(Coarsen, IsDeterministicAndBalancesCompute) {
  Priced p(ladder());
  const Grouping a = coarsen(p.problem, singleton_groups(p.g), 6), b = coarsen(p.problem, singleton_groups(p.g), 6);
  EXPECT_EQ(a.group_of, b.group_of);
  // Every op has 1-4 s; the total is 91 s: no group should hold most of it.
  const auto [heaviest, total] = heaviest_and_total(p.problem, a);
  EXPECT_NEAR(total, 91.0, 1e-9);
  EXPECT_LT(heaviest, total / 2);
}

// A hub: one tensor read by 400 ops of 1 s each, whose only neighbour is the hub's group. Coarsened to
// 20 groups, none may pass twice the mean (40 s of 401) while groups beside each other in
// topological order can still join: before 2026-12-02 every reader joined the hub once the hub was
// over the cap, which ended with one group of 97% of the work (a review).
TEST(Coarsen, AHubDoesNotSwallowItsReaders) {
  Sketch s;
  const TensorId r = s.tensor("r", 64);
  s.op("hub", {s.tensor("x", 64, TensorKind::data)}, {r});
  for (int i = 0; i < 400; ++i) s.op(name_of("reader", i), {r}, {s.tensor(name_of("y", i), 64)});
  Priced p(std::move(s));
  const Grouping c = coarsen(p.problem, singleton_groups(p.g), 20);
  EXPECT_LE(c.num_groups, 20u);
  EXPECT_TRUE(quotient_is_acyclic(p.g, c));
  const auto [heaviest, total] = heaviest_and_total(p.problem, c);
  EXPECT_NEAR(total, 401.0, 1e-9);
  EXPECT_LE(heaviest, 2 * total / 20);
}

TEST(MakeGrouping, KnowsItsKindsAndRejectsOthers) {
  Priced p(unrolled());
  EXPECT_EQ(make_grouping(p.problem, "op", 0).num_groups, 5u);
  EXPECT_EQ(make_grouping(p.problem, "op", 2).num_groups, 2u);
  EXPECT_EQ(make_grouping(p.problem, "module", 0).num_groups, 3u);
  EXPECT_EQ(make_grouping(p.problem, "module:1", 0).num_groups, 2u);
  EXPECT_EQ(make_grouping(p.problem, "module-call", 0).num_groups, 5u);
  EXPECT_EQ(make_grouping(p.problem, "module-call:1", 0).num_groups, 3u);
  EXPECT_EQ(make_grouping(p.problem, "colocation", 0).num_groups, 1u);  // a chain
  EXPECT_THROW(make_grouping(p.problem, "modules", 0), Error);
  EXPECT_THROW(make_grouping(p.problem, "module:x", 0), Error);
}

TEST(MakeGrouping, FallsBackToOpGroupsWhereTheKindFoldsTooMuchButNotUnderACap) {
  Priced p(unrolled());  // 5 ops, one chain: one co-location group
  std::string note;
  EXPECT_EQ(make_grouping_at_least(p.problem, "colocation", 0, 3, note).num_groups, 5u);
  EXPECT_EQ(note, "'colocation' grouping too coarse (1 group, at least 3 needed); used op groups");
  note.clear();
  EXPECT_EQ(make_grouping_at_least(p.problem, "colocation", 4, 3, note).num_groups, 4u);  // op groups, coarsened to 4
  EXPECT_FALSE(note.empty());
  note.clear();
  // A cap below min_groups: op groups would be capped the same, so nothing to gain and no note
  // blaming the kind.
  EXPECT_EQ(make_grouping_at_least(p.problem, "op", 2, 3, note).num_groups, 2u);
  EXPECT_EQ(make_grouping_at_least(p.problem, "module", 2, 3, note).num_groups, 2u);
  EXPECT_EQ(note, "");
  EXPECT_EQ(make_grouping_at_least(p.problem, "colocation", 1, 3, note).num_groups, 1u);
  EXPECT_EQ(note, "");
}

TEST(ExpandGroups, GivesEachOpItsGroupsDevice) {
  Grouping grouping{.group_of = {0, 1, 1, 0, 2}, .num_groups = 3};
  const std::vector<DeviceId> devices = {2, 1, 0};
  EXPECT_THAT(expand_groups(grouping, devices), ElementsAre(2u, 1u, 1u, 2u, 0u));
  EXPECT_THROW(expand_groups(grouping, std::vector<DeviceId>{1, 2}), Error);
}

//   a (1 s) -> t1 (100 B) -> b (2 s) -> t2 (30 B) -> c (3 s);   a -> t3 (7 B) -> c;   w (50 B) read by a and c
TEST(GroupGraph, SumsTimesMemoryAndBytesBetweenGroups) {
  Sketch s;
  TensorId x = s.tensor("x", 10, TensorKind::data), t1 = s.tensor("t1", 100), t2 = s.tensor("t2", 30), t3 = s.tensor("t3", 7),
           w = s.tensor("w", 50, TensorKind::parameter);
  s.op("a", {x, w}, {t1, t3}, 1.0);
  s.op("b", {t1}, {t2}, 2.0);
  s.op("c", {t2, t3, w}, {s.tensor("out", 4)}, 3.0);
  Priced p(std::move(s));
  Grouping grouping{.group_of = {0, 1, 2}, .num_groups = 3};
  const GroupGraph gg = group_graph(p.problem, grouping);
  ASSERT_EQ(gg.num_groups, 3u);
  ASSERT_EQ(gg.num_devices, 3u);
  EXPECT_DOUBLE_EQ(gg.time_s[0 * 3 + 1], 1.0);
  EXPECT_DOUBLE_EQ(gg.time_s[1 * 3 + 2], 2.0);
  EXPECT_DOUBLE_EQ(gg.time_s[2 * 3 + 0], 30.0);  // 10 x slower on the CPU
  EXPECT_EQ(gg.static_bytes[0], 50u + 10u);         // w and the data x live with a
  EXPECT_EQ(gg.activation_bytes[0], 107u);
  auto bytes = [&](std::uint32_t from, std::uint32_t to) {
    for (auto i = gg.adj_begin[from]; i < gg.adj_begin[from + 1]; ++i)
      if (gg.adj[i] == to) return gg.adj_bytes[i];
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(bytes(0, 1), 100.0);
  EXPECT_DOUBLE_EQ(bytes(1, 0), 100.0);
  EXPECT_DOUBLE_EQ(bytes(1, 2), 30.0);
  EXPECT_DOUBLE_EQ(bytes(0, 2), 7.0 + 50.0);  // t3, and the parameter w read far from its home
  EXPECT_DOUBLE_EQ(bytes(2, 0), 57.0);
  // Merging b and c folds their edge away.
  const GroupGraph two = group_graph(p.problem, Grouping{.group_of = {0, 1, 1}, .num_groups = 2});
  ASSERT_EQ(two.adj.size(), 2u);
  EXPECT_DOUBLE_EQ(two.adj_bytes[0], 100.0 + 7.0 + 50.0);
  EXPECT_DOUBLE_EQ(two.time_s[1 * 3 + 1], 5.0);
}

TEST(Grouping, RealModelsColocateAndCoarsenTo256) {
  REQUIRE_SHARED_MODELS();
  const Cluster c = cluster_preset("k80x4");
  for (const char* name : {"inception_v3", "nmt"}) {
    const Graph g = load_model(test::shared_model(name), ModelOptions{});
    const CostTable costs(g, c, CostModel::defaults());
    const Problem problem{g, c, costs, {}};
    const Grouping coloc = colocation_groups(g);
    EXPECT_LT(coloc.num_groups, g.num_forward_ops()) << name;
    EXPECT_TRUE(quotient_is_acyclic(g, coloc)) << name;
    const Grouping coarse = make_grouping(problem, "colocation", 256);
    EXPECT_LE(coarse.num_groups, 256u) << name;
    EXPECT_EQ(coarse.num_groups, std::min<std::size_t>(256, coloc.num_groups)) << name;
    EXPECT_TRUE(quotient_is_acyclic(g, coarse)) << name;
    expect_dense_and_ordered(g, coarse);
    const GroupGraph gg = group_graph(problem, coarse);
    EXPECT_EQ(gg.adj_begin.size(), gg.num_groups + 1);
    EXPECT_EQ(gg.adj.size() % 2, 0u);
  }
}

}  // namespace
}  // namespace placer
