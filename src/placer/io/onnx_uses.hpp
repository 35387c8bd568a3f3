// How a tensor of an ONNX graph is used, from the (op type, input slot) pairs it reaches: whether a
// value the file holds (an initializer, a Constant node's value) is a weight to train, a buffer, a
// setting of its readers, or data. Shared by the importer (onnx.cpp), which classifies graph
// inputs and initializers so, and the file reader (onnx_file.cpp), which takes Constant nodes
// holding weights for initializers.
//
//   if (slot_use("Conv", 1) == Use::weight) ...
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace placer {

// Ops that only re-shape or alias a tensor: a use is looked for through them (at their slot 0), and
// through a DequantizeLinear's slot 0 (SourceUses::quantized).
bool is_transparent(const std::string& type);

// setting: an input that steers the op and takes no gradient (Resize's scales, Pad's pads): a
// floating initializer read only so is a constant, not a parameter. (A graph input keeps the
// input rules: it has no value in the file, and the executor gives sources values by kind.)
enum class Use : std::uint8_t { none, weight, buffer, data, setting };

// The role of a tensor arriving at `slot` of an op of type `type`.
Use slot_use(const std::string& type, std::size_t slot);

struct SourceUses {
  bool weight = false, buffer = false, data = false, setting = false, other = false;
  // Reaches its uses through a DequantizeLinear, or is the weight of a quantized product: an
  // integer weight (QDQ and integer-arithmetic models), a parameter although not floating.
  bool quantized = false;
  bool only_settings() const { return setting && !weight && !buffer && !data && !other; }
};

// Readers of every name of a graph: name -> (node index, input slot).
using Consumers = std::unordered_map<std::string, std::vector<std::pair<int, int>>>;

// The uses of tensor `name` of `graph`, looking through transparent ops. `consumers` indexes
// `graph`'s nodes (the importer's also holds what subgraphs read from around them).
SourceUses source_uses(const onnx::GraphProto& graph, const Consumers& consumers, const std::string& name);

}  // namespace placer
