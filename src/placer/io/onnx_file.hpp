// An ONNX file as placer reads it, before any check: parsed, every call of a model-local function
// replaced by its body (onnx_functions.hpp), and small constants stored in external files read in
// (read_small_external_data in onnx_shapes.hpp). The importer and the executor both read a model so,
// which keeps the graph's ops and the file's nodes one for one.
//
//   onnx::ModelProto model = read_onnx_file("model.onnx");
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace placer {

// Throws Error naming the file when it cannot be opened, is a directory, is empty, is not an ONNX
// model (a failed parse, no graph or nodes, no IR version), or when inlining its functions or
// reading its external constants fails.
onnx::ModelProto read_onnx_file(const std::string& path);

}  // namespace placer
