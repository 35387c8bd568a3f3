// Where tests find the shared model graphs, the bundled examples and the built CLI.
// PLACER_MODELS in the environment overrides the shared models' folder.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace placer::test {

inline std::string shared_models_dir() {
  const char* env = std::getenv("PLACER_MODELS");
  return env ? env : PLACER_SHARED_MODELS;
}
inline bool have_shared_models() { return std::filesystem::exists(shared_models_dir() + "/resnet50.onnx"); }
inline std::string shared_model(const std::string& name) { return shared_models_dir() + "/" + name + ".onnx"; }
inline std::string example(const std::string& file) { return std::string(PLACER_EXAMPLES) + "/" + file; }
inline std::string placer_binary() { return PLACER_BINARY; }

// A file name in the test temp folder of this test alone: CTest runs tests in parallel, each in a
// process of its own, so a fixed name would be written by two tests at once.
inline std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = "suite";
  if (info) test.assign(info->test_suite_name()).append(".").append(info->name());
  for (char& ch : test)
    if (ch == '/') ch = '_';  // parameterised tests
  // The process id keeps tests that CTest runs in parallel (each in a process of its own) apart.
  std::string path = ::testing::TempDir();
  path.append("placer_test_").append(std::to_string(::getpid())).append("_").append(test).append("_").append(name);
  return path;
}

// An integer from the environment, or `fallback` when the variable is unset: how a test with a
// random campaign takes a longer run or another seed (the mutation tests).
inline long long env_or(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0) {
    ADD_FAILURE() << name << "='" << v << "' is not an integer";
    return fallback;
  }
  return value;
}

}  // namespace placer::test

// Tests that read ../shared/models skip, loudly, on a checkout without them.
#define REQUIRE_SHARED_MODELS()                                                                    \
  do {                                                                                             \
    if (!::placer::test::have_shared_models())                                                     \
      GTEST_SKIP() << "shared models not found in " << ::placer::test::shared_models_dir();        \
  } while (0)
