#include "placer/cost/fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace placer {
namespace {

// Op times generated from a known roofline (overhead 5 us, matmul 0.5 of peak, elementwise 0.25
// of bandwidth, conv 2.0 of peak) with 2 % noise: the fit recovers it.
TEST(FitRoofline, RecoversTheEfficienciesAndOverheadThatMadeTheTimes) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> scale(-7, -2), noise(0.98, 1.02);
  std::vector<FitSample> samples;
  const double overhead = 5e-6;
  for (int i = 0; i < 300; ++i) {
    const double a = std::pow(10.0, scale(rng)), b = a * 0.05;
    const OpClass c = i % 3 == 0 ? OpClass::matmul : i % 3 == 1 ? OpClass::elementwise : OpClass::conv;
    double t = 0;
    if (c == OpClass::matmul) samples.push_back({c, a, b, t = overhead + a / 0.5});
    if (c == OpClass::conv) samples.push_back({c, a, b, t = overhead + a / 2.0});
    if (c == OpClass::elementwise) samples.push_back({c, b, a, t = overhead + a / 0.25});
    samples.back().t *= noise(rng);
  }
  CostModel m = CostModel::defaults();
  const FitResult r = fit_roofline(samples, DeviceKind::gpu, m, 1e-6);
  EXPECT_NEAR(r.overhead_s, overhead, 0.5e-6);
  EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::matmul).compute, 0.5, 0.02);
  EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::conv).compute, 2.0, 0.08);
  EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::elementwise).memory, 0.25, 0.01);
  EXPECT_LT(r.median_abs_error, 0.03);
  EXPECT_EQ(r.samples, samples.size());
  EXPECT_TRUE(r.compute_fitted[static_cast<std::size_t>(OpClass::conv)]);
  EXPECT_FALSE(r.memory_fitted[static_cast<std::size_t>(OpClass::conv)]) << "no conv op is memory bound";
  EXPECT_FALSE(r.compute_fitted[static_cast<std::size_t>(OpClass::pooling)]) << "no pooling op at all";
  EXPECT_EQ(m.of(DeviceKind::gpu, OpClass::pooling).compute, CostModel::defaults().of(DeviceKind::gpu, OpClass::pooling).compute);
}

TEST(FitRoofline, NoSamplesLeaveTheModelAlone) {
  CostModel m = CostModel::defaults();
  const FitResult r = fit_roofline({}, DeviceKind::cpu, m, 3e-6);
  EXPECT_EQ(r.overhead_s, 3e-6);
  EXPECT_EQ(r.samples, 0u);
}

}  // namespace
}  // namespace placer
