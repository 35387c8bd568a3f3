#include "placer/io/onnx_file.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "placer/io/onnx_compat.hpp"
#include "placer/io/onnx_inline.hpp"
#include "placer/io/onnx_shapes.hpp"
#include "placer/util/error.hpp"

namespace placer {

namespace {

// Replaces the Ifs that shape inference and folding decide by the branches they take, round after
// round (an If inside a branch is decided in the next). An inference that fails leaves the rest:
// the import names what is wrong.
void inline_ifs_decided_by_shapes(onnx::ModelProto& model, const std::map<std::string, std::int64_t>& dim_values) {
  for (int round = 0; round < 64; ++round) {
    const auto& nodes = model.graph().node();
    if (std::none_of(nodes.begin(), nodes.end(), [](const onnx::NodeProto& n) { return n.op_type() == "If"; })) return;
    onnx::ModelProto copy = library_compatible_copy(model).value_or(model);
    bind_symbolic_dims(*copy.mutable_graph(), dim_values);
    std::map<std::string, onnx::TypeProto> types;
    try {
      types = infer_all_shapes(copy);
    } catch (const Error&) {
      return;
    }
    const auto values = folded_values(copy.graph(), types);
    std::unordered_map<std::string, bool> conditions;
    for (const auto& node : nodes)
      if (node.op_type() == "If" && node.input_size() == 1)
        if (auto it = values.find(node.input(0)); it != values.end() && it->second.size() == 1 && !std::isnan(it->second[0]))
          conditions[node.input(0)] = it->second[0] != 0.0;
    if (conditions.empty() || inline_decided_ifs(model, conditions) == 0) return;
  }
}

}  // namespace

void bind_symbolic_dims(onnx::GraphProto& graph, const std::map<std::string, std::int64_t>& dim_values) {
  if (dim_values.empty()) return;
  for (auto& input : *graph.mutable_input())
    if (input.type().has_tensor_type() && input.type().tensor_type().has_shape())
      for (auto& d : *input.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
        if (d.has_dim_param() && dim_values.count(d.dim_param())) d.set_dim_value(dim_values.at(d.dim_param()));
}

onnx::ModelProto read_onnx_file(const std::string& path, const std::map<std::string, std::int64_t>& dim_values) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("model file '" + path + "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open model file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (bytes.empty()) throw Error("model file '" + path + "' is empty");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    throw Error("model file '" + path + "' is not a valid ONNX model (protobuf parse failed: truncated or corrupt?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    throw Error("model file '" + path + "' is not a valid ONNX model (no graph or no nodes)");
  if (model.ir_version() <= 0) throw Error("model file '" + path + "' is not a valid ONNX model (missing IR version)");
  try {
    // Calls of model-local functions become their bodies: placer places the ops inside.
    inline_local_functions(model);
    // Small tensors stored apart (shape arithmetic's operands) are read now; weights are not.
    read_small_external_data(model, std::filesystem::path(path).parent_path());
    inline_ifs_decided_by_shapes(model, dim_values);
  } catch (const Error& e) {
    throw Error("model file '" + path + "': " + e.what());
  }
  return model;
}

}  // namespace placer
