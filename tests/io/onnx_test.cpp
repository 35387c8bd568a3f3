#include "placer/io/onnx.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
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

}  // namespace
}  // namespace placer
