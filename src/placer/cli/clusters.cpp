// `placer clusters`: the built-in cluster presets.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "placer/cli/common.hpp"

namespace placer::cli {

void register_clusters(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("clusters", "List the built-in cluster presets (devices, memory, links)");
  cmd->add_flag("--json", *json, "print every preset as placer cluster JSON");
  cmd->callback([json] {
    if (*json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& name : cluster_preset_names()) out.push_back(cluster_to_json(cluster_preset(name)));
      std::cout << out.dump(2) << "\n";
      return;
    }
    fmt::print("{:<10} {:>7}  {}\n", "preset", "devices", "what");
    for (const auto& name : cluster_preset_names()) {
      Cluster c = cluster_preset(name);
      // Devices grouped by model: "1 x Intel Xeon ... ; 4 x NVIDIA Tesla K80 (4.4 TFLOP/s, 12.0 GiB)".
      std::vector<std::pair<const Device*, int>> groups;
      for (const auto& d : c.devices()) {
        auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first->model == d.model; });
        if (it == groups.end()) groups.push_back({&d, 1});
        else ++it->second;
      }
      std::string what;
      for (const auto& [d, count] : groups)
        what += fmt::format("{}{} x {} ({:.2f} TFLOP/s, {})", what.empty() ? "" : "; ", count, d->model, d->peak_flops / 1e12,
                            human_bytes(static_cast<double>(d->memory_bytes)));
      fmt::print("{:<10} {:>7}  {}\n", name, c.num_devices(), what);
    }
  });
}

}  // namespace placer::cli
