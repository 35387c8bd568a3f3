#include "placer/io/onnx_inline.hpp"

#include <fmt/format.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/defs/schema.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "placer/io/onnx_compat.hpp"
#include "placer/io/onnx_shapes.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

using FunctionKey = std::pair<std::string, std::string>;  // (domain, name)

constexpr int kMaxDepth = 64;                  // functions nested deeper are refused
constexpr std::uint64_t kMaxNodes = 1u << 20;  // nodes inlining may give (1,048,576; 2M took minutes: a fuzzing review)

std::string qualified(const std::string& domain, const std::string& name) { return domain.empty() ? name : domain + "::" + name; }
std::string normalized_domain(const std::string& domain) { return domain == "ai.onnx" ? "" : domain; }
// "<prefix>/<name>", without a second '/' when the name starts with one (exporters' node names do).
std::string joined(const std::string& prefix, const std::string& name) {
  return prefix + (name.starts_with('/') ? "" : "/") + name;
}

// Calls `fn` on every node of `nodes` and of their subgraphs (an If's branches, a Loop's body).
template <class Nodes, class Fn>
void for_each_node(const Nodes& nodes, const Fn& fn) {
  for (const auto& n : nodes) {
    fn(n);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) for_each_node(a.g().node(), fn);
      for (const auto& g : a.graphs()) for_each_node(g.node(), fn);
    }
  }
}

// The names a model takes, and new ones: `base`, else base#2, base#3, ... (the next suffix of each
// base is remembered, so that many names of one base cost one probe each).
class NameTable {
 public:
  void add(const std::string& name) { taken_.insert(name); }
  std::string fresh(const std::string& base) {
    if (taken_.insert(base).second) return base;
    int& k = next_[base];
    for (k = std::max(k, 2);; ++k) {
      std::string name = base + "#" + std::to_string(k);
      if (taken_.insert(name).second) return name;
    }
  }

 private:
  std::unordered_set<std::string> taken_;
  std::unordered_map<std::string, int> next_;
};

// Every value name a graph and its subgraphs use, also names read that nothing gives (a new name
// must not become what such a read finds), and every node name.
void collect_names(const onnx::GraphProto& g, NameTable& values, NameTable& nodes) {
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
    for (const auto& v : *list) values.add(v.name());
  for (const auto& t : g.initializer()) values.add(t.name());
  for (const auto& n : g.node()) {
    nodes.add(n.name());
    for (const auto& v : n.input()) values.add(v);
    for (const auto& v : n.output()) values.add(v);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g(), values, nodes);
      for (const auto& sub : a.graphs()) collect_names(sub, values, nodes);
    }
  }
}

// Renames the names a subgraph reads from around it (`rename`: outer name -> new name), in its
// nodes, their subgraphs and its outputs (the subgraph's own names are its own: ONNX forbids
// shadowing).
void rename_refs(onnx::GraphProto& sub, const std::unordered_map<std::string, std::string>& rename) {
  auto renamed = [&](std::string& v) {
    if (auto it = rename.find(v); it != rename.end()) v = it->second;
  };
  for (auto& o : *sub.mutable_output()) renamed(*o.mutable_name());
  for (auto& n : *sub.mutable_node()) {
    for (auto& v : *n.mutable_input()) renamed(v);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_refs(*a.mutable_g(), rename);
      for (auto& inner : *a.mutable_graphs()) rename_refs(inner, rename);
    }
  }
}

// Appends copies of `nodes` (an If's branch, an iteration of a Loop's body) to `out`: inputs and
// outputs renamed by `rename` (every output must be in it; an input not in it is an outer name),
// the names their subgraphs read from around them too, each node named "<prefix>/<name>".
void copy_renamed(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, const std::unordered_map<std::string, std::string>& rename,
                  const std::string& prefix, NameTable& node_names, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
  for (const auto& n : nodes) {
    onnx::NodeProto* copy = out.Add();
    *copy = n;
    for (auto& v : *copy->mutable_input())
      if (auto it = rename.find(v); it != rename.end()) v = it->second;
    for (auto& v : *copy->mutable_output())
      if (!v.empty()) v = rename.at(v);
    for (auto& a : *copy->mutable_attribute()) {
      if (a.has_g()) rename_refs(*a.mutable_g(), rename);
      for (auto& sub : *a.mutable_graphs()) rename_refs(sub, rename);
    }
    copy->set_name(node_names.fresh(joined(prefix, n.name().empty() ? n.op_type() : n.name())));
  }
}

// The names `g`'s nodes read, and those its nodes' subgraphs read or give as outputs (which may be
// names of `g`'s scope), into `read`.
void names_read(const onnx::GraphProto& g, std::unordered_set<std::string>& read) {
  for (const auto& n : g.node()) {
    for (const auto& v : n.input()) read.insert(v);
    for (const auto& a : n.attribute()) {
      auto sub = [&](const onnx::GraphProto& inner) {
        for (const auto& o : inner.output()) read.insert(o.name());
        names_read(inner, read);
      };
      if (a.has_g()) sub(a.g());
      for (const auto& inner : a.graphs()) sub(inner);
    }
  }
  for (const auto& o : g.output()) read.insert(o.name());
}

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
    collect_names(model.graph(), values_, nodes_);
    for (const auto& o : model.opset_import()) opsets_[normalized_domain(o.domain())] = o.version();
  }

  std::size_t run() {
    check_function_recursion(model_);
    check_size();
    expand_graph(*model_.mutable_graph());
    model_.clear_functions();
    return calls_;
  }

 private:
  // One call being inlined: how the body's names and attribute references read in the model.
  struct Call {
    std::string prefix;                                   // the call's name: the body's nodes go under it
    std::unordered_map<std::string, std::string> rename;  // the body's value names -> the model's
    std::unordered_map<std::string, const onnx::AttributeProto*> given;
    const std::unordered_map<std::string, onnx::AttributeProto>* defaults = nullptr;
  };

  const onnx::FunctionProto* function_of(const onnx::NodeProto& node) const {
    auto it = functions_.find({node.domain(), node.op_type()});
    return it == functions_.end() ? nullptr : it->second;
  }

  // The nodes inlining gives, subgraphs included, counted before anything is expanded (a 3 kB file
  // whose 40 levels each call the next twice asks for 2^40). Sizes saturate at kMaxNodes + 1.
  // REQUIRES: no recursion, nesting at most kMaxDepth (check_function_recursion).
  void check_size() {
    std::map<const onnx::FunctionProto*, std::uint64_t> size;
    std::function<std::uint64_t(const onnx::FunctionProto&)> function_size;
    auto count = [&](const auto& nodes) {
      std::uint64_t n = 0;
      for_each_node(nodes, [&](const onnx::NodeProto& node) {
        const onnx::FunctionProto* callee = function_of(node);
        n = std::min(kMaxNodes + 1, n + (callee ? function_size(*callee) : 1));
      });
      return n;
    };
    function_size = [&](const onnx::FunctionProto& f) {
      if (auto it = size.find(&f); it != size.end()) return it->second;
      return size[&f] = count(f.node());
    };
    if (count(model_.graph().node()) > kMaxNodes)
      throw Error("inlining the model-local functions would give more than " + std::to_string(kMaxNodes) +
                  " nodes (calls that call several times what calls several times)");
  }

  // Replaces the calls among `g`'s nodes (and in its nodes' subgraphs) by their bodies.
  void expand_graph(onnx::GraphProto& g) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (auto& node : *g.mutable_node()) expand(std::move(node), out);
    *g.mutable_node() = std::move(out);
  }

  // Appends `node` to `out`, or, when it calls a function, the function's body.
  void expand(onnx::NodeProto node, google::protobuf::RepeatedPtrField<onnx::NodeProto>& out) {
    const onnx::FunctionProto* f = function_of(node);
    if (!f) {
      for (auto& a : *node.mutable_attribute()) {
        if (a.has_g()) expand_graph(*a.mutable_g());
        for (auto& sub : *a.mutable_graphs()) expand_graph(sub);
      }
      *out.Add() = std::move(node);
      return;
    }
    ++calls_;
    const std::string label = qualified(f->domain(), f->name());
    if (node.input_size() > f->input_size() || node.output_size() > f->output_size())
      throw Error("a call of model-local function '" + label + "' has " + std::to_string(node.input_size()) + " input(s) and " +
                  std::to_string(node.output_size()) + " output(s), the function " + std::to_string(f->input_size()) + " and " +
                  std::to_string(f->output_size()));
    import_opsets(*f);
    Call call;
    call.prefix = node.name();
    for (int i = 0; call.prefix.empty() && i < node.output_size(); ++i) call.prefix = node.output(i);  // its first output's
    if (call.prefix.empty()) call.prefix = nodes_.fresh(f->name());
    for (int i = 0; i < f->input_size(); ++i) call.rename[f->input(i)] = i < node.input_size() ? node.input(i) : "";
    // An output that is also an input of the function, or listed twice, is given by an Identity
    // after the body: mapping it to the call's output would make the body read what nothing gives.
    std::vector<std::pair<std::string, std::string>> passed;  // (body value, call output)
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (!call.rename.emplace(f->output(i), node.output(i)).second) passed.emplace_back(f->output(i), node.output(i));
    }
    for (const auto& a : node.attribute()) call.given[a.name()] = &a;
    auto cached = defaults_.find(f);
    if (cached == defaults_.end()) cached = defaults_.emplace(f, attribute_defaults(*f)).first;
    call.defaults = &cached->second;
    for (const auto& inner : f->node()) {
      onnx::NodeProto copy = inner;
      const std::string inner_name = inner.name().empty() ? (inner.output_size() > 0 && !inner.output(0).empty() ? inner.output(0)
                                                                                                                : inner.op_type())
                                                          : inner.name();
      copy.set_name(nodes_.fresh(joined(call.prefix, inner_name)));
      rewrite(copy, call);
      expand(std::move(copy), out);
    }
    for (const auto& [value, output] : passed) {
      onnx::NodeProto* identity = out.Add();
      identity->set_op_type("Identity");
      identity->set_name(nodes_.fresh(call.prefix + "/" + output));
      identity->add_input(model_name(value, call));
      identity->add_output(output);
    }
  }

  // The function's opset imports join the model's. Where both import a domain at different
  // versions, every op of the body in that domain must read the same at both (the ONNX checker's
  // rule): its body is then read at the model's version.
  void import_opsets(const onnx::FunctionProto& f) {
    for (const auto& o : f.opset_import()) {
      const std::string domain = normalized_domain(o.domain());
      auto [it, added] = opsets_.emplace(domain, o.version());
      if (added) {
        auto* imported = model_.add_opset_import();
        imported->set_domain(domain), imported->set_version(o.version());
        continue;
      }
      if (it->second == o.version()) continue;
      const std::int64_t model_version = it->second;
      for_each_node(f.node(), [&](const onnx::NodeProto& node) {
        if (normalized_domain(node.domain()) != domain) return;
        const auto* at_function = onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(o.version()), domain);
        const auto* at_model = onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(model_version), domain);
        if (at_function != at_model)
          throw Error("model-local function '" + qualified(f.domain(), f.name()) + "' imports opset " + std::to_string(o.version()) +
                      " of domain '" + (domain.empty() ? "ai.onnx" : domain) + "', the model opset " + std::to_string(model_version) +
                      ", and its op " + node.op_type() + " differs between the two");
      });
    }
  }

  // A body's value name as the model reads it: the call's input or output it stands for, or a name
  // of its own under the call, the same at every use.
  std::string model_name(const std::string& value, Call& call) {
    if (value.empty()) return value;
    auto it = call.rename.find(value);
    if (it != call.rename.end()) return it->second;
    return call.rename[value] = values_.fresh(call.prefix + "/" + value);
  }

  // A body node (or a node of a body node's subgraph) in the model's names, its attribute
  // references resolved.
  void rewrite(onnx::NodeProto& node, Call& call) {
    for (auto& v : *node.mutable_input()) v = model_name(v, call);
    for (auto& v : *node.mutable_output()) v = model_name(v, call);
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> attributes;
    for (auto& a : *node.mutable_attribute()) {
      if (!a.ref_attr_name().empty()) {
        const onnx::AttributeProto* value = nullptr;
        if (auto it = call.given.find(a.ref_attr_name()); it != call.given.end()) value = it->second;
        else if (auto d = call.defaults->find(a.ref_attr_name()); d != call.defaults->end()) value = &d->second;
        if (!value) continue;  // not given: the op's own default
        onnx::AttributeProto* set = attributes.Add();
        *set = *value;
        set->set_name(a.name());
        continue;
      }
      if (a.has_g()) rewrite_graph(*a.mutable_g(), call);
      for (auto& sub : *a.mutable_graphs()) rewrite_graph(sub, call);
      *attributes.Add() = std::move(a);
    }
    *node.mutable_attribute() = std::move(attributes);
  }

  // A subgraph of a body node (an If's branch): its names, inner and outer, in the model's names.
  void rewrite_graph(onnx::GraphProto& g, Call& call) {
    for (auto* values : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
      for (auto& v : *values) v.set_name(model_name(v.name(), call));
    for (auto& t : *g.mutable_initializer()) t.set_name(model_name(t.name(), call));
    for (auto& n : *g.mutable_node()) {
      if (!n.name().empty()) n.set_name(nodes_.fresh(call.prefix + "/" + n.name()));
      rewrite(n, call);
    }
  }

  onnx::ModelProto& model_;
  std::map<FunctionKey, const onnx::FunctionProto*> functions_;
  std::unordered_map<const onnx::FunctionProto*, std::unordered_map<std::string, onnx::AttributeProto>> defaults_;
  NameTable values_, nodes_;
  std::unordered_map<std::string, std::int64_t> opsets_;
  std::size_t calls_ = 0;
};

}  // namespace

std::size_t inline_decided_ifs(onnx::ModelProto& model, const std::unordered_map<std::string, bool>& conditions) {
  onnx::GraphProto& g = *model.mutable_graph();
  NameTable values, nodes;
  collect_names(g, values, nodes);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  std::size_t replaced = 0;
  for (auto& node : *g.mutable_node()) {
    const bool is_if = node.op_type() == "If" && normalized_domain(node.domain()).empty() && node.input_size() == 1;
    const auto decided = is_if ? conditions.find(node.input(0)) : conditions.end();
    const onnx::GraphProto* branch = nullptr;
    if (decided != conditions.end())
      for (const auto& a : node.attribute())
        if (a.name() == (decided->second ? "then_branch" : "else_branch") && a.has_g()) branch = &a.g();
    if (decided == conditions.end()) {
      *out.Add() = std::move(node);
      continue;
    }
    const std::string label = "If '" + (node.name().empty() ? node.output_size() > 0 ? node.output(0) : std::string() : node.name()) + "'";
    const char* taken = decided->second ? "then_branch" : "else_branch";
    if (!branch) throw Error(label + " has no " + taken);
    if (branch->sparse_initializer_size() > 0) throw Error(label + ": its " + taken + " holds sparse initializers, which placer does not read");
    if (branch->output_size() != node.output_size())
      throw Error(label + " has " + std::to_string(node.output_size()) + " output(s), its " + taken + " " +
                  std::to_string(branch->output_size()));
    ++replaced;
    std::string prefix = node.name();
    for (int j = 0; prefix.empty() && j < node.output_size(); ++j) prefix = node.output(j);
    if (prefix.empty()) prefix = nodes.fresh("If");
    // The branch's own names: its outputs become the If's, the rest are named under the If.
    std::unordered_map<std::string, std::string> rename;
    std::unordered_set<std::string> defined;
    for (const auto& t : branch->initializer()) defined.insert(t.name());
    for (const auto& n : branch->node())
      for (const auto& v : n.output())
        if (!v.empty()) defined.insert(v);
    for (int j = 0; j < branch->output_size(); ++j) {
      const std::string& v = branch->output(j).name();
      if (defined.count(v) && !node.output(j).empty() && !rename.count(v)) rename[v] = node.output(j);
    }
    for (const auto& v : defined)
      if (!rename.count(v)) rename[v] = values.fresh(prefix + "/" + v);
    for (const auto& t : branch->initializer()) {
      onnx::TensorProto* moved = g.add_initializer();
      *moved = t;
      moved->set_name(rename.at(t.name()));
    }
    copy_renamed(branch->node(), rename, prefix, nodes, out);
    // Outputs the branch takes from outside it (or gives twice) pass through an Identity.
    for (int j = 0; j < node.output_size(); ++j) {
      const std::string& v = branch->output(j).name();
      auto it = rename.find(v);
      const std::string source = it == rename.end() ? v : it->second;
      if (node.output(j).empty() || source == node.output(j)) continue;
      onnx::NodeProto* identity = out.Add();
      identity->set_op_type("Identity");
      identity->set_name(nodes.fresh(prefix + "/Identity"));
      identity->add_input(source);
      identity->add_output(node.output(j));
    }
  }
  // The nodes that computed a decided condition and nothing else read now (onnxscript's
  // Size(Shape(x)) == 0) go with the If: the shape of a scalar is empty, which no tensor of a
  // placement graph may be.
  std::unordered_map<std::string, int> uses;
  for_each_node(out, [&](const onnx::NodeProto& n) {
    for (const auto& v : n.input()) ++uses[v];
  });
  for (const auto& o : g.output()) ++uses[o.name()];
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < out.size(); ++i)
    for (const auto& v : out.Get(i).output()) producer[v] = i;
  std::vector<char> dead(static_cast<std::size_t>(out.size()), 0);
  std::vector<std::string> work;
  for (const auto& [name, value] : conditions) work.push_back(name);
  while (!work.empty()) {
    const std::string name = std::move(work.back());
    work.pop_back();
    auto p = producer.find(name);
    if (p == producer.end() || dead[static_cast<std::size_t>(p->second)]) continue;
    const onnx::NodeProto& n = out.Get(p->second);
    if (std::any_of(n.output().begin(), n.output().end(), [&](const std::string& v) { return !v.empty() && uses[v] > 0; })) continue;
    bool has_subgraph = false;
    for (const auto& a : n.attribute()) has_subgraph = has_subgraph || a.has_g() || a.graphs_size() > 0;
    if (has_subgraph) continue;  // an If or Loop of its own: kept (its branches may read more)
    dead[static_cast<std::size_t>(p->second)] = 1;
    for (const auto& v : n.input())
      if (!v.empty() && --uses[v] == 0) work.push_back(v);
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < out.size(); ++i)
    if (!dead[static_cast<std::size_t>(i)]) *kept.Add() = std::move(*out.Mutable(i));
  *g.mutable_node() = std::move(kept);
  return replaced;
}

namespace {

// The body of a Loop or Scan node (its "body" graph attribute), or nullptr.
const onnx::GraphProto* body_of(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute())
    if (a.name() == "body" && a.has_g()) return &a.g();
  return nullptr;
}

std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

std::int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback) {
  for (const auto& a : node.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::INT) return a.i();
  return fallback;
}

// What a Loop body's condition output is in every iteration: true when it stays true (the condition
// input passed on, itself or through Identity nodes, a constant true, or an outer value folded to
// true), false when it is a constant false (or folds to it: the loop stops after its first
// iteration), nullopt when the step's data decide it.
std::optional<bool> body_condition(const onnx::GraphProto& body, const std::unordered_map<std::string, std::vector<double>>& outer) {
  if (body.input_size() < 2 || body.output_size() < 1) return std::nullopt;
  const std::string& cond_in = body.input(1).name();
  const auto inner = folded_values(body, {});
  std::string v = body.output(0).name();
  for (int hops = 0; hops <= body.node_size(); ++hops) {
    if (v == cond_in) return true;
    for (const auto* values : {&inner, &outer})
      if (auto it = values->find(v); it != values->end()) {
        if (it->second.size() != 1 || std::isnan(it->second[0])) return std::nullopt;
        return it->second[0] != 0.0;
      }
    const onnx::NodeProto* producer = nullptr;
    for (const auto& n : body.node())
      if (std::find(n.output().begin(), n.output().end(), v) != n.output().end()) producer = &n;
    if (!producer || producer->op_type() != "Identity" || producer->input_size() != 1) return std::nullopt;
    v = producer->input(0);
  }
  return std::nullopt;
}

}  // namespace

std::size_t unroll_counted_loops(onnx::ModelProto& model, const std::unordered_map<std::string, std::vector<double>>& values,
                                 const std::map<std::string, onnx::TypeProto>& types, bool keep_refused, std::uint64_t* iterations) {
  onnx::GraphProto& g = *model.mutable_graph();
  NameTable names, nodes;
  collect_names(g, names, nodes);
  const std::int64_t opset = default_opset(model);
  std::uint64_t total = 0;  // nodes of the model, subgraphs included: the unrolled model stays under kMaxNodes
  for_each_node(g.node(), [&](const onnx::NodeProto&) { ++total; });

  auto scalar = [&](const std::string& base, int type, double value) {
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(names.fresh(base));
    t->set_data_type(type);
    if (type == onnx::TensorProto::BOOL) t->add_int32_data(value != 0.0);
    else t->add_int64_data(static_cast<std::int64_t>(value));
    return t->name();
  };
  auto add_node = [&](google::protobuf::RepeatedPtrField<onnx::NodeProto>& out, const std::string& op, const std::string& name,
                      std::vector<std::string> inputs, const std::string& output) {
    onnx::NodeProto* n = out.Add();
    n->set_op_type(op);
    n->set_name(nodes.fresh(name));
    for (auto& v : inputs) n->add_input(std::move(v));
    n->add_output(output);
    return n;
  };

  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  std::size_t unrolled = 0;
  for (auto& node : *g.mutable_node()) {
    const bool standard = normalized_domain(node.domain()).empty();
    const bool is_loop = standard && node.op_type() == "Loop", is_scan = standard && node.op_type() == "Scan" && opset >= 9;
    const onnx::GraphProto* body = is_loop || is_scan ? body_of(node) : nullptr;
    if (!body) {
      *out.Add() = std::move(node);
      continue;
    }
    std::string prefix = node.name();
    for (int j = 0; prefix.empty() && j < node.output_size(); ++j) prefix = node.output(j);
    if (prefix.empty()) prefix = nodes.fresh(node.op_type());
    const std::string label = node.op_type() + " '" + prefix + "'";

    // The iterations, when known before the model runs; the node stays otherwise (the import names it,
    // or prices it as one op under --unknown-ops: `keep_refused`).
    std::int64_t trips = 0, state = 0, scans = 0, scan_outputs = 0;  // loop-carried values, scan inputs and outputs
    std::vector<std::int64_t> scan_axes, scan_reversed;
    auto plan = [&]() -> bool {
      if (is_loop) {
        if (node.input_size() < 2) return false;
        const bool count_given = !node.input(0).empty(), cond_given = !node.input(1).empty();
        const auto m = count_given ? values.find(node.input(0)) : values.end();
        const auto c = cond_given ? values.find(node.input(1)) : values.end();
        // (A condition given false runs no iteration, whatever the body would compute.)
        const bool never = cond_given && c != values.end() && c->second.size() == 1 && c->second[0] == 0.0;
        const std::optional<bool> stays = never ? std::optional<bool>(true) : body_condition(*body, values);
        if (!stays || (cond_given && (c == values.end() || c->second.size() != 1))) return false;
        // A body whose condition is a constant false stops after its first iteration (a do-once
        // loop, which needs no trip count); otherwise the trip count must be known.
        const bool once = !*stays;
        if (!once && (!count_given || m == values.end() || m->second.size() != 1 || !std::isfinite(m->second[0]))) return false;
        if (once && count_given && (m == values.end() || m->second.size() != 1 || !std::isfinite(m->second[0]))) return false;
        const double given = count_given ? m->second[0] : 1.0;
        if (given != std::floor(given))
          throw Error(label + ": its trip count '" + node.input(0) + "' is " + fmt::format("{:g}", given) + ", not an integer");
        const double count = once ? std::min(given, 1.0) : given;
        // Bounded before it becomes an integer (2^63 converted to int64 is undefined, and a count of
        // 2^62 times the body's nodes wrapped past the node limit below: a review). ONNX runs no
        // iteration for a count of 0 or less.
        if (!never && count > static_cast<double>(kMaxNodes))
          throw Error(label + " runs " + fmt::format("{:g}", count) + " iterations: unrolled, the model would hold more than " +
                      std::to_string(kMaxNodes) + " nodes");
        trips = never || count <= 0 ? 0 : static_cast<std::int64_t>(count);
        state = node.input_size() - 2;
        if (body->input_size() != 2 + state || body->output_size() < 1 + state || node.output_size() > body->output_size() - 1)
          throw Error(label + ": " + std::to_string(state) + " loop-carried value(s), its body takes " + std::to_string(body->input_size()) +
                      " input(s) and gives " + std::to_string(body->output_size()) + " output(s) (ONNX: 2 + N inputs, 1 + N + K outputs)");
      } else {
        scans = int_attribute(node, "num_scan_inputs", 0);
        state = node.input_size() - scans;
        if (scans < 1 || state < 0 || body->input_size() != node.input_size() || node.output_size() > body->output_size() ||
            body->output_size() < state)
          throw Error(label + ": " + std::to_string(node.input_size()) + " input(s) of which " + std::to_string(scans) +
                      " scanned, its body takes " + std::to_string(body->input_size()) + " and gives " + std::to_string(body->output_size()));
        scan_axes = ints_attribute(node, "scan_input_axes");
        scan_reversed = ints_attribute(node, "scan_input_directions");
        bool known = true;
        for (std::int64_t k = 0; k < scans && known; ++k) {
          const auto t = types.find(node.input(static_cast<int>(state + k)));
          known = t != types.end() && t->second.has_tensor_type() && t->second.tensor_type().has_shape();
          if (!known) break;
          const auto& shape = t->second.tensor_type().shape();
          std::int64_t axis = k < static_cast<std::int64_t>(scan_axes.size()) ? scan_axes[static_cast<std::size_t>(k)] : 0;
          if (axis < 0) axis += shape.dim_size();
          if (axis < 0 || axis >= shape.dim_size()) throw Error(label + ": scan input '" + node.input(static_cast<int>(state + k)) + "' has no axis " + std::to_string(axis));
          if (k < static_cast<std::int64_t>(scan_axes.size())) scan_axes[static_cast<std::size_t>(k)] = axis;
          else scan_axes.push_back(axis);
          known = shape.dim(static_cast<int>(axis)).has_dim_value();
          if (!known) break;
          const std::int64_t length = shape.dim(static_cast<int>(axis)).dim_value();
          if (k > 0 && length != trips)
            throw Error(label + ": its scan inputs are " + std::to_string(trips) + " and " + std::to_string(length) + " long on their scan axes");
          trips = length;
        }
        if (!known) {
          return false;
        }
      }
      if (body->sparse_initializer_size() > 0) throw Error(label + ": its body holds sparse initializers, which placer does not read");
      scan_outputs = body->output_size() - (is_loop ? 1 : 0) - state;
      std::uint64_t body_nodes = 0;
      for_each_node(body->node(), [&](const onnx::NodeProto&) { ++body_nodes; });
      // Each iteration gives the body's nodes, a Gather per scan input and an Unsqueeze per scan
      // output; the node an Identity per loop-carried value and a Concat per scan output. Compared by
      // division: a product could wrap.
      const std::uint64_t per_iteration = body_nodes + static_cast<std::uint64_t>(scans + scan_outputs);
      const std::uint64_t room = kMaxNodes - std::min(total, kMaxNodes), once = static_cast<std::uint64_t>(state + scan_outputs);
      if (once > room || (per_iteration > 0 && static_cast<std::uint64_t>(trips) > (room - once) / per_iteration))
        throw Error(label + " runs " + std::to_string(trips) + " iterations of " + std::to_string(per_iteration) +
                    " nodes: unrolled, the model would hold more than " + std::to_string(kMaxNodes) + " nodes");
      if (trips == 0)
        for (std::int64_t k = 0; k < scan_outputs; ++k)
          if (const int j = static_cast<int>(state + k); j < node.output_size() && !node.output(j).empty())
            throw Error(label + " runs no iteration: its scan output '" + node.output(j) + "' would be empty (placer places tensors that hold elements)");
      total += static_cast<std::uint64_t>(trips) * per_iteration + once;
      return true;
    };
    bool unroll = false;
    try {
      unroll = plan();
    } catch (const Error&) {
      if (!keep_refused) throw;
    }
    if (!unroll) {
      *out.Add() = std::move(node);
      continue;
    }
    ++unrolled;
    if (iterations) *iterations += static_cast<std::uint64_t>(trips);

    // Every name the body reads (its subgraphs' outputs too: an If's branch may give the
    // iteration number as it is), to add the iteration number and condition only where read.
    std::unordered_set<std::string> read;
    names_read(*body, read);
    // The body's initializers and Constant nodes, and those of its subgraphs (an inner Loop's body,
    // an If's branches): one copy for every iteration (a weight stays one weight; a Constant's
    // becomes an initializer as the main graph's do, read_onnx_file). Copied with every iteration,
    // a subgraph's weight became a weight of each copy (T parameters for one: a review). They read
    // nothing, so they move to the main graph as they are, and the body and its subgraphs read them
    // there (copy_renamed, rename_refs). A name two sibling subgraphs both define stays in each.
    std::unordered_map<std::string, std::string> shared;
    std::function<void(onnx::GraphProto&)> hoist = [&](onnx::GraphProto& sub) {
      google::protobuf::RepeatedPtrField<onnx::TensorProto> kept_initializers;
      for (auto& t : *sub.mutable_initializer()) {
        if (shared.count(t.name())) {
          *kept_initializers.Add() = std::move(t);
          continue;
        }
        onnx::TensorProto* moved = g.add_initializer();
        *moved = std::move(t);
        moved->set_name(shared[moved->name()] = names.fresh(joined(prefix, moved->name())));
      }
      *sub.mutable_initializer() = std::move(kept_initializers);
      google::protobuf::RepeatedPtrField<onnx::NodeProto> kept_nodes;
      for (auto& n : *sub.mutable_node()) {
        const bool constant = n.op_type() == "Constant" && normalized_domain(n.domain()).empty() && n.input_size() == 0 &&
                              std::none_of(n.output().begin(), n.output().end(), [&](const std::string& v) { return shared.count(v) > 0; });
        if (!constant) {
          for (auto& a : *n.mutable_attribute()) {
            if (a.has_g()) hoist(*a.mutable_g());
            for (auto& inner : *a.mutable_graphs()) hoist(inner);
          }
          *kept_nodes.Add() = std::move(n);
          continue;
        }
        onnx::NodeProto* hoisted = out.Add();
        *hoisted = std::move(n);
        hoisted->set_name(nodes.fresh(joined(prefix, hoisted->name().empty() ? hoisted->op_type() : hoisted->name())));
        for (auto& v : *hoisted->mutable_output())
          if (!v.empty()) v = shared[v] = names.fresh(joined(prefix, v));
      }
      *sub.mutable_node() = std::move(kept_nodes);
    };
    onnx::GraphProto own = *body;  // what every iteration copies: the body, its weights hoisted
    if (trips > 0) hoist(own);
    const auto& iteration_nodes = own.node();
    std::vector<std::string> carried(static_cast<std::size_t>(state));  // the loop-carried values, as the model names them now
    for (std::int64_t j = 0; j < state; ++j) carried[static_cast<std::size_t>(j)] = node.input(static_cast<int>((is_loop ? 2 : 0) + j));
    std::vector<std::vector<std::string>> scanned(static_cast<std::size_t>(scan_outputs));  // per scan output, per iteration
    const int first_state_input = is_loop ? 2 : 0;
    for (std::int64_t i = 0; i < trips; ++i) {
      const std::string at = prefix + "/" + std::to_string(i);
      std::unordered_map<std::string, std::string> rename = shared;
      if (is_loop) {
        if (read.count(body->input(0).name())) rename[body->input(0).name()] = scalar(joined(at, body->input(0).name()), onnx::TensorProto::INT64, static_cast<double>(i));
        if (read.count(body->input(1).name())) rename[body->input(1).name()] = scalar(joined(at, body->input(1).name()), onnx::TensorProto::BOOL, 1.0);
      }
      for (std::int64_t j = 0; j < state; ++j) rename[body->input(static_cast<int>(first_state_input + j)).name()] = carried[static_cast<std::size_t>(j)];
      for (std::int64_t k = 0; k < scans; ++k) {
        // The iteration's slice of scan input k: Gather at one index drops the axis, as Scan's body reads it.
        const bool reversed = k < static_cast<std::int64_t>(scan_reversed.size()) && scan_reversed[static_cast<std::size_t>(k)] != 0;
        const std::string& whole = node.input(static_cast<int>(state + k));
        const std::string& slot = body->input(static_cast<int>(state + k)).name();
        const std::string index = scalar(joined(at, slot) + "/index", onnx::TensorProto::INT64, static_cast<double>(reversed ? trips - 1 - i : i));
        const std::string slice = names.fresh(joined(at, slot));
        onnx::NodeProto* gather = add_node(out, "Gather", joined(at, slot) + "/Gather", {whole, index}, slice);
        auto* axis = gather->add_attribute();
        axis->set_name("axis"), axis->set_type(onnx::AttributeProto::INT), axis->set_i(scan_axes[static_cast<std::size_t>(k)]);
        rename[slot] = slice;
      }
      for (const auto& n : iteration_nodes)
        for (const auto& v : n.output())
          if (!v.empty()) rename[v] = names.fresh(joined(at, v));
      copy_renamed(iteration_nodes, rename, at, nodes, out);
      auto model_name = [&](const std::string& v) {
        auto it = rename.find(v);
        return it == rename.end() ? v : it->second;  // a value of the outer graph
      };
      const int first_output = is_loop ? 1 : 0;
      for (std::int64_t j = 0; j < state; ++j) carried[static_cast<std::size_t>(j)] = model_name(body->output(static_cast<int>(first_output + j)).name());
      for (std::int64_t k = 0; k < scan_outputs; ++k)
        scanned[static_cast<std::size_t>(k)].push_back(model_name(body->output(static_cast<int>(first_output + state + k)).name()));
    }
    // The node's outputs: the last loop-carried values, and each scan output's values stacked on its axis.
    for (std::int64_t j = 0; j < state && j < node.output_size(); ++j)
      if (!node.output(static_cast<int>(j)).empty())
        add_node(out, "Identity", joined(prefix, node.output(static_cast<int>(j))), {carried[static_cast<std::size_t>(j)]}, node.output(static_cast<int>(j)));
    const std::vector<std::int64_t> out_axes = ints_attribute(node, "scan_output_axes"), out_reversed = ints_attribute(node, "scan_output_directions");
    for (std::int64_t k = 0; k < scan_outputs && state + k < node.output_size(); ++k) {
      const std::string& result = node.output(static_cast<int>(state + k));
      if (result.empty()) continue;
      const std::int64_t axis = k < static_cast<std::int64_t>(out_axes.size()) ? out_axes[static_cast<std::size_t>(k)] : 0;
      const auto& parts = scanned[static_cast<std::size_t>(k)];
      const bool reversed = k < static_cast<std::int64_t>(out_reversed.size()) && out_reversed[static_cast<std::size_t>(k)] != 0;
      std::vector<std::string> stacked;
      for (std::size_t j = 0; j < parts.size(); ++j) {
        const std::size_t i = reversed ? parts.size() - 1 - j : j;  // the iteration whose value goes j-th (its module's)
        const std::string base = joined(prefix + "/" + std::to_string(i), result);
        const std::string one = names.fresh(base + "/unsqueezed");
        onnx::NodeProto* unsqueeze = add_node(out, "Unsqueeze", base + "/Unsqueeze", {parts[i]}, one);
        if (opset >= 13) {
          onnx::TensorProto* axes = g.add_initializer();
          axes->set_name(names.fresh(base + "/axes"));
          axes->set_data_type(onnx::TensorProto::INT64);
          axes->add_dims(1);
          axes->add_int64_data(axis);
          unsqueeze->add_input(axes->name());
        } else {
          auto* a = unsqueeze->add_attribute();
          a->set_name("axes"), a->set_type(onnx::AttributeProto::INTS), a->add_ints(axis);
        }
        stacked.push_back(one);
      }
      onnx::NodeProto* concat = add_node(out, "Concat", joined(prefix, result) + "/Concat", std::move(stacked), result);
      auto* a = concat->add_attribute();
      a->set_name("axis"), a->set_type(onnx::AttributeProto::INT), a->set_i(axis);
    }
  }
  *g.mutable_node() = std::move(out);
  return unrolled;
}

bool is_sequence_or_optional_op(const onnx::NodeProto& n) {
  static const std::unordered_set<std::string> ops = {"SequenceEmpty",      "SequenceConstruct", "SequenceInsert",     "SequenceErase",
                                                      "SequenceAt",         "SequenceLength",    "ConcatFromSequence", "SplitToSequence",
                                                      "Optional",           "OptionalHasElement", "OptionalGetElement"};
  return normalized_domain(n.domain()).empty() && ops.count(n.op_type()) > 0;
}

namespace {

// A known sequence: the first `size` names of `items`. Appending to a sequence that ends where its
// items do extends them in place, shared with the sequence before (whose size stays), and erasing the
// last shortens the size alone: a list appended to in each of T unrolled iterations and read there
// (`hs[-1]`) takes O(T), not T^2 (a review: 2 GB for T = 8000).
struct KnownSequence {
  std::shared_ptr<std::vector<std::string>> items = std::make_shared<std::vector<std::string>>();
  std::size_t size = 0;
  int elem = 0;  // the tensors' element type (onnx::TensorProto::DataType), 0 when not known
  const std::string& at(std::size_t i) const { return (*items)[i]; }
  std::vector<std::string> names() const { return {items->begin(), items->begin() + static_cast<std::ptrdiff_t>(size)}; }
};

}  // namespace

std::size_t resolve_known_sequences(onnx::ModelProto& model, const std::unordered_map<std::string, std::vector<double>>& values,
                                    const std::map<std::string, onnx::TypeProto>& types, SequencePass& pass) {
  onnx::GraphProto& g = *model.mutable_graph();
  if (std::none_of(g.node().begin(), g.node().end(), is_sequence_or_optional_op)) return 0;
  NameTable names, node_names;
  collect_names(g, names, node_names);
  const std::int64_t opset = default_opset(model);
  // Nodes this pass may add (Unsqueezes, Squeezes, Splits), over the whole model: the bound of inlining.
  std::uint64_t total = 0;
  for_each_node(g.node(), [&](const onnx::NodeProto&) { ++total; });
  std::uint64_t budget = kMaxNodes - std::min<std::uint64_t>(total, kMaxNodes);
  std::unordered_map<std::string, KnownSequence> known;
  // Known optionals: what each holds (a tensor's or a sequence's name), or nothing (empty).
  std::unordered_map<std::string, std::optional<std::string>> optionals;
  // Outputs of nodes that go when nothing reads them: those that made sequences this round, and what
  // the pass made in any round (pass.made: a split's parts read by a loop unrolled in a later round).
  std::unordered_set<std::string>& made = pass.made;
  std::unordered_set<std::string> removable;
  auto is_removable = [&](const std::string& v) { return removable.count(v) > 0 || made.count(v) > 0; };
  std::size_t resolved = 0;  // nodes rewritten or removed: this round's progress

  auto label = [](const onnx::NodeProto& n) { return n.op_type() + " '" + (n.name().empty() ? n.output(0) : n.name()) + "'"; };
  auto has_input = [](const onnx::NodeProto& n, int slot) { return n.input_size() > slot && !n.input(slot).empty(); };
  // Values of the tensors an Identity in place of a SequenceAt now gives, where the tensor's are
  // known: a position read from a list is then known in this round, not the next.
  std::unordered_map<std::string, std::vector<double>> picked;
  auto value_of = [&](const std::string& name) -> const std::vector<double>* {
    if (auto it = values.find(name); it != values.end()) return &it->second;
    if (auto it = picked.find(name); it != picked.end()) return &it->second;
    return nullptr;
  };
  // A position input folded to one integer; nullopt when absent or not known before the step.
  auto position = [&](const onnx::NodeProto& n, int slot) -> std::optional<double> {
    if (!has_input(n, slot)) return std::nullopt;
    const std::vector<double>* v = value_of(n.input(slot));
    if (!v || v->size() != 1 || !std::isfinite((*v)[0]) || (*v)[0] != std::floor((*v)[0])) return std::nullopt;
    return (*v)[0];
  };
  // A position in [-n, n - 1] (n too where `end` allows it), counted from the end when negative.
  auto index = [&](const onnx::NodeProto& n, double at, std::size_t length, bool end) {
    const double len = static_cast<double>(length);
    if (length == 0 && !end) throw Error(label(n) + ": its sequence '" + n.input(0) + "' is empty (no tensor at any position)");
    if (at < -len || at > (end ? len : len - 1))
      throw Error(label(n) + ": position " + fmt::format("{:g}", at) + " is outside [" + fmt::format("{:g}", -len) + ", " +
                  fmt::format("{:g}", end ? len : len - 1) + "] (the sequence holds " + std::to_string(length) + " tensors)");
    return static_cast<std::size_t>(at < 0 ? at + len : at);
  };
  auto spend = [&](const onnx::NodeProto& n, std::uint64_t nodes) {
    if (nodes > budget)
      throw Error(label(n) + " would add " + std::to_string(nodes) + " nodes or concatenated inputs, past the model's bound of " +
                  std::to_string(kMaxNodes));
    budget -= nodes;
  };
  auto int_attr = [](onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name), a->set_type(onnx::AttributeProto::INT), a->set_i(v);
  };
  // Axes (Unsqueeze, Squeeze) and Split's sizes: an attribute before opset 13, an input from 13.
  auto ints_operand = [&](onnx::NodeProto* n, const std::string& attribute, const std::string& base, const std::vector<std::int64_t>& v) {
    if (opset >= 13) {
      onnx::TensorProto* t = g.add_initializer();
      t->set_name(names.fresh(base));
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(static_cast<std::int64_t>(v.size()));
      for (std::int64_t x : v) t->add_int64_data(x);
      n->add_input(t->name());
    } else {
      auto* a = n->add_attribute();
      a->set_name(attribute), a->set_type(onnx::AttributeProto::INTS);
      for (std::int64_t x : v) a->add_ints(x);
    }
  };
  auto elem_type = [&](const std::string& name, bool sequence) {
    const auto it = types.find(name);
    if (it == types.end()) return 0;
    const onnx::TypeProto& t = sequence && it->second.has_sequence_type() ? it->second.sequence_type().elem_type() : it->second;
    return t.has_tensor_type() ? t.tensor_type().elem_type() : 0;
  };

  google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
  // `name`: the name of the node it stands for (which goes), or a new one under it.
  auto add = [&](const std::string& op, const std::string& name, bool fresh, std::vector<std::string> inputs,
                 std::vector<std::string> outputs) {
    onnx::NodeProto* n = out.Add();
    n->set_op_type(op);
    n->set_name(fresh ? node_names.fresh(name) : name);
    for (auto& v : inputs) n->add_input(std::move(v));
    for (auto& v : outputs) n->add_output(std::move(v));
    return n;
  };
  for (auto& node : *g.mutable_node()) {
    const std::string& op = node.op_type();
    const bool standard = normalized_domain(node.domain()).empty();
    if (!standard || node.output_size() < 1 || node.output(0).empty()) {
      *out.Add() = node;
      continue;
    }
    const auto seq = node.input_size() > 0 ? known.find(node.input(0)) : known.end();
    const bool on_known = seq != known.end();
    // The node's own name for what takes its place (an op placement files may name), else a new one.
    const bool unnamed = node.name().empty();
    const std::string name = unnamed ? node_names.fresh(node.output(0)) : node.name();
    const std::string& result = node.output(0);
    // Nodes that make a sequence from known ones stay until their readers are known to be gone (below).
    auto makes = [&](KnownSequence s) {
      known[result] = std::move(s);
      removable.insert(result);
      *out.Add() = node;
    };
    const auto opt = has_input(node, 0) ? optionals.find(node.input(0)) : optionals.end();
    const bool on_optional = opt != optionals.end();
    // A plain tensor where an optional is read (opset 18 lets OptionalHasElement take one; the
    // ONNX library placer links, 1.12, refuses one given to OptionalGetElement first): it holds itself.
    const bool on_tensor = has_input(node, 0) && !on_optional && types.count(node.input(0)) > 0 && types.at(node.input(0)).has_tensor_type();
    if (op == "Optional") {
      optionals[result] = has_input(node, 0) ? std::optional<std::string>(node.input(0)) : std::nullopt;
      removable.insert(result);
      *out.Add() = node;
    } else if (op == "Identity" && on_optional) {
      optionals[result] = opt->second;
      removable.insert(result);
      *out.Add() = node;
    } else if (op == "OptionalHasElement" && (on_optional || on_tensor || !has_input(node, 0))) {
      onnx::TensorProto* t = g.add_initializer();
      t->set_name(result);
      t->set_data_type(onnx::TensorProto::BOOL);
      t->add_int32_data(on_optional ? opt->second.has_value() : on_tensor);
      ++resolved, ++pass.sequence_ops;
    } else if (op == "OptionalGetElement" && (on_optional || on_tensor)) {
      if (on_optional && !opt->second)
        throw Error(label(node) + ": its optional '" + node.input(0) + "' holds nothing (an Optional given no input)");
      add("Identity", name, unnamed, {on_optional ? *opt->second : node.input(0)}, {result});
      ++resolved, ++pass.sequence_ops;
    } else if (op == "SequenceEmpty") {
      KnownSequence s;
      s.elem = static_cast<int>(int_attribute(node, "dtype", onnx::TensorProto::FLOAT));
      makes(std::move(s));
    } else if (op == "SequenceConstruct") {
      KnownSequence s;
      s.items->assign(node.input().begin(), node.input().end());
      s.size = s.items->size();
      s.elem = node.input_size() > 0 ? elem_type(node.input(0), false) : 0;
      makes(std::move(s));
    } else if (op == "Identity" && on_known) {
      makes(seq->second);
    } else if (op == "SequenceInsert" && on_known && node.input_size() >= 2 && (!has_input(node, 2) || position(node, 2)) &&
               elem_type(node.input(1), false) != 0) {
      // (Resolved once the tensor's type is known, in the round after the loop that makes it was
      // unrolled: a tensor of another type than the list's is refused here.)
      const KnownSequence& from = seq->second;
      const int want = from.elem, got = elem_type(node.input(1), false);
      if (want != 0 && want != got)
        throw Error(label(node) + ": inserts '" + node.input(1) + "' (" + elem_type_name(got) + ") into a sequence of " +
                    elem_type_name(want) + " tensors");
      const std::size_t at = has_input(node, 2) ? index(node, *position(node, 2), from.size, true) : from.size;
      KnownSequence to;
      if (at == from.size && from.items->size() == from.size) {
        to.items = from.items;  // appended in place, shared with `from` (which keeps its size)
        to.items->push_back(node.input(1));
      } else {
        *to.items = from.names();
        to.items->insert(to.items->begin() + static_cast<std::ptrdiff_t>(at), node.input(1));
      }
      to.size = from.size + 1;
      to.elem = got;
      makes(std::move(to));
    } else if (op == "SequenceErase" && on_known && (!has_input(node, 1) || position(node, 1))) {
      const KnownSequence& from = seq->second;
      if (from.size == 0) throw Error(label(node) + ": its sequence '" + node.input(0) + "' is empty (nothing to erase)");
      const std::size_t at = has_input(node, 1) ? index(node, *position(node, 1), from.size, false) : from.size - 1;
      KnownSequence to;
      if (at == from.size - 1) {
        to = {from.items, from.size - 1, from.elem};  // the last erased: a shorter view of the same items
      } else {
        to.elem = from.elem;
        *to.items = from.names();
        to.items->erase(to.items->begin() + static_cast<std::ptrdiff_t>(at));
        to.size = to.items->size();
      }
      makes(std::move(to));
    } else if (op == "SequenceAt" && on_known && position(node, 1)) {
      const std::string& element = seq->second.at(index(node, *position(node, 1), seq->second.size, false));
      if (const std::vector<double>* v = value_of(element)) picked[result] = *v;
      add("Identity", name, unnamed, {element}, {result});
      ++resolved, ++pass.sequence_ops;
    } else if (op == "SequenceLength" && on_known) {
      onnx::TensorProto* t = g.add_initializer();
      t->set_name(result);
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_int64_data(static_cast<std::int64_t>(seq->second.size));
      ++resolved, ++pass.sequence_ops;
    } else if (op == "ConcatFromSequence" && on_known) {
      const KnownSequence& parts = seq->second;
      if (parts.size == 0) throw Error(label(node) + ": its sequence '" + node.input(0) + "' holds no tensor (nothing to concatenate)");
      const std::int64_t axis = int_attribute(node, "axis", 0);
      std::vector<std::string> inputs;
      // Its inputs count against the bound too: torch.cat of a list that grows in each of T
      // iterations reads T^2 / 2 tensors (a review: 4,000 iterations took 20 s and 1.1 GB).
      const bool stacked = int_attribute(node, "new_axis", 0) != 0;
      spend(node, parts.size * (stacked ? 2 : 1));
      if (stacked) {
        // Stacked: each part gains the axis (in the result's rank, as ConcatFromSequence counts it).
        for (std::size_t i = 0; i < parts.size; ++i) {
          const std::string base = joined(name, std::to_string(i));
          onnx::NodeProto* u = add("Unsqueeze", base + "/Unsqueeze", true, {parts.at(i)}, {names.fresh(base + "/unsqueezed")});
          ints_operand(u, "axes", base + "/axes", {axis});
          inputs.push_back(u->output(0));
        }
      } else {
        inputs = parts.names();
      }
      int_attr(add("Concat", name, unnamed, std::move(inputs), {result}), "axis", axis);
      ++resolved, ++pass.sequence_ops;
    } else if (op == "SplitToSequence" && node.input_size() >= 1) {
      // The parts' sizes: given (one size for every part but a smaller last, or one per part), or
      // parts of one along the axis, which they lose unless keepdims.
      const auto type = types.find(node.input(0));
      const bool shaped = type != types.end() && type->second.has_tensor_type() && type->second.tensor_type().has_shape();
      const int rank = shaped ? type->second.tensor_type().shape().dim_size() : 0;
      std::int64_t axis = int_attribute(node, "axis", 0);
      if (shaped && axis < 0) axis += rank;
      const bool axis_known = shaped && axis >= 0 && axis < rank && type->second.tensor_type().shape().dim(static_cast<int>(axis)).has_dim_value();
      const std::vector<double>* split = has_input(node, 1) ? value_of(node.input(1)) : nullptr;
      if (!axis_known || (has_input(node, 1) && !split)) {
        *out.Add() = node;
        continue;
      }
      const std::int64_t length = std::max<std::int64_t>(0, type->second.tensor_type().shape().dim(static_cast<int>(axis)).dim_value());
      std::vector<std::int64_t> sizes;
      const bool squeeze = !has_input(node, 1) && int_attribute(node, "keepdims", 1) == 0;
      const bool scalar_split = has_input(node, 1) && split->size() == 1 &&
                                (types.count(node.input(1)) == 0 || !types.at(node.input(1)).tensor_type().has_shape() ||
                                 types.at(node.input(1)).tensor_type().shape().dim_size() == 0);
      // Its parts are counted as nodes (each a tensor, and a Squeeze more without keepdims) before
      // any is made: one SplitToSequence of a long input, or several, stay under the model's bound.
      if (!has_input(node, 1)) {
        spend(node, static_cast<std::uint64_t>(length) * (squeeze ? 2 : 1) + 1);
        sizes.assign(static_cast<std::size_t>(length), 1);
      } else if (scalar_split) {
        const double size = (*split)[0];
        if (!(size >= 1) || size != std::floor(size))
          throw Error(label(node) + ": its split '" + node.input(1) + "' is " + fmt::format("{:g}", size) + ", not a positive integer");
        const auto step = static_cast<std::int64_t>(std::min(size, 0x1p62));
        spend(node, static_cast<std::uint64_t>(length / step) + 2);
        for (std::int64_t left = length; left > 0; left -= step) sizes.push_back(std::min(left, step));
      } else {
        spend(node, split->size() + 1);
        std::int64_t sum = 0;
        for (double v : *split) {
          if (!(v >= 0) || v != std::floor(v) || v > 0x1p62)
            throw Error(label(node) + ": its split '" + node.input(1) + "' holds " + fmt::format("{:g}", v) + ", not a size");
          sizes.push_back(static_cast<std::int64_t>(v));
          sum += sizes.back();
        }
        if (sum != length)
          throw Error(label(node) + ": its split '" + node.input(1) + "' adds up to " + std::to_string(sum) + ", its input is " +
                      std::to_string(length) + " long on axis " + std::to_string(axis));
      }
      if (sizes.empty() || std::find(sizes.begin(), sizes.end(), 0) != sizes.end())
        throw Error(label(node) + ": it would hold an empty tensor (placer places tensors that hold elements)");
      KnownSequence parts;
      for (std::size_t i = 0; i < sizes.size(); ++i) parts.items->push_back(names.fresh(joined(name, std::to_string(i))));
      onnx::NodeProto* split_node = add("Split", name, unnamed, {node.input(0)}, *parts.items);
      int_attr(split_node, "axis", axis);
      ints_operand(split_node, "split", name + "/split", sizes);
      made.insert(parts.items->begin(), parts.items->end());
      if (squeeze)
        for (auto& part : *parts.items) {
          onnx::NodeProto* sq = add("Squeeze", part + "/Squeeze", true, {part}, {names.fresh(part + "/squeezed")});
          ints_operand(sq, "axes", part + "/axes", {axis});
          part = sq->output(0);
          made.insert(part);
        }
      parts.size = parts.items->size();
      parts.elem = elem_type(node.input(0), false);
      // The sequence itself, for a reader left as it is (it goes with the others otherwise).
      add("SequenceConstruct", name + "/sequence", true, *parts.items, {result});
      made.insert(result);
      known[result] = std::move(parts);
      ++resolved, ++pass.sequence_ops;
    } else {
      *out.Add() = node;
    }
  }
  // A node that only made a sequence, or that this pass added and nothing reads (the parts of a
  // split no one reads: `len(x.unbind(0))`), goes: walked backwards, so that a chain goes whole.
  std::unordered_set<std::string> read;
  for (const auto& o : g.output()) read.insert(o.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = out.size() - 1; i >= 0; --i) {
    onnx::NodeProto& n = *out.Mutable(i);
    const bool unread = std::all_of(n.output().begin(), n.output().end(), [&](const std::string& v) { return is_removable(v) && !read.count(v); });
    if (n.output_size() > 0 && unread) {
      ++resolved;
      // A sequence op of the model's (not one the pass made in its place) is one more read as tensors.
      if (is_sequence_or_optional_op(n) && !made.count(n.output(0))) ++pass.sequence_ops;
      continue;
    }
    for (const auto& v : n.input()) read.insert(v);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) names_read(a.g(), read);
      for (const auto& sub : a.graphs()) names_read(sub, read);
    }
    *kept.Add() = std::move(n);
  }
  std::reverse(kept.begin(), kept.end());
  *g.mutable_node() = std::move(kept);
  return resolved;
}

void check_function_recursion(const onnx::ModelProto& model) {
  std::map<FunctionKey, const onnx::FunctionProto*> functions;
  for (const auto& f : model.functions()) functions[{f.domain(), f.name()}] = &f;
  // Each function's height (1 + its callees' highest, calls in subgraphs included), or 0 while it is
  // being visited. A visit goes at most kMaxDepth deep before it stops with an error, so a chain of
  // functions of any length cannot overflow the stack here.
  std::map<const onnx::FunctionProto*, int> height;
  std::function<int(const onnx::FunctionProto&, int)> visit = [&](const onnx::FunctionProto& f, int depth) {
    if (auto it = height.find(&f); it != height.end()) return it->second;
    if (depth > kMaxDepth)
      throw Error("model-local functions are nested more than " + std::to_string(kMaxDepth) + " deep (down to '" +
                  qualified(f.domain(), f.name()) + "')");
    height[&f] = 0;
    int h = 1;
    for_each_node(f.node(), [&](const onnx::NodeProto& node) {
      auto it = functions.find({node.domain(), node.op_type()});
      if (it == functions.end()) return;
      if (auto seen = height.find(it->second); seen != height.end() && seen->second == 0)
        throw Error("model-local function '" + qualified(f.domain(), f.name()) + "' calls '" + qualified(node.domain(), node.op_type()) +
                    "', which leads back to it: recursive functions are not supported");
      h = std::max(h, 1 + visit(*it->second, depth + 1));
    });
    if (h > kMaxDepth)
      throw Error("model-local functions are nested more than " + std::to_string(kMaxDepth) + " deep (from '" +
                  qualified(f.domain(), f.name()) + "')");
    return height[&f] = h;
  };
  for (const auto& [key, f] : functions) visit(*f, 1);
}

std::size_t inline_local_functions(onnx::ModelProto& model) { return model.functions_size() == 0 ? 0 : Inliner(model).run(); }

}  // namespace placer
