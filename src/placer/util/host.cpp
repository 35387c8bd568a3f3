#include "placer/util/host.hpp"

#include <fstream>

namespace placer {

std::string host_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(colon + 1);
      name.erase(0, name.find_first_not_of(" \t"));
      if (!name.empty()) return name;
    }
  return "unknown CPU";
}

}  // namespace placer
