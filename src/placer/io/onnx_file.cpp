#include "placer/io/onnx_file.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "placer/io/onnx_functions.hpp"
#include "placer/io/onnx_shapes.hpp"
#include "placer/util/error.hpp"

namespace placer {

onnx::ModelProto read_onnx_file(const std::string& path) {
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
  } catch (const Error& e) {
    throw Error("model file '" + path + "': " + e.what());
  }
  return model;
}

}  // namespace placer
