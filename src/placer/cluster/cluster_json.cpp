// Reading and writing the "placer-cluster" JSON format (docs/clusters.md). The reader checks
// shapes and types here and leaves value checks (positive bandwidth, routes, ...) to
// Cluster::build, prefixing its messages with the source so every error names the file.
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>

#include "placer/cluster/cluster.hpp"
#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

constexpr std::string_view kFormat = "placer-cluster";
constexpr int kVersion = 1;

using json = nlohmann::json;


void require_object(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + " must be a JSON object, got " + std::string(j.type_name()));
}

const json& field(const json& j, std::string_view key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw Error(where + ": missing field " + in_quotes(key));
  return *it;
}

std::string get_string(const json& j, std::string_view key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) throw Error(where + ": field " + in_quotes(key) + " must be a string, got " + json_excerpt(v));
  return v.get<std::string>();
}

double get_number(const json& j, std::string_view key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_number()) throw Error(where + ": field " + in_quotes(key) + " must be a number, got " + json_excerpt(v));
  return v.get<double>();
}

// A whole number of at least `min` (0 or 1); JSON writers may spell big integers as 1.2e10. One
// wording for every value refused (0 memory bytes and 0.5 bytes were told two different rules).
std::uint64_t get_count(const json& j, std::string_view key, const std::string& where, std::uint64_t min = 0) {
  const json& v = field(j, key, where);
  std::optional<std::uint64_t> n;
  if (v.is_number_unsigned()) n = v.get<std::uint64_t>();
  else if (v.is_number_integer() && v.get<std::int64_t>() >= 0) n = static_cast<std::uint64_t>(v.get<std::int64_t>());
  else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= 0 && d < 0x1p64 && std::floor(d) == d) n = static_cast<std::uint64_t>(d);
    else if (d >= 0x1p64) throw Error(where + ": field " + in_quotes(key) + " must be below 2^64, got " + json_excerpt(v));
  }
  if (n && *n >= min) return *n;
  throw Error(where + ": field " + in_quotes(key) + " must be a " + (min == 0 ? "non-negative" : "positive") + " whole number, got " +
              json_excerpt(v));
}

Device parse_device(const json& j, const std::string& where) {
  require_object(j, where);
  check_known_fields(j,
                     {"name", "kind", "model", "peak_flops", "memory_bandwidth", "memory_bytes", "op_overhead_s", "streams",
                      "efficiency", "backward_efficiency", "backward_op_overhead_s", "bandwidth_by_size", "efficiency_by_type",
                      "product_efficiency_by_size", "conv_efficiency_by_kernel"},
                     where);
  Device d;
  d.name = get_string(j, "name", where);
  const std::string here = where + " (" + in_quotes(d.name) + ")";
  const std::string kind = get_string(j, "kind", here);  // its own errors name `here`
  try {
    d.kind = parse_device_kind(kind);
  } catch (const Error& e) {
    throw Error(here + ": " + e.what());
  }
  if (j.contains("model")) d.model = get_string(j, "model", here);
  d.peak_flops = get_number(j, "peak_flops", here);
  d.memory_bandwidth_bytes_per_s = get_number(j, "memory_bandwidth", here);
  d.memory_bytes = get_count(j, "memory_bytes", here, 1);
  d.op_overhead_s = get_number(j, "op_overhead_s", here);
  if (j.contains("streams")) {
    const std::uint64_t streams = get_count(j, "streams", here, 1);
    if (streams > 1024) throw Error(here + ": field 'streams' must be at most 1024, got " + std::to_string(streams));
    d.streams = static_cast<int>(streams);
  }
  if (j.contains("bandwidth_by_size")) {
    const json& curve = j["bandwidth_by_size"];
    const std::string at = here + ".bandwidth_by_size";
    if (!curve.is_array()) throw Error(at + " must be an array of {\"bytes\": N, \"bandwidth\": B}, got " + json_excerpt(curve));
    for (std::size_t k = 0; k < curve.size(); ++k) {
      const std::string at_k = at + "[" + std::to_string(k) + "]";
      require_object(curve[k], at_k);
      check_known_fields(curve[k], {"bytes", "bandwidth"}, at_k);
      d.bandwidth_by_size.push_back({get_count(curve[k], "bytes", at_k, 1), get_number(curve[k], "bandwidth", at_k)});
    }
  }
  for (const auto& [field, key, curve_of] : {std::tuple{"product_efficiency_by_size", "min_dim", &d.product_efficiency_by_size},
                                             std::tuple{"conv_efficiency_by_kernel", "kernel_area", &d.conv_efficiency_by_kernel}}) {
    if (!j.contains(field)) continue;
    const json& curve = j[field];
    const std::string at = here + "." + field;
    if (!curve.is_array())
      throw Error(at + " must be an array of {\"" + key + "\": N, \"compute\": E}, got " + json_excerpt(curve));
    for (std::size_t k = 0; k < curve.size(); ++k) {
      const std::string at_k = at + "[" + std::to_string(k) + "]";
      require_object(curve[k], at_k);
      check_known_fields(curve[k], {key, "compute"}, at_k);
      curve_of->push_back({get_count(curve[k], key, at_k, 1), get_number(curve[k], "compute", at_k)});
    }
  }
  if (auto types = j.find("efficiency_by_type"); types != j.end()) {
    const std::string at = here + ".efficiency_by_type";
    if (!types->is_object())
      throw Error(at + " must be an object keyed by op type, e.g. {\"MaxPool\": {\"compute\": 0.002}}, got " + json_excerpt(*types));
    for (const auto& [type, value] : types->items()) {
      const std::string at_type = at + "." + type;
      if (type.empty()) throw Error(at + " names an empty op type");
      require_object(value, at_type);
      check_known_fields(value, {"compute", "memory"}, at_type);
      if (!value.contains("compute") && !value.contains("memory")) throw Error(at_type + " needs 'compute' or 'memory'");
      Device::Efficiency& target = d.efficiency_by_type[type];
      for (auto [key, slot] : {std::pair{"compute", &target.compute}, std::pair{"memory", &target.memory}}) {
        if (!value.contains(key)) continue;
        *slot = get_number(value, key, at_type);
        if (!(*slot > 0) || !std::isfinite(*slot))
          throw Error(at_type + ": field " + in_quotes(key) + " must be a positive number, got " + json_excerpt(value[key]));
      }
    }
  }
  if (j.contains("backward_op_overhead_s")) {
    d.backward_op_overhead_s = get_number(j, "backward_op_overhead_s", here);
    if (!(d.backward_op_overhead_s >= 0) || !std::isfinite(d.backward_op_overhead_s))
      throw Error(here + ": field 'backward_op_overhead_s' must be a non-negative number of seconds, got " +
                  j["backward_op_overhead_s"].dump());
  }
  for (bool backward : {false, true}) {
    const char* field = backward ? "backward_efficiency" : "efficiency";
    auto eff = j.find(field);
    if (eff == j.end()) continue;
    const std::string at = here + "." + field;
    require_object(*eff, at);
    for (const auto& [class_name, value] : eff->items()) {
      OpClass c;
      try {
        c = parse_op_class(class_name);
      } catch (const Error&) {
        std::string known;  // the classes that take an efficiency: every one but alias
        for (int k = 0; k < kNumOpClasses; ++k)
          if (static_cast<OpClass>(k) != OpClass::alias) known += (known.empty() ? "" : ", ") + std::string(op_class_name(static_cast<OpClass>(k)));
        throw Error(at + ": unknown op class " + in_quotes(class_name) + " (known: " + known + ")");
      }
      if (c == OpClass::alias) throw Error(at + ": class 'alias' takes no efficiency (an alias runs no kernel and costs nothing)");
      const std::string at_class = at + "." + class_name;
      require_object(value, at_class);
      check_known_fields(value, {"compute", "memory"}, at_class);
      // As for a type's entry: an empty one says nothing, and was most likely meant to say something.
      if (!value.contains("compute") && !value.contains("memory")) throw Error(at_class + " needs 'compute' or 'memory'");
      Device::Efficiency& target = (backward ? d.backward_efficiency : d.efficiency)[static_cast<std::size_t>(c)];
      for (auto [key, slot] : {std::pair{"compute", &target.compute}, std::pair{"memory", &target.memory}}) {
        if (!value.contains(key)) continue;
        *slot = get_number(value, key, at_class);
        if (!(*slot > 0) || !std::isfinite(*slot))
          throw Error(at_class + ": field " + in_quotes(key) + " must be a positive number, got " + json_excerpt(value[key]));
      }
    }
  }
  return d;
}

Link parse_link(const json& j, const std::string& where) {
  require_object(j, where);
  check_known_fields(j, {"name", "a", "b", "bandwidth", "bandwidth_ab", "bandwidth_ba", "latency_s"}, where);
  Link l;
  if (j.contains("name")) l.name = get_string(j, "name", where);
  if (j.contains("name") && l.name.empty()) throw Error(where + ": field 'name' is empty (leave it out for a link without a name)");
  const std::string here = l.name.empty() ? where : where + " (" + in_quotes(l.name) + ")";
  l.a = get_string(j, "a", here);
  l.b = get_string(j, "b", here);
  const bool both = j.contains("bandwidth");
  const bool ab = j.contains("bandwidth_ab"), ba = j.contains("bandwidth_ba");
  if (both && (ab || ba))
    throw Error(here + ": give either 'bandwidth' (both directions) or 'bandwidth_ab' and 'bandwidth_ba', not both");
  if (both) {
    l.bandwidth_ab_bytes_per_s = l.bandwidth_ba_bytes_per_s = get_number(j, "bandwidth", here);
  } else if (ab && ba) {
    l.bandwidth_ab_bytes_per_s = get_number(j, "bandwidth_ab", here);
    l.bandwidth_ba_bytes_per_s = get_number(j, "bandwidth_ba", here);
  } else {
    throw Error(here + ": missing field 'bandwidth' (or both 'bandwidth_ab' and 'bandwidth_ba')");
  }
  l.latency_s = get_number(j, "latency_s", here);
  return l;
}

}  // namespace

Cluster parse_cluster_json(const json& j, const std::string& source) {
  // `placer clusters --json` prints a list of every preset: the one wanted is an entry of it, or
  // `placer clusters NAME --json`.
  if (j.is_array())
    throw Error(source + " is a list (" + std::to_string(j.size()) + " entries), not one cluster: a cluster file is one object, such "
                         "as one entry of `placer clusters --json`, or what `placer clusters NAME --json` prints");
  require_object(j, source);
  const json* format = j.contains("format") ? &j["format"] : nullptr;
  if (format == nullptr || !format->is_string() || format->get<std::string>() != kFormat)
    throw Error(source + ": not a placer cluster file: field 'format' is " +
                (format ? json_excerpt(*format) : std::string("missing")) + ", expected \"" + std::string(kFormat) + "\"");
  const json& version = field(j, "version", source);
  check_format_version(version, source, "cluster", kVersion);
  check_known_fields(j, {"format", "version", "name", "description", "devices", "switches", "links"}, source);
  if (j.contains("description") && !j["description"].is_string())
    throw Error(source + ": field 'description' must be a string");

  std::string name = get_string(j, "name", source);
  std::vector<Device> devices;
  const json& jd = field(j, "devices", source);
  if (!jd.is_array()) throw Error(source + ": field 'devices' must be an array");
  for (std::size_t i = 0; i < jd.size(); ++i)
    devices.push_back(parse_device(jd[i], source + ": devices[" + std::to_string(i) + "]"));

  std::vector<std::string> switches;
  if (j.contains("switches")) {
    const json& js = j["switches"];
    if (!js.is_array()) throw Error(source + ": field 'switches' must be an array of names");
    for (std::size_t i = 0; i < js.size(); ++i) {
      if (!js[i].is_string())
        throw Error(source + ": switches[" + std::to_string(i) + "] must be a string, got " + json_excerpt(js[i]));
      switches.push_back(js[i].get<std::string>());
    }
  }

  std::vector<Link> links;
  if (j.contains("links")) {
    const json& jl = j["links"];
    if (!jl.is_array()) throw Error(source + ": field 'links' must be an array");
    for (std::size_t i = 0; i < jl.size(); ++i)
      links.push_back(parse_link(jl[i], source + ": links[" + std::to_string(i) + "]"));
  }

  try {
    return Cluster::build(std::move(name), std::move(devices), std::move(switches), std::move(links));
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
}

Cluster load_cluster_file(const std::string& path) {
  return parse_cluster_json(read_json_file(path, "cluster"), path);
}

json cluster_to_json(const Cluster& cluster) {
  json devices = json::array();
  for (const Device& d : cluster.devices()) {
    devices.push_back({{"name", d.name},
                       {"kind", std::string(device_kind_name(d.kind))},
                       {"model", d.model},
                       {"peak_flops", d.peak_flops},
                       {"memory_bandwidth", d.memory_bandwidth_bytes_per_s},
                       {"memory_bytes", d.memory_bytes},
                       {"op_overhead_s", d.op_overhead_s},
                       {"streams", d.streams}});
    if (d.backward_op_overhead_s >= 0) devices.back()["backward_op_overhead_s"] = d.backward_op_overhead_s;
    if (!d.bandwidth_by_size.empty()) {
      json curve = json::array();
      for (const auto& point : d.bandwidth_by_size) curve.push_back({{"bytes", point.bytes}, {"bandwidth", point.bytes_per_s}});
      devices.back()["bandwidth_by_size"] = std::move(curve);
    }
    for (const auto& [field, key, points] : {std::tuple{"product_efficiency_by_size", "min_dim", &d.product_efficiency_by_size},
                                             std::tuple{"conv_efficiency_by_kernel", "kernel_area", &d.conv_efficiency_by_kernel}}) {
      if (points->empty()) continue;
      json curve = json::array();
      for (const auto& point : *points) curve.push_back({{key, point.size}, {"compute", point.compute}});
      devices.back()[field] = std::move(curve);
    }
    if (!d.efficiency_by_type.empty()) {
      json types = json::object();
      for (const auto& [type, e] : d.efficiency_by_type) {
        json je = json::object();
        if (e.compute > 0) je["compute"] = e.compute;
        if (e.memory > 0) je["memory"] = e.memory;
        types[type] = std::move(je);
      }
      devices.back()["efficiency_by_type"] = std::move(types);
    }
    for (bool backward : {false, true}) {
      json eff = json::object();
      for (int c = 0; c < kNumOpClasses; ++c) {
        const Device::Efficiency& e = (backward ? d.backward_efficiency : d.efficiency)[static_cast<std::size_t>(c)];
        json jc = json::object();
        if (e.compute > 0) jc["compute"] = e.compute;
        if (e.memory > 0) jc["memory"] = e.memory;
        if (!jc.empty()) eff[std::string(op_class_name(static_cast<OpClass>(c)))] = std::move(jc);
      }
      if (!eff.empty()) devices.back()[backward ? "backward_efficiency" : "efficiency"] = std::move(eff);
    }
  }
  json links = json::array();
  for (const Link& l : cluster.links()) {
    json jl = {{"name", l.name}, {"a", l.a}, {"b", l.b}};
    if (l.bandwidth_ab_bytes_per_s == l.bandwidth_ba_bytes_per_s) {
      jl["bandwidth"] = l.bandwidth_ab_bytes_per_s;
    } else {
      jl["bandwidth_ab"] = l.bandwidth_ab_bytes_per_s;
      jl["bandwidth_ba"] = l.bandwidth_ba_bytes_per_s;
    }
    jl["latency_s"] = l.latency_s;
    links.push_back(std::move(jl));
  }
  json switches = json::array();
  for (const std::string& s : cluster.switches()) switches.push_back(s);
  return {{"format", std::string(kFormat)}, {"version", kVersion}, {"name", cluster.name()},
          {"devices", std::move(devices)},  {"switches", std::move(switches)}, {"links", std::move(links)}};
}

}  // namespace placer
