#include "placer/sim/placement.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <nlohmann/json.hpp>

#include "placer/graph/training.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using ::testing::ElementsAre;
using ::testing::AllOf;
using ::testing::HasSubstr;

Cluster cpu_and_two_gpus() {
  auto dev = [](std::string name, DeviceKind kind) {
    return Device{.name = std::move(name), .kind = kind, .model = "t", .peak_flops = 1e12, .memory_bandwidth_bytes_per_s = 1e11,
                  .memory_bytes = 1 << 30, .op_overhead_s = 1e-5};
  };
  auto link = [](std::string a) {
    return Link{.a = std::move(a), .b = "bus", .bandwidth_ab_bytes_per_s = 1e10, .bandwidth_ba_bytes_per_s = 1e10, .latency_s = 1e-5};
  };
  return Cluster::build("t", {dev("cpu:0", DeviceKind::cpu), dev("gpu:0", DeviceKind::gpu), dev("gpu:1", DeviceKind::gpu)}, {"bus"},
                        {link("cpu:0"), link("gpu:0"), link("gpu:1")});
}

// A chain through modules cells.1, cells.10, layer4.0.conv, fc (with parameters, so it trains).
Graph modular_graph() {
  GraphBuilder b("m");
  TensorId prev = b.add_tensor("x", {4, 4}, DType::f32, TensorKind::data);
  const char* ops[][2] = {{"/cells.1/Gemm", "cells.1"}, {"/cells.10/Gemm", "cells.10"},
                          {"/layer4/layer4.0/conv/Gemm", "layer4.0.conv"}, {"/fc/Gemm", "fc"}};
  int i = 0;
  for (auto& [name, module] : ops) {
    std::string weight = module;
    weight += ".weight";
    TensorId w = b.add_tensor(weight, {4, 4}, DType::f32, TensorKind::parameter);
    std::string out_name = "t";
    out_name += std::to_string(i++);
    TensorId out = b.add_tensor(out_name, {4, 4}, DType::f32, TensorKind::activation);
    OpSpec spec{.name = name, .type = "Gemm", .inputs = {prev, w}, .outputs = {out}, .module = module};
    spec.work = OpWork{128, 192, 64, OpClass::matmul};
    b.add_op(std::move(spec));
    prev = out;
  }
  b.mark_output(prev);
  return std::move(b).build();
}

std::vector<DeviceId> resolve(const std::string& json, const Graph& g) {
  return resolve_forward_placement(parse_placement_json(nlohmann::json::parse(json), "test"), g, cpu_and_two_gpus());
}

TEST(PlacementFile, DefaultCoversEverything) {
  EXPECT_THAT(resolve(R"({"default": "gpu:1"})", modular_graph()), ElementsAre(2u, 2u, 2u, 2u));
}

TEST(PlacementFile, ModulePathMatchesAtDotBoundaries) {
  // "cells.1" covers cells.1 but not cells.10.
  EXPECT_THAT(resolve(R"({"default": "gpu:0", "devices": {"cells.1": "cpu:0"}})", modular_graph()), ElementsAre(0u, 1u, 1u, 1u));
}

TEST(PlacementFile, ModuleCoversEverythingUnderIt) {
  EXPECT_THAT(resolve(R"({"default": "gpu:0", "devices": {"layer4": "gpu:1"}})", modular_graph()), ElementsAre(1u, 1u, 2u, 1u));
}

TEST(PlacementFile, LongerModuleWinsOverShorter) {
  EXPECT_THAT(resolve(R"({"default": "gpu:0", "devices": {"layer4": "gpu:1", "layer4.0": "cpu:0"}})", modular_graph()),
              ElementsAre(1u, 1u, 0u, 1u));
}

TEST(PlacementFile, ExactOpNameWinsOverModule) {
  EXPECT_THAT(resolve(R"({"default": "gpu:0", "devices": {"layer4": "gpu:1", "/layer4/layer4.0/conv/Gemm": "cpu:0"}})",
                      modular_graph()),
              ElementsAre(1u, 1u, 0u, 1u));
}

TEST(PlacementFile, KeyMatchingNothingIsAnError) {
  try {
    resolve(R"({"default": "gpu:0", "devices": {"layer5": "gpu:1"}})", modular_graph());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'layer5'"));
  }
  // The empty key, which inspect's "(top level)" row seems to offer, says how top-level ops are placed.
  EXPECT_THAT([&] { resolve(R"({"default": "gpu:0", "devices": {"": "gpu:1"}})", modular_graph()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("are placed by their op names, or by 'default'")));
}

// Without a 'default', the ops no key covers are counted and the first named with their modules
// (the first alone was an exporter's Identity of a weight in Inception-V3: a QA pass).
TEST(PlacementFile, OpsNoKeyCoversAreNamedWithTheirModules) {
  EXPECT_THAT([&] { resolve(R"({"devices": {"cells": "gpu:1"}})", modular_graph()); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("2 forward ops are covered by no key and there is no 'default'"),
                                                    HasSubstr("'/layer4/layer4.0/conv/Gemm' (module layer4.0.conv), '/fc/Gemm' (module fc)"))));
  EXPECT_THAT([&] { resolve(R"({"devices": {"cells": "gpu:1", "layer4": "gpu:0"}})", modular_graph()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("1 forward op is covered by no key")));
}

// Keys place forward ops: a key naming a module that holds only backward or update ops placed
// nothing, silently (found by a review).
TEST(PlacementFile, AKeyNamingAModuleWithoutForwardOpsIsAnError) {
  GraphBuilder b("opt");
  const TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), y = b.add_tensor("y", {4}, DType::f32, TensorKind::activation);
  const TensorId w = b.add_tensor("w", {4}, DType::f32, TensorKind::parameter);
  b.add_op({.name = "f", .type = "Mul", .inputs = {x, w}, .outputs = {y}, .module = "net.layer"});
  b.add_op({.name = "update/w", .type = "SGDUpdate", .inputs = {w}, .outputs = {}, .module = "optimizer.sgd", .role = OpRole::update,
            .param = w});
  b.set_num_forward_ops(1);
  const Graph g = std::move(b).build();
  EXPECT_THAT(resolve(R"({"default": "gpu:0", "devices": {"net": "gpu:1"}})", g), ElementsAre(2u));
  EXPECT_THAT([&] { resolve(R"({"default": "gpu:0", "devices": {"optimizer": "gpu:1"}})", g); },
              ::testing::ThrowsMessage<Error>(HasSubstr("key 'optimizer' names a module that holds no forward op")));
}

// A key naming a backward or update op, or a parameter, says what it names and what to key
// instead (it read "matches no forward op and no module", as if misspelt: a QA pass).
TEST(PlacementFile, AKeyNamingABackwardOpOrAParameterSaysWhatToKey) {
  const Graph step = derive_training_step(modular_graph(), Optimizer::sgd);
  std::string grad;
  for (OpId o = step.num_forward_ops(); o < step.num_ops(); ++o)
    if (step.forward_op(o) != kNoId && step.op_name(step.forward_op(o)) == "/fc/Gemm") grad = step.op_name(o);
  ASSERT_FALSE(grad.empty());
  EXPECT_THAT([&] { resolve(R"({"default": "gpu:0", "devices": {")" + grad + R"(": "gpu:1"}})", step); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("names a backward, loss or update op"),
                                                    HasSubstr("('/fc/Gemm'): key that op or its module"))));
  EXPECT_THAT([&] { resolve(R"({"default": "gpu:0", "devices": {"fc.weight": "gpu:1"}})", step); },
              ::testing::ThrowsMessage<Error>(HasSubstr("names a tensor, not an op: a parameter or input lives where its first reader runs ('/fc/Gemm')")));
  EXPECT_THAT([&] { resolve(R"({"default": "gpu:0", "devices": {"t1": "gpu:1"}})", step); },
              ::testing::ThrowsMessage<Error>(HasSubstr("key 't1' names a tensor, not an op (keys name forward ops and modules)")));
}

TEST(PlacementFile, MissingDeviceIsAnErrorNamingIt) {
  try {
    resolve(R"({"default": "gpu:7"})", modular_graph());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'gpu:7'"));
    EXPECT_THAT(e.what(), HasSubstr("gpu:1"));  // lists what the cluster has
  }
}

TEST(PlacementFile, UncoveredOpWithoutDefaultIsAnError) {
  EXPECT_THROW(resolve(R"({"devices": {"fc": "gpu:1"}})", modular_graph()), Error);
}

TEST(PlacementFile, MalformedFilesAreErrors) {
  EXPECT_THROW(parse_placement_json(nlohmann::json::parse(R"([1, 2])"), "t"), Error);
  EXPECT_THROW(parse_placement_json(nlohmann::json::parse(R"({"default": 3})"), "t"), Error);
  EXPECT_THAT([] { parse_placement_json(nlohmann::json::parse(R"({"default": ""})"), "t"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'default' must be a device name")));
  EXPECT_THROW(parse_placement_json(nlohmann::json::parse(R"({"devices": {"fc": 1}})"), "t"), Error);
  EXPECT_THROW(parse_placement_json(nlohmann::json::parse(R"({"defualt": "gpu:0"})"), "t"), Error);
  // An integer field takes integers only, as in every placer JSON file (1.0 was read as 1).
  EXPECT_THAT([] { parse_placement_json(nlohmann::json::parse(R"({"version": 1.0, "default": "gpu:0"})"), "t"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("field 'version' must be an integer, got 1.0")));
  EXPECT_THROW(load_placement_file("/nonexistent/placement.json"), Error);
  // Another placer file is named by its format, not by its first unknown field (a cluster file's
  // "description" was; found by a review).
  EXPECT_THAT([] { parse_placement_json(nlohmann::json::parse(R"({"description": "x", "format": "placer-cluster"})"), "t"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("field 'format' is \"placer-cluster\", expected \"placer-placement\"")));
}

// The "meta" of a file (how place -o made it) reads back as written; other meta (free text) is
// ignored, and none is written when there is none.
TEST(PlacementFile, MetaReadsBackAndMeansNothingForThePlacement) {
  PlacementSpec spec{.default_device = "gpu:0", .devices = {{"fc1", "gpu:1"}}, .meta = {{"mode", "inference"}, {"step_time_s", "0.5"}}};
  const PlacementSpec back = parse_placement_json(placement_to_json(spec), "t");
  EXPECT_EQ(back.meta, spec.meta);
  EXPECT_EQ(back.meta_value("mode"), "inference");
  EXPECT_EQ(back.meta_value("nothing"), "");
  EXPECT_EQ(parse_placement_json(nlohmann::json::parse(R"({"default": "gpu:0", "meta": "by hand", "comment": 3})"), "t").meta.size(), 0u);
  EXPECT_FALSE(placement_to_json(PlacementSpec{.default_device = "gpu:0"}).contains("meta"));
  EXPECT_EQ(parse_placement_json(nlohmann::json::parse(R"({"default": "gpu:0", "meta": {"n": 3}})"), "t").meta_value("n"), "3");
}

// A key that is an op's name and a module's path too places the op alone: the exact name wins, and
// describe_placement's keys read back to what it described.
TEST(PlacementFile, AKeyNamingAnOpAndAModulePlacesTheOp) {
  GraphBuilder b("clash");
  TensorId x = b.add_tensor("x", {4}, DType::f32, TensorKind::data), t0 = b.add_tensor("t0", {4}, DType::f32, TensorKind::activation);
  TensorId t1 = b.add_tensor("t1", {4}, DType::f32, TensorKind::activation);
  TensorId t2 = b.add_tensor("t2", {4}, DType::f32, TensorKind::activation), t3 = b.add_tensor("t3", {4}, DType::f32, TensorKind::activation);
  b.add_op({.name = "blk", .type = "Relu", .inputs = {x}, .outputs = {t0}, .module = "blk"});
  b.add_op({.name = "blk/other", .type = "Relu", .inputs = {t0}, .outputs = {t1}, .module = "blk"});
  b.add_op({.name = "r1", .type = "Relu", .inputs = {t1}, .outputs = {t2}});
  b.add_op({.name = "r2", .type = "Relu", .inputs = {t2}, .outputs = {t3}});
  b.mark_output(t3);
  const Graph g = std::move(b).build();
  EXPECT_THAT(resolve(R"({"default": "gpu:0", "devices": {"blk": "gpu:1"}})", g), ElementsAre(2u, 1u, 1u, 1u));
  const Cluster c = cpu_and_two_gpus();
  // {2, 2, 1, 1}: the whole module on gpu:1, which a module key "blk" would not say.
  for (std::vector<DeviceId> fwd : {std::vector<DeviceId>{2, 1, 1, 1}, {1, 2, 2, 2}, {2, 2, 2, 2}, {2, 2, 1, 1}})
    EXPECT_EQ(resolve_forward_placement(parse_placement_json(placement_to_json(describe_placement(g, c, fwd)), "t"), g, c), fwd);
}

TEST(PlacementFile, AKeyGivenTwiceIsAnError) {
  const std::string path = test::temp_path("twice.json");
  std::ofstream(path) << R"({"default": "gpu:0", "devices": {"fc": "gpu:1", "fc": "cpu:0"}})";
  EXPECT_THAT([&] { load_placement_file(path); }, ::testing::ThrowsMessage<Error>(HasSubstr("key 'fc' appears twice")));
  std::remove(path.c_str());
}

TEST(ExpandPlacement, GradientsFollowTheirOpAndUpdatesTheirParameter) {
  Graph step = derive_training_step(modular_graph(), Optimizer::sgd);
  std::vector<DeviceId> fwd{0, 1, 2, 1};
  std::vector<DeviceId> all = expand_placement(step, fwd);
  ASSERT_EQ(all.size(), step.num_ops());
  for (OpId o = 0; o < step.num_ops(); ++o) {
    if (step.forward_op(o) != kNoId) {
      EXPECT_EQ(all[o], fwd[step.forward_op(o)]) << step.op_name(o);
    }
    if (step.updated_param(o) != kNoId) {
      EXPECT_EQ(all[o], fwd[step.param_home(step.updated_param(o))]) << step.op_name(o);
    }
  }
  EXPECT_EQ(all[step.find_op("update/cells.10.weight")], 1u);
  EXPECT_EQ(all[step.find_op("/layer4/layer4.0/conv/Gemm/grad")], 2u);
}

TEST(DescribePlacement, ResolvesBackToTheSamePlacement) {
  Graph g = modular_graph();
  Cluster c = cpu_and_two_gpus();
  for (std::vector<DeviceId> fwd : {std::vector<DeviceId>{1, 1, 1, 1}, {0, 1, 2, 1}, {2, 2, 0, 0}, {1, 0, 0, 1}}) {
    PlacementSpec spec = describe_placement(g, c, fwd);
    EXPECT_EQ(resolve_forward_placement(spec, g, c), fwd);
    // And through the file format.
    EXPECT_EQ(resolve_forward_placement(parse_placement_json(placement_to_json(spec), "t"), g, c), fwd);
  }
}

// The fewest keys: a default that is not the most used device where that saves keys (a QA pass:
// five ops of a module on gpu:1 and three outside it on gpu:0 were written as default gpu:1 and
// three op keys, where default gpu:0 and the module's key say the same), and a module keyed to
// most of its ops' device with its exceptions keyed one by one. Random placements read back.
TEST(DescribePlacement, WritesTheFewestKeys) {
  GraphBuilder b("few");
  TensorId prev = b.add_tensor("x", {4}, DType::f32, TensorKind::data);
  auto add = [&](const std::string& name, const std::string& module) {
    const TensorId out = b.add_tensor(name + ".out", {4}, DType::f32, TensorKind::activation);
    b.add_op({.name = name, .type = "Relu", .inputs = {prev}, .outputs = {out}, .module = module});
    prev = out;
  };
  for (int i = 0; i < 3; ++i) add("top" + std::to_string(i), "");
  for (int i = 0; i < 5; ++i) add("m" + std::to_string(i), "m");
  for (int i = 0; i < 4; ++i) add("n" + std::to_string(i), "n.inner");
  b.mark_output(prev);
  const Graph g = std::move(b).build();
  const Cluster c = cpu_and_two_gpus();  // cpu:0, gpu:0, gpu:1
  std::vector<DeviceId> fwd{1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1, 1};
  PlacementSpec spec = describe_placement(g, c, fwd);
  EXPECT_EQ(spec.default_device, "gpu:0");
  EXPECT_THAT(spec.devices, ElementsAre(std::pair<std::string, std::string>{"m", "gpu:1"}));
  fwd = {1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 2, 2};
  spec = describe_placement(g, c, fwd);
  EXPECT_EQ(spec.default_device, "gpu:0");
  EXPECT_THAT(spec.devices, ElementsAre(std::pair<std::string, std::string>{"n", "gpu:1"}, std::pair<std::string, std::string>{"n1", "cpu:0"}));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    for (DeviceId& d : fwd) d = static_cast<DeviceId>(rng() % 3);
    spec = describe_placement(g, c, fwd);
    EXPECT_EQ(resolve_forward_placement(parse_placement_json(placement_to_json(spec), "t"), g, c), fwd);
    // Never more than a default and one key per op elsewhere (the best such default's).
    std::size_t most = 0;
    for (DeviceId d = 0; d < 3; ++d) most = std::max(most, static_cast<std::size_t>(std::count(fwd.begin(), fwd.end(), d)));
    EXPECT_LE(spec.devices.size(), 12u - most);
  }
}

TEST(DescribePlacement, UsesModulesWhereTheyAreWhole) {
  PlacementSpec spec = describe_placement(modular_graph(), cpu_and_two_gpus(), std::vector<DeviceId>{1, 1, 2, 1});
  EXPECT_EQ(spec.default_device, "gpu:0");
  ASSERT_EQ(spec.devices.size(), 1u);
  EXPECT_EQ(spec.devices[0].first, "layer4");
  EXPECT_EQ(spec.devices[0].second, "gpu:1");
}

}  // namespace
}  // namespace placer
