// Writes a simulated schedule in the Chrome trace event format (opens in Perfetto and
// chrome://tracing): one track per device (per stream when it has several) and one per link
// direction, op slices named by op and module path, transfer slices by tensor, with bytes and
// route in their arguments, and a counter track per device of the memory in use ("memory gpu:0").
#pragma once

#include <string>
#include <vector>

#include "placer/sim/simulator.hpp"

namespace placer {

void write_chrome_trace(const std::string& path, const Graph& g, const Cluster& c, const std::vector<TraceEvent>& trace);

}  // namespace placer
