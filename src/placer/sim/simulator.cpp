#include "placer/sim/simulator.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "placer/util/error.hpp"

namespace placer {
namespace {

constexpr std::uint32_t kOpFinish = 0xFFFFFFFFu;
constexpr std::uint32_t kArrivalFlag = 0x80000000u;
constexpr std::uint32_t kNoCause = 0xFFFFFFFFu;
constexpr std::uint32_t kNone = 0xFFFFFFFFu;  // no tensor, no transfer

// Binary min-heap step: moves the hole at `i` up past every parent later than `e`, then fills it.
[[gnu::always_inline]] inline void sift_up(unsigned __int128* heap, std::size_t i, unsigned __int128 e) {
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (heap[parent] < e) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = e;
}

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
  auto ranks = g.topological_ranks();
  ops_.resize(n);
  // Folded ops (set-up values, Graph::op_folded) take no part in a step: they get no inputs and no
  // outputs here, and the set-up values their readers read are neither waited for nor sent (they are
  // static memory on every device that reads them, see folded_reads_).
  for (OpId o = 0; o < n; ++o) {
    OpInfo& info = ops_[o];
    info.rank = ranks[o];
    info.in_begin = static_cast<std::uint32_t>(in_tensors_.size());
    const bool folded = g.op_folded(o);
    auto ins = g.op_inputs(o);
    // Inputs it holds until it finishes first, then the partial gradients it sums as they arrive
    // (Graph::tensor_accumulated), which it does not hold: in_tensors_[release_end, in_end).
    for (int accumulated = 0; accumulated < 2; ++accumulated) {
      for (std::size_t i = 0; i < ins.size() && !folded; ++i) {
        if (ins[i] == kNoId || std::find(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(i), ins[i]) !=
                                   ins.begin() + static_cast<std::ptrdiff_t>(i))
          continue;
        if (g.tensor_accumulated(ins[i]) != (accumulated == 1)) continue;
        if (g.tensor_folded(ins[i])) folded_reads_.push_back({ins[i], o});
        else in_tensors_.push_back(ins[i]), edge_held_.push_back(static_cast<std::uint8_t>(1 - accumulated));
      }
      if (accumulated == 0) info.release_end = static_cast<std::uint32_t>(in_tensors_.size());
    }
    info.in_end = static_cast<std::uint32_t>(in_tensors_.size());
    edge_op_.resize(in_tensors_.size(), o);
    info.out_begin = static_cast<std::uint32_t>(out_tensors_.size());
    if (!folded)
      for (TensorId out : g.op_outputs(o)) out_tensors_.push_back(out);
    info.out_end = static_cast<std::uint32_t>(out_tensors_.size());
  }

  tensors_.resize(t);
  static_extra_.assign(t, 0);
  for (TensorId x = 0; x < t; ++x) {
    TensorInfo& info = tensors_[x];
    info.bytes = g.tensor_bytes(x);
    info.dest_mask = 0;
    info.dev = 0;
    info.source = g.producer(x) == kNoId;
    info.sums = options_.gradient_sums_out_of_place && g.tensor_accumulated(x) ? kSumOutOfPlace : 0;
    info.home = info.source ? g.param_home(x) : g.producer(x);
    if (info.source && info.home != kNoId && !g.tensor_folded(x)) source_tensors_.push_back(x);
    if (info.source) static_extra_[x] = g.optimizer_state_bytes(x);
  }
  // Sums of partial gradients: each accumulated partial with the first partial it goes into (the
  // nearest input before it in its reader's list that is not accumulated: a derived step lists a
  // tensor's partials together, the first one first). Both must be made during the step and read
  // by that reader alone, and neither is a graph output; otherwise the partial is simply freed when
  // it is there.
  sum_into_.assign(t, kNone);
  std::vector<std::uint8_t> is_output(t, 0);
  for (TensorId y : g.outputs()) is_output[y] = 1;
  for (OpId o = 0; o < n; ++o) {
    if (g.op_folded(o)) continue;
    auto only_here = [&](TensorId y) {  // made during the step, read by o alone, not an output
      const auto readers = g.consumers(y);
      return g.producer(y) != kNoId && !g.tensor_folded(y) && !is_output[y] &&
             std::all_of(readers.begin(), readers.end(), [&](OpId r) { return r == o; });
    };
    TensorId first = kNoId;
    for (TensorId x : g.op_inputs(o)) {
      if (x == kNoId) continue;
      if (!g.tensor_accumulated(x)) {
        first = x;
        continue;
      }
      if (first == kNoId || sum_into_[x] != kNone || !only_here(x) || !only_here(first)) continue;
      sum_into_[x] = first;
      tensors_[x].sums |= kSumPartial;
      if (!(tensors_[first].sums & kSumFirst)) tensors_[first].sums |= kSumFirst, sum_firsts_.push_back(first);
    }
  }
  sum_present_.assign(t, 0);
  sum_held_.assign(t, kNone);
  // Views: outputs that share the storage of their op's first input (an alias's, a gradient
  // passed through), in topological order so that a view of a view finds its base set.
  alloc_bytes_.resize(t);
  for (TensorId x = 0; x < t; ++x) alloc_bytes_[x] = tensors_[x].bytes;
  for (OpId o : g.topological_order()) {
    const std::uint32_t mask = g.op_view_outputs(o);
    if (mask == 0) continue;
    const TensorId in = g.op_inputs(o)[0];
    const auto outs = g.op_outputs(o);
    for (std::size_t i = 0; i < outs.size() && i < 32; ++i) {
      if (!(mask >> i & 1u)) continue;
      views_.push_back({o, in, outs[i]});
      alloc_bytes_[outs[i]] = 0;
    }
  }
  // Graph outputs made during the step: their storage on their producer's device is pinned per run.
  for (TensorId x : g.outputs())
    if (g.producer(x) != kNoId && !g.tensor_folded(x)) kept_outputs_.push_back(x);
  in_slot_.resize(in_tensors_.size());
  reader_next_.resize(in_tensors_.size());
  reader_head_.assign(t * num_devices_, kNone);
  storage_.resize(t);
  for (TensorId x = 0; x < t; ++x) storage_[x] = x;  // views' entries are set per run

  remaining_.resize(n);
  uses_.assign(t * num_devices_, 0);
  duration_.resize(n);
  // Workspaces (CostTable::workspace_bytes): per run, each op's on its device. Without any (no CPU
  // convolution) the event loop skips them.
  // Summed out of place, partial gradients make some ops hold more (CostTable::out_of_place_sums).
  if (options_.gradient_sums_out_of_place && !costs.out_of_place_sums().empty()) {
    own_workspaces_.assign(costs.workspaces().begin(), costs.workspaces().end());
    for (std::size_t k = 0; k < own_workspaces_.size(); ++k) own_workspaces_[k] += costs.out_of_place_sums()[k];
  }
  const std::uint64_t* workspaces = own_workspaces_.empty() ? costs.workspaces().data() : own_workspaces_.data();
  has_workspaces_ = std::any_of(workspaces, workspaces + costs.workspaces().size(), [](std::uint64_t b) { return b != 0; });
  workspace_.assign(has_workspaces_ ? n : 0, 0);
  ready_.resize(num_devices_);
  for (auto& set : ready_) set.resize(n);
  routes_.reserve(num_devices_ * num_devices_);
  for (DeviceId from = 0; from < num_devices_; ++from)
    for (DeviceId to = 0; to < num_devices_; ++to) {
      Route r{static_cast<std::uint32_t>(route_channels_.size()), 0, 0.0, 0.0};
      for (ChannelId ch : c.route(from, to)) route_channels_.push_back(ch);
      r.last = static_cast<std::uint32_t>(route_channels_.size());
      if (from != to) r.latency_s = c.route_latency_s(from, to), r.seconds_per_byte = 1.0 / c.route_bandwidth(from, to);
      routes_.push_back(r);
    }
  // A cluster whose links are so slow that a transfer takes longer than a double holds (a bandwidth
  // near 1e-300 bytes/s: a unit slip) would give step times of inf: refused here, naming the route.
  std::uint64_t largest = 0;  // the largest tensor a step may send: one an op reads during the step
  for (std::uint32_t x : in_tensors_) largest = std::max(largest, tensors_[x].bytes);
  for (DeviceId from = 0; from < num_devices_; ++from)
    for (DeviceId to = 0; to < num_devices_; ++to) {
      const Route& r = routes_[std::size_t{from} * num_devices_ + to];
      const double seconds = r.latency_s + static_cast<double>(largest) * r.seconds_per_byte;
      if (from != to && !(std::isfinite(r.seconds_per_byte) && std::isfinite(seconds)))
        throw Error("cluster '" + c.name() + "': sending " + std::to_string(largest) + " bytes from " + c.device(from).name + " to " +
                    c.device(to).name + " would take longer than a double can hold (route latency " +
                    fmt::format("{:g}", c.route_latency_s(from, to)) + " s, bandwidth " + fmt::format("{:g}", c.route_bandwidth(from, to)) +
                    " bytes/s): check the links' latencies and bandwidths");
    }
  // Channels that exactly the same routes cross (the links of a chain of switches, which every
  // route through one crosses whole) are always reserved together, to the same time: one of them
  // stands for all in the event loop. A route over 20,000 switches in series held 20,000 channels
  // per transfer (9 s per simulation, a fuzzing review); now one. Bytes per channel are still
  // counted over every channel (route_channels_).
  std::vector<ChannelId> stands_for(c.num_channels());
  {
    std::vector<std::vector<std::uint32_t>> crossed_by(c.num_channels());  // channel -> routes, in order
    for (std::size_t r = 0; r < routes_.size(); ++r)
      for (std::uint32_t i = routes_[r].first; i < routes_[r].last; ++i) crossed_by[route_channels_[i]].push_back(static_cast<std::uint32_t>(r));
    std::map<std::vector<std::uint32_t>, ChannelId> first_with;
    for (ChannelId ch = 0; ch < c.num_channels(); ++ch) stands_for[ch] = first_with.try_emplace(std::move(crossed_by[ch]), ch).first->second;
  }
  // Every route's distinct representative channels, padded to the longest route by repeating its
  // last (a repeat changes neither the max of free times nor what is written), so that issuing a
  // transfer runs loops of one fixed length: no branch mispredicted on the route's length.
  std::vector<std::vector<ChannelId>> held(routes_.size());
  max_route_ = 0;
  for (std::size_t r = 0; r < routes_.size(); ++r) {
    for (std::uint32_t i = routes_[r].first; i < routes_[r].last; ++i)
      if (std::find(held[r].begin(), held[r].end(), stands_for[route_channels_[i]]) == held[r].end()) held[r].push_back(stands_for[route_channels_[i]]);
    max_route_ = std::max<std::uint32_t>(max_route_, static_cast<std::uint32_t>(held[r].size()));
  }
  padded_channels_.assign(routes_.size() * max_route_, 0);
  for (std::size_t r = 0; r < routes_.size(); ++r)
    for (std::uint32_t k = 0; k < max_route_ && !held[r].empty(); ++k)
      padded_channels_[r * max_route_ + k] = held[r][std::min<std::size_t>(k, held[r].size() - 1)];
  streams_.resize(num_devices_);
  for (DeviceId d = 0; d < num_devices_; ++d) streams_[d] = static_cast<std::uint32_t>(std::max(1, c.device(d).streams));
  route_bytes_.resize(num_devices_ * num_devices_);
  free_streams_.resize(num_devices_);
  mem_now_.resize(num_devices_);
  mem_peak_.resize(num_devices_);
  channel_free_.resize(c.num_channels());
  events_.reserve(256);
  timing_.resize(n);
  for (OpId o = 0; o < n; ++o)
    if (g.op_folded(o)) timing_[o] = OpTiming{0.0, 0.0, kNoCause};  // done before the step, in every run
  last_finished_.resize(num_devices_);
  result_.devices.resize(num_devices_);
  result_.channel_bytes.resize(c.num_channels());
  for (DeviceId d = 0; d < num_devices_; ++d) result_.devices[d].capacity_bytes = memory_limit_bytes(c, d, options_);
}

std::uint64_t memory_limit_bytes(const Cluster& c, DeviceId d, const SimOptions& options) {
  if (!options.memory_limit_bytes.empty() && options.memory_limit_bytes[d] > 0) return options.memory_limit_bytes[d];
  // Saturating: a capacity near 2^64 times a fraction rounds up past what uint64 holds.
  const std::uint64_t capacity = c.device(d).memory_bytes;
  const double scaled = static_cast<double>(capacity) * options.memory_fraction;
  if (options.memory_fraction == 1.0) return capacity;
  return scaled >= 0x1p64 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(scaled);
}

const SimResult& Simulator::simulate(std::span<const DeviceId> devices) {
  trace_ = nullptr;
  run<false>(devices);
  return result_;
}

const SimResult& Simulator::simulate(std::span<const DeviceId> devices, std::vector<TraceEvent>& trace) {
  trace.clear();
  trace_ = &trace;
  try {
    run<true>(devices);
  } catch (...) {
    trace_ = nullptr;
    throw;
  }
  trace_ = nullptr;
  return result_;
}

// The event loop. Everything it touches per event is reached through local pointers, so that the
// compiler keeps them in registers; the helpers are lambdas, inlined.
template <bool kTrace>
void Simulator::run(std::span<const DeviceId> devices) {
  const std::size_t n = graph_.num_ops();
  const std::size_t nd = num_devices_;
  if (devices.size() != n)
    throw Error("placement covers " + std::to_string(devices.size()) + " ops, the graph has " + std::to_string(n));
  for (OpId o = 0; o < n; ++o)
    if (devices[o] >= nd) throw Error("placement puts op '" + graph_.op_name(o) + "' on a device id out of range");
  placement_.assign(devices.begin(), devices.end());  // kept: critical_path() reads it after the call

  const DeviceId* const dev = placement_.data();
  const OpInfo* const ops = ops_.data();
  const std::uint32_t* const in_tensors = in_tensors_.data();
  const std::uint32_t* const out_tensors = out_tensors_.data();
  const OpId* const topo = graph_.topological_order().data();
  const double* const times = costs_.times().data();
  const std::uint64_t* const workspaces = own_workspaces_.empty() ? costs_.workspaces().data() : own_workspaces_.data();
  const bool with_workspaces = has_workspaces_;
  const std::uint64_t* const workspace = workspace_.data();
  const Route* const routes = routes_.data();
  const ChannelId* const route_channels = route_channels_.data();
  const ChannelId* const padded_channels = padded_channels_.data();
  const std::uint32_t max_route = max_route_;
  TensorInfo* const tensors = tensors_.data();
  std::uint32_t* const uses = uses_.data();
  std::uint32_t* const storage = storage_.data();
  std::uint32_t* const in_slot = in_slot_.data();
  const std::uint64_t* const alloc_bytes = alloc_bytes_.data();
  double* const duration = duration_.data();
  std::uint32_t* const remaining = remaining_.data();
  std::uint64_t* const mem_now = mem_now_.data();
  std::uint64_t* const mem_peak = mem_peak_.data();
  double* const channel_free = channel_free_.data();
  double* const route_bytes = route_bytes_.data();
  OpTiming* const timing = timing_.data();
  std::uint32_t* const free_streams = free_streams_.data();
  std::uint32_t* const last_finished = last_finished_.data();
  DeviceResult* const dres = result_.devices.data();
  std::vector<TraceEvent>* const trace = trace_;

  // Reset scratch. uses_ is all zeros and reader_head_ all kNone after a run that ended normally:
  // every count a run adds, the same run takes back (readers finish, sends arrive), and the heads it
  // set it clears. They stay dirty until this run ends so: an exception part-way (out of memory
  // growing the transfer or trace lists) leaves counts behind.
  if (uses_dirty_) {
    std::fill(uses_.begin(), uses_.end(), 0u);
    std::fill(reader_head_.begin(), reader_head_.end(), kNone);
  }
  uses_dirty_ = true;
  std::fill(mem_now_.begin(), mem_now_.end(), 0u);
  for (std::uint32_t f : sum_firsts_) sum_present_[f] = 0, sum_held_[f] = kNone;
  std::fill(channel_free_.begin(), channel_free_.end(), 0.0);
  std::fill(route_bytes_.begin(), route_bytes_.end(), 0.0);
  for (DeviceId d = 0; d < nd; ++d) {
    ready_[d].clear();
    free_streams[d] = streams_[d];
    last_finished[d] = kNoCause;
    DeviceResult& dr = dres[d];
    dr.busy_s = 0.0, dr.ops = 0, dr.static_memory_bytes = 0, dr.peak_memory_bytes = 0;
  }
  events_.clear();
  zero_finished_.clear();
  transfers_.clear();
  result_.shortfalls.clear();

  for (std::size_t x = 0; x < tensors_.size(); ++x) {
    tensors[x].dev = static_cast<std::uint8_t>(tensors[x].home == kNoId ? 0 : dev[tensors[x].home]);
    tensors[x].dest_mask = 0;
  }
  // A view shares its input's storage on its device: the input's own (itself, or what it views), or
  // the input's copy when the input was produced elsewhere.
  for (const View& v : views_) storage[v.out] = tensors[v.in].dev == dev[v.op] ? storage[v.in] : v.in;
  // A graph output lives to the end in its storage on the device that made it: one use more, which
  // the run takes back when it ends. (Its copies on other devices are freed like any copy.)
  for (std::uint32_t y : kept_outputs_) ++uses[std::size_t{storage[y]} * nd + tensors[y].dev];

  // Static memory: tensors without a producer live on their home op's device; set-up values on
  // every device that reads them.
  for (std::uint32_t s : source_tensors_) mem_now[dev[tensors[s].home]] += tensors[s].bytes + static_extra_[s];
  for (const auto& [x, reader] : folded_reads_) {
    const std::uint64_t bit = std::uint64_t{1} << dev[reader];
    mem_now[dev[reader]] += tensors[x].bytes & (std::uint64_t{0} - static_cast<std::uint64_t>((tensors[x].dest_mask & bit) == 0));
    tensors[x].dest_mask |= bit;
  }
  for (DeviceId d = 0; d < nd; ++d) dres[d].static_memory_bytes = mem_now[d];
  std::copy(mem_now_.begin(), mem_now_.end(), mem_peak_.begin());

  // Readers per (tensor, device), destinations per tensor, inputs each op waits for.
  // One loop over every (op, input) pair rather than a loop per op: no branch mispredicted on
  // how many inputs an op has.
  for (OpId o = 0; o < n; ++o) duration[o] = times[std::size_t{o} * nd + dev[o]];
  if (with_workspaces)
    for (OpId o = 0; o < n; ++o) workspace_[o] = workspaces[std::size_t{o} * nd + dev[o]];
  std::fill(remaining_.begin(), remaining_.end(), 0u);
  std::uint32_t transfers = 0;
  const std::uint32_t* const edge_op = edge_op_.data();
  const std::uint8_t* const edge_held = edge_held_.data();
  std::uint32_t* const reader_head = reader_head_.data();
  std::uint32_t* const reader_next = reader_next_.data();
  {
    const std::size_t edges = in_tensors_.size();
    for (std::size_t i = edges; i-- > 0;) {
      const OpId o = edge_op[i];
      const DeviceId d = dev[o];
      const std::uint32_t x = in_tensors[i];
      TensorInfo& tx = tensors[x];
      // Without branches (the placement is random to the branch predictor): a remote input waits
      // for a transfer, sent once per destination, and is read from its copy; a local one waits
      // unless it is a source, and is read from its storage (itself unless it is a view).
      const bool remote = tx.dev != d;
      const std::uint32_t st = storage[x];
      const std::uint32_t slot = st ^ ((st ^ x) & (0u - static_cast<std::uint32_t>(remote)));  // remote ? x : st, no branch
      in_slot[i] = slot;
      uses[std::size_t{slot} * nd + d] += edge_held[i];  // a partial summed on arrival is not held by its reader
      const std::uint64_t bit = std::uint64_t{remote} << d;
      const bool first_send = ((tx.dest_mask & bit) == 0) & remote;
      tx.dest_mask |= bit;
      uses[std::size_t{st} * nd + tx.dev] += first_send;
      transfers += first_send;
      remaining[o] += remote | !tx.source;
      // Readers of x on d, in op order (the edges are walked backwards).
      std::uint32_t& head = reader_head[std::size_t{x} * nd + d];
      reader_next[i] = head;
      head = static_cast<std::uint32_t>(i);
    }
  }
  result_.transfers = transfers;
  transfers_.reserve(transfers);  // allocates only when a run needs more than any before

  // The event heap (see events_), with the hole technique. The event being processed stays at the
  // top until its handler pushes its first event, which replaces it in one pass down the heap
  // (an op finishing usually starts another or sends its output); otherwise it is popped when the
  // handler is done.
  bool top_done = false;
  auto push_event = [&](double time, std::uint32_t id, std::uint32_t dest) {
    const unsigned __int128 e = (static_cast<unsigned __int128>(std::bit_cast<std::uint64_t>(time)) << 64) |
                                (std::uint64_t{dest} << 32) | id;
    if (top_done) {
      top_done = false;
      unsigned __int128* heap = events_.data();
      const std::size_t size = events_.size();
      std::size_t i = 0;
      for (std::size_t child = 1; child < size; child = 2 * i + 1) {
        child += (child + 1 < size) & (heap[child + 1] < heap[child]);
        if (e < heap[child]) break;
        heap[i] = heap[child];
        i = child;
      }
      heap[i] = e;
      return;
    }
    events_.push_back(e);
    sift_up(events_.data(), events_.size() - 1, e);
  };
  auto pop_event = [this]() {
    // Bottom-up: walk the hole at the root down along the earlier children to a leaf (one
    // comparison per level), then sift the last event up from there (it rarely moves: it is late).
    unsigned __int128* heap = events_.data();
    const std::size_t size = events_.size() - 1;
    std::size_t i = 0;
    for (std::size_t child = 1; child < size; child = 2 * i + 1) {
      child += (child + 1 < size) & (heap[child + 1] < heap[child]);
      heap[i] = heap[child];
      i = child;
    }
    sift_up(heap, i, heap[size]);
    events_.pop_back();
  };
  auto allocate = [mem_now, mem_peak](DeviceId d, std::uint64_t bytes) {
    const std::uint64_t now = mem_now[d] += bytes;
    mem_peak[d] = std::max(mem_peak[d], now);
  };
  // `st`: the storage read (in_slot_: a copy on another device than the producer's, else the
  // tensor's storage there).
  auto release = [uses, tensors, mem_now, nd](std::uint32_t st, DeviceId d) {
    const TensorInfo& ts = tensors[st];
    // Freed when its last use is done, unless a source on its home device (those live all step; a
    // graph output's storage is pinned by a use that ends with the run).
    const bool last = --uses[std::size_t{st} * nd + d] == 0;
    const bool stays = ts.source & (ts.dev == d);
    mem_now[d] -= ts.bytes & (std::uint64_t{0} - static_cast<std::uint64_t>(last & !stays));  // no branch
  };
  // Sums of partial gradients (TensorInfo::sums; rare: a training step's shared tensors). Autograd's
  // buffer keeps the first partial to come and adds each later one into it: one partial that comes
  // before its sum's first is held, in its storage (a view keeps what it views), until the first
  // f is there on its reader's device d; then it is summed into f and freed (out of place, the sum
  // is a new buffer written beside both).
  auto first_there = [&](std::uint32_t f, DeviceId d) {
    sum_present_[f] = 1;
    if (sum_held_[f] == kNone) return;
    if (options_.gradient_sums_out_of_place) mem_peak[d] = std::max(mem_peak[d], mem_now[d] + tensors[f].bytes);
    release(sum_held_[f], d);
    sum_held_[f] = kNone;
  };
  // Tensor x, which takes part in a sum, is there on device d (made there for its reader there, or
  // its copy arrived): `st`, the storage it occupies there, with `bytes` of its own; `unheld`: no
  // reader holds it. A first partial takes the partial held in its place; a partial before its
  // first is held if none is yet, else summed into the held one and freed, as after its first.
  auto sum_there = [&](std::uint32_t x, DeviceId d, std::uint32_t st, std::uint64_t bytes, bool unheld) {
    const std::uint8_t sums = tensors[x].sums;
    if (sums & kSumFirst) first_there(x, d);
    if (!unheld) return;
    if ((sums & kSumPartial) && !sum_present_[sum_into_[x]] && sum_held_[sum_into_[x]] == kNone) {
      sum_held_[sum_into_[x]] = st;
      if (st == x) ++uses[std::size_t{x} * nd + d];                                      // its own memory stays
      else if (uses[std::size_t{st} * nd + d]++ == 0 && !(tensors[st].source && tensors[st].dev == d))
        allocate(d, tensors[st].bytes);  // what it views stays (back, if its last reader freed it)
      return;
    }
    if (sums & kSumOutOfPlace) mem_peak[d] = std::max(mem_peak[d], mem_now[d] + tensors[x].bytes);
    mem_now[d] -= bytes;
  };
  auto make_ready = [&](std::uint32_t op, double time, std::uint32_t cause) {
    timing[op].cause = cause;
    timing[op].start_s = time;  // ready time until the op starts
    const DeviceId d = dev[op];
    if (duration[op] == 0.0) {
      // An op that takes no time (an alias) does not wait for its device: it finishes at once, when
      // taken from zero_finished_, and its outputs are allocated then (here, every op made ready by
      // one event held its outputs at once: a higher peak than running them in turn).
      ++dres[d].ops;
      if constexpr (kTrace) trace->push_back({TraceEvent::Kind::op, op, d, d, time, time});
      zero_finished_.push_back(op);
      return;
    }
    ready_[d].insert(ops[op].rank);
  };
  auto start_ops = [&](DeviceId d, double now) __attribute__((always_inline)) {
    RankSet& ready = ready_[d];
    if (free_streams[d] == 0 || ready.empty()) [[likely]] return;
    do {
      const OpId o = topo[ready.pop_min()];
      --free_streams[d];
      OpTiming& ot = timing[o];
      if (now > ot.start_s) ot.cause = last_finished[d];  // it waited for the device
      ot.start_s = now;
      const double time = duration[o];
      dres[d].busy_s += time;
      ++dres[d].ops;
      if (with_workspaces) allocate(d, workspace[o]);  // scratch it holds while it runs (CostTable::workspace_bytes)
      for (std::uint32_t i = ops[o].out_begin; i < ops[o].out_end; ++i) allocate(d, alloc_bytes[out_tensors[i]]);
      if constexpr (kTrace) trace->push_back({TraceEvent::Kind::op, o, d, d, now, now + time});
      push_event(now + time, o, kOpFinish);
    } while (free_streams[d] > 0 && !ready.empty());
  };
  auto send = [&](std::uint32_t x, DeviceId from, DeviceId to, double now) {
    const std::size_t r = std::size_t{from} * nd + to;
    const Route& route = routes[r];
    const ChannelId* channels = padded_channels + r * max_route;
    double start = now;
    for (std::uint32_t k = 0; k < max_route; ++k) start = std::max(start, channel_free[channels[k]]);
    const std::uint64_t bytes = tensors[x].bytes;
    const double end = start + route.latency_s + static_cast<double>(bytes) * route.seconds_per_byte;
    for (std::uint32_t k = 0; k < max_route; ++k) channel_free[channels[k]] = end;
    route_bytes[r] += static_cast<double>(bytes);
    allocate(to, bytes);
    transfers_.push_back(Transfer{start, end, x, to});
    if constexpr (kTrace) trace->push_back({TraceEvent::Kind::transfer, x, from, to, start, end});
    push_event(end, x, to);
  };

  // Time 0: send sources to remote readers, start every op with nothing to wait for.
  for (std::uint32_t s : source_tensors_)
    for (std::uint64_t mask = tensors[s].dest_mask; mask; mask &= mask - 1)
      send(s, tensors[s].dev, static_cast<DeviceId>(std::countr_zero(mask)), 0.0);
  for (OpId o : graph_.topological_order())
    if (remaining[o] == 0 && !graph_.op_folded(o)) make_ready(o, 0.0, kNoCause);
  // Devices whose ready ops wait until the ops that take no time at this moment have finished:
  // an op made ready through an alias then competes in program order with the others (a device
  // started before them ran a later op first). The loop starts them, in id order, once none is
  // left; at time 0, every device.
  std::uint64_t to_start = nd == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << nd) - 1;

  double now = 0.0, step_end = 0.0;
  std::size_t finished = graph_.num_folded_ops();
  last_op_ = 0;
  // Traced: each device's memory in use whenever an event changed it.
  std::vector<std::uint64_t> traced_memory(kTrace ? nd : 0, ~std::uint64_t{0});
  auto trace_memory = [&]() {
    if constexpr (kTrace)
      for (DeviceId d = 0; d < nd; ++d)
        if (mem_now[d] != traced_memory[d]) {
          traced_memory[d] = mem_now[d];
          trace->push_back({TraceEvent::Kind::memory, 0, d, d, now, now, mem_now[d]});
        }
  };
  for (;;) {
    trace_memory();
    std::uint32_t id, dest;
    bool took_device = true;
    if (!zero_finished_.empty()) {
      id = zero_finished_.back();
      zero_finished_.pop_back();
      dest = kOpFinish;
      took_device = false;
    } else if (to_start) {
      start_ops(static_cast<DeviceId>(std::countr_zero(to_start)), now);
      to_start &= to_start - 1;
      continue;
    } else if (!events_.empty()) {
      const unsigned __int128 e = events_.front();
      top_done = true;
      now = std::bit_cast<double>(static_cast<std::uint64_t>(e >> 64));
      id = static_cast<std::uint32_t>(e), dest = static_cast<std::uint32_t>(static_cast<std::uint64_t>(e) >> 32);
    } else {
      break;
    }
    if (dest == kOpFinish) {
      const OpId o = id;
      const DeviceId d = dev[o];
      if (took_device) {
        ++free_streams[d];
        last_finished[d] = o;
        if (with_workspaces) mem_now[d] -= workspace[o];
      }
      timing[o].end_s = now;
      ++finished;
      if (now >= step_end) step_end = now, last_op_ = o;
      const OpInfo& info = ops[o];
      // An op that takes no time runs now (see make_ready): its outputs, then its inputs' release.
      if (!took_device)
        for (std::uint32_t i = info.out_begin; i < info.out_end; ++i) allocate(d, alloc_bytes[out_tensors[i]]);
      for (std::uint32_t i = info.in_begin; i < info.release_end; ++i) release(in_slot[i], d);
      for (std::uint32_t i = info.out_begin; i < info.out_end; ++i) {
        const std::uint32_t x = out_tensors[i];
        const TensorInfo& tx = tensors[x];
        for (std::uint32_t e = reader_head[std::size_t{x} * nd + d]; e != kNone; e = reader_next[e]) {
          const OpId c = edge_op[e];
          if (--remaining[c] == 0) make_ready(c, now, o);
        }
        for (std::uint64_t mask = tx.dest_mask; mask; mask &= mask - 1)
          send(x, d, static_cast<DeviceId>(std::countr_zero(mask)), now);
        // Nobody reads it (a view's storage is freed by its own uses; a graph output's is pinned).
        // A partial gradient summed here (its one reader is on this device: not sent; no use of its
        // own, as it is not held) is summed now, or held until its sum's first partial is here.
        if ((tx.sums != 0) & (tx.dest_mask == 0)) [[unlikely]]
          sum_there(x, d, storage[x], alloc_bytes[x], uses[std::size_t{x} * nd + d] == 0);
        else if (uses[std::size_t{x} * nd + d] == 0)
          mem_now[d] -= alloc_bytes[x];
      }
      // An event of the heap that made no op of no time ready starts its device at once (nothing
      // else waits then); otherwise the device waits for those ops, and the loop starts it.
      if (took_device && zero_finished_.empty()) start_ops(d, now);
      else to_start |= std::uint64_t{1} << d;
    } else {
      // A transfer of tensor x arrives on device dest. (The readers' loop is the finish handler's
      // twin: as a shared helper it made GCC leave start_ops out of line, 2-3% more instructions.)
      const std::uint32_t x = id;
      const DeviceId d = dest;
      const TensorInfo& tx = tensors[x];
      for (std::uint32_t e = reader_head[std::size_t{x} * nd + d]; e != kNone; e = reader_next[e]) {
        const OpId c = edge_op[e];
        if (--remaining[c] == 0) make_ready(c, now, x | kArrivalFlag);
      }
      const DeviceId from = tx.dev;
      release(storage[x], from);  // the sender's copy is no longer needed for this send
      // A partial gradient summed on arrival (no reader holds it): its copy is freed at once (out
      // of place, after the new sum was written beside it), or held until its sum's first partial
      // is here.
      const bool summed = uses[std::size_t{x} * nd + d] == 0;
      if (tx.sums) [[unlikely]] sum_there(x, d, x, tx.bytes, summed);
      else mem_now[d] -= tx.bytes & (std::uint64_t{0} - static_cast<std::uint64_t>(summed));
      if (zero_finished_.empty()) start_ops(d, now);
      else to_start |= std::uint64_t{1} << d;
    }
    if (top_done) {
      pop_event();
      top_done = false;
    }
  }
  trace_memory();
  if (finished != n) throw Error("simulation ended with " + std::to_string(n - finished) + " ops that never ran (internal error)");
  if (!std::isfinite(step_end))
    throw Error("the simulated step time overflows (op times and transfers add up to more than a double holds): check the "
                "cluster's and the profile's figures");
  for (std::uint32_t y : kept_outputs_) --uses[std::size_t{storage[y]} * nd + tensors[y].dev];
  // The heads this run set (as many as its (op, input) pairs, fewer than tensors x devices).
  for (std::size_t i = 0; i < in_tensors_.size(); ++i) reader_head[std::size_t{in_tensors[i]} * nd + dev[edge_op[i]]] = kNone;
  uses_dirty_ = false;  // every count this run added, it took back

  std::fill(result_.channel_bytes.begin(), result_.channel_bytes.end(), 0.0);
  double transfer_bytes = 0.0;
  for (std::size_t r = 0; r < routes_.size(); ++r)
    if (route_bytes[r] > 0) {
      transfer_bytes += route_bytes[r];
      for (std::uint32_t i = routes[r].first; i < routes[r].last; ++i) result_.channel_bytes[route_channels[i]] += route_bytes[r];
    }
  result_.transfer_bytes = transfer_bytes;
  result_.step_time_s = step_end;
  result_.fits = true;
  for (DeviceId d = 0; d < nd; ++d) {
    DeviceResult& dr = dres[d];
    dr.peak_memory_bytes = mem_peak[d];
    if (dr.peak_memory_bytes > dr.capacity_bytes) {
      result_.fits = false;
      result_.shortfalls.push_back({d, dr.peak_memory_bytes - dr.capacity_bytes});
    }
  }
}

std::vector<PathStep> Simulator::critical_path() const {
  std::vector<PathStep> path;
  // No op ran (every op folded, done before the step): no path, rather than a folded op.
  if (graph_.num_ops() == 0 || placement_.empty() || graph_.op_folded(last_op_)) return path;
  const DeviceId* dev = placement_.data();
  const std::size_t nd = num_devices_, nt = transfers_.size();
  std::unordered_map<std::uint64_t, std::uint32_t> by_copy;  // (tensor, destination) -> its transfer
  by_copy.reserve(nt);
  for (std::uint32_t k = 0; k < nt; ++k) by_copy.emplace((std::uint64_t{transfers_[k].tensor} << 32) | transfers_[k].to, k);
  // A transfer that started later than it was sent waited for a link: for the one that held it,
  // replay the reservations (in send order, as the run made them) and take, over the transfer's
  // channels, the previous transfer on the channel that ended last (it ended when this one began).
  std::vector<std::uint32_t> held_by(nt, kNone), last_on(cluster_.num_channels(), kNone);
  for (std::uint32_t k = 0; k < nt; ++k) {
    const Transfer& tr = transfers_[k];
    const TensorInfo& tx = tensors_[tr.tensor];
    double latest = -1.0;
    // The channels the event loop reserved (one for each set of channels the same routes cross),
    // each once: the padding repeats the last at the end.
    const ChannelId* channels = padded_channels_.data() + (std::size_t{tx.dev} * nd + tr.to) * max_route_;
    for (std::uint32_t i = 0; i < max_route_ && (i == 0 || channels[i] != channels[i - 1]); ++i) {
      const std::uint32_t j = last_on[channels[i]];
      if (j != kNone && transfers_[j].end_s > latest) latest = transfers_[j].end_s, held_by[k] = j;
      last_on[channels[i]] = k;
    }
    const double sent = tx.source ? 0.0 : timing_[tx.home].end_s;
    if (!(tr.start_s > sent && latest == tr.start_s)) held_by[k] = kNone;
  }
  std::uint32_t op = last_op_;
  for (std::size_t guard = 0; guard <= graph_.num_ops() + nt; ++guard) {
    path.push_back({PathStep::Kind::op, op, dev[op], timing_[op].start_s, timing_[op].end_s});
    const std::uint32_t cause = timing_[op].cause;
    if (cause == kNoCause) break;
    if (cause & kArrivalFlag) {
      std::uint32_t k = by_copy.at((std::uint64_t{cause & ~kArrivalFlag} << 32) | dev[op]);
      for (;;) {
        const Transfer& tr = transfers_[k];
        path.push_back({PathStep::Kind::transfer, tr.tensor, tr.to, tr.start_s, tr.end_s});
        if (held_by[k] == kNone) break;
        k = held_by[k];  // it waited for this transfer, which waited for its tensor or a link in turn
      }
      const TensorInfo& tx = tensors_[transfers_[k].tensor];
      if (tx.source) break;
      op = tx.home;
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
    if (g.op_folded(o)) continue;  // done before the step: its readers never wait for it
    double ready = 0.0;
    for (OpId p : g.predecessors(o)) ready = std::max(ready, finish[p]);
    finish[o] = ready + fastest[o];
    lb.critical_path_s = std::max(lb.critical_path_s, finish[o]);
  }
  // Total work: for any weights w_d >= 0 with sum_d w_d * streams_d = 1, sum_o min_d w_d t_od is at
  // most the step time of every placement (device d is busy sum t_od <= T * streams_d). Search
  // the weights with multiplicative updates and keep the best bound, in three searches: from w_d in
  // proportion to streams_d / alone_d (alone_d: every op on d) with a fixed step, then from it and
  // from 1 / alone_d with steps that shrink as 1 / sqrt(k), so that many equal ops, which all
  // change device together, settle at the tie instead of swinging across it. (The first alone
  // found 8.48 ms where 10 ms is reachable, on devices of 1 and 2 streams: a review.)
  std::vector<double> streams(nd), alone(nd, 0.0), w(nd), load(nd);
  for (DeviceId d = 0; d < nd; ++d) streams[d] = std::max(1, c.device(d).streams);
  for (DeviceId d = 0; d < nd; ++d)
    for (OpId o = 0; o < n; ++o) alone[d] += costs.time_s(o, d);
  for (int search = 0; search < 3; ++search) {
    for (DeviceId d = 0; d < nd; ++d) w[d] = alone[d] > 0 ? (search < 2 ? streams[d] : 1.0) / alone[d] : 1.0;
    for (int iter = 0; iter < (search == 0 ? 60 : 100); ++iter) {
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
      const double step = search == 0 ? 0.5 : 0.5 / std::sqrt(1.0 + iter);
      for (DeviceId d = 0; d < nd; ++d) w[d] *= std::exp(step * (load[d] - mean) / mean);
    }
  }
  return lb;
}

}  // namespace placer
