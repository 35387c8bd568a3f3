// `placer fit`: profiles of models measured on one machine, fitted into that machine's cluster file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/paths.hpp"
#include "support/run_placer.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;
using test::placer;

TEST(FitCli, WritesAClusterWhoseDevicesCarryTheFittedCostModel) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string profile = test::temp_path("fit_cli.profile.json"), cluster = test::temp_path("fit_cli.cluster.json");
  auto prof = placer({"profile", "--model", model, "--cluster", "local", "-o", profile, "--repeats", "1", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(prof.exit_code, 0) << prof.err;
  // The same profile twice (training ops and, by name, the forward ops an inference profile would give).
  auto fit = placer({"fit", "--cluster", "local", "--models", model + "," + model, "--profiles", profile + "," + profile,
                     "--name", "this-machine", "-o", cluster});
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  EXPECT_THAT(fit.out, HasSubstr("cpu:"));
  EXPECT_THAT(fit.out, HasSubstr("per-op overhead"));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(cluster));
  EXPECT_EQ(j["name"], "this-machine");
  ASSERT_TRUE(j["devices"][0].contains("efficiency")) << j.dump();
  EXPECT_TRUE(j["devices"][0]["efficiency"].contains("matmul")) << j.dump();  // cifarnet's Gemms
  // A training profile times the gradients too: they get their own efficiencies and overhead.
  EXPECT_THAT(fit.out, HasSubstr("backward ops"));
  ASSERT_TRUE(j["devices"][0].contains("backward_efficiency")) << j.dump();
  EXPECT_TRUE(j["devices"][0]["backward_efficiency"].contains("matmul")) << j.dump();  // GemmGrad
  EXPECT_GE(j["devices"][0]["backward_op_overhead_s"].get<double>(), 0.0);
  auto sim = placer({"simulate", "--model", model, "--cluster", cluster, "--on", "cpu:0", "--json"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_GT(nlohmann::json::parse(sim.out)["step_time_s"].get<double>(), 0.0);
}

TEST(FitCli, OneProfilePerModel) {
  const std::string model = test::example("cifarnet.onnx");
  auto run = placer({"fit", "--cluster", "h100-box", "--models", model + "," + model, "--profiles", "a.json"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("one profile per model"));
}

TEST(FitCli, AMissingProfileIsNamed) {
  auto run = placer({"fit", "--cluster", "h100-box", "--models", test::example("cifarnet.onnx"), "--profiles", "no-such.json"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("no-such.json"));
}

}  // namespace
}  // namespace placer
