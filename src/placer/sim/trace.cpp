#include "placer/sim/trace.hpp"

#include <cmath>
#include <fstream>
#include <string>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"

namespace placer {

nlohmann::json chrome_trace_events(const Graph& g, const Cluster& c, const std::vector<TraceEvent>& trace, int pid,
                                   const std::string& process) {
  using nlohmann::json;
  const auto nd = static_cast<std::uint32_t>(c.num_devices());
  json events = json::array();  // all in process `pid`, 1 unless said (Perfetto gives pid 0 special handling)
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process.empty() ? "placer: " + c.name() : process}}}});
  for (std::uint32_t d = 0; d < nd; ++d) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", d}, {"args", {{"name", c.device(d).name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", d}, {"args", {{"sort_index", d}}}});
  }
  std::vector<bool> channel_used(c.num_channels(), false);
  // Slices on one track must nest, so a device that runs several ops at once (streams > 1) gets a
  // track per stream: an op goes to the first of its device's tracks that is free when it starts
  // (the trace lists ops in the order they started). Ops that take no time (views: they do not
  // wait for their device) go to a track of their own per device, "DEVICE: no time": on a stream's
  // track a viewer would draw each inside the op running then, as if that op had called it.
  struct Lane {
    std::uint32_t device, tid;
    double end_s;
    bool no_time;
  };
  std::vector<Lane> lanes;
  for (std::uint32_t d = 0; d < nd; ++d) lanes.push_back({d, d, 0.0, false});
  auto new_lane = [&](std::uint32_t device, double end_s, bool no_time, const std::string& name) {
    const auto tid = static_cast<std::uint32_t>(c.num_channels() + lanes.size());  // after devices' and channels' tracks
    lanes.push_back({device, tid, end_s, no_time});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", device}}}});
    return tid;
  };
  // `no_time`: the op lasts no whole nanosecond (what a viewer draws as no time, below).
  auto lane_for = [&](const TraceEvent& e, bool no_time) -> std::uint32_t {
    std::size_t streams = 0;
    for (Lane& l : lanes) {
      if (l.device != e.device) continue;
      if (no_time && l.no_time) return l.tid;
      if (!no_time && !l.no_time) {
        ++streams;
        if (l.end_s <= e.start_s) return l.end_s = e.end_s, l.tid;
      }
    }
    const std::string& name = c.device(e.device).name;
    return no_time ? new_lane(e.device, 0.0, true, name + ": no time")
                   : new_lane(e.device, e.end_s, false, name + " stream " + std::to_string(streams + 1));
  };
  // Times in whole nanoseconds, written as microseconds: a slice that starts where another ends
  // then starts exactly there once a viewer rounds to nanoseconds (Perfetto does), where start x
  // 1e6 and (end - start) x 1e6, rounded apart, overlapped by a nanosecond.
  auto nanoseconds = [](double s) {
    if (!(s * 1e9 < 9e18))
      throw Error("the schedule lasts past " + fmt::format("{:g}", s) +
                  " s, longer than a trace counts in nanoseconds (about 285 years): check the cluster's and the profile's figures");
    return std::llround(s * 1e9);
  };
  for (const TraceEvent& e : trace) {
    const long long start_ns = nanoseconds(e.start_s), end_ns = nanoseconds(e.end_s);
    const double ts = static_cast<double>(start_ns) / 1e3, dur = static_cast<double>(end_ns - start_ns) / 1e3;
    if (e.kind == TraceEvent::Kind::memory) {
      // A counter track per device: the bytes in use over the step.
      events.push_back({{"name", "memory " + c.device(e.device).name}, {"ph", "C"}, {"pid", pid}, {"ts", ts}, {"args", {{"bytes", e.bytes}}}});
    } else if (e.kind == TraceEvent::Kind::op) {
      const std::string& module = g.module_name(g.op_module(e.id));
      events.push_back({{"name", g.op_name(e.id)},
                        {"cat", std::string(op_role_name(g.op_role(e.id)))},
                        {"ph", "X"}, {"pid", pid}, {"tid", lane_for(e, end_ns <= start_ns)}, {"ts", ts}, {"dur", dur},
                        {"args", {{"type", g.op_type(e.id)}, {"module", module}, {"call", g.op_call(e.id)}}}});
    } else {
      for (ChannelId ch : c.route(e.device, e.to)) {
        channel_used[ch] = true;
        events.push_back({{"name", g.tensor_name(e.id)},
                          {"cat", "transfer"},
                          {"ph", "X"}, {"pid", pid}, {"tid", nd + ch}, {"ts", ts}, {"dur", dur},
                          {"args", {{"bytes", g.tensor_bytes(e.id)},
                                    {"from", c.device(e.device).name},
                                    {"to", c.device(e.to).name}}}});
      }
    }
  }
  for (ChannelId ch = 0; ch < c.num_channels(); ++ch) {
    if (!channel_used[ch]) continue;
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", nd + ch}, {"args", {{"name", c.channel_name(ch)}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", nd + ch}, {"args", {{"sort_index", nd + ch}}}});  // below the devices
  }
  return events;
}

void write_chrome_trace_events(const std::string& path, nlohmann::json events) {
  write_json_file(path, nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}, "trace", -1);
}

}  // namespace placer
