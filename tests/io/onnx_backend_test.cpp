// ONNX's own backend test models (Debian's libonnx-testdata: one small model per operator and
// case, with the outputs it must give), imported as `placer inspect --mode inference` does. Every
// model either imports with the output shapes ONNX's test data gives, or is refused with
// placer::Error on one line (sequences, strings, empty tensors, data-dependent shapes, control
// flow placer does not unroll, ops without a cost rule). Nothing else: no other exception, no
// crash, no shape that differs. A floor on how many import keeps refusals from growing unseen.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "placer/io/model.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

constexpr const char* kTestData = "/usr/share/libonnx-testdata/data";

std::vector<std::filesystem::path> backend_models() {
  std::vector<std::filesystem::path> models;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kTestData, ec))
    if (entry.path().filename() == "model.onnx") models.push_back(entry.path());
  std::sort(models.begin(), models.end());
  return models;
}

// The dims of the tensor stored in `path` (a test case's expected output); nullopt when unreadable.
std::optional<std::vector<std::int64_t>> stored_dims(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::TensorProto t;
  if (!in || !t.ParseFromIstream(&in)) return std::nullopt;
  return std::vector<std::int64_t>(t.dims().begin(), t.dims().end());
}

TEST(OnnxBackendModels, ImportWithTheirOutputShapesOrAreRefusedOnOneLine) {
  const auto models = backend_models();
  if (models.empty()) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/install-deps.sh installs it)";
  std::size_t imported = 0, shapes_checked = 0;
  for (const auto& model : models) {
    SCOPED_TRACE(model.string());
    ModelOptions options;
    options.mode = Mode::inference;
    try {
      const Graph g = load_model(model.string(), options);
      ++imported;
      onnx::ModelProto proto;
      std::ifstream in(model, std::ios::binary);
      ASSERT_TRUE(proto.ParseFromIstream(&in));
      for (int i = 0; i < proto.graph().output_size(); ++i) {
        const auto expected = stored_dims(model.parent_path() / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb"));
        if (!expected) continue;
        const TensorId t = g.find_tensor(proto.graph().output(i).name());
        ASSERT_NE(t, kNoId) << "output " << proto.graph().output(i).name();
        const auto shape = g.tensor_shape(t);
        EXPECT_EQ(std::vector<std::int64_t>(shape.begin(), shape.end()), *expected) << "output " << proto.graph().output(i).name();
        ++shapes_checked;
      }
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_FALSE(what.empty());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a placer::Error: " << e.what();
    }
  }
  // libonnx-testdata 1.12 (Debian 12): 1,072 models, 960 import (2026-11-29); 988 since empty
  // set-up values and opset 6's PRelu import (2026-11-30).
  EXPECT_GE(imported, 980u) << "of " << models.size();
  EXPECT_GE(shapes_checked, 1000u);
  std::cout << imported << " of " << models.size() << " models import; " << shapes_checked << " output shapes checked\n";
}

}  // namespace
}  // namespace placer
