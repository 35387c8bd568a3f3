#include "placer/io/onnx_file.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "placer/graph/types.hpp"
#include "placer/io/onnx_compat.hpp"
#include "placer/io/onnx_inline.hpp"
#include "placer/io/onnx_shapes.hpp"
#include "placer/io/onnx_uses.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {

namespace {

constexpr int kIfRounds = 256;  // rounds of inference and folding that decide Ifs and unroll Loops

bool is_control_flow(const onnx::NodeProto& n) {
  return n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan" || is_sequence_or_optional_op(n);
}

}  // namespace

DecidedBeforeStep inline_control_flow_decided_by_shapes(onnx::ModelProto& model, const std::map<std::string, std::int64_t>& dim_values,
                                                        bool keep_refused) {
  DecidedBeforeStep changed;
  SequencePass sequence_pass;
  for (int round = 0; round < kIfRounds; ++round) {
    const auto& nodes = model.graph().node();
    if (std::none_of(nodes.begin(), nodes.end(), is_control_flow)) return changed;
    onnx::ModelProto copy = library_compatible_copy(model).value_or(model);
    bind_symbolic_dims(*copy.mutable_graph(), dim_values);
    // ONNX's pass infers each If's outputs from its branches (with a copy of the scope around each:
    // libonnx's cost grows with Ifs x model), so that an If reading the shape of the one before is
    // decided in the same round when both branches give one shape.
    std::map<std::string, onnx::TypeProto> types;
    try {
      types = infer_all_shapes(copy, nullptr, default_opset(model));
    } catch (const Error&) {
      return changed;
    }
    const auto values = folded_values(copy.graph(), types);
    std::unordered_map<std::string, bool> conditions;
    for (const auto& node : nodes)
      if (node.op_type() == "If" && node.input_size() == 1)
        if (auto it = values.find(node.input(0)); it != values.end() && it->second.size() == 1 && !std::isnan(it->second[0])) {
          // ONNX's condition is a bool (an int64 one was decided by its value: a fuzzing review).
          if (auto t = types.find(node.input(0));
              t != types.end() && t->second.has_tensor_type() && t->second.tensor_type().elem_type() != onnx::TensorProto::BOOL)
            throw Error("If '" + (node.name().empty() ? node.output(0) : node.name()) + "': its condition '" + node.input(0) + "' is " +
                        elem_type_name(t->second.tensor_type().elem_type()) + ", not BOOL");
          conditions[node.input(0)] = it->second[0] != 0.0;
        }
    const std::size_t ifs = conditions.empty() ? 0 : inline_decided_ifs(model, conditions);
    const std::size_t loops = unroll_counted_loops(model, values, types, keep_refused, &changed.iterations);
    // Sequences of the nodes unrolled this round are resolved in the next (their positions fold then).
    const std::size_t sequences = resolve_known_sequences(model, values, types, sequence_pass);
    changed.sequence_ops = sequence_pass.sequence_ops;
    if (ifs + loops + sequences == 0) return changed;
    changed.ifs += ifs, changed.loops += loops;
    // A branch's or body's Constant nodes that hold weights are the main graph's now: parameters,
    // as read_onnx_file makes the file's (a body's were never trained: a review).
    constant_weights_to_initializers(model);
  }
  throw Error("Ifs, Loops and sequences are still being decided after " + std::to_string(kIfRounds) +
              " rounds (each one's condition, trip count or position reads what the one before gives; placer decides one such link per "
              "round)");
}

void read_small_external_data(onnx::ModelProto& model, const std::filesystem::path& dir) {
  constexpr std::uint64_t kMaxElements = 4096;  // as the folding reads (onnx_shapes.cpp)
  std::error_code ec;
  std::filesystem::path real_dir;  // resolved on first use
  auto read = [&](onnx::TensorProto& t, const auto& where_of) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    // Every external location stays inside the model's directory, whether or not it is read here
    // (a weight's is only named to the checker, but a location out of the directory is no weight file).
    const std::string where = where_of();
    std::string location;
    for (const auto& entry : t.external_data())
      if (entry.key() == "location") location = entry.value();
    const std::filesystem::path relative(location);
    bool outside = location.empty() || relative.is_absolute() || location.find('\0') != std::string::npos;
    for (const auto& part : relative) outside = outside || part == "..";
    if (outside) throw Error(where + ": external data location '" + location + "' is not a file inside the model's directory");
    const std::filesystem::path file = dir / relative;
    const std::filesystem::file_status status = std::filesystem::status(file, ec);  // through symbolic links
    if (!std::filesystem::exists(status)) return;  // missing: the checker names the file
    if (!std::filesystem::is_regular_file(status))
      throw Error(where + ": external data location '" + location + "' is not a regular file");
    // A symbolic link may lead out of the directory: the file itself must be inside it.
    if (real_dir.empty()) {
      real_dir = std::filesystem::canonical(dir.empty() ? std::filesystem::path(".") : dir, ec);
      if (ec) throw Error(where + ": the model's directory '" + dir.string() + "' cannot be resolved: " + ec.message());
    }
    const std::filesystem::path real_file = std::filesystem::canonical(file, ec);
    if (ec) throw Error(where + ": external data file '" + file.string() + "' cannot be resolved: " + ec.message());
    if (std::mismatch(real_dir.begin(), real_dir.end(), real_file.begin(), real_file.end()).first != real_dir.end())
      throw Error(where + ": external data location '" + location + "' leads out of the model's directory (a symbolic link)");

    const std::uint64_t width = dtype_size(dtype_from_onnx(t.data_type()));
    // A weight's bytes are never read, but its offset and length are checked against the file as a
    // constant's are (a weight past the end of its file was accepted: a QA pass).
    std::uint64_t count = 1;
    for (std::int64_t d : t.dims())
      if (d < 0 || __builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count)) return;  // named by the import
    std::uint64_t bytes_needed = 0;
    if (width == 0 || __builtin_mul_overflow(count, width, &bytes_needed)) return;  // strings, unknown types; too large
    std::uint64_t offset = 0, length = bytes_needed;
    for (const auto& entry : t.external_data()) {
      if (entry.key() != "offset" && entry.key() != "length") continue;
      std::uint64_t v = 0;
      const char* end = entry.value().data() + entry.value().size();
      if (auto [ptr, err] = std::from_chars(entry.value().data(), end, v); err != std::errc() || ptr != end)
        throw Error(where + ": external data " + entry.key() + " '" + entry.value() + "' is not a number of bytes");
      (entry.key() == "offset" ? offset : length) = v;
    }
    if (length != bytes_needed)
      throw Error(where + ": its external data is " + std::to_string(length) + " bytes long, a tensor of " + std::to_string(count) +
                  " element(s) of " + std::to_string(width) + " bytes takes " + std::to_string(bytes_needed));
    const std::uint64_t file_bytes = std::filesystem::file_size(file, ec);
    if (ec) throw Error(where + ": the size of external data file '" + file.string() + "' cannot be read: " + ec.message());
    if (offset > file_bytes || length > file_bytes - offset)
      throw Error(where + ": external data of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                  " is past the end of '" + file.string() + "' (" + std::to_string(file_bytes) + " bytes)");
    if (count > kMaxElements) return;  // a weight: never read
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(where + ": external data file '" + file.string() + "' cannot be opened");
    std::string bytes(length, '\0');
    if (offset > static_cast<std::uint64_t>(std::numeric_limits<std::streamoff>::max()) ||
        !in.seekg(static_cast<std::streamoff>(offset)) || !in.read(bytes.data(), static_cast<std::streamsize>(length)))
      throw Error(where + ": external data of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                  " is past the end of '" + file.string() + "'");
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(std::move(bytes));
  };
  // The main graph, its subgraphs (If branches, Loop and Scan bodies) and model-local functions:
  // a weight in an If branch stored at ../../../etc/passwd was accepted (the main graph's is
  // refused), and a branch's Constant stored beside the model got libonnx's raw message.
  auto nodes = [&](auto& node_list, const std::string& scope, auto& graph_fn) -> void {
    for (auto& node : node_list) {
      const bool constant = node.op_type() == "Constant" && (node.domain().empty() || node.domain() == "ai.onnx");
      for (auto& a : *node.mutable_attribute()) {
        if (constant && a.name() == "value" && a.has_t())
          read(*a.mutable_t(), [&] {
            const std::string name = !node.name().empty() ? node.name() : node.output_size() > 0 ? node.output(0) : std::string("?");
            return "the value of Constant '" + name + "'" + scope;
          });
        const std::string inner = " (in a subgraph of node '" + (!node.name().empty() ? node.name() : node.op_type()) + "')";
        if (a.has_g()) graph_fn(*a.mutable_g(), inner, graph_fn);
        for (auto& g : *a.mutable_graphs()) graph_fn(g, inner, graph_fn);
      }
    }
  };
  auto graph = [&](onnx::GraphProto& g, const std::string& scope, auto& self) -> void {
    for (auto& init : *g.mutable_initializer()) read(init, [&] { return "initializer '" + init.name() + "'" + scope; });
    nodes(*g.mutable_node(), scope, self);
  };
  graph(*model.mutable_graph(), "", graph);
  for (auto& f : *model.mutable_functions()) nodes(*f.mutable_node(), " (in function '" + f.name() + "')", graph);
}

void bind_symbolic_dims(onnx::GraphProto& graph, const std::map<std::string, std::int64_t>& dim_values) {
  if (dim_values.empty()) return;
  for (auto& input : *graph.mutable_input())
    if (input.type().has_tensor_type() && input.type().tensor_type().has_shape())
      for (auto& d : *input.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
        if (d.has_dim_param() && dim_values.count(d.dim_param())) d.set_dim_value(dim_values.at(d.dim_param()));
}

namespace {

// The names a graph defines: its inputs, its initializers and its nodes' outputs.
std::unordered_set<std::string> names_made_in(const onnx::GraphProto& graph) {
  std::unordered_set<std::string> made;
  for (const auto& x : graph.input()) made.insert(x.name());
  for (const auto& t : graph.initializer()) made.insert(t.name());
  for (const auto& t : graph.sparse_initializer()) made.insert(t.values().name());
  for (const auto& node : graph.node())
    for (const auto& y : node.output()) made.insert(y);
  return made;
}

// What a node reads in its graph: its inputs, and the names its subgraphs read from around them
// (not what a subgraph makes or takes itself: a Loop body's input may bear the name of a value
// outside, which is then another value).
void reads_of(const onnx::NodeProto& node, std::vector<std::string>& out) {
  for (const auto& in : node.input())
    if (!in.empty()) out.push_back(in);
  for (const auto& a : node.attribute()) {
    auto sub = [&](const onnx::GraphProto& g) {
      const std::unordered_set<std::string> own = names_made_in(g);
      std::vector<std::string> inner;
      for (const auto& n : g.node()) reads_of(n, inner);
      for (const auto& y : g.output()) inner.push_back(y.name());
      for (auto& name : inner)
        if (!own.count(name)) out.push_back(std::move(name));
    };
    if (a.has_g()) sub(a.g());
    for (const auto& g : a.graphs()) sub(g);
  }
}

// "graph 'main'", or "a graph" for one without a name.
std::string graph_label(const onnx::GraphProto& graph) {
  if (graph.name().empty()) return "a graph";
  return "graph '" + utf8_prefix(graph.name(), 80) + (graph.name().size() > 80 ? "...'" : "'");
}

// "node 'name' (Type)"; a node without a name by its first output ("node making 'y' (Type)",
// where onnx_shapes.cpp's messages write "node 'y'"), or by its position.
std::string node_label(const onnx::NodeProto& node, int index) {
  const std::string type = utf8_prefix(node.op_type(), 60);
  std::string label;
  auto quoted = [&](const std::string& name) { label.append("'").append(utf8_prefix(name, 80)).append(name.size() > 80 ? "...'" : "'"); };
  if (!node.name().empty()) {
    label.append("node ");
    quoted(node.name());
  } else if (node.output_size() > 0 && !node.output(0).empty()) {
    label.append("node making ");
    quoted(node.output(0));
  } else {
    label.append("node ").append(std::to_string(index));
  }
  return label.append(" (").append(type).append(")");
}

// Sorts `graph`'s nodes (and each subgraph's) so that every node comes after the nodes whose
// outputs it reads, keeping the file's order where it already is one; true when something moved.
// A name two nodes produce leaves the order as it is (the checker names it); a cycle is an Error
// naming its nodes (the checker said a node's input "is not output of any previous nodes").
bool sort_graph(onnx::GraphProto& graph) {
  bool moved = false;
  for (auto& node : *graph.mutable_node())
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) moved |= sort_graph(*a.mutable_g());
      for (auto& g : *a.mutable_graphs()) moved |= sort_graph(g);
    }
  const int n = graph.node_size();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < n; ++i)
    for (const auto& out : graph.node(i).output())
      if (!out.empty() && !producer.emplace(out, i).second) return moved;
  std::vector<std::vector<int>> readers(static_cast<std::size_t>(n));
  std::vector<int> waiting(static_cast<std::size_t>(n), 0);
  bool in_order = true;
  std::vector<std::string> reads;
  for (int i = 0; i < n; ++i) {
    reads.clear();
    reads_of(graph.node(i), reads);
    std::sort(reads.begin(), reads.end());
    reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
    for (const auto& in : reads)  // its inputs, or what its subgraphs read from around them
      if (auto it = producer.find(in); it != producer.end() && it->second == i) {
        const auto& direct = graph.node(i).input();
        throw Error(graph_label(graph) + " has a cycle: " + node_label(graph.node(i), i) +
                    (std::find(direct.begin(), direct.end(), in) != direct.end() ? " reads '" : " has a subgraph that reads '") +
                    utf8_prefix(in, 80) + (in.size() > 80 ? "..." : "") + "', which it makes");
      }
    for (const auto& name : reads)
      if (auto it = producer.find(name); it != producer.end() && it->second != i) {
        readers[static_cast<std::size_t>(it->second)].push_back(i);
        ++waiting[static_cast<std::size_t>(i)];
        in_order = in_order && it->second < i;
      }
  }
  if (in_order) return moved;
  // Kahn's algorithm, the ready node first in the file taken first.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (waiting[static_cast<std::size_t>(i)] == 0) ready.push(i);
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(n));
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int r : readers[static_cast<std::size_t>(i)])
      if (--waiting[static_cast<std::size_t>(r)] == 0) ready.push(r);
  }
  if (order.size() != static_cast<std::size_t>(n)) {
    // A cycle: walk back from a node left waiting along producers left waiting until one repeats.
    std::vector<std::vector<std::pair<int, std::string>>> feeds(static_cast<std::size_t>(n));  // node -> (producer, name)
    for (int i = 0; i < n; ++i) {
      reads.clear();
      reads_of(graph.node(i), reads);
      for (const auto& name : reads)
        if (auto it = producer.find(name); it != producer.end() && it->second != i)
          feeds[static_cast<std::size_t>(i)].emplace_back(it->second, name);
    }
    int at = 0;
    while (waiting[static_cast<std::size_t>(at)] == 0) ++at;
    std::vector<int> path{at};
    std::vector<std::string> via;  // via[k]: what path[k + 1] makes and path[k] reads
    std::vector<int> seen_at(static_cast<std::size_t>(n), -1);
    seen_at[static_cast<std::size_t>(at)] = 0;
    for (;;) {
      const auto& in = feeds[static_cast<std::size_t>(path.back())];
      const auto next = std::find_if(in.begin(), in.end(), [&](const auto& f) { return waiting[static_cast<std::size_t>(f.first)] != 0; });
      via.push_back(next->second);
      if (seen_at[static_cast<std::size_t>(next->first)] >= 0) {
        // In the order values flow: path[first] makes via.back() for path.back(), which makes
        // via[k - 1] for path[k - 1], and so on back to path[first].
        const auto first = static_cast<std::size_t>(seen_at[static_cast<std::size_t>(next->first)]);
        const std::size_t length = path.size() - first;
        std::vector<int> nodes{path[first]};
        std::vector<std::string> names{via.back()};
        for (std::size_t k = path.size() - 1; k > first; --k) nodes.push_back(path[k]), names.push_back(via[k - 1]);
        nodes.push_back(path[first]);
        std::string text = node_label(graph.node(nodes[0]), nodes[0]);
        for (std::size_t k = 0; k < length; ++k) {
          if (length > 8 && k == 4) {  // a long cycle shows its first four steps and its last two
            text += " -> ...";
            k = length - 2;
          }
          text += " -[" + utf8_prefix(names[k], 80) + "]-> " + node_label(graph.node(nodes[k + 1]), nodes[k + 1]);
        }
        throw Error(graph_label(graph) + " has a cycle of " +
                    std::to_string(length) + " node(s): " + text);
      }
      seen_at[static_cast<std::size_t>(next->first)] = static_cast<int>(path.size());
      path.push_back(next->first);
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int i : order) *sorted.Add() = std::move(*graph.mutable_node(i));
  graph.mutable_node()->Swap(&sorted);
  return true;
}

// Every name a node of `graph` reads is made there (by a node, or as an input or initializer) or,
// in a subgraph, around it (`outer`: the enclosing graphs' names, innermost last). The checker said
// of a name nothing makes that it "is not output of any previous nodes", as of a cycle.
void check_names_made(const onnx::GraphProto& graph, std::vector<const std::unordered_set<std::string>*>& outer) {
  const std::unordered_set<std::string> made = names_made_in(graph);
  auto known = [&](const std::string& name) {
    return made.count(name) || std::any_of(outer.begin(), outer.end(), [&](const auto* names) { return names->count(name) > 0; });
  };
  const std::string where = graph_label(graph);
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    for (const auto& in : node.input())
      if (!in.empty() && !known(in))
        throw Error(where + ": " + node_label(node, i) + " reads '" + utf8_prefix(in, 80) + "', which no node makes and which is no input " +
                    (outer.empty() ? "or initializer of the graph" : "or initializer of its graph or of a graph around it"));
    outer.push_back(&made);
    for (const auto& a : node.attribute()) {
      if (a.has_g()) check_names_made(a.g(), outer);
      for (const auto& g : a.graphs()) check_names_made(g, outer);
    }
    outer.pop_back();
  }
  for (const auto& y : graph.output())
    if (!known(y.name()))
      throw Error(where + ": its output '" + utf8_prefix(y.name(), 80) + "' is made by no node and is no input or initializer" +
                  (outer.empty() ? "" : " of its graph or of a graph around it"));
}

// A Constant's value_int, value_ints, value_float or value_floats becomes the `value` tensor it
// stands for, in every graph: ONNX's shape inference reads only `value` as data (a Reshape to a
// Constant(value_ints=[8, 8]) had no known size: a QA pass).
void constant_values_as_tensors(onnx::GraphProto& graph) {
  for (auto& node : *graph.mutable_node()) {
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g()) constant_values_as_tensors(*a.mutable_g());
      for (auto& g : *a.mutable_graphs()) constant_values_as_tensors(g);
    }
    // An STFT without `onesided` is onesided (the operator's default, which the cost rule reads),
    // but libonnx 1.12's shape rule reads it as 0: twice the bins, and the two disagreed (a QA pass).
    if (node.op_type() == "STFT" && (node.domain().empty() || node.domain() == "ai.onnx") &&
        std::none_of(node.attribute().begin(), node.attribute().end(), [](const onnx::AttributeProto& a) { return a.name() == "onesided"; })) {
      onnx::AttributeProto& onesided = *node.add_attribute();
      onesided.set_name("onesided"), onesided.set_type(onnx::AttributeProto::INT), onesided.set_i(1);
    }
    if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx") || node.attribute_size() != 1) continue;
    onnx::AttributeProto& a = *node.mutable_attribute(0);
    onnx::TensorProto t;
    if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
      t.set_data_type(onnx::TensorProto::INT64), t.add_int64_data(a.i());
    } else if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
      t.set_data_type(onnx::TensorProto::INT64), t.add_dims(a.ints_size()), *t.mutable_int64_data() = a.ints();
    } else if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
      t.set_data_type(onnx::TensorProto::FLOAT), t.add_float_data(a.f());
    } else if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
      t.set_data_type(onnx::TensorProto::FLOAT), t.add_dims(a.floats_size()), *t.mutable_float_data() = a.floats();
    } else {
      continue;
    }
    a.Clear();
    a.set_name("value"), a.set_type(onnx::AttributeProto::TENSOR);
    *a.mutable_t() = std::move(t);
  }
}

}  // namespace

bool sort_nodes_topologically(onnx::ModelProto& model) {
  std::vector<const std::unordered_set<std::string>*> outer;
  check_names_made(model.graph(), outer);
  return sort_graph(*model.mutable_graph());
}

std::size_t constant_weights_to_initializers(onnx::ModelProto& model) {
  if (model.ir_version() < 4) return 0;  // before IR 4 every initializer is a graph input too
  onnx::GraphProto& g = *model.mutable_graph();
  Consumers consumers;
  std::unordered_map<std::string, int> producer;
  for (int n = 0; n < g.node_size(); ++n) {
    for (int s = 0; s < g.node(n).input_size(); ++s)
      if (!g.node(n).input(s).empty()) consumers[g.node(n).input(s)].push_back({n, s});
    for (const auto& out : g.node(n).output()) producer.emplace(out, n);
  }
  std::unordered_set<std::string> taken;  // graph outputs, initializers and inputs keep their own roles
  for (const auto& o : g.output()) taken.insert(o.name());
  for (const auto& i : g.input()) taken.insert(i.name());
  for (const auto& t : g.initializer()) taken.insert(t.name());
  std::vector<char> moved(static_cast<std::size_t>(g.node_size()), 0);
  std::size_t count = 0;
  for (int n = 0; n < g.node_size(); ++n) {
    const onnx::NodeProto& node = g.node(n);
    if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx") || node.output_size() != 1 ||
        node.attribute_size() != 1 || node.attribute(0).name() != "value" || !node.attribute(0).has_t() || taken.count(node.output(0)))
      continue;
    const onnx::TensorProto& value = node.attribute(0).t();
    std::uint64_t elements = 1;
    for (std::int64_t d : value.dims()) elements *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
    if (!is_floating(dtype_from_onnx(value.data_type())) || value.dims_size() == 0 || elements < 2) continue;
    const SourceUses uses = source_uses(g, consumers, node.output(0));
    // Or a bias added to a product (Paddle2ONNX writes a linear layer as MatMul, then Add).
    bool bias = false;
    if (auto it = consumers.find(node.output(0)); it != consumers.end())
      for (const auto& [reader, slot] : it->second) {
        const onnx::NodeProto& add = g.node(reader);
        if (add.op_type() != "Add" || add.input_size() != 2) continue;
        if (auto p = producer.find(add.input(1 - slot)); p != producer.end()) {
          const std::string& type = g.node(p->second).op_type();
          bias = bias || type == "MatMul" || type == "Gemm" || type == "Conv" || type == "ConvTranspose";
        }
      }
    if (!uses.weight && !uses.buffer && !bias) continue;
    onnx::TensorProto* init = g.add_initializer();
    *init = value;
    init->set_name(node.output(0));
    moved[static_cast<std::size_t>(n)] = 1;
    ++count;
  }
  if (count == 0) return 0;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int n = 0; n < g.node_size(); ++n)
    if (!moved[static_cast<std::size_t>(n)]) *kept.Add() = std::move(*g.mutable_node(n));
  g.mutable_node()->Swap(&kept);
  return count;
}

onnx::ModelProto read_onnx_file(const std::string& path, bool* sorted) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("model file '" + path + "' is a directory, not a file");
  // A device (/dev/zero read 2 GB over 15-20 s before the refusal below: a QA pass); a pipe is
  // read as a file is.
  if (std::filesystem::is_character_file(path, ec) || std::filesystem::is_block_file(path, ec))
    throw Error("model file '" + path + "' is a device, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open model file '" + path + "'");
  // Protobuf reads at most 2 GB in one message (larger models keep their weights in external
  // data): a larger file, or an endless one (/dev/zero), is refused, not read until memory ends.
  constexpr std::size_t kMaxBytes = INT_MAX;  // protobuf's limit: sizes are ints
  const std::string too_large = "model file '" + path + "' is larger than 2 GB, the most an ONNX file can hold (weights beyond it go in external data files)";
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) > kMaxBytes && !ec) throw Error(too_large);
  // Read in blocks (a pipe has no size), at most one byte past the limit, and parsed from the
  // blocks as they are: memory holds the file once (one growing buffer held it twice while it
  // grew: an endless stream took 4 GB before the refusal).
  std::vector<std::vector<char>> blocks;
  std::size_t total = 0;
  for (;;) {
    if (total > kMaxBytes) throw Error(too_large);
    // 1 MB, then as large as what was read so far, up to 64 MB.
    const std::size_t want = std::min({std::max<std::size_t>(total, std::size_t{1} << 20), std::size_t{64} << 20, kMaxBytes + 1 - total});
    std::vector<char> block(want);
    in.read(block.data(), static_cast<std::streamsize>(want));
    block.resize(static_cast<std::size_t>(in.gcount()));
    total += block.size();
    if (!block.empty()) blocks.push_back(std::move(block));
    if (!in) break;
  }
  if (in.bad()) throw Error("cannot read model file '" + path + "'");
  if (total == 0) throw Error("model file '" + path + "' is empty");
  // A fresh stream over the blocks for each parse.
  auto parse = [&blocks](onnx::ModelProto& into, int recursion_limit) {
    std::vector<std::unique_ptr<google::protobuf::io::ArrayInputStream>> arrays;
    std::vector<google::protobuf::io::ZeroCopyInputStream*> parts;
    for (const auto& block : blocks) {
      arrays.push_back(std::make_unique<google::protobuf::io::ArrayInputStream>(block.data(), static_cast<int>(block.size())));
      parts.push_back(arrays.back().get());
    }
    google::protobuf::io::ConcatenatingInputStream stream(parts.data(), static_cast<int>(parts.size()));
    google::protobuf::io::CodedInputStream coded(&stream);
    coded.SetRecursionLimit(recursion_limit);
    return into.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  };
  onnx::ModelProto model;
  if (!parse(model, 100)) {
    // Protobuf refuses messages nested deeper than 100 levels (subgraphs of Ifs and Loops within
    // each other): said so when the file parses with a limit of 2,000 (still bounded: each level
    // takes stack; past it the file is called what it may be, a fuzzing pass's valid file of 1,000
    // nested sequence types having been called "truncated or corrupt").
    onnx::ModelProto deep;
    if (parse(deep, 2000))
      throw Error("model file '" + path +
                  "' nests messages deeper than protobuf's limit of 100 levels (subgraphs within subgraphs, or types within types)");
    throw Error("model file '" + path +
                "' is not a valid ONNX model (protobuf parse failed: truncated or corrupt, or nested past 2,000 levels?)");
  }
  if (!model.has_graph() || model.graph().node_size() == 0)
    throw Error("model file '" + path + "' is not a valid ONNX model (no graph or no nodes)");
  if (model.ir_version() <= 0) throw Error("model file '" + path + "' is not a valid ONNX model (missing or negative IR version)");
  // ONNX requires nodes in topological order; onnxruntime runs files that are not (an fp16 export
  // of ISNet), and so does placer, in that order.
  try {
    const bool moved = sort_nodes_topologically(model);
    if (sorted) *sorted = moved;
    // Calls of model-local functions become their bodies: placer places the ops inside.
    inline_local_functions(model);
    constant_values_as_tensors(*model.mutable_graph());
    constant_weights_to_initializers(model);
    // Small tensors stored apart (shape arithmetic's operands) are read now; weights are not.
    read_small_external_data(model, std::filesystem::path(path).parent_path());
  } catch (const Error& e) {
    throw Error("model file '" + path + "': " + e.what());
  }
  return model;
}

}  // namespace placer
