#include "placer/cost/fit.hpp"

#include <algorithm>
#include <cmath>

namespace placer {
namespace {

double predict(const FitSample& s, const CostModel& m, DeviceKind kind, double overhead) {
  const Efficiency& e = m.of(kind, s.op_class);
  return overhead + std::max(s.flops_s / e.compute, s.bytes_s / e.memory);
}

}  // namespace

FitResult fit_roofline(std::span<const FitSample> samples, DeviceKind kind, CostModel& model, double initial_overhead_s) {
  FitResult r;
  r.overhead_s = initial_overhead_s;
  r.samples = samples.size();
  if (samples.empty()) return r;
  double& overhead = r.overhead_s;
  for (int iter = 0; iter < 30; ++iter) {
    for (int ci = 0; ci < kNumOpClasses; ++ci) {
      const auto c = static_cast<OpClass>(ci);
      if (c == OpClass::alias) continue;
      Efficiency& e = model.of(kind, c);
      double cn = 0, cd = 0, mn = 0, md = 0;
      for (const FitSample& s : samples) {
        if (s.op_class != c) continue;
        const double w = 1.0 / s.t, y = std::max(s.t - overhead, 0.05 * s.t);
        if (s.flops_s / e.compute >= s.bytes_s / e.memory) cn += w * s.flops_s * y, cd += w * s.flops_s * s.flops_s;
        else mn += w * s.bytes_s * y, md += w * s.bytes_s * s.bytes_s;
      }
      // y = x * a with x = 1 / efficiency: x = sum(w a y) / sum(w a^2).
      if (cd > 0 && cn > 0) e.compute = std::clamp(cd / cn, 0.005, 4.0), r.compute_fitted[ci] = true;
      if (md > 0 && mn > 0) e.memory = std::clamp(md / mn, 0.005, 4.0), r.memory_fitted[ci] = true;
    }
    double num = 0, den = 0;
    for (const FitSample& s : samples) {
      const double w = 1.0 / s.t;
      num += w * (s.t - predict(s, model, kind, 0.0));
      den += w;
    }
    overhead = std::max(0.0, num / den);
  }
  std::vector<double> errors;
  for (const FitSample& s : samples) errors.push_back(std::fabs(predict(s, model, kind, overhead) - s.t) / s.t);
  std::nth_element(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(errors.size() / 2), errors.end());
  r.median_abs_error = errors[errors.size() / 2];
  return r;
}

std::vector<FitSample> fit_samples(const Graph& step, const Profile& profile, const Device& device) {
  std::vector<FitSample> samples;
  for (OpId op = 0; op < step.num_ops(); ++op) {
    const OpWork& w = step.op_work(op);
    if (w.op_class == OpClass::alias) continue;
    const auto t = profile.find(device.kind, step.op_name(op), "");
    if (!t || !(*t > 0)) continue;
    samples.push_back(FitSample{w.op_class, w.flops / device.peak_flops,
                                (w.bytes_read + w.bytes_written) / device.memory_bandwidth_bytes_per_s, *t});
  }
  return samples;
}

}  // namespace placer
