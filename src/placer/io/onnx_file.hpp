// An ONNX file as placer reads it: parsed, every call of a model-local function replaced by its body
// (onnx_inline.hpp), and small constants stored in external files read in (read_small_external_data).
// Then, once the ONNX checker has seen that (load_onnx), every If whose condition is known before
// the model runs is replaced by the branch it takes (inline_ifs_decided_by_shapes). The importer and
// the executor both read a model so, which keeps the graph's ops and the file's nodes one for one.
//
//   onnx::ModelProto model = read_onnx_file("model.onnx");
//   inline_ifs_decided_by_shapes(model, {{"batch", 32}});
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace placer {

// Throws Error naming the file when it cannot be opened, is a directory, is empty, is not an ONNX
// model (a failed parse, no graph or nodes, no IR version), or when inlining its functions or
// reading its external constants fails.
onnx::ModelProto read_onnx_file(const std::string& path);

// Replaces the Ifs of the main graph that shape inference and folding decide (onnxscript's
// `IsScalar(x)` branches once x's shape is known) by the branches they take, round after round (an
// If inside a branch, or one reading the shape an If gives, is decided in the next). `dim_values`
// binds symbolic sizes of graph inputs (--dim). An inference that fails leaves the rest as they are
// (the import names what is wrong). Throws Error after 256 rounds that each decided something.
void inline_ifs_decided_by_shapes(onnx::ModelProto& model, const std::map<std::string, std::int64_t>& dim_values);

// Reads into `model` the data of its small tensors stored in external files (initializers and
// Constant values of at most 4,096 elements of a fixed-size type; `dir` is the model file's
// directory): the values shape arithmetic may fold, such as a Reshape target saved apart with a size
// threshold of 0. Larger tensors (weights) are not read. A file that does not exist is left to ONNX's
// checker to name. Throws Error naming the tensor for a location outside `dir` (absolute, through
// "..", or a symbolic link leading out), one that is not a regular file, a length that does not fit
// the tensor, an offset or length that is not a number, a file that cannot be opened, and data past
// the end of its file.
void read_small_external_data(onnx::ModelProto& model, const std::filesystem::path& dir);

// Gives the symbolic dimensions of `graph`'s inputs that `dim_values` names their sizes.
void bind_symbolic_dims(onnx::GraphProto& graph, const std::map<std::string, std::int64_t>& dim_values);

}  // namespace placer
