// The `placer` command as a user runs it: the built binary, its exit code, what it prints on stdout
// and on stderr. Each test states one promise of the CLI (README.md, "Using it").
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/paths.hpp"
#include "support/run_placer.hpp"

namespace placer {
namespace {

using test::Outcome;
using test::placer;
using test::read_file;
using test::temp_path;

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Input files the tests write, removed when the test program ends.
class TempInputs : public ::testing::Environment {
 public:
  static std::vector<std::string>& paths() {
    static std::vector<std::string> written;
    return written;
  }
  void TearDown() override {
    for (const auto& p : paths()) std::remove(p.c_str());
  }
};
const auto* const kTempInputs = ::testing::AddGlobalTestEnvironment(new TempInputs);

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  TempInputs::paths().push_back(path);
  return path;
}

std::size_t count_lines(const std::string& text) {
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines + (!text.empty() && text.back() != '\n');
}

// A failure as the README promises it: a non-zero exit that is not a crash, a signal or a timeout,
// and exactly one line on stderr, placer's own.
void expect_clean_failure(const Outcome& run) {
  EXPECT_NE(run.exit_code, 0);
  EXPECT_LT(run.exit_code, 124) << "crashed, killed or timed out; stderr: " << run.err;
  EXPECT_EQ(count_lines(run.err), 1u) << run.err;
  EXPECT_THAT(run.err, StartsWith("placer: error: "));
  for (const char* crash : {"terminate called", "Segmentation", "Aborted", "core dumped", "what():"})
    EXPECT_THAT(run.err, Not(HasSubstr(crash)));
}

nlohmann::json parse_json(const Outcome& run) {
  EXPECT_EQ(run.exit_code, 0) << run.err;
  try {
    return nlohmann::json::parse(run.out);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << run.out.substr(0, 500);
    return nlohmann::json::object();
  }
}

// ---- help --------------------------------------------------------------------------------------

TEST(Help, TopLevelHelpListsTheInspectSubcommand) {
  Outcome run = placer({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("inspect"));
}

// One exit-status rule (README): 0 success, 1 an error, 2 a usage error, 3 a placement that does
// not fit. Usage errors exited with CLI11's own codes (105, 106; found by a review).
TEST(Help, UsageErrorsExitTwoAndHelpAndVersionZero) {
  EXPECT_EQ(placer({}).exit_code, 2);
  EXPECT_EQ(placer({"simulate", "--memory-fraction", "0", "--model", "x.onnx", "--cluster", "k80x4", "--on", "gpu:0"}).exit_code, 2);
  EXPECT_EQ(placer({"inspect", "--no-such-option"}).exit_code, 2);
  // Arguments wrong by themselves, which placer checks after CLI11 (a QA pass found them exiting 1),
  // before any file is read: the model named does not exist.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"simulte", "--model", "x.onnx"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "no-such-algorithm"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "m-sct", "--opt", "foo=1"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "random", "--opt", "devices"},
           // Options a placer read only once the model had loaded (exit 1 after it: a review).
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "metis", "--opt", "groups=bogus"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "scotch", "--opt", "groups=module:x"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "optimal", "--opt", "groups=op", "devices=none"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "round-robin", "--opt", "devices=none"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "random", "--opt", "devices=none"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "local-search", "--opt", "init=nope"},
           {"place", "--model", "x.onnx", "--cluster", "k80x4", "--algo", "local-search", "--opt", "groups=module,bogus"},
           {"compare", "--model", "x.onnx", "--cluster", "k80x4", "--algos", "heft,nope"},
           {"simulate", "--model", "x.onnx", "--cluster", "k80x4"},
           {"simulate", "--model", "x.onnx", "--cluster", "k80x4", "--on", "gpu:0", "--dim", "batch"},
           // An unknown op class (exit 1: a docs audit).
           {"simulate", "--model", "x.onnx", "--cluster", "k80x4", "--on", "gpu:0", "--unknown-ops", "bogus"},
           {"run", "--model", "x.onnx", "--on", "cpu:0", "--steps", "0"},
           {"validate", "--model", "x.onnx", "--cluster", "local"}}) {
    const Outcome run = placer(args);
    EXPECT_EQ(run.exit_code, 2) << args[0] << " " << args.back() << ": " << run.err;
    EXPECT_THAT(run.err, ::testing::StartsWith("placer: error: ")) << args[0] << " " << args.back();
  }
  EXPECT_EQ(placer({"--version"}).exit_code, 0);
  EXPECT_EQ(placer({"simulate", "--help"}).exit_code, 0);
  EXPECT_EQ(placer({"inspect", "/nonexistent.onnx"}).exit_code, 1);
}

TEST(Help, InspectHelpListsEveryOption) {
  Outcome run = placer({"inspect", "--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* option : {"--mode", "--optimizer", "--data-inputs", "--dim", "--unknown-ops", "--depth", "--json", "--save-graph"})
    EXPECT_THAT(run.out, HasSubstr(option)) << option;
}

// The help's rows of subcommands ("  run    Run a model's step..."), not words of descriptions.
TEST(Help, TopLevelHelpListsTheCommandsOfTheLibtorchModule) {
  Outcome run = placer({"--help"});
  EXPECT_EQ(run.exit_code, 0);
  for (const char* command : {"\n  run ", "\n  profile ", "\n  validate ", "\n  simulate "}) EXPECT_THAT(run.out, HasSubstr(command)) << command;
}

// A placer without its libtorch module (a copy of the executable alone) still does everything that
// needs no libtorch, says why the rest is missing, and fails clearly where the module is required.
TEST(Help, WithoutTheLibtorchModuleOnlyItsCommandsAreMissing) {
  const std::string dir = temp_path("no-module");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(test::placer_binary(), dir + "/placer", std::filesystem::copy_options::overwrite_existing);
  auto run_alone = [&](const std::vector<std::string>& args) { return test::placer_at(dir + "/placer", args); };
  Outcome help = run_alone({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("\n  simulate "));
  EXPECT_THAT(help.out, Not(HasSubstr("\n  run ")));
  EXPECT_THAT(help.err, HasSubstr("placer: warning: cannot load placer's libtorch module"));
  Outcome simulate = run_alone({"simulate", "--model", test::example("inception_v3.onnx"), "--cluster", "k80x4", "--on", "gpu:0"});
  EXPECT_EQ(simulate.exit_code, 0) << simulate.err;
  EXPECT_EQ(simulate.err, "");
  Outcome place = run_alone({"place", "--model", test::example("inception_v3.onnx"), "--cluster", "k80x4", "--algo", "m-topo",
                             "-o", dir + "/p.json"});
  EXPECT_EQ(place.exit_code, 0) << place.err;
  Outcome run = run_alone({"run", "--help"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("placer: error: cannot load placer's libtorch module"));
  std::filesystem::remove_all(dir);
}

// Commands that never run libtorch do not load it (its initialisers take most of a second); the
// others load placer's libtorch module (cli/torch_module.cpp). The dynamic loader says what it loads.
TEST(Startup, OnlyCommandsThatMayRunLibtorchLoadIt) {
  const std::string model = test::example("inception_v3.onnx");
  const std::vector<std::string> env = {"LD_DEBUG=files"};
  Outcome inspect = placer({"inspect", model}, env);
  Outcome simulate = placer({"simulate", "--model", model, "--cluster", "k80x4", "--on", "gpu:0"}, env);
  Outcome local = placer({"bounds", "--model", model, "--cluster", "local"}, env);
  Outcome run = placer({"run", "--help"}, env);
  // place and compare load it only when they may run a learned placer (place --algo heft loaded
  // it for nothing, 0.9 s: found by a review), or for their help, which lists every algorithm.
  Outcome heft = placer({"place", "--model", model, "--cluster", "k80x4", "--algo=heft"}, env);
  Outcome classic = placer({"compare", "--model", model, "--cluster", "k80x4", "--algos", "single,m-etf"}, env);
  Outcome every_classic = placer({"compare", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x2"}, env);
  Outcome learned = placer({"place", "--model", model, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "8"}, env);
  Outcome place_help = placer({"place", "--help"}, env);
  // local-search may start from a learned placer: the module loads for it (the start was refused
  // as an unknown algorithm: found by a review).
  Outcome learned_start = placer({"place", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "--algo", "local-search", "--opt",
                                  "chains=2", "init=colocrl", "--samples", "16"},
                                 env);
  EXPECT_THAT(learned_start.out, HasSubstr("from colocrl"));
  for (const Outcome* o : {&inspect, &simulate, &heft, &classic, &every_classic}) {
    EXPECT_EQ(o->exit_code, 0) << o->err.substr(o->err.size() > 2000 ? o->err.size() - 2000 : 0);
    EXPECT_THAT(o->err, Not(HasSubstr("libtorch")));
  }
  for (const Outcome* o : {&local, &run, &learned, &place_help, &learned_start}) {
    EXPECT_EQ(o->exit_code, 0);
    EXPECT_THAT(o->err, HasSubstr("libplacer_torch.so"));
    EXPECT_THAT(o->err, HasSubstr("libtorch"));
  }
  EXPECT_THAT(place_help.out, HasSubstr("colocrl"));
  EXPECT_THAT(run.out, HasSubstr("--steps"));
  // A command that does not load the module still lists `local` among the presets.
  Outcome typo = placer({"simulate", "--model", model, "--cluster", "typo", "--on", "gpu:0"});
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_THAT(typo.err, HasSubstr("h100-box, local)"));
}

// OpenBLAS (loaded with the executable, through CBC's LAPACK) sizes its pool when it loads, so a
// command that loads libtorch starts again with OPENBLAS_NUM_THREADS=1 when the variable is unset:
// the loader maps OpenBLAS once per process image. A variable the user set is left alone.
TEST(Startup, CommandsThatLoadLibtorchStartOpenBlasWithOneThread) {
  auto openblas_maps = [](const std::string& err) {
    std::size_t count = 0;
    for (std::size_t at = err.find("file=libopenblas.so.0 [0];  generating link map"); at != std::string::npos;
         at = err.find("file=libopenblas.so.0 [0];  generating link map", at + 1))
      ++count;
    return count;
  };
  Outcome unset_run = placer({"run", "--help"}, {"-u", "OPENBLAS_NUM_THREADS", "LD_DEBUG=files"});
  Outcome unset_simulate = placer({"simulate", "--help"}, {"-u", "OPENBLAS_NUM_THREADS", "LD_DEBUG=files"});
  Outcome set_run = placer({"run", "--help"}, {"OPENBLAS_NUM_THREADS=2", "LD_DEBUG=files"});
  ASSERT_EQ(unset_run.exit_code, 0);
  if (openblas_maps(unset_simulate.err) == 0) GTEST_SKIP() << "this build's placer does not load OpenBLAS";
  EXPECT_EQ(openblas_maps(unset_run.err), 2u);
  EXPECT_EQ(openblas_maps(unset_simulate.err), 1u);
  EXPECT_EQ(openblas_maps(set_run.err), 1u);
  EXPECT_THAT(unset_run.out, HasSubstr("--steps"));
}

TEST(Help, NoSubcommandIsAnError) {
  Outcome run = placer({});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_LT(run.exit_code, 124);
}

// A first word that names no command was answered "A subcommand is required".
TEST(Help, AnUnknownCommandIsNamed) {
  Outcome run = placer({"simulte", "--model", "m.onnx"});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("unknown command 'simulte' (commands: inspect, clusters, simulate, bounds"));
  EXPECT_THAT(run.err, HasSubstr(", run, profile, validate; see --help)"));  // the module's, although not loaded
}

// ---- inspect --json on the bundled Inception-V3 ----------------------------------------------------

class InspectInceptionJson : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--json"});
    report_ = new nlohmann::json(parse_json(run));
  }
  static void TearDownTestSuite() {
    delete report_;
    report_ = nullptr;
  }
  const nlohmann::json& report() const { return *report_; }

 private:
  static nlohmann::json* report_;
};
nlohmann::json* InspectInceptionJson::report_ = nullptr;

TEST_F(InspectInceptionJson, CountsOneForwardOpPerOnnxNode) { EXPECT_EQ(report().value("ops", 0), 663); }

TEST_F(InspectInceptionJson, CountsTrainableScalarParameters) {
  EXPECT_EQ(report().value("params", std::uint64_t{0}), 23834568u);
}

TEST_F(InspectInceptionJson, ParameterBytesAreFourPerFloatParameter) {
  EXPECT_EQ(report().value("param_bytes", std::uint64_t{0}), 4u * 23834568u);
}

// Each module's bytes are whole bytes, as the totals are, and add up to them (they were written as
// floats: 3539800.0; a QA pass).
TEST_F(InspectInceptionJson, ModulesActivationBytesAreIntegersThatSumToTheTotal) {
  ASSERT_TRUE(report().contains("modules"));
  std::uint64_t sum = 0;
  for (const auto& m : report()["modules"]) {
    ASSERT_TRUE(m["activation_bytes"].is_number_unsigned()) << m.dump();
    sum += m["activation_bytes"].get<std::uint64_t>();
  }
  EXPECT_EQ(sum, report().value("activation_bytes", std::uint64_t{0}));
}

TEST_F(InspectInceptionJson, TakesTheImageAsTheOnlyDataInput) {
  EXPECT_EQ(report().value("data_inputs", nlohmann::json()), nlohmann::json::array({"input.1"}));
}

TEST_F(InspectInceptionJson, TrainingStepAddsBackwardAndUpdateOps) {
  ASSERT_TRUE(report().contains("training"));
  EXPECT_GT(report()["training"].value("ops", 0), 663);
}

TEST_F(InspectInceptionJson, TrainingStepCostsMoreThanOneAndAHalfForwardPasses) {
  ASSERT_TRUE(report().contains("training"));
  const double forward = report().value("forward_flops", 0.0);
  EXPECT_GT(forward, 0.0);
  EXPECT_GT(report()["training"].value("flops", 0.0), 1.5 * forward);
}

TEST_F(InspectInceptionJson, TrainingStepDefaultsToSgd) {
  ASSERT_TRUE(report().contains("training"));
  EXPECT_EQ(report()["training"].value("optimizer", ""), "sgd");
}

TEST(InspectJson, InferenceModeHasNoTrainingStep) {
  nlohmann::json report = parse_json(placer({"inspect", test::example("inception_v3.onnx"), "--json", "--mode", "inference"}));
  EXPECT_EQ(report.value("ops", 0), 663);
  EXPECT_FALSE(report.contains("training"));
}

// --optimizer shapes the training step only: given with --mode inference it changes nothing, and
// says so on stderr (it was accepted without a word); left at its default, nothing is said.
TEST(Inspect, NotesAnOptimizerGivenInInferenceMode) {
  const Outcome noted = placer({"inspect", test::example("inception_v3.onnx"), "--mode", "inference", "--optimizer", "adam"});
  EXPECT_EQ(noted.exit_code, 0);
  EXPECT_THAT(noted.err, HasSubstr("--optimizer shapes the training step only"));
  EXPECT_EQ(placer({"inspect", test::example("inception_v3.onnx"), "--mode", "inference"}).err, "");
  EXPECT_EQ(placer({"inspect", test::example("inception_v3.onnx"), "--optimizer", "adam"}).err, "");
}

TEST(InspectJson, CountsTheOpsFoldedIntoSetUpValues) {
  // Inception-V3 computes nothing from constants alone; BERT's exported shape arithmetic does.
  EXPECT_EQ(parse_json(placer({"inspect", test::example("inception_v3.onnx"), "--json"})).value("folded_ops", 1), 0);
  REQUIRE_SHARED_MODELS();
  nlohmann::json bert = parse_json(placer({"inspect", test::shared_model("bert_base"), "--json"}));
  EXPECT_EQ(bert.value("folded_ops", 0), 397);
  Outcome text = placer({"inspect", test::shared_model("bert_base")});
  EXPECT_THAT(text.out, HasSubstr("folded      397 ops: values known before the step"));
}

double step_time(const std::vector<std::string>& args) {
  std::vector<std::string> full = {"simulate", "--cluster", "k80x4", "--on", "gpu:1", "--json"};
  full.insert(full.end(), args.begin(), args.end());
  return parse_json(placer(full)).value("step_time_s", -1.0);
}

TEST(InspectSaveGraph, WritesTheGraphOfTheModeThatSimulatesLikeTheModel) {
  const std::string onnx = test::example("inception_v3.onnx");
  const std::string step = temp_path("inception.step.json"), forward = temp_path("inception.forward.json");
  Outcome saved = placer({"inspect", onnx, "--optimizer", "adam", "--save-graph", step});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  ASSERT_EQ(placer({"inspect", onnx, "--mode", "inference", "--save-graph", forward}).exit_code, 0);

  // The saved step keeps its Adam updates: inspect names them, and --optimizer no longer applies.
  nlohmann::json again = parse_json(placer({"inspect", step, "--json"}));
  ASSERT_TRUE(again.contains("training"));
  EXPECT_EQ(again["training"].value("ops", 0), 1257);
  EXPECT_EQ(again["training"].value("optimizer", ""), "adam");
  EXPECT_EQ(again.value("ops", 0), 663);

  const double from_onnx = step_time({"--model", onnx, "--optimizer", "adam"});
  EXPECT_GT(from_onnx, 0.0);
  EXPECT_EQ(step_time({"--model", step}), from_onnx);
  // --optimizer naming the step's own updates is harmless; naming another was ignored without a
  // word (the user believed the step took SGD updates): now an error naming an update op.
  EXPECT_EQ(step_time({"--model", step, "--optimizer", "adam"}), from_onnx);
  Outcome other = placer({"simulate", "--model", step, "--optimizer", "sgd", "--cluster", "k80x4", "--on", "gpu:0"});
  expect_clean_failure(other);
  EXPECT_THAT(other.err, HasSubstr("--optimizer sgd does not apply to '" + step + "': it holds a training step whose updates are its own"));
  EXPECT_THAT(other.err, HasSubstr("is of type AdamUpdate"));
  Outcome inspected = placer({"inspect", step, "--optimizer", "momentum"});  // inspect too (found by a review)
  expect_clean_failure(inspected);
  EXPECT_THAT(inspected.err, HasSubstr("--optimizer momentum does not apply"));
  // The forward graph: the same inference step, and the same training step derived from it.
  EXPECT_EQ(step_time({"--model", forward, "--mode", "inference"}), step_time({"--model", onnx, "--mode", "inference"}));
  EXPECT_EQ(step_time({"--model", forward, "--optimizer", "adam"}), from_onnx);

  Outcome inference = placer({"simulate", "--model", step, "--mode", "inference", "--cluster", "k80x4", "--on", "gpu:0"});
  EXPECT_EQ(inference.exit_code, 1);
  EXPECT_THAT(inference.err, HasSubstr("holds a training step"));
  Outcome resave = placer({"inspect", step, "--mode", "inference", "--save-graph", temp_path("forward-of-step.json")});
  EXPECT_EQ(resave.exit_code, 1);
  EXPECT_THAT(resave.err, HasSubstr("holds a training step ("));
  EXPECT_THAT(resave.err, HasSubstr("inference mode needs a forward graph"));
  // inspect --mode inference refuses such a file too (it printed the step's forward part, exit 0).
  Outcome summary = placer({"inspect", step, "--mode", "inference"});
  EXPECT_EQ(summary.exit_code, 1);
  EXPECT_THAT(summary.err, HasSubstr("inference mode needs a forward graph"));
  std::remove(step.c_str());
  std::remove(forward.c_str());
}

TEST(InspectSaveGraph, AnUnwritablePathIsAnError) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--save-graph", "/nonexistent-dir/g.json"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("cannot write graph file '/nonexistent-dir/g.json'"));
  EXPECT_EQ(run.out, "") << "refused before the import and the summary (it failed after them: a QA pass)";
}

TEST(InspectJson, AdamKeepsTwoStateCopiesPerParameter) {
  nlohmann::json report = parse_json(placer({"inspect", test::example("inception_v3.onnx"), "--json", "--optimizer", "adam"}));
  ASSERT_TRUE(report.contains("training"));
  EXPECT_EQ(report["training"].value("optimizer", ""), "adam");
  EXPECT_EQ(report["training"].value("optimizer_state_bytes", std::uint64_t{0}), 2u * report.value("param_bytes", std::uint64_t{0}));
}

TEST(InspectText, SaysWhichInputsItTookAsData) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx")});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("data inputs input.1 [32,3,299,299] float32"));
  EXPECT_TRUE(run.err.empty()) << run.err;
}

// A Loop unrolled on import shows as modules Loop_s.0, Loop_s.1, ...: inspect says why.
TEST(InspectText, SaysWhatTheImportDecidedBeforeTheStep) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("loop");
  auto typed = [](onnx::ValueInfoProto* vi, const std::string& name, std::vector<std::int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    auto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
    for (auto d : dims) shape->add_dim()->set_dim_value(d);
  };
  typed(g->add_input(), "x", {3, 4});
  typed(g->add_output(), "s", {3, 4});
  auto* three = g->add_initializer();
  three->set_name("three"), three->set_data_type(onnx::TensorProto::INT64), three->add_int64_data(3);
  auto* loop = g->add_node();
  loop->set_op_type("Loop"), loop->set_name("/Loop_s"), loop->add_input("three"), loop->add_input(""), loop->add_input("x");
  loop->add_output("s");
  auto* a = loop->add_attribute();
  a->set_name("body"), a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto& body = *a->mutable_g();
  body.set_name("body");
  typed(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  typed(body.add_input(), "cond_in", {}, onnx::TensorProto::BOOL);
  typed(body.add_input(), "s_in", {3, 4});
  auto* add = body.add_node();
  add->set_op_type("Add"), add->set_name("/body/Add"), add->add_input("s_in"), add->add_input("x"), add->add_output("s_out");
  auto* cond = body.add_node();
  cond->set_op_type("Identity"), cond->set_name("/body/cond"), cond->add_input("cond_in"), cond->add_output("cond_out");
  typed(body.add_output(), "cond_out", {}, onnx::TensorProto::BOOL);
  typed(body.add_output(), "s_out", {3, 4});
  const std::string model = temp_path("loop.onnx");
  {
    std::ofstream out(model, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  Outcome text = placer({"inspect", model, "--mode", "inference"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("decided     before the step: 1 Loop/Scan unrolled (3 iterations in all, each a module <node>.<i>)\n"));
  EXPECT_THAT(text.out, HasSubstr("Loop_s"));
  const nlohmann::json report = parse_json(placer({"inspect", model, "--mode", "inference", "--json"}));
  EXPECT_EQ(report.value("decided_before_step", nlohmann::json()),
            (nlohmann::json{{"ifs", 0}, {"loops", 1}, {"iterations", 3}, {"sequence_ops", 0}}));
  // Nothing decided, nothing said.
  EXPECT_THAT(placer({"inspect", test::example("inception_v3.onnx")}).out, Not(HasSubstr("decided")));
  EXPECT_FALSE(parse_json(placer({"inspect", test::example("inception_v3.onnx"), "--json"})).contains("decided_before_step"));
}

// ---- --data-inputs ------------------------------------------------------------------------------

TEST(DataInputs, NmtTakesBothTokenInputsAsDataByDefault) {
  REQUIRE_SHARED_MODELS();
  nlohmann::json report = parse_json(placer({"inspect", test::shared_model("nmt"), "--json", "--mode", "inference"}));
  EXPECT_EQ(report.value("data_inputs", nlohmann::json()), nlohmann::json::array({"input.1", "input"}));
}

TEST(DataInputs, OverrideMakesExactlyTheNamedInputsData) {
  REQUIRE_SHARED_MODELS();
  nlohmann::json by_use = parse_json(placer({"inspect", test::shared_model("nmt"), "--json", "--mode", "inference"}));
  nlohmann::json forced = parse_json(
      placer({"inspect", test::shared_model("nmt"), "--json", "--mode", "inference", "--data-inputs", "input.1"}));
  EXPECT_EQ(forced.value("data_inputs", nlohmann::json()), nlohmann::json::array({"input.1"}));
  // The other token input is an integer tensor: not data, and not a trainable parameter either.
  EXPECT_EQ(forced.value("params", std::uint64_t{0}), by_use.value("params", std::uint64_t{1}));
}

TEST(DataInputs, OverrideTakesACommaSeparatedList) {
  REQUIRE_SHARED_MODELS();
  nlohmann::json report = parse_json(
      placer({"inspect", test::shared_model("nmt"), "--json", "--mode", "inference", "--data-inputs", "input,input.1"}));
  EXPECT_EQ(report.value("data_inputs", nlohmann::json()), nlohmann::json::array({"input.1", "input"}));
}

// y = W @ x, W stored in the file and x the graph's one input: x is read as a matrix product's
// right operand, which the input rules take for a weight, so with no data input left the step
// trains x. Said on stderr, by every
// command that reads the model for training; not with --data-inputs x, nor in inference mode
// (found by a review: nothing warned).
TEST(DataInputs, AModelWithNoDataInputIsWarnedAbout) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("wx");
  auto typed = [](onnx::ValueInfoProto* vi, const std::string& name, std::vector<std::int64_t> dims) {
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  };
  auto* w = g->add_initializer();  // a weight stored in the file
  w->set_name("W"), w->set_data_type(onnx::TensorProto::FLOAT), w->add_dims(64), w->add_dims(128);
  w->set_raw_data(std::string(64 * 128 * 4, '\0'));
  typed(g->add_input(), "x", {128, 32});
  typed(g->add_output(), "y", {64, 32});
  auto* n = g->add_node();
  n->set_op_type("MatMul"), n->set_name("/fc/MatMul"), n->add_input("W"), n->add_input("x"), n->add_output("y");
  const std::string model = temp_path("wx.onnx");
  {
    std::ofstream out(model, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"inspect", model}, {"simulate", "--model", model, "--cluster", "k80x2", "--on", "gpu:0"}}) {
    Outcome run = placer(command);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.err, HasSubstr("placer: warning: '" + model + "' has no data input")) << command[0];
    EXPECT_THAT(run.err, HasSubstr("--data-inputs")) << command[0];
    auto named = command;
    named.insert(named.end(), {"--data-inputs", "x"});
    run = placer(named);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.err, Not(HasSubstr("warning"))) << command[0];
    auto inference = command;
    inference.insert(inference.end(), {"--mode", "inference"});
    run = placer(inference);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.err, Not(HasSubstr("warning"))) << command[0];
  }
  Outcome inspect = placer({"inspect", model});
  EXPECT_THAT(inspect.out, HasSubstr("data inputs (none)"));
  EXPECT_THAT(inspect.out, HasSubstr("2 update"));  // W and x
}

TEST(DataInputs, NamingSomethingThatIsNotAGraphInputIsAnError) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--data-inputs", "no_such_input"});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("no_such_input"));
}

// ---- bad input: one line on stderr, a non-zero exit, never a crash or a hang ---------------------

TEST(BadInput, MissingFile) {
  Outcome run = placer({"inspect", temp_path("does_not_exist.onnx")});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("does_not_exist.onnx"));
}

TEST(BadInput, EmptyFile) {
  Outcome run = placer({"inspect", write_file("empty.onnx", "")});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("empty"));
}

TEST(BadInput, TruncatedOnnx) {
  std::string model = read_file(test::example("inception_v3.onnx"));
  ASSERT_GT(model.size(), 20000u);
  Outcome run = placer({"inspect", write_file("truncated.onnx", model.substr(0, 20000))});
  expect_clean_failure(run);
}

TEST(BadInput, RandomBytes) {
  std::mt19937 rng(7);
  std::string bytes(65536, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
  Outcome run = placer({"inspect", write_file("random.onnx", bytes)});
  expect_clean_failure(run);
}

TEST(BadInput, MalformedGraphJson) {
  Outcome run = placer({"inspect", write_file("malformed.json", R"({"ops": [)")});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("not valid JSON"));
}

TEST(BadInput, GraphJsonWithACycle) {
  // a -> b -> a: each op reads the other's output.
  nlohmann::json graph = {
      {"format", "placer-graph"},
      {"version", 1},
      {"tensors", {{{"name", "ta"}, {"shape", {4}}}, {{"name", "tb"}, {"shape", {4}}}}},
      {"ops",
       {{{"name", "a"}, {"type", "Relu"}, {"inputs", {"tb"}}, {"outputs", {"ta"}}},
        {{"name", "b"}, {"type", "Relu"}, {"inputs", {"ta"}}, {"outputs", {"tb"}}}}}};
  Outcome run = placer({"inspect", write_file("cycle.json", graph.dump())});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("cycle"));
}

TEST(BadInput, GraphJsonDeclaringMoreForwardOpsThanItHolds) {
  nlohmann::json graph = {{"format", "placer-graph"},
                          {"version", 1},
                          {"forward_ops", 5},
                          {"tensors", {{{"name", "x"}, {"shape", {4}}, {"kind", "data"}}, {{"name", "y"}, {"shape", {4}}}}},
                          {"ops", {{{"name", "r"}, {"type", "Relu"}, {"inputs", {"x"}}, {"outputs", {"y"}}}}}};
  Outcome run = placer({"inspect", write_file("too_many_forward.json", graph.dump())});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("forward ops"));
}

TEST(BadInput, DimWithANonNumericValue) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--dim", "batch=abc"});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("--dim"));
}

TEST(BadInput, DimWithANonPositiveValue) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--dim", "batch=0"});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("--dim"));
}

TEST(BadInput, DimWithoutAValue) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--dim", "batch"});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("NAME=VALUE"));
}

// The same name twice took the last value without a word.
TEST(BadInput, DimGivenTwoValues) {
  Outcome run = placer({"inspect", test::example("inception_v3.onnx"), "--dim", "batch=4", "--dim", "batch=5"});
  expect_clean_failure(run);
  EXPECT_THAT(run.err, HasSubstr("--dim gives 'batch' two values (4 and 5)"));
}

// `placer inspect` of a model written into a named pipe by another thread.
Outcome inspect_through_pipe(const std::string& model) {
  const std::string fifo = temp_path("model.fifo");
  std::remove(fifo.c_str());
  if (mkfifo(fifo.c_str(), 0600) != 0) return Outcome{-1, "", "mkfifo failed"};
  const std::string bytes = read_file(model);
  std::thread writer([&] {
    // Waits (up to 60 s) for placer to open the pipe, then writes the model into it.
    int fd = -1;
    for (int i = 0; i < 6000 && fd < 0; ++i) {
      fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd < 0) usleep(10'000);
    }
    if (fd < 0) return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    for (std::size_t at = 0; at < bytes.size();) {
      const ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    close(fd);
  });
  Outcome run = placer({"inspect", fifo});
  writer.join();
  std::remove(fifo.c_str());
  return run;
}

// A model read from a pipe (`placer inspect <(cat model.onnx)`): telling graph JSON from ONNX by
// its first character must not take bytes from a pipe (found by a review of that change).
TEST(Inspect, ReadsAModelFromAPipe) {
  Outcome run = inspect_through_pipe(test::example("cifarnet.onnx"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("forward     12 ops"));
}

// A model of several megabytes spans several of the blocks the reader takes (1 MB first, then
// doubling) and is parsed across them: the same summary as from the file, pipe or not.
TEST(Inspect, AModelSpanningSeveralReadBlocksImportsWhole) {
  if (!test::have_shared_models()) GTEST_SKIP() << "shared models not found";
  const std::string model = test::shared_model("nmt4");  // about 5 MB
  ASSERT_GT(std::filesystem::file_size(model), std::uintmax_t{4} << 20);
  Outcome file = placer({"inspect", model}), pipe = inspect_through_pipe(model);
  ASSERT_EQ(file.exit_code, 0) << file.err;
  ASSERT_EQ(pipe.exit_code, 0) << pipe.err;
  EXPECT_THAT(file.out, HasSubstr("forward     4163 ops"));
  // The first line names the file.
  EXPECT_EQ(file.out.substr(file.out.find('\n')), pipe.out.substr(pipe.out.find('\n')));
}

// ---- the documentation's examples ----------------------------------------------------------------

// The first ```json block after `heading` in a file of docs/.
// The first block fenced as ```FENCE after `marker` in docs/DOC ("" when there is none).
std::string doc_block(const std::string& doc, const std::string& marker, const std::string& fence = "json") {
  std::string text = read_file(std::string(PLACER_EXAMPLES) + "/../docs/" + doc);
  std::size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  const std::string open = "```" + fence + "\n";
  std::size_t begin = text.find(open, at);
  if (begin == std::string::npos) return "";
  begin += open.size();
  std::size_t end = text.find("```", begin);
  return end == std::string::npos ? "" : text.substr(begin, end - begin);
}
std::string doc_json_block(const std::string& doc, const std::string& heading) { return doc_block(doc, heading); }

TEST(Docs, GraphJsonExampleLoads) {
  std::string example = doc_json_block("formats.md", "### Example: a tiny MLP");
  ASSERT_FALSE(example.empty()) << "no JSON example under the heading in docs/formats.md";
  Outcome run = placer({"inspect", write_file("mlp.graph.json", example)});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // Every line the page shows `inspect` printing is printed (the page said 13.32M FLOPs where
  // 13.31M were printed: a QA pass).
  const std::string shown = doc_block("formats.md", "`placer inspect mlp.graph.json` prints:", "");
  ASSERT_FALSE(shown.empty()) << "no printed block after the example in docs/formats.md";
  std::istringstream lines(shown);
  for (std::string line; std::getline(lines, line);) {
    if (line != "..." && !line.starts_with("model ")) {  // the file's name is the test's
      EXPECT_THAT(run.out, HasSubstr(line));
    }
  }
  // A graph JSON under another name is known by its first character (it was read as ONNX:
  // "protobuf parse failed").
  Outcome unnamed = placer({"inspect", write_file("mlp-graph.txt", "\n  " + example)});
  EXPECT_EQ(unnamed.exit_code, 0) << unnamed.err;
  EXPECT_THAT(unnamed.out, HasSubstr("forward     4 ops, 6.51M FLOPs"));
  // The ops and tensors the page shows of the saved training step are what placer writes (the
  // page showed a Gemm gradient with an input and without a field it no longer had: a docs audit).
  const std::string saved_shown = doc_block("formats.md", "What placer writes for the same graph's training step");
  ASSERT_FALSE(saved_shown.empty()) << "no saved training step in docs/formats.md";
  const std::string saved = test::temp_path("mlp.step.json");
  run = placer({"inspect", write_file("mlp.graph.json", example), "--optimizer", "momentum", "--save-graph", saved});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json step = nlohmann::json::parse(std::ifstream(saved));
  std::istringstream shown_lines(saved_shown);
  std::string object;
  int compared = 0;
  for (std::string line; std::getline(shown_lines, line);) {
    if (line.starts_with("  {")) object.clear();
    if (line.starts_with("  {") || !object.empty()) object += line;
    if (object.empty() || !(line.ends_with("},") || line.ends_with("}"))) continue;
    if (object.back() == ',') object.pop_back();
    const nlohmann::json shown_item = nlohmann::json::parse(object);
    const char* list = shown_item.contains("type") ? "ops" : "tensors";
    bool found = false;
    for (const nlohmann::json& item : step[list])
      if (item["name"] == shown_item["name"]) {
        EXPECT_EQ(item, shown_item) << list;
        found = true, ++compared;
      }
    EXPECT_TRUE(found) << shown_item["name"];
    object.clear();
  }
  EXPECT_EQ(compared, 4) << "three ops and a tensor are shown";
}

// Threads that cannot be started (a limit on processes or on address space) are an error saying
// so: local-search aborted (a vector of joinable threads destroyed) and the learned placers hung
// (threads waiting on a condition variable being destroyed); found by a review. Each thread
// reserves 8 MB of stack, so 4096 of them do not fit in 8 GB of address space.
TEST(Threads, ThreadsThatCannotStartAreAnErrorNotACrashOrAHang) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: it cannot start under ulimit -v";
#endif
  const std::string model = test::example("cifarnet.onnx");
  for (const std::vector<std::string>& algo : {std::vector<std::string>{"local-search", "--opt", "chains=4096", "--samples", "20000"},
                                              std::vector<std::string>{"colocrl", "--opt", "hidden=16", "--opt", "batch=4096", "--samples", "8"}}) {
    std::vector<std::string> args{"-c", "ulimit -v 8000000 && exec \"$0\" \"$@\"", test::placer_binary(), "place", "--model", model,
                                  "--cluster", "k80x4", "--threads", "4096", "--quiet", "--algo"};
    args.insert(args.end(), algo.begin(), algo.end());
    const auto run = test::placer_at("/bin/sh", args);
    EXPECT_EQ(run.exit_code, 1) << algo[0] << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr("threads (started ")) << algo[0];
    EXPECT_THAT(run.err, HasSubstr("ask for fewer with --threads")) << algo[0];
  }
}

}  // namespace
}  // namespace placer
