// Grouping of forward ops: ColocRL's co-location heuristic, module groups, and coarsening to at
// most N groups. Every merge here keeps the quotient graph (groups joined by the forward data
// edges) acyclic whenever it starts acyclic, so that group-level schedulers see a DAG: a merge that
// would close a cycle is refused and the next candidate is tried.
#include "placer/algorithms/grouping.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "placer/util/error.hpp"

namespace placer {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

struct UnionFind {
  std::vector<std::uint32_t> parent;
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  std::uint32_t find(std::uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(std::uint32_t a, std::uint32_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

// Dense ids ordered by each group's first op in topological order. `label[op]` is any key per op
// (kNone for "no group yet" is not allowed).
Grouping relabel(const Graph& g, const std::vector<std::uint32_t>& label) {
  const std::size_t nf = g.num_forward_ops();
  Grouping out;
  out.group_of.assign(nf, 0);
  std::map<std::uint32_t, std::uint32_t> dense;
  for (OpId o : g.topological_order()) {
    if (o >= nf) continue;
    auto [it, added] = dense.emplace(label[o], static_cast<std::uint32_t>(dense.size()));
    out.group_of[o] = it->second;
  }
  out.num_groups = dense.size();
  return out;
}

// Bytes that flow along forward data edges from group to group: each tensor counts once per
// destination group (a tensor is sent once per device that reads it).
struct DirectedEdge {
  std::uint32_t from, to;
  double bytes;
};
// Edges between groups with the bytes they carry; set-up values (never sent, Graph::op_folded) and
// what folded ops read (a Shape reads no data) count as edges of no bytes when `structure`
// (coarsening follows the graph's shape), else not at all.
std::vector<DirectedEdge> group_edges(const Graph& g, const Grouping& grouping, bool structure = true) {
  const std::vector<std::uint32_t>& group_of = grouping.group_of;
  const std::size_t nf = g.num_forward_ops();
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> bytes;
  // Per group, the last tensor that counted it (a list searched per reader was quadratic in a
  // tensor's readers: a review).
  std::vector<TensorId> counted_for(grouping.num_groups, kNoId);
  for (OpId p = 0; p < nf; ++p) {
    for (TensorId t : g.op_outputs(p)) {
      const bool folded = g.tensor_folded(t);
      if (folded && !structure) continue;
      for (OpId c : g.consumers(t)) {
        if (c >= nf || group_of[c] == group_of[p] || (g.op_folded(c) && !structure)) continue;
        if (counted_for[group_of[c]] == t) continue;
        counted_for[group_of[c]] = t;
        // A folded reader (Shape of x) reads nothing at run time.
        bytes[{group_of[p], group_of[c]}] += folded || g.op_folded(c) ? 0.0 : static_cast<double>(g.tensor_bytes(t));
      }
    }
  }
  std::vector<DirectedEdge> edges;
  edges.reserve(bytes.size());
  for (const auto& [key, b] : bytes) edges.push_back({key.first, key.second, b});
  return edges;
}

// The quotient graph of a grouping, merged node by node. While it is acyclic it keeps a
// topological order of its nodes (`order_`, with dead slots), so that a merge can be checked for
// cycles by a search bounded to the stretch of the order between the two nodes, and the order
// repaired in that stretch only. Adjacency is kept in hash maps and a merge renames the edges of
// the node with fewer of them, so that a hub (a tensor read by thousands of groups) absorbing or
// losing neighbours costs no more per merge than its partner's edges (it re-sorted the hub's whole
// list per merge: quadratic, 3.3 s for 20,000 readers of one tensor; a review).
class Quotient {
 public:
  struct Adj {
    std::uint32_t node;
    double bytes;
  };

  Quotient(std::size_t n, const std::vector<DirectedEdge>& edges, std::vector<double> weight)
      : out_(n), in_(n), alive_(n, 1), weight_(std::move(weight)), uf_(n), pos_(n), stamp_(n, 0), alive_count_(n) {
    for (const auto& e : edges) {
      if (e.from == e.to) continue;
      out_[e.from][e.to] += e.bytes;
      in_[e.to][e.from] += e.bytes;
    }
    acyclic_ = build_order();
  }

  bool acyclic() const { return acyclic_; }
  std::size_t alive_count() const { return alive_count_; }
  bool alive(std::uint32_t x) const { return alive_[x] != 0; }
  double weight(std::uint32_t x) const { return weight_[x]; }
  std::uint32_t find(std::uint32_t x) { return uf_.find(x); }
  std::size_t size() const { return alive_.size(); }

  // Neighbours of x (both directions), bytes summed, by node id.
  std::vector<Adj> neighbours(std::uint32_t x) const {
    std::vector<Adj> all;
    all.reserve(out_[x].size() + in_[x].size());
    for (const auto& [node, bytes] : out_[x]) all.push_back({node, bytes});
    for (const auto& [node, bytes] : in_[x]) all.push_back({node, bytes});
    std::sort(all.begin(), all.end(), [](const Adj& p, const Adj& q) { return p.node < q.node; });
    std::size_t w = 0;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (w > 0 && all[w - 1].node == all[r].node) all[w - 1].bytes += all[r].bytes;
      else all[w++] = all[r];
    }
    all.resize(w);
    return all;
  }

  // The live nodes just before and after x in the topological order (kNone at the ends). Only
  // meaningful while acyclic.
  std::pair<std::uint32_t, std::uint32_t> order_neighbours(std::uint32_t x) const {
    std::uint32_t before = kNone, after = kNone;
    for (std::size_t p = pos_[x]; p-- > 0;)
      if (order_[p] != kNone) {
        before = order_[p];
        break;
      }
    for (std::size_t p = pos_[x] + 1; p < order_.size(); ++p)
      if (order_[p] != kNone) {
        after = order_[p];
        break;
      }
    return {before, after};
  }

  // Merges the live nodes a and b unless that would close a cycle; returns the survivor (the one
  // with more edges, the smaller id on a tie), or kNone.
  std::uint32_t merge(std::uint32_t a, std::uint32_t b) {
    if (a == b || !alive(a) || !alive(b)) return kNone;
    if (acyclic_ && !reorder_for_merge(a, b)) return kNone;
    const std::size_t degree_a = out_[a].size() + in_[a].size(), degree_b = out_[b].size() + in_[b].size();
    const bool keep_a = degree_a != degree_b ? degree_a > degree_b : a < b;
    const std::uint32_t keep = keep_a ? a : b, gone = keep_a ? b : a;
    if (acyclic_) {
      // The merged node takes the later of the two slots: everything before it that feeds either
      // node stays before it, and everything the earlier node reaches now lies after it.
      const std::uint32_t earlier = std::min(pos_[a], pos_[b]), later = std::max(pos_[a], pos_[b]);
      order_[earlier] = kNone;
      order_[later] = keep;
      pos_[keep] = later;
    }
    // Gone's edges move to keep (an edge between the two disappears); its neighbours' lists rename it.
    out_[keep].erase(gone), in_[keep].erase(gone);
    for (const auto& [node, bytes] : out_[gone]) {
      if (node == keep) continue;
      out_[keep][node] += bytes;
      in_[node].erase(gone);
      in_[node][keep] += bytes;
    }
    for (const auto& [node, bytes] : in_[gone]) {
      if (node == keep) continue;
      in_[keep][node] += bytes;
      out_[node].erase(gone);
      out_[node][keep] += bytes;
    }
    out_[gone] = {}, in_[gone] = {};
    weight_[keep] += weight_[gone];
    alive_[gone] = 0;
    uf_.parent[gone] = keep;
    --alive_count_;
    return keep;
  }

 private:
  using AdjMap = std::unordered_map<std::uint32_t, double>;

  bool build_order() {
    const std::size_t n = alive_.size();
    std::vector<std::uint32_t> indeg(n, 0);
    for (std::size_t x = 0; x < n; ++x) indeg[x] = static_cast<std::uint32_t>(in_[x].size());
    // Smallest id first among the ready nodes: ids follow the ops' topological order.
    std::priority_queue<std::uint32_t, std::vector<std::uint32_t>, std::greater<>> ready;
    for (std::uint32_t x = 0; x < n; ++x)
      if (indeg[x] == 0) ready.push(x);
    order_.clear();
    while (!ready.empty()) {
      const std::uint32_t x = ready.top();
      ready.pop();
      pos_[x] = static_cast<std::uint32_t>(order_.size());
      order_.push_back(x);
      for (const auto& [node, bytes] : out_[x])
        if (--indeg[node] == 0) ready.push(node);
    }
    return order_.size() == n;
  }

  // Checks that merging a and b closes no cycle (no path between them through a third node) and
  // moves the nodes the earlier one reaches inside the stretch behind the merged node. (What it
  // decides does not depend on the order in which the hash maps list edges.)
  bool reorder_for_merge(std::uint32_t a, std::uint32_t b) {
    std::uint32_t lo = a, hi = b;
    if (pos_[lo] > pos_[hi]) std::swap(lo, hi);
    const std::uint32_t limit = pos_[hi];
    ++current_stamp_;
    std::vector<std::uint32_t> stack;
    std::size_t reached = 0;
    for (const auto& [node, bytes] : out_[lo])
      if (node != hi && pos_[node] < limit && stamp_[node] != current_stamp_) stamp_[node] = current_stamp_, stack.push_back(node);
    while (!stack.empty()) {
      const std::uint32_t x = stack.back();
      stack.pop_back();
      ++reached;
      for (const auto& [node, bytes] : out_[x]) {
        if (node == hi) return false;
        if (pos_[node] < limit && stamp_[node] != current_stamp_) stamp_[node] = current_stamp_, stack.push_back(node);
      }
    }
    if (reached == 0) return true;  // nothing between them depends on lo: the order stays valid
    // New stretch: the nodes lo does not reach, then lo and hi side by side, then those it reaches.
    const std::uint32_t begin = pos_[lo], end = pos_[hi];
    std::vector<std::uint32_t> before, after;
    for (std::uint32_t p = begin + 1; p < end; ++p) {
      const std::uint32_t x = order_[p];
      if (x == kNone) continue;
      (stamp_[x] == current_stamp_ ? after : before).push_back(x);
    }
    std::uint32_t p = begin;
    for (std::uint32_t x : before) order_[p] = x, pos_[x] = p, ++p;
    order_[p] = lo, pos_[lo] = p, ++p;
    order_[p] = hi, pos_[hi] = p, ++p;
    for (std::uint32_t x : after) order_[p] = x, pos_[x] = p, ++p;
    for (; p <= end; ++p) order_[p] = kNone;
    return true;
  }

  std::vector<AdjMap> out_, in_;
  std::vector<std::uint8_t> alive_;
  std::vector<double> weight_;
  UnionFind uf_;
  std::vector<std::uint32_t> order_, pos_;
  std::vector<std::uint32_t> stamp_;
  std::uint32_t current_stamp_ = 0;
  std::size_t alive_count_;
  bool acyclic_ = false;
};

// The grouping the quotient's live nodes describe.
Grouping from_quotient(const Graph& g, const Grouping& base, Quotient& q) {
  std::vector<std::uint32_t> label(g.num_forward_ops());
  for (OpId o = 0; o < label.size(); ++o) label[o] = q.find(base.group_of[o]);
  return relabel(g, label);
}

bool is_zero_cost(const Graph& g, OpId o) {
  const OpWork& w = g.op_work(o);
  return w.op_class == OpClass::alias || (w.flops == 0.0 && w.bytes_read == 0.0 && w.bytes_written == 0.0);
}

// The first forward op (by `rank`) that reads the parameter an alias op stands for (its
// "alias" attribute), or kNone: an edge-less alias runs, and groups, with that op.
OpId first_alias_reader(const Graph& g, OpId alias_op, std::span<const std::uint32_t> rank) {
  const std::string alias = g.op_attrs(alias_op).get_string("alias", "");
  const TensorId t = alias.empty() ? kNoId : g.find_tensor(alias);
  OpId first = kNone;
  if (t != kNoId)
    for (OpId c : g.consumers(t))
      if (c < g.num_forward_ops() && c != alias_op && (first == kNone || rank[c] < rank[first])) first = c;
  return first;
}

}  // namespace

Grouping singleton_groups(const Graph& g) {
  std::vector<std::uint32_t> label(g.num_forward_ops());
  std::iota(label.begin(), label.end(), 0u);
  return relabel(g, label);
}

std::vector<std::uint32_t> execution_ranks(const Graph& g) {
  const std::size_t n = g.num_ops();
  const auto topo = g.topological_order();
  const auto rank = g.topological_ranks();
  auto inert = [&](OpId o) { return g.op_inputs(o).empty() && g.op_outputs(o).empty(); };
  // Each inert op's first reader (of its alias), or kNone.
  std::vector<std::vector<OpId>> before(n);
  std::vector<OpId> unread;
  for (OpId o : topo) {
    if (!inert(o)) continue;
    const OpId first = first_alias_reader(g, o, rank);  // never inert: an inert op reads nothing
    (first == kNone ? unread : before[first]).push_back(o);
  }
  std::vector<std::uint32_t> out(n);
  std::uint32_t r = 0;
  for (OpId o : topo) {
    if (inert(o)) continue;
    for (OpId a : before[o]) out[a] = r++;
    out[o] = r++;
  }
  for (OpId a : unread) out[a] = r++;
  return out;
}

Grouping colocation_groups(const Graph& g) {
  const std::size_t nf = g.num_forward_ops();
  if (nf == 0) return {};
  const auto rank = g.topological_ranks();
  UnionFind uf(nf);
  // ColocRL: an op joins the op it feeds when that op is its only (forward) consumer. Groups made
  // this way are in-trees, so their quotient graph is acyclic.
  for (OpId o = 0; o < nf; ++o) {
    OpId only = kNone;
    std::size_t count = 0;
    for (OpId s : g.successors(o))
      if (s < nf) only = s, ++count;
    if (count == 1) uf.unite(o, only);
  }
  // An alias of a parameter (an edge-less Identity) stays with the first op that reads the alias.
  for (OpId o = 0; o < nf; ++o)
    if (const OpId first = first_alias_reader(g, o, rank); first != kNone) uf.unite(o, first);
  std::vector<std::uint32_t> label(nf);
  for (OpId o = 0; o < nf; ++o) label[o] = uf.find(o);
  Grouping base = relabel(g, label);

  // Zero-cost ops (shapes, constants, reshapes) that feed several ops join the earliest of them,
  // or else their producer, whichever merge keeps the group graph acyclic.
  std::vector<double> unit(base.num_groups, 1.0);
  Quotient q(base.num_groups, group_edges(g, base), unit);
  for (OpId o : g.topological_order()) {
    if (o >= nf || !is_zero_cost(g, o)) continue;
    std::vector<OpId> partners;
    for (OpId s : g.successors(o))
      if (s < nf) partners.push_back(s);
    std::sort(partners.begin(), partners.end(), [&](OpId x, OpId y) { return rank[x] < rank[y]; });
    for (OpId p : g.predecessors(o))
      if (p < nf) partners.push_back(p);
    const std::uint32_t mine = q.find(base.group_of[o]);
    for (OpId p : partners) {
      const std::uint32_t theirs = q.find(base.group_of[p]);
      if (theirs == mine || q.merge(mine, theirs) != kNone) break;
    }
  }
  return from_quotient(g, base, q);
}

Grouping module_groups(const Graph& g, std::uint32_t depth, bool per_call) {
  const std::size_t nf = g.num_forward_ops();
  std::map<std::pair<ModuleId, std::uint32_t>, std::uint32_t> keys;
  std::vector<std::uint32_t> label(nf);
  for (OpId o = 0; o < nf; ++o) {
    const ModuleId m = g.module_ancestor(g.op_module(o), depth);
    const std::uint32_t call = per_call ? g.op_call(o) : 0;
    auto [it, added] = keys.emplace(std::make_pair(m, call), static_cast<std::uint32_t>(keys.size()));
    label[o] = it->second;
  }
  return relabel(g, label);
}

Grouping coarsen(const Problem& problem, const Grouping& initial, std::size_t max_groups) {
  const Graph& g = problem.graph;
  const std::size_t nf = g.num_forward_ops();
  if (max_groups == 0 || initial.num_groups <= max_groups) return initial;
  const std::size_t nd = problem.cluster.num_devices();
  // Weight of a group: its ops' family times, each on its fastest device.
  const std::vector<double> family = family_times(problem);
  std::vector<double> weight(initial.num_groups, 0.0);
  for (OpId o = 0; o < nf; ++o) {
    double best = std::numeric_limits<double>::infinity();
    for (DeviceId d = 0; d < nd; ++d) best = std::min(best, family[std::size_t{o} * nd + d]);
    weight[initial.group_of[o]] += nd == 0 ? 0.0 : best;
  }
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  // A group may grow to twice the mean size a perfectly balanced coarsening would give; beyond
  // that it only absorbs a neighbour when no group under the cap can join it, neither a neighbour
  // nor a group beside it in topological order (always acyclic). Before 2026-12-02 an over-cap
  // neighbour came before the groups beside it: around a hub (one tensor read by 2,500 ops) the
  // hub's group took 97% of the work and `metis` ran slower than one device (a review).
  const double cap = 2.0 * total / static_cast<double>(max_groups);

  Quotient q(initial.num_groups, group_edges(g, initial), weight);
  using Entry = std::pair<double, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> lightest;
  for (std::uint32_t x = 0; x < initial.num_groups; ++x) lightest.push({weight[x], x});

  // (tier, key1, key2, node): tier 0, neighbours under the cap, heaviest edge first; tier 1, the
  // groups beside x in topological order under the cap, lighter first; tier 2, every other
  // neighbour, then group beside x, lighter first.
  std::vector<std::tuple<int, double, double, std::uint32_t>> ranked;
  while (q.alive_count() > max_groups && !lightest.empty()) {
    const auto [w, x] = lightest.top();
    lightest.pop();
    if (!q.alive(x) || w != q.weight(x)) continue;  // stale entry
    ranked.clear();
    for (const auto& e : q.neighbours(x)) {
      const double combined = w + q.weight(e.node);
      if (combined <= cap) ranked.emplace_back(0, -e.bytes, combined, e.node);
      else ranked.emplace_back(2, 0.0, combined, e.node);
    }
    if (q.acyclic()) {
      const auto [before, after] = q.order_neighbours(x);
      for (std::uint32_t y : {before, after}) {
        if (y == kNone) continue;
        const double combined = w + q.weight(y);
        ranked.emplace_back(combined <= cap ? 1 : 2, combined <= cap ? combined : 1.0, combined, y);
      }
    }
    std::sort(ranked.begin(), ranked.end());
    std::uint32_t merged = kNone;
    for (const auto& [tier, k1, k2, node] : ranked)
      if ((merged = q.merge(x, node)) != kNone) break;
    if (merged == kNone && !q.acyclic()) {
      // The quotient has cycles already (no order to go by): the next live group by id.
      std::uint32_t other = kNone;
      for (std::uint32_t step = 1; step < q.size() && other == kNone; ++step) {
        const std::uint32_t y = static_cast<std::uint32_t>((x + step) % q.size());
        if (q.alive(y)) other = y;
      }
      if (other != kNone) merged = q.merge(x, other);
    }
    if (merged == kNone) continue;
    lightest.push({q.weight(merged), merged});
  }
  return from_quotient(g, initial, q);
}

namespace {

struct GroupingKind {
  enum class What { colocation, op, module, module_call } what;
  std::uint32_t depth = 2;
};

GroupingKind parse_grouping(const std::string& kind) {
  // "module" and "module-call" take an optional depth: "module:1" groups by top-level module.
  auto depth_of = [&](const std::string& prefix) -> std::uint32_t {
    if (kind.size() == prefix.size()) return 2;
    try {
      std::size_t used = 0;
      const int d = std::stoi(kind.substr(prefix.size() + 1), &used);
      if (d >= 0 && used == kind.size() - prefix.size() - 1) return static_cast<std::uint32_t>(d);
    } catch (const std::exception&) {
    }
    throw Error("grouping '" + kind + "': expected '" + prefix + "' or '" + prefix + ":DEPTH' with DEPTH >= 0");
  };
  auto starts = [&](const std::string& prefix) {
    return kind == prefix || (kind.size() > prefix.size() && kind.compare(0, prefix.size() + 1, prefix + ":") == 0);
  };
  using What = GroupingKind::What;
  if (kind == "colocation") return {What::colocation};
  if (kind == "op") return {What::op};
  if (starts("module-call")) return {What::module_call, depth_of("module-call")};
  if (starts("module")) return {What::module, depth_of("module")};
  throw Error("unknown grouping '" + kind + "' (known: colocation, module[:DEPTH], module-call[:DEPTH], op)");
}

}  // namespace

void check_grouping(const std::string& kind) { (void)parse_grouping(kind); }

Grouping make_grouping(const Problem& problem, const std::string& kind, std::size_t max_groups) {
  const Graph& g = problem.graph;
  const GroupingKind k = parse_grouping(kind);
  Grouping base;
  switch (k.what) {
    case GroupingKind::What::colocation: base = colocation_groups(g); break;
    case GroupingKind::What::op: base = singleton_groups(g); break;
    case GroupingKind::What::module_call: base = module_groups(g, k.depth, true); break;
    case GroupingKind::What::module: base = module_groups(g, k.depth, false); break;
  }
  return coarsen(problem, base, max_groups);
}

Grouping make_grouping_at_least(const Problem& problem, const std::string& kind, std::size_t max_groups, std::size_t min_groups,
                                std::string& note) {
  Grouping grouping = make_grouping(problem, kind, max_groups);
  // Op groups only where they give more groups: not when max_groups is what holds the count down.
  const bool capped = max_groups > 0 && max_groups <= grouping.num_groups;
  if (grouping.num_groups < min_groups && kind != "op" && !capped && problem.graph.num_forward_ops() > grouping.num_groups) {
    note = "'" + kind + "' grouping too coarse (" + std::to_string(grouping.num_groups) + " group" + (grouping.num_groups == 1 ? "" : "s") +
           ", at least " + std::to_string(min_groups) + " needed); used op groups";
    grouping = make_grouping(problem, "op", max_groups);
  }
  return grouping;
}

std::vector<DeviceId> expand_groups(const Grouping& grouping, std::span<const DeviceId> group_devices) {
  if (group_devices.size() != grouping.num_groups)
    throw Error("expand_groups: " + std::to_string(group_devices.size()) + " devices for " + std::to_string(grouping.num_groups) +
                " groups");
  std::vector<DeviceId> out(grouping.group_of.size());
  for (std::size_t o = 0; o < out.size(); ++o) out[o] = group_devices[grouping.group_of[o]];
  return out;
}

GroupGraph group_graph(const Problem& problem, const Grouping& grouping) {
  const Graph& g = problem.graph;
  const std::size_t nf = g.num_forward_ops(), nd = problem.cluster.num_devices(), ng = grouping.num_groups;
  GroupGraph gg;
  gg.num_groups = ng;
  gg.num_devices = nd;
  gg.time_s.assign(ng * nd, 0.0);
  gg.static_bytes.assign(ng, 0);
  gg.activation_bytes.assign(ng, 0);
  const std::vector<double> family = family_times(problem);
  const FamilyMemory memory = family_memory(problem);
  for (OpId o = 0; o < nf; ++o) {
    const std::uint32_t grp = grouping.group_of[o];
    for (DeviceId d = 0; d < nd; ++d) gg.time_s[std::size_t{grp} * nd + d] += family[std::size_t{o} * nd + d];
    gg.static_bytes[grp] += memory.static_bytes[o];
    gg.activation_bytes[grp] += memory.activation_bytes[o];
  }
  // Undirected bytes: activations along forward edges, and parameters read by a group other than
  // the one of their home op (each counted once per reading group).
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> pair_bytes;
  auto add = [&](std::uint32_t a, std::uint32_t b, double bytes) {
    if (a == b) return;
    pair_bytes[{std::min(a, b), std::max(a, b)}] += bytes;
  };
  for (const auto& e : group_edges(g, grouping, /*structure=*/false)) add(e.from, e.to, e.bytes);
  std::vector<TensorId> counted_for(ng, kNoId);  // per group, the last parameter that counted it
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    if (g.producer(t) != kNoId || g.tensor_folded(t)) continue;
    const OpId home = g.param_home(t);
    if (home == kNoId || home >= nf) continue;
    for (OpId c : g.consumers(t)) {
      if (c >= nf || g.op_folded(c) || grouping.group_of[c] == grouping.group_of[home]) continue;
      if (counted_for[grouping.group_of[c]] == t) continue;
      counted_for[grouping.group_of[c]] = t;
      add(grouping.group_of[home], grouping.group_of[c], static_cast<double>(g.tensor_bytes(t)));
    }
  }
  std::vector<std::vector<std::pair<std::uint32_t, double>>> adj(ng);
  for (const auto& [key, bytes] : pair_bytes) {
    adj[key.first].push_back({key.second, bytes});
    adj[key.second].push_back({key.first, bytes});
  }
  gg.adj_begin.assign(ng + 1, 0);
  for (std::size_t x = 0; x < ng; ++x) {
    std::sort(adj[x].begin(), adj[x].end());
    gg.adj_begin[x + 1] = gg.adj_begin[x] + static_cast<std::uint32_t>(adj[x].size());
    for (const auto& [y, bytes] : adj[x]) gg.adj.push_back(y), gg.adj_bytes.push_back(bytes);
  }
  return gg;
}

}  // namespace placer
