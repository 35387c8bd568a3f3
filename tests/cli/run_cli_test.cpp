// `placer run` and `placer validate`: what they report of a real step besides its time (the
// memory measured in each of the machine's memories, and in validate the simulator's peak beside it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/paths.hpp"
#include "support/run_placer.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;
using test::placer;

TEST(RunCli, ReportsThePeakMemoryOfTheStepOnTheHost) {
  const std::string model = test::example("cifarnet.onnx");
  auto run = placer({"run", "--model", model, "--on", "cpu:0", "--mode", "training", "--steps", "1", "--warmup", "1", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_TRUE(j.contains("memory")) << run.out;
  ASSERT_EQ(j["memory"].size(), 1u);
  const auto& m = j["memory"][0];
  EXPECT_EQ(m["memory"], "host");
  EXPECT_EQ(m["devices"], nlohmann::json::array({"cpu:0"}));
  EXPECT_GT(m["start_bytes"].get<double>(), 0.0);
  EXPECT_GT(m["peak_bytes"].get<double>(), m["start_bytes"].get<double>());

  auto text = placer({"run", "--model", model, "--on", "cpu:0", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("memory host (cpu:0): peak "));
}

TEST(ValidateCli, SetsTheSimulatedPeakBesideTheMeasuredOne) {
  const std::string model = test::example("cifarnet.onnx");
  auto run = placer({"validate", "--model", model, "--cluster", "local", "--on", "cpu:0", "--mode", "training", "--optimizer", "adam",
                     "--steps", "1", "--warmup", "1", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  const auto& m = j["placements"][0]["memory"][0];
  EXPECT_EQ(m["memory"], "host");
  const double measured = m["peak_bytes"].get<double>(), simulated = m["simulated_peak_bytes"].get<double>();
  EXPECT_NEAR(simulated, measured, 0.01 * measured);  // measured 2026-11-29: 12 bytes apart
  EXPECT_NEAR(m["error"].get<double>(), (simulated - measured) / measured, 1e-12);
  // The simulation sums partial gradients as this libtorch does, and says which.
  EXPECT_TRUE(j.at("gradient_sums") == "in-place" || j.at("gradient_sums") == "out-of-place") << j.dump();

  auto text = placer({"validate", "--model", model, "--cluster", "local", "--on", "cpu:0", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("; simulated peak "));
}

}  // namespace
}  // namespace placer
