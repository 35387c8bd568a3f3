#include "placer/io/onnx_functions.hpp"

#include <google/protobuf/unknown_field_set.h>

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "placer/util/error.hpp"

namespace placer {
namespace {

using FunctionKey = std::pair<std::string, std::string>;  // (domain, name)

std::string qualified(const std::string& domain, const std::string& name) { return domain.empty() ? name : domain + "::" + name; }

// IR 9's FunctionProto.attribute_proto (field 11: the defaults of the function's attributes) is not
// in libonnx 1.12's schema; protobuf keeps it among the unknown fields, each an AttributeProto.
std::unordered_map<std::string, onnx::AttributeProto> attribute_defaults(const onnx::FunctionProto& f) {
  std::unordered_map<std::string, onnx::AttributeProto> out;
  const google::protobuf::UnknownFieldSet& unknown = f.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& field = unknown.field(i);
    if (field.number() != 11 || field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    onnx::AttributeProto a;
    if (!a.ParseFromString(field.length_delimited()) || a.name().empty())
      throw Error("model-local function '" + qualified(f.domain(), f.name()) + "': an attribute default that is not an attribute");
    out[a.name()] = std::move(a);
  }
  return out;
}

std::map<FunctionKey, const onnx::FunctionProto*> functions_by_name(const onnx::ModelProto& model) {
  std::map<FunctionKey, const onnx::FunctionProto*> out;
  for (const auto& f : model.functions())
    if (!out.emplace(FunctionKey{f.domain(), f.name()}, &f).second)
      throw Error("two model-local functions are named '" + qualified(f.domain(), f.name()) +
                  "' (IR 10's overloads, which this build's ONNX library cannot tell apart)");
  return out;
}

class Inliner {
 public:
  explicit Inliner(onnx::ModelProto& model) : model_(model), functions_(functions_by_name(model)) {
    const onnx::GraphProto& g = model.graph();
    for (const auto& v : g.input()) taken_.insert(v.name());
    for (const auto& t : g.initializer()) taken_.insert(t.name());
    for (const auto& n : g.node())
      for (const auto& out : n.output()) taken_.insert(out);
    for (const auto& o : model.opset_import()) opsets_[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  }

  std::size_t run() {
    if (functions_.empty()) return 0;
    check_function_recursion(model_);
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (const auto& node : model_.graph().node()) add(node, nodes);
    *model_.mutable_graph()->mutable_node() = std::move(nodes);
    model_.clear_functions();
    return calls_;
  }

 private:
  const onnx::FunctionProto* function_of(const onnx::NodeProto& node) const {
    auto it = functions_.find({node.domain(), node.op_type()});
    return it == functions_.end() ? nullptr : it->second;
  }

  // `base`, or base#2, base#3, ...: the first that no value of the model has.
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 2; taken_.count(name); ++k) name = base + "#" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  // Appends `node` to `out`, or its function's body when it calls one (the body's nodes named under
  // the call's name, which for a call in a body is already under its caller's).
  void add(const onnx::NodeProto& node, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
    const onnx::FunctionProto* f = function_of(node);
    if (!f) {
      *out.Add() = node;
      return;
    }
    ++calls_;
    const std::string label = qualified(f->domain(), f->name());
    if (node.input_size() > f->input_size() || node.output_size() > f->output_size())
      throw Error("a call of model-local function '" + label + "' has " + std::to_string(node.input_size()) + " input(s) and " +
                  std::to_string(node.output_size()) + " output(s), the function " + std::to_string(f->input_size()) + " and " +
                  std::to_string(f->output_size()));
    for (const auto& o : f->opset_import()) {
      const std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
      auto [it, added] = opsets_.emplace(domain, o.version());
      if (added) {
        auto* imported = model_.add_opset_import();
        imported->set_domain(domain), imported->set_version(o.version());
      } else if (it->second != o.version()) {
        throw Error("model-local function '" + label + "' imports opset " + std::to_string(o.version()) + " of domain '" +
                    (domain.empty() ? "ai.onnx" : domain) + "', the model opset " + std::to_string(it->second) +
                    ": its body cannot be read in the model's opset");
      }
    }
    const std::string prefix = node.name().empty() ? (node.output_size() > 0 && !node.output(0).empty() ? node.output(0) : f->name())
                                                   : node.name();

    std::unordered_map<std::string, std::string> rename;  // the body's value names -> the model's
    for (int i = 0; i < f->input_size(); ++i) rename[f->input(i)] = i < node.input_size() ? node.input(i) : "";
    for (int i = 0; i < node.output_size(); ++i)
      if (!node.output(i).empty()) rename[f->output(i)] = node.output(i);
    auto name_of = [&](const std::string& value) -> std::string {
      if (value.empty()) return value;
      auto it = rename.find(value);
      if (it != rename.end()) return it->second;
      return rename[value] = fresh(prefix + "/" + value);
    };
    std::unordered_map<std::string, const onnx::AttributeProto*> given;
    for (const auto& a : node.attribute()) given[a.name()] = &a;
    const auto defaults = attribute_defaults(*f);

    for (const auto& inner : f->node()) {
      onnx::NodeProto copy = inner;
      copy.clear_input(), copy.clear_output(), copy.clear_attribute();
      for (const auto& v : inner.input()) copy.add_input(name_of(v));
      for (const auto& v : inner.output()) copy.add_output(name_of(v));
      for (const auto& a : inner.attribute()) {
        if (a.ref_attr_name().empty()) {
          *copy.add_attribute() = a;
          continue;
        }
        const onnx::AttributeProto* value = nullptr;
        if (auto it = given.find(a.ref_attr_name()); it != given.end()) value = it->second;
        else if (auto d = defaults.find(a.ref_attr_name()); d != defaults.end()) value = &d->second;
        if (!value) continue;  // not given: the op's own default
        onnx::AttributeProto* set = copy.add_attribute();
        *set = *value;
        set->set_name(a.name());
      }
      const std::string inner_name = inner.name().empty() ? (inner.output_size() > 0 ? inner.output(0) : inner.op_type()) : inner.name();
      copy.set_name(prefix + "/" + inner_name);
      add(copy, out);
    }
  }

  onnx::ModelProto& model_;
  std::map<FunctionKey, const onnx::FunctionProto*> functions_;
  std::unordered_set<std::string> taken_;
  std::unordered_map<std::string, std::int64_t> opsets_;
  std::size_t calls_ = 0;
};

}  // namespace

void check_function_recursion(const onnx::ModelProto& model) {
  std::map<FunctionKey, const onnx::FunctionProto*> functions;
  for (const auto& f : model.functions()) functions[{f.domain(), f.name()}] = &f;
  enum class Mark { none, visiting, done };
  std::map<const onnx::FunctionProto*, Mark> mark;
  std::function<void(const onnx::FunctionProto&)> visit = [&](const onnx::FunctionProto& f) {
    mark[&f] = Mark::visiting;
    for (const auto& node : f.node()) {
      auto it = functions.find({node.domain(), node.op_type()});
      if (it == functions.end()) continue;
      const Mark m = mark[it->second];
      if (m == Mark::visiting)
        throw Error("model-local function '" + qualified(f.domain(), f.name()) + "' calls '" + qualified(node.domain(), node.op_type()) +
                    "', which leads back to it: recursive functions are not supported");
      if (m == Mark::none) visit(*it->second);
    }
    mark[&f] = Mark::done;
  };
  for (const auto& [key, f] : functions)
    if (mark[f] == Mark::none) visit(*f);
}

std::size_t inline_local_functions(onnx::ModelProto& model) { return Inliner(model).run(); }

}  // namespace placer
