#include "placer/sim/placement.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"

namespace placer {

std::string PlacementSpec::meta_value(const std::string& key) const {
  for (const auto& [k, v] : meta)
    if (k == key) return v;
  return "";
}

PlacementSpec parse_placement_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": a placement must be a JSON object with 'default' and 'devices'");
  // The format first: another placer file (a cluster's) was named by its first unknown field.
  if (auto it = j.find("format"); it != j.end() && *it != "placer-placement")
    throw Error(source + ": field 'format' is " + json_excerpt(*it) + ", expected \"placer-placement\" (is it a placement file?)");
  PlacementSpec spec;
  for (auto& [key, value] : j.items()) {
    if (key == "default") {
      if (!value.is_string() || value.get<std::string>().empty()) throw Error(source + ": 'default' must be a device name");
      spec.default_device = value.get<std::string>();
    } else if (key == "devices") {
      if (!value.is_object()) throw Error(source + ": 'devices' must be an object mapping op names or module paths to devices");
      for (auto& [k, v] : value.items()) {
        if (!v.is_string()) throw Error(source + ": device of '" + k + "' must be a device name");
        spec.devices.emplace_back(k, v.get<std::string>());
      }
    } else if (key == "format") {
      if (value != "placer-placement") throw Error(source + ": 'format' must be \"placer-placement\"");
    } else if (key == "version") {
      check_format_version(value, source, "placement", 1);
    } else if (key == "meta") {
      if (value.is_object())  // free text otherwise
        for (auto& [k, v] : value.items()) spec.meta.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    } else if (key != "comment") {
      throw Error(source + ": unknown field '" + key + "' (known: default, devices, format, version, comment, meta)");
    }
  }
  if (spec.default_device.empty() && spec.devices.empty())
    throw Error(source + ": the placement names no device (give 'default' and/or 'devices')");
  return spec;
}

PlacementSpec load_placement_file(const std::string& path) {
  return parse_placement_json(read_json_file(path, "placement"), "placement file '" + path + "'");
}

nlohmann::json placement_to_json(const PlacementSpec& spec) {
  nlohmann::json devices = nlohmann::json::object();
  for (const auto& [key, device] : spec.devices) devices[key] = device;
  nlohmann::json j = {{"format", "placer-placement"}, {"version", 1}, {"default", spec.default_device}, {"devices", devices}};
  if (!spec.meta.empty()) {
    nlohmann::json meta = nlohmann::json::object();
    for (const auto& [key, value] : spec.meta) meta[key] = value;
    j["meta"] = meta;
  }
  return j;
}

void save_placement_file(const PlacementSpec& spec, const std::string& path) {
  write_json_file(path, placement_to_json(spec), "placement", 2);
}

std::vector<DeviceId> resolve_forward_placement(const PlacementSpec& spec, const Graph& g, const Cluster& c,
                                                const std::string& source) {
  auto device_of = [&](const std::string& name, const std::string& what) {
    if (auto d = c.find_device(name)) return *d;
    std::string known;
    for (const auto& dev : c.devices()) known += (known.empty() ? "" : ", ") + dev.name;
    // (--on gives the default alone: no 'default' to blame.)
    throw Error(source + ": " + (what.empty() ? std::string() : what + " names ") + "device '" + name + "', which cluster '" + c.name() +
                "' does not have (devices: " + known + ")");
  };
  const std::size_t n = g.num_forward_ops();
  constexpr DeviceId kUnset = 0xFFFFFFFFu;
  std::vector<DeviceId> by_op(n, kUnset);
  std::vector<DeviceId> by_module(g.num_modules(), kUnset);
  // Modules that hold a forward op (themselves or below): a key naming another places nothing.
  std::vector<bool> has_forward(g.num_modules(), false);
  for (OpId o = 0; o < n; ++o)
    for (ModuleId m = g.op_module(o); m != 0 && !has_forward[m]; m = g.module_parent(m)) has_forward[m] = true;
  for (const auto& [key, device] : spec.devices) {
    const DeviceId d = device_of(device, "key '" + key + "'");
    // An exact op name wins: a key that names an op and a module too places the op alone (as
    // describe_placement writes it).
    if (OpId o = g.find_op(key); o != kNoId && o < n) by_op[o] = d;
    else if (auto m = g.find_module(key); m && *m != 0) {
      if (!has_forward[*m])
        throw Error(source + ": key '" + key + "' names a module that holds no forward op (keys place forward ops; the backward " +
                    "and update ops follow them)");
      by_module[*m] = d;
    }
    else if (key.empty())  // the "(top level)" row of `placer inspect`: no module path to name
      throw Error(source + ": key '' names no op or module: ops outside every module (inspect's \"(top level)\") are placed by "
                  "their op names, or by 'default'");
    else if (o != kNoId) {
      // A backward, loss or update op of the step: it follows its forward op (the message read as a
      // misspelt name: a QA pass).
      OpId f = g.forward_op(o);
      if (f == kNoId && g.updated_param(o) != kNoId) f = g.param_home(g.updated_param(o));
      throw Error(source + ": key '" + key + "' names a backward, loss or update op, which runs where its forward op runs" +
                  (f != kNoId && f < n ? " ('" + g.op_name(f) + "'): key that op or its module" : std::string(": keys place forward ops")));
    } else if (const TensorId t = g.find_tensor(key); t != kNoId) {
      const OpId home = g.producer(t) == kNoId ? g.param_home(t) : kNoId;
      throw Error(source + ": key '" + key + "' names a tensor, not an op" +
                  (home != kNoId && home < n ? ": a parameter or input lives where its first reader runs ('" + g.op_name(home) + "')"
                                             : std::string(" (keys name forward ops and modules)")));
    } else throw Error(source + ": key '" + key + "' matches no forward op and no module of the model");
  }
  const DeviceId fallback =
      spec.default_device.empty() ? kUnset : device_of(spec.default_device, spec.devices.empty() && source == "--on" ? "" : "'default'");
  std::vector<DeviceId> out(n);
  std::vector<OpId> uncovered;
  for (OpId o = 0; o < n; ++o) {
    DeviceId d = by_op[o];
    for (ModuleId m = g.op_module(o); d == kUnset && m != 0; m = g.module_parent(m)) d = by_module[m];
    if (d == kUnset) d = fallback;
    if (d == kUnset) uncovered.push_back(o);
    out[o] = d;
  }
  if (!uncovered.empty()) {
    // Named with their modules, a few of them: the first alone may be an op the user never wrote
    // (an exporter's Identity of a weight), the module says which key would cover it.
    std::string named;
    for (std::size_t i = 0; i < uncovered.size() && i < 3; ++i) {
      const OpId o = uncovered[i];
      const ModuleId m = g.op_module(o);
      named += (i ? ", '" : "'") + g.op_name(o) + "'" + (m != 0 ? " (module " + g.module_name(m) + ")" : std::string(" (top level)"));
    }
    throw Error(source + ": " + std::to_string(uncovered.size()) + (uncovered.size() == 1 ? " forward op is" : " forward ops are") +
                " covered by no key and there is no 'default': " + named + (uncovered.size() > 3 ? ", ..." : "") +
                "; add keys for them (op or module names: `placer inspect --depth N` lists modules) or a 'default'");
  }
  return out;
}

void expand_placement(const Graph& g, std::span<const DeviceId> fwd, std::vector<DeviceId>& out) {
  const std::size_t nf = g.num_forward_ops();
  if (fwd.size() != nf)
    throw Error("placement gives " + std::to_string(fwd.size()) + " devices for " + std::to_string(nf) + " forward ops");
  out.resize(g.num_ops());
  std::copy(fwd.begin(), fwd.end(), out.begin());
  for (OpId o = static_cast<OpId>(nf); o < g.num_ops(); ++o) {
    OpId anchor = g.forward_op(o);
    if (anchor == kNoId && g.updated_param(o) != kNoId) anchor = g.param_home(g.updated_param(o));
    out[o] = anchor != kNoId && anchor < nf ? fwd[anchor] : fwd.empty() ? 0 : fwd[0];
  }
}

std::vector<DeviceId> expand_placement(const Graph& g, std::span<const DeviceId> fwd) {
  std::vector<DeviceId> out;
  expand_placement(g, fwd, out);
  return out;
}

PlacementSpec describe_placement(const Graph& g, const Cluster& c, std::span<const DeviceId> fwd) {
  // The fewest keys: a tree search over the modules. at[m * nd + d] is the fewest keys that place
  // module m's ops (those directly in it and under it) when m inherits device d from above: none
  // at m, its ops other than d keyed one by one and its children inheriting d; or one key at m
  // naming another device e, then as if m inherited e. The default is the root's best device
  // (ties: the most used one, then the lowest id); among equally short files, keys at the outermost
  // modules that can take them. A module whose path is also a forward op's name
  // cannot be a key (the op's exact name would win); the root has no path.
  const std::size_t n = g.num_forward_ops(), nm = g.num_modules(), nd = c.num_devices();
  PlacementSpec spec;
  if (nm == 0 || nd == 0) return spec;
  std::vector<std::size_t> count(nd, 0);
  for (OpId o = 0; o < n; ++o) ++count[fwd[o]];
  // at[m * nd + d]: keys under m when nothing is keyed at m and m places its ops on d.
  std::vector<std::size_t> at(nm * nd, 0), direct(nm, 0), direct_on(nm * nd, 0);
  std::vector<bool> has_ops(nm, false);
  for (OpId o = 0; o < n; ++o) ++direct[g.op_module(o)], ++direct_on[g.op_module(o) * nd + fwd[o]];
  for (ModuleId m = 0; m < nm; ++m)
    for (DeviceId d = 0; d < nd; ++d) at[m * nd + d] = direct[m] - direct_on[m * nd + d];  // its own ops not on d
  for (OpId o = 0; o < n; ++o)
    for (ModuleId m = g.op_module(o);; m = g.module_parent(m)) {
      if (has_ops[m]) break;
      has_ops[m] = true;
      if (m == 0) break;
    }
  std::vector<bool> keyable(nm, false);
  for (ModuleId m = 1; m < nm; ++m) {
    const OpId namesake = g.find_op(g.module_name(m));
    keyable[m] = has_ops[m] && !(namesake != kNoId && namesake < n);
  }
  // m's two best devices to name in a key at m (lowest id first among equals; the second kNoId
  // with one device): a key at m under inherited d names the best other than d.
  auto two_best = [&](ModuleId m) {
    DeviceId first = 0, second = kNoId;
    for (DeviceId e = 1; e < nd; ++e) {
      if (at[m * nd + e] < at[m * nd + first]) second = first, first = e;
      else if (second == kNoId || at[m * nd + e] < at[m * nd + second]) second = e;
    }
    return std::pair{first, second};
  };
  // Bottom-up (parents have smaller ids): each module's best, added into its parent's.
  for (ModuleId m = static_cast<ModuleId>(nm); m-- > 1;) {
    if (!has_ops[m]) continue;
    const auto [first, second] = two_best(m);
    const ModuleId parent = g.module_parent(m);
    for (DeviceId d = 0; d < nd; ++d) {
      std::size_t best = at[m * nd + d];
      const DeviceId e = d == first ? second : first;
      if (keyable[m] && e != kNoId) best = std::min(best, 1 + at[m * nd + e]);
      at[parent * nd + d] += best;
    }
  }
  DeviceId root = 0;
  for (DeviceId d = 1; d < nd; ++d)
    if (at[d] < at[root] || (at[d] == at[root] && count[d] > count[root])) root = d;
  spec.default_device = c.device(root).name;
  // Top-down: the device each module places its ops on, a key where that is cheaper.
  std::vector<DeviceId> on(nm, root);
  for (ModuleId m = 1; m < nm; ++m) {
    on[m] = on[g.module_parent(m)];
    if (!keyable[m]) continue;
    const auto [first, second] = two_best(m);
    const DeviceId e = on[m] == first ? second : first;
    // (No more keys than without: the outermost module that can say it does, as before.)
    if (e != kNoId && 1 + at[m * nd + e] <= at[m * nd + on[m]]) {
      on[m] = e;
      spec.devices.emplace_back(g.module_name(m), c.device(e).name);
    }
  }
  for (OpId o = 0; o < n; ++o)
    if (fwd[o] != on[g.op_module(o)]) spec.devices.emplace_back(g.op_name(o), c.device(fwd[o]).name);
  return spec;
}

}  // namespace placer
