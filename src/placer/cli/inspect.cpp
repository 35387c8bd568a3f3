// `placer inspect MODEL`: what a model holds (ops by type, parameters, FLOPs, activations, modules)
// and the training step derived from it.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "placer/cli/common.hpp"
#include "placer/io/graph_json.hpp"
#include "placer/util/error.hpp"
#include "placer/util/json_fields.hpp"
#include "placer/util/natural_order.hpp"
#include "placer/util/text.hpp"

namespace placer::cli {
namespace {

struct InspectArgs {
  std::string model;
  ModelArgs model_args;
  std::uint32_t depth = 1;
  bool json = false;
  std::string save_graph;  // write the graph of --mode (the training step, or the forward graph) as graph JSON
};

struct ModuleRow {
  std::uint64_t ops = 0, params = 0, activation_bytes = 0;  // bytes as integers, as the totals (a QA pass)
  double flops = 0.0;
};

void run_inspect(const InspectArgs& args) {
  check_json_alone_on_stdout(args.json, {{"--save-graph", args.save_graph}});
  check_not_an_input(args.save_graph, "--save-graph", {{"--model", args.model}});
  if (!args.save_graph.empty()) check_writable(args.save_graph, "graph file");  // before the import (a QA pass)
  ModelOptions options = args.model_args.resolve();
  DecidedBeforeStep decided;  // Ifs, Loops and lists the import decided (their ops show as modules: say why)
  options.onnx.decided = [&decided](const DecidedBeforeStep& d) { decided = d; };
  Graph forward = load_forward_graph(args.model, options);
  // In training mode, the step: derived from the forward graph, or the file's own (a graph JSON that
  // holds a step, as load_model reads it).
  std::unique_ptr<Graph> derived;
  const Graph* step = nullptr;
  if (options.mode == Mode::training) {
    if (forward.num_forward_ops() == forward.num_ops()) {
      try {
        derived = std::make_unique<Graph>(derive_training_step(forward, options.optimizer));
      } catch (const Error& e) {
        throw Error("'" + args.model + "': deriving the training step: " + e.what());
      }
    }
    step = derived ? derived.get() : &forward;
    if (!derived) check_saved_step_optimizer(forward, args.model, options);
  } else if (forward.num_forward_ops() != forward.num_ops()) {
    // As every other command: a file that holds a training step is never taken for a forward pass.
    throw Error("'" + args.model + "' holds a training step (" + std::to_string(forward.num_ops() - forward.num_forward_ops()) +
                " backward and update ops): inference mode needs a forward graph (the model it came from)");
  }
  warn_without_data_inputs(forward, args.model, options.mode);
  const std::size_t num_fwd = forward.num_forward_ops();
  if (!args.save_graph.empty()) save_graph_json(step ? *step : forward, args.save_graph);

  GraphTotals totals{};
  double forward_flops = 0.0;
  std::map<std::string, std::uint64_t> by_type;
  for (OpId o = 0; o < num_fwd; ++o) {
    forward_flops += forward.op_work(o).flops;
    ++by_type[forward.op_type(o)];
  }
  // Activations as the step of --mode makes them: a training step's forward ops (the same ids)
  // also give what their gradients need of them (max pooling's indices), so that a model and the
  // training step saved from it (--save-graph) read the same.
  const Graph& made = step ? *step : forward;
  totals = graph_totals(made);
  std::vector<std::string> data_inputs;
  for (TensorId t = 0; t < forward.num_tensors(); ++t)
    if (forward.tensor_kind(t) == TensorKind::data) data_inputs.push_back(forward.tensor_name(t));

  // Per-module summary at the requested depth; parameters count with their home op's module.
  std::map<std::string, ModuleRow, NaturalLess> modules;  // blocks.2 before blocks.10
  for (OpId o = 0; o < num_fwd; ++o) {
    auto& row = modules[forward.module_name(forward.module_ancestor(forward.op_module(o), args.depth))];
    ++row.ops;
    row.flops += forward.op_work(o).flops;
    for (TensorId t : made.op_outputs(o)) row.activation_bytes += made.tensor_bytes(t);
  }
  for (TensorId t = 0; t < forward.num_tensors(); ++t)
    if (forward.tensor_kind(t) == TensorKind::parameter && forward.param_home(t) != kNoId)
      modules[forward.module_name(forward.module_ancestor(forward.op_module(forward.param_home(t)), args.depth))].params +=
          forward.tensor_elements(t);

  std::uint64_t backward_ops = 0, update_ops = 0;
  double training_flops = 0.0;
  // A step read from graph JSON keeps its own update ops (--optimizer does not apply): name the
  // optimizer they are the update of, when they all are one of placer's.
  std::string optimizer(optimizer_name(options.optimizer));
  if (step) {
    std::set<std::string> update_types;
    for (OpId o = 0; o < step->num_ops(); ++o) {
      training_flops += step->op_work(o).flops;
      backward_ops += step->op_role(o) == OpRole::backward;
      update_ops += step->op_role(o) == OpRole::update;
      if (step->op_role(o) == OpRole::update) update_types.insert(step->op_type(o));
    }
    if (forward.num_forward_ops() != forward.num_ops()) {
      optimizer = "as saved";
      for (Optimizer o : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam})
        if (update_types == std::set<std::string>{std::string(update_op_type(o))}) optimizer = optimizer_name(o);
    }
  }

  if (args.json) {
    nlohmann::json j = {{"model", args.model},
                        {"graph", forward.name()},
                        {"ops", num_fwd},
                        {"params", totals.trainable_params},
                        {"param_bytes", totals.param_bytes},
                        {"buffer_bytes", totals.buffer_bytes},
                        {"forward_flops", forward_flops},
                        {"folded_ops", forward.num_folded_ops()},
                        {"activation_bytes", totals.activation_bytes},
                        {"data_inputs", data_inputs},
                        {"op_types", by_type}};
    if (decided.any())
      j["decided_before_step"] = {{"ifs", decided.ifs}, {"loops", decided.loops}, {"iterations", decided.iterations},
                                  {"sequence_ops", decided.sequence_ops}};
    nlohmann::json mods = nlohmann::json::array();
    for (const auto& [name, row] : modules)
      mods.push_back({{"module", name}, {"ops", row.ops}, {"params", row.params}, {"flops", row.flops},
                      {"activation_bytes", row.activation_bytes}});
    j["modules"] = mods;
    std::uint64_t optimizer_state_bytes = 0;  // of the parameters the step updates
    for (TensorId t = 0; step && t < step->num_tensors(); ++t) optimizer_state_bytes += step->optimizer_state_bytes(t);
    if (step)
      j["training"] = {{"ops", step->num_ops()},
                       {"flops", training_flops},
                       {"backward_ops", backward_ops},
                       {"update_ops", update_ops},
                       {"optimizer", optimizer},
                       {"optimizer_state_bytes", optimizer_state_bytes}};
    std::cout << j.dump(2) << "\n";
    return;
  }

  // Names as the file has them, control characters escaped (a name with an escape sequence
  // coloured the terminal, one with a newline split its line: a fuzzing pass); --json has them whole.
  fmt::print("model       {} (graph '{}')\n", printable(args.model), printable(forward.name()));
  std::string data;
  for (const auto& d : data_inputs) {
    TensorId t = forward.find_tensor(d);
    auto shape = forward.tensor_shape(t);
    data += fmt::format("{}{} [{}] {}", data.empty() ? "" : ", ", printable(d), fmt::join(shape, ","), dtype_name(forward.tensor_dtype(t)));
  }
  fmt::print("data inputs {}\n", data.empty() ? "(none)" : data);
  fmt::print("forward     {} ops, {} FLOPs, {} activations\n", num_fwd, human_count(forward_flops),
             human_bytes(static_cast<double>(totals.activation_bytes)));
  if (forward.num_folded_ops() > 0)
    fmt::print("folded      {} ops: values known before the step (constants, shapes), no time, no device\n",
               forward.num_folded_ops());
  if (decided.any()) {
    std::vector<std::string> parts;
    if (decided.ifs) parts.push_back(fmt::format("{} If{} replaced by the branch taken", decided.ifs, decided.ifs == 1 ? "" : "s"));
    if (decided.loops)
      parts.push_back(fmt::format("{} Loop{}/Scan{} unrolled ({} iteration{} in all, each a module <node>.<i>)", decided.loops,
                                  decided.loops == 1 ? "" : "s", decided.loops == 1 ? "" : "s", decided.iterations,
                                  decided.iterations == 1 ? "" : "s"));
    if (decided.sequence_ops)
      parts.push_back(fmt::format("{} sequence/optional op{} read as the tensors they hold", decided.sequence_ops,
                                  decided.sequence_ops == 1 ? "" : "s"));
    fmt::print("decided     before the step: {}\n", fmt::join(parts, "; "));
  }
  fmt::print("parameters  {} ({}), buffers {}\n", human_count(static_cast<double>(totals.trainable_params)),
             human_bytes(static_cast<double>(totals.param_bytes)), human_bytes(static_cast<double>(totals.buffer_bytes)));
  if (step)
    fmt::print("training    {} ops ({} forward, {} backward, {} update; {}), {} FLOPs\n", step->num_ops(), num_fwd,
               backward_ops, update_ops, optimizer, human_count(training_flops));

  std::vector<std::pair<std::string, std::uint64_t>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(), [](auto& a, auto& b) { return a.second > b.second; });
  fmt::print("\nops by type\n");
  for (const auto& [type, count] : types) fmt::print("  {:<28} {:>7}\n", printable(type), count);

  fmt::print("\nmodules (depth {})\n  {:<40} {:>7} {:>10} {:>11} {:>12}\n", args.depth, "module", "ops", "params",
             "FLOPs", "activations");
  for (const auto& [name, row] : modules)
    fmt::print("  {:<40} {:>7} {:>10} {:>11} {:>12}\n", name.empty() ? "(top level)" : printable(name), row.ops,
               human_count(static_cast<double>(row.params)), human_count(row.flops), human_bytes(static_cast<double>(row.activation_bytes)));
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a model: ops by type, parameters, FLOPs, modules, training step");
  cmd->add_option("model", args->model, "model file: ONNX (.onnx) or placer graph JSON (.json)")->required();
  add_model_options(cmd, args->model_args);
  cmd->add_option("--depth", args->depth, "module depth of the per-module summary (1 = top-level modules, 0 = the whole model)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1000u));
  cmd->add_flag("--json", args->json, "print one JSON object for machines to read");
  cmd->add_option("--save-graph", args->save_graph,
                  "also write the graph of --mode (training step or forward graph) as placer graph JSON, with every "
                  "op's FLOPs, bytes and class")
      ->check(kFileName);
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace placer::cli
