// Fitting the roofline to measured op times: the efficiencies per op class and the per-op overhead
// of one device kind, so that ops and models never measured are still priced well. Used by
// `placer profile` (one model) and `placer fit` (several profiles pooled, written into a cluster).
// Method: docs/execution.md ("Fit").
//
//   std::vector<FitSample> samples = fit_samples(step, profile, DeviceKind::gpu, cluster.device(g));
//   CostModel m = CostModel::defaults();
//   FitResult r = fit_roofline(samples, DeviceKind::gpu, m, device.op_overhead_s);
#pragma once
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/graph.hpp"

namespace placer {

// One measured op: its class, whether it is a gradient, its compute and memory seconds at full
// efficiency on the device (FLOPs / peak, bytes / bandwidth) and the measured seconds.
struct FitSample {
  OpClass op_class = OpClass::alias;
  bool backward = false;
  double flops_s = 0, bytes_s = 0, t = 0;
};

struct FitResult {
  double overhead_s = 0;           // fitted per-op overhead of forward and update ops
  double backward_overhead_s = 0;  // of backward ops (the initial overhead when none was measured)
  double median_abs_error = 0;     // median |predicted - measured| / measured over the samples
  std::size_t samples = 0, backward_samples = 0;
  // Which efficiencies the data determined, [backward][class] (a class with no op bound by that
  // term keeps its value).
  std::array<std::array<bool, kNumOpClasses>, 2> compute_fitted{}, memory_fitted{};
};

// Samples of the same computation (same class, gradient or not, same compute and memory seconds:
// the same op and shapes, in one model or several) first all take the median of their times: the
// spread between them is measurement noise (on the H100 data, 78 identical GEMM gradients of RNNLM
// took 67 to 910 us, median 76), and a few slow outliers otherwise set a class's efficiency for
// every model priced with it.
// Then alternating weighted least squares on relative error (weights 1/t), 30 rounds, separately for
// forward-and-update ops and for backward ops: with the overhead fixed, each sample is assigned to
// the term that bounds it and each class's 1/efficiency is the weighted slope of (t - overhead) on
// that term; then the overhead is the weighted mean residual (>= 0). Efficiencies are clamped to
// [0.05, 4]. Updates model.of(kind, *, backward) in place; a pass without samples keeps its values.
// `initial_backward_overhead_s` < 0: the same as `initial_overhead_s`.
FitResult fit_roofline(std::span<const FitSample> samples, DeviceKind kind, CostModel& model, double initial_overhead_s,
                       double initial_backward_overhead_s = -1);

// Whether `profile` times a gradient (a backward op) of `step` on `kind`: a training step's
// profile; an inference profile times none.
bool times_a_gradient(const Graph& step, const Profile& profile, DeviceKind kind);

// The samples of `step` that `profile` has a positive time for, by op name, on `device`'s kind;
// alias ops and ops of a type the device has an efficiency of its own for (efficiency_by_type),
// or listed in `fitted_apart` (`placer fit --types`), are skipped. Ops are priced (priced_work,
// priced_type) as a training step's when `profile` times a gradient of `step`, else as a forward
// pass's: an inference profile's norms ran by running statistics.
std::vector<FitSample> fit_samples(const Graph& step, const Profile& profile, const Device& device,
                                   std::span<const std::string> fitted_apart = {});

// The efficiency of one op type fitted to measured ops of that type (`placer fit --types`, for
// kernels far from their class: a CPU's pools): the median, over the ops of type `type` in `steps`
// that `profiles[i]` times on `device`'s kind, of FLOPs / (peak x (time - overhead)), the overhead
// `overhead_s` for forward and update ops and `backward_overhead_s` for gradients: a compute
// efficiency. A type whose ops have no FLOPs (copies: "PadReflect") gets a memory efficiency, the
// median of bytes / (bandwidth at their size x (time - overhead)), as type_efficiency_for gives.
// Ops with neither, or no time beyond the overhead, are left out; nullopt without any.
// A type is the op's priced_type, as in fit_samples: a training profile's forward norms are
// "BatchNormalizationTraining", an inference profile's "BatchNormalization".
struct TypeFit {
  double compute = 0;  // 0 for a type fitted by its bytes
  double memory = 0;   // 0 for a type fitted by its FLOPs
  std::size_t samples = 0;
};
std::optional<TypeFit> fit_type_efficiency(std::span<const Graph> steps, std::span<const Profile> profiles, const Device& device,
                                           std::string_view type, double overhead_s, double backward_overhead_s);

}  // namespace placer
