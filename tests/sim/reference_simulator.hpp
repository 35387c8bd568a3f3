// A second implementation of the simulator's rules (docs/simulator.md), written to be read rather
// than to be fast: ordered standard containers instead of bitsets and a hand-rolled heap, every
// transfer's arrival an event of its own (no per-route FIFOs), memory held and released through a
// map of named storages, no branch-free arithmetic, no padded routes. The differential tests
// (reference_simulator_test.cpp) check that the fast Simulator gives the very same schedule, bit
// for bit, on random graphs, clusters and placements and on the shared models: a safety net for
// every change made to the fast one for speed.
//
// Both follow the documented order of events at equal times (docs/simulator.md, "Order"): ops
// that take no time finish first, the one made ready last first, and only then do the devices they
// or the event before them woke start ops (in device id order); then arrivals, by destination
// device and tensor id; then op finishes, by op id.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/graph.hpp"

namespace placer::test {

struct RefOpTime {
  bool ran = false;
  double start_s = 0.0, end_s = 0.0;
};

struct RefTransfer {
  TensorId tensor = kNoId;
  DeviceId from = 0, to = 0;
  double start_s = 0.0, end_s = 0.0;
};

struct RefResult {
  double step_time_s = 0.0;
  std::vector<double> busy_s;
  std::vector<std::uint32_t> ops;
  std::vector<std::uint64_t> static_bytes, peak_bytes;
  std::vector<double> channel_bytes;
  double transfer_bytes = 0.0;
  std::vector<RefOpTime> op_times;      // per op; folded ops never run
  std::vector<RefTransfer> transfers;   // in the order they were sent
};

inline RefResult reference_simulate(const Graph& g, const Cluster& c, const CostTable& costs, const std::vector<DeviceId>& dev,
                                    const SimOptions& options = {}) {
  const std::size_t n = g.num_ops(), nd = c.num_devices(), nt = g.num_tensors();
  RefResult r;
  r.busy_s.assign(nd, 0.0);
  r.ops.assign(nd, 0);
  r.static_bytes.assign(nd, 0);
  r.channel_bytes.assign(c.num_channels(), 0.0);
  r.op_times.assign(n, {});

  // What each op reads during the step: its distinct inputs that are not set-up values. Folded ops
  // read nothing and run before the step.
  std::vector<std::vector<TensorId>> reads(n);
  std::set<std::pair<TensorId, DeviceId>> setup_values;  // (set-up value, device that reads it)
  for (OpId o = 0; o < n; ++o) {
    if (g.op_folded(o)) continue;
    for (TensorId t : g.op_inputs(o)) {
      if (t == kNoId) continue;
      if (g.tensor_folded(t)) setup_values.insert({t, dev[o]});
      else if (std::find(reads[o].begin(), reads[o].end(), t) == reads[o].end()) reads[o].push_back(t);
    }
  }
  std::vector<std::vector<OpId>> readers(nt);  // in op order
  for (OpId o = 0; o < n; ++o)
    for (TensorId t : reads[o]) readers[t].push_back(o);

  // Where each tensor is made: its producer's device, or its home op's for a source.
  auto is_source = [&](TensorId t) { return g.producer(t) == kNoId; };
  std::vector<DeviceId> where(nt, 0);
  for (TensorId t = 0; t < nt; ++t) {
    const OpId home = is_source(t) ? g.param_home(t) : g.producer(t);
    if (home != kNoId) where[t] = dev[home];
  }

  // Storage. A storage is (tensor, device): a tensor's own allocation on the device that made it,
  // or its copy on another device. A view on its device uses the storage of its input there.
  std::vector<TensorId> viewed(nt, kNoId);
  std::map<TensorId, std::pair<TensorId, DeviceId>> view_storage;
  auto home_storage = [&](TensorId t) {
    auto it = view_storage.find(t);
    return it == view_storage.end() ? std::pair{t, where[t]} : it->second;
  };
  for (OpId o : g.topological_order()) {
    const auto outs = g.op_outputs(o);
    for (std::size_t i = 0; i < outs.size() && i < 32; ++i) {
      if (!(g.op_view_outputs(o) >> i & 1u)) continue;
      const TensorId in = g.op_inputs(o)[0], out = outs[i];
      viewed[out] = in;
      view_storage[out] = where[in] == dev[o] ? home_storage(in) : std::pair{in, dev[o]};
    }
  }
  // Graph outputs live to the end in their storage on the device that made them (for a view, what
  // it views there); their copies on other devices are freed like any copy.
  std::set<std::pair<TensorId, DeviceId>> kept;
  for (TensorId t : g.outputs()) kept.insert(home_storage(t));
  auto own_bytes = [&](TensorId t) { return viewed[t] == kNoId ? g.tensor_bytes(t) : std::uint64_t{0}; };

  // Static memory.
  for (TensorId t = 0; t < nt; ++t) {
    if (!is_source(t) || g.param_home(t) == kNoId || g.tensor_folded(t)) continue;
    std::uint64_t bytes = g.tensor_bytes(t);
    // Optimizer state: of the parameters an update op of the step updates.
    for (OpId o = 0; o < g.num_ops(); ++o)
      if (g.op_role(o) == OpRole::update && g.updated_param(o) == t) {
        bytes += std::uint64_t{g.optimizer_state_copies()} * g.tensor_bytes(t);
        break;
      }
    r.static_bytes[where[t]] += bytes;
  }
  for (const auto& [t, d] : setup_values) r.static_bytes[d] += g.tensor_bytes(t);
  std::vector<std::uint64_t> now_bytes = r.static_bytes;
  r.peak_bytes = r.static_bytes;
  auto allocate = [&](DeviceId d, std::uint64_t bytes) {
    now_bytes[d] += bytes;
    r.peak_bytes[d] = std::max(r.peak_bytes[d], now_bytes[d]);
  };
  // An op's scratch, with what out-of-place sums add (a recurrent gradient's second partial).
  auto workspace = [&](OpId o, DeviceId d) {
    std::uint64_t bytes = costs.workspace_bytes(o, d);
    if (options.gradient_sums_out_of_place && !costs.out_of_place_sums().empty())
      bytes += costs.out_of_place_sums()[std::size_t{o} * c.num_devices() + d];
    return bytes;
  };

  // Who holds each storage: its readers (ops) on that device and, for a tensor's storage on the
  // device that made it, each transfer of it until it arrives.
  std::map<std::pair<TensorId, DeviceId>, int> holds;
  std::vector<std::set<DeviceId>> destinations(nt);
  std::vector<int> waiting_for(n, 0);
  // A partial gradient summed on arrival (Graph::tensor_accumulated) is not held by its reader.
  for (OpId o = 0; o < n; ++o)
    for (TensorId t : reads[o]) {
      const int held = g.tensor_accumulated(t) ? 0 : 1;
      if (where[t] == dev[o]) {
        holds[home_storage(t)] += held;
        if (!is_source(t)) ++waiting_for[o];
      } else {
        holds[{t, dev[o]}] += held;
        if (destinations[t].insert(dev[o]).second) ++holds[home_storage(t)];
        ++waiting_for[o];
      }
    }
  // Sums of partial gradients: an accumulated partial goes into the nearest input before it in its
  // reader's list that is not accumulated (its first partial), when both are made during the step,
  // read by that reader alone and not graph outputs. Until the first partial is there on the
  // reader's device, a partial that is there is held in its place.
  std::vector<TensorId> sum_first(nt, kNoId);
  std::set<TensorId> outputs(g.outputs().begin(), g.outputs().end());
  auto only_read_by = [&](TensorId t, OpId o) {
    for (OpId reader : g.consumers(t))
      if (reader != o) return false;
    return !is_source(t) && !g.tensor_folded(t) && !outputs.count(t);
  };
  for (OpId o = 0; o < n; ++o) {
    if (g.op_folded(o)) continue;
    TensorId first = kNoId;
    for (TensorId t : g.op_inputs(o)) {
      if (t == kNoId) continue;
      if (!g.tensor_accumulated(t)) first = t;
      else if (first != kNoId && sum_first[t] == kNoId && only_read_by(t, o) && only_read_by(first, o)) sum_first[t] = first;
    }
  }
  std::set<TensorId> firsts;
  for (TensorId t = 0; t < nt; ++t)
    if (sum_first[t] != kNoId) firsts.insert(sum_first[t]);
  std::set<TensorId> first_is_there;
  auto release = [&](std::pair<TensorId, DeviceId> storage) {
    const auto [t, d] = storage;
    if (--holds[storage] > 0) return;
    if (kept.count(storage) || (is_source(t) && where[t] == d)) return;  // lives all step
    now_bytes[d] -= g.tensor_bytes(t);
  };

  // Events at equal times: arrivals (by destination, tensor) before op finishes (by op id).
  constexpr std::uint32_t kFinish = 0xFFFFFFFFu;
  using Event = std::tuple<double, std::uint32_t, std::uint32_t>;  // time, destination or kFinish, id
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::vector<OpId> no_time;  // ops that took no time, finished, to be handled (last in, first out)
  std::vector<std::set<std::pair<std::uint32_t, OpId>>> ready(nd);  // by topological rank
  std::vector<int> free_streams(nd);
  for (DeviceId d = 0; d < nd; ++d) free_streams[d] = std::max(1, c.device(d).streams);
  std::vector<double> channel_free(c.num_channels(), 0.0);
  const auto ranks = g.topological_ranks();

  auto send = [&](TensorId t, DeviceId to, double now) {
    const DeviceId from = where[t];
    double start = now;
    for (ChannelId ch : c.route(from, to)) start = std::max(start, channel_free[ch]);
    const double end = start + c.route_latency_s(from, to) + static_cast<double>(g.tensor_bytes(t)) * (1.0 / c.route_bandwidth(from, to));
    for (ChannelId ch : c.route(from, to)) {
      channel_free[ch] = end;
      r.channel_bytes[ch] += static_cast<double>(g.tensor_bytes(t));
    }
    r.transfer_bytes += static_cast<double>(g.tensor_bytes(t));
    allocate(to, g.tensor_bytes(t));
    r.transfers.push_back({t, from, to, start, end});
    events.push({end, to, t});
  };
  auto make_ready = [&](OpId o, double now) {
    r.op_times[o].start_s = now;
    if (costs.time_s(o, dev[o]) == 0.0) {  // no kernel: done at once, without the device
      ++r.ops[dev[o]];
      no_time.push_back(o);  // its outputs are allocated when it runs, taken from there
    } else {
      ready[dev[o]].insert({ranks[o], o});
    }
  };
  auto start_ready = [&](DeviceId d, double now) {
    while (free_streams[d] > 0 && !ready[d].empty()) {
      const OpId o = ready[d].begin()->second;
      ready[d].erase(ready[d].begin());
      --free_streams[d];
      const double time = costs.time_s(o, d);
      r.op_times[o].start_s = now;
      r.busy_s[d] += time;
      ++r.ops[d];
      allocate(d, workspace(o, d));  // scratch held while it runs
      for (TensorId t : g.op_outputs(o)) allocate(d, own_bytes(t));
      events.push({now + time, kFinish, o});
    }
  };
  // Devices to start once the ops that take no time at this moment have finished (in id order).
  std::set<DeviceId> to_start;
  auto input_here = [&](TensorId t, DeviceId d, double now) {
    for (OpId o : readers[t])
      if (dev[o] == d && --waiting_for[o] == 0) make_ready(o, now);
  };

  // Time 0.
  for (TensorId t = 0; t < nt; ++t)
    if (is_source(t) && g.param_home(t) != kNoId && !g.tensor_folded(t))
      for (DeviceId to : destinations[t]) send(t, to, 0.0);
  for (OpId o : g.topological_order())
    if (!g.op_folded(o) && waiting_for[o] == 0) make_ready(o, 0.0);
  for (DeviceId d = 0; d < nd; ++d) to_start.insert(d);

  // Tensor t is there on device d for its reader there, in `storage`, with `bytes` of its own;
  // `unheld`: no reader holds it. Autograd's buffer keeps the first partial to come: a first partial
  // takes in the one held in its place (out of place, the sum is a new buffer written beside both);
  // a partial before its first is held when none is, its storage kept (a view's: what it views,
  // allocated again if its last reader had freed it); any other partial is summed and freed.
  std::map<TensorId, std::pair<TensorId, DeviceId>> held_for;  // first partial -> storage held in its place
  auto partial_there = [&](TensorId t, DeviceId d, std::pair<TensorId, DeviceId> storage, std::uint64_t bytes, bool unheld) {
    if (firsts.count(t)) {
      first_is_there.insert(t);
      if (auto it = held_for.find(t); it != held_for.end()) {
        if (options.gradient_sums_out_of_place) r.peak_bytes[d] = std::max(r.peak_bytes[d], now_bytes[d] + g.tensor_bytes(t));
        release(it->second);
        held_for.erase(it);
      }
    }
    if (!g.tensor_accumulated(t) || !unheld) return;
    const TensorId first = sum_first[t];
    if (first != kNoId && !first_is_there.count(first) && !held_for.count(first)) {
      const bool lives_anyway = kept.count(storage) || (is_source(storage.first) && where[storage.first] == storage.second);
      if (holds[storage]++ == 0 && storage != std::pair{t, d} && !lives_anyway) allocate(d, g.tensor_bytes(storage.first));
      held_for[first] = storage;
      return;
    }
    if (options.gradient_sums_out_of_place) r.peak_bytes[d] = std::max(r.peak_bytes[d], now_bytes[d] + g.tensor_bytes(t));
    now_bytes[d] -= bytes;
  };

  double now = 0.0;
  auto finish = [&](OpId o, bool took_device) {
    const DeviceId d = dev[o];
    if (took_device) ++free_streams[d], now_bytes[d] -= workspace(o, d);
    r.op_times[o].ran = true;
    r.op_times[o].end_s = now;
    r.step_time_s = std::max(r.step_time_s, now);
    for (TensorId t : reads[o])
      if (!g.tensor_accumulated(t)) release(where[t] == d ? home_storage(t) : std::pair{t, d});
    for (TensorId t : g.op_outputs(o)) {
      input_here(t, d, now);
      for (DeviceId to : destinations[t]) send(t, to, now);
      const bool nobody_reads_it = viewed[t] == kNoId && holds[{t, d}] == 0 && !kept.count({t, d});
      if (!readers[t].empty() && dev[readers[t][0]] == d && (g.tensor_accumulated(t) || firsts.count(t))) {
        // Made for its reader here: a partial is summed (a view too: nothing of its own to free)
        // or held; a first partial takes in what was held in its place.
        partial_there(t, d, home_storage(t), viewed[t] == kNoId ? g.tensor_bytes(t) : 0, holds[{t, d}] == 0 && !kept.count({t, d}));
        if (g.tensor_accumulated(t)) continue;
      }
      if (nobody_reads_it) now_bytes[d] -= g.tensor_bytes(t);
    }
    to_start.insert(d);
  };
  for (;;) {
    if (!no_time.empty()) {
      const OpId o = no_time.back();
      no_time.pop_back();
      for (TensorId t : g.op_outputs(o)) allocate(dev[o], own_bytes(t));
      finish(o, false);
      continue;
    }
    for (DeviceId d : to_start) start_ready(d, now);
    to_start.clear();
    if (events.empty()) break;
    const auto [time, dest, id] = events.top();
    events.pop();
    now = time;
    if (dest == kFinish) {
      finish(id, true);
    } else {  // tensor `id` arrives on device `dest`
      input_here(id, dest, now);
      release(home_storage(id));
      // Summed as it arrives, the copy goes (out of place, after the new sum), unless held in place
      // of its sum's first partial; a first partial takes in what was held in its place.
      partial_there(id, dest, {id, dest}, g.tensor_bytes(id), true);
      to_start.insert(dest);
    }
  }
  return r;
}

}  // namespace placer::test
