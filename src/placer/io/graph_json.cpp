#include "placer/io/graph_json.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <span>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <onnx/defs/schema.h>

#include "placer/graph/training.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"
#include "placer/util/json_fields.hpp"

namespace placer {
namespace {

using nlohmann::json;

nlohmann::json attribute_value(const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::integer: return a.i;
    case Attribute::Kind::real: return a.f;
    case Attribute::Kind::text: return a.s;
    case Attribute::Kind::integers: return a.ints;
    case Attribute::Kind::reals: return a.floats;
  }
  return nullptr;
}

// An attribute of an ONNX op type must be of the type ONNX gives it: the cost rules read attributes
// typed, and a Gemm's "transB": "1" was read as 0 (the default) without a word. Attributes ONNX
// does not define for the type, and types it does not know (placer's own, a training step's), pass.
void check_attribute_type(const std::string& type, const Attribute& a, const std::string& where) {
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(type, onnx::ONNX_DOMAIN);
  if (!schema) return;
  const auto it = schema->attributes().find(a.name);
  if (it == schema->attributes().end()) return;
  using K = Attribute::Kind;
  const bool integral = a.kind == K::integer || (a.kind == K::real && std::isfinite(a.f) && a.f == std::trunc(a.f));
  bool ok = true;
  std::string expected;
  switch (it->second.type) {
    case onnx::AttributeProto::INT: ok = integral, expected = "an integer"; break;
    case onnx::AttributeProto::FLOAT: ok = a.kind == K::integer || a.kind == K::real, expected = "a number"; break;
    case onnx::AttributeProto::STRING: ok = a.kind == K::text, expected = "a string"; break;
    case onnx::AttributeProto::INTS: ok = a.kind == K::integers, expected = "a list of integers"; break;
    case onnx::AttributeProto::FLOATS: ok = a.kind == K::integers || a.kind == K::reals, expected = "a list of numbers"; break;
    default: return;  // tensors, graphs, ...: not in this format
  }
  if (ok) return;
  const char* given = a.kind == K::integer ? "an integer" : a.kind == K::real ? "a number" : a.kind == K::text ? "a string" : "a list";
  throw Error(where + ": attribute '" + a.name + "' of " + type + " must be " + expected + " (as in ONNX), got " + given +
              (a.kind == K::text ? " ('" + utf8_prefix(a.s, 40) + "')" : ""));
}

// The fewest inputs and outputs an ONNX op type takes, over every version of it the linked ONNX
// library defines (Slice took one input before opset 10, three after; a graph JSON names no
// opset). No upper bound: the library stops at opset 17, and later opsets gave ops more inputs
// (ReduceMean's axes and Pad's axes in 18, DFT's axis in 20); an If or a Loop lists the names its
// subgraphs read besides its own inputs.
struct OperandCounts {
  int min_inputs = std::numeric_limits<int>::max(), min_outputs = std::numeric_limits<int>::max();
};

const OperandCounts* operand_counts(const std::string& type) {
  static const std::unordered_map<std::string, OperandCounts> counts = [] {
    std::unordered_map<std::string, OperandCounts> m;
    for (const onnx::OpSchema& s : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
      if (s.domain() != onnx::ONNX_DOMAIN) continue;
      OperandCounts& c = m[s.Name()];
      c.min_inputs = std::min(c.min_inputs, s.min_input()), c.min_outputs = std::min(c.min_outputs, s.min_output());
    }
    return m;
  }();
  const auto it = counts.find(type);
  return it == counts.end() ? nullptr : &it->second;
}

std::string count_of(std::size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

// An op of an ONNX type priced by placer's rule must have the operands every version of the type
// requires: a Conv without its weight, or a MatMul with one input, was priced (at 0 FLOPs, or from
// its output alone) instead of refused (a fuzzing review). `inputs` holds kNoId for a null
// (omitted optional) input, which a required one may not be. Types ONNX does not define pass, as
// do alias ops (an Identity of a parameter, which names its tensors in attributes: formats.md).
void check_operand_counts(const OpSpec& spec, const std::string& where) {
  const OperandCounts* c = operand_counts(spec.type);
  if (!c || spec.attrs.find("alias_of")) return;
  if (std::cmp_less(spec.inputs.size(), c->min_inputs))
    throw Error(where + " (" + spec.type + "): " + count_of(spec.inputs.size(), "input") + ", where ONNX's " + spec.type + " takes at least " +
                std::to_string(c->min_inputs) + " (give 'flops' to price an op by your own figures)");
  for (int k = 0; k < c->min_inputs; ++k)
    if (spec.inputs[static_cast<std::size_t>(k)] == kNoId)
      throw Error(where + " (" + spec.type + "): its input " + std::to_string(k) + " is null, but ONNX's " + spec.type + " requires its first " +
                  std::to_string(c->min_inputs));
  if (std::cmp_less(spec.outputs.size(), c->min_outputs))
    throw Error(where + " (" + spec.type + "): " + count_of(spec.outputs.size(), "output") + ", where ONNX's " + spec.type +
                " gives at least " + std::to_string(c->min_outputs));
}

Attribute attribute_from(const std::string& name, const json& v, const std::string& where) {
  Attribute a{.name = name};
  if (v.is_number_integer()) {
    a.kind = Attribute::Kind::integer, a.i = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    a.kind = Attribute::Kind::real, a.f = v.get<double>();
  } else if (v.is_string()) {
    a.kind = Attribute::Kind::text, a.s = v.get<std::string>();
  } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); })) {
    a.kind = Attribute::Kind::integers, a.ints = v.get<std::vector<std::int64_t>>();
  } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); })) {
    a.kind = Attribute::Kind::reals, a.floats = v.get<std::vector<double>>();
  } else {
    throw Error(where + ": attribute '" + name + "' must be a number, a string or a list of numbers");
  }
  return a;
}

const json& field(const json& obj, const char* name, const std::string& where) {
  if (!obj.is_object()) throw Error(where + ": expected an object");
  auto it = obj.find(name);
  if (it == obj.end()) throw Error(where + ": missing field '" + name + "'");
  return *it;
}

// What a field of type T must hold, for errors.
template <typename T>
std::string expected_type() {
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return "a list of integers";
  // A narrower one names its bound: "call": 2^32 was "not a non-negative integer" (a QA pass).
  else if constexpr (std::is_unsigned_v<T> && sizeof(T) < 8) return "an integer from 0 to " + std::to_string(std::numeric_limits<T>::max());
  else if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else return "JSON";
}

// An integer of type T in a JSON number, or nothing: nlohmann's get<> truncates 784.5 to 784,
// wraps -1 into an unsigned type and reads false as 0.
template <typename T>
bool integer_fits(const json& v) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  const std::int64_t i = v.get<std::int64_t>();
  if constexpr (std::is_unsigned_v<T>) return i >= 0 && static_cast<std::uint64_t>(i) <= std::numeric_limits<T>::max();
  else return i >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) && i <= static_cast<std::int64_t>(std::numeric_limits<T>::max());
}

// " (N is out of range: ...)" when `v` is a whole number that T cannot hold (a number past 64
// bits is read as a float, 1.8446744073709552e+19, and a shape's dimension past the range was
// "must be a list of integers" though it is one: a fuzzing pass); "" otherwise.
// A whole number within the range written as a float (128.0, 1e2) says so: it read "out of range"
// (a QA pass).
template <typename T>
std::string out_of_range_note(const json& v) {
  const bool whole = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) && std::trunc(v.get<double>()) == v.get<double>());
  if (!whole || integer_fits<T>(v)) return "";
  // (2^63 as a double is past an int64's largest; the lowest is exact.)
  if (v.is_number_float() && v.get<double>() >= static_cast<double>(std::numeric_limits<T>::min()) &&
      v.get<double>() < 2.0 * (static_cast<double>(std::numeric_limits<T>::max() / 2 + 1)))
    return " (" + json_excerpt(v) + " is written as a float: write the integer without a decimal point or exponent)";
  return " (" + json_excerpt(v) + " is out of range: " + std::to_string(std::numeric_limits<T>::min()) + " to " +
         std::to_string(std::numeric_limits<T>::max()) + ")";
}

template <typename T>
T get_strict(const json& v, const char* name, const std::string& where) {
  bool ok = true;
  std::string note;
  if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
    ok = v.is_array();
    for (const json& x : v.is_array() ? v : json::array())
      if (!integer_fits<std::int64_t>(x)) {
        ok = false, note = out_of_range_note<std::int64_t>(x);
        break;
      }
  } else if constexpr (std::is_integral_v<T>) {
    ok = integer_fits<T>(v);  // (its expected type names the range)
  } else if constexpr (std::is_floating_point_v<T>) {
    ok = v.is_number();
  } else if constexpr (std::is_same_v<T, std::string>) {
    ok = v.is_string();
  }
  if (!ok) throw Error(where + ": field '" + name + "' must be " + expected_type<T>() + ", got " + json_excerpt(v) + note);
  return v.get<T>();
}

template <typename T>
T field_as(const json& obj, const char* name, const std::string& where) {
  return get_strict<T>(field(obj, name, where), name, where);
}

template <typename T>
T optional_as(const json& obj, const char* name, T fallback, const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end()) return fallback;
  return get_strict<T>(*it, name, where);
}

// A field that must be a list (of tensor names): an object would be iterated as its values.
const json& list_field(const json& obj, const char* name, const std::string& where) {
  const json& v = field(obj, name, where);
  if (!v.is_array()) throw Error(where + ": field '" + name + "' must be a list, got " + json_excerpt(v));
  return v;
}

}  // namespace

json graph_to_json(const Graph& g) {
  json tensors = json::array();
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    auto shape = g.tensor_shape(t);
    tensors.push_back({{"name", g.tensor_name(t)},
                       {"shape", std::vector<std::int64_t>(shape.begin(), shape.end())},
                       {"dtype", dtype_name(g.tensor_dtype(t))},
                       {"kind", tensor_kind_name(g.tensor_kind(t))}});
    if (g.tensor_accumulated(t)) tensors.back()["accumulated"] = true;
  }
  json ops = json::array();
  for (OpId o = 0; o < g.num_ops(); ++o) {
    json inputs = json::array(), outputs = json::array();
    for (TensorId t : g.op_inputs(o)) inputs.push_back(t == kNoId ? json(nullptr) : json(g.tensor_name(t)));
    for (TensorId t : g.op_outputs(o)) outputs.push_back(g.tensor_name(t));
    json op = {{"name", g.op_name(o)}, {"type", g.op_type(o)}, {"inputs", inputs}, {"outputs", outputs}};
    if (g.op_module(o) != 0) op["module"] = g.module_name(g.op_module(o));
    if (g.op_call(o) != 0) op["call"] = g.op_call(o);
    if (g.op_role(o) != OpRole::forward) op["role"] = op_role_name(g.op_role(o));
    if (g.forward_op(o) != kNoId) op["forward_op"] = g.op_name(g.forward_op(o));
    if (g.updated_param(o) != kNoId) op["param"] = g.tensor_name(g.updated_param(o));
    if (!g.op_attrs(o).empty()) {
      json attrs = json::object();
      for (const auto& a : g.op_attrs(o).all()) attrs[a.name] = attribute_value(a);
      op["attrs"] = attrs;
    }
    const OpWork& w = g.op_work(o);
    op["class"] = op_class_name(w.op_class);
    op["flops"] = w.flops;
    op["bytes_read"] = w.bytes_read;
    op["bytes_written"] = w.bytes_written;
    if (w.product_min_dim > 0) op["product_min_dim"] = w.product_min_dim;
    if (w.conv_kernel_area > 0) op["conv_kernel_area"] = w.conv_kernel_area;
    // Views beyond an alias's first output, which reading derives again.
    if (const std::uint32_t views = g.op_view_outputs(o) & ~(w.op_class == OpClass::alias ? 1u : 0u); views != 0) {
      json names = json::array();
      const auto outs = g.op_outputs(o);
      for (std::size_t i = 0; i < outs.size() && i < 32; ++i)
        if (views >> i & 1u) names.push_back(g.tensor_name(outs[i]));
      op["views"] = names;
    }
    ops.push_back(std::move(op));
  }
  json outputs = json::array();
  for (TensorId t : g.outputs()) outputs.push_back(g.tensor_name(t));
  return {{"format", "placer-graph"},
          {"version", kGraphJsonVersion},
          {"name", g.name()},
          {"forward_ops", g.num_forward_ops()},
          {"optimizer_state_copies", g.optimizer_state_copies()},
          {"tensors", tensors},
          {"ops", ops},
          {"outputs", outputs}};
}

Graph graph_from_json(const json& j, const std::string& source, std::optional<OpClass> unknown_op_default,
                      std::map<std::string, std::size_t>* guessed) {
  if (!j.is_object()) throw Error(source + ": a placer graph must be a JSON object");
  if (optional_as<std::string>(j, "format", "", source) != "placer-graph")
    throw Error(source + ": not a placer graph (field 'format' must be \"placer-graph\")");
  check_format_version(field(j, "version", source), source, "graph", kGraphJsonVersion);
  check_known_fields(j, {"format", "version", "name", "forward_ops", "optimizer_state_copies", "tensors", "ops", "outputs"}, source);
  GraphBuilder b(optional_as<std::string>(j, "name", "", source));
  const json& tensors = field(j, "tensors", source);
  if (!tensors.is_array()) throw Error(source + ": field 'tensors' must be a list");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const json& t = tensors[i];
    std::string where = source + ": tensors[" + std::to_string(i) + "]";
    if (!t.is_object()) throw Error(where + ": a tensor must be a JSON object");
    auto name = field_as<std::string>(t, "name", where);
    if (name.empty()) throw Error(where + ": field 'name' is empty (ops name their tensors)");
    where += " '" + name + "'";
    check_known_fields(t, {"name", "shape", "dtype", "kind", "accumulated"}, where);
    // Fields read with `where` name it in their errors; the checks after them are prefixed here.
    auto shape = field_as<std::vector<std::int64_t>>(t, "shape", where);
    for (std::size_t k = 0; k < shape.size(); ++k)
      if (shape[k] <= 0)  // before any op's shape rule reads it (a MatMul's "gives [4,8], not [4,0]" said less: a QA pass)
        throw Error(where + ": dimension " + std::to_string(k) + " of its shape is " + std::to_string(shape[k]) + ", not positive" +
                    (shape[k] == 0 ? " (an empty tensor: nothing to place)" : ""));
    const std::string dtype_name = optional_as<std::string>(t, "dtype", "float32", where);
    const std::string kind_name = optional_as<std::string>(t, "kind", "activation", where);
    try {
      const DType dtype = parse_dtype(dtype_name);
      if (dtype == DType::unknown || dtype == DType::string) throw Error("dtype '" + dtype_name + "' is not supported");
      const TensorKind kind = parse_tensor_kind(kind_name);
      if (kind == TensorKind::parameter && !is_floating(dtype))
        throw Error("a parameter must be floating-point, not " + dtype_name +
                    " (integer tensors carry no gradient: kind 'buffer' or 'constant' holds one that is not trained)");
      const TensorId id = b.add_tensor(name, std::move(shape), dtype, kind);
      if (t.contains("accumulated")) {
        if (!t["accumulated"].is_boolean()) throw Error("field 'accumulated' must be true or false, got " + json_excerpt(t["accumulated"]));
        if (t["accumulated"].get<bool>()) b.set_tensor_accumulated(id);
      }
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
  auto tensor_id = [&](const json& name_json, const std::string& where) {
    if (!name_json.is_string()) throw Error(where + ": tensor names must be strings, got " + json_excerpt(name_json));
    const std::string name = name_json.get<std::string>();
    TensorId id = b.find_tensor(name);
    if (id == kNoId) throw Error(where + ": tensor '" + name + "' is not in 'tensors'");
    return id;
  };
  const json& ops = field(j, "ops", source);
  if (!ops.is_array()) throw Error(source + ": field 'ops' must be a list");
  std::unordered_map<std::string, OpId> op_ids;
  std::vector<std::pair<OpId, std::string>> forward_refs;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const json& op = ops[i];
    std::string where = source + ": ops[" + std::to_string(i) + "]";
    if (!op.is_object()) throw Error(where + ": an op must be a JSON object");
    OpSpec spec;
    spec.name = field_as<std::string>(op, "name", where);
    if (spec.name.empty()) throw Error(where + ": field 'name' is empty (placements name ops)");
    where += " '" + spec.name + "'";
    check_known_fields(op,
                       {"name", "type", "inputs", "outputs", "module", "call", "role", "forward_op", "param", "attrs", "class", "flops",
                        "bytes_read", "bytes_written", "product_min_dim", "conv_kernel_area", "views"},
                       where);
    spec.type = field_as<std::string>(op, "type", where);
    // An op type is a name (ONNX's, or one of the file's own): an empty one, or one with control
    // characters, was accepted when the op gave its FLOPs (a fuzzing pass).
    if (spec.type.empty() || has_control_char(spec.type))
      throw Error(where + ": field 'type' is " + json_excerpt(op["type"]) + ", not an op type (a name without control characters)");
    for (const json& in : list_field(op, "inputs", where))
      spec.inputs.push_back(in.is_null() ? kNoId : tensor_id(in, where));
    for (const json& out : list_field(op, "outputs", where)) spec.outputs.push_back(tensor_id(out, where));
    spec.module = optional_as<std::string>(op, "module", "", where);
    spec.call = optional_as<std::uint32_t>(op, "call", 0, where);
    const std::string role = optional_as<std::string>(op, "role", "forward", where);
    try {
      spec.role = parse_op_role(role);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    // A training step's loss starts its backward pass from what it reads: a backward op with an
    // input (one with role "update", or none to read, was taken as written: a QA pass; inspect
    // then counted it among the updates).
    if (spec.type == kLossOpType && spec.role != OpRole::forward) {
      if (spec.role != OpRole::backward)
        throw Error(where + ": a '" + std::string(kLossOpType) + "' op starts the backward pass: its role must be 'backward', not '" + role + "'");
      if (std::none_of(spec.inputs.begin(), spec.inputs.end(), [](TensorId t) { return t != kNoId; }))
        throw Error(where + ": a '" + std::string(kLossOpType) + "' op reads the output its gradient starts from: it has no input");
    }
    if (auto it = op.find("param"); it != op.end()) spec.param = tensor_id(*it, where);
    // Outputs that share the storage of the first input (a gradient passed through unchanged).
    if (op.contains("views"))
      for (const json& view : list_field(op, "views", where)) {
        const TensorId t = tensor_id(view, where);
        const auto slot = std::find(spec.outputs.begin(), spec.outputs.end(), t);
        if (slot == spec.outputs.end()) throw Error(where + ": 'views' names '" + b.tensor_name(t) + "', which is not one of its outputs");
        if (slot - spec.outputs.begin() >= 32)
          throw Error(where + ": 'views' names '" + b.tensor_name(t) + "', its output " + std::to_string(slot - spec.outputs.begin()) +
                      ": only the first 32 outputs of an op can be views");
        spec.view_outputs |= 1u << (slot - spec.outputs.begin());
      }
    if (auto it = op.find("attrs"); it != op.end()) {
      if (!it->is_object()) throw Error(where + ": field 'attrs' must be an object");
      for (auto& [name, value] : it->items()) {
        Attribute a = attribute_from(name, value, where);
        check_attribute_type(spec.type, a, where);
        spec.attrs.set(std::move(a));
      }
    }
    std::vector<TensorDesc> ins;
    for (TensorId t : spec.inputs)
      ins.push_back(t == kNoId ? TensorDesc{{}, DType::unknown, false} : TensorDesc{b.tensor_shape(t), b.tensor_dtype(t), true});
    if (const std::string wrong = attribute_mismatch(spec.type, spec.attrs, ins); !wrong.empty())
      throw Error(where + " (" + spec.type + "): " + wrong);
    if (op.contains("flops")) {
      spec.work.flops = field_as<double>(op, "flops", where);
      spec.work.bytes_read = optional_as<double>(op, "bytes_read", 0.0, where);
      spec.work.bytes_written = optional_as<double>(op, "bytes_written", 0.0, where);
      spec.work.product_min_dim = optional_as<std::uint32_t>(op, "product_min_dim", 0u, where);
      spec.work.conv_kernel_area = optional_as<std::uint32_t>(op, "conv_kernel_area", 0u, where);
      const std::string op_class = optional_as<std::string>(op, "class", "elementwise", where);
      try {
        spec.work.op_class = parse_op_class(op_class);
      } catch (const Error& e) {
        throw Error(where + ": " + e.what());
      }
      if (spec.work.flops < 0 || spec.work.bytes_read < 0 || spec.work.bytes_written < 0)
        throw Error(where + ": flops and bytes must not be negative");
    } else {
      check_operand_counts(spec, where);
      std::vector<TensorDesc> outs;
      for (TensorId t : spec.outputs) outs.push_back(TensorDesc{b.tensor_shape(t), b.tensor_dtype(t), true});
      try {
        spec.work = op_work(spec.type, spec.attrs, ins, outs, unknown_op_default);
        if (guessed && unknown_op_default && !is_known_op_type(spec.type)) ++(*guessed)[spec.type];
      } catch (const Error& e) {
        throw Error(where + ": " + e.what());
      }
      // Priced from its shapes: they must agree with each other (a MatMul of [32,784] by [100,128]
      // was priced from its output alone).
      if (const std::string wrong = operand_shape_mismatch(spec.type, spec.attrs, ins, outs); !wrong.empty())
        throw Error(where + " (" + spec.type + "): " + wrong + " (give 'flops' to price an op by your own figures)");
    }
    if (auto it = op.find("forward_op"); it != op.end()) {
      if (!it->is_string()) throw Error(where + ": field 'forward_op' must be an op name");
      forward_refs.push_back({static_cast<OpId>(i), it->get<std::string>()});
    }
    // What an op produces is an activation (or, in a step, a gradient); the other kinds are the
    // graph's inputs, which no op makes.
    for (TensorId out : spec.outputs) {
      if (const TensorKind k = b.tensor_kind(out); k != TensorKind::activation && k != TensorKind::gradient)
        throw Error(where + ": output tensor '" + b.tensor_name(out) + "' is of kind '" + std::string(tensor_kind_name(k)) +
                    "', which only a graph input has (what an op produces is an 'activation')");
      // A gradient comes from the backward pass: a forward op's was priced and kept as one.
      if (spec.role == OpRole::forward && b.tensor_kind(out) == TensorKind::gradient)
        throw Error(where + ": output tensor '" + b.tensor_name(out) +
                    "' is of kind 'gradient', but the op is a forward op (its outputs are activations)");
    }
    // An alias op (a parameter read under a second name, from ONNX's Identity) names both tensors.
    for (const char* attr : {"alias_of", "alias"})
      if (const Attribute* a = spec.attrs.find(attr))
        if (a->kind != Attribute::Kind::text || b.find_tensor(a->s) == kNoId)
          throw Error(where + ": attribute '" + attr + "' must name a tensor in 'tensors'" +
                      (a->kind == Attribute::Kind::text ? ", got '" + utf8_prefix(a->s, 80) + "'" : std::string()));
    // A module path is names joined by dots: "encoder.layers.0", or "" for the model itself.
    if (!spec.module.empty() && (spec.module.front() == '.' || spec.module.back() == '.' || spec.module.find("..") != std::string::npos))
      throw Error(where + ": module path '" + utf8_prefix(spec.module, 80) + (spec.module.size() > 80 ? "..." : "") +
                  "' has an empty part (a dot at an end, or two in a row)");
    std::string name = spec.name;
    OpId id;
    try {
      id = b.add_op(std::move(spec));
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    if (const auto [first, added] = op_ids.emplace(std::move(name), id); !added)
      throw Error(where + ": its name is used twice (ops[" + std::to_string(first->second) + "] has it too)");
  }
  for (auto& [op, name] : forward_refs) {
    auto it = op_ids.find(name);
    if (it == op_ids.end())
      throw Error(source + ": ops[" + std::to_string(op) + "] " + in_quotes(b.op(op).name) + ": forward_op " + in_quotes(name) + " is not an op");
    b.op(op).forward_op = it->second;
  }
  if (j.contains("outputs"))
    for (const json& out : list_field(j, "outputs", source)) b.mark_output(tensor_id(out, source + ": outputs"));
  // Without 'forward_ops', the ops with role "forward" (they come first: the builder checks it).
  std::size_t forward = 0;
  for (const json& op : ops) forward += optional_as<std::string>(op, "role", "forward", source) == "forward";
  const auto forward_ops = optional_as<std::size_t>(j, "forward_ops", forward, source);
  b.set_num_forward_ops(forward_ops);
  // SGD keeps none, momentum one, Adam two; a handful more for optimizers to come.
  const auto copies = optional_as<std::int64_t>(j, "optimizer_state_copies", 0, source);
  if (copies < 0 || copies > 16) throw Error(source + ": field 'optimizer_state_copies' must be an integer from 0 to 16, got " + std::to_string(copies));
  auto state_copies = static_cast<std::uint32_t>(copies);
  // placer's own update ops say how much state they keep: a step that leaves the field out, or gives
  // another count, priced its memory without it (found by a review). Other update types: the field.
  std::string implied_by;
  std::uint32_t implied = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpSpec& spec = b.op(static_cast<OpId>(i));
    if (spec.role != OpRole::update) continue;
    const int copies = spec.type == "SGDUpdate" ? 0 : spec.type == "MomentumUpdate" ? 1 : spec.type == "AdamUpdate" ? 2 : -1;
    if (copies < 0) continue;
    if (!implied_by.empty() && implied != static_cast<std::uint32_t>(copies))
      throw Error(source + ": its update ops are of two optimizers ('" + implied_by + "' and '" + spec.type + "')");
    implied_by = spec.type, implied = static_cast<std::uint32_t>(copies);
  }
  if (!implied_by.empty()) {
    if (j.contains("optimizer_state_copies") && state_copies != implied)
      throw Error(source + ": field 'optimizer_state_copies' is " + std::to_string(state_copies) + ", but its update ops are '" + implied_by +
                  "', which keeps " + std::to_string(implied));
    state_copies = implied;
  }
  // A forward graph keeps no optimizer state: the step derived from it takes --optimizer's, so a
  // count given here would be ignored without a word. (A step of a model with no parameter has no
  // update op and is all forward ops, and its count, which prices nothing, is placer's own: kept.)
  bool has_parameters = false;
  for (const json& t : tensors) has_parameters = has_parameters || optional_as<std::string>(t, "kind", "activation", source) == "parameter";
  if (state_copies != 0 && forward_ops == ops.size() && has_parameters)
    throw Error(source + ": field 'optimizer_state_copies' is " + std::to_string(state_copies) +
                ", but the graph holds forward ops only (no update op keeps state): a training step derived from it keeps what "
                "--optimizer says; leave the field out");
  b.set_optimizer_state_copies(state_copies);
  Graph g;
  try {
    g = std::move(b).build();
  } catch (const GraphError& e) {
    // Placed in the file: ops[i] and tensors[i] are the ids the builder gave them, in file order.
    const bool op = e.op != kNoId && e.op < ops.size(), tensor = e.tensor != kNoId && e.tensor < tensors.size();
    if (!op && !tensor) throw Error(source + ": " + e.what());
    const std::string kind = op ? "op" : "tensor";
    const std::size_t index = op ? e.op : e.tensor;
    const std::string name = optional_as<std::string>(op ? ops[index] : tensors[index], "name", "", source);
    // "op 'x': what" becomes "ops[i] 'x': what"; any other message follows the place.
    std::string message = e.what();
    for (const std::string& own : {printable(kind + " '" + name + "'"), printable(kind + " " + in_quotes(name))})
      if (message.starts_with(own)) {
        message = message.substr(own.size() + (message.compare(own.size(), 2, ": ") == 0 ? 2 : 0));
        break;
      }
    throw Error(source + ": " + kind + "s[" + std::to_string(index) + "] " + in_quotes(name) + (message.starts_with(" ") ? "" : ": ") + message);
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());
  }
  if (const std::string overflow = work_sum_overflow(g); !overflow.empty())
    throw Error(source + ": " + overflow + ": check their 'flops', 'bytes_read' and 'bytes_written'");
  return g;
}

void save_graph_json(const Graph& g, const std::string& path) {
  write_json_file(path, graph_to_json(g), "graph");
}

Graph load_graph_json(const std::string& path, std::optional<OpClass> unknown_op_default, std::map<std::string, std::size_t>* guessed) {
  return graph_from_json(read_json_file(path, "graph"), "graph file '" + path + "'", unknown_op_default, guessed);
}

}  // namespace placer
