#include "placer/io/graph_json.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "placer/io/model.hpp"
#include "placer/io/onnx.hpp"
#include "placer/graph/training.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_ops(), b.num_ops());
  ASSERT_EQ(a.num_tensors(), b.num_tensors());
  EXPECT_EQ(a.num_forward_ops(), b.num_forward_ops());
  EXPECT_EQ(a.optimizer_state_copies(), b.optimizer_state_copies());
  for (OpId o = 0; o < a.num_ops(); ++o) {
    EXPECT_EQ(a.op_name(o), b.op_name(o));
    EXPECT_EQ(a.op_type(o), b.op_type(o));
    EXPECT_EQ(a.module_name(a.op_module(o)), b.module_name(b.op_module(o)));
    EXPECT_EQ(a.op_call(o), b.op_call(o));
    EXPECT_EQ(a.op_role(o), b.op_role(o));
    EXPECT_EQ(a.forward_op(o), b.forward_op(o));
    EXPECT_EQ(a.updated_param(o), b.updated_param(o));
    EXPECT_EQ(a.op_work(o), b.op_work(o));
    EXPECT_EQ(a.op_attrs(o), b.op_attrs(o));
    EXPECT_TRUE(std::ranges::equal(a.op_inputs(o), b.op_inputs(o)));
    EXPECT_TRUE(std::ranges::equal(a.op_outputs(o), b.op_outputs(o)));
    EXPECT_EQ(a.op_view_outputs(o), b.op_view_outputs(o));
  }
  for (TensorId t = 0; t < a.num_tensors(); ++t) {
    EXPECT_EQ(a.tensor_name(t), b.tensor_name(t));
    EXPECT_TRUE(std::ranges::equal(a.tensor_shape(t), b.tensor_shape(t)));
    EXPECT_EQ(a.tensor_dtype(t), b.tensor_dtype(t));
    EXPECT_EQ(a.tensor_kind(t), b.tensor_kind(t));
  }
}

TEST(GraphJson, TrainingStepRoundTripsIdentically) {
  Graph step = derive_training_step(load_onnx(test::example("inception_v3.onnx"), {}), Optimizer::adam);
  std::string path = test::temp_path("inception.graph.json");
  save_graph_json(step, path);
  Graph back = load_graph_json(path);
  expect_same_graph(step, back);
  EXPECT_EQ(graph_to_json(step).dump(), graph_to_json(back).dump());
  std::remove(path.c_str());
}

TEST(GraphJson, GradientsPassedThroughStayViewsOfTheIncomingGradient) {
  // y = Relu(x·w + Relu(x·w)): a residual sum, whose gradient passes dY on to both operands.
  GraphBuilder b("residual");
  const TensorId x = b.add_tensor("x", {4, 8}, DType::f32, TensorKind::data), w = b.add_tensor("w", {8, 8}, DType::f32, TensorKind::parameter);
  const TensorId h = b.add_tensor("h", {4, 8}, DType::f32, TensorKind::activation), r = b.add_tensor("r", {4, 8}, DType::f32, TensorKind::activation);
  const TensorId s = b.add_tensor("s", {4, 8}, DType::f32, TensorKind::activation), y = b.add_tensor("y", {4, 8}, DType::f32, TensorKind::activation);
  b.add_op({.name = "mm", .type = "MatMul", .inputs = {x, w}, .outputs = {h}, .work = {512, 384, 128, OpClass::matmul}});
  b.add_op({.name = "relu", .type = "Relu", .inputs = {h}, .outputs = {r}, .work = {32, 128, 128, OpClass::elementwise}});
  b.add_op({.name = "add", .type = "Add", .inputs = {h, r}, .outputs = {s}, .work = {32, 256, 128, OpClass::elementwise}});
  b.add_op({.name = "out", .type = "Relu", .inputs = {s}, .outputs = {y}, .work = {32, 128, 128, OpClass::elementwise}});
  b.mark_output(y);
  const Graph step = derive_training_step(std::move(b).build(), Optimizer::sgd);
  ASSERT_EQ(step.op_view_outputs(step.find_op("add/grad")), 3u);
  const nlohmann::json j = graph_to_json(step);
  bool listed = false;
  for (const auto& op : j["ops"])
    if (op["name"] == "add/grad") listed = op.at("views") == nlohmann::json({"grad/h/add", "grad/r/add"});
  EXPECT_TRUE(listed);
  const std::string path = test::temp_path("residual.graph.json");
  save_graph_json(step, path);
  const Graph back = load_graph_json(path);
  expect_same_graph(step, back);
  EXPECT_EQ(j.dump(), graph_to_json(back).dump());
  std::remove(path.c_str());
}

TEST(GraphJson, ASavedTrainingStepIsPlacedAsItIsAndNeverTakenForAForwardPass) {
  Graph step = derive_training_step(load_onnx(test::example("inception_v3.onnx"), {}), Optimizer::momentum);
  std::string path = test::temp_path("step.graph.json");
  save_graph_json(step, path);
  // Training mode: the saved step as it is, whatever --optimizer says (its update ops are in it).
  Graph training = load_model(path, ModelOptions{.mode = Mode::training, .optimizer = Optimizer::adam});
  expect_same_graph(step, training);
  // Inference mode would otherwise place every backward and update op as if it were forward.
  try {
    (void)load_model(path, ModelOptions{.mode = Mode::inference});
    FAIL() << "a training step loaded in inference mode";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds a training step (594 backward and update ops)"));
    EXPECT_THAT(e.what(), HasSubstr("--mode inference --save-graph"));
  }
  std::remove(path.c_str());
}

TEST(GraphJson, OpsWithoutWorkArePricedByTheRules) {
  nlohmann::json j = {{"format", "placer-graph"},
                      {"version", 1},
                      {"tensors",
                       {{{"name", "x"}, {"shape", {8, 16}}, {"kind", "data"}},
                        {{"name", "w"}, {"shape", {16, 4}}, {"kind", "parameter"}},
                        {{"name", "y"}, {"shape", {8, 4}}}}},
                      {"ops", {{{"name", "mm"}, {"type", "MatMul"}, {"inputs", {"x", "w"}}, {"outputs", {"y"}}}}},
                      {"outputs", {"y"}}};
  Graph g = graph_from_json(j, "test");
  EXPECT_DOUBLE_EQ(g.op_work(0).flops, 2.0 * 8 * 16 * 4);
  EXPECT_EQ(g.op_work(0).op_class, OpClass::matmul);
  EXPECT_EQ(g.op_work(0).product_min_dim, 4u);
  // Work given: a product's smallest dimension as written (0 without one), written back.
  j["ops"][0]["flops"] = 1024.0;
  j["ops"][0]["class"] = "matmul";
  EXPECT_EQ(graph_from_json(j, "test").op_work(0).product_min_dim, 0u);
  j["ops"][0]["product_min_dim"] = 12;
  const Graph given = graph_from_json(j, "test");
  EXPECT_EQ(given.op_work(0).product_min_dim, 12u);
  EXPECT_EQ(graph_to_json(given)["ops"][0]["product_min_dim"], 12);
  j["ops"][0]["conv_kernel_area"] = 9;
  EXPECT_EQ(graph_from_json(j, "test").op_work(0).conv_kernel_area, 9u);
  j["ops"][0]["conv_kernel_area"] = -9;
  EXPECT_THROW((void)graph_from_json(j, "test"), Error);
}

std::string write(const std::string& name, const std::string& text) {
  std::string path = test::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

void expect_error(const std::string& text, const std::string& fragment) {
  try {
    (void)load_graph_json(write("bad.json", text));
    FAIL() << text;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
  }
}

TEST(GraphJsonBadInput, ViewsMustBeOutputsOfTheFirstInputsSize) {
  const std::string head = R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}, {"name": "z", "shape": [5]}],
    "outputs": ["y", "z"], "ops": [{"name": "p", "type": "Pass", "inputs": ["x"], "outputs": ["y", "z"], "flops": 4, )";
  expect_error(head + R"("views": ["x"]}]})", "'views' names 'x', which is not one of its outputs");
  expect_error(head + R"("views": ["z"]}]})", "declares output 'z' a view of its input 'x', but it is larger than that input");
  expect_error(head + R"("views": "y"}]})", "field 'views' must be a list");
}

// Found by a fuzzing review: a negative dimension was reported as a shape mismatch of the op
// reading it, and a saved Adam step without 'optimizer_state_copies' was priced without Adam's state.
TEST(GraphJsonBadInput, ANegativeDimensionIsNamed) {
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [-32, 4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "flops": 1}], "outputs": ["y"]})",
               "'x': dimension 0 of its shape is -32, not positive");
  // A zero, before any op's shape rule reads it (a MatMul said "gives [4,8], not [4,0]": a QA pass).
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4, 8], "kind": "data"},
    {"name": "w", "shape": [8, 8], "kind": "parameter"}, {"name": "h", "shape": [4, 0]}],
    "ops": [{"name": "mm", "type": "MatMul", "inputs": ["x", "w"], "outputs": ["h"]}], "outputs": ["h"]})",
               "'h': dimension 1 of its shape is 0, not positive (an empty tensor: nothing to place)");
}

// A graph of no op: nothing to place (simulate printed an empty table, compare "0.0 us" for some
// placers and an error for others: a QA pass).
TEST(GraphJsonBadInput, AGraphOfNoOpIsRefused) {
  const std::string path = test::temp_path("no_ops.json");
  std::ofstream(path) << R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [2], "kind": "data"}], "ops": [], "outputs": ["x"]})";
  EXPECT_THAT([&] { load_model(path, ModelOptions{}); }, ThrowsMessage<Error>(HasSubstr("holds no op: there is nothing to place")));
}

TEST(GraphJson, UpdateOpsSayHowMuchOptimizerStateTheyKeep) {
  const std::string head = R"({"format": "placer-graph", "version": 1, "forward_ops": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "w", "shape": [4], "kind": "parameter"}, {"name": "y", "shape": [4]},
                {"name": "g", "shape": [4], "kind": "gradient"}],
    "ops": [{"name": "f", "type": "Mul", "inputs": ["x", "w"], "outputs": ["y"]},
            {"name": "f/grad", "type": "MulGrad", "role": "backward", "forward_op": "f", "inputs": ["y"], "outputs": ["g"], "flops": 4},
            {"name": "update/w", "type": ")";
  auto load = [&](const std::string& type, const std::string& field) {
    return load_graph_json(write("state.json", head + type + R"(", "role": "update", "param": "w", "inputs": ["w", "g"], "outputs": [], "flops": 4}],
      "outputs": ["y"])" + field + "}"));
  };
  EXPECT_EQ(load("AdamUpdate", "").optimizer_state_copies(), 2u);
  EXPECT_EQ(load("MomentumUpdate", "").optimizer_state_copies(), 1u);
  EXPECT_EQ(load("AdamUpdate", R"(, "optimizer_state_copies": 2)").optimizer_state_copies(), 2u);
  EXPECT_EQ(load("LionUpdate", R"(, "optimizer_state_copies": 1)").optimizer_state_copies(), 1u);  // not placer's: the field says
  expect_error(head + R"(SGDUpdate", "role": "update", "param": "w", "inputs": ["w", "g"], "outputs": [], "flops": 4}],
      "outputs": ["y"], "optimizer_state_copies": 2})",
               "field 'optimizer_state_copies' is 2, but its update ops are 'SGDUpdate', which keeps 0");
}

TEST(GraphJsonBadInput, WorkSummingPastADoubleIsRefused) {
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]},
    {"name": "z", "shape": [4]}], "ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "flops": 1.7e308},
    {"name": "b", "type": "Relu", "inputs": ["y"], "outputs": ["z"], "flops": 1.7e308}], "outputs": ["z"]})",
               "its ops' FLOPs or bytes sum past what a double holds");
}

TEST(GraphJsonBadInput, MalformedJson) { expect_error("{\"ops\": [", "not valid JSON"); }
TEST(GraphJsonBadInput, WrongFormat) { expect_error("{\"format\": \"other\"}", "not a placer graph"); }
TEST(GraphJsonBadInput, FutureVersion) {
  expect_error(R"({"format": "placer-graph", "version": 99, "tensors": [], "ops": []})", "graph format version 99 is newer than this placer reads (1)");
  // One past 64 bits, which the parser reads as a float, is newer too (it was "must be an integer, got 1e+20": a QA pass).
  expect_error(R"({"format": "placer-graph", "version": 99999999999999999999, "tensors": [], "ops": []})",
               "graph format version 1e+20 is newer than this placer reads (1)");
  expect_error(R"({"format": "placer-graph", "version": 1.5, "tensors": [], "ops": []})", "field 'version' must be an integer, got 1.5");
  expect_error(R"({"format": "placer-graph", "version": 0, "tensors": [], "ops": []})", "field 'version' must be at least 1, got 0");
}
TEST(GraphJsonBadInput, MissingFieldNamesTheOp) {
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [], "ops": [{"name": "lonely"}]})", "'lonely'");
}
TEST(GraphJsonBadInput, UnknownTensorNamesIt) {
  expect_error(
      R"({"format": "placer-graph", "version": 1, "tensors": [], "ops": [{"name": "a", "type": "Relu", "inputs": ["ghost"], "outputs": []}]})",
      "'ghost'");
}
TEST(GraphJsonBadInput, Cycle) {
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "t1", "shape": [1]}, {"name": "t2", "shape": [1]}],
    "ops": [{"name": "a", "type": "Relu", "inputs": ["t2"], "outputs": ["t1"]},
            {"name": "b", "type": "Relu", "inputs": ["t1"], "outputs": ["t2"]}]})",
               "cycle");
}
TEST(GraphJsonBadInput, UnknownOpTypeWithoutWork) {
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [1], "kind": "data"}, {"name": "y", "shape": [1]}],
    "ops": [{"name": "a", "type": "Frobnicate", "inputs": ["x"], "outputs": ["y"]}]})",
               "Frobnicate");
}

// Shapes that contradict their op were priced from the output alone (a sweep, 2026-11-28): for the
// ops whose work reads several tensors, an op priced by the rules must have tensors that agree; an op
// that gives its own 'flops' is taken as written.
TEST(GraphJsonBadInput, OperandShapesThatContradictTheirOpAreNamed) {
  auto one_op = [](const std::string& type, const std::vector<std::vector<int>>& ins, const std::vector<int>& out,
                   const nlohmann::json& attrs, bool flops) {
    nlohmann::json tensors = nlohmann::json::array(), inputs = nlohmann::json::array();
    for (std::size_t i = 0; i < ins.size(); ++i) {
      tensors.push_back({{"name", "in" + std::to_string(i)}, {"shape", ins[i]}, {"kind", i == 0 ? "data" : "parameter"}});
      inputs.push_back("in" + std::to_string(i));
    }
    tensors.push_back({{"name", "y"}, {"shape", out}});
    nlohmann::json op = {{"name", "op"}, {"type", type}, {"inputs", inputs}, {"outputs", {"y"}}, {"attrs", attrs}};
    if (flops) op["flops"] = 1.0;
    nlohmann::json j = {{"format", "placer-graph"}, {"version", 1}, {"tensors", tensors}, {"ops", {op}}, {"outputs", {"y"}}};
    try {
      (void)graph_from_json(j, "test");
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  const nlohmann::json none = nlohmann::json::object();
  EXPECT_EQ(one_op("MatMul", {{32, 784}, {784, 128}}, {32, 128}, none, false), "");
  EXPECT_EQ(one_op("MatMul", {{4, 1, 8, 16}, {3, 16, 2}}, {4, 3, 8, 2}, none, false), "");  // batch dimensions broadcast
  EXPECT_EQ(one_op("MatMul", {{16}, {5, 16, 2}}, {5, 2}, none, false), "");                  // a 1-D A
  EXPECT_THAT(one_op("MatMul", {{32, 784}, {100, 128}}, {32, 128}, none, false),
              HasSubstr("ops[0] 'op' (MatMul): A [32,784] and B [100,128] do not share an inner dimension (784 and 100)"));
  EXPECT_THAT(one_op("MatMul", {{32, 784}, {784, 128}}, {32, 64}, none, false), HasSubstr("gives [32,128], not [32,64]"));
  EXPECT_EQ(one_op("MatMul", {{32, 784}, {100, 128}}, {32, 128}, none, true), "");  // its own work: taken as written
  EXPECT_EQ(one_op("Gemm", {{32, 784}, {128, 784}, {128}}, {32, 128}, {{"transB", 1}}, false), "");
  EXPECT_THAT(one_op("Gemm", {{32, 784}, {128, 784}}, {32, 128}, none, false), HasSubstr("do not share an inner dimension (784 and 128)"));
  EXPECT_EQ(one_op("Conv", {{8, 3, 32, 32}, {16, 3, 3, 3}, {16}}, {8, 16, 30, 30}, none, false), "");
  EXPECT_EQ(one_op("Conv", {{8, 32, 32, 32}, {32, 1, 3, 3}}, {8, 32, 30, 30}, {{"group", 32}}, false), "");
  EXPECT_THAT(one_op("Conv", {{8, 3, 32, 32}, {16, 4, 3, 3}}, {8, 16, 30, 30}, none, false),
              HasSubstr("input [8,3,32,32] has 3 channels, but weight [16,4,3,3] takes 4 per group in 1 group(s)"));
  EXPECT_THAT(one_op("Conv", {{8, 3, 32, 32}, {16, 3, 3, 3}}, {8, 12, 30, 30}, none, false),
              HasSubstr("should have the input's batch 8 and the weight's 16 output channels"));
  EXPECT_EQ(one_op("Add", {{32, 128}, {128}}, {32, 128}, none, false), "");
  EXPECT_THAT(one_op("Add", {{32, 128}, {64}}, {32, 128}, none, false), HasSubstr("its inputs [32,128] and [64] do not broadcast together"));
  EXPECT_THAT(one_op("Relu", {{32, 128}}, {32, 64}, none, false), HasSubstr("(Relu): its inputs [32,128] give an output of [32,128], not [32,64]"));
  EXPECT_EQ(one_op("Softmax", {{4, 10}}, {4, 10}, none, false), "");
  // Valid forms whose operands differ (a review's list): scalars, broadcast slopes, conditions.
  EXPECT_EQ(one_op("Clip", {{4, 10}, {}, {}}, {4, 10}, none, false), "");
  EXPECT_EQ(one_op("PRelu", {{2, 8, 5, 5}, {8, 1, 1}}, {2, 8, 5, 5}, none, false), "");
  EXPECT_THAT(one_op("PRelu", {{2, 8, 5, 5}, {8}}, {2, 8, 5, 5}, none, false), HasSubstr("a slope per channel of [N,C,H,W] is [C,1,1]"));
  EXPECT_EQ(one_op("Where", {{4, 1}, {4, 10}, {}}, {4, 10}, none, false), "");
  EXPECT_EQ(one_op("Pow", {{4, 10}, {}}, {4, 10}, none, false), "");
  EXPECT_EQ(one_op("Sum", {{4, 10}, {10}, {4, 1}}, {4, 10}, none, false), "");
  EXPECT_EQ(one_op("MatMul", {{16}, {16}}, {}, none, false), "");  // two vectors: a scalar
  EXPECT_EQ(one_op("Gemm", {{32, 16}, {16, 8}, {32, 1}}, {32, 8}, none, false), "");
  // A group count past what a product of dimensions holds: refused without overflowing.
  EXPECT_THAT(one_op("Conv", {{8, 4, 32, 32}, {4, 4, 3, 3}}, {8, 4, 30, 30}, {{"group", 4611686018427387904LL}}, false),
              HasSubstr("takes 4 per group in 4611686018427387904 group(s)"));
}

TEST(GraphJsonBadInput, MisspeltFieldsAreNamed) {
  // At the top, in a tensor and in an op: an unknown field is an error naming it, never ignored.
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [], "ops": [], "ouputs": []})", "unknown field 'ouputs'");
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [1], "kidn": "data"}], "ops": []})",
               "tensors[0] 'x'");
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [1], "kind": "data"}, {"name": "y", "shape": [1]}],
    "ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "modlue": "block1"}]})",
               "unknown field 'modlue'");
}
// Found by fuzzing: nlohmann's get<> truncated 784.5 to 784 and 1.5 to 1, wrapped -1 into 2^64-1
// state copies (a peak of thousands of TiB), read "inputs": {} as no inputs, and a key given twice
// silently kept its last value.
TEST(GraphJsonBadInput, FieldsOfTheWrongTypeAreRefusedNotConverted) {
  const std::string x = R"({"name": "x", "shape": [2, 3], "kind": "data"})", y = R"({"name": "y", "shape": [2, 3]})";
  auto graph = [&](const std::string& top, const std::string& tensor_x, const std::string& op) {
    return R"({"format": "placer-graph", )" + top + R"(, "tensors": [)" + tensor_x + ", " + y + R"(], "ops": [)" + op + "]}";
  };
  const std::string relu = R"({"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]})";
  const std::string v1 = R"("version": 1)";
  expect_error(graph(v1, R"({"name": "x", "shape": [2, 3.5], "kind": "data"})", relu),
               "tensors[0] 'x': field 'shape' must be a list of integers, got [2,3.5]");
  expect_error(graph(R"("version": 1.5)", x, relu), "field 'version' must be an integer, got 1.5");
  expect_error(graph(v1 + R"(, "optimizer_state_copies": -1)", x, relu), "field 'optimizer_state_copies' must be an integer from 0 to 16, got -1");
  expect_error(graph(v1 + R"(, "optimizer_state_copies": false)", x, relu), "field 'optimizer_state_copies' must be an integer, got false");
  expect_error(graph(v1 + R"(, "optimizer_state_copies": 4294967295)", x, relu), "must be an integer from 0 to 16, got 4294967295");
  expect_error(graph(v1, x, R"({"name": "a", "type": "Relu", "inputs": {}, "outputs": ["y"]})"), "ops[0] 'a': field 'inputs' must be a list, got {}");
  expect_error(graph(v1, x, R"({"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "call": 1.5})"),
               "field 'call' must be an integer from 0 to 4294967295");
  expect_error(graph(v1, x, R"({"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "call": 4294967296})"),
               "field 'call' must be an integer from 0 to 4294967295, got 4294967296");
  expect_error(graph(v1, x, R"({"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "flops": 6, "product_min_dim": -1})"),
               "field 'product_min_dim' must be an integer from 0 to 4294967295");
  expect_error(graph(R"("version": 99, "version": 1)", x, relu), "key 'version' appears twice in one object");
  expect_error(graph(v1, x, R"({"name": "a", "name": "b", "type": "Relu", "inputs": ["x"], "outputs": ["y"]})"), "key 'name' appears twice");
  // The same keys in different objects are no duplicates.
  EXPECT_EQ(load_graph_json(write("fine.json", graph(v1 + R"(, "optimizer_state_copies": 0)", x, relu))).num_ops(), 1u);
  // A forward graph of parameters keeps no optimizer state: a count given there was ignored without
  // a word. (Without parameters the count prices nothing: the step placer saves of such a model
  // with --optimizer adam, which has no update op, reads back.)
  EXPECT_EQ(load_graph_json(write("no_params.json", graph(v1 + R"(, "optimizer_state_copies": 2)", x, relu))).num_ops(), 1u);
  const std::string w = R"({"name": "w", "shape": [2, 3], "kind": "parameter"})";
  const std::string add = R"({"name": "a", "type": "Add", "inputs": ["x", "w"], "outputs": ["y"]})";
  expect_error(graph(v1 + R"(, "optimizer_state_copies": 2)", x + ", " + w, add),
               "field 'optimizer_state_copies' is 2, but the graph holds forward ops only");
}

TEST(GraphJsonBadInput, ForwardOpsMustComeFirst) {
  const std::string tensors = R"("tensors": [{"name": "x", "shape": [1], "kind": "data"}, {"name": "y", "shape": [1]}, {"name": "dx", "shape": [1]}])";
  const std::string ops = R"("ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]},
            {"name": "a_grad", "type": "ReluGrad", "role": "backward", "forward_op": "a", "inputs": ["y"], "outputs": ["dx"], "flops": 1}])";
  // Declared count too large: the backward op would count as forward.
  expect_error(R"({"format": "placer-graph", "version": 1, "forward_ops": 2, )" + tensors + ", " + ops + "}", "has role 'backward'");
  // Without forward_ops the count is the ops whose role is forward: this one loads.
  Graph g = load_graph_json(write("fwd.json", R"({"format": "placer-graph", "version": 1, )" + tensors + ", " + ops + "}"));
  EXPECT_EQ(g.num_forward_ops(), 1u);
  EXPECT_EQ(g.forward_op(1), 0u);
  // A gradient op pointing at another gradient op.
  expect_error(R"({"format": "placer-graph", "version": 1, )" + tensors + R"(, "ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]},
            {"name": "a_grad", "type": "ReluGrad", "role": "backward", "forward_op": "a_grad", "inputs": ["y"], "outputs": ["dx"], "flops": 1}]})",
               "must be a forward op");
}

// Found by a review: each of these loaded silently and gave a wrong step or negative costs.
TEST(GraphJsonBadInput, AnIntegerParameterIsRefused) {
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4, 8], "kind": "data"}, {"name": "idx", "shape": [4, 8], "dtype": "int64", "kind": "parameter"},
                {"name": "z", "shape": [4, 8]}],
    "ops": [{"name": "add", "type": "Add", "inputs": ["x", "idx"], "outputs": ["z"]}], "outputs": ["z"]})",
               "tensors[1] 'idx': a parameter must be floating-point, not int64");
}
TEST(GraphJsonBadInput, AProducedTensorOfAnInputKindIsRefused) {
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4], "kind": "parameter"}],
    "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})",
               "ops[0] 'r': output tensor 'y' is of kind 'parameter', which only a graph input has");
}
// Found by a fuzzing review: an op of an ONNX type without the operands ONNX requires was priced
// (a Conv without its weight at 0 FLOPs, a MatMul with one input from its output alone); a forward
// op's output of kind gradient, an alias naming no tensor and a module path with an empty part
// loaded silently.
TEST(GraphJsonBadInput, OperandsOnnxRequiresAreThere) {
  auto op = [](const std::string& tensors, const std::string& the_op) {
    return R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [1, 3, 8, 8], "kind": "data"},
      {"name": "w", "shape": [4, 3, 3, 3], "kind": "parameter"}, {"name": "y", "shape": [1, 4, 6, 6]})" + tensors + R"(],
      "ops": [)" + the_op + R"(], "outputs": ["y"]})";
  };
  expect_error(op("", R"({"name": "c", "type": "Conv", "inputs": ["x"], "outputs": ["y"]})"),
               "ops[0] 'c' (Conv): 1 input, where ONNX's Conv takes at least 2");
  expect_error(op("", R"({"name": "c", "type": "Conv", "inputs": [], "outputs": ["y"]})"), "0 inputs, where ONNX's Conv takes at least 2");
  expect_error(op("", R"({"name": "c", "type": "Conv", "inputs": ["x", null], "outputs": ["y"]})"),
               "its input 1 is null, but ONNX's Conv requires its first 2");
  expect_error(op("", R"({"name": "m", "type": "MatMul", "inputs": ["x"], "outputs": ["y"]})"), "1 input, where ONNX's MatMul takes at least 2");
  expect_error(op("", R"({"name": "c", "type": "Conv", "inputs": ["x", "w"], "outputs": []})"), "0 outputs, where ONNX's Conv gives at least 1");
  // Optional inputs may be null; an op priced by its own figures is not checked; Slice took one
  // input before opset 10.
  const std::string conv_no_bias = op("", R"({"name": "c", "type": "Conv", "inputs": ["x", "w", null], "outputs": ["y"]})");
  EXPECT_EQ(load_graph_json(write("conv.json", conv_no_bias)).num_ops(), 1u);
  const std::string priced = op("", R"({"name": "m", "type": "MatMul", "inputs": ["x"], "outputs": ["y"], "flops": 100})");
  EXPECT_EQ(load_graph_json(write("priced.json", priced)).num_ops(), 1u);
  EXPECT_NO_THROW(load_graph_json(write("slice1.json", R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [8], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "s", "type": "Slice", "inputs": ["x"], "outputs": ["y"], "attrs": {"starts": [0], "ends": [4]}}], "outputs": ["y"]})")));
  // No upper bound: opset 18 gave ReduceMean and Pad an axes input (the linked ONNX library stops
  // at 17), an If lists what its branches read, and an alias op (formats.md) has no operands.
  auto loads = [&](const std::string& name, const std::string& j) {
    EXPECT_NO_THROW(load_graph_json(write(name, j), OpClass::elementwise)) << j;
  };
  const std::string reduce = R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4, 8], "kind": "data"},
      {"name": "axes", "shape": [1], "dtype": "int64", "kind": "constant"}, {"name": "pads", "shape": [4], "dtype": "int64", "kind": "constant"},
      {"name": "v", "shape": [], "kind": "constant"}, {"name": "c", "shape": [], "dtype": "bool", "kind": "data"},
      {"name": "y", "shape": [4, 1]}, {"name": "p", "shape": [6, 8]}, {"name": "i", "shape": [4, 8]}],
      "ops": [{"name": "r", "type": "ReduceMean", "inputs": ["x", "axes"], "outputs": ["y"]},
              {"name": "pad", "type": "Pad", "inputs": ["x", "pads", "v", "axes"], "outputs": ["p"]},
              {"name": "if", "type": "If", "inputs": ["c", "x", "v"], "outputs": ["i"]},
              {"name": "alias", "type": "Identity", "inputs": [], "outputs": [], "attrs": {"alias_of": "x", "alias": "y"}}],
      "outputs": ["y", "p", "i"]})";
  loads("newer.json", reduce);
  // A forward op's gradient, an alias of nothing, empty module parts.
  const std::string relu_to = R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4], "kind": "data"},
      {"name": "y", "shape": [4], "kind": "KIND"}], "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]MORE}], "outputs": ["y"]})";
  auto relu = [&](const std::string& kind, const std::string& more) {
    std::string j = relu_to;
    j.replace(j.find("KIND"), 4, kind);
    j.replace(j.find("MORE"), 4, more);
    return j;
  };
  expect_error(relu("gradient", ""), "output tensor 'y' is of kind 'gradient', but the op is a forward op");
  expect_error(relu("activation", R"(, "attrs": {"alias_of": "nowhere"})"), "attribute 'alias_of' must name a tensor in 'tensors', got 'nowhere'");
  expect_error(relu("activation", R"(, "attrs": {"alias": 3})"), "attribute 'alias' must name a tensor");
  for (const std::string module : {"x.", ".x", "a..b", "."})
    expect_error(relu("activation", R"(, "module": ")" + module + "\""), "module path '" + module + "' has an empty part");
  EXPECT_EQ(load_graph_json(write("module.json", relu("activation", R"(, "module": "a.b", "attrs": {"alias_of": "x"})"))).num_ops(), 1u);
}

// Every shared model's training step, saved, loads again under the checks above.
TEST(GraphJson, EverySharedModelsStepLoadsAgain) {
  if (!test::have_shared_models()) GTEST_SKIP() << "no shared models";
  for (const char* model : {"bert_base", "cifarnet", "gpt2", "inception_v3", "nasnet_large", "nmt", "nmt4", "resnet50", "rnnlm", "vgg16"}) {
    SCOPED_TRACE(model);
    const std::string onnx = test::shared_model(model);
    const Graph step = derive_training_step(load_onnx(onnx, {}), Optimizer::adam);
    const std::string path = test::temp_path(std::string(model) + ".step.json");
    save_graph_json(step, path);
    EXPECT_EQ(load_graph_json(path).num_ops(), step.num_ops());
    std::remove(path.c_str());
  }
}

// An ONNX op's attribute of another type than ONNX's was read as absent: a Gemm's "transB": "1"
// priced the product untransposed (found by a review). Numbers written as 1.0 still read as
// integers, and attributes ONNX does not define for the type pass.
TEST(GraphJsonBadInput, AttributesOfTheWrongTypeForTheirOnnxOpAreRefused) {
  auto gemm = [](const std::string& attrs) {
    return R"({"format": "placer-graph", "version": 1,
      "tensors": [{"name": "x", "shape": [8, 16], "kind": "data"}, {"name": "w", "shape": [32, 16], "kind": "parameter"},
                  {"name": "y", "shape": [8, 32]}],
      "ops": [{"name": "fc", "type": "Gemm", "inputs": ["x", "w"], "outputs": ["y"], "attrs": )" + attrs + R"(}], "outputs": ["y"]})";
  };
  expect_error(gemm(R"({"transB": "1"})"), "ops[0] 'fc': attribute 'transB' of Gemm must be an integer (as in ONNX), got a string ('1')");
  expect_error(gemm(R"({"transB": [1]})"), "attribute 'transB' of Gemm must be an integer (as in ONNX), got a list");
  expect_error(gemm(R"({"transB": 1, "alpha": "2"})"), "attribute 'alpha' of Gemm must be a number (as in ONNX), got a string");
  const double flops = load_graph_json(write("gemm.json", gemm(R"({"transB": 1})"))).op_work(0).flops;
  EXPECT_GE(flops, 2.0 * 8 * 16 * 32);
  for (const std::string ok : {R"({"transB": 1.0, "alpha": 1})", R"({"transB": 1, "placer_note": "mine"})"})
    EXPECT_EQ(load_graph_json(write("gemm.json", gemm(ok))).op_work(0).flops, flops) << ok;
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [1, 4, 8, 8], "kind": "data"}, {"name": "y", "shape": [1, 4, 8, 8]}],
    "ops": [{"name": "p", "type": "MaxPool", "inputs": ["x"], "outputs": ["y"], "attrs": {"kernel_shape": 3}}], "outputs": ["y"]})",
               "attribute 'kernel_shape' of MaxPool must be a list of integers (as in ONNX), got an integer");
}

TEST(GraphJsonBadInput, AttributesGivingNegativeWorkAreRefused) {
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [1, 4, 8, 8], "kind": "data"}, {"name": "y", "shape": [1, 4, 8, 8]}],
    "ops": [{"name": "lrn", "type": "LRN", "inputs": ["x"], "outputs": ["y"], "attrs": {"size": -100}}], "outputs": ["y"]})",
               "ops[0] 'lrn' (LRN): attribute 'size' is -100 (a positive integer)");
}

// The attributes the rules read are checked against the op's input, whether the op is priced by
// the rules or gives its FLOPs: a MaxPool window of 2^62 was priced at 3.7e19 FLOPs, windows of 0
// or of -3 by -3 and one of five axes on a 2-D pool were accepted, as were a stride of 0, a
// hidden size that R contradicts and a negative sampling ratio (a fuzzing pass).
TEST(GraphJsonBadInput, AttributesTheRulesReadAreCheckedAgainstTheInput) {
  const auto pool = [](const std::string& attrs, const std::string& type = "MaxPool", const std::string& flops = "") {
    return R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [1, 1, 4, 4], "kind": "data"}, {"name": "y", "shape": [1, 1, 2, 2]}],
    "ops": [{"name": "p", "type": ")" + type + R"(", "inputs": ["x"], "outputs": ["y"], "attrs": )" + attrs + flops + R"(}], "outputs": ["y"]})";
  };
  EXPECT_NO_THROW(load_graph_json(write("pool.json", pool(R"({"kernel_shape": [2, 2], "strides": [2, 2]})"))));
  expect_error(pool(R"({"kernel_shape": [4611686018427387904, 2], "strides": [2, 2]})"),
               "ops[0] 'p' (MaxPool): its window spans 4611686018427387904 on spatial axis 0 (kernel 4611686018427387904, dilation 1), "
               "more than its padded input 4");
  // The window's extent counts its dilation; the padded size its pads; with ceil_mode a window
  // may run past the padded input by less than a stride (SqueezeNet's last pool on a 2x2 map: a
  // review), and auto_pad SAME pads as needed.
  expect_error(pool(R"({"kernel_shape": [3, 3], "dilations": [2, 2]})"),
               "its window spans 5 on spatial axis 0 (kernel 3, dilation 2), more than its padded input 4");
  expect_error(pool(R"({"kernel_shape": [7, 1], "pads": [1, 0, 1, 0]})"), "its window spans 7 on spatial axis 0 (kernel 7, dilation 1), "
                                                                          "more than its padded input 6");
  EXPECT_NO_THROW(load_graph_json(write("pool.json", pool(R"({"kernel_shape": [5, 5], "strides": [2, 2], "ceil_mode": 1})"))));
  expect_error(pool(R"({"kernel_shape": [6, 6], "strides": [2, 2], "ceil_mode": 1})"),
               "its window spans 6 on spatial axis 0 (kernel 6, dilation 1), more than its padded input 4 by a stride (2) or more");
  EXPECT_NO_THROW(load_graph_json(write("pool.json", pool(R"({"kernel_shape": [9, 9], "auto_pad": "SAME_UPPER"})"))));
  // Pads whose sum passes 2^63 leave room for any window (the sum overflowed, and the window was
  // "larger than its padded input").
  EXPECT_NO_THROW(load_graph_json(
      write("pool.json", pool(R"({"kernel_shape": [2, 2], "pads": [4611686018427387904, 0, 4611686018427387904, 0]})", "AveragePool"))));
  expect_error(pool(R"({"kernel_shape": [0, 0]})"), "ops[0] 'p' (MaxPool): attribute 'kernel_shape' is [0, 0] (positive integers)");
  expect_error(pool(R"({"kernel_shape": [-3, -3]})"), "attribute 'kernel_shape' is [-3, -3] (positive integers)");
  expect_error(pool(R"({"kernel_shape": [2, 2, 2, 2, 2]})"),
               "attribute 'kernel_shape' is [2, 2, 2, 2, 2]: 2 values for an input of [1,1,4,4] (one per spatial axis)");
  expect_error(pool(R"({"kernel_shape": [2, 2], "pads": [0, 0]})"),
               "attribute 'pads' is [0, 0]: 4 values for an input of [1,1,4,4] (a start and an end per spatial axis)");
  expect_error(pool(R"({"strides": [2, 2]})"), "attribute 'kernel_shape' is missing (a pool's window)");
  // A window within its padding fits; with its FLOPs given the op is checked all the same.
  EXPECT_NO_THROW(load_graph_json(write("pool.json", pool(R"({"kernel_shape": [5, 5], "pads": [1, 1, 0, 0]})"))));
  expect_error(pool(R"({"kernel_shape": [2, 2], "strides": [0, 1]})", "AveragePool", R"(, "flops": 4)"),
               "ops[0] 'p' (AveragePool): attribute 'strides' is [0, 1] (positive integers)");
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [5, 2, 8], "kind": "data"}, {"name": "w", "shape": [1, 64, 8], "kind": "parameter"},
                {"name": "r", "shape": [1, 64, 16], "kind": "parameter"}, {"name": "y", "shape": [5, 1, 2, 16]}],
    "ops": [{"name": "l", "type": "LSTM", "inputs": ["x", "w", "r"], "outputs": ["y"], "attrs": {"hidden_size": 4611686018427387904}}],
    "outputs": ["y"]})",
               "ops[0] 'l' (LSTM): attribute 'hidden_size' is 4611686018427387904 but its recurrence weights R are [1,64,16]");
  expect_error(R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [1, 4, 8, 8], "kind": "data"}, {"name": "r", "shape": [2, 5], "kind": "data"},
                {"name": "i", "shape": [2], "dtype": "int64", "kind": "data"}, {"name": "y", "shape": [2, 4, 2, 2]}],
    "ops": [{"name": "a", "type": "RoiAlign", "inputs": ["x", "r", "i"], "outputs": ["y"], "attrs": {"sampling_ratio": -3}}],
    "outputs": ["y"]})",
               "ops[0] 'a' (RoiAlign): attribute 'sampling_ratio' is -3 (0 for adaptive, or a positive count)");
}

// A training step's Loss op is a backward op that reads what its gradient starts from (one with role
// "update", or no input, was taken as written: a QA pass).
TEST(GraphJsonBadInput, ALossOpIsABackwardOpWithAnInput) {
  const auto step = [](const std::string& role, const std::string& inputs) {
    return R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4], "kind": "data"},
      {"name": "y", "shape": [4]}, {"name": "gy", "shape": [4], "kind": "gradient"}],
      "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]},
              {"name": "loss", "type": "Loss", "inputs": )" + inputs + R"(, "outputs": ["gy"], "role": ")" + role +
           R"(", "flops": 4, "forward_op": "r"}], "outputs": ["y"]})";
  };
  expect_error(step("update", R"(["y"])"), "ops[1] 'loss': a 'Loss' op starts the backward pass: its role must be 'backward', not 'update'");
  expect_error(step("backward", "[]"), "ops[1] 'loss': a 'Loss' op reads the output its gradient starts from: it has no input");
  expect_error(step("backward", "[null]"), "it has no input");
}

// A whole number the field's type cannot hold is said to be out of range (it was "must be a list
// of integers, got [18446744073709551615]": a fuzzing pass), also one past 64 bits, which JSON
// readers hold as a float.
TEST(GraphJsonBadInput, AWholeNumberOutOfRangeIsSaidToBe) {
  const auto one = [](const std::string& shape, const std::string& call) {
    return R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": )" + shape + R"(, "kind": "data"},
      {"name": "y", "shape": [4]}], "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "call": )" + call +
           R"(}], "outputs": ["y"]})";
  };
  expect_error(one("[18446744073709551615]", "0"),
               "field 'shape' must be a list of integers, got [18446744073709551615] (18446744073709551615 is out of range: "
               "-9223372036854775808 to 9223372036854775807)");
  expect_error(one("[99999999999999999999]", "0"), "got [1e+20] (1e+20 is out of range: -9223372036854775808 to 9223372036854775807)");
  // (A scalar's expected type names its range.)
  expect_error(one("[4]", "99999999999999999999"), "field 'call' must be an integer from 0 to 4294967295, got 1e+20");
  expect_error(one("[4.5]", "0"), "field 'shape' must be a list of integers, got [4.5]");  // not whole: no range to speak of
  // A whole number in range written as a float is said to be one (it read "out of range": a QA pass).
  expect_error(one("[32, 128.0]", "0"), "got [32,128.0] (128.0 is written as a float: write the integer without a decimal point or exponent)");
  expect_error(one("[1e2]", "0"), "(100.0 is written as a float");
  expect_error(one("[9223372036854775808.0]", "0"), "is out of range: -9223372036854775808 to 9223372036854775807)");
}

// An empty op or tensor name, or an op type that is empty or holds control characters, is refused
// (accepted when the op gave its FLOPs: a fuzzing pass).
TEST(GraphJsonBadInput, EmptyNamesAndTypesAreRefused) {
  const auto one = [](const std::string& tensor, const std::string& op, const std::string& type) {
    return R"({"format": "placer-graph", "version": 1, "tensors": [{"name": ")" + tensor + R"(", "shape": [4], "kind": "data"},
      {"name": "y", "shape": [4]}], "ops": [{"name": ")" + op + R"(", "type": )" + type + R"(, "inputs": [")" + tensor +
           R"("], "outputs": ["y"], "flops": 2}], "outputs": ["y"]})";
  };
  EXPECT_NO_THROW(load_graph_json(write("named.json", one("x", "r", R"("Relu")"))));
  expect_error(one("", "r", R"("Relu")"), "tensors[0]: field 'name' is empty (ops name their tensors)");
  expect_error(one("x", "", R"("Relu")"), "ops[0]: field 'name' is empty (placements name ops)");
  expect_error(one("x", "r", R"("")"), "ops[0] 'r': field 'type' is \"\", not an op type (a name without control characters)");
  expect_error(one("x", "r", R"("\u0000")"), "ops[0] 'r': field 'type' is ");
}
TEST(GraphJsonBadInput, DuplicatesAndUnsupportedTypesNameTheFileAndPlace) {
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4]}, {"name": "x", "shape": [4]}], "ops": []})",
               "bad.json': tensors[1] 'x': tensor 'x' is defined twice");
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "s", "shape": [4], "dtype": "string", "kind": "data"}], "ops": []})",
               "bad.json': tensors[0] 's': dtype 'string' is not supported");
  // The types listed as known are those a tensor may have (not "unknown" or "string").
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "s", "shape": [4], "dtype": "float8", "kind": "data"}], "ops": []})",
               "unknown dtype 'float8' (known: float32, float16, bfloat16, float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool)");
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}, {"name": "b", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}]})",
               "bad.json': ops[1] 'b': tensor 'y' is produced twice");
}
// Errors found when the whole graph is checked name the op's or tensor's place in the file too (they
// named the op alone: a QA pass).
TEST(GraphJsonBadInput, WholeGraphErrorsNameThePlace) {
  const std::string head = R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4], "kind": "data"},
    {"name": "y", "shape": [4]}, {"name": "z", "shape": [4]}, {"name": "dy", "shape": [4], "kind": "gradient"}, {"name": "dx", "shape": [4], "kind": "gradient", "accumulated": true}], )";
  expect_error(head + R"("ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}, {"name": "a", "type": "Relu", "inputs": ["y"], "outputs": ["z"]}]})",
               "bad.json': ops[1] 'a': its name is used twice (ops[0] has it too)");
  expect_error(head + R"("ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}, {"name": "b", "type": "Relu", "inputs": ["dy"], "outputs": ["z"]}]})",
               "bad.json': ops[1] 'b': input tensor 'dy' is produced by no op and is not a graph input (dangling input)");
  expect_error(head + R"("ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]},
      {"name": "g", "type": "ReluGrad", "role": "backward", "inputs": ["y"], "outputs": ["dy"], "flops": 1}]})",
               "bad.json': ops[1] 'g': a backward op must name the forward op it differentiates");
  expect_error(head + R"("ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]},
      {"name": "g", "type": "ReluGrad", "role": "backward", "forward_op": "nope", "inputs": ["y"], "outputs": ["dy"], "flops": 1}]})",
               "bad.json': ops[1] 'g': forward_op 'nope' is not an op");
  // dx is marked accumulated but read by no op.
  expect_error(head + R"("ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]},
      {"name": "g", "type": "ReluGrad", "role": "backward", "forward_op": "a", "inputs": ["y"], "outputs": ["dx"], "flops": 1}]})",
               "bad.json': tensors[4] 'dx' is marked accumulated (a partial gradient summed into another when it arrives), but it is read by 0 ops");
  // A shape past 64 bits; a module path too deep for an op named past 80 bytes, named once.
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "big", "shape": [4294967296, 4294967296], "kind": "data"}], "ops": []})",
               "bad.json': tensors[0] 'big': shape [4294967296,4294967296] overflows 64 bits");
  const std::string long_name(100, 'n');
  std::string deep = "m";
  for (int i = 0; i < 600; ++i) deep += ".m";
  expect_error(R"({"format": "placer-graph", "version": 1, "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": ")" + long_name + R"(", "type": "Relu", "inputs": ["x"], "outputs": ["y"], "module": ")" + deep + R"("}]})",
               "bad.json': ops[0] '" + long_name + "': its module path is 601 levels deep (at most 512)");
}

// A graph JSON gives every shape and kind: --dim and --data-inputs would be ignored, so they are refused.
TEST(GraphJsonBadInput, OnnxOnlyOptionsAreRefused) {
  const std::string path = write("g.json", R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})");
  ModelOptions dim;
  dim.onnx.dim_values["batch"] = 3;
  EXPECT_THAT([&] { (void)load_model(path, dim); }, ::testing::ThrowsMessage<Error>(HasSubstr("--dim applies to ONNX models only")));
  ModelOptions data;
  data.onnx.data_inputs = {"x"};
  EXPECT_THAT([&] { (void)load_model(path, data); }, ::testing::ThrowsMessage<Error>(HasSubstr("--data-inputs applies to ONNX models only")));
}
// A graph JSON is known by its name (.json) or by its first character, '{', after white space and
// a UTF-8 byte-order mark (one led by a mark and named otherwise was read as ONNX: a QA pass).
TEST(GraphJson, AFileLedByAByteOrderMarkIsJsonWhateverItsName) {
  const std::string body = R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "a", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})";
  EXPECT_EQ(load_model(write("marked.graph", "\xEF\xBB\xBF\n  " + body), ModelOptions{.mode = Mode::inference}).num_ops(), 1u);
  EXPECT_EQ(load_model(write("plain.graph", "\n" + body), ModelOptions{.mode = Mode::inference}).num_ops(), 1u);
}

// The training step's own names (gradients '<op>/grad', 'grad/<tensor>/<op>') must not be the
// forward graph's: the error says which name and why.
TEST(GraphJsonBadInput, ForwardNamesTheStepWouldTakeAreNamed) {
  const std::string path = write("g.json", R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "w", "shape": [4], "kind": "parameter"},
                {"name": "y", "shape": [4]}, {"name": "z", "shape": [4]}],
    "ops": [{"name": "mm", "type": "Mul", "inputs": ["x", "w"], "outputs": ["y"]},
            {"name": "mm/grad", "type": "Relu", "inputs": ["y"], "outputs": ["z"]}], "outputs": ["z"]})");
  EXPECT_THAT([&] { (void)load_model(path, ModelOptions{}); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("deriving the training step"), HasSubstr("names an op 'mm/grad'"))));
}

// A graph JSON's ops of unknown types priced by --unknown-ops are named, as the ONNX import names
// them (the graph JSON import said nothing: a docs audit); ops that give their own work are not.
TEST(GraphJson, UnknownOpsPricedByTheFallbackAreNamed) {
  const std::string path = test::temp_path("mystery.graph.json");
  std::ofstream(path) << R"({"format": "placer-graph", "version": 1, "name": "m",
    "tensors": [{"name": "x", "shape": [4, 8], "kind": "data"}, {"name": "a", "shape": [4, 8]}, {"name": "b", "shape": [4, 8]},
                {"name": "c", "shape": [4, 8]}],
    "ops": [{"name": "m1", "type": "Mystery", "inputs": ["x"], "outputs": ["a"]},
            {"name": "m2", "type": "Mystery", "inputs": ["a"], "outputs": ["b"]},
            {"name": "given", "type": "Riddle", "inputs": ["b"], "outputs": ["c"], "flops": 32, "bytes_read": 128, "bytes_written": 128,
             "class": "elementwise"}],
    "outputs": ["c"]})";
  ModelOptions o;
  o.mode = Mode::inference;
  o.onnx.unknown_op_default = OpClass::elementwise;
  std::vector<std::string> warnings;
  o.onnx.warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_EQ(load_forward_graph(path, o).num_ops(), 3u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("mystery.graph.json': --unknown-ops priced 2 ops of types without a cost rule as elementwise (one FLOP "
                                     "per output element): Mystery (2); their FLOPs and times are guesses"));
}

}  // namespace
}  // namespace placer
