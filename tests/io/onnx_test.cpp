#include "placer/io/onnx.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include "placer/graph/training.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;

std::unordered_map<std::string, bool> modules(std::initializer_list<const char*> names) {
  std::unordered_map<std::string, bool> m;
  for (auto n : names) m[n] = true;
  return m;
}

TEST(ModulePath, SegmentRepeatingThePathIsNotDoubled) {
  auto known = modules({"layer3", "layer3.0", "layer3.0.conv1"});
  ModulePath p = parse_module_path("/layer3/layer3.0/conv1/Conv", known);
  EXPECT_EQ(p.module, "layer3.0.conv1");
  EXPECT_EQ(p.call, 0u);
}

TEST(ModulePath, ModuleListItem) {
  EXPECT_EQ(parse_module_path("/blocks.5/Softmax", modules({"blocks.5"})).module, "blocks.5");
}

TEST(ModulePath, CallSuffixWhenTheUnsuffixedModuleExists) {
  ModulePath p = parse_module_path("/cells.1_10/Gemm", modules({"cells.1", "cells.1_10"}));
  EXPECT_EQ(p.module, "cells.1");
  EXPECT_EQ(p.call, 10u);
}

TEST(ModulePath, NameEndingInNumberIsNotACall) {
  ModulePath p = parse_module_path("/cell_stem_1/conv_1x1/Conv", modules({"cell_stem_1", "cell_stem_1.conv_1x1"}));
  EXPECT_EQ(p.module, "cell_stem_1.conv_1x1");
  EXPECT_EQ(p.call, 0u);
}

TEST(ModulePath, TopLevelFunctionalOpHasNoModule) {
  EXPECT_EQ(parse_module_path("/Relu", {}).module, "");
  EXPECT_EQ(parse_module_path("Identity_68", {}).module, "");
  EXPECT_EQ(literal_module_path("/features/features.0/Conv"), "features.0");
}

// Names with empty dot-separated parts ("enc./blk", "/../Relu") gave module paths such as
// "enc..blk" and "..", which the graph JSON saved from the model could not load (found by a
// review): empty parts are dropped.
TEST(ModulePath, EmptyPartsAreDropped) {
  EXPECT_EQ(literal_module_path("enc./blk/MatMul"), "enc.blk");
  EXPECT_EQ(literal_module_path("/../Relu"), "");
  EXPECT_EQ(literal_module_path("/a..b/.c/Relu"), "a.b.c");
  EXPECT_EQ(parse_module_path("enc./blk/MatMul", modules({"enc", "enc.blk"})).module, "enc.blk");
  EXPECT_EQ(parse_module_path("/../Relu", {}).module, "");
  const ModulePath call = parse_module_path("/.cells.1_10./Gemm", modules({"cells.1", "cells.1_10"}));
  EXPECT_EQ(call.module, "cells.1");
  EXPECT_EQ(call.call, 10u);
}

struct Expected {
  const char* model;
  std::size_t nodes;
  std::uint64_t trainable;  // from the ONNX file's input shapes (tests/README: independent arithmetic)
  std::vector<std::string> data;
};

class SharedModel : public ::testing::TestWithParam<Expected> {};

TEST_P(SharedModel, ImportsWithOpsParametersAndDataInputs) {
  REQUIRE_SHARED_MODELS();
  const Expected& e = GetParam();
  Graph g = load_onnx(test::shared_model(e.model), {});
  EXPECT_EQ(g.num_ops(), e.nodes);
  GraphTotals totals = graph_totals(g);
  EXPECT_EQ(totals.trainable_params, e.trainable);
  std::vector<std::string> data;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor_kind(t) == TensorKind::data) data.push_back(g.tensor_name(t));
  EXPECT_EQ(data, e.data);
  // Every op outside the alias class does work.
  double flops = 0;
  for (OpId o = 0; o < g.num_ops(); ++o) flops += g.op_work(o).flops;
  EXPECT_GT(flops, 0.0);
  Graph step = derive_training_step(g, Optimizer::sgd);
  EXPECT_GT(step.num_ops(), g.num_ops());
  EXPECT_GT(graph_totals(step).flops, 1.5 * flops);
}

INSTANTIATE_TEST_SUITE_P(
    AllSharedModels, SharedModel,
    ::testing::Values(Expected{"cifarnet", 12, 1068298, {"input.1"}}, Expected{"vgg16", 48, 138357544, {"input.1"}},
                      Expected{"resnet50", 375, 25557032, {"input.1"}},
                      Expected{"inception_v3", 663, 23834568, {"input.1"}},
                      Expected{"rnnlm", 666, 108111632, {"input"}},
                      Expected{"nmt", 2475, 138215680, {"input.1", "input"}},
                      Expected{"nmt4", 4163, 171802880, {"input.1", "input"}},
                      Expected{"bert_base", 857, 108595200, {"input.1"}},
                      Expected{"gpt2", 895, 162447360, {"input.1"}},
                      Expected{"nasnet_large", 4049, 88753150, {"input.1"}}),
    [](const auto& info) { return std::string(info.param.model); });

TEST(OnnxImport, ResNet50ForwardFlopsMatchThePublishedFigure) {
  REQUIRE_SHARED_MODELS();
  Graph g = load_onnx(test::shared_model("resnet50"), {});
  double flops = graph_totals(g).flops;
  // 4.1 GMACs per 224x224 image: about 262 GFLOPs for a batch of 32.
  EXPECT_GT(flops, 255e9);
  EXPECT_LT(flops, 270e9);
}

TEST(OnnxImport, BatchNormRunningStatisticsAreBuffers) {
  REQUIRE_SHARED_MODELS();
  Graph g = load_onnx(test::shared_model("resnet50"), {});
  EXPECT_EQ(graph_totals(g).buffer_bytes, 53120u * 4u);
}

TEST(OnnxImport, IdentityAliasesBecomeParametersOfTheirConsumersModule) {
  REQUIRE_SHARED_MODELS();
  Graph g = load_onnx(test::shared_model("resnet50"), {});
  std::size_t aliases = 0;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    if (g.op_type(o) != "Identity") continue;
    ++aliases;
    EXPECT_TRUE(g.op_inputs(o).empty());
    EXPECT_NE(g.module_name(g.op_module(o)), "") << g.op_name(o);
    EXPECT_EQ(g.op_work(o).flops, 0.0);
  }
  EXPECT_EQ(aliases, 200u);
}

TEST(OnnxImport, KeepsModulePathsAndCallIndices) {
  REQUIRE_SHARED_MODELS();
  Graph g = load_onnx(test::shared_model("rnnlm"), {});
  OpId o = g.find_op("/cells.1_10/Gemm");
  ASSERT_NE(o, kNoId);
  EXPECT_EQ(g.module_name(g.op_module(o)), "cells.1");
  EXPECT_EQ(g.op_call(o), 10u);
  Graph n = load_onnx(test::shared_model("nasnet_large"), {});
  EXPECT_TRUE(n.find_module("cell_stem_1").has_value());
  EXPECT_FALSE(n.find_module("cell_stem").has_value());
}

TEST(OnnxImport, DataInputsCanBeOverridden) {
  REQUIRE_SHARED_MODELS();
  OnnxImportOptions options;
  options.data_inputs = {"input.1"};
  Graph g = load_onnx(test::shared_model("nmt"), options);
  EXPECT_EQ(g.tensor_kind(g.find_tensor("input.1")), TensorKind::data);
  EXPECT_NE(g.tensor_kind(g.find_tensor("input")), TensorKind::data);
  options.data_inputs = {"no_such_input"};
  EXPECT_THROW(load_onnx(test::shared_model("nmt"), options), Error);
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  std::string path = test::temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void expect_error(const std::string& path, const std::string& fragment) {
  try {
    (void)load_onnx(path, {});
    FAIL() << path << " was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fragment));
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
  }
}

TEST(OnnxImportBadInput, MissingFile) { expect_error("/nonexistent/model.onnx", "cannot open"); }

TEST(OnnxImportBadInput, EmptyFile) { expect_error(write_temp("empty.onnx", ""), "empty"); }

TEST(OnnxImportBadInput, TruncatedFile) {
  std::ifstream in(test::example("inception_v3.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  expect_error(write_temp("truncated.onnx", bytes.substr(0, 20000)), "not a valid ONNX model");
}

TEST(OnnxImportBadInput, RandomBytes) {
  std::mt19937 rng(7);
  std::string bytes(50000, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  expect_error(write_temp("random.onnx", bytes), "model file");
}

// ONNX's checker says "Field 'shape' of 'type' is required but missing" and not of what (a
// fuzzing review): the output is named.
TEST(OnnxImportBadInput, AnOutputDeclaredWithoutAShapeIsNamed) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("main");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Relu"), n->add_input("x"), n->add_output("y");
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  expect_error(write_temp("unshaped.onnx", model.SerializeAsString()), "output 'y' of graph 'main' is declared without a shape");
}

// A sequence or optional graph input was "shape unknown after ONNX shape inference" (a fuzzing
// review): it is no tensor at all.
TEST(OnnxImportBadInput, SequenceAndOptionalValuesAreNamedAsSuch) {
  for (const bool sequence : {true, false}) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(15);
    onnx::GraphProto* g = model.mutable_graph();
    g->set_name("main");
    auto* s = g->add_input();
    s->set_name("s");
    onnx::TypeProto* element = sequence ? s->mutable_type()->mutable_sequence_type()->mutable_elem_type()
                                        : s->mutable_type()->mutable_optional_type()->mutable_elem_type();
    element->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    element->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(sequence ? "SequenceLength" : "OptionalHasElement"), n->add_input("s"), n->add_output("y");
    auto* y = g->add_output();
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(sequence ? onnx::TensorProto::INT64 : onnx::TensorProto::BOOL);
    y->mutable_type()->mutable_tensor_type()->mutable_shape();
    expect_error(write_temp("sequence.onnx", model.SerializeAsString()),
                 std::string("tensor 's': ") + (sequence ? "a sequence" : "an optional") + " value, not a tensor");
  }
}

// Ifs nested within each other's branches past protobuf's limit of 100 messages were reported as
// "truncated or corrupt?" (found by a sweep): the file is whole, and the message says what it is.
TEST(OnnxImportBadInput, SubgraphsNestedPastProtobufsLimitAreNamed) {
  auto nested = [](int depth) {
    onnx::ModelProto model;
    model.set_ir_version(8);
    model.add_opset_import()->set_version(13);
    onnx::GraphProto* g = model.mutable_graph();
    g->set_name("main");
    for (int i = 0; i < depth; ++i) {
      onnx::NodeProto* n = g->add_node();
      n->set_op_type("If"), n->add_input("c"), n->add_output("y");
      onnx::AttributeProto* a = n->add_attribute();
      a->set_name("then_branch"), a->set_type(onnx::AttributeProto::GRAPH);
      g = a->mutable_g();
      g->set_name("branch" + std::to_string(i));
    }
    std::string bytes;
    EXPECT_TRUE(model.SerializeToString(&bytes));
    return bytes;
  };
  // 20 Ifs: about 60 levels of messages, read (and refused for what they are: no data, no else).
  try {
    (void)load_onnx(write_temp("nested.onnx", nested(20)), {});
    ADD_FAILURE() << "an If without inputs was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("protobuf")));
  }
  expect_error(write_temp("nested.onnx", nested(150)), "nests messages deeper than protobuf's limit of 100 levels");
}

// ---- Shape arithmetic on bad constants (found by fuzzing the constants of exported models) --------
// placer folds the constant shape arithmetic of exported models (Shape, Gather, Concat, Reshape, ...)
// before ONNX's shape inference. Constants that make no sense (an axis out of range, a bad
// permutation, a -1 twice, counts that overflow) must leave the value unknown — the import then
// fails with a clear error or goes on without it — never read out of bounds.

struct ShapeModel {
  onnx::ModelProto m;
  ShapeModel() {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("shape-arithmetic");
    auto* x = g->add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : {2, 3}) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    auto* y = g->add_output();
    y->set_name("y");
    y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = y->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->add_dim(), shape->add_dim();  // two dims of unknown size: inferred
  }
  onnx::NodeProto* node(const std::string& type, std::vector<std::string> in, const std::string& out) {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(type);
    n->set_name("/" + out);
    for (auto& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  }
  // An int64 constant of these dims (one dim of values.size() when none are given).
  void constant(const std::string& out, std::vector<std::int64_t> values, std::vector<std::int64_t> dims = {-1}) {
    auto* a = node("Constant", {}, out)->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    if (dims == std::vector<std::int64_t>{-1}) dims = {static_cast<std::int64_t>(values.size())};
    for (auto d : dims) a->mutable_t()->add_dims(d);
    for (auto v : values) a->mutable_t()->add_int64_data(v);
  }
  static void ints(onnx::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  // y = Reshape(x, shape): the computed shape decides y's shape.
  std::string save(const std::string& file) {
    node("Reshape", {"x", "shape"}, "y");
    auto path = test::temp_path(file);
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
};

// Imports the model: either it loads, or it fails with placer's one-line error. A crash fails the
// whole test binary.
void expect_graceful(const std::string& path) {
  try {
    Graph g = load_onnx(path, {});
    SUCCEED() << "imported: " << g.num_ops() << " ops";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("checker"))) << "the model must reach the shape arithmetic";
  }
}

TEST(OnnxShapeArithmetic, ValidArithmeticIsFolded) {
  ShapeModel t;
  t.constant("three", {3});
  t.constant("two", {2}, {});
  t.constant("axes", {0});
  t.node("Unsqueeze", {"two", "axes"}, "two_1d");
  ShapeModel::integer(t.node("Concat", {"three", "two_1d"}, "shape"), "axis", 0);
  Graph g = load_onnx(t.save("valid_shape.onnx"), {});
  auto shape = g.tensor_shape(g.find_tensor("y"));
  EXPECT_EQ(std::vector<std::int64_t>(shape.begin(), shape.end()), (std::vector<std::int64_t>{3, 2}));
}

TEST(OnnxShapeArithmetic, FoldsAsManyLayersOfShapeArithmeticAsTheModelHas) {
  // Each layer reshapes by a shape computed from the previous layer's output (Shape -> Gather ->
  // Unsqueeze -> Concat -> Reshape, as exporters write dynamic axes): its shape is known only after
  // the layer before it is folded. 12 layers, like BERT-base's (the import stopped after 8).
  ShapeModel t;
  t.constant("zero", {0}, {});
  t.constant("axes", {0});
  t.constant("rest", {-1});
  std::string h = "x";
  for (int layer = 1; layer <= 12; ++layer) {
    const std::string l = std::to_string(layer);
    t.node("Shape", {h}, "s" + l);
    ShapeModel::integer(t.node("Gather", {"s" + l, "zero"}, "g" + l), "axis", 0);
    t.node("Unsqueeze", {"g" + l, "axes"}, "u" + l);
    ShapeModel::integer(t.node("Concat", {"u" + l, "rest"}, layer == 12 ? "shape" : "c" + l), "axis", 0);
    if (layer < 12) t.node("Reshape", {h, "c" + l}, "h" + l), h = "h" + l;
  }
  Graph g = load_onnx(t.save("twelve_layers.onnx"), {});
  auto shape = g.tensor_shape(g.find_tensor("y"));
  EXPECT_EQ(std::vector<std::int64_t>(shape.begin(), shape.end()), (std::vector<std::int64_t>{2, 3}));
}

TEST(OnnxShapeArithmetic, BadConstantsLeaveValuesUnknownWithoutCrashing) {
  std::vector<std::pair<std::string, std::function<void(ShapeModel&)>>> cases = {
      {"unsqueeze axis out of range",
       [](ShapeModel& t) { t.constant("c", {3, 2}), t.constant("axes", {7}), t.node("Unsqueeze", {"c", "axes"}, "shape"); }},
      {"unsqueeze repeated axis",
       [](ShapeModel& t) { t.constant("c", {6}, {}), t.constant("axes", {0, 0}), t.node("Unsqueeze", {"c", "axes"}, "shape"); }},
      {"squeeze of a dim that is not 1",
       [](ShapeModel& t) { t.constant("c", {3, 2}), t.constant("axes", {0}), t.node("Squeeze", {"c", "axes"}, "shape"); }},
      {"transpose with a repeated axis",
       [](ShapeModel& t) {
         t.constant("c", {3, 2}, {1, 2});
         ShapeModel::ints(t.node("Transpose", {"c"}, "t"), "perm", {0, 0});
         t.constant("flat", {-1}), t.node("Reshape", {"t", "flat"}, "shape");
       }},
      {"gather axis out of range",
       [](ShapeModel& t) {
         t.constant("c", {3, 2}), t.constant("i", {0, 1});
         ShapeModel::integer(t.node("Gather", {"c", "i"}, "shape"), "axis", 3);
       }},
      {"concat axis out of range",
       [](ShapeModel& t) {
         t.constant("a", {3}), t.constant("b", {2});
         ShapeModel::integer(t.node("Concat", {"a", "b"}, "shape"), "axis", 5);
       }},
      {"concat of different ranks",
       [](ShapeModel& t) {
         t.constant("a", {3}), t.constant("b", {2, 1}, {1, 2});
         ShapeModel::integer(t.node("Concat", {"a", "b"}, "shape"), "axis", 0);
       }},
      {"slice with more ends than starts",
       [](ShapeModel& t) {
         t.constant("c", {3, 2, 1}), t.constant("s", {0}), t.constant("e", {2, 3});
         t.node("Slice", {"c", "s", "e"}, "shape");
       }},
      {"slice of one axis twice",
       [](ShapeModel& t) {
         t.constant("c", {3, 2, 1}), t.constant("s", {0, 0}), t.constant("e", {2, 2}), t.constant("ax", {0, 0});
         t.node("Slice", {"c", "s", "e", "ax"}, "shape");
       }},
      {"reshape with two -1",
       [](ShapeModel& t) { t.constant("c", {3, 2, 1, 1}), t.constant("to", {-1, -1}), t.node("Reshape", {"c", "to"}, "shape"); }},
      {"reshape to a huge shape",
       [](ShapeModel& t) {
         t.constant("c", {3, 2}), t.constant("to", {std::int64_t{1} << 40, std::int64_t{1} << 40});
         t.node("Reshape", {"c", "to"}, "shape");
       }},
      {"constant of a negative shape",
       [](ShapeModel& t) { t.constant("dims", {-5}), t.node("ConstantOfShape", {"dims"}, "shape"); }},
      {"range of 10^18 elements",
       [](ShapeModel& t) {
         t.constant("start", {0}, {}), t.constant("limit", {1000000000000000000}, {}), t.constant("delta", {1}, {});
         t.node("Range", {"start", "limit", "delta"}, "shape");
       }},
      {"broadcast of an empty tensor",
       [](ShapeModel& t) { t.constant("empty", {}, {0}), t.constant("one", {6}), t.node("Add", {"empty", "one"}, "shape"); }},
  };
  for (auto& [what, build] : cases) {
    SCOPED_TRACE(what);
    ShapeModel t;
    build(t);
    expect_graceful(t.save("bad_shape.onnx"));
  }
}

// The campaign that found the cases above, kept small: random values written into the integer
// constants of an exported transformer (its shape arithmetic), without the file's inferred shapes
// so that the import folds them, 40 models, fixed seed.
TEST(OnnxShapeArithmetic, MutatedConstantsOfAnExportedModelNeverCrash) {
  REQUIRE_SHARED_MODELS();
  onnx::ModelProto base;
  {
    std::ifstream in(test::shared_model("bert_base"), std::ios::binary);
    ASSERT_TRUE(base.ParseFromIstream(&in));
  }
  std::vector<int> constants;
  for (int i = 0; i < base.graph().node_size(); ++i) {
    const auto& n = base.graph().node(i);
    if (n.op_type() == "Constant" && n.attribute_size() > 0 && n.attribute(0).t().data_type() == onnx::TensorProto::INT64)
      constants.push_back(i);
  }
  ASSERT_GT(constants.size(), 100u);
  const std::int64_t weird[] = {0, -1, -2, 1, 2, 3, 7, 2147483647, -2147483648, std::int64_t{1} << 62, -(std::int64_t{1} << 62), 1000000};
  std::mt19937 rng(2026);
  for (int round = 0; round < 40; ++round) {
    onnx::ModelProto m = base;
    m.mutable_graph()->clear_value_info();  // as many exports come: shapes to infer, arithmetic to fold
    for (int k = 0; k < 1 + static_cast<int>(rng() % 2); ++k) {
      auto* t = m.mutable_graph()->mutable_node(constants[rng() % constants.size()])->mutable_attribute(0)->mutable_t();
      const std::int64_t value = weird[rng() % std::size(weird)];
      if (t->has_raw_data()) {
        std::string raw = t->raw_data();
        if (raw.size() >= sizeof value) std::memcpy(raw.data() + (rng() % (raw.size() / sizeof value)) * sizeof value, &value, sizeof value);
        t->set_raw_data(raw);
      } else if (t->int64_data_size() > 0) {
        t->set_int64_data(static_cast<int>(rng() % static_cast<unsigned>(t->int64_data_size())), value);
      }
    }
    const std::string path = test::temp_path("mutated.onnx");
    {
      std::ofstream out(path, std::ios::binary);
      ASSERT_TRUE(m.SerializeToOstream(&out));
    }
    SCOPED_TRACE("round " + std::to_string(round));
    expect_graceful(path);
  }
}

}  // namespace
}  // namespace placer
