// Writes a simulated schedule in the Chrome trace event format (opens in Perfetto and
// chrome://tracing): one track per device (per stream when it has several) and one per link
// direction, op slices named by op and module path, transfer slices by tensor, with bytes and
// route in their arguments, and a counter track per device of the memory in use ("memory gpu:0").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "placer/sim/simulator.hpp"

namespace placer {

// The same events as a JSON array, in process `pid` named `process` (default "placer: <cluster>"),
// to write beside others (validate --trace: the simulated step beside the measured one).
nlohmann::json chrome_trace_events(const Graph& g, const Cluster& c, const std::vector<TraceEvent>& trace, int pid = 1,
                                   const std::string& process = "");
// Writes `events` (a JSON array) as a Chrome trace file.
void write_chrome_trace_events(const std::string& path, nlohmann::json events);

}  // namespace placer
