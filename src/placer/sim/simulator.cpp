#include "placer/sim/simulator.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <functional>

#include "placer/util/error.hpp"

namespace placer {
namespace {

constexpr std::uint32_t kOpFinish = 0xFFFFFFFFu;
constexpr std::uint32_t kArrivalFlag = 0x80000000u;
constexpr std::uint32_t kNoCause = 0xFFFFFFFFu;

struct Later {
  template <typename E>
  bool operator()(const E& a, const E& b) const {
    return a.time != b.time ? a.time > b.time : a.key > b.key;
  }
};

}  // namespace

void Simulator::RankSet::resize(std::size_t ranks) {
  words_.assign((ranks + 63) / 64, 0);
  summary_.assign((words_.size() + 63) / 64, 0);
  count_ = 0;
}

inline void Simulator::RankSet::insert(std::uint32_t rank) {
  const std::uint32_t w = rank >> 6;
  words_[w] |= std::uint64_t{1} << (rank & 63);
  summary_[w >> 6] |= std::uint64_t{1} << (w & 63);
  ++count_;
}

inline std::uint32_t Simulator::RankSet::pop_min() {
  std::size_t s = 0;
  while (summary_[s] == 0) ++s;
  const auto w = static_cast<std::uint32_t>(s * 64 + static_cast<std::size_t>(std::countr_zero(summary_[s])));
  const auto bit = static_cast<std::uint32_t>(std::countr_zero(words_[w]));
  words_[w] &= words_[w] - 1;
  if (words_[w] == 0) summary_[w >> 6] &= ~(std::uint64_t{1} << (w & 63));
  --count_;
  return w * 64 + bit;
}

void Simulator::RankSet::clear() {
  if (count_ == 0) return;
  std::fill(words_.begin(), words_.end(), 0);
  std::fill(summary_.begin(), summary_.end(), 0);
  count_ = 0;
}

Simulator::Simulator(const Graph& g, const Cluster& c, const CostTable& costs, SimOptions options)
    : graph_(g), cluster_(c), costs_(costs), options_(std::move(options)), num_devices_(c.num_devices()) {
  if (num_devices_ > 64) throw Error("the simulator supports at most 64 devices, cluster '" + c.name() + "' has " + std::to_string(num_devices_));
  if (costs.num_devices() != num_devices_) throw Error("cost table and cluster disagree on the number of devices");
  if (g.num_tensors() >= kArrivalFlag) throw Error("graph too large for the simulator (2^31 tensors)");
  if (!options_.memory_limit_bytes.empty() && options_.memory_limit_bytes.size() != num_devices_)
    throw Error("per-device memory limits must give one value per device (" + std::to_string(num_devices_) + ")");
  if (!(options_.memory_fraction > 0.0) || options_.memory_fraction > 1.0)
    throw Error("memory fraction must be in (0, 1], got " + std::to_string(options_.memory_fraction));

  const std::size_t n = g.num_ops(), t = g.num_tensors();
  rank_.assign(g.topological_ranks().begin(), g.topological_ranks().end());

  in_begin_.assign(1, 0);
  out_begin_.assign(1, 0);
  for (OpId o = 0; o < n; ++o) {
    auto ins = g.op_inputs(o);
    for (std::size_t i = 0; i < ins.size(); ++i)
      if (ins[i] != kNoId && std::find(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(i), ins[i]) ==
                                 ins.begin() + static_cast<std::ptrdiff_t>(i))
        in_tensors_.push_back(ins[i]);
    in_begin_.push_back(static_cast<std::uint32_t>(in_tensors_.size()));
    for (TensorId out : g.op_outputs(o)) out_tensors_.push_back(out);
    out_begin_.push_back(static_cast<std::uint32_t>(out_tensors_.size()));
  }

  tensor_bytes_.resize(t);
  tensor_home_.resize(t);
  tensor_is_source_.resize(t);
  tensor_keep_.assign(t, 0);
  tensor_dev_.assign(t, 0);
  static_extra_.assign(t, 0);
  cons_begin_.assign(1, 0);
  for (TensorId x = 0; x < t; ++x) {
    tensor_bytes_[x] = g.tensor_bytes(x);
    const bool source = g.producer(x) == kNoId;
    tensor_is_source_[x] = source;
    tensor_home_[x] = source ? g.param_home(x) : g.producer(x);
    if (source && tensor_home_[x] != kNoId) source_tensors_.push_back(x);
    if (source && g.tensor_kind(x) == TensorKind::parameter && g.num_forward_ops() != g.num_ops())
      static_extra_[x] = std::uint64_t{g.optimizer_state_copies()} * tensor_bytes_[x];
    for (OpId c : g.consumers(x)) cons_ops_.push_back(c);
    cons_begin_.push_back(static_cast<std::uint32_t>(cons_ops_.size()));
  }
  for (TensorId x : g.outputs()) tensor_keep_[x] = 1;

  remaining_.resize(n);
  dest_mask_.resize(t);
  uses_.resize(t * num_devices_);
  ready_.resize(num_devices_);
  for (auto& set : ready_) set.resize(n);
  route_begin_.assign(1, 0);
  for (DeviceId from = 0; from < num_devices_; ++from)
    for (DeviceId to = 0; to < num_devices_; ++to) {
      for (ChannelId ch : c.route(from, to)) route_channels_.push_back(ch);
      route_begin_.push_back(static_cast<std::uint32_t>(route_channels_.size()));
      route_latency_s_.push_back(from == to ? 0.0 : c.route_latency_s(from, to));
      route_seconds_per_byte_.push_back(from == to ? 0.0 : 1.0 / c.route_bandwidth(from, to));
    }
  route_bytes_.resize(num_devices_ * num_devices_);
  free_streams_.resize(num_devices_);
  mem_now_.resize(num_devices_);
  mem_peak_.resize(num_devices_);
  channel_free_.resize(c.num_channels());
  events_.reserve(256);
  route_queue_.resize(num_devices_ * num_devices_);
  route_head_.resize(num_devices_ * num_devices_);
  op_start_.resize(n);
  op_end_.resize(n);
  op_cause_.resize(n);
  arrival_start_.resize(t * num_devices_);
  arrival_end_.resize(t * num_devices_);
  last_finished_.resize(num_devices_);
  result_.devices.resize(num_devices_);
  result_.channel_bytes.resize(c.num_channels());
  for (DeviceId d = 0; d < num_devices_; ++d) {
    std::uint64_t limit = static_cast<std::uint64_t>(static_cast<double>(c.device(d).memory_bytes) * options_.memory_fraction);
    if (!options_.memory_limit_bytes.empty() && options_.memory_limit_bytes[d] > 0) limit = options_.memory_limit_bytes[d];
    result_.devices[d].capacity_bytes = limit;
  }
}

inline void Simulator::push_event(double time, std::uint32_t id, std::uint32_t dest) {
  events_.push_back(Event{time, (std::uint64_t{dest} << 32) | id});
  std::push_heap(events_.begin(), events_.end(), Later());
}

inline void Simulator::allocate(DeviceId d, std::uint64_t bytes) {
  mem_now_[d] += bytes;
  if (mem_now_[d] > mem_peak_[d]) mem_peak_[d] = mem_now_[d];
}

inline void Simulator::release(std::uint32_t tensor, DeviceId d) {
  const std::size_t k = std::size_t{tensor} * num_devices_ + d;
  if (--uses_[k] != 0 || tensor_keep_[tensor]) return;
  if (tensor_is_source_[tensor] && tensor_dev_[tensor] == d) return;  // lives here all step
  mem_now_[d] -= tensor_bytes_[tensor];
}

inline void Simulator::make_ready(std::uint32_t op, double time, std::uint32_t cause) {
  op_cause_[op] = cause;
  op_start_[op] = time;  // ready time until the op starts
  const DeviceId d = dev_[op];
  if (costs_.times()[std::size_t{op} * num_devices_ + d] == 0.0) {
    // An op that takes no time (an alias) does not wait for its device: it finishes at once.
    ++result_.devices[d].ops;
    for (std::uint32_t i = out_begin_[op]; i < out_begin_[op + 1]; ++i) allocate(d, tensor_bytes_[out_tensors_[i]]);
    if (trace_) trace_->push_back({TraceEvent::Kind::op, op, d, d, time, time});
    zero_finished_.push_back(op);
    return;
  }
  ready_[d].insert(rank_[op]);
}

inline void Simulator::start_ops(DeviceId d, double now) {
  RankSet& ready = ready_[d];
  if (ready.empty()) return;
  auto topo = graph_.topological_order();
  const double* times = costs_.times().data();
  while (free_streams_[d] > 0 && !ready.empty()) {
    const OpId o = topo[ready.pop_min()];
    --free_streams_[d];
    if (now > op_start_[o]) op_cause_[o] = last_finished_[d];  // it waited for the device
    op_start_[o] = now;
    const double duration = times[std::size_t{o} * num_devices_ + d];
    DeviceResult& dr = result_.devices[d];
    dr.busy_s += duration;
    ++dr.ops;
    for (std::uint32_t i = out_begin_[o]; i < out_begin_[o + 1]; ++i) allocate(d, tensor_bytes_[out_tensors_[i]]);
    if (trace_) trace_->push_back({TraceEvent::Kind::op, o, d, d, now, now + duration});
    push_event(now + duration, o, kOpFinish);
  }
}

void Simulator::send(std::uint32_t tensor, DeviceId from, DeviceId to, double now) {
  const std::size_t r = std::size_t{from} * num_devices_ + to;
  const ChannelId* first = route_channels_.data() + route_begin_[r];
  const ChannelId* last = route_channels_.data() + route_begin_[r + 1];
  double start = now;
  for (const ChannelId* ch = first; ch != last; ++ch) start = std::max(start, channel_free_[*ch]);
  const double bytes = static_cast<double>(tensor_bytes_[tensor]);
  const double end = start + route_latency_s_[r] + bytes * route_seconds_per_byte_[r];
  for (const ChannelId* ch = first; ch != last; ++ch) channel_free_[*ch] = end;
  route_bytes_[r] += bytes;
  allocate(to, tensor_bytes_[tensor]);
  const std::size_t k = std::size_t{tensor} * num_devices_ + to;
  arrival_start_[k] = start;
  arrival_end_[k] = end;
  result_.transfer_bytes += bytes;
  ++result_.transfers;
  if (trace_) trace_->push_back({TraceEvent::Kind::transfer, tensor, from, to, start, end});
  auto& queue = route_queue_[r];
  if (route_head_[r] == queue.size()) push_event(end, tensor, to);  // the route was idle: this is its head
  queue.push_back({end, tensor});
}

const SimResult& Simulator::simulate(std::span<const DeviceId> devices) { return run(devices, nullptr); }

const SimResult& Simulator::simulate(std::span<const DeviceId> devices, std::vector<TraceEvent>& trace) {
  trace.clear();
  return run(devices, &trace);
}

const SimResult& Simulator::run(std::span<const DeviceId> devices, std::vector<TraceEvent>* trace) {
  trace_ = trace;
  const std::size_t n = graph_.num_ops();
  const std::size_t nd = num_devices_;
  if (devices.size() != n)
    throw Error("placement covers " + std::to_string(devices.size()) + " ops, the graph has " + std::to_string(n));
  placement_.assign(devices.begin(), devices.end());  // kept: critical_path() reads it after the call
  dev_ = placement_.data();

  // Reset scratch.
  std::fill(remaining_.begin(), remaining_.end(), 0u);
  std::fill(dest_mask_.begin(), dest_mask_.end(), 0u);
  // uses_ is all zeros here: every count a run adds, the same run takes back (readers finish,
  // sends arrive). A run that fails part-way marks it dirty.
  if (uses_dirty_) std::fill(uses_.begin(), uses_.end(), 0u), uses_dirty_ = false;
  for (OpId o = 0; o < n; ++o)
    if (dev_[o] >= nd) throw Error("placement puts op '" + graph_.op_name(o) + "' on a device id out of range");
  std::fill(mem_now_.begin(), mem_now_.end(), 0u);
  std::fill(channel_free_.begin(), channel_free_.end(), 0.0);
  for (DeviceId d = 0; d < nd; ++d) {
    ready_[d].clear();
    std::fill(route_bytes_.begin() + d * nd, route_bytes_.begin() + (d + 1) * nd, 0.0);
    free_streams_[d] = static_cast<std::uint32_t>(std::max(1, cluster_.device(d).streams));
    last_finished_[d] = kNoCause;
    DeviceResult& dr = result_.devices[d];
    dr.busy_s = 0.0, dr.ops = 0, dr.static_memory_bytes = 0, dr.peak_memory_bytes = 0;
  }
  events_.clear();
  zero_finished_.clear();
  for (auto& q : route_queue_) q.clear();
  std::fill(route_head_.begin(), route_head_.end(), 0u);
  result_.transfer_bytes = 0.0;
  result_.transfers = 0;
  result_.shortfalls.clear();

  // Static memory: tensors without a producer live on their home op's device.
  for (std::uint32_t s : source_tensors_) {
    const DeviceId h = dev_[tensor_home_[s]];
    mem_now_[h] += tensor_bytes_[s] + static_extra_[s];
  }
  for (DeviceId d = 0; d < nd; ++d) result_.devices[d].static_memory_bytes = mem_now_[d];
  mem_peak_ = mem_now_;

  for (std::size_t x = 0; x < tensor_dev_.size(); ++x)
    tensor_dev_[x] = tensor_home_[x] == kNoId ? 0 : dev_[tensor_home_[x]];

  // Readers per (tensor, device), destinations per tensor, inputs each op waits for.
  for (OpId o = 0; o < n; ++o) {
    const DeviceId d = dev_[o];
    std::uint32_t waits = 0;
    for (std::uint32_t i = in_begin_[o]; i < in_begin_[o + 1]; ++i) {
      const std::uint32_t x = in_tensors_[i];
      ++uses_[std::size_t{x} * nd + d];
      const DeviceId src = tensor_dev_[x];
      if (src != d) {
        ++waits;
        const std::uint64_t bit = std::uint64_t{1} << d;
        if (!(dest_mask_[x] & bit)) {
          dest_mask_[x] |= bit;
          ++uses_[std::size_t{x} * nd + src];
        }
      } else if (!tensor_is_source_[x]) {
        ++waits;
      }
    }
    remaining_[o] = waits;
  }

  // Time 0: send sources to remote readers, start every op with nothing to wait for.
  for (std::uint32_t s : source_tensors_)
    for (std::uint64_t mask = dest_mask_[s]; mask; mask &= mask - 1)
      send(s, dev_[tensor_home_[s]], static_cast<DeviceId>(std::countr_zero(mask)), 0.0);
  for (OpId o : graph_.topological_order())
    if (remaining_[o] == 0) make_ready(o, 0.0, kNoCause);
  for (DeviceId d = 0; d < nd; ++d) start_ops(d, 0.0);

  double now = 0.0, step_end = 0.0;
  std::size_t finished = 0;
  last_op_ = 0;
  for (;;) {
    std::uint32_t id, dest;
    bool took_device = true;
    if (!zero_finished_.empty()) {
      id = zero_finished_.back();
      zero_finished_.pop_back();
      dest = kOpFinish;
      took_device = false;
    } else if (!events_.empty()) {
      std::pop_heap(events_.begin(), events_.end(), Later());
      const Event e = events_.back();
      events_.pop_back();
      now = e.time, id = static_cast<std::uint32_t>(e.key), dest = static_cast<std::uint32_t>(e.key >> 32);
    } else {
      break;
    }
    if (dest == kOpFinish) {
      const OpId o = id;
      const DeviceId d = dev_[o];
      if (took_device) {
        ++free_streams_[d];
        last_finished_[d] = o;
      }
      op_end_[o] = now;
      ++finished;
      if (now >= step_end) step_end = now, last_op_ = o;
      for (std::uint32_t i = in_begin_[o]; i < in_begin_[o + 1]; ++i) release(in_tensors_[i], d);
      for (std::uint32_t i = out_begin_[o]; i < out_begin_[o + 1]; ++i) {
        const std::uint32_t x = out_tensors_[i];
        for (std::uint32_t j = cons_begin_[x]; j < cons_begin_[x + 1]; ++j) {
          const OpId c = cons_ops_[j];
          if (dev_[c] == d && --remaining_[c] == 0) make_ready(c, now, o);
        }
        for (std::uint64_t mask = dest_mask_[x]; mask; mask &= mask - 1)
          send(x, d, static_cast<DeviceId>(std::countr_zero(mask)), now);
        if (uses_[std::size_t{x} * nd + d] == 0 && !tensor_keep_[x]) mem_now_[d] -= tensor_bytes_[x];  // nobody reads it
      }
      start_ops(d, now);
    } else {
      const std::uint32_t x = id;
      const DeviceId d = dest;
      for (std::uint32_t j = cons_begin_[x]; j < cons_begin_[x + 1]; ++j) {
        const OpId c = cons_ops_[j];
        if (dev_[c] == d && --remaining_[c] == 0) make_ready(c, now, x | kArrivalFlag);
      }
      const DeviceId from = tensor_dev_[x];
      release(x, from);  // the sender's copy is no longer needed for this send
      const std::size_t r = std::size_t{from} * nd + d;
      if (++route_head_[r] < route_queue_[r].size()) {
        const Pending& next = route_queue_[r][route_head_[r]];
        push_event(next.end, next.tensor, d);
      }
      start_ops(d, now);
    }
  }
  if (finished != n) uses_dirty_ = true;
  if (finished != n) throw Error("simulation ended with " + std::to_string(n - finished) + " ops that never ran (internal error)");

  std::fill(result_.channel_bytes.begin(), result_.channel_bytes.end(), 0.0);
  for (std::size_t r = 0; r + 1 < route_begin_.size(); ++r)
    if (route_bytes_[r] > 0)
      for (std::uint32_t i = route_begin_[r]; i < route_begin_[r + 1]; ++i) result_.channel_bytes[route_channels_[i]] += route_bytes_[r];
  result_.step_time_s = step_end;
  result_.fits = true;
  for (DeviceId d = 0; d < nd; ++d) {
    DeviceResult& dr = result_.devices[d];
    dr.peak_memory_bytes = mem_peak_[d];
    if (dr.peak_memory_bytes > dr.capacity_bytes) {
      result_.fits = false;
      result_.shortfalls.push_back({d, dr.peak_memory_bytes - dr.capacity_bytes});
    }
  }
  return result_;
}

std::vector<PathStep> Simulator::critical_path() const {
  std::vector<PathStep> path;
  if (graph_.num_ops() == 0 || dev_ == nullptr) return path;
  std::uint32_t op = last_op_;
  for (std::size_t guard = 0; guard <= 2 * graph_.num_ops(); ++guard) {
    path.push_back({PathStep::Kind::op, op, dev_[op], op_start_[op], op_end_[op]});
    const std::uint32_t cause = op_cause_[op];
    if (cause == kNoCause) break;
    if (cause & kArrivalFlag) {
      const std::uint32_t x = cause & ~kArrivalFlag;
      const std::size_t k = std::size_t{x} * num_devices_ + dev_[op];
      path.push_back({PathStep::Kind::transfer, x, dev_[op], arrival_start_[k], arrival_end_[k]});
      if (tensor_is_source_[x]) break;
      op = tensor_home_[x];
    } else {
      op = cause;
    }
  }
  return path;
}

LowerBounds lower_bounds(const Graph& g, const Cluster& c, const CostTable& costs) {
  LowerBounds lb;
  const std::size_t n = g.num_ops(), nd = c.num_devices();
  std::vector<double> fastest(n), finish(n, 0.0);
  for (OpId o = 0; o < n; ++o) {
    double best = costs.time_s(o, 0);
    for (DeviceId d = 1; d < nd; ++d) best = std::min(best, costs.time_s(o, d));
    fastest[o] = best;
  }
  for (OpId o : g.topological_order()) {
    double ready = 0.0;
    for (OpId p : g.predecessors(o)) ready = std::max(ready, finish[p]);
    finish[o] = ready + fastest[o];
    lb.critical_path_s = std::max(lb.critical_path_s, finish[o]);
  }
  // Total work: for any weights w_d >= 0 with sum_d w_d * streams_d = 1, sum_o min_d w_d t_od is at
  // most the step time of every placement (device d is busy sum t_od <= T * streams_d). Search
  // the weights with multiplicative updates and keep the best bound.
  std::vector<double> streams(nd), w(nd), load(nd);
  for (DeviceId d = 0; d < nd; ++d) streams[d] = std::max(1, c.device(d).streams);
  for (DeviceId d = 0; d < nd; ++d) {
    double alone = 0.0;
    for (OpId o = 0; o < n; ++o) alone += costs.time_s(o, d);
    w[d] = alone > 0 ? streams[d] / alone : 1.0;
  }
  for (int iter = 0; iter < 60; ++iter) {
    double norm = 0.0;
    for (DeviceId d = 0; d < nd; ++d) norm += w[d] * streams[d];
    for (DeviceId d = 0; d < nd; ++d) w[d] /= norm;
    std::fill(load.begin(), load.end(), 0.0);
    double bound = 0.0;
    for (OpId o = 0; o < n; ++o) {
      DeviceId arg = 0;
      double best = w[0] * costs.time_s(o, 0);
      for (DeviceId d = 1; d < nd; ++d)
        if (double v = w[d] * costs.time_s(o, d); v < best) best = v, arg = d;
      bound += best;
      load[arg] += costs.time_s(o, arg) / streams[arg];
    }
    lb.total_work_s = std::max(lb.total_work_s, bound);
    double mean = 0.0;
    for (DeviceId d = 0; d < nd; ++d) mean += load[d] / static_cast<double>(nd);
    if (mean <= 0) break;
    for (DeviceId d = 0; d < nd; ++d) w[d] *= std::exp(0.5 * (load[d] - mean) / mean);
  }
  return lb;
}

}  // namespace placer
