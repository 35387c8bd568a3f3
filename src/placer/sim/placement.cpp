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
      if (!value.is_number_integer()) throw Error(source + ": field 'version' must be an integer, got " + json_excerpt(value));
      if (value != 1) throw Error(source + ": placement version " + json_excerpt(value) + " is not supported (this placer reads 1)");
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
    else throw Error(source + ": key '" + key + "' matches no forward op and no module of the model");
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
  const std::size_t n = g.num_forward_ops(), nm = g.num_modules();
  constexpr DeviceId kNone = 0xFFFFFFFFu, kMixed = 0xFFFFFFFEu;
  PlacementSpec spec;
  std::vector<std::size_t> count(c.num_devices(), 0);
  for (OpId o = 0; o < n; ++o) ++count[fwd[o]];
  const auto default_device = static_cast<DeviceId>(std::max_element(count.begin(), count.end()) - count.begin());
  spec.default_device = c.device(default_device).name;

  // Device shared by every op under each module (kMixed when they differ).
  std::vector<DeviceId> uniform(nm, kNone);
  auto merge = [&](ModuleId m, DeviceId d) {
    uniform[m] = uniform[m] == kNone ? d : (uniform[m] == d ? d : kMixed);
  };
  for (OpId o = 0; o < n; ++o)
    for (ModuleId m = g.op_module(o);; m = g.module_parent(m)) {
      merge(m, fwd[o]);
      if (m == 0) break;
    }
  // Top-down: the device each module inherits, emitting a key where it changes.
  std::vector<DeviceId> inherited(nm, default_device);
  std::vector<bool> covered(nm, false);  // under an emitted uniform module
  for (ModuleId m = 1; m < nm; ++m) {  // parents have smaller ids
    const ModuleId parent = g.module_parent(m);
    inherited[m] = inherited[parent];
    covered[m] = covered[parent];
    // A module whose path is also a forward op's name cannot be a key (the op would win): its ops
    // get keys of their own.
    const OpId namesake = g.find_op(g.module_name(m));
    if (covered[m] || uniform[m] == kNone || uniform[m] == kMixed || (namesake != kNoId && namesake < n)) continue;
    if (uniform[m] != inherited[m]) spec.devices.emplace_back(g.module_name(m), c.device(uniform[m]).name);
    inherited[m] = uniform[m];
    covered[m] = true;
  }
  for (OpId o = 0; o < n; ++o)
    if (!covered[g.op_module(o)] && fwd[o] != inherited[g.op_module(o)])
      spec.devices.emplace_back(g.op_name(o), c.device(fwd[o]).name);
  return spec;
}

}  // namespace placer
