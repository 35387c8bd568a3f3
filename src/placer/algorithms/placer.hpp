// The one interface every placement algorithm implements, classic or learned: a placer is a
// function of a problem (graph, cluster, costs, memory limits), a budget, an observer and a seed,
// returning a device for every forward op with its simulated result. Algorithms are found by name
// in a registry; a new algorithm is a new file plus one line in registry.cpp.
//
//   auto placer = make_placer("m-etf", {});
//   NullObserver quiet;
//   PlacementResult r = placer->place(problem, Budget{}, quiet, /*seed=*/1);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/graph.hpp"
#include "placer/sim/simulator.hpp"

namespace placer {

// What is placed: a graph (a training step or a forward pass) on a cluster, with op costs and
// memory limits. Borrowed references: the caller keeps them alive while algorithms run.
struct Problem {
  const Graph& graph;
  const Cluster& cluster;
  const CostTable& costs;
  SimOptions sim;
};

// How much an algorithm may spend. 0 means "the algorithm's own default" (samples) or "no limit"
// (seconds). Threads: 0 = every core.
struct Budget {
  std::size_t samples = 0;
  double seconds = 0.0;
  unsigned threads = 0;
  // Files of searches that learn (empty: none). The learning curve (CSV: sample, mean and best step
  // time so far, wall seconds); a checkpoint written periodically and at the end; `resume`
  // continues from the checkpoint so that the search ends where an uninterrupted one would.
  std::string curve_path;
  std::string checkpoint_path;
  bool resume = false;
};

// When a placer's --seconds run out, counted from when it started: `Deadline::after(budget.seconds,
// began)`. None for 0 seconds (no limit), nor past 1e9 s (31 years): converted to the clock's
// nanoseconds such a budget wrapped into the past, and a placer stopped at once (two reviews).
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  Deadline() = default;  // never passes
  static Deadline after(double seconds, Clock::time_point from = Clock::now()) {
    Deadline d;
    if (seconds > 0.0 && seconds < 1e9) d.at_ = from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }
  bool limited() const { return at_ != Clock::time_point::max(); }
  bool passed() const { return limited() && Clock::now() >= at_; }
  // Seconds left (0 once passed); infinity without a limit.
  double left_s() const {
    if (!limited()) return std::numeric_limits<double>::infinity();
    const double left = std::chrono::duration<double>(at_ - Clock::now()).count();
    return left > 0.0 ? left : 0.0;
  }

 private:
  Clock::time_point at_ = Clock::time_point::max();
};

struct Progress {
  std::size_t samples = 0;          // placements evaluated so far
  std::size_t samples_total = 0;    // 0 when unknown
  double best_step_time_s = 0.0;    // best placement that fits, so far (0: none yet)
  double last_mean_step_time_s = 0.0;
  double elapsed_s = 0.0;
};

// Receives progress and may ask the algorithm to stop early (Ctrl-C). Called from the thread that
// runs place().
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_progress(const Progress&) {}
  virtual bool stop_requested() const { return false; }
};
class NullObserver final : public Observer {};

struct PlacementResult {
  std::vector<DeviceId> forward_devices;  // one device per forward op
  SimResult sim;                          // its simulated step
  std::size_t samples = 0;                // placements the algorithm evaluated
  std::string note;                       // e.g. why a fallback was taken
};

class Placer {
 public:
  virtual ~Placer() = default;
  // REQUIRES: problem.graph has at least one forward op. Throws Error with a clear message when the
  // algorithm cannot place this problem (e.g. nothing fits anywhere).
  virtual PlacementResult place(const Problem& problem, const Budget& budget, Observer& observer, std::uint64_t seed) = 0;
};

// Algorithm options as given on the command line (`--opt key=value`), with typed lookups that
// throw Error on a malformed value. Unknown keys are rejected by make_placer.
class PlacerOptions {
 public:
  PlacerOptions() = default;
  explicit PlacerOptions(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  std::string get(const std::string& key, const std::string& fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  bool get_flag(const std::string& key, bool fallback) const;  // 0 or 1
  // One of `allowed` (Error naming them otherwise); `fallback` when not given.
  std::string get_one_of(const std::string& key, const std::string& fallback, std::initializer_list<std::string_view> allowed) const;
  const std::map<std::string, std::string>& all() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

struct OptionDoc {
  std::string key, default_value, help;
};

struct PlacerInfo {
  std::string name;
  std::string family;   // "baseline", "partitioning", "scheduling", "search", "learned", ...
  std::string summary;  // one line for `--help` and docs
  std::vector<OptionDoc> options;
  std::function<std::unique_ptr<Placer>(const PlacerOptions&)> make;
};

// Every registered algorithm, in registration order.
const std::vector<PlacerInfo>& placer_registry();
const PlacerInfo& find_placer(const std::string& name);  // Error listing the names when unknown
// Whether `name` is one of the core's placers (not one a module registers, such as the learned
// placers of the libtorch module): the CLI loads that module only for the others. Safe to call
// before modules register theirs.
bool is_built_in_placer(const std::string& name);
std::unique_ptr<Placer> make_placer(const std::string& name, const PlacerOptions& options);

// Shared tools for algorithms.

// Evaluates placements of forward ops with one simulator (expanding to the whole step). Not
// thread-safe: one per thread.
class Evaluator {
 public:
  explicit Evaluator(const Problem& problem);
  const SimResult& evaluate(std::span<const DeviceId> forward_devices);
  std::size_t evaluations() const { return evaluations_; }
  Simulator& simulator() { return sim_; }

 private:
  const Problem& problem_;
  Simulator sim_;
  std::vector<DeviceId> all_;
  std::size_t evaluations_ = 0;
};

// A result for `forward_devices`, simulated here; `samples` is what the algorithm counted (the
// placements it evaluated in its search), reported as at least 1: a result was simulated.
PlacementResult finish(const Problem& problem, std::vector<DeviceId> forward_devices, std::size_t samples, std::string note = {});

// Time of each forward op's whole family (the op, its gradient ops, and the updates of parameters
// that live with it) on each device: the cost a placement of forward ops actually commits to.
// Forward-op-major: family_time[op * num_devices + device].
std::vector<double> family_times(const Problem& problem);

// Bytes each forward op's family keeps resident (parameters homed there, optimizer state) and the
// bytes of its activations: what memory-aware placers budget with.
struct FamilyMemory {
  std::vector<std::uint64_t> static_bytes;      // per forward op: sources homed there, set-up values it reads
  std::vector<std::uint64_t> activation_bytes;  // per forward op: outputs of the op and its gradient ops (views: none)
  // Per forward op, in training: the partial gradient of a trained parameter it reads that stays
  // until the parameter's update (the first one: autograd adds the others into it as they arrive,
  // Graph::tensor_accumulated, so a weight shared by 20 time steps holds one, not 20); one passed
  // through unchanged (Add(p, q)'s, a view) takes none. Zero in inference.
  std::vector<std::uint64_t> partial_gradient_bytes;
};
FamilyMemory family_memory(const Problem& problem);

// The memory limit of each device under the problem's options.
std::vector<std::uint64_t> memory_limits(const Problem& problem);

}  // namespace placer
