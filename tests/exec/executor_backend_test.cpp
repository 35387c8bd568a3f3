// The executor against ONNX's reference outputs: every backend test model of Debian's
// libonnx-testdata (tests/io/onnx_backend_test.cpp imports them all) that imports and whose ops the
// executor runs is run on the CPU with its test inputs and its stored weights, and its outputs are
// compared with the expected ones. A model the executor refuses is refused before running, by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/exec/exec.hpp"
#include "placer/io/model.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

constexpr const char* kTestData = "/usr/share/libonnx-testdata/data";

// The values stored in an ONNX tensor file, as doubles; nullopt for types read here as none.
std::optional<std::vector<double>> stored_values(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::TensorProto t;
  if (!in || !t.ParseFromIstream(&in)) return std::nullopt;
  std::vector<double> out;
  using TP = onnx::TensorProto;
  const std::string& raw = t.raw_data();
  auto from_raw = [&](auto sample) {
    using T = decltype(sample);
    for (std::size_t i = 0; i + sizeof(T) <= raw.size(); i += sizeof(T)) {
      T v;
      std::memcpy(&v, raw.data() + i, sizeof(T));
      out.push_back(static_cast<double>(v));
    }
  };
  switch (t.data_type()) {
    case TP::FLOAT:
      if (!raw.empty()) from_raw(float{});
      else for (float v : t.float_data()) out.push_back(v);
      break;
    case TP::DOUBLE:
      if (!raw.empty()) from_raw(double{});
      else for (double v : t.double_data()) out.push_back(v);
      break;
    case TP::INT64:
      if (!raw.empty()) from_raw(std::int64_t{});
      else for (auto v : t.int64_data()) out.push_back(static_cast<double>(v));
      break;
    case TP::INT32:
      if (!raw.empty()) from_raw(std::int32_t{});
      else for (auto v : t.int32_data()) out.push_back(v);
      break;
    case TP::BOOL:
    case TP::UINT8:
      if (!raw.empty()) from_raw(std::uint8_t{});
      else for (auto v : t.int32_data()) out.push_back(v);
      break;
    default:
      return std::nullopt;
  }
  return out;
}

Cluster one_cpu() {
  return Cluster::build("cpu", {Device{"cpu:0", DeviceKind::cpu, "host", 1e11, 1e10, 8ull << 30, 1e-6, 1}}, {}, {});
}

TEST(ExecutorBackendModels, GiveOnnxsReferenceOutputs) {
  std::vector<std::filesystem::path> models;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kTestData, ec))
    if (entry.path().filename() == "model.onnx") models.push_back(entry.path().parent_path());
  if (models.empty()) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/install-deps.sh installs it)";
  std::sort(models.begin(), models.end());
  std::size_t ran = 0, matched = 0;
  std::vector<std::string> differ;
  for (const auto& dir : models) {
    const std::string name = dir.parent_path().filename().string() + "/" + dir.filename().string();
    // Random draws and the ops whose reference is a random draw give other values by design.
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (lower.find("random") != std::string::npos || lower.find("bernoulli") != std::string::npos ||
        lower.find("dropout") != std::string::npos)
      continue;
    const std::string path = (dir / "model.onnx").string();
    onnx::ModelProto proto;
    {
      std::ifstream in(path, std::ios::binary);
      if (!proto.ParseFromIstream(&in)) continue;
    }
    std::set<std::string> initializers;
    for (const auto& init : proto.graph().initializer()) initializers.insert(init.name());
    ModelOptions options;
    options.mode = Mode::inference;
    for (const auto& in : proto.graph().input())
      if (!initializers.count(in.name())) options.onnx.data_inputs.push_back(in.name());
    std::optional<exec::Executor> ex;
    std::optional<Graph> g;
    try {
      g.emplace(load_forward_graph(path, options));
      ex.emplace(path, options, one_cpu(), std::vector<DeviceId>(g->num_ops(), 0), exec::ExecOptions{.mode = Mode::inference});
    } catch (const Error&) {
      continue;  // refused by the import or by the executor, before running (both tested elsewhere)
    }
    SCOPED_TRACE(name);
    bool fed = true;
    for (std::size_t i = 0; i < options.onnx.data_inputs.size(); ++i) {
      const auto file = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
      // An empty input that only steers an op (a ReduceSum's axes given as []) is left out by the
      // import, as if not given: nothing to feed.
      if (g->find_tensor(options.onnx.data_inputs[i]) == kNoId) {
        const auto values = stored_values(file);
        if (values && values->empty()) continue;
      }
      try {
        ex->set_input(options.onnx.data_inputs[i], file.string());
      } catch (const Error&) {
        fed = false;  // an input folded into the graph (a constant-kind input) or of a type not read
      }
    }
    if (!fed) continue;
    // Weights stored in the model (the executor draws parameters at random; placer reads no weights).
    for (const auto& init : proto.graph().initializer()) {
      const std::string file = test::temp_path("initializer.pb");
      {
        std::ofstream out(file, std::ios::binary);
        init.SerializeToOstream(&out);
      }
      try {
        ex->set_input(init.name(), file);
      } catch (const Error&) {
        // a constant, folded into the graph with its value
      }
    }
    try {
      ex->step();
    } catch (const Error& e) {
      ADD_FAILURE() << "imported and prepared, then failed running: " << e.what();
      continue;
    }
    ++ran;
    const auto outputs = ex->output_values();
    bool same = true;
    std::string where;  // the first value that differs
    for (std::size_t k = 0; k < outputs.size(); ++k) {
      const auto expected = stored_values(dir / "test_data_set_0" / ("output_" + std::to_string(k) + ".pb"));
      if (!expected) continue;
      if (expected->size() != outputs[k].size()) {
        if (same) where = "output " + std::to_string(k) + " holds " + std::to_string(outputs[k].size()) + " values, not " + std::to_string(expected->size());
        same = false;
        continue;
      }
      for (std::size_t i = 0; i < expected->size() && same; ++i) {
        const double want = (*expected)[i], got = outputs[k][i];
        // Outputs are read as float32: a double past its range is infinite there (pytorch-operator's
        // test data holds uninitialised doubles such as 2.4e198).
        if (std::fabs(want) > 3.4e38) {
          if (!std::isinf(got) && std::fabs(got) <= 3.4e38) same = false;
        } else if (std::isnan(want) ? !std::isnan(got) : std::fabs(got - want) > 1e-3 + 1e-3 * std::fabs(want)) {
          same = false;
        }
        if (!same) where = "output " + std::to_string(k) + " value " + std::to_string(i) + ": " + std::to_string(got) + ", not " + std::to_string(want);
      }
    }
    if (same) ++matched;
    else differ.push_back(name + " (" + where + ")");
  }
  std::cout << ran << " models ran, " << matched << " gave ONNX's outputs\n";
  for (const auto& name : differ) std::cout << "differs: " << name << "\n";
  EXPECT_TRUE(differ.empty());
  // libonnx-testdata 1.12 (Debian 12): 856 of its 1,072 models ran (2026-11-29); 888 since empty
  // set-up values, LayerNormalization's Mean and InvStdDev, MaxPool's Indices and opset 6's PRelu
  // (2026-11-30).
  EXPECT_GE(ran, 880u);
}

}  // namespace
}  // namespace placer
