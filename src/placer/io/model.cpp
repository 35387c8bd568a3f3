#include "placer/io/model.hpp"

#include "placer/io/graph_json.hpp"

namespace placer {

Graph load_forward_graph(const std::string& path, const ModelOptions& options) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  return json ? load_graph_json(path, options.onnx.unknown_op_default) : load_onnx(path, options.onnx);
}

Graph load_model(const std::string& path, const ModelOptions& options) {
  Graph forward = load_forward_graph(path, options);
  if (options.mode == Mode::inference) return forward;
  // A graph JSON may already hold a training step.
  if (forward.num_forward_ops() != forward.num_ops()) return forward;
  return derive_training_step(forward, options.optimizer);
}

}  // namespace placer
