// `placer run`: a model's step executed for real (libtorch) under a placement, timed.
// `placer profile`: every op measured on the machine, written as a profile with a fitted model.
// `placer validate`: placements run for real and simulated, side by side.
// Only exec/exec.hpp is included: the CLI never compiles torch headers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "placer/cli/common.hpp"
#include "placer/exec/exec.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/trace.hpp"
#include "placer/util/error.hpp"
#include "placer/util/host.hpp"
#include "placer/util/json_fields.hpp"
#include "placer/util/stats.hpp"

namespace placer::cli {
namespace {

struct RunArgs {
  std::string model;
  ModelArgs model_args;
  std::string cluster = "local";
  std::string placement;
  std::string on;
  int steps = 10;
  int warmup = 3;
  std::uint64_t seed = 1;
  int threads = 0;
  bool json = false;
  std::string trace;
};

void add_exec_options(CLI::App* cmd, int& threads, std::uint64_t& seed) {
  cmd->add_option("--threads", threads,
                  "intra-op threads of libtorch and OpenBLAS, at most the hardware threads (0: $PLACER_THREADS, else every "
                  "hardware thread but one)")
      ->capture_default_str()
      ->check(kCount);
  cmd->add_option("--seed", seed, "seed of the random parameters and data")->capture_default_str()->check(kSeed);
}

nlohmann::json times_json(const exec::StepTimes& t) {
  return {{"median_s", t.median_s}, {"p10_s", t.p10_s}, {"p90_s", t.p90_s}, {"min_s", t.min_s},
          {"max_s", t.max_s},       {"steps", t.times_s.size()}, {"times_s", t.times_s}};
}

// The measured memories (exec::MeasuredMemory), each naming the cluster devices whose ops ran in it;
// with `simulated` (peak bytes per cluster device), a memory that holds one device also gets that
// device's simulated peak and the relative error.
nlohmann::json memory_json(const exec::Executor& executor, const Cluster& cluster, const std::vector<std::uint64_t>* simulated = nullptr) {
  nlohmann::json out = nlohmann::json::array();
  for (const exec::MeasuredMemory& m : executor.measured_memory()) {
    nlohmann::json names = nlohmann::json::array();
    for (DeviceId d : m.devices) names.push_back(cluster.device(d).name);
    nlohmann::json j{{"memory", m.memory}, {"devices", names}, {"start_bytes", m.start_bytes}, {"peak_bytes", m.peak_bytes}};
    if (simulated && m.devices.size() == 1 && m.peak_bytes > 0) {
      const auto sim = (*simulated)[m.devices[0]];
      j["simulated_peak_bytes"] = sim;
      j["error"] = (static_cast<double>(sim) - static_cast<double>(m.peak_bytes)) / static_cast<double>(m.peak_bytes);
    }
    out.push_back(std::move(j));
  }
  return out;
}

// A step as it ran (Executor::trace_step) as Chrome trace events in process `pid`: a track per
// device for its forward ops, one for autograd's nodes, one for the loss and the update, and a
// counter of the host's live bytes ("memory host"). Times in whole nanoseconds, as the simulated
// trace's (sim/trace.cpp).
nlohmann::json measured_trace_events(const exec::StepTrace& t, const Cluster& c, int pid, const std::string& process) {
  using nlohmann::json;
  const auto nd = static_cast<std::uint32_t>(c.num_devices());
  const std::uint32_t autograd = nd, loss_and_update = nd + 1;
  auto ns = [](double s) { return std::llround(s * 1e9); };
  auto us = [&](double s) { return static_cast<double>(ns(s)) / 1e3; };
  json events = json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", process}}}});
  std::set<std::uint32_t> tracks;
  for (const exec::StepTrace::Slice& slice : t.slices) {
    const std::uint32_t tid = slice.category == "forward" ? slice.device : slice.category == "backward" ? autograd : loss_and_update;
    tracks.insert(tid);
    events.push_back({{"name", slice.name}, {"cat", slice.category}, {"ph", "X"}, {"pid", pid}, {"tid", tid},
                      {"ts", us(slice.start_s)}, {"dur", static_cast<double>(ns(slice.end_s) - ns(slice.start_s)) / 1e3}});
  }
  for (std::uint32_t tid : tracks) {
    const std::string name = tid < nd ? c.device(tid).name : tid == autograd ? "autograd (backward)" : "loss and update";
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }
  for (const exec::StepTrace::Sample& m : t.host_memory)
    events.push_back({{"name", "memory host"}, {"ph", "C"}, {"pid", pid}, {"ts", us(m.t_s)}, {"args", {{"bytes", m.bytes}}}});
  return events;
}

// One line per measured memory: "  memory host (cpu:0): peak 1.2 GiB, 300 MiB before the step[, simulated ...]".
void print_memory(const nlohmann::json& memory) {
  for (const auto& m : memory) {
    std::string devices;
    for (const auto& name : m["devices"]) devices += (devices.empty() ? "" : ", ") + name.get<std::string>();
    std::string line = fmt::format("  memory {} ({}): peak {}, {} live before the step", m["memory"].get<std::string>(), devices,
                                   human_bytes(m["peak_bytes"].get<double>()), human_bytes(m["start_bytes"].get<double>()));
    if (m.contains("simulated_peak_bytes"))
      line += fmt::format("; simulated peak {} ({:+.1f}%)", human_bytes(m["simulated_peak_bytes"].get<double>()),
                          100 * m["error"].get<double>());
    fmt::print("{}\n", line);
  }
}

// This machine runs the steps (and the profiler's ops); a cluster that describes the CPU devices
// among `devices` as another model (a preset's Xeon) makes a comparison of two machines (-94.7%
// for CifarNet on k80x4's CPU, with nothing said: a QA pass), and a profile of one machine's times
// under the other's name (a review): a warning naming both.
void warn_cpus_of_another_machine(const Cluster& cluster, const std::set<DeviceId>& devices, const char* what_it_does,
                                  const char* consequence) {
  const std::string host = host_cpu_model();
  std::vector<std::string> other;
  for (DeviceId d : devices)
    if (cluster.device(d).kind == DeviceKind::cpu && cluster.device(d).model.find(host) == std::string::npos)
      other.push_back(fmt::format("{} as '{}'", cluster.device(d).name, cluster.device(d).model));
  if (!other.empty())
    fmt::print(stderr, "placer: warning: cluster '{}' describes {}, and this machine's CPU, which {}, is '{}': {} (--cluster local describes this one)\n",
               cluster.name(), fmt::join(other, ", "), what_it_does, host, consequence);
}

void run_run(const RunArgs& args) {
  if (args.placement.empty() == args.on.empty()) throw UsageError("give exactly one of --placement FILE or --on DEVICE");
  if (args.steps < 1 || args.warmup < 0) throw UsageError("--steps must be at least 1 and --warmup at least 0");
  check_json_alone_on_stdout(args.json, {{"--trace", args.trace}});
  if (!args.trace.empty()) {
    // Not over an input (it replaced the model and exited 0: a review), and writable, before the steps.
    check_not_an_input(args.trace, "--trace", {{"--model", args.model}, {"--cluster", cluster_input_file(args.cluster)}, {"--placement", args.placement}});
    check_writable(args.trace, "trace file");
  }
  const int threads = exec::configure_threads(args.threads);
  ModelOptions options = args.model_args.resolve();
  ModelOptions forward_options = options;
  forward_options.mode = Mode::inference;
  const Graph forward = load_forward_graph(args.model, forward_options);
  warn_without_data_inputs(forward, args.model, options.mode);  // its rules read the forward graph's tensors
  // A run names devices and reads no figure of theirs: the `local` preset's benchmarks are skipped.
  const Cluster cluster = args.cluster == "local" ? exec::local_cluster_layout() : resolve_cluster(args.cluster);
  const PlacementSpec spec = args.on.empty() ? load_placement_file(args.placement) : PlacementSpec{.default_device = args.on};
  // (Not the cluster: a run reads no figure of it, and a placement found on a preset runs here.)
  if (args.on.empty())
    warn_placement_made_otherwise(spec, args.placement, PlacementUse{.mode = args.model_args.mode, .optimizer = args.model_args.optimizer});
  const std::string label = args.on.empty() ? args.placement : "all on " + args.on;
  const std::vector<DeviceId> devices =
      resolve_forward_placement(spec, forward, cluster, args.on.empty() ? "placement file '" + args.placement + "'" : "--on");
  exec::Executor executor(args.model, options, cluster, devices,
                          exec::ExecOptions{.mode = options.mode, .optimizer = options.optimizer, .seed = args.seed});
  const exec::StepTimes t = executor.measure(args.steps, args.warmup);
  // The memory and copies reported are the timed steps'; the traced step comes after them.
  const nlohmann::json memory = memory_json(executor, cluster);
  const std::size_t copies = executor.copies_last_step();
  if (!args.trace.empty())
    write_chrome_trace_events(args.trace, measured_trace_events(executor.trace_step(), cluster, 1, "measured: " + label + " on " + cluster.name()));
  if (args.json) {
    nlohmann::json j = times_json(t);
    j["warmup"] = args.warmup;
    j["placement"] = label;
    j["cluster"] = cluster.name();
    j["mode"] = args.model_args.mode;
    if (options.mode == Mode::training) j["optimizer"] = args.model_args.optimizer;
    j["threads"] = threads;
    j["copies_per_step"] = copies;
    j["memory"] = memory;
    std::cout << j.dump(2) << "\n";
    return;
  }
  auto plural = [](std::size_t n, const char* one, const char* many) { return fmt::format("{} {}", n, n == 1 ? one : many); };
  fmt::print("{} ({} mode), {} on {}: step {} median  (p10 {}, p90 {}, min {}, max {}; {} after {} warm-up, {}, {} per step)\n",
             args.model, args.model_args.mode, label, cluster.name(), human_seconds(t.median_s), human_seconds(t.p10_s),
             human_seconds(t.p90_s), human_seconds(t.min_s), human_seconds(t.max_s), plural(t.times_s.size(), "step", "steps"),
             args.warmup, plural(static_cast<std::size_t>(threads), "thread", "threads"),
             plural(copies, "copy", "copies"));
  print_memory(memory);
}

struct ProfileArgs {
  std::string model;
  ModelArgs model_args;
  std::string cluster;
  std::string output;
  int repeats = 10;
  int steps = 8;
  int warmup = 3;
  std::uint64_t seed = 1;
  int threads = 0;
  bool no_fit = false;
  bool json = false;
};

void run_profile(const ProfileArgs& args) {
  if (args.steps < 1 || args.warmup < 0 || args.repeats < 1) throw UsageError("--steps and --repeats must be at least 1 and --warmup at least 0");
  check_json_alone_on_stdout(args.json, {{"-o", args.output}});
  exec::configure_threads(args.threads);
  const ModelOptions options = args.model_args.resolve();
  const Cluster cluster = resolve_cluster(args.cluster);
  check_not_an_input(args.output, "-o", {{"--model", args.model}, {"--cluster", cluster_input_file(args.cluster)}});
  check_writable(args.output, "profile file");  // before the measurement, not after it
  exec::ProfileOptions po{.mode = options.mode, .optimizer = options.optimizer, .repeats = args.repeats, .steps = args.steps,
                          .warmup = args.warmup, .seed = args.seed, .fit = !args.no_fit};
  {
    std::set<DeviceId> cpus;
    for (DeviceId d : cluster.device_ids(DeviceKind::cpu)) cpus.insert(d);
    warn_cpus_of_another_machine(cluster, cpus, "times the ops", "the profile records this machine's times as that CPU's");
  }
  const exec::ProfileReport report = exec::profile_model(args.model, options, cluster, po);
  report.profile.save(args.output);
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
    const bool measured = std::any_of(report.kinds.begin(), report.kinds.end(), [&](const auto& k) { return k.kind == kind; });
    if (!measured && !cluster.device_ids(kind).empty())
      fmt::print(stderr, "placer: note: the cluster's {} devices were not measured (this machine cannot run them{})\n",
                 device_kind_name(kind), kind == DeviceKind::gpu ? ": no CUDA in this libtorch, or no GPU" : "");
  }
  // A fit from a handful of op times says little, as `fit` warns (one op's profile stored a fitted
  // roofline without a word: a review).
  for (const auto& k : report.kinds)
    if (!args.no_fit && k.fit_samples < kFewFitTimes)
      fmt::print(stderr,
                 "placer: warning: the {} devices' fitted roofline rests on {} op time{} only (fewer than {}): its overhead and "
                 "efficiencies, which price the ops the profile does not time, are poorly determined\n",
                 device_kind_name(k.kind), k.fit_samples, k.fit_samples == 1 ? "" : "s", kFewFitTimes);
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& k : report.kinds) {
    kinds.push_back({{"kind", std::string(device_kind_name(k.kind))},
                     {"device", k.device},
                     {"ops_measured", k.ops_measured},
                     {"op_sum_s", k.op_sum_s},
                     {"forward_step_s", k.forward_step_s},
                     {"step_s", k.step_s},
                     {"forward_residual_s", k.forward_residual_s},
                     {"backward_residual_s", k.backward_residual_s},
                     {"whole_step_calibration", k.whole_step_calibration}});
    // With --no-fit nothing was fitted: no fit's figures (it printed an overhead of 0 and an error
    // of 0%: a review).
    if (!args.no_fit) {
      kinds.back()["fitted_overhead_s"] = k.fitted_overhead_s;
      kinds.back()["fitted_backward_overhead_s"] = k.fitted_backward_overhead_s;
      kinds.back()["fit_median_abs_error"] = k.fit_median_abs_error;
    }
    const std::string fit =
        args.no_fit ? std::string("roofline not fitted (--no-fit)")
                    : fmt::format("fitted roofline: per-op overhead {}{}, median error {:.0f}%", human_seconds(k.fitted_overhead_s),
                                  k.fitted_backward_overhead_s > 0 ? fmt::format(" (gradients {})", human_seconds(k.fitted_backward_overhead_s)) : "",
                                  100 * k.fit_median_abs_error);
    if (!args.json)
      fmt::print("{} ({}): {} ops measured; step {} (forward {}), isolated ops sum to {}; residual forward {}, backward+update {}; {}\n",
                 k.device, device_kind_name(k.kind), k.ops_measured, human_seconds(k.step_s), human_seconds(k.forward_step_s),
                 human_seconds(k.op_sum_s), human_seconds(k.forward_residual_s), human_seconds(k.backward_residual_s), fit);
    if (!args.json && k.whole_step_calibration)
      fmt::print("  note: the measured step was not longer than the forward pass (timing noise); the whole step was spread over all ops\n");
  }
  if (args.json) std::cout << nlohmann::json{{"profile", args.output}, {"kinds", kinds}}.dump(2) << "\n";
  else fmt::print("wrote {} ({} entries)\n", args.output, report.profile.size());
}

struct ValidateArgs {
  std::string model;
  ModelArgs model_args;
  std::string cluster;
  std::string profile;
  std::vector<std::string> placements;
  std::vector<std::string> on;
  int steps = 10;
  int warmup = 3;
  std::uint64_t seed = 1;
  int threads = 0;
  bool json = false;
  std::string trace;
};

void run_validate(const ValidateArgs& args) {
  if (args.placements.empty() && args.on.empty()) throw UsageError("give --placements FILE,... or --on DEVICE,...");
  if (args.steps < 1 || args.warmup < 0) throw UsageError("--steps must be at least 1 and --warmup at least 0");
  check_json_alone_on_stdout(args.json, {{"--trace", args.trace}});
  exec::configure_threads(args.threads);
  const ModelOptions options = args.model_args.resolve();
  const Graph graph = load_model(args.model, options);
  warn_without_data_inputs(graph, args.model, options.mode);
  const Cluster cluster = resolve_cluster(args.cluster);
  std::optional<Profile> profile;
  if (!args.profile.empty()) profile = Profile::load(args.profile);
  const CostTable costs(graph, cluster, CostModel::defaults(), profile ? &*profile : nullptr);
  warn_unmatched_efficiency_types(graph, cluster, costs);
  if (profile) {
    warn_unmatched_profile(*profile, graph, costs, args.profile, args.model);
    warn_other_machine(*profile, cluster, args.profile);
  }
  // Peaks as this libtorch's autograd makes them (its partial gradient sums: in place or not).
  SimOptions sim_options;
  sim_options.gradient_sums_out_of_place = exec::sums_gradients_out_of_place();
  Simulator sim(graph, cluster, costs, sim_options);

  std::vector<std::pair<std::string, std::vector<DeviceId>>> runs;
  for (const auto& device : args.on)
    runs.push_back({"all on " + device, resolve_forward_placement(PlacementSpec{.default_device = device}, graph, cluster, "--on")});
  for (const auto& file : args.placements) {
    const PlacementSpec spec = load_placement_file(file);
    warn_placement_made_otherwise(spec, file,
                                  PlacementUse{.mode = args.model_args.mode, .optimizer = args.model_args.optimizer, .cluster = cluster.name()});
    runs.push_back({file, resolve_forward_placement(spec, graph, cluster, "placement file '" + file + "'")});
  }
  if (!args.trace.empty() && runs.size() != 1)
    throw UsageError("--trace writes one placement's step: give one --on DEVICE or one --placements FILE (got " + std::to_string(runs.size()) + ")");
  if (!args.trace.empty()) {
    std::vector<std::pair<std::string, std::string>> inputs{
        {"--model", args.model}, {"--cluster", cluster_input_file(args.cluster)}, {"--profile", args.profile}};
    for (const std::string& file : args.placements) inputs.push_back({"--placements", file});
    check_not_an_input(args.trace, "--trace", inputs);
    check_writable(args.trace, "trace file");
  }

  // Everything that can fail without running does so first: devices, simulations.
  std::vector<TraceEvent> simulated_trace;  // --trace: the one placement's simulated step
  std::vector<double> simulations;
  std::vector<std::vector<std::uint64_t>> simulated_peaks;  // per run, per cluster device
  std::vector<nlohmann::json> simulated_shortfalls;          // per run: devices over their memory in the simulation
  for (const auto& run : runs) {
    exec::check_devices_available(cluster, run.second);
    const SimResult& r = args.trace.empty() ? sim.simulate(expand_placement(graph, run.second))
                                            : sim.simulate(expand_placement(graph, run.second), simulated_trace);
    simulations.push_back(r.step_time_s);
    simulated_peaks.emplace_back();
    for (const DeviceResult& dr : r.devices) simulated_peaks.back().push_back(dr.peak_memory_bytes);
    simulated_shortfalls.push_back(shortfalls_json(cluster, r));
    std::set<DeviceId> cpus;
    for (DeviceId d : run.second)
      if (cluster.device(d).kind == DeviceKind::cpu) cpus.insert(d);
    if (cpus.size() > 1)
      fmt::print(stderr,
                 "placer: note: '{}' uses {} CPU devices, which are this one host: the executor runs their ops one after the "
                 "other, the simulator in parallel (docs/execution.md)\n",
                 run.first, cpus.size());
  }

  // The runs are this machine's; the simulations the cluster's.
  {
    std::set<DeviceId> used;
    for (const auto& run : runs)
      for (DeviceId d : run.second) used.insert(d);
    warn_cpus_of_another_machine(cluster, used, "runs the steps", "the simulated times are the cluster's machine's");
  }

  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> errors;
  bool header = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [label, forward_devices] = runs[i];
    exec::Executor executor(args.model, options, cluster, forward_devices,
                            exec::ExecOptions{.mode = options.mode, .optimizer = options.optimizer, .seed = args.seed});
    const exec::StepTimes t = executor.measure(args.steps, args.warmup);
    const double simulated = simulations[i];
    if (!args.json && !header) fmt::print("{:<40} {:>12} {:>12} {:>8}\n", "placement", "measured", "simulated", "error");
    header = true;
    const double error = (simulated - t.median_s) / t.median_s;
    errors.push_back(std::fabs(error));
    nlohmann::json row = times_json(t);
    row["placement"] = label;
    row["simulated_s"] = simulated;
    row["error"] = error;
    // Whether the placement fits the cluster's memory in the simulation (validate said nothing of a
    // placement that does not, while simulate marks it: a review).
    row["fits"] = simulated_shortfalls[i].empty();
    row["shortfalls"] = simulated_shortfalls[i];
    row["copies_per_step"] = executor.copies_last_step();
    row["memory"] = memory_json(executor, cluster, &simulated_peaks[i]);
    if (!args.trace.empty()) {
      // Both steps in one file: the simulated one (process 1), the measured one (process 2).
      nlohmann::json events = chrome_trace_events(graph, cluster, simulated_trace, 1, "simulated: " + label + " on " + cluster.name());
      for (auto& e : measured_trace_events(executor.trace_step(), cluster, 2, "measured: " + label + " on " + cluster.name()))
        events.push_back(std::move(e));
      write_chrome_trace_events(args.trace, std::move(events));
    }
    if (!args.json) {
      std::string over;
      for (const auto& sf : simulated_shortfalls[i])
        over += fmt::format("{}{} over by {}", over.empty() ? "" : ", ", sf["device"].get<std::string>(),
                            human_bytes(static_cast<double>(sf["bytes"].get<std::uint64_t>())));
      fmt::print("{:<40} {:>12} {:>12} {:>+7.1f}%{}\n", label, human_seconds(t.median_s), human_seconds(simulated), 100 * error,
                 over.empty() ? "" : "  DOES NOT FIT in the simulation (" + over + ")");
      print_memory(row["memory"]);
    }
    rows.push_back(row);
  }
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  const double median = median_of(sorted);
  if (args.json) {
    nlohmann::json out{{"model", args.model},
                                {"cluster", cluster.name()},
                                {"mode", args.model_args.mode},
                                {"profile", args.profile},
                                {"placements", rows},
                                {"median_abs_error", median},
                                {"max_abs_error", sorted.back()}};
    if (options.mode == Mode::training) {
      out["optimizer"] = args.model_args.optimizer;
      // How the simulation summed partial gradients: as this libtorch does (simulate's --gradient-sums).
      out["gradient_sums"] = sim_options.gradient_sums_out_of_place ? "out-of-place" : "in-place";
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("median |error| {:.1f}%, worst {:.1f}% over {} placements\n", 100 * median, 100 * sorted.back(), sorted.size());
}

}  // namespace

void register_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model's step for real (libtorch) under a placement and time it");
  cmd->add_option("--model", args->model, "ONNX model file")->required();
  cmd->add_option("--cluster", args->cluster, "cluster preset or JSON file whose devices the placement names")->capture_default_str();
  cmd->add_option("--placement", args->placement, "placement JSON file");
  cmd->add_option("--on", args->on, "run every op on this device (cpu:0, gpu:0, ...)")->check(kDeviceName);
  cmd->add_option("--steps", args->steps, "timed steps")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed steps first")->capture_default_str();
  add_exec_options(cmd, args->threads, args->seed);
  cmd->add_flag("--json", args->json, "print JSON (median_s, p10_s, p90_s, min_s, max_s, steps, times_s, ...)");
  cmd->add_option("--trace", args->trace,
                  "after the timed steps, run one more and write it as a Chrome trace (Perfetto): its ops, autograd's nodes and the host's live bytes")
      ->check(kFileName);
  add_model_options(cmd, args->model_args);
  cmd->callback([args] { run_run(*args); });
}

void register_profile(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "Measure every op of a model's step on this machine and fit the cost model");
  cmd->add_option("--model", args->model, "ONNX model file")->required();
  cmd->add_option("--cluster", args->cluster, "cluster whose device kinds are measured (usually `local`)")->required();
  cmd->add_option("-o,--output", args->output, "profile JSON to write")->required()->check(kFileName);
  cmd->add_option("--repeats", args->repeats, "timed runs per op (the median is kept)")->capture_default_str();
  cmd->add_option("--steps", args->steps, "whole steps timed for the calibration")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed whole steps first")->capture_default_str();
  add_exec_options(cmd, args->threads, args->seed);
  cmd->add_flag("--no-fit", args->no_fit, "do not fit efficiencies and the per-op overhead");
  cmd->add_flag("--json", args->json, "print the summary as JSON");
  add_model_options(cmd, args->model_args);
  cmd->callback([args] { run_profile(*args); });
}

void register_validate(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand("validate", "Run placements for real and in the simulator and compare step times");
  cmd->add_option("--model", args->model, "ONNX model file")->required();
  cmd->add_option("--cluster", args->cluster, "cluster preset (usually `local`) or JSON file")->required();
  cmd->add_option("--profile", args->profile, "measured op times (placer profile) for the simulator");
  cmd->add_option("--placements", args->placements, "placement JSON files, comma-separated")->check(comma_list("file name"));
  cmd->add_option("--on", args->on, "all ops on this device (comma-separated: one run each)")->check(comma_list("device name"));
  cmd->add_option("--steps", args->steps, "timed steps per placement")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed steps first")->capture_default_str();
  add_exec_options(cmd, args->threads, args->seed);
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->add_option("--trace", args->trace,
                  "one placement: write its simulated step and, after the timed steps, one more measured step to one Chrome trace "
                  "(two processes in Perfetto)")
      ->check(kFileName);
  add_model_options(cmd, args->model_args);
  cmd->callback([args] {
    args->placements = comma_items(args->placements);
    args->on = comma_items(args->on);
    run_validate(*args);
  });
}

}  // namespace placer::cli
