// An ONNX file as placer reads it: parsed, its nodes in topological order, every call of a
// model-local function replaced by its body (onnx_inline.hpp), Constant nodes holding weights taken
// for initializers, and small constants stored in external files read in (read_small_external_data).
// Then, once the ONNX checker has seen that (load_onnx), every If whose condition is known before
// the model runs is replaced by the branch it takes, and every Loop or Scan whose iterations are
// known by its iterations' nodes (inline_control_flow_decided_by_shapes). The importer and the
// executor both read a model so, which keeps the graph's ops and the file's nodes one for one.
//
//   onnx::ModelProto model = read_onnx_file("model.onnx");
//   inline_control_flow_decided_by_shapes(model, {{"batch", 32}});
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "placer/io/onnx.hpp"

namespace placer {

// Throws Error naming the file when it cannot be opened, is a directory, is empty, is not an ONNX
// model (a failed parse, no graph or nodes, no IR version), or when inlining its functions or
// reading its external constants fails.
// Nodes not in topological order (which ONNX requires and onnxruntime does not) are sorted
// (sort_nodes_topologically); `sorted`, when given, is set to whether they were.
onnx::ModelProto read_onnx_file(const std::string& path, bool* sorted = nullptr);

// Constant nodes of the main graph whose value is a weight become initializers, which the importer
// classifies as parameters and buffers as it does every initializer: a floating-point value of
// two elements or more (not a graph output) that reaches a weight or buffer slot (Conv's weight and
// bias, BatchNormalization's statistics, MatMul's second operand; source_uses), or that an Add adds
// to the output of a MatMul, Gemm or convolution (a linear layer's bias). Paddle2ONNX stores
// every weight so: PP-OCR's detector was read with no parameters and trained nothing. Returns how
// many; none before IR version 4 (every initializer is a graph input there). read_onnx_file does it.
std::size_t constant_weights_to_initializers(onnx::ModelProto& model);

// Sorts the nodes of the main graph and of every subgraph so that each comes after the nodes it
// reads, keeping the file's order where it is one; true when a node moved. A name two nodes
// produce leaves that graph as it is (the checker names it). Throws Error naming the nodes of a
// cycle, or a node reading a name that nothing in its graph or around it makes.
bool sort_nodes_topologically(onnx::ModelProto& model);

// Replaces the Ifs of the main graph that shape inference and folding decide (onnxscript's
// `IsScalar(x)` branches once x's shape is known) by the branches they take, and unrolls its Loops
// and Scans whose iterations they count (unroll_counted_loops, onnx_inline.hpp), round after round
// (an If or Loop inside a branch or body, or one reading the shape another gives, is decided in the
// next). `dim_values` binds symbolic sizes of graph inputs (--dim). An inference that fails leaves
// the rest as they are (the import names what is wrong). Throws Error after 256 rounds that each
// decided something, and where unroll_counted_loops does.
// `keep_refused`: a Loop or Scan unroll_counted_loops would refuse is left (--unknown-ops).
// Also reads the sequences whose tensors are then known as those tensors (resolve_known_sequences).
// Returns what was decided (DecidedBeforeStep::any: whether the model changed).
DecidedBeforeStep inline_control_flow_decided_by_shapes(onnx::ModelProto& model, const std::map<std::string, std::int64_t>& dim_values,
                                                        bool keep_refused = false);

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
