#include "placer/io/model.hpp"

#include <filesystem>
#include <fstream>
#include <map>

#include "placer/graph/op_work.hpp"
#include "placer/io/graph_json.hpp"
#include "placer/util/error.hpp"

namespace placer {

bool is_graph_json_file(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return true;
  // Only a regular file is looked into: reading from a pipe (`<(cat model.onnx)`) would take the
  // bytes away from the reader that follows.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  // A UTF-8 byte-order mark first, as some editors write (the JSON reader skips it; no ONNX file
  // starts so: a first byte 0xEF is a protobuf key of wire type 7, which does not exist).
  char bom[3] = {};
  if (!in.read(bom, 3) || bom[0] != '\xEF' || bom[1] != '\xBB' || bom[2] != '\xBF') in.clear(), in.seekg(0);
  // Up to 4 KiB of leading white space: a graph JSON that starts with blank lines.
  for (int i = 0; i < 4096 && in.get(c); ++i)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c == '{';
  return false;  // unreadable, empty or all blank: the ONNX reader says what is wrong
}

Graph load_forward_graph(const std::string& path, const ModelOptions& options) {
  if (!is_graph_json_file(path)) return load_onnx(path, options.onnx);
  // A graph JSON gives every shape and every tensor's kind: options that would change them are not
  // silently ignored (a user would believe the batch size or the data inputs changed).
  if (!options.onnx.names_for_several_models && (!options.onnx.dim_values.empty() || !options.onnx.data_inputs.empty()))
    throw Error(std::string(!options.onnx.dim_values.empty() ? "--dim" : "--data-inputs") + " applies to ONNX models only: '" + path +
                "' is a placer graph JSON, which gives every shape and every tensor's kind itself");
  std::map<std::string, std::size_t> guessed;  // what --unknown-ops priced, said as the ONNX import says it
  Graph g = load_graph_json(path, options.onnx.unknown_op_default, &guessed);
  if (!guessed.empty() && options.onnx.warn) options.onnx.warn("'" + path + "': " + unknown_ops_priced_note(guessed, *options.onnx.unknown_op_default));
  return g;
}

void check_saved_step_optimizer(const Graph& step, const std::string& path, const ModelOptions& options) {
  if (!options.optimizer_given) return;
  for (OpId o = step.num_forward_ops(); o < step.num_ops(); ++o)
    if (step.op_role(o) == OpRole::update && step.op_type(o) != update_op_type(options.optimizer))
      throw Error("--optimizer " + std::string(optimizer_name(options.optimizer)) + " does not apply to '" + path +
                  "': it holds a training step whose updates are its own (op '" + step.op_name(o) + "' is of type " + step.op_type(o) +
                  "); leave --optimizer out, or derive a new step from the model it was saved from (placer inspect MODEL --optimizer " +
                  std::string(optimizer_name(options.optimizer)) + " --save-graph FILE)");
}

Graph load_model(const std::string& path, const ModelOptions& options) {
  Graph forward = load_forward_graph(path, options);
  // Nothing to place: every command would answer about nothing (simulate printed an empty table,
  // compare "0.0 us" for some placers and an error for others: a QA pass).
  if (forward.num_forward_ops() == 0) throw Error("'" + path + "' holds no op: there is nothing to place, simulate or run");
  // A graph JSON may already hold a training step: placed as it is in training mode, never taken
  // for a forward pass.
  const bool step = forward.num_forward_ops() != forward.num_ops();
  if (options.mode == Mode::inference) {
    if (step)
      throw Error("'" + path + "' holds a training step (" + std::to_string(forward.num_ops() - forward.num_forward_ops()) +
                  " backward and update ops): inference mode needs a forward graph (placer inspect MODEL --mode inference "
                  "--save-graph FILE writes one)");
    return forward;
  }
  if (step) {
    check_saved_step_optimizer(forward, path, options);
    return forward;
  }
  try {
    return derive_training_step(forward, options.optimizer);
  } catch (const Error& e) {
    throw Error("'" + path + "': deriving the training step: " + e.what());
  }
}

}  // namespace placer
