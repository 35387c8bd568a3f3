// The profiler: every op of a model's step timed in isolation on one device of each kind, the
// whole step timed to calibrate what isolated timings miss (autograd bookkeeping, the optimizer's
// loop, the allocator), and the roofline fitted to the result. Method: docs/execution.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_set>

#include "placer/cost/fit.hpp"
#include "placer/exec/calibrate.hpp"
#include "placer/exec/engine.hpp"
#include "placer/exec/timing.hpp"
#include "placer/util/error.hpp"

namespace placer::exec {
namespace {

using detail::Engine;

void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Median seconds of `repeats` calls of `body` (after one untimed call), without the calls that
// page-faulted (detail::time_runs).
template <typename F>
double median_time_s(const torch::Device& device, int repeats, F body) {
  return detail::time_runs(repeats, [&] {
    body();
    sync(device);
  }).median_s;
}

// Names of the forward tensors whose gradient backward op `b` of `step` produces
// ("grad/<tensor>/<forward op name>").
std::unordered_set<std::string> differentiated_inputs(const Graph& step, OpId b) {
  std::unordered_set<std::string> names;
  const std::string suffix = "/" + step.op_name(step.forward_op(b));
  for (TensorId t : step.op_outputs(b)) {
    const std::string& n = step.tensor_name(t);
    if (n.rfind("grad/", 0) == 0 && n.size() > 5 + suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.insert(n.substr(5, n.size() - 5 - suffix.size()));
  }
  return names;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(Optimizer o, std::vector<torch::Tensor> params, double lr) {
  switch (o) {
    case Optimizer::momentum:
      return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr).momentum(0.9));
    case Optimizer::adam: return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr));
    default: return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(lr));
  }
}

// Seconds of every op of `step` on one device: by step op id, -1 where nothing was measured (alias
// ops, which the cost model prices at zero anyway).
struct OpTimes {
  std::vector<double> seconds;
  std::vector<std::uint8_t> folded;  // forward ops evaluated once at set-up: zero per step
};

OpTimes measure_ops(Engine& engine, const Graph& step, const torch::Device& device, const ProfileOptions& options) {
  const Graph& fwd = engine.graph();
  OpTimes r;
  r.seconds.assign(step.num_ops(), -1.0);
  r.folded.assign(step.num_ops(), 0);
  engine.forward_only(/*keep_values=*/true);
  const bool training = engine.training();
  for (OpId op = 0; op < step.num_ops(); ++op) {
    if (step.op_work(op).op_class == OpClass::alias) continue;
    const OpRole role = step.op_role(op);
    if (role == OpRole::forward) {
      if (engine.is_skipped(op)) continue;
      if (engine.is_folded(op)) {
        r.seconds[op] = 0.0, r.folded[op] = 1;
        continue;
      }
      std::vector<torch::Tensor> in = engine.inputs_for(op, device);
      torch::NoGradGuard no_grad;
      r.seconds[op] = median_time_s(device, options.repeats, [&] { (void)engine.run_op(op, in, device, training); });
    } else if (role == OpRole::backward && step.op_type(op) == "Loss") {
      const TensorId out = step.op_inputs(op)[0];
      torch::Tensor leaf = engine.value(out).to(device).detach().requires_grad_(true);
      r.seconds[op] = median_time_s(device, options.repeats, [&] {
        torch::Tensor m = leaf.mean();
        (void)torch::autograd::grad({m}, {leaf});
      });
    } else if (role == OpRole::backward) {
      const OpId f = step.forward_op(op);
      if (engine.is_skipped(f) || engine.is_folded(f)) {
        r.seconds[op] = 0.0;
        continue;
      }
      const auto wanted = differentiated_inputs(step, op);
      std::vector<torch::Tensor> in = engine.inputs_for(f, device);
      std::vector<torch::Tensor> leaves;
      auto ids = fwd.op_inputs(f);
      for (std::size_t s = 0; s < ids.size(); ++s) {
        if (ids[s] == kNoId || !in[s].defined() || !in[s].is_floating_point() || !wanted.count(fwd.tensor_name(ids[s]))) continue;
        in[s] = in[s].detach().requires_grad_(true);
        leaves.push_back(in[s]);
      }
      if (leaves.empty()) {
        r.seconds[op] = 0.0;
        continue;
      }
      std::vector<torch::Tensor> outs, grads;
      for (torch::Tensor& o : engine.run_op(f, in, device, training))
        if (o.defined() && o.requires_grad()) outs.push_back(o), grads.push_back(torch::ones_like(o));
      if (outs.empty()) {
        r.seconds[op] = 0.0;
        continue;
      }
      r.seconds[op] = median_time_s(device, options.repeats, [&] {
        (void)torch::autograd::grad(outs, leaves, grads, /*retain_graph=*/true, false, /*allow_unused=*/true);
      });
    } else {  // update
      const TensorId p = step.updated_param(op);
      auto shape = step.tensor_shape(p);
      torch::Tensor param =
          torch::randn(std::vector<std::int64_t>(shape.begin(), shape.end()), torch::TensorOptions().device(device)).requires_grad_(true);
      param.mutable_grad() = torch::randn_like(param);
      auto opt = make_optimizer(options.optimizer, {param}, 0.01);
      r.seconds[op] = median_time_s(device, options.repeats, [&] { opt->step(); });
    }
  }
  return r;
}

}  // namespace

ProfileReport profile_model(const std::string& model_path, const ModelOptions& model, const Cluster& cluster,
                            const ProfileOptions& options) {
  detail::ensure_threads();
  ModelOptions step_options = model;
  step_options.mode = options.mode;
  step_options.optimizer = options.optimizer;
  const Graph step = load_model(model_path, step_options);
  ProfileReport report;
  CostModel fitted = CostModel::defaults();
  fitted.prices = {false, false};  // the kinds measured below
  bool have_fit = false;
  std::string machine;
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
    const auto ids = cluster.device_ids(kind);
    if (ids.empty()) continue;
    if (kind == DeviceKind::gpu && !torch::cuda::is_available()) continue;  // a CPU-only libtorch: CPU only
    // The first device of the kind this machine has (a cluster may list GPUs it lacks: gpu:3 of a
    // preset on a one-GPU machine); none: the first, whose error says why.
    DeviceId dev = ids.front();
    for (DeviceId id : ids) {
      try {
        check_devices_available(cluster, std::span<const DeviceId>(&id, 1));
        dev = id;
        break;
      } catch (const Error&) {
      }
    }
    const Device& device = cluster.device(dev);
    machine += (machine.empty() ? "" : "; ") + device.name + ": " + device.model;

    ExecOptions eo{.mode = options.mode, .optimizer = options.optimizer, .seed = options.seed};
    const std::size_t num_forward = step.num_forward_ops();
    Engine engine(model_path, model, cluster, std::vector<DeviceId>(num_forward, dev), eo);
    const torch::Device tdev = engine.torch_device(dev);

    // Whole step and forward pass, as `placer run` measures them.
    KindSummary summary;
    summary.kind = kind;
    summary.device = device.name;
    auto timed = [&](auto body) {
      for (int i = 0; i < options.warmup; ++i) body();
      std::vector<double> times;
      for (int i = 0; i < std::max(1, options.steps); ++i) {
        const auto start = std::chrono::steady_clock::now();
        body();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return StepTimes::of(times).median_s;
    };
    summary.step_s = timed([&] { engine.step(); });
    summary.forward_step_s = engine.training() ? timed([&] { engine.forward_recording(); }) : summary.step_s;

    OpTimes times = measure_ops(engine, step, tdev, options);

    // Calibration: what the isolated times miss (or gain), put back on the ops in proportion to
    // their times so that they sum to the measured passes.
    const Calibration c = calibrate_op_times(step, times.seconds, times.folded, summary.forward_step_s, summary.step_s,
                                             engine.training());
    summary.op_sum_s = c.op_sum_s;
    summary.forward_residual_s = c.forward_residual_s;
    summary.backward_residual_s = c.backward_residual_s;
    summary.whole_step_calibration = c.whole_step;

    for (OpId op = 0; op < step.num_ops(); ++op) {
      if (times.seconds[op] < 0) continue;
      ++summary.ops_measured;
      report.profile.set_by_name(kind, step.op_name(op), times.seconds[op]);
      report.profile.set_op_signature(step.op_name(op), op_signature(step, op));
      if (!times.folded[op]) report.profile.set_by_signature(kind, op_signature(step, op), times.seconds[op]);
    }
    if (options.fit) {
      // Folded ops are recorded as 0 s, so fit_samples (positive times only) leaves them out. Ops
      // the device prices by their type are fitted with their class here: the profile's model
      // has no types of its own and may price a cluster whose devices have none (a review: a
      // `local` profile's pools then left the pooling class at its default, 30-100x too fast).
      Device by_class = device;
      by_class.efficiency_by_type.clear();
      const FitResult fit =
          fit_roofline(fit_samples(step, report.profile, by_class), kind, fitted, device.op_overhead_s, device.backward_overhead_s());
      const double overhead = fit.overhead_s;
      summary.fit_median_abs_error = fit.median_abs_error;
      summary.fit_samples = fit.samples;
      summary.fitted_overhead_s = overhead;
      if (fit.backward_samples > 0) summary.fitted_backward_overhead_s = fit.backward_overhead_s;
      // Overhead scales of this kind (the common pair, which older readers use for every kind,
      // holds the last kind measured: the GPU's when both were).
      const auto k = static_cast<std::size_t>(kind);
      fitted.prices[k] = true;
      if (device.op_overhead_s > 0) fitted.overhead_scale = fitted.kind_overhead_scale[k] = overhead / device.op_overhead_s;
      // Also in seconds: a device whose cluster entry gives no overhead (0) cannot be scaled to it.
      fitted.kind_overhead_s[k] = overhead;
      fitted.kind_backward_overhead_s[k] = fit.backward_samples > 0 ? fit.backward_overhead_s : overhead;
      if (fit.backward_samples > 0) {
        if (device.backward_overhead_s() > 0)
          fitted.backward_overhead_scale = fitted.kind_backward_overhead_scale[k] = fit.backward_overhead_s / device.backward_overhead_s();
      } else if (fitted.kind_overhead_scale[k] >= 0) {
        // No gradient measured (an inference profile): gradients take the forward scale.
        fitted.backward_overhead_scale = fitted.kind_backward_overhead_scale[k] = fitted.kind_overhead_scale[k];
      }
      // A gradient of a class (or term) the gradients did not determine is priced as its forward op,
      // as a cluster's device does (Device::backward_efficiency).
      for (std::size_t c = 0; c < static_cast<std::size_t>(kNumOpClasses); ++c) {
        if (!fit.compute_fitted[1][c]) fitted.efficiency[1][k][c].compute = fitted.efficiency[0][k][c].compute;
        if (!fit.memory_fitted[1][c]) fitted.efficiency[1][k][c].memory = fitted.efficiency[0][k][c].memory;
      }
      have_fit = true;
    }
    report.kinds.push_back(summary);
  }
  if (report.kinds.empty()) throw Error("cluster '" + cluster.name() + "' has no device this machine can run");
  if (have_fit) report.profile.set_model(fitted);
  report.profile.device_description = machine;
  return report;
}

}  // namespace placer::exec
