// ONNX import: reads a model with libonnx (protobuf parse, checker, shape inference where shapes are
// missing) into a forward Graph. Graph inputs are told apart by how the graph uses them, not by
// their names: data (what a training step feeds), trainable parameters (weight and bias slots,
// embedding tables, inputs reached only through aliases) and buffers (BatchNorm running
// statistics). Op names carry PyTorch module paths, which are kept for every op.
//
//   Graph g = load_onnx("resnet50.onnx", {});
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "placer/graph/graph.hpp"

namespace placer {

// What the import decided before the step (docs/training-step.md#loops-and-scans): Ifs replaced by
// the branch they take, Loops and Scans unrolled, sequence ops read as the tensors they hold.
struct DecidedBeforeStep {
  std::size_t ifs = 0;
  std::size_t loops = 0;           // Loops and Scans unrolled (a nested one once per copy of its outer one)
  std::uint64_t iterations = 0;    // their iterations, in all
  std::size_t sequence_ops = 0;    // sequence and optional ops rewritten into tensor ops or removed
  bool any() const { return ifs + loops + sequence_ops > 0; }
};

struct OnnxImportOptions {
  // When not empty: exactly these graph inputs are data; every other input is a parameter or buffer.
  std::vector<std::string> data_inputs;
  // Values for symbolic dimensions ("batch" -> 32) of graph inputs; shapes are then re-inferred.
  std::map<std::string, std::int64_t> dim_values;
  // Price op types the cost rules do not know as this class instead of failing.
  std::optional<OpClass> unknown_op_default;
  // Options given for several models at once (`placer fit`): a `dim_values` or `data_inputs` name
  // this model lacks is skipped for it (otherwise such a name is an error: a misspelling).
  bool names_for_several_models = false;
  // Told what the user should know about an import that goes on (a model newer than placer knows);
  // none: nothing said.
  std::function<void(const std::string&)> warn;
  // Told what was decided before the step, when anything was (`placer inspect` prints it).
  std::function<void(const DecidedBeforeStep&)> decided;
};

// Throws Error with one clear line for a missing, empty, truncated or corrupt file, a model the
// ONNX checker rejects, a tensor whose shape cannot be inferred, or an op type with no cost rule.
Graph load_onnx(const std::string& path, const OnnxImportOptions& options);

// Module path and call index of an op, from a PyTorch-exported node name such as
// "/layer3/layer3.0/conv1/Conv" -> ("layer3.0.conv1", 0) or "/cells.1_10/Gemm" -> ("cells.1", 10).
// `known_modules` holds every path built from the graph's node names read literally; a trailing
// "_N" is a call suffix only when the path without it is among them (NASNet's "cell_stem_1" is
// not a call of "cell_stem").
struct ModulePath {
  std::string module;
  std::uint32_t call = 0;
};
// The segments of a node name's module part, read literally ("/a/a.b/Op" -> "a.b"); empty when the
// name has no module part.
std::string literal_module_path(const std::string& node_name);
ModulePath parse_module_path(const std::string& node_name, const std::unordered_map<std::string, bool>& known_modules);

}  // namespace placer
