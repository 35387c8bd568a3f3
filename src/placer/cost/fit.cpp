#include "placer/cost/fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "placer/util/error.hpp"
#include "placer/util/stats.hpp"

namespace placer {
namespace {

// Below 5% of peak or of bandwidth a class's time is overhead the fit mistook for slowness: with
// a lower floor, leaving BERT out of the H100 data drove matmul's memory efficiency to the floor
// and priced BERT about ten times too slow (docs/execution.md).
constexpr double kMinEfficiency = 0.05;

double predict(const FitSample& s, const CostModel& m, DeviceKind kind, double overhead) {
  const Efficiency& e = m.of(kind, s.op_class, s.backward);
  return overhead + std::max(s.flops_s / e.compute, s.bytes_s / e.memory);
}

// Each sample's time replaced by the median time of the samples of the same computation (same
// class, gradient or not, same compute and memory seconds).
std::vector<FitSample> with_group_medians(std::span<const FitSample> samples) {
  using Key = std::tuple<OpClass, bool, double, double>;
  auto key = [](const FitSample& s) { return Key{s.op_class, s.backward, s.flops_s, s.bytes_s}; };
  std::map<Key, std::vector<double>> groups;
  for (const FitSample& s : samples) groups[key(s)].push_back(s.t);
  std::map<Key, double> median;
  for (auto& [k, times] : groups) median[k] = median_of(times);
  std::vector<FitSample> out(samples.begin(), samples.end());
  for (FitSample& s : out) s.t = median.at(key(s));
  return out;
}

}  // namespace

FitResult fit_roofline(std::span<const FitSample> measured, DeviceKind kind, CostModel& model, double initial_overhead_s,
                       double initial_backward_overhead_s) {
  const std::vector<FitSample> denoised = with_group_medians(measured);
  const std::span<const FitSample> samples = denoised;
  FitResult r;
  r.overhead_s = initial_overhead_s;
  r.backward_overhead_s = initial_backward_overhead_s >= 0 ? initial_backward_overhead_s : initial_overhead_s;
  r.samples = samples.size();
  if (samples.empty()) return r;
  for (const FitSample& s : samples) r.backward_samples += s.backward;
  for (const bool backward : {false, true}) {
    double& overhead = backward ? r.backward_overhead_s : r.overhead_s;
    if ((backward ? r.backward_samples : r.samples - r.backward_samples) == 0) continue;
    for (int iter = 0; iter < 30; ++iter) {
      for (int ci = 0; ci < kNumOpClasses; ++ci) {
        const auto c = static_cast<OpClass>(ci);
        if (c == OpClass::alias) continue;
        Efficiency& e = model.of(kind, c, backward);
        double cn = 0, cd = 0, mn = 0, md = 0;
        for (const FitSample& s : samples) {
          if (s.op_class != c || s.backward != backward) continue;
          const double w = 1.0 / s.t, y = std::max(s.t - overhead, 0.05 * s.t);
          if (s.flops_s / e.compute >= s.bytes_s / e.memory) cn += w * s.flops_s * y, cd += w * s.flops_s * s.flops_s;
          else mn += w * s.bytes_s * y, md += w * s.bytes_s * s.bytes_s;
        }
        // y = x * a with x = 1 / efficiency: x = sum(w a y) / sum(w a^2).
        if (cd > 0 && cn > 0) e.compute = std::clamp(cd / cn, kMinEfficiency, 4.0), r.compute_fitted[backward][ci] = true;
        if (md > 0 && mn > 0) e.memory = std::clamp(md / mn, kMinEfficiency, 4.0), r.memory_fitted[backward][ci] = true;
      }
      double num = 0, den = 0;
      for (const FitSample& s : samples) {
        if (s.backward != backward) continue;
        const double w = 1.0 / s.t;
        num += w * (s.t - predict(s, model, kind, 0.0));
        den += w;
      }
      overhead = std::max(0.0, num / den);
    }
  }
  // Times that are each valid can still be far apart enough (1e-12 s against 1e300 s) to turn
  // the sums into inf or NaN: no figure is written then.
  bool finite = std::isfinite(r.overhead_s) && std::isfinite(r.backward_overhead_s);
  for (const bool backward : {false, true})
    for (int ci = 0; ci < kNumOpClasses; ++ci) {
      const Efficiency& e = model.of(kind, static_cast<OpClass>(ci), backward);
      finite = finite && std::isfinite(e.compute) && std::isfinite(e.memory);
    }
  if (!finite)
    throw Error(std::string("the fit of the ") + std::string(device_kind_name(kind)) +
                " times gives figures that are not finite numbers: check the profiles' times");
  std::vector<double> errors;  // against the times as measured
  for (const FitSample& s : measured)
    errors.push_back(std::fabs(predict(s, model, kind, s.backward ? r.backward_overhead_s : r.overhead_s) - s.t) / s.t);
  r.median_abs_error = median_of(errors);
  return r;
}

bool times_a_gradient(const Graph& step, const Profile& profile, DeviceKind kind) {
  for (OpId op = 0; op < step.num_ops(); ++op)
    if (step.op_role(op) == OpRole::backward && profile.find(kind, step.op_name(op), op_signature(step, op))) return true;
  return false;
}

std::vector<FitSample> fit_samples(const Graph& step, const Profile& profile, const Device& device,
                                   std::span<const std::string> fitted_apart) {
  std::vector<FitSample> samples;
  // A profile of the forward pass alone ran its norms by running statistics, whatever `step` is.
  const bool trained = times_a_gradient(step, profile, device.kind);
  for (OpId op = 0; op < step.num_ops(); ++op) {
    const OpWork w = priced_work(step, op, trained);
    if (w.op_class == OpClass::alias) continue;
    // Priced by its type on this device (Device::efficiency_by_type), not by its class.
    const std::string_view type = priced_type(step, op, trained);
    if (device.efficiency_by_type.contains(type) || std::find(fitted_apart.begin(), fitted_apart.end(), type) != fitted_apart.end())
      continue;
    const auto t = profile.find(device.kind, step.op_name(op), op_signature(step, op));
    if (!t || !(*t > 0)) continue;
    samples.push_back(FitSample{w.op_class, step.op_role(op) == OpRole::backward, w.flops / device.peak_flops,
                                (w.bytes_read + w.bytes_written) / device.bandwidth_for(w.bytes_read + w.bytes_written), *t});
  }
  return samples;
}

std::optional<TypeFit> fit_type_efficiency(std::span<const Graph> steps, std::span<const Profile> profiles, const Device& device,
                                           std::string_view type, double overhead_s, double backward_overhead_s) {
  std::vector<double> compute, memory;  // per op with FLOPs; per op with bytes alone
  for (std::size_t i = 0; i < steps.size() && i < profiles.size(); ++i) {
    const Graph& step = steps[i];
    const bool trained = times_a_gradient(step, profiles[i], device.kind);  // as in fit_samples
    for (OpId op = 0; op < step.num_ops(); ++op) {
      if (priced_type(step, op, trained) != type) continue;
      const OpWork w = priced_work(step, op, trained);
      const auto t = profiles[i].find(device.kind, step.op_name(op), op_signature(step, op));
      const double kernel_s = t ? *t - (step.op_role(op) == OpRole::backward ? backward_overhead_s : overhead_s) : 0.0;
      const double bytes = w.bytes_read + w.bytes_written;
      if (w.op_class == OpClass::alias || !(kernel_s > 0)) continue;
      if (w.flops > 0) compute.push_back(w.flops / (device.peak_flops * kernel_s));
      else if (bytes > 0) memory.push_back(bytes / (device.bandwidth_for(bytes) * kernel_s));
    }
  }
  // A type's ops have FLOPs or they do not (a copy); where both occur, the FLOPs' fit prices it.
  if (!compute.empty()) return TypeFit{.compute = median_of(compute), .memory = 0, .samples = compute.size()};
  if (!memory.empty()) return TypeFit{.compute = 0, .memory = median_of(memory), .samples = memory.size()};
  return std::nullopt;
}

}  // namespace placer
