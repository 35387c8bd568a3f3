#include "placer/rl/features.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace placer::rl {

FeatureBuilder::FeatureBuilder(const Problem& problem, std::size_t neighbours) : neighbours_(neighbours) {
  const Graph& g = problem.graph;
  num_ops_ = g.num_forward_ops();
  num_devices_ = problem.cluster.num_devices();
  std::map<std::uint32_t, std::uint32_t> dense;
  type_.resize(num_ops_);
  for (OpId o = 0; o < num_ops_; ++o) {
    auto [it, added] = dense.emplace(g.op_type_id(o), static_cast<std::uint32_t>(dense.size()));
    type_[o] = it->second;
  }
  num_types_ = dense.size();
  rank_.assign(num_ops_, 0);
  std::uint32_t r = 0;
  for (OpId o : g.topological_order())
    if (o < num_ops_) rank_[o] = r++;
  time_s_ = family_times(problem);
  const FamilyMemory memory = family_memory(problem);
  out_bytes_.resize(num_ops_);
  static_bytes_.resize(num_ops_);
  for (OpId o = 0; o < num_ops_; ++o) {
    out_bytes_[o] = static_cast<double>(memory.activation_bytes[o]);
    static_bytes_[o] = static_cast<double>(memory.static_bytes[o]);
  }
  for (OpId o = 0; o < num_ops_; ++o)
    for (TensorId t : g.op_outputs(o))
      for (OpId c : g.consumers(t))
        if (c < num_ops_ && c != o)  // set-up values and what folded ops read are never sent
          edges_.push_back({o, c, g.tensor_folded(t) || g.op_folded(c) ? 0.0 : static_cast<double>(g.tensor_bytes(t))});
}

Features FeatureBuilder::ops() const {
  std::vector<std::uint32_t> self(num_ops_);
  for (std::uint32_t o = 0; o < num_ops_; ++o) self[o] = o;
  return groups(self, num_ops_);
}

Features FeatureBuilder::groups(std::span<const std::uint32_t> group_of, std::size_t num_groups) const {
  const std::size_t nt = num_types_, nd = num_devices_, k = neighbours_, nm = num_numeric();
  Features f;
  f.rows = num_groups;
  f.num_types = nt;
  f.num_numeric = nm;
  f.type_counts.assign(num_groups * nt, 0.0f);
  f.numeric.assign(num_groups * nm, 0.0f);
  std::vector<double> out(num_groups, 0.0), stat(num_groups, 0.0), time(num_groups * nd, 0.0), size(num_groups, 0.0);
  std::vector<std::uint32_t> first(num_groups, std::numeric_limits<std::uint32_t>::max());
  for (std::size_t o = 0; o < num_ops_; ++o) {
    const std::uint32_t gr = group_of[o];
    f.type_counts[gr * nt + type_[o]] += 1.0f;
    out[gr] += out_bytes_[o];
    stat[gr] += static_bytes_[o];
    size[gr] += 1.0;
    first[gr] = std::min(first[gr], rank_[o]);
    for (std::size_t d = 0; d < nd; ++d) time[gr * nd + d] += time_s_[o * nd + d];
  }
  // Heaviest neighbours per group, each direction.
  std::vector<std::map<std::uint32_t, double>> in(num_groups), outn(num_groups);
  for (const Edge& e : edges_) {
    const std::uint32_t a = group_of[e.from], b = group_of[e.to];
    if (a == b) continue;
    outn[a][b] += e.bytes;
    in[b][a] += e.bytes;
  }
  auto heaviest = [&](const std::map<std::uint32_t, double>& m) {
    std::vector<std::pair<double, std::uint32_t>> v;
    for (auto [id, bytes] : m) v.push_back({-bytes, id});
    std::sort(v.begin(), v.end());
    return v;
  };
  const double rows = static_cast<double>(std::max<std::size_t>(num_groups, 1));
  for (std::size_t gr = 0; gr < num_groups; ++gr) {
    float* row = &f.numeric[gr * nm];
    double fastest = std::numeric_limits<double>::infinity();
    for (std::size_t d = 0; d < nd; ++d) fastest = std::min(fastest, time[gr * nd + d]);
    row[0] = static_cast<float>(std::log1p(out[gr] / 1e6));
    row[1] = static_cast<float>(std::log1p(stat[gr] / 1e6));
    // Finite logs of finite times, however large (a sum of op times may pass a double's largest): a
    // huge time over a tiny one overflowed to inf, and the standardised column to NaN (a review).
    constexpr double kLargest = std::numeric_limits<double>::max();
    row[2] = static_cast<float>(std::log1p(std::min(fastest / 1e-6, kLargest)));
    for (std::size_t d = 0; d < nd; ++d) {
      const double ratio = time[gr * nd + d] / fastest;  // (as ever where finite: the searches are fragile to a bit)
      row[3 + d] = !(fastest > 0) ? 0.0f
                   : std::isfinite(ratio) ? static_cast<float>(std::log(ratio))
                                          : static_cast<float>(std::log(std::min(time[gr * nd + d], kLargest)) - std::log(std::min(fastest, kLargest)));
    }
    row[3 + nd] = size[gr] > 0 ? static_cast<float>(first[gr] / static_cast<double>(std::max<std::size_t>(num_ops_, 1))) : 0.0f;
    row[4 + nd] = static_cast<float>(std::log1p(size[gr]));
    const auto ins = heaviest(in[gr]), outs = heaviest(outn[gr]);
    for (std::size_t i = 0; i < k; ++i) {
      row[kNumericBase + nd + i] = i < ins.size() ? static_cast<float>(ins[i].second / rows) : -1.0f;
      row[kNumericBase + nd + k + i] = i < outs.size() ? static_cast<float>(outs[i].second / rows) : -1.0f;
    }
  }
  // Standardize each column over the rows, so that every input is on the same scale.
  for (std::size_t c = 0; c < nm; ++c) {
    double mean = 0.0, sq = 0.0;
    for (std::size_t gr = 0; gr < num_groups; ++gr) mean += f.numeric[gr * nm + c];
    mean /= rows;
    for (std::size_t gr = 0; gr < num_groups; ++gr) sq += (f.numeric[gr * nm + c] - mean) * (f.numeric[gr * nm + c] - mean);
    const double sd = std::sqrt(sq / rows);
    for (std::size_t gr = 0; gr < num_groups; ++gr) {
      float& v = f.numeric[gr * nm + c];
      v = static_cast<float>(sd > 1e-9 ? (v - mean) / sd : v - mean);
    }
  }
  return f;
}

}  // namespace placer::rl
