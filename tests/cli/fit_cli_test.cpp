// `placer fit`: profiles of models measured on one machine, fitted into that machine's cluster file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>
#include <string>
#include <vector>

#include "support/paths.hpp"
#include "support/run_placer.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;
using test::placer;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = test::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

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
  // Each model's whole step with the fit, against the step its profile gives (a QA pass found a
  // fit 35% under the model it was fitted on, with nothing printed to say so).
  EXPECT_THAT(fit.out, HasSubstr("cifarnet.onnx on cpu:0: training step "));
  EXPECT_THAT(fit.out, HasSubstr(" with the fit, "));
  EXPECT_THAT(fit.out, HasSubstr(" with its profile ("));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(cluster));
  EXPECT_EQ(j["name"], "this-machine");
  ASSERT_TRUE(j["devices"][0].contains("efficiency")) << j.dump();
  EXPECT_TRUE(j["devices"][0]["efficiency"].contains("matmul")) << j.dump();  // cifarnet's Gemms
  // The `local` CPU's products by their smallest dimension, its convolutions by their kernel, give
  // way to the class fits.
  EXPECT_FALSE(j["devices"][0].contains("product_efficiency_by_size")) << j.dump();
  EXPECT_FALSE(j["devices"][0].contains("conv_efficiency_by_kernel")) << j.dump();
  // A training profile times the gradients too: they get their own efficiencies and overhead.
  EXPECT_THAT(fit.out, HasSubstr("backward ops"));
  ASSERT_TRUE(j["devices"][0].contains("backward_efficiency")) << j.dump();
  EXPECT_TRUE(j["devices"][0]["backward_efficiency"].contains("matmul")) << j.dump();  // GemmGrad
  EXPECT_GE(j["devices"][0]["backward_op_overhead_s"].get<double>(), 0.0);
  auto sim = placer({"simulate", "--model", model, "--cluster", cluster, "--on", "cpu:0", "--json"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const double fitted_step = nlohmann::json::parse(sim.out)["step_time_s"].get<double>();
  EXPECT_GT(fitted_step, 0.0);
  // The JSON report's figures are those simulations: the fitted cluster's, and the profile's.
  auto fit_json = placer({"fit", "--cluster", "local", "--models", model, "--profiles", profile, "--json"});
  ASSERT_EQ(fit_json.exit_code, 0) << fit_json.err;
  const nlohmann::json report = nlohmann::json::parse(fit_json.out);
  ASSERT_EQ(report["steps"].size(), 1u) << report.dump();
  EXPECT_TRUE(report["fits"][0]["product_curve_dropped"].get<bool>()) << "local's CPU measured one; cifarnet's Gemms were fitted";
  EXPECT_THAT(fit.out, HasSubstr("product_efficiency_by_size was dropped"));
  EXPECT_TRUE(report["fits"][0]["conv_curve_dropped"].get<bool>()) << "cifarnet's convolutions were fitted";
  EXPECT_THAT(fit.out, HasSubstr("conv_efficiency_by_kernel was dropped"));
  const nlohmann::json& step = report["steps"][0];
  EXPECT_EQ(step["device"], "cpu:0");
  auto replay = placer({"simulate", "--model", model, "--cluster", "local", "--on", "cpu:0", "--profile", profile, "--json"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  const double replayed = nlohmann::json::parse(replay.out)["step_time_s"].get<double>();
  EXPECT_NEAR(step["profiled_step_s"].get<double>(), replayed, 1e-6 * replayed);
  EXPECT_NEAR(step["error"].get<double>(), step["fitted_step_s"].get<double>() / step["profiled_step_s"].get<double>() - 1.0, 1e-12);
  EXPECT_EQ(step["mode"], "training");
  {
    // An inference profile is compared on the forward pass it timed (it was compared on a training
    // step whose gradients it never timed, "+58%" for a step nothing measured: a QA pass).
    const std::string forward_profile = test::temp_path("fit_cli.inference.profile.json");
    auto fprof = placer({"profile", "--model", model, "--cluster", "local", "--mode", "inference", "-o", forward_profile, "--repeats", "1",
                         "--steps", "1", "--warmup", "0"});
    ASSERT_EQ(fprof.exit_code, 0) << fprof.err;
    auto ffit = placer({"fit", "--cluster", "local", "--models", model, "--profiles", forward_profile, "--json"});
    ASSERT_EQ(ffit.exit_code, 0) << ffit.err;
    const nlohmann::json fstep = nlohmann::json::parse(ffit.out)["steps"].at(0);
    EXPECT_EQ(fstep["mode"], "inference");
    auto freplay = placer({"simulate", "--model", model, "--cluster", "local", "--mode", "inference", "--on", "cpu:0", "--profile",
                           forward_profile, "--json"});
    ASSERT_EQ(freplay.exit_code, 0) << freplay.err;
    const double freplayed = nlohmann::json::parse(freplay.out)["step_time_s"].get<double>();
    EXPECT_NEAR(fstep["profiled_step_s"].get<double>(), freplayed, 1e-6 * freplayed);
  }
  // --types: each type's own efficiency, written into the devices, from its op times (cifarnet has
  // two MaxPools and their gradients), and those ops left out of the class fits; a type the profile
  // does not time gets none. On a cluster whose CPU has no types of its own (`local` measures some).
  nlohmann::json plain_cluster = j;
  plain_cluster["devices"][0].erase("efficiency_by_type");
  const std::string plain_path = write("fit_cli.plain.cluster.json", plain_cluster.dump());
  auto untyped = placer({"fit", "--cluster", plain_path, "--models", model, "--profiles", profile, "--json"});
  auto typed = placer({"fit", "--cluster", plain_path, "--models", model, "--profiles", profile, "--types", "MaxPool,MaxPoolGrad,Einsum",
                       "--json"});
  ASSERT_EQ(untyped.exit_code, 0) << untyped.err;
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  const nlohmann::json by_type = nlohmann::json::parse(typed.out);
  const nlohmann::json& types = by_type["cluster"]["devices"][0]["efficiency_by_type"];
  ASSERT_TRUE(types.contains("MaxPool")) << by_type.dump();
  EXPECT_GT(types["MaxPool"]["compute"].get<double>(), 0.0);
  EXPECT_TRUE(types.contains("MaxPoolGrad")) << by_type.dump();
  EXPECT_FALSE(types.contains("Einsum"));
  EXPECT_EQ(by_type["fits"][0]["efficiency_by_type"]["MaxPool"]["samples"], 2);
  EXPECT_EQ(by_type["fits"][0]["samples"].get<int>() + 4, nlohmann::json::parse(untyped.out)["fits"][0]["samples"].get<int>())
      << "the four pools left out of the classes";
  EXPECT_FALSE(nlohmann::json::parse(untyped.out)["cluster"]["devices"][0].contains("efficiency_by_type"));
  EXPECT_FALSE(nlohmann::json::parse(untyped.out)["fits"][0]["product_curve_dropped"].get<bool>()) << "no curve to drop";
  EXPECT_FALSE(nlohmann::json::parse(untyped.out)["fits"][0]["conv_curve_dropped"].get<bool>()) << "no curve to drop";
}

// A cluster whose CPU gives no per-op overhead: the overhead `profile` fits cannot be a scale of
// it, so the profile's model carries it in seconds (it was dropped).
TEST(FitCli, ProfileKeepsTheFittedOverheadOfADeviceWithoutOne) {
  const std::string cluster = write("no_overhead.cluster.json", R"({"format": "placer-cluster", "version": 1, "name": "bare",
      "devices": [{"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10, "op_overhead_s": 0}],
      "links": []})");
  const std::string profile = test::temp_path("no_overhead.profile.json");
  auto prof = placer({"profile", "--model", test::example("cifarnet.onnx"), "--cluster", cluster, "--mode", "inference", "-o", profile,
                      "--repeats", "1", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(prof.exit_code, 0) << prof.err;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(profile));
  ASSERT_TRUE(j["model"].contains("overheads_s")) << j["model"].dump();
  // The fitted overhead (cifarnet's eleven ops take milliseconds each, so it may well fit 0).
  EXPECT_GE(j["model"]["overheads_s"]["cpu"].get<double>(), 0.0);
  EXPECT_EQ(j["model"]["backward_overheads_s"]["cpu"], j["model"]["overheads_s"]["cpu"]) << "no gradient measured";
}

// A profile is paired with its model by op name and the signature each name was measured with:
// one that times none of the model's ops (another model's, whose names the exporter reused) is
// refused instead of fitted from the wrong samples.
TEST(FitCli, AProfileOfAnotherModelIsRefused) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string times = R"("times_s": {"cpu": {"ops": {"/conv1/Conv": 0.002}}})";
  const std::string other = write("other.profile.json", R"({"format": "placer-profile", "version": 1, )" + times +
                                                            R"j(, "op_signatures": {"/conv1/Conv": "Conv(1x3x224x224,64x3x7x7)"}})j");
  auto run = placer({"fit", "--cluster", "local", "--models", model, "--profiles", other});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("times none of the forward or backward ops of"));
  // Updates do not pair a profile with a model: their signatures are parameter shapes, which
  // models share (a cifarnet profile was fitted to ResNet-50 by 14 updates alone).
  const std::string updates = write("updates.profile.json", R"j({"format": "placer-profile", "version": 1,
      "times_s": {"cpu": {"signatures": {"SGDUpdate(64,64)": 0.00001, "SGDUpdate(64x3x5x5,64x3x5x5)": 0.00002}}}})j");
  run = placer({"fit", "--cluster", "local", "--models", model, "--profiles", updates});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("times none of the forward or backward ops of"));
  // Without a recorded signature the name alone pairs them (profiles written before signatures were).
  const std::string unsigned_ = write("unsigned.profile.json", R"({"format": "placer-profile", "version": 1, )" + times + "}");
  run = placer({"fit", "--cluster", "local", "--models", model, "--profiles", unsigned_});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // A profile that times nothing, pooled with one that does, was silently fitted on the other
  // alone (found by a review).
  const std::string empty = write("empty.profile.json", R"({"format": "placer-profile", "version": 1, "times_s": {}})");
  run = placer({"fit", "--cluster", "local", "--models", model + "," + model, "--profiles", unsigned_ + "," + empty});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("empty.profile.json': it holds no op times ('times_s') and no fitted model ('model'): it measures nothing"));
}

// Found by fuzzing: times that fit an absurd per-op overhead (every op 1e308 s) wrote a cluster
// file every later command refused; an empty -o wrote nothing, without a word; a profile whose
// every time is 0 s priced whole steps at 0 s.
TEST(FitCli, RefusesWhatCannotBeFittedOrWritten) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string absurd = write("absurd.profile.json", R"({"format": "placer-profile", "version": 1, "times_s": {"cpu": {"ops":
      {"/conv1/Conv": 1e308, "/conv2/Conv": 1e308, "/fc1/Gemm": 1e308, "/fc2/Gemm": 1e308}}}})");
  auto run = placer({"fit", "--cluster", "h100-box", "--models", model, "--profiles", absurd, "-o", test::temp_path("absurd.cluster.json")});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("the fit to these profiles cannot price"));
  // Four op times fit nothing well: said (a fit from one op time put 989 ms into the per-op
  // overhead without a word: a review).
  EXPECT_THAT(run.err, HasSubstr("placer: warning: the cpu devices' fit rests on 4 op times only (fewer than 20)"));
  run = placer({"fit", "--cluster", "h100-box", "--models", model, "--profiles", absurd, "-o", ""});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("an empty file name"));
  // An empty --name wrote the input cluster's name, as if none had been given.
  run = placer({"fit", "--cluster", "h100-box", "--models", model, "--profiles", absurd, "--name", ""});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("an empty cluster name"));
  const std::string zeros =
      write("zeros.profile.json", R"({"format": "placer-profile", "version": 1, "times_s": {"cpu": {"ops": {"/conv1/Conv": 0, "/fc1/Gemm": 0}}}})");
  run = placer({"simulate", "--model", model, "--cluster", "k80x4", "--on", "cpu:0", "--profile", zeros});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("all its 2 times are 0 s"));
}

// A fit of another machine's times describes that machine: fitted into this cluster without a word
// before (a QA pass); now warned about, per device whose model differs from the one measured.
TEST(FitCli, AProfileOfAnotherMachineIsWarnedAbout) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string other = write("other_machine.profile.json", R"j({"format": "placer-profile", "version": 1,
      "machine": "cpu:0: a 2-core VM (2 hardware threads, 1 used by libtorch)", "times_s": {"cpu": {"ops": {"/conv1/Conv": 0.002}}}})j");
  auto run = placer({"fit", "--cluster", "h100-box", "--models", model, "--profiles", other, "-o", test::temp_path("other_machine.cluster.json")});
  EXPECT_THAT(run.err, HasSubstr("placer: warning: the profile '" + other + "' was measured on other devices than cluster 'h100-box' "
                                 "describes (cpu:0 was 'a 2-core VM (2 hardware threads, 1 used by libtorch)', here cpu:0 is '"))
      << run.err;
}

// A --types entry that no profile times fitted nothing and left no line: said now, with the names
// of the types batch normalisation is fitted under (a review).
TEST(FitCli, ATypeNoProfileTimesIsWarnedAbout) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string profile = write("conv_only.profile.json", R"({"format": "placer-profile", "version": 1,
      "times_s": {"cpu": {"ops": {"/conv1/Conv": 0.002, "/conv2/Conv": 0.003, "/fc1/Gemm": 0.001}}}})");
  auto run = placer({"fit", "--cluster", "h100-box", "--models", model, "--profiles", profile, "--types", "Conv,MaxPool",
                     "-o", test::temp_path("conv_only.cluster.json")});
  EXPECT_THAT(run.err, HasSubstr("placer: warning: --types MaxPool: no op of that type with FLOPs or bytes has a time in these profiles: nothing "
                                 "fitted for it (a training profile's forward BatchNormalizations are BatchNormalizationTraining"))
      << run.err;
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("--types Conv:"))) << run.err;
}

// A model with a symbolic size is fitted with --dim (fit took --optimizer only); given for several
// models, a --dim or --data-inputs name a model lacks is skipped for that model.
TEST(FitCli, TakesTheModelOptions) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("symbolic");
  auto typed = [](onnx::ValueInfoProto* vi, const std::string& name, std::vector<std::string> dims) {
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (const auto& d : dims) {
      auto* dim = vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
      if (d == "N") dim->set_dim_param("N");
      else dim->set_dim_value(std::stoll(d));
    }
  };
  typed(g->add_input(), "x", {"N", "64"});
  typed(g->add_input(), "w", {"64", "32"});
  typed(g->add_output(), "y", {"N", "32"});
  auto* n = g->add_node();
  n->set_op_type("MatMul"), n->set_name("/fc/MatMul"), n->add_input("x"), n->add_input("w"), n->add_output("y");
  const std::string model = test::temp_path("symbolic.onnx");
  {
    std::ofstream out(model, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  const std::string profile = test::temp_path("symbolic.profile.json");
  auto prof = placer({"profile", "--model", model, "--cluster", "local", "--dim", "N=8", "-o", profile, "--repeats", "1", "--steps", "1",
                      "--warmup", "0"});
  ASSERT_EQ(prof.exit_code, 0) << prof.err;
  auto fit = placer({"fit", "--cluster", "local", "--models", model, "--profiles", profile, "--dim", "N=8"});
  EXPECT_EQ(fit.exit_code, 0) << fit.err;
  // A size no machine holds (N x 64 floats = 256 TB): libtorch's allocator error reads as out of
  // memory, on one line.
  const auto huge = placer({"run", "--model", model, "--on", "cpu:0", "--dim", "N=1000000000000", "--steps", "1", "--warmup", "0",
                            "--data-inputs", "x"});
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_THAT(huge.err, HasSubstr("placer: error: out of memory (can't allocate memory"));
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer adds a line of its own: "WARNING: ... failed to allocate"
  EXPECT_EQ(std::count(huge.err.begin(), huge.err.end(), '\n'), 1) << huge.err;
#endif
  fit = placer({"fit", "--cluster", "local", "--models", model, "--profiles", profile});
  EXPECT_NE(fit.exit_code, 0);
  EXPECT_THAT(fit.err, HasSubstr("--dim N=VALUE"));
  // With cifarnet, which has no N and no input x: skipped there.
  const std::string cifarnet = test::example("cifarnet.onnx"), cifarnet_profile = test::temp_path("cifarnet.profile.json");
  prof = placer({"profile", "--model", cifarnet, "--cluster", "local", "-o", cifarnet_profile, "--repeats", "1", "--steps", "1", "--warmup", "0",
                 "--mode", "inference"});
  ASSERT_EQ(prof.exit_code, 0) << prof.err;
  fit = placer({"fit", "--cluster", "local", "--models", model + "," + cifarnet, "--profiles", profile + "," + cifarnet_profile, "--dim",
                "N=8", "--data-inputs", "x"});
  EXPECT_EQ(fit.exit_code, 0) << fit.err;
}

TEST(FitCli, OneProfilePerModel) {
  const std::string model = test::example("cifarnet.onnx");
  auto run = placer({"fit", "--cluster", "h100-box", "--models", model + "," + model, "--profiles", "a.json"});
  EXPECT_EQ(run.exit_code, 2);  // a usage error: the command line alone says it
  EXPECT_THAT(run.err, HasSubstr("one profile per model"));
}

TEST(FitCli, AMissingProfileIsNamed) {
  auto run = placer({"fit", "--cluster", "h100-box", "--models", test::example("cifarnet.onnx"), "--profiles", "no-such.json"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("no-such.json"));
}

}  // namespace
}  // namespace placer
