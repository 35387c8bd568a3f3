#include "placer/cli/common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include "placer/util/error.hpp"
#include "placer/util/output_file.hpp"
#include "placer/util/text.hpp"

namespace placer::cli {

ModelOptions ModelArgs::resolve() const {
  ModelOptions o;
  o.mode = parse_mode(mode);
  o.optimizer = parse_optimizer(optimizer);
  o.optimizer_given = optimizer_option && optimizer_option->count() > 0;
  o.onnx.data_inputs = comma_items(data_inputs);
  for (const auto& d : dims) {
    auto eq = d.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--dim expects NAME=VALUE, got '" + d + "'");
    long long v = 0;
    try {
      std::size_t used = 0;
      v = std::stoll(d.substr(eq + 1), &used);
      if (used != d.size() - eq - 1 || v <= 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw UsageError("--dim expects a positive integer value, got '" + d + "'");
    }
    const std::string name = d.substr(0, eq);
    if (auto [it, fresh] = o.onnx.dim_values.emplace(name, v); !fresh && it->second != v)
      throw UsageError("--dim gives '" + name + "' two values (" + std::to_string(it->second) + " and " + std::to_string(v) + ")");
  }
  if (!unknown_ops.empty() && unknown_ops != "error") {
    try {  // a usage error (exit 2): it is known wrong before any file is read
      o.onnx.unknown_op_default = parse_op_class(unknown_ops);
    } catch (const Error& e) {
      throw UsageError(std::string("--unknown-ops: ") + e.what());
    }
  }
  o.onnx.warn = [](const std::string& what) { fmt::print(stderr, "placer: warning: {}\n", what); };
  if (o.mode == Mode::inference && optimizer_option && optimizer_option->count() > 0)
    fmt::print(stderr, "placer: note: --optimizer shapes the training step only; it has no effect with --mode inference\n");
  return o;
}

void add_model_options(CLI::App* cmd, ModelArgs& args, bool with_mode) {
  if (with_mode)
    cmd->add_option("--mode", args.mode, "training (forward, backward and update ops) or inference (forward only)")
        ->check(CLI::IsMember({"training", "inference"}))
        ->capture_default_str();
  args.optimizer_option = cmd->add_option("--optimizer", args.optimizer, "parameter update of the training step: sgd, momentum or adam")
                              ->check(CLI::IsMember({"sgd", "momentum", "adam"}))
                              ->capture_default_str();
  cmd->add_option("--data-inputs", args.data_inputs,
                  "graph inputs that are data (comma-separated); all other inputs become parameters or buffers")
      ->check(comma_list("input name"));
  cmd->add_option("--dim", args.dims, "value of a symbolic input dimension, NAME=VALUE (repeatable)");
  cmd->add_option("--unknown-ops", args.unknown_ops,
                  "price op types with no cost rule as this class (elementwise, matmul, ...) instead of failing");
}

void add_problem_options(CLI::App* cmd, ProblemArgs& args) {
  cmd->add_option("--model", args.model, "model file: ONNX (.onnx) or placer graph JSON (.json)")->required();
  cmd->add_option("--cluster", args.cluster, "cluster preset name (see `placer clusters`) or cluster JSON file")->required();
  cmd->add_option("--profile", args.profile, "measured op times (placer profile JSON) overriding the cost model");
  cmd->add_option("--memory-fraction", args.memory_fraction, "fraction of each device's memory a placement may use")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            // CLI::Range lets "nan" through (no comparison holds) and calls "abc" out of range.
            double v = 0.0;
            const char* end = value.data() + value.size();
            const auto [ptr, ec] = std::from_chars(value.data(), end, v);
            if (ec != std::errc() || ptr != end) return "'" + value + "' is not a number";
            if (!(v >= 0.01 && v <= 1.0)) return "must be from 0.01 to 1, got " + value;
            return {};
          },
          "FLOAT in [0.01, 1]"))
      ->capture_default_str();
  args.gradient_sums_option = cmd->add_option("--gradient-sums", args.gradient_sums,
                  "how the training framework sums a tensor's partial gradients: in-place (PyTorch 2) or out-of-place (libtorch "
                  "1.x: each sum a new buffer, three gradient-sized buffers for an instant)")
      ->check(CLI::IsMember({"in-place", "out-of-place"}))
      ->capture_default_str();
  add_model_options(cmd, args.model_args);
}

void warn_without_data_inputs(const Graph& g, const std::string& model, Mode mode) {
  if (mode != Mode::training) return;
  const bool graph_json = is_graph_json_file(model);
  bool parameters = false, data = false;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    data = data || g.tensor_kind(t) == TensorKind::data;
    parameters = parameters || g.tensor_kind(t) == TensorKind::parameter;
  }
  if (!parameters) {
    // Nothing to train: the "training step" is the forward pass alone (a step saved with its own
    // backward ops is taken as it is).
    bool backward = false;
    for (OpId o = g.num_forward_ops(); o < g.num_ops() && !backward; ++o) backward = g.op_role(o) != OpRole::forward;
    if (!backward)
      fmt::print(stderr,
                 "placer: warning: '{}' has no parameters, so its training step is the forward pass alone (nothing to train); use "
                 "--mode inference for that, or give the model its weights ({})\n",
                 model, graph_json ? "tensors of \"kind\": \"parameter\"" : "initializers, or graph inputs that are not data");
    return;
  }
  if (data) return;
  // A graph JSON says what each tensor is (its "kind"); an ONNX model's inputs are sorted by rules.
  if (graph_json)
    fmt::print(stderr,
               "placer: warning: '{}' has no data input (no tensor of \"kind\": \"data\"): the step trains its parameters on "
               "no data; if one of its tensors is the data, give it that kind\n",
               model);
  else
    fmt::print(stderr,
               "placer: warning: '{}' has no data input: every floating-point graph input is trained as a parameter (by the "
               "rules of docs/training-step.md); if one of them is the data (x in MatMul(W, x)), name it with --data-inputs\n",
               model);
}

void warn_other_optimizer(const Profile& profile, const Graph& step, const std::string& path, bool can_choose) {
  std::set<std::string> theirs, ours;
  for (OpId o = 0; o < step.num_ops(); ++o) {
    if (step.op_role(o) != OpRole::update) continue;
    const std::string* signature = profile.op_signature_of(step.op_name(o));
    if (signature == nullptr) continue;
    const std::string type = signature->substr(0, signature->find('('));
    if (type != step.op_type(o)) theirs.insert(type), ours.insert(std::string(step.op_type(o)));
  }
  if (theirs.empty()) return;
  auto option = [](const std::string& type) {  // "AdamUpdate" -> "adam"
    for (Optimizer o : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam})
      if (type == update_op_type(o)) return " --optimizer " + std::string(optimizer_name(o));
    return std::string();
  };
  fmt::print(stderr,
             "placer: warning: the profile '{}' timed this step's update ops as {} (here {}): measured with another optimizer, its "
             "update times do not apply and the cost model prices them{}\n",
             path, fmt::join(theirs, ", "), fmt::join(ours, ", "),
             can_choose && theirs.size() == 1 && !option(*theirs.begin()).empty() ? "; give" + option(*theirs.begin()) + " to use them"
                                                                                  : "");
}

void warn_unmatched_profile(const Profile& profile, const Graph& g, const CostTable& costs, const std::string& path,
                            const std::string& model) {
  if (profile.size() == 0) return;
  warn_other_optimizer(profile, g, path, !is_graph_json_file(model));
  // Update ops do not count (as in `placer fit`): their signatures are parameter shapes that models share.
  bool updates = false;  // some update op is timed: its times apply (said, so that "priced by the cost model" is not read as all ops)
  for (OpId o = 0; o < g.num_ops(); ++o)
    for (DeviceId d = 0; d < costs.num_devices(); ++d)
      if (costs.source(o, d) == CostSource::measured) {
        if (g.op_role(o) != OpRole::update) return;
        updates = true;
      }
  fmt::print(stderr,
             "placer: warning: the profile '{}' times none of the forward or backward ops of '{}' (measured on another model, or in the other "
             "mode?): they are priced by {}{}\n",
             path, model, profile.model() ? "the profile's fitted cost model" : "the cost model",
             updates ? " (the profile's times of update ops, whose signatures are parameters' shapes, apply)" : "");
}

void warn_other_machine(const Profile& profile, const Cluster& cluster, const std::string& path) {
  // Entries "NAME: MODEL" joined by "; ": a "; " is a separator only where a name (no spaces) and
  // ": " follow it, so that a model may hold one ("Xeon; 2 sockets").
  const std::string_view text = profile.device_description;
  auto starts_entry = [](std::string_view rest) {
    const std::size_t colon = rest.find(": ");
    return colon != std::string_view::npos && colon > 0 && rest.substr(0, colon).find(' ') == std::string_view::npos;
  };
  if (!starts_entry(text)) return;  // free text (written by hand): nothing to compare
  std::vector<std::string_view> entries;
  for (std::size_t begin = 0, at = text.find("; ");; at = text.find("; ", at + 2)) {
    if (at != std::string_view::npos && !starts_entry(text.substr(at + 2))) continue;
    entries.push_back(text.substr(begin, at == std::string_view::npos ? std::string_view::npos : at - begin));
    if (at == std::string_view::npos) break;
    begin = at + 2;
  }
  std::vector<std::string> differ;
  for (std::string_view entry : entries) {
    const std::size_t colon = entry.find(": ");
    const std::string_view name = entry.substr(0, colon), measured = entry.substr(colon + 2);
    // Its times are by device kind: they price every device of the kind the measured one had (its
    // own here, else the one its name says, as placer names devices).
    std::optional<DeviceKind> kind;
    if (const std::optional<DeviceId> d = cluster.find_device(name)) kind = cluster.device(*d).kind;
    else if (name.starts_with("cpu")) kind = DeviceKind::cpu;
    else if (name.starts_with("gpu")) kind = DeviceKind::gpu;
    if (!kind) continue;
    std::vector<std::string> here;
    for (DeviceId d : cluster.device_ids(*kind))
      if (cluster.device(d).model != measured) here.push_back(fmt::format("{} is '{}'", cluster.device(d).name, cluster.device(d).model));
    if (!here.empty()) differ.push_back(fmt::format("{} was '{}', here {}", name, measured, fmt::join(here, ", ")));
  }
  if (differ.empty()) return;
  fmt::print(stderr,
             "placer: warning: the profile '{}' was measured on other devices than cluster '{}' describes ({}): its op times are "
             "that machine's\n",
             path, cluster.name(), fmt::join(differ, "; "));
}

void warn_unmatched_efficiency_types(const Graph& g, const Cluster& cluster, const CostTable& costs) {
  const std::string model = g.name().empty() ? "the model" : "'" + g.name() + "'";
  for (const EfficiencyKeyedApart& e : efficiency_types_keyed_apart(g, cluster, costs))
    fmt::print(stderr, "placer: warning: {}\n",
               printable(fmt::format("cluster '{}': efficiency_by_type's '{}' ({}) does not price {} {} of that type in {}: {} priced "
                                     "as '{}' (docs/cost-model.md#op-types), which {} does not name, so {} {} class's "
                                     "efficiency (a cluster fitted before that key existed? `placer fit` writes it)",
                                     cluster.name(), e.key, fmt::join(e.devices, ", "), e.ops, e.ops == 1 ? "op" : "ops", model,
                                     e.ops == 1 ? "it is" : "they are", e.priced, e.devices.size() == 1 ? "that device" : "those devices",
                                     e.ops == 1 ? "it takes" : "they take",
                                     e.ops == 1 ? "its" : "their")));
  const std::vector<std::string> unmatched = unmatched_efficiency_types(g, cluster);
  if (unmatched.empty()) return;
  // (Names as the files have them, control characters escaped.)
  fmt::print(stderr, "placer: warning: {}\n",
             printable(fmt::format("cluster '{}': efficiency_by_type names {}, which no op of {} has and no op type placer knows: it "
                                   "prices nothing (misspelt?)",
                                   cluster.name(), fmt::join(unmatched, ", "), g.name().empty() ? "the model" : "'" + g.name() + "'")));
}

LoadedProblem load_problem(const ProblemArgs& args) {
  const ModelOptions options = args.model_args.resolve();
  Graph graph = load_model(args.model, options);
  warn_without_data_inputs(graph, args.model, options.mode);
  Cluster cluster = resolve_cluster(args.cluster);
  std::optional<Profile> profile;
  if (!args.profile.empty()) profile = Profile::load(args.profile);
  CostTable costs(graph, cluster, CostModel::defaults(), profile ? &*profile : nullptr);
  warn_unmatched_efficiency_types(graph, cluster, costs);
  if (profile) {
    warn_unmatched_profile(*profile, graph, costs, args.profile, args.model);
    warn_other_machine(*profile, cluster, args.profile);
  }
  SimOptions sim;
  sim.memory_fraction = args.memory_fraction;
  sim.gradient_sums_out_of_place = args.gradient_sums == "out-of-place";
  if (options.mode == Mode::inference && args.gradient_sums_option && args.gradient_sums_option->count() > 0)
    fmt::print(stderr, "placer: note: --gradient-sums shapes the training step's memory only; it has no effect with --mode inference\n");
  return LoadedProblem{std::move(graph), std::move(cluster), std::move(costs), sim};
}

nlohmann::json devices_json(const Cluster& cluster, const SimResult& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (DeviceId d = 0; d < r.devices.size(); ++d) {
    const DeviceResult& dr = r.devices[d];
    devices.push_back({{"name", cluster.device(d).name},
                       {"ops", dr.ops},
                       {"busy_s", dr.busy_s},
                       {"peak_memory_bytes", dr.peak_memory_bytes},
                       {"static_memory_bytes", dr.static_memory_bytes},
                       {"capacity_bytes", dr.capacity_bytes}});
  }
  return devices;
}

std::filesystem::path landing_path(const std::string& given) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // A standard stream is its own place, whatever file it is (at a terminal, stdout and stderr are one).
  if (const auto fd = output_descriptor(given)) return "/dev/fd/" + std::to_string(*fd);
  const std::string output = output_target(given);  // a link is written through
  const fs::path absolute = fs::absolute(output, ec);
  if (ec) return fs::path(output).lexically_normal();
  const fs::path dir = fs::weakly_canonical(absolute.parent_path(), ec);
  if (ec) return absolute.lexically_normal();
  return (dir / absolute.filename()).lexically_normal();
}

void check_not_an_input(const std::string& output, const std::string& output_option,
                        const std::vector<std::pair<std::string, std::string>>& inputs) {
  namespace fs = std::filesystem;
  if (output.empty()) return;
  std::error_code ec;
  const fs::path lands = landing_path(output);
  for (const auto& [option, input] : inputs) {
    if (input.empty() || !fs::exists(input, ec)) continue;
    const fs::path read = fs::weakly_canonical(fs::absolute(input, ec), ec);  // the file the input is, links resolved
    if (!ec && read == lands)
      throw Error(output_option + " " + in_quotes(output) + " is the " + option + " file" +
                  (input == output ? std::string() : " " + in_quotes(input)) + ": writing it would replace an input (name another file)");
  }
}

void check_json_alone_on_stdout(bool json, const std::vector<std::pair<std::string, std::string>>& outputs) {
  if (!json) return;
  // Standard output sent to a device that is not a terminal (/dev/null) keeps nothing to read.
  struct stat out {};
  const bool stdout_known = ::fstat(1, &out) == 0;
  if (stdout_known && S_ISCHR(out.st_mode) && !::isatty(1)) return;
  // Standard error merged into standard output (2>&1) into a file or a pipe: the same stream (on
  // a terminal both are the screen, read by eye).
  struct stat err {};
  const bool merged = stdout_known && !::isatty(1) && ::fstat(2, &err) == 0 && err.st_dev == out.st_dev && err.st_ino == out.st_ino;
  for (const auto& [option, path] : outputs) {
    const std::optional<int> fd = path.empty() ? std::nullopt : output_descriptor(path);
    if (fd == 1 || (fd == 2 && merged))
      throw UsageError(option + " " + in_quotes(path) + " is standard output" + (fd == 2 ? " (standard error is sent there)" : "") +
                       ", where --json prints its document: name a file, or leave out --json");
  }
}

std::string cluster_input_file(const std::string& cluster) {
  const std::vector<std::string> presets = cluster_preset_names();
  return std::find(presets.begin(), presets.end(), cluster) != presets.end() ? std::string() : cluster;
}

std::vector<std::pair<std::string, std::string>> problem_inputs(const ProblemArgs& args) {
  return {{"--model", args.model}, {"--cluster", cluster_input_file(args.cluster)}, {"--profile", args.profile}};
}

std::string step_optimizer_name(const Graph& step, const ProblemArgs& args) {
  return std::string(optimizer_name(step_optimizer(step, parse_optimizer(args.model_args.optimizer))));
}

void warn_placement_made_otherwise(const PlacementSpec& spec, const std::string& file, const PlacementUse& here) {
  std::string differ;
  auto differs = [&](const std::string& key, const std::string& value, const std::string& what) {
    const std::string there = spec.meta_value(key);
    if (!value.empty() && !there.empty() && there != value) differ += (differ.empty() ? "" : ", ") + what + " " + there + " (here " + value + ")";
  };
  differs("mode", here.mode, "--mode");
  // The updates of the step simulated (a saved step's own, whatever --optimizer says).
  if (here.mode == "training" && spec.meta_value("mode") == "training") differs("optimizer", here.optimizer, "--optimizer");
  if (here.memory_fraction) {
    // A number, compared as one: "1.0" written by hand is the default 1.
    const std::string fraction = spec.meta_value("memory_fraction");
    char* end = nullptr;
    const double there = fraction.empty() ? 0.0 : std::strtod(fraction.c_str(), &end);
    if (fraction.empty() || end == fraction.c_str() || *end != '\0' || there != *here.memory_fraction)
      differs("memory_fraction", fmt::format("{:g}", *here.memory_fraction), "--memory-fraction");
  }
  if (here.mode == "training") differs("gradient_sums", here.gradient_sums, "--gradient-sums");
  differs("cluster", here.cluster, "cluster");
  if (differ.empty()) return;
  const std::string step = spec.meta_value("step_time_s");
  fmt::print(stderr, "placer: warning: placement file '{}' was found for {}{}\n", file, differ,
             step.empty() ? std::string() : "; its step time there: " + step + " s");
}

nlohmann::json shortfalls_json(const Cluster& cluster, const SimResult& r) {
  nlohmann::json shortfalls = nlohmann::json::array();
  for (auto [d, bytes] : r.shortfalls) shortfalls.push_back({{"device", cluster.device(d).name}, {"bytes", bytes}});
  return shortfalls;
}

std::string ratio_text(double ratio) {
  if (std::isinf(ratio)) return ratio > 0 ? ">1.8e308x" : "-inf";
  return std::fabs(ratio) < 1e6 ? fmt::format("{:.2f}x", ratio) : fmt::format("{:.2g}x", ratio);
}

}  // namespace placer::cli
