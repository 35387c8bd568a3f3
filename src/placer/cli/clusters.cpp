// `placer clusters [PRESET...]`: the built-in cluster presets, listed, or named ones' devices and links.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "placer/cli/common.hpp"

namespace placer::cli {
namespace {

// One preset: its devices, switches and links (its efficiencies and curves are in its JSON).
void print_preset(const Cluster& c) {
  fmt::print("{}: {} devices, {} switches, {} links\n", c.name(), c.num_devices(), c.switches().size(), c.links().size());
  fmt::print("  {:<8} {:<4} {:>14} {:>12} {:>10} {:>9} {:>7}  {}\n", "device", "kind", "peak", "memory bw", "memory", "overhead", "streams",
             "model");
  for (const Device& d : c.devices())
    fmt::print("  {:<8} {:<4} {:>14} {:>12} {:>10} {:>9} {:>7}  {}\n", d.name, device_kind_name(d.kind),
               fmt::format("{:.2f} TFLOP/s", d.peak_flops / 1e12), fmt::format("{:.1f} GB/s", d.memory_bandwidth_bytes_per_s / 1e9),
               human_bytes(static_cast<double>(d.memory_bytes)), fmt::format("{:.1f} us", d.op_overhead_s * 1e6), d.streams, d.model);
  if (!c.switches().empty()) fmt::print("  switches: {}\n", fmt::join(c.switches(), ", "));
  // (A link named otherwise than after its ends, a parallel one, shows its name.)
  fmt::print("  {:<24} {:>22} {:>10}\n", "link", "bandwidth a->b / b->a", "latency");
  for (const Link& l : c.links())
    fmt::print("  {:<24} {:>22} {:>10}\n", l.a + " <-> " + l.b + (l.name == l.a + "<->" + l.b ? "" : " [" + l.name + "]"),
               fmt::format("{:.1f} / {:.1f} GB/s", l.bandwidth_ab_bytes_per_s / 1e9, l.bandwidth_ba_bytes_per_s / 1e9),
               fmt::format("{:g} us", l.latency_s * 1e6));
}

}  // namespace

void register_clusters(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto names = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("clusters", "List the built-in cluster presets (devices, peak FLOP/s, memory, links by bandwidth per direction)");
  cmd->add_option("presets", *names,
                  "presets to show: their devices, switches and links (--json: every figure, one preset as one cluster file)");
  cmd->add_flag("--json", *json, "print the presets as placer cluster JSON: an array of every preset, or one preset's cluster file");
  cmd->callback([json, names] {
    if (*json) {
      // Every preset, or the named ones (an unknown name: an error listing the presets); one named
      // preset alone is one cluster file.
      nlohmann::json out = nlohmann::json::array();
      for (const auto& name : names->empty() ? cluster_preset_names() : *names) out.push_back(cluster_to_json(cluster_preset(name)));
      std::cout << (names->size() == 1 ? out[0] : out).dump(2) << "\n";
      return;
    }
    if (!names->empty()) {
      for (std::size_t i = 0; i < names->size(); ++i) {
        if (i > 0) fmt::print("\n");
        print_preset(cluster_preset((*names)[i]));
      }
      return;
    }
    fmt::print("{:<10} {:>7}  {}\n", "preset", "devices", "what");
    for (const auto& name : cluster_preset_names()) {
      Cluster c = cluster_preset(name);
      // Devices grouped by model: "1 x Intel Xeon ... ; 4 x NVIDIA Tesla K80 (4.37 TFLOP/s, 12.0 GiB)".
      std::vector<std::pair<const Device*, int>> groups;
      for (const auto& d : c.devices()) {
        auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first->model == d.model; });
        if (it == groups.end()) groups.push_back({&d, 1});
        else ++it->second;
      }
      std::string what;
      for (const auto& [d, count] : groups)
        what += fmt::format("{}{} x {} ({}, {})", what.empty() ? "" : "; ", count, d->model,
                            d->peak_flops >= 1e12 ? fmt::format("{:.2f} TFLOP/s", d->peak_flops / 1e12)
                                                  : fmt::format("{:.1f} GFLOP/s", d->peak_flops / 1e9),
                            human_bytes(static_cast<double>(d->memory_bytes)));
      // Links grouped by bandwidth per direction: "links: 4 x 12.0 GB/s, 2 x 16.0 GB/s".
      std::vector<std::pair<std::string, int>> kinds;
      for (const Link& l : c.links()) {
        std::string bw = fmt::format("{:.1f} GB/s", l.bandwidth_ab_bytes_per_s / 1e9);
        if (l.bandwidth_ba_bytes_per_s != l.bandwidth_ab_bytes_per_s) bw += fmt::format(" / {:.1f} GB/s", l.bandwidth_ba_bytes_per_s / 1e9);
        auto it = std::find_if(kinds.begin(), kinds.end(), [&](auto& k) { return k.first == bw; });
        if (it == kinds.end()) kinds.push_back({bw, 1});
        else ++it->second;
      }
      std::string links;
      for (const auto& [bw, count] : kinds) links += fmt::format("{}{} x {}", links.empty() ? "" : ", ", count, bw);
      if (!links.empty()) what += "; links: " + links;
      fmt::print("{:<10} {:>7}  {}\n", name, c.num_devices(), what);
    }
  });
}

}  // namespace placer::cli
