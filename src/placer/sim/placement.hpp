// Placements: a device for every op of a graph. Users and algorithms choose devices for forward
// ops; gradient ops follow the forward op they differentiate and updates follow their parameter
// (the device of the parameter's home op), as TensorFlow co-locates gradients with their ops.
//
// Placement files are JSON: {"default": "gpu:0", "devices": {KEY: DEVICE, ...}}. A KEY is an op
// name (exact) or a module path (that module and everything under it, at dot boundaries: "cells.1"
// does not match "cells.10"); an exact op name wins over a module path, a longer module path over a
// shorter one, and "default" covers the rest. Keys cover forward ops only.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/graph/graph.hpp"

namespace placer {

// A placement file as written (names, not ids).
struct PlacementSpec {
  std::string default_device;
  std::vector<std::pair<std::string, std::string>> devices;  // key -> device name (keys sorted when read from JSON)
  // The file's "meta": how it was made (`place -o` writes the algorithm, model, cluster, mode,
  // optimizer, memory fraction and step time), as text; read back so that `simulate` can say when
  // it simulates the file under other options. Never part of what the placement means.
  std::vector<std::pair<std::string, std::string>> meta;
  std::string meta_value(const std::string& key) const;  // "" when absent
};

PlacementSpec parse_placement_json(const nlohmann::json& j, const std::string& source);
PlacementSpec load_placement_file(const std::string& path);
nlohmann::json placement_to_json(const PlacementSpec& spec);
void save_placement_file(const PlacementSpec& spec, const std::string& path);

// Devices of the forward ops under `spec`. Throws Error naming a key that matches no forward op or
// module, or a device the cluster does not have. `source` names the file in messages.
std::vector<DeviceId> resolve_forward_placement(const PlacementSpec& spec, const Graph& g, const Cluster& c,
                                                const std::string& source = "placement");

// Devices of every op of `g` (forward, backward, update) from devices of its forward ops.
// REQUIRES: forward_devices.size() == g.num_forward_ops().
std::vector<DeviceId> expand_placement(const Graph& g, std::span<const DeviceId> forward_devices);
// The same, writing into `out` (resized to g.num_ops()); no allocation once `out` has the capacity.
void expand_placement(const Graph& g, std::span<const DeviceId> forward_devices, std::vector<DeviceId>& out);

// The shortest spec for a forward placement: the fewest keys (module paths, then op names) and a
// default that resolve to exactly `forward_devices` (ties: the most used device as default).
PlacementSpec describe_placement(const Graph& g, const Cluster& c, std::span<const DeviceId> forward_devices);

}  // namespace placer
