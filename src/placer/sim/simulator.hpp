// Discrete-event simulation of one step of a graph under a placement: the inner loop of every
// placement search. Rules (docs/simulator.md):
// - Each device runs up to `streams` ops at a time; among its ready ops it starts the one that comes
//   first in the graph's topological order (program order), so runs are deterministic.
// - Tensors without a producer (data, parameters, buffers) live on the device of their home op and
//   are sent at time 0 to every other device that reads them.
// - Folded ops (Graph::op_folded: constants, shapes, and what is computed from them alone) run
//   before the step: they take no time and no device, and the set-up values they produce (and
//   constant initializers) are in the memory of every device that reads them, never sent.
// - A tensor read on another device is sent once per destination device, over the route the
//   cluster computed; a transfer holds every channel of its route (each link direction carries one
//   transfer at a time) for latency + bytes / bottleneck bandwidth. Copies overlap with compute.
// - Memory: parameters, buffers and optimizer state stay on their device for the whole step; an
//   op's scratch (CostTable::workspace_bytes: a CPU convolution's reordered operands) is held
//   while it runs; an activation is allocated when its producer starts and freed after its last reader on that
//   device (and its last outgoing transfer); a copy is allocated when its transfer is issued and
//   freed after its last reader there. A partial gradient summed into another as it arrives
//   (Graph::tensor_accumulated) is freed once it is available to its reader (at its producer's
//   end, or when its copy arrives); where partials come before the sum's first one, the first of
//   them to come is held in its place until it is there. Graph outputs stay to the end on the device that made
//   them. A view (the output of an alias op: Reshape, Flatten, Squeeze, Identity, ...) takes no
//   memory of its own: it shares the storage of its input on its device, which lives until the
//   view's readers are done too.
// A Simulator owns its scratch memory and reuses it: no allocation per call after the first. It is
// not thread-safe: use one per thread (they can share the Graph, Cluster and CostTable).
//
//   Simulator sim(graph, cluster, costs);
//   const SimResult& r = sim.simulate(devices);   // devices: one per op (expand_placement)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/graph.hpp"

namespace placer {

struct DeviceResult {
  double busy_s = 0.0;                    // time spent running ops
  std::uint64_t peak_memory_bytes = 0;    // static + peak of dynamic
  std::uint64_t static_memory_bytes = 0;  // parameters, buffers, optimizer state, data living here
  std::uint64_t capacity_bytes = 0;       // memory limit applied (capacity x memory fraction)
  std::uint32_t ops = 0;
};

// One step of the schedule's critical path, last step first in SimResult::critical_path().
struct PathStep {
  enum class Kind : std::uint8_t { op, transfer };
  Kind kind = Kind::op;
  std::uint32_t id = 0;       // op id, or tensor id for a transfer
  std::uint32_t where = 0;    // device of the op, or destination device of the transfer
  double start_s = 0.0, end_s = 0.0;
};

struct TraceEvent {
  enum class Kind : std::uint8_t { op, transfer, memory };
  Kind kind = Kind::op;
  std::uint32_t id = 0;      // op id, or tensor id
  std::uint32_t device = 0;  // op: its device; transfer: source device; memory: the device
  std::uint32_t to = 0;      // transfer: destination device
  double start_s = 0.0, end_s = 0.0;
  // memory: the bytes in use on `device` from start_s on (static memory included), recorded
  // whenever an event of the step changed them (not the instants within one event: a partial
  // gradient summed out of place, SimResult's peak counts those).
  std::uint64_t bytes = 0;
};

struct SimResult {
  double step_time_s = 0.0;
  bool fits = true;
  std::vector<DeviceResult> devices;
  std::vector<double> channel_bytes;  // bytes carried by each channel (Cluster channel ids)
  double transfer_bytes = 0.0;        // over all transfers
  std::uint32_t transfers = 0;
  // Devices over their limit and by how much (bytes); empty when everything fits.
  std::vector<std::pair<DeviceId, std::uint64_t>> shortfalls;
};

struct SimOptions {
  // Each device may use this fraction of its memory (head-room for fragmentation, workspaces).
  double memory_fraction = 1.0;
  // Per-device limits in bytes (0 = capacity x memory_fraction); empty = none.
  std::vector<std::uint64_t> memory_limit_bytes;
  // How autograd sums the partial gradients of a tensor read k times (Graph::tensor_accumulated).
  // false: in place, into the first (PyTorch 2's input buffer when it holds the last reference):
  // a later partial costs only itself. true: out of place (libtorch 1.x, Debian 12's 1.13): each
  // sum writes a new buffer while the old sum and the partial are alive, so for an instant three
  // buffers of the gradient's size are held (docs/simulator.md#rules).
  bool gradient_sums_out_of_place = false;
};

// The memory a placement may use on device `d`: its per-device limit when `options` gives one,
// else its capacity x memory_fraction (saturating).
std::uint64_t memory_limit_bytes(const Cluster& c, DeviceId d, const SimOptions& options);

class Simulator {
 public:
  // Borrows all three; they must outlive the Simulator.
  Simulator(const Graph& g, const Cluster& c, const CostTable& costs, SimOptions options = {});

  // Simulates one step. `devices` holds one device per op (see expand_placement).
  // REQUIRES: devices.size() == graph.num_ops() and every id < cluster.num_devices().
  const SimResult& simulate(std::span<const DeviceId> devices);
  // The same, recording every op and transfer into `trace` (cleared first).
  const SimResult& simulate(std::span<const DeviceId> devices, std::vector<TraceEvent>& trace);

  // The critical path of the last simulation: the chain of ops and transfers that ends with the
  // last event, each waiting on the one before. Last step first.
  std::vector<PathStep> critical_path() const;

  const SimResult& result() const { return result_; }
  const Graph& graph() const { return graph_; }
  const Cluster& cluster() const { return cluster_; }
  const CostTable& costs() const { return costs_; }

 private:
  template <bool kTrace>
  void run(std::span<const DeviceId> devices);

  const Graph& graph_;
  const Cluster& cluster_;
  const CostTable& costs_;
  SimOptions options_;
  std::size_t num_devices_;

  // Per graph (computed once). Hot fields are packed so that one event touches few cache lines.
  struct OpInfo {
    std::uint32_t in_begin, in_end;    // distinct input tensors: in_tensors_[in_begin, in_end)
    std::uint32_t release_end;         // those it holds until it finishes: [in_begin, release_end)
    std::uint32_t out_begin, out_end;  // output tensors: out_tensors_[out_begin, out_end)
    std::uint32_t rank;                // position in topological order
  };
  struct TensorInfo {
    std::uint64_t bytes;
    std::uint64_t dest_mask;           // per run: devices it must be sent to
    std::uint32_t home;                // producer op, or home op of a source tensor (kNoId: none)
    std::uint8_t dev;                  // per run: device of its producer or home op
    std::uint8_t source;               // no producer: data, parameter, buffer, constant
    std::uint8_t sums;                 // its part in a sum of partial gradients: kSum* bits (0: none)
  };
  // TensorInfo::sums bits. A partial gradient summed as it arrives (Graph::tensor_accumulated) goes
  // into its reader's first partial: the nearest input before it in the reader's list that is not
  // accumulated. Until that first partial is there, the first partial to come is held in its place.
  static constexpr std::uint8_t kSumOutOfPlace = 1;  // accumulated, and sums are out of place (SimOptions)
  static constexpr std::uint8_t kSumPartial = 2;     // accumulated into sum_into_[x]
  static constexpr std::uint8_t kSumFirst = 4;       // the first partial of a sum
  // A transfer of this run.
  struct Transfer {
    double start_s, end_s;
    std::uint32_t tensor, to;
  };
  struct OpTiming {
    double start_s, end_s;             // start_s is the ready time until the op starts
    std::uint32_t cause;               // what it waited for last: kNoCause, op id, or tensor | kArrivalFlag
  };
  struct Route {
    std::uint32_t first, last;         // its channels: route_channels_[first, last)
    double latency_s, seconds_per_byte;
  };
  std::vector<OpInfo> ops_;
  std::vector<std::uint32_t> in_tensors_, out_tensors_;
  std::vector<std::uint32_t> edge_op_;         // per in_tensors_ entry: the op that reads it
  std::vector<std::uint8_t> edge_held_;        // per in_tensors_ entry: 1 when its reader holds it (0: summed on arrival)
  // Per run: the readers of each tensor on each device, as lists through in_tensors_ entries.
  std::vector<std::uint32_t> reader_head_;     // tensor x device -> first entry, or kNone
  std::vector<std::uint32_t> reader_next_;     // entry -> next entry, or kNone
  std::vector<TensorInfo> tensors_;
  std::vector<std::uint32_t> source_tensors_;  // tensors with no producer and a home (not set-up values)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> folded_reads_;  // (set-up value, non-folded reader op)
  std::vector<std::uint64_t> static_extra_;    // per source tensor: optimizer state bytes
  std::vector<std::uint32_t> sum_into_;        // per tensor: the first partial it is summed into (kSumPartial), else kNone
  std::vector<std::uint32_t> sum_firsts_;      // the tensors with kSumFirst
  std::vector<std::uint8_t> sum_present_;      // per tensor, per run: a first partial is there, on its reader's device
  std::vector<std::uint32_t> sum_held_;        // per tensor, per run: the storage of the partial held in place of this first one (kNone: none)
  // Views (see the header comment): (alias op, its input, its output) in topological order.
  struct View {
    std::uint32_t op, in, out;
  };
  std::vector<View> views_;
  std::vector<std::uint64_t> alloc_bytes_;     // per tensor: bytes its producer allocates (0 for a view)
  std::vector<std::uint32_t> kept_outputs_;    // graph outputs made during the step (kept to the end)
  std::vector<Route> routes_;                  // from * num_devices + to
  std::vector<ChannelId> route_channels_;
  std::vector<ChannelId> padded_channels_;     // route -> max_route_ channels it reserves (see the constructor)
  std::uint32_t max_route_ = 0;
  std::vector<std::uint32_t> streams_;         // device -> ops it runs at once (at least 1)

  // Scratch (reused).
  std::vector<DeviceId> placement_;            // copy of the last placement simulated
  std::vector<TraceEvent>* trace_ = nullptr;
  std::vector<std::uint32_t> remaining_;       // op -> inputs not yet available on its device
  std::vector<std::uint32_t> uses_;            // tensor x device -> readers (and sends) left
  // Per run: the tensor whose storage a tensor uses on its producer's device (itself, or for a view
  // the storage of its input there: the producer's or, when the input came from another device, its
  // copy). Uses and frees on that device go to it.
  std::vector<std::uint32_t> storage_;
  std::vector<std::uint32_t> in_slot_;         // per run, per in_tensors_ entry: the storage its op reads
  bool uses_dirty_ = false;                    // uses_ or reader_head_ may not be reset (the last run did not end normally)
  std::vector<double> duration_;               // op -> its time on its device
  std::vector<std::uint64_t> workspace_;       // per run, op -> its workspace on its device, held while it runs
  bool has_workspaces_ = false;                // some op has a workspace on some device (else workspace_ is empty)
  std::vector<std::uint64_t> own_workspaces_;  // op x device: the cost table's plus its out-of-place sums, when those apply (else empty)
  std::vector<Transfer> transfers_;            // in the order they were sent
  // Ready ops of one device as a set of topological ranks: a two-level bitset, so that inserting
  // and taking the lowest rank cost a few word operations whatever the queue length.
  class RankSet {
   public:
    void resize(std::size_t ranks);
    bool empty() const { return count_ == 0; }
    void insert(std::uint32_t rank);
    std::uint32_t pop_min();
    void clear();

   private:
    std::vector<std::uint64_t> words_, summary_;
    std::size_t count_ = 0;
  };
  std::vector<RankSet> ready_;                 // device -> ready ops
  std::vector<double> route_bytes_;
  std::vector<std::uint32_t> free_streams_;
  std::vector<std::uint64_t> mem_now_, mem_peak_;
  std::vector<double> channel_free_;
  // Event heap: running ops and transfers in flight. An event is (time bits << 64) | (dest << 32) |
  // id, dest = kOpFinish for an op: times are >= 0, so their bit patterns order like the times, and
  // events at equal times are ordered by destination and id — never by how the heap was filled.
  std::vector<unsigned __int128> events_;
  std::vector<std::uint32_t> zero_finished_;   // zero-time ops finished inline, to process
  std::vector<OpTiming> timing_;               // op -> start, end, cause (for the critical path)
  std::vector<std::uint32_t> last_finished_;   // device -> last op that finished there
  std::uint32_t last_op_ = 0;
  SimResult result_;
};

// Lower bounds on the step time of any placement: the critical path with every op on its fastest
// device and free communication, and total work spread perfectly over the cluster.
struct LowerBounds {
  double critical_path_s = 0.0;
  double total_work_s = 0.0;
  double best() const { return critical_path_s > total_work_s ? critical_path_s : total_work_s; }
};
LowerBounds lower_bounds(const Graph& g, const Cluster& c, const CostTable& costs);

}  // namespace placer
