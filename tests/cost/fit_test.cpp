#include "placer/cost/fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace placer {
namespace {

// Op times generated from a known roofline (overhead 5 us, matmul 0.5 of peak, elementwise 0.25
// of bandwidth, conv 2.0 of peak) with 2 % noise: the fit recovers it. Gradients follow another
// one (overhead 20 us, matmul 0.3, elementwise 0.1, conv 1.0), recovered on their own.
TEST(FitRoofline, RecoversTheEfficienciesAndOverheadThatMadeTheTimes) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> scale(-7, -2), noise(0.98, 1.02);
  std::vector<FitSample> samples;
  const double overhead[2] = {5e-6, 20e-6}, matmul[2] = {0.5, 0.3}, conv[2] = {2.0, 1.0}, elementwise[2] = {0.25, 0.1};
  for (int i = 0; i < 600; ++i) {
    const bool bw = i >= 300;
    const double a = std::pow(10.0, scale(rng)), b = a * 0.05;
    const OpClass c = i % 3 == 0 ? OpClass::matmul : i % 3 == 1 ? OpClass::elementwise : OpClass::conv;
    if (c == OpClass::matmul) samples.push_back({.op_class = c, .backward = bw, .flops_s = a, .bytes_s = b, .t = overhead[bw] + a / matmul[bw]});
    if (c == OpClass::conv) samples.push_back({.op_class = c, .backward = bw, .flops_s = a, .bytes_s = b, .t = overhead[bw] + a / conv[bw]});
    if (c == OpClass::elementwise)
      samples.push_back({.op_class = c, .backward = bw, .flops_s = b, .bytes_s = a, .t = overhead[bw] + a / elementwise[bw]});
    samples.back().t *= noise(rng);
  }
  CostModel m = CostModel::defaults();
  const FitResult r = fit_roofline(samples, DeviceKind::gpu, m, 1e-6);
  EXPECT_NEAR(r.overhead_s, overhead[0], 0.5e-6);
  EXPECT_NEAR(r.backward_overhead_s, overhead[1], 2e-6);
  for (bool bw : {false, true}) {
    SCOPED_TRACE(bw ? "backward" : "forward");
    EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::matmul, bw).compute, matmul[bw], 0.04 * matmul[bw]);
    EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::conv, bw).compute, conv[bw], 0.04 * conv[bw]);
    EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::elementwise, bw).memory, elementwise[bw], 0.04 * elementwise[bw]);
    EXPECT_TRUE(r.compute_fitted[bw][static_cast<std::size_t>(OpClass::conv)]);
    EXPECT_FALSE(r.memory_fitted[bw][static_cast<std::size_t>(OpClass::conv)]) << "no conv op is memory bound";
    EXPECT_FALSE(r.compute_fitted[bw][static_cast<std::size_t>(OpClass::pooling)]) << "no pooling op at all";
    EXPECT_EQ(m.of(DeviceKind::gpu, OpClass::pooling, bw).compute, CostModel::defaults().of(DeviceKind::gpu, OpClass::pooling).compute);
  }
  EXPECT_LT(r.median_abs_error, 0.03);
  EXPECT_EQ(r.samples, samples.size());
  EXPECT_EQ(r.backward_samples, 300u);
}

// Forward times only (an inference profile): backward ops keep the model they had.
TEST(FitRoofline, WithoutGradientsTheBackwardModelStays) {
  std::vector<FitSample> samples;
  for (int i = 1; i <= 50; ++i) samples.push_back({.op_class = OpClass::matmul, .flops_s = 1e-5 * i, .bytes_s = 1e-7, .t = 4e-6 + 1e-5 * i / 0.4});
  CostModel m = CostModel::defaults();
  const FitResult r = fit_roofline(samples, DeviceKind::gpu, m, 7e-6);
  EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::matmul).compute, 0.4, 0.01);
  EXPECT_EQ(m.of(DeviceKind::gpu, OpClass::matmul, true).compute, CostModel::defaults().of(DeviceKind::gpu, OpClass::matmul, true).compute);
  EXPECT_EQ(r.backward_overhead_s, 7e-6);
  EXPECT_EQ(r.backward_samples, 0u);
  EXPECT_FALSE(r.compute_fitted[1][static_cast<std::size_t>(OpClass::matmul)]);
}

// Ten matmuls of each of five sizes at 0.5 of peak (overhead 5 us), one of each ten timed 8 times
// too slow (as identical GEMM gradients were on the H100): each size's median is its true time, so
// the fit recovers 0.5; the slow tenth would otherwise pull it to 0.46 and every op off by 10%. The
// fit's error is reported against the times as measured (the outliers' included).
TEST(FitRoofline, IdenticalOpsTakeTheirMedianTime) {
  std::vector<FitSample> samples;
  for (int size = 1; size <= 5; ++size)
    for (int k = 0; k < 10; ++k) {
      const double f = 1e-4 * size;
      samples.push_back({.op_class = OpClass::matmul, .flops_s = f, .bytes_s = 1e-7, .t = (5e-6 + f / 0.5) * (k == 3 ? 8.0 : 1.0)});
    }
  CostModel m = CostModel::defaults();
  const FitResult r = fit_roofline(samples, DeviceKind::gpu, m, 5e-6);
  EXPECT_NEAR(m.of(DeviceKind::gpu, OpClass::matmul).compute, 0.5, 0.005);
  EXPECT_NEAR(r.overhead_s, 5e-6, 0.1e-6);
  EXPECT_LT(r.median_abs_error, 0.01);  // nine of ten exact
  // Ops of different sizes are never pooled: without outliers the fit is exact whatever the sizes.
  samples.clear();
  for (int size = 1; size <= 50; ++size) samples.push_back({.op_class = OpClass::matmul, .flops_s = 1e-5 * size, .bytes_s = 1e-7, .t = 5e-6 + 1e-5 * size / 0.5});
  CostModel exact = CostModel::defaults();
  fit_roofline(samples, DeviceKind::gpu, exact, 5e-6);
  EXPECT_NEAR(exact.of(DeviceKind::gpu, OpClass::matmul).compute, 0.5, 0.001);
}

TEST(FitRoofline, NoSamplesLeaveTheModelAlone) {
  CostModel m = CostModel::defaults();
  const FitResult r = fit_roofline({}, DeviceKind::cpu, m, 3e-6);
  EXPECT_EQ(r.overhead_s, 3e-6);
  EXPECT_EQ(r.samples, 0u);
}

// An op of a type the device prices by its own efficiency (Device::efficiency_by_type) is no
// sample of its class: a CPU's max pools, 50 times below their class, would drag it down.
TEST(FitSamples, LeaveOutOpsPricedByTheirType) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {4, 8, 16, 16}, DType::f32, TensorKind::data);
  TensorId y = b.add_tensor("y", {4, 8, 8, 8}, DType::f32, TensorKind::activation);
  TensorId z = b.add_tensor("z", {4, 8, 8, 8}, DType::f32, TensorKind::activation);
  const OpWork pool{18432, 32768, 8192, OpClass::pooling};
  b.add_op({.name = "max", .type = "MaxPool", .inputs = {x}, .outputs = {y}, .work = pool});
  b.add_op({.name = "average", .type = "AveragePool", .inputs = {x}, .outputs = {z}, .work = pool});
  b.mark_output(y), b.mark_output(z);
  const Graph g = std::move(b).build();
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  Profile p;
  p.set_by_name(DeviceKind::cpu, "max", 5e-5);
  p.set_by_name(DeviceKind::cpu, "average", 2e-5);
  EXPECT_EQ(fit_samples(g, p, cpu).size(), 2u);
  cpu.efficiency_by_type["MaxPool"] = {.compute = 0.002, .memory = 0};
  const auto samples = fit_samples(g, p, cpu);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].t, 2e-5) << "the AveragePool's";
}

// A type's own efficiency: the median over its timed ops of FLOPs over peak x (time - overhead),
// a gradient's overhead its own; ops with nothing beyond the overhead left out.
TEST(FitTypeEfficiency, IsTheMedianOfItsOpsRates) {
  GraphBuilder b;
  const OpWork pool{1e6, 4e3, 1e3, OpClass::pooling};
  std::vector<TensorId> outs;
  for (int i = 0; i < 4; ++i) {
    TensorId x = b.add_tensor("x" + std::to_string(i), {4, 8, 16, 16}, DType::f32, TensorKind::data);
    outs.push_back(b.add_tensor("y" + std::to_string(i), {4, 8, 8, 8}, DType::f32, TensorKind::activation));
    b.add_op({.name = "pool" + std::to_string(i), .type = "MaxPool", .inputs = {x}, .outputs = {outs.back()}, .work = pool});
  }
  TensorId dx = b.add_tensor("dx", {4, 8, 16, 16}, DType::f32, TensorKind::activation);
  b.add_op({.name = "pool0_grad", .type = "MaxPoolGrad", .inputs = {outs[0]}, .outputs = {dx}, .role = OpRole::backward, .forward_op = 0,
            .work = pool});
  b.set_num_forward_ops(4);
  for (TensorId t : outs) b.mark_output(t);
  b.mark_output(dx);
  const std::vector<Graph> steps{std::move(b).build()};
  const Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
                   .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  std::vector<Profile> profiles(1);
  // Beyond a 1 us overhead: 1, 2 and 4 ms (rates 0.01, 0.005, 0.0025); the fourth has none left.
  profiles[0].set_by_name(DeviceKind::cpu, "pool0", 1e-6 + 1e-3);
  profiles[0].set_by_name(DeviceKind::cpu, "pool1", 1e-6 + 2e-3);
  profiles[0].set_by_name(DeviceKind::cpu, "pool2", 1e-6 + 4e-3);
  profiles[0].set_by_name(DeviceKind::cpu, "pool3", 0.5e-6);
  profiles[0].set_by_name(DeviceKind::cpu, "pool0_grad", 1e-4 + 1e-3);
  auto fit = fit_type_efficiency(steps, profiles, cpu, "MaxPool", 1e-6, 1e-4);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->samples, 3u);
  EXPECT_DOUBLE_EQ(fit->compute, 1e6 / (1e11 * 2e-3));
  fit = fit_type_efficiency(steps, profiles, cpu, "MaxPoolGrad", 1e-6, 1e-4);
  ASSERT_TRUE(fit.has_value());
  EXPECT_DOUBLE_EQ(fit->compute, 1e6 / (1e11 * 1e-3)) << "the gradient's own overhead taken off";
  EXPECT_FALSE(fit_type_efficiency(steps, profiles, cpu, "AveragePool", 1e-6, 1e-4).has_value());
}

// A type whose ops have no FLOPs (a reflect pad: a copy) is fitted by its bytes: the median of
// bytes / (bandwidth at their size x (time - overhead)), a memory efficiency (type_efficiency_for's).
TEST(FitTypeEfficiency, ATypeWithoutFlopsIsFittedByItsBytes) {
  GraphBuilder b;
  const OpWork copy{0, 4e5, 4e5, OpClass::data_movement};
  Attributes reflect;
  reflect.set(Attribute{.name = "mode", .kind = Attribute::Kind::text, .s = "reflect"});
  std::vector<TensorId> outs;
  for (int i = 0; i < 3; ++i) {
    const TensorId x = b.add_tensor("x" + std::to_string(i), {4, 8, 32, 32}, DType::f32, TensorKind::data);
    outs.push_back(b.add_tensor("y" + std::to_string(i), {4, 8, 34, 34}, DType::f32, TensorKind::activation));
    b.add_op({.name = "pad" + std::to_string(i), .type = "Pad", .inputs = {x}, .outputs = {outs.back()}, .attrs = reflect, .work = copy});
  }
  for (TensorId t : outs) b.mark_output(t);
  const std::vector<Graph> steps{std::move(b).build()};
  const Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
                   .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  std::vector<Profile> profiles(1);
  for (int i = 0; i < 3; ++i) profiles[0].set_by_name(DeviceKind::cpu, "pad" + std::to_string(i), 1e-6 + (i + 1) * 1e-3);
  EXPECT_FALSE(fit_type_efficiency(steps, profiles, cpu, "Pad", 1e-6, 1e-6).has_value()) << "a reflect pad is PadReflect";
  const auto fit = fit_type_efficiency(steps, profiles, cpu, "PadReflect", 1e-6, 1e-6);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->samples, 3u);
  EXPECT_EQ(fit->compute, 0.0);
  EXPECT_DOUBLE_EQ(fit->memory, 8e5 / (cpu.bandwidth_for(8e5) * 2e-3)) << "the median: 2 ms beyond the overhead";
}

// `placer fit` prices every profile's ops in a training step (to pair them by name): a forward
// BatchNormalization is one by batch statistics only where the profile times a gradient of the
// step too; an inference profile's ran by running statistics (a review: its times were fitted as
// BatchNormalizationTraining, with the statistics' FLOPs).
TEST(FitTypeEfficiency, AnInferenceProfilesNormsRanByRunningStatistics) {
  GraphBuilder b;
  const OpWork norm{4e6, 4e6, 4e6, OpClass::normalization};
  const TensorId x = b.add_tensor("x", {4, 8, 32, 32}, DType::f32, TensorKind::data);
  const TensorId y = b.add_tensor("y", {4, 8, 32, 32}, DType::f32, TensorKind::activation);
  const TensorId dx = b.add_tensor("dx", {4, 8, 32, 32}, DType::f32, TensorKind::activation);
  b.add_op({.name = "bn", .type = "BatchNormalization", .inputs = {x}, .outputs = {y}, .work = norm});
  b.add_op({.name = "bn_grad", .type = "BatchNormalizationGrad", .inputs = {y}, .outputs = {dx}, .role = OpRole::backward, .forward_op = 0,
            .work = norm});
  b.set_num_forward_ops(1);
  b.mark_output(dx);
  const std::vector<Graph> steps{std::move(b).build()};
  const Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
                   .memory_bytes = 1 << 30, .op_overhead_s = 0, .streams = 1};
  std::vector<Profile> inference(1), training(1);
  inference[0].set_by_name(DeviceKind::cpu, "bn", 1e-3);
  training[0].set_by_name(DeviceKind::cpu, "bn", 4e-3);
  training[0].set_by_name(DeviceKind::cpu, "bn_grad", 2e-3);
  EXPECT_FALSE(fit_type_efficiency(steps, inference, cpu, "BatchNormalizationTraining", 0, 0).has_value());
  auto fit = fit_type_efficiency(steps, inference, cpu, "BatchNormalization", 0, 0);
  ASSERT_TRUE(fit.has_value());
  EXPECT_DOUBLE_EQ(fit->compute, 4e6 / (1e11 * 1e-3)) << "4 FLOPs per element: running statistics";
  EXPECT_FALSE(fit_type_efficiency(steps, training, cpu, "BatchNormalization", 0, 0).has_value());
  fit = fit_type_efficiency(steps, training, cpu, "BatchNormalizationTraining", 0, 0);
  ASSERT_TRUE(fit.has_value());
  EXPECT_DOUBLE_EQ(fit->compute, 8e6 / (1e11 * 4e-3)) << "8 FLOPs per element: the statistics too";
  // The class samples the same way: the inference profile's norm with 4e6 FLOPs, the training
  // profile's with 8e6 (FitSample::flops_s: FLOPs / peak).
  ASSERT_EQ(fit_samples(steps[0], inference[0], cpu).size(), 1u);
  EXPECT_DOUBLE_EQ(fit_samples(steps[0], inference[0], cpu)[0].flops_s, 4e6 / 1e11);
  ASSERT_EQ(fit_samples(steps[0], training[0], cpu).size(), 2u);
  EXPECT_DOUBLE_EQ(fit_samples(steps[0], training[0], cpu)[0].flops_s, 8e6 / 1e11);
  Device typed = cpu;
  typed.efficiency_by_type["BatchNormalizationTraining"] = {.compute = 0.01, .memory = 0};
  EXPECT_EQ(fit_samples(steps[0], inference[0], typed).size(), 1u) << "running statistics: not the training type's";
  EXPECT_EQ(fit_samples(steps[0], training[0], typed).size(), 1u) << "the gradient alone";
}

}  // namespace
}  // namespace placer

namespace placer {
namespace {

// The samples of a profile: an op's time by its name when the recorded signature agrees, else by
// its signature; a time by name measured on another op of that name is no sample.
TEST(FitSamples, ByNameWhenTheSignatureAgreesElseBySignature) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {8, 16}, DType::f32, TensorKind::data);
  TensorId w = b.add_tensor("w", {16, 4}, DType::f32, TensorKind::parameter);
  TensorId y = b.add_tensor("y", {8, 4}, DType::f32, TensorKind::activation);
  b.add_op({.name = "mm", .type = "MatMul", .inputs = {x, w}, .outputs = {y}, .work = OpWork{1024, 576, 128, OpClass::matmul}});
  const Graph g = std::move(b).build();
  const Device gpu{.name = "gpu:0", .kind = DeviceKind::gpu, .model = "t", .peak_flops = 1e12, .memory_bandwidth_bytes_per_s = 1e11,
                   .memory_bytes = 1 << 30, .op_overhead_s = 1e-5, .streams = 1};
  Profile p;
  p.set_by_name(DeviceKind::gpu, "mm", 1e-3);
  p.set_op_signature("mm", "MatMul(1x1,1x1)");  // measured on another 'mm'
  EXPECT_TRUE(fit_samples(g, p, gpu).empty());
  p.set_by_signature(DeviceKind::gpu, op_signature(g, 0), 2e-3);
  const auto samples = fit_samples(g, p, gpu);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].t, 2e-3);
  p.set_op_signature("mm", op_signature(g, 0));
  EXPECT_DOUBLE_EQ(fit_samples(g, p, gpu).at(0).t, 1e-3);
}

// A sample's seconds of memory are the op's priced bytes (priced_work: none for an op making only
// views) over the device's bandwidth at the op's size (Device::bandwidth_for), as the cost table's.
TEST(FitSamples, PriceBytesAsTheCostTableDoes) {
  GraphBuilder b;
  Attributes perm;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {1, 0}});
  TensorId x = b.add_tensor("x", {256, 256}, DType::f32, TensorKind::data);
  TensorId r = b.add_tensor("r", {256, 256}, DType::f32, TensorKind::activation);
  TensorId t = b.add_tensor("t", {256, 256}, DType::f32, TensorKind::activation);
  b.add_op({.name = "relu", .type = "Relu", .inputs = {x}, .outputs = {r}, .work = OpWork{65536, 262144, 262144, OpClass::elementwise}});
  b.add_op({.name = "transpose", .type = "Transpose", .inputs = {r}, .outputs = {t}, .attrs = perm,
            .work = OpWork{0, 262144, 262144, OpClass::data_movement}});
  b.mark_output(t);
  const Graph g = std::move(b).build();
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  cpu.bandwidth_by_size = {{1 << 20, 4e10}};
  Profile p;
  p.set_by_name(DeviceKind::cpu, "relu", 2e-5);
  p.set_by_name(DeviceKind::cpu, "transpose", 1e-6);
  const auto samples = fit_samples(g, p, cpu);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_DOUBLE_EQ(samples[0].bytes_s, 524288 / 4e10) << "512 KiB: the cache's bandwidth, not memory's";
  EXPECT_EQ(samples[1].bytes_s, 0.0) << "a view: no bytes";
  EXPECT_EQ(samples[1].flops_s, 0.0);
}

}  // namespace
}  // namespace placer
