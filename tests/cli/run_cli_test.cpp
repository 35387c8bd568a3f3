// `placer run` and `placer validate`: what they report of a real step besides its time (the
// memory measured in each of the machine's memories, and in validate the simulator's peak beside it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <onnx/onnx_pb.h>

#include "support/paths.hpp"
#include "support/run_placer.hpp"

namespace placer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
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
  EXPECT_THAT(text.err, Not(HasSubstr("this machine's CPU"))) << text.err;  // local describes this machine
  // A preset's CPU is another machine's: the comparison is one of two machines, and said (a QA pass).
  auto other = placer({"validate", "--model", model, "--cluster", "k80x4", "--on", "cpu:0", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.err, HasSubstr("cluster 'k80x4' describes cpu:0 as 'Intel Xeon E5-2699 v3"));
  EXPECT_THAT(other.err, HasSubstr("this machine's CPU, which runs the steps, is '"));
}

// A placement the simulation finds over the cluster's memory is marked, in the text and the JSON
// (validate printed its error with nothing said: a review).
TEST(ValidateCli, SaysWhenThePlacementDoesNotFitInTheSimulation) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string cluster = test::temp_path("tiny-memory.cluster.json");
  std::ofstream(cluster) << R"({"format": "placer-cluster", "version": 1, "name": "tiny", "devices": [{"name": "cpu:0", "kind": "cpu",
      "peak_flops": 1e11, "memory_bandwidth": 1e10, "memory_bytes": 1000000, "op_overhead_s": 0}], "links": []})";
  auto text = placer({"validate", "--model", model, "--cluster", cluster, "--on", "cpu:0", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("DOES NOT FIT in the simulation (cpu:0 over by "));
  auto json = placer({"validate", "--model", model, "--cluster", cluster, "--on", "cpu:0", "--steps", "1", "--warmup", "0", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json row = nlohmann::json::parse(json.out).at("placements").at(0);
  EXPECT_EQ(row.at("fits"), false);
  ASSERT_EQ(row.at("shortfalls").size(), 1u);
  EXPECT_EQ(row.at("shortfalls").at(0).at("device"), "cpu:0");
  auto fits = placer({"validate", "--model", model, "--cluster", "local", "--on", "cpu:0", "--steps", "1", "--warmup", "0", "--json"});
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(nlohmann::json::parse(fits.out).at("placements").at(0).at("fits"), true);
}

// A placement file found under other options is said to be, as simulate says it (run and validate
// said nothing: a review).
TEST(RunCli, APlacementFoundUnderOtherOptionsIsWarnedAbout) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string placement = test::temp_path("found-for-inference.placement.json");
  std::ofstream(placement) << R"({"default": "cpu:0", "devices": {}, "meta": {"mode": "inference", "cluster": "local", "step_time_s": "0.01"}})";
  auto run = placer({"run", "--model", model, "--placement", placement, "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("was found for --mode inference (here training); its step time there: 0.01 s"));
  auto validate = placer({"validate", "--model", model, "--cluster", "local", "--placements", placement, "--mode", "inference", "--steps", "1",
                          "--warmup", "0"});
  ASSERT_EQ(validate.exit_code, 0) << validate.err;
  EXPECT_THAT(validate.err, Not(HasSubstr("was found for"))) << validate.err;
}

// profile times this machine's CPU: a cluster that describes another one is said to (the profile
// stored the times as the Xeon's with nothing said: a review); and a fit from few op times too.
TEST(ProfileCli, ACpuOfAnotherMachineAndAFitOfFewTimesAreWarnedAbout) {
  const std::string out = test::temp_path("other-cpu.profile.json");
  const auto other = placer({"profile", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "-o", out, "--repeats", "1",
                             "--steps", "1", "--warmup", "0", "--mode", "inference"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.err, HasSubstr("cluster 'k80x4' describes cpu:0 as 'Intel Xeon E5-2699 v3"));
  EXPECT_THAT(other.err, HasSubstr("which times the ops"));
  // CifarNet's forward pass alone has 11 ops: too few to fit a roofline by, as `fit` says (the fit
  // was stored without a word: a review).
  EXPECT_THAT(other.err, HasSubstr("the cpu devices' fitted roofline rests on 11 op times only (fewer than 20)"));
  const auto local = placer({"profile", "--model", test::example("cifarnet.onnx"), "--cluster", "local", "-o", out, "--repeats", "1",
                             "--steps", "1", "--warmup", "0", "--mode", "inference", "--no-fit"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_THAT(local.err, Not(HasSubstr("this machine's CPU"))) << local.err;
}

// `run --trace`: one more step recorded as a Chrome trace: every forward op that runs once on its
// device's track, autograd's nodes, the loss and the update, and the host's live bytes, whose most
// is the measured peak. `validate --trace`: the simulated step beside it, in a process of its own.
// A trace file that cannot be written is found before the steps run, not after them (with a
// thousand steps asked for, finding it afterwards would take minutes).
TEST(RunCli, AnUnwritableTraceFailsBeforeTheSteps) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string bad = test::temp_path("no_such_dir") + "/trace.json";
  for (const char* command : {"run", "validate"}) {
    auto r = placer({command, "--model", model, "--cluster", "local", "--on", "cpu:0", "--steps", "1000", "--warmup", "0", "--trace", bad});
    EXPECT_NE(r.exit_code, 0) << command;
    EXPECT_THAT(r.err, HasSubstr("cannot write trace file")) << command << ": " << r.err;
  }
}

// A trace over one of the command's inputs is refused before anything runs (it replaced the model,
// a placement or the cluster file and exited 0: a review), as every other writer does.
TEST(RunCli, ATraceOverAnInputIsRefused) {
  const std::string model = test::temp_path("trace_over.onnx"), placement = test::temp_path("trace_over.placement.json");
  {
    std::ifstream in(test::example("cifarnet.onnx"), std::ios::binary);
    std::ofstream(model, std::ios::binary) << in.rdbuf();
  }
  std::ofstream(placement) << R"({"default": "cpu:0"})";
  const auto size = std::filesystem::file_size(model);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"run", "--model", model, "--on", "cpu:0", "--steps", "1", "--warmup", "0", "--trace", model},
           {"run", "--model", model, "--placement", placement, "--steps", "1", "--warmup", "0", "--trace", placement},
           {"validate", "--model", model, "--cluster", "local", "--placements", placement, "--steps", "1", "--warmup", "0", "--trace",
            placement}}) {
    const auto r = placer(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("writing it would replace an input")) << args[0];
  }
  EXPECT_EQ(std::filesystem::file_size(model), size);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(placement)).at("default"), "cpu:0");
}

// --no-fit: no fit's figures (it printed an overhead of 0 and an error of 0%: a review).
TEST(ProfileCli, NoFitReportsNoFit) {
  const std::string out = test::temp_path("nofit.profile.json");
  const auto text = placer({"profile", "--model", test::example("cifarnet.onnx"), "--cluster", "local", "-o", out, "--repeats", "1", "--steps",
                            "1", "--warmup", "0", "--no-fit"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("roofline not fitted (--no-fit)"));
  EXPECT_THAT(text.out, Not(HasSubstr("fitted roofline")));
  const auto json = placer({"profile", "--model", test::example("cifarnet.onnx"), "--cluster", "local", "-o", out, "--repeats", "1", "--steps",
                            "1", "--warmup", "0", "--no-fit", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json kind = nlohmann::json::parse(json.out).at("kinds").at(0);
  EXPECT_TRUE(kind.contains("step_s"));
  EXPECT_FALSE(kind.contains("fitted_overhead_s"));
  EXPECT_FALSE(kind.contains("fit_median_abs_error"));
}

TEST(RunCli, TracesAStepItsOpsNodesAndMemory) {
  const std::string model = test::example("cifarnet.onnx");
  const std::string path = test::temp_path("run_trace.json");
  auto run = placer({"run", "--model", model, "--on", "cpu:0", "--steps", "1", "--warmup", "1", "--json", "--trace", path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto measured = nlohmann::json::parse(run.out)["memory"][0]["peak_bytes"].get<double>();
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const auto events = nlohmann::json::parse(in)["traceEvents"];
  std::map<std::string, int> slices;
  double most = 0;
  std::set<std::string> tracks;
  for (const auto& e : events) {
    if (e["ph"] == "X") {
      ++slices[e["cat"].get<std::string>()];
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (e["ph"] == "C") most = std::max(most, e["args"]["bytes"].get<double>());
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(slices["forward"], 12) << "cifarnet's 12 forward ops that run (its Reshape included)";
  EXPECT_GT(slices["backward"], 10);
  EXPECT_EQ(slices["loss"], 1);
  EXPECT_EQ(slices["update"], 1);
  EXPECT_EQ(tracks, (std::set<std::string>{"cpu:0", "autograd (backward)", "loss and update"}));
  EXPECT_NEAR(most, measured, 0.01 * measured) << "the traced step peaks as the timed ones";

  const std::string both = test::temp_path("validate_trace.json");
  auto validate = placer({"validate", "--model", model, "--cluster", "local", "--on", "cpu:0", "--steps", "1", "--warmup", "0", "--trace", both});
  ASSERT_EQ(validate.exit_code, 0) << validate.err;
  std::ifstream in2(both);
  const auto both_events = nlohmann::json::parse(in2)["traceEvents"];
  std::set<std::string> processes;
  for (const auto& e : both_events)
    if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  EXPECT_EQ(processes, (std::set<std::string>{"simulated: all on cpu:0 on local", "measured: all on cpu:0 on local"}));
  auto two = placer({"validate", "--model", model, "--cluster", "local", "--on", "cpu:0,cpu:0", "--steps", "1", "--trace", both});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_THAT(two.err, HasSubstr("--trace writes one placement's step"));
}

// A model without parameters has nothing to train: `run` and `validate` in training mode say so
// once, as `simulate` does (`run` said nothing; a QA pass).
TEST(RunCli, AModelWithoutParametersIsWarnedAboutOnceInTraining) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("relu");
  for (auto* vi : {g->add_input(), g->add_output()}) {
    vi->set_name(vi == &g->input(0) ? "x" : "y");
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : {4, 8}) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  }
  auto* n = g->add_node();
  n->set_op_type("Relu"), n->set_name("/Relu"), n->add_input("x"), n->add_output("y");
  const std::string model = test::temp_path("relu_no_params.onnx");
  {
    std::ofstream out(model, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  const std::string warning = "placer: warning: '" + model + "' has no parameters";
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"run", "--model", model, "--on", "cpu:0"}, {"validate", "--model", model, "--cluster", "local", "--on", "cpu:0"}}) {
    auto training = command;
    training.insert(training.end(), {"--mode", "training", "--steps", "1", "--warmup", "0"});
    auto run = placer(training);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto first = run.err.find(warning);
    ASSERT_NE(first, std::string::npos) << command[0] << ": " << run.err;
    EXPECT_EQ(run.err.find(warning, first + 1), std::string::npos) << command[0] << " warned twice: " << run.err;
    auto inference = command;
    inference.insert(inference.end(), {"--mode", "inference", "--steps", "1", "--warmup", "0"});
    run = placer(inference);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.err, ::testing::Not(HasSubstr("warning"))) << command[0];
  }
}

// A data input that is a Bernoulli's probabilities is drawn in [0, 1): drawn normal, `run` on ONNX's
// own test_bernoulli models failed in libtorch ("Expected p_in >= 0 && p_in <= 1").
TEST(RunCli, ABernoullisProbabilitiesAreDrawnInRange) {
  const std::filesystem::path data = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(data / "test_bernoulli")) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/install-deps.sh installs it)";
  for (const char* test : {"test_bernoulli", "test_bernoulli_double", "test_bernoulli_seed"}) {
    const auto run = placer({"run", "--model", (data / test / "model.onnx").string(), "--on", "cpu:0", "--steps", "2", "--warmup", "1"});
    EXPECT_EQ(run.exit_code, 0) << test << ": " << run.err;
  }
}

// libtorch's warnings come as placer's, not through glog; its notice that scatter_reduce is in beta
// (about its API, not the model) is not printed.
TEST(RunCli, LibtorchsBetaNoticesAreNotPrinted) {
  const std::filesystem::path model = "/usr/share/libonnx-testdata/data/node/test_scatter_elements_with_duplicate_indices/model.onnx";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/install-deps.sh installs it)";
  const auto run = placer({"run", "--model", model.string(), "--on", "cpu:0", "--mode", "inference", "--steps", "1", "--warmup", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("InitGoogleLogging")));
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("beta")));
}

// Found by a QA sweep of ONNX's test models through the training step: a loss's class weights,
// given as a tensor that is not data, were trained, which libtorch cannot do ("not differentiable
// with respect to argument 'weight'"): they are a buffer now; a 4-D loss over log-probabilities
// out of row-major order failed in libtorch's backward ("grad_input must be contiguous"); and a
// graph input that decides shapes (a Slice's starts) was drawn at random, so that `run` failed or
// gave other shapes by seed: refused, naming it.
TEST(RunCli, TrainingStepsOfLossesAndShapeDecidingInputs) {
  const std::filesystem::path data = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(data / "test_nllloss_NCd1_weight")) GTEST_SKIP() << "libonnx-testdata is not installed (scripts/install-deps.sh installs it)";
  for (const auto& [test, inputs] : {std::pair{"test_nllloss_NCd1_weight", "input,target"}, std::pair{"test_sce_mean_weight", "y,x"},
                                     std::pair{"test_sce_mean_no_weight_ii_4d_expanded", "y"}}) {
    const std::string model = (data / test / "model.onnx").string();
    const auto run = placer({"run", "--model", model, "--on", "cpu:0", "--mode", "training", "--steps", "1", "--warmup", "0", "--data-inputs", inputs});
    EXPECT_EQ(run.exit_code, 0) << test << ": " << run.err;
  }
  const auto inspect = placer({"inspect", (data / "test_nllloss_NCd1_weight" / "model.onnx").string(), "--data-inputs", "input,target"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_THAT(inspect.out, HasSubstr("parameters  0 (0 B), buffers 20 B"));  // the class weights
  // A window's size (it gave "output 'y' has shape [1], the graph says [10]" by seed: a review).
  const auto window = placer({"run", "--model", (data / "test_hannwindow" / "model.onnx").string(), "--on", "cpu:0", "--steps", "1", "--warmup", "0"});
  EXPECT_EQ(window.exit_code, 1) << window.err;
  EXPECT_THAT(window.err, HasSubstr("graph input 'x' is input 0 of op 'HannWindow_0' (HannWindow), whose values decide shapes"));
  for (const std::string seed : {"1", "2"}) {
    const auto slice = placer({"run", "--model", (data / "test_slice" / "model.onnx").string(), "--on", "cpu:0", "--steps", "1", "--warmup", "0", "--seed", seed});
    EXPECT_EQ(slice.exit_code, 1) << slice.err;
    EXPECT_THAT(slice.err, HasSubstr("graph input 'starts' is input 1 of op 'Slice_0' (Slice), whose values decide shapes"));
  }
}

}  // namespace
}  // namespace placer
