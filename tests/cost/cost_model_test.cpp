#include "placer/cost/cost_model.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "placer/graph/training.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

Device gpu() {
  return Device{.name = "gpu:0", .kind = DeviceKind::gpu, .model = "t", .peak_flops = 1e12, .memory_bandwidth_bytes_per_s = 1e11,
                .memory_bytes = 1 << 30, .op_overhead_s = 1e-5};
}

CostModel unit_model() {
  CostModel m = CostModel::defaults();
  for (auto& per_pass : m.efficiency)
    for (auto& per_kind : per_pass)
      for (auto& e : per_kind) e = {1.0, 1.0};
  return m;
}

TEST(CostModel, ComputeBoundOpTakesFlopsOverPeak) {
  OpWork w{2e9, 1e6, 1e6, OpClass::matmul};  // 2 ms of compute, 20 us of memory
  EXPECT_DOUBLE_EQ(modelled_time_s(w, gpu(), unit_model()), 1e-5 + 2e-3);
}

TEST(CostModel, MemoryBoundOpTakesBytesOverBandwidth) {
  OpWork w{1e6, 4e8, 4e8, OpClass::elementwise};  // 1 us of compute, 8 ms of memory
  EXPECT_DOUBLE_EQ(modelled_time_s(w, gpu(), unit_model()), 1e-5 + 8e-3);
}

TEST(CostModel, EfficiencyDividesThePeak) {
  CostModel m = unit_model();
  m.of(DeviceKind::gpu, OpClass::conv) = {0.5, 1.0};
  EXPECT_DOUBLE_EQ(modelled_time_s(OpWork{1e9, 0, 0, OpClass::conv}, gpu(), m), 1e-5 + 2e-3);
}

TEST(CostModel, ADevicesOwnEfficiencyReplacesTheDefaultField) {
  CostModel m = unit_model();
  Device d = gpu();
  d.efficiency[static_cast<std::size_t>(OpClass::conv)] = {.compute = 2.0, .memory = 0};  // memory: the default
  EXPECT_DOUBLE_EQ(modelled_time_s(OpWork{1e9, 0, 0, OpClass::conv}, d, m), 1e-5 + 0.5e-3);
  EXPECT_DOUBLE_EQ(modelled_time_s(OpWork{0, 1e8, 0, OpClass::conv}, d, m), 1e-5 + 1e-3);
  EXPECT_DOUBLE_EQ(modelled_time_s(OpWork{1e9, 0, 0, OpClass::conv}, d, m, /*device_efficiency=*/false), 1e-5 + 1e-3);
}

TEST(CostModel, GradientsHaveTheirOwnEfficienciesAndOverhead) {
  CostModel m = unit_model();
  m.of(DeviceKind::gpu, OpClass::conv, /*backward=*/true) = {0.25, 1.0};
  m.backward_overhead_scale = 3.0;
  const OpWork w{1e9, 0, 0, OpClass::conv};
  Device d = gpu();
  EXPECT_DOUBLE_EQ(modelled_time_s(w, d, m), 1e-5 + 1e-3) << "a forward op keeps the forward model";
  EXPECT_DOUBLE_EQ(modelled_time_s(w, d, m, true, /*backward=*/true), 3e-5 + 4e-3);
  // The device's own: its backward efficiency and overhead, else its forward efficiency.
  d.efficiency[static_cast<std::size_t>(OpClass::conv)] = {.compute = 2.0, .memory = 0};
  EXPECT_DOUBLE_EQ(modelled_time_s(w, d, m, true, true), 3e-5 + 0.5e-3);
  d.backward_efficiency[static_cast<std::size_t>(OpClass::conv)] = {.compute = 0.5, .memory = 0};
  d.backward_op_overhead_s = 2e-5;
  EXPECT_DOUBLE_EQ(modelled_time_s(w, d, m, true, true), 6e-5 + 2e-3);
  EXPECT_DOUBLE_EQ(modelled_time_s(w, d, m, true, false), 1e-5 + 0.5e-3);
  EXPECT_DOUBLE_EQ(modelled_time_s(w, d, m, /*device_efficiency=*/false, true), 6e-5 + 4e-3) << "a fitted model ignores the device's efficiencies";
}

TEST(CostModel, ASmallWorkingSetGetsTheBandwidthItsCachesGive) {
  Device d = gpu();  // 100 GB/s from memory
  d.bandwidth_by_size = {{1 << 20, 4e11}, {16 << 20, 2e11}};
  const CostModel m = unit_model();
  auto memory_s = [&](double bytes) { return modelled_time_s(OpWork{0, bytes / 2, bytes / 2, OpClass::elementwise}, d, m) - 1e-5; };
  EXPECT_DOUBLE_EQ(memory_s(1 << 19), (1 << 19) / 4e11) << "below the first size: its bandwidth";
  EXPECT_DOUBLE_EQ(memory_s(1 << 20), (1 << 20) / 4e11);
  EXPECT_NEAR(memory_s(4 << 20), (4 << 20) / 3e11, 1e-15) << "halfway in log(bytes)";
  EXPECT_DOUBLE_EQ(memory_s(16 << 20), (16 << 20) / 2e11);
  EXPECT_DOUBLE_EQ(memory_s(17 << 20), (17 << 20) / 1e11) << "past the last size: memory_bandwidth";
  d.bandwidth_by_size.clear();
  EXPECT_DOUBLE_EQ(memory_s(1 << 20), (1 << 20) / 1e11);
}

TEST(CostModel, AliasesCostNothingNotEvenOverhead) {
  EXPECT_EQ(modelled_time_s(OpWork{0, 0, 0, OpClass::alias}, gpu(), CostModel::defaults()), 0.0);
}

TEST(CostModel, DefaultsAreFractions) {
  CostModel m = CostModel::defaults();
  for (auto& per_pass : m.efficiency)
    for (auto& per_kind : per_pass)
      for (auto& e : per_kind) {
        EXPECT_GT(e.compute, 0.0);
        EXPECT_LE(e.compute, 1.0);
        EXPECT_GT(e.memory, 0.0);
        EXPECT_LE(e.memory, 1.0);
      }
  EXPECT_EQ(m.efficiency[0], m.efficiency[1]) << "by default gradients are priced as forward ops";
}

Graph one_op_graph() {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {8, 16}, DType::f32, TensorKind::data);
  TensorId w = b.add_tensor("w", {16, 4}, DType::f32, TensorKind::parameter);
  TensorId y = b.add_tensor("y", {8, 4}, DType::f32, TensorKind::activation);
  OpSpec spec{.name = "mm", .type = "MatMul", .inputs = {x, w}, .outputs = {y}};
  spec.work = OpWork{1024, 576, 128, OpClass::matmul};
  b.add_op(std::move(spec));
  return std::move(b).build();
}

Cluster one_gpu() {
  Device cpu = gpu();
  cpu.name = "cpu:0", cpu.kind = DeviceKind::cpu;
  return Cluster::build("t", {cpu, gpu()}, {},
                        {Link{.a = "cpu:0", .b = "gpu:0", .bandwidth_ab_bytes_per_s = 1e10, .bandwidth_ba_bytes_per_s = 1e10,
                              .latency_s = 1e-5}});
}

// Adds float32 tensors to the graph `b` builds (the workspace tests').
struct F32Tensors {
  GraphBuilder& b;
  TensorId operator()(const std::string& name, std::vector<std::int64_t> shape, TensorKind kind = TensorKind::activation) const {
    return b.add_tensor(name, std::move(shape), DType::f32, kind);
  }
};
// Adds an op of one output to `b`, priced by its op_work rule.
void add_priced(GraphBuilder& b, const std::string& name, const std::string& type, std::vector<TensorId> in, TensorId out,
                const Attributes& attrs = {}) {
  std::vector<TensorDesc> ins;
  for (TensorId t : in) ins.push_back({b.tensor_shape(t), b.tensor_dtype(t), true});
  const std::vector<TensorDesc> outs{{b.tensor_shape(out), b.tensor_dtype(out), true}};
  b.add_op({.name = name, .type = type, .inputs = std::move(in), .outputs = {out}, .attrs = attrs, .work = op_work(type, attrs, ins, outs)});
}
// A convolution's attributes: `group`, and `strides` when given.
Attributes conv_attributes(std::int64_t group, std::vector<std::int64_t> strides = {}) {
  Attributes a;
  a.set(Attribute{.name = "group", .kind = Attribute::Kind::integer, .i = group});
  if (!strides.empty()) a.set(Attribute{.name = "strides", .kind = Attribute::Kind::integers, .ints = std::move(strides)});
  return a;
}

TEST(Profile, SignatureIsTypeAndInputShapes) { EXPECT_EQ(op_signature(one_op_graph(), 0), "MatMul(8x16,16x4)"); }

TEST(Profile, MeasuredTimeOverridesTheModelPerDeviceKind) {
  Graph g = one_op_graph();
  Cluster c = one_gpu();
  Profile p;
  p.set_by_signature(DeviceKind::gpu, "MatMul(8x16,16x4)", 0.25);
  CostTable t(g, c, CostModel::defaults(), &p);
  EXPECT_DOUBLE_EQ(t.time_s(0, 1), 0.25);
  EXPECT_EQ(t.source(0, 1), CostSource::measured);
  EXPECT_EQ(t.source(0, 0), CostSource::modelled);
  p.set_by_name(DeviceKind::gpu, "mm", 0.5);  // a name beats a signature
  EXPECT_DOUBLE_EQ(CostTable(g, c, CostModel::defaults(), &p).time_s(0, 1), 0.5);
}

// A positive but absurdly small peak prices an op at infinity: an error naming the op and device,
// not a step of inf seconds.
TEST(CostTable, AnInfiniteOpTimeIsAnError) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {8, 16}, DType::f32, TensorKind::data), y = b.add_tensor("y", {8, 16}, DType::f32, TensorKind::activation);
  b.add_op({.name = "mm", .type = "MatMul", .inputs = {x}, .outputs = {y}, .work = {.flops = 1e9, .op_class = OpClass::matmul}});
  Graph g = std::move(b).build();
  Device slow = gpu();
  slow.peak_flops = 1e-300;
  const Cluster c = Cluster::build("slow", {slow}, {}, {});
  EXPECT_THAT([&] { CostTable(g, c, CostModel::defaults()); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("op 'mm' would take inf s on device 'gpu:0'")));
}

// Times that are each finite but add up past a double (a profile giving 1e308 s to two ops) would
// make every step and bound on that device inf: an error naming the device.
TEST(CostTable, OpTimesThatAddUpToInfinityAreAnError) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {8, 16}, DType::f32, TensorKind::data), y = b.add_tensor("y", {8, 16}, DType::f32, TensorKind::activation),
           z = b.add_tensor("z", {8, 16}, DType::f32, TensorKind::activation);
  b.add_op({.name = "a", .type = "Relu", .inputs = {x}, .outputs = {y}, .work = {.flops = 128, .op_class = OpClass::elementwise}});
  b.add_op({.name = "b", .type = "Relu", .inputs = {y}, .outputs = {z}, .work = {.flops = 128, .op_class = OpClass::elementwise}});
  Graph g = std::move(b).build();
  const Cluster c = one_gpu();
  Profile p;
  p.set_by_name(DeviceKind::gpu, "a", 1e308);
  EXPECT_NO_THROW(CostTable(g, c, CostModel::defaults(), &p));
  p.set_by_name(DeviceKind::gpu, "b", 1e308);
  EXPECT_THAT([&] { CostTable(g, c, CostModel::defaults(), &p); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("the ops' times on device 'gpu:0' add up to more than a double holds")));
  // Without a profile the device's figures alone are named (the profile was blamed: a QA pass).
  Device slow = gpu();
  slow.op_overhead_s = 1e308;
  Device cpu = gpu();
  cpu.name = "cpu:0", cpu.kind = DeviceKind::cpu;
  const Cluster overheads = Cluster::build("t", {cpu, slow}, {}, {Link{.a = "cpu:0", .b = "gpu:0", .bandwidth_ab_bytes_per_s = 1e10,
                                                                     .bandwidth_ba_bytes_per_s = 1e10, .latency_s = 1e-5}});
  EXPECT_THAT([&] { CostTable(g, overheads, CostModel::defaults()); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("check the device's figures (op_overhead_s"),
                                                               ::testing::Not(::testing::HasSubstr("profile")))));
}

// A profile that cannot be written completely (a full disk) is an error, and the file is written
// whole or not at all.
TEST(ProfileFile, AFailedWriteIsAnError) {
  Profile p;
  p.set_by_name(DeviceKind::gpu, "mm", 0.25);
  EXPECT_THAT([&] { p.save("/dev/full"); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("failed writing profile file")));
  EXPECT_THROW(p.save("/nonexistent/dir/p.json"), Error);
}

TEST(CostTable, FoldedOpsTakeNoTimeEvenWhenProfiled) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {8, 16}, DType::f32, TensorKind::data);
  TensorId s = b.add_tensor("s", {2}, DType::i64, TensorKind::activation);
  TensorId y = b.add_tensor("y", {16, 8}, DType::f32, TensorKind::activation);
  b.add_op({.name = "shape", .type = "Shape", .inputs = {x}, .outputs = {s}, .work = {.flops = 1e6, .op_class = OpClass::data_movement}});
  b.add_op({.name = "reshape", .type = "Reshape", .inputs = {x, s}, .outputs = {y}, .work = {.flops = 1e6, .op_class = OpClass::data_movement}});
  Graph g = std::move(b).build();
  Profile p;
  p.set_by_name(DeviceKind::gpu, "shape", 0.25);
  CostTable t(g, one_gpu(), CostModel::defaults(), &p);
  for (DeviceId d = 0; d < 2; ++d) {
    EXPECT_EQ(t.time_s(0, d), 0.0);
    EXPECT_EQ(t.source(0, d), CostSource::folded);
    EXPECT_GT(t.time_s(1, d), 0.0);
  }
}

TEST(CostTable, PricesGradientsWithTheBackwardModel) {
  GraphBuilder b;
  TensorId x = b.add_tensor("x", {8, 16}, DType::f32, TensorKind::data);
  TensorId y = b.add_tensor("y", {8, 16}, DType::f32, TensorKind::activation);
  TensorId dx = b.add_tensor("dx", {8, 16}, DType::f32, TensorKind::activation);
  OpSpec fwd{.name = "relu", .type = "Relu", .inputs = {x}, .outputs = {y}};
  fwd.work = OpWork{128, 512, 512, OpClass::elementwise};
  b.add_op(std::move(fwd));
  OpSpec grad{.name = "relu_grad", .type = "ReluGrad", .inputs = {y}, .outputs = {dx}, .role = OpRole::backward, .forward_op = 0};
  grad.work = OpWork{128, 512, 512, OpClass::elementwise};
  b.add_op(std::move(grad));
  b.set_num_forward_ops(1);
  const Graph g = std::move(b).build();
  Device cpu = gpu(), dev = gpu();
  cpu.name = "cpu:0", cpu.kind = DeviceKind::cpu;
  dev.backward_op_overhead_s = 1e-3;
  const Cluster c = Cluster::build("t", {cpu, dev}, {}, {Link{.a = "cpu:0", .b = "gpu:0", .bandwidth_ab_bytes_per_s = 1e10,
                                                              .bandwidth_ba_bytes_per_s = 1e10, .latency_s = 1e-5}});
  const CostTable t(g, c, CostModel::defaults());
  EXPECT_DOUBLE_EQ(t.time_s(1, 1) - t.time_s(0, 1), 1e-3 - 1e-5) << "same work, the gradient pays its own overhead";
  EXPECT_DOUBLE_EQ(t.time_s(1, 0), t.time_s(0, 0)) << "a device without a gradient overhead prices both alike";
}

TEST(Profile, AFittedModelReplacesTheDevicesOwnEfficiencies) {
  Graph g = one_op_graph();
  Device cpu = gpu();
  cpu.name = "cpu:0", cpu.kind = DeviceKind::cpu;
  Device own = gpu();
  own.efficiency[static_cast<std::size_t>(OpClass::matmul)] = {.compute = 1e-6, .memory = 1e-6};  // absurdly slow
  Cluster c = Cluster::build("t", {cpu, own}, {}, {Link{.a = "cpu:0", .b = "gpu:0", .bandwidth_ab_bytes_per_s = 1e10,
                                                        .bandwidth_ba_bytes_per_s = 1e10, .latency_s = 1e-5}});
  const double with_own = CostTable(g, c, CostModel::defaults()).time_s(0, 1);
  Profile p;
  p.set_model(CostModel::defaults());
  const double with_fit = CostTable(g, c, CostModel::defaults(), &p).time_s(0, 1);
  EXPECT_GT(with_own, 1e-3);
  EXPECT_DOUBLE_EQ(with_fit, modelled_time_s(g.op_work(0), own, CostModel::defaults(), false));
}

TEST(Profile, RoundTripsThroughJson) {
  Profile p;
  p.device_description = "test box";
  p.set_by_name(DeviceKind::cpu, "mm", 1e-3);
  p.set_by_signature(DeviceKind::gpu, "Relu(4x4)", 2e-6);
  CostModel m = CostModel::defaults();
  m.of(DeviceKind::gpu, OpClass::conv).compute = 0.42;
  p.set_model(m);
  Profile back = Profile::from_json(p.to_json(), "t");
  EXPECT_EQ(back.to_json(), p.to_json());
  EXPECT_DOUBLE_EQ(back.model()->of(DeviceKind::gpu, OpClass::conv).compute, 0.42);
  EXPECT_EQ(back.find(DeviceKind::cpu, "mm", ""), 1e-3);
  m.of(DeviceKind::gpu, OpClass::conv, true).compute = 0.21;
  m.backward_overhead_scale = 4.5;
  p.set_model(m);
  back = Profile::from_json(p.to_json(), "t");
  EXPECT_DOUBLE_EQ(back.model()->of(DeviceKind::gpu, OpClass::conv, true).compute, 0.21);
  EXPECT_DOUBLE_EQ(back.model()->backward_overhead_scale, 4.5);
}

// A profile's fitted model prices the device kinds the profile measured, with each kind's own
// overhead scale; devices of other kinds are priced as without a profile (a CPU-only profile
// nearly doubled an H100's predictions with default GPU efficiencies and the CPU's overhead scale).
TEST(Profile, AFittedModelPricesOnlyTheKindsItMeasuredWithTheirOwnOverheads) {
  const Graph g = one_op_graph();
  const Cluster c = one_gpu();
  const CostTable plain(g, c, CostModel::defaults());
  CostModel m = CostModel::defaults();
  m.of(DeviceKind::cpu, OpClass::matmul) = {0.01, 0.01};
  m.of(DeviceKind::gpu, OpClass::matmul) = {0.01, 0.01};
  m.overhead_scale = 3.0;
  // Written as before this rule: both kinds named, only the CPU measured (a time of another op).
  Profile legacy;
  legacy.set_by_name(DeviceKind::cpu, "another_op", 1e-3);
  legacy.set_model(m);
  nlohmann::json j = legacy.to_json();
  ASSERT_TRUE(j["model"]["efficiency"].contains("gpu"));
  j["model"].erase("kinds");  // as files written before the field
  j["model"].erase("overhead_scales");
  j["model"].erase("backward_overhead_scales");
  const Profile cpu_only = Profile::from_json(j, "legacy.json");
  EXPECT_TRUE(cpu_only.model()->prices[static_cast<std::size_t>(DeviceKind::cpu)]);
  EXPECT_FALSE(cpu_only.model()->prices[static_cast<std::size_t>(DeviceKind::gpu)]);
  const CostTable priced(g, c, CostModel::defaults(), &cpu_only);
  EXPECT_DOUBLE_EQ(priced.time_s(0, 1), plain.time_s(0, 1)) << "the GPU was not measured";
  EXPECT_DOUBLE_EQ(priced.time_s(0, 0), modelled_time_s(g.op_work(0), c.device(0), m, false));
  EXPECT_GT(priced.time_s(0, 0), plain.time_s(0, 0));
  // Written now: only the measured kind's efficiencies, and its own scale.
  EXPECT_FALSE(cpu_only.to_json()["model"]["efficiency"].contains("gpu"));

  // Both kinds measured, each with its overhead scale.
  m.kind_overhead_scale = {2.0, 0.5};
  m.kind_backward_overhead_scale = {4.0, 1.5};
  Profile both;
  both.set_by_name(DeviceKind::cpu, "another_op", 1e-3);
  both.set_by_signature(DeviceKind::gpu, "Relu(4x4)", 2e-6);
  both.set_model(m);
  const Profile back = Profile::from_json(both.to_json(), "both.json");
  EXPECT_EQ(back.to_json(), both.to_json());
  // The kinds are written explicitly: a model that prices a kind the profile has no times for
  // reads back the same.
  Profile model_only_gpu_times;
  model_only_gpu_times.set_by_signature(DeviceKind::gpu, "Relu(4x4)", 2e-6);
  model_only_gpu_times.set_model(m);  // prices both kinds
  const Profile again = Profile::from_json(model_only_gpu_times.to_json(), "again.json");
  EXPECT_TRUE(again.model()->prices[static_cast<std::size_t>(DeviceKind::cpu)]);
  EXPECT_EQ(again.to_json(), model_only_gpu_times.to_json());
  EXPECT_DOUBLE_EQ(back.model()->overhead_scale_of(DeviceKind::cpu, false), 2.0);
  EXPECT_DOUBLE_EQ(back.model()->overhead_scale_of(DeviceKind::gpu, false), 0.5);
  EXPECT_DOUBLE_EQ(back.model()->overhead_scale_of(DeviceKind::cpu, true), 4.0);
  EXPECT_DOUBLE_EQ(back.model()->overhead_scale_of(DeviceKind::gpu, true), 1.5);
  const CostTable scaled(g, c, CostModel::defaults(), &back);
  const OpWork no_work{0, 0, 0, OpClass::matmul};  // the overhead alone
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, c.device(0), *back.model(), false), 2.0 * c.device(0).op_overhead_s);
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, c.device(1), *back.model(), false), 0.5 * c.device(1).op_overhead_s);
  EXPECT_DOUBLE_EQ(scaled.time_s(0, 1), modelled_time_s(g.op_work(0), c.device(1), *back.model(), false));

  // A model that names no kind prices the kinds the profile has times for (formats.md said every
  // kind; found by review): a global overhead scale with GPU times alone leaves the CPU as it was.
  Profile gpu_only;
  gpu_only.set_by_signature(DeviceKind::gpu, "Relu(4x4)", 2e-6);
  gpu_only.set_model(CostModel::defaults());
  nlohmann::json gpu_times = gpu_only.to_json();
  gpu_times["model"] = {{"overhead_scale", 2.0}};
  const Profile unnamed = Profile::from_json(gpu_times, "unnamed.json");
  EXPECT_FALSE(unnamed.model()->prices[static_cast<std::size_t>(DeviceKind::cpu)]);
  EXPECT_TRUE(unnamed.model()->prices[static_cast<std::size_t>(DeviceKind::gpu)]);
  EXPECT_DOUBLE_EQ(CostTable(g, c, CostModel::defaults(), &unnamed).time_s(0, 0), plain.time_s(0, 0));
}

// A device whose cluster entry gives no per-op overhead (0) cannot be scaled to the fitted one: it
// pays the kind's fitted overhead in seconds instead (placer profile dropped it). Devices with an
// overhead of their own keep their scale.
TEST(Profile, ADeviceWithoutOverheadPaysTheKindsFittedOverheadInSeconds) {
  const Cluster c = one_gpu();
  Device no_overhead = c.device(0);  // the CPU
  no_overhead.op_overhead_s = 0;
  CostModel m = CostModel::defaults();
  m.kind_overhead_scale = {2.0, 0.5};
  m.kind_overhead_s = {7e-6, 30e-6};
  m.kind_backward_overhead_s = {9e-6, 45e-6};
  const OpWork no_work{0, 0, 0, OpClass::matmul};
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, no_overhead, m, false), 7e-6);
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, no_overhead, m, false, true), 9e-6);
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, c.device(1), m, false), 0.5 * c.device(1).op_overhead_s) << "its own, scaled";
  // Through the profile file: written and read back; a model without the field adds nothing.
  Profile p;
  p.set_by_name(DeviceKind::cpu, "another_op", 1e-3);
  p.set_model(m);
  nlohmann::json j = p.to_json();
  EXPECT_DOUBLE_EQ(j["model"]["overheads_s"]["cpu"].get<double>(), 7e-6);
  Profile back = Profile::from_json(j, "p.json");
  EXPECT_EQ(back.to_json(), j);
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, no_overhead, *back.model(), false, true), 9e-6);
  j["model"].erase("backward_overheads_s");
  back = Profile::from_json(j, "p.json");
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, no_overhead, *back.model(), false, true), 7e-6) << "gradients take the forward overhead";
  j["model"].erase("overheads_s");
  back = Profile::from_json(j, "p.json");
  EXPECT_DOUBLE_EQ(modelled_time_s(no_work, no_overhead, *back.model(), false), 0.0);
  for (const char* bad : {R"(-1e-6)", R"("7us")"}) {
    j["model"]["overheads_s"] = {{"cpu", nlohmann::json::parse(bad)}};
    EXPECT_THAT([&] { (void)Profile::from_json(j, "p.json"); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr("model.overheads_s.cpu must be a non-negative number of seconds")));
  }
  j["model"]["overheads_s"] = {{"tpu", 1e-6}};
  EXPECT_THROW((void)Profile::from_json(j, "p.json"), Error);
}

// Exporters reuse op names across models ('/conv1/Conv' in cifarnet and ResNet-50): a time by name
// applies to an op of another signature only when the profile did not record the signature.
TEST(Profile, ATimeByNameIsForTheSignatureItWasMeasuredWith) {
  const Graph g = one_op_graph();  // 'mm': MatMul(8x16,16x4)
  const Cluster c = one_gpu();
  Profile p;
  p.set_by_name(DeviceKind::gpu, "mm", 0.5);
  EXPECT_DOUBLE_EQ(CostTable(g, c, CostModel::defaults(), &p).time_s(0, 1), 0.5) << "no signature recorded: by name";
  p.set_op_signature("mm", "MatMul(4x8,8x8)");
  const Profile back = Profile::from_json(p.to_json(), "p.json");
  const CostTable other(g, c, CostModel::defaults(), &back);
  EXPECT_EQ(other.source(0, 1), CostSource::modelled) << "another op of the same name";
  EXPECT_FALSE(back.find_by_name(DeviceKind::gpu, "mm", "MatMul(8x16,16x4)").has_value());
  p.set_op_signature("mm", "MatMul(8x16,16x4)");
  EXPECT_DOUBLE_EQ(CostTable(g, c, CostModel::defaults(), &p).time_s(0, 1), 0.5);
  p.set_by_signature(DeviceKind::gpu, "MatMul(8x16,16x4)", 0.25);
  p.set_op_signature("mm", "MatMul(4x8,8x8)");
  EXPECT_DOUBLE_EQ(CostTable(g, c, CostModel::defaults(), &p).time_s(0, 1), 0.25) << "then by signature";
}

TEST(Profile, AModelWithoutGradientFieldsPricesGradientsAsForwardOps) {
  nlohmann::json j = {{"format", "placer-profile"},
                      {"version", 1},
                      {"model", {{"efficiency", {{"gpu", {{"conv", {{"compute", 0.42}, {"memory", 0.3}}}}}}}, {"overhead_scale", 2.0}}}};
  Profile p = Profile::from_json(j, "old.json");
  EXPECT_DOUBLE_EQ(p.model()->of(DeviceKind::gpu, OpClass::conv, true).compute, 0.42);
  EXPECT_DOUBLE_EQ(p.model()->of(DeviceKind::gpu, OpClass::conv, true).memory, 0.3);
  EXPECT_DOUBLE_EQ(p.model()->backward_overhead_scale, 2.0);
  j["model"]["backward_overhead_scale"] = -1;
  EXPECT_THROW(Profile::from_json(j, "bad.json"), Error);
}

TEST(Profile, BadInputIsAnError) {
  EXPECT_THROW(Profile::from_json(nlohmann::json::parse(R"({"format": "other"})"), "t"), Error);
  EXPECT_THROW(Profile::from_json(nlohmann::json::parse(R"({"format": "placer-profile", "version": 9})"), "t"), Error);
  EXPECT_THROW(Profile::from_json(nlohmann::json::parse(
                                      R"({"format": "placer-profile", "version": 1, "times_s": {"gpu": {"ops": {"a": -1}}}})"),
                                  "t"),
               Error);
  EXPECT_THROW(Profile::from_json(nlohmann::json::parse(
                                      R"({"format": "placer-profile", "version": 1, "times_s": {"tpu": {"ops": {}}}})"),
                                  "t"),
               Error);
  EXPECT_THROW(Profile::load("/nonexistent/profile.json"), Error);
  // A positive time under a picosecond is no measurement (it made `placer fit` write NaN
  // efficiencies); 0 and a picosecond are times.
  EXPECT_THAT([] { (void)Profile::from_json(nlohmann::json::parse(R"({"format": "placer-profile", "version": 1,
                       "times_s": {"gpu": {"ops": {"a": 5e-324, "b": 1e-3}}}})"), "t"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("time of 'a' is 4.94066e-324 s: under a picosecond")));
  EXPECT_NO_THROW((void)Profile::from_json(nlohmann::json::parse(R"({"format": "placer-profile", "version": 1,
                       "times_s": {"gpu": {"ops": {"a": 0, "b": 1e-12}}}})"), "t"));
}

TEST(Profile, MisspeltOrMistypedFieldsAreNamed) {
  auto message = [](const char* text) {
    try {
      (void)Profile::from_json(nlohmann::json::parse(text), "p.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "time_s": {}})"), ::testing::HasSubstr("unknown field 'time_s'"));
  // A kind timed by nothing but zeros measures nothing (it priced steps at 0 s), even beside a
  // kind with real times; one op of 0 s among others is fine (folded ops are written so).
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "times_s": {"cpu": {"ops": {"a": 0.001}}, "gpu": {"ops": {"a": 0, "b": 0}}}})"),
              ::testing::HasSubstr("times_s.gpu: all its 2 times are 0 s"));
  EXPECT_EQ(message(R"({"format": "placer-profile", "version": 1, "times_s": {"gpu": {"ops": {"a": 0, "b": 0.001}}}})"), "no error");
  // Neither times nor a model changes nothing: refused (it was used silently: a review).
  for (const char* empty : {R"({"format": "placer-profile", "version": 1})", R"({"format": "placer-profile", "version": 1, "times_s": {}})",
                            R"({"format": "placer-profile", "version": 1, "times_s": {"cpu": {"ops": {}}}})"})
    EXPECT_THAT(message(empty), ::testing::HasSubstr("p.json: it holds no op times ('times_s') and no fitted model ('model'): it measures nothing"))
        << empty;
  EXPECT_EQ(message(R"({"format": "placer-profile", "version": 1, "model": {"overhead_scale": 1}})"), "no error");
  EXPECT_THAT(message(R"({"format": "placer-profile"})"), ::testing::HasSubstr("missing field 'version'"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "times_s": {"gpu": {"op": {}}}})"),
              ::testing::HasSubstr("times_s.gpu: unknown field 'op'"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "times_s": {"gpu": [1]}})"), ::testing::HasSubstr("times_s.gpu must be"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "model": {"overhead_scale": "x"}})"),
              ::testing::HasSubstr("overhead_scale must be a non-negative number"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "model": {"efficiency": {"gpu": {"conv": {"compute": "fast"}}}}})"),
              ::testing::HasSubstr("model.efficiency.gpu.conv.compute must be a number"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1, "model": {"efficiency": {"gpu": {"conv": {"comptue": 0.5}}}}})"),
              ::testing::HasSubstr("unknown field 'comptue'"));
  // Found by InputMutation (tests/sim): a format or version of another type was a JSON library
  // exception, not a placer error.
  EXPECT_THAT(message(R"({"format": 3, "version": 1})"), ::testing::HasSubstr("p.json: not a placer profile"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": ""})"), ::testing::HasSubstr("p.json: field 'version' must be an integer, got \"\""));
  // As in every placer JSON file, an integer field takes integers only (1.0 was read as 1).
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 1.0})"), ::testing::HasSubstr("field 'version' must be an integer, got 1.0"));
  EXPECT_THAT(message(R"({"format": "placer-profile"})"), ::testing::HasSubstr("missing field 'version'"));
  EXPECT_THAT(message(R"({"format": "placer-profile", "version": 2})"),
              ::testing::HasSubstr("profile format version 2 is newer than this placer reads (1)"));
}

// Scratch memory of a CPU convolution (oneDNN's reordered operands, measured with libtorch 1.13:
// docs/cost-model.md#workspaces), held while it runs; none on a GPU, none for other ops.
TEST(CostTable, ConvolutionsOnTheCpuHoldWorkspaces) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  auto with_group = [](std::int64_t group) { return conv_attributes(group); };
  const OpWork work{1e6, 1e6, 1e6, OpClass::conv};
  // A 3x3 convolution over 32 samples: 24.5 MiB in, 49 MiB out, a 288 KiB weight.
  const TensorId x = tensor("x", {32, 64, 56, 56}, TensorKind::data), w = tensor("w", {128, 64, 3, 3}, TensorKind::parameter);
  const TensorId y = tensor("y", {32, 128, 56, 56});
  // A 1x1 convolution over 8 samples (libtorch runs it without oneDNN on one thread).
  const TensorId w1 = tensor("w1", {128, 128, 1, 1}, TensorKind::parameter), y1 = tensor("y1", {32, 128, 56, 56});
  const TensorId x8 = tensor("x8", {8, 16, 10, 10}, TensorKind::data), w8 = tensor("w8", {16, 16, 1, 1}, TensorKind::parameter);
  const TensorId y8 = tensor("y8", {8, 16, 10, 10});
  // A depthwise (grouped) convolution.
  const TensorId wd = tensor("wd", {16, 1, 3, 3}, TensorKind::parameter), yd = tensor("yd", {8, 16, 10, 10});
  b.add_op({.name = "conv", .type = "Conv", .inputs = {x, w}, .outputs = {y}, .attrs = with_group(1), .work = work});
  b.add_op({.name = "conv1x1", .type = "Conv", .inputs = {y, w1}, .outputs = {y1}, .attrs = with_group(1), .work = work});
  b.add_op({.name = "small1x1", .type = "Conv", .inputs = {x8, w8}, .outputs = {y8}, .attrs = with_group(1), .work = work});
  b.add_op({.name = "depthwise", .type = "Conv", .inputs = {y8, wd}, .outputs = {yd}, .attrs = with_group(16), .work = work});
  b.add_op({.name = "relu", .type = "Relu", .inputs = {y1}, .outputs = {tensor("r", {32, 128, 56, 56})},
            .work = {1e6, 1e6, 1e6, OpClass::elementwise}});
  const TensorId dy = tensor("dy", {32, 128, 56, 56}, TensorKind::data), dx = tensor("dx", {32, 64, 56, 56}, TensorKind::gradient);
  const TensorId dw = tensor("dw", {128, 64, 3, 3}, TensorKind::gradient), dyd = tensor("dyd", {8, 16, 10, 10}, TensorKind::data);
  const TensorId dy8 = tensor("dy8", {8, 16, 10, 10}, TensorKind::gradient), dwd = tensor("dwd", {16, 1, 3, 3}, TensorKind::gradient);
  const TensorId dwd2 = tensor("dwd2", {16, 1, 3, 3}, TensorKind::gradient);
  b.add_op({.name = "conv/grad", .type = "ConvGrad", .inputs = {dy, x, w}, .outputs = {dx, dw}, .attrs = with_group(1),
            .role = OpRole::backward, .forward_op = 0, .work = work});
  b.add_op({.name = "depthwise/grad", .type = "ConvGrad", .inputs = {dyd, y8, wd}, .outputs = {dy8, dwd}, .attrs = with_group(16),
            .role = OpRole::backward, .forward_op = 3, .work = work});
  b.add_op({.name = "depthwise/grad_w", .type = "ConvGrad", .inputs = {dyd, y8, wd}, .outputs = {dwd2}, .attrs = with_group(16),
            .role = OpRole::backward, .forward_op = 3, .work = work});
  b.set_num_forward_ops(5);
  const Graph g = std::move(b).build();
  const std::uint64_t in = 32ull * 64 * 56 * 56 * 4, out = 2 * in;
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::cpu), out) << "the blocked output, larger than the input and the weight";
  EXPECT_EQ(op_workspace_bytes(g, 1, DeviceKind::cpu), out + 128 * 128 * 4) << "1x1 over 32 samples: oneDNN; the input and the weight";
  EXPECT_EQ(op_workspace_bytes(g, 2, DeviceKind::cpu), 0u) << "1x1 over 8 samples: libtorch's own kernel";
  EXPECT_EQ(op_workspace_bytes(g, 3, DeviceKind::cpu), 8u * 16 * 100 * 4 + 16 * 9 * 4);
  EXPECT_EQ(op_workspace_bytes(g, 4, DeviceKind::cpu), 0u) << "not a convolution";
  EXPECT_EQ(op_workspace_bytes(g, 5, DeviceKind::cpu), in + out) << "the gradient: its forward input and dY";
  EXPECT_EQ(op_workspace_bytes(g, 6, DeviceKind::cpu), 2u * 8 * 16 * 100 * 4) << "depthwise 3x3, with a data gradient: dY and dX in blocks";
  EXPECT_EQ(op_workspace_bytes(g, 7, DeviceKind::cpu), 0u) << "grouped, the weight's gradient alone";
  for (OpId o = 0; o < g.num_ops(); ++o) EXPECT_EQ(op_workspace_bytes(g, o, DeviceKind::gpu), 0u) << "cuDNN's: not measured";
  const CostTable t(g, one_gpu(), CostModel::defaults());
  EXPECT_EQ(t.workspace_bytes(0, 0), out);
  EXPECT_EQ(t.workspace_bytes(0, 1), 0u);
  EXPECT_EQ(t.workspaces().size(), g.num_ops() * 2);
}

// A gradient formula evaluated as several kernels holds their temporaries while it runs (measured on
// libtorch 1.13: erf's four, in tensors of its input), on every device; fused ones hold none. A
// Mul's gradient for a broadcast operand multiplies at the output's size before reducing.
TEST(CostTable, GradientFormulasHoldTheirTemporaries) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  const OpWork pointwise{32, 128, 128, OpClass::elementwise};
  const TensorId x = tensor("x", {4, 8}, TensorKind::data), w = tensor("w", {8}, TensorKind::parameter);
  const TensorId a = tensor("a", {4, 8}), e = tensor("e", {4, 8}), t = tensor("t", {4, 8}), s = tensor("s", {4, 8});
  b.add_op({.name = "scale", .type = "Mul", .inputs = {x, w}, .outputs = {a}, .work = pointwise});
  b.add_op({.name = "erf", .type = "Erf", .inputs = {a}, .outputs = {e}, .work = pointwise});
  b.add_op({.name = "tanh", .type = "Tanh", .inputs = {e}, .outputs = {t}, .work = pointwise});
  b.add_op({.name = "square", .type = "Mul", .inputs = {t, t}, .outputs = {s}, .work = pointwise});
  const TensorId v = tensor("v", {4, 8}, TensorKind::parameter), q = tensor("q", {4, 8}), r = tensor("r", {4, 8});
  b.add_op({.name = "over", .type = "Div", .inputs = {s, v}, .outputs = {q}, .work = pointwise});
  b.add_op({.name = "halve", .type = "Div", .inputs = {q, tensor("two", {}, TensorKind::constant)}, .outputs = {r}, .work = pointwise});
  const TensorId dr = tensor("dr", {4, 8}, TensorKind::data), dq = tensor("dq", {4, 8}, TensorKind::gradient);
  const TensorId ds = tensor("ds", {4, 8}, TensorKind::gradient), dv = tensor("grad/v/over", {4, 8}, TensorKind::gradient);
  const TensorId dt = tensor("dt", {4, 8}, TensorKind::gradient);
  const TensorId de = tensor("de", {4, 8}, TensorKind::gradient), da = tensor("da", {4, 8}, TensorKind::gradient);
  const TensorId dw = tensor("dw", {8}, TensorKind::gradient);
  auto grad = [&](const char* name, const char* type, std::vector<TensorId> ins, std::vector<TensorId> outs, OpId fwd) {
    b.add_op({.name = name, .type = type, .inputs = std::move(ins), .outputs = std::move(outs), .role = OpRole::backward, .forward_op = fwd,
              .work = pointwise});
  };
  grad("halve/grad", "DivGrad", {dr}, {dq}, 5);
  grad("over/grad", "DivGrad", {dq, s, v}, {ds, dv}, 4);
  grad("square/grad", "MulGrad", {ds, t}, {dt}, 3);
  grad("tanh/grad", "TanhGrad", {dt, t}, {de}, 2);
  grad("erf/grad", "ErfGrad", {de, a}, {da}, 1);
  grad("scale/grad", "MulGrad", {da, x}, {dw}, 0);
  b.set_num_forward_ops(6);
  const Graph g = std::move(b).build();
  const std::uint64_t bytes = 4 * 8 * 4;
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
    EXPECT_EQ(op_workspace_bytes(g, 1, kind), 0u) << "forward: none";
    EXPECT_EQ(op_workspace_bytes(g, 6, kind), 0u) << "q / 2: dQ = dR / 2";
    EXPECT_EQ(op_workspace_bytes(g, 7, kind), 2 * bytes) << "s / v, v of the output's size: dV = -dQ * s / v²";
    EXPECT_EQ(op_workspace_bytes(g, 8, kind), bytes) << "x * x";
    EXPECT_EQ(op_workspace_bytes(g, 9, kind), 0u) << "tanh's gradient is one kernel";
    EXPECT_EQ(op_workspace_bytes(g, 10, kind), 4 * bytes) << "erf's: x², -x², exp(-x²), ...";
    EXPECT_EQ(op_workspace_bytes(g, 11, kind), bytes) << "dW = sum(dA * x): the product at A's size";
  }
}

// libtorch 1.13 runs an ungrouped 2-D convolution of one sample with at most 20,480 input elements
// and a kernel of at most 3 without oneDNN: slow_conv2d's columns, [C_in x kernel, output positions],
// forward and backward (a 1-D one whatever its kernel); with two samples, more elements, or a larger
// kernel, oneDNN's reorders.
TEST(CostTable, ASmallConvolutionOfOneSampleHoldsItsColumns) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  const OpWork work{1e6, 1e6, 1e6, OpClass::conv};
  auto conv = [&](const std::string& name, std::vector<std::int64_t> x, std::int64_t k) {
    const TensorId in = tensor(name + "_x", x, TensorKind::data), w = tensor(name + "_w", {32, x[1], k, k}, TensorKind::parameter);
    const TensorId y = tensor(name + "_y", {x[0], 32, x[2] - k + 1, x[3] - k + 1});
    b.add_op({.name = name, .type = "Conv", .inputs = {in, w}, .outputs = {y}, .attrs = conv_attributes(1), .work = work});
  };
  conv("one", {1, 32, 16, 16}, 3);       // 8,192 elements: columns of 32 x 9 by 14 x 14
  conv("two", {2, 32, 16, 16}, 3);       // two samples: oneDNN
  conv("large", {1, 32, 28, 28}, 3);     // 25,088 elements: oneDNN
  conv("kernel5", {1, 32, 16, 16}, 5);   // a 5x5 kernel: oneDNN
  // A 1-D one runs as 2-D of kernel height 1: slow_conv2d's columns whatever its kernel.
  const TensorId x1 = tensor("oned_x", {1, 32, 256}, TensorKind::data), w1 = tensor("oned_w", {32, 32, 5}, TensorKind::parameter);
  b.add_op({.name = "oned", .type = "Conv", .inputs = {x1, w1}, .outputs = {tensor("oned_y", {1, 32, 252})}, .attrs = conv_attributes(1), .work = work});
  b.set_num_forward_ops(5);
  const Graph g = std::move(b).build();
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::cpu), 32u * 9 * 14 * 14 * 4);
  const auto onednn = [&](OpId o) { return g.tensor_bytes(g.op_inputs(o)[0]) + g.tensor_bytes(g.op_inputs(o)[1]); };  // input > output here
  for (OpId o = 1; o < 4; ++o) EXPECT_EQ(op_workspace_bytes(g, o, DeviceKind::cpu), onednn(o)) << g.op_name(o);
  EXPECT_EQ(op_workspace_bytes(g, 4, DeviceKind::cpu), 32u * 5 * 252 * 4);
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::gpu), 0u);
}

// An instance normalization's gradient holds one tensor of its input's size when it computes the
// input's gradient (measured: one input at five sizes), none when only scale and bias take one.
TEST(CostTable, AnInstanceNormalizationsInputGradientHoldsOneInput) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  const OpWork work{1e6, 1e6, 1e6, OpClass::normalization};
  const TensorId x = tensor("x", {2, 4, 8, 8}, TensorKind::data), s = tensor("s", {4}, TensorKind::parameter), bias = tensor("b", {4}, TensorKind::parameter);
  b.add_op({.name = "in", .type = "InstanceNormalization", .inputs = {x, s, bias}, .outputs = {tensor("y", {2, 4, 8, 8})}, .work = work});
  const TensorId dy = tensor("dy", {2, 4, 8, 8}, TensorKind::data);
  auto grad = [&](const std::string& name, std::vector<TensorId> outs) {
    b.add_op({.name = name, .type = "InstanceNormalizationGrad", .inputs = {dy, x, s}, .outputs = std::move(outs), .role = OpRole::backward,
              .forward_op = 0, .work = work});
  };
  grad("in/grad", {tensor("grad/x/in", {2, 4, 8, 8}, TensorKind::gradient), tensor("grad/s/in", {4}, TensorKind::gradient)});
  grad("in/grad_params", {tensor("grad/s/in_", {4}, TensorKind::gradient), tensor("grad/b/in", {4}, TensorKind::gradient)});
  b.set_num_forward_ops(1);
  const Graph g = std::move(b).build();
  EXPECT_EQ(op_workspace_bytes(g, 1, DeviceKind::cpu), 2u * 4 * 8 * 8 * 4) << "dX: one input";
  EXPECT_EQ(op_workspace_bytes(g, 2, DeviceKind::cpu), 0u) << "scale and bias alone";
  EXPECT_EQ(op_workspace_bytes(g, 1, DeviceKind::gpu), 0u) << "libtorch's CPU kernel's buffer: cuDNN's not measured";
}

// A transposed convolution on the CPU (libtorch's slow_conv_transpose2d) runs a sample at a time
// through columns of [out channels x kernel elements, input's spatial elements], and so does its
// gradient; none on a GPU.
TEST(CostTable, ATransposedConvolutionAndItsGradientHoldOneSamplesColumns) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  auto conv_attrs = [](std::int64_t group) { return conv_attributes(group, {2, 2}); };
  const OpWork work{1e6, 1e6, 1e6, OpClass::conv};
  // [2, 8, 5, 5] up to [2, 4, 11, 11] by 3x3 filters of stride 2; then grouped (2 groups of 2 out channels).
  const TensorId x = tensor("x", {2, 8, 5, 5}, TensorKind::data), w = tensor("w", {8, 4, 3, 3}, TensorKind::parameter);
  const TensorId wg = tensor("wg", {8, 2, 3, 3}, TensorKind::parameter);
  const TensorId y = tensor("y", {2, 4, 11, 11}), yg = tensor("yg", {2, 4, 11, 11});
  b.add_op({.name = "up", .type = "ConvTranspose", .inputs = {x, w}, .outputs = {y}, .attrs = conv_attrs(1), .work = work});
  b.add_op({.name = "up_grouped", .type = "ConvTranspose", .inputs = {x, wg}, .outputs = {yg}, .attrs = conv_attrs(2), .work = work});
  b.add_op({.name = "up/grad", .type = "ConvTransposeGrad", .inputs = {tensor("dy", {2, 4, 11, 11}, TensorKind::data), x, w},
            .outputs = {tensor("grad/w/up", {8, 4, 3, 3}, TensorKind::gradient)}, .role = OpRole::backward, .forward_op = 0, .work = work});
  b.set_num_forward_ops(2);
  const Graph g = std::move(b).build();
  const std::uint64_t columns = 4 * 9 * 25 * 4;  // 4 out channels x 9 kernel elements, 25 input positions, float32
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::cpu), columns);
  EXPECT_EQ(op_workspace_bytes(g, 1, DeviceKind::cpu), columns) << "out channels: 2 per group x 2 groups";
  EXPECT_EQ(op_workspace_bytes(g, 2, DeviceKind::cpu), columns) << "the gradient, through the same columns";
  for (OpId o = 0; o < 3; ++o) EXPECT_EQ(op_workspace_bytes(g, o, DeviceKind::gpu), 0u);
}

// Shapes whose workspace overflows 64 bits (a graph JSON file's) give the largest a graph allows
// (2^62 bytes), not a product wrapped to a small number (a transposed convolution's columns of 2^64
// elements "fitted" on a 1 TB CPU; a review); a convolution whose output has another rank than its
// input (its FLOPs given, its shapes unchecked) has none (the rule read past the output's shape).
TEST(CostTable, AnOverflowingWorkspaceIsCappedAndABadConvolutionHasNone) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  const OpWork work{1e6, 1e6, 1e6, OpClass::conv};
  const TensorId x = tensor("x", {1, 1, 65536, 65536}, TensorKind::data), w = tensor("w", {1, 1, 65536, 65536}, TensorKind::parameter);
  b.add_op({.name = "up", .type = "ConvTranspose", .inputs = {x, w}, .outputs = {tensor("y", {1, 1, 131071, 131071})},
            .attrs = conv_attributes(1, {1, 1}), .work = work});
  const TensorId x2 = tensor("x2", {1, 3, 8, 8}, TensorKind::data), w2 = tensor("w2", {4, 3, 3, 3}, TensorKind::parameter);
  b.add_op({.name = "flat", .type = "Conv", .inputs = {x2, w2}, .outputs = {tensor("y2", {1, 4})}, .attrs = conv_attributes(1, {1, 1}),
            .work = work});
  const Graph g = std::move(b).build();
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::cpu), std::uint64_t{1} << 62);
  EXPECT_EQ(op_workspace_bytes(g, 1, DeviceKind::cpu), 0u);
}

// The keys of efficiency_by_type that no op of the graph has and that placer knows nowhere are
// named (a misspelt type was ignored without a word); known types, their gradients, the training
// step's own types and priced_type's keys are not, nor a type the graph has that no rule knows.
TEST(CostTable, NamesEfficiencyTypesThatPriceNothing) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  b.add_op({.name = "mine", .type = "MyOp", .inputs = {tensor("x", {4}, TensorKind::data)}, .outputs = {tensor("y", {4})},
            .work = {4, 16, 16, OpClass::elementwise}});
  const Graph g = std::move(b).build();
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  Device cpu1 = cpu;
  cpu1.name = "cpu:1";
  for (const char* known : {"MaxPool", "MaxPoolGrad", "Loss", "AdamUpdate", "SGDUpdate", "ConvDepthwiseStridedGrad", "PadEdge",
                            "BatchNormalizationTraining", "MyOp"})
    cpu.efficiency_by_type[known] = {.compute = 0.5, .memory = 0};
  const std::vector<Link> link{{.a = "cpu:0", .b = "cpu:1", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9}};
  EXPECT_THAT(unmatched_efficiency_types(g, Cluster::build("t", {cpu, cpu1}, {}, link)), ::testing::IsEmpty());
  cpu.efficiency_by_type["Maxpool"] = {.compute = 0.5, .memory = 0};
  cpu1.efficiency_by_type["Maxpool"] = {.compute = 0.5, .memory = 0};
  cpu1.efficiency_by_type["ReluGradient"] = {.compute = 0.5, .memory = 0};
  EXPECT_THAT(unmatched_efficiency_types(g, Cluster::build("t", {cpu, cpu1}, {}, link)),
              ::testing::ElementsAre("'Maxpool' (cpu:0, cpu:1)", "'ReluGradient' (cpu:1)"));
}

// A recurrent op's gradient on the CPU sums R's partial gradients over the time steps before it
// computes dX and dW (which the simulator holds for the whole op): one partial beside the sum (a
// second out of place), less dX and dW; a bidirectional one runs its directions in turn, and while
// the second runs the first's state is freed and its gradients done (docs/cost-model.md#workspaces).
TEST(CostTable, ARecurrentGradientHoldsItsWeightsPartialSums) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  auto attrs = [](bool bidirectional) {
    Attributes a;
    a.set(Attribute{.name = "hidden_size", .kind = Attribute::Kind::integer, .i = 32});
    if (bidirectional) a.set(Attribute{.name = "direction", .kind = Attribute::Kind::text, .s = "bidirectional"});
    return a;
  };
  const OpWork work{1e6, 1e6, 1e6, OpClass::matmul};
  // [seq 4, batch 2, input 8], hidden 32: R is [dirs, 128, 32] (16 KiB per direction), W [dirs, 128, 8].
  const TensorId x = tensor("x", {4, 2, 8}, TensorKind::data), w = tensor("W", {1, 128, 8}, TensorKind::parameter);
  const TensorId r = tensor("R", {1, 128, 32}, TensorKind::parameter);
  const TensorId y = tensor("y", {4, 1, 2, 32}), state = tensor("lstm/state", {7, 1, 4, 2, 32});
  const TensorId xb = tensor("xb", {4, 2, 8}), wb = tensor("Wb", {2, 128, 8}, TensorKind::parameter);
  const TensorId rb = tensor("Rb", {2, 128, 32}, TensorKind::parameter);
  const TensorId yb = tensor("yb", {4, 2, 2, 32}), stateb = tensor("bi/state", {7, 2, 4, 2, 32});
  const TensorId rc = tensor("Rc", {1, 128, 32}, TensorKind::constant), yc = tensor("yc", {4, 1, 2, 32});
  b.add_op({.name = "lstm", .type = "LSTM", .inputs = {x, w, r}, .outputs = {y, state}, .attrs = attrs(false), .work = work});
  b.add_op({.name = "proj", .type = "Relu", .inputs = {x}, .outputs = {xb}, .work = work});
  b.add_op({.name = "bi", .type = "LSTM", .inputs = {xb, wb, rb}, .outputs = {yb, stateb}, .attrs = attrs(true), .work = work});
  b.add_op({.name = "frozen", .type = "LSTM", .inputs = {x, w, rc}, .outputs = {yc}, .attrs = attrs(false), .work = work});
  auto grad = [&](const std::string& name, const std::string& type, std::vector<TensorId> ins, std::vector<TensorId> outs, OpId fwd) {
    b.add_op({.name = name, .type = type, .inputs = std::move(ins), .outputs = std::move(outs), .attrs = attrs(fwd == 2), .role = OpRole::backward,
              .forward_op = fwd, .work = work});
  };
  const TensorId dy = tensor("dy", {4, 1, 2, 32}, TensorKind::data), dyb = tensor("dyb", {4, 2, 2, 32}, TensorKind::data);
  grad("lstm/grad", "LSTMGrad", {dy, x, w, r, state},
       {tensor("grad/W/lstm", {1, 128, 8}, TensorKind::gradient), tensor("grad/R/lstm", {1, 128, 32}, TensorKind::gradient)}, 0);
  grad("bi/grad", "LSTMGrad", {dyb, xb, wb, rb, stateb},
       {tensor("grad/xb/bi", {4, 2, 8}, TensorKind::gradient), tensor("grad/Wb/bi", {2, 128, 8}, TensorKind::gradient),
        tensor("grad/Rb/bi", {2, 128, 32}, TensorKind::gradient)},
       2);
  grad("frozen/grad", "LSTMGrad", {dy, x, w, rc}, {tensor("grad/W/frozen", {1, 128, 8}, TensorKind::gradient)}, 3);
  b.set_num_forward_ops(4);
  const Graph g = std::move(b).build();
  const std::uint64_t R = 128 * 32 * 4, W = 128 * 8 * 4, dX = 4 * 2 * 8 * 4, state_dir = 7 * 4 * 2 * 32 * 4;
  // Uni: k R - dW (no dX: x is data).
  EXPECT_EQ(op_workspace_bytes(g, 4, DeviceKind::cpu), R - W);
  EXPECT_EQ(op_out_of_place_sum_bytes(g, 4, DeviceKind::cpu), R) << "2 R - dW";
  // Bidirectional, in place: the second direction's moment, R - dX - W - its state (4,864 bytes);
  // out of place: the larger of the first's, R - dX - 2W (7,936), and the second's, 2R - dX - W - state (21,248).
  EXPECT_EQ(op_workspace_bytes(g, 5, DeviceKind::cpu), R - dX - W - state_dir);
  EXPECT_EQ(op_workspace_bytes(g, 5, DeviceKind::cpu) + op_out_of_place_sum_bytes(g, 5, DeviceKind::cpu), 2 * R - dX - W - state_dir);
  EXPECT_EQ(op_workspace_bytes(g, 6, DeviceKind::cpu), 0u) << "R takes no gradient";
  EXPECT_EQ(op_out_of_place_sum_bytes(g, 6, DeviceKind::cpu), 0u);
  for (OpId o = 4; o < 7; ++o) {
    EXPECT_EQ(op_workspace_bytes(g, o, DeviceKind::gpu), 0u) << "cuDNN's gradient sums over the steps in one call";
    EXPECT_EQ(op_out_of_place_sum_bytes(g, o, DeviceKind::gpu), 0u);
  }
  const CostTable t(g, one_gpu(), CostModel::defaults());
  ASSERT_EQ(t.out_of_place_sums().size(), g.num_ops() * 2);
  EXPECT_EQ(t.out_of_place_sums()[4 * 2 + 0], R) << "cpu:0";
  EXPECT_EQ(t.out_of_place_sums()[4 * 2 + 1], 0u) << "gpu:0";
}

// A max pooling whose indices the graph does not keep (inference) holds them while it runs on the
// CPU: libtorch computes them and drops them (a QA pass: a MaxPool alone 18-29% under the host
// meter). A training step keeps them as an output, and then they are no workspace.
TEST(CostTable, AMaxPoolOnTheCpuHoldsItsIndicesWhileItRuns) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {8, 16, 32, 32}, DType::f32, TensorKind::data);
  const TensorId y = b.add_tensor("y", {8, 16, 16, 16}, DType::f32, TensorKind::activation);
  const TensorId x2 = b.add_tensor("x2", {8, 16, 32, 32}, DType::f32, TensorKind::data);
  const TensorId y2 = b.add_tensor("y2", {8, 16, 16, 16}, DType::f32, TensorKind::activation);
  const TensorId at = b.add_tensor("at", {8, 16, 16, 16}, DType::i64, TensorKind::activation);
  const OpWork pool{1e6, 1e6, 1e6, OpClass::pooling};
  b.add_op({.name = "pool", .type = "MaxPool", .inputs = {x}, .outputs = {y}, .work = pool});
  b.add_op({.name = "pool_kept", .type = "MaxPool", .inputs = {x2}, .outputs = {y2, at}, .work = pool});
  const Graph g = std::move(b).build();
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::cpu), 8ull * 16 * 16 * 16 * 8) << "int64 indices of Y's shape";
  EXPECT_EQ(op_workspace_bytes(g, 0, DeviceKind::gpu), 0u) << "not measured on a GPU";
  EXPECT_EQ(op_workspace_bytes(g, 1, DeviceKind::cpu), 0u) << "indices kept as an output";
}

// A device's efficiency for one op type (Device::efficiency_by_type: libtorch's CPU pooling, far
// below its class) prices ops of that type, forward or gradient by its own type name, with a fitted
// model as without one; other ops of the class keep the class's efficiencies.
TEST(CostTable, AnOpTypesOwnEfficiencyReplacesItsClasss) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {8, 16, 32, 32}, DType::f32, TensorKind::data);
  const TensorId y = b.add_tensor("y", {8, 16, 16, 16}, DType::f32, TensorKind::activation);
  const TensorId z = b.add_tensor("z", {8, 16, 16, 16}, DType::f32, TensorKind::activation);
  const TensorId dx = b.add_tensor("dx", {8, 16, 32, 32}, DType::f32, TensorKind::activation);
  const OpWork pool{1e6, 4e3, 4e3, OpClass::pooling};
  b.add_op({.name = "max", .type = "MaxPool", .inputs = {x}, .outputs = {y}, .work = pool});
  b.add_op({.name = "lp", .type = "LpPool", .inputs = {x}, .outputs = {z}, .work = pool});
  b.add_op({.name = "max_grad", .type = "MaxPoolGrad", .inputs = {y}, .outputs = {dx}, .role = OpRole::backward, .forward_op = 0,
            .work = pool});
  b.set_num_forward_ops(2);
  b.mark_output(z), b.mark_output(dx);
  const Graph g = std::move(b).build();
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  const CostModel defaults = CostModel::defaults();
  const double by_class = 1e-6 + 1e6 / (1e11 * defaults.of(DeviceKind::cpu, OpClass::pooling).compute);
  {
    const CostTable t(g, Cluster::build("t", {cpu}, {}, {}), defaults);
    EXPECT_DOUBLE_EQ(t.time_s(0, 0), by_class);
    EXPECT_DOUBLE_EQ(t.time_s(2, 0), by_class);
  }
  cpu.efficiency_by_type["MaxPool"] = {.compute = 0.001, .memory = 0};
  cpu.efficiency_by_type["MaxPoolGrad"] = {.compute = 0.004, .memory = 0};
  const Cluster c = Cluster::build("t", {cpu}, {}, {});
  const CostTable t(g, c, defaults);
  EXPECT_DOUBLE_EQ(t.time_s(0, 0), 1e-6 + 1e6 / (1e11 * 0.001)) << "10 ms: its type's efficiency";
  EXPECT_DOUBLE_EQ(t.time_s(1, 0), by_class) << "another pooling op keeps its class's";
  EXPECT_DOUBLE_EQ(t.time_s(2, 0), 1e-6 + 1e6 / (1e11 * 0.004)) << "a gradient by its own type";
  // A profile's fitted model replaces the class efficiencies, not the type's.
  Profile fitted;
  fitted.set_model(unit_model());
  const CostTable with_model(g, c, defaults, &fitted);
  EXPECT_DOUBLE_EQ(with_model.time_s(0, 0), 1e-6 + 1e6 / (1e11 * 0.001));
  EXPECT_DOUBLE_EQ(with_model.time_s(1, 0), 1e-6 + 1e6 / 1e11);
}

// A forward BatchNormalization normalising by its batch's statistics (in a training step, or with
// training_mode=1) is priced by the device's "BatchNormalizationTraining" efficiency, where libtorch's
// CPU kernel runs 5-10 times slower than with running statistics, and computes them (8 FLOPs per
// element, as op_work gives training_mode=1); with running statistics it keeps its class (or its
// "BatchNormalization" entry), and its gradient its own type's.
TEST(CostTable, BatchNormalizationByBatchStatisticsIsPricedApart) {
  const OpWork norm{4e6, 8e6, 4e6, OpClass::normalization};
  auto graph = [&](bool training_step, std::int64_t training_mode) {
    GraphBuilder b;
    const TensorId x = b.add_tensor("x", {4, 8, 32, 32}, DType::f32, TensorKind::data);
    const TensorId y = b.add_tensor("y", {4, 8, 32, 32}, DType::f32, TensorKind::activation);
    Attributes a;
    if (training_mode != 0) a.set(Attribute{.name = "training_mode", .kind = Attribute::Kind::integer, .i = training_mode});
    OpWork w = norm;
    if (training_mode != 0) w.flops *= 2;  // op_work's rule
    b.add_op({.name = "bn", .type = "BatchNormalization", .inputs = {x}, .outputs = {y}, .attrs = a, .work = w});
    if (training_step) {
      const TensorId dx = b.add_tensor("dx", {4, 8, 32, 32}, DType::f32, TensorKind::activation);
      b.add_op({.name = "bn_grad", .type = "BatchNormalizationGrad", .inputs = {y}, .outputs = {dx}, .role = OpRole::backward, .forward_op = 0,
                .work = norm});
      b.set_num_forward_ops(1);
      b.mark_output(dx);
    } else {
      b.mark_output(y);
    }
    return std::move(b).build();
  };
  const Graph step = graph(true, 0), inference = graph(false, 0), by_attribute = graph(false, 1);
  EXPECT_EQ(priced_type(step, 0), "BatchNormalizationTraining");
  EXPECT_EQ(priced_type(step, 1), "BatchNormalizationGrad");
  EXPECT_EQ(priced_type(inference, 0), "BatchNormalization");
  EXPECT_EQ(priced_type(by_attribute, 0), "BatchNormalizationTraining");
  EXPECT_DOUBLE_EQ(priced_work(step, 0).flops, 8e6) << "its statistics computed too";
  EXPECT_DOUBLE_EQ(priced_work(by_attribute, 0).flops, 8e6) << "op_work's rule already counts them";
  EXPECT_DOUBLE_EQ(priced_work(inference, 0).flops, 4e6);

  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  const CostModel defaults = CostModel::defaults();
  const double class_s = CostTable(inference, Cluster::build("t", {cpu}, {}, {}), defaults).time_s(0, 0);
  const double gradient_s = CostTable(step, Cluster::build("t", {cpu}, {}, {}), defaults).time_s(1, 0);
  const double step_class_s = CostTable(step, Cluster::build("t", {cpu}, {}, {}), defaults).time_s(0, 0);  // 8e6 FLOPs by its class
  cpu.efficiency_by_type["BatchNormalizationTraining"] = {.compute = 0.001, .memory = 0};
  const Cluster c = Cluster::build("t", {cpu}, {}, {});
  EXPECT_DOUBLE_EQ(CostTable(step, c, defaults).time_s(0, 0), 1e-6 + 8e6 / (1e11 * 0.001));
  EXPECT_DOUBLE_EQ(CostTable(by_attribute, c, defaults).time_s(0, 0), 1e-6 + 8e6 / (1e11 * 0.001));
  EXPECT_DOUBLE_EQ(CostTable(inference, c, defaults).time_s(0, 0), class_s) << "running statistics: its class";
  EXPECT_DOUBLE_EQ(CostTable(step, c, defaults).time_s(1, 0), gradient_s) << "the gradient: its own type's, here its class";
  // An entry for running statistics does not price batch statistics.
  Device other = cpu;
  other.efficiency_by_type = {{"BatchNormalization", {.compute = 0.0001, .memory = 0}}};
  const Cluster o = Cluster::build("t", {other}, {}, {});
  EXPECT_DOUBLE_EQ(CostTable(inference, o, defaults).time_s(0, 0), 1e-6 + 4e6 / (1e11 * 0.0001));
  EXPECT_DOUBLE_EQ(CostTable(step, o, defaults).time_s(0, 0), step_class_s) << "its class, not the inference entry";
}

// Depthwise convolutions (several groups of one input channel), strided or not, and reflect or
// edge pads are priced by their own keys (priced_type), looked up by that key alone; a dense or
// grouped convolution, a constant pad and a gradient that is not the forward op's own keep their
// type.
TEST(CostTable, DepthwiseConvolutionsAndReflectPadsArePricedByTheirOwnKeys) {
  GraphBuilder b;
  const TensorId x = b.add_tensor("x", {4, 16, 32, 32}, DType::f32, TensorKind::data);
  const TensorId dw = b.add_tensor("dw", {16, 1, 3, 3}, DType::f32, TensorKind::parameter);
  const TensorId gw = b.add_tensor("gw", {16, 4, 3, 3}, DType::f32, TensorKind::parameter);
  const TensorId y1 = b.add_tensor("y1", {4, 16, 32, 32}, DType::f32, TensorKind::activation);
  const TensorId y2 = b.add_tensor("y2", {4, 16, 16, 16}, DType::f32, TensorKind::activation);
  const TensorId y3 = b.add_tensor("y3", {4, 16, 32, 32}, DType::f32, TensorKind::activation);
  const TensorId p1 = b.add_tensor("p1", {4, 16, 34, 34}, DType::f32, TensorKind::activation);
  const TensorId p2 = b.add_tensor("p2", {4, 16, 34, 34}, DType::f32, TensorKind::activation);
  const TensorId p3 = b.add_tensor("p3", {4, 16, 34, 34}, DType::f32, TensorKind::activation);
  const TensorId dx = b.add_tensor("dx", {4, 16, 32, 32}, DType::f32, TensorKind::activation);
  const TensorId dx2 = b.add_tensor("dx2", {4, 16, 32, 32}, DType::f32, TensorKind::activation);
  const TensorId dx3 = b.add_tensor("dx3", {4, 16, 32, 32}, DType::f32, TensorKind::activation);
  auto attrs = [](std::int64_t group, std::int64_t stride) {
    Attributes a;
    a.set(Attribute{.name = "group", .kind = Attribute::Kind::integer, .i = group});
    a.set(Attribute{.name = "strides", .kind = Attribute::Kind::integers, .ints = {stride, stride}});
    return a;
  };
  auto mode = [](std::string m) {
    Attributes a;
    a.set(Attribute{.name = "mode", .kind = Attribute::Kind::text, .s = std::move(m)});
    return a;
  };
  const OpWork conv{1e6, 1e3, 1e3, OpClass::conv}, pad{0, 2e5, 2e5, OpClass::data_movement};
  b.add_op({.name = "depthwise", .type = "Conv", .inputs = {x, dw}, .outputs = {y1}, .attrs = attrs(16, 1), .work = conv});
  b.add_op({.name = "strided", .type = "Conv", .inputs = {x, dw}, .outputs = {y2}, .attrs = attrs(16, 2), .work = conv});
  b.add_op({.name = "grouped", .type = "Conv", .inputs = {x, gw}, .outputs = {y3}, .attrs = attrs(4, 1), .work = conv});
  b.add_op({.name = "reflect", .type = "Pad", .inputs = {x}, .outputs = {p1}, .attrs = mode("reflect"), .work = pad});
  b.add_op({.name = "edge", .type = "Pad", .inputs = {x}, .outputs = {p2}, .attrs = mode("edge"), .work = pad});
  b.add_op({.name = "constant", .type = "Pad", .inputs = {x}, .outputs = {p3}, .attrs = mode("constant"), .work = pad});
  b.add_op({.name = "depthwise/grad", .type = "ConvGrad", .inputs = {y1}, .outputs = {dx}, .role = OpRole::backward, .forward_op = 0, .work = conv});
  b.add_op({.name = "reflect/grad", .type = "PadGrad", .inputs = {p1}, .outputs = {dx2}, .role = OpRole::backward, .forward_op = 3, .work = pad});
  b.add_op({.name = "strided/sum", .type = "Sum", .inputs = {y2}, .outputs = {dx3}, .role = OpRole::backward, .forward_op = 1, .work = pad});
  b.set_num_forward_ops(6);
  for (TensorId t : {y3, p2, p3, dx, dx2, dx3}) b.mark_output(t);
  const Graph g = std::move(b).build();
  const std::vector<std::string_view> want{"ConvDepthwise", "ConvDepthwiseStrided", "Conv", "PadReflect", "PadEdge", "Pad",
                                           "ConvDepthwiseGrad", "PadReflectGrad", "Sum"};
  for (OpId o = 0; o < g.num_ops(); ++o) EXPECT_EQ(priced_type(g, o), want[o]) << g.op_name(o);

  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  const CostModel defaults = CostModel::defaults();
  const CostTable before(g, Cluster::build("t", {cpu}, {}, {}), defaults);
  cpu.efficiency_by_type = {{"ConvDepthwise", {.compute = 0.01, .memory = 0}},    {"ConvDepthwiseStrided", {.compute = 0.002, .memory = 0}},
                            {"ConvDepthwiseGrad", {.compute = 0.004, .memory = 0}}, {"PadReflect", {.compute = 0, .memory = 0.02}},
                            {"PadReflectGrad", {.compute = 0, .memory = 0.04}},     {"Conv", {.compute = 0.9, .memory = 0}},
                            {"Pad", {.compute = 0, .memory = 0.5}}};
  const CostTable after(g, Cluster::build("t", {cpu}, {}, {}), defaults);
  EXPECT_DOUBLE_EQ(after.time_s(0, 0), 1e-6 + 1e6 / (1e11 * 0.01));
  EXPECT_DOUBLE_EQ(after.time_s(1, 0), 1e-6 + 1e6 / (1e11 * 0.002));
  EXPECT_DOUBLE_EQ(after.time_s(2, 0), 1e-6 + 1e6 / (1e11 * 0.9)) << "a grouped convolution: its type's entry";
  EXPECT_DOUBLE_EQ(after.time_s(3, 0), 1e-6 + 4e5 / (cpu.bandwidth_for(4e5) * 0.02)) << "a reflect pad by its bytes";
  EXPECT_DOUBLE_EQ(after.time_s(4, 0), before.time_s(4, 0)) << "no PadEdge entry: its class, not Pad's entry";
  EXPECT_DOUBLE_EQ(after.time_s(5, 0), 1e-6 + 4e5 / (cpu.bandwidth_for(4e5) * 0.5)) << "a constant pad: Pad's entry";
  EXPECT_GT(after.time_s(6, 0), before.time_s(6, 0)) << "the depthwise gradient by its own key";
  EXPECT_GT(after.time_s(7, 0), before.time_s(7, 0)) << "the reflect pad's gradient by its own key";
  EXPECT_DOUBLE_EQ(after.time_s(8, 0), before.time_s(8, 0)) << "a partial sum keeps its type";

  // The entry of Pad leaves the edge pad to its class: said (an audit: a cluster fitted before
  // these keys priced its ops so without a word). With PadEdge named, or without Pad, nothing.
  Device cpu1 = cpu;
  cpu1.name = "cpu:1";
  const std::vector<Link> link{{.a = "cpu:0", .b = "cpu:1", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9}};
  const Cluster both = Cluster::build("t", {cpu, cpu1}, {}, link);
  const auto apart = efficiency_types_keyed_apart(g, both, CostTable(g, both, defaults));
  ASSERT_EQ(apart.size(), 1u);
  EXPECT_EQ(apart[0].key, "Pad");
  EXPECT_EQ(apart[0].priced, "PadEdge");
  EXPECT_THAT(apart[0].devices, ::testing::ElementsAre("cpu:0", "cpu:1"));
  EXPECT_EQ(apart[0].ops, 1u);
  // An op a profile times takes no efficiency at all: not counted (a review).
  Profile timed;
  timed.set_by_name(DeviceKind::cpu, "edge", 1e-3);
  EXPECT_THAT(efficiency_types_keyed_apart(g, both, CostTable(g, both, defaults, &timed)), ::testing::IsEmpty());
  cpu1.efficiency_by_type["PadEdge"] = {.compute = 0, .memory = 0.5};
  cpu.efficiency_by_type.erase("Pad");
  cpu.efficiency_by_type["Conv"] = {.compute = 0.9, .memory = 0};
  cpu.efficiency_by_type.erase("ConvDepthwise");
  cpu.efficiency_by_type.erase("ConvDepthwiseStrided");
  const Cluster after_refit = Cluster::build("t", {cpu, cpu1}, {}, link);
  const auto convs = efficiency_types_keyed_apart(g, after_refit, CostTable(g, after_refit, defaults));
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(convs[0].priced, "ConvDepthwise");
  EXPECT_EQ(convs[1].priced, "ConvDepthwiseStrided");
  EXPECT_THAT(convs[1].devices, ::testing::ElementsAre("cpu:0"));
  EXPECT_EQ(convs[0].ops + convs[1].ops, 2u);
}

// A device that measured its products by their smallest dimension (Device::
// product_efficiency_by_size) prices each product, forward or gradient, at the curve's efficiency
// for its dimension; products of unknown dimension and the class's other ops keep the class's; an
// op type's own efficiency wins; a profile's fitted model prices products by its class fit.
TEST(CostModel, AProductIsPricedByItsSmallestDimensionWhereTheDeviceMeasuredThat) {
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e12,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  cpu.efficiency[static_cast<std::size_t>(OpClass::matmul)] = {.compute = 0.5, .memory = 0};
  const CostModel m = unit_model();
  OpWork thin{1e9, 1e3, 1e3, OpClass::matmul};
  thin.product_min_dim = 16;
  OpWork wide = thin;
  wide.product_min_dim = 1024;
  const OpWork unknown{1e9, 1e3, 1e3, OpClass::matmul};  // an Einsum, a recurrent layer
  EXPECT_DOUBLE_EQ(modelled_time_s(thin, cpu, m), 1e-6 + 1e9 / (1e11 * 0.5)) << "no curve: the class's";
  cpu.product_efficiency_by_size = {{16, 0.25}, {256, 0.75}};
  EXPECT_DOUBLE_EQ(modelled_time_s(thin, cpu, m), 1e-6 + 1e9 / (1e11 * 0.25));
  EXPECT_DOUBLE_EQ(modelled_time_s(wide, cpu, m), 1e-6 + 1e9 / (1e11 * 0.75));
  EXPECT_DOUBLE_EQ(modelled_time_s(unknown, cpu, m), 1e-6 + 1e9 / (1e11 * 0.5));
  cpu.backward_efficiency[static_cast<std::size_t>(OpClass::matmul)] = {.compute = 0.1, .memory = 0};
  EXPECT_DOUBLE_EQ(modelled_time_s(thin, cpu, m, true, true), 1e-6 + 1e9 / (1e11 * 0.25)) << "a gradient multiplies the same matrices";
  const Device::Efficiency own{.compute = 0.05, .memory = 0};
  EXPECT_DOUBLE_EQ(modelled_time_s(thin, cpu, m, true, false, &own), 1e-6 + 1e9 / (1e11 * 0.05)) << "an op type's own wins";
  EXPECT_DOUBLE_EQ(modelled_time_s(thin, cpu, m, /*device_efficiency=*/false), 1e-6 + 1e9 / 1e11) << "a fitted model: its class";
  OpWork conv = thin;
  conv.op_class = OpClass::conv;
  EXPECT_DOUBLE_EQ(modelled_time_s(conv, cpu, m), 1e-6 + 1e9 / 1e11) << "products only";
  // Convolutions by their kernel area, the same way.
  conv.conv_kernel_area = 1;
  EXPECT_DOUBLE_EQ(modelled_time_s(conv, cpu, m), 1e-6 + 1e9 / 1e11) << "no curve: the class's";
  cpu.conv_efficiency_by_kernel = {{1, 0.4}, {9, 0.8}};
  EXPECT_DOUBLE_EQ(modelled_time_s(conv, cpu, m), 1e-6 + 1e9 / (1e11 * 0.4));
  conv.conv_kernel_area = 9;
  EXPECT_DOUBLE_EQ(modelled_time_s(conv, cpu, m), 1e-6 + 1e9 / (1e11 * 0.8));
  EXPECT_DOUBLE_EQ(modelled_time_s(conv, cpu, m, true, true), 1e-6 + 1e9 / 1e11) << "a gradient: the class's (other kernels)";
  conv.conv_kernel_area = 0;
  EXPECT_DOUBLE_EQ(modelled_time_s(conv, cpu, m), 1e-6 + 1e9 / 1e11) << "grouped or transposed: the class's";
}

// The efficiency a timed kernel gives its type: its FLOPs over the time beyond the overhead, when
// its class would price it faster; none when the class is already as slow, or nothing is left
// after the overhead.
TEST(CostModel, ATimedKernelSlowerThanItsClassGivesItsTypeAnEfficiency) {
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e10,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  const CostModel m = unit_model();  // pooling: compute 1, memory 1
  const OpWork pool{1e6, 4e4, 1e4, OpClass::pooling};  // 10 us of compute, 5 us of memory
  auto e = type_efficiency_for(pool, cpu, m, false, 1e-6 + 2e-3);
  ASSERT_TRUE(e.has_value());
  EXPECT_DOUBLE_EQ(e->compute, 1e6 / (1e11 * 2e-3)) << "0.005: its FLOPs take the 2 ms beyond the overhead";
  EXPECT_EQ(e->memory, 0.0);
  cpu.efficiency_by_type["MaxPool"] = *e;
  EXPECT_DOUBLE_EQ(modelled_time_s(pool, cpu, m, true, false, &cpu.efficiency_by_type["MaxPool"]), 1e-6 + 2e-3) << "and prices it so";
  EXPECT_FALSE(type_efficiency_for(pool, cpu, m, false, 1e-6 + 8e-6)) << "faster than the class's 10 us: the class prices it";
  EXPECT_FALSE(type_efficiency_for(pool, cpu, m, false, 0.5e-6)) << "no time beyond the overhead";
  // An op without FLOPs (a copy: a reflect pad) is priced by its bytes: 5e4 bytes at 1e10 B/s are
  // 5 us by its class; 1 ms beyond the overhead makes a memory efficiency of 0.005.
  const auto copy = type_efficiency_for(OpWork{0, 4e4, 1e4, OpClass::pooling}, cpu, m, false, 1e-6 + 1e-3);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->compute, 0.0);
  EXPECT_DOUBLE_EQ(copy->memory, 5e4 / (1e10 * 1e-3));
  EXPECT_DOUBLE_EQ(modelled_time_s(OpWork{0, 4e4, 1e4, OpClass::pooling}, cpu, m, true, false, &*copy), 1e-6 + 1e-3);
  EXPECT_FALSE(type_efficiency_for(OpWork{0, 4e4, 1e4, OpClass::pooling}, cpu, m, false, 1e-6 + 4e-6)) << "as fast as its class";
  EXPECT_FALSE(type_efficiency_for(OpWork{0, 0, 0, OpClass::pooling}, cpu, m, false, 1e-3)) << "neither FLOPs nor bytes to price";
  // A gradient is compared with its class's backward figures: its own overhead and efficiency.
  cpu.backward_op_overhead_s = 5e-4;
  cpu.backward_efficiency[static_cast<std::size_t>(OpClass::pooling)] = {.compute = 0.001, .memory = 0};  // 10 ms
  EXPECT_FALSE(type_efficiency_for(pool, cpu, m, true, 5e-4 + 2e-3)) << "the backward class already prices it at 10 ms";
  e = type_efficiency_for(pool, cpu, m, true, 5e-4 + 20e-3);
  ASSERT_TRUE(e.has_value());
  EXPECT_DOUBLE_EQ(e->compute, 1e6 / (1e11 * 20e-3));
}

// A convolution (or its gradient) reading a view out of row-major order (a Split's channels, a
// Concat gradient's slice) holds a copy of it in order while it runs, on every device; a part cut
// in row-major order (along the batch) needs none.
TEST(CostTable, ConvolutionsCopyAViewOutOfOrderFirst) {
  GraphBuilder b;
  const F32Tensors tensor{b};
  auto axis = [](std::int64_t a) {
    Attributes attrs;
    attrs.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = a});
    return attrs;
  };
  const OpWork conv{1e6, 1e6, 1e6, OpClass::conv}, move{0, 1e6, 1e6, OpClass::data_movement};
  const TensorId x = tensor("x", {8, 16, 10, 10}, TensorKind::data), w = tensor("w", {8, 8, 1, 1}, TensorKind::parameter);
  const TensorId c0 = tensor("c0", {8, 8, 10, 10}), c1 = tensor("c1", {8, 8, 10, 10}), n0 = tensor("n0", {4, 16, 10, 10}), n1 = tensor("n1", {4, 16, 10, 10});
  const TensorId w16 = tensor("w16", {8, 16, 1, 1}, TensorKind::parameter);
  b.add_op({.name = "channels", .type = "Split", .inputs = {x}, .outputs = {c0, c1}, .attrs = axis(1), .work = move});
  b.add_op({.name = "batch", .type = "Split", .inputs = {x}, .outputs = {n0, n1}, .attrs = axis(0), .work = move});
  b.add_op({.name = "conv_c", .type = "Conv", .inputs = {c0, w}, .outputs = {tensor("y0", {8, 8, 10, 10})}, .work = conv});
  b.add_op({.name = "conv_n", .type = "Conv", .inputs = {n0, w16}, .outputs = {tensor("y1", {4, 8, 10, 10})}, .work = conv});
  b.add_op({.name = "relu", .type = "Relu", .inputs = {c1}, .outputs = {tensor("r", {8, 8, 10, 10})}, .work = {1e3, 1e3, 1e3, OpClass::elementwise}});
  b.add_op({.name = "relu_n", .type = "Relu", .inputs = {n1}, .outputs = {tensor("rn", {4, 16, 10, 10})}, .work = {1e3, 1e3, 1e3, OpClass::elementwise}});
  const Graph g = std::move(b).build();
  ASSERT_TRUE(g.tensor_is_view(c0));
  EXPECT_FALSE(g.tensor_in_order(c0));
  EXPECT_TRUE(g.tensor_in_order(n0));
  const std::uint64_t part = 8ull * 8 * 100 * 4;
  EXPECT_EQ(op_workspace_bytes(g, 2, DeviceKind::gpu), part);
  EXPECT_EQ(op_workspace_bytes(g, 2, DeviceKind::cpu), part) << "1x1 over 8 samples: the copy alone";
  EXPECT_EQ(op_workspace_bytes(g, 3, DeviceKind::gpu), 0u) << "rows of the batch: in order";
  EXPECT_EQ(op_workspace_bytes(g, 4, DeviceKind::gpu), 0u) << "an elementwise kernel reads strides as they are";
}

// An Einsum holds the operands its batched product copies into order while it runs, on every
// device (libtorch's einsum), but in a training step the copies the gradient keeps are an output of
// the op; its gradient holds the second partial gradient of an operand read twice, and an
// elementwise product (nothing summed) each broadcast operand's product with dY (as Mul's).
TEST(CostTable, AnEinsumHoldsTheOperandsItCopiesAndItsGradientsPartials) {
  auto graph = [](const char* equation, bool twice, std::vector<std::int64_t> a_shape, std::vector<std::int64_t> out_shape) {
    GraphBuilder b("einsum");
    const F32Tensors tensor{b};
    Attributes eq;
    eq.set(Attribute{.name = "equation", .kind = Attribute::Kind::text, .s = equation});
    const TensorId x = tensor("x", a_shape, TensorKind::data), p = tensor("p", {a_shape.back()}, TensorKind::parameter);
    const TensorId a = tensor("a", a_shape), y = tensor("y", out_shape);
    add_priced(b, "mul", "Mul", {x, p}, a);
    add_priced(b, "einsum", "Einsum", {a, twice ? a : tensor("w", a_shape, TensorKind::parameter)}, y, eq);
    b.mark_output(y);
    return std::move(b).build();
  };
  const std::uint64_t a_bytes = 2 * 5 * 3 * 4 * 4;
  // Scores of a [b, q, h, d] tensor with itself: both operands copied, and kept for the gradients.
  const Graph qk = graph("bqhd,bkhd->bhqk", true, {2, 5, 3, 4}, {2, 3, 5, 5});
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) EXPECT_EQ(op_workspace_bytes(qk, 1, kind), 2 * a_bytes);
  const Graph qk_step = derive_training_step(qk, Optimizer::sgd);
  const OpId fwd = qk_step.find_op("einsum"), grad = qk_step.find_op("einsum/grad");
  EXPECT_EQ(op_workspace_bytes(qk_step, fwd, DeviceKind::cpu), 0u) << "both copies kept: an output of the op";
  EXPECT_EQ(op_workspace_bytes(qk_step, grad, DeviceKind::cpu), a_bytes) << "a's second partial gradient";
  // The same with a parameter: only the parameter's copy, kept (a needs a gradient).
  const Graph qw_step = derive_training_step(graph("bqhd,bkhd->bhqk", false, {2, 5, 3, 4}, {2, 3, 5, 5}), Optimizer::sgd);
  EXPECT_EQ(qw_step.tensor_bytes(qw_step.find_tensor("einsum/copies")), 2 * a_bytes);
  EXPECT_EQ(op_workspace_bytes(qw_step, qw_step.find_op("einsum/grad"), DeviceKind::cpu), 0u);
  // In order already: nothing.
  EXPECT_EQ(op_workspace_bytes(graph("bhqd,bhkd->bhqk", true, {2, 3, 5, 4}, {2, 3, 5, 5}), 1, DeviceKind::cpu), 0u);
  // An outer product is elementwise: two products of dY's size while its gradient runs.
  const Graph outer = derive_training_step(graph("bi,bj->bij", true, {2, 5}, {2, 5, 5}), Optimizer::sgd);
  EXPECT_EQ(op_workspace_bytes(outer, outer.find_op("einsum"), DeviceKind::cpu), 0u);
  EXPECT_EQ(op_workspace_bytes(outer, outer.find_op("einsum/grad"), DeviceKind::cpu), 2u * 2 * 5 * 5 * 4);
}

TEST(CostTable, AnOpThatMakesOnlyViewsCostsItsOverheadAlone) {
  GraphBuilder b("views");
  const F32Tensors tensor{b};
  Attributes perm;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {1, 0}});
  Attributes halves;
  halves.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = 1});
  const TensorId x = tensor("x", {64, 128}, TensorKind::data), p = tensor("p", {128}, TensorKind::parameter);
  const TensorId m = tensor("m", {64, 128}), t = tensor("t", {128, 64}), r = tensor("r", {128, 64});
  const TensorId s0 = tensor("s0", {128, 32}), s1 = tensor("s1", {128, 32}), y = tensor("y", {128, 32});
  add_priced(b, "mul", "Mul", {x, p}, m);
  add_priced(b, "transpose", "Transpose", {m}, t, perm);
  add_priced(b, "relu", "Relu", {t}, r);
  const std::vector<TensorDesc> split_in{{b.tensor_shape(r), DType::f32, true}};
  const std::vector<TensorDesc> split_out{{b.tensor_shape(s0), DType::f32, true}, {b.tensor_shape(s1), DType::f32, true}};
  b.add_op(OpSpec{.name = "split", .type = "Split", .inputs = {r}, .outputs = {s0, s1}, .attrs = halves,
                  .work = op_work("Split", halves, split_in, split_out)});
  add_priced(b, "add", "Add", {s0, s1}, y);
  b.mark_output(y);
  const Graph g = std::move(b).build();
  const Cluster c = cluster_preset("k80x2");
  const CostTable costs(g, c, CostModel::defaults());
  for (const char* view : {"transpose", "split"}) {
    SCOPED_TRACE(view);
    const OpId o = g.find_op(view);
    EXPECT_GT(g.op_work(o).bytes_read, 0.0) << "the op's own work is unchanged";
    EXPECT_EQ(priced_work(g, o).bytes_read + priced_work(g, o).bytes_written + priced_work(g, o).flops, 0.0);
    for (DeviceId d = 0; d < c.num_devices(); ++d) EXPECT_DOUBLE_EQ(costs.time_s(o, d), c.device(d).op_overhead_s);
  }
  EXPECT_GT(costs.time_s(g.find_op("relu"), 0), c.device(0).op_overhead_s) << "an op reading a view pays its own bytes";
  EXPECT_EQ(priced_work(g, g.find_op("relu")), g.op_work(g.find_op("relu")));
}

// A graph's products carry their smallest dimension into the cost table and into their gradients
// in the training step; a transposed 3-D operand by a matrix runs one product per matrix (libtorch
// 1.13's matmul does not fold it), so its dimension is a matrix's, not the folded rows'.
TEST(CostTable, AGraphsProductsAndTheirGradientsArePricedByTheCurve) {
  GraphBuilder b("products");
  const F32Tensors tensor{b};
  Attributes perm, trans_b;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {0, 2, 1}});
  trans_b.set(Attribute{.name = "transB", .kind = Attribute::Kind::integer, .i = 1});
  const TensorId x = tensor("x", {32, 512, 16}, TensorKind::data), w = tensor("w", {512, 64}, TensorKind::parameter);
  const TensorId t = tensor("t", {32, 16, 512}), y = tensor("y", {32, 16, 64});
  const TensorId a = tensor("a", {64, 256}, TensorKind::data), v = tensor("v", {128, 256}, TensorKind::parameter), z = tensor("z", {64, 128});
  const TensorId u = tensor("u", {32, 512, 16}, TensorKind::data), yu = tensor("yu", {32, 512, 64});
  add_priced(b, "transpose", "Transpose", {x}, t, perm);
  add_priced(b, "matmul", "MatMul", {t, w}, y);
  add_priced(b, "gemm", "Gemm", {a, v}, z, trans_b);
  const TensorId w2 = tensor("w2", {16, 64}, TensorKind::parameter);
  add_priced(b, "folded", "MatMul", {u, w2}, yu);
  b.mark_output(y), b.mark_output(z), b.mark_output(yu);
  const Graph g = std::move(b).build();
  EXPECT_EQ(g.op_work(g.find_op("matmul")).product_min_dim, 64u) << "from the shapes alone: 512 folded rows";
  EXPECT_EQ(priced_work(g, g.find_op("matmul")).product_min_dim, 16u) << "a matrix of the transposed batch";
  EXPECT_EQ(priced_work(g, g.find_op("folded")).product_min_dim, 16u) << "row-major: rows folded, 16 contracted";
  EXPECT_EQ(priced_work(g, g.find_op("gemm")).product_min_dim, 64u);
  const Graph step = derive_training_step(g, Optimizer::sgd);
  EXPECT_EQ(priced_work(step, step.find_op("matmul/grad")).product_min_dim, 16u);
  EXPECT_EQ(priced_work(step, step.find_op("gemm/grad")).product_min_dim, 64u);
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e11, .memory_bandwidth_bytes_per_s = 1e12,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  cpu.product_efficiency_by_size = {{16, 0.25}, {256, 0.75}};
  const Cluster c = Cluster::build("t", {cpu}, {}, {});
  const CostTable costs(step, c, CostModel::defaults());
  for (const char* op : {"matmul", "matmul/grad", "gemm", "gemm/grad"}) {
    SCOPED_TRACE(op);
    const OpWork work = priced_work(step, step.find_op(op));
    const double e = cpu.product_efficiency_for(work.product_min_dim);
    const double bytes = work.bytes_read + work.bytes_written;
    const double memory_s = bytes / (cpu.bandwidth_for(bytes) * CostModel::defaults().of(DeviceKind::cpu, OpClass::matmul).memory);
    EXPECT_GT(work.flops / (1e11 * e), memory_s) << "compute-bound: the curve sets the time";
    EXPECT_DOUBLE_EQ(costs.time_s(step.find_op(op), 0), 1e-6 + work.flops / (1e11 * e));
  }
}

// In a training step's cost table, a forward convolution is priced by its kernel's point of the
// device's curve and its gradient by the conv class (the curve measures forward kernels).
TEST(CostTable, AForwardConvolutionIsPricedByItsKernelItsGradientByItsClass) {
  GraphBuilder b("conv");
  const F32Tensors tensor{b};
  const TensorId x = tensor("x", {2, 16, 8, 8}, TensorKind::data), w = tensor("w", {16, 16, 3, 3}, TensorKind::parameter);
  const TensorId y = tensor("y", {2, 16, 6, 6});
  add_priced(b, "conv", "Conv", {x, w}, y);
  b.mark_output(y);
  const Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  Device cpu{.name = "cpu:0", .kind = DeviceKind::cpu, .model = "t", .peak_flops = 1e9, .memory_bandwidth_bytes_per_s = 1e15,
             .memory_bytes = 1 << 30, .op_overhead_s = 1e-6, .streams = 1};
  cpu.efficiency[static_cast<std::size_t>(OpClass::conv)] = {.compute = 0.5, .memory = 0};
  cpu.conv_efficiency_by_kernel = {{1, 0.2}, {9, 0.9}};
  const CostTable costs(step, Cluster::build("t", {cpu}, {}, {}), CostModel::defaults());
  const OpId conv = step.find_op("conv"), grad = step.find_op("conv/grad");
  EXPECT_EQ(priced_work(step, grad).conv_kernel_area, 9u);
  EXPECT_DOUBLE_EQ(costs.time_s(conv, 0), 1e-6 + priced_work(step, conv).flops / (1e9 * 0.9));
  EXPECT_DOUBLE_EQ(costs.time_s(grad, 0), 1e-6 + priced_work(step, grad).flops / (1e9 * 0.5));
}

TEST(CostTable, AGradientPassedOnStillPaysForTheSumOfItsPartials) {
  // y = p + q read twice: Add's gradient passes dY on to both operands (views), and sums dY's two
  // partials (one from each Relu) first: that sum is a kernel, priced.
  GraphBuilder b("sum");
  const F32Tensors tensor{b};
  const TensorId p = tensor("p", {64, 128}, TensorKind::parameter), q = tensor("q", {64, 128}, TensorKind::parameter);
  const TensorId y = tensor("y", {64, 128});
  const TensorId r1 = tensor("r1", {64, 128}), r2 = tensor("r2", {64, 128});
  add_priced(b, "add", "Add", {p, q}, y);
  add_priced(b, "relu1", "Relu", {y}, r1);
  add_priced(b, "relu2", "Relu", {y}, r2);
  b.mark_output(r1), b.mark_output(r2);
  const Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  const OpId grad = step.find_op("add/grad");
  ASSERT_NE(grad, kNoId);
  ASSERT_NE(step.op_view_outputs(grad), 0u);
  ASSERT_GT(step.op_work(grad).bytes_read, 0.0) << "the sum of the two partials";
  EXPECT_EQ(priced_work(step, grad), step.op_work(grad));
}

// x * p, then its heads transposed (perm 0, 2, 1, 3) as attention does: returns the transposed
// view, a tensor named `name` of x's shape with its middle two dimensions swapped.
TensorId transposed_heads(GraphBuilder& b, std::vector<std::int64_t> shape, const std::string& name) {
  const F32Tensors tensor{b};
  Attributes perm;
  perm.set(Attribute{.name = "perm", .kind = Attribute::Kind::integers, .ints = {0, 2, 1, 3}});
  const TensorId x = tensor("x", shape, TensorKind::data), p = tensor("p", {shape.back()}, TensorKind::parameter);
  const TensorId m = tensor("m", shape);
  std::swap(shape[1], shape[2]);
  const TensorId t = tensor(name, shape);
  add_priced(b, "mul", "Mul", {x, p}, m);
  add_priced(b, "transpose", "Transpose", {m}, t, perm);
  return t;
}

TEST(CostTable, AReshapeThatCopiesAViewIsPricedAsACopy) {
  // Attention's heads merged back: [2, 3, 5, 4] transposed to [2, 5, 3, 4], then reshaped to
  // [2, 5, 12]: PyTorch's reshape copies (the transposed view cannot be viewed so).
  GraphBuilder b("merge");
  const F32Tensors tensor{b};
  const TensorId t = transposed_heads(b, {2, 3, 5, 4}, "t"), y = tensor("y", {2, 5, 12});
  const TensorId shape = b.add_tensor("shape", {3}, DType::i64, TensorKind::constant);
  add_priced(b, "merge", "Reshape", {t, shape}, y);
  b.mark_output(y);
  const Graph g = std::move(b).build();
  const OpId merge = g.find_op("merge");
  ASSERT_EQ(g.op_work(merge).op_class, OpClass::alias);
  ASSERT_EQ(g.op_view_outputs(merge), 0u) << "a copy, as the memory model has it";
  const OpWork w = priced_work(g, merge);
  EXPECT_EQ(w.op_class, OpClass::data_movement);
  EXPECT_EQ(w.bytes_read, 120.0 * 4);
  EXPECT_EQ(w.bytes_written, 120.0 * 4);
  const Cluster c = cluster_preset("k80x2");
  EXPECT_GT(CostTable(g, c, CostModel::defaults()).time_s(merge, 0), c.device(0).op_overhead_s);
  EXPECT_EQ(CostTable(g, c, CostModel::defaults()).source(merge, 0), CostSource::modelled);
}

// A MatMul holds the copies libtorch's matmul makes (matmul_layout) while it runs, on every device,
// but those its gradient keeps (an output of the op in a training step).
TEST(CostTable, AMatMulHoldsTheOperandsItCopies) {
  GraphBuilder b("heads");
  const F32Tensors tensor{b};
  const TensorId q = transposed_heads(b, {2, 5, 3, 4}, "q");
  const TensorId w = tensor("w", {4, 6}, TensorKind::parameter), y = tensor("y", {2, 3, 5, 6});
  add_priced(b, "project", "MatMul", {q, w}, y);
  b.mark_output(y);
  const Graph g = std::move(b).build();
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) EXPECT_EQ(op_workspace_bytes(g, 2, kind), 120u * 4) << "Q folded: a copy";
  const Graph step = derive_training_step(g, Optimizer::sgd);
  EXPECT_EQ(step.tensor_bytes(step.find_tensor("project/copies")), 120u * 4) << "kept for w's gradient";
  EXPECT_EQ(op_workspace_bytes(step, step.find_op("project"), DeviceKind::cpu), 0u);
}

}  // namespace
}  // namespace placer
