// Inlining: every call of a model-local function becomes its function's body
// (inline_local_functions), every decided If the branch it takes (inline_decided_ifs), and a model
// written so imports as the same ops, placed by the call's (or the If's) name.
#include "placer/io/onnx_inline.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "placer/io/onnx.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// "F" + number, without GCC 12's false -Wrestrict warning on `numbered("F", k)`.
std::string numbered(const char* prefix, int k) {
  std::string name = prefix;
  name += std::to_string(k);
  return name;
}

onnx::NodeProto* add_node(google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "", const std::string& domain = "") {
  auto* n = nodes->Add();
  n->set_op_type(op), n->set_name(name), n->set_domain(domain);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// If(condition) on x named `name`, giving `out`: then Neg(x), else Sigmoid(x).
onnx::NodeProto* add_neg_or_sigmoid(onnx::GraphProto* g, const std::string& condition, const std::string& out, const std::string& name) {
  auto* branch = add_node(g->mutable_node(), "If", {condition}, {out}, name);
  for (const char* b : {"then_branch", "else_branch"}) {
    auto* a = branch->add_attribute();
    a->set_name(b), a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(b);
    add_node(a->mutable_g()->mutable_node(), b[0] == 't' ? "Neg" : "Sigmoid", {"x"}, {"o"});
    a->mutable_g()->add_output()->set_name("o");
  }
  return branch;
}

void float_value(onnx::ValueInfoProto* vi, const std::string& name, std::vector<std::int64_t> dims) {
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  vi->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar when `dims` is empty
  for (auto d : dims) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
}

// local::Block(X, W) = Relu(MatMul(X, W)) with a LeakyRelu whose alpha is the call's attribute;
// called twice from the main graph, by "/encoder/block.0" and "/encoder/block.1".
onnx::ModelProto block_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  for (const char* domain : {"", "local"}) {
    auto* o = m.add_opset_import();
    o->set_domain(domain), o->set_version(domain[0] ? 1 : 17);
  }
  onnx::FunctionProto* f = m.add_functions();
  f->set_name("Block"), f->set_domain("local");
  f->add_input("X"), f->add_input("W"), f->add_output("Y"), f->add_attribute("alpha");
  auto* o = f->add_opset_import();
  o->set_domain(""), o->set_version(17);
  add_node(f->mutable_node(), "MatMul", {"X", "W"}, {"h"}, "MatMul");
  auto* leaky = add_node(f->mutable_node(), "LeakyRelu", {"h"}, {"Y"}, "LeakyRelu");
  auto* alpha = leaky->add_attribute();
  alpha->set_name("alpha"), alpha->set_type(onnx::AttributeProto::FLOAT), alpha->set_ref_attr_name("alpha");

  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("blocks");
  float_value(g->add_input(), "x", {8, 16});
  for (const char* w : {"w0", "w1"}) {
    auto* t = g->add_initializer();
    t->set_name(w), t->set_data_type(onnx::TensorProto::FLOAT), t->add_dims(16), t->add_dims(16);
    for (int i = 0; i < 256; ++i) t->add_float_data(0.0f);
  }
  auto* b0 = add_node(g->mutable_node(), "Block", {"x", "w0"}, {"y0"}, "/encoder/block.0", "local");
  auto* a = b0->add_attribute();
  a->set_name("alpha"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(0.2f);
  add_node(g->mutable_node(), "Block", {"y0", "w1"}, {"y1"}, "/encoder/block.1", "local");  // alpha not given
  float_value(g->add_output(), "y1", {8, 16});
  return m;
}

std::vector<std::string> node_names(const onnx::ModelProto& m) {
  std::vector<std::string> out;
  for (const auto& n : m.graph().node()) out.push_back(n.name());
  return out;
}

TEST(OnnxFunctions, EveryCallBecomesItsBodyNamedUnderTheCall) {
  onnx::ModelProto m = block_model();
  EXPECT_EQ(inline_local_functions(m), 2u);
  EXPECT_EQ(m.functions_size(), 0);
  EXPECT_THAT(node_names(m), ElementsAre("/encoder/block.0/MatMul", "/encoder/block.0/LeakyRelu", "/encoder/block.1/MatMul",
                                         "/encoder/block.1/LeakyRelu"));
  const auto& n = m.graph().node();
  // Inputs and outputs are the call's; the body's own values are named under the call.
  EXPECT_THAT(n[0].input(), ElementsAre("x", "w0"));
  EXPECT_THAT(n[0].output(), ElementsAre("/encoder/block.0/h"));
  EXPECT_THAT(n[1].output(), ElementsAre("y0"));
  EXPECT_THAT(n[2].input(), ElementsAre("y0", "w1"));
  EXPECT_THAT(n[3].output(), ElementsAre("y1"));
  // alpha: the call's value, or left out (LeakyRelu's own default) when the call gives none.
  ASSERT_EQ(n[1].attribute_size(), 1);
  EXPECT_EQ(n[1].attribute(0).name(), "alpha");
  EXPECT_FLOAT_EQ(n[1].attribute(0).f(), 0.2f);
  EXPECT_TRUE(n[1].attribute(0).ref_attr_name().empty());
  EXPECT_EQ(n[3].attribute_size(), 0);
}

TEST(OnnxFunctions, AFunctionsAttributeDefaultAppliesWhenTheCallGivesNone) {
  // IR 9's FunctionProto.attribute_proto (field 11), which libonnx 1.12's schema does not have.
  onnx::ModelProto m = block_model();
  onnx::AttributeProto fallback;
  fallback.set_name("alpha"), fallback.set_type(onnx::AttributeProto::FLOAT), fallback.set_f(0.5f);
  m.mutable_functions(0)->mutable_unknown_fields()->AddLengthDelimited(11, fallback.SerializeAsString());
  inline_local_functions(m);
  ASSERT_EQ(m.graph().node(1).attribute_size(), 1);
  EXPECT_FLOAT_EQ(m.graph().node(1).attribute(0).f(), 0.2f);  // given by the call
  ASSERT_EQ(m.graph().node(3).attribute_size(), 1);
  EXPECT_FLOAT_EQ(m.graph().node(3).attribute(0).f(), 0.5f);  // the function's default
}

TEST(OnnxFunctions, CallsInsideBodiesNestAndOptionalInputsStayAbsent) {
  onnx::ModelProto m = block_model();
  // local::Outer(X, W, B) = Block(X, W) + Dropout with an optional input left out, called once
  // without its optional B; the unnamed inner call is named by its output.
  onnx::FunctionProto* outer = m.add_functions();
  outer->set_name("Outer"), outer->set_domain("local");
  outer->add_input("X"), outer->add_input("W"), outer->add_input("B"), outer->add_output("Z");
  *outer->mutable_opset_import() = m.opset_import();
  add_node(outer->mutable_node(), "Block", {"X", "W"}, {"t"}, "", "local");
  add_node(outer->mutable_node(), "Dropout", {"t", "", "B"}, {"Z"}, "drop");
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_node();
  add_node(g->mutable_node(), "Outer", {"x", "w0"}, {"y1"}, "/net/outer", "local");
  EXPECT_EQ(inline_local_functions(m), 2u);
  EXPECT_THAT(node_names(m), ElementsAre("/net/outer/t/MatMul", "/net/outer/t/LeakyRelu", "/net/outer/drop"));
  EXPECT_THAT(m.graph().node(1).output(), ElementsAre("/net/outer/t"));
  EXPECT_THAT(m.graph().node(2).input(), ElementsAre("/net/outer/t", "", ""));  // B not given by the call
}

TEST(OnnxFunctions, CallsThatDoNotFitTheirFunctionAreErrors) {
  onnx::ModelProto more = block_model();
  more.mutable_graph()->mutable_node(0)->add_input("x");
  EXPECT_THAT([&] { inline_local_functions(more); },
              ThrowsMessage<Error>(HasSubstr("a call of model-local function 'local::Block' has 3 input(s) and 1 output(s), the function 2 and 1")));

  onnx::ModelProto opset = block_model();
  opset.mutable_functions(0)->mutable_opset_import(0)->set_version(13);
  EXPECT_THAT([&] { inline_local_functions(opset); },
              ThrowsMessage<Error>(HasSubstr("'local::Block' imports opset 13 of domain 'ai.onnx', the model opset 17")));

  onnx::ModelProto twice = block_model();
  *twice.add_functions() = twice.functions(0);
  EXPECT_THAT([&] { inline_local_functions(twice); }, ThrowsMessage<Error>(HasSubstr("two model-local functions are named 'local::Block'")));
}

// A chain of functions each calling the next: found by fuzzing, 10,000 levels overflowed the stack.
TEST(OnnxFunctions, FunctionsNestedTooDeepOrInliningTooLargeAreErrors) {
  auto chain = [](int levels, int calls_per_level) {
    onnx::ModelProto m = block_model();
    for (int k = 1; k <= levels; ++k) {
      onnx::FunctionProto* f = m.add_functions();
      f->set_name(numbered("F", k)), f->set_domain("local");
      f->add_input("X"), f->add_input("W"), f->add_output("Y");
      *f->mutable_opset_import() = m.opset_import();
      std::string x = "X";
      for (int c = 0; c < calls_per_level; ++c) {
        std::string y = c + 1 == calls_per_level ? std::string("Y") : numbered("t", c);
        add_node(f->mutable_node(), k == 1 ? "Block" : numbered("F", k - 1), {x, "W"}, {y}, "", "local");
        x = y;
      }
    }
    m.mutable_graph()->mutable_node(1)->set_op_type(numbered("F", levels));
    return m;
  };
  onnx::ModelProto ok = chain(60, 1);
  EXPECT_EQ(inline_local_functions(ok), 1u + 61u);
  onnx::ModelProto deep = chain(10000, 1);
  EXPECT_THAT([&] { inline_local_functions(deep); }, ThrowsMessage<Error>(HasSubstr("model-local functions are nested more than 64 deep")));
  // 40 levels each calling the next twice: 2^40 nodes from a small file.
  onnx::ModelProto wide = chain(40, 2);
  EXPECT_THAT([&] { inline_local_functions(wide); },
              ThrowsMessage<Error>(HasSubstr("inlining the model-local functions would give more than 1048576 nodes")));
}

// Calls inside subgraphs count too (found by review): an If branch of F calling F crashed, and a
// main-graph If whose branch calls a doubling chain hung expanding 2^30 nodes.
TEST(OnnxFunctions, CallsInsideSubgraphsAreCheckedForRecursionAndSize) {
  auto branch_calling = [](onnx::NodeProto* node, const std::string& callee) {
    auto* a = node->add_attribute();
    a->set_name("then_branch"), a->set_type(onnx::AttributeProto::GRAPH);
    add_node(a->mutable_g()->mutable_node(), callee, {"X", "W"}, {"b"}, "", "local");
    a->mutable_g()->add_output()->set_name("b");
  };
  onnx::ModelProto recursive = block_model();
  onnx::FunctionProto* f = recursive.mutable_functions(0);
  f->clear_node();
  add_node(f->mutable_node(), "Constant", {}, {"c"});
  branch_calling(add_node(f->mutable_node(), "If", {"c"}, {"Y"}), "Block");
  EXPECT_THAT([&] { inline_local_functions(recursive); }, ThrowsMessage<Error>(HasSubstr("which leads back to it")));

  onnx::ModelProto wide = block_model();
  for (int k = 1; k <= 30; ++k) {
    onnx::FunctionProto* level = wide.add_functions();
    level->set_name(numbered("F", k)), level->set_domain("local");
    level->add_input("X"), level->add_input("W"), level->add_output("Y");
    *level->mutable_opset_import() = wide.opset_import();
    const std::string callee = k == 1 ? "Block" : numbered("F", k - 1);
    add_node(level->mutable_node(), callee, {"X", "W"}, {"t"}, "", "local");
    add_node(level->mutable_node(), callee, {"t", "W"}, {"Y"}, "", "local");
  }
  onnx::GraphProto* g = wide.mutable_graph();
  add_node(g->mutable_node(), "Constant", {}, {"c"}, "/c");
  branch_calling(add_node(g->mutable_node(), "If", {"c"}, {"z"}, "/if"), "F30");
  EXPECT_THAT([&] { inline_local_functions(wide); },
              ThrowsMessage<Error>(HasSubstr("inlining the model-local functions would give more than 1048576 nodes")));
}

TEST(OnnxFunctions, OutputsThatAreInputsOrLeftOutStayWired) {
  // local::Pass(X) = (X, Relu(X), Relu(X) again as a third output).
  onnx::ModelProto m = block_model();
  onnx::FunctionProto* pass = m.add_functions();
  pass->set_name("Pass"), pass->set_domain("local");
  pass->add_input("X"), pass->add_output("X"), pass->add_output("R"), pass->add_output("R");
  *pass->mutable_opset_import() = m.opset_import();
  add_node(pass->mutable_node(), "Relu", {"X"}, {"R"}, "relu");
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_node();
  add_node(g->mutable_node(), "Pass", {"x"}, {"same", "r", "r2"}, "/p", "local");
  add_node(g->mutable_node(), "Pass", {"x"}, {"", "q"}, "/q", "local");  // first output, and the third, left out
  inline_local_functions(m);
  const auto& n = m.graph().node();
  ASSERT_EQ(n.size(), 4);
  EXPECT_THAT(n[0].input(), ElementsAre("x"));  // the body reads the call's input, not its output
  EXPECT_THAT(n[0].output(), ElementsAre("r"));
  EXPECT_EQ(n[1].op_type(), "Identity");
  EXPECT_THAT(n[1].input(), ElementsAre("x"));
  EXPECT_THAT(n[1].output(), ElementsAre("same"));
  EXPECT_EQ(n[2].op_type(), "Identity");
  EXPECT_THAT(n[2].input(), ElementsAre("r"));
  EXPECT_THAT(n[2].output(), ElementsAre("r2"));
  EXPECT_THAT(n[3].output(), ElementsAre("q"));
}

TEST(OnnxFunctions, AttributeReferencesInsideSubgraphsAndNewDomainsAreResolved) {
  onnx::ModelProto m = block_model();
  // The body's LeakyRelu sits in an If branch, its alpha still a reference; and the function
  // imports a domain the model does not.
  onnx::FunctionProto* f = m.mutable_functions(0);
  onnx::NodeProto leaky = f->node(1);
  f->mutable_node()->RemoveLast();
  add_node(f->mutable_node(), "Constant", {}, {"c"}, "cond");
  auto* branch = add_node(f->mutable_node(), "If", {"c"}, {"Y"}, "if");
  auto* a = branch->add_attribute();
  a->set_name("then_branch"), a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g()->add_node() = leaky;
  a->mutable_g()->mutable_node(0)->set_output(0, "l");
  a->mutable_g()->add_output()->set_name("l");
  auto* extra = f->add_opset_import();
  extra->set_domain("com.example"), extra->set_version(3);
  inline_local_functions(m);
  const onnx::NodeProto& inner = m.graph().node(2).attribute(0).g().node(0);
  ASSERT_EQ(inner.attribute_size(), 1);
  EXPECT_FLOAT_EQ(inner.attribute(0).f(), 0.2f);
  EXPECT_TRUE(inner.attribute(0).ref_attr_name().empty());
  bool imported = false;
  for (const auto& o : m.opset_import()) imported = imported || (o.domain() == "com.example" && o.version() == 3);
  EXPECT_TRUE(imported);
}

TEST(OnnxFunctions, InlinedNamesAreUniqueAndNeverTakeANameTheModelReads) {
  onnx::ModelProto m = block_model();
  auto& nodes = *m.mutable_graph()->mutable_node();
  nodes[1].set_name("/encoder/block.0");  // both calls named alike
  // A node of the model already has the name a body node would get; and the model reads
  // "/encoder/block.0/h", which nothing gives (an invalid model: it must stay invalid).
  add_node(&nodes, "Relu", {"/encoder/block.0/h"}, {"r"}, "/encoder/block.0/MatMul");
  inline_local_functions(m);
  EXPECT_THAT(node_names(m), ElementsAre("/encoder/block.0/MatMul#2", "/encoder/block.0/LeakyRelu", "/encoder/block.0/MatMul#3",
                                         "/encoder/block.0/LeakyRelu#2", "/encoder/block.0/MatMul"));
  EXPECT_THAT(m.graph().node(0).output(), ElementsAre("/encoder/block.0/h#2"));
  EXPECT_THAT(m.graph().node(2).output(), ElementsAre("/encoder/block.0/h#3"));
}

TEST(OnnxFunctions, SubgraphsInBodiesAndCallsInSubgraphsAreRewritten) {
  onnx::ModelProto m = block_model();
  // local::Pick(X, W) = If(c, then: Neg(h), else: Block(X, W)) with h = Relu(X) in the body.
  onnx::FunctionProto* pick = m.add_functions();
  pick->set_name("Pick"), pick->set_domain("local");
  pick->add_input("X"), pick->add_input("W"), pick->add_output("Y");
  *pick->mutable_opset_import() = m.opset_import();
  add_node(pick->mutable_node(), "Relu", {"X"}, {"h"}, "relu");
  add_node(pick->mutable_node(), "Constant", {}, {"c"}, "cond");
  auto* branch = add_node(pick->mutable_node(), "If", {"c"}, {"Y"}, "if");
  auto* then_branch = branch->add_attribute();
  then_branch->set_name("then_branch"), then_branch->set_type(onnx::AttributeProto::GRAPH);
  add_node(then_branch->mutable_g()->mutable_node(), "Neg", {"h"}, {"n"}, "neg");
  then_branch->mutable_g()->add_output()->set_name("n");
  auto* else_branch = branch->add_attribute();
  else_branch->set_name("else_branch"), else_branch->set_type(onnx::AttributeProto::GRAPH);
  add_node(else_branch->mutable_g()->mutable_node(), "Block", {"X", "W"}, {"b"}, "blk", "local");
  else_branch->mutable_g()->add_output()->set_name("b");
  m.mutable_graph()->mutable_node(1)->set_op_type("Pick");
  inline_local_functions(m);
  const onnx::NodeProto& if_node = m.graph().node(4);
  ASSERT_EQ(if_node.op_type(), "If");
  EXPECT_THAT(if_node.input(), ElementsAre("/encoder/block.1/c"));
  const onnx::GraphProto& then_graph = if_node.attribute(0).g();
  EXPECT_THAT(then_graph.node(0).input(), ElementsAre("/encoder/block.1/h"));  // the body's value, renamed
  EXPECT_EQ(then_graph.output(0).name(), "/encoder/block.1/n");
  const onnx::GraphProto& else_graph = if_node.attribute(1).g();
  ASSERT_EQ(else_graph.node_size(), 2);  // the call inside the branch, inlined
  EXPECT_EQ(else_graph.node(0).name(), "/encoder/block.1/blk/MatMul");
  EXPECT_THAT(else_graph.node(0).input(), ElementsAre("y0", "w1"));
}

// If(c) on x: then = Neg(x) with an initializer added, else = x itself (taken from outside the
// branch); an If inside the then branch reads the branch's value.
onnx::ModelProto if_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("ifs");
  float_value(g->add_input(), "x", {4});
  add_node(g->mutable_node(), "Constant", {}, {"c"}, "/cond");
  auto* branch = add_node(g->mutable_node(), "If", {"c"}, {"y"}, "/block/If");
  auto* then_branch = branch->add_attribute();
  then_branch->set_name("then_branch"), then_branch->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* then_graph = then_branch->mutable_g();
  auto* one = then_graph->add_initializer();
  one->set_name("one"), one->set_data_type(onnx::TensorProto::FLOAT), one->add_float_data(1.0f);
  add_node(then_graph->mutable_node(), "Neg", {"x"}, {"n"});
  auto* inner = add_node(then_graph->mutable_node(), "If", {"c"}, {"t"}, "inner");
  auto* inner_then = inner->add_attribute();
  inner_then->set_name("then_branch"), inner_then->set_type(onnx::AttributeProto::GRAPH);
  add_node(inner_then->mutable_g()->mutable_node(), "Add", {"n", "one"}, {"a"});
  inner_then->mutable_g()->add_output()->set_name("a");
  then_graph->add_output()->set_name("t");
  auto* else_branch = branch->add_attribute();
  else_branch->set_name("else_branch"), else_branch->set_type(onnx::AttributeProto::GRAPH);
  else_branch->mutable_g()->add_output()->set_name("x");
  add_node(g->mutable_node(), "Relu", {"y"}, {"z"}, "/Relu");
  float_value(g->add_output(), "z", {4});
  return m;
}

TEST(OnnxIfs, ADecidedIfBecomesTheBranchItTakes) {
  onnx::ModelProto taken = if_model();
  EXPECT_EQ(inline_decided_ifs(taken, {{"c", true}}), 1u);
  EXPECT_THAT(node_names(taken), ElementsAre("/cond", "/block/If/Neg", "/block/If/inner", "/Relu"));
  const auto& n = taken.graph().node();
  EXPECT_THAT(n[1].output(), ElementsAre("/block/If/n"));  // the branch's own value, under the If
  EXPECT_THAT(n[2].output(), ElementsAre("y"));               // the branch's output is the If's
  // The inner If reads the branch's values under their new names; the initializer joined the graph.
  EXPECT_THAT(n[2].attribute(0).g().node(0).input(), ElementsAre("/block/If/n", "/block/If/one"));
  ASSERT_EQ(taken.graph().initializer_size(), 1);
  EXPECT_EQ(taken.graph().initializer(0).name(), "/block/If/one");
  // The inner If is decided in turn.
  EXPECT_EQ(inline_decided_ifs(taken, {{"c", true}}), 1u);
  // ... and the condition, which nothing reads any more, goes with it.
  EXPECT_THAT(node_names(taken), ElementsAre("/block/If/Neg", "/block/If/inner/Add", "/Relu"));
  EXPECT_THAT(taken.graph().node(1).output(), ElementsAre("y"));

  // The else branch gives x, from outside it: an Identity.
  onnx::ModelProto other = if_model();
  EXPECT_EQ(inline_decided_ifs(other, {{"c", false}}), 1u);
  EXPECT_THAT(node_names(other), ElementsAre("/block/If/Identity", "/Relu"));
  EXPECT_THAT(other.graph().node(0).input(), ElementsAre("x"));
  EXPECT_THAT(other.graph().node(0).output(), ElementsAre("y"));
  // Undecided: left as it is.
  onnx::ModelProto left = if_model();
  EXPECT_EQ(inline_decided_ifs(left, {{"d", true}}), 0u);
  EXPECT_EQ(left.graph().node(1).op_type(), "If");
}

// What onnxscript's aten functions hold (PyTorch's dynamo exporter before 2.5): a branch on
// IsScalar(X), decided once X's shape is known, here only once --dim gives the batch.
TEST(OnnxIfs, AnIfOnAShapeIsDecidedAtImport) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("is_scalar");
  auto* x = g->add_input();
  float_value(x, "x", {});
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("N");
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(16);
  add_node(g->mutable_node(), "Shape", {"x"}, {"s"}, "/act/Shape");
  add_node(g->mutable_node(), "Size", {"s"}, {"r"}, "/act/Size");
  auto* zero = add_node(g->mutable_node(), "Constant", {}, {"zero"}, "/act/Constant");
  auto* value = zero->add_attribute();
  value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::INT64), value->mutable_t()->add_int64_data(0);
  add_node(g->mutable_node(), "Equal", {"r", "zero"}, {"scalar"}, "/act/Equal");
  add_neg_or_sigmoid(g, "scalar", "y", "/act/If");
  auto* y = g->add_output();
  y->set_name("y"), y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("N");
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(16);
  const std::string path = test::temp_path("if_on_shape.onnx");
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  OnnxImportOptions options;
  options.dim_values["N"] = 8;
  Graph graph = load_onnx(path, options);
  std::vector<std::string> types;
  for (OpId o = 0; o < graph.num_ops(); ++o) types.push_back(graph.op_type(o));
  // x is no scalar: the else branch; the condition's nodes, read by nothing else, go with the If.
  ASSERT_THAT(types, ElementsAre("Sigmoid"));
  EXPECT_EQ(graph.op_name(0), "/act/If/Sigmoid");
  EXPECT_EQ(graph.module_name(graph.op_module(0)), "act.If");
}

// A model whose If reads `condition` (built by `build` from the data input x [4]): then Neg, else
// Sigmoid; the op types of the imported graph.
std::vector<std::string> imported_types(const std::function<void(onnx::GraphProto*)>& build, const std::string& name,
                                        const std::function<void(onnx::NodeProto*)>& edit_if = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("cond");
  float_value(g->add_input(), "x", {4});
  build(g);
  auto* branch = add_neg_or_sigmoid(g, "condition", "y", "/If");
  if (edit_if) edit_if(branch);
  float_value(g->add_output(), "y", {4});
  const std::string path = test::temp_path(name + ".onnx");
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  Graph graph = load_onnx(path, {});
  std::vector<std::string> types;
  for (OpId o = 0; o < graph.num_ops(); ++o) types.push_back(graph.op_type(o));
  return types;
}

// A Constant of `type` holding `values` (one element each), named `name`.
void constant(onnx::GraphProto* g, const std::string& name, int type, std::vector<double> values) {
  auto* value = add_node(g->mutable_node(), "Constant", {}, {name}, "/" + name)->add_attribute();
  value->set_name("value"), value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(type);
  for (double v : values) {
    if (type == onnx::TensorProto::FLOAT) value->mutable_t()->add_float_data(static_cast<float>(v));
    else if (type == onnx::TensorProto::INT64) value->mutable_t()->add_int64_data(static_cast<std::int64_t>(v));
    else value->mutable_t()->add_int32_data(static_cast<std::int32_t>(v));
  }
}

std::string last_of(const std::vector<std::string>& v) { return v.empty() ? std::string() : v.back(); }

// Found by fuzzing: conditions folded in doubles without ONNX's types took the wrong branch.
TEST(OnnxIfs, ConditionsAreDecidedWithTheirTypesArithmetic) {
  const int f32 = onnx::TensorProto::FLOAT, i32 = onnx::TensorProto::INT32, u8 = onnx::TensorProto::UINT8;
  auto cast = [](onnx::GraphProto* g, const std::string& in, const std::string& out, int to) {
    auto* a = add_node(g->mutable_node(), "Cast", {in}, {out}, "/" + out)->add_attribute();
    a->set_name("to"), a->set_type(onnx::AttributeProto::INT), a->set_i(to);
  };
  const std::string then_taken = "Neg", else_taken = "Sigmoid";  // the last op
  // Cast 0.5 to bool: true (any non-zero), not truncated to 0.
  EXPECT_EQ(last_of(imported_types([&](onnx::GraphProto* g) { constant(g, "h", f32, {0.5}), cast(g, "h", "condition", onnx::TensorProto::BOOL); },
                           "if_cast_bool")),
            then_taken);
  // condition = compare(op(a, b), c), every constant of `type`: the branch it takes.
  auto branch_of = [&](const char* name, int type, const char* op, double a, double b, const char* compare, double c) {
    return last_of(imported_types([&](onnx::GraphProto* g) {
      constant(g, "a", type, {a}), constant(g, "b", type, {b}), constant(g, "c", type, {c});
      add_node(g->mutable_node(), op, {"a", "b"}, {"s"}, "/op");
      add_node(g->mutable_node(), compare, {"s", "c"}, {"condition"}, "/compare");
    }, name));
  };
  // Mod(-7, 3) is 2 (the divisor's sign), not -1.
  EXPECT_EQ(branch_of("if_mod", onnx::TensorProto::INT64, "Mod", -7, 3, "Equal", 2), then_taken);
  // 0.1 + 0.2 == 0.3 in float32 (not in double).
  EXPECT_EQ(branch_of("if_float", f32, "Add", 0.1, 0.2, "Equal", 0.3), then_taken);
  // int32 2147483647 + 1 wraps to -2147483648; uint8 250 + 10 wraps to 4.
  EXPECT_EQ(branch_of("if_int32", i32, "Add", 2147483647, 1, "Less", 0), then_taken);
  EXPECT_EQ(branch_of("if_uint8", u8, "Add", 250, 10, "Less", 5), then_taken);
  // int64 values beyond 2^53 are not exact in a double: undecided, an If placer cannot price.
  EXPECT_THAT([&] {
    imported_types([&](onnx::GraphProto* g) {
      constant(g, "a", onnx::TensorProto::INT64, {0}), constant(g, "b", onnx::TensorProto::INT64, {0});
      for (const char* name : {"/a", "/b"})
        for (auto& n : *g->mutable_node())
          if (n.name() == name) n.mutable_attribute(0)->mutable_t()->set_int64_data(0, name[1] == 'a' ? (std::int64_t{1} << 53) + 1 : std::int64_t{1} << 53);
      add_node(g->mutable_node(), "Equal", {"a", "b"}, {"condition"}, "/eq");
    }, "if_int64_big");
  }, ThrowsMessage<Error>(HasSubstr("an If whose condition is only known when the model runs")));
  EXPECT_EQ(last_of(imported_types([&](onnx::GraphProto* g) { constant(g, "condition", onnx::TensorProto::BOOL, {0}); }, "if_false")), else_taken);
}

TEST(OnnxIfs, MalformedIfsAreErrorsEvenInTheBranchNotTaken) {
  auto with_true = [](onnx::GraphProto* g) { constant(g, "condition", onnx::TensorProto::BOOL, {1}); };
  // An op ONNX does not know in the branch not taken: the checker reads both branches first.
  EXPECT_THAT([&] {
    imported_types(with_true, "if_untaken_unknown", [](onnx::NodeProto* n) { n->mutable_attribute(1)->mutable_g()->mutable_node(0)->set_op_type("NoSuchOp"); });
  }, ThrowsMessage<Error>(HasSubstr("fails the ONNX checker")));
  // A branch giving another number of outputs than the If has.
  EXPECT_THAT([&] {
    imported_types(with_true, "if_outputs", [](onnx::NodeProto* n) { n->mutable_attribute(0)->mutable_g()->add_output()->set_name("x"); });
  }, ThrowsMessage<Error>(HasSubstr("If '/If' has 1 output(s), its then_branch 2")));
}

// IsScalar(x) on a scalar: Shape gives an empty shape ([0]), which the import takes (folded).
TEST(OnnxIfs, IsScalarOfAScalarIsDecided) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("scalar");
  float_value(g->add_input(), "x", {});
  add_node(g->mutable_node(), "Shape", {"x"}, {"s"}, "/Shape");
  add_node(g->mutable_node(), "Size", {"s"}, {"r"}, "/Size");
  constant(g, "zero", onnx::TensorProto::INT64, {0});
  add_node(g->mutable_node(), "Equal", {"r", "zero"}, {"scalar"}, "/Equal");
  add_neg_or_sigmoid(g, "scalar", "y", "/If");
  float_value(g->add_output(), "y", {});
  const std::string path = test::temp_path("if_scalar.onnx");
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  Graph graph = load_onnx(path, {});
  EXPECT_EQ(graph.op_type(graph.num_ops() - 1), "Neg");
}

TEST(OnnxFunctions, AModelWrittenWithFunctionsImportsTheirOpsUnderTheCallsModules) {
  const std::string path = test::temp_path("functions.onnx");
  {
    std::ofstream out(path, std::ios::binary);
    block_model().SerializeToOstream(&out);
  }
  Graph g = load_onnx(path, {});
  ASSERT_EQ(g.num_ops(), 4u);
  std::vector<std::string> modules;
  for (OpId o = 0; o < g.num_ops(); ++o) modules.push_back(g.module_name(g.op_module(o)));
  EXPECT_THAT(modules, ElementsAre("encoder.block.0", "encoder.block.0", "encoder.block.1", "encoder.block.1"));
  EXPECT_EQ(g.op_type(0), "MatMul");
  EXPECT_DOUBLE_EQ(g.op_work(0).flops, 2.0 * 8 * 16 * 16);
}

}  // namespace
}  // namespace placer
