#include "placer/graph/graph.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <numeric>
#include <optional>
#include <span>
#include <unordered_set>

#include "placer/graph/einsum.hpp"
#include "placer/graph/strides.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

bool is_graph_input_kind(TensorKind k) {
  return k == TensorKind::data || k == TensorKind::parameter || k == TensorKind::buffer || k == TensorKind::constant;
}

// Builds CSR arrays from per-row lists given as (row, value) pairs already grouped by row order.
template <typename Row>
void to_csr(std::size_t rows, const Row& row_items, std::vector<std::uint32_t>& begin, std::vector<std::uint32_t>& items) {
  begin.assign(rows + 1, 0);
  for (std::size_t r = 0; r < rows; ++r) begin[r + 1] = begin[r] + static_cast<std::uint32_t>(row_items(r).size());
  items.clear();
  items.reserve(begin[rows]);
  for (std::size_t r = 0; r < rows; ++r)
    for (auto v : row_items(r)) items.push_back(v);
}

using Shape = std::span<const std::int64_t>;

// The strides of a view of shape `to` over elements of shape `from` laid out with `strides`, when
// one exists (the rule of PyTorch's `view`): walking both shapes from the last dimension, each run
// of `from`'s dimensions that are contiguous with one another must be covered exactly by a run of
// `to`'s, which then steps through it with that run's innermost stride. None when a dimension of
// `to` would straddle two such runs (a transposed or sliced tensor flattened across the cut).
std::optional<std::vector<std::int64_t>> view_strides(Shape from, std::span<const std::int64_t> strides, Shape to) {
  std::vector<std::int64_t> out(to.size(), 1);
  if (from.empty()) return out;
  if (strides.size() != from.size()) return std::nullopt;
  std::int64_t elements = 1;  // (every product below is at most this)
  for (std::int64_t d : from)
    if (d <= 0 || __builtin_mul_overflow(elements, d, &elements)) return std::nullopt;
  std::int64_t t = static_cast<std::int64_t>(to.size()) - 1;
  std::int64_t base = strides.back(), run = 1, covered = 1;
  for (std::int64_t f = static_cast<std::int64_t>(from.size()) - 1; f >= 0; --f) {
    run *= from[static_cast<std::size_t>(f)];
    // The run ends at the first dimension, or where the next one out does not continue it.
    const bool run_ends = f == 0 || (from[static_cast<std::size_t>(f - 1)] != 1 && strides[static_cast<std::size_t>(f - 1)] != run * base);
    if (!run_ends) continue;
    while (t >= 0 && (covered < run || to[static_cast<std::size_t>(t)] == 1)) {
      out[static_cast<std::size_t>(t)] = covered * base;
      covered *= to[static_cast<std::size_t>(t)];
      --t;
    }
    if (covered != run) return std::nullopt;
    if (f > 0) base = strides[static_cast<std::size_t>(f - 1)], run = 1, covered = 1;
  }
  if (t != -1) return std::nullopt;
  return out;
}

// The strides of `to` viewing elements of shape `from` (laid out with `strides`) broadcast to it,
// PyTorch's expand after the unsqueezes a sum's gradient makes: walking both shapes from the last
// dimension, a dimension of `to` equal to the next one of `from` keeps its stride, another steps 0
// (a dimension of size 1 of `from` between them is passed over). None when a dimension of `from`
// of size > 1 is left unmatched.
std::optional<std::vector<std::int64_t>> broadcast_strides(Shape from, std::span<const std::int64_t> strides, Shape to) {
  if (strides.size() != from.size()) return std::nullopt;
  std::vector<std::int64_t> out(to.size(), 0);
  std::size_t f = from.size();
  for (std::size_t k = to.size(); k-- > 0;) {
    while (f > 0 && from[f - 1] == 1 && to[k] != 1) --f;
    if (f > 0 && from[f - 1] == to[k]) out[k] = strides[--f];
  }
  while (f > 0 && from[f - 1] == 1) --f;
  if (f != 0) return std::nullopt;
  return out;
}

}  // namespace

std::vector<std::int64_t> Graph::tensor_strides(TensorId t) const {
  if (tensor_permuted_[t] != 0) return permuted_strides_[tensor_permuted_[t] - 1];
  return row_major_strides(tensor_shape(t));
}

std::uint64_t Graph::tensor_elements(TensorId t) const {
  std::uint64_t n = 1;
  for (auto d : tensor_shape(t)) n *= static_cast<std::uint64_t>(d);
  return n;
}

TensorDesc Graph::tensor_desc(TensorId t) const {
  if (t == kNoId) return TensorDesc{{}, DType::unknown, false};
  return TensorDesc{tensor_shape(t), tensor_dtype(t), true};
}

ModuleId Graph::module_ancestor(ModuleId m, std::uint32_t depth) const {
  while (module_depth_[m] > depth) m = module_parent_[m];
  return m;
}

std::optional<ModuleId> Graph::find_module(std::string_view path) const {
  auto it = module_by_name_.find(path);
  if (it == module_by_name_.end()) return std::nullopt;
  return it->second;
}

OpId Graph::find_op(std::string_view name) const {
  auto it = op_by_name_.find(name);
  return it == op_by_name_.end() ? kNoId : it->second;
}

TensorId Graph::find_tensor(std::string_view name) const {
  auto it = tensor_by_name_.find(name);
  return it == tensor_by_name_.end() ? kNoId : it->second;
}

bool Graph::tensor_is_view(TensorId t) const {
  const OpId p = producer_[t];
  if (p == kNoId || op_views_[p] == 0) return false;
  const auto outs = op_outputs(p);
  for (std::size_t i = 0; i < outs.size() && i < 32; ++i)
    if (outs[i] == t && (op_views_[p] >> i & 1u)) return true;
  return false;
}

GraphBuilder::GraphBuilder(std::string graph_name) : graph_name_(std::move(graph_name)) {}

TensorId GraphBuilder::add_tensor(std::string name, std::vector<std::int64_t> shape, DType dtype, TensorKind kind) {
  auto id = static_cast<TensorId>(tensors_.size());
  auto [it, inserted] = tensor_by_name_.emplace(name, id);
  if (!inserted) throw Error("tensor '" + name + "' is defined twice");
  tensors_.push_back({std::move(name), std::move(shape), dtype, kind});
  return id;
}

TensorId GraphBuilder::find_tensor(std::string_view name) const {
  auto it = tensor_by_name_.find(std::string(name));
  return it == tensor_by_name_.end() ? kNoId : it->second;
}

void GraphBuilder::set_tensor_kind(TensorId t, TensorKind kind) { tensors_.at(t).kind = kind; }
void GraphBuilder::set_tensor_accumulated(TensorId t) { tensors_.at(t).accumulated = true; }

std::vector<bool> repeated_ids(std::span<const TensorId> ids) {
  std::vector<bool> repeated(ids.size(), false);
  if (ids.size() <= 32) {
    for (std::size_t i = 1; i < ids.size(); ++i)
      repeated[i] = ids[i] != kNoId && std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(i), ids[i]) != ids.begin() + static_cast<std::ptrdiff_t>(i);
    return repeated;
  }
  std::unordered_set<TensorId> seen;
  seen.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) repeated[i] = ids[i] != kNoId && !seen.insert(ids[i]).second;
  return repeated;
}

OpId GraphBuilder::add_op(OpSpec spec) {
  auto id = static_cast<OpId>(ops_.size());
  for (TensorId t : spec.inputs)
    if (t != kNoId && t >= tensors_.size()) throw Error("op '" + spec.name + "': input tensor id out of range");
  // Checked in full before anything changes: a builder that threw stays as it was.
  for (TensorId t : spec.outputs)
    if (t == kNoId || t >= tensors_.size()) throw Error("op '" + spec.name + "': output tensor id out of range");
  const std::vector<bool> listed_before = repeated_ids(spec.outputs);
  for (std::size_t i = 0; i < spec.outputs.size(); ++i) {
    const TensorId t = spec.outputs[i];
    const auto& tensor = tensors_[t];
    if (listed_before[i]) throw Error("op '" + spec.name + "' lists output tensor '" + tensor.name + "' twice");
    if (tensor.producer != kNoId)
      throw Error("tensor '" + tensor.name + "' is produced twice: by op '" + ops_[tensor.producer].name + "' and by op '" +
                  spec.name + "'");
  }
  if (spec.view_outputs != 0) {
    // A declared view shares input 0's storage: it needs that input, and its type; it holds all of
    // that input's elements (a gradient passed through) or some of them (a Concat's gradient: a
    // slice of dY, PyTorch's narrow), or, for an Expand, repeats them.
    const TensorId base = spec.inputs.empty() ? kNoId : spec.inputs[0];
    if (base == kNoId) throw Error("op '" + spec.name + "' declares views of its first input but has none");
    auto elements = [](const TensorSpec& t) {
      std::uint64_t n = 1;
      for (std::int64_t d : t.shape) n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
      return n;
    };
    for (std::size_t i = 0; i < 32; ++i) {
      if (!(spec.view_outputs >> i & 1u)) continue;
      if (i >= spec.outputs.size())
        throw Error("op '" + spec.name + "' declares output " + std::to_string(i) + " a view, but has " + std::to_string(spec.outputs.size()) +
                    " outputs");
      const TensorSpec &out = tensors_[spec.outputs[i]], &in = tensors_[base];
      // An Expand repeats what it views, as a gradient broadcast back does (ReduceSum's; a
      // one-operand Einsum's, permuted back too: einsum_layout).
      if (out.dtype != in.dtype || (elements(out) > elements(in) && spec.type != "Expand" && spec.type != "EinsumGrad" &&
                                    !broadcast_strides(in.shape, row_major_strides(in.shape), out.shape)))
        throw Error("op '" + spec.name + "' declares output '" + out.name + "' a view of its input '" + in.name +
                    "', but it is larger than that input or of another element type");
    }
  }
  for (TensorId t : spec.outputs) tensors_[t].producer = id;
  ops_.push_back(std::move(spec));
  return id;
}

void GraphBuilder::mark_output(TensorId t) { outputs_.push_back(t); }

Graph GraphBuilder::build() && {
  Graph g;
  g.name_ = std::move(graph_name_);
  const std::size_t num_ops = ops_.size();
  const std::size_t num_tensors = tensors_.size();
  g.num_forward_ops_ = num_forward_ops_ == kNoId ? num_ops : num_forward_ops_;
  if (g.num_forward_ops_ > num_ops)
    throw Error("graph '" + g.name_ + "' declares " + std::to_string(g.num_forward_ops_) + " forward ops but holds only " +
                std::to_string(num_ops) + " ops");
  g.optimizer_state_copies_ = optimizer_state_copies_;
  // The forward ops come first, then the backward and update ops of a training step; a gradient
  // op names the forward op it differentiates.
  std::vector<OpId> updater(num_tensors, kNoId);  // the update op of each parameter, to refuse a second
  for (std::size_t o = 0; o < num_ops; ++o) {
    const bool forward = ops_[o].role == OpRole::forward;
    if (forward != (o < g.num_forward_ops_))
      throw GraphError("graph '" + g.name_ + "' declares " + std::to_string(g.num_forward_ops_) + " forward ops (listed first), but op '" +
                           ops_[o].name + "' (number " + std::to_string(o) + ") has role '" + std::string(op_role_name(ops_[o].role)) + "'",
                       static_cast<OpId>(o));
    const OpId f = ops_[o].forward_op;
    // A backward op runs where its forward op runs, an update where its parameter lives: without
    // either it had no place of its own and silently followed the graph's first op.
    if (ops_[o].role == OpRole::backward && f == kNoId)
      throw GraphError("op '" + ops_[o].name + "': a backward op must name the forward op it differentiates (forward_op): it runs where that op runs",
                       static_cast<OpId>(o));
    if (ops_[o].role == OpRole::update && f == kNoId && ops_[o].param == kNoId)
      throw GraphError("op '" + ops_[o].name + "': an update op must name the parameter it updates (param) or a forward op (forward_op)",
                       static_cast<OpId>(o));
    // An update runs where its parameter lives: a tensor of another kind (an activation, data) has
    // no home of its own, and the update silently followed the graph's first op.
    const TensorId param = ops_[o].param;
    if (param != kNoId && ops_[o].role != OpRole::update)
      throw GraphError("op '" + ops_[o].name + "': only update ops name the parameter they update (param)", static_cast<OpId>(o));
    if (param != kNoId && (param >= num_tensors || tensors_[param].kind != TensorKind::parameter))
      throw GraphError("op '" + ops_[o].name + "': its param " +
                           (param < num_tensors ? "'" + tensors_[param].name + "' is not a parameter (its kind: " +
                                                      std::string(tensor_kind_name(tensors_[param].kind)) + ")"
                                                : std::string("is not a tensor of the graph")),
                       static_cast<OpId>(o));
    // Two updates of one parameter would apply the optimizer twice per step (and count its work twice).
    if (param != kNoId) {
      if (updater[param] != kNoId)
        throw GraphError("ops '" + ops_[updater[param]].name + "' and '" + ops_[o].name + "' both update parameter '" + tensors_[param].name +
                             "': a parameter has one update op per step",
                         static_cast<OpId>(o));
      updater[param] = static_cast<OpId>(o);
    }
    if (f != kNoId && (f >= g.num_forward_ops_ || forward))
      throw GraphError("op '" + ops_[o].name + "': its forward_op must be a forward op, and only backward and update ops name one" +
                           (f < num_ops ? " (it names '" + ops_[f].name + "')" : std::string()),
                       static_cast<OpId>(o));
  }

  // Tensors: shapes, sizes, kinds.
  g.tensor_name_.reserve(num_tensors);
  g.shape_begin_.reserve(num_tensors + 1);
  g.shape_begin_.push_back(0);
  for (std::size_t ti = 0; ti < num_tensors; ++ti) {
    auto& t = tensors_[ti];
    auto where = [&] {
      return t.producer != kNoId ? " (output of op '" + ops_[t.producer].name + "')" : std::string();
    };
    const auto id = static_cast<TensorId>(ti);
    if (t.dtype == DType::string)
      throw GraphError("tensor '" + t.name + "'" + where() + ": a tensor of strings (placer places ops on numeric tensors: text is "
                       "tokenized before the model)", kNoId, id);
    if (t.dtype == DType::unknown)
      throw GraphError("tensor '" + t.name + "'" + where() + ": unknown or unsupported element type (complex and 8-bit float types are not supported)",
                       kNoId, id);
    std::uint64_t elements = 1;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] <= 0)
        throw GraphError("tensor '" + t.name + "'" + where() + ": dimension " + std::to_string(i) + " of shape " +
                             dims_text(t.shape) + " is missing or not positive",
                         kNoId, id);
      if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(t.shape[i]), &elements))
        throw GraphError("tensor '" + t.name + "'" + where() + ": shape " + dims_text(t.shape) + " overflows 64 bits", kNoId, id);
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(dtype_size(t.dtype)), &bytes))
      throw GraphError("tensor '" + t.name + "'" + where() + ": size in bytes overflows 64 bits", kNoId, id);
    g.shape_dims_.insert(g.shape_dims_.end(), t.shape.begin(), t.shape.end());
    g.shape_begin_.push_back(static_cast<std::uint32_t>(g.shape_dims_.size()));
    g.tensor_dtype_.push_back(t.dtype);
    g.tensor_bytes_.push_back(bytes);
    g.tensor_kind_.push_back(t.kind);
    g.producer_.push_back(t.producer);
  }

  // Memory is counted in 64 bits (per device, copies and optimizer state included): every tensor
  // once, plus the optimizer's copies of every parameter, must fit with room to spare, or a sum
  // could wrap around and a placement that cannot fit would look as if it did.
  {
    std::uint64_t total = 0;
    bool wraps = false;
    for (TensorId t = 0; t < num_tensors && !wraps; ++t) {
      std::uint64_t bytes = g.tensor_bytes_[t];
      if (tensors_[t].kind == TensorKind::parameter) wraps |= __builtin_mul_overflow(bytes, std::uint64_t{g.optimizer_state_copies_} + 1, &bytes);
      wraps |= __builtin_add_overflow(total, bytes, &total);
    }
    if (wraps || total > (std::uint64_t{1} << 62))
      throw Error("graph '" + g.name_ + "': its tensors (with the optimizer's state) take more than 2^62 bytes in all, more memory than placer counts");
  }

  // Dangling inputs: a tensor read by an op must be produced by one or be a graph input.
  for (std::size_t o = 0; o < num_ops; ++o)
    for (TensorId t : ops_[o].inputs)
      if (t != kNoId && tensors_[t].producer == kNoId && !is_graph_input_kind(tensors_[t].kind))
        throw GraphError("op '" + ops_[o].name + "': input tensor '" + tensors_[t].name +
                             "' is produced by no op and is not a graph input (dangling input)",
                         static_cast<OpId>(o));
  for (TensorId t : outputs_)
    if (tensors_[t].producer == kNoId && !is_graph_input_kind(tensors_[t].kind))
      throw Error("graph output '" + tensors_[t].name + "' is produced by no op");
  {
    std::vector<TensorId> sorted = outputs_;
    std::sort(sorted.begin(), sorted.end());
    if (auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
      throw Error("graph output '" + tensors_[*twice].name + "' is listed twice");
  }

  // CSR: op inputs and outputs, tensor consumers, op successors and predecessors.
  to_csr(num_ops, [&](std::size_t o) -> const std::vector<TensorId>& { return ops_[o].inputs; }, g.op_input_begin_,
         g.op_inputs_);
  to_csr(num_ops, [&](std::size_t o) -> const std::vector<TensorId>& { return ops_[o].outputs; }, g.op_output_begin_,
         g.op_outputs_);
  {
    // An op reading a tensor twice counts once among its consumers: each tensor remembers the
    // op that last counted it (a search of the op's earlier inputs instead was quadratic in
    // them: 22 s for one Sum of 200,000 inputs, a QA pass).
    std::vector<std::uint32_t> count(num_tensors + 1, 0);
    std::vector<OpId> counted_by(num_tensors, kNoId);
    for (std::size_t o = 0; o < num_ops; ++o)
      for (TensorId t : g.op_inputs(static_cast<OpId>(o)))
        if (t != kNoId && counted_by[t] != o) counted_by[t] = static_cast<OpId>(o), ++count[t + 1];
    std::partial_sum(count.begin(), count.end(), count.begin());
    g.consumer_begin_ = count;
    g.consumers_.assign(count.back(), kNoId);
    std::fill(counted_by.begin(), counted_by.end(), kNoId);
    for (std::size_t o = 0; o < num_ops; ++o)
      for (TensorId t : g.op_inputs(static_cast<OpId>(o)))
        if (t != kNoId && counted_by[t] != o) counted_by[t] = static_cast<OpId>(o), g.consumers_[count[t]++] = static_cast<OpId>(o);
  }
  {
    std::vector<std::vector<OpId>> preds(num_ops);
    for (std::size_t o = 0; o < num_ops; ++o) {
      for (TensorId t : g.op_inputs(static_cast<OpId>(o)))
        if (t != kNoId && g.producer_[t] != kNoId) preds[o].push_back(g.producer_[t]);
      std::sort(preds[o].begin(), preds[o].end());
      preds[o].erase(std::unique(preds[o].begin(), preds[o].end()), preds[o].end());
    }
    std::vector<std::vector<OpId>> succs(num_ops);
    for (std::size_t o = 0; o < num_ops; ++o)
      for (OpId p : preds[o]) succs[p].push_back(static_cast<OpId>(o));  // ascending since o ascends
    to_csr(num_ops, [&](std::size_t o) -> const std::vector<OpId>& { return preds[o]; }, g.pred_begin_, g.pred_);
    to_csr(num_ops, [&](std::size_t o) -> const std::vector<OpId>& { return succs[o]; }, g.succ_begin_, g.succ_);
  }

  // Topological order: Kahn's algorithm taking the lowest ready op id first, so that it is program
  // order (the op ids themselves) whenever the ids are already topological, as ONNX's node order
  // and derived training steps are. Leftovers mean a cycle.
  {
    std::vector<std::uint32_t> missing(num_ops);
    std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
    for (std::size_t o = 0; o < num_ops; ++o) {
      missing[o] = g.pred_begin_[o + 1] - g.pred_begin_[o];
      if (missing[o] == 0) ready.push(static_cast<OpId>(o));
    }
    g.topo_.reserve(num_ops);
    while (!ready.empty()) {
      const OpId o = ready.top();
      ready.pop();
      g.topo_.push_back(o);
      for (OpId s : g.successors(o))
        if (--missing[s] == 0) ready.push(s);
    }
    // Indexed by op id: with a cycle, topo_ holds fewer ops than there are (reported below).
    g.topo_rank_.assign(num_ops, kNoId);
    for (std::size_t i = 0; i < g.topo_.size(); ++i) g.topo_rank_[g.topo_[i]] = static_cast<std::uint32_t>(i);
    if (g.topo_.size() != num_ops) {
      // Walk back along unfinished predecessors until an op repeats: that loop is a cycle.
      OpId start = 0;
      while (missing[start] == 0) ++start;
      std::vector<OpId> path{start};
      std::vector<std::int64_t> seen_at(num_ops, -1);
      seen_at[start] = 0;
      for (;;) {
        OpId cur = path.back(), next = kNoId;
        for (OpId p : g.predecessors(cur))
          if (missing[p] != 0) { next = p; break; }
        if (seen_at[next] >= 0) {
          // path[i + 1] feeds path[i], and next (= path[seen_at[next]]) feeds path.back().
          // A long cycle shows its first and last five ops.
          std::vector<OpId> cycle(path.rbegin(), path.rend() - seen_at[next]);
          cycle.push_back(path.back());
          std::string msg = "the graph has a cycle";
          if (cycle.size() > 12) msg += " of " + std::to_string(cycle.size() - 1) + " ops";
          msg += ": ";
          for (std::size_t i = 0; i < cycle.size(); ++i) {
            if (cycle.size() > 12 && i == 5) {
              msg += "... -> ";
              i = cycle.size() - 6;
            }
            msg += in_quotes(ops_[cycle[i]].name) + (i + 1 < cycle.size() ? " -> " : "");
          }
          throw Error(msg);
        }
        seen_at[next] = static_cast<std::int64_t>(path.size());
        path.push_back(next);
      }
    }
  }

  // Modules: intern every path and its dot-separated ancestors; parents get smaller ids. Every
  // ancestor is a string of its own, so memory grows with the square of a path's depth: paths
  // deeper than any model's are refused (a 100 KB name of 16,000 levels took 1.8 GB).
  for (std::size_t o = 0; o < num_ops; ++o)
    if (const auto depth = std::count(ops_[o].module.begin(), ops_[o].module.end(), '.') + 1; depth > kMaxModuleDepth)
      throw GraphError("op " + in_quotes(ops_[o].name) + ": its module path is " + std::to_string(depth) + " levels deep (at most " +
                           std::to_string(kMaxModuleDepth) + ")",
                       static_cast<OpId>(o));
  g.module_names_.push_back("");
  g.module_parent_.push_back(0);
  g.module_depth_.push_back(0);
  std::unordered_map<std::string, ModuleId> module_ids{{"", 0}};
  std::size_t module_bytes = 0;
  auto intern = [&](const std::string& path, auto& self) -> ModuleId {
    if (auto it = module_ids.find(path); it != module_ids.end()) return it->second;
    if ((module_bytes += path.size()) > kMaxModulePathBytes) throw Error(module_paths_too_long());
    auto dot = path.rfind('.');
    ModuleId parent = dot == std::string::npos ? 0 : self(path.substr(0, dot), self);
    auto id = static_cast<ModuleId>(g.module_names_.size());
    module_ids.emplace(path, id);
    g.module_names_.push_back(path);
    g.module_parent_.push_back(parent);
    g.module_depth_.push_back(g.module_depth_[parent] + 1);
    return id;
  };

  // Ops: names, interned types and modules, roles, work, attributes.
  std::unordered_map<std::string, std::uint32_t> type_ids;
  g.op_name_.reserve(num_ops);
  for (auto& op : ops_) {
    auto [it, inserted] = type_ids.emplace(op.type, static_cast<std::uint32_t>(g.type_names_.size()));
    if (inserted) g.type_names_.push_back(op.type);
    g.op_type_.push_back(it->second);
    g.op_module_.push_back(intern(op.module, intern));
    g.op_call_.push_back(op.call);
    g.op_role_.push_back(op.role);
    g.forward_op_.push_back(op.forward_op);
    g.updated_param_.push_back(op.param);
    g.op_work_.push_back(op.work);
    g.op_views_.push_back(op.view_outputs);
    g.op_attrs_.push_back(std::move(op.attrs));
    g.op_name_.push_back(std::move(op.name));
  }
  g.outputs_ = std::move(outputs_);
  g.param_updated_.assign(num_tensors, 0);
  for (std::size_t o = 0; o < num_ops; ++o)
    if (g.op_role_[o] == OpRole::update && g.updated_param_[o] != kNoId) g.param_updated_[g.updated_param_[o]] = 1;

  // Set-up values (see Graph::op_folded), in topological order.
  g.op_folded_.assign(num_ops, 0);
  g.tensor_folded_.assign(num_tensors, 0);
  for (std::size_t t = 0; t < num_tensors; ++t)
    g.tensor_folded_[t] = g.producer_[t] == kNoId && g.tensor_kind_[t] == TensorKind::constant;
  for (OpId o : g.topo_) {
    if (g.op_role_[o] != OpRole::forward) continue;
    const std::string& type = g.type_names_[g.op_type_[o]];
    bool folded = type == "Constant" || type == "Shape" || type == "Size";
    // A random op draws anew every step, whatever it reads.
    const bool random = type.starts_with("Random") || type == "Bernoulli" || type == "Multinomial";
    if (!folded && !random) {
      bool any = false, all = true;
      for (TensorId t : g.op_inputs(o))
        if (t != kNoId) any = true, all = all && g.tensor_folded_[t];
      folded = any && all;
    }
    if (!folded) continue;
    g.op_folded_[o] = 1;
    ++g.num_folded_ops_;
    for (TensorId t : g.op_outputs(o)) g.tensor_folded_[t] = 1;
  }

  // Partials summed on arrival: a gradient an op produces, read by exactly one op.
  g.tensor_accumulated_.assign(num_tensors, 0);
  for (std::size_t t = 0; t < num_tensors; ++t) {
    if (!tensors_[t].accumulated) continue;
    const auto readers = g.consumers(static_cast<TensorId>(t));
    const bool output = std::find(g.outputs_.begin(), g.outputs_.end(), static_cast<TensorId>(t)) != g.outputs_.end();
    if (tensors_[t].kind != TensorKind::gradient || tensors_[t].producer == kNoId || readers.size() != 1 || output)
      throw GraphError("tensor '" + tensors_[t].name + "' is marked accumulated (a partial gradient summed into another when it arrives), but " +
                           (tensors_[t].kind != TensorKind::gradient ? std::string("it is not a gradient")
                            : tensors_[t].producer == kNoId          ? std::string("no op produces it")
                            : output                                 ? std::string("it is a graph output")
                                                                     : "it is read by " + std::to_string(readers.size()) + " ops, not one"),
                       kNoId, static_cast<TensorId>(t));
    g.tensor_accumulated_[t] = 1;
  }

  // Views (see Graph::op_view_outputs): an alias's first output, a Transpose's, a Split's outputs
  // and declared ones; none for an op that is folded or whose first input is absent or a set-up
  // value. Walked in topological order so that each view knows the strides of what it views, as
  // PyTorch's tensors carry them: a Transpose permutes them, a part (a Split's output, a Concat
  // gradient's slice) keeps its input's, and a Reshape or Flatten is a view only where PyTorch's
  // `view` could make one of those strides (view_strides), else it copies into row-major order.
  std::vector<std::vector<std::int64_t>> strides(num_tensors);  // of views; empty: row-major
  auto strides_of = [&](TensorId t) {
    if (!strides[t].empty() || g.tensor_shape(t).empty()) return strides[t];
    return row_major_strides(g.tensor_shape(t));
  };
  // An Einsum's layout (einsum_layout) from its operands' strides; none when not modelled.
  auto einsum_of = [&](OpId f) { return einsum_layout_of(g, f, strides_of); };
  for (OpId o : g.topo_) {
    const auto ins = g.op_inputs(o);
    const auto outs = g.op_outputs(o);
    std::uint32_t& views = g.op_views_[o];
    const std::string& op_type = g.type_names_[g.op_type_[o]];
    if (op_type == "EinsumGrad" && g.forward_op_[o] != kNoId && g.type_names_[g.op_type_[g.forward_op_[o]]] == "Einsum") {
      // A batched product's gradients come in the product's order, a one-operand Einsum's is dY
      // permuted or broadcast back (einsum_layout); a tensor read twice gets the sum of two, taken
      // as in order.
      const OpId f = g.forward_op_[o];
      if (const auto layout = einsum_of(f)) {
        const auto fins = g.op_inputs(f);
        for (TensorId t : outs)
          for (std::size_t i = 0; t != kNoId && i < fins.size(); ++i)
            if (std::ranges::count(fins, fins[i]) == 1 && tensors_[t].name == "grad/" + tensors_[fins[i]].name + "/" + g.op_name_[f])
              if (layout->gradient_strides[i].size() == g.tensor_shape(t).size()) strides[t] = layout->gradient_strides[i];
      }
    }
    if (g.op_folded_[o] || ins.empty() || ins[0] == kNoId || g.tensor_folded_[ins[0]] || outs.empty()) {
      views = 0;
      continue;
    }
    const TensorId in = ins[0], out = outs[0];
    const bool same_bytes = g.tensor_bytes_[out] == g.tensor_bytes_[in];
    const std::string& type = op_type;
    if (op_type == "TransposeGrad" && g.forward_op_[o] != kNoId && g.type_names_[g.op_type_[g.forward_op_[o]]] == "Transpose" &&
        !ins.empty() && ins[0] != kNoId && !outs.empty() && outs[0] != kNoId) {
      // dY permuted back (PyTorch's permute): the gradient's dimension perm[k] strides as dY's k;
      // dY's own strides when the gradient views it, a row-major sum's when the partials were
      // summed into a tensor of its own (which autograd then permutes alike).
      const OpId f = g.forward_op_[o];
      auto perm = g.op_attrs_[f].get_ints("perm");
      const std::size_t rank = g.tensor_shape(outs[0]).size();
      if (perm.empty())
        for (std::size_t k = rank; k-- > 0;) perm.push_back(static_cast<std::int64_t>(k));
      const std::vector<std::int64_t> dy = (views & 1u) ? strides_of(ins[0]) : row_major_strides(g.tensor_shape(ins[0]));
      std::vector<std::int64_t> back(rank, -1);
      bool valid = perm.size() == rank && dy.size() == rank;
      for (std::size_t k = 0; valid && k < rank; ++k) {
        valid = perm[k] >= 0 && perm[k] < static_cast<std::int64_t>(rank) && back[static_cast<std::size_t>(perm[k])] < 0;
        if (valid) back[static_cast<std::size_t>(perm[k])] = dy[k];
      }
      if (valid) strides[outs[0]] = std::move(back);
    }
    if (type == "Einsum" && g.op_role_[o] == OpRole::forward) {
      // PyTorch's einsum: the batched product's storage, in its order; one operand permuted, a view of it.
      if (const auto layout = einsum_of(o)) {
        if (layout->view && same_bytes && g.tensor_dtype_[out] == g.tensor_dtype_[in]) views |= 1u;
        if (layout->output_strides.size() == g.tensor_shape(out).size()) strides[out] = layout->output_strides;
      }
      continue;
    }
    if (type == "Split" && g.op_work_[o].op_class != OpClass::alias) {
      // PyTorch's split: every output a view of a part of the input (of its type).
      for (std::size_t i = 0; i < outs.size() && i < 32; ++i)
        if (outs[i] != kNoId && g.tensor_dtype_[outs[i]] == g.tensor_dtype_[in]) views |= 1u << i;
    }
    if (type == "Expand" && g.tensor_dtype_[out] == g.tensor_dtype_[in]) {
      // PyTorch's expand: a view that repeats its input's elements, stride 0 along every dimension
      // it broadcasts (ONNX aligns the shapes at their last dimension). No storage of its own: an
      // Expand feeding an Add was measured a whole output over, one kept as a graph output 127
      // times over.
      const Shape from = g.tensor_shape(in), to = g.tensor_shape(out);
      if (to.size() < from.size()) continue;
      const std::vector<std::int64_t> in_strides = strides_of(in);
      std::vector<std::int64_t> expanded(to.size(), 0);
      const std::size_t lead = to.size() - from.size();
      bool valid = in_strides.size() == from.size();
      for (std::size_t k = lead; valid && k < to.size(); ++k) {
        if (from[k - lead] == to[k]) expanded[k] = in_strides[k - lead];
        else valid = from[k - lead] == 1;  // broadcast: stride 0
      }
      if (valid) views |= 1u, strides[out] = std::move(expanded);
      else views &= ~1u;  // (a graph JSON's declared view that is no broadcast of its input)
      continue;
    }
    if (type == "LSTM" || type == "GRU" || type == "RNN") {
      // PyTorch's bidirectional layer gives [seq, batch, 2 x hidden]; ONNX's Y, [seq, 2, batch,
      // hidden], is a permuted view of it (the executor's, exec/executor.cpp), which the Transpose
      // and Reshape an exporter puts after the node turn back into a view of that storage.
      const Shape y = g.tensor_shape(out);
      if (recurrent_as_pytorch_layer(type, g.op_attrs_[o], ins.size() > 7 && ins[7] != kNoId) && g.op_attrs_[o].get_int("layout", 0) == 0 &&
          y.size() == 4 && y[1] == 2)
        strides[out] = {y[2] * 2 * y[3], y[3], 2 * y[3], 1};
    }
    const bool alias = g.op_work_[o].op_class == OpClass::alias;
    if (views == 0 && !((type == "Transpose" || alias) && same_bytes)) continue;  // no view: nothing to stride
    const std::vector<std::int64_t> in_strides = strides_of(in);
    // Declared views and a Split's parts: a part of the same rank (a Split's, a Concat gradient's
    // slice) or the whole as it is (a gradient passed through) has the input's strides; another
    // shape those a view of it would have, if any (else taken as in order).
    for (std::size_t i = 0; i < outs.size() && i < 32; ++i)
      if ((views >> i & 1u) && outs[i] != kNoId) {
        const Shape whole = g.tensor_shape(in), part = g.tensor_shape(outs[i]);
        if (!strides[outs[i]].empty()) continue;  // (an Einsum's gradient, above)
        const bool as_is = std::ranges::equal(whole, part) || (whole.size() == part.size() && g.tensor_bytes_[outs[i]] < g.tensor_bytes_[in]);
        if (g.tensor_elements(outs[i]) > g.tensor_elements(in)) {  // (ReduceSum's gradient: dY expanded)
          strides[outs[i]] = broadcast_strides(whole, in_strides, part).value_or(std::vector<std::int64_t>{});
          continue;
        }
        strides[outs[i]] = as_is ? in_strides : view_strides(whole, in_strides, part).value_or(std::vector<std::int64_t>{});
      }
    if (type == "Transpose" && same_bytes) {
      // PyTorch's permute: a view with permuted strides.
      views |= 1u;
      auto perm = g.op_attrs_[o].get_ints("perm");
      const std::size_t rank = g.tensor_shape(in).size();
      if (perm.empty())  // ONNX's default reverses the dimensions
        for (std::size_t k = rank; k-- > 0;) perm.push_back(static_cast<std::int64_t>(k));
      std::vector<std::int64_t> permuted(rank);
      bool valid = perm.size() == rank && rank == g.tensor_shape(out).size();
      for (std::size_t k = 0; valid && k < rank; ++k) {
        valid = perm[k] >= 0 && perm[k] < static_cast<std::int64_t>(rank);
        if (valid) permuted[k] = in_strides[static_cast<std::size_t>(perm[k])];
      }
      strides[out] = valid ? std::move(permuted) : std::vector<std::int64_t>{};
    } else if (alias && same_bytes) {
      // An alias's first output is a view of its first input when it has as many bytes (a Reshape);
      // one of another size or type (an unknown op priced as an alias) has storage of its own.
      auto view = view_strides(g.tensor_shape(in), in_strides, g.tensor_shape(out));
      // (Their gradients too: dY reshaped back, a copy when dY is a permuted view, as attention's
      // heads' gradient after a Transpose's.)
      const bool reshapes = type == "Reshape" || type == "Flatten" || type == "ReshapeGrad" || type == "FlattenGrad";
      if (reshapes && !view) {
        views &= ~1u;  // a copy in row-major order
        strides[out].clear();
      } else {
        views |= 1u;  // (Squeeze and Unsqueeze always find strides; another alias keeps its order)
        strides[out] = view ? std::move(*view) : in_strides;
        if (strides[out].size() != g.tensor_shape(out).size()) strides[out].clear();
      }
    }
  }
  g.tensor_permuted_.assign(num_tensors, 0);
  for (TensorId t = 0; t < num_tensors; ++t)
    if (!strides[t].empty() && !in_row_major_order(g.tensor_shape(t), strides[t])) {
      g.permuted_strides_.push_back(std::move(strides[t]));
      g.tensor_permuted_[t] = static_cast<std::uint32_t>(g.permuted_strides_.size());
    }

  // Homes of tensors without a producer: their first consumer in topological order that is not
  // folded (a Shape of the data input runs before the step, anywhere), else their first consumer.
  g.param_home_.assign(num_tensors, kNoId);
  for (int pass = 0; pass < 2; ++pass)
    for (OpId o : g.topo_) {
      if (pass == 0 && g.op_folded_[o]) continue;
      for (TensorId t : g.op_inputs(o))
        if (t != kNoId && g.producer_[t] == kNoId && g.param_home_[t] == kNoId) g.param_home_[t] = o;
    }
  // An update placed by its parameter runs where a forward op reads that parameter.
  for (std::size_t o = 0; o < num_ops; ++o)
    if (const TensorId p = g.updated_param_[o]; p != kNoId && g.forward_op_[o] == kNoId &&
                                                 (g.param_home_[p] == kNoId || g.param_home_[p] >= g.num_forward_ops_))
      throw GraphError("op '" + g.op_name_[o] + "': the parameter it updates, '" + tensors_[p].name +
                           "', is read by no forward op, so it has no device to run on (name a forward_op)",
                       static_cast<OpId>(o));
  for (auto& t : tensors_) g.tensor_name_.push_back(std::move(t.name));

  for (std::size_t o = 0; o < num_ops; ++o)
    if (!g.op_by_name_.emplace(g.op_name_[o], static_cast<OpId>(o)).second)
      throw GraphError("op name '" + g.op_name_[o] + "' is used twice", static_cast<OpId>(o));
  for (std::size_t t = 0; t < num_tensors; ++t) g.tensor_by_name_.emplace(g.tensor_name_[t], static_cast<TensorId>(t));
  for (std::size_t m = 0; m < g.module_names_.size(); ++m)
    g.module_by_name_.emplace(g.module_names_[m], static_cast<ModuleId>(m));
  return g;
}

GraphTotals graph_totals(const Graph& g) {
  GraphTotals totals;
  totals.ops = g.num_ops();
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    // A parameter or buffer no op reads (an initializer read only through an Identity alias, which
    // has a tensor of its own, or one of an If branch not taken) is neither trained nor placed.
    const bool unread = g.producer(t) == kNoId && g.consumers(t).empty();
    if (unread && (g.tensor_kind(t) == TensorKind::parameter || g.tensor_kind(t) == TensorKind::buffer)) continue;
    switch (g.tensor_kind(t)) {
      case TensorKind::parameter:
        totals.trainable_params += g.tensor_elements(t);
        totals.param_bytes += g.tensor_bytes(t);
        break;
      case TensorKind::buffer: totals.buffer_bytes += g.tensor_bytes(t); break;
      case TensorKind::activation:
        if (g.producer(t) != kNoId && g.op_role(g.producer(t)) == OpRole::forward) totals.activation_bytes += g.tensor_bytes(t);
        break;
      default: break;
    }
  }
  for (OpId o = 0; o < g.num_ops(); ++o) totals.flops += g.op_work(o).flops;
  return totals;
}

std::string work_sum_overflow(const Graph& g) {
  double flops = 0.0, bytes = 0.0;
  for (OpId o = 0; o < g.num_ops(); ++o) flops += g.op_work(o).flops, bytes += g.op_work(o).bytes_read + g.op_work(o).bytes_written;
  if (std::isfinite(flops) && std::isfinite(bytes)) return "";
  return "its ops' FLOPs or bytes sum past what a double holds (" + std::to_string(flops) + " FLOPs, " + std::to_string(bytes) + " bytes)";
}

}  // namespace placer
