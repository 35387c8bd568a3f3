// The executor's ops on known values: each op reads constants made into step values (constant +
// zeros computed from the data input, so that nothing is folded), and its outputs are compared with
// values worked out by hand from the ONNX specification. The first step also checks every output's
// shape and element type against the IR.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "placer/exec/exec.hpp"
#include "placer/io/model.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using exec::ExecOptions;
using exec::Executor;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;

struct In {
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  int type = onnx::TensorProto::FLOAT;
  bool constant = false;  // read as the Constant itself (a setting the output's shape depends on)
  bool raw = false;       // values stored as raw_data at the type's width (uint16 and uint32 only), as exporters write them
};
struct Out {
  std::vector<std::int64_t> dims;
  int type = onnx::TensorProto::FLOAT;
};

void typed(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::int64_t>& dims, int type) {
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (auto d : dims) shape->add_dim()->set_dim_value(d);
}

// Runs `op` (opset `opset`) on `inputs` (an input with no dims and no values is left out) and gives
// its outputs, as floats.
std::vector<std::vector<float>> run_op(const std::string& op, const std::vector<In>& inputs, const std::vector<Out>& outputs,
                                       const std::function<void(onnx::NodeProto&)>& attributes = {}, int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("op");
  typed(g->add_input(), "x", {1}, onnx::TensorProto::FLOAT);
  auto node = [&](const std::string& type, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(type), n->set_name("/" + out);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  auto* zero = node("Mul", {"x", "zero_const"}, "x_zero");
  (void)zero;
  auto* z = g->add_initializer();
  z->set_name("zero_const"), z->set_data_type(onnx::TensorProto::FLOAT), z->add_dims(1), z->add_float_data(0.0f);
  onnx::NodeProto target;
  target.set_op_type(op), target.set_name("/op");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const In& in = inputs[i];
    if (in.values.empty() && in.dims.empty()) {
      target.add_input("");
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    // A Constant node: initializers of floats would be parameters, which the executor draws at random.
    auto* value = node("Constant", {}, name + "_const")->add_attribute();
    value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto* t = value->mutable_t();
    t->set_data_type(in.type);
    for (auto d : in.dims) t->add_dims(d);
    if (in.raw) {
      std::string bytes;
      for (double v : in.values) {
        const auto u = static_cast<std::uint32_t>(v);
        bytes.append(reinterpret_cast<const char*>(&u), in.type == onnx::TensorProto::UINT16 ? 2 : 4);  // little-endian host
      }
      t->set_raw_data(bytes);
    }
    for (double v : in.raw ? std::vector<double>{} : in.values) {
      if (in.type == onnx::TensorProto::FLOAT) t->add_float_data(static_cast<float>(v));
      else if (in.type == onnx::TensorProto::INT64) t->add_int64_data(static_cast<std::int64_t>(v));
      else if (in.type == onnx::TensorProto::UINT32 || in.type == onnx::TensorProto::UINT64) t->add_uint64_data(static_cast<std::uint64_t>(v));
      else t->add_int32_data(static_cast<std::int32_t>(v));
    }
    if (in.constant) {
      target.add_input(name + "_const");
      continue;
    }
    // constant + zeros of its type computed from x: a value of the step.
    auto* cast = node("Cast", {"x_zero"}, name + "_zero");
    auto* to = cast->add_attribute();
    to->set_name("to"), to->set_type(onnx::AttributeProto::INT), to->set_i(in.type);
    if (in.type == onnx::TensorProto::BOOL) node("Or", {name + "_const", name + "_zero"}, name);
    else node("Add", {name + "_const", name + "_zero"}, name);
    target.add_input(name);
  }
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const std::string name = "y" + std::to_string(k);
    target.add_output(name);
    typed(g->add_output(), name, outputs[k].dims, outputs[k].type);
  }
  if (attributes) attributes(target);
  *g->add_node() = target;
  const std::string path = test::temp_path("placer_op_" + op + ".onnx");
  {
    std::ofstream file(path, std::ios::binary);
    m.SerializeToOstream(&file);
  }
  ModelOptions options;
  options.mode = Mode::inference;
  options.onnx.data_inputs = {"x"};
  const std::size_t n = load_forward_graph(path, options).num_ops();
  const Cluster cpu = Cluster::build("cpu", {Device{"cpu:0", DeviceKind::cpu, "virtual", 1e11, 1e10, 8ull << 30, 1e-6, 1}}, {}, {});
  Executor ex(path, options, cpu, std::vector<DeviceId>(n, 0), ExecOptions{.mode = Mode::inference, .seed = 1, .all_on_cpu = true});
  ex.step();
  return ex.output_values();
}

void set_int(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
}
void set_float(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(v);
}
void set_ints(onnx::NodeProto& n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}
void set_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
}

std::vector<float> floats(std::initializer_list<double> v) { return {v.begin(), v.end()}; }
auto near(const std::vector<float>& expected) { return Pointwise(FloatNear(1e-5f), expected); }

const std::vector<double> kX = {-2.0, -0.5, 0.0, 0.25, 0.75, 3.0};

TEST(ExecutorOps, UnaryMathOpsFollowTheirFormulas) {
  struct Case {
    const char* op;
    std::function<double(double)> f;
    std::vector<double> x;
    int opset = 17;
  };
  const std::vector<double> unit = {-0.75, -0.5, 0.0, 0.25, 0.5, 0.9};
  const std::vector<Case> cases = {
      {"Sin", [](double x) { return std::sin(x); }, kX},
      {"Cos", [](double x) { return std::cos(x); }, kX},
      {"Tan", [](double x) { return std::tan(x); }, kX},
      {"Asin", [](double x) { return std::asin(x); }, unit},
      {"Acos", [](double x) { return std::acos(x); }, unit},
      {"Atan", [](double x) { return std::atan(x); }, kX},
      {"Sinh", [](double x) { return std::sinh(x); }, kX},
      {"Cosh", [](double x) { return std::cosh(x); }, kX},
      {"Asinh", [](double x) { return std::asinh(x); }, kX},
      {"Acosh", [](double x) { return std::acosh(x); }, {1.0, 1.5, 2.0, 3.0, 10.0, 1.25}},
      {"Atanh", [](double x) { return std::atanh(x); }, unit},
      {"Softsign", [](double x) { return x / (1 + std::fabs(x)); }, kX},
      {"Mish", [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, kX, 18},
      {"Celu", [](double x) { return std::max(0.0, x) + std::min(0.0, std::expm1(x)); }, kX},
      {"Selu", [](double x) { return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * std::expm1(x)); }, kX},
      {"ThresholdedRelu", [](double x) { return x > 1.0 ? x : 0.0; }, kX},
      {"Shrink", [](double x) { return x < -0.5 ? x : x > 0.5 ? x : 0.0; }, kX},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<float> expected;
    for (double x : c.x) expected.push_back(static_cast<float>(c.f(x)));
    const auto y = run_op(c.op, {In{{2, 3}, c.x}}, {Out{{2, 3}}}, {}, c.opset);
    EXPECT_THAT(y.at(0), Pointwise(FloatNear(2e-5f), expected));
  }
}

TEST(ExecutorOps, PReluBroadcastsItsSlope) {
  // slope [3] over x [2, 3]: per last dimension (ONNX broadcasting, not torch's per-channel prelu).
  EXPECT_THAT(run_op("PRelu", {In{{2, 3}, kX}, In{{3}, {0.1, 0.2, 0.3}}}, {Out{{2, 3}}}).at(0),
              near(floats({-0.2, -0.1, 0.0, 0.25, 0.75, 3.0})));
}

// Shrink runs as hardshrink (bias 0), softshrink (bias = lambd) or two `where`s (any other bias);
// ThresholdedRelu as threshold; PRelu with one slope or one per channel as prelu. Each on its
// boundaries (|x| = lambd gives 0, x = alpha gives 0).
TEST(ExecutorOps, SingleKernelActivationsKeepOnnxsFormulas) {
  const In x{{2, 4}, {-2.0, -0.5, 0.0, 0.5, 0.75, 3.0, -0.75, 1.0}};
  auto shrink = [](float lambd, float bias) {
    return [=](onnx::NodeProto& n) {
      set_float(n, "lambd", lambd);
      set_float(n, "bias", bias);
    };
  };
  EXPECT_THAT(run_op("Shrink", {x}, {Out{{2, 4}}}, shrink(0.5f, 0.0f)).at(0), near(floats({-2.0, 0.0, 0.0, 0.0, 0.75, 3.0, -0.75, 1.0})));
  EXPECT_THAT(run_op("Shrink", {x}, {Out{{2, 4}}}, shrink(0.5f, 0.5f)).at(0), near(floats({-1.5, 0.0, 0.0, 0.0, 0.25, 2.5, -0.25, 0.5})));
  EXPECT_THAT(run_op("Shrink", {x}, {Out{{2, 4}}}, shrink(0.5f, 0.25f)).at(0), near(floats({-1.75, 0.0, 0.0, 0.0, 0.5, 2.75, -0.5, 0.75})));
  EXPECT_THAT(run_op("ThresholdedRelu", {x}, {Out{{2, 4}}}, [](onnx::NodeProto& n) { set_float(n, "alpha", 0.75f); }).at(0),
              near(floats({0.0, 0.0, 0.0, 0.0, 0.0, 3.0, 0.0, 1.0})));
  // One slope; one per channel of [2, 2, 2] given as [2, 1].
  EXPECT_THAT(run_op("PRelu", {x, In{{1}, {0.1}}}, {Out{{2, 4}}}).at(0), near(floats({-0.2, -0.05, 0.0, 0.5, 0.75, 3.0, -0.075, 1.0})));
  EXPECT_THAT(run_op("PRelu", {In{{2, 2, 2}, x.values}, In{{2, 1}, {0.1, 0.2}}}, {Out{{2, 2, 2}}}).at(0),
              near(floats({-0.2, -0.05, 0.0, 0.5, 0.75, 3.0, -0.15, 1.0})));
}

TEST(ExecutorOps, TestsAndBitwiseOps) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(run_op("IsInf", {In{{4}, {inf, -inf, 1.0, 0.0}}}, {Out{{4}, onnx::TensorProto::BOOL}}, [](onnx::NodeProto& n) {
                set_int(n, "detect_negative", 0);
              }).at(0),
              ElementsAreArray(floats({1, 0, 0, 0})));
  EXPECT_THAT(run_op("IsNaN", {In{{3}, {std::nan(""), 1.0, inf}}}, {Out{{3}, onnx::TensorProto::BOOL}}).at(0),
              ElementsAreArray(floats({1, 0, 0})));
  const int i64 = onnx::TensorProto::INT64, b = onnx::TensorProto::BOOL;
  EXPECT_THAT(run_op("Xor", {In{{4}, {0, 0, 1, 1}, b}, In{{4}, {0, 1, 0, 1}, b}}, {Out{{4}, b}}).at(0), ElementsAreArray(floats({0, 1, 1, 0})));
  EXPECT_THAT(run_op("BitwiseAnd", {In{{3}, {12, 10, 7}, i64}, In{{3}, {10, 6, 1}, i64}}, {Out{{3}, i64}}, {}, 18).at(0),
              ElementsAreArray(floats({8, 2, 1})));
  EXPECT_THAT(run_op("BitwiseXor", {In{{3}, {12, 10, 7}, i64}, In{{3}, {10, 6, 1}, i64}}, {Out{{3}, i64}}, {}, 18).at(0),
              ElementsAreArray(floats({6, 12, 6})));
  EXPECT_THAT(run_op("BitwiseNot", {In{{2}, {0, 5}, i64}}, {Out{{2}, i64}}, {}, 18).at(0), ElementsAreArray(floats({-1, -6})));
  EXPECT_THAT(run_op("BitShift", {In{{2}, {1, 16}, onnx::TensorProto::UINT8}, In{{2}, {3, 2}, onnx::TensorProto::UINT8}},
                     {Out{{2}, onnx::TensorProto::UINT8}}, [](onnx::NodeProto& n) { set_string(n, "direction", "LEFT"); })
                  .at(0),
              ElementsAreArray(floats({8, 64})));
}

TEST(ExecutorOps, ReductionsOverTheirAxes) {
  const In x{{2, 3}, {1, 2, 3, 4, 5, 6}};
  auto over_axis_1 = [](onnx::NodeProto& n) {
    set_ints(n, "axes", {1});
    set_int(n, "keepdims", 0);
  };
  EXPECT_THAT(run_op("ReduceProd", {x}, {Out{{2}}}, over_axis_1).at(0), near(floats({6, 120})));
  EXPECT_THAT(run_op("ReduceSumSquare", {x}, {Out{{2}}}, over_axis_1).at(0), near(floats({14, 77})));
  EXPECT_THAT(run_op("ReduceL1", {In{{2, 3}, {-1, 2, -3, 4, -5, 6}}}, {Out{{2}}}, over_axis_1).at(0), near(floats({6, 15})));
  // (Integers too: torch.norm, which floating ReduceL1 runs as, takes none.)
  EXPECT_THAT(run_op("ReduceL1", {In{{2, 3}, {-1, 2, -3, 4, -5, 6}, onnx::TensorProto::INT64}}, {Out{{2}, onnx::TensorProto::INT64}}, over_axis_1).at(0),
              ElementsAreArray(floats({6, 15})));
  EXPECT_THAT(run_op("ReduceL2", {x}, {Out{{2}}}, over_axis_1).at(0), near(floats({std::sqrt(14.0), std::sqrt(77.0)})));
  EXPECT_THAT(run_op("ReduceLogSum", {x}, {Out{{2}}}, over_axis_1).at(0), near(floats({std::log(6.0), std::log(15.0)})));
  EXPECT_THAT(run_op("ReduceLogSumExp", {x}, {Out{{2}}}, over_axis_1).at(0),
              near(floats({std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0))})));
  // Every axis, kept: one value of shape [1, 1].
  EXPECT_THAT(run_op("ReduceProd", {x}, {Out{{1, 1}}}).at(0), near(floats({720})));
}

TEST(ExecutorOps, ArgMaxArgMinHardmaxCumSumTopK) {
  const int i64 = onnx::TensorProto::INT64;
  const In x{{2, 4}, {3, 7, 7, 1, 5, 0, 5, 2}};
  EXPECT_THAT(run_op("ArgMax", {x}, {Out{{2, 1}, i64}}, [](onnx::NodeProto& n) { set_int(n, "axis", 1); }).at(0),
              ElementsAreArray(floats({1, 0})));
  EXPECT_THAT(run_op("ArgMax", {x}, {Out{{2}, i64}}, [](onnx::NodeProto& n) {
                set_int(n, "axis", 1), set_int(n, "keepdims", 0), set_int(n, "select_last_index", 1);
              }).at(0),
              ElementsAreArray(floats({2, 2})));
  EXPECT_THAT(run_op("ArgMin", {x}, {Out{{1, 4}, i64}}).at(0), ElementsAreArray(floats({0, 1, 1, 0})));
  EXPECT_THAT(run_op("Hardmax", {x}, {Out{{2, 4}}}).at(0), ElementsAreArray(floats({0, 1, 0, 0, 1, 0, 0, 0})));
  const In axis{{}, {1}, i64};
  EXPECT_THAT(run_op("CumSum", {x, axis}, {Out{{2, 4}}}).at(0), near(floats({3, 10, 17, 18, 5, 5, 10, 12})));
  EXPECT_THAT(run_op("CumSum", {x, axis}, {Out{{2, 4}}}, [](onnx::NodeProto& n) { set_int(n, "exclusive", 1), set_int(n, "reverse", 1); }).at(0),
              near(floats({15, 8, 1, 0, 7, 7, 2, 0})));
  const auto top = run_op("TopK", {x, In{{1}, {2}, i64}}, {Out{{2, 2}}, Out{{2, 2}, i64}});
  EXPECT_THAT(top.at(0), near(floats({7, 7, 5, 5})));
  const auto bottom = run_op("TopK", {x, In{{1}, {1}, i64}}, {Out{{2, 1}}, Out{{2, 1}, i64}}, [](onnx::NodeProto& n) { set_int(n, "largest", 0); });
  EXPECT_THAT(bottom.at(0), near(floats({1, 0})));
  EXPECT_THAT(bottom.at(1), ElementsAreArray(floats({3, 1})));
}

TEST(ExecutorOps, GatherElementsGatherNDOneHotEyeLike) {
  const int i64 = onnx::TensorProto::INT64;
  const In x{{2, 3}, {1, 2, 3, 4, 5, 6}};
  EXPECT_THAT(run_op("GatherElements", {x, In{{2, 2}, {2, -3, 0, 1}, i64}}, {Out{{2, 2}}}, [](onnx::NodeProto& n) { set_int(n, "axis", 1); }).at(0),
              near(floats({3, 1, 4, 5})));
  EXPECT_THAT(run_op("GatherND", {x, In{{2, 2}, {1, 2, 0, -2}, i64}}, {Out{{2}}}).at(0), near(floats({6, 2})));
  EXPECT_THAT(run_op("GatherND", {x, In{{2, 1}, {2, 0}, i64}}, {Out{{2}}}, [](onnx::NodeProto& n) { set_int(n, "batch_dims", 1); }).at(0),
              near(floats({3, 4})));
  // Indices 1, -1 (the last class), 5 (out of range: all off) into 3 classes; values off 0, on 2.
  EXPECT_THAT(run_op("OneHot", {In{{3}, {1, -1, 5}, i64}, In{{}, {3}, i64}, In{{2}, {0, 2}}}, {Out{{3, 3}}}).at(0),
              near(floats({0, 2, 0, 0, 0, 2, 0, 0, 0})));
  EXPECT_THAT(run_op("OneHot", {In{{2}, {0, 2}, i64}, In{{}, {3}, i64}, In{{2}, {0, 1}}}, {Out{{3, 2}}},
                     [](onnx::NodeProto& n) { set_int(n, "axis", 0); }).at(0),
              near(floats({1, 0, 0, 0, 0, 1})));
  EXPECT_THAT(run_op("EyeLike", {x}, {Out{{2, 3}}}, [](onnx::NodeProto& n) { set_int(n, "k", 1); }).at(0), near(floats({0, 1, 0, 0, 0, 1})));
}

TEST(ExecutorOps, Normalisations) {
  // x [1, 2, 2]: channel 0 holds 1, 3; channel 1 holds 2, 6.
  const In x{{1, 2, 2}, {1, 3, 2, 6}}, ones{{2}, {1, 1}}, zeros{{2}, {0, 0}};
  const double s = 1.0 / std::sqrt(1.0 + 1e-5), t = 2.0 / std::sqrt(4.0 + 1e-5);
  EXPECT_THAT(run_op("InstanceNormalization", {x, ones, zeros}, {Out{{1, 2, 2}}}).at(0), near(floats({-s, s, -t, t})));
  // One group over both channels: mean 3, variance 3.5.
  const double u = 1.0 / std::sqrt(3.5 + 1e-5);
  EXPECT_THAT(run_op("GroupNormalization", {x, In{{1}, {1}}, In{{1}, {0}}}, {Out{{1, 2, 2}}},
                     [](onnx::NodeProto& n) { set_int(n, "num_groups", 1); }, 18)
                  .at(0),
              near(floats({-2 * u, 0, -1 * u, 3 * u})));
  EXPECT_THAT(run_op("LpNormalization", {In{{2, 2}, {3, 4, 0, 5}}}, {Out{{2, 2}}}).at(0), near(floats({0.6, 0.8, 0, 1})));
  EXPECT_THAT(run_op("MeanVarianceNormalization", {In{{1, 1, 1, 2}, {1, 3}}}, {Out{{1, 1, 1, 2}}}).at(0),
              Pointwise(FloatNear(1e-4f), floats({-1, 1})));
  // LRN of size 1: x / (bias + alpha * x^2)^beta.
  EXPECT_THAT(run_op("LRN", {In{{1, 2, 1, 1}, {1, 2}}}, {Out{{1, 2, 1, 1}}}, [](onnx::NodeProto& n) {
                set_int(n, "size", 1), set_float(n, "alpha", 1.0f), set_float(n, "beta", 1.0f), set_float(n, "bias", 1.0f);
              }).at(0),
              near(floats({0.5, 0.4})));
}

TEST(ExecutorOps, LpPoolsAndConvTranspose) {
  const In x{{1, 1, 1, 4}, {3, 4, -6, 8}};
  EXPECT_THAT(run_op("LpPool", {x}, {Out{{1, 1, 1, 2}}}, [](onnx::NodeProto& n) {
                set_ints(n, "kernel_shape", {1, 2}), set_ints(n, "strides", {1, 2});
              }).at(0),
              near(floats({5, 10})));
  EXPECT_THAT(run_op("GlobalLpPool", {In{{1, 1, 2}, {3, 4}}}, {Out{{1, 1, 1}}}).at(0), near(floats({5})));
  // A 1-D transposed convolution: x [1, 1, 2] = (1, 2), w [1, 1, 2] = (1, 10), stride 2: 1, 10, 2, 20.
  const In cx{{1, 1, 2}, {1, 2}}, w{{1, 1, 2}, {1, 10}};
  auto stride_2 = [](onnx::NodeProto& n) { set_ints(n, "strides", {2}); };
  EXPECT_THAT(run_op("ConvTranspose", {cx, w}, {Out{{1, 1, 4}}}, stride_2).at(0), near(floats({1, 10, 2, 20})));
  // pads cut from both ends, output_padding adds a zero row at the end, the bias is added to all.
  EXPECT_THAT(run_op("ConvTranspose", {cx, w, In{{1}, {0.5}}}, {Out{{1, 1, 3}}}, [](onnx::NodeProto& n) {
                set_ints(n, "strides", {2}), set_ints(n, "pads", {1, 1}), set_ints(n, "output_padding", {1});
              }).at(0),
              near(floats({10.5, 2.5, 20.5})));
  EXPECT_THAT(run_op("ConvTranspose", {cx, w}, {Out{{1, 1, 5}}}, [](onnx::NodeProto& n) {
                set_ints(n, "strides", {2}), set_ints(n, "output_padding", {1});
              }).at(0),
              near(floats({1, 10, 2, 20, 0})));
}

TEST(ExecutorOps, ResizeFollowsOnnxsCoordinatesAndTaps) {
  const int f = onnx::TensorProto::FLOAT, i64 = onnx::TensorProto::INT64;
  const In none{};
  const In by_two{{4}, {1, 1, 1, 2}, f, true};
  auto resize = [&](const In& x, const In& scales, const In& sizes, std::int64_t width, const char* mode, const char* transform,
                    const char* nearest = "round_prefer_floor") {
    return run_op("Resize", {x, none, scales, sizes}, {Out{{1, 1, 1, width}}}, [&](onnx::NodeProto& n) {
             set_string(n, "mode", mode), set_string(n, "coordinate_transformation_mode", transform), set_string(n, "nearest_mode", nearest);
           }).at(0);
  };
  const In pair{{1, 1, 1, 2}, {1, 3}};
  // PyTorch's nn.Upsample(mode="nearest") exports as nearest / asymmetric / floor.
  EXPECT_THAT(resize(pair, by_two, none, 4, "nearest", "asymmetric", "floor"), near(floats({1, 1, 3, 3})));
  // ONNX's default nearest (half_pixel, round_prefer_floor) enlarging a whole number of times reads
  // (x + 1/2) / s - 1/2, less than 1/2 from floor(x / s): rounded to the nearest, PyTorch's
  // nearest; floor and ceil give other pixels (-0.25, 0.25, 0.75, 1.25 clamped).
  const In by_three{{4}, {1, 1, 1, 3}, f, true};
  for (const char* rounding : {"round_prefer_floor", "round_prefer_ceil"}) {
    SCOPED_TRACE(rounding);
    EXPECT_THAT(resize(pair, by_two, none, 4, "nearest", "half_pixel", rounding), near(floats({1, 1, 3, 3})));
    EXPECT_THAT(resize(pair, by_three, none, 6, "nearest", "half_pixel", rounding), near(floats({1, 1, 1, 3, 3, 3})));
  }
  EXPECT_THAT(resize(pair, by_two, none, 4, "nearest", "half_pixel", "floor"), near(floats({1, 1, 1, 3})));
  EXPECT_THAT(resize(pair, by_two, none, 4, "nearest", "half_pixel", "ceil"), near(floats({1, 3, 3, 3})));
  // Bilinear without aligned corners (half_pixel): source coordinates -0.25, 0.25, 0.75, 1.25.
  EXPECT_THAT(resize(pair, by_two, none, 4, "linear", "half_pixel"), near(floats({1, 1.5, 2.5, 3})));
  EXPECT_THAT(resize(pair, none, In{{4}, {1, 1, 1, 4}, i64, true}, 4, "linear", "half_pixel"), near(floats({1, 1.5, 2.5, 3})));
  EXPECT_THAT(resize(pair, none, In{{4}, {1, 1, 1, 3}, i64, true}, 3, "linear", "align_corners"), near(floats({1, 2, 3})));
  // Cubic, Keys' kernel of a = -0.75 (ONNX's default, PyTorch's bicubic), at coordinate 1.25 of the
  // ramp 0, 1, 2, 3: taps 0..3 weighted W(1.25), W(0.25), W(0.75), W(1.75) = -0.10546875,
  // 0.87890625, 0.26171875, -0.03515625. With a = -0.5 the kernel reproduces the ramp itself.
  const In ramp{{1, 1, 1, 4}, {0, 1, 2, 3}};
  const auto cubic = resize(ramp, by_two, none, 8, "cubic", "half_pixel");
  EXPECT_NEAR(cubic.at(3), 1.296875, 1e-5);
  EXPECT_NEAR(cubic.at(4), 1.703125, 1e-5);
  const auto keys = run_op("Resize", {ramp, none, by_two}, {Out{{1, 1, 1, 8}}}, [](onnx::NodeProto& n) {
                      set_string(n, "mode", "cubic"), set_float(n, "cubic_coeff_a", -0.5f);
                    }).at(0);
  EXPECT_NEAR(keys.at(3), 1.25, 1e-5);
  EXPECT_NEAR(keys.at(4), 1.75, 1e-5);
  // roi as an empty Constant node (the importer leaves it out; the executor's nodes must still match).
  EXPECT_THAT(run_op("Resize", {pair, In{{0}, {}, f, true}, by_two}, {Out{{1, 1, 1, 4}}}, [](onnx::NodeProto& n) {
                set_string(n, "mode", "linear");
              }).at(0),
              near(floats({1, 1.5, 2.5, 3})));
  // Upsample (opset 9): scales as an input, nearest is asymmetric / floor.
  EXPECT_THAT(run_op("Upsample", {pair, by_two}, {Out{{1, 1, 1, 4}}}, {}, 9).at(0), near(floats({1, 1, 3, 3})));
}

// One input, one hidden unit, two time steps (x = 1, then -1), worked out from ONNX's equations.
TEST(ExecutorOps, RecurrentCellsFollowOnnxsEquations) {
  const In x{{2, 1, 1}, {1, -1}};
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto hidden_1 = [](onnx::NodeProto& n) { set_int(n, "hidden_size", 1); };
  const std::vector<Out> two{Out{{2, 1, 1, 1}}, Out{{1, 1, 1}}};
  // RNN: h = tanh(0.5 x + 2 h + 0.1 + 0.2).
  {
    const double h1 = std::tanh(0.5 + 0.3), h2 = std::tanh(-0.5 + 2 * h1 + 0.3);
    const auto y = run_op("RNN", {x, In{{1, 1, 1}, {0.5}}, In{{1, 1, 1}, {2.0}}, In{{1, 2}, {0.1, 0.2}}}, two, hidden_1);
    EXPECT_THAT(y.at(0), near(floats({h1, h2})));
    EXPECT_THAT(y.at(1), near(floats({h2})));
  }
  // GRU, gates z, r, h: W = (0.5, -0.3, 0.8), R = (0.2, 0.4, -0.6), no bias; both reset forms.
  for (const int linear_before_reset : {0, 1}) {
    SCOPED_TRACE(linear_before_reset);
    double h = 0;
    std::vector<float> expected;
    for (double xt : {1.0, -1.0}) {
      const double z = sigmoid(0.5 * xt + 0.2 * h), r = sigmoid(-0.3 * xt + 0.4 * h);
      const double candidate = std::tanh(0.8 * xt + (linear_before_reset ? r * (-0.6 * h) : -0.6 * (r * h)));
      h = (1 - z) * candidate + z * h;
      expected.push_back(static_cast<float>(h));
    }
    const auto y = run_op("GRU", {x, In{{1, 3, 1}, {0.5, -0.3, 0.8}}, In{{1, 3, 1}, {0.2, 0.4, -0.6}}}, two, [&](onnx::NodeProto& n) {
      set_int(n, "hidden_size", 1), set_int(n, "linear_before_reset", linear_before_reset);
    });
    EXPECT_THAT(y.at(0), near(expected));
  }
  // LSTM, gates i, o, f, c: W = (0.5, 0.3, -0.2, 0.7), R = (0.1, -0.4, 0.2, 0.6); forward and reverse.
  auto lstm = [&](std::vector<double> xs) {
    double h = 0, cell = 0;
    std::vector<double> hs;
    for (double xt : xs) {
      const double i = sigmoid(0.5 * xt + 0.1 * h), o = sigmoid(0.3 * xt - 0.4 * h), f = sigmoid(-0.2 * xt + 0.2 * h);
      cell = f * cell + i * std::tanh(0.7 * xt + 0.6 * h);
      h = o * std::tanh(cell);
      hs.push_back(h);
    }
    return std::make_pair(hs, cell);
  };
  const In W{{1, 4, 1}, {0.5, 0.3, -0.2, 0.7}}, R{{1, 4, 1}, {0.1, -0.4, 0.2, 0.6}};
  const auto [forward, forward_cell] = lstm({1, -1});
  const auto y = run_op("LSTM", {x, W, R}, {Out{{2, 1, 1, 1}}, Out{{1, 1, 1}}, Out{{1, 1, 1}}}, hidden_1);
  EXPECT_THAT(y.at(0), near(floats({forward[0], forward[1]})));
  EXPECT_THAT(y.at(2), near(floats({forward_cell})));
  // Reverse: the sequence read from the end; Y keeps each step at its time.
  const auto [backward, backward_cell] = lstm({-1, 1});
  const auto r = run_op("LSTM", {x, W, R}, two, [](onnx::NodeProto& n) {
    set_int(n, "hidden_size", 1), set_string(n, "direction", "reverse");
  });
  EXPECT_THAT(r.at(0), near(floats({backward[1], backward[0]})));
  // Bidirectional: both directions of one step side by side in Y ([seq, direction, batch, hidden]).
  const In W2{{2, 4, 1}, {0.5, 0.3, -0.2, 0.7, 0.5, 0.3, -0.2, 0.7}}, R2{{2, 4, 1}, {0.1, -0.4, 0.2, 0.6, 0.1, -0.4, 0.2, 0.6}};
  const auto both = run_op("LSTM", {x, W2, R2}, {Out{{2, 2, 1, 1}}, Out{{2, 1, 1}}}, [](onnx::NodeProto& n) {
    set_int(n, "hidden_size", 1), set_string(n, "direction", "bidirectional");
  });
  EXPECT_THAT(both.at(0), near(floats({forward[0], backward[1], forward[1], backward[0]})));
  EXPECT_THAT(both.at(1), near(floats({forward[1], backward[1]})));
  // Batch first (layout 1): x [batch 1, seq 2, input 1], the same sequence.
  const auto b = run_op("LSTM", {In{{1, 2, 1}, {1, -1}}, W, R}, {Out{{1, 2, 1, 1}}, Out{{1, 1, 1}}}, [](onnx::NodeProto& n) {
    set_int(n, "hidden_size", 1), set_int(n, "layout", 1);
  }, 14);
  EXPECT_THAT(b.at(0), near(floats({forward[0], forward[1]})));
}

TEST(ExecutorOps, RearrangementsAndScatters) {
  const int i64 = onnx::TensorProto::INT64, b = onnx::TensorProto::BOOL;
  const In x{{2, 3}, {1, 2, 3, 4, 5, 6}};
  EXPECT_THAT(run_op("CastLike", {x, In{{1}, {0}, i64}}, {Out{{2, 3}, i64}}, {}, 15).at(0), ElementsAreArray(floats({1, 2, 3, 4, 5, 6})));
  // Compress: columns 0 and 2 (a constant condition, as the import needs); without axis, flattened.
  EXPECT_THAT(run_op("Compress", {x, In{{3}, {1, 0, 1}, b, true}}, {Out{{2, 2}}}, [](onnx::NodeProto& n) { set_int(n, "axis", 1); }).at(0),
              near(floats({1, 3, 4, 6})));
  EXPECT_THAT(run_op("Compress", {x, In{{2}, {0, 1}, b, true}}, {Out{{1}}}).at(0), near(floats({2})));
  // DepthToSpace of 4 channels of one pixel, blocksize 2: DCR reads the channels as (row, column).
  const In depth{{1, 4, 1, 1}, {1, 2, 3, 4}};
  auto block_2 = [](const char* mode) {
    return [mode](onnx::NodeProto& n) { set_int(n, "blocksize", 2), set_string(n, "mode", mode); };
  };
  EXPECT_THAT(run_op("DepthToSpace", {depth}, {Out{{1, 1, 2, 2}}}, block_2("DCR")).at(0), near(floats({1, 2, 3, 4})));
  // 8 channels: DCR takes channel c of block (i, j) from 2*(2i+j)+c, CRD from 4c+2i+j.
  const In eight{{1, 8, 1, 1}, {0, 1, 2, 3, 4, 5, 6, 7}};
  EXPECT_THAT(run_op("DepthToSpace", {eight}, {Out{{1, 2, 2, 2}}}, block_2("DCR")).at(0), near(floats({0, 2, 4, 6, 1, 3, 5, 7})));
  EXPECT_THAT(run_op("DepthToSpace", {eight}, {Out{{1, 2, 2, 2}}}, block_2("CRD")).at(0), near(floats({0, 1, 2, 3, 4, 5, 6, 7})));
  EXPECT_THAT(run_op("SpaceToDepth", {In{{1, 1, 2, 2}, {1, 2, 3, 4}}}, {Out{{1, 4, 1, 1}}},
                     [](onnx::NodeProto& n) { set_int(n, "blocksize", 2); }).at(0),
              near(floats({1, 2, 3, 4})));
  // ReverseSequence, time along axis 0, batch along 1: batch 0 reverses its first 3 steps, batch 1 its first 1.
  EXPECT_THAT(run_op("ReverseSequence", {In{{3, 2}, {1, 10, 2, 20, 3, 30}}, In{{2}, {3, 1}, i64}}, {Out{{3, 2}}}).at(0),
              near(floats({3, 10, 2, 20, 1, 30})));
  // ScatterElements along axis 1, replacing and adding; ScatterND of rows.
  const In idx{{2, 1}, {2, 0}, i64}, updates{{2, 1}, {10, 20}};
  auto axis_1 = [](const char* reduction) {
    return [reduction](onnx::NodeProto& n) { set_int(n, "axis", 1), set_string(n, "reduction", reduction); };
  };
  EXPECT_THAT(run_op("ScatterElements", {x, idx, updates}, {Out{{2, 3}}}, axis_1("none"), 16).at(0), near(floats({1, 2, 10, 20, 5, 6})));
  EXPECT_THAT(run_op("ScatterElements", {x, idx, updates}, {Out{{2, 3}}}, axis_1("add"), 16).at(0), near(floats({1, 2, 13, 24, 5, 6})));
  EXPECT_THAT(run_op("ScatterND", {x, In{{1, 1}, {-1}, i64}, In{{1, 3}, {7, 8, 9}}}, {Out{{2, 3}}}).at(0), near(floats({1, 2, 3, 7, 8, 9})));
  EXPECT_THAT(run_op("ScatterND", {x, In{{2, 2}, {0, 1, 0, 1}, i64}, In{{2}, {10, 100}}}, {Out{{2, 3}}},
                     [](onnx::NodeProto& n) { set_string(n, "reduction", "add"); }, 16).at(0),
              near(floats({1, 112, 3, 4, 5, 6})));
}

TEST(ExecutorOps, GridSampleReadsWhereTheGridPoints) {
  // 2x2 input; with aligned corners, (-1, -1) is the top-left pixel and (1, 1) the bottom-right,
  // (0, 0) the mean of all four (bilinear).
  const In x{{1, 1, 2, 2}, {1, 2, 3, 4}};
  const In grid{{1, 1, 3, 2}, {-1, -1, 1, 1, 0, 0}};
  EXPECT_THAT(run_op("GridSample", {x, grid}, {Out{{1, 1, 1, 3}}}, [](onnx::NodeProto& n) { set_int(n, "align_corners", 1); }, 16).at(0),
              near(floats({1, 4, 2.5})));
}

// Found by review, each against the ONNX specification.
TEST(ExecutorOps, SpecificationCornersFoundByReview) {
  const int i64 = onnx::TensorProto::INT64, f32 = onnx::TensorProto::FLOAT;
  // OneHot with constant values (the exported form), bool values, and values far apart.
  EXPECT_THAT(run_op("OneHot", {In{{2}, {0, 1}, i64}, In{{}, {2}, i64}, In{{2}, {1e8, 1}, f32, true}}, {Out{{2, 2}}}).at(0),
              ElementsAreArray(floats({1, 1e8, 1e8, 1})));
  EXPECT_THAT(run_op("OneHot", {In{{2}, {0, 1}, i64}, In{{}, {2}, i64}, In{{2}, {0, 1}, onnx::TensorProto::BOOL, true}},
                     {Out{{2, 2}, onnx::TensorProto::BOOL}}).at(0),
              ElementsAreArray(floats({1, 0, 0, 1})));
  // TopK: among equal values the lower index first; k as an attribute before opset 10.
  const auto top = run_op("TopK", {In{{5}, {3, 7, 7, 1, 7}}, In{{1}, {2}, i64}}, {Out{{2}}, Out{{2}, i64}});
  EXPECT_THAT(top.at(1), ElementsAreArray(floats({1, 2})));
  EXPECT_THAT(run_op("TopK", {In{{5}, {3, 7, 7, 1, 7}}}, {Out{{2}}, Out{{2}, i64}}, [](onnx::NodeProto& n) { set_int(n, "k", 2); }, 9).at(1),
              ElementsAreArray(floats({1, 2})));
  // CumSum exclusive after an infinity: shifted, not cumsum(x) - x (inf - inf).
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(run_op("CumSum", {In{{3}, {inf, 1, 2}}, In{{}, {0}, i64}}, {Out{{3}}}, [](onnx::NodeProto& n) { set_int(n, "exclusive", 1); }).at(0),
              ElementsAreArray(floats({0, inf, inf})));
  // LRN of size 2 sums channels c and c+1 (ONNX), not c-1 and c: x / (1 + 1/2 * sum)^1.
  EXPECT_THAT(run_op("LRN", {In{{1, 2, 1, 1}, {1, 2}}}, {Out{{1, 2, 1, 1}}}, [](onnx::NodeProto& n) {
                set_int(n, "size", 2), set_float(n, "alpha", 1.0f), set_float(n, "beta", 1.0f), set_float(n, "bias", 1.0f);
              }).at(0),
              near(floats({1 / (1 + 2.5), 2 / (1 + 2.0)})));
  // MeanVarianceNormalization's epsilon is added to the deviation: a tiny variance still gives about +-1.
  EXPECT_THAT(run_op("MeanVarianceNormalization", {In{{1, 1, 1, 2}, {0, 2e-6}}}, {Out{{1, 1, 1, 2}}}).at(0),
              Pointwise(FloatNear(2e-3f), floats({-1, 1})));
  // ConvTranspose with output_shape and output_padding: the total padding counts the output padding.
  EXPECT_THAT(run_op("ConvTranspose", {In{{1, 1, 2}, {1, 2}}, In{{1, 1, 2}, {1, 10}}}, {Out{{1, 1, 3}}}, [](onnx::NodeProto& n) {
                set_ints(n, "strides", {2}), set_ints(n, "output_padding", {1}), set_ints(n, "output_shape", {3});
              }).at(0),
              near(floats({10, 2, 20})));
  // Resize of opset 10: Upsample's coordinates (asymmetric), not opset 11's half_pixel.
  EXPECT_THAT(run_op("Resize", {In{{1, 1, 1, 2}, {1, 3}}, In{{4}, {1, 1, 1, 2}, f32, true}}, {Out{{1, 1, 1, 4}}},
                     [](onnx::NodeProto& n) { set_string(n, "mode", "linear"); }, 10).at(0),
              near(floats({1, 2, 3, 3})));
  // Resize of integers interpolates in float: uint8 10, 30 to 10, 15, 25, 30.
  EXPECT_THAT(run_op("Resize", {In{{1, 1, 1, 2}, {10, 30}, onnx::TensorProto::UINT8}, In{}, In{{4}, {1, 1, 1, 2}, f32, true}},
                     {Out{{1, 1, 1, 4}, onnx::TensorProto::UINT8}}, [](onnx::NodeProto& n) { set_string(n, "mode", "linear"); }).at(0),
              ElementsAreArray(floats({10, 15, 25, 30})));
  // BitShift of uint32 drops the bits past 32.
  const int u32 = onnx::TensorProto::UINT32;
  EXPECT_THAT(run_op("BitShift", {In{{1}, {2147483649.0}, u32}, In{{1}, {1}, u32}}, {Out{{1}, u32}},
                     [](onnx::NodeProto& n) { set_string(n, "direction", "LEFT"); }).at(0),
              ElementsAreArray(floats({2})));
}

// The recurrent cells' biases, peepholes, clip, input_forget and initial states, and GroupNormalization's
// scales per group (opset 18), each worked out from the ONNX equations.
// What PyTorch exports (no clip, no peepholes, forward or bidirectional, GRU's reset after the
// product) runs as PyTorch's own layer (at::lstm, gru, rnn_tanh), its gates reordered from ONNX's;
// a clip no value reaches takes the step-by-step equations instead: both give the same outputs, for
// every cell, one direction and two, both layouts, with biases and initial states and without, and
// with Y alone asked for.
TEST(ExecutorOps, RecurrentLayersAsPyTorchRunsThemFollowOnnx) {
  constexpr std::int64_t kSeq = 3, kBatch = 2, kInput = 3, kHidden = 2;
  auto values = [](std::size_t n, double scale) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(1.7 * static_cast<double>(i) + 0.3);
    return v;
  };
  for (const std::string cell : {"LSTM", "GRU", "RNN"})
    for (const std::int64_t dirs : {1, 2})
      for (const int layout : {0, 1})
        for (const bool given : {true, false}) {
          SCOPED_TRACE(cell + " directions " + std::to_string(dirs) + " layout " + std::to_string(layout) + (given ? " B, states" : " no B, no states"));
          const std::int64_t gates = cell == "LSTM" ? 4 : cell == "GRU" ? 3 : 1;
          const std::vector<std::int64_t> x_dims = layout ? std::vector<std::int64_t>{kBatch, kSeq, kInput} : std::vector<std::int64_t>{kSeq, kBatch, kInput};
          const std::vector<std::int64_t> state_dims = layout ? std::vector<std::int64_t>{kBatch, dirs, kHidden} : std::vector<std::int64_t>{dirs, kBatch, kHidden};
          const std::vector<std::int64_t> y_dims = layout ? std::vector<std::int64_t>{kBatch, kSeq, dirs, kHidden} : std::vector<std::int64_t>{kSeq, dirs, kBatch, kHidden};
          const auto n = [](std::vector<std::int64_t> dims) {
            std::size_t total = 1;
            for (auto d : dims) total *= static_cast<std::size_t>(d);
            return total;
          };
          std::vector<In> inputs{In{x_dims, values(n(x_dims), 1.0)}, In{{dirs, gates * kHidden, kInput}, values(n({dirs, gates * kHidden, kInput}), 0.8)},
                                 In{{dirs, gates * kHidden, kHidden}, values(n({dirs, gates * kHidden, kHidden}), 0.6)}};
          if (given) {
            inputs.push_back(In{{dirs, 2 * gates * kHidden}, values(n({dirs, 2 * gates * kHidden}), 0.3)});
            inputs.push_back(In{});  // sequence_lens
            inputs.push_back(In{state_dims, values(n(state_dims), 0.5)});
            if (cell == "LSTM") inputs.push_back(In{state_dims, values(n(state_dims), 0.4)});
          }
          // With B and states, every output; without, Y alone.
          std::vector<Out> outputs{Out{y_dims}};
          if (given) outputs.push_back(Out{state_dims});
          if (given && cell == "LSTM") outputs.push_back(Out{state_dims});
          auto run = [&](bool clipped) {
            return run_op(cell, inputs, outputs, [&](onnx::NodeProto& node) {
              set_int(node, "hidden_size", kHidden), set_int(node, "layout", layout);
              if (dirs == 2) set_string(node, "direction", "bidirectional");
              if (cell == "GRU") set_int(node, "linear_before_reset", 1);
              if (clipped) set_float(node, "clip", 1e30f);
            });
          };
          const auto pytorch = run(false), equations = run(true);
          ASSERT_EQ(pytorch.size(), outputs.size());
          for (std::size_t k = 0; k < outputs.size(); ++k) {
            ASSERT_EQ(pytorch[k].size(), equations[k].size());
            for (std::size_t i = 0; i < pytorch[k].size(); ++i) EXPECT_NEAR(pytorch[k][i], equations[k][i], 1e-5) << "output " << k << " element " << i;
          }
        }
}

TEST(ExecutorOps, RecurrentAndGroupNormOptions) {
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  const In x{{1, 1, 1}, {1}};  // one step
  // GRU with biases Wb = (0.1, 0.2, 0.3), Rb = (0.4, 0.5, 0.6) and initial h 0.5, linear_before_reset:
  // the candidate reads r * (Rh h + Rbh).
  {
    const double h0 = 0.5;
    const double z = sigmoid(0.5 + 0.1 + 0.2 * h0 + 0.4), r = sigmoid(-0.3 + 0.2 + 0.4 * h0 + 0.5);
    const double candidate = std::tanh(0.8 + 0.3 + r * (-0.6 * h0 + 0.6));
    const double h = (1 - z) * candidate + z * h0;
    const auto y = run_op("GRU", {x, In{{1, 3, 1}, {0.5, -0.3, 0.8}}, In{{1, 3, 1}, {0.2, 0.4, -0.6}}, In{{1, 6}, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}},
                                  In{}, In{{1, 1, 1}, {h0}}},
                          {Out{{1, 1, 1, 1}}}, [](onnx::NodeProto& n) { set_int(n, "hidden_size", 1), set_int(n, "linear_before_reset", 1); });
    EXPECT_THAT(y.at(0), near(floats({h})));
  }
  // LSTM with initial h 0.2 and c 0.4, peepholes (0.3, 0.2, 0.1 for i, o, f), clip 0.5 on every
  // pre-activation, and input_forget (f = 1 - i).
  {
    const double h0 = 0.2, c0 = 0.4;
    auto clip = [](double v) { return std::clamp(v, -0.5, 0.5); };
    const double i = sigmoid(clip(0.5 + 0.1 * h0 + 0.3 * c0)), f = 1 - i;
    const double c = f * c0 + i * std::tanh(clip(0.7 + 0.6 * h0));
    const double o = sigmoid(clip(0.3 - 0.4 * h0 + 0.2 * c)), h = o * std::tanh(c);
    const auto y = run_op("LSTM", {x, In{{1, 4, 1}, {0.5, 0.3, -0.2, 0.7}}, In{{1, 4, 1}, {0.1, -0.4, 0.2, 0.6}}, In{}, In{}, In{{1, 1, 1}, {h0}},
                                   In{{1, 1, 1}, {c0}}, In{{1, 3}, {0.3, 0.2, 0.1}}},
                          {Out{{1, 1, 1, 1}}, Out{{1, 1, 1}}, Out{{1, 1, 1}}}, [](onnx::NodeProto& n) {
                            set_int(n, "hidden_size", 1), set_float(n, "clip", 0.5f), set_int(n, "input_forget", 1);
                          });
    EXPECT_THAT(y.at(0), near(floats({h})));
    EXPECT_THAT(y.at(2), near(floats({c})));
  }
  // GroupNormalization, 2 groups of 1 channel each, scale and bias per group (opset 18).
  {
    const In input{{1, 2, 2}, {1, 3, 2, 6}};
    const double s = 1.0 / std::sqrt(1.0 + 1e-5), t = 2.0 / std::sqrt(4.0 + 1e-5);
    EXPECT_THAT(run_op("GroupNormalization", {input, In{{2}, {2, 3}}, In{{2}, {10, 20}}}, {Out{{1, 2, 2}}},
                       [](onnx::NodeProto& n) { set_int(n, "num_groups", 2); }, 18).at(0),
                near(floats({10 - 2 * s, 10 + 2 * s, 20 - 3 * t, 20 + 3 * t})));
  }
}

TEST(ExecutorOps, RandomOpsDrawTheirShapes) {
  const auto normal = run_op("RandomNormalLike", {In{{2, 50}, std::vector<double>(100, 0.0)}}, {Out{{2, 50}}}, [](onnx::NodeProto& n) {
    set_float(n, "mean", 10.0f), set_float(n, "scale", 0.1f);
  });
  double mean = 0;
  for (float v : normal.at(0)) mean += v / 100.0;
  EXPECT_NEAR(mean, 10.0, 0.1);
  const auto uniform = run_op("RandomUniformLike", {In{{100}, std::vector<double>(100, 0.0)}}, {Out{{100}}}, [](onnx::NodeProto& n) {
    set_float(n, "low", 2.0f), set_float(n, "high", 3.0f);
  });
  for (float v : uniform.at(0)) EXPECT_TRUE(v >= 2.0f && v <= 3.0f) << v;
  const auto coins = run_op("Bernoulli", {In{{4}, {0, 1, 0, 1}}}, {Out{{4}}});
  EXPECT_THAT(coins.at(0), ElementsAreArray(floats({0, 1, 0, 1})));
}

// Found by a review of the executor, each against the ONNX specification.
TEST(ExecutorOps, OldOpsetFormsAndEdgeCasesFoundByReview) {
  const int f = onnx::TensorProto::FLOAT, u16 = onnx::TensorProto::UINT16, u32 = onnx::TensorProto::UINT32;
  // Pad-2 (opset 9) fills with its `value` attribute (it padded with 0).
  EXPECT_THAT(run_op("Pad", {In{{1, 2}, {1, 1}}}, {Out{{1, 4}}}, [](onnx::NodeProto& n) {
                set_string(n, "mode", "constant"), set_ints(n, "pads", {0, 1, 0, 1}), set_float(n, "value", 7.0f);
              }, 9).at(0),
              ElementsAreArray({7.0f, 1.0f, 1.0f, 7.0f}));
  // Resize-10 takes (X, scales): nearest at 0.7 picks inputs 0, 1, 2 (the executor read no scales
  // and used 3/5, which picks input 3).
  EXPECT_THAT(run_op("Resize", {In{{1, 1, 1, 5}, {1, 2, 3, 4, 5}}, In{{4}, {1, 1, 1, 0.7}, f, true}}, {Out{{1, 1, 1, 3}}},
                     [](onnx::NodeProto& n) { set_string(n, "mode", "nearest"); }, 10).at(0),
              ElementsAreArray({1.0f, 2.0f, 3.0f}));
  // reflect and edge on ranks libtorch does not pad itself ([2, 3] on both axes, [3]).
  EXPECT_THAT(run_op("Pad", {In{{2, 3}, {1, 2, 3, 4, 5, 6}}, In{{4}, {1, 1, 1, 1}, onnx::TensorProto::INT64, true}}, {Out{{4, 5}}},
                     [](onnx::NodeProto& n) { set_string(n, "mode", "reflect"); }).at(0),
              ElementsAreArray({5.0f, 4.0f, 5.0f, 6.0f, 5.0f, 2.0f, 1.0f, 2.0f, 3.0f, 2.0f, 5.0f, 4.0f, 5.0f, 6.0f, 5.0f, 2.0f, 1.0f, 2.0f, 3.0f, 2.0f}));
  EXPECT_THAT(run_op("Pad", {In{{3}, {1, 2, 3}}, In{{2}, {2, 1}, onnx::TensorProto::INT64, true}}, {Out{{6}}},
                     [](onnx::NodeProto& n) { set_string(n, "mode", "edge"); }).at(0),
              ElementsAreArray({1.0f, 1.0f, 1.0f, 2.0f, 3.0f, 3.0f}));
  // uint16 and uint32 constants in raw_data, at their own width (refused: "4 bytes does not match").
  EXPECT_THAT(run_op("Add", {In{{2}, {1, 65535}, u16, false, true}, In{{2}, {0, 0}, u16}}, {Out{{2}, u16}}).at(0),
              ElementsAreArray({1.0f, 65535.0f}));
  EXPECT_THAT(run_op("BitShift", {In{{1}, {3}, u32}, In{{1}, {4}, u32, false, true}}, {Out{{1}, u32}},
                     [](onnx::NodeProto& n) { set_string(n, "direction", "LEFT"); }).at(0),
              ElementsAreArray({48.0f}));
}

}  // namespace
}  // namespace placer
