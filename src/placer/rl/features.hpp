// Features the learned placers read, as the device-placement papers describe them, for ops and for
// groups of ops: op types (counts per type, so that a linear layer over them is an embedding over op
// types, summed over a group), output sizes, resident bytes, compute cost (family time on the
// fastest device and the log-ratio of every device to it), position in the graph (topological
// index) and adjacency (fixed-size lists of the heaviest in- and out-neighbours' ids).
// Plain float arrays, row-major, no torch: docs/learned-placers.md#features lists every column.
//
//   FeatureBuilder fb(problem);
//   Features ops = fb.ops();                               // one row per forward op
//   Features groups = fb.groups(grouping.group_of, grouping.num_groups);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "placer/algorithms/placer.hpp"

namespace placer::rl {

struct Features {
  std::size_t rows = 0;         // ops or groups
  std::size_t num_types = 0;    // op types used by the forward graph
  std::size_t num_numeric = 0;  // kNumericBase + num_devices + 2 * neighbours
  std::vector<float> type_counts;  // rows x num_types: ops of each type in the row (one-hot for an op)
  std::vector<float> numeric;      // rows x num_numeric, each column standardized over the rows
};

// Numeric columns, in order: log output (activation) bytes, log resident bytes, log fastest family
// time, log-ratio of each device's time to the fastest (num_devices columns), position (first
// topological index / rows), log op count, then `neighbours` in-neighbour ids and `neighbours`
// out-neighbour ids (id / rows, heaviest edge first, -1 when absent).
inline constexpr std::size_t kNumericBase = 5;

class FeatureBuilder {
 public:
  // Computes per-op quantities once (family times, bytes, edges). Borrows `problem`.
  explicit FeatureBuilder(const Problem& problem, std::size_t neighbours = 4);
  Features ops() const;
  // REQUIRES: group_of.size() == number of forward ops, every id < num_groups. Empty groups get rows
  // of zeros (before standardization).
  Features groups(std::span<const std::uint32_t> group_of, std::size_t num_groups) const;
  std::size_t num_types() const { return num_types_; }
  std::size_t num_numeric() const { return kNumericBase + num_devices_ + 2 * neighbours_; }

 private:
  struct Edge {
    std::uint32_t from, to;
    double bytes;
  };
  std::size_t num_ops_ = 0, num_devices_ = 0, num_types_ = 0, neighbours_ = 0;
  std::vector<std::uint32_t> type_;           // per forward op: dense type index
  std::vector<std::uint32_t> rank_;           // per forward op: topological index among forward ops
  std::vector<double> time_s_;                // per forward op x device: family time
  std::vector<double> out_bytes_, static_bytes_;
  std::vector<Edge> edges_;                   // forward data edges between ops (bytes of the tensor)
};

}  // namespace placer::rl
