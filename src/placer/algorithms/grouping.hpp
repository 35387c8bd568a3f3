// Grouping (co-location): forward ops are placed in groups, as the device-placement papers do.
// - colocation_groups: ColocRL's heuristic (an op joins the group of the op it feeds when that op
//   is its only consumer; ops that must stay together — an alias and the op that reads it — stay
//   together).
// - module_groups: one group per module path at a depth (optionally per call: one per time step).
// - coarsen: merge groups along their heaviest edges until at most N remain (256 in the papers).
// A group-level placement expands to ops with expand_groups. Group ids are dense, 0..num_groups-1,
// ordered by their first op in topological order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placer/algorithms/placer.hpp"

namespace placer {

struct Grouping {
  std::vector<std::uint32_t> group_of;  // per forward op
  std::size_t num_groups = 0;
};

Grouping singleton_groups(const Graph& g);
Grouping colocation_groups(const Graph& g);
Grouping module_groups(const Graph& g, std::uint32_t depth, bool per_call);
// Merges groups of `initial` until at most `max_groups` remain, keeping groups contiguous in the
// graph and balanced by family compute time (fastest device), merging along the heaviest edges.
Grouping coarsen(const Problem& problem, const Grouping& initial, std::size_t max_groups);
// "colocation" | "module[:DEPTH]" | "module-call[:DEPTH]" | "op", then coarsened to at most
// max_groups (0: no limit).
Grouping make_grouping(const Problem& problem, const std::string& kind, std::size_t max_groups);
// Error unless make_grouping knows `kind` (for placers' constructors: before a model loads).
void check_grouping(const std::string& kind);
// make_grouping, unless `kind` folds the graph into fewer than `min_groups` groups while it has
// more forward ops (co-location folds a chain, VGG or an MLP, into one or a few groups): then the
// ops themselves, coarsened to at most max_groups, and `note` says so (it is left alone otherwise;
// also when max_groups itself is what keeps the count down).
Grouping make_grouping_at_least(const Problem& problem, const std::string& kind, std::size_t max_groups, std::size_t min_groups,
                                std::string& note);

std::vector<DeviceId> expand_groups(const Grouping& grouping, std::span<const DeviceId> group_devices);

// Ranks of every op in the order they run, for ordering modules by their first op: the topological
// order, except that an op with neither inputs nor outputs (an alias of a parameter, which the
// importer keeps as a record) comes just before the first op that reads the alias, or after every
// op when nothing does. Exporters list such ops first: ranked where they stand, they made VGG-16's
// last layers its first modules. Unique ranks, 0..num_ops-1.
std::vector<std::uint32_t> execution_ranks(const Graph& g);

// The quotient graph of a grouping over the whole step: per group, its family time on each device
// and its resident bytes; per pair of groups, the bytes that flow between them (both directions
// summed, as partitioners want undirected weights) and, for schedulers, a DAG of forward edges.
struct GroupGraph {
  std::size_t num_groups = 0, num_devices = 0;
  std::vector<double> time_s;                 // group * num_devices + device
  std::vector<std::uint64_t> static_bytes;    // per group
  std::vector<std::uint64_t> activation_bytes;
  std::vector<std::uint32_t> adj_begin;       // undirected adjacency (CSR), no self loops
  std::vector<std::uint32_t> adj;
  std::vector<double> adj_bytes;
};
GroupGraph group_graph(const Problem& problem, const Grouping& grouping);

}  // namespace placer
