// The machine a graph is placed on: compute devices (CPUs, GPUs), non-compute switches, and
// full-duplex links between them, with the fastest route between every ordered pair of devices
// computed once at build time. Units: seconds, bytes, bytes/s, FLOP/s. A built Cluster is immutable
// and safe to share across threads; its hot lookups (route, channel_bandwidth, transfer_time_s)
// are O(1) and never allocate. The JSON format and the presets are documented in docs/clusters.md.
//
//   Cluster c = resolve_cluster("k80x4");              // a preset name, or a cluster JSON file
//   DeviceId a = c.device_id("gpu:0"), b = c.device_id("gpu:2");
//   for (ChannelId ch : c.route(a, b)) ...             // gpu:0->pcie0, pcie0->root0, root0->pcie1, ...
//   double t = c.transfer_time_s(a, b, 4e6);           // uncontended, cut-through
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placer/graph/types.hpp"

namespace placer {

using DeviceId = std::uint32_t;
// One direction of a link: channel = link * 2 + (0 for a->b, 1 for b->a).
using ChannelId = std::uint32_t;

enum class DeviceKind : std::uint8_t { cpu, gpu };
std::string_view device_kind_name(DeviceKind kind);  // "cpu", "gpu"
DeviceKind parse_device_kind(std::string_view name);  // throws Error naming the unknown kind

struct Device {
  std::string name;  // "cpu:0", "gpu:3", ...; unique among devices and switches
  DeviceKind kind = DeviceKind::gpu;
  std::string model;                         // free text, e.g. "NVIDIA Tesla K80 (one GK210)"
  double peak_flops = 0;                     // FLOP/s a large fp32 matrix product can reach
  double memory_bandwidth_bytes_per_s = 0;   // device memory (DRAM/HBM) bandwidth
  std::uint64_t memory_bytes = 0;            // memory capacity
  double op_overhead_s = 0;                  // fixed cost of every op (framework + launch)
  int streams = 1;                           // ops the device can run at once
  // Efficiencies measured on this device (`placer fit`), per op class: the fraction of peak_flops
  // (compute) and of the bandwidth at the op's size (memory; bandwidth_for) that the class reaches. A zero keeps the cost
  // model's default for the device kind (docs/cost-model.md).
  struct Efficiency {
    double compute = 0, memory = 0;
    bool operator==(const Efficiency&) const = default;
  };
  std::array<Efficiency, kNumOpClasses> efficiency{};
  // The same for backward ops (gradients), and their per-op overhead (negative: op_overhead_s):
  // in an eager framework a gradient is an autograd node running several kernels. A zero
  // efficiency falls back to the forward one above.
  std::array<Efficiency, kNumOpClasses> backward_efficiency{};
  // Efficiencies of single op types (a gradient by its own type: "MaxPoolGrad"), for kernels that
  // run far from their class on this device (libtorch's CPU max pool: about 3 ns per window
  // element, against a fraction of a nanosecond for an elementwise op's element). A type's non-zero
  // terms take the place of its class's, forward or backward; `placer fit` leaves such ops out of
  // the class fits. Some ops are keyed apart from their type (priced_type: a depthwise convolution
  // is "ConvDepthwise", a reflect pad "PadReflect"; docs/cost-model.md#op-types).
  std::map<std::string, Efficiency, std::less<>> efficiency_by_type;
  double backward_op_overhead_s = -1;
  double backward_overhead_s() const { return backward_op_overhead_s >= 0 ? backward_op_overhead_s : op_overhead_s; }
  // Bandwidth by working set (bytes read + written, strictly ascending), where caches make a smaller one
  // faster: a streaming copy measured at each size. Empty: memory_bandwidth at every size. An op
  // touching more than the last size gets memory_bandwidth (docs/cost-model.md#caches).
  struct BandwidthPoint {
    std::uint64_t bytes = 0;
    double bytes_per_s = 0;
    bool operator==(const BandwidthPoint&) const = default;
  };
  std::vector<BandwidthPoint> bandwidth_by_size;
  // The bandwidth an op reading and writing `bytes` in all gets: bandwidth_by_size interpolated
  // (linear in log(bytes)), its first point's below it, memory_bandwidth past its last.
  double bandwidth_for(double bytes) const;
  // A compute efficiency by a size of the op's shape (strictly ascending sizes).
  struct SizePoint {
    std::uint64_t size = 0;
    double compute = 0;
    bool operator==(const SizePoint&) const = default;
  };
  // The compute efficiency of a matrix product by its smallest dimension (OpWork::product_min_dim):
  // a CPU's BLAS ran a product of 8 rows at 0.4 of a large one's rate and one of 16 at 0.55
  // (OpenBLAS, docs/cost-model.md#products). Where given it prices every product with a known
  // dimension, forward and gradient, in place of the matmul class's compute efficiency (an op
  // type's own, efficiency_by_type, still wins); `placer fit` drops it when it fits products.
  // Empty: the class's efficiency.
  std::vector<SizePoint> product_efficiency_by_size;
  // The same for ungrouped forward convolutions by their kernel area (OpWork::conv_kernel_area;
  // their gradients keep the conv class's efficiency): oneDNN ran a CPU's 3x3 convolutions at 1.6
  // times its 1x1 ones' rate (docs/cost-model.md#products).
  std::vector<SizePoint> conv_efficiency_by_kernel;
  // The curves interpolated (linear in log(size)), the first point's below it and the last's
  // above; 0 when the curve is empty (the class's efficiency applies).
  double product_efficiency_for(double min_dim) const;
  double conv_efficiency_for(double kernel_area) const;
  bool operator==(const Device&) const = default;
};

// A full-duplex link between two nodes (devices or switches), named by node name.
struct Link {
  std::string name;  // unique; Cluster::build names an unnamed link "a<->b"
  std::string a, b;
  double bandwidth_ab_bytes_per_s = 0;  // channel a->b
  double bandwidth_ba_bytes_per_s = 0;  // channel b->a
  double latency_s = 0;                 // each direction
  bool operator==(const Link&) const = default;
};

class Cluster {
 public:
  // Validates the description and computes every route. Throws Error naming the culprit on: no
  // devices, an empty or duplicate node or link name, a link naming a missing node or joining a
  // node to itself, a non-positive or non-finite bandwidth/flops/memory, a negative latency or op
  // overhead, fewer than one stream, a device pair with no route. Devices are endpoints only:
  // a route never passes through a device, only through switches.
  static Cluster build(std::string name, std::vector<Device> devices, std::vector<std::string> switches,
                       std::vector<Link> links);

  const std::string& name() const { return name_; }

  std::size_t num_devices() const { return devices_.size(); }
  const Device& device(DeviceId id) const { assert(id < devices_.size()); return devices_[id]; }
  std::span<const Device> devices() const { return devices_; }
  std::optional<DeviceId> find_device(std::string_view name) const;
  // Throws Error naming the device and listing the cluster's devices.
  DeviceId device_id(std::string_view name) const;
  // The ids of every device of one kind, in id order.
  std::vector<DeviceId> device_ids(DeviceKind kind) const;

  std::size_t num_links() const { return links_.size(); }
  const Link& link(std::size_t index) const { assert(index < links_.size()); return links_[index]; }
  std::span<const Link> links() const { return links_; }
  std::span<const std::string> switches() const { return switches_; }

  std::size_t num_channels() const { return channel_bandwidth_.size(); }  // 2 * num_links
  double channel_bandwidth(ChannelId c) const { assert(c < num_channels()); return channel_bandwidth_[c]; }
  double channel_latency_s(ChannelId c) const { assert(c < num_channels()); return channel_latency_s_[c]; }
  // "pcie0->gpu:1"; a link parallel to another between the same nodes adds " [link name]".
  std::string channel_name(ChannelId c) const { assert(c < num_channels()); return channel_names_[c]; }
  std::size_t channel_link(ChannelId c) const { return c / 2; }
  std::string_view channel_source(ChannelId c) const;  // node name the channel leaves
  std::string_view channel_target(ChannelId c) const;  // node name the channel enters

  // The channels a transfer from -> to crosses, in order; empty when from == to. O(1), no allocation.
  std::span<const ChannelId> route(DeviceId from, DeviceId to) const {
    const std::size_t k = pair_index(from, to);
    return {route_channels_.data() + route_begin_[k], route_channels_.data() + route_begin_[k + 1]};
  }
  double route_latency_s(DeviceId from, DeviceId to) const { return route_latency_s_[pair_index(from, to)]; }
  // Bottleneck bandwidth of the route; +inf when from == to.
  double route_bandwidth(DeviceId from, DeviceId to) const { return route_bandwidth_[pair_index(from, to)]; }
  // Uncontended cut-through time: route latency + bytes / bottleneck bandwidth; 0 when from == to.
  double transfer_time_s(DeviceId from, DeviceId to, double bytes) const {
    const std::size_t k = pair_index(from, to);
    return from == to ? 0.0 : route_latency_s_[k] + bytes / route_bandwidth_[k];
  }
  // "gpu:0 -> pcie0 -> gpu:1", for reports and messages; "gpu:0" when from == to.
  std::string route_description(DeviceId from, DeviceId to) const;

 private:
  Cluster() = default;
  std::size_t pair_index(DeviceId from, DeviceId to) const {
    assert(from < devices_.size() && to < devices_.size());
    return std::size_t{from} * devices_.size() + to;
  }
  std::string_view node_name(std::uint32_t node) const;  // devices first, then switches

  std::string name_;
  std::vector<Device> devices_;
  std::vector<std::string> switches_;
  std::vector<Link> links_;
  // Per channel (struct of arrays).
  std::vector<double> channel_bandwidth_;
  std::vector<double> channel_latency_s_;
  std::vector<std::uint32_t> channel_source_node_;
  std::vector<std::uint32_t> channel_target_node_;
  std::vector<std::string> channel_names_;
  // Per ordered device pair k = from * n + to: channels route_channels_[route_begin_[k] .. route_begin_[k+1]).
  std::vector<std::uint32_t> route_begin_;
  std::vector<ChannelId> route_channels_;
  std::vector<double> route_latency_s_;
  std::vector<double> route_bandwidth_;
};

// JSON format "placer-cluster", version 1 (docs/clusters.md). `source` names the file in messages.
Cluster parse_cluster_json(const nlohmann::json& j, const std::string& source);
// Missing file, bad JSON or a bad cluster -> Error naming the path.
Cluster load_cluster_file(const std::string& path);
// Round-trips through parse_cluster_json: same devices, switches, links and so the same routes.
nlohmann::json cluster_to_json(const Cluster& cluster);

// Built-in machines (docs/clusters.md gives each constant's source).
std::vector<std::string> cluster_preset_names();
// Throws Error listing the presets for an unknown name.
Cluster cluster_preset(std::string_view name);
// A preset name, else a path to a cluster JSON file.
Cluster resolve_cluster(const std::string& preset_or_path);

// Adds a preset at run time (layers above the cluster layer, e.g. exec's `local`, the detected
// machine); consulted after the built-in presets by cluster_preset_names, cluster_preset and
// resolve_cluster. Registering a name again replaces it. Not thread-safe: call at start-up.
void register_cluster_preset(std::string name, std::function<Cluster()> make);

}  // namespace placer
