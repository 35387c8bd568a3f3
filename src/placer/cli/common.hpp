// Pieces every subcommand shares: the model options (--mode, --optimizer, --data-inputs, --dim,
// --unknown-ops) and number formatting. The CLI is a thin layer: it parses, calls the library and
// prints; errors are placer::Error, caught once in main().
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/io/model.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/simulator.hpp"
#include "placer/util/text.hpp"
#include "placer/util/units.hpp"

namespace placer::cli {

// Options as typed on the command line, turned into ModelOptions by resolve().
struct ModelArgs {
  std::string mode = "training";
  std::string optimizer = "sgd";
  std::vector<std::string> data_inputs;
  std::vector<std::string> dims;
  std::string unknown_ops;
  const CLI::Option* optimizer_option = nullptr;  // set by add_model_options: whether --optimizer was given
  // The options as the library takes them; notes on stderr when --optimizer is given in
  // inference mode (where it has no effect).
  ModelOptions resolve() const;
};
// `with_mode`: also --mode (fit reads training steps only).
void add_model_options(CLI::App* cmd, ModelArgs& args, bool with_mode = true);

// A model on a cluster, priced: what simulate, bounds, place and compare work on.
struct ProblemArgs {
  std::string model;
  ModelArgs model_args;
  std::string cluster;
  std::string profile;
  double memory_fraction = 1.0;
  std::string gradient_sums = "in-place";  // SimOptions::gradient_sums_out_of_place: "in-place" or "out-of-place"
  const CLI::Option* gradient_sums_option = nullptr;  // set by add_problem_options: whether --gradient-sums was given
};
void add_problem_options(CLI::App* cmd, ProblemArgs& args);
struct LoadedProblem {
  Graph graph;
  Cluster cluster;
  CostTable costs;
  SimOptions sim;
};
LoadedProblem load_problem(const ProblemArgs& args);
// A warning on stderr when a training step has parameters and no data input: the input rules
// (docs/training-step.md) took every floating-point graph input for a parameter, which a data input
// read only as a matrix product's right operand gives; --data-inputs says which is the data. And
// when it has no parameters at all: its training step is then the forward pass alone.
void warn_without_data_inputs(const Graph& g, const std::string& model, Mode mode);
// A warning on stderr when a profile with times matched none of a model's forward or backward ops
// (`path`: the profile's file): measured on another model, it was used silently.
// Fewer op times than this make a fitted roofline a matter of chance: `fit` and `profile` warn.
inline constexpr std::size_t kFewFitTimes = 20;

// A warning when `profile` timed the update ops of `step` (by name) with another optimizer's update
// type: their times do not apply, and the model prices them (a profile of an Adam step paired
// with the default SGD said nothing: a review). warn_unmatched_profile calls it.
// `can_choose`: the step's optimizer follows --optimizer (an ONNX model, not a saved step), so the
// warning may say which to give.
void warn_other_optimizer(const Profile& profile, const Graph& step, const std::string& path, bool can_choose);
void warn_unmatched_profile(const Profile& profile, const Graph& g, const CostTable& costs, const std::string& path,
                            const std::string& model);
// A warning on stderr when a profile was measured on other devices than `cluster` describes: its
// `machine` names each device it measured with the model the cluster gave it then ("cpu:0: AMD
// EPYC (2 hardware threads, 1 used by libtorch)"), and its times price every device of that kind
// here: one with another model (another machine, or this one with other threads) is named. Its
// times are that machine's. A `machine` of another form (written by hand) is taken as it is.
void warn_other_machine(const Profile& profile, const Cluster& cluster, const std::string& path);
// A warning on stderr naming the cluster's efficiency_by_type keys that price no op of `g` and
// that placer knows nowhere (unmatched_efficiency_types): a misspelt type is otherwise ignored;
// and one per key that leaves ops of its type to their class because they are priced under
// another key the cluster does not name (efficiency_types_keyed_apart).
void warn_unmatched_efficiency_types(const Graph& g, const Cluster& cluster, const CostTable& costs);

// `place` found a placement, printed and wrote it, but it does not fit in memory: main prints the
// message as an error and exits with kExitDoesNotFit (an error without a placement exits 1), so
// that exit status 0 always means a placement that fits.
inline constexpr int kExitDoesNotFit = 3;
// A usage error: an option or argument CLI11 rejects, or a UsageError (main).
inline constexpr int kExitUsage = 2;
// An option or argument the command line is wrong in by itself, before any file is read (an
// unknown algorithm, --steps 0, none of --placement and --on): main prints it as an error and
// exits with kExitUsage, as for CLI11's own.
class UsageError : public Error {
 public:
  using Error::Error;
};
class DoesNotFit : public Error {
 public:
  using Error::Error;
};

// Validator of an integer from `min` to `max` (CLI11 alone wraps -1 and 2^64 around), failing with
// `message`.
inline CLI::Validator whole_number(const std::string& message, const std::string& name, std::uint64_t max, std::uint64_t min = 0) {
  return CLI::Validator(
      [message, max, min](const std::string& s) {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        return ec == std::errc() && end == s.data() + s.size() && v >= min && v <= max ? std::string() : message;
      },
      name);
}
inline const CLI::Validator kSeed = whole_number("a seed is an integer from 0 to 2^64-1", "SEED", UINT64_MAX);  // --seed
// --samples: the learned placers count samples in signed 64-bit integers.
inline const CLI::Validator kSamples = whole_number("a number of placements from 0 to 2^63-1", "N", INT64_MAX);
// simulate --random: at least one placement.
inline const CLI::Validator kRandomCount = whole_number("a number of placements from 1 to 2^63-1", "N", INT64_MAX, 1);

// Validator of --seconds: a finite number >= 0 (-1, nan and 1e400 read as "no limit").
inline const CLI::Validator kSeconds(
    [](const std::string& s) {
      double v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return ec == std::errc() && end == s.data() + s.size() && std::isfinite(v) && v >= 0
                 ? std::string()
                 : std::string("a number of seconds, 0 (no limit) or more");
    },
    "SECONDS");

// Validator of a count that may be 0 (--threads).
inline const CLI::Validator kCount = whole_number("an integer from 0 to 65536", "N", 1u << 16);

// Validator of a name that may not be empty ("an empty <what>").
inline CLI::Validator non_empty(const std::string& what, const std::string& type) {
  return CLI::Validator([what](const std::string& s) { return s.empty() ? "an empty " + what : std::string(); }, type);
}

// Validator of an output file: not an empty name (which wrote nothing, without a word).
inline const CLI::Validator kFileName = non_empty("file name", "FILE");

// Validator of --on: a device name, not an empty string (which would read as "no default").
inline const CLI::Validator kDeviceName = non_empty("device name", "DEVICE");

// Validator of a comma-separated list given to an option: no empty item ("a,,b", "a,", ","),
// which CLI11's own splitting drops without a word. Split with comma_items.
inline CLI::Validator comma_list(const std::string& item) {
  return CLI::Validator(
      [item](const std::string& s) {
        for (const std::string& part : split_commas(s))
          if (part.empty()) return "an empty " + item + " in '" + s + "' (two commas in a row, or one at an end?)";
        return std::string();
      },
      "LIST");
}
// The items of an option's comma-separated values, in order.
inline std::vector<std::string> comma_items(const std::vector<std::string>& values) {
  std::vector<std::string> items;
  for (const std::string& v : values)
    for (std::string& part : split_commas(v)) items.push_back(std::move(part));
  return items;
}

// The first line of a library's message (libtorch's go on with a C++ backtrace): errors are one line.
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A library's message as placer prints it: its first line, and libtorch's allocation failures
// ("[enforce fail at alloc_cpu.cpp:75] ... can't allocate memory: you tried to allocate N bytes")
// as "out of memory (...; `hint`)". `out_of_memory`, when given, says which it was.
inline std::string library_message(const char* what, const std::string& hint, bool* out_of_memory = nullptr) {
  std::string line = first_line(what);
  const auto at = line.find("can't allocate memory");
  if (out_of_memory) *out_of_memory = at != std::string::npos;
  return at == std::string::npos ? line : "out of memory (" + line.substr(at) + "; " + hint + ")";
}

using placer::human_bytes;  // placer/util/units.hpp
using placer::human_count;
using placer::human_seconds;

// Where an output file lands, as an absolute, normal path: outputs are written through NAME.tmp
// and renamed onto NAME, in its directory with links resolved; a link NAME is written through, so
// its target is where it lands (output_target). The path as given when it cannot be resolved.
std::filesystem::path landing_path(const std::string& output);

// An output file may not be one of the command's inputs: `-o` naming the --model file replaced the
// model with a placement (found by a review). `inputs`: (option, path) pairs; paths that are not
// existing files ("") pass. Outputs are written through NAME.tmp and a rename, which replaces the
// directory entry the output lands in: refused when that is the input's file (through any
// relative path, a link to it given as the input, or an output that is a link to it, which is
// written through). Throws Error naming both.
void check_not_an_input(const std::string& output, const std::string& output_option,
                        const std::vector<std::pair<std::string, std::string>>& inputs);
// A UsageError when `json` is set and one of `outputs` (option, path; empty paths skipped) names
// standard output (/dev/stdout, /dev/fd/1, the file stdout is redirected to; standard error when
// it is merged into a stdout that is no terminal, 2>&1): --json prints its one document there,
// and the file before it would make two.
void check_json_alone_on_stdout(bool json, const std::vector<std::pair<std::string, std::string>>& outputs);

// The input files of a problem: --model, --cluster (unless a preset's name, which wins over a
// file of that name) and --profile.
std::vector<std::pair<std::string, std::string>> problem_inputs(const ProblemArgs& args);
// --cluster as an input file: empty when it names a preset.
std::string cluster_input_file(const std::string& cluster);
// The name of the optimizer whose updates the problem's step holds (a saved step's own, whatever
// --optimizer says; --optimizer's when the graph holds no update).
std::string step_optimizer_name(const Graph& step, const ProblemArgs& args);

// A placement file `place -o` wrote records the options it was found under (its "meta"): used
// under others (a placement found for inference, simulated as a training step: 33 ms became 116
// ms without a word, found by a review; `run` and `validate` said nothing until 2026-12-02, a
// review), a warning on stderr names the options that differ and the step time the file records.
// Empty fields of `here` are not compared.
struct PlacementUse {
  std::string mode, optimizer, gradient_sums, cluster;
  std::optional<double> memory_fraction;
};
void warn_placement_made_otherwise(const PlacementSpec& spec, const std::string& file, const PlacementUse& here);

// A simulation's devices as `--json` prints them ({name, ops, busy_s, peak_memory_bytes,
// static_memory_bytes, capacity_bytes} each), and its shortfalls ({device, bytes}: what a
// placement that does not fit is over by).
nlohmann::json devices_json(const Cluster& cluster, const SimResult& r);
nlohmann::json shortfalls_json(const Cluster& cluster, const SimResult& r);

// A ratio as "1.23x"; absurd ones (a profile's time of 1e300 s against a bound of milliseconds)
// in scientific notation, "1.3e+302x", and one past a double as ">1.8e308x".
std::string ratio_text(double ratio);

// Each subcommand registers itself on the app (one function per file in cli/).
void register_inspect(CLI::App& app);
void register_clusters(CLI::App& app);
void register_simulate(CLI::App& app);
void register_bounds(CLI::App& app);
void register_place(CLI::App& app);
void register_compare(CLI::App& app);
// Real execution (exec layer, libtorch): run, profile, validate (cli/run.cpp).
void register_run(CLI::App& app);
void register_profile(CLI::App& app);
void register_validate(CLI::App& app);
void register_fit(CLI::App& app);

}  // namespace placer::cli
