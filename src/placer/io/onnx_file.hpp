// An ONNX file as placer reads it, before any check: parsed, every call of a model-local function
// replaced by its body and every If whose condition is known before the model runs replaced by the
// branch it takes (onnx_inline.hpp), and small constants stored in external files read in
// (read_small_external_data in onnx_shapes.hpp). The importer and the executor both read a model so,
// which keeps the graph's ops and the file's nodes one for one.
//
//   onnx::ModelProto model = read_onnx_file("model.onnx", {{"batch", 32}});
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>

namespace placer {

// `dim_values` binds symbolic sizes of graph inputs (--dim) for the shape inference that decides
// Ifs. Throws Error naming the file when it cannot be opened, is a directory, is empty, is not an
// ONNX model (a failed parse, no graph or nodes, no IR version), or when inlining its functions or
// reading its external constants fails.
onnx::ModelProto read_onnx_file(const std::string& path, const std::map<std::string, std::int64_t>& dim_values = {});

// Gives the symbolic dimensions of `graph`'s inputs that `dim_values` names their sizes.
void bind_symbolic_dims(onnx::GraphProto& graph, const std::map<std::string, std::int64_t>& dim_values);

}  // namespace placer
