#include "placer/cluster/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

// Routes minimise the time a 1 MiB message takes over them (cut-through: the latencies' sum plus
// 1 MiB over the slowest hop); the probe size weighs bandwidth against latency the way mid-sized
// tensors do.
constexpr double kRouteProbeBytes = 1024.0 * 1024.0;
// Costs and latencies within a billionth of each other are equal (fewer hops win): sums of the
// same hops taken in different orders differ by rounding alone. (Costs were once rounded hop by
// hop to picoseconds, and to 2^-40 of the costliest hop when that was coarser: an exact tie could
// then go either way, and one absurd link that no route takes made every other hop round to
// nothing: a QA pass.)
constexpr double kTieRelative = 1e-9;


std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }
bool non_negative_finite(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::gpu: return "gpu";
  }
  return "?";
}

DeviceKind parse_device_kind(std::string_view name) {
  if (name == "cpu") return DeviceKind::cpu;
  if (name == "gpu") return DeviceKind::gpu;
  throw Error("unknown device kind " + in_quotes(name) + " (known: cpu, gpu)");
}

double Device::bandwidth_for(double bytes) const {
  if (bandwidth_by_size.empty()) return memory_bandwidth_bytes_per_s;
  if (!(bytes > static_cast<double>(bandwidth_by_size.front().bytes))) return bandwidth_by_size.front().bytes_per_s;
  if (bytes > static_cast<double>(bandwidth_by_size.back().bytes)) return memory_bandwidth_bytes_per_s;
  std::size_t k = 1;
  while (static_cast<double>(bandwidth_by_size[k].bytes) < bytes) ++k;
  const BandwidthPoint &lo = bandwidth_by_size[k - 1], &hi = bandwidth_by_size[k];
  const double f = std::log(bytes / static_cast<double>(lo.bytes)) / std::log(static_cast<double>(hi.bytes) / static_cast<double>(lo.bytes));
  return lo.bytes_per_s + f * (hi.bytes_per_s - lo.bytes_per_s);
}

namespace {

double compute_at(const std::vector<Device::SizePoint>& curve, double size) {
  if (curve.empty()) return 0.0;
  if (!(size > static_cast<double>(curve.front().size))) return curve.front().compute;
  if (!(size < static_cast<double>(curve.back().size))) return curve.back().compute;
  std::size_t k = 1;
  while (static_cast<double>(curve[k].size) < size) ++k;
  const Device::SizePoint &lo = curve[k - 1], &hi = curve[k];
  const double f = std::log(size / static_cast<double>(lo.size)) / std::log(static_cast<double>(hi.size) / static_cast<double>(lo.size));
  return lo.compute + f * (hi.compute - lo.compute);
}

}  // namespace

double Device::product_efficiency_for(double min_dim) const { return compute_at(product_efficiency_by_size, min_dim); }
double Device::conv_efficiency_for(double kernel_area) const { return compute_at(conv_efficiency_by_kernel, kernel_area); }

Cluster Cluster::build(std::string name, std::vector<Device> devices, std::vector<std::string> switches,
                       std::vector<Link> links) {
  const std::string where = "cluster " + in_quotes(name);
  if (name.empty()) throw Error("cluster has an empty name");
  // Names go into tables, traces and one-line messages: a newline in a device's name split the
  // table of `simulate` (a QA pass).
  if (has_control_char(name)) throw Error("the cluster's name has a control character (a newline, a tab, ...)");
  if (devices.empty()) throw Error(where + " has no devices");

  // Node ids: devices 0..n-1, then switches n..n+s-1.
  std::unordered_map<std::string, std::uint32_t> node_of;
  const auto n = static_cast<std::uint32_t>(devices.size());
  for (std::uint32_t i = 0; i < n; ++i) {
    const Device& d = devices[i];
    if (d.name.empty()) throw Error(where + ": device #" + std::to_string(i) + " has an empty name");
    const std::string dev = where + ": device " + in_quotes(d.name);
    // Commands take lists of devices as comma-separated names (simulate's and validate's --on).
    if (d.name.find(',') != std::string::npos) throw Error(dev + ": a device name may not contain ',' (lists of devices are comma-separated)");
    if (has_control_char(d.name)) throw Error(where + ": device #" + std::to_string(i) + "'s name has a control character (a newline, a tab, ...)");
    if (!positive_finite(d.peak_flops))
      throw Error(dev + ": peak_flops must be positive and finite, got " + format_number(d.peak_flops));
    if (!positive_finite(d.memory_bandwidth_bytes_per_s))
      throw Error(dev + ": memory_bandwidth must be positive and finite, got " +
                  format_number(d.memory_bandwidth_bytes_per_s));
    if (d.memory_bytes == 0) throw Error(dev + ": memory_bytes must be positive, got 0");
    for (std::size_t k = 0; k < d.bandwidth_by_size.size(); ++k) {
      const auto& point = d.bandwidth_by_size[k];
      const std::string at = dev + ": bandwidth_by_size[" + std::to_string(k) + "]";
      if (point.bytes == 0) throw Error(at + ": bytes must be positive, got 0");
      if (k > 0 && point.bytes <= d.bandwidth_by_size[k - 1].bytes)
        throw Error(at + ": sizes must ascend, got " + std::to_string(point.bytes) + " bytes after " +
                    std::to_string(d.bandwidth_by_size[k - 1].bytes));
      if (!positive_finite(point.bytes_per_s))
        throw Error(at + ": bandwidth must be positive and finite, got " + format_number(point.bytes_per_s));
    }
    for (const auto& [field, key, curve] : {std::tuple{"product_efficiency_by_size", "min_dim", &d.product_efficiency_by_size},
                                            std::tuple{"conv_efficiency_by_kernel", "kernel_area", &d.conv_efficiency_by_kernel}})
      for (std::size_t k = 0; k < curve->size(); ++k) {
        const auto& point = (*curve)[k];
        const std::string at = dev + ": " + field + "[" + std::to_string(k) + "]";
        if (point.size == 0) throw Error(at + ": " + key + " must be positive, got 0");
        if (k > 0 && point.size <= (*curve)[k - 1].size)
          throw Error(at + ": " + key + " must ascend, got " + std::to_string(point.size) + " after " + std::to_string((*curve)[k - 1].size));
        if (!positive_finite(point.compute))
          throw Error(at + ": compute must be positive and finite, got " + format_number(point.compute));
      }
    for (const auto& [type, e] : d.efficiency_by_type) {
      const std::string at = dev + ": efficiency_by_type";
      if (type.empty()) throw Error(at + " names an empty op type");
      for (auto [term, value] : {std::pair{"compute", e.compute}, std::pair{"memory", e.memory}})
        if (!non_negative_finite(value))
          throw Error(at + "." + type + ": " + term + " must be non-negative and finite, got " + format_number(value));
      if (!(e.compute > 0) && !(e.memory > 0)) throw Error(at + "." + type + ": needs a positive compute or memory efficiency");
    }
    if (!non_negative_finite(d.op_overhead_s))
      throw Error(dev + ": op_overhead_s must be non-negative and finite, got " + format_number(d.op_overhead_s));
    if (d.streams < 1) throw Error(dev + ": streams must be at least 1, got " + std::to_string(d.streams));
    if (!node_of.emplace(d.name, i).second) throw Error(where + ": device " + in_quotes(d.name) + " is declared twice");
  }
  for (std::size_t s = 0; s < switches.size(); ++s) {
    const std::string& sw = switches[s];
    if (sw.empty()) throw Error(where + ": switch #" + std::to_string(s) + " has an empty name");
    if (has_control_char(sw)) throw Error(where + ": switch #" + std::to_string(s) + "'s name has a control character (a newline, a tab, ...)");
    auto [it, inserted] = node_of.emplace(sw, n + static_cast<std::uint32_t>(s));
    if (!inserted)
      throw Error(where + ": switch " + in_quotes(sw) + " is declared twice (or shares its name with a device)");
  }

  auto node_list = [&] {
    std::string out = "devices: ";
    for (std::size_t i = 0; i < devices.size(); ++i) out += (i ? ", " : "") + devices[i].name;
    if (!switches.empty()) {
      out += "; switches: ";
      for (std::size_t i = 0; i < switches.size(); ++i) out += (i ? ", " : "") + switches[i];
    }
    return out;
  };

  Cluster c;
  const std::size_t num_channels = 2 * links.size();
  c.channel_bandwidth_.resize(num_channels);
  c.channel_latency_s_.resize(num_channels);
  c.channel_source_node_.resize(num_channels);
  c.channel_target_node_.resize(num_channels);
  std::unordered_map<std::string, std::size_t> link_of;
  for (std::size_t l = 0; l < links.size(); ++l) {
    Link& link = links[l];
    if (has_control_char(link.name)) throw Error(where + ": link #" + std::to_string(l) + "'s name has a control character (a newline, a tab, ...)");
    if (link.name.empty()) link.name = link.a + "<->" + link.b;
    const std::string lk = where + ": link " + in_quotes(link.name);
    if (!link_of.emplace(link.name, l).second)
      throw Error(lk + " is declared twice (give parallel links distinct names)");
    auto endpoint = [&](const std::string& node, const char* field) {
      auto it = node_of.find(node);
      if (it == node_of.end())
        throw Error(lk + ": endpoint " + field + " " + in_quotes(node) + " is neither a device nor a switch (" +
                    node_list() + ")");
      return it->second;
    };
    const std::uint32_t a = endpoint(link.a, "a");
    const std::uint32_t b = endpoint(link.b, "b");
    if (a == b) throw Error(lk + " joins " + in_quotes(link.a) + " to itself");
    if (!positive_finite(link.bandwidth_ab_bytes_per_s))
      throw Error(lk + ": bandwidth " + link.a + "->" + link.b + " must be positive and finite, got " +
                  format_number(link.bandwidth_ab_bytes_per_s));
    if (!positive_finite(link.bandwidth_ba_bytes_per_s))
      throw Error(lk + ": bandwidth " + link.b + "->" + link.a + " must be positive and finite, got " +
                  format_number(link.bandwidth_ba_bytes_per_s));
    if (!non_negative_finite(link.latency_s))
      throw Error(lk + ": latency_s must be non-negative and finite, got " + format_number(link.latency_s));
    const std::size_t ab = 2 * l, ba = 2 * l + 1;
    c.channel_bandwidth_[ab] = link.bandwidth_ab_bytes_per_s;
    c.channel_bandwidth_[ba] = link.bandwidth_ba_bytes_per_s;
    c.channel_latency_s_[ab] = c.channel_latency_s_[ba] = link.latency_s;
    c.channel_source_node_[ab] = c.channel_target_node_[ba] = a;
    c.channel_target_node_[ab] = c.channel_source_node_[ba] = b;
  }

  c.name_ = std::move(name);
  c.devices_ = std::move(devices);
  c.switches_ = std::move(switches);
  c.links_ = std::move(links);

  // Channel names: "a->b", plus the link name where another link joins the same two nodes.
  c.channel_names_.resize(num_channels);
  for (ChannelId ch = 0; ch < num_channels; ++ch) {
    const std::uint32_t s = c.channel_source_node_[ch], t = c.channel_target_node_[ch];
    bool parallel = false;
    for (std::size_t l = 0; l < c.links_.size() && !parallel; ++l) {
      if (l == ch / 2) continue;
      const std::uint32_t la = c.channel_source_node_[2 * l], lb = c.channel_target_node_[2 * l];
      parallel = (la == s && lb == t) || (la == t && lb == s);
    }
    c.channel_names_[ch] = std::string(c.node_name(s)) + "->" + std::string(c.node_name(t));
    if (parallel) c.channel_names_[ch] += " [" + c.links_[ch / 2].name + "]";
  }

  // Outgoing channels of every node, CSR, in channel id order.
  const std::size_t num_nodes = c.devices_.size() + c.switches_.size();
  std::vector<std::uint32_t> out_begin(num_nodes + 1, 0);
  for (ChannelId ch = 0; ch < num_channels; ++ch) ++out_begin[c.channel_source_node_[ch] + 1];
  for (std::size_t v = 0; v < num_nodes; ++v) out_begin[v + 1] += out_begin[v];
  std::vector<ChannelId> out_channels(num_channels);
  {
    std::vector<std::uint32_t> fill(out_begin.begin(), out_begin.end() - 1);
    for (ChannelId ch = 0; ch < num_channels; ++ch) out_channels[fill[c.channel_source_node_[ch]]++] = ch;
  }
  // Routes: from every device, a label-setting search over (latency, bottleneck bandwidth, hops)
  // (Martins' multi-criteria Dijkstra): each node keeps the paths to it that no other path beats
  // on all three (covers, below), taken in order of latency; then each destination takes the path
  // of least `latency + 1 MiB / bandwidth`, the time Cluster::transfer_time_s gives a 1 MiB
  // message over it (cut-through, as the simulator prices it). Costs and latencies within a
  // billionth of each other are equal (fewer hops win, then the lower id of the last channel).
  // Devices other than the source are never expanded: they end routes, they do not relay them.
  constexpr ChannelId kNoChannel = std::numeric_limits<ChannelId>::max();
  constexpr std::uint32_t kNoLabel = std::numeric_limits<std::uint32_t>::max();
  struct Label {
    double latency_s = 0;  // capped at 1e300: sums of absurd latencies stay comparable
    double bandwidth = std::numeric_limits<double>::infinity();
    std::uint32_t hops = 0;
    ChannelId via = kNoChannel;
    std::uint32_t node = 0;
    std::uint32_t pred = kNoLabel;
    bool taken = false;  // taken from the queue (its extensions are out)
    bool dead = false;   // covered by a later label before it was taken
  };
  auto near = [](double x, double y) { return !(std::abs(x - y) > kTieRelative * std::max(x, y)); };
  // Whether `a` makes `b` useless, whatever either is extended by: no less bandwidth, no more hops
  // and no more latency (within a billionth); when equal in all three, the lower last channel. (A
  // path of fewer hops is kept beside a faster one of more hops: the two may end in a tie, which
  // fewer hops win. Dropped, a link no route took could change routes: a review.)
  auto covers = [&](const Label& a, const Label& b) {
    if (a.bandwidth < b.bandwidth || a.hops > b.hops) return false;
    const bool same_latency = near(a.latency_s, b.latency_s);
    if (!same_latency && a.latency_s > b.latency_s) return false;
    if (!same_latency || a.bandwidth > b.bandwidth || a.hops < b.hops) return true;
    return a.via <= b.via;
  };
  auto cost_of = [](const Label& l) { return std::min(l.latency_s + kRouteProbeBytes / l.bandwidth, 1e300); };
  // Labels a node keeps at most: real machines need a handful (one per bandwidth its paths may
  // have). A ladder of parallel fast-narrow and slow-wide links gave a switch as many as its rungs
  // before it (1,500 switches: 15 s to build, a review); past the cap, a candidate takes the place
  // of the waiting label of greatest 1 MiB time if it is quicker, else it is dropped, so that
  // routes are exact up to that many labels per node and near-best beyond.
  constexpr std::size_t kMaxLabels = 32;
  using QueueEntry = std::tuple<double, double, std::uint32_t, ChannelId, std::uint32_t>;  // latency, -bandwidth, hops, via, label
  std::vector<Label> labels;
  std::vector<std::vector<std::uint32_t>> at(num_nodes);  // labels kept at each node
  std::vector<ChannelId> path;
  c.route_begin_.assign(std::size_t{n} * n + 1, 0);
  c.route_latency_s_.assign(std::size_t{n} * n, 0.0);
  c.route_bandwidth_.assign(std::size_t{n} * n, std::numeric_limits<double>::infinity());
  for (std::uint32_t from = 0; from < n; ++from) {
    labels.clear();
    for (auto& kept : at) kept.clear();
    std::priority_queue<QueueEntry, std::vector<QueueEntry>, std::greater<>> queue;
    labels.push_back(Label{0.0, std::numeric_limits<double>::infinity(), 0, kNoChannel, from, kNoLabel, false, false});
    at[from].push_back(0);
    queue.emplace(0.0, -std::numeric_limits<double>::infinity(), 0, kNoChannel, 0);
    while (!queue.empty()) {
      const std::uint32_t id = std::get<4>(queue.top());
      queue.pop();
      if (labels[id].dead) continue;
      labels[id].taken = true;
      const std::uint32_t v = labels[id].node;
      if (v < n && v != from) continue;
      for (std::uint32_t i = out_begin[v]; i < out_begin[v + 1]; ++i) {
        const ChannelId ch = out_channels[i];
        const std::uint32_t t = c.channel_target_node_[ch];
        if (t == from) continue;
        const Label& l = labels[id];
        Label candidate{std::min(l.latency_s + c.channel_latency_s_[ch], 1e300), std::min(l.bandwidth, c.channel_bandwidth_[ch]),
                        l.hops + 1, ch, t, id, false, false};
        auto& kept = at[t];
        if (std::any_of(kept.begin(), kept.end(), [&](std::uint32_t x) { return covers(labels[x], candidate); })) continue;
        // Labels still in the queue that the candidate covers are dropped; those already taken
        // stay (their extensions are out), and the final choice weighs them like the others.
        std::erase_if(kept, [&](std::uint32_t x) {
          Label& other = labels[x];
          if (other.taken || !covers(candidate, other)) return false;
          other.dead = true;
          return true;
        });
        if (kept.size() >= kMaxLabels) {
          auto worst = kept.end();
          for (auto it = kept.begin(); it != kept.end(); ++it)
            if (!labels[*it].taken && (worst == kept.end() || cost_of(labels[*it]) > cost_of(labels[*worst]))) worst = it;
          if (worst == kept.end() || !(cost_of(candidate) < cost_of(labels[*worst]))) continue;
          labels[*worst].dead = true;
          kept.erase(worst);
        }
        const auto cid = static_cast<std::uint32_t>(labels.size());
        labels.push_back(candidate);
        kept.push_back(cid);
        queue.emplace(candidate.latency_s, -candidate.bandwidth, candidate.hops, ch, cid);
      }
    }
    for (std::uint32_t to = 0; to < n; ++to) {
      const std::size_t k = std::size_t{from} * n + to;
      path.clear();
      if (to != from) {
        // The path of least 1 MiB time; ties go to fewer hops, then to the lower last channel,
        // then to the path found first.
        std::uint32_t best = kNoLabel;
        double best_cost = 0;
        for (std::uint32_t x : at[to]) {
          const Label& l = labels[x];
          const double cost = cost_of(l);
          if (best == kNoLabel || (!near(cost, best_cost) ? cost < best_cost
                                                          : std::tie(l.hops, l.via, x) < std::tie(labels[best].hops, labels[best].via, best)))
            best = x, best_cost = cost;
        }
        if (best == kNoLabel)
          throw Error(where + ": no route from device " + in_quotes(c.devices_[from].name) + " to device " +
                      in_quotes(c.devices_[to].name) +
                      " (routes pass only through switches, never through another device)");
        for (std::uint32_t x = best; labels[x].pred != kNoLabel; x = labels[x].pred) path.push_back(labels[x].via);
        std::reverse(path.begin(), path.end());
        double latency = 0, bandwidth = std::numeric_limits<double>::infinity();
        for (ChannelId ch : path) {
          latency += c.channel_latency_s_[ch];
          bandwidth = std::min(bandwidth, c.channel_bandwidth_[ch]);
        }
        c.route_latency_s_[k] = latency;
        c.route_bandwidth_[k] = bandwidth;
      }
      if (c.route_channels_.size() + path.size() > std::numeric_limits<std::uint32_t>::max())
        throw Error(where + ": " + std::to_string(n) + " devices: the routes between every pair hold more than 2^32 hops");
      c.route_channels_.insert(c.route_channels_.end(), path.begin(), path.end());
      c.route_begin_[k + 1] = static_cast<std::uint32_t>(c.route_channels_.size());
    }
  }
  return c;
}

std::optional<DeviceId> Cluster::find_device(std::string_view name) const {
  for (std::size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].name == name) return static_cast<DeviceId>(i);
  return std::nullopt;
}

DeviceId Cluster::device_id(std::string_view name) const {
  if (auto id = find_device(name)) return *id;
  std::string known;
  for (const Device& d : devices_) known += (known.empty() ? "" : ", ") + d.name;
  throw Error("cluster " + in_quotes(name_) + " has no device " + in_quotes(name) + " (devices: " + known + ")");
}

std::vector<DeviceId> Cluster::device_ids(DeviceKind kind) const {
  std::vector<DeviceId> ids;
  for (std::size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].kind == kind) ids.push_back(static_cast<DeviceId>(i));
  return ids;
}

std::string_view Cluster::node_name(std::uint32_t node) const {
  return node < devices_.size() ? std::string_view(devices_[node].name)
                                : std::string_view(switches_[node - devices_.size()]);
}

std::string_view Cluster::channel_source(ChannelId c) const {
  assert(c < num_channels());
  return node_name(channel_source_node_[c]);
}

std::string_view Cluster::channel_target(ChannelId c) const {
  assert(c < num_channels());
  return node_name(channel_target_node_[c]);
}

std::string Cluster::route_description(DeviceId from, DeviceId to) const {
  std::string out = devices_[from].name;
  for (ChannelId ch : route(from, to)) out += " -> " + std::string(channel_target(ch));
  return out;
}

}  // namespace placer
