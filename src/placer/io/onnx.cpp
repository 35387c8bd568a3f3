#include "placer/io/onnx.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "placer/io/onnx_compat.hpp"
#include "placer/io/onnx_file.hpp"
#include "placer/io/onnx_shapes.hpp"
#include "placer/io/onnx_uses.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

// ONNX's checker refuses a graph input or output declared as a tensor without a shape ("Field
// 'shape' of 'type' is required but missing") without saying which: the first such one, in the
// order it checks them (the main graph's, then its nodes' subgraphs'), as a phrase, or "".
std::string unshaped_io(const onnx::GraphProto& graph) {
  auto lacks = [](const onnx::ValueInfoProto& v) { return v.type().has_tensor_type() && !v.type().tensor_type().has_shape(); };
  for (const auto& v : graph.input())
    if (lacks(v)) return "input '" + v.name() + "' of graph '" + graph.name() + "'";
  for (const auto& v : graph.output())
    if (lacks(v)) return "output '" + v.name() + "' of graph '" + graph.name() + "'";
  for (const auto& node : graph.node())
    for (const auto& a : node.attribute()) {
      if (a.has_g())
        if (std::string found = unshaped_io(a.g()); !found.empty()) return found;
      for (const auto& g : a.graphs())
        if (std::string found = unshaped_io(g); !found.empty()) return found;
    }
  return "";
}

std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : name) {
    if (c == '/') {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) parts.push_back(cur);
  return parts;
}

// A name segment as a module path's part: its dot-separated names without empty ones ("enc." and
// "a..b" from a node named "enc./blk" or "/a..b/X" gave module paths with empty parts, which the
// graph JSON saved from them could not load).
std::string tidy_segment(const std::string& segment) {
  if (segment.find('.') == std::string::npos) return segment;
  std::string out;
  std::size_t begin = 0;
  while (begin <= segment.size()) {
    const std::size_t dot = std::min(segment.find('.', begin), segment.size());
    if (dot > begin) out.append(out.empty() ? "" : ".").append(segment, begin, dot - begin);
    begin = dot + 1;
  }
  return out;
}

// Appends a segment to a module path, in place (a name of 400,000 segments took seconds when each
// step copied the path); a segment that repeats the path so far ("layer3" then "layer3.0")
// replaces it instead of doubling it.
void append_segment(std::string& path, const std::string& segment) {
  if (path.empty() || (segment.size() > path.size() && segment.compare(0, path.size(), path) == 0 && segment[path.size()] == '.')) {
    path = segment;
    return;
  }
  path += '.';
  path += segment;
}

// Splits "cells.1_10" into ("cells.1", 10); nullopt when there is no numeric "_N" suffix.
std::optional<std::pair<std::string, std::uint32_t>> split_call_suffix(const std::string& segment) {
  auto us = segment.rfind('_');
  if (us == std::string::npos || us == 0 || us + 1 == segment.size()) return std::nullopt;
  for (std::size_t i = us + 1; i < segment.size(); ++i)
    if (segment[i] < '0' || segment[i] > '9') return std::nullopt;
  if (segment.size() - us - 1 > 9) return std::nullopt;
  return std::make_pair(segment.substr(0, us), static_cast<std::uint32_t>(std::stoul(segment.substr(us + 1))));
}


std::vector<std::int64_t> dims_of(const onnx::TypeProto& type, const std::map<std::string, std::int64_t>& dim_values) {
  std::vector<std::int64_t> dims;
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return {-1};  // unknown rank
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (d.has_dim_value()) {
      dims.push_back(d.dim_value());
    } else if (d.has_dim_param() && dim_values.count(d.dim_param())) {
      dims.push_back(dim_values.at(d.dim_param()));
    } else {
      dims.push_back(-1);
    }
  }
  return dims;
}

Attributes convert_attributes(const onnx::NodeProto& node) {
  Attributes attrs;
  for (const auto& a : node.attribute()) {
    Attribute out;
    out.name = a.name();
    switch (a.type()) {
      case onnx::AttributeProto::INT: out.kind = Attribute::Kind::integer; out.i = a.i(); break;
      case onnx::AttributeProto::FLOAT: out.kind = Attribute::Kind::real; out.f = a.f(); break;
      case onnx::AttributeProto::STRING: out.kind = Attribute::Kind::text; out.s = a.s(); break;
      case onnx::AttributeProto::INTS:
        out.kind = Attribute::Kind::integers;
        out.ints.assign(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::FLOATS:
        out.kind = Attribute::Kind::reals;
        out.floats.assign(a.floats().begin(), a.floats().end());
        break;
      default: continue;  // tensors and graphs do not change an op's cost
    }
    attrs.set(std::move(out));
  }
  return attrs;
}

// The checker on `model` (a compatible copy of the file at `path`) with its external data read
// where the file's are: the checker's file entry point resolves them from the file's directory, so
// the copy is written there for the check and removed. In a read-only directory only the external
// files' presence is checked (shape inference still reads the rest).
void check_model_beside(const onnx::ModelProto& model, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::filesystem::path file = dir / (".placer_check_" + std::to_string(::getpid()) + "_" + std::filesystem::path(path).filename().string());
  {
    std::ofstream out(file, std::ios::binary);
    if (!out || !model.SerializeToOstream(&out)) {
      out.close();
      std::error_code ec;
      std::filesystem::remove(file, ec);
      for (const auto& init : model.graph().initializer()) {
        if (init.data_location() != onnx::TensorProto::EXTERNAL) continue;
        for (const auto& entry : init.external_data())
          if (entry.key() == "location" && !std::filesystem::exists(dir / entry.value(), ec))
            throw std::runtime_error("data of initializer '" + init.name() + "' should be stored in '" + (dir / entry.value()).string() +
                                     "', which does not exist");
      }
      return;
    }
  }
  struct Remove {
    std::filesystem::path p;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } remove{file};
  onnx::checker::check_model(file.string());
}

// A model file as read, and the copy of it that the linked ONNX library checks and infers when the
// file is newer than the library (onnx_compat.hpp).
struct ModelFile {
  onnx::ModelProto model;
  std::optional<onnx::ModelProto> compatible;
};

// Names (and string attributes) must be UTF-8, as ONNX says: every JSON placer writes carries them,
// and protobuf does not check proto2 strings.
void check_utf8(const onnx::GraphProto& graph, const std::string& path) {
  auto check = [&](const std::string& text, const std::string& what) {
    if (const std::size_t at = invalid_utf8_at(text); at != std::string::npos)
      throw Error("model file '" + path + "': " + what + " '" + printable(text) + "' is not valid UTF-8 (byte " + std::to_string(at) +
                  ")");
  };
  check(graph.name(), "the graph name");
  for (const auto& vi : graph.input()) check(vi.name(), "graph input");
  for (const auto& vi : graph.output()) check(vi.name(), "graph output");
  for (const auto& vi : graph.value_info()) check(vi.name(), "tensor");
  for (const auto& t : graph.initializer()) check(t.name(), "initializer");
  for (const auto& node : graph.node()) {
    check(node.name(), "node name");
    check(node.op_type(), "op type");
    check(node.domain(), "domain");
    for (const auto& x : node.input()) check(x, "input of node '" + printable(node.name()) + "'");
    for (const auto& y : node.output()) check(y, "output of node '" + printable(node.name()) + "'");
    for (const auto& a : node.attribute()) {
      check(a.name(), "attribute of node '" + printable(node.name()) + "'");
      if (a.type() == onnx::AttributeProto::STRING) check(a.s(), "attribute '" + printable(a.name()) + "' of node '" + printable(node.name()) + "'");
      if (a.has_g()) check_utf8(a.g(), path);
      for (const auto& g : a.graphs()) check_utf8(g, path);
    }
  }
}

ModelFile read_model(const std::string& path, const std::map<std::string, std::int64_t>& dim_values,
                     const std::function<void(const std::string&)>& warn, bool keep_refused_loops,
                     const std::function<void(const DecidedBeforeStep&)>& decided) {
  bool sorted = false;
  onnx::ModelProto model = read_onnx_file(path, &sorted);
  if (sorted && warn)
    warn("'" + path + "': its nodes are not in topological order, as ONNX requires (a node reads what a later one makes): read sorted");
  check_utf8(model.graph(), path);
  for (const auto& f : model.functions()) {
    onnx::GraphProto body;  // a function's nodes become the graph's when inlined
    body.set_name(f.name());
    *body.mutable_node() = f.node();
    check_utf8(body, path);
  }
  // Initializers stored in external files are named relative to the model's directory, which only
  // the checker's file entry point knows (placer reads no weights, but the checker wants them there).
  const bool external = std::any_of(model.graph().initializer().begin(), model.graph().initializer().end(),
                                    [](const onnx::TensorProto& t) { return t.data_location() == onnx::TensorProto::EXTERNAL; });
  // A model newer than the linked ONNX library is checked in the form the library reads
  // (onnx_compat.hpp); an error then says how much newer it is.
  const std::string newer = newer_than_library(model);
  std::optional<onnx::ModelProto> compatible;
  try {
    compatible = library_compatible_copy(model);
  } catch (const Error& e) {
    throw Error("model file '" + path + "'" + (newer.empty() ? "" : " (" + newer + ")") + ": " + e.what());
  }
  try {
    if (external && !compatible && !sorted)
      onnx::checker::check_model(path);
    else if (external)  // the checker's file entry point would read the newer or unsorted original
      check_model_beside(compatible ? *compatible : model, path);
    else
      onnx::checker::check_model(compatible ? *compatible : model);
  } catch (const std::exception& e) {
    std::string what = one_line(e.what());
    if (what.find("Field 'shape' of 'type' is required") != std::string::npos)
      if (const std::string io = unshaped_io(model.graph()); !io.empty())
        what += " (" + io + " is declared without a shape: give it one, of symbolic sizes if they are not known)";
    throw Error("model file '" + path + "'" + (newer.empty() ? "" : " (" + newer + ")") + " fails the ONNX checker: " + what);
  }
  if (const auto& sparse = model.graph().sparse_initializer(); !sparse.empty())
    throw Error("model file '" + path + "': its graph holds " + std::to_string(sparse.size()) + " sparse initializer(s) ('" +
                sparse.Get(0).values().name() + "'" + (sparse.size() > 1 ? ", ..." : "") +
                "), which placer does not read: store them dense");
  // Checked with its Ifs (both branches, decided or not); then the decided ones give way to their branch.
  try {
    if (const DecidedBeforeStep d = inline_control_flow_decided_by_shapes(model, dim_values, keep_refused_loops); d.any()) {
      compatible = library_compatible_copy(model);
      if (decided) decided(d);
    }
  } catch (const Error& e) {
    throw Error("model file '" + path + "': " + e.what());
  }
  return ModelFile{std::move(model), std::move(compatible)};
}

// The names a subgraph (an If's branch, a Loop's or Scan's body) reads from the scopes around it,
// which ONNX lets it read without naming them among its node's inputs: appended to `out` in order
// of first use, each once. `defined`: the names the subgraph's own scopes give.
void outer_reads(const onnx::GraphProto& g, std::unordered_set<std::string> defined, std::vector<std::string>& out,
                 std::unordered_set<std::string>& seen) {
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& t : g.sparse_initializer()) defined.insert(t.values().name());
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (!in.empty() && !defined.count(in) && seen.insert(in).second) out.push_back(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) outer_reads(a.g(), defined, out, seen);
      for (const auto& sub : a.graphs()) outer_reads(sub, defined, out, seen);
    }
    for (const auto& o : n.output()) defined.insert(o);
  }
  // An output that is a value from around it (an If branch giving back an outer W as it is).
  for (const auto& o : g.output())
    if (!o.name().empty() && !defined.count(o.name()) && seen.insert(o.name()).second) out.push_back(o.name());
}

// What a node of the main graph reads: its inputs, then (for a node with subgraphs) the names its
// subgraphs read from the main graph, which it waits for as much as for its inputs.
std::vector<std::string> node_reads(const onnx::NodeProto& node) {
  std::vector<std::string> reads(node.input().begin(), node.input().end());
  const bool has_subgraph = std::any_of(node.attribute().begin(), node.attribute().end(),
                                        [](const onnx::AttributeProto& a) { return a.has_g() || a.graphs_size() > 0; });
  if (!has_subgraph) return reads;
  std::unordered_set<std::string> seen(reads.begin(), reads.end());
  std::vector<std::string> outer;
  for (const auto& a : node.attribute()) {
    if (a.has_g()) outer_reads(a.g(), {}, outer, seen);
    for (const auto& sub : a.graphs()) outer_reads(sub, {}, outer, seen);
  }
  reads.insert(reads.end(), outer.begin(), outer.end());
  return reads;
}

}  // namespace

std::string literal_module_path(const std::string& node_name) {
  auto parts = split_name(node_name);
  std::string path;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i)
    if (const std::string segment = tidy_segment(parts[i]); !segment.empty()) append_segment(path, segment);
  return path;
}

ModulePath parse_module_path(const std::string& node_name, const std::unordered_map<std::string, bool>& known_modules) {
  auto parts = split_name(node_name);
  ModulePath result;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string segment = tidy_segment(parts[i]);
    if (segment.empty()) continue;
    if (auto split = split_call_suffix(segment)) {
      std::string base_path = result.module;
      append_segment(base_path, split->first);
      if (known_modules.count(base_path)) {
        result.module = base_path;
        result.call = split->second;
        continue;
      }
    }
    append_segment(result.module, segment);
  }
  return result;
}

static Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  ModelFile file = read_model(path, options.dim_values, options.warn, options.unknown_op_default.has_value(), options.decided);
  if (const std::string newer = newer_than_placer(file.model); !newer.empty() && options.warn) options.warn("'" + path + "': " + newer);
  onnx::ModelProto& model = file.model;
  onnx::GraphProto* graph = model.mutable_graph();

  // Bind symbolic input dimensions the user gave, then infer shapes where any are missing. A name
  // that is no symbolic dimension of the model is a slip (a misspelt --dim): an error, not ignored.
  if (!options.dim_values.empty()) {
    std::set<std::string> symbols, of_inputs;  // anywhere in the model; on its inputs (named in the error)
    auto collect = [&](const onnx::ValueInfoProto& vi, std::set<std::string>& into) {
      if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
        for (const auto& d : vi.type().tensor_type().shape().dim())
          if (d.has_dim_param()) into.insert(d.dim_param());
    };
    for (const auto& vi : graph->input()) collect(vi, symbols), collect(vi, of_inputs);
    for (const auto& vi : graph->value_info()) collect(vi, symbols);
    for (const auto& vi : graph->output()) collect(vi, symbols);
    for (const auto& [name, value] : options.dim_values)
      if (!symbols.count(name) && !options.names_for_several_models) {
        std::string known;
        for (const auto& s : of_inputs) known += (known.empty() ? "" : ", ") + s;
        throw Error("--dim " + name + "=" + std::to_string(value) + ": model file '" + path + "' has no symbolic dimension '" + name +
                    "' (" + (known.empty() ? "its inputs have none" : "its inputs have: " + known) + ")");
      }
  }
  bind_symbolic_dims(*graph, options.dim_values);
  if (file.compatible) bind_symbolic_dims(*file.compatible->mutable_graph(), options.dim_values);
  std::map<std::string, onnx::TypeProto> types;
  try {
    // Inference works on a copy of its own: the compatible copy is handed over, the file copied.
    types = file.compatible ? infer_all_shapes(std::move(*file.compatible), nullptr, default_opset(model)) : infer_all_shapes(model);
    file.compatible.reset();
  } catch (const Error& e) {
    const std::string newer = newer_than_library(model);
    throw Error("model file '" + path + "'" + (newer.empty() ? "" : " (" + newer + ")") + ": " + e.what());
  }

  // The value of a one-element boolean constant (an initializer or a Constant node), if it is one.
  std::unordered_map<std::string, const onnx::TensorProto*> constant_tensors;
  for (const auto& init : graph->initializer()) constant_tensors[init.name()] = &init;
  for (const auto& node : graph->node())
    if (node.op_type() == "Constant" && node.output_size() == 1)
      for (const auto& a : node.attribute())
        if (a.name() == "value" && a.has_t()) constant_tensors[node.output(0)] = &a.t();
  auto constant_bool = [&](const std::string& name) -> std::optional<bool> {
    auto it = constant_tensors.find(name);
    if (it == constant_tensors.end()) return std::nullopt;
    const onnx::TensorProto& t = *it->second;
    if (t.data_type() != onnx::TensorProto::BOOL) return std::nullopt;
    if (t.int32_data_size() == 1) return t.int32_data(0) != 0;
    if (t.has_raw_data() && t.raw_data().size() == 1) return t.raw_data()[0] != 0;
    return std::nullopt;
  };

  // Consumers of every tensor name: (node index, slot).
  Consumers consumers;
  // What each node reads (node_reads), once: for the consumers here and the ops' inputs below.
  std::vector<std::vector<std::string>> reads_of(static_cast<std::size_t>(graph->node_size()));
  for (int n = 0; n < graph->node_size(); ++n) {
    const std::vector<std::string>& reads = reads_of[static_cast<std::size_t>(n)] = node_reads(graph->node(n));
    for (std::size_t s = 0; s < reads.size(); ++s)
      if (!reads[s].empty()) consumers[reads[s]].push_back({n, static_cast<int>(s)});
  }
  std::unordered_set<std::string> graph_outputs;
  for (const auto& o : graph->output()) graph_outputs.insert(o.name());

  // Uses of a graph-level tensor, looking through re-shaping and aliasing ops.
  auto uses_of = [&](const std::string& name) { return source_uses(*graph, consumers, name); };

  GraphBuilder builder(graph->name());
  // A tensor whose shape inference left unknown, and why that may be: an op of another domain has no
  // rule ONNX knows; an op of the default domain gives a shape that depends on values.
  auto unknown_shape = [&types](const std::string& name, const onnx::NodeProto* producer, const std::string& producer_name) {
    std::string why;
    auto it = types.find(name);
    // (A sequence op's output is a sequence whatever inference kept of it: a graph output it gives
    // was named an unknown shape.)
    const bool sequence_op = producer && (producer->op_type().starts_with("Sequence") || producer->op_type() == "SplitToSequence") &&
                             producer->op_type() != "SequenceAt" && producer->op_type() != "SequenceLength";
    const char* kind = sequence_op                      ? "a sequence"
                       : it == types.end()              ? nullptr
                       : it->second.has_sequence_type() ? "a sequence"
                       : it->second.has_optional_type() ? "an optional"
                       : it->second.has_map_type()      ? "a map"
                                                        : nullptr;
    if (kind) {
      std::string hint;
      const std::string_view k = kind;
      if (k == "a map") hint = " (map values are not supported)";
      else if (k == "an optional" && producer)
        hint = " (an optional becomes what it holds only where that is known before the step: made by Optional, read by "
               "OptionalHasElement and OptionalGetElement)";
      else if (k == "an optional") hint = " (an optional given with the data: give its tensor as a graph input of its own, or none)";
      else if (producer)
        hint = " (a sequence becomes the tensors it holds only where they are known before the step: made by loops whose iterations "
               "are known, of tensors whose element types are known, read at positions that are)";
      else hint = " (a sequence given with the data: give its tensors as graph inputs of their own)";
      return Error("tensor '" + name + "'" + (producer ? " (output of op '" + producer_name + "', " + producer->op_type() + ")" : "") +
                   ": " + kind + " value, not a tensor: placer places ops on tensors" + hint);
    }
    if (producer && (producer->op_type() == "Loop" || producer->op_type() == "Scan"))
      why = " (a " + producer->op_type() + " whose iterations are not known before the step, which placer does not unroll)";
    else if (producer && !(producer->domain().empty() || producer->domain() == "ai.onnx"))
      why = " (ONNX knows no shape rule for domain '" + producer->domain() + "': declare the output's shape in the model's value_info)";
    else if (producer)
      why = " (it may depend on the values of tensors computed in the step)";
    return Error("tensor '" + name + "'" + (producer ? " (output of op '" + producer_name + "', " + producer->op_type() + ")" : "") +
                 ": shape unknown after ONNX shape inference" + why);
  };
  // `producer`: the node that gives the tensor (nullptr for a graph input), named `producer_name`.
  auto add_named = [&](const std::string& name, DType dtype, std::vector<std::int64_t> dims, TensorKind kind,
                       const onnx::NodeProto* producer, const std::string& producer_name) {
    if (!dims.empty() && dims[0] == -1 && dims.size() == 1) throw unknown_shape(name, producer, producer_name);
    return builder.add_tensor(name, std::move(dims), dtype, kind);
  };

  // Constants with no element (an empty `roi` or `scales` of Resize as exporters write them, the
  // empty shape of a Reshape to a scalar) hold nothing to place or send: they are left out, and an
  // op reading one reads nothing there, as if the optional input were not given.
  std::unordered_set<std::string> empty_values;
  // Set-up values by name, by the graph's rule (Graph::op_folded): constants, and what Shape, Size
  // and ops reading only set-up values compute. One that comes out empty (a LayerNormalization
  // function's prefix shape for axis 0) is an empty value too, and its op is left out.
  std::unordered_set<std::string> setup_values;
  auto has_zero_dim = [](const auto& dims) { return std::any_of(dims.begin(), dims.end(), [](std::int64_t d) { return d == 0; }); };

  // Graph-level tensors: initializers, then inputs that are not initializers.
  std::unordered_set<std::string> initializer_names;
  for (const auto& init : graph->initializer()) {
    initializer_names.insert(init.name());
    if (has_zero_dim(init.dims())) {
      empty_values.insert(init.name());
      continue;
    }
    std::vector<std::int64_t> dims(init.dims().begin(), init.dims().end());
    DType dtype = dtype_from_onnx(init.data_type());
    SourceUses uses = uses_of(init.name());
    std::uint64_t elements = 1;
    for (auto d : dims) elements *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 1));
    TensorKind kind = TensorKind::constant;
    if (is_floating(dtype) && !uses.only_settings()) {
      if (uses.buffer && !uses.weight) kind = TensorKind::buffer;
      else if (uses.weight || elements > 1) kind = TensorKind::parameter;
    } else if (!is_floating(dtype) && uses.weight && uses.quantized) {
      kind = TensorKind::parameter;  // an int8 weight of a quantized model: counted, never trained
    }
    if (kind == TensorKind::constant) setup_values.insert(init.name());
    builder.add_tensor(init.name(), std::move(dims), dtype, kind);
  }
  {
    std::vector<const onnx::ValueInfoProto*> inputs;
    for (const auto& vi : graph->input())
      if (!initializer_names.count(vi.name())) inputs.push_back(&vi);
    std::vector<std::string> data_inputs;  // the names given that are this model's inputs
    for (const auto& name : options.data_inputs) {
      if (std::any_of(inputs.begin(), inputs.end(), [&](auto* vi) { return vi->name() == name; })) data_inputs.push_back(name);
      else if (!options.names_for_several_models)
        throw Error("--data-inputs names '" + name + "', which is not a graph input of '" + path + "'");
    }
    std::unordered_set<std::string> forced_data(data_inputs.begin(), data_inputs.end());
    // Decide each input's kind from its uses; inputs whose uses say nothing are data when they
    // come before the first recognised parameter (exporters list the caller's inputs first).
    std::vector<TensorKind> kinds(inputs.size(), TensorKind::data);
    std::vector<bool> decided(inputs.size(), false);
    std::size_t first_param = inputs.size();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string& name = inputs[i]->name();
      DType dtype = dtype_from_onnx(inputs[i]->type().tensor_type().elem_type());
      SourceUses uses = uses_of(name);
      if (!data_inputs.empty()) {
        kinds[i] = forced_data.count(name)          ? TensorKind::data
                   : (uses.buffer && !uses.weight) ? TensorKind::buffer
                   : is_floating(dtype)           ? TensorKind::parameter
                                                  : TensorKind::constant;
        decided[i] = true;
        continue;
      }
      if (!is_floating(dtype)) {
        kinds[i] = TensorKind::data, decided[i] = true;
      } else if (uses.weight || (uses.buffer && !uses.data)) {
        kinds[i] = uses.weight ? TensorKind::parameter : TensorKind::buffer, decided[i] = true;
        first_param = std::min(first_param, i);
      } else if (uses.data) {
        kinds[i] = TensorKind::data, decided[i] = true;
      }
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!decided[i]) kinds[i] = i < first_param ? TensorKind::data : TensorKind::parameter;
      DType dtype = dtype_from_onnx(inputs[i]->type().tensor_type().elem_type());
      std::vector<std::int64_t> dims = dims_of(inputs[i]->type(), options.dim_values);
      if (inputs[i]->type().tensor_type().has_shape())  // read or not: a graph input has a shape
        for (int k = 0; k < inputs[i]->type().tensor_type().shape().dim_size(); ++k) {
          const auto& d = inputs[i]->type().tensor_type().shape().dim(k);
          if (dims[static_cast<std::size_t>(k)] >= 0) continue;
          if (d.has_dim_param() && d.dim_param().empty())
            throw Error("'" + path + "': graph input '" + inputs[i]->name() + "': dimension " + std::to_string(k) +
                        " is symbolic with an empty name, which --dim cannot bind: give it a name or a size in the model");
          if (d.has_dim_param())
            throw Error("'" + path + "': graph input '" + inputs[i]->name() + "' has the symbolic dimension '" + d.dim_param() +
                        "' (dimension " + std::to_string(k) + "): give its value with --dim " + d.dim_param() + "=VALUE");
          throw Error("'" + path + "': graph input '" + inputs[i]->name() + "': dimension " + std::to_string(k) +
                      " has no size and no name (the model leaves it open): fix it in the model");
        }
      // An empty input that only steers ops (a ReduceSum's `axes` given as [], which reduces
      // every axis, or none with noop_with_empty_axes) is read as not given, as empty constants are.
      if (has_zero_dim(dims) && uses_of(inputs[i]->name()).only_settings()) {
        empty_values.insert(inputs[i]->name());
        continue;
      }
      if (kinds[i] == TensorKind::constant) setup_values.insert(inputs[i]->name());
      add_named(inputs[i]->name(), dtype, std::move(dims), kinds[i], nullptr, "");
    }
  }

  // Module paths: every path read literally, then each node's path with call suffixes resolved.
  std::unordered_map<std::string, bool> known_modules;
  std::size_t module_bytes = 0;
  for (const auto& node : graph->node()) {
    std::string p = literal_module_path(node.name());
    if (const auto depth = std::count(p.begin(), p.end(), '.') + 1; depth > kMaxModuleDepth)
      throw Error("'" + path + "': node '" + utf8_prefix(node.name(), 80) + "...': its module path is " + std::to_string(depth) +
                  " levels deep (at most " + std::to_string(kMaxModuleDepth) + ")");
    while (!p.empty()) {
      if (!known_modules.emplace(p, true).second) break;
      if ((module_bytes += p.size()) > kMaxModulePathBytes) throw Error("'" + path + "': " + module_paths_too_long());
      const auto dot = p.rfind('.');
      p.resize(dot == std::string::npos ? 0 : dot);  // the parent
    }
  }

  // Ops. An Identity of a parameter or buffer is a parameter of its own (the exporter merged
  // parameters whose initial values were equal): its output becomes a fresh source tensor and the
  // op keeps no edges, so that it costs nothing and ties nothing together.
  std::vector<OpId> alias_ops;
  std::unordered_set<std::string> used_names;
  std::map<std::string, std::size_t> guessed;  // op types --unknown-ops priced, and how many ops
  for (int n = 0; n < graph->node_size(); ++n) {
    const auto& node = graph->node(n);
    OpSpec spec;
    spec.name = node.name();
    if (spec.name.empty() || used_names.count(spec.name)) {
      // <Type>_<index>, made unique against the names already taken (a node may be named so).
      const std::string base = node.op_type() + "_" + std::to_string(n) + (spec.name.empty() ? "" : "_dup");
      spec.name = base;
      for (int k = 1; used_names.count(spec.name); ++k) spec.name = base + "_" + std::to_string(k);
    }
    used_names.insert(spec.name);
    if ((node.op_type() == "Loop" || node.op_type() == "Scan") && (node.domain().empty() || node.domain() == "ai.onnx") &&
        !options.unknown_op_default)
      throw Error("op '" + spec.name + "': a " + node.op_type() + " placer does not unroll: placer unrolls a Loop whose trip count is " +
                  "known before the step (a constant, or computed from shapes) and whose condition stays true (or is a constant false: run once), and a Scan (opset 9 on) whose " +
                  "inputs' lengths are known; this one's iterations are not known before the step (export the model traced, with its loops " +
                  "unrolled; --unknown-ops CLASS prices it as one op for the simulator)");
    spec.type = node.domain().empty() || node.domain() == "ai.onnx" ? node.op_type() : node.domain() + "::" + node.op_type();
    spec.attrs = convert_attributes(node);
    // Dropout's training_mode input (opset 12) decides whether it is a kernel or a pass-through:
    // kept as an attribute for the cost rules and the executor. A mode computed in the graph counts
    // as training (it is given for a reason); an absent one, or a constant false, as inference.
    if (node.op_type() == "Dropout" && node.input_size() >= 3 && !node.input(2).empty()) {
      const std::optional<bool> mode = constant_bool(node.input(2));
      Attribute training{.name = "training_mode", .kind = Attribute::Kind::integer};
      training.i = mode.value_or(true) ? 1 : 0;
      spec.attrs.set(training);
    }
    // Resize of opset 10 has no coordinate_transformation_mode or nearest_mode: its coordinates are
    // Upsample's (asymmetric, floor), which opset 11's defaults (half_pixel) are not. Written out.
    if (node.op_type() == "Resize" && (node.domain().empty() || node.domain() == "ai.onnx") && default_opset(model) < 11) {
      for (const auto& [key, value] : {std::pair<const char*, const char*>{"coordinate_transformation_mode", "asymmetric"},
                                       std::pair<const char*, const char*>{"nearest_mode", "floor"}}) {
        Attribute a{.name = key, .kind = Attribute::Kind::text};
        a.s = value;
        spec.attrs.set(a);
      }
    }
    // PRelu of opset 6 has no broadcasting: a slope of C elements on [N,C,...] is a slope per
    // channel (PyTorch's exporter wrote PReLU's weight so), which broadcasting would align with the
    // last dimension. Kept as an attribute for the executor; the cost is the same either way.
    if (node.op_type() == "PRelu" && (node.domain().empty() || node.domain() == "ai.onnx") && default_opset(model) < 7 &&
        node.input_size() == 2) {
      auto x = types.find(node.input(0)), slope = types.find(node.input(1));
      if (x != types.end() && slope != types.end()) {
        const auto xd = dims_of(x->second, options.dim_values), sd = dims_of(slope->second, options.dim_values);
        if (xd.size() > 2 && sd.size() == 1 && sd[0] == xd[1] && sd[0] > 1) {
          Attribute per_channel{.name = "slope_per_channel", .kind = Attribute::Kind::integer};
          per_channel.i = 1;
          spec.attrs.set(per_channel);
        }
      }
    }
    ModulePath mp = parse_module_path(node.name(), known_modules);
    spec.module = mp.module;
    spec.call = mp.call;

    if (node.op_type() == "Constant" && node.output_size() == 1) {
      auto it = types.find(node.output(0));
      if (it != types.end() && has_zero_dim(dims_of(it->second, {}))) {
        empty_values.insert(node.output(0));
        continue;
      }
    }
    if (node.op_type() == "Identity" && node.input_size() == 1 && node.output_size() == 1) {
      TensorId src = builder.find_tensor(node.input(0));
      if (src != kNoId && builder.tensor_kind(src) != TensorKind::activation && builder.tensor_kind(src) != TensorKind::data &&
          builder.tensor_kind(src) != TensorKind::constant) {
        SourceUses uses = uses_of(node.output(0));
        TensorKind kind = (uses.buffer && !uses.weight) ? TensorKind::buffer : TensorKind::parameter;
        std::vector<std::int64_t> dims(builder.tensor_shape(src).begin(), builder.tensor_shape(src).end());
        builder.add_tensor(node.output(0), std::move(dims), builder.tensor_dtype(src), kind);
        Attribute alias{.name = "alias_of", .kind = Attribute::Kind::text};
        alias.s = node.input(0);
        spec.attrs.set(alias);
        Attribute out{.name = "alias", .kind = Attribute::Kind::text};
        out.s = node.output(0);
        spec.attrs.set(out);
        alias_ops.push_back(builder.add_op(std::move(spec)));
        continue;
      }
    }

    // An If's branches and a Loop's or Scan's body may read names of the main graph that the node
    // does not list (kept as one op with --unknown-ops): those are its inputs too.
    const std::vector<std::string>& reads = reads_of[static_cast<std::size_t>(n)];
    for (const auto& in : reads) {
      if (in.empty() || empty_values.count(in)) {
        spec.inputs.push_back(kNoId);
        continue;
      }
      TensorId t = builder.find_tensor(in);
      if (t == kNoId)
        throw Error("op '" + spec.name + "' reads tensor '" + in +
                    "', which no earlier node produces and which is not a graph input (dangling input, or nodes out of order)");
      spec.inputs.push_back(t);
    }
    // A set-up value by the graph's rule; `setup_if_empty`: also when its only inputs are empty
    // values (which the graph never sees).
    bool setup = false, setup_if_empty = false;
    bool any = false, all = true;  // of its inputs read and not empty: any; all set-up values
    const char* first_empty = nullptr;
    for (const auto& in : reads) {
      if (in.empty()) continue;
      if (empty_values.count(in)) first_empty = first_empty ? first_empty : in.c_str();
      else any = true, all = all && setup_values.count(in);
    }
    if (spec.type == "Constant" || spec.type == "Shape" || spec.type == "Size") {
      setup = setup_if_empty = true;
    } else if (!spec.type.starts_with("Random") && spec.type != "Bernoulli" && spec.type != "Multinomial" && spec.type != "If" &&
               spec.type != "Loop" && spec.type != "Scan") {
      setup = any && all;
      setup_if_empty = (any || first_empty) && all;
    }
    if (setup_if_empty && node.output_size() > 0 && std::all_of(node.output().begin(), node.output().end(), [&](const std::string& out) {
          auto it = types.find(out);
          return !out.empty() && it != types.end() && has_zero_dim(dims_of(it->second, options.dim_values));
        })) {
      for (const auto& out : node.output()) empty_values.insert(out);
      continue;
    }
    // An op that reads only empty values and gives something (ConstantOfShape of a scalar's shape,
    // the product of none) would read nothing at all: refused as before empty values were left out.
    if (first_empty && !any)
      throw Error("op '" + spec.name + "' (" + node.op_type() + "): input '" + first_empty +
                  "' is empty (no element), as are all it reads: nothing to place");
    if (setup)
      for (const auto& out : node.output()) setup_values.insert(out);
    // Before its outputs' shapes, which such an If leaves unknown when its branches differ (the
    // error named a dimension of its output: Silero VAD v5, which branches on its sample rate).
    if (node.op_type() == "If" && !options.unknown_op_default) {
      // Which graph inputs the condition is computed from (their values, not only their shapes).
      std::set<std::string> from;
      if (node.input_size() == 1) {
        std::unordered_map<std::string, int> producer;
        for (int k = 0; k < n; ++k)
          for (const auto& out : graph->node(k).output()) producer.emplace(out, k);
        std::unordered_set<std::string> inputs_by_name, seen;
        for (const auto& vi : graph->input()) inputs_by_name.insert(vi.name());
        for (const auto& t : graph->initializer()) inputs_by_name.erase(t.name());
        std::vector<std::string> frontier{node.input(0)};
        while (!frontier.empty() && seen.size() < 100000) {
          const std::string name = frontier.back();
          frontier.pop_back();
          if (!seen.insert(name).second) continue;
          if (inputs_by_name.count(name)) from.insert(name);
          auto it = producer.find(name);
          if (it == producer.end() || graph->node(it->second).op_type() == "Shape" || graph->node(it->second).op_type() == "Size") continue;
          for (const auto& in : graph->node(it->second).input()) frontier.push_back(in);
        }
      }
      std::string inputs;
      for (const auto& name : from) inputs += (inputs.empty() ? "'" : ", '") + name + "'";
      throw Error("op '" + spec.name + "': an If whose condition is only known when the model runs" +
                  (inputs.empty() ? std::string() : " (it is computed from the value of graph input" + std::string(from.size() > 1 ? "s " : " ") + inputs + ")") +
                  "; placer places the ops of Ifs that constants and shapes decide (--unknown-ops CLASS prices this one as one op for the simulator)");
    }
    for (const auto& out : node.output()) {
      if (out.empty()) continue;
      auto it = types.find(out);
      bool used = consumers.count(out) || graph_outputs.count(out);
      if (it == types.end()) {
        if (used) throw unknown_shape(out, &node, spec.name);
        continue;  // an unused optional output without a shape (Dropout's mask, ...): nothing reads it
      }
      DType dtype = dtype_from_onnx(it->second.tensor_type().elem_type());
      spec.outputs.push_back(add_named(out, dtype, dims_of(it->second, options.dim_values), TensorKind::activation, &node, spec.name));
    }
    std::vector<TensorDesc> ins, outs;
    for (TensorId t : spec.inputs)
      ins.push_back(t == kNoId ? TensorDesc{{}, DType::unknown, false} : TensorDesc{builder.tensor_shape(t), builder.tensor_dtype(t), true});
    for (TensorId t : spec.outputs) outs.push_back(TensorDesc{builder.tensor_shape(t), builder.tensor_dtype(t), true});
    for (std::size_t i = 0; i < ins.size(); ++i)
      for (std::size_t k = 0; k < ins[i].shape.size(); ++k)
        if (ins[i].shape[k] <= 0)
          throw Error("op '" + spec.name + "': input '" + reads[i] + "': dimension " + std::to_string(k) +
                      (ins[i].shape[k] == 0 ? " is 0 (an empty tensor: nothing to place)" : " has no known size"));
    for (std::size_t i = 0; i < outs.size(); ++i)
      for (std::size_t k = 0; k < outs[i].shape.size(); ++k) {
        const std::int64_t d = outs[i].shape[k];
        if (d > 0) continue;
        const std::string what = "tensor '" + builder.tensor_name(spec.outputs[i]) + "' (output of op '" + spec.name + "', " +
                                 node.op_type() + "): dimension " + std::to_string(k);
        if (d == 0) throw Error(what + " is 0 (an empty tensor: nothing to place)");
        throw Error(what + " has no size known before the model runs (a data-dependent shape, as NonZero's output has, or a symbolic "
                           "size ONNX shape inference could not resolve): placer needs every size");
      }
    if (node.op_type() == "GroupNormalization" && (node.domain().empty() || node.domain() == "ai.onnx") && !ins.empty() &&
        ins[0].shape.size() >= 2) {
      // Read by the shape rules as opset 17 has it (an Identity, onnx_compat.cpp), so checked here:
      // num_groups divides the channels, scale and bias hold one value per channel (opset 21) or
      // per group (18). A scale of 100,000 was priced as parameters (a fuzzing review).
      const std::int64_t channels = ins[0].shape[1], groups = spec.attrs.get_int("num_groups", 0);
      if (groups <= 0 || channels % groups != 0)
        throw Error("op '" + spec.name + "' (GroupNormalization): attribute 'num_groups' is " + std::to_string(groups) +
                    ", which does not divide its input's " + std::to_string(channels) + " channels");
      for (std::size_t i = 1; i < 3 && i < ins.size(); ++i)
        if (ins[i].present && !(ins[i].shape.size() == 1 && (ins[i].shape[0] == channels || ins[i].shape[0] == groups)))
          throw Error("op '" + spec.name + "' (GroupNormalization): " + (i == 1 ? "scale '" : "bias '") + reads[i] + "' should hold " +
                      std::to_string(channels) + " values (one per channel) or " + std::to_string(groups) + " (one per group, opset 18)");
    }
    // Gelu (opset 20) is read by the shape rules as an opset-17 op too: its one attribute is
    // checked here ("weird" was accepted: a fuzzing review).
    if (node.op_type() == "Gelu" && (node.domain().empty() || node.domain() == "ai.onnx"))
      if (const Attribute* a = spec.attrs.find("approximate");
          a && (a->kind != Attribute::Kind::text || (a->s != "none" && a->s != "tanh")))
        throw Error("op '" + spec.name + "' (Gelu): attribute 'approximate' is " +
                    (a->kind == Attribute::Kind::text ? "'" + utf8_prefix(a->s, 40) + "'" : std::string("not a string")) + " ('none' or 'tanh')");
    if (node.domain().empty() || node.domain() == "ai.onnx")
      if (const std::string wrong = attribute_mismatch(spec.type, spec.attrs, ins); !wrong.empty())
        throw Error("op '" + spec.name + "' (" + spec.type + "): " + wrong);
    if (options.unknown_op_default && !is_known_op_type(spec.type)) ++guessed[spec.type];
    try {
      spec.work = op_work(spec.type, spec.attrs, ins, outs, options.unknown_op_default);
    } catch (const Error& e) {
      throw Error("op '" + spec.name + "': " + e.what());
    }
    builder.add_op(std::move(spec));
  }
  // What --unknown-ops priced, so that a count of FLOPs that is mostly a guess says so (a quantized
  // model's ConvIntegers, before they had rules, came out 200 times under the same network in fp16).
  if (!guessed.empty() && options.warn) {
    options.warn("'" + path + "': " + unknown_ops_priced_note(guessed, *options.unknown_op_default));
  }
  for (const auto& o : graph->output()) {
    if (empty_values.count(o.name())) throw Error("graph output '" + o.name() + "' is an empty constant (no element): nothing to place");
    TensorId t = builder.find_tensor(o.name());
    if (t == kNoId) throw Error("graph output '" + o.name() + "' is produced by no node");
    builder.mark_output(t);
  }

  // Alias ops belong to the module of the op that consumes the parameter they stand for.
  std::unordered_map<std::string, OpId> first_consumer;
  for (OpId o = 0; o < builder.num_ops(); ++o)
    for (TensorId t : builder.op(o).inputs)
      if (t != kNoId) first_consumer.emplace(builder.tensor_name(t), o);
  for (OpId a : alias_ops) {
    auto it = first_consumer.find(builder.op(a).attrs.get_string("alias", ""));
    if (it == first_consumer.end()) continue;
    builder.op(a).module = builder.op(it->second).module;
    builder.op(a).call = builder.op(it->second).call;
  }
  Graph g;
  try {
    g = std::move(builder).build();
  } catch (const Error& e) {
    throw Error("'" + path + "': " + e.what());  // a graph-level check (a tensor's type, a cycle): name the file
  }
  if (const std::string overflow = work_sum_overflow(g); !overflow.empty())
    throw Error("'" + path + "': " + overflow + ": check the sizes of its tensors");
  return g;
}

Graph load_onnx(const std::string& path, const OnnxImportOptions& options) {
  try {
    return import_onnx(path, options);
  } catch (const Error& e) {
    // Every error names the file (docs/formats.md): a node's ("op 'mm': input 'x': dimension 0 is
    // 0") did not (a QA pass).
    const std::string what = e.what();
    if (what.find("'" + printable(path) + "'") != std::string::npos) throw;
    throw Error("model file '" + path + "': " + what);
  }
}

}  // namespace placer
