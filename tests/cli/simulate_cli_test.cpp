// `placer simulate`, `placer bounds` and `placer clusters` as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include <fmt/format.h>

#include "support/paths.hpp"
#include "support/run_placer.hpp"

namespace placer {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using test::placer;

std::string write(const std::string& name, const std::string& text) {
  std::string path = test::temp_path(name);
  std::ofstream(path) << text;
  return path;
}

const std::string kModel = test::example("inception_v3.onnx");

TEST(SimulateCli, JsonHasStepTimeFitsAndDevices) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_GT(j["step_time_s"].get<double>(), 0.0);
  EXPECT_TRUE(j["fits"].get<bool>());
  ASSERT_EQ(j["devices"].size(), 5u);
  EXPECT_EQ(j["devices"][1]["name"], "gpu:0");
  EXPECT_GT(j["devices"][1]["busy_s"].get<double>(), 0.0);
  EXPECT_GT(j["devices"][1]["peak_memory_bytes"].get<double>(), 0.0);
  EXPECT_GE(j["step_time_s"].get<double>(), j["lower_bound_s"].get<double>());
}

TEST(SimulateCli, APlacementFileReproducesItsSplit) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", test::example("inception_v3.k80x4.split.json"),
                     "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  for (int d = 1; d <= 4; ++d) EXPECT_GT(j["devices"][d]["ops"].get<int>(), 0) << d;
  EXPECT_GT(j["transfers"].get<int>(), 0);
}

TEST(SimulateCli, TraceIsAChromeTrace) {
  const std::string trace = test::temp_path("trace.json");
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", test::example("inception_v3.k80x4.split.json"),
                     "--trace", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(test::read_file(trace));
  std::size_t ops = 0, transfers = 0;
  // Read as Perfetto reads it: ts and dur each rounded to whole nanoseconds. Slices of one track
  // never overlap (back-to-back ones overlapped by a nanosecond; found by a review).
  std::map<int, std::vector<std::pair<long long, long long>>> slices;
  std::map<std::string, std::uint64_t> memory;  // counter track -> the most bytes it shows
  std::map<std::string, std::map<int, nlohmann::json>> metadata;  // "thread_name" / "thread_sort_index" -> tid -> args
  std::set<int> instant_tracks;  // tracks of ops that take no time
  for (const auto& e : j["traceEvents"]) {
    EXPECT_NE(e["pid"], 0) << "Perfetto gives pid 0 special handling";
    if (e["ph"] == "C") {
      std::uint64_t& most = memory[e["name"].get<std::string>()];
      most = std::max(most, e["args"]["bytes"].get<std::uint64_t>());
    }
    if (e["ph"] == "M" && e.contains("tid")) metadata[e["name"].get<std::string>()][e["tid"].get<int>()] = e["args"];
    if (e["ph"] != "X") continue;
    (e["cat"] == "transfer" ? transfers : ops)++;
    const long long ts = std::llround(e["ts"].get<double>() * 1e3), dur = std::llround(e["dur"].get<double>() * 1e3);
    if (dur > 0) slices[e["tid"].get<int>()].push_back({ts, ts + dur});
    else if (e["cat"] != "transfer") instant_tracks.insert(e["tid"].get<int>());
  }
  EXPECT_EQ(ops, 1257u);  // every op of the training step
  EXPECT_GT(transfers, 0u);
  // The process says what is drawn: model, placement, cluster (it named the cluster alone).
  EXPECT_EQ(metadata.count("process_name"), 0u);  // process metadata carries no tid
  std::string process;
  for (const auto& e : j["traceEvents"])
    if (e["name"] == "process_name") process = e["args"]["name"];
  EXPECT_EQ(process, "simulated: inception_v3.onnx, " + test::example("inception_v3.k80x4.split.json") + " on k80x4");
  // Every track is named and sorted; ops that take no time have tracks of their own, where no op
  // that takes time could draw them as its children (a Reshape inside the MatMul running then).
  for (const auto& [tid, track] : slices) {
    EXPECT_TRUE(metadata["thread_name"].contains(tid)) << tid;
    EXPECT_TRUE(metadata["thread_sort_index"].contains(tid)) << tid;
  }
  ASSERT_FALSE(instant_tracks.empty());
  for (int tid : instant_tracks) {
    EXPECT_FALSE(slices.contains(tid)) << metadata["thread_name"][tid];
    EXPECT_THAT(metadata["thread_name"][tid]["name"].get<std::string>(), ::testing::EndsWith(": no time"));
    EXPECT_LT(metadata["thread_sort_index"][tid]["sort_index"].get<int>(), 5);  // beside its device, above the links
  }
  std::size_t touching = 0;
  for (auto& [tid, track] : slices) {
    std::sort(track.begin(), track.end());
    for (std::size_t i = 1; i < track.size(); ++i) {
      EXPECT_LE(track[i - 1].second, track[i].first) << "track " << tid << " slice " << i;
      touching += track[i - 1].second == track[i].first;
    }
  }
  EXPECT_GT(touching, 100u) << "back-to-back slices, which the check above is about";
  // A memory counter per device the placement uses, reaching the device's peak (within one event's
  // instants) as `placer simulate --json` reports it.
  auto json_run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", test::example("inception_v3.k80x4.split.json"), "--json"});
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const auto result = nlohmann::json::parse(json_run.out);
  const auto& devices = result.contains("placements") ? result["placements"][0]["devices"] : result["devices"];
  std::size_t used = 0;
  for (const auto& d : devices) {
    const auto peak = d["peak_memory_bytes"].get<std::uint64_t>();
    if (peak == 0) continue;
    ++used;
    const auto it = memory.find("memory " + d["name"].get<std::string>());
    ASSERT_NE(it, memory.end()) << d["name"];
    EXPECT_LE(it->second, peak);
    EXPECT_GE(static_cast<double>(it->second), 0.99 * static_cast<double>(peak)) << d["name"];
  }
  EXPECT_GT(used, 1u);
  std::remove(trace.c_str());
}

// Options that cannot go together fail before anything is simulated or printed, as usage errors
// (exit 2); a file that cannot be written is an error (1).
TEST(SimulateCli, ConflictingOptionsFailFirst) {
  auto random_on = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "3", "--on", "gpu:0"});
  EXPECT_EQ(random_on.exit_code, 2);
  EXPECT_THAT(random_on.err, HasSubstr("--random simulates random placements of its own"));
  auto two_traced = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0,gpu:1", "--trace", test::temp_path("t.json")});
  EXPECT_EQ(two_traced.exit_code, 2);
  EXPECT_THAT(two_traced.err, HasSubstr("--trace needs exactly one placement"));
  EXPECT_EQ(two_traced.out, "");
  auto unwritable = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--trace", "/nonexistent/dir/t.json"});
  EXPECT_EQ(unwritable.exit_code, 1);
  EXPECT_THAT(unwritable.err, HasSubstr("cannot write trace file"));
  EXPECT_EQ(unwritable.out, "");
}

// Tables stay aligned with long device names and long placement paths (rows were pushed out of
// line: a QA note).
TEST(SimulateCli, TablesStayAlignedWithLongNames) {
  nlohmann::json cluster = nlohmann::json::parse(placer({"clusters", "--json"}).out);
  nlohmann::json k80;
  for (const auto& c : cluster) if (c["name"] == "k80x2") k80 = c;
  ASSERT_FALSE(k80.is_null());
  const std::string renamed = "node-zero/accelerator-0";
  for (auto& d : k80["devices"]) if (d["name"] == "gpu:0") d["name"] = renamed;
  for (auto& l : k80["links"]) for (const char* end : {"a", "b"}) if (l[end] == "gpu:0") l[end] = renamed;
  const std::string dir = test::temp_path("a-directory-whose-name-is-long-enough-to-push-a-column");
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/cluster.json", placement = dir + "/all-on-the-first-gpu.json";
  std::ofstream(file) << k80.dump();
  std::ofstream(placement) << R"({"default": ")" << renamed << R"("})";
  auto run = placer({"simulate", "--model", kModel, "--cluster", file, "--on", renamed + ",cpu:0", "--placement", placement});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> lines;
  std::istringstream in(run.out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Each table's lines end in its last, right-aligned column: equally long when aligned.
  auto same_lengths = [&](const std::string& header_start, std::size_t rows) {
    const auto header = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.starts_with(header_start); });
    ASSERT_NE(header, lines.end()) << run.out;
    ASSERT_GE(static_cast<std::size_t>(lines.end() - header), rows + 1) << run.out;
    for (std::size_t i = 1; i <= rows; ++i) EXPECT_EQ(header[i].size(), header->size()) << header[i] << "\n" << *header;
  };
  same_lengths("  device ", 1);   // all on the renamed GPU: one row
  same_lengths("placement  ", 3);  // the summary: three placements
  std::filesystem::remove_all(dir);
}

// A device with two streams gets a track per stream: slices on one track never overlap (Chrome's
// format wants them nested), and utilisation is of both streams.
TEST(SimulateCli, EachStreamHasATrack) {
  nlohmann::json cluster = nlohmann::json::parse(placer({"clusters", "--json"}).out);
  nlohmann::json k80;
  for (const auto& c : cluster) if (c["name"] == "k80x2") k80 = c;
  ASSERT_FALSE(k80.is_null());
  for (auto& d : k80["devices"]) d["streams"] = 2;
  const std::string file = test::temp_path("streams.json"), trace = test::temp_path("streams-trace.json");
  std::ofstream(file) << k80.dump();
  auto run = placer({"simulate", "--model", kModel, "--cluster", file, "--on", "gpu:0", "--trace", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<int, std::vector<std::pair<double, double>>> slices;  // tid -> (start, end) of ops that take time
  std::map<int, std::string> names;
  const nlohmann::json written = nlohmann::json::parse(test::read_file(trace));
  for (const auto& e : written["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X" && e["cat"] != "transfer" && e["dur"].get<double>() > 0)
      slices[e["tid"].get<int>()].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  }
  EXPECT_EQ(slices.size(), 2u);
  for (auto& [tid, list] : slices) {
    EXPECT_THAT(names[tid], ::testing::StartsWith("gpu:0"));
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) EXPECT_LE(list[i - 1].second, list[i].first + 1e-6) << names[tid];
  }
  EXPECT_THAT(run.out, ::testing::Not(::testing::ContainsRegex("(10[1-9]|1[1-9][0-9]|[2-9][0-9][0-9])%")));  // at most 100%
  std::remove(file.c_str());
  std::remove(trace.c_str());
}

// A time just under a unit prints in the next unit once rounded: 0.99996 ms as 1.00 ms, not
// 1000.0 us (found by a review).
TEST(SimulateCli, TimesRoundedUpToAUnitPrintInThatUnit) {
  const std::string graph = write("one_op.json", R"({"format": "placer-graph", "version": 1, "name": "one",
      "tensors": [{"name": "x", "shape": [1], "kind": "data"}, {"name": "y", "shape": [1]}],
      "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})");
  for (const auto& [overhead, shown, not_shown] : {std::tuple{"0.00099996", "1.00 ms", "1000.0 us"}, std::tuple{"0.9999996", "1.000 s", "1000.00 ms"}}) {
    const std::string cluster = write("one_cpu.json", std::string(R"({"format": "placer-cluster", "version": 1, "name": "c", "devices":
        [{"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10, "op_overhead_s": )") +
                                                          overhead + "}], \"links\": []}");
    auto run = placer({"simulate", "--model", graph, "--cluster", cluster, "--mode", "inference", "--on", "cpu:0"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr(shown)) << run.out;
    EXPECT_THAT(run.out, ::testing::Not(HasSubstr(not_shown))) << run.out;
  }
}

// A cluster file's efficiency_by_type key that prices nothing and that placer knows nowhere (a
// misspelt op type) is named in a warning; the simulation runs as without it.
TEST(SimulateCli, WarnsOfAnEfficiencyTypeThatPricesNothing) {
  const std::string graph = write("one_relu.json", R"({"format": "placer-graph", "version": 1, "name": "one",
      "tensors": [{"name": "x", "shape": [1], "kind": "data"}, {"name": "y", "shape": [1]}],
      "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})");
  const std::string device = R"({"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e12, "memory_bandwidth": 1e11,
      "memory_bytes": 1e10, "op_overhead_s": 1e-6, "efficiency_by_type": {"Maxpool": {"compute": 0.01}, "MaxPool": {"compute": 0.01}})";
  const std::string cluster = write("typo_cpu.json", R"({"format": "placer-cluster", "version": 1, "name": "typo", "devices": [)" + device + "}], \"links\": []}");
  auto run = placer({"simulate", "--model", graph, "--cluster", cluster, "--mode", "inference", "--on", "cpu:0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("placer: warning: cluster 'typo': efficiency_by_type names 'Maxpool' (cpu:0), which no op of 'one' has and "
                                 "no op type placer knows: it prices nothing (misspelt?)"));
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("'MaxPool'")));
}

TEST(SimulateCli, RandomReportsThroughput) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "5", "--seed", "3", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GT(nlohmann::json::parse(run.out)["ops_per_second"].get<double>(), 0.0);
}

TEST(SimulateCli, BoundsArePositive) {
  auto run = placer({"bounds", "--model", kModel, "--cluster", "k80x4", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_GT(j["critical_path_s"].get<double>(), 0.0);
  EXPECT_GT(j["total_work_s"].get<double>(), 0.0);
}

// Bounds hold whatever memory a placement may use: a memory option says so on stderr, with --json
// too (the note came after the JSON's early return: a QA pass).
TEST(SimulateCli, BoundsNoteThatMemoryOptionsChangeNothing) {
  for (bool json : {false, true}) {
    std::vector<std::string> args{"bounds", "--model", kModel, "--cluster", "k80x4", "--memory-fraction", "0.01"};
    if (json) args.push_back("--json");
    auto run = placer(args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.err, HasSubstr("the bounds do not depend on memory: --memory-fraction changes nothing")) << json;
  }
  // Both named when both are given, each also at its default value (a QA pass: only the first was,
  // and neither at its default).
  auto both = placer({"bounds", "--model", kModel, "--cluster", "k80x4", "--memory-fraction", "0.5", "--gradient-sums", "out-of-place"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_THAT(both.err, HasSubstr("--memory-fraction and --gradient-sums change nothing here"));
  auto defaults = placer({"bounds", "--model", kModel, "--cluster", "k80x4", "--gradient-sums", "in-place"});
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err;
  EXPECT_THAT(defaults.err, HasSubstr("--gradient-sums changes nothing here"));
  auto none = placer({"bounds", "--model", kModel, "--cluster", "k80x4"});
  EXPECT_EQ(none.err, "");
}

// Byte counts summed over transfers are written as the integers they are, as every other byte
// count (they were written 130678784.0: a QA pass), and add up to the total.
TEST(SimulateCli, JsonChannelBytesAreIntegers) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", test::example("inception_v3.k80x4.split.json"),
                     "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  ASSERT_TRUE(j["transfer_bytes"].is_number_unsigned()) << j["transfer_bytes"];
  ASSERT_GT(j["channels"].size(), 0u);
  for (const auto& ch : j["channels"]) EXPECT_TRUE(ch["bytes"].is_number_unsigned()) << ch;
}

// Byte counts past 2^63 (six copies of a 2^61-byte input): llround overflowed and wrote 2^63 (a
// QA pass); below 2^64 they stay integers.
TEST(SimulateCli, JsonByteCountsPast2To63AreExact) {
  // x, 2^61 bytes, read on cpu:0 and on `copies` GPUs of k80x8.
  auto transfer_bytes = [](int copies) {
    nlohmann::json g = {{"format", "placer-graph"}, {"version", 1}, {"name", "big"}, {"outputs", nlohmann::json::array()}};
    g["tensors"] = {{{"name", "x"}, {"shape", {std::int64_t{1} << 58}}, {"kind", "data"}, {"dtype", "float64"}}};
    nlohmann::json placement = {{"default", "cpu:0"}, {"devices", nlohmann::json::object()}};
    for (int i = 0; i <= copies; ++i) {
      const std::string out = "y" + std::to_string(i), op = "op" + std::to_string(i);
      g["tensors"].push_back({{"name", out}, {"shape", {1}}});
      g["ops"].push_back({{"name", op}, {"type", "Foo"}, {"inputs", {"x"}}, {"outputs", {out}}, {"flops", 1}, {"class", "elementwise"}});
      g["outputs"].push_back(out);
      if (i > 0) placement["devices"][op] = "gpu:" + std::to_string(i - 1);
    }
    auto run = placer({"simulate", "--model", write("big.json", g.dump()), "--cluster", "k80x8", "--mode", "inference", "--placement",
                       write("big-placement.json", placement.dump()), "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.exit_code == 0 ? nlohmann::json::parse(run.out).at("transfer_bytes") : nlohmann::json();
  };
  const nlohmann::json six = transfer_bytes(6);
  ASSERT_TRUE(six.is_number_unsigned()) << six;
  EXPECT_EQ(six.get<std::uint64_t>(), 6 * (std::uint64_t{1} << 61));
  // 2^64 and past: the number as a double (no integer type of JSON's readers holds it).
  const nlohmann::json eight = transfer_bytes(8);
  ASSERT_TRUE(eight.is_number_float()) << eight;
  EXPECT_EQ(eight.get<double>(), 0x1p64);
}

// A step whose only op reads a constant is done before the step: nothing runs, and the critical
// path is empty (it named the folded op, which has no slice and counts on no device: a QA pass).
TEST(SimulateCli, NothingRunsNoCriticalPath) {
  const std::string graph = write("only_constant.json", R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "c", "shape": [4], "kind": "constant"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "r", "type": "Relu", "inputs": ["c"], "outputs": ["y"]}], "outputs": ["y"]})");
  auto run = placer({"simulate", "--model", graph, "--cluster", "k80x2", "--mode", "inference", "--on", "gpu:0", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["step_time_s"], 0.0);
  EXPECT_EQ(j["critical_path"].size(), 0u) << j["critical_path"];
  for (const auto& d : j["devices"]) EXPECT_EQ(d["ops"], 0) << d;
}

// A step of aliases only takes 0 s on every device: compare's ratios have nothing to divide by and
// say so ("-", null) instead of printing nan and inf; the single device that fits is named.
TEST(CompareCli, AStepOfNoTimeHasNoRatios) {
  const std::string graph = write("aliases.json", R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "a", "type": "Identity", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})");
  auto json = placer({"compare", "--model", graph, "--cluster", "k80x2", "--mode", "inference", "--algos", "single,round-robin", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["single_device_step_time_s"], 0.0);
  EXPECT_EQ(j["best"], "single");
  EXPECT_TRUE(j["rows"][0]["speedup_over_single"].is_null());
  EXPECT_TRUE(j["rows"][0]["gap_to_lower_bound"].is_null());
  auto text = placer({"compare", "--model", graph, "--cluster", "k80x2", "--mode", "inference", "--algos", "single,round-robin"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("nanx")));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("infx")));
  EXPECT_THAT(text.out, ::testing::Not(HasSubstr("none fits")));
  // Nor does place compare it with one device ("-nanx as fast as this placement": a QA pass).
  auto place = placer({"place", "--model", graph, "--cluster", "k80x2", "--mode", "inference", "--algo", "heft"});
  ASSERT_EQ(place.exit_code, 0) << place.err;
  EXPECT_THAT(place.out, ::testing::Not(HasSubstr("nan")));
  EXPECT_THAT(place.out, ::testing::Not(HasSubstr("alone")));
}

// One Relu of `elements` floats, data in, graph output out.
std::string one_relu_graph(const std::string& file, const std::string& elements) {
  return write(file, R"({"format": "placer-graph", "version": 1, "name": "relu",
    "tensors": [{"name": "x", "shape": [)" + elements + R"(], "kind": "data"}, {"name": "y", "shape": [)" + elements + R"(]}],
    "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})");
}

// A model without parameters has nothing to train: its "training step" is the forward pass alone,
// which every command that reads it for training says (it was silent); not in inference mode.
TEST(SimulateCli, AModelWithoutParametersIsWarnedAboutInTraining) {
  const std::string graph = one_relu_graph("no_params.json", "4");
  auto training = placer({"simulate", "--model", graph, "--cluster", "k80x2", "--on", "gpu:0"});
  ASSERT_EQ(training.exit_code, 0) << training.err;
  EXPECT_THAT(training.err, HasSubstr("placer: warning: '" + graph + "' has no parameters, so its training step is the forward pass alone"));
  EXPECT_THAT(training.err, HasSubstr("tensors of \"kind\": \"parameter\"")) << "a graph JSON's advice: its tensors' kind";
  // A graph JSON with parameters and no data: its advice is the tensors' kind (--data-inputs is for
  // ONNX models only; a QA pass).
  const std::string no_data = write("no_data.json", R"({"format": "placer-graph", "version": 1, "name": "wx",
    "tensors": [{"name": "w", "shape": [4, 4], "kind": "parameter"}, {"name": "x", "shape": [4, 4], "kind": "constant"}, {"name": "y", "shape": [4, 4]}],
    "ops": [{"name": "mm", "type": "MatMul", "inputs": ["w", "x"], "outputs": ["y"]}], "outputs": ["y"]})");
  const auto unfed = placer({"simulate", "--model", no_data, "--cluster", "k80x2", "--on", "gpu:0"});
  ASSERT_EQ(unfed.exit_code, 0) << unfed.err;
  EXPECT_THAT(unfed.err, HasSubstr("has no data input (no tensor of \"kind\": \"data\")"));
  EXPECT_THAT(unfed.err, Not(HasSubstr("--data-inputs")));
  auto inspect = placer({"inspect", graph});
  EXPECT_THAT(inspect.err, HasSubstr("has no parameters"));
  auto inference = placer({"simulate", "--model", graph, "--cluster", "k80x2", "--on", "gpu:0", "--mode", "inference"});
  ASSERT_EQ(inference.exit_code, 0) << inference.err;
  EXPECT_THAT(inference.err, ::testing::Not(HasSubstr("warning")));
}

// A slow CPU with 1 TB and a fast GPU with 1 GB, joined by `switches` and `links` (JSON lists).
std::string cpu_and_small_gpu(const std::string& file, const std::string& switches, const std::string& links) {
  return write(file, R"({"format": "placer-cluster", "version": 1, "name": "c", "devices": [
    {"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e11, "memory_bandwidth": 1e10, "memory_bytes": 1e12, "op_overhead_s": 1e-5},
    {"name": "gpu:0", "kind": "gpu", "model": "g", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 1e9, "op_overhead_s": 1e-5}],
    "switches": )" + switches + R"(, "links": )" + links + "}");
}

// A placement that overflows a device gets no ratios: its step time on the fast small GPU would
// otherwise show as a 100x speedup over the one device that fits, the slow CPU (found by a review:
// a non-fitting expert split topped a table at 11.76x).
TEST(CompareCli, APlacementThatDoesNotFitHasNoRatios) {
  const std::string graph = one_relu_graph("big_relu.json", "300000000");  // 1.2 GB in, 1.2 GB out
  const std::string cluster =
      cpu_and_small_gpu("cpu_small_gpu.json", "[]", R"([{"a": "cpu:0", "b": "gpu:0", "bandwidth": 1e10, "latency_s": 1e-5}])");
  const std::vector<std::string> args = {"compare", "--model", graph, "--cluster", cluster, "--mode", "inference", "--algos", "single,round-robin", "--quiet"};
  auto json_args = args;
  json_args.push_back("--json");
  auto json = placer(json_args);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_TRUE(j["rows"][0]["fits"].get<bool>());  // single: the CPU
  EXPECT_DOUBLE_EQ(j["rows"][0]["speedup_over_single"].get<double>(), 1.0);
  EXPECT_TRUE(j["rows"][0]["gap_to_lower_bound"].is_number());
  EXPECT_FALSE(j["rows"][1]["fits"].get<bool>());  // round-robin: every op on the GPU, over its 1 GB
  EXPECT_LT(j["rows"][1]["step_time_s"].get<double>(), j["rows"][0]["step_time_s"].get<double>() / 10);
  EXPECT_TRUE(j["rows"][1]["speedup_over_single"].is_null());
  EXPECT_TRUE(j["rows"][1]["gap_to_lower_bound"].is_null());
  EXPECT_EQ(j["best"], "single");
  auto text = placer(args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, ::testing::ContainsRegex("round-robin +[0-9.]+ ms +- +- +NO")) << text.out;
  EXPECT_THAT(text.out, ::testing::ContainsRegex("gpu:0 [0-9.]+ GiB \\(over by [0-9.]+ [MG]iB\\)")) << text.out;  // where, by how much
}

// METIS prints with printf when it cannot bisect a part (Inception-V3's op groups into 64 parts);
// on stdout that broke `--json` (found by a review). Now its words are in the note.
TEST(PlaceCli, MetisMessagesStayOffStdout) {
  std::string devices, links;
  for (int i = 0; i < 64; ++i) {
    devices += fmt::format(R"({}{{"name": "gpu:{}", "kind": "gpu", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 17179869184, "op_overhead_s": 1e-5}})",
                           i ? ", " : "", i);
    links += fmt::format(R"({}{{"a": "gpu:{}", "b": "sw", "bandwidth": 1e10, "latency_s": 1e-6}})", i ? ", " : "", i);
  }
  const std::string cluster = write("gpus64.json", R"({"format": "placer-cluster", "version": 1, "name": "gpus64", "devices": [)" + devices +
                                                       R"(], "switches": ["sw"], "links": [)" + links + "]}");
  auto run = placer({"place", "--model", kModel, "--cluster", cluster, "--algo", "metis", "--quiet", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_THAT(run.out, StartsWith("{")) << run.out.substr(0, 300);
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_THAT(j["note"].get<std::string>(), HasSubstr("METIS said (a part it could not split stays empty): Cannot bisect"));
  EXPECT_THAT(run.err, Not(HasSubstr("Cannot bisect")));
}

// A placement slower than the fastest one-device placement says so (m-ETF with devices=all on
// h100-box put NMT's decoder on the CPU, twice as slow as the GPU alone, and said nothing).
TEST(PlaceCli, APlacementSlowerThanOneDeviceSaysSo) {
  auto random = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "random", "--opt", "devices=all", "--seed", "1"});
  ASSERT_EQ(random.exit_code, 0) << random.err;
  EXPECT_THAT(random.out, ContainsRegex("every op on gpu:[0-3] alone: step [0-9.]+ [mu]?s, [0-9.]+x as fast as this placement")) << random.out;
  auto single = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "single"});
  ASSERT_EQ(single.exit_code, 0) << single.err;
  EXPECT_THAT(single.out, Not(HasSubstr("alone: step"))) << single.out;
  auto json = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "single", "--json", "--quiet"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["best_one_device"]["step_time_s"].get<double>(), j["step_time_s"].get<double>());
  EXPECT_THAT(j["best_one_device"]["device"].get<std::string>(), StartsWith("gpu:"));
}

// When every start of local-search fails, the error says why, once per reason (it said only "every
// start algorithm failed", found by a review): here two links of 1e308 s make a route's latency
// overflow, which every start's simulator refuses.
TEST(PlaceCli, LocalSearchSaysWhyEveryStartFailed) {
  const std::string graph = one_relu_graph("one_relu.json", "3000");
  const std::string cluster = cpu_and_small_gpu("slow_switch.json", R"(["sw"])",
                                                R"([{"a": "cpu:0", "b": "sw", "bandwidth": 1e10, "latency_s": 1e308},
                                                    {"a": "gpu:0", "b": "sw", "bandwidth": 1e10, "latency_s": 1e308}])");
  auto run = placer({"place", "--model", graph, "--cluster", cluster, "--mode", "inference", "--algo", "local-search", "--quiet"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("every start algorithm failed (m-sct, heft, m-etf, critical-path, scotch, metis, expert, single: "
                                 "cluster 'c': sending 12000 bytes from cpu:0 to gpu:0 would take longer than a double can hold "
                                 "(route latency inf s"))
      << run.err;
}

// A profile measured on another model matches none of this one's ops and was used silently (found
// by a review): now a warning says so. One that times an op of the model says nothing.
TEST(SimulateCli, AProfileOfAnotherModelIsWarnedAbout) {
  const std::string cifarnet = test::example("cifarnet.onnx");
  auto profile = [](const std::string& op) {
    return R"({"format": "placer-profile", "version": 1, "times_s": {"gpu": {"ops": {")" + op + R"(": 0.001}, "signatures": {}}}})";
  };
  const std::string other = write("other.profile.json", profile("/layer4/layer4.2/conv3/Conv"));
  auto run = placer({"simulate", "--model", cifarnet, "--cluster", "k80x4", "--on", "gpu:0", "--profile", other});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("placer: warning: the profile '" + other + "' times none of the forward or backward ops of '" + cifarnet + "'"));
  EXPECT_THAT(run.err, Not(HasSubstr("update ops")));
  // Its times of update ops apply all the same: said (the warning read as if nothing of it did: a QA pass).
  const std::string updates = write("updates.profile.json", profile("update/conv1.weight"));
  run = placer({"simulate", "--model", cifarnet, "--cluster", "k80x4", "--on", "gpu:0", "--profile", updates});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("times none of the forward or backward ops"));
  EXPECT_THAT(run.err, HasSubstr("(the profile's times of update ops, whose signatures are parameters' shapes, apply)"));
  const std::string own = write("own.profile.json", profile("/conv1/Conv"));
  run = placer({"simulate", "--model", cifarnet, "--cluster", "k80x4", "--on", "gpu:0", "--profile", own});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("warning"))) << run.err;
}

// A profile whose update ops were timed with another optimizer's update type: their times do not
// apply, and the warning says which --optimizer would use them (nothing was said: a review).
TEST(SimulateCli, AProfileOfAnotherOptimizerIsWarnedAbout) {
  const std::string profile = write("adam.profile.json", R"J({"format": "placer-profile", "version": 1,
      "times_s": {"cpu": {"ops": {"update/conv1.weight": 0.001}}}, "op_signatures": {"update/conv1.weight": "AdamUpdate(64x3x5x5)"}})J");
  auto sgd = placer({"simulate", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "--on", "cpu:0", "--profile", profile});
  ASSERT_EQ(sgd.exit_code, 0) << sgd.err;
  EXPECT_THAT(sgd.err, HasSubstr("timed this step's update ops as AdamUpdate (here SGDUpdate)"));
  EXPECT_THAT(sgd.err, HasSubstr("give --optimizer adam to use them"));
  auto adam = placer({"simulate", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "--on", "cpu:0", "--optimizer", "adam",
                      "--profile", profile});
  ASSERT_EQ(adam.exit_code, 0) << adam.err;
  EXPECT_THAT(adam.err, Not(HasSubstr("update ops as")));
  // A saved step's updates are its own: no --optimizer to give (the hint named one, which such a
  // model refuses: a review).
  const std::string step = test::temp_path("cifarnet-step.json");
  ASSERT_EQ(placer({"inspect", test::example("cifarnet.onnx"), "--save-graph", step}).exit_code, 0);
  auto saved = placer({"simulate", "--model", step, "--cluster", "k80x4", "--on", "cpu:0", "--profile", profile});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_THAT(saved.err, HasSubstr("timed this step's update ops as AdamUpdate (here SGDUpdate)"));
  EXPECT_THAT(saved.err, Not(HasSubstr("give --optimizer")));
}

// optimal simulates the one-device placements once, in the first round whose program has
// solutions: when the first round had none (infeasible with activations counted in full), no
// round simulated them, and a model that one GPU holds was "does not fit" within --samples 4 (a
// review). A chain of 40 ops of 25 MB outputs; gpu:0 holds it, gpu:1 (faster) does not.
TEST(PlaceCli, OptimalTriesTheOneDevicePlacementsWhenItsFirstRoundHasNoSolution) {
  nlohmann::json g = {{"format", "placer-graph"}, {"version", 1}, {"name", "chain40"}};
  g["tensors"] = {{{"name", "x"}, {"shape", {1024}}, {"kind", "data"}}};
  std::string prev = "x";
  for (int i = 0; i < 40; ++i) {
    const std::string out = "a" + std::to_string(i);
    g["tensors"].push_back({{"name", out}, {"shape", {6250000}}});
    g["ops"].push_back({{"name", "op" + std::to_string(i)}, {"type", "Foo"}, {"inputs", {prev}}, {"outputs", {out}}, {"flops", 1e10},
                        {"class", "elementwise"}});
    prev = out;
  }
  g["outputs"] = {prev};
  const std::string model = write("chain40.json", g.dump());
  const std::string cluster = write("two-gpus.cluster.json", R"({"format": "placer-cluster", "version": 1, "name": "two", "devices": [
      {"name": "gpu:0", "kind": "gpu", "peak_flops": 1e12, "memory_bandwidth": 1e13, "memory_bytes": 80000000, "op_overhead_s": 0},
      {"name": "gpu:1", "kind": "gpu", "peak_flops": 1e13, "memory_bandwidth": 1e13, "memory_bytes": 40000000, "op_overhead_s": 0}],
      "links": [{"a": "gpu:0", "b": "gpu:1", "bandwidth": 1e12, "latency_s": 0}]})");
  auto r = placer({"place", "--model", model, "--cluster", cluster, "--mode", "inference", "--algo", "optimal", "--opt", "method=ip",
                   "--samples", "4", "--json", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("fits"), true) << j.dump();
}

// A profile names the devices it was measured on, with the models the cluster gave them then: one
// of another machine was applied without a word (a QA pass), now a warning names each device here
// its times price (every one of the measured device's kind) whose model differs, also when the
// measured device's name is not here (a review). A model may hold "; ". A `machine` of free text
// says nothing.
TEST(SimulateCli, AProfileOfAnotherMachineIsWarnedAbout) {
  const std::string cifarnet = test::example("cifarnet.onnx");
  const std::string cluster = write("machine_cluster.json", R"({"format": "placer-cluster", "version": 1, "name": "c", "devices": [
    {"name": "cpu:0", "kind": "cpu", "model": "Xeon; 2 sockets", "peak_flops": 1e11, "memory_bandwidth": 1e10, "memory_bytes": 1e12, "op_overhead_s": 1e-5},
    {"name": "gpu:0", "kind": "gpu", "model": "g", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 1e9, "op_overhead_s": 1e-5},
    {"name": "gpu:1", "kind": "gpu", "model": "h", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 1e9, "op_overhead_s": 1e-5}],
    "switches": ["sw"], "links": [{"a": "cpu:0", "b": "sw", "bandwidth": 1e10, "latency_s": 1e-5},
    {"a": "gpu:0", "b": "sw", "bandwidth": 1e10, "latency_s": 1e-5}, {"a": "gpu:1", "b": "sw", "bandwidth": 1e10, "latency_s": 1e-5}]})");
  auto profile = [](const std::string& machine) {
    return R"({"format": "placer-profile", "version": 1, )" + machine +
           R"("times_s": {"gpu": {"ops": {"/conv1/Conv": 0.001}, "signatures": {}}}})";
  };
  auto simulate = [&](const std::string& machine) {
    const std::string file = write("machine.profile.json", profile(machine));
    const auto run = placer({"simulate", "--model", cifarnet, "--cluster", cluster, "--on", "gpu:0", "--profile", file});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.err;
  };
  const std::string prefix = "placer: warning: the profile '" + test::temp_path("machine.profile.json") +
                             "' was measured on other devices than cluster 'c' describes (";
  EXPECT_THAT(simulate(R"j("machine": "cpu:0: Xeon; 2 sockets; gpu:0: NVIDIA H100 (SXM)", )j"),
              HasSubstr(prefix + "gpu:0 was 'NVIDIA H100 (SXM)', here gpu:0 is 'g', gpu:1 is 'h'): its op times are that machine's"));
  EXPECT_THAT(simulate(R"("machine": "cpu:0: Xeon; 2 sockets; gpu:0: g", )"), HasSubstr(prefix + "gpu:0 was 'g', here gpu:1 is 'h')"));
  EXPECT_THAT(simulate(R"("machine": "gpu:7: h", )"), HasSubstr(prefix + "gpu:7 was 'h', here gpu:0 is 'g')"));
  EXPECT_THAT(simulate(R"("machine": "cpu:0: Xeon", )"), HasSubstr(prefix + "cpu:0 was 'Xeon', here cpu:0 is 'Xeon; 2 sockets')"));
  for (const std::string& machine : {std::string(R"("machine": "cpu:0: Xeon; 2 sockets", )"), std::string(R"("machine": "measured by hand", )"),
                                     std::string(R"("machine": "tpu:0: v5", )"), std::string()})
    EXPECT_THAT(simulate(machine), Not(HasSubstr("warning"))) << machine;
}

// One Ctrl-C ends a comparison: the algorithm running keeps its best so far and the others do not
// run (each algorithm needed its own Ctrl-C). timeout(1) sends SIGINT after 5 s of a 30 s budget
// (after 2 s, a machine under load was still reading the model: nothing had run).
TEST(CompareCli, OneInterruptEndsTheComparison) {
  // The interrupt must come while `random` searches (its budget is longer than the delay), after
  // placer has loaded: a fixed 5 s delay came first on a loaded machine, under the sanitizers,
  // which ends placer with 130. So the delay follows a timed run of `random` alone for 1 s.
  const auto began = std::chrono::steady_clock::now();
  auto first = placer({"compare", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "--algos", "random",
                       "--seconds", "1", "--quiet", "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const double first_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const int delay_s = std::max(5, static_cast<int>(std::ceil(3 * first_s)) + 2);
  auto run = placer({"compare", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "--algos", "random,local-search",
                     "--seconds", std::to_string(delay_s + 60), "--quiet", "--json"},
                    {"timeout", "-s", "INT", "--preserve-status", std::to_string(delay_s)});
  ASSERT_EQ(run.exit_code, 0) << run.err << " (interrupted after " << delay_s << " s)";
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_FALSE(j["rows"][0].contains("error")) << j["rows"][0].dump();
  EXPECT_LT(j["rows"][0]["wall_s"].get<double>(), delay_s);
  EXPECT_EQ(j["rows"][1]["error"], "not run (interrupted)");
}

TEST(ClustersCli, ListsEveryPreset) {
  auto run = placer({"clusters"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* name : {"k80x2", "k80x4", "k80x8", "p100x4", "p100x8", "dgx-h100", "h100-box"}) EXPECT_THAT(run.out, HasSubstr(name));
  EXPECT_THAT(run.out, HasSubstr("local"));  // the machine placer runs on, detected
  auto json = placer({"clusters", "--json"});
  EXPECT_EQ(nlohmann::json::parse(json.out).size(), 8u);
}

// `placer clusters NAME --json` is one cluster file (the docs' recipe for keeping a preset, printed
// as the array of every preset, failed to load: an audit), and NAME alone shows its devices and links.
TEST(ClustersCli, OnePresetIsShownOrWrittenAsAClusterFile) {
  auto json = placer({"clusters", "k80x4", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto cluster = nlohmann::json::parse(json.out);
  ASSERT_TRUE(cluster.is_object()) << json.out;
  EXPECT_EQ(cluster["name"], "k80x4");
  const std::string file = write("k80x4-copy.json", json.out);
  auto step = [&](const std::string& c) {
    auto run = placer({"simulate", "--model", kModel, "--cluster", c, "--on", "gpu:0,gpu:2", "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.out;
  };
  EXPECT_EQ(step(file), step("k80x4"));
  EXPECT_EQ(nlohmann::json::parse(placer({"clusters", "k80x2", "p100x4", "--json"}).out).size(), 2u);

  auto text = placer({"clusters", "k80x4"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("k80x4: 5 devices, 3 switches, 7 links"));
  EXPECT_THAT(text.out, HasSubstr("NVIDIA Tesla K80"));
  EXPECT_THAT(text.out, HasSubstr("pcie1 <-> gpu:3"));
  EXPECT_THAT(text.out, HasSubstr("12.0 / 12.0 GB/s"));

  auto unknown = placer({"clusters", "k80x3"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("unknown cluster preset 'k80x3' (presets: k80x2"));
}

// A cluster whose efficiency_by_type names BatchNormalization prices a training step's batch norms
// by BatchNormalizationTraining only: said when the device does not name that (an audit: an older
// fitted cluster's entry stopped pricing them without a word), not in inference.
TEST(SimulateCli, AnEfficiencyEntryThatLeavesOpsOfItsTypeToTheirClassIsWarnedAbout) {
  auto cluster = nlohmann::json::parse(placer({"clusters", "k80x2", "--json"}).out);
  cluster["devices"][1]["efficiency_by_type"] = {{"BatchNormalization", {{"compute", 0.5}}}};
  const std::string file = write("bn-entry.json", cluster.dump());
  const std::string model = test::example("inception_v3.onnx");
  auto training = placer({"bounds", "--model", model, "--cluster", file});
  ASSERT_EQ(training.exit_code, 0) << training.err;
  EXPECT_THAT(training.err, HasSubstr("efficiency_by_type's 'BatchNormalization' (gpu:0) does not price 94 ops of that type"));
  EXPECT_THAT(training.err, HasSubstr("priced as 'BatchNormalizationTraining'"));
  auto inference = placer({"bounds", "--model", model, "--cluster", file, "--mode", "inference"});
  ASSERT_EQ(inference.exit_code, 0) << inference.err;
  EXPECT_THAT(inference.err, Not(HasSubstr("does not price")));
}

void expect_one_line_error(const std::vector<std::string>& args, const std::string& fragment) {
  auto run = placer(args);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_LT(run.exit_code, 124);
  EXPECT_THAT(run.err, HasSubstr(fragment));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST(SimulateCliBadInput, PlacementNamingAMissingDevice) {
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", write("p.json", R"({"default": "gpu:9"})")},
                        "gpu:9");
}

// A name from a file may hold any character: the error quotes it escaped, on one line.
TEST(SimulateCliBadInput, ANameWithControlCharactersIsQuotedOnOneLine) {
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement",
                         write("p.json", R"({"default": "gpu:0", "devices": {"Mixed\n9z\u0000": "gpu:1"}})")},
                        "Mixed\\n9z\\x00");
}

TEST(SimulateCliBadInput, PlacementNamingAMissingOp) {
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement",
                         write("p.json", R"({"default": "gpu:0", "devices": {"Mixed_9z": "gpu:1"}})")},
                        "Mixed_9z");
}

TEST(SimulateCliBadInput, ClusterWithNoDevices) {
  expect_one_line_error({"simulate", "--model", kModel, "--on", "gpu:0", "--cluster",
                         write("c.json", R"({"format": "placer-cluster", "version": 1, "name": "empty", "devices": [], "switches": [], "links": []})")},
                        "device");
}

TEST(SimulateCliBadInput, ClusterLinkToAMissingDevice) {
  expect_one_line_error(
      {"simulate", "--model", kModel, "--on", "cpu:0", "--cluster",
       write("c.json", R"({"format": "placer-cluster", "version": 1, "name": "x",
         "devices": [{"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10, "op_overhead_s": 1e-5}],
         "switches": [], "links": [{"a": "cpu:0", "b": "gpu:7", "bandwidth": 1e10, "latency_s": 1e-5}]})")},
      "gpu:7");
}

TEST(SimulateCliBadInput, NegativeBandwidth) {
  expect_one_line_error(
      {"simulate", "--model", kModel, "--on", "cpu:0", "--cluster",
       write("c.json", R"({"format": "placer-cluster", "version": 1, "name": "x",
         "devices": [{"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10, "op_overhead_s": 1e-5},
                     {"name": "gpu:0", "kind": "gpu", "model": "g", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 1e10, "op_overhead_s": 1e-5}],
         "switches": [], "links": [{"a": "cpu:0", "b": "gpu:0", "bandwidth": -5, "latency_s": 1e-5}]})")},
      "bandwidth");
}

TEST(SimulateCliBadInput, UnknownPreset) { expect_one_line_error({"simulate", "--model", kModel, "--on", "gpu:0", "--cluster", "tpu-pod"}, "tpu-pod"); }

TEST(SimulateCliBadInput, ADirectoryIsNoFile) {
  const std::string dir = ::testing::TempDir();
  expect_one_line_error({"simulate", "--model", dir, "--cluster", "k80x4", "--on", "gpu:0"}, "is a directory, not a file");
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", dir, "--on", "gpu:0"}, "is a directory, not a file");
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", dir}, "is a directory, not a file");
}

TEST(SimulateCliBadInput, AnEmptyDeviceName) {
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", ""}, "an empty device name");
}

TEST(SimulateCli, OutOfMemorySaysByHowMuch) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--memory-fraction", "0.01"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("DOES NOT FIT"));
  EXPECT_THAT(run.out, HasSubstr("over by "));
}

TEST(SimulateCliBadInput, ASeedOutOfRange) {
  // CLI11 alone read -1 and 2^64 as seeds (wrapped around).
  for (const char* seed : {"-1", "18446744073709551616", "1.5"})
    expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "2", "--seed", seed},
                          "a seed is an integer from 0 to 2^64-1");
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "2", "--seed", "18446744073709551615"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST(PlaceCliBadInput, BudgetsOutOfRange) {
  // -1 samples wrapped around to 2^64 - 1 (a run without end); -1, nan and 1e400 seconds read as no limit.
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "random", "--samples", "-1"},
                        "--samples: a number of placements");
  for (const char* seconds : {"-1", "nan", "1e400"})
    expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "random", "--seconds", seconds},
                          "--seconds: a number of seconds");
}

// Found by a bad-input sweep: a checkpoint is written to NAME.tmp and renamed, which replaced a
// device or a pipe named as the checkpoint with a regular file, without a word.
TEST(PlaceCliBadInput, ACheckpointThatIsNotARegularFileIsRefused) {
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "8", "--checkpoint", "/dev/null"},
                        "--checkpoint '/dev/null' is not a regular file");
  EXPECT_FALSE(std::filesystem::is_regular_file("/dev/null"));
}

// CLI11's range check let "nan" through (bounds then ran with it) and called "abc" out of range.
TEST(PlaceCliBadInput, AMemoryFractionMustBeANumberInRange) {
  for (const char* command : {"bounds", "simulate"}) {
    std::vector<std::string> args = {command, "--model", kModel, "--cluster", "k80x4"};
    if (std::string(command) == "simulate") args.insert(args.end(), {"--on", "gpu:0"});
    auto with = [&](const char* value) {
      std::vector<std::string> a = args;
      a.insert(a.end(), {"--memory-fraction", value});
      return a;
    };
    expect_one_line_error(with("nan"), "--memory-fraction: must be from 0.01 to 1, got nan");
    expect_one_line_error(with("abc"), "--memory-fraction: 'abc' is not a number");
    expect_one_line_error(with("0"), "must be from 0.01 to 1");
    EXPECT_EQ(placer(with("0.5")).exit_code, 0);
  }
}

TEST(SimulateCliBadInput, OnAMissingDeviceNamesIt) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:9"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, HasSubstr("--on: device 'gpu:9', which cluster 'k80x4' does not have"));
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("default")));
}

TEST(PlaceCliBadInput, LearnedPlacersFilesForAnotherAlgorithm) {
  // They were ignored: no curve or checkpoint was written, and --resume resumed nothing.
  // Naming them (the list was empty: the module that adds them was not loaded for m-etf; a QA pass).
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "m-etf", "--checkpoint", test::temp_path("x.ckpt")},
                        "are for the learned placers (colocrl, hdp): m-etf writes no curve or checkpoint");
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "m-etf", "--curve", test::temp_path("x.csv")},
                        "are for the learned placers");
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "m-etf", "--resume"},
                        "--curve, --checkpoint and --resume are for the learned placers");
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--resume"}, "--resume needs --checkpoint");
}

// Found by fuzzing the options: a repeated --opt kept its last value without a word, one file
// named for two outputs lost the checkpoint under the placement, 'all' beside names read as an
// unknown algorithm.
TEST(PlaceCliBadInput, AmbiguousOptionsAndFiles) {
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "local-search", "--opt", "devices=all", "--opt",
                         "devices=gpus"},
                        "--opt devices is given twice ('all' and 'gpus')");
  const std::string same = test::temp_path("same.file");
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "8", "-o", same, "--checkpoint", same},
                        "' name the same file");
  // The same file spelt two ways, or one file written through the other's NAME.tmp (found by a review).
  const std::string dir = same.substr(0, same.rfind('/')), base = same.substr(same.rfind('/') + 1);
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "8", "-o", dir + "/./" + base,
                         "--checkpoint", same},
                        "' name the same file");
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "8", "--curve", same,
                         "--checkpoint", same + ".tmp"},
                        "collide (a file is written through NAME.tmp)");
  // A placement file that cannot be written fails before the search, not after it.
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--seconds", "600", "-o", "/nonexistent/p.json"},
                        "cannot write placement file '/nonexistent/p.json'");
  expect_one_line_error({"compare", "--model", kModel, "--cluster", "k80x4", "--algos", "all,random"}, "'all' stands alone");
  expect_one_line_error({"compare", "--model", kModel, "--cluster", "k80x4", "--algos", "random,,heft"}, "empty name");
  // It printed the row twice (found by review).
  expect_one_line_error({"compare", "--model", kModel, "--cluster", "k80x4", "--algos", "heft,single,heft"}, "--algos names 'heft' twice");
  expect_one_line_error({"compare", "--model", kModel, "--cluster", "k80x4", "--algos", ",", "--json"}, "empty name");
}

// An empty item in a comma-separated list is an error, as in --algos (CLI11's own splitting
// dropped it without a word: `--placement a.json,` ran a.json alone).
TEST(SimulateCliBadInput, AnEmptyItemInAListIsAnError) {
  const std::string placement = write("one.json", R"({"default": "gpu:0"})");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", placement + ","},
        {"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0,,cpu:0"},
        {"simulate", "--model", kModel, "--cluster", "k80x4", "--on", ","},
        {"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--data-inputs", "x.1,"},
        {"fit", "--cluster", "k80x4", "--models", kModel + ",", "--profiles", placement, "-o", test::temp_path("fit.json")}}) {
    auto run = placer(args);
    EXPECT_NE(run.exit_code, 0) << args[5];
    EXPECT_LT(run.exit_code, 124);
    EXPECT_THAT(run.err, HasSubstr("(two commas in a row, or one at an end?)")) << args[5];
  }
  // Items still split: two placements, two runs.
  auto two = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0,cpu:0", "--json"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(nlohmann::json::parse(two.out)["placements"].size(), 2u);
}

TEST(SimulateCliBadInput, NothingToSimulate) { expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4"}, "--placement"); }

// Found by fuzzing: a profile's absurd time (1e300 s for one op) printed its ratio to the lower
// bound as a 300-digit number, and 1e308 as "infx".
TEST(SimulateCli, AbsurdRatiosToTheBoundPrintInScientificNotation) {
  for (const auto& [time, ratio] : std::map<std::string, std::string>{{"1e300", "e+302x the lower bound"}, {"1e308", ">1.8e308x the lower bound"}}) {
    const std::string profile = write("absurd.profile.json", R"({"format": "placer-profile", "version": 1,
      "times_s": {"gpu": {"ops": {"/conv1/Conv": )" + time + "}}}}");
    const test::Outcome o = placer({"simulate", "--model", test::example("cifarnet.onnx"), "--cluster", "k80x4", "--on", "gpu:0", "--profile", profile});
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr(ratio));
    EXPECT_LT(o.out.substr(o.out.find("placement all on"), o.out.find("transfers") - o.out.find("placement all on")).size(), 120u);
  }
}

// An output naming an input file replaced it: `place -o MODEL` wrote a placement over the model
// (found by a review). Refused before anything is written, through another path or a link given
// as the input too, or an output that is a link to an input (outputs are written through links);
// a file named like a preset is no input.
TEST(PlaceCli, AnOutputIsNeverAnInput) {
  const std::string model = test::temp_path("model.onnx"), link = test::temp_path("link.onnx");
  std::filesystem::copy_file(kModel, model, std::filesystem::copy_options::overwrite_existing);
  const auto size = std::filesystem::file_size(model);
  std::filesystem::remove(link);
  std::filesystem::create_symlink(model, link);
  nlohmann::json k80;
  for (const auto& c : nlohmann::json::parse(placer({"clusters", "--json"}).out))
    if (c["name"] == "k80x4") k80 = c;
  const std::string cluster = write("cluster.json", k80.dump());
  const std::string dotted = std::filesystem::path(model).parent_path().string() + "/./" + std::filesystem::path(model).filename().string();
  expect_one_line_error({"place", "--model", model, "--cluster", "k80x4", "--algo", "single", "-o", model},
                        "-o '" + model + "' is the --model file: writing it would replace an input");
  expect_one_line_error({"place", "--model", link, "--cluster", "k80x4", "--algo", "single", "-o", dotted},
                        "-o '" + dotted + "' is the --model file '" + link + "'");
  expect_one_line_error({"place", "--model", model, "--cluster", cluster, "--algo", "colocrl", "--samples", "8", "--curve", cluster},
                        "--curve '" + cluster + "' is the --cluster file");
  expect_one_line_error({"simulate", "--model", model, "--cluster", cluster, "--on", "gpu:0", "--trace", cluster}, "is the --cluster file");
  expect_one_line_error({"inspect", model, "--save-graph", dotted}, "--save-graph '" + dotted + "' is the --model file");
  EXPECT_EQ(std::filesystem::file_size(model), size);
  // Through a link to the model: refused, the link and the model stay.
  expect_one_line_error({"inspect", model, "--save-graph", link}, "--save-graph '" + link + "' is the --model file");
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(std::filesystem::file_size(model), size);
  // Another file is written as before.
  const auto ok = placer({"place", "--model", model, "--cluster", cluster, "--algo", "single", "-o", test::temp_path("p.json")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// An output is written through a link (its target replaced, the link kept, as a shell's
// redirection writes), and /dev/stdout is the command's standard output, after what it printed:
// `-o /dev/stdout` with stdout redirected to a file renamed a temporary file onto /dev/stdout,
// replacing the system's link (a QA pass).
TEST(PlaceCli, OutputsAreWrittenThroughLinksAndToStandardOutput) {
  const std::string target = test::temp_path("target.placement.json"), link = test::temp_path("link.placement.json");
  std::filesystem::remove(link);
  { std::ofstream(target) << "old"; }
  std::filesystem::create_symlink(target, link);
  const auto placed = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "single", "-o", link});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  const nlohmann::json written = nlohmann::json::parse(std::ifstream(target));
  EXPECT_EQ(written.at("default"), "gpu:0");
  EXPECT_FALSE(std::filesystem::exists(target + ".tmp"));
  // A dangling link: its target is created, the link kept (the write check had removed the link).
  const std::string missing = test::temp_path("missing.placement.json"), dangling = test::temp_path("dangling.placement.json");
  std::filesystem::remove(missing), std::filesystem::remove(dangling);
  std::filesystem::create_symlink(std::filesystem::path(missing).filename(), dangling);  // relative to its directory
  const auto through = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "single", "-o", dangling});
  ASSERT_EQ(through.exit_code, 0) << through.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dangling));
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(missing)).at("default"), "gpu:0");
  // A checkpoint is read back by --resume: no stream.
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "4", "--checkpoint", "/dev//stdout"},
                        "--checkpoint '/dev//stdout' is a standard stream");
  const auto out = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "single", "--quiet", "-o", "/dev//stdout"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  // The placement, then the summary that place prints after writing it.
  const auto end = out.out.find("\n}\n");
  ASSERT_NE(end, std::string::npos) << out.out;
  EXPECT_EQ(nlohmann::json::parse(out.out.substr(0, end + 3)).at("default"), "gpu:0") << out.out;
  EXPECT_THAT(out.out.substr(end), ::testing::HasSubstr("wrote /dev//stdout"));
  EXPECT_TRUE(std::filesystem::is_symlink("/dev/stdout"));
}

// --json prints one document on standard output: an output file that is standard output too
// (/dev/stdout, /dev/fd/1) would put a second one before it, so the pair is a usage error.
TEST(PlaceCli, JsonAndAnOutputOnStandardOutputAreRefused) {
  const auto placed = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "single", "--json", "-o", "/dev/stdout"});
  EXPECT_EQ(placed.exit_code, 2);
  EXPECT_THAT(placed.err, HasSubstr("-o '/dev/stdout' is standard output, where --json prints its document"));
  EXPECT_EQ(placed.out, "");
  expect_one_line_error({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "colocrl", "--samples", "4", "--json", "--curve", "/dev/fd/1"},
                        "--curve '/dev/fd/1' is standard output");
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--json", "--trace", "/dev//stdout"},
                        "--trace '/dev//stdout' is standard output");
  expect_one_line_error({"inspect", kModel, "--json", "--save-graph", "/dev/stdout"}, "--save-graph '/dev/stdout' is standard output");
  // Refused before anything is measured or fitted.
  expect_one_line_error({"profile", "--model", kModel, "--cluster", "local", "--json", "-o", "/dev/stdout"}, "-o '/dev/stdout' is standard output");
  expect_one_line_error({"fit", "--cluster", "k80x4", "--models", "missing.onnx", "--profiles", "missing.json", "--json", "-o", "/dev/stdout"},
                        "-o '/dev/stdout' is standard output");
  // Standard error, or stdout without --json, is written as before.
  const auto to_err = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--json", "--trace", "/dev/stderr"});
  ASSERT_EQ(to_err.exit_code, 0) << to_err.err;
  EXPECT_NO_THROW((void)nlohmann::json::parse(to_err.out));
  EXPECT_THAT(to_err.err, HasSubstr("traceEvents"));
  const auto plain = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--trace", "/dev/stdout"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("traceEvents"));
  // Standard output sent to /dev/null, and an output thrown away there too: nothing to read, no
  // two documents (it was refused: /dev/null is stdout's own file then; a review).
  const auto discarded = test::placer_at("/bin/sh", {"-c", "exec \"$0\" \"$@\" >/dev/null", test::placer_binary(), "simulate", "--model", kModel,
                                                     "--cluster", "k80x4", "--on", "gpu:0", "--json", "--trace", "/dev/null"});
  EXPECT_EQ(discarded.exit_code, 0) << discarded.err;
  // Standard error merged into standard output (2>&1) into a file: /dev/stderr is that stream too
  // (it put two documents on it; stop 54's noticed item).
  const std::string merged_file = test::temp_path("merged.txt");
  const auto merged = test::placer_at("/bin/sh", {"-c", "exec \"$0\" \"$@\" >\"" + merged_file + "\" 2>&1", test::placer_binary(), "simulate",
                                                  "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--json", "--trace", "/dev/stderr"});
  EXPECT_EQ(merged.exit_code, 2);
  std::stringstream merged_text;
  merged_text << std::ifstream(merged_file).rdbuf();
  EXPECT_THAT(merged_text.str(), HasSubstr("--trace '/dev/stderr' is standard output (standard error is sent there), where --json prints"));
  std::remove(merged_file.c_str());
}

// A placement file records how place found it; simulated under another mode, optimizer, memory
// fraction or cluster, a warning says so (a placement found for inference, simulated as a training
// step, gave another step time without a word: found by a review). The same options say nothing.
TEST(PlaceCli, APlacementSimulatedUnderOtherOptionsIsWarnedAbout) {
  const std::string file = test::temp_path("meta.placement.json");
  const auto placed = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "m-topo", "--mode", "inference", "-o", file});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(file)).at("meta");
  EXPECT_EQ(meta.at("algo"), "m-topo");
  EXPECT_EQ(meta.at("mode"), "inference");
  EXPECT_EQ(meta.at("cluster"), "k80x4");
  EXPECT_FALSE(meta.contains("optimizer"));
  const auto same = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--mode", "inference", "--placement", file, "--json"});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.err, "");
  EXPECT_EQ(fmt::format("{:.9g}", nlohmann::json::parse(same.out).at("step_time_s").get<double>()), meta.at("step_time_s").get<std::string>());
  const auto other = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--memory-fraction", "0.5", "--placement", file});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.err, HasSubstr("placer: warning: placement file '" + file +
                                   "' was found for --mode inference (here training), --memory-fraction 1 (here 0.5); its step time there: "));
}

// Options that change nothing in the command given are noted, not silently ignored (a review).
TEST(SimulateCli, OptionsWithoutEffectAreNoted) {
  const auto seeded = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--seed", "3"});
  ASSERT_EQ(seeded.exit_code, 0) << seeded.err;
  EXPECT_THAT(seeded.err, HasSubstr("placer: note: --seed seeds --random only"));
  const auto sums = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--mode", "inference", "--gradient-sums",
                            "out-of-place"});
  ASSERT_EQ(sums.exit_code, 0) << sums.err;
  EXPECT_THAT(sums.err, HasSubstr("placer: note: --gradient-sums shapes the training step's memory only"));
  const auto plain = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--gradient-sums", "out-of-place"});
  EXPECT_EQ(plain.err, "");
}

// A placement of a saved training step records the step's own updates (it wrote the default "sgd"
// for a step of Adam updates, and simulating the model with --optimizer adam then warned falsely:
// found by a review); a memory fraction written "1.0" is the default 1, not another option.
TEST(PlaceCli, ASavedStepsOwnOptimizerIsRecordedAndComparedAsSuch) {
  const std::string step = test::temp_path("adam.step.json"), file = test::temp_path("adam.placement.json");
  ASSERT_EQ(placer({"inspect", kModel, "--optimizer", "adam", "--save-graph", step}).exit_code, 0);
  const auto placed = placer({"place", "--model", step, "--cluster", "k80x4", "--algo", "m-topo", "-o", file});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(file));
  EXPECT_EQ(spec.at("meta").at("optimizer"), "adam");
  for (const std::vector<std::string>& model : {std::vector<std::string>{"--model", step}, {"--model", kModel, "--optimizer", "adam"}}) {
    std::vector<std::string> args{"simulate", "--cluster", "k80x4", "--placement", file};
    args.insert(args.end(), model.begin(), model.end());
    const auto same = placer(args);
    ASSERT_EQ(same.exit_code, 0) << same.err;
    EXPECT_EQ(same.err, "");
  }
  const auto sgd = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", file});
  ASSERT_EQ(sgd.exit_code, 0) << sgd.err;
  EXPECT_THAT(sgd.err, HasSubstr("was found for --optimizer adam (here sgd)"));

  spec["meta"]["memory_fraction"] = "1.0";
  std::ofstream(file) << spec.dump();
  const auto fraction = placer({"simulate", "--model", step, "--cluster", "k80x4", "--placement", file});
  ASSERT_EQ(fraction.exit_code, 0) << fraction.err;
  EXPECT_EQ(fraction.err, "");
  const auto half = placer({"simulate", "--model", step, "--cluster", "k80x4", "--placement", file, "--memory-fraction", "0.5"});
  EXPECT_THAT(half.err, HasSubstr("was found for --memory-fraction 1.0 (here 0.5)"));
}

// --gradient-sums out-of-place models libtorch 1.x's sums of partial gradients: RNNLM's output
// projection (78.1 MiB, read at 20 steps) is summed into a new buffer beside the old sum and the
// partial, so the training peak on one GPU rises by about that much; times do not move. A placement
// found under one setting warns when simulated under the other.
TEST(SimulateCli, GradientSumsOutOfPlaceRaiseTrainingPeaks) {
  if (!test::have_shared_models()) GTEST_SKIP() << "shared models not found";
  const std::string model = test::shared_model("rnnlm");
  auto peak = [&](const char* sums) {
    const auto r = placer({"simulate", "--model", model, "--cluster", "k80x4", "--on", "gpu:0", "--gradient-sums", sums, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    return std::pair{j.at("devices").at(1).at("peak_memory_bytes").get<double>(), j.at("step_time_s").get<double>()};
  };
  const auto [in_place, in_place_time] = peak("in-place");
  const auto [out_of_place, out_of_place_time] = peak("out-of-place");
  const double projection = 10000.0 * 2048 * 4;
  EXPECT_NEAR(out_of_place - in_place, projection, 0.1 * projection);
  EXPECT_EQ(out_of_place_time, in_place_time);
  expect_one_line_error({"simulate", "--model", model, "--cluster", "k80x4", "--on", "gpu:0", "--gradient-sums", "sideways"},
                        "--gradient-sums: sideways not in {in-place,out-of-place}");
  const std::string file = test::temp_path("sums.placement.json");
  ASSERT_EQ(placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "m-topo", "--gradient-sums", "out-of-place", "-o", file}).exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(file)).at("meta").at("gradient_sums"), "out-of-place");
  const auto other = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--placement", file});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_THAT(other.err, HasSubstr("was found for --gradient-sums out-of-place (here in-place)"));
}

// A placement that does not fit says by how much in --json too (it gave "fits": false and no
// reason), as simulate --json does. It is printed and written, and place exits 3 (it exited 0 for
// the algorithms that return such a placement, 1 for those that fail: a script could not tell a
// placement that fits from one that does not by the exit status).
TEST(PlaceCli, JsonOfAPlacementThatDoesNotFitGivesItsShortfall) {
  const std::string written = test::temp_path("over.placement.json");
  const test::Outcome o = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", "round-robin", "--memory-fraction", "0.01",
                                  "--json", "-o", written});
  ASSERT_EQ(o.exit_code, 3) << o.err;
  EXPECT_THAT(o.err, HasSubstr("placer: error: round-robin's placement does not fit in memory (over on gpu:0 by "));
  EXPECT_THAT(o.err, HasSubstr("; written to " + written + " all the same"));
  EXPECT_TRUE(std::filesystem::exists(written));
  for (const char* algo : {"single", "random", "metis", "expert"}) {
    const test::Outcome text = placer({"place", "--model", kModel, "--cluster", "k80x4", "--algo", algo, "--memory-fraction", "0.01"});
    EXPECT_EQ(text.exit_code, 3) << algo << ": " << text.err;
    EXPECT_THAT(text.out, HasSubstr("(DOES NOT FIT)")) << algo;
    EXPECT_THAT(text.out, HasSubstr("  over by ")) << algo;  // on the device's line, as simulate prints it
    EXPECT_THAT(text.err, HasSubstr(std::string(algo) + "'s placement does not fit in memory")) << algo;
  }
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_FALSE(j.at("fits").get<bool>());
  ASSERT_FALSE(j.at("shortfalls").empty());
  for (const auto& s : j.at("shortfalls")) {
    const auto device = std::find_if(j.at("devices").begin(), j.at("devices").end(), [&](const nlohmann::json& d) { return d.at("name") == s.at("device"); });
    ASSERT_NE(device, j.at("devices").end());
    EXPECT_EQ(s.at("bytes").get<std::uint64_t>(),
              device->at("peak_memory_bytes").get<std::uint64_t>() - device->at("capacity_bytes").get<std::uint64_t>());
  }
  const test::Outcome compared = placer({"compare", "--model", kModel, "--cluster", "k80x4", "--algos", "round-robin", "--memory-fraction", "0.01", "--json"});
  ASSERT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_EQ(nlohmann::json::parse(compared.out).at("rows").at(0).at("shortfalls"), j.at("shortfalls"));
}

// Placements are drawn a block of 64 at a time, so that memory does not grow with N: a run over
// several blocks simulates all N; a negative N is refused (it wrapped around to 2^64 - 1).
TEST(SimulateCliBadInput, RandomCountsEveryBlockAndRefusesANegativeCount) {
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "130", "--seed", "3", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["simulations"].get<std::size_t>(), 130u);
  EXPECT_GT(j["mean_step_time_s"].get<double>(), 0.0);
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "-1"}, "--random: a number of placements");
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "0"}, "--random: a number of placements from 1");
}

// --seconds ends a --random run that would take days (2^40 placements) after the block in which
// the time ran out, and says how many it simulated; without --random it is refused.
TEST(SimulateCliBadInput, RandomEndsWhenItsSecondsRunOut) {
  const auto began = std::chrono::steady_clock::now();
  auto run = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "1099511627776", "--seconds", "1", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count(), 120.0);
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_GT(j["simulations"].get<std::size_t>(), 0u);
  EXPECT_LT(j["simulations"].get<std::size_t>(), 1099511627776u);
  EXPECT_GT(j["mean_step_time_s"].get<double>(), 0.0);
  auto text = placer({"simulate", "--model", kModel, "--cluster", "k80x4", "--random", "1099511627776", "--seconds", "0.2"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("(of 1099511627776: --seconds ran out)"));
  expect_one_line_error({"simulate", "--model", kModel, "--cluster", "k80x4", "--on", "gpu:0", "--seconds", "1"},
                        "--seconds limits --random");
}

// Steps near the largest double: their sum overflows, their mean does not (it printed
// "mean step inf s", and null in JSON).
TEST(SimulateCliBadInput, RandomMeanOfHugeStepsIsFinite) {
  const std::string graph = write("huge_step.json", R"({"format": "placer-graph", "version": 1,
    "tensors": [{"name": "x", "shape": [4], "kind": "data"}, {"name": "y", "shape": [4]}],
    "ops": [{"name": "r", "type": "Relu", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]})");
  const std::string cluster = write("huge_overhead.json", R"({"format": "placer-cluster", "version": 1, "name": "c", "devices":
    [{"name": "cpu:0", "kind": "cpu", "model": "c", "peak_flops": 1e12, "memory_bandwidth": 1e11, "memory_bytes": 1e10, "op_overhead_s": 1e308}],
    "links": []})");
  auto run = placer({"simulate", "--model", graph, "--cluster", cluster, "--mode", "inference", "--random", "4", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto mean = nlohmann::json::parse(run.out).at("mean_step_time_s");
  ASSERT_TRUE(mean.is_number()) << run.out;
  EXPECT_NEAR(mean.get<double>() / 1e308, 1.0, 1e-9);
}

}  // namespace
}  // namespace placer
