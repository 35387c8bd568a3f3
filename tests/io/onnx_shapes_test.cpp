// Shape inference with constant folding (infer_all_shapes) on models written node by node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "placer/io/onnx.hpp"
#include "placer/io/onnx_shapes.hpp"
#include "support/paths.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void add_ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

void add_int(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
}

void add_int64_initializer(onnx::GraphProto* g, const std::string& name, std::vector<std::int64_t> v) {
  auto* t = g->add_initializer();
  t->set_name(name), t->set_data_type(onnx::TensorProto::INT64), t->add_dims(static_cast<std::int64_t>(v.size()));
  for (auto x : v) t->add_int64_data(x);
}

std::string layer(int l) {  // the prefix of layer l's names
  std::string p = "l";
  p += std::to_string(l);
  p += '_';
  return p;
}

// What a dynamic-axes export of a transformer writes in every layer: the layer's input shape read
// with Shape and Gather, a Concat of it with constants as the target of a Reshape to heads, and
// back. Each layer's Shape can only be folded once the previous layer's Reshape output is known.
onnx::ModelProto layered_model(int layers) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("layers");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : {8, 32, 64}) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  add_int64_initializer(g, "i0", {0});
  add_int64_initializer(g, "i1", {1});
  add_int64_initializer(g, "heads", {4, 16});
  add_int64_initializer(g, "width", {64});
  std::string x = "x";
  for (int l = 0; l < layers; ++l) {
    const std::string p = layer(l);
    auto* w = g->add_initializer();
    w->set_name(p + "w"), w->set_data_type(onnx::TensorProto::FLOAT), w->add_dims(64), w->add_dims(64);
    for (int i = 0; i < 64 * 64; ++i) w->add_float_data(0.0f);
    add_node(g, "Shape", {x}, {p + "s"});
    add_int(add_node(g, "Gather", {p + "s", "i0"}, {p + "b"}), "axis", 0);
    add_int(add_node(g, "Gather", {p + "s", "i1"}, {p + "t"}), "axis", 0);
    add_int(add_node(g, "Concat", {p + "b", p + "t", "heads"}, {p + "to_heads"}), "axis", 0);
    add_node(g, "MatMul", {x, p + "w"}, {p + "m"});
    add_node(g, "Reshape", {p + "m", p + "to_heads"}, {p + "r"});
    add_ints(add_node(g, "Transpose", {p + "r"}, {p + "tr"}), "perm", {0, 2, 1, 3});
    add_node(g, "Relu", {p + "tr"}, {p + "a"});
    add_ints(add_node(g, "Transpose", {p + "a"}, {p + "back"}), "perm", {0, 2, 1, 3});
    add_int(add_node(g, "Concat", {p + "b", p + "t", "width"}, {p + "to_width"}), "axis", 0);
    add_node(g, "Reshape", {p + "back", p + "to_width"}, {p + "y"});
    x = p + "y";
  }
  auto* out = g->add_output();
  out->set_name(x);
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

std::vector<std::int64_t> dims(const onnx::TypeProto& t) {
  std::vector<std::int64_t> d;
  for (const auto& dim : t.tensor_type().shape().dim()) d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  return d;
}

void add_text(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name), a->set_type(onnx::AttributeProto::STRING), a->set_s(v);
}

onnx::ValueInfoProto* add_float_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* values, const std::string& name,
                                      std::vector<std::int64_t> shape) {
  auto* v = values->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : shape) v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  return v;
}

// Attention written with Einsum, as PyTorch exports torch.einsum: scores = q k^T per head, then the
// scores' shape read with Shape for a Reshape. libonnx 1.12's Einsum rule gives only the rank.
onnx::ModelProto einsum_model(const std::string& equation, std::vector<std::int64_t> k_shape) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("einsum");
  add_float_value(g->mutable_input(), "q", {2, 4, 16, 8});
  add_float_value(g->mutable_input(), "k", std::move(k_shape));
  add_int64_initializer(g, "i0", {0});
  add_int64_initializer(g, "minus1", {-1});
  add_text(add_node(g, "Einsum", {"q", "k"}, {"scores"}), "equation", equation);
  add_node(g, "Relu", {"scores"}, {"a"});
  add_node(g, "Shape", {"a"}, {"s"});
  add_int(add_node(g, "Gather", {"s", "i0"}, {"b"}), "axis", 0);
  add_int(add_node(g, "Concat", {"b", "minus1"}, {"flat_shape"}), "axis", 0);
  add_node(g, "Reshape", {"a", "flat_shape"}, {"y"});
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

TEST(OnnxShapes, ShapesChainedThroughEveryLayerTakeAFewPassesWhateverTheDepth) {
  for (int layers : {1, 3, 40}) {
    SCOPED_TRACE(std::to_string(layers) + " layers");
    std::size_t passes = 0;
    const auto types = infer_all_shapes(layered_model(layers), &passes);
    for (int l = 0; l < layers; ++l) {
      const std::string p = layer(l);
      ASSERT_TRUE(types.count(p + "r")) << p;
      EXPECT_EQ(dims(types.at(p + "r")), (std::vector<std::int64_t>{8, 32, 4, 16}));
      EXPECT_EQ(dims(types.at(p + "tr")), (std::vector<std::int64_t>{8, 4, 32, 16}));
      EXPECT_EQ(dims(types.at(p + "y")), (std::vector<std::int64_t>{8, 32, 64}));
    }
    // One pass before folding, one after the first round of folds (which reaches the last layer),
    // and none more: before nodes were inferred between passes, 40 layers took 41 passes.
    EXPECT_LE(passes, 2u);
  }
}

// A model of one node `op` on graph inputs of the given shapes (float), opset 17, its first output
// read by a Relu.
onnx::ModelProto one_node_model(const std::string& op, const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& inputs,
                                const std::function<void(onnx::NodeProto*)>& attrs = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name(op);
  std::vector<std::string> names;
  for (const auto& [name, shape] : inputs) {
    auto* x = g->add_input();
    x->set_name(name);
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : shape) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    names.push_back(name);
  }
  auto* n = add_node(g, op, names, {"y"});
  n->set_name("n");
  if (attrs) attrs(n);
  add_node(g, "Relu", {"y"}, {"z"});
  auto* out = g->add_output();
  out->set_name("z");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

// libonnx 1.12's shape rules crashed the process (SIGSEGV, SIGFPE) on these nodes (found by a
// fuzzing review): each is now an error naming the node, before any of ONNX's rules sees it.
TEST(OnnxShapes, NodesLibonnxsRulesCrashOnAreRefusedFirst) {
  const auto fails = [](onnx::ModelProto m, const std::string& fragment) {
    EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(AllOf(HasSubstr("node 'n'"), HasSubstr(fragment))));
  };
  fails(one_node_model("Conv", {{"x", {1, 3}}, {"w", {4, 3, 3, 3}}}), "its input 'x' has 2 dimensions");
  fails(one_node_model("ConvTranspose", {{"x", {1, 3, 8, 8}}, {"w", {3, 4}}}), "its weight 'w' has 2 dimensions");
  fails(one_node_model("ConvTranspose", {{"x", {3, 8}}, {"w", {3, 4, 3, 3}}}), "its input 'x' has 2 dimensions");
  fails(one_node_model("ConvTranspose", {{"x", {1, 3, 8, 8}}, {"w", {3, 4, 3, 3}}}, [](auto* n) { add_ints(n, "kernel_shape", {3, 3, 3, 3}); }),
        "attribute 'kernel_shape' has 4 values for the input's 2 spatial dimensions");
  fails(one_node_model("STFT", {{"x", {64}}, {"step", {}}}), "its signal 'x' has 1 dimensions");
  fails(one_node_model("DepthToSpace", {{"x", {1, 16, 4, 4}}}, [](auto* n) { add_int(n, "blocksize", std::int64_t{1} << 62); }),
        "attribute 'blocksize' is 4611686018427387904, too large");
  fails(one_node_model("GatherND", {{"x", {4, 8}}, {"i", {4, 1}}}, [](auto* n) { add_int(n, "batch_dims", -7); }),
        "attribute 'batch_dims' is -7, not 0 or more");
  // The input's rank known only through the rule of the node before it (a Flatten).
  onnx::ModelProto chained = one_node_model("Conv", {{"x", {1, 3, 8, 8}}, {"w", {4, 3, 3, 3}}});
  auto* g = chained.mutable_graph();
  add_node(g, "Flatten", {"x"}, {"flat"});
  g->mutable_node()->SwapElements(0, 2);  // Flatten first, then the Conv, then the Relu
  g->mutable_node()->SwapElements(1, 2);
  g->mutable_node(1)->set_input(0, "flat");
  fails(chained, "its input 'flat' has 2 dimensions");
}

// The import's error for `m`, written to a file ("" when it imports), its node's output 'y' and
// the graph's output declared of shape `out` (as exported files declare them: ONNX's rules then
// need not infer them).
std::string import_error_of(onnx::ModelProto m, const std::vector<std::int64_t>& out) {
  auto* y = m.mutable_graph()->add_value_info();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (onnx::TypeProto_Tensor* t : {y->mutable_type()->mutable_tensor_type(), m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()})
    for (std::int64_t d : out) t->mutable_shape()->add_dim()->set_dim_value(d);
  const std::string path = test::temp_path("one_node.onnx");
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  try {
    load_onnx(path, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Attribute values ONNX's shape rules leave unchecked and the cost rules read, and typed values
// that do not fit their tensor's dims: each was imported (rc 0) before (a fuzzing pass). An element
// type the ONNX library does not know is named by its number.
TEST(OnnxShapes, AttributesAndValuesTheRulesLeaveUncheckedAreRefused) {
  EXPECT_EQ(import_error_of(one_node_model("LRN", {{"x", {1, 4, 8, 8}}}, [](auto* n) { add_int(n, "size", 3); }), {1, 4, 8, 8}), "");
  EXPECT_THAT(import_error_of(one_node_model("LRN", {{"x", {1, 4, 8, 8}}}, [](auto* n) { add_int(n, "size", 0); }), {1, 4, 8, 8}),
              HasSubstr("op 'n' (LRN): attribute 'size' is 0 (a positive integer)"));
  EXPECT_THAT(import_error_of(one_node_model("LSTM", {{"x", {5, 2, 8}}, {"w", {1, 64, 8}}, {"r", {1, 64, 16}}}, [](auto* n) {
                add_int(n, "hidden_size", 16);
                add_text(n, "direction", "sideways");
              }), {5, 1, 2, 16}),
              HasSubstr("op 'n' (LSTM): attribute 'direction' is 'sideways' ('forward', 'reverse' or 'bidirectional')"));
  EXPECT_THAT(import_error_of(one_node_model("GlobalAveragePool", {{"x", {4}}}), {4}), HasSubstr("op 'n' (GlobalAveragePool): its input [4] is not [N, C, ...]"));
  // A pool whose last window runs past its input by less than a stride imports with ceil_mode
  // (SqueezeNet's last 3x3 pool of stride 2 on a 2x2 map: refused at first, a review).
  const auto pool = [](std::int64_t ceil_mode) {
    return one_node_model("MaxPool", {{"x", {1, 4, 2, 2}}}, [ceil_mode](auto* n) {
      add_ints(n, "kernel_shape", {3, 3}), add_ints(n, "strides", {2, 2}), add_int(n, "ceil_mode", ceil_mode);
    });
  };
  EXPECT_EQ(import_error_of(pool(1), {1, 4, 1, 1}), "");
  EXPECT_THAT(import_error_of(pool(0), {1, 4, 1, 1}), ::testing::Not(::testing::IsEmpty()));
  onnx::ModelProto short_weight = one_node_model("Add", {{"x", {2, 3}}});
  {
    auto* g = short_weight.mutable_graph();
    g->mutable_node(0)->add_input("w");
    auto* w = g->add_initializer();
    w->set_name("w");
    w->add_dims(2), w->add_dims(3);
    w->set_data_type(onnx::TensorProto::FLOAT);
    for (int i = 0; i < 5; ++i) w->add_float_data(1.0f);
  }
  EXPECT_THAT(import_error_of(short_weight, {2, 3}), HasSubstr("initializer 'w': a tensor of 6 element(s) holds 5 value(s) in float_data"));
  short_weight.mutable_graph()->mutable_initializer(0)->add_float_data(1.0f);
  EXPECT_EQ(import_error_of(short_weight, {2, 3}), "");
  onnx::ModelProto unknown_type = one_node_model("Add", {{"x", {2, 3}}, {"w", {2, 3}}});
  unknown_type.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(99);
  EXPECT_THAT(import_error_of(unknown_type, {2, 3}), ::testing::Not(HasSubstr("is  but")));
}

// Nodes that ONNX's rules leave with an unknown size, which was then blamed on "a data-dependent
// shape" (a QA pass): each is refused for what it is.
TEST(OnnxShapes, NodesOfNoSizeAreRefusedForWhatTheyAre) {
  const auto fails = [](onnx::ModelProto m, const std::string& fragment) {
    EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(AllOf(HasSubstr("node 'n'"), HasSubstr(fragment))));
  };
  for (std::int64_t hidden : {0, -4})
    fails(one_node_model("LSTM", {{"x", {5, 2, 8}}, {"w", {1, 16, 8}}, {"r", {1, 16, 4}}}, [&](auto* n) { add_int(n, "hidden_size", hidden); }),
          "attribute 'hidden_size' must hold positive integers, got [" + std::to_string(hidden) + "]");
  fails(one_node_model("Constant", {}), "(Constant) has no value");
  fails(one_node_model("Constant", {}, [](auto* n) { add_ints(n, "value_ints", {1}), add_int(n, "value_int", 2); }),
        "(Constant) has 2 value attributes");
  onnx::ModelProto one_value = one_node_model("Constant", {}, [](auto* n) {
    auto* a = n->add_attribute();
    a->set_name("value_floats"), a->set_type(onnx::AttributeProto::FLOATS), a->add_floats(1.5f), a->add_floats(2.5f);
  });
  EXPECT_NO_THROW(infer_all_shapes(one_value));
}

// ONNX's pass runs the same rules inside subgraphs and on shapes only partly known; the guard must
// see what it sees (found in stop 30: each of these crashed the process before).
onnx::ValueInfoProto* add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* values, const std::string& name,
                                const std::vector<std::int64_t>& shape, int type = onnx::TensorProto::FLOAT) {
  auto* v = values->Add();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  auto* s = v->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (std::int64_t d : shape) {
    if (d < 0) s->add_dim()->set_dim_param("N");  // -1: a symbolic size
    else s->add_dim()->set_dim_value(d);
  }
  return v;
}

onnx::GraphProto branch(const std::string& name, const std::function<void(onnx::GraphProto*)>& body, const std::string& out) {
  onnx::GraphProto g;
  g.set_name(name);
  body(&g);
  auto* o = g.add_output();
  o->set_name(out);
  o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return g;
}

onnx::ModelProto if_model(const onnx::GraphProto& then_branch, const onnx::GraphProto& else_branch,
                          const std::function<void(onnx::GraphProto*)>& after = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("if");
  add_value(g->mutable_input(), "cond", {}, onnx::TensorProto::BOOL);
  add_value(g->mutable_input(), "x", {1, 3});
  add_value(g->mutable_input(), "w", {4, 3, 3, 3});
  auto* n = add_node(g, "If", {"cond"}, {"y"});
  n->set_name("choice");
  auto* a = n->add_attribute();
  a->set_name("then_branch"), a->set_type(onnx::AttributeProto::GRAPH), *a->mutable_g() = then_branch;
  a = n->add_attribute();
  a->set_name("else_branch"), a->set_type(onnx::AttributeProto::GRAPH), *a->mutable_g() = else_branch;
  std::string last = "y";
  if (after) after(g), last = "c";
  auto* out = g->add_output();
  out->set_name(last);
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

TEST(OnnxShapes, CrashersInsideSubgraphsOrOnPartlyKnownShapesAreRefusedFirst) {
  const auto fails = [](onnx::ModelProto m, const std::vector<std::string>& fragments) {
    for (const auto& f : fragments) EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(HasSubstr(f)));
  };
  const auto relu_of_x = branch("else", [](auto* g) { add_node(g, "Relu", {"x"}, {"e"}); }, "e");
  // A convolution in a branch, on the outer scope's rank-2 input.
  fails(if_model(branch("then", [](auto* g) { add_node(g, "Conv", {"x", "w"}, {"t"})->set_name("inner"); }, "t"), relu_of_x),
        {"node 'inner' (Conv): its input 'x' has 2 dimensions", "(in then_branch of node 'choice' (If))"});
  // On a constant of the branch itself.
  fails(if_model(branch("then",
                        [](auto* g) {
                          auto* k = add_node(g, "Identity", {"x"}, {"k"});
                          k->set_name("copy");
                          add_node(g, "Conv", {"k", "w"}, {"t"})->set_name("inner");
                        },
                        "t"),
                 relu_of_x),
        {"node 'inner' (Conv): its input 'k' has 2 dimensions", "then_branch"});
  // After the If: its output has the branches' rank 2.
  fails(if_model(branch("then", [](auto* g) { add_node(g, "Relu", {"x"}, {"t"}); }, "t"), relu_of_x,
                 [](auto* g) { add_node(g, "Conv", {"y", "w"}, {"c"})->set_name("after"); }),
        {"node 'after' (Conv): its input 'y' has 2 dimensions"});
  // A rank known only through a rule run on a symbolic size (the batch left open).
  onnx::ModelProto symbolic = one_node_model("Conv", {{"x", {1, 3, 8, 8}}, {"w", {4, 3, 3, 3}}});
  auto* g = symbolic.mutable_graph();
  *g->mutable_input(0) = *add_value(g->mutable_input(), "x", {-1, 3});  // [N, 3]
  g->mutable_input()->RemoveLast();
  add_node(g, "Relu", {"x"}, {"r"});
  g->mutable_node()->SwapElements(0, 2);  // Relu first, then the Conv, then the Relu after it
  g->mutable_node()->SwapElements(1, 2);
  g->mutable_node(1)->set_input(0, "r");
  fails(symbolic, {"node 'n' (Conv): its input 'r' has 2 dimensions"});
  // A Loop's body, on a loop-carried value of rank 2.
  onnx::ModelProto loop;
  loop.set_ir_version(8);
  loop.add_opset_import()->set_version(17);
  g = loop.mutable_graph();
  g->set_name("loop");
  add_value(g->mutable_input(), "n", {}, onnx::TensorProto::INT64);
  add_value(g->mutable_input(), "cond", {}, onnx::TensorProto::BOOL);
  add_value(g->mutable_input(), "x", {1, 3});
  add_value(g->mutable_input(), "w", {4, 3, 3, 3});
  onnx::GraphProto body;
  body.set_name("body");
  add_value(body.mutable_input(), "i", {}, onnx::TensorProto::INT64);
  add_value(body.mutable_input(), "c_in", {}, onnx::TensorProto::BOOL);
  add_value(body.mutable_input(), "v", {1, 3});
  add_node(&body, "Identity", {"c_in"}, {"c_out"});
  add_node(&body, "Identity", {"v"}, {"v_out"});
  add_node(&body, "Conv", {"v", "w"}, {"s"})->set_name("inner");
  add_value(body.mutable_output(), "c_out", {}, onnx::TensorProto::BOOL);
  add_value(body.mutable_output(), "v_out", {1, 3});
  body.add_output()->set_name("s");
  body.mutable_output(2)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* node = add_node(g, "Loop", {"n", "cond", "x"}, {"v_final", "scans"});
  node->set_name("repeat");
  auto* a = node->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH), *a->mutable_g() = body;
  g->add_output()->set_name("scans");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  fails(loop, {"node 'inner' (Conv): its input 'v' has 2 dimensions", "(in body of node 'repeat' (Loop))"});
}

// A model of opset 17 with float inputs of these shapes, its nodes written by `nodes`, and one
// output (the first input again), so that the nodes are checked without being needed.
onnx::ModelProto nodes_model(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& inputs,
                             const std::function<void(onnx::GraphProto*)>& nodes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (const auto& [name, shape] : inputs) add_value(g->mutable_input(), name, shape);
  nodes(g);
  add_node(g, "Identity", {inputs[0].first}, {"out"});
  add_value(g->mutable_output(), "out", inputs[0].second);
  return m;
}

onnx::NodeProto* with_body(onnx::NodeProto* n, const onnx::GraphProto& body) {
  auto* a = n->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH), *a->mutable_g() = body;
  return n;
}

// What the helper's fuzzing found past the first subgraph guard (each crashed before): ranks that
// reach a convolution through a sequence or an optional, a declared type without a shape, a body
// input hiding an outer name, and body inputs typed by the op's rule.
TEST(OnnxShapes, RanksThroughSequencesOptionalsAndBodyInputsReachTheGuard) {
  const auto fails = [](onnx::ModelProto m, const std::string& fragment) {
    EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> xw = {{"x", {2, 3}}, {"w", {4, 3, 3, 3}}};
  fails(nodes_model(xw,
                    [](auto* g) {
                      add_int64_initializer(g, "zero", {0});
                      g->mutable_initializer(0)->clear_dims();  // a scalar
                      add_node(g, "SequenceConstruct", {"x"}, {"s"});
                      add_node(g, "SequenceAt", {"s", "zero"}, {"y"});
                      add_node(g, "Conv", {"y", "w"}, {"z"});
                    }),
        "node 'z' (Conv): its input 'y' has 2 dimensions");
  fails(nodes_model(xw,
                    [](auto* g) {
                      add_node(g, "Optional", {"x"}, {"o"});
                      add_node(g, "OptionalGetElement", {"o"}, {"y"});
                      add_node(g, "Conv", {"y", "w"}, {"z"});
                    }),
        "node 'z' (Conv): its input 'y' has 2 dimensions");
  fails(nodes_model(xw,
                    [](auto* g) {
                      add_node(g, "Identity", {"x"}, {"y"});
                      add_node(g, "Conv", {"y", "w"}, {"z"});
                      g->add_value_info()->set_name("y");  // declared float, no shape
                      g->mutable_value_info(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
                    }),
        "node 'z' (Conv): its input 'y' has 2 dimensions");
  // Scan bodies: an input named as an outer value of rank 4 (the body's [2,3] is what ONNX reads),
  // and an input declared without a shape, which the scan input [2,2,3] gives [2,3].
  for (const bool shadow : {true, false}) {
    const std::string e = shadow ? "x4" : "e";
    fails(nodes_model({{"x3", {2, 2, 3}}, {"w", {4, 3, 3, 3}}, {"x4", {1, 3, 5, 5}}},
                      [&](auto* g) {
                        onnx::GraphProto body;
                        body.set_name("body");
                        if (shadow) add_value(body.mutable_input(), e, {2, 3});
                        else add_value(body.mutable_input(), e, {})->mutable_type()->mutable_tensor_type()->clear_shape();
                        add_node(&body, "Conv", {e, "w"}, {"c"})->set_name("inner");
                        add_node(&body, "Identity", {e}, {"e_out"});
                        add_value(body.mutable_output(), "e_out", {2, 3});
                        auto* scan = with_body(add_node(g, "Scan", {"x3"}, {"scanned"}), body);
                        scan->set_name("scan");
                        add_int(scan, "num_scan_inputs", 1);
                      }),
          "node 'inner' (Conv): its input '" + e + "' has 2 dimensions");
  }
  // A SequenceMap's body input: an element of the sequence.
  fails(nodes_model(xw,
                    [](auto* g) {
                      add_node(g, "SequenceConstruct", {"x"}, {"s"});
                      onnx::GraphProto body;
                      body.set_name("body");
                      add_value(body.mutable_input(), "e", {})->mutable_type()->mutable_tensor_type()->clear_shape();
                      add_node(&body, "Conv", {"e", "w"}, {"c"})->set_name("inner");
                      add_value(body.mutable_output(), "c", {})->mutable_type()->mutable_tensor_type()->clear_shape();
                      with_body(add_node(g, "SequenceMap", {"s"}, {"r"}), body)->set_name("map");
                    }),
        "node 'inner' (Conv): its input 'e' has 2 dimensions");
}

// Paths the guard does not follow (a second fuzzing review: declarations read in ONNX's order,
// ops with function bodies, other domains...): libonnx's own rules of the crashing ops are wrapped
// in the same check, so that ONNX's pass refuses the node instead of crashing, whatever the path.
TEST(OnnxShapes, LibonnxsRulesOfCrashingOpsAreWrappedInTheCheck) {
  // A graph input [2,3] also declared [1,3,5,5] in value_info: ONNX reads the input's rank 2.
  onnx::ModelProto m = nodes_model({{"x", {2, 3}}, {"w", {4, 3, 3, 3}}}, [](auto* g) {
    add_node(g, "Conv", {"x", "w"}, {"z"});
    add_value(g->mutable_value_info(), "x", {1, 3, 5, 5});
  });
  EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(HasSubstr("2 dimensions, not [N, C, spatial...]")));
  // ONNX's own pass, once placer has run (which wraps the rules), on models whose types reach the
  // crashers by any path: an exception, never a crash.
  const auto refused_by_onnx = [](onnx::ModelProto model, const std::string& fragment) {
    EXPECT_THAT([&] { onnx::shape_inference::InferShapes(model); }, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  refused_by_onnx(one_node_model("Conv", {{"x", {1, 3}}, {"w", {4, 3, 3, 3}}}), "a Conv node: its input 0 has 2 dimensions");
  refused_by_onnx(one_node_model("ConvTranspose", {{"x", {1, 3, 8, 8}}, {"w", {3, 4}}}), "a ConvTranspose node: its weight 1 has 2 dimensions");
  refused_by_onnx(one_node_model("STFT", {{"x", {64}}, {"step", {}}}), "a STFT node: its signal 0 has 1 dimensions");
  refused_by_onnx(one_node_model("GatherND", {{"x", {4, 8}}, {"i", {4, 1}}}, [](auto* n) { add_int(n, "batch_dims", -7); }),
                  "attribute 'batch_dims' is -7");
  // A LessOrEqual (a function body in opset 17, no rule of its own) gives the Conv its rank 2.
  refused_by_onnx(nodes_model({{"x", {2, 3}}, {"w", {4, 3, 3, 3}}},
                              [](auto* g) {
                                add_node(g, "LessOrEqual", {"x", "x"}, {"b"});
                                add_int(add_node(g, "Cast", {"b"}, {"f"}), "to", onnx::TensorProto::FLOAT);
                                add_node(g, "Conv", {"f", "w"}, {"z"});
                              }),
                  "a Conv node: its input 0 has 2 dimensions");
  // Well-formed nodes go through the wrapper unchanged.
  EXPECT_EQ(dims(infer_all_shapes(one_node_model("Conv", {{"x", {1, 3, 8, 8}}, {"w", {4, 3, 3, 3}}})).at("y")),
            (std::vector<std::int64_t>{1, 4, 6, 6}));
}

// A third fuzzing review: EyeLike with a dtype on an input of no type, LayerNormalization on a
// scalar or with an axis below -rank, GatherND's indices declared with a negative last dimension
// (each crashed the process before).
TEST(OnnxShapes, MoreCrashersOfLibonnxsRulesAreErrors) {
  const auto fails = [](onnx::ModelProto m, const std::string& fragment) {
    EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(HasSubstr(fragment)));
  };
  // EyeLike reading the output of an op of another domain, which no rule types.
  onnx::ModelProto eye = nodes_model({{"x", {2, 3}}}, [](auto* g) {
    add_node(g, "Foo", {"x"}, {"u"})->set_domain("my.domain");
    add_int(add_node(g, "EyeLike", {"u"}, {"e"}), "dtype", onnx::TensorProto::FLOAT);
  });
  auto* domain = eye.add_opset_import();
  domain->set_domain("my.domain"), domain->set_version(1);
  fails(eye, "a EyeLike node: its input has no type");
  // LayerNormalization with its Mean output.
  fails(nodes_model({{"x", {}}, {"s", {}}},
                    [](auto* g) { add_node(g, "LayerNormalization", {"x", "s"}, {"y", "mean"})->set_name("ln"); }),
        "node 'ln' (LayerNormalization): its input 'x' has 0 dimensions");
  fails(nodes_model({{"x", {2, 3}}, {"s", {3}}},
                    [](auto* g) {
                      auto* n = add_node(g, "LayerNormalization", {"x", "s"}, {"y", "mean"});
                      n->set_name("ln");
                      add_int(n, "axis", -5);
                    }),
        "attribute 'axis' is -5, outside [-2, 2)");
  // GatherND's indices declared [2,-5].
  fails(nodes_model({{"x", {4, 8}}, {"i", {2, 1}}},
                    [](auto* g) {
                      add_node(g, "Identity", {"i"}, {"ix"});
                      add_node(g, "GatherND", {"x", "ix"}, {"y"});
                      add_value(g->mutable_value_info(), "ix", {2, 1})->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(-5);
                    }),
        "value_info 'ix' of graph 'g' declares dimension 1 as -5, a negative size");
}

// Operands that ONNX's rules never compare (the output comes from X alone) were priced as given
// (found by the fuzzing review); now named.
TEST(OnnxShapes, OperandsOnnxsRulesDoNotReadAreChecked) {
  const auto fails = [](onnx::ModelProto m, const std::string& fragment) {
    EXPECT_THAT([&] { infer_all_shapes(m); }, ThrowsMessage<Error>(AllOf(HasSubstr("node 'n'"), HasSubstr(fragment))));
  };
  fails(one_node_model("PRelu", {{"x", {4, 8}}, {"s", {3}}}), "slope 's' is [3], which does not broadcast to input [4,8]");
  EXPECT_NO_THROW(infer_all_shapes(one_node_model("PRelu", {{"x", {4, 8}}, {"s", {8}}})));
  fails(one_node_model("ConvTranspose", {{"x", {1, 3, 8, 8}}, {"w", {3, 4, 3, 3}}}, [](auto* n) { add_int(n, "group", 2); }),
        "has 3 channels, but weight [3,4,3,3] takes 3 in 2 group(s)");
  fails(one_node_model("ConvTranspose", {{"x", {1, 3, 8, 8}}, {"w", {3, 4, 3, 3}}, {"b", {99}}}), "bias [99] should be [4]");
  EXPECT_NO_THROW(infer_all_shapes(one_node_model("ConvTranspose", {{"x", {1, 4, 8, 8}}, {"w", {4, 3, 3, 3}}, {"b", {6}}},
                                                  [](auto* n) { add_int(n, "group", 2); })));
  fails(one_node_model("LSTM", {{"x", {5, 2, 4}}, {"w", {1, 4, 4}}, {"r", {1, 4, 1}}}, [](auto* n) { add_int(n, "hidden_size", std::int64_t{1} << 50); }),
        "attribute 'hidden_size' is 1125899906842624, but R is [1,4,1]: too large");
}

TEST(OnnxShapes, ANodeItsRuleRejectsIsAnErrorNamingIt) {
  // The second layer's weight does not fit its input: MatMul's rule throws. ONNX's lenient pass
  // drops such errors (the product and everything after it stayed unknown, and an error came later
  // with a less helpful text); the node is named, with ONNX's reason and its inputs' types.
  onnx::ModelProto m = layered_model(2);
  for (auto& init : *m.mutable_graph()->mutable_initializer())
    if (init.name() == "l1_w") {
      init.set_dims(0, 65);
      for (int i = 0; i < 64; ++i) init.add_float_data(0.0f);
    }
  EXPECT_THAT([&] { infer_all_shapes(m); },
              ThrowsMessage<Error>(AllOf(HasSubstr("(MatMul)"), HasSubstr("Incompatible dimensions"), HasSubstr("[65,64]"))));
}

TEST(OnnxShapes, EinsumGivesItsOutputShapeWhereOnnxsRuleGivesOnlyItsRank) {
  const auto types = infer_all_shapes(einsum_model("bhqd,bhkd->bhqk", {2, 4, 32, 8}));
  EXPECT_EQ(dims(types.at("scores")), (std::vector<std::int64_t>{2, 4, 16, 32}));
  EXPECT_EQ(types.at("scores").tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(dims(types.at("y")), (std::vector<std::int64_t>{2, 4 * 16 * 32}));  // through Shape and Reshape

  // Implicit output: the letters used once, in order (k, q); b, h and d appear twice and are summed.
  EXPECT_EQ(dims(infer_all_shapes(einsum_model("bhqd,bhkd", {2, 4, 32, 8})).at("scores")), (std::vector<std::int64_t>{32, 16}));
  // A broadcast operand: k has one head for all (size 1), and an ellipsis.
  EXPECT_EQ(dims(infer_all_shapes(einsum_model("...qd,...kd->...qk", {2, 1, 32, 8})).at("scores")),
            (std::vector<std::int64_t>{2, 4, 16, 32}));
}

TEST(OnnxShapes, EinsumsThatLibonnxsRuleMisreadsGetTheirShapes) {
  // libonnx 1.12's rule counts letters in an array indexed by c - 'a': an upper-case letter wrote
  // outside it (the process aborted on some equations, others got a wrong rank). It never runs.
  EXPECT_EQ(dims(infer_all_shapes(einsum_model("bHqd,bHkd->bHqk", {2, 4, 32, 8})).at("scores")),
            (std::vector<std::int64_t>{2, 4, 16, 32}));
  EXPECT_EQ(dims(infer_all_shapes(einsum_model("ZYqd,ZYkd", {2, 4, 32, 8})).at("scores")), (std::vector<std::int64_t>{32, 16}));
  // Ellipses of different lengths broadcast (libonnx 1.12 refused them).
  EXPECT_EQ(dims(infer_all_shapes(einsum_model("...qd,...kd->...qk", {4, 32, 8})).at("scores")),
            (std::vector<std::int64_t>{2, 4, 16, 32}));
}

TEST(OnnxShapes, AnEinsumWhoseEquationDoesNotFitItsInputsIsAnErrorNamingIt) {
  // d is 8 in q and 7 in k: the product cannot run, and pricing it would guess.
  EXPECT_THAT([] { infer_all_shapes(einsum_model("bhqd,bhkd->bhqk", {2, 4, 32, 7})); },
              ThrowsMessage<Error>(AllOf(HasSubstr("(Einsum)"), HasSubstr("letter 'd' has size 8 in operand 1 and 7 in operand 2"))));
  EXPECT_THAT([] { infer_all_shapes(einsum_model("bhqd,bhk->bhqk", {2, 4, 32, 8})); },
              ThrowsMessage<Error>(AllOf(HasSubstr("(Einsum)"), HasSubstr("operand 2 has rank 4, its term has 3 letter(s)"))));
  EXPECT_THAT([] { infer_all_shapes(einsum_model("bhqd,bhkd->bhqz", {2, 4, 32, 8})); },
              ThrowsMessage<Error>(HasSubstr("output letter 'z' is in no operand")));
}

TEST(OnnxShapes, AnEinsumOutputDeclaredWithAnotherShapeIsAnError) {
  // Every shape declared: ONNX's inference does not run, the check of every node does.
  onnx::ModelProto m = einsum_model("bhqd,bhkd->bhqk", {2, 4, 32, 8});
  auto* values = m.mutable_graph()->mutable_value_info();
  add_float_value(values, "scores", {2, 4, 32, 16});  // q and k swapped
  add_float_value(values, "a", {2, 4, 32, 16});
  EXPECT_THAT([&] { infer_all_shapes(m); },
              ThrowsMessage<Error>(AllOf(HasSubstr("(Einsum)"), HasSubstr("declared float[2,4,32,16]"), HasSubstr("float[2,4,16,32]"))));
}

// An op with one data input and constant operands, its output read by a Relu (so that its shape
// is needed), the graph output's shape left to inference.
onnx::ModelProto constant_operand_model(const std::string& op, std::vector<std::int64_t> x_shape, int x_type,
                                        const std::vector<std::pair<std::string, onnx::TensorProto>>& constants) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name(op);
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(x_type);
  for (std::int64_t d : x_shape) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  std::vector<std::string> inputs{"x"};
  for (const auto& [name, t] : constants) {
    *g->add_initializer() = t;
    g->mutable_initializer(g->initializer_size() - 1)->set_name(name);
    inputs.push_back(name);
  }
  add_node(g, op, inputs, {"y"});
  add_node(g, "Relu", {"y"}, {"z"});
  auto* out = g->add_output();
  out->set_name("z");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

onnx::TensorProto int64_tensor(std::vector<std::int64_t> dims, std::vector<std::int64_t> values) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  for (auto d : dims) t.add_dims(d);
  for (auto v : values) t.add_int64_data(v);
  return t;
}

TEST(OnnxShapes, OneHotTakesItsDepthFromItsConstant) {
  // libonnx 1.12's rule does not read depth: the class dimension stayed unknown.
  onnx::TensorProto values;
  values.set_data_type(onnx::TensorProto::FLOAT), values.add_dims(2), values.add_float_data(0), values.add_float_data(1);
  auto model = [&](std::vector<std::int64_t> depth_dims, std::int64_t depth, std::optional<std::int64_t> axis) {
    onnx::ModelProto m = constant_operand_model("OneHot", {8, 16}, onnx::TensorProto::INT64,
                                                {{"depth", int64_tensor(depth_dims, {depth})}, {"values", values}});
    if (axis) add_int(m.mutable_graph()->mutable_node(0), "axis", *axis);
    return m;
  };
  EXPECT_EQ(dims(infer_all_shapes(model({}, 10, std::nullopt)).at("z")), (std::vector<std::int64_t>{8, 16, 10}));
  EXPECT_EQ(dims(infer_all_shapes(model({1}, 10, 0)).at("y")), (std::vector<std::int64_t>{10, 8, 16}));
  EXPECT_EQ(infer_all_shapes(model({1}, 10, 0)).at("y").tensor_type().elem_type(), onnx::TensorProto::FLOAT);  // values' type
  EXPECT_EQ(dims(infer_all_shapes(model({}, 10, -2)).at("y")), (std::vector<std::int64_t>{8, 10, 16}));
  // A float16 depth (raw halves: 10.0 is 0x4900), and depths that are no count of classes.
  onnx::ModelProto half = model({}, 10, std::nullopt);
  for (auto& init : *half.mutable_graph()->mutable_initializer())
    if (init.name() == "depth") {
      init.clear_int64_data(), init.set_data_type(onnx::TensorProto::FLOAT16);
      init.set_raw_data(std::string("\x00\x49", 2));
    }
  EXPECT_EQ(dims(infer_all_shapes(half).at("y")), (std::vector<std::int64_t>{8, 16, 10}));
  onnx::ModelProto boolean = model({}, 1, std::nullopt);
  for (auto& init : *boolean.mutable_graph()->mutable_initializer())
    if (init.name() == "depth") init.clear_int64_data(), init.set_data_type(onnx::TensorProto::BOOL), init.add_int32_data(1);
  EXPECT_THAT([&] { infer_all_shapes(boolean); }, ThrowsMessage<Error>(HasSubstr("depth should be a number, not a bool")));
  EXPECT_THAT([&] { infer_all_shapes(model({}, std::int64_t{1} << 53, std::nullopt)); },
              ThrowsMessage<Error>(HasSubstr("depth is 2^53 classes or more")));
  EXPECT_THAT([&] { infer_all_shapes(model({}, 0, std::nullopt)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("(OneHot)"), HasSubstr("depth 0 is not a positive number of classes"))));
  EXPECT_THAT([&] { infer_all_shapes(model({}, 10, 3)); }, ThrowsMessage<Error>(AllOf(HasSubstr("(OneHot)"), HasSubstr("'axis' must be in"))));
}

// Found by review: a float16 constant folded into a float Constant changed the model's types.
TEST(OnnxShapes, AFloat16ConstantIsNeverFoldedIntoAnotherType) {
  onnx::ModelProto m = constant_operand_model("Mul", {2, 4}, onnx::TensorProto::FLOAT16, {});
  onnx::GraphProto* g = m.mutable_graph();
  auto* half = g->add_initializer();
  half->set_name("k"), half->set_data_type(onnx::TensorProto::FLOAT16), half->set_raw_data(std::string("\x00\x44", 2));  // 4.0
  g->mutable_node(0)->add_input("sqrt_k");
  auto* sqrt = g->add_node();
  sqrt->set_op_type("Sqrt"), sqrt->add_input("k"), sqrt->add_output("sqrt_k");
  for (int i = g->node_size() - 1; i > 0; --i) g->mutable_node()->SwapElements(i, i - 1);  // Sqrt first
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  const auto types = infer_all_shapes(m);
  EXPECT_EQ(types.at("sqrt_k").tensor_type().elem_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(dims(types.at("z")), (std::vector<std::int64_t>{2, 4}));
}

// "To the end" (INT64_MAX, inexact in a double) may be compared with a size, exactly; arithmetic on
// it is left unknown rather than guessed.
TEST(OnnxShapes, FoldedValuesBeyond2To53AreComparedButNotComputed) {
  onnx::GraphProto g;
  add_int64_initializer(&g, "end", {std::numeric_limits<std::int64_t>::max()});
  add_int64_initializer(&g, "size", {5});
  add_int64_initializer(&g, "one", {1});
  add_node(&g, "Min", {"end", "size"}, {"clamped"});
  add_node(&g, "Less", {"size", "end"}, {"inside"});
  add_node(&g, "Add", {"end", "one"}, {"past"});
  const auto values = folded_values(g, {});
  ASSERT_TRUE(values.count("clamped"));
  EXPECT_EQ(values.at("clamped"), std::vector<double>{5});
  EXPECT_EQ(values.at("inside"), std::vector<double>{1});
  EXPECT_FALSE(values.count("past"));
}

TEST(OnnxShapes, CompressWithAConstantConditionKeepsTheSlicesItSelects) {
  auto condition = [](std::vector<int> bits) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::BOOL), t.add_dims(static_cast<std::int64_t>(bits.size()));
    for (int b : bits) t.add_int32_data(b);
    return t;
  };
  auto model = [&](std::vector<int> bits, std::optional<std::int64_t> axis) {
    onnx::ModelProto m = constant_operand_model("Compress", {2, 5, 4}, onnx::TensorProto::FLOAT, {{"condition", condition(bits)}});
    if (axis) add_int(m.mutable_graph()->mutable_node(0), "axis", *axis);
    return m;
  };
  EXPECT_EQ(dims(infer_all_shapes(model({1, 0, 1, 1, 0}, 1)).at("z")), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_EQ(dims(infer_all_shapes(model({0, 1}, -1)).at("z")), (std::vector<std::int64_t>{2, 5, 1}));  // shorter: the rest dropped
  EXPECT_EQ(dims(infer_all_shapes(model({1, 1, 0, 1}, std::nullopt)).at("z")), (std::vector<std::int64_t>{3}));  // flattened
  onnx::ModelProto ints = model({1, 0}, 1);
  ints.mutable_graph()->mutable_initializer(0)->set_data_type(onnx::TensorProto::INT32);
  EXPECT_THAT([&] { infer_all_shapes(ints); }, ThrowsMessage<Error>(HasSubstr("the condition should be a bool tensor")));
  onnx::ModelProto short_data = model({1, 0}, 1);
  short_data.mutable_graph()->mutable_initializer(0)->set_dims(0, 4);  // 4 entries said, 2 given
  // (Refused before the Compress reads it: every initializer's values must fit its dims.)
  EXPECT_THAT([&] { infer_all_shapes(short_data); },
              ThrowsMessage<Error>(HasSubstr("initializer 'condition': a tensor of 4 element(s) holds 2 value(s) in int32_data")));
  // A condition too large to read here (over 4,096 entries) leaves the shape to the declarations.
  std::vector<int> mask(5000, 0);
  mask[7] = 1;
  onnx::ModelProto big = constant_operand_model("Compress", {5000}, onnx::TensorProto::FLOAT, {{"condition", condition(mask)}});
  add_int(big.mutable_graph()->mutable_node(0), "axis", 0);
  auto* declared = big.mutable_graph()->add_value_info();
  declared->set_name("y"), declared->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  declared->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  EXPECT_EQ(dims(infer_all_shapes(big).at("z")), (std::vector<std::int64_t>{1}));
  EXPECT_THAT([&] { infer_all_shapes(model({0, 0, 0, 0, 0, 1}, 1)); },
              ThrowsMessage<Error>(AllOf(HasSubstr("(Compress)"), HasSubstr("the condition selects entry 5 of 5"))));
}

// Found by review: the folding read variadic Max and Min from their first two inputs, ignored
// Clip's bounds when they were attributes (opsets 6-10), evaluated a custom domain's op as the ONNX
// op of the same name, and took an optional input that the node names but whose value is only
// known at run time (Slice's steps, Unsqueeze's axes) as absent.
TEST(OnnxShapes, FoldingReadsEveryInputAndAttributeAndOnlyOnnxsOwnOps) {
  onnx::GraphProto g;
  add_int64_initializer(&g, "a", {8, 64});
  add_int64_initializer(&g, "b", {1, 1});
  add_int64_initializer(&g, "c", {100, 100});
  add_node(&g, "Max", {"a", "b", "c"}, {"max3"});
  add_node(&g, "Min", {"a", "b", "c"}, {"min3"});
  add_node(&g, "Max", {"a"}, {"max1"});
  auto* clip = add_node(&g, "Clip", {"a"}, {"clipped"});
  for (auto [name, v] : {std::pair{"min", 10.0f}, std::pair{"max", 20.0f}}) {
    auto* attr = clip->add_attribute();
    attr->set_name(name), attr->set_type(onnx::AttributeProto::FLOAT), attr->set_f(v);
  }
  add_node(&g, "Mul", {"a", "b"}, {"custom"})->set_domain("com.example");
  add_int64_initializer(&g, "st0", {0});
  add_int64_initializer(&g, "en", {1});
  add_int64_initializer(&g, "ax", {0});
  add_node(&g, "Slice", {"a", "st0", "en", "ax", "runtime_step"}, {"sliced"});
  add_node(&g, "Slice", {"a", "st0", "en", "ax"}, {"sliced_known"});
  add_node(&g, "Unsqueeze", {"a", "runtime_axes"}, {"unsqueezed"});
  const auto values = folded_values(g, {});
  ASSERT_TRUE(values.count("max3") && values.count("min3") && values.count("max1") && values.count("clipped"));
  EXPECT_EQ(values.at("max3"), (std::vector<double>{100, 100}));
  EXPECT_EQ(values.at("min3"), (std::vector<double>{1, 1}));
  EXPECT_EQ(values.at("max1"), (std::vector<double>{8, 64}));
  EXPECT_EQ(values.at("clipped"), (std::vector<double>{10, 20}));
  EXPECT_FALSE(values.count("custom")) << "com.example's Mul may compute anything";
  EXPECT_FALSE(values.count("sliced")) << "its steps are known only at run time";
  ASSERT_TRUE(values.count("sliced_known"));
  EXPECT_EQ(values.at("sliced_known"), (std::vector<double>{8}));
  EXPECT_FALSE(values.count("unsqueezed")) << "its axes are known only at run time";
}

// A model whose every type is declared skips ONNX's inference: a declared type that contradicts the
// value an initializer or a Constant stores was priced while the tensor had the stored dims.
TEST(OnnxShapes, ADeclaredTypeThatContradictsAStoredValueIsAnError) {
  auto model = [](bool constant) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("declared");
    add_float_value(g->mutable_input(), "x", {8, 4});
    onnx::TensorProto w;
    w.set_name("w"), w.set_data_type(onnx::TensorProto::FLOAT), w.add_dims(4), w.add_dims(2);
    for (int i = 0; i < 8; ++i) w.add_float_data(1.0f);
    if (constant) {
      auto* c = add_node(g, "Constant", {}, {"w"});
      c->set_name("wc");
      auto* attr = c->add_attribute();
      attr->set_name("value"), attr->set_type(onnx::AttributeProto::TENSOR), *attr->mutable_t() = w;
    } else {
      *g->add_initializer() = w;
    }
    add_node(g, "MatMul", {"x", "w"}, {"y"});
    add_float_value(g->mutable_value_info(), "w", {4, 1000});
    add_float_value(g->mutable_output(), "y", {8, 1000});
    return m;
  };
  EXPECT_THAT([&] { infer_all_shapes(model(false)); },
              ThrowsMessage<Error>(HasSubstr("tensor 'w' is declared float[4,1000] but its initializer is float[4,2]")));
  EXPECT_THAT([&] { infer_all_shapes(model(true)); },
              ThrowsMessage<Error>(HasSubstr("tensor 'w' is declared float[4,1000] but its value of node 'wc' (Constant) is float[4,2]")));
  onnx::ModelProto agreeing = model(false);
  agreeing.mutable_graph()->mutable_value_info(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(2);
  agreeing.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(2);
  EXPECT_EQ(dims(infer_all_shapes(agreeing).at("y")), (std::vector<std::int64_t>{8, 2}));
}

}  // namespace
}  // namespace placer
