// Shape inference for ONNX import. Exporters leave many shapes unknown where they depend on values
// computed in the graph (NASNet's "same" padding computed from Ceil/Sub/Mul on constants, a
// position table sliced to the sequence length read by Shape). We evaluate those small
// shape-computation subgraphs on their constant values, hand the results to ONNX's own shape
// inference as Constant nodes (in a copy of the model), and repeat until nothing new is learnt.
// Between ONNX's passes over the whole model, a node that cannot be folded but whose inputs are
// known is inferred on its own with its ONNX rule, so that a chain of shape computations through
// every layer folds in a few passes, not one per layer.
// Values that make no sense (an axis out of range, a -1 twice in a Reshape target, ...) stay
// unknown; nothing a model file holds can make the evaluation read out of bounds.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace placer {

// The type (element type and shape) of every tensor ONNX could infer, by name: graph inputs,
// initializers, value_info and outputs of `model` after constant folding and shape inference.
// Throws Error when ONNX shape inference itself fails, when an attribute that must be positive is
// not (strides, dilations, kernel_shape, group, blocksize: ONNX's checker does not look at values,
// and its shape inference divides by some of them), or when a tensor's raw data does not hold as
// many bytes as its dims say (ONNX's shape inference reads it by the dims).
// `model` is taken by value: the folding rewrites it (pass a temporary to spare a copy).
// `onnx_passes`, when given, receives how many times ONNX's inference ran over the whole model
// (a few, whatever the depth: nodes that cannot be folded are inferred one by one in between).
// `written_opset`: the default opset of the file `model` was made from, when `model` is its
// library_compatible_copy() (which lowers the opset); 0 for `model`'s own. A Split without sizes
// into uneven parts is opset 18's num_outputs when written for 18 on, an error before.
std::map<std::string, onnx::TypeProto> infer_all_shapes(onnx::ModelProto model, std::size_t* onnx_passes = nullptr,
                                                        std::int64_t written_opset = 0);

// The values of `graph`'s small constants (initializers and Constant nodes of at most 4,096
// elements) and of every node computed from them alone, Shape and Size reading `types`, as the
// folding computes them: by name, elements as doubles (integers exact).
std::unordered_map<std::string, std::vector<double>> folded_values(const onnx::GraphProto& graph,
                                                                   const std::map<std::string, onnx::TypeProto>& types);

// The small integer constants of `graph` by name, read as the folding reads them: initializers and
// Constant nodes (`value`, `value_int`, `value_ints`) of an integer type, at most 4,096 elements.
std::unordered_map<std::string, std::vector<std::int64_t>> int64_constants(const onnx::GraphProto& graph);

}  // namespace placer
