#include "placer/io/onnx_uses.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace placer {

bool is_transparent(const std::string& type) {
  static const std::unordered_set<std::string> kTypes = {"Identity", "Transpose", "Reshape", "Cast", "Unsqueeze",
                                                         "Squeeze",  "Flatten",   "Slice",   "Expand"};
  return kTypes.count(type) > 0;
}

Use slot_use(const std::string& type, std::size_t slot) {
  // Quantized products: the integer weight (and QLinearConv's int32 bias); scales and zero points steer.
  if (type == "ConvInteger" || type == "MatMulInteger") return slot == 0 ? Use::data : slot == 1 ? Use::weight : Use::setting;
  if (type == "QLinearConv" || type == "QLinearMatMul") return slot == 0 ? Use::data : slot == 3 || slot == 8 ? Use::weight : Use::setting;
  if (type == "QuantizeLinear" || type == "DequantizeLinear") return slot == 0 ? Use::data : Use::setting;
  if (type == "Conv" || type == "ConvTranspose") return slot == 0 ? Use::data : Use::weight;
  if (type == "Gemm") return slot == 0 ? Use::data : Use::weight;
  if (type == "MatMul") return slot == 0 ? Use::data : Use::weight;
  if (type == "BatchNormalization") return slot == 0 ? Use::data : slot <= 2 ? Use::weight : Use::buffer;
  if (type == "LayerNormalization" || type == "InstanceNormalization" || type == "GroupNormalization" ||
      type == "SimplifiedLayerNormalization" || type == "PRelu")
    return slot == 0 ? Use::data : Use::weight;
  // W, R, B, then sequence_lens, the initial states (trained in some models, zeros in others: no
  // use the table decides) and LSTM's P, the peephole weights.
  if (type == "LSTM") return slot == 0 ? Use::data : slot <= 3 || slot == 7 ? Use::weight : slot == 4 ? Use::setting : Use::none;
  if (type == "GRU" || type == "RNN") return slot == 0 ? Use::data : slot <= 3 ? Use::weight : slot == 4 ? Use::setting : Use::none;
  if (type == "Gather" || type == "GatherElements" || type == "GatherND") return slot == 0 ? Use::weight : Use::data;
  if (type == "Embedding") return slot == 0 ? Use::weight : Use::data;
  // A loss's class weights: a constant of the loss, never trained (PyTorch's CrossEntropyLoss keeps
  // them as a buffer).
  if ((type == "NegativeLogLikelihoodLoss" || type == "SoftmaxCrossEntropyLoss") && slot == 2) return Use::buffer;
  // Axes, sizes, bounds and shapes given as inputs (opset 13 on for ReduceSum, Squeeze, Unsqueeze
  // and Split, 18 for the other reductions).
  static const std::unordered_set<std::string> kSettingsAfterSlot0 = {
      "Resize",      "Upsample",   "Pad",       "Clip",      "Slice",      "Tile",       "Expand",          "Reshape",
      "TopK",        "Dropout",    "Squeeze",   "Unsqueeze", "Split",      "ReduceSum",  "ReduceMean",      "ReduceMax",
      "ReduceMin",   "ReduceProd", "ReduceL1",  "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  if (slot > 0 && kSettingsAfterSlot0.count(type)) return Use::setting;
  if (type == "Range" || type == "ConstantOfShape") return Use::setting;
  return Use::none;
}

SourceUses source_uses(const onnx::GraphProto& graph, const Consumers& consumers, const std::string& name) {
  SourceUses uses;
  // The graph's constants of one value (initializers and Constant nodes: an index x[0], an unrolled
  // loop's step), gathered when a Gather is first met.
  std::optional<std::unordered_set<std::string>> scalars;
  auto one_value = [](const onnx::TensorProto& t) {
    return std::all_of(t.dims().begin(), t.dims().end(), [](std::int64_t d) { return d == 1; });
  };
  auto scalar_initializer = [&](const std::string& index) {
    if (!scalars) {
      scalars.emplace();
      for (const auto& t : graph.initializer())
        if (one_value(t)) scalars->insert(t.name());
      for (const auto& n : graph.node()) {
        if (n.op_type() != "Constant" || n.output_size() != 1) continue;
        for (const auto& a : n.attribute())
          if ((a.name() == "value" && a.has_t() && one_value(a.t())) || a.name() == "value_int") scalars->insert(n.output(0));
      }
    }
    return scalars->count(index) > 0;
  };
  std::vector<std::string> frontier{name};
  std::unordered_set<std::string> seen{name};
  while (!frontier.empty()) {
    std::string cur = frontier.back();
    frontier.pop_back();
    auto it = consumers.find(cur);
    if (it == consumers.end()) continue;
    for (auto [n, s] : it->second) {
      const auto& node = graph.node(n);
      // A quantized weight reaches its op through a DequantizeLinear (QDQ models).
      const bool dequantize = node.op_type() == "DequantizeLinear" && s == 0;
      uses.quantized |= dequantize;
      // A Gather at one constant index selects a slice (x[0], an unrolled loop's step x[i], onnx_inline.hpp),
      // which the tensor flows through; at indices it looks up rows of a table (an embedding's weight).
      const bool selects = node.op_type() == "Gather" && s == 0 && node.input_size() > 1 && scalar_initializer(node.input(1));
      // Reshape's and Expand's second input is a shape, Slice's others are indices: not the tensor flowing through.
      if ((is_transparent(node.op_type()) || dequantize || selects) && s == 0) {
        for (const auto& out : node.output())
          if (seen.insert(out).second) frontier.push_back(out);
        continue;
      }
      const Use use = slot_use(node.op_type(), static_cast<std::size_t>(s));
      if (use == Use::weight && (node.op_type() == "ConvInteger" || node.op_type() == "MatMulInteger" || node.op_type() == "QLinearConv" ||
                                 node.op_type() == "QLinearMatMul"))
        uses.quantized = true;
      switch (use) {
        case Use::weight: uses.weight = true; break;
        case Use::buffer: uses.buffer = true; break;
        case Use::data: uses.data = true; break;
        case Use::setting: uses.setting = true; break;
        case Use::none: uses.other = true; break;
      }
    }
  }
  return uses;
}

}  // namespace placer
