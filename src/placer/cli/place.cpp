// `placer place`: run one placement algorithm and write its placement file.
// `placer compare`: run several and print one row each.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "placer/algorithms/placer.hpp"
#include "placer/cli/common.hpp"
#include "placer/sim/placement.hpp"
#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"
#include "placer/util/text.hpp"

namespace placer::cli {
namespace {

std::atomic<bool> g_interrupted{false};
// The first Ctrl-C asks the algorithm to stop and keep its best so far; a second one ends the
// process at once (a search finishing its update and writing its checkpoint could otherwise not
// be cut short: a review).
extern "C" void on_sigint(int) {
  g_interrupted = true;
  std::signal(SIGINT, SIG_DFL);
}

// Progress on stderr: a line redrawn in place on a terminal, plain periodic lines otherwise.
// Ctrl-C asks the algorithm to stop and keep its best placement so far.
class TerminalObserver final : public Observer {
 public:
  explicit TerminalObserver(std::string label, bool quiet) : label_(std::move(label)), quiet_(quiet), tty_(isatty(2)) {
    previous_ = std::signal(SIGINT, on_sigint);
    started_ = last_ = std::chrono::steady_clock::now();
  }
  ~TerminalObserver() override {
    if (tty_ && drawn_) std::fputs("\n", stderr);
    // (After a Ctrl-C the default stays: a second one ends the process, in compare too.)
    std::signal(SIGINT, g_interrupted.load() ? SIG_DFL : previous_);
  }
  void on_progress(const Progress& p) override {
    if (quiet_) return;
    const auto now = std::chrono::steady_clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (since < (tty_ ? 0.2 : 10.0)) return;
    last_ = now;
    // The algorithm's own clock where it keeps one (a search's, a resumed training's), else this one.
    const double elapsed = p.elapsed_s > 0 ? p.elapsed_s : std::chrono::duration<double>(now - started_).count();
    std::string best = p.best_step_time_s > 0 ? human_seconds(p.best_step_time_s) : "none fits yet";
    std::string total = p.samples_total ? fmt::format("/{}", p.samples_total) : "";
    std::string remaining;
    if (p.samples_total && p.samples && p.samples < p.samples_total && elapsed > 0)
      remaining = fmt::format(", ~{:.0f} s left", elapsed * static_cast<double>(p.samples_total - p.samples) / static_cast<double>(p.samples));
    const std::string line = fmt::format("{}: {}{} samples, best {}, {:.1f} s{}", label_, p.samples, total, best, elapsed, remaining);
    if (tty_) {
      fmt::print(stderr, "\r\033[K{}", line);
      drawn_ = true;
    } else {
      fmt::print(stderr, "{}\n", line);
    }
    std::fflush(stderr);
  }
  bool stop_requested() const override { return g_interrupted.load(); }

 private:
  std::string label_;
  bool quiet_, tty_, drawn_ = false;
  std::chrono::steady_clock::time_point started_{}, last_{};
  void (*previous_)(int) = nullptr;
};

struct PlaceArgs {
  ProblemArgs problem;
  std::string algo;
  std::vector<std::string> algos;
  std::vector<std::string> opts;
  std::string output;
  std::size_t samples = 0;
  double seconds = 0.0;
  unsigned threads = 0;
  std::string curve, checkpoint;
  bool resume = false;
  std::uint64_t seed = 1;
  bool json = false;
  bool quiet = false;
};

PlacerOptions parse_opts(const std::vector<std::string>& opts) {
  std::map<std::string, std::string> values;
  for (const auto& kv : opts) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--opt expects KEY=VALUE, got '" + kv + "'");
    if (!values.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second)
      throw UsageError("--opt " + kv.substr(0, eq) + " is given twice ('" + values[kv.substr(0, eq)] + "' and '" + kv.substr(eq + 1) + "')");
  }
  return PlacerOptions(std::move(values));
}

// An algorithm the registry knows, with options it has: a UsageError otherwise.
void check_algorithm(const std::string& name, const PlacerOptions& options) {
  try {
    (void)make_placer(name, options);
  } catch (const Error& e) {
    // Named by the algorithm (an option's error may not be: "option 'devices' must be ...").
    const std::string what = e.what();
    throw UsageError(what.starts_with(name + ":") || what.starts_with("unknown placement algorithm") ? what : name + ": " + what);
  }
}

std::string algorithms_help() {
  std::string help = "placement algorithm:";
  for (const auto& info : placer_registry()) {
    help += "\n    " + info.name + ": " + info.summary;
    for (const auto& o : info.options)
      help += "\n        --opt " + o.key + "=... " + o.help + (o.default_value.empty() ? "" : " (default " + o.default_value + ")");
  }
  return help;
}

struct Row {
  std::string algo;
  PlacementResult result;
  double wall_s = 0.0;
  std::string error;
};

// The fastest placement of every forward op on one device that fits (device, step time); none when
// no single device fits. One simulation per device.
std::optional<std::pair<DeviceId, double>> best_one_device(const Problem& problem) {
  Evaluator eval(problem);
  std::optional<std::pair<DeviceId, double>> best;
  for (DeviceId d = 0; d < problem.cluster.num_devices(); ++d) {
    const SimResult& r = eval.evaluate(std::vector<DeviceId>(problem.graph.num_forward_ops(), d));
    if (r.fits && (!best || r.step_time_s < best->second)) best = {d, r.step_time_s};
  }
  return best;
}

Row run_algorithm(const Problem& problem, const std::string& algo, const PlacerOptions& options, const PlaceArgs& args) {
  Row row{.algo = algo};
  const auto start = std::chrono::steady_clock::now();
  try {
    auto placer = make_placer(algo, options);
    TerminalObserver observer(algo, args.quiet || args.json);
    Budget budget{args.samples, args.seconds, args.threads, args.curve, args.checkpoint, args.resume};
    row.result = placer->place(problem, budget, observer, args.seed);
  } catch (const Error& e) {
    row.error = e.what();
  } catch (const std::bad_alloc&) {
    row.error = "out of memory";
  } catch (const std::exception& e) {  // a library's: one algorithm's failure, not the comparison's
    // Out of memory in libtorch: a learned placer's sizes times its batch.
    bool out_of_memory = false;
    const std::string what = library_message(e.what(), "a learned placer: lower hidden, attention or batch", &out_of_memory);
    row.error = out_of_memory ? what : "internal error: " + what;
  } catch (...) {  // CBC's CoinError is no std::exception
    row.error = "internal error in a solver library";
  }
  row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return row;
}

void run_place(const PlaceArgs& args) {
  check_algorithm(args.algo, parse_opts(args.opts));  // before the model loads (not "NAME: unknown ... 'NAME'")
  // Files of searches that learn: refused for an algorithm that writes none (they were ignored).
  if ((!args.curve.empty() || !args.checkpoint.empty() || args.resume) && find_placer(args.algo).family != "learned") {
    std::string learned;  // from the registry: a learned placer added later is named too
    for (const PlacerInfo& info : placer_registry())
      if (info.family == "learned") learned += (learned.empty() ? "" : ", ") + info.name;
    throw UsageError("--curve, --checkpoint and --resume are for the learned placers (" + learned + "): " + args.algo +
                     " writes no curve or checkpoint");
  }
  if (args.resume && args.checkpoint.empty()) throw UsageError("--resume needs --checkpoint FILE (the search to continue)");
  check_json_alone_on_stdout(args.json, {{"-o", args.output}, {"--curve", args.curve}});
  // A checkpoint is a file of its own, written through NAME.tmp and renamed: a device or a pipe
  // in its place would be replaced by it.
  if (!args.checkpoint.empty()) {
    if (output_descriptor(args.checkpoint))
      throw UsageError("--checkpoint '" + args.checkpoint + "' is a standard stream: a checkpoint is a file that --resume reads back");
    std::error_code ec;
    const auto status = std::filesystem::status(args.checkpoint, ec);
    if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
      throw Error("--checkpoint '" + args.checkpoint + "' is not a regular file (a checkpoint is written to NAME.tmp and renamed over it)");
  }
  // One file for two outputs: the last written wins (the checkpoint was lost under the placement).
  // Compared where they land (./a and a are one file), each also against the other's `.tmp`,
  // through which files are written and renamed.
  {
    const std::vector<std::pair<const char*, const std::string*>> files = {
        {"-o", &args.output}, {"--curve", &args.curve}, {"--checkpoint", &args.checkpoint}};
    for (std::size_t i = 0; i < files.size(); ++i)
      for (std::size_t j = i + 1; j < files.size(); ++j) {
        if (files[i].second->empty() || files[j].second->empty()) continue;
        const std::string a = landing_path(*files[i].second).string(), b = landing_path(*files[j].second).string();
        if (a == b || a == b + ".tmp" || b == a + ".tmp")
          throw Error(std::string(files[i].first) + " '" + *files[i].second + "' and " + files[j].first + " '" + *files[j].second +
                      "' " + (a == b ? "name the same file" : "collide (a file is written through NAME.tmp)"));
      }
  }
  for (const auto& [option, path] : {std::pair<std::string, std::string>{"-o", args.output}, {"--curve", args.curve}, {"--checkpoint", args.checkpoint}})
    check_not_an_input(path, option, problem_inputs(args.problem));
  // The placement file too is checked before a search that may run for hours.
  if (!args.output.empty()) check_writable(args.output, "placement file");
  LoadedProblem p = load_problem(args.problem);
  const Problem problem{p.graph, p.cluster, p.costs, p.sim};
  Row row = run_algorithm(problem, args.algo, parse_opts(args.opts), args);
  if (!row.error.empty()) throw Error(row.error.starts_with(args.algo + ":") ? row.error : args.algo + ": " + row.error);
  const PlacementResult& r = row.result;
  PlacementSpec spec = describe_placement(p.graph, p.cluster, r.forward_devices);
  // How it was made, so that `simulate` can say when it is simulated under other options.
  const bool training = args.problem.model_args.mode == "training";
  spec.meta = {{"written_by", "placer place"},
               {"algo", args.algo},
               {"model", args.problem.model},
               {"cluster", p.cluster.name()},
               {"mode", args.problem.model_args.mode},
               // The updates the step holds: a saved step's own, whatever --optimizer says.
               {"optimizer", training ? step_optimizer_name(p.graph, args.problem) : std::string()},
               {"memory_fraction", fmt::format("{:g}", args.problem.memory_fraction)},
               {"gradient_sums", training ? args.problem.gradient_sums : std::string()},
               {"step_time_s", fmt::format("{:.9g}", r.sim.step_time_s)},
               {"fits", r.sim.fits ? "yes" : "no"}};
  if (!training) std::erase_if(spec.meta, [](const auto& kv) { return kv.first == "optimizer" || kv.first == "gradient_sums"; });
  if (!args.output.empty()) save_placement_file(spec, args.output);
  // The fastest one-device placement that fits, to say when the result loses to it: a scheduler's
  // greedy rule on unlike devices can (m-ETF with devices=all on h100-box: NMT twice as slow as
  // the GPU alone), and so can a search cut short.
  const auto one_device = best_one_device(problem);
  // Worth saying when the result does not fit, or is slower by half a percent or more (less would
  // print as "1.00x").
  // (A one-device step of no time gives no ratio: it printed "-nanx as fast".)
  const bool one_device_better =
      one_device && (!r.sim.fits || (one_device->second > 0 && one_device->second * 1.005 <= r.sim.step_time_s));
  // Printed and written all the same (what is over, and by how much, is what to act on), then
  // reported as an error: exit status 0 means a placement that fits.
  const auto fail_unless_fits = [&] {
    if (r.sim.fits) return;
    std::string over;
    for (auto [d, bytes] : r.sim.shortfalls)
      over += (over.empty() ? "" : ", ") + p.cluster.device(d).name + " by " + human_bytes(static_cast<double>(bytes));
    throw DoesNotFit(args.algo + "'s placement does not fit in memory (over on " + over + ")" +
                     (args.output.empty() ? std::string() : "; written to " + args.output + " all the same"));
  };
  if (args.json) {
    std::cout << nlohmann::json{{"algo", args.algo},
                                {"step_time_s", r.sim.step_time_s},
                                {"fits", r.sim.fits},
                                {"samples", r.samples},
                                {"wall_s", row.wall_s},
                                {"note", r.note},
                                {"best_one_device", one_device ? nlohmann::json{{"device", p.cluster.device(one_device->first).name},
                                                                                {"step_time_s", one_device->second}}
                                                               : nlohmann::json(nullptr)},
                                {"devices", devices_json(p.cluster, r.sim)},
                                {"shortfalls", shortfalls_json(p.cluster, r.sim)},
                                {"placement", placement_to_json(spec)}}
                     .dump(2)
              << "\n";
    return fail_unless_fits();
  }
  fmt::print("{} on {}: step {}{}, {} sample{} in {:.2f} s{}\n", args.algo, p.cluster.name(), human_seconds(r.sim.step_time_s),
             r.sim.fits ? "" : " (DOES NOT FIT)", r.samples, r.samples == 1 ? "" : "s", row.wall_s, r.note.empty() ? "" : " — " + r.note);
  std::size_t width = 8;  // the device column as wide as the longest name
  for (DeviceId d = 0; d < r.sim.devices.size(); ++d) width = std::max(width, text_width(p.cluster.device(d).name));
  for (DeviceId d = 0; d < r.sim.devices.size(); ++d)
    if (r.sim.devices[d].ops > 0)
      fmt::print("  {:<{}} {:>6} ops  busy {:>10}  peak {:>10} of {}{}\n", p.cluster.device(d).name, width, r.sim.devices[d].ops,
                 human_seconds(r.sim.devices[d].busy_s), human_bytes(static_cast<double>(r.sim.devices[d].peak_memory_bytes)),
                 human_bytes(static_cast<double>(r.sim.devices[d].capacity_bytes)),
                 // (Rounded, "3.1 GiB of 3.1 GiB" hid an overflow: as simulate prints it.)
                 r.sim.devices[d].peak_memory_bytes > r.sim.devices[d].capacity_bytes
                     ? "  over by " + human_bytes(static_cast<double>(r.sim.devices[d].peak_memory_bytes - r.sim.devices[d].capacity_bytes))
                     : std::string());
  if (one_device_better)
    fmt::print("  every op on {} alone: step {}{} (placer compare lists every algorithm against it)\n",
               p.cluster.device(one_device->first).name, human_seconds(one_device->second),
               r.sim.fits ? fmt::format(", {:.2f}x as fast as this placement", r.sim.step_time_s / one_device->second) : std::string(", and it fits"));
  if (!args.output.empty())
    fmt::print("wrote {} (default {}{})\n", args.output, spec.default_device.empty() ? "none" : spec.default_device,
               spec.devices.empty() ? "" : fmt::format(", {} other key{}", spec.devices.size(), spec.devices.size() == 1 ? "" : "s"));
  else
    fmt::print("(no placement file written: -o FILE writes one)\n");
  fail_unless_fits();
}

void run_compare(const PlaceArgs& args) {
  // One Ctrl-C ends the comparison, also while it loads: the algorithms not yet run are skipped.
  struct SigintGuard {
    void (*previous)(int) = std::signal(SIGINT, on_sigint);
    ~SigintGuard() { std::signal(SIGINT, g_interrupted.load() ? SIG_DFL : previous); }
  } guard;
  // Split here, not by CLI11, which dropped empty names ("random,,heft") and let a lone ","
  // take the next argument as the list.
  std::vector<std::string> algos;
  for (const std::string& list : args.algos)
    for (std::string& name : split_commas(list)) algos.push_back(std::move(name));
  for (const auto& a : algos) {
    if (a.empty()) throw UsageError("--algos holds an empty name (two commas in a row?)");
    if (a == "all" && algos.size() > 1) throw UsageError("--algos: 'all' stands alone (it means every non-learned algorithm)");
    if (std::count(algos.begin(), algos.end(), a) > 1) throw UsageError("--algos names '" + a + "' twice");
  }
  if (algos.empty() || (algos.size() == 1 && algos[0] == "all")) {
    algos.clear();
    for (const auto& info : placer_registry())
      if (info.family != "learned") algos.push_back(info.name);
  }
  for (const auto& a : algos) check_algorithm(a, {});  // unknown names fail before anything loads or runs
  LoadedProblem p = load_problem(args.problem);
  const Problem problem{p.graph, p.cluster, p.costs, p.sim};
  const LowerBounds bounds = lower_bounds(p.graph, p.cluster, p.costs);

  // The best single device that fits: the reference every row's speedup is measured against.
  // None when no single device fits (a step may take 0 s: only aliases).
  std::optional<double> single;
  if (const auto one = best_one_device(problem)) single = one->second;
  // Ratios only for placements that fit (one that overflows a device is no step time to be sped up
  // to: its 10x would top the table), and none with nothing to compare (no single device fits, a
  // step or a bound of 0 s).
  auto speedup_of = [&](const SimResult& r) -> std::optional<double> {
    if (!r.fits || !single || !(r.step_time_s > 0.0)) return std::nullopt;
    return *single / r.step_time_s;
  };
  auto gap_of = [&](const SimResult& r) -> std::optional<double> {
    if (!r.fits || !(bounds.best() > 0.0)) return std::nullopt;
    return r.step_time_s / bounds.best() - 1.0;
  };
  auto json_of = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };

  std::vector<Row> rows;
  for (const auto& algo : algos) {
    // The algorithm running when Ctrl-C came keeps its best so far; the rest do not run.
    if (g_interrupted.load()) {
      rows.push_back(Row{.algo = algo, .error = "not run (interrupted)"});
      continue;
    }
    rows.push_back(run_algorithm(problem, algo, PlacerOptions{}, args));
  }
  const Row* best = nullptr;
  for (const auto& row : rows)
    if (row.error.empty() && row.result.sim.fits && (!best || row.result.sim.step_time_s < best->result.sim.step_time_s)) best = &row;

  if (args.json) {
    nlohmann::json out_rows = nlohmann::json::array();
    for (const auto& row : rows) {
      nlohmann::json j = {{"algo", row.algo}, {"wall_s", row.wall_s}};
      if (!row.error.empty()) {
        j["error"] = row.error;
        j["fits"] = false;
        j["step_time_s"] = nullptr;
      } else {
        const SimResult& r = row.result.sim;
        nlohmann::json peaks = nlohmann::json::object();
        for (DeviceId d = 0; d < r.devices.size(); ++d) peaks[p.cluster.device(d).name] = r.devices[d].peak_memory_bytes;
        j.update({{"step_time_s", r.step_time_s},
                  {"fits", r.fits},
                  {"speedup_over_single", json_of(speedup_of(r))},
                  {"gap_to_lower_bound", json_of(gap_of(r))},
                  {"peak_memory_bytes", peaks},
                  {"shortfalls", shortfalls_json(p.cluster, r)},
                  {"samples", row.result.samples},
                  {"note", row.result.note}});
      }
      out_rows.push_back(std::move(j));
    }
    std::cout << nlohmann::json{{"model", args.problem.model},
                                {"cluster", p.cluster.name()},
                                {"mode", args.problem.model_args.mode},
                                {"lower_bound_s", bounds.best()},
                                {"single_device_step_time_s", json_of(single)},
                                {"rows", out_rows},
                                {"best", best ? nlohmann::json(best->algo) : nlohmann::json(nullptr)}}
                     .dump(2)
              << "\n";
    return;
  }
  fmt::print("{} ({} ops, {}) on {}: lower bound {}, best single device {}\n\n", args.problem.model, p.graph.num_ops(),
             args.problem.model_args.mode, p.cluster.name(), human_seconds(bounds.best()),
             single ? human_seconds(*single) : "(none fits)");
  fmt::print("{:<14} {:>11} {:>8} {:>9} {:>5} {:>9}  {}\n", "algorithm", "step", "speedup", "vs bound", "fits", "wall", "peak memory per device");
  for (const auto& row : rows) {
    if (!row.error.empty()) {
      fmt::print("{:<14} {:>11}  {}\n", row.algo, "-", row.error);
      continue;
    }
    const SimResult& r = row.result.sim;
    std::string peaks;
    for (DeviceId d = 0; d < r.devices.size(); ++d)
      if (r.devices[d].peak_memory_bytes > r.devices[d].static_memory_bytes || r.devices[d].ops > 0)
        peaks += fmt::format("{}{} {}{}", peaks.empty() ? "" : ", ", p.cluster.device(d).name,
                             human_bytes(static_cast<double>(r.devices[d].peak_memory_bytes)),
                             // A row that does not fit says where and by how much (only stderr and --json did).
                             r.devices[d].peak_memory_bytes > r.devices[d].capacity_bytes
                                 ? " (over by " + human_bytes(static_cast<double>(r.devices[d].peak_memory_bytes - r.devices[d].capacity_bytes)) + ")"
                                 : std::string());
    const std::optional<double> speedup = speedup_of(r), gap = gap_of(r);
    fmt::print("{:<14} {:>11} {:>8} {:>9} {:>5} {:>8.2f}s  {}{}\n", row.algo, human_seconds(r.step_time_s),
               speedup ? ratio_text(*speedup) : "-", gap ? ratio_text(*gap + 1.0) : "-",
               r.fits ? "yes" : "NO", row.wall_s, peaks,
               row.result.note.empty() ? "" : "  (" + row.result.note + ")");
  }
  fmt::print("\nbest placement that fits: {}\n", best ? best->algo : "none");
}

void add_run_options(CLI::App* cmd, PlaceArgs& args) {
  add_problem_options(cmd, args.problem);
  cmd->add_option("--samples", args.samples,
                  "placements an algorithm may evaluate (0: its default when --seconds is 0 too: local-search 8000, its start's "
                  "included, random 1, the learned placers 2000; with --seconds, as many as fit; learned placers round up to whole "
                  "batches; single, expert and the schedulers evaluate the few they need; metis, scotch, sequential and balanced "
                  "repair memory within it, optimal simulates its integer program's solutions within it)")
      ->check(kSamples);
  cmd->add_option("--seconds", args.seconds, "wall-clock budget per algorithm (0: none)")->check(kSeconds);
  cmd->add_option("--threads", args.threads, "threads for parallel search (0: every core)")->check(kCount);
  cmd->add_option("--seed", args.seed, "seed of every random choice")->capture_default_str()->check(kSeed);
  cmd->add_flag("--json", args.json, "print JSON");
  cmd->add_flag("--quiet", args.quiet, "no progress on stderr");
}

}  // namespace

void register_place(CLI::App& app) {
  auto args = std::make_shared<PlaceArgs>();
  CLI::App* cmd = app.add_subcommand("place", "Place a model on a cluster with one algorithm and write the placement file");
  add_run_options(cmd, *args);
  cmd->add_option("--algo", args->algo, algorithms_help())->required();
  cmd->add_option("--opt", args->opts, "algorithm option KEY=VALUE (repeatable; see --algo)");
  cmd->add_option("-o,--output", args->output, "write the placement file here (JSON, read by simulate --placement)")->check(kFileName);
  cmd->add_option("--curve", args->curve, "learned placers: write the learning curve (CSV) here")->check(kFileName);
  cmd->add_option("--checkpoint", args->checkpoint, "learned placers: checkpoint file, written periodically and at the end")->check(kFileName);
  cmd->add_flag("--resume", args->resume, "learned placers: continue from --checkpoint");
  cmd->callback([args] { run_place(*args); });
}

void register_compare(CLI::App& app) {
  auto args = std::make_shared<PlaceArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "Run several placement algorithms and print one row each");
  add_run_options(cmd, *args);
  cmd->add_option("--algos", args->algos, "comma-separated algorithm names, or 'all' (the default: every non-learned one)");
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace placer::cli
