// List schedulers that honour device memory: critical-path-first scheduling (Mayer et al.,
// DIDL'17), HEFT (Topcuoglu et al., 2002) and Baechi's m-TOPO, m-ETF and m-SCT (Jeon et al.,
// SoCC'20). They schedule the whole step graph (forward, backward and update ops) in one pass,
// under the simulator's co-location rule: a backward op runs on its forward op's device and an
// update op on its parameter's home op's device. So only the first op of a family to be scheduled
// chooses (the family's device); the others are forced, as Baechi's co-location groups are.
//
// What a schedule assumes (the schedulers only choose devices; the simulator prices the result):
// - op time: CostTable::time_s(op, device), one op at a time per device;
// - a tensor read on another device is sent once to that device when its producer ends
//   (parameters and data at time 0, from their home's device) and takes
//   Cluster::transfer_time_s(from, to, bytes); by default (option contention=1) it also waits for
//   every channel of its route to be free and holds them all, as the simulator's transfers do.
//   Uncontended transfers (contention=0) misjudge models with many small cross-device tensors
//   badly: on rnnlm/k80x4, m-ETF's own estimate was 0.11 s for a placement the simulator ran in
//   0.41 s (0.18 s with contention), worse than one GPU (0.27 s).
//   m-ETF and m-SCT schedule ops about in time order, and critical-path (which takes ready ops in
//   HEFT's order of bottom levels) appends each op after its device's last one, so a channel is
//   free once the last transfer reserved on it ends (a transfer queues behind those sent before
//   it, as in the simulator). HEFT inserts ops into idle gaps of their devices, reserving far from
//   time order, so its channels keep lists of busy intervals and a transfer takes the first gap,
//   from when its tensor is there, that is long enough on every channel of its route: behind a
//   single "busy until" it would wait for every transfer reserved before it, even ones that start
//   much later. (Measured on 2026-11-28 over
//   the training steps of ten shared models on k80x2, k80x4 and p100x4: with gaps, HEFT's
//   placements ran 0.8% faster in geometric mean, m-ETF's, m-SCT's and critical-path's 0.4-1.6%
//   slower.)
// - a tensor without a producer (a parameter, a data input) lives on its home op's device (the
//   simulator's rule) from time 0, so an op that reads one is not scheduled before its home's
//   family has a device: it would not know where the tensor comes from, and would take it as free
//   to reach wherever it goes. A readiness condition besides the op's predecessors, not a
//   dependency on the home's finish;
// - memory: choosing a device for a family commits the family's resident bytes (parameters,
//   optimizer state) and its activation bytes (outputs of the op and of its gradient ops) for the
//   whole step. (Baechi's reference implementation tracks live memory instead: an op's outputs are
//   allocated when it runs and freed after their last consumer.) This over-counts
//   what the simulator keeps (it frees activations after their last reader) but leaves out copies
//   of tensors received from other devices, so every schedule is simulated (schedule_within_memory):
//   a device found over its limit gets its budget cut by the shortfall (and 2% of its limit) and
//   the schedule is redone (up to 48 times, until 16 schedules in a row come no closer to fitting:
//   12 rounds in all left NMT on k80x4 at --memory-fraction 0.3 unplaced by m-SCT and
//   critical-path, 48 fit it with every scheduler; after 8 such rounds every budget is also scaled
//   down by a tenth per round, back to whole once a round comes closer); when some family fits
//   nowhere, activations count at half weight (then
//   a quarter, then not at all) and the schedule is redone; when nothing fits on the GPUs
//   (devices=gpus), every device (CPUs too) is tried.
// Ties are broken by topological position, then device id: the schedulers are deterministic and
// ignore the seed.
#include <coin/ClpSimplex.hpp>
#include <coin/CoinPackedMatrix.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "placer/algorithms/families.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

constexpr DeviceId kUnplaced = std::numeric_limits<DeviceId>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The devices a scheduler may choose: the GPUs ("gpus"; every device when there is none) or all.
std::vector<DeviceId> devices_of(const Cluster& c, const std::string& which) {
  std::vector<DeviceId> all(c.num_devices());
  for (DeviceId d = 0; d < all.size(); ++d) all[d] = d;
  if (which == "all") return all;
  if (which != "gpus") throw Error("option 'devices' must be 'gpus' or 'all', got '" + which + "'");
  std::vector<DeviceId> gpus = c.device_ids(DeviceKind::gpu);
  return gpus.empty() ? all : gpus;
}

// The step graph as the schedulers see it, computed once per place().
struct StepGraph {
  struct Input {
    TensorId tensor;
    OpId from;    // producer, or the home op of a tensor without producer
    bool source;  // no producer: the tensor is on its home's device from time 0
    double bytes;
  };
  struct Edge {
    OpId op;
    double bytes;  // of every tensor the edge carries
  };

  const Problem& problem;
  bool contention = false;           // transfers queue for the channels of their routes
  bool channel_gaps = false;         // a transfer may take an idle gap before later reservations (HEFT)
  std::size_t num_ops = 0, num_devices = 0;
  std::vector<DeviceId> candidates;
  std::vector<OpId> anchor;          // the forward op whose device each op takes
  std::vector<std::uint32_t> rank;   // position in the graph's topological order
  std::vector<std::uint32_t> in_begin;
  std::vector<Input> inputs;         // distinct tensors each op reads (CSR)
  std::vector<std::uint32_t> pred_begin, succ_begin;
  std::vector<Edge> preds, succs;    // distinct op-to-op edges (CSR, ascending op ids)
  std::vector<double> mean_time;     // per op, over the candidates
  // Ops that wait for a family to have a device (they read a tensor without producer whose home is
  // in it; CSR by the family's forward op), and how many families each op waits for.
  std::vector<std::uint32_t> waiter_begin;
  std::vector<OpId> waiters;
  std::vector<std::uint32_t> home_waits;
  double mean_latency_s = 0.0, mean_s_per_byte = 0.0;  // over ordered pairs of distinct candidates

  StepGraph(const Problem& p, std::vector<DeviceId> devices, bool contended, bool gaps = false);

  double time(OpId o, DeviceId d) const { return problem.costs.time_s(o, d); }
  // Mean time of an edge's transfer; 0 between ops of one family (always on one device).
  double mean_comm(OpId from, OpId to, double bytes) const {
    return anchor[from] == anchor[to] ? 0.0 : mean_latency_s + bytes * mean_s_per_byte;
  }
  std::span<const Edge> pred(OpId o) const { return {preds.data() + pred_begin[o], preds.data() + pred_begin[o + 1]}; }
  std::span<const Edge> succ(OpId o) const { return {succs.data() + succ_begin[o], succs.data() + succ_begin[o + 1]}; }
  std::span<const Input> in(OpId o) const { return {inputs.data() + in_begin[o], inputs.data() + in_begin[o + 1]}; }
  std::span<const OpId> waiting_for(OpId family) const {
    return {waiters.data() + waiter_begin[family], waiters.data() + waiter_begin[family + 1]};
  }
  // What an op waits for before it may be scheduled: its predecessors and the families it waits for.
  std::uint32_t prerequisites(OpId o) const { return static_cast<std::uint32_t>(pred(o).size()) + home_waits[o]; }
};

StepGraph::StepGraph(const Problem& p, std::vector<DeviceId> devices, bool contended, bool gaps)
    : problem(p), contention(contended), channel_gaps(gaps), num_ops(p.graph.num_ops()), num_devices(p.cluster.num_devices()),
      candidates(std::move(devices)) {
  const Graph& g = p.graph;
  const std::size_t nf = g.num_forward_ops();
  anchor.resize(num_ops);
  for (OpId o = 0; o < num_ops; ++o) {
    OpId a = o < nf ? o : g.forward_op(o);
    if (o >= nf && a == kNoId && g.updated_param(o) != kNoId) a = g.param_home(g.updated_param(o));
    anchor[o] = a != kNoId && a < nf ? a : 0;  // as expand_placement does
  }
  rank.resize(num_ops);
  const auto topo = g.topological_order();
  for (std::uint32_t i = 0; i < topo.size(); ++i) rank[topo[i]] = i;

  // Inputs and predecessor edges, one entry per distinct tensor / producer.
  in_begin.assign(num_ops + 1, 0);
  pred_begin.assign(num_ops + 1, 0);
  std::vector<TensorId> seen;
  for (OpId o = 0; o < num_ops; ++o) {
    seen.assign(g.op_inputs(o).begin(), g.op_inputs(o).end());
    if (g.op_folded(o)) seen.clear();  // runs before the step: waits for nothing
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    const std::size_t first_pred = preds.size();
    for (TensorId t : seen) {
      if (t == kNoId || g.tensor_folded(t)) continue;  // set-up values are everywhere: never waited for
      const double bytes = static_cast<double>(g.tensor_bytes(t));
      const OpId producer = g.producer(t);
      if (producer == kNoId) {
        const OpId home = g.param_home(t);
        if (home != kNoId && home != o) inputs.push_back({t, home, true, bytes});
        continue;
      }
      inputs.push_back({t, producer, false, bytes});
      preds.push_back({producer, bytes});
    }
    // Merge edges from one producer (several tensors).
    std::sort(preds.begin() + static_cast<std::ptrdiff_t>(first_pred), preds.end(),
              [](const Edge& a, const Edge& b) { return a.op < b.op; });
    std::size_t out = first_pred;
    for (std::size_t i = first_pred; i < preds.size(); ++i) {
      if (out > first_pred && preds[out - 1].op == preds[i].op)
        preds[out - 1].bytes += preds[i].bytes;
      else
        preds[out++] = preds[i];
    }
    preds.resize(out);
    in_begin[o + 1] = static_cast<std::uint32_t>(inputs.size());
    pred_begin[o + 1] = static_cast<std::uint32_t>(preds.size());
  }
  // Waits for the families of the homes of tensors without producer. A home is the first reader
  // of its tensor in topological order and its family's forward op comes before it, so waiting on
  // families of earlier ops never closes a cycle; the test on ranks keeps it so whatever the graph.
  home_waits.assign(num_ops, 0);
  std::vector<std::pair<OpId, OpId>> waits;  // (family, op)
  for (OpId o = 0; o < num_ops; ++o) {
    const std::size_t first = waits.size();
    for (const Input& in : this->in(o)) {
      const OpId family = anchor[in.from];
      if (in.source && family != anchor[o] && rank[family] < rank[o]) waits.push_back({family, o});
    }
    std::sort(waits.begin() + static_cast<std::ptrdiff_t>(first), waits.end());
    waits.erase(std::unique(waits.begin() + static_cast<std::ptrdiff_t>(first), waits.end()), waits.end());
    home_waits[o] = static_cast<std::uint32_t>(waits.size() - first);
  }
  waiter_begin.assign(nf + 1, 0);
  for (const auto& [family, o] : waits) ++waiter_begin[family + 1];
  for (std::size_t f = 0; f < nf; ++f) waiter_begin[f + 1] += waiter_begin[f];
  waiters.resize(waits.size());
  {
    std::vector<std::uint32_t> at(waiter_begin.begin(), waiter_begin.end() - 1);
    for (const auto& [family, o] : waits) waiters[at[family]++] = o;
  }

  // Successor edges: the transpose.
  succ_begin.assign(num_ops + 1, 0);
  for (const Edge& e : preds) ++succ_begin[e.op + 1];
  for (std::size_t o = 0; o < num_ops; ++o) succ_begin[o + 1] += succ_begin[o];
  succs.resize(preds.size());
  std::vector<std::uint32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
  for (OpId o = 0; o < num_ops; ++o)
    for (const Edge& e : pred(o)) succs[fill[e.op]++] = {o, e.bytes};

  mean_time.assign(num_ops, 0.0);
  for (OpId o = 0; o < num_ops; ++o) {
    double sum = 0.0;
    for (DeviceId d : candidates) sum += time(o, d);
    mean_time[o] = sum / static_cast<double>(candidates.size());
  }
  std::size_t pairs = 0;
  for (DeviceId a : candidates)
    for (DeviceId b : candidates)
      if (a != b) {
        mean_latency_s += p.cluster.route_latency_s(a, b);
        mean_s_per_byte += 1.0 / p.cluster.route_bandwidth(a, b);
        ++pairs;
      }
  if (pairs > 0) mean_latency_s /= static_cast<double>(pairs), mean_s_per_byte /= static_cast<double>(pairs);
}

// Bottom levels (HEFT's upward rank): the longest path from each op to the end of the step, with
// mean op times and mean transfer times.
std::vector<double> bottom_levels(const StepGraph& s) {
  std::vector<double> level(s.num_ops, 0.0);
  const auto topo = s.problem.graph.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    double tail = 0.0;
    for (const auto& e : s.succ(*it)) tail = std::max(tail, s.mean_comm(*it, e.op, e.bytes) + level[e.op]);
    level[*it] = s.mean_time[*it] + tail;
  }
  return level;
}

// Top levels: the longest path from the start of the step to each op's start.
std::vector<double> top_levels(const StepGraph& s) {
  std::vector<double> level(s.num_ops, 0.0);
  for (OpId o : s.problem.graph.topological_order())
    for (const auto& e : s.pred(o)) level[o] = std::max(level[o], level[e.op] + s.mean_time[e.op] + s.mean_comm(e.op, o, e.bytes));
  return level;
}

// After `o` is scheduled: calls `ready` for each op that may now be scheduled (its last
// predecessor was `o`, or the family it waited for got its device with `o`: `committed`).
template <typename F>
void release_after(const StepGraph& s, OpId o, bool committed, std::vector<std::uint32_t>& pending, F&& ready) {
  for (const auto& e : s.succ(o))
    if (--pending[e.op] == 0) ready(e.op);
  if (committed)
    for (OpId w : s.waiting_for(s.anchor[o]))
      if (--pending[w] == 0) ready(w);
}

// The ops whose prerequisites are scheduled (StepGraph::prerequisites), the highest `level` first,
// ties by topological position: critical-path's and HEFT's order.
class ReadyByLevel {
 public:
  ReadyByLevel(const StepGraph& s, const std::vector<double>& level) : s_(s), level_(level), pending_(s.num_ops) {
    for (OpId o = 0; o < s.num_ops; ++o) {
      pending_[o] = s.prerequisites(o);
      if (pending_[o] == 0) push(o);
    }
  }
  bool empty() const { return heap_.empty(); }
  OpId pop() {
    std::pop_heap(heap_.begin(), heap_.end(), later());
    const OpId o = heap_.back();
    heap_.pop_back();
    return o;
  }
  // `o` is scheduled; `committed`: its family got its device with it.
  void done(OpId o, bool committed) {
    release_after(s_, o, committed, pending_, [&](OpId r) { push(r); });
    ++scheduled_;
  }
  void check_all_scheduled() const {
    if (scheduled_ != s_.num_ops)
      throw Error("a list scheduler left " + std::to_string(s_.num_ops - scheduled_) + " ops unscheduled (internal error)");
  }

 private:
  struct Later {
    const ReadyByLevel* q;
    bool operator()(OpId a, OpId b) const {
      return q->level_[a] != q->level_[b] ? q->level_[a] < q->level_[b] : q->s_.rank[a] > q->s_.rank[b];
    }
  };
  Later later() const { return Later{this}; }
  void push(OpId o) {
    heap_.push_back(o);
    std::push_heap(heap_.begin(), heap_.end(), later());
  }
  const StepGraph& s_;
  const std::vector<double>& level_;
  std::vector<std::uint32_t> pending_;
  std::vector<OpId> heap_;
  std::size_t scheduled_ = 0;
};

// A schedule being built: devices of families, finish times of ops, memory committed per device
// and, with contention, when each channel is next free and when tensors reached other devices.
class Partial {
 public:
  Partial(const StepGraph& s, const std::vector<double>& footprint, const std::vector<double>& budget)
      : s_(s), footprint_(footprint), budget_(budget), family_(s.problem.graph.num_forward_ops(), kUnplaced),
        device_(s.num_ops, kUnplaced), finish_(s.num_ops, 0.0), avail_(s.num_devices, 0.0), used_(s.num_devices, 0.0) {
    if (s.contention) {
      channel_free_.assign(s.problem.cluster.num_channels(), 0.0);
      if (s.channel_gaps) channel_busy_.assign(s.problem.cluster.num_channels(), {});
      arrival_.assign(s.problem.graph.num_tensors() * s.num_devices, -1.0);
    }
  }

  DeviceId family_device(OpId o) const { return family_[s_.anchor[o]]; }
  // Whether `o` may run on `d`: its family's device, or a candidate with room for the family.
  bool allowed(OpId o, DeviceId d) const {
    const OpId f = s_.anchor[o];
    if (family_[f] != kUnplaced) return family_[f] == d;
    return budget_[d] > 0.0 && used_[d] + footprint_[f] <= budget_[d];
  }
  template <typename F>
  void for_each_allowed(OpId o, F&& f) const {
    const DeviceId fixed = family_device(o);
    if (fixed != kUnplaced) return f(fixed);
    for (DeviceId d : s_.candidates)
      if (allowed(o, d)) f(d);
  }
  // When all of `o`'s inputs could be on `d`. REQUIRES: its producers are scheduled and the families
  // it waits for placed (StepGraph::home_waits).
  double ready_time(OpId o, DeviceId d) const {
    if (s_.contention) return receive(o, d, false);
    double t = 0.0;
    for (const auto& in : s_.in(o)) {
      if (in.source) {
        const DeviceId home = family_device(in.from);
        if (home != kUnplaced) t = std::max(t, s_.problem.cluster.transfer_time_s(home, d, in.bytes));
      } else {
        t = std::max(t, finish_[in.from] + s_.problem.cluster.transfer_time_s(device_[in.from], d, in.bytes));
      }
    }
    return t;
  }
  double avail(DeviceId d) const { return avail_[d]; }
  // When `o`, ready on `d` at `ready`, can start there: once the device is free, except an op that
  // takes no time (a view), which does not wait for its device, as in the simulator.
  double start_time(OpId o, DeviceId d, double ready) const { return s_.time(o, d) == 0.0 ? ready : std::max(ready, avail_[d]); }
  // Transfers committed so far (with contention): a change means ready times may have moved.
  std::size_t transfers() const { return transfers_; }
  double used(DeviceId d) const { return used_[d]; }
  double finish(OpId o) const { return finish_[o]; }
  // Runs `o` on `d` from `start`, committing its family to `d`. REQUIRES: allowed(o, d). Returns
  // whether the family got its device now (then the ops waiting for it may become ready).
  bool place(OpId o, DeviceId d, double start) {
    if (s_.contention) receive(o, d, true);
    const bool committed = commit_family(o, d);
    device_[o] = d;
    finish_[o] = start + s_.time(o, d);
    if (s_.time(o, d) > 0.0) avail_[d] = std::max(avail_[d], finish_[o]);  // a view does not take the device
    return committed;
  }
  bool commit_family(OpId o, DeviceId d) {
    const OpId f = s_.anchor[o];
    if (family_[f] != kUnplaced) return false;
    family_[f] = d;
    used_[d] += footprint_[f];
    return true;
  }
  std::vector<DeviceId> forward_devices() const {
    std::vector<DeviceId> out = family_;
    for (auto& d : out)
      if (d == kUnplaced) d = s_.candidates.front();  // a forward op no op reached (never, in practice)
    return out;
  }

 private:
  struct Busy {
    double start, end;
  };
  // When a transfer of `length` from time `t` over `route` may start: with channel_gaps, the first
  // gap at or after `t` idle for `length` on every channel of the route, among the committed
  // reservations and those of this call (pending_); else once every channel's last reservation is
  // over.
  double transfer_start(std::span<const ChannelId> route, double t, double length) const {
    if (!s_.channel_gaps) {
      for (ChannelId ch : route) {
        double free = channel_free_[ch];
        for (auto it = pending_.rbegin(); it != pending_.rend(); ++it)  // the latest reservation of this call
          if (it->first == ch) {
            free = it->second.end;
            break;
          }
        t = std::max(t, free);
      }
      return t;
    }
    for (;;) {
      double next = t;
      for (ChannelId ch : route) {
        const auto& busy = channel_busy_[ch];
        auto it = std::upper_bound(busy.begin(), busy.end(), next, [](double x, const Busy& b) { return x < b.end; });
        for (; it != busy.end() && it->start < next + length; ++it) next = std::max(next, it->end);
        for (const auto& [channel, b] : pending_)
          if (channel == ch && b.start < next + length && b.end > next) next = b.end;
      }
      if (next == t) return t;
      t = next;
    }
  }

  // With contention: the transfers that bring `o`'s inputs to `d`, in input order, each holding
  // every channel of its route (as the simulator does) from when the tensor is there and the
  // channels are free (transfer_start); a tensor goes to a device once. Returns when the last
  // input is there. `commit` reserves the channels and records the arrivals; otherwise nothing
  // changes.
  double receive(OpId o, DeviceId d, bool commit) const {
    const Cluster& c = s_.problem.cluster;
    pending_.clear();  // channels reserved by this call, when not committing
    double t = 0.0;
    for (const auto& in : s_.in(o)) {
      DeviceId from = kUnplaced;
      double sent = 0.0;
      if (in.source) {
        from = family_device(in.from);
        if (from == kUnplaced) continue;
      } else {
        from = device_[in.from], sent = finish_[in.from];
      }
      if (from == d) {
        t = std::max(t, sent);
        continue;
      }
      double& arrived = arrival_[std::size_t{in.tensor} * s_.num_devices + d];
      if (arrived >= 0.0) {
        t = std::max(t, arrived);
        continue;
      }
      const auto route = c.route(from, d);
      const double length = c.transfer_time_s(from, d, in.bytes);
      const double start = transfer_start(route, sent, length), end = start + length;
      for (ChannelId ch : route) {
        if (!commit) {
          pending_.push_back({ch, {start, end}});
        } else if (s_.channel_gaps) {
          auto& busy = channel_busy_[ch];
          // By start, then end: a transfer too short to move a double (start + length == start)
          // goes before a reservation that starts with it, so the list stays sorted by end too.
          const Busy b{start, end};
          busy.insert(std::upper_bound(busy.begin(), busy.end(), b,
                                       [](const Busy& x, const Busy& y) { return x.start != y.start ? x.start < y.start : x.end < y.end; }),
                      b);
        } else {
          channel_free_[ch] = end;
        }
      }
      if (commit) arrived = end, ++transfers_;
      t = std::max(t, end);
    }
    return t;
  }

  const StepGraph& s_;
  const std::vector<double>& footprint_;
  const std::vector<double>& budget_;
  std::vector<DeviceId> family_;  // per forward op
  std::vector<DeviceId> device_;  // per op
  std::vector<double> finish_;
  std::vector<double> avail_;
  std::vector<double> used_;
  // Contention only (mutable: receive() is const when it only looks).
  mutable std::vector<double> channel_free_;             // per channel: when its last reservation ends
  mutable std::vector<std::vector<Busy>> channel_busy_;  // with channel_gaps, per channel: reservations, sorted, disjoint
  mutable std::vector<double> arrival_;                  // tensor x device: when it arrived there; < 0: not sent
  mutable std::vector<std::pair<ChannelId, Busy>> pending_;
  mutable std::size_t transfers_ = 0;
};

// One scheduling pass: devices of the forward ops, or nothing when some family fits nowhere.
using Schedule = std::function<std::optional<std::vector<DeviceId>>(const StepGraph&, const std::vector<double>& footprint,
                                                                    const std::vector<double>& budget)>;

// m-TOPO: forward families in topological order fill the devices one after another, each up to
// an equal share of the memory the model needs (total / devices + the largest family, Baechi's
// rule) and within its limit; the last device takes what remains up to its limit. When equal
// shares cannot hold the model (devices of very different memory: a large CPU beside small GPUs),
// a second pass gives each device a share in proportion to its limit instead.
std::optional<std::vector<DeviceId>> m_topo(const StepGraph& s, const std::vector<double>& footprint,
                                            const std::vector<double>& budget) {
  double total = 0.0, largest = 0.0, all_budgets = 0.0;
  for (double f : footprint) total += f, largest = std::max(largest, f);
  for (DeviceId d : s.candidates) all_budgets += budget[d];
  // Filled GPUs first, CPUs (the memory fallback's overflow) last: in id order the CPU, cpu:0,
  // took the first and largest share (GPT-2 on k80x4 at --memory-fraction 0.07: all of it).
  std::vector<DeviceId> order = s.candidates;
  std::stable_partition(order.begin(), order.end(),
                        [&](DeviceId d) { return s.problem.cluster.device(d).kind == DeviceKind::gpu; });
  for (const bool proportional : {false, true}) {
    if (proportional && !(all_budgets > 0.0)) break;
    auto share = [&](DeviceId d) {
      return (proportional ? total * budget[d] / all_budgets : total / static_cast<double>(s.candidates.size())) + largest;
    };
    Partial st(s, footprint, budget);
    std::size_t k = 0;
    bool placed = true;
    for (OpId o : s.problem.graph.topological_order()) {
      if (st.family_device(o) != kUnplaced) continue;
      const double need = footprint[s.anchor[o]];
      for (; k < order.size(); ++k) {
        const DeviceId d = order[k];
        const double cap = k + 1 == order.size() ? budget[d] : std::min(budget[d], share(d));
        if (st.allowed(o, d) && st.used(d) + need <= cap) break;
      }
      if (k == order.size()) {
        placed = false;
        break;
      }
      st.commit_family(o, order[k]);
    }
    if (placed) return st.forward_devices();
  }
  return std::nullopt;
}

// Earliest task first (Hwang et al. 1989) with memory, as Baechi's m-ETF: among every ready op and
// every device it may take, start the pair that can start earliest (ties: topological position,
// then device). ETF assumes devices alike; on unlike ones each op first takes the device where it
// would finish first (the same device where they are alike), and the op that starts first there
// goes. With `favourite` (m-SCT), a device whose last op's favourite child is ready and finishes
// there no later than anywhere else is kept for that child: it takes another op only when the op
// is urgent (ready on every device it may take by the time this device is free), and ties go to
// favourite children.
//
// Each step weighs every ready op on every device: on wide graphs (20,000 ops ready at once) a
// pass takes minutes. Past `deadline` (--seconds) the rest of the pass, and every later pass, is
// list scheduling instead: the ready op first in program order goes next, to the device where it
// finishes first; `late` is then set (the note says so).
std::optional<std::vector<DeviceId>> earliest_task_first(const StepGraph& s, const std::vector<double>& footprint,
                                                         const std::vector<double>& budget, const std::vector<OpId>& favourite,
                                                         Deadline deadline, bool& late) {
  const std::size_t n = s.num_ops, nd = s.num_devices;
  Partial st(s, footprint, budget);
  enum : std::uint8_t { kWaiting, kReady, kDone };
  std::vector<std::uint8_t> state(n, kWaiting);
  std::vector<std::uint32_t> pending(n);
  std::vector<double> ready_at(n * nd, kInf);
  std::vector<OpId> ready;  // late: a heap, the first in program order on top (make_ready keeps it one)
  const auto later_in_program = [&](OpId a, OpId b) { return s.rank[a] > s.rank[b]; };
  auto make_ready = [&](OpId o) {
    state[o] = kReady;
    ready.push_back(o);
    if (late) std::push_heap(ready.begin(), ready.end(), later_in_program);
    for (DeviceId d : s.candidates) ready_at[std::size_t{o} * nd + d] = st.ready_time(o, d);
  };
  for (OpId o : s.problem.graph.topological_order()) {
    pending[o] = s.prerequisites(o);
    if (pending[o] == 0) make_ready(o);
  }
  const bool sct = !favourite.empty();
  std::vector<OpId> last_op(nd, kNoId), kept_for(nd, kNoId);
  auto start_on = [&](OpId o, DeviceId d) { return st.start_time(o, d, ready_at[std::size_t{o} * nd + d]); };

  std::size_t transfers_seen = 0;
  for (std::size_t step = 0; step < n; ++step) {
    if (!late && step % 64 == 0 && deadline.passed()) {
      late = true;
      std::make_heap(ready.begin(), ready.end(), later_in_program);
    }
    if (late) {
      if (ready.empty()) throw Error("m-etf: no op is ready with " + std::to_string(n - step) + " left to schedule (internal error)");
      const OpId o = ready.front();
      DeviceId d = kUnplaced;
      double t = kInf, f = kInf;
      st.for_each_allowed(o, [&](DeviceId e) {
        const double start = st.start_time(o, e, st.ready_time(o, e)), finish = start + s.time(o, e);
        if (d == kUnplaced || finish < f || (finish == f && start < t)) d = e, t = start, f = finish;
      });
      if (d == kUnplaced) return std::nullopt;  // its family fits nowhere (memory only fills up)
      std::pop_heap(ready.begin(), ready.end(), later_in_program);
      ready.pop_back();
      const bool committed = st.place(o, d, t);
      state[o] = kDone;
      release_after(s, o, committed, pending, make_ready);
      continue;
    }
    if (st.transfers() != transfers_seen) {  // channels were taken: ready times of waiting ops moved
      transfers_seen = st.transfers();
      for (OpId o : ready) st.for_each_allowed(o, [&](DeviceId d) { ready_at[std::size_t{o} * nd + d] = st.ready_time(o, d); });
    }
    if (sct) {
      for (DeviceId d : s.candidates) {
        kept_for[d] = kNoId;
        const OpId p = last_op[d];
        const OpId c = p == kNoId ? kNoId : favourite[p];
        if (c == kNoId || state[c] != kReady || !st.allowed(c, d)) continue;
        const double here = start_on(c, d) + s.time(c, d);
        bool earliest = true;
        st.for_each_allowed(c, [&](DeviceId e) { earliest = earliest && here <= start_on(c, e) + s.time(c, e); });
        if (earliest) kept_for[d] = c;
      }
    }
    std::size_t best_index = ready.size();
    DeviceId best_device = kUnplaced;
    double best_start = kInf;
    bool best_favourite = false;
    for (std::size_t i = 0; i < ready.size(); ++i) {
      const OpId o = ready[i];
      double latest_ready = 0.0;
      if (sct) st.for_each_allowed(o, [&](DeviceId e) { latest_ready = std::max(latest_ready, ready_at[std::size_t{o} * nd + e]); });
      // The op's device: where it finishes first (ties: starts first, a favourite child, then
      // device). On devices alike that is where it starts first, ETF's rule; on unlike ones (a CPU
      // among GPUs, which the memory fallback adds) the earliest start took the idle slow device.
      DeviceId d = kUnplaced;
      double t = kInf, f = kInf;
      bool is_favourite = false;
      st.for_each_allowed(o, [&](DeviceId e) {
        if (sct && kept_for[e] != kNoId && kept_for[e] != o && s.time(o, e) > 0.0 && latest_ready > st.avail(e))
          return;  // not urgent (a view, which does not take the device, always may)
        const bool fav = sct && last_op[e] != kNoId && favourite[last_op[e]] == o;
        const double start = start_on(o, e), finish = start + s.time(o, e);
        bool better = d == kUnplaced || finish < f;
        if (!better && finish == f) better = start != t ? start < t : fav != is_favourite ? fav : e < d;
        if (better) d = e, t = start, f = finish, is_favourite = fav;
      });
      if (d == kUnplaced) continue;
      // The ready op that starts first on its device (ties: a favourite child, topological position).
      bool better = best_index == ready.size() || t < best_start;
      if (!better && t == best_start) {
        if (is_favourite != best_favourite)
          better = is_favourite;
        else if (s.rank[o] != s.rank[ready[best_index]])
          better = s.rank[o] < s.rank[ready[best_index]];
        else
          better = d < best_device;
      }
      if (better) best_index = i, best_device = d, best_start = t, best_favourite = is_favourite;
    }
    if (ready.empty()) throw Error("m-etf: no op is ready with " + std::to_string(n - step) + " left to schedule (internal error)");
    if (best_index == ready.size()) return std::nullopt;  // ready ops whose families fit nowhere
    const OpId o = ready[best_index];
    ready[best_index] = ready.back();
    ready.pop_back();
    const bool committed = st.place(o, best_device, best_start);
    state[o] = kDone;
    // A view does not take the device: it becomes the device's last op (whose favourite child the
    // device waits for) only when it continues the chain, as its last op's favourite child.
    const OpId prev = last_op[best_device];
    if (s.time(o, best_device) > 0.0 || (sct && prev != kNoId && favourite[prev] == o) || prev == kNoId) last_op[best_device] = o;
    release_after(s, o, committed, pending, make_ready);
  }
  return st.forward_devices();
}

// Critical-path-first list scheduling (Mayer et al. 2017): the ready op with the longest path to
// the end of the step (bottom level, mean costs) goes first, to the device where it finishes
// earliest (appended after the device's last op). With `pin`, the ops of one critical path all go
// to the one device that runs them fastest (as CPOP does), memory permitting.
std::optional<std::vector<DeviceId>> critical_path_first(const StepGraph& s, const std::vector<double>& footprint,
                                                         const std::vector<double>& budget, bool pin) {
  const std::vector<double> bottom = bottom_levels(s);
  std::vector<std::uint8_t> on_path(s.num_ops, 0);
  DeviceId path_device = kUnplaced;
  if (pin) {
    const std::vector<double> top = top_levels(s);
    double length = 0.0;
    for (OpId o = 0; o < s.num_ops; ++o) length = std::max(length, top[o] + bottom[o]);
    // One critical path (where several tie, the one through the earliest ops): from an op without
    // predecessors, follow successors on the path.
    const double tolerance = length * 1e-9;
    auto on_critical = [&](OpId o) { return top[o] + bottom[o] >= length - tolerance; };
    OpId at = kNoId;
    for (OpId o : s.problem.graph.topological_order())
      if (s.pred(o).empty() && on_critical(o)) {
        at = o;
        break;
      }
    std::vector<double> path_time(s.num_devices, 0.0);
    while (at != kNoId) {
      on_path[at] = 1;
      for (DeviceId d : s.candidates) path_time[d] += s.time(at, d);
      OpId next = kNoId;
      for (const auto& e : s.succ(at))
        if (on_critical(e.op) && top[at] + s.mean_time[at] + s.mean_comm(at, e.op, e.bytes) >= top[e.op] - tolerance &&
            (next == kNoId || s.rank[e.op] < s.rank[next]))
          next = e.op;
      at = next;
    }
    for (DeviceId d : s.candidates)
      if (path_device == kUnplaced || path_time[d] < path_time[path_device]) path_device = d;
  }
  Partial st(s, footprint, budget);
  ReadyByLevel ready(s, bottom);
  while (!ready.empty()) {
    const OpId o = ready.pop();
    DeviceId best = kUnplaced;
    double best_finish = kInf, best_start = 0.0;
    if (on_path[o] && st.family_device(o) == kUnplaced && st.allowed(o, path_device)) {
      best = path_device;
      best_start = st.start_time(o, best, st.ready_time(o, best));
    } else {
      st.for_each_allowed(o, [&](DeviceId d) {
        const double start = st.start_time(o, d, st.ready_time(o, d));
        const double end = start + s.time(o, d);
        if (end < best_finish) best = d, best_finish = end, best_start = start;
      });
    }
    if (best == kUnplaced) return std::nullopt;
    ready.done(o, st.place(o, best, best_start));
  }
  ready.check_all_scheduled();
  return st.forward_devices();
}

// HEFT (Topcuoglu et al. 2002): ops in decreasing upward rank (mean costs; ties by topological
// position, so producers come first), each on the device where it finishes earliest, inserted into
// the first idle gap of that device long enough to hold it (and, with contention, its input
// transfers into the first idle gaps of their links: StepGraph::channel_gaps). The order is HEFT's
// sorted list taken as a priority among the ops whose predecessors are scheduled (the same list: a
// predecessor's rank is higher), so that an op also waits for the families it waits for
// (StepGraph::home_waits).
std::optional<std::vector<DeviceId>> heft(const StepGraph& s, const std::vector<double>& footprint,
                                          const std::vector<double>& budget) {
  const std::vector<double> rank_up = bottom_levels(s);
  struct Busy {
    double start, end;
  };
  std::vector<std::vector<Busy>> timeline(s.num_devices);  // per device, sorted, disjoint
  // Earliest start of a job of `length` on `d` at or after `ready`, and where it goes in the timeline.
  // A job of no time (a view) does not take the device, as in the simulator: it starts when ready
  // and goes into no timeline.
  auto earliest_slot = [&](DeviceId d, double ready, double length) {
    const auto& busy = timeline[d];
    auto it = std::upper_bound(busy.begin(), busy.end(), ready, [](double t, const Busy& b) { return t < b.end; });
    double t = ready;
    for (; it != busy.end() && length > 0.0; ++it) {
      if (t + length <= it->start) break;
      t = std::max(t, it->end);
    }
    return std::pair{t, static_cast<std::size_t>(it - busy.begin())};
  };
  Partial st(s, footprint, budget);
  ReadyByLevel ready(s, rank_up);
  while (!ready.empty()) {
    const OpId o = ready.pop();
    DeviceId best = kUnplaced;
    double best_finish = kInf, best_start = 0.0;
    std::size_t best_slot = 0;
    st.for_each_allowed(o, [&](DeviceId d) {
      const auto [start, slot] = earliest_slot(d, st.ready_time(o, d), s.time(o, d));
      if (start + s.time(o, d) < best_finish) best = d, best_finish = start + s.time(o, d), best_start = start, best_slot = slot;
    });
    if (best == kUnplaced) return std::nullopt;
    const bool committed = st.place(o, best, best_start);
    if (best_finish > best_start)
      timeline[best].insert(timeline[best].begin() + static_cast<std::ptrdiff_t>(best_slot), Busy{best_start, best_finish});
    ready.done(o, committed);
  }
  ready.check_all_scheduled();
  return st.forward_devices();
}

// m-SCT's favourite children from the LP relaxation of Hanen and Munier's small-communication-time
// model: x_e in [0,1] per edge (1: the edge pays its transfer), s_i >= 0 start times, w the
// makespan; minimise w subject to s_i + p_i + c_e x_e <= s_j for each edge e = i->j, every op
// having at most one favourite child (sum over its out-edges of x_e >= out-degree - 1) and at most
// one favourite parent (likewise over in-edges), s_i + p_i <= w for ops without successors. Mean
// op and transfer times, in microseconds. Edges within a family always stay on one device and take
// no part (they keep only their precedence). An edge with x_e < threshold is a favourite; where
// rounding gives an op two favourite children (or parents), the edge with the smaller x_e (then
// the larger transfer, then the smaller ids) wins. Returns the favourite child of each op, kNoId
// for none; an empty vector when the LP could not be solved, or not within `max_seconds` (> 0:
// CLP's time limit; `timed_out` then says so).
std::vector<OpId> favourite_children(const StepGraph& s, double threshold, double max_seconds, bool& timed_out) {
  const std::size_t n = s.num_ops;
  struct LpEdge {
    OpId from, to;
    double comm_us;
    int column;  // -1: a family-internal edge (precedence only)
  };
  std::vector<LpEdge> edges;
  int columns = 0;
  for (OpId i = 0; i < n; ++i)
    for (const auto& e : s.succ(i)) {
      const bool internal = s.anchor[i] == s.anchor[e.op];
      edges.push_back({i, e.op, s.mean_comm(i, e.op, e.bytes) * 1e6, internal ? -1 : columns});
      if (!internal) ++columns;
    }
  // Times and transfers so large that their sums near what a double holds (op times of 1e300 s
  // from a profile or a cluster's overhead) made CLP abort the process on an assertion (a fuzzing
  // review): such a program is not solved, as one that fails.
  double total_us = 0.0;
  for (OpId i = 0; i < n; ++i) total_us += s.mean_time[i] * 1e6;
  for (const LpEdge& e : edges) total_us += e.comm_us;
  if (!(total_us < 1e100)) return {};
  const int num_edge_columns = columns;
  const int start_column = columns, makespan_column = columns + static_cast<int>(n);
  const int num_columns = makespan_column + 1;

  std::vector<int> rows, cols;
  std::vector<double> values, row_lower, row_upper;
  auto add = [&](int row, int col, double v) { rows.push_back(row), cols.push_back(col), values.push_back(v); };
  int row = 0;
  for (const LpEdge& e : edges) {  // s_i - s_j + c x <= -p_i
    add(row, start_column + static_cast<int>(e.from), 1.0);
    add(row, start_column + static_cast<int>(e.to), -1.0);
    if (e.column >= 0 && e.comm_us > 0.0) add(row, e.column, e.comm_us);
    row_lower.push_back(-COIN_DBL_MAX), row_upper.push_back(-s.mean_time[e.from] * 1e6);
    ++row;
  }
  std::vector<std::vector<int>> out_columns(n), in_columns(n);
  for (const LpEdge& e : edges)
    if (e.column >= 0) out_columns[e.from].push_back(e.column), in_columns[e.to].push_back(e.column);
  for (const auto* side : {&out_columns, &in_columns})
    for (const auto& group : *side) {
      if (group.size() < 2) continue;
      for (int c : group) add(row, c, 1.0);
      row_lower.push_back(static_cast<double>(group.size()) - 1.0), row_upper.push_back(COIN_DBL_MAX);
      ++row;
    }
  for (OpId i = 0; i < n; ++i) {
    if (!s.succ(i).empty()) continue;  // s_i + p_i <= w
    add(row, start_column + static_cast<int>(i), 1.0);
    add(row, makespan_column, -1.0);
    row_lower.push_back(-COIN_DBL_MAX), row_upper.push_back(-s.mean_time[i] * 1e6);
    ++row;
  }
  std::vector<double> col_lower(num_columns, 0.0), col_upper(num_columns, COIN_DBL_MAX), objective(num_columns, 0.0);
  std::fill(col_upper.begin(), col_upper.begin() + num_edge_columns, 1.0);
  objective[makespan_column] = 1.0;

  CoinPackedMatrix matrix(false, rows.data(), cols.data(), values.data(), static_cast<CoinBigIndex>(values.size()));
  matrix.setDimensions(row, num_columns);
  ClpSimplex lp;
  lp.setLogLevel(0);
  lp.loadProblem(matrix, col_lower.data(), col_upper.data(), objective.data(), row_lower.data(), row_upper.data());
  if (max_seconds > 0.0) lp.setMaximumWallSeconds(max_seconds);  // setMaximumSeconds counts the process's CPU time
  lp.dual();
  timed_out = lp.status() == 3;  // stopped on a limit (CLP: iterations or time; only time is set)
  if (!lp.isProvenOptimal()) return {};
  const double* x = lp.primalColumnSolution();

  std::vector<const LpEdge*> chosen;
  for (const LpEdge& e : edges)
    if (e.column >= 0 && x[e.column] < threshold) chosen.push_back(&e);
  std::sort(chosen.begin(), chosen.end(), [&](const LpEdge* a, const LpEdge* b) {
    if (x[a->column] != x[b->column]) return x[a->column] < x[b->column];
    if (a->comm_us != b->comm_us) return a->comm_us > b->comm_us;
    return a->from != b->from ? a->from < b->from : a->to < b->to;
  });
  std::vector<OpId> child(n, kNoId), parent(n, kNoId);
  for (const LpEdge* e : chosen)
    if (child[e->from] == kNoId && parent[e->to] == kNoId) child[e->from] = e->to, parent[e->to] = e->from;
  return child;
}

// "1536.0 MiB", "5.0 KiB", "12 B": small sizes keep their order of magnitude.
std::string mib(double bytes) {
  char buf[48];
  if (bytes >= 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  else if (bytes >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

// A schedule's memory estimate commits every family's activations for the whole step, more than
// the simulator keeps (it frees them after their last reader): under memory pressure the GPUs of
// a schedule that fits end far from full and the rest goes to the CPU (GPT-2 on k80x4 at
// --memory-fraction 0.07: GPUs at 300-560 MiB of 860 MiB, 3.5 GiB on the CPU). So once a schedule
// fits, the budgets are scaled up (up to 4x, by bisection on the largest scale whose schedule the
// simulator still fits) and the fastest schedule that fits is kept. Where memory never bound the
// schedule, the largest scale gives the same schedule and nothing more is simulated. `best` is the
// fitted schedule, replaced by a faster one found so; returns whether one was. Nothing more is
// tried once `deadline` has passed.
template <typename Schedule>
bool grow_budgets(const StepGraph& step, const Schedule& schedule, const std::vector<double>& footprint,
                  const std::vector<double>& budget, const std::vector<DeviceId>& devices, Evaluator& eval, Observer& observer,
                  const Deadline& deadline, std::vector<DeviceId>& best, double fitted_s) {
  const std::vector<DeviceId> fitted = best;
  double best_s = fitted_s;
  // The schedule under budgets x `scale`: the fitted one again, one that fits, or one that does not.
  enum class Outcome { same, fits, overflows };
  auto try_scale = [&](double scale) {
    std::vector<double> grown = budget;
    for (DeviceId d : devices) grown[d] *= scale;
    std::optional<std::vector<DeviceId>> fwd = schedule(step, footprint, grown);
    if (!fwd) return Outcome::overflows;
    if (*fwd == fitted) return Outcome::same;
    const SimResult& r = eval.evaluate(*fwd);
    observer.on_progress({.samples = eval.evaluations(), .best_step_time_s = r.fits ? r.step_time_s : 0.0,
                          .last_mean_step_time_s = r.step_time_s});
    if (!r.fits) return Outcome::overflows;
    if (r.step_time_s < best_s) best_s = r.step_time_s, best = std::move(*fwd);
    return Outcome::fits;
  };
  constexpr double kMaxScale = 4.0;
  if (deadline.passed()) return false;
  const Outcome widest = try_scale(kMaxScale);
  if (widest == Outcome::overflows) {  // else memory did not bind, or the widest budgets fit
    double lo = 1.0, hi = kMaxScale;
    for (int i = 0; i < 5 && !observer.stop_requested() && !deadline.passed(); ++i) {
      const double mid = std::sqrt(lo * hi);
      (try_scale(mid) == Outcome::overflows ? hi : lo) = mid;
    }
  }
  return best_s < fitted_s;
}

// Runs `schedule` until its placement fits in the simulator (see the file comment), and returns
// it simulated. Throws Error when even the parameters and optimizer state fit nowhere. Once
// `deadline` has passed, no schedule is tried after the first one simulated: the closest to
// fitting so far is returned, and its note says so.
PlacementResult schedule_within_memory(const Problem& p, const std::string& name, const std::string& which, bool contention,
                                       const Schedule& schedule, Observer& observer, const Deadline& deadline, std::string note = {},
                                       bool channel_gaps = false) {
  if (p.graph.num_forward_ops() == 0) throw Error(name + ": the graph has no forward op to place");
  const FamilyMemory memory = family_memory(p);
  const std::vector<std::uint64_t> limits = memory_limits(p);
  const std::size_t nf = p.graph.num_forward_ops(), nd = p.cluster.num_devices();
  std::vector<DeviceId> devices = devices_of(p.cluster, which);
  Evaluator eval(p);
  std::optional<std::vector<DeviceId>> closest;
  double closest_shortfall = kInf;
  std::size_t rounds = 0;
  // Past the deadline once a schedule has been simulated: the rounds stop there.
  const auto out_of_time = [&] { return eval.evaluations() > 0 && deadline.passed(); };
  for (;;) {
    const StepGraph step(p, devices, contention, channel_gaps);
    std::vector<double> budget(nd, 0.0);
    for (DeviceId d : devices) budget[d] = static_cast<double>(limits[d]);
    double activation_weight = 1.0;
    // Up to kMaxRounds schedules per set of devices, while the shortfall keeps shrinking: a set
    // that has not come closer to fitting in kStaleRounds simulated schedules is given up.
    constexpr int kMaxRounds = 48, kStaleRounds = 16;
    double set_shortfall = kInf;
    int stale = 0;
    // Cuts where the overflow was can chase it from device to device when many devices are small
    // (63 GPUs of 200 MiB beside a CPU of 1 TiB: NASNet-A never fit with m-etf or critical-path,
    // and every op fits on the CPU; a QA pass): after kStaleRounds / 2 schedules that came no
    // closer, every budget is also scaled by `shrink`, a tenth less per schedule, which moves work
    // onto whichever device has room to spare; back to 1 once a schedule comes closer.
    double shrink = 1.0;
    std::vector<double> scaled(nd, 0.0);
    for (int round = 0; round < kMaxRounds && stale < kStaleRounds && !out_of_time(); ++round) {
      std::vector<double> footprint(nf);
      for (OpId f = 0; f < nf; ++f)
        footprint[f] = static_cast<double>(memory.static_bytes[f]) + activation_weight * static_cast<double>(memory.activation_bytes[f]);
      for (DeviceId d : devices) scaled[d] = budget[d] * shrink;
      std::optional<std::vector<DeviceId>> fwd = schedule(step, footprint, scaled);
      ++rounds;
      if (!fwd) {
        if (activation_weight == 0.0) break;
        activation_weight = activation_weight > 0.25 ? activation_weight / 2 : 0.0;
        continue;
      }
      const SimResult& r = eval.evaluate(*fwd);
      observer.on_progress({.samples = eval.evaluations(), .best_step_time_s = r.fits ? r.step_time_s : 0.0,
                            .last_mean_step_time_s = r.step_time_s});
      if (r.fits) {
        // Rounds that found no schedule at all (a family fitting nowhere) were not simulated.
        if (rounds > 1)
          note += (note.empty() ? "" : "; ") + std::string("scheduled ") + std::to_string(rounds) + " times to fit in memory (" +
                  std::to_string(eval.evaluations()) + " simulated)";
        std::vector<DeviceId> best = std::move(*fwd);
        if (grow_budgets(step, schedule, footprint, scaled, devices, eval, observer, deadline, best, r.step_time_s))
          note += (note.empty() ? "" : "; ") + std::string("memory budgets grown past the estimate, as the simulator allows");
        return finish(p, std::move(best), eval.evaluations(), note);
      }
      double shortfall = 0.0;
      for (const auto& [d, bytes] : r.shortfalls) {
        shortfall += static_cast<double>(bytes);
        budget[d] = std::max(0.0, budget[d] - static_cast<double>(bytes) - 0.02 * static_cast<double>(limits[d]));
      }
      stale = shortfall < set_shortfall ? 0 : stale + 1;
      set_shortfall = std::min(set_shortfall, shortfall);
      shrink = stale >= kStaleRounds / 2 ? shrink * 0.9 : 1.0;
      if (shortfall < closest_shortfall) closest = std::move(*fwd), closest_shortfall = shortfall;
    }
    if (devices.size() == nd || out_of_time()) break;
    devices = devices_of(p.cluster, "all");  // the GPUs cannot hold it: let the CPUs take part
  }
  if (closest)
    return finish(p, std::move(*closest), eval.evaluations(),
                  out_of_time() ? "no schedule that fits in memory found within --seconds; the one closest to fitting is shown"
                                : "no schedule found that fits in memory; the one closest to fitting is shown");
  double resident = 0.0, capacity = 0.0;
  for (OpId f = 0; f < nf; ++f) resident += static_cast<double>(memory.static_bytes[f]);
  for (DeviceId d = 0; d < nd; ++d) capacity += static_cast<double>(limits[d]);
  throw Error(name + ": cannot place '" + p.graph.name() + "' on '" + p.cluster.name() + "': its parameters, optimizer state and data (" +
              mib(resident) + ") do not fit in the devices' memory (" + mib(capacity) + " in all) family by family");
}

class SchedulerPlacer final : public Placer {
 public:
  enum class Kind { critical_path, heft, m_topo, m_etf, m_sct };
  SchedulerPlacer(Kind kind, std::string name, const PlacerOptions& o)
      : kind_(kind), name_(std::move(name)), devices_(o.get_one_of("devices", "gpus", {"gpus", "all"})) {
    if (kind == Kind::critical_path) pin_ = o.get_flag("pin-critical-path", false);
    if (kind != Kind::m_topo) contention_ = o.get_flag("contention", true);
    if (kind == Kind::m_sct) {
      threshold_ = o.get_double("threshold", 0.5);
      lp_max_ops_ = o.get_int("lp-max-ops", 20000);
      if (!(threshold_ > 0.0 && threshold_ <= 1.0)) throw Error("m-sct: option 'threshold' must be in (0, 1]");
      if (lp_max_ops_ < 0) throw Error("m-sct: option 'lp-max-ops' must be >= 0");
    }
  }

  PlacementResult place(const Problem& p, const Budget& budget, Observer& observer, std::uint64_t) override {
    const Deadline deadline = Deadline::after(budget.seconds);
    bool late = false;
    // ETF past its --seconds: said in the note.
    const auto noted = [&late](PlacementResult r) {
      if (late)
        r.note += (r.note.empty() ? "" : "; ") + std::string("ran past --seconds: from then on the ready op first in program order went next, "
                                                              "to the device where it finishes first (list scheduling), not the one "
                                                              "that could start first of all");
      return r;
    };
    switch (kind_) {
      case Kind::m_topo:
        return schedule_within_memory(p, name_, devices_, contention_, m_topo, observer, deadline);
      case Kind::m_etf:
        return noted(schedule_within_memory(
            p, name_, devices_, contention_,
            [&](const StepGraph& s, const auto& f, const auto& b) { return earliest_task_first(s, f, b, {}, deadline, late); }, observer,
            deadline));
      case Kind::critical_path:
        return schedule_within_memory(
            p, name_, devices_, contention_, [&](const StepGraph& s, const auto& f, const auto& b) { return critical_path_first(s, f, b, pin_); },
            observer, deadline);
      case Kind::heft:
        return schedule_within_memory(p, name_, devices_, contention_, heft, observer, deadline, {}, true);
      case Kind::m_sct:
        break;
    }
    // m-SCT: favourite children once (they do not depend on memory), then ETF guided by them.
    std::vector<OpId> favourite;
    std::string note;
    if (static_cast<std::int64_t>(p.graph.num_ops()) > lp_max_ops_) {
      note = "graph larger than lp-max-ops: no favourite children, plain ETF";
    } else {
      const StepGraph step(p, devices_of(p.cluster, devices_), false);
      // The LP gets three quarters of what --seconds leaves (at least a millisecond), ETF the rest:
      // with all of it, ETF after an LP out of time was past the deadline at once and
      // list-scheduled (NMT on k80x4 takes 0.01 s of ETF).
      const double left_s = deadline.limited() ? std::max(1e-3, 0.75 * deadline.left_s()) : 0.0;
      bool timed_out = false;
      favourite = favourite_children(step, threshold_, left_s, timed_out);
      if (favourite.empty())
        note = timed_out ? "the SCT linear program ran out of --seconds: no favourite children, plain ETF"
                         : "the SCT linear program was not solved: no favourite children, plain ETF";
    }
    return noted(schedule_within_memory(
        p, name_, devices_, contention_,
        [&](const StepGraph& s, const auto& f, const auto& b) { return earliest_task_first(s, f, b, favourite, deadline, late); }, observer,
        deadline, note));
  }

 private:
  Kind kind_;
  std::string name_;
  std::string devices_;
  bool pin_ = false;
  bool contention_ = true;
  double threshold_ = 0.5;
  std::int64_t lp_max_ops_ = 20000;
};

const OptionDoc kDevicesOption{"devices", "gpus",
                               "choose among the 'gpus' (every device when there is none, or when the GPUs cannot hold the "
                               "model) or 'all' devices"};

const OptionDoc kContentionOption{"contention", "1",
                                  "1: transfers queue for the channels of their routes, as in the simulator; 0: each takes "
                                  "its uncontended time (Cluster::transfer_time_s)"};

}  // namespace

void register_schedulers(std::vector<PlacerInfo>& r) {
  using Kind = SchedulerPlacer::Kind;
  r.push_back({"critical-path", "scheduling",
               "critical-path-first list scheduling (Mayer et al. 2017): longest path to the end first, on the device where it "
               "finishes earliest, within memory",
               {kDevicesOption, kContentionOption,
                {"pin-critical-path", "0", "1: put the ops of the critical path on the one device that runs them fastest (CPOP)"}},
               [](const PlacerOptions& o) { return std::make_unique<SchedulerPlacer>(Kind::critical_path, "critical-path", o); }});
  r.push_back({"heft", "scheduling",
               "HEFT (Topcuoglu et al. 2002): decreasing upward rank, insertion-based earliest finish time, within memory",
               {kDevicesOption, kContentionOption},
               [](const PlacerOptions& o) { return std::make_unique<SchedulerPlacer>(Kind::heft, "heft", o); }});
  r.push_back({"m-topo", "scheduling",
               "Baechi's m-TOPO: topological order filling each device up to an equal share of the model's memory (a share in "
               "proportion to its memory when equal shares cannot hold the model)",
               {kDevicesOption},
               [](const PlacerOptions& o) { return std::make_unique<SchedulerPlacer>(Kind::m_topo, "m-topo", o); }});
  r.push_back({"m-etf", "scheduling", "Baechi's m-ETF: earliest task first with memory constraints",
               {kDevicesOption, kContentionOption},
               [](const PlacerOptions& o) { return std::make_unique<SchedulerPlacer>(Kind::m_etf, "m-etf", o); }});
  r.push_back({"m-sct", "scheduling",
               "Baechi's m-SCT: ETF guided by favourite children from the SCT linear program (CLP), with memory constraints",
               {kDevicesOption, kContentionOption,
                {"threshold", "0.5", "an edge whose LP variable is below this is a favourite-child edge"},
                {"lp-max-ops", "20000", "larger graphs skip the LP (plain ETF)"}},
               [](const PlacerOptions& o) { return std::make_unique<SchedulerPlacer>(Kind::m_sct, "m-sct", o); }});
}

}  // namespace placer
