// `placer simulate`: one training (or inference) step of a model on a cluster under placements,
// simulated; or the simulator's throughput on random placements. `placer bounds`: lower bounds.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "placer/cli/common.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/trace.hpp"
#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"
#include "placer/util/text.hpp"

namespace placer::cli {
namespace {

struct SimulateArgs {
  ProblemArgs problem;
  std::vector<std::string> placements;
  std::vector<std::string> on;
  std::size_t random = 0;
  double seconds = 0;  // --random's time limit; 0: none
  std::uint64_t seed = 1;
  const CLI::Option* seed_option = nullptr;  // whether --seed was given
  std::string trace;
  bool json = false;
};

// Bytes summed as doubles (exact up to 2^53, 8 PiB), written as the integers they are, as every
// other byte count; from 2^64 on as the double itself (llround overflowed past 2^63 and wrote 2^63
// for 10 EiB: a QA pass).
nlohmann::json whole_bytes(double bytes) {
  const double rounded = std::round(bytes);
  if (rounded < 0x1p64) return static_cast<std::uint64_t>(rounded);
  return rounded;
}

nlohmann::json result_json(const LoadedProblem& p, const Simulator& sim, const SimResult& r, const std::string& label) {
  const nlohmann::json devices = devices_json(p.cluster, r);
  nlohmann::json channels = nlohmann::json::array();
  for (ChannelId ch = 0; ch < r.channel_bytes.size(); ++ch)
    if (r.channel_bytes[ch] > 0) channels.push_back({{"name", p.cluster.channel_name(ch)}, {"bytes", whole_bytes(r.channel_bytes[ch])}});
  const nlohmann::json shortfalls = shortfalls_json(p.cluster, r);
  nlohmann::json path = nlohmann::json::array();
  for (const PathStep& s : sim.critical_path()) {
    const bool op = s.kind == PathStep::Kind::op;
    path.push_back({{"kind", op ? "op" : "transfer"},
                    {"name", op ? p.graph.op_name(s.id) : p.graph.tensor_name(s.id)},
                    {"device", p.cluster.device(s.where).name},
                    {"start_s", s.start_s},
                    {"end_s", s.end_s}});
  }
  return {{"placement", label},        {"step_time_s", r.step_time_s}, {"fits", r.fits},
          {"devices", devices},        {"channels", channels},         {"transfers", r.transfers},
          {"transfer_bytes", whole_bytes(r.transfer_bytes)}, {"shortfalls", shortfalls}, {"critical_path", path}};
}

// "1.23x"; "-" when the bound is 0 (a graph with no work).
std::string times_bound(double step_s, double bound_s) { return bound_s > 0 ? ratio_text(step_s / bound_s) : "-"; }

void print_result(const LoadedProblem& p, const Simulator& sim, const SimResult& r, const std::string& label, double bound) {
  fmt::print("placement {}: step {}{}  ({} the lower bound), {} transfers, {}\n", label, human_seconds(r.step_time_s),
             r.fits ? "" : "  DOES NOT FIT", times_bound(r.step_time_s, bound), r.transfers, human_bytes(r.transfer_bytes));
  // The device column as wide as the longest name (a cluster file may name "node0/gpu:12").
  std::size_t width = 8;
  for (DeviceId d = 0; d < r.devices.size(); ++d) width = std::max(width, text_width(p.cluster.device(d).name));
  fmt::print("  {:<{}} {:>6} {:>12} {:>6} {:>12} {:>12}\n", "device", width, "ops", "busy", "util", "peak memory", "limit");
  for (DeviceId d = 0; d < r.devices.size(); ++d) {
    const DeviceResult& dr = r.devices[d];
    if (dr.ops == 0 && dr.peak_memory_bytes == 0) continue;
    fmt::print("  {:<{}} {:>6} {:>12} {:>5.0f}% {:>12} {:>12}{}\n", p.cluster.device(d).name, width, dr.ops, human_seconds(dr.busy_s),
               // of what its streams could have done
               r.step_time_s > 0 ? dr.busy_s / r.step_time_s / std::max(1, p.cluster.device(d).streams) * 100.0 : 0.0,
               human_bytes(static_cast<double>(dr.peak_memory_bytes)),
               human_bytes(static_cast<double>(dr.capacity_bytes)),
               dr.peak_memory_bytes > dr.capacity_bytes
                   ? "  over by " + human_bytes(static_cast<double>(dr.peak_memory_bytes - dr.capacity_bytes))
                   : std::string());
  }
  auto path = sim.critical_path();
  std::size_t ops = 0, transfers = 0;
  for (const auto& s : path) (s.kind == PathStep::Kind::op ? ops : transfers)++;
  fmt::print("  critical path: {} ops, {} transfers\n", ops, transfers);
}

void run_random(const SimulateArgs& args, const LoadedProblem& p) {
  Simulator sim(p.graph, p.cluster, p.costs, p.sim);
  std::mt19937_64 rng(args.seed);
  std::uniform_int_distribution<DeviceId> pick(0, static_cast<DeviceId>(p.cluster.num_devices() - 1));
  std::vector<DeviceId> fwd(p.graph.num_forward_ops());
  auto draw = [&] {
    for (auto& d : fwd) d = pick(rng);
    return expand_placement(p.graph, fwd);
  };
  // Placements are drawn a block at a time, outside the timed loop, so that memory does not grow
  // with N; the draws are the same as drawing all N first. With --seconds the run ends after the
  // block in which that much wall time (draws included) has passed.
  constexpr std::size_t kBlock = 64;
  std::vector<std::vector<DeviceId>> block;
  block.reserve(std::min<std::size_t>(kBlock, args.random));
  // The mean step is kept as a running mean: a sum of steps near the largest double overflows to
  // inf where their mean does not.
  double mean = 0.0, wall = 0.0;
  std::size_t done = 0;
  const auto began = std::chrono::steady_clock::now();
  const auto out_of_time = [&] {
    return args.seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() >= args.seconds;
  };
  while (done < args.random && !(done > 0 && out_of_time())) {
    block.clear();
    while (block.size() < kBlock && done + block.size() < args.random) block.push_back(draw());
    if (done == 0) sim.simulate(block[0]);  // warm-up: scratch allocated here, never again
    const auto start = std::chrono::steady_clock::now();
    for (const auto& placement : block) {
      const double step = sim.simulate(placement).step_time_s;
      mean += (step - mean) / static_cast<double>(++done);
    }
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double simulations = static_cast<double>(done);
  const double ops_per_second = simulations * static_cast<double>(p.graph.num_ops()) / wall;
  if (args.json) {
    std::cout << nlohmann::json{{"simulations", done},
                                {"ops", p.graph.num_ops()},
                                {"wall_s", wall},
                                {"ops_per_second", ops_per_second},
                                {"simulations_per_second", simulations / wall},
                                {"mean_step_time_s", mean}}
                     .dump(2)
              << "\n";
    return;
  }
  fmt::print("{} random op-level placements of {} ops on {}{}: {:.2f} M simulated ops/s, {:.0f} simulations/s (one thread), "
             "mean step {}\n",
             done, p.graph.num_ops(), p.cluster.name(), done < args.random ? fmt::format(" (of {}: --seconds ran out)", args.random) : "",
             ops_per_second / 1e6, simulations / wall, human_seconds(mean));
}

void run_simulate(const SimulateArgs& args) {
  if (args.random == 0 && args.placements.empty() && args.on.empty())
    throw UsageError("give --placement FILE, --on DEVICE or --random N (N at least 1)");
  // Checked before anything is loaded or simulated.
  if (args.random > 0 && (!args.placements.empty() || !args.on.empty() || !args.trace.empty()))
    throw UsageError("--random simulates random placements of its own: it takes no --placement, --on or --trace");
  if (args.seconds > 0 && args.random == 0) throw UsageError("--seconds limits --random: give --random N too");
  if (args.random == 0 && args.seed_option && args.seed_option->count() > 0)
    fmt::print(stderr, "placer: note: --seed seeds --random only; it has no effect with --on or --placement\n");
  check_json_alone_on_stdout(args.json, {{"--trace", args.trace}});
  if (!args.trace.empty()) {
    if (args.placements.size() + args.on.size() != 1) throw UsageError("--trace needs exactly one placement");
    auto inputs = problem_inputs(args.problem);
    for (const std::string& file : args.placements) inputs.push_back({"--placement", file});
    check_not_an_input(args.trace, "--trace", inputs);
    check_writable(args.trace, "trace file");
  }
  LoadedProblem p = load_problem(args.problem);
  if (args.random > 0) return run_random(args, p);

  std::vector<std::pair<std::string, std::vector<DeviceId>>> runs;
  for (const auto& device : args.on) {
    PlacementSpec spec{.default_device = device};
    runs.push_back({"all on " + device, resolve_forward_placement(spec, p.graph, p.cluster, "--on")});
  }
  for (const auto& file : args.placements) {
    const PlacementSpec spec = load_placement_file(file);
    warn_placement_made_otherwise(spec, file,
                                  PlacementUse{.mode = args.problem.model_args.mode,
                                               .optimizer = step_optimizer_name(p.graph, args.problem),
                                               .gradient_sums = args.problem.gradient_sums,
                                               .cluster = p.cluster.name(),
                                               .memory_fraction = args.problem.memory_fraction});
    runs.push_back({file, resolve_forward_placement(spec, p.graph, p.cluster, "placement file '" + file + "'")});
  }

  const LowerBounds bounds = lower_bounds(p.graph, p.cluster, p.costs);
  Simulator sim(p.graph, p.cluster, p.costs, p.sim);
  nlohmann::json all = nlohmann::json::array();
  if (!args.json)
    fmt::print("{} ({} ops{}, {} mode) on {}; lower bound {}\n\n", args.problem.model, p.graph.num_ops(),
               p.graph.num_folded_ops() > 0 ? fmt::format(", {} of them computed before the step", p.graph.num_folded_ops()) : "",
               args.problem.model_args.mode, p.cluster.name(), human_seconds(bounds.best()));
  for (const auto& [label, fwd] : runs) {
    std::vector<DeviceId> devices = expand_placement(p.graph, fwd);
    std::vector<TraceEvent> trace;
    const bool tracing = !args.trace.empty() && runs.size() == 1;
    const SimResult& r = tracing ? sim.simulate(devices, trace) : sim.simulate(devices);
    // Named as validate names its simulated step, with the model: what is drawn, not only where.
    if (tracing)
      write_chrome_trace_events(args.trace, chrome_trace_events(p.graph, p.cluster, trace, 1,
                                                                "simulated: " + std::filesystem::path(args.problem.model).filename().string() +
                                                                    ", " + label + " on " + p.cluster.name()));
    if (args.json) {
      nlohmann::json j = result_json(p, sim, r, label);
      j["lower_bound_s"] = bounds.best();
      all.push_back(std::move(j));
    } else {
      print_result(p, sim, r, label, bounds.best());
      fmt::print("\n");
    }
  }
  if (args.json) std::cout << (all.size() == 1 ? all[0] : nlohmann::json{{"placements", all}}).dump(2) << "\n";
  if (!args.json && runs.size() > 1) {
    std::size_t width = 44;  // or the longest label: a long path pushed its row out of line
    for (const auto& run : runs) width = std::max(width, text_width(run.first));
    fmt::print("{:<{}} {:>12} {:>6} {:>10}\n", "placement", width, "step", "fits", "vs bound");
    for (const auto& [label, fwd] : runs) {
      const SimResult& r = sim.simulate(expand_placement(p.graph, fwd));
      fmt::print("{:<{}} {:>12} {:>6} {:>10}\n", label, width, human_seconds(r.step_time_s), r.fits ? "yes" : "NO",
                 times_bound(r.step_time_s, bounds.best()));
    }
  }
}

}  // namespace

void register_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Simulate one step of a model on a cluster under placements");
  add_problem_options(cmd, args->problem);
  cmd->add_option("--placement", args->placements, "placement JSON file(s), comma-separated")->check(comma_list("file name"));
  cmd->add_option("--on", args->on, "place everything on this device (comma-separated: one run each)")->check(comma_list("device name"));
  cmd->add_option("--random", args->random, "simulate N random op-level placements and report simulated ops per second")
      ->check(kRandomCount);
  cmd->add_option("--seconds", args->seconds, "end --random after the placements simulated in this many seconds (0: no limit)")
      ->check(kSeconds);
  args->seed_option = cmd->add_option("--seed", args->seed, "seed of --random")->capture_default_str()->check(kSeed);
  cmd->add_option("--trace", args->trace, "write the schedule as a Chrome trace (Perfetto) to this file")->check(kFileName);
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] {
    args->placements = comma_items(args->placements);
    args->on = comma_items(args->on);
    run_simulate(*args);
  });
}

void register_bounds(CLI::App& app) {
  auto args = std::make_shared<ProblemArgs>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("bounds", "Lower bounds on the step time of any placement");
  add_problem_options(cmd, *args);
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([args, json, cmd] {
    LoadedProblem p = load_problem(*args);
    LowerBounds b = lower_bounds(p.graph, p.cluster, p.costs);
    // Time bounds: no memory limit enters them (docs/simulator.md). Said of each option given,
    // whatever its value.
    std::vector<std::string> given;
    for (const char* option : {"--memory-fraction", "--gradient-sums"})
      if (cmd->count(option) > 0) given.push_back(option);
    if (!given.empty())
      fmt::print(stderr, "placer: note: the bounds do not depend on memory: {} change{} nothing here\n", fmt::join(given, " and "),
                 given.size() == 1 ? "s" : "");
    if (*json) {
      std::cout << nlohmann::json{{"critical_path_s", b.critical_path_s}, {"total_work_s", b.total_work_s}, {"lower_bound_s", b.best()}}
                       .dump(2)
                << "\n";
      return;
    }
    fmt::print("critical path, every op on its fastest device, free communication: {}\n", human_seconds(b.critical_path_s));
    fmt::print("total work shared out over the {} devices in the best proportions:  {}\n", p.cluster.num_devices(),
               human_seconds(b.total_work_s));
    fmt::print("lower bound: {}\n", human_seconds(b.best()));
  });
}

}  // namespace placer::cli
