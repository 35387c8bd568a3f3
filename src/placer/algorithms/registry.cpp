#include <mutex>

#include "placer/algorithms/families.hpp"

namespace placer {
namespace {

std::vector<PlacerInfo>& extra_placers() {
  static std::vector<PlacerInfo> extra;
  return extra;
}

std::vector<PlacerInfo> built_in() {
  std::vector<PlacerInfo> r;
  register_baselines(r);
  register_memory_maps(r);
  register_expert(r);
  register_partitioners(r);
  register_schedulers(r);
  register_search(r);
  return r;
}

}  // namespace

void register_placer(PlacerInfo info) { extra_placers().push_back(std::move(info)); }

bool is_built_in_placer(const std::string& name) {
  static const std::vector<PlacerInfo> core = built_in();  // not placer_registry(): that merges the modules' once
  for (const PlacerInfo& info : core)
    if (info.name == name) return true;
  return false;
}

const std::vector<PlacerInfo>& placer_registry() {
  static std::vector<PlacerInfo> registry = built_in();
  static std::once_flag merged;
  std::call_once(merged, [] {
    for (auto& info : extra_placers()) registry.push_back(std::move(info));
  });
  return registry;
}

}  // namespace placer
