// The executor runs a placement as a single device would: outputs (inference) and updated
// parameters (training) are the same under every placement. Multi-device placements run on a
// "virtual" cluster (cpu:0, cpu:1, gpu:0 all on the host, ExecOptions::all_on_cpu), so tensors read
// on another device still go through the copy path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <thread>
#include <tuple>

#include "placer/exec/exec.hpp"
#include "placer/io/model.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/simulator.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using exec::ExecOptions;
using exec::Executor;
using exec::configure_threads;
using exec::detect_local_cluster;

Cluster virtual_cluster() {
  auto dev = [](std::string name, DeviceKind kind) { return Device{name, kind, "virtual", 1e11, 1e10, 8ull << 30, 1e-6, 1}; };
  return Cluster::build("virtual", {dev("cpu:0", DeviceKind::cpu), dev("cpu:1", DeviceKind::cpu), dev("gpu:0", DeviceKind::gpu)},
                        {"bus"},
                        {Link{"a", "cpu:0", "bus", 1e10, 1e10, 1e-6}, Link{"b", "cpu:1", "bus", 1e10, 1e10, 1e-6},
                         Link{"c", "gpu:0", "bus", 1e10, 1e10, 1e-6}});
}

using PlaceFn = std::function<DeviceId(const Graph&, OpId)>;
DeviceId all_first(const Graph&, OpId) { return 0; }
DeviceId round_robin(const Graph&, OpId op) { return op % 3; }
DeviceId halves(const Graph& g, OpId op) { return op < g.num_ops() / 2 ? 1 : 2; }

// The executor of `path` with each forward op on the device `place` picks. On the virtual cluster
// every device is the host (all_on_cpu); `real` runs gpu:N on CUDA device N.
Executor make_on(const Cluster& cluster, bool all_on_cpu, const std::string& path, Mode mode, const PlaceFn& place,
                 Optimizer opt = Optimizer::sgd) {
  ModelOptions options;
  options.mode = Mode::inference;
  const Graph fwd = load_forward_graph(path, options);
  std::vector<DeviceId> devices(fwd.num_ops());
  for (OpId op = 0; op < fwd.num_ops(); ++op) devices[op] = place(fwd, op);
  options.mode = mode;
  options.optimizer = opt;
  return Executor(path, options, cluster, devices, ExecOptions{.mode = mode, .optimizer = opt, .seed = 7, .all_on_cpu = all_on_cpu});
}

Executor make(const std::string& path, Mode mode, const PlaceFn& place, Optimizer opt = Optimizer::sgd) {
  return make_on(virtual_cluster(), true, path, mode, place, opt);
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tolerance, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double worst = 0, scale = 1e-6;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a[i])));
  }
  EXPECT_LE(worst, tolerance * scale) << what << ": largest difference " << worst << " at scale " << scale;
}

// Inference outputs under each placement equal the single-device run's.
void check_inference(const std::string& model, std::vector<PlaceFn> placements) {
  const std::string path = test::shared_model(model);
  Executor reference = make(path, Mode::inference, all_first);
  reference.step();
  const auto expected = reference.output_values();
  ASSERT_FALSE(expected.empty());
  for (std::size_t p = 0; p < placements.size(); ++p) {
    Executor ex = make(path, Mode::inference, placements[p]);
    ex.step();
    EXPECT_GT(ex.copies_last_step(), 0u) << model << " placement " << p << " should copy tensors between devices";
    const auto got = ex.output_values();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) expect_close(got[i], expected[i], 1e-4, model + " output " + std::to_string(i));
  }
}

// A training step copies each gradient back across devices as its forward copy went: the executor
// counts both, as many as the simulator's transfers of the step (it counted the forward copies
// alone, half the simulator's figure; found by a review).
TEST(Executor, CountsTheCopiesOfATrainingStepAsTheSimulatorDoes) {
  REQUIRE_SHARED_MODELS();
  const std::string path = test::shared_model("cifarnet");
  ModelOptions options;
  options.mode = Mode::inference;
  const Graph fwd = load_forward_graph(path, options);
  options.mode = Mode::training;
  const Graph step = load_model(path, options);
  const Cluster cluster = virtual_cluster();
  const CostTable costs(step, cluster, CostModel::defaults());
  Simulator sim(step, cluster, costs);
  for (const PlaceFn& place : {PlaceFn(round_robin), PlaceFn(halves)}) {
    std::vector<DeviceId> devices(fwd.num_ops());
    for (OpId op = 0; op < fwd.num_ops(); ++op) devices[op] = place(fwd, op);
    const std::uint32_t transfers = sim.simulate(expand_placement(step, devices)).transfers;
    Executor inference = make(path, Mode::inference, place), training = make(path, Mode::training, place);
    inference.step();
    training.step();
    EXPECT_GT(training.copies_last_step(), inference.copies_last_step());
    EXPECT_EQ(training.copies_last_step(), transfers);
  }
}

TEST(Executor, CifarnetInferenceIsPlacementIndependent) {
  REQUIRE_SHARED_MODELS();
  check_inference("cifarnet", {round_robin, halves});
}

// The larger shared models take tens of seconds per forward pass on a 2-core CPU (Debian's libtorch
// convolves through im2col + OpenBLAS): they run when PLACER_EXEC_LARGE is set.
#define REQUIRE_LARGE()                                                                             \
  do {                                                                                              \
    REQUIRE_SHARED_MODELS();                                                                        \
    if (!std::getenv("PLACER_EXEC_LARGE")) GTEST_SKIP() << "set PLACER_EXEC_LARGE=1 to run the larger shared models"; \
  } while (0)

TEST(Executor, PreparesEverySharedModel) {
  REQUIRE_SHARED_MODELS();
  // Every op type maps to libtorch and every constant subgraph folds (no step is run).
  for (const char* model : {"cifarnet", "resnet50", "inception_v3", "vgg16", "bert_base", "gpt2", "rnnlm", "nmt", "nasnet_large"}) {
    const std::string path = test::shared_model(model);
    ModelOptions options;
    options.mode = Mode::inference;
    const std::size_t n = load_forward_graph(path, options).num_ops();
    EXPECT_NO_THROW(Executor(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0),
                             ExecOptions{.mode = Mode::inference, .all_on_cpu = true}))
        << model;
  }
}

TEST(Executor, Resnet50InferenceIsPlacementIndependent) {
  REQUIRE_LARGE();
  check_inference("resnet50", {halves});
}

TEST(Executor, BertInferenceIsPlacementIndependent) {
  REQUIRE_LARGE();
  check_inference("bert_base", {round_robin});
}

TEST(Executor, RnnlmInferenceIsPlacementIndependent) {
  REQUIRE_LARGE();
  check_inference("rnnlm", {halves});
}

TEST(Executor, CifarnetTrainingStepUpdatesParametersAlikeUnderEveryPlacement) {
  REQUIRE_SHARED_MODELS();
  const std::string path = test::shared_model("cifarnet");
  for (Optimizer opt : {Optimizer::sgd, Optimizer::adam}) {
    Executor reference = make(path, Mode::training, all_first, opt);
    const std::vector<std::string> names = reference.parameter_names();
    ASSERT_EQ(names.size(), 10u);
    const std::vector<float> before = reference.parameter_value(names[0]);
    reference.step();
    EXPECT_NE(reference.parameter_value(names[0]), before) << "the optimizer step changes parameters";
    for (const PlaceFn& place : {PlaceFn(round_robin), PlaceFn(halves)}) {
      Executor ex = make(path, Mode::training, place, opt);
      ex.step();
      EXPECT_NEAR(ex.last_loss(), reference.last_loss(), 1e-4 * std::fabs(reference.last_loss()) + 1e-6);
      for (const auto& name : names) expect_close(ex.parameter_value(name), reference.parameter_value(name), 1e-4, name);
    }
  }
}

// ---- Small ONNX models written here: op coverage and errors ----------------------------------------

struct TinyModel {
  onnx::ModelProto m;
  TinyModel() {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    m.mutable_graph()->set_name("tiny");
  }
  void input(const std::string& name, std::vector<std::int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    auto* vi = m.mutable_graph()->add_input();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    for (auto d : dims) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name, std::vector<std::int64_t> dims) {
    auto* vi = m.mutable_graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::NodeProto* node(const std::string& type, const std::string& name, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  void constant(const std::string& out, std::vector<std::int64_t> values) {
    auto* n = node("Constant", "/c/" + out, {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values) a->mutable_t()->add_int64_data(v);
  }
  std::string save(const std::string& file) {
    auto path = test::temp_path(file);
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
};

// A float32 tensor of these dims and values, written to a temporary file for Executor::set_input.
std::string float_tensor_file(const std::string& file, std::vector<std::int64_t> dims, std::vector<float> values) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  const std::string path = test::temp_path(file);
  std::ofstream out(path, std::ios::binary);
  t.SerializeToOstream(&out);
  return path;
}

void set_int(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
}
void set_ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

// Conv + BatchNorm (training: batch statistics) + Pad + Slice + Split + Concat + Transpose + Reshape
// + Gather + Trilu + Softmax + Gemm, on two devices.
std::string coverage_model() {
  TinyModel t;
  t.input("x", {4, 3, 8, 8});
  t.input("w", {6, 3, 3, 3});
  t.input("bn_scale", {6});
  t.input("bn_bias", {6});
  t.input("bn_mean", {6});
  t.input("bn_var", {6});
  t.input("fc", {6, 5});
  auto* conv = t.node("Conv", "/conv/Conv", {"x", "w"}, {"c"});
  set_ints(conv, "pads", {1, 1, 1, 1});
  t.node("BatchNormalization", "/bn/BatchNormalization", {"c", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"b"});
  t.node("Relu", "/Relu", {"b"}, {"r"});
  t.constant("pads", {0, 0, 1, 0, 0, 0, 0, 1});
  t.node("Pad", "/Pad", {"r", "pads"}, {"p"});                       // 4x6x9x9
  t.constant("starts", {0}), t.constant("ends", {8}), t.constant("axes", {2});
  t.node("Slice", "/Slice", {"p", "starts", "ends", "axes"}, {"s"});  // 4x6x8x9
  t.constant("split", {4, 5});
  auto* split = t.node("Split", "/Split", {"s", "split"}, {"s1", "s2"});
  set_int(split, "axis", 3);
  auto* cat = t.node("Concat", "/Concat", {"s2", "s1"}, {"k"});       // 4x6x8x9
  set_int(cat, "axis", 3);
  t.node("GlobalAveragePool", "/pool/GlobalAveragePool", {"k"}, {"g"});
  auto* flat = t.node("Flatten", "/Flatten", {"g"}, {"f"});           // 4x6
  set_int(flat, "axis", 1);
  t.node("MatMul", "/fc/MatMul", {"f", "fc"}, {"y"});                 // 4x5
  t.constant("idx", {3, 0, 1});
  auto* gather = t.node("Gather", "/Gather", {"y", "idx"}, {"gy"});   // 3x5
  set_int(gather, "axis", 0);
  auto* tr = t.node("Transpose", "/Transpose", {"gy"}, {"ty"});       // 5x3
  set_ints(tr, "perm", {1, 0});
  t.node("Trilu", "/Trilu", {"ty"}, {"tri"});
  t.node("Softmax", "/Softmax", {"tri"}, {"out"});
  t.output("out", {5, 3});
  return t.save("placer_exec_coverage.onnx");
}

Executor make_tiny(const std::string& path, Mode mode, const std::vector<DeviceId>& devices) {
  ModelOptions options;
  options.mode = mode;
  return Executor(path, options, virtual_cluster(), devices, ExecOptions{.mode = mode, .seed = 3, .all_on_cpu = true});
}

TEST(Executor, RunsEveryMappedOpAlikeOnOneOrThreeDevices) {
  const std::string path = coverage_model();
  ModelOptions options;
  options.mode = Mode::inference;
  const std::size_t n = load_forward_graph(path, options).num_ops();
  for (Mode mode : {Mode::inference, Mode::training}) {
    Executor one = make_tiny(path, mode, std::vector<DeviceId>(n, 0));
    std::vector<DeviceId> spread(n);
    for (std::size_t i = 0; i < n; ++i) spread[i] = static_cast<DeviceId>(i % 3);
    Executor three = make_tiny(path, mode, spread);
    one.step();
    three.step();
    expect_close(three.output_values().at(0), one.output_values().at(0), 1e-5, "output");
    if (mode == Mode::training)
      for (const auto& name : one.parameter_names()) expect_close(three.parameter_value(name), one.parameter_value(name), 1e-5, name);
  }
}

TEST(Executor, BatchNormTrainingUsesBatchStatisticsAndUpdatesRunningStats) {
  const std::string path = coverage_model();
  ModelOptions options;
  options.mode = Mode::inference;
  const std::size_t n = load_forward_graph(path, options).num_ops();
  Executor train = make_tiny(path, Mode::training, std::vector<DeviceId>(n, 0));
  // A buffer is not a trained parameter; its running mean moves off zero after a training step.
  const auto names = train.parameter_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "bn_mean"), 0);
  EXPECT_EQ(train.parameter_value("bn_mean"), std::vector<float>(6, 0.0f));
  train.step();
  EXPECT_NE(train.parameter_value("bn_mean"), std::vector<float>(6, 0.0f));
}

// The forward pass of a small model whose input "x" is data, every op on the CPU.
Executor forward_on_cpu(const std::string& path, std::uint64_t seed = ExecOptions{}.seed, std::vector<std::string> data_inputs = {"x"}) {
  ModelOptions options;
  options.mode = Mode::inference;
  options.onnx.data_inputs = std::move(data_inputs);
  const std::size_t n = load_forward_graph(path, options).num_ops();
  return Executor(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0),
                  ExecOptions{.mode = Mode::inference, .seed = seed, .all_on_cpu = true});
}

// Clip reads its bound through a value slot after Neg, the bound's last ordinary reader: the bound
// must still be there (it was dropped after Neg: "input 1 must be one value").
TEST(Executor, AValueSlotReadKeepsItsTensor) {
  TinyModel t;
  t.input("x", {4, 5});
  auto* reduce = t.node("ReduceMin", "/ReduceMin", {"x"}, {"m"});
  set_int(reduce, "keepdims", 0);
  t.node("Neg", "/Neg", {"m"}, {"nm"});
  t.node("Clip", "/Clip", {"x", "m"}, {"y"});
  t.output("y", {4, 5});
  t.output("nm", {});
  t.m.mutable_graph()->mutable_output(1)->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar
  Executor ex = forward_on_cpu(t.save("placer_exec_value_slot.onnx"));
  EXPECT_NO_THROW(ex.step());
}

// An If decided by a shape runs the branch it takes (the importer and the executor read it alike).
TEST(Executor, RunsTheBranchOfAnIfDecidedByAShape) {
  TinyModel t;
  t.input("x", {4, 8});
  t.node("Shape", "/Shape", {"x"}, {"s"});
  t.node("Size", "/Size", {"s"}, {"r"});
  t.constant("two", {2});
  t.node("Equal", "/Equal", {"r", "two"}, {"is_matrix"});
  auto* branch = t.node("If", "/If", {"is_matrix"}, {"y"});
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = branch->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(name);
    auto* n = a->mutable_g()->add_node();
    n->set_op_type(name[0] == 't' ? "Relu" : "Sigmoid"), n->add_input("x"), n->add_output("b");
    a->mutable_g()->add_output()->set_name("b");
  }
  t.output("y", {4, 8});
  Executor ex = forward_on_cpu(t.save("placer_exec_if.onnx"));
  ex.step();
  TinyModel plain;  // the branch taken, written out
  plain.input("x", {4, 8});
  plain.node("Relu", "/If/Relu", {"x"}, {"y"});
  plain.output("y", {4, 8});
  Executor reference = forward_on_cpu(plain.save("placer_exec_if_plain.onnx"));
  reference.step();
  expect_close(ex.output_values().at(0), reference.output_values().at(0), 0.0, "y");
}

// A Loop of a known trip count runs unrolled (onnx_inline.hpp): s = x, then s += x * i for
// i = 0, 1, 2, which gives 4x; its iteration number reaches the body as a constant.
TEST(Executor, RunsALoopOfAKnownTripCountUnrolled) {
  TinyModel t;
  t.input("x", {4, 8});
  auto* trip = t.node("Constant", "/trip", {}, {"three"});
  auto* value = trip->add_attribute();
  value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::INT64), value->mutable_t()->add_int64_data(3);  // a scalar
  auto* loop = t.node("Loop", "/Loop", {"three", "", "x"}, {"y"});
  auto* a = loop->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto& body = *a->mutable_g();
  body.set_name("body");
  auto scalar_input = [&](const std::string& name, int type) {
    auto* vi = body.add_input();
    vi->set_name(name), vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    vi->mutable_type()->mutable_tensor_type()->mutable_shape();
  };
  scalar_input("i", onnx::TensorProto::INT64);
  scalar_input("cond_in", onnx::TensorProto::BOOL);
  body.add_input()->set_name("s_in");
  auto body_node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    auto* n = body.add_node();
    n->set_op_type(op), n->set_name("/body/" + op), n->add_output(out);
    for (auto& x : in) n->add_input(x);
    return n;
  };
  set_int(body_node("Cast", {"i"}, "i_f"), "to", onnx::TensorProto::FLOAT);
  body_node("Mul", {"x", "i_f"}, "xi");
  body_node("Add", {"s_in", "xi"}, "s_out");
  body_node("Identity", {"cond_in"}, "cond_out");
  body.add_output()->set_name("cond_out");
  body.add_output()->set_name("s_out");
  t.output("y", {4, 8});
  Executor ex = forward_on_cpu(t.save("placer_exec_loop.onnx"));
  ex.step();
  TinyModel plain;  // 4x, written out
  plain.input("x", {4, 8});
  plain.node("Add", "/Add", {"x", "x"}, {"x2"});
  plain.node("Add", "/Add2", {"x2", "x2"}, {"y"});
  plain.output("y", {4, 8});
  Executor reference = forward_on_cpu(plain.save("placer_exec_loop_plain.onnx"));
  reference.step();
  expect_close(ex.output_values().at(0), reference.output_values().at(0), 1e-6, "y");
}

// A Scan read from the end, its scan output stacked in reverse (scan_input_directions and
// scan_output_directions 1): s = s + x_t over x = [[1, 2], [3, 4], [5, 6]] from s0 = 0 takes x[2],
// x[1], x[0], giving s = [5, 6], [8, 10], [9, 12]; stacked in reverse, [[9, 12], [8, 10], [5, 6]].
TEST(Executor, RunsAScanReadAndStackedInReverse) {
  TinyModel t;
  t.input("s0", {2});
  t.input("x", {3, 2});
  auto* scan = t.node("Scan", "/Scan", {"s0", "x"}, {"s", "all"});
  set_int(scan, "num_scan_inputs", 1);
  for (const char* name : {"scan_input_directions", "scan_output_directions"}) {
    auto* a = scan->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INTS), a->add_ints(1);
  }
  auto* a = scan->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto& body = *a->mutable_g();
  body.set_name("body");
  for (const char* name : {"s_in", "x_t"}) {
    auto* vi = body.add_input();
    vi->set_name(name), vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  }
  auto* add = body.add_node();
  add->set_op_type("Add"), add->set_name("/body/Add"), add->add_input("s_in"), add->add_input("x_t"), add->add_output("s_out");
  auto* copy = body.add_node();
  copy->set_op_type("Identity"), copy->set_name("/body/Identity"), copy->add_input("s_out"), copy->add_output("scanned");
  body.add_output()->set_name("s_out");
  body.add_output()->set_name("scanned");
  t.output("s", {2});
  t.output("all", {3, 2});
  Executor ex = forward_on_cpu(t.save("placer_exec_scan.onnx"), ExecOptions{}.seed, {"s0", "x"});
  ex.set_input("s0", float_tensor_file("s0.pb", {2}, {0.0f, 0.0f}));
  ex.set_input("x", float_tensor_file("x.pb", {3, 2}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}));
  ex.step();
  const auto out = ex.output_values();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<float>{9.0f, 12.0f}));
  EXPECT_EQ(out[1], (std::vector<float>{9.0f, 12.0f, 8.0f, 10.0f, 5.0f, 6.0f}));
}

// A scripted list, its tensors known before the step: xs = x.unbind(0), s += xs[i] for i in
// range(len(xs)), each sum inserted at the front of a list (position 0), stacked and read at 0.
// Over x = [[1, 2], [3, 4], [5, 6]]: sums [1, 2], [4, 6], [9, 12]; stacked in reverse.
TEST(Executor, RunsAScriptedListOfKnownTensors) {
  TinyModel t;
  t.input("s0", {2});
  t.input("x", {3, 2});
  t.constant("zero", {0});
  auto* unbind = t.node("SplitToSequence", "/unbind", {"x"}, {"xs"});
  set_int(unbind, "axis", 0), set_int(unbind, "keepdims", 0);
  t.node("SequenceLength", "/len", {"xs"}, {"T"});
  set_int(t.node("SequenceEmpty", "/list", {}, {"empty"}), "dtype", onnx::TensorProto::FLOAT);
  auto* loop = t.node("Loop", "/Loop", {"T", "", "s0", "empty"}, {"s", "sums"});
  auto* a = loop->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto& body = *a->mutable_g();
  body.set_name("body");
  auto input = [&](const std::string& name, int type, bool vector, bool sequence) {
    auto* vi = body.add_input();
    vi->set_name(name);
    onnx::TypeProto_Tensor* tensor = sequence ? vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()
                                              : vi->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(type);
    if (vector) tensor->mutable_shape()->add_dim()->set_dim_value(2);
    else tensor->mutable_shape();
  };
  input("i", onnx::TensorProto::INT64, false, false);
  input("cond_in", onnx::TensorProto::BOOL, false, false);
  input("s_in", onnx::TensorProto::FLOAT, true, false);
  input("seq_in", onnx::TensorProto::FLOAT, true, true);
  auto body_node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    auto* n = body.add_node();
    n->set_op_type(op), n->set_name("/body/" + op), n->add_output(out);
    for (auto& x : in) n->add_input(x);
  };
  body_node("SequenceAt", {"xs", "i"}, "x_t");
  body_node("Add", {"s_in", "x_t"}, "s_out");
  body_node("SequenceInsert", {"seq_in", "s_out", "zero"}, "seq_out");
  body_node("Identity", {"cond_in"}, "cond_out");
  for (const char* name : {"cond_out", "s_out", "seq_out"}) body.add_output()->set_name(name);
  auto* stack = t.node("ConcatFromSequence", "/stack", {"sums"}, {"all"});
  set_int(stack, "axis", 0), set_int(stack, "new_axis", 1);
  t.node("SequenceAt", "/first", {"sums", "zero"}, {"first"});
  t.output("all", {3, 2});
  t.output("first", {2});
  Executor ex = forward_on_cpu(t.save("placer_exec_list.onnx"), ExecOptions{}.seed, {"s0", "x"});
  ex.set_input("s0", float_tensor_file("s0.pb", {2}, {0.0f, 0.0f}));
  ex.set_input("x", float_tensor_file("x.pb", {3, 2}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}));
  ex.step();
  const auto out = ex.output_values();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], (std::vector<float>{9.0f, 12.0f, 4.0f, 6.0f, 1.0f, 2.0f}));
  EXPECT_EQ(out[1], (std::vector<float>{9.0f, 12.0f}));
}

// Data that decides shapes through an op that computes from it (a Cast into a Reshape's shape) is
// refused at the first step, naming it; given (set_input), the step runs.
TEST(Executor, DataThatDecidesShapesIsRefusedUnlessGiven) {
  TinyModel t;
  t.input("x", {2, 3});
  t.input("shape", {2}, onnx::TensorProto::INT32);
  set_int(t.node("Cast", "/Cast", {"shape"}, {"shape64"}), "to", onnx::TensorProto::INT64);
  t.node("Reshape", "/Reshape", {"x", "shape64"}, {"y"});
  t.output("y", {3, 2});
  Executor ex = forward_on_cpu(t.save("placer_exec_drawn_shape.onnx"), ExecOptions{}.seed, {"x", "shape"});
  EXPECT_THAT([&] { ex.step(); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                                      "graph input 'shape' gives ('shape64') input 1 of op '/Reshape' (Reshape), whose values decide shapes")));
  onnx::TensorProto given;
  given.set_data_type(onnx::TensorProto::INT32), given.add_dims(2), given.add_int32_data(3), given.add_int32_data(2);
  const std::string file = test::temp_path("shape.pb");
  {
    std::ofstream out(file, std::ios::binary);
    given.SerializeToOstream(&out);
  }
  ex.set_input("shape", file);
  EXPECT_NO_THROW(ex.step());
}

// Found by fuzzing: `run` ran a training step of a model `inspect` and `simulate` refuse one for.
TEST(Executor, RefusesATrainingStepTheIRRefuses) {
  // The parameter w reaches y only through Size, which carries no gradient.
  TinyModel t;
  t.input("x", {4, 5});
  t.input("w", {3});
  t.node("Size", "/Size", {"w"}, {"n"});
  set_int(t.node("Cast", "/Cast", {"n"}, {"nf"}), "to", onnx::TensorProto::FLOAT);
  t.node("Relu", "/Relu", {"x"}, {"r"});
  t.node("Add", "/Add", {"r", "nf"}, {"y"});
  t.output("y", {4, 5});
  const std::string path = t.save("placer_exec_no_parameters.onnx");
  ModelOptions options;
  options.onnx.data_inputs = {"x"};
  EXPECT_THAT([&] { Executor(path, options, virtual_cluster(), std::vector<DeviceId>(4, 0), ExecOptions{.mode = Mode::training, .all_on_cpu = true}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("none of its outputs ('y') is computed from its parameters")));
}

// A Clip without bounds passes its input through (libtorch's clamp refused it: found by fuzzing).
TEST(Executor, AClipWithoutBoundsIsAPassThrough) {
  TinyModel t;
  t.input("x", {4, 5});
  t.node("Clip", "/Clip", {"x"}, {"c"});
  t.node("Relu", "/Relu", {"c"}, {"y"});
  t.output("y", {4, 5});
  Executor ex = forward_on_cpu(t.save("placer_exec_clip_unbounded.onnx"));
  ex.step();
  TinyModel plain;  // without the Clip: the same x (drawn by name and seed), the same y
  plain.input("x", {4, 5});
  plain.node("Relu", "/Relu", {"x"}, {"y"});
  plain.output("y", {4, 5});
  Executor reference = forward_on_cpu(plain.save("placer_exec_clip_plain.onnx"));
  reference.step();
  expect_close(ex.output_values().at(0), reference.output_values().at(0), 0.0, "y");
}

// Dropout with training_mode true drops a `ratio` share of the elements and scales the rest by
// 1 / (1 - ratio); with it false it passes its input through (it ran as a pass-through in both).
TEST(Executor, DropoutInTrainingModeDropsAndScales) {
  std::map<bool, std::vector<float>> out;  // by training_mode
  for (const bool training : {false, true}) {
    TinyModel t;
    t.input("x", {64, 64});
    auto* ratio = t.node("Constant", "/ratio", {}, {"ratio"})->add_attribute();
    ratio->set_name("value"), ratio->set_type(onnx::AttributeProto::TENSOR);
    ratio->mutable_t()->set_data_type(onnx::TensorProto::FLOAT), ratio->mutable_t()->add_float_data(0.25f);
    auto* mode = t.node("Constant", "/mode", {}, {"mode"})->add_attribute();
    mode->set_name("value"), mode->set_type(onnx::AttributeProto::TENSOR);
    mode->mutable_t()->set_data_type(onnx::TensorProto::BOOL), mode->mutable_t()->add_int32_data(training ? 1 : 0);
    t.node("Dropout", "/Dropout", {"x", "ratio", "mode"}, {"y", "mask"});
    set_int(t.node("Cast", "/Cast", {"mask"}, {"kept"}), "to", onnx::TensorProto::FLOAT);
    t.output("y", {64, 64});
    t.output("kept", {64, 64});  // the mask read by another op: all true without training
    Executor ex = forward_on_cpu(t.save("placer_exec_dropout.onnx"), 5);
    ex.step();
    out[training] = ex.output_values().at(0);
    const std::vector<float> kept = ex.output_values().at(1);
    if (!training) {
      EXPECT_EQ(std::count(kept.begin(), kept.end(), 1.0f), static_cast<std::ptrdiff_t>(kept.size()));
    }
  }
  const std::vector<float>&x = out[false], &y = out[true];  // the same data (same seed)
  ASSERT_EQ(x.size(), y.size());
  ASSERT_EQ(std::count(x.begin(), x.end(), 0.0f), 0) << "random data has no zeros";
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) ++dropped;
    else EXPECT_NEAR(y[i], x[i] / 0.75f, 1e-5f * std::fabs(x[i]) + 1e-6f);
  }
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(y.size()), 0.25, 0.03);
}

// The training step stops gradients where the IR does (graph/training.cpp): a weight read only
// through Floor gets no gradient and no update, although libtorch would differentiate floor (as
// zero) and fmod; a model with no output carrying a gradient trains nothing: its step is the
// forward pass (the executor ran a backward pass and an update the simulator never priced).
TEST(Executor, GradientsStopWhereTheTrainingStepStopsThem) {
  for (const bool with_relu_path : {true, false}) {
    SCOPED_TRACE(with_relu_path ? "a Floor path and a Relu path" : "a Mod path alone");
    TinyModel t;
    t.input("x", {8, 16});
    t.input("w_stop", {16, 16});
    t.node("MatMul", "/stop/MatMul", {"x", "w_stop"}, {"m"});
    if (with_relu_path) {
      t.node("Floor", "/stop/Floor", {"m"}, {"y"});
      t.input("w_go", {16, 16});
      t.node("MatMul", "/go/MatMul", {"x", "w_go"}, {"m2"});
      t.node("Relu", "/go/Relu", {"m2"}, {"z"});
      t.output("z", {8, 16});
    } else {
      auto* divisor = t.node("Constant", "/stop/divisor", {}, {"divisor"})->add_attribute();
      divisor->set_name("value"), divisor->set_type(onnx::AttributeProto::TENSOR);
      divisor->mutable_t()->set_data_type(onnx::TensorProto::FLOAT), divisor->mutable_t()->add_float_data(0.3f);
      set_int(t.node("Mod", "/stop/Mod", {"m", "divisor"}, {"y"}), "fmod", 1);  // libtorch: gradient 1
    }
    t.output("y", {8, 16});
    const std::string path = t.save("placer_exec_stop_gradient.onnx");
    ModelOptions options;
    options.mode = Mode::training;
    options.onnx.data_inputs = {"x"};
    if (!with_relu_path) {
      // No output carries a gradient: the training step would train nothing, and is refused (it
      // was a forward pass, priced and run as if it were a step).
      EXPECT_THAT([&] { (void)load_model(path, options); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("would train nothing")));
      continue;
    }
    const Graph step = load_model(path, options);
    std::size_t updates = 0;
    for (OpId o = 0; o < step.num_ops(); ++o) updates += step.op_role(o) == OpRole::update;
    EXPECT_EQ(updates, 1u);
    const std::size_t n = load_forward_graph(path, options).num_ops();
    Executor ex(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0),
                ExecOptions{.mode = Mode::training, .seed = 3, .all_on_cpu = true});
    const std::vector<float> stop_before = ex.parameter_value("w_stop");
    const std::vector<float> go_before = ex.parameter_value("w_go");
    ex.step();
    EXPECT_EQ(ex.parameter_value("w_stop"), stop_before);
    EXPECT_NE(ex.parameter_value("w_go"), go_before);
    EXPECT_NE(ex.last_loss(), 0.0);
  }
}

// ONNX counts negative Gather indices from the end, also those computed in the step (ids in
// [0, 2) minus 5: -5 or -4 on a table of 10 rows, rows 5 and 6); libtorch refused them (found by
// fuzzing), on the embedding path (axis 0 of a 2-D table) and on index_select's (axis 1).
TEST(Executor, GatherTakesIndicesComputedInTheStepFromTheEnd) {
  for (const std::int64_t axis : {0, 1}) {
    SCOPED_TRACE(axis);
    TinyModel t;
    t.input("ids", {4}, onnx::TensorProto::INT64);
    t.input("table", {10, 10});
    t.constant("offset", {5});
    t.node("Sub", "/ids/Sub", {"ids", "offset"}, {"shifted"});
    set_int(t.node("Gather", "/emb/Gather", {"table", "shifted"}, {"rows"}), "axis", axis);
    t.output("rows", axis == 0 ? std::vector<std::int64_t>{4, 10} : std::vector<std::int64_t>{10, 4});
    Executor ex = forward_on_cpu(t.save("placer_exec_gather_negative.onnx"), ExecOptions{}.seed, {"ids"});
    EXPECT_NO_THROW(ex.step());
  }
}

// The executor reads the file as the importer does: a call of a model-local function runs its body's
// ops, and a Reshape target stored in an external file is read from there.
TEST(Executor, RunsTheBodiesOfModelLocalFunctionsAndConstantsStoredApart) {
  TinyModel t;
  auto* local = t.m.add_opset_import();
  local->set_domain("local"), local->set_version(1);
  onnx::FunctionProto* f = t.m.add_functions();
  f->set_name("Block"), f->set_domain("local"), f->add_input("X"), f->add_input("W"), f->add_output("Y");
  *f->add_opset_import() = t.m.opset_import(0);
  for (auto [type, in, out] : {std::tuple{"MatMul", std::vector<std::string>{"X", "W"}, "h"}, {"Relu", {"h"}, "Y"}}) {
    auto* n = f->add_node();
    n->set_op_type(type), n->add_output(out);
    for (const auto& i : in) n->add_input(i);
  }
  t.input("x", {4, 8});
  t.input("w", {8, 8});
  t.node("Block", "/block", {"x", "w"}, {"b"})->set_domain("local");
  auto* target = t.m.mutable_graph()->add_initializer();
  target->set_name("target"), target->set_data_type(onnx::TensorProto::INT64), target->add_dims(2);
  target->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = target->add_external_data();
  location->set_key("location"), location->set_value("placer_exec_target.bin");
  const std::string path = t.save("placer_exec_functions.onnx");
  {
    std::ofstream bin(std::filesystem::path(path).parent_path() / "placer_exec_target.bin", std::ios::binary);
    for (std::int64_t v : {2, 16}) bin.write(reinterpret_cast<const char*>(&v), sizeof v);
  }
  t.node("Reshape", "/Reshape", {"b", "target"}, {"y"});
  t.output("y", {2, 16});
  Executor ex = forward_on_cpu(t.save("placer_exec_functions.onnx"));
  ex.step();
  // The same ops written out, the target inline: the same inputs (drawn by name and seed), the same y.
  TinyModel plain;
  plain.input("x", {4, 8});
  plain.input("w", {8, 8});
  plain.node("MatMul", "/block/MatMul", {"x", "w"}, {"h"});
  plain.node("Relu", "/block/Relu", {"h"}, {"b"});
  plain.constant("target", {2, 16});
  plain.node("Reshape", "/Reshape", {"b", "target"}, {"y"});
  plain.output("y", {2, 16});
  Executor reference = forward_on_cpu(plain.save("placer_exec_functions_plain.onnx"));
  reference.step();
  ASSERT_EQ(ex.output_values().size(), 1u);
  expect_close(ex.output_values()[0], reference.output_values()[0], 1e-6, "y");
}

// libtorch's own errors (here an index past the table: ids in [0, 2) plus 20 read a table of 10
// rows) are one line naming the op, not libtorch's message with a C++ backtrace.
TEST(Executor, ALibtorchErrorNamesTheOpOnOneLine) {
  TinyModel t;
  t.input("ids", {4}, onnx::TensorProto::INT64);
  t.input("table", {10, 3});
  t.constant("offset", {20});
  t.node("Add", "/ids/Add", {"ids", "offset"}, {"shifted"});
  t.node("Gather", "/emb/Gather", {"table", "shifted"}, {"rows"});
  t.output("rows", {4, 3});
  Executor ex = forward_on_cpu(t.save("placer_exec_gather_past.onnx"), ExecOptions{}.seed, {"ids"});
  try {
    ex.step();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("op '/emb/Gather' (Gather): libtorch failed: "), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// Random integer data read as a divisor is never 0 (drawn in [0, 2) it failed libtorch's integer
// division: "ZeroDivisionError").
TEST(Executor, AnIntegerDivisorIsDrawnAboveZero) {
  TinyModel t;
  t.input("a", {64}, onnx::TensorProto::INT64);
  t.input("b", {64}, onnx::TensorProto::INT64);
  t.node("Div", "/div/Div", {"a", "b"}, {"q"});
  t.node("Mod", "/mod/Mod", {"a", "b"}, {"r"});
  t.node("Add", "/sum/Add", {"q", "r"}, {"s"});
  auto* out = t.m.mutable_graph()->add_output();
  out->set_name("s");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(64);
  const std::string path = t.save("placer_exec_int_divisor.onnx");
  ModelOptions options;
  options.mode = Mode::inference;
  options.onnx.data_inputs = {"a", "b"};
  const std::size_t n = load_forward_graph(path, options).num_ops();
  Executor ex(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0), ExecOptions{.mode = Mode::inference, .all_on_cpu = true});
  EXPECT_NO_THROW(ex.step());
}

// Slice of opset 1-9 gives starts, ends and axes as attributes (it crashed the executor).
TEST(Executor, RunsASliceOfOpsetNine) {
  TinyModel t;
  t.m.mutable_opset_import(0)->set_version(9);
  t.input("x", {4, 6});
  auto* slice = t.node("Slice", "/Slice", {"x"}, {"y"});
  set_ints(slice, "starts", {1});
  set_ints(slice, "ends", {5});
  set_ints(slice, "axes", {1});
  t.output("y", {4, 4});
  Executor ex = forward_on_cpu(t.save("placer_exec_slice9.onnx"));
  EXPECT_NO_THROW(ex.step());
}

// Softmax before opset 13 normalised over every axis from `axis` (default 1) on: the executor runs
// only the cases where that is one axis, the last, and refuses the others instead of computing
// something else.
// A half-precision model runs on the CPU: libtorch has no half kernels for convolutions or
// products there ("slow_conv2d_cpu" not implemented for 'Half': every fp16 model failed at its
// first Conv), so such ops compute in float32 and give half outputs. Inference and training.
TEST(Executor, AHalfPrecisionModelRunsOnTheCpu) {
  TinyModel t;
  t.input("x", {1, 2, 5, 5}, onnx::TensorProto::FLOAT16);
  t.input("w", {3, 2, 3, 3}, onnx::TensorProto::FLOAT16);
  t.input("fc", {27, 4}, onnx::TensorProto::FLOAT16);
  t.node("Conv", "/conv/Conv", {"x", "w"}, {"c"});
  t.node("Relu", "/conv/Relu", {"c"}, {"r"});
  t.constant("flat", {1, 27});
  t.node("Reshape", "/head/Reshape", {"r", "flat"}, {"f"});
  t.node("MatMul", "/head/MatMul", {"f", "fc"}, {"y"});
  t.output("y", {1, 4});
  t.m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  const std::string path = t.save("placer_exec_fp16.onnx");
  Executor ex = forward_on_cpu(path);
  ASSERT_NO_THROW(ex.step());
  const auto outputs = ex.output_values();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].size(), 4u);
  for (float v : outputs[0]) EXPECT_TRUE(std::isfinite(v));
  ModelOptions options;
  options.onnx.data_inputs = {"x"};
  const std::size_t n = load_forward_graph(path, options).num_ops();
  Executor train(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0), ExecOptions{.mode = Mode::training, .all_on_cpu = true});
  const std::vector<float> before = train.parameter_value("fc");
  ASSERT_NO_THROW(train.step());
  EXPECT_NE(train.parameter_value("fc"), before);
}

TEST(Executor, RefusesAnOldSoftmaxOverSeveralAxes) {
  for (const bool last_axis : {true, false}) {
    TinyModel t;
    t.m.mutable_opset_import(0)->set_version(11);
    t.input("x", {2, 3, 4});
    auto* softmax = t.node("Softmax", "/Softmax", {"x"}, {"y"});
    if (last_axis) set_int(softmax, "axis", 2);
    t.output("y", {2, 3, 4});
    const std::string path = t.save("placer_exec_softmax11.onnx");
    auto make = [&] { forward_on_cpu(path).step(); };
    if (last_axis) EXPECT_NO_THROW(make());
    else EXPECT_THROW(make(), Error);
  }
}

// Detecting the machine (the `local` cluster) keeps the threads a command asked for; it reset them
// to the default, so `run --threads 2 --cluster local` ran on one thread.
TEST(LocalCluster, DetectingItKeepsTheRequestedThreads) {
  const int two = std::min(2, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(configure_threads(two), two);
  (void)detect_local_cluster();
  EXPECT_EQ(at::get_num_threads(), two);
}

// `placer run` names devices only: the layout of `local` is the measured preset's, devices and
// links, without its benchmarks (about 2 s of every run); its figures say they were not measured.
TEST(LocalCluster, TheLayoutHasTheMeasuredPresetsDevicesAndLinks) {
  const Cluster measured = detect_local_cluster();
  const Cluster layout = exec::local_cluster_layout();
  EXPECT_EQ(layout.name(), measured.name());
  ASSERT_EQ(layout.num_devices(), measured.num_devices());
  for (DeviceId d = 0; d < layout.num_devices(); ++d) {
    const Device& a = layout.device(d);
    const Device& b = measured.device(d);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.model, b.model);
    EXPECT_EQ(a.memory_bytes, b.memory_bytes);
    EXPECT_EQ(a.peak_flops, 1.0);
    EXPECT_EQ(a.memory_bandwidth_bytes_per_s, 1.0);
    EXPECT_EQ(a.op_overhead_s, 0.0);
    EXPECT_GT(b.peak_flops, 1e6);
  }
  EXPECT_EQ(layout.num_channels(), measured.num_channels());
}

// Warnings libtorch raises (TORCH_WARN) are printed as placer's, on one line; beta notices dropped.
TEST(LocalCluster, LibtorchWarningsArePrintedAsPlacers) {
  exec::route_libtorch_warnings();
  ::testing::internal::CaptureStderr();
  TORCH_WARN("something\nto say");
  TORCH_WARN("scatter_reduce() is in beta and the API may change at any time.");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "placer: warning: libtorch: something to say\n");
}

// More threads than the machine has are refused (under a memory limit, OpenBLAS's buffers for 64
// threads were retried forever).
TEST(LocalCluster, MoreThreadsThanTheMachineHasAreRefused) {
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0) GTEST_SKIP() << "hardware_concurrency unknown";
  EXPECT_THAT([&] { configure_threads(static_cast<int>(hw) + 1); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("hardware threads")));
  EXPECT_EQ(configure_threads(1), 1);
  // PLACER_THREADS, a setting shared by machines of every size, is held to this one's (it stopped
  // every command that detects the local cluster, such as `placer clusters`).
  const std::string more = std::to_string(hw + 3);
  ::setenv("PLACER_THREADS", more.c_str(), 1);
  EXPECT_EQ(configure_threads(0), static_cast<int>(hw));
  ::unsetenv("PLACER_THREADS");
  EXPECT_EQ(configure_threads(1), 1);
}

// A known negative index counts from the end; one out of [-size, size) is an error, not wrapped
// again (remainder made -15 row 5 of a 10-row table). A constant one is refused by the import
// already, before anything runs (onnx_shapes.cpp); the executor's own check covers indices
// computed during the step.
TEST(Executor, GatherRefusesAKnownIndexOutOfRange) {
  for (const std::int64_t index : {-3, -15}) {
    SCOPED_TRACE(index);
    TinyModel t;
    t.input("table", {10, 4});
    t.constant("index", {index, 0});
    t.node("Gather", "/emb/Gather", {"table", "index"}, {"rows"});
    t.output("rows", {2, 4});
    const std::string path = t.save("placer_exec_gather_known.onnx");
    if (index == -3) {
      Executor ex = forward_on_cpu(path, ExecOptions{}.seed, {});
      EXPECT_NO_THROW(ex.step());
    } else {
      EXPECT_THAT([&] { (void)forward_on_cpu(path, ExecOptions{}.seed, {}); },
                  ::testing::ThrowsMessage<Error>(::testing::HasSubstr("index -15 of its indices 'index' is outside axis 0 of its data, of size 10")));
    }
  }
}

TEST(Executor, RefusesAnOpTypeItCannotRunBeforeRunning) {
  TinyModel t;  // an op the cost rules price and the executor does not map
  t.input("x", {6});
  t.node("Unique", "/head/Unique", {"x"}, {"y"});
  t.output("y", {6});  // data-dependent, declared
  const std::string path = t.save("placer_exec_unsupported.onnx");
  ModelOptions options;
  options.mode = Mode::inference;
  try {
    Executor ex(path, options, virtual_cluster(), std::vector<DeviceId>(1, 0), ExecOptions{.mode = Mode::inference});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/head/Unique"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'Unique', which the executor cannot run"), std::string::npos) << e.what();
  }
}

// What the executor cannot run of an op type it knows (an attribute) is refused when it is built,
// naming the op and why, not during the first step (after everything before the op ran).
TEST(Executor, RefusesAnAttributeItCannotRunBeforeRunning) {
  TinyModel t;
  t.input("x", {1, 2, 6, 6});
  t.constant("pads", {0, 0, 1, 1, 0, 0, 1, 1});
  set_string(t.node("Pad", "/head/Pad", {"x", "pads"}, {"y"}), "mode", "wrap");  // opset 19's, read as reflect for shapes
  t.output("y", {1, 2, 8, 8});
  const std::string path = t.save("placer_exec_pad_wrap.onnx");
  ModelOptions options;
  options.mode = Mode::inference;
  EXPECT_THAT([&] { Executor(path, options, virtual_cluster(), std::vector<DeviceId>(2, 0), ExecOptions{.mode = Mode::inference}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("op '/head/Pad' (Pad): Pad mode 'wrap' is not supported")));
}

// Pooling pads ONNX allows and libtorch does not (asymmetric, past half the kernel), with and
// without count_include_pad, and an integer max pool (ONNX's test_averagepool_2d_pads and
// test_maxpool_2d_uint8 failed in libtorch; the asymmetric mean without count_include_pad was refused).
TEST(Executor, PoolsWithAnyPadsAndIntegers) {
  // x = [[1, 2], [3, 4]] padded by 2 before each axis; 3 x 3 windows hold {1}, {1, 2}, {1, 3}, all.
  auto pooled = [](const std::string& type, std::int64_t include_pad, int elem) {
    TinyModel t;
    t.input("x", {1, 1, 2, 2}, elem);
    auto* pool = t.node(type, "/head/" + type, {"x"}, {"y"});
    set_ints(pool, "kernel_shape", {3, 3});
    set_ints(pool, "pads", {2, 2, 0, 0});
    if (type == "AveragePool") set_int(pool, "count_include_pad", include_pad);
    t.output("y", {1, 1, 2, 2});
    t.m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    ModelOptions options;
    options.mode = Mode::inference;
    options.onnx.data_inputs = {"x"};
    Executor ex(t.save("placer_exec_pool_pads.onnx"), options, virtual_cluster(), std::vector<DeviceId>(1, 0),
                ExecOptions{.mode = Mode::inference, .all_on_cpu = true});
    onnx::TensorProto x;
    x.set_data_type(elem);
    for (std::int64_t d : {1, 1, 2, 2}) x.add_dims(d);
    for (int v : {1, 2, 3, 4}) elem == onnx::TensorProto::FLOAT ? x.add_float_data(static_cast<float>(v)) : x.add_int32_data(v);
    const std::string file = test::temp_path("x.pb");
    {
      std::ofstream out(file, std::ios::binary);
      x.SerializeToOstream(&out);
    }
    ex.set_input("x", file);
    ex.step();
    return ex.output_values()[0];
  };
  using ::testing::ElementsAre;
  using ::testing::FloatNear;
  EXPECT_THAT(pooled("AveragePool", 1, onnx::TensorProto::FLOAT),
              ElementsAre(FloatNear(1.0f / 9, 1e-6f), FloatNear(3.0f / 9, 1e-6f), FloatNear(4.0f / 9, 1e-6f), FloatNear(10.0f / 9, 1e-6f)));
  EXPECT_THAT(pooled("AveragePool", 0, onnx::TensorProto::FLOAT),
              ElementsAre(FloatNear(1.0f, 1e-6f), FloatNear(1.5f, 1e-6f), FloatNear(2.0f, 1e-6f), FloatNear(2.5f, 1e-6f)));
  EXPECT_THAT(pooled("MaxPool", 0, onnx::TensorProto::FLOAT), ElementsAre(1.0f, 2.0f, 3.0f, 4.0f));
  EXPECT_THAT(pooled("MaxPool", 0, onnx::TensorProto::UINT8), ElementsAre(1.0f, 2.0f, 3.0f, 4.0f));
}

// BatchNormalization's training-mode form gives the running statistics after the batch.
TEST(Executor, BatchNormsTrainingFormGivesItsRunningStatistics) {
  TinyModel t;
  t.input("x", {4, 3, 2, 2});
  t.input("scale", {3});
  t.input("bias", {3});
  t.input("mean", {3});
  t.input("var", {3});
  set_int(t.node("BatchNormalization", "/bn/BN", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean", "running_var"}),
          "training_mode", 1);
  t.output("y", {4, 3, 2, 2});
  t.output("running_mean", {3});
  t.output("running_var", {3});
  ModelOptions options;
  options.mode = Mode::training;
  options.onnx.data_inputs = {"x"};
  const std::string path = t.save("placer_exec_bn_training_form.onnx");
  const std::size_t n = load_forward_graph(path, options).num_ops();
  Executor ex(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0), ExecOptions{.mode = Mode::training, .all_on_cpu = true});
  const std::vector<float> mean0 = ex.parameter_value("mean"), var0 = ex.parameter_value("var");
  ex.step();
  ASSERT_EQ(ex.output_values().size(), 3u);
  EXPECT_NE(ex.output_values().at(1), mean0) << "updated by the batch";
  EXPECT_NE(ex.output_values().at(2), var0);
  EXPECT_EQ(ex.output_values().at(1), ex.parameter_value("mean"));
  EXPECT_EQ(ex.output_values().at(2), ex.parameter_value("var"));
}

// An output the graph keeps that the implementation does not give (LayerNorm's Mean) is refused
// when the executor is built (it stopped the first step there).
TEST(Executor, AnOutputItDoesNotGiveIsRefusedBeforeRunning) {
  // BatchNormalization of opset 9 in its training form: outputs 3 and 4, the statistics saved for
  // the gradient (their content left to the runtime), are not given.
  TinyModel t;
  t.m.mutable_opset_import(0)->set_version(9);
  t.input("x", {4, 3, 2, 2});
  for (const char* name : {"scale", "bias", "mean", "var"}) t.input(name, {3});
  t.node("BatchNormalization", "/bn/BN", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean", "running_var", "saved_mean", "saved_var"});
  t.output("y", {4, 3, 2, 2});
  for (const char* name : {"running_mean", "running_var", "saved_mean", "saved_var"}) t.output(name, {3});
  ModelOptions options;
  options.mode = Mode::inference;
  options.onnx.data_inputs = {"x"};
  const std::string path = t.save("placer_exec_bn_saved.onnx");
  const std::size_t n = load_forward_graph(path, options).num_ops();
  EXPECT_THAT([&] { Executor(path, options, virtual_cluster(), std::vector<DeviceId>(n, 0), ExecOptions{.mode = Mode::inference}); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("op '/bn/BN' (BatchNormalization): output 3 ('saved_mean') is not one the executor gives")));
}

// MaxPool's Indices count over the whole tensor as ONNX does: the planes of earlier batches and
// channels first, then the place in the unpadded plane, row-major or (storage_order 1) column-major;
// begin pads only (asymmetric, padded beforehand) must not shift them.
TEST(Executor, MaxPoolsIndicesCountOverTheWholeUnpaddedTensor) {
  auto indices = [](std::int64_t storage_order, std::vector<float> values) {
    TinyModel t;
    t.input("x", {1, 2, 2, 2});
    auto* pool = t.node("MaxPool", "/pool/MaxPool", {"x"}, {"y", "where"});
    set_ints(pool, "kernel_shape", {2, 2}), set_ints(pool, "pads", {1, 1, 0, 0}), set_int(pool, "storage_order", storage_order);
    t.output("y", {1, 2, 2, 2});
    t.output("where", {1, 2, 2, 2});
    t.m.mutable_graph()->mutable_output(1)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    ModelOptions options;
    options.mode = Mode::inference;
    options.onnx.data_inputs = {"x"};
    Executor ex(t.save("placer_exec_pool_where.onnx"), options, virtual_cluster(), std::vector<DeviceId>(1, 0),
                ExecOptions{.mode = Mode::inference, .all_on_cpu = true});
    ex.set_input("x", float_tensor_file("x.pb", {1, 2, 2, 2}, std::move(values)));
    ex.step();
    return ex.output_values().at(1);
  };
  using ::testing::ElementsAre;
  EXPECT_THAT(indices(0, {1.0f, 5.0f, 3.0f, 2.0f, 7.0f, 0.0f, 0.0f, 9.0f}), ElementsAre(0, 1, 2, 1, 4, 4, 4, 7));
  EXPECT_THAT(indices(1, {1.0f, 5.0f, 3.0f, 2.0f, 7.0f, 0.0f, 0.0f, 9.0f}), ElementsAre(0, 2, 1, 2, 4, 4, 4, 7));
  // Windows of nothing but -inf: the first cell of the window that is in the tensor, never the
  // padding before it (whose place would fall in the plane before).
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(indices(0, {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf}), ElementsAre(0, 0, 0, 0, 4, 4, 4, 4));
}

// LayerNormalization's optional outputs: the mean and 1 / sqrt(variance + epsilon) of every row,
// of the input's rank with the normalised dimensions 1.
TEST(Executor, LayerNormGivesItsMeanAndInverseStandardDeviation) {
  TinyModel t;
  t.input("x", {2, 4});
  t.input("gamma", {4});
  t.node("LayerNormalization", "/ln/LN", {"x", "gamma"}, {"y", "mean", "inv_std"});
  t.output("y", {2, 4});
  t.output("mean", {2, 1});
  t.output("inv_std", {2, 1});
  ModelOptions options;
  options.mode = Mode::inference;
  options.onnx.data_inputs = {"x"};
  Executor ex(t.save("placer_exec_ln_mean.onnx"), options, virtual_cluster(), std::vector<DeviceId>(1, 0),
              ExecOptions{.mode = Mode::inference, .all_on_cpu = true});
  const std::string file = float_tensor_file("x.pb", {2, 4}, {1.0f, 2.0f, 3.0f, 4.0f, -2.0f, 0.0f, 2.0f, 4.0f});
  ex.set_input("x", file);
  ex.step();
  const auto out = ex.output_values();
  ASSERT_EQ(out.size(), 3u);
  using ::testing::ElementsAre;
  using ::testing::FloatNear;
  // Rows 1..4 (mean 2.5, variance 1.25) and -2, 0, 2, 4 (mean 1, variance 5); epsilon 1e-5.
  EXPECT_THAT(out[1], ElementsAre(FloatNear(2.5f, 1e-6f), FloatNear(1.0f, 1e-6f)));
  EXPECT_THAT(out[2], ElementsAre(FloatNear(static_cast<float>(1.0 / std::sqrt(1.25 + 1e-5)), 1e-5f),
                                  FloatNear(static_cast<float>(1.0 / std::sqrt(5.0 + 1e-5)), 1e-5f)));

  // InvStdDev alone (Mean's name left empty, as optimisers leave unused outputs), in a training
  // step: the statistics take no gradient, and the step runs.
  TinyModel u;
  u.input("x", {2, 4});
  u.input("gamma", {4});
  u.node("LayerNormalization", "/ln/LN", {"x", "gamma"}, {"y", "", "inv_std"});
  u.output("y", {2, 4});
  u.output("inv_std", {2, 1});
  options.mode = Mode::training;
  Executor trained(u.save("placer_exec_ln_inv_std.onnx"), options, virtual_cluster(), std::vector<DeviceId>(1, 0),
                   ExecOptions{.mode = Mode::training, .all_on_cpu = true});
  trained.set_input("x", file);
  trained.step();
  EXPECT_THAT(trained.output_values().at(1), ElementsAre(FloatNear(static_cast<float>(1.0 / std::sqrt(1.25 + 1e-5)), 1e-5f),
                                                         FloatNear(static_cast<float>(1.0 / std::sqrt(5.0 + 1e-5)), 1e-5f)));
}

// A recurrent layer's W, R and B, parameters of that layer alone, are kept as PyTorch's modules keep
// them (PyTorch's gate order, a leaf per direction and bias half) and PyTorch's layer trains them
// in place, with no copy; a layer with a clip runs the executor's own loop on them in ONNX's order.
// Both give the same outputs and the same updated parameters, read back in ONNX's order.
TEST(Executor, RecurrentLayersTrainTheirWeightsInPyTorchsGateOrder) {
  constexpr std::int64_t kSeq = 3, kBatch = 2, kInput = 3, kHidden = 2;
  auto values = [](std::size_t n, double scale, double phase) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(scale * std::sin(1.3 * static_cast<double>(i) + phase));
    return v;
  };
  for (const std::string cell : {"LSTM", "GRU", "RNN"})
    for (const std::int64_t dirs : {1, 2}) {
      SCOPED_TRACE(cell + " directions " + std::to_string(dirs));
      const std::int64_t gates = cell == "LSTM" ? 4 : cell == "GRU" ? 3 : 1;
      const std::vector<std::int64_t> w{dirs, gates * kHidden, kInput}, r{dirs, gates * kHidden, kHidden}, b{dirs, 2 * gates * kHidden};
      auto run = [&](bool clipped) {
        TinyModel t;
        t.input("x", {kSeq, kBatch, kInput});
        t.input("W", w), t.input("R", r), t.input("B", b);
        auto* n = t.node(cell, "/rnn/" + cell, {"x", "W", "R", "B"}, {"y"});
        set_int(n, "hidden_size", kHidden);
        if (dirs == 2) set_string(n, "direction", "bidirectional");
        if (cell == "GRU") set_int(n, "linear_before_reset", 1);
        if (clipped) {  // a clip (too large to clip anything) makes it a form PyTorch does not export: the loop
          auto* a = n->add_attribute();
          a->set_name("clip"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(1e30f);
        }
        t.output("y", {kSeq, dirs, kBatch, kHidden});
        ModelOptions options;
        options.mode = Mode::training;
        options.onnx.data_inputs = {"x"};
        auto ex = std::make_unique<Executor>(t.save("placer_exec_gate_order_" + cell + std::to_string(dirs) + (clipped ? "c" : "") + ".onnx"),
                                             options, virtual_cluster(), std::vector<DeviceId>(1, 0),
                                             ExecOptions{.mode = Mode::training, .learning_rate = 0.5, .all_on_cpu = true});
        auto size = [](const std::vector<std::int64_t>& d) { return static_cast<std::size_t>(d[0] * d[1] * (d.size() > 2 ? d[2] : 1)); };
        ex->set_input("x", float_tensor_file("x.pb", {kSeq, kBatch, kInput}, values(kSeq * kBatch * kInput, 1.0, 0.1)));
        ex->set_input("W", float_tensor_file("W.pb", w, values(size(w), 0.8, 0.2)));
        ex->set_input("R", float_tensor_file("R.pb", r, values(size(r), 0.6, 0.3)));
        ex->set_input("B", float_tensor_file("B.pb", b, values(size(b), 0.3, 0.4)));
        // Read back as given: the reordering is undone.
        EXPECT_EQ(ex->parameter_value("W"), values(size(w), 0.8, 0.2));
        EXPECT_EQ(ex->parameter_value("B"), values(size(b), 0.3, 0.4));
        ex->step();
        return ex;
      };
      const auto layer = run(false), loop = run(true);
      expect_close(layer->output_values().at(0), loop->output_values().at(0), 1e-5, "Y");
      for (const std::string name : {"W", "R", "B"}) {
        expect_close(layer->parameter_value(name), loop->parameter_value(name), 1e-5, name);
        EXPECT_NE(layer->parameter_value(name), values(name == "W" ? static_cast<std::size_t>(dirs * gates * kHidden * kInput) : name == "R" ? static_cast<std::size_t>(dirs * gates * kHidden * kHidden) : static_cast<std::size_t>(dirs * 2 * gates * kHidden), name == "W" ? 0.8 : name == "R" ? 0.6 : 0.3, name == "W" ? 0.2 : name == "R" ? 0.3 : 0.4)) << name << " is updated";
      }
    }
  // In half precision on the CPU the layer runs on float32 copies of its leaves: the gradients still
  // reach them (a review found them lost).
  TinyModel t;
  t.input("x", {kSeq, kBatch, kInput}, onnx::TensorProto::FLOAT16);
  t.input("W", {1, 4 * kHidden, kInput}, onnx::TensorProto::FLOAT16), t.input("R", {1, 4 * kHidden, kHidden}, onnx::TensorProto::FLOAT16);
  t.input("B", {1, 8 * kHidden}, onnx::TensorProto::FLOAT16);
  set_int(t.node("LSTM", "/rnn/LSTM", {"x", "W", "R", "B"}, {"y"}), "hidden_size", kHidden);
  t.output("y", {kSeq, 1, kBatch, kHidden});
  t.m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  ModelOptions options;
  options.mode = Mode::training;
  options.onnx.data_inputs = {"x"};
  Executor half(t.save("placer_exec_gate_order_half.onnx"), options, virtual_cluster(), std::vector<DeviceId>(1, 0),
                ExecOptions{.mode = Mode::training, .learning_rate = 0.5, .all_on_cpu = true});
  const std::vector<float> w = half.parameter_value("W"), r = half.parameter_value("R"), b = half.parameter_value("B");
  half.step();
  EXPECT_NE(half.parameter_value("W"), w);
  EXPECT_NE(half.parameter_value("R"), r);
  EXPECT_NE(half.parameter_value("B"), b);
}

TEST(Executor, RefusesAGpuThisLibtorchCannotReach) {
  REQUIRE_SHARED_MODELS();
  if (torch::cuda::is_available()) GTEST_SKIP() << "CUDA is available";
  const std::string path = test::shared_model("cifarnet");
  ModelOptions options;
  options.mode = Mode::inference;
  const std::size_t n = load_forward_graph(path, options).num_ops();
  EXPECT_THROW(Executor(path, options, virtual_cluster(), std::vector<DeviceId>(n, 2), ExecOptions{.mode = Mode::inference}), Error);
}

// A GPU runs on the CUDA device numbered after the last ':' of its name: a name without that
// number, or two GPUs on one CUDA device, are refused (with or without CUDA) instead of running on
// device 0.
TEST(Executor, AGpuNeedsItsCudaIndexInItsName) {
  auto dev = [](std::string name, DeviceKind kind) { return Device{name, kind, "virtual", 1e11, 1e10, 8ull << 30, 1e-6, 1}; };
  auto cluster = [&](std::string g0, std::string g1) {
    return Cluster::build("named", {dev("cpu:0", DeviceKind::cpu), dev(g0, DeviceKind::gpu), dev(g1, DeviceKind::gpu)}, {"bus"},
                          {Link{"a", "cpu:0", "bus", 1e10, 1e10, 1e-6}, Link{"b", g0, "bus", 1e10, 1e10, 1e-6},
                           Link{"c", g1, "bus", 1e10, 1e10, 1e-6}});
  };
  const std::vector<DeviceId> both{1, 2}, first{1}, host{0};
  EXPECT_THAT([&] { exec::check_devices_available(cluster("gpu0", "gpu1"), first); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("device 'gpu0' (a GPU): the executor takes its CUDA device")));
  EXPECT_THAT([&] { exec::check_devices_available(cluster("a:0", "b:0"), both); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("devices 'a:0' and 'b:0' would both run on CUDA device 0")));
  EXPECT_NO_THROW(exec::check_devices_available(cluster("gpu0", "gpu1"), host));  // GPUs not used
}

// ---- Real GPUs (run where libtorch has CUDA; skipped elsewhere) -----------------------------------
// Placements over the host and CUDA device 0: outputs and updated parameters equal the CPU-only run.
// cuDNN convolves in TF32 by default (about 1e-3 relative), hence the wider tolerance.

Cluster host_and_gpu() {
  auto dev = [](std::string name, DeviceKind kind) { return Device{name, kind, "real", 1e12, 1e11, 16ull << 30, 1e-6, 1}; };
  return Cluster::build("host+gpu", {dev("cpu:0", DeviceKind::cpu), dev("gpu:0", DeviceKind::gpu)}, {"pcie"},
                        {Link{"a", "cpu:0", "pcie", 1e10, 1e10, 1e-6}, Link{"b", "gpu:0", "pcie", 1e10, 1e10, 1e-6}});
}

#define REQUIRE_CUDA()                                                                  \
  do {                                                                                  \
    REQUIRE_SHARED_MODELS();                                                            \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "this libtorch has no CUDA device"; \
  } while (0)

Executor make_real(const std::string& path, Mode mode, const PlaceFn& place) {
  return make_on(host_and_gpu(), false, path, mode, place);
}

DeviceId on_gpu(const Graph&, OpId) { return 1; }
DeviceId alternate(const Graph&, OpId op) { return (op / 7) % 2; }
DeviceId second_half_on_gpu(const Graph& g, OpId op) { return op < g.num_ops() / 2 ? 0 : 1; }

void check_on_gpu(const std::string& model, Mode mode, double tolerance) {
  const std::string path = test::shared_model(model);
  Executor reference = make_real(path, mode, all_first);
  reference.step();
  for (const PlaceFn& place : {PlaceFn(on_gpu), PlaceFn(alternate), PlaceFn(second_half_on_gpu)}) {
    Executor ex = make_real(path, mode, place);
    ex.step();
    if (mode == Mode::inference) {
      const auto expected = reference.output_values();
      const auto got = ex.output_values();
      ASSERT_EQ(got.size(), expected.size());
      for (std::size_t i = 0; i < got.size(); ++i) expect_close(got[i], expected[i], tolerance, model + " output " + std::to_string(i));
    } else {
      EXPECT_NEAR(ex.last_loss(), reference.last_loss(), tolerance * std::fabs(reference.last_loss()) + 1e-6) << model;
      for (const auto& name : reference.parameter_names())
        expect_close(ex.parameter_value(name), reference.parameter_value(name), tolerance, model + " " + name);
    }
  }
}

TEST(ExecutorOnGpu, CifarnetInferenceAndTrainingMatchTheCpu) {
  REQUIRE_CUDA();
  check_on_gpu("cifarnet", Mode::inference, 5e-3);
  check_on_gpu("cifarnet", Mode::training, 5e-3);
}

TEST(ExecutorOnGpu, LargerModelsMatchTheCpu) {
  REQUIRE_CUDA();
  for (const char* model : {"resnet50", "bert_base", "rnnlm"}) check_on_gpu(model, Mode::inference, 5e-3);
  check_on_gpu("resnet50", Mode::training, 5e-3);
}

// The `local` preset names its GPUs by the driver's name as well as their CUDA index, so that a
// profile's `machine` tells two GPU machines apart (it said "CUDA device 0" on every one).
TEST(ExecutorOnGpu, TheLocalPresetNamesItsGpus) {
  REQUIRE_CUDA();
  exec::register_exec_presets();
  const Cluster local = resolve_cluster("local");
  const auto gpus = local.device_ids(DeviceKind::gpu);
  ASSERT_FALSE(gpus.empty());
  for (DeviceId d : gpus) {
    EXPECT_THAT(local.device(d).model, ::testing::Not(::testing::StartsWith("CUDA device"))) << local.device(d).name;
    EXPECT_THAT(local.device(d).model, ::testing::HasSubstr(", CUDA device ")) << local.device(d).name;
  }
}

TEST(ExecutorOnGpu, MeasuresAGpuStep) {
  REQUIRE_CUDA();
  Executor ex = make_real(test::shared_model("cifarnet"), Mode::training, alternate);
  const exec::StepTimes t = ex.measure(3, 1);
  EXPECT_GT(t.min_s, 0);
  EXPECT_GT(ex.copies_last_step(), 0u);
}

TEST(Executor, MeasuresStepTimes) {
  REQUIRE_SHARED_MODELS();
  Executor ex = make(test::shared_model("cifarnet"), Mode::training, all_first);
  const exec::StepTimes t = ex.measure(3, 1);
  ASSERT_EQ(t.times_s.size(), 3u);
  EXPECT_GT(t.min_s, 0);
  EXPECT_LE(t.min_s, t.median_s);
  EXPECT_LE(t.median_s, t.max_s);
  EXPECT_LE(t.p10_s, t.p90_s);
}

TEST(LocalPreset, IsTheDetectedMachine) {
  exec::register_exec_presets();
  const Cluster local = resolve_cluster("local");
  ASSERT_GE(local.num_devices(), 1u);
  EXPECT_EQ(local.device(0).name, "cpu:0");
  EXPECT_EQ(local.device(0).kind, DeviceKind::cpu);
  EXPECT_GT(local.device(0).peak_flops, 1e8);
  EXPECT_GT(local.device(0).memory_bandwidth_bytes_per_s, 1e8);
  EXPECT_GT(local.device(0).memory_bytes, 1ull << 28);
  const auto names = cluster_preset_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "local"), names.end());
  // What the peak alone cannot say, measured too: a gradient's autograd node costs more than a
  // forward op's dispatch, caches give a smaller working set more bandwidth (sizes ascending, each
  // at least the bandwidth of a larger one and of memory), and the slower of products and
  // convolutions reaches less of the peak than the cost model's default for its class.
  const Device& cpu = local.device(0);
  EXPECT_GT(cpu.backward_overhead_s(), cpu.op_overhead_s);
  ASSERT_FALSE(cpu.bandwidth_by_size.empty());
  double larger = cpu.memory_bandwidth_bytes_per_s;
  for (auto it = cpu.bandwidth_by_size.rbegin(); it != cpu.bandwidth_by_size.rend(); ++it) {
    EXPECT_GE(it->bytes_per_s, larger) << it->bytes;
    EXPECT_LT(it->bytes_per_s, 100 * cpu.memory_bandwidth_bytes_per_s) << it->bytes << ": a copy's fixed cost taken for its bandwidth";
    larger = it->bytes_per_s;
    if (it != cpu.bandwidth_by_size.rbegin()) {
      EXPECT_LT(it->bytes, std::prev(it)->bytes);
    }
  }
  // Products reach their class's default fraction of the peak at most; convolutions, measured on a
  // mix of shapes, that mix's share of the peak.
  const CostModel defaults = CostModel::defaults();
  EXPECT_LE(cpu.efficiency[static_cast<std::size_t>(OpClass::matmul)].compute, defaults.of(DeviceKind::cpu, OpClass::matmul).compute);
  const double conv = cpu.efficiency[static_cast<std::size_t>(OpClass::conv)].compute;
  EXPECT_GT(conv, 0.0);
  EXPECT_LE(conv, 1.0);
  // Products by their smallest dimension: rows 8 to 1024, each a positive share of the peak; 8 rows
  // run well below 1024 (0.4 of their rate on the machines measured; neighbouring points may
  // wobble: not compared).
  ASSERT_EQ(cpu.product_efficiency_by_size.size(), 7u);
  EXPECT_EQ(cpu.product_efficiency_by_size.front().size, 8u);
  EXPECT_EQ(cpu.product_efficiency_by_size.back().size, 1024u);
  for (const auto& point : cpu.product_efficiency_by_size) EXPECT_GT(point.compute, 0.0) << point.size;
  EXPECT_LT(cpu.product_efficiency_by_size.front().compute, 0.8 * cpu.product_efficiency_by_size.back().compute);
  // Ungrouped convolutions by their kernel: the 1x1 and the 3x3 of the mix.
  ASSERT_EQ(cpu.conv_efficiency_by_kernel.size(), 2u);
  EXPECT_EQ(cpu.conv_efficiency_by_kernel[0].size, 1u);
  EXPECT_EQ(cpu.conv_efficiency_by_kernel[1].size, 9u);
  for (const auto& point : cpu.conv_efficiency_by_kernel) EXPECT_GT(point.compute, 0.0) << point.size;
  // Kernels timed alone that run below their class get an efficiency of their own type
  // (type_efficiency_for, tested in the cost tests): the pools, the row and pointwise kernels of
  // transformers and recurrent layers, and their gradients, batch normalisation by batch
  // statistics, and the image kernels (depthwise and transposed convolutions, reflect and edge
  // pads, instance normalisation) only; the pads, which have no FLOPs, by their bytes.
  for (const auto& [type, e] : cpu.efficiency_by_type) {
    EXPECT_THAT(type, ::testing::AnyOf("MaxPool", "MaxPoolGrad", "AveragePool", "AveragePoolGrad", "Erf", "ErfGrad", "Tanh", "Sigmoid",
                                       "Softmax", "SoftmaxGrad", "LayerNormalization", "LayerNormalizationGrad",
                                       "BatchNormalizationTraining", "BatchNormalizationGrad", "GlobalAveragePoolGrad", "ConvDepthwise", "ConvDepthwiseGrad", "ConvDepthwiseStrided",
                                       "ConvDepthwiseStridedGrad", "ConvTranspose", "ConvTransposeGrad", "PadReflect", "PadReflectGrad",
                                       "PadEdge", "PadEdgeGrad", "InstanceNormalization", "InstanceNormalizationGrad"));
    if (type.starts_with("Pad")) EXPECT_GT(e.memory, 0.0) << type;
    else EXPECT_GT(e.compute, 0.0) << type;
  }
}

TEST(Profiler, TimesEveryOpOfTheTrainingStepAndFitsTheModel) {
  REQUIRE_SHARED_MODELS();
  exec::register_exec_presets();
  const std::string path = test::shared_model("cifarnet");
  const Cluster local = resolve_cluster("local");
  ModelOptions options;
  exec::ProfileReport r = exec::profile_model(path, options, local, exec::ProfileOptions{.repeats = 2, .steps = 2, .warmup = 1});
  ASSERT_EQ(r.kinds.size(), 1u);
  ASSERT_TRUE(r.profile.model().has_value());
  const Graph step = load_model(path, options);
  std::size_t measured = 0;
  for (OpId op = 0; op < step.num_ops(); ++op) {
    if (step.op_work(op).op_class == OpClass::alias) continue;
    auto t = r.profile.find(DeviceKind::cpu, step.op_name(op), op_signature(step, op));
    ASSERT_TRUE(t.has_value()) << step.op_name(op);
    EXPECT_GT(*t, 0) << step.op_name(op);
    ++measured;
  }
  EXPECT_EQ(measured, r.kinds[0].ops_measured);
  // The local peak bounds what libtorch's own convolutions reach: their fitted efficiency stays
  // near 1, not at the fit's ceiling of 4, where it sat while the peak was a matrix product's alone
  // and the BLAS ran a slow kernel (found by a review; exec/local.cpp). The peak and the profile
  // are timed at different moments, so another process on the machine moves their ratio: 2.43 was
  // seen once with a build on the second core; 3 stays clear of it and of the ceiling.
  EXPECT_LE(r.profile.model()->of(DeviceKind::cpu, OpClass::conv).compute, 3.0);
  // A time by name is for that op's signature only.
  EXPECT_FALSE(r.profile.find_by_name(DeviceKind::cpu, "/conv1/Conv", "Conv(1x1,1x1)").has_value());
  // Calibrated: the profiled ops sum to the measured step.
  double sum = 0;
  for (OpId op = 0; op < step.num_ops(); ++op)
    if (auto t = r.profile.find(DeviceKind::cpu, step.op_name(op), op_signature(step, op))) sum += *t;
  EXPECT_NEAR(sum, r.kinds[0].step_s, 0.01 * r.kinds[0].step_s);
}

}  // namespace
}  // namespace placer
