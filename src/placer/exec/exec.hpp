// Real execution with libtorch: run a model's step under a placement and time it (Executor), measure
// every op's time and fit the cost model to the measurements (profile_model), and the `local`
// cluster preset (the machine placer runs on, detected). This header is free of torch: the CLI and
// other layers include it without compiling torch headers; everything torch lives in exec/*.cpp.
// Rules and measured figures: docs/execution.md.
//
//   Cluster c = resolve_cluster("local");
//   Graph fwd = load_forward_graph("cifarnet.onnx", {});
//   Executor ex("cifarnet.onnx", {}, c, std::vector<DeviceId>(fwd.num_forward_ops(), 0), {});
//   StepTimes t = ex.measure(10, 3);   // t.median_s
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/graph.hpp"
#include "placer/io/model.hpp"

namespace placer::exec {

// Intra-op threads of libtorch (OpenMP) and of OpenBLAS, set together. `requested` <= 0 picks
// $PLACER_THREADS, else every hardware thread but one (docs/execution.md gives the measurements
// behind it). The first call also makes the process keep freed host memory (no unmapping of large
// tensors between steps, like a caching allocator): docs/execution.md. Returns the number set.
// Call before building an Executor; every exec entry point calls it once.
int configure_threads(int requested = 0);

// Whether the linked libtorch's autograd sums a tensor's partial gradients out of place (libtorch
// 1.x, Debian 12's 1.13: each sum a new buffer beside the old sum and the partial) rather than in
// place (PyTorch 2): measured once per process with a weight read twice. What `validate` sets
// SimOptions::gradient_sums_out_of_place to, so that its simulated peaks model this libtorch.
bool sums_gradients_out_of_place();

struct ExecOptions {
  Mode mode = Mode::training;
  Optimizer optimizer = Optimizer::sgd;
  double learning_rate = 0.01;
  std::uint64_t seed = 1;  // parameters, buffers and data are drawn from it (on the CPU, then moved)
  // Test mode: every device of the cluster, GPUs included, runs on the CPU; a tensor read on another
  // device is still copied (cloned), so placements exercise the transfer path without a GPU.
  bool all_on_cpu = false;
};

// Step times of a measurement, in seconds.
struct StepTimes {
  std::vector<double> times_s;  // in the order measured
  double median_s = 0, p10_s = 0, p90_s = 0, min_s = 0, max_s = 0;
  static StepTimes of(std::vector<double> times_s);
};

// Memory measured in one memory of the machine over the timed steps of Executor::measure: the bytes
// of live tensors as libtorch's allocators see them (the host's CPU allocator, counted by placer;
// a CUDA device's caching allocator statistics), docs/execution.md#memory.
struct MeasuredMemory {
  std::string memory;             // "host" or "cuda:N"
  std::vector<DeviceId> devices;  // the cluster devices of the placement whose ops ran in it
  std::uint64_t start_bytes = 0;  // live before the first timed step (parameters, optimizer state, ...)
  std::uint64_t peak_bytes = 0;   // the most live at once during a timed step
};

// One step as it ran, recorded for a trace (Executor::trace_step; docs/execution.md#traces): times
// on the wall clock from the step's start.
struct StepTrace {
  struct Slice {
    std::string name;      // a forward op's name; an autograd node's ("ConvolutionBackward0"); "loss", "optimizer"
    std::string category;  // "forward", "backward", "loss", "update"
    DeviceId device = 0;   // the op's device (forward ops); the device of the step's first output otherwise
    double start_s = 0, end_s = 0;
  };
  std::vector<Slice> slices;  // in the order they started (forward ops, then autograd nodes, ...)
  struct Sample {
    double t_s = 0;
    std::uint64_t bytes = 0;  // host bytes in live tensors from t_s on
  };
  std::vector<Sample> host_memory;  // every change during the step; empty when the host is not measured
  double step_s = 0;
};

// Runs one step of an ONNX model (forward; in training also loss, backward through autograd and
// the optimizer step) under a placement of its forward ops. Constructing it checks every op (an op
// type it cannot run is an Error naming the op and its type, before anything runs), folds the
// graph's constant subgraphs, and creates parameters, buffers and data on their devices.
// Not thread-safe.
class Executor {
 public:
  // `forward_devices`: a device of `cluster` for every forward op (resolve_forward_placement on the
  // forward graph). CPU devices run on the host; a GPU on the CUDA device numbered after the last
  // ':' of its name ("gpu:3": 3). An Error, unless options.all_on_cpu, when a GPU's name has no such
  // number, two GPUs would share a CUDA device, or this libtorch has no CUDA or no such device.
  Executor(const std::string& model_path, const ModelOptions& model, const Cluster& cluster,
           std::span<const DeviceId> forward_devices, const ExecOptions& options);
  ~Executor();
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;

  const Graph& forward_graph() const;
  void step();
  // `warmup` untimed steps, then `steps` timed ones (wall clock; CUDA devices synchronised).
  StepTimes measure(int steps, int warmup);
  // One more step, untimed, recording when each op ran and the host's live bytes over it. Forward
  // ops are timed one by one (a CUDA device synchronised after each), autograd's nodes through
  // libtorch's RecordFunction callbacks: the recording slows the step a little.
  StepTrace trace_step();

  // For tests and checks: the graph outputs of the last step and a parameter's current value, as
  // float on the CPU (row-major); tensors copied between devices in the last step.
  std::vector<std::vector<float>> output_values() const;
  // For tests and checks: gives source tensor `name` (data, parameter or buffer) the value stored
  // in `tensor_file`, a serialized ONNX TensorProto (as ONNX's test data stores inputs); its dims
  // and element type must be the tensor's.
  void set_input(std::string_view name, const std::string& tensor_file);
  std::vector<float> parameter_value(std::string_view name) const;
  std::vector<std::string> parameter_names() const;
  double last_loss() const;
  std::size_t copies_last_step() const;
  // The memories the last measure() read, in order: the host (when the placement uses a device run
  // there), then CUDA devices by index. Empty before measure(), and for a memory this build cannot
  // read (a CUDA device when libtorch's CUDA allocator is not linked).
  const std::vector<MeasuredMemory>& measured_memory() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Throws Error naming the first forward op of `forward` whose type the executor cannot run.
void check_supported(const Graph& forward);

// Throws Error naming the first of `devices` (ids of `cluster`) this process cannot run on: a GPU
// without CUDA in this libtorch, or past the GPUs it sees. Commands that run several placements
// check them all before timing any.
void check_devices_available(const Cluster& cluster, std::span<const DeviceId> devices);

struct ProfileOptions {
  Mode mode = Mode::training;
  Optimizer optimizer = Optimizer::sgd;
  int repeats = 10;     // timed runs per op (median kept)
  int steps = 8;        // whole steps timed to calibrate the framework overhead
  int warmup = 3;
  std::uint64_t seed = 1;
  bool fit = true;      // fit efficiencies and the overhead scale to the measurements
};

// What one device kind's measurements came to.
struct KindSummary {
  DeviceKind kind = DeviceKind::cpu;
  std::string device;             // cluster device that was measured ("cpu:0")
  std::size_t ops_measured = 0;   // op names of the step given a time
  double op_sum_s = 0;            // sum of the isolated per-op times
  double forward_step_s = 0;      // measured forward pass (median)
  double step_s = 0;              // measured whole step (median): training step, or forward in inference
  double forward_residual_s = 0;  // forward pass minus its ops' sum, spread over the forward ops
  double backward_residual_s = 0; // rest of the step minus its ops' sum, spread over backward and update ops
  bool whole_step_calibration = false;  // timing noise left the backward group no time (step <= forward
                                        // pass): the whole step was spread over all ops at once
  double fitted_overhead_s = 0;   // per-op overhead of the fitted roofline (forward and update ops)
  double fitted_backward_overhead_s = 0;  // of backward ops (0 when none was measured)
  double fit_median_abs_error = 0;// of the fitted roofline over the measured ops (relative)
  std::size_t fit_samples = 0;    // op times the roofline was fitted to
};
struct ProfileReport {
  Profile profile;
  std::vector<KindSummary> kinds;
};

// Measures every op of the model's step (forward ops; in training, gradient, loss and update ops)
// on one device of every kind the cluster has and this machine can run, and fits the cost model.
ProfileReport profile_model(const std::string& model_path, const ModelOptions& model, const Cluster& cluster,
                            const ProfileOptions& options);

// The machine placer runs on: "cpu:0" (model, cores, memory from /proc; peak FLOP/s, memory
// bandwidth and per-op overhead measured once per process by short libtorch benchmarks) and
// "gpu:N" for every CUDA device this libtorch sees, joined by a measured host link.
Cluster detect_local_cluster();
// The same devices (names, kinds, models, memory) and links without the benchmarks (about 2 s of
// a command): every measured figure 1 (FLOP/s, bytes/s), overheads and latencies 0. For commands
// that only name devices (`placer run`); never price or simulate with it.
Cluster local_cluster_layout();
// Registers the `local` preset with the cluster layer (call once; the CLI does it when it loads its
// libtorch module, cli/torch_module.cpp).
void register_exec_presets();
// Routes libtorch's warnings (TORCH_WARN) to stderr as placer's, one line each, instead of glog's
// "Logging before InitGoogleLogging" lines; its notices that an API is in beta (scatter_reduce,
// index_reduce: about libtorch's own API, not the user's model) are dropped. Call once at start-up.
void route_libtorch_warnings();

}  // namespace placer::exec
