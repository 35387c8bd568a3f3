#include "placer/io/onnx_compat.hpp"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "placer/io/onnx_shapes.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

void remove_attribute(onnx::NodeProto& node, const std::string& name) {
  auto* attrs = node.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i)
    if (attrs->Get(i).name() == name) attrs->DeleteSubrange(i, 1);
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// `node` becomes `type` reading only its first input, without attributes: for ops whose output
// has their first input's shape and type (Gelu, GroupNormalization).
void same_shape_as_first_input(onnx::NodeProto& node, const std::string& type) {
  const std::string in = node.input_size() > 0 ? node.input(0) : "";
  node.set_op_type(type);
  node.clear_input();
  node.add_input(in);
  node.clear_attribute();
  while (node.output_size() > 1) node.mutable_output()->RemoveLast();
}

bool default_domain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// Constant int64 values by name (a Reduce's axes, a DFT's axis), a subgraph's own over those of
// the scopes around it.
struct ConstantScope {
  std::unordered_map<std::string, std::vector<std::int64_t>> values;
  const ConstantScope* outer = nullptr;
  const std::vector<std::int64_t>* find(const std::string& name) const {
    for (const ConstantScope* s = this; s; s = s->outer)
      if (auto it = s->values.find(name); it != s->values.end()) return &it->second;
    return nullptr;
  }
};

// Rewrites one node of a newer opset into its form of the library's opset (see
// library_compatible_copy).
void lower_node(onnx::NodeProto& node, const ConstantScope& constants, std::int64_t opset) {
  static const std::unordered_set<std::string> kReduceAxesInput = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                                                   "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                                                   "ReduceSumSquare"};
  const std::string& type = node.op_type();
  if (kReduceAxesInput.count(type)) {
    // Opset 18: the axes came from an attribute to an optional input.
    // Empty axes reduce over every axis, or (noop_with_empty_axes) pass the input through.
    const auto* noop = attribute(node, "noop_with_empty_axes");
    const bool noop_if_empty = noop && noop->i() != 0;
    std::vector<std::int64_t> axes;
    if (node.input_size() >= 2 && !node.input(1).empty()) {
      const auto* found = constants.find(node.input(1));
      if (!found) return;  // axes computed in the graph (or stored apart): the checker names the node
      axes = *found;
    }
    remove_attribute(node, "noop_with_empty_axes");
    if (node.input_size() >= 2) node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
    if (axes.empty() && noop_if_empty) {
      same_shape_as_first_input(node, "Identity");
    } else if (!axes.empty()) {
      auto* a = node.add_attribute();
      a->set_name("axes");
      a->set_type(onnx::AttributeProto::INTS);
      for (std::int64_t v : axes) a->add_ints(v);
    }
  } else if (type == "DFT" && opset >= 20) {
    // Opset 20: the axis moved from an attribute (default 1) to an input (default -2, counted
    // from the back, as DFT-17's attribute may be too).
    std::int64_t axis = -2;
    if (node.input_size() >= 3 && !node.input(2).empty()) {
      const auto* found = constants.find(node.input(2));
      if (!found || found->size() != 1) return;  // computed: the checker names the node
      axis = (*found)[0];
    }
    if (node.input_size() >= 3) node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
    remove_attribute(node, "axis");
    auto* a = node.add_attribute();
    a->set_name("axis"), a->set_type(onnx::AttributeProto::INT), a->set_i(axis);
  } else if (type == "Split") {
    // Opset 18; opset 13 splits evenly into the outputs, and an uneven split gets the sizes of
    // opset 18's rule once its input's shape is known (infer_all_shapes). Without sizes,
    // num_outputs must say how many outputs the node has.
    const bool sizes = node.input_size() >= 2 && !node.input(1).empty();
    const onnx::AttributeProto* n = nullptr;
    for (const auto& a : node.attribute())
      if (a.name() == "num_outputs") n = &a;
    const std::string label = "node '" + (node.name().empty() && node.output_size() > 0 ? node.output(0) : node.name()) + "' (Split)";
    if (!sizes && !n) throw Error(label + ": neither the input 'split' nor the attribute 'num_outputs' says how to split");
    if (n && (n->type() != onnx::AttributeProto::INT || n->i() != node.output_size()))
      throw Error(label + ": attribute 'num_outputs' is " + (n->type() == onnx::AttributeProto::INT ? std::to_string(n->i()) : "not an integer") +
                  ", but the node has " + std::to_string(node.output_size()) + " outputs");
    remove_attribute(node, "num_outputs");
  } else if (type == "Gelu") {
    same_shape_as_first_input(node, "Relu");  // opset 20: elementwise, the input's shape
  } else if (type == "GroupNormalization") {
    same_shape_as_first_input(node, "Identity");  // opset 18 (21): the input's shape
  } else if (type == "Mish") {
    same_shape_as_first_input(node, "Relu");  // opset 18: elementwise
  } else if (type == "BitwiseNot") {
    same_shape_as_first_input(node, "Identity");  // opset 18: elementwise, the input's type
  } else if (type == "BitwiseAnd" || type == "BitwiseOr" || type == "BitwiseXor") {
    node.set_op_type("Add");  // opset 18: NumPy broadcasting of two integer tensors, their type (And would give bool)
  } else if (type == "Resize") {
    remove_attribute(node, "antialias");  // opset 18: no effect on shapes
  } else if (type == "Cast" || type == "CastLike") {
    remove_attribute(node, "saturate");  // opset 19: float8 saturation
  } else if (type == "Pad") {
    if (const auto* mode = attribute(node, "mode"); mode && mode->s() == "wrap") {  // opset 19: same shape as reflect
      remove_attribute(node, "mode");
      auto* m = node.add_attribute();
      m->set_name("mode"), m->set_type(onnx::AttributeProto::STRING), m->set_s("reflect");
    }
  } else if (type == "ScatterElements" || type == "ScatterND") {
    if (const auto* r = attribute(node, "reduction"); r && (r->s() == "max" || r->s() == "min")) {  // opset 18
      remove_attribute(node, "reduction");
      auto* m = node.add_attribute();
      m->set_name("reduction"), m->set_type(onnx::AttributeProto::STRING), m->set_s("add");
    }
  }
}

void lower_graph(onnx::GraphProto& graph, const ConstantScope* outer, std::int64_t opset);

// Every node of `nodes` and of their subgraphs (If branches, Loop and Scan bodies: the dynamo
// exporter puts whole models in an If's branches, where Split's num_outputs reached the checker).
void lower_nodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, const ConstantScope& constants, std::int64_t opset) {
  for (auto& node : nodes) {
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) lower_graph(*a.mutable_g(), &constants, opset);
      for (auto& g : *a.mutable_graphs()) lower_graph(g, &constants, opset);
    }
    if (default_domain(node)) lower_node(node, constants, opset);
  }
}

void lower_graph(onnx::GraphProto& graph, const ConstantScope* outer, std::int64_t opset) {
  ConstantScope scope{int64_constants(graph), outer};
  lower_nodes(*graph.mutable_node(), scope, opset);
}

}  // namespace

std::int64_t onnx_library_ir_version() { return onnx::Version::IR_VERSION; }

std::int64_t onnx_library_opset() {
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = map.find(onnx::ONNX_DOMAIN);
  return it == map.end() ? 17 : it->second.second;
}

std::int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

std::string newer_than_library(const onnx::ModelProto& model) {
  const std::int64_t ir = model.ir_version(), opset = default_opset(model);
  const bool newer_ir = ir > onnx_library_ir_version(), newer_opset = opset > onnx_library_opset();
  if (!newer_ir && !newer_opset) return "";
  const std::string what = newer_ir && newer_opset ? "IR version " + std::to_string(ir) + " and opset " + std::to_string(opset)
                           : newer_ir              ? "IR version " + std::to_string(ir)
                                                   : "opset " + std::to_string(opset);
  return what + ", newer than this build's ONNX library (IR " + std::to_string(onnx_library_ir_version()) + ", opset " +
         std::to_string(onnx_library_opset()) + ")";
}

std::string newer_than_placer(const onnx::ModelProto& model) {
  const std::int64_t ir = model.ir_version(), opset = default_opset(model);
  const bool newer_ir = ir > kNewestKnownIrVersion, newer_opset = opset > kNewestKnownOpset;
  if (!newer_ir && !newer_opset) return "";
  const std::string what = newer_ir && newer_opset ? "IR version " + std::to_string(ir) + " and opset " + std::to_string(opset)
                           : newer_ir              ? "IR version " + std::to_string(ir)
                                                   : "opset " + std::to_string(opset);
  return what + ", newer than the newest placer reads (IR " + std::to_string(kNewestKnownIrVersion) + ", opset " +
         std::to_string(kNewestKnownOpset) + "): its ops are read in their forms of those versions, so an op whose inputs or "
         "attributes changed since may be misread";
}

std::optional<onnx::ModelProto> library_compatible_copy(const onnx::ModelProto& model) {
  if (newer_than_library(model).empty()) return std::nullopt;
  onnx::ModelProto copy = model;
  copy.set_ir_version(std::min<std::int64_t>(copy.ir_version(), onnx_library_ir_version()));
  const std::int64_t opset = default_opset(model);
  if (opset <= onnx_library_opset()) return copy;
  for (auto& o : *copy.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") o.set_version(onnx_library_opset());

  lower_graph(*copy.mutable_graph(), nullptr, opset);
  // Model-local functions: their own opset imports and nodes (constants are their Constant nodes).
  for (auto& f : *copy.mutable_functions()) {
    for (auto& o : *f.mutable_opset_import())
      if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() > onnx_library_opset()) o.set_version(onnx_library_opset());
    onnx::GraphProto constants_only;
    for (const auto& node : f.node())
      if (node.op_type() == "Constant") *constants_only.add_node() = node;
    const ConstantScope scope{int64_constants(constants_only), nullptr};
    lower_nodes(*f.mutable_node(), scope, opset);
  }
  return copy;
}

}  // namespace placer
