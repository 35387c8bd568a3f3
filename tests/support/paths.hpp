// Where tests find the shared model graphs, the bundled examples and the built CLI.
// PLACER_MODELS in the environment overrides the shared models' folder.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace placer::test {

inline std::string shared_models_dir() {
  const char* env = std::getenv("PLACER_MODELS");
  return env ? env : PLACER_SHARED_MODELS;
}
inline bool have_shared_models() { return std::filesystem::exists(shared_models_dir() + "/resnet50.onnx"); }
inline std::string shared_model(const std::string& name) { return shared_models_dir() + "/" + name + ".onnx"; }
inline std::string example(const std::string& file) { return std::string(PLACER_EXAMPLES) + "/" + file; }
inline std::string placer_binary() { return PLACER_BINARY; }

}  // namespace placer::test

// Tests that read ../shared/models skip, loudly, on a checkout without them.
#define REQUIRE_SHARED_MODELS()                                                                    \
  do {                                                                                             \
    if (!::placer::test::have_shared_models())                                                     \
      GTEST_SKIP() << "shared models not found in " << ::placer::test::shared_models_dir();        \
  } while (0)
