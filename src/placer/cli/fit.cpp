// `placer fit`: the cost model's efficiencies and per-op overhead fitted to profiles of several
// models measured on one machine, written into that machine's cluster description so that models
// never profiled there are priced from measurements (docs/execution.md, "Fit").
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "placer/cli/common.hpp"
#include "placer/cost/fit.hpp"
#include "placer/sim/simulator.hpp"
#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"

namespace placer::cli {
namespace {

struct FitArgs {
  std::string cluster;
  std::vector<std::string> models, profiles;
  std::vector<std::string> types;  // op types fitted on their own (efficiency_by_type)
  ModelArgs model_args;  // --optimizer, --data-inputs, --dim, --unknown-ops (the mode is training)
  std::string output, name;
  bool json = false;
};

// Whether `profile` times a forward or backward op of `step` on `kind` (by name and signature, or
// by signature). Update ops do not count: their signatures are the parameters' shapes, which models
// share (a cifarnet profile matched ResNet-50 by 14 updates alone).
bool times_an_op(const Graph& step, const Profile& profile, DeviceKind kind) {
  for (OpId op = 0; op < step.num_ops(); ++op)
    if (step.op_role(op) != OpRole::update && profile.find(kind, step.op_name(op), op_signature(step, op)).has_value()) return true;
  return false;
}

// Whether `profile` times an op of `step` on `kind` for which `shaped` holds (a product with its
// smallest dimension, a convolution with its kernel).
template <typename Shaped>
bool times_one(const Graph& step, const Profile& profile, DeviceKind kind, Shaped shaped, bool forward_only = false) {
  for (OpId op = 0; op < step.num_ops(); ++op)
    if (shaped(step.op_work(op)) && (!forward_only || step.op_role(op) == OpRole::forward) && profile.find(kind, step.op_name(op), op_signature(step, op)).value_or(0.0) > 0) return true;
  return false;
}

void run_fit(const FitArgs& args) {
  {
    // The --cluster file may be refreshed in place (-o naming it): it is read before the fit.
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const std::string& m : args.models) inputs.push_back({"--models", m});
    for (const std::string& f : args.profiles) inputs.push_back({"--profiles", f});
    check_json_alone_on_stdout(args.json, {{"-o", args.output}});
    check_not_an_input(args.output, "-o", inputs);
    if (!args.output.empty()) check_writable(args.output, "cluster file");  // before the fit, not after it (a QA pass)
  }
  if (args.models.size() != args.profiles.size())
    throw UsageError(fmt::format("--models names {} models but --profiles {} profiles: give one profile per model", args.models.size(),
                            args.profiles.size()));
  ModelOptions options = args.model_args.resolve();  // usage errors first, before `local` is detected
  const Cluster cluster = resolve_cluster(args.cluster);
  options.mode = Mode::training;  // the step holds every forward op too, so inference profiles match by name
  options.onnx.names_for_several_models = args.models.size() > 1;
  std::vector<Graph> steps;
  std::vector<Profile> profiles;
  for (std::size_t i = 0; i < args.models.size(); ++i) {
    steps.push_back(load_model(args.models[i], options));
    profiles.push_back(Profile::load(args.profiles[i]));
    warn_other_machine(profiles.back(), cluster, args.profiles[i]);  // a fit of another machine's times describes that machine
    warn_other_optimizer(profiles.back(), steps.back(), args.profiles[i], !is_graph_json_file(args.models[i]));  // its update times fit nothing
    // Paired by op name (and the signature each name was measured with), else by signature: a
    // profile that times none of its model's ops was given in the wrong order, or measured on
    // another model or step.
    const bool any = times_an_op(steps.back(), profiles.back(), DeviceKind::cpu) || times_an_op(steps.back(), profiles.back(), DeviceKind::gpu);
    if (!any && profiles.back().size() == 0)
      throw Error(fmt::format("profile '{}' times no op at all: it adds nothing to the fit for '{}'", args.profiles[i], args.models[i]));
    if (!any)
      throw Error(fmt::format("profile '{}' times none of the forward or backward ops of '{}' (by name and signature, or by "
                              "signature): a profile of another model?",
                              args.profiles[i], args.models[i]));
  }

  std::vector<Device> devices(cluster.devices().begin(), cluster.devices().end());
  nlohmann::json report = nlohmann::json::array();
  std::set<std::string, std::less<>> types_fitted;  // of --types, on some kind
  for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
    const auto ids = cluster.device_ids(kind);
    if (ids.empty()) continue;
    const Device& first = cluster.device(ids.front());
    std::vector<FitSample> samples;  // the types fitted on their own are no samples of their classes
    bool products = false, convolutions = false;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      auto s = fit_samples(steps[i], profiles[i], first, args.types);
      samples.insert(samples.end(), s.begin(), s.end());
      products = products || times_one(steps[i], profiles[i], kind, [](const OpWork& w) { return w.product_min_dim > 0; });
      // (Forward ones: the convolutions' curve prices those alone.)
      convolutions = convolutions || times_one(steps[i], profiles[i], kind, [](const OpWork& w) { return w.conv_kernel_area > 0; }, true);
    }
    if (samples.empty()) continue;
    // An overhead and up to a dozen efficiencies from a handful of times: what they say is chance
    // (one op time put 989 ms into the per-op overhead: a review). Fitted all the same, and said.
    if (samples.size() < kFewFitTimes)
      fmt::print(stderr, "placer: warning: the {} devices' fit rests on {} op time{} only (fewer than {}): its overhead and efficiencies "
                         "are poorly determined; profile a whole model (placer profile)\n",
                 device_kind_name(kind), samples.size(), samples.size() == 1 ? "" : "s", kFewFitTimes);
    CostModel model = CostModel::defaults();
    const FitResult fit = fit_roofline(samples, kind, model, first.op_overhead_s, first.backward_overhead_s());
    nlohmann::json classes[2] = {nlohmann::json::object(), nlohmann::json::object()};
    for (DeviceId d : ids) {
      devices[d].op_overhead_s = fit.overhead_s;
      // Without gradients in the profiles, the cluster's old gradient fit would not match the new
      // forward one: gradients are then priced as forward ops.
      devices[d].backward_op_overhead_s = fit.backward_samples > 0 ? fit.backward_overhead_s : -1;
      if (fit.backward_samples == 0) devices[d].backward_efficiency = {};
    }
    // Products (convolutions) timed and fitted as a class are priced by that fit, not by a curve
    // measured before it (an Einsum alone fits the class without saying anything of products; a
    // recurrent layer carries its step's product dimension, so it counts as a product).
    auto drop = [&](bool timed, bool forward_only, OpClass cls, std::vector<Device::SizePoint> Device::*curve) {
      const auto c = static_cast<std::size_t>(cls);
      bool dropped = false;
      if (timed && (fit.compute_fitted[0][c] || (!forward_only && fit.compute_fitted[1][c])))
        for (DeviceId d : ids) {
          dropped = dropped || !(devices[d].*curve).empty();
          (devices[d].*curve).clear();
        }
      return dropped;
    };
    const bool curve_dropped = drop(products, false, OpClass::matmul, &Device::product_efficiency_by_size);
    const bool conv_curve_dropped = drop(convolutions, true, OpClass::conv, &Device::conv_efficiency_by_kernel);
    for (const bool backward : {false, true})
      for (int c = 0; c < kNumOpClasses; ++c) {
        const Efficiency& e = model.of(kind, static_cast<OpClass>(c), backward);
        const bool compute = fit.compute_fitted[backward][c], memory = fit.memory_fitted[backward][c];
        nlohmann::json jc = nlohmann::json::object();
        for (DeviceId d : ids) {
          auto& own = (backward ? devices[d].backward_efficiency : devices[d].efficiency)[c];
          if (compute) own.compute = e.compute;
          if (memory) own.memory = e.memory;
        }
        if (compute) jc["compute"] = e.compute;
        if (memory) jc["memory"] = e.memory;
        if (!jc.empty()) classes[backward][std::string(op_class_name(static_cast<OpClass>(c)))] = jc;
      }
    nlohmann::json types = nlohmann::json::object();
    for (const std::string& type : args.types) {
      const auto t = fit_type_efficiency(steps, profiles, first, type, fit.overhead_s,
                                         fit.backward_samples > 0 ? fit.backward_overhead_s : fit.overhead_s);
      if (!t) continue;  // not timed in these profiles on this kind: the device keeps what it had
      types_fitted.insert(type);
      for (DeviceId d : ids) devices[d].efficiency_by_type[type] = Device::Efficiency{.compute = t->compute, .memory = t->memory};
      types[type] = {{"compute", t->compute}, {"memory", t->memory}, {"samples", t->samples}};
    }
    nlohmann::json entry = {{"kind", std::string(device_kind_name(kind))},
                            {"samples", fit.samples},
                            {"overhead_s", fit.overhead_s},
                            {"median_abs_error", fit.median_abs_error},
                            {"efficiency", classes[0]},
                            {"efficiency_by_type", types},
                            {"product_curve_dropped", curve_dropped},
                            {"conv_curve_dropped", conv_curve_dropped}};
    if (fit.backward_samples > 0) {
      entry["backward_samples"] = fit.backward_samples;
      entry["backward_overhead_s"] = fit.backward_overhead_s;
      entry["backward_efficiency"] = classes[1];
    }
    report.push_back(std::move(entry));
  }
  if (report.empty()) throw Error("the profiles time no op on any device kind of cluster '" + cluster.name() + "'");
  // A type no profile times fitted nothing (said: it left no line, and its ops stayed in their class).
  for (const std::string& type : args.types)
    if (!types_fitted.contains(type))
      fmt::print(stderr,
                 "placer: warning: --types {}: no op of that type with FLOPs or bytes has a time in these profiles: nothing fitted for it (a "
                 "training profile's forward BatchNormalizations are BatchNormalizationTraining, an inference profile's "
                 "BatchNormalization; gradients are TypeGrad)\n",
                 type);
  const Cluster fitted = Cluster::build(args.name.empty() ? cluster.name() : args.name, std::move(devices),
                                        std::vector<std::string>(cluster.switches().begin(), cluster.switches().end()),
                                        std::vector<Link>(cluster.links().begin(), cluster.links().end()));
  // The fitted figures must price every model they were fitted on: a profile of absurd times fits
  // overheads that add up past a double (the written cluster then failed in every later command).
  // The cluster given is tried first, so that its own figures are not blamed on the profiles.
  for (std::size_t i = 0; i < steps.size(); ++i) {
    (void)CostTable(steps[i], cluster, CostModel::defaults());
    try {
      (void)CostTable(steps[i], fitted, CostModel::defaults());
    } catch (const Error& e) {
      throw Error("the fit to these profiles cannot price '" + args.models[i] + "' (" + e.what() + "): check the profiles' times");
    }
  }
  // What the fit gives each model's whole step, against the step its profile gives (the profile
  // replays its measured step, docs/execution.md): every op on the first device of each kind the
  // profile timed, in the profile's mode (an inference profile times no gradient: compared on the
  // forward pass, whose ops it timed all, not on a training step whose gradients it never saw).
  // The fit weighs each op by its relative error, so a model whose time sits in a few ops far from
  // the roofline (a CPU max pooling's gradient) can come out well under.
  nlohmann::json steps_report = nlohmann::json::array();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::optional<Graph> forward;  // read once, for the first kind whose profile is an inference one
    bool forward_read = false;
    for (DeviceKind kind : {DeviceKind::cpu, DeviceKind::gpu}) {
      const auto ids = cluster.device_ids(kind);
      if (ids.empty()) continue;
      if (!times_an_op(steps[i], profiles[i], kind)) continue;
      const bool inference_profile = !times_a_gradient(steps[i], profiles[i], kind);
      if (inference_profile && !forward_read) {
        forward_read = true;
        ModelOptions inference = options;
        inference.mode = Mode::inference;
        inference.onnx.warn = nullptr;  // read and warned about above
        try {
          forward = load_model(args.models[i], inference);
        } catch (const Error&) {
          // A graph JSON that holds a training step has no forward graph of its own: its step, then.
        }
      }
      const bool training = !inference_profile || !forward.has_value();
      const Graph& g = training ? steps[i] : *forward;
      const std::vector<DeviceId> on(g.num_ops(), ids.front());
      const CostTable profiled_costs(g, cluster, CostModel::defaults(), &profiles[i]), fitted_costs(g, fitted, CostModel::defaults());
      const double profiled = Simulator(g, cluster, profiled_costs).simulate(on).step_time_s;
      const double predicted = Simulator(g, fitted, fitted_costs).simulate(on).step_time_s;
      steps_report.push_back({{"model", args.models[i]},
                              {"mode", training ? "training" : "inference"},
                              {"device", cluster.device(ids.front()).name},
                              {"profiled_step_s", profiled},
                              {"fitted_step_s", predicted},
                              {"error", profiled > 0 ? predicted / profiled - 1.0 : 0.0}});
    }
  }
  if (!args.output.empty()) {
    write_json_file(args.output, cluster_to_json(fitted), "cluster");
  }
  if (args.json) {
    std::cout << nlohmann::json{{"cluster", cluster_to_json(fitted)}, {"fits", report}, {"steps", steps_report}}.dump(2) << "\n";
    return;
  }
  for (const auto& k : report) {
    const std::size_t backward = k.value("backward_samples", std::size_t{0});
    fmt::print("{}: {} op times ({} forward or update, {} gradients), per-op overhead {}, median |error| of the fit {:.1f}%\n",
               k["kind"].get<std::string>(), k["samples"].get<std::size_t>(), k["samples"].get<std::size_t>() - backward, backward,
               human_seconds(k["overhead_s"].get<double>()), 100 * k["median_abs_error"].get<double>());
    auto print_classes = [](const nlohmann::json& classes) {
      for (const auto& [name, e] : classes.items())
        fmt::print("  {:<14} compute {:>6}  memory {:>6}\n", name, e.contains("compute") ? fmt::format("{:.3f}", e["compute"].get<double>()) : "-",
                   e.contains("memory") ? fmt::format("{:.3f}", e["memory"].get<double>()) : "-");
    };
    print_classes(k["efficiency"]);
    if (k.contains("backward_efficiency")) {
      fmt::print("  backward ops ({} op times): per-op overhead {}\n", k["backward_samples"].get<std::size_t>(),
                 human_seconds(k["backward_overhead_s"].get<double>()));
      print_classes(k["backward_efficiency"]);
    }
    for (const auto& [type, t] : k["efficiency_by_type"].items())
      fmt::print("  type {:<14} {} {:.4f} ({} op times)\n", type, t["compute"].get<double>() > 0 ? "compute" : "memory",
                 t["compute"].get<double>() > 0 ? t["compute"].get<double>() : t["memory"].get<double>(), t["samples"].get<std::size_t>());
    if (k["product_curve_dropped"].get<bool>())
      fmt::print("  products are priced by the matmul fit: the devices' product_efficiency_by_size was dropped\n");
    if (k["conv_curve_dropped"].get<bool>())
      fmt::print("  convolutions are priced by the conv fit: the devices' conv_efficiency_by_kernel was dropped\n");
  }
  for (const auto& st : steps_report)
    fmt::print("{} on {}: {} step {} with the fit, {} with its profile ({:+.0f}%)\n", st["model"].get<std::string>(),
               st["device"].get<std::string>(), st["mode"].get<std::string>(), human_seconds(st["fitted_step_s"].get<double>()),
               human_seconds(st["profiled_step_s"].get<double>()), 100 * st["error"].get<double>());
  if (!args.output.empty()) fmt::print("wrote {}\n", args.output);
}

}  // namespace

void register_fit(CLI::App& app) {
  auto args = std::make_shared<FitArgs>();
  CLI::App* cmd = app.add_subcommand("fit", "Fit the cost model to profiles of several models and write it into a cluster file");
  cmd->add_option("--cluster", args->cluster, "the cluster the profiles were measured on (preset or JSON file)")->required();
  cmd->add_option("--models", args->models, "ONNX models, comma-separated")->required()->check(comma_list("file name"));
  cmd->add_option("--profiles", args->profiles, "their profiles (placer profile), in the same order")->required()->check(comma_list("file name"));
  cmd->add_option("--types", args->types,
                  "op types fitted on their own, comma-separated (MaxPool,MaxPoolGrad,...): each gets a compute efficiency of its own "
                  "(a memory one for a type without FLOPs: PadReflect) (the device's efficiency_by_type) and is left out of its class's fit")
      ->check(comma_list("op type"));
  add_model_options(cmd, args->model_args, /*with_mode=*/false);  // the models' training steps
  cmd->add_option("-o,--output", args->output, "cluster JSON to write, with the fitted efficiencies and overheads")->check(kFileName);
  cmd->add_option("--name", args->name, "name of the written cluster (default: the input's)")
      ->check(non_empty("cluster name", "NAME"));
  cmd->add_flag("--json", args->json, "print the fitted cluster and the fit as JSON");
  cmd->callback([args] {
    args->models = comma_items(args->models);
    args->profiles = comma_items(args->profiles);
    args->types = comma_items(args->types);
    run_fit(*args);
  });
}

}  // namespace placer::cli
