// One entry point for every model file placer reads: ONNX (.onnx, or anything that is not JSON)
// or placer's graph JSON (.json), then, in training mode, the derived training step.
#pragma once

#include <string>

#include "placer/graph/training.hpp"
#include "placer/io/onnx.hpp"

namespace placer {

struct ModelOptions {
  OnnxImportOptions onnx;
  Mode mode = Mode::training;
  Optimizer optimizer = Optimizer::sgd;
  // The user chose `optimizer` (not the default): a graph JSON holding a training step whose updates
  // are of another optimizer is then an Error rather than placed with updates the user did not ask for.
  bool optimizer_given = false;
};

// Whether `path` is read as placer's graph JSON: its name ends in ".json", or it is a regular file
// whose first byte that is not white space is '{' (an ONNX file, a protobuf message, never starts
// so). Anything else is ONNX (a pipe is not looked into: its bytes would be gone).
bool is_graph_json_file(const std::string& path);

// The forward graph of a model file.
Graph load_forward_graph(const std::string& path, const ModelOptions& options);
// Throws when `options` names an optimizer (optimizer_given) other than the one whose update ops
// `step`, a training step read from graph JSON, holds: those updates are placed as saved.
void check_saved_step_optimizer(const Graph& step, const std::string& path, const ModelOptions& options);

// The graph placer places: the forward graph in inference mode, the training step otherwise. A
// graph JSON that already holds a training step is that step in training mode (with its own update
// ops) and an Error in inference mode. A model of no op is an Error (nothing to place).
Graph load_model(const std::string& path, const ModelOptions& options);

}  // namespace placer
