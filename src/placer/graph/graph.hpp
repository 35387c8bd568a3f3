// The op graph every other layer works on: ops, tensors (activations, data, parameters, buffers,
// gradients) and the data edges between them, stored as flat arrays and CSR adjacency indexed by
// integer ids, so that a graph of a million ops is cheap to hold and to walk. Strings (names, op
// types, module paths) are kept for the edges of the system (import, export, messages) and are
// never needed on a hot path. A built Graph is immutable and safe to share between threads.
//
//   GraphBuilder b;
//   TensorId x = b.add_tensor("x", {32, 64}, DType::f32, TensorKind::data);
//   TensorId w = b.add_tensor("w", {64, 10}, DType::f32, TensorKind::parameter);
//   TensorId y = b.add_tensor("y", {32, 10}, DType::f32, TensorKind::activation);
//   b.add_op({.name = "fc/MatMul", .type = "MatMul", .inputs = {x, w}, .outputs = {y}});
//   Graph g = std::move(b).build();   // validates: throws Error naming the op or tensor at fault
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "placer/graph/op_work.hpp"
#include "placer/graph/types.hpp"
#include "placer/util/error.hpp"

namespace placer {

// Everything the builder needs to know about one op.
struct OpSpec {
  std::string name;
  std::string type;                    // ONNX op type ("Conv") or a derived one ("ConvGrad", "SGDUpdate")
  std::vector<TensorId> inputs;        // kNoId for an absent optional input
  std::vector<TensorId> outputs;
  Attributes attrs;
  std::string module;                  // PyTorch module path ("layer3.0.conv1"); "" = top level
  std::uint32_t call = 0;              // 0-based index of the module call this op belongs to
  OpRole role = OpRole::forward;
  OpId forward_op = kNoId;             // backward op: the forward op it differentiates
  TensorId param = kNoId;              // update op: the parameter it updates
  OpWork work;                         // FLOPs and bytes (see op_work.hpp)
  // Outputs that share the storage of input 0 (bit i = output slot i), besides an alias's first
  // output (Graph::op_view_outputs): a gradient passed through unchanged, such as Add's.
  std::uint32_t view_outputs = 0;
};

class Graph {
 public:
  Graph() = default;

  // Sizes.
  std::size_t num_ops() const { return op_type_.size(); }
  std::size_t num_tensors() const { return tensor_dtype_.size(); }
  std::size_t num_modules() const { return module_names_.size(); }
  std::size_t num_forward_ops() const { return num_forward_ops_; }

  // Ops.
  const std::string& op_name(OpId op) const { return op_name_[op]; }
  const std::string& op_type(OpId op) const { return type_names_[op_type_[op]]; }
  std::uint32_t op_type_id(OpId op) const { return op_type_[op]; }
  std::size_t num_op_types() const { return type_names_.size(); }
  const std::string& op_type_name(std::uint32_t type_id) const { return type_names_[type_id]; }
  ModuleId op_module(OpId op) const { return op_module_[op]; }
  std::uint32_t op_call(OpId op) const { return op_call_[op]; }
  OpRole op_role(OpId op) const { return op_role_[op]; }
  OpId forward_op(OpId op) const { return forward_op_[op]; }
  TensorId updated_param(OpId op) const { return updated_param_[op]; }
  const OpWork& op_work(OpId op) const { return op_work_[op]; }
  const Attributes& op_attrs(OpId op) const { return op_attrs_[op]; }
  // Set-up values: an op is folded when it is a forward op that computes a value known before the
  // step: a Constant, a Shape or Size (shapes are static), or an op whose inputs are all set-up
  // values (constant initializers or outputs of folded ops; at least one), random ops (Random*,
  // Bernoulli, Multinomial) excepted: they draw anew every step. Frameworks compute these
  // once (PyTorch's Python scalars and shapes, TensorFlow's constant folding, placer's executor at
  // set-up), so a folded op takes no time in a step and its outputs are on every device that reads
  // them, never sent.
  bool op_folded(OpId op) const { return op_folded_[op] != 0; }
  // Outputs that are views sharing the storage of the op's first input (bit i = output slot i), for
  // an op that is not folded and reads a tensor of the step first: the first output of an op of
  // class alias (no kernel: Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference Dropout,
  // their gradients, or an unknown op priced as an alias) when it has as many bytes as that input
  // (any other output, such as an inference Dropout's mask, or one of another size, is a tensor of
  // its own), the output of a Transpose (PyTorch's permute: a view with permuted strides), an
  // Expand's (PyTorch's expand: stride 0 along the broadcast dimensions, larger than the storage it
  // views), a Split's outputs (views of parts of its input), and the outputs its OpSpec declares (the
  // gradients that Add, Sub and Sum pass through unchanged, a Concat gradient's slices of dY). A
  // Reshape or Flatten of a view out of row-major order is a view only where PyTorch's `view`
  // could step through those strides (splitting a dimension, not merging two across a cut), else
  // it copies and is no view. 0 for every other op.
  std::uint32_t op_view_outputs(OpId op) const { return op_views_[op]; }
  // True when `t` is such a view: it takes no memory of its own.
  bool tensor_is_view(TensorId t) const;
  // False for a tensor whose elements are not in row-major order in its storage (its strides, as
  // PyTorch's tensor would carry them): a Transpose's, a part cut across rows (a Split's or a
  // Concat gradient's channels of [N, C, H, W]), a view of such, or an Einsum's output (and
  // gradients) in the order of its batched product (einsum_layout). A kernel that needs its operand
  // in order copies it first (CostTable::workspace_bytes).
  bool tensor_in_order(TensorId t) const { return tensor_permuted_[t] == 0; }
  // The strides of `t` in elements: row-major when tensor_in_order(t), else as above.
  std::vector<std::int64_t> tensor_strides(TensorId t) const;
  bool tensor_folded(TensorId t) const { return tensor_folded_[t] != 0; }
  // A partial gradient that its one reader adds, as soon as it is available there, into the first
  // partial of the same gradient (PyTorch's autograd input buffer and AccumulateGrad sum partials as
  // they arrive): it takes memory until it is available to its reader, not until the reader runs.
  // Set by the training derivation on every partial but the first of a tensor read k > 1 times.
  bool tensor_accumulated(TensorId t) const { return tensor_accumulated_[t] != 0; }
  std::size_t num_folded_ops() const { return num_folded_ops_; }
  // Inputs in slot order; kNoId marks an absent optional input.
  std::span<const TensorId> op_inputs(OpId op) const { return span_of(op_inputs_, op_input_begin_, op); }
  std::span<const TensorId> op_outputs(OpId op) const { return span_of(op_outputs_, op_output_begin_, op); }
  // Ops that consume an output of `op` / produce an input of `op` (each listed once, ascending).
  std::span<const OpId> successors(OpId op) const { return span_of(succ_, succ_begin_, op); }
  std::span<const OpId> predecessors(OpId op) const { return span_of(pred_, pred_begin_, op); }
  // Every op once, producers before consumers, the lowest id first among ops whose producers are
  // all placed: the ids themselves when they are already in a topological order (program order).
  std::span<const OpId> topological_order() const { return topo_; }
  // Position of every op in topological_order() (the inverse permutation).
  std::span<const std::uint32_t> topological_ranks() const { return topo_rank_; }

  // Tensors.
  const std::string& tensor_name(TensorId t) const { return tensor_name_[t]; }
  std::span<const std::int64_t> tensor_shape(TensorId t) const { return span_of(shape_dims_, shape_begin_, t); }
  DType tensor_dtype(TensorId t) const { return tensor_dtype_[t]; }
  std::uint64_t tensor_bytes(TensorId t) const { return tensor_bytes_[t]; }
  std::uint64_t tensor_elements(TensorId t) const;
  TensorKind tensor_kind(TensorId t) const { return tensor_kind_[t]; }
  OpId producer(TensorId t) const { return producer_[t]; }
  std::span<const OpId> consumers(TensorId t) const { return span_of(consumers_, consumer_begin_, t); }
  TensorDesc tensor_desc(TensorId t) const;
  // The graph's outputs (what a loss would read).
  std::span<const TensorId> outputs() const { return outputs_; }
  // Tensors without a producer (parameters, buffers, data): the op they live with, their first
  // consumer in topological order that is not folded (else their first consumer); placements of
  // ops extend to parameters through it. kNoId if nothing reads the tensor.
  OpId param_home(TensorId t) const { return param_home_[t]; }
  // Optimizer state kept per parameter element (0 for SGD, 1 for momentum, 2 for Adam).
  std::uint32_t optimizer_state_copies() const { return optimizer_state_copies_; }
  // Bytes of optimizer state the step keeps for `t`: optimizer_state_copies() x its bytes for a
  // parameter that an update op of the step updates, else 0 (a frozen parameter, one no gradient
  // reaches, or the forward graph alone).
  std::uint64_t optimizer_state_bytes(TensorId t) const { return param_updated_[t] ? optimizer_state_copies_ * tensor_bytes_[t] : 0; }

  // Modules: id 0 is the top level (""). Every module's parent has a smaller id.
  const std::string& module_name(ModuleId m) const { return module_names_[m]; }
  ModuleId module_parent(ModuleId m) const { return module_parent_[m]; }
  // Depth of a module: 0 for the top level, 1 for "layer3", 2 for "layer3.0", ...
  std::uint32_t module_depth(ModuleId m) const { return module_depth_[m]; }
  // The ancestor of `m` at depth `depth` (m itself when it is not deeper).
  ModuleId module_ancestor(ModuleId m, std::uint32_t depth) const;
  std::optional<ModuleId> find_module(std::string_view path) const;

  // Lookups by name (hash maps built once). Return kNoId when absent.
  OpId find_op(std::string_view name) const;
  TensorId find_tensor(std::string_view name) const;

  const std::string& name() const { return name_; }

 private:
  friend class GraphBuilder;
  template <typename T>
  static std::span<const T> span_of(const std::vector<T>& items, const std::vector<std::uint32_t>& begin, std::uint32_t i) {
    return {items.data() + begin[i], items.data() + begin[i + 1]};
  }

  std::string name_;
  std::size_t num_forward_ops_ = 0;
  std::uint32_t optimizer_state_copies_ = 0;
  // Ops (struct of arrays).
  std::vector<std::string> op_name_;
  std::vector<std::uint32_t> op_type_;
  std::vector<std::string> type_names_;
  std::vector<ModuleId> op_module_;
  std::vector<std::uint32_t> op_call_;
  std::vector<OpRole> op_role_;
  std::vector<OpId> forward_op_;
  std::vector<TensorId> updated_param_;
  std::vector<OpWork> op_work_;
  std::vector<std::uint32_t> op_views_;
  std::vector<Attributes> op_attrs_;
  std::vector<std::uint32_t> op_input_begin_, op_output_begin_, succ_begin_, pred_begin_;
  std::vector<TensorId> op_inputs_, op_outputs_;
  std::vector<OpId> succ_, pred_, topo_;
  std::vector<std::uint32_t> topo_rank_;
  std::vector<std::uint8_t> op_folded_, tensor_folded_, param_updated_, tensor_accumulated_;
  std::vector<std::uint32_t> tensor_permuted_;  // 0: row-major; else 1 + its index in permuted_strides_
  std::vector<std::vector<std::int64_t>> permuted_strides_;
  std::size_t num_folded_ops_ = 0;
  // Tensors.
  std::vector<std::string> tensor_name_;
  std::vector<std::uint32_t> shape_begin_;
  std::vector<std::int64_t> shape_dims_;
  std::vector<DType> tensor_dtype_;
  std::vector<std::uint64_t> tensor_bytes_;
  std::vector<TensorKind> tensor_kind_;
  std::vector<OpId> producer_;
  std::vector<std::uint32_t> consumer_begin_;
  std::vector<OpId> consumers_;
  std::vector<OpId> param_home_;
  std::vector<TensorId> outputs_;
  // Modules.
  std::vector<std::string> module_names_;
  std::vector<ModuleId> module_parent_;
  std::vector<std::uint32_t> module_depth_;
  // Name lookups.
  std::unordered_map<std::string_view, OpId> op_by_name_;
  std::unordered_map<std::string_view, TensorId> tensor_by_name_;
  std::unordered_map<std::string_view, ModuleId> module_by_name_;
};

// An error of GraphBuilder::build() about one op or one tensor: `op` (or `tensor`) is its id, the
// order it was added in, so that a reader of a file can name its place (graph JSON's `ops[i]`);
// kNoId when the error is about neither.
class GraphError : public Error {
 public:
  GraphError(const std::string& message, OpId op_at_fault, TensorId tensor_at_fault = kNoId)
      : Error(message), op(op_at_fault), tensor(tensor_at_fault) {}
  OpId op;
  TensorId tensor;
};

// For each position i of `ids`, whether ids[i] (kNoId aside) is also at an earlier position: a scan
// of the earlier ids for short lists, a hash set for long ones (a search per id was quadratic: an
// op of 200,000 inputs, and its gradient of as many outputs, took 22 s to import; a QA pass).
std::vector<bool> repeated_ids(std::span<const TensorId> ids);

// Builds and validates a Graph. Not thread-safe; use once.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name = "");

  // Adds a tensor. Bytes are computed from shape and dtype at build(). Throws Error on a duplicate name.
  TensorId add_tensor(std::string name, std::vector<std::int64_t> shape, DType dtype, TensorKind kind);
  TensorId find_tensor(std::string_view name) const;  // kNoId when absent
  void set_tensor_kind(TensorId t, TensorKind kind);
  // Marks a partial gradient as summed into another on arrival (Graph::tensor_accumulated). build()
  // checks that it is a gradient produced by an op and read by exactly one op.
  void set_tensor_accumulated(TensorId t);
  TensorKind tensor_kind(TensorId t) const { return tensors_[t].kind; }
  std::span<const std::int64_t> tensor_shape(TensorId t) const { return tensors_[t].shape; }
  DType tensor_dtype(TensorId t) const { return tensors_[t].dtype; }
  const std::string& tensor_name(TensorId t) const { return tensors_[t].name; }
  std::size_t num_tensors() const { return tensors_.size(); }

  // Adds an op; its outputs' producer becomes this op. Throws Error when an output already has a
  // producer or a tensor id is out of range.
  OpId add_op(OpSpec spec);
  std::size_t num_ops() const { return ops_.size(); }
  const OpSpec& op(OpId id) const { return ops_[id]; }
  OpSpec& op(OpId id) { return ops_[id]; }

  void mark_output(TensorId t);
  void set_optimizer_state_copies(std::uint32_t copies) { optimizer_state_copies_ = copies; }
  // Ops with id < n are the forward pass (the rest: backward and update), set by training derivation.
  void set_num_forward_ops(std::size_t n) { num_forward_ops_ = n; }

  // Validates and freezes the graph. Errors name the op or tensor: a cycle, an input that no op
  // produces and that is not a graph input (data, parameter, buffer, constant), a missing or
  // non-positive dimension, a size that overflows 64 bits, an unknown element type.
  Graph build() &&;

 private:
  struct TensorSpec {
    std::string name;
    std::vector<std::int64_t> shape;
    DType dtype;
    TensorKind kind;
    OpId producer = kNoId;
    bool accumulated = false;
  };
  std::string graph_name_;
  std::vector<TensorSpec> tensors_;
  std::vector<OpSpec> ops_;
  std::vector<TensorId> outputs_;
  std::unordered_map<std::string, TensorId> tensor_by_name_;
  std::uint32_t optimizer_state_copies_ = 0;
  std::size_t num_forward_ops_ = kNoId;
};

// Summary figures used by `placer inspect` and the docs.
struct GraphTotals {
  std::uint64_t ops = 0;
  std::uint64_t trainable_params = 0;     // scalar trainable parameters
  std::uint64_t param_bytes = 0;          // bytes of trainable parameters
  std::uint64_t buffer_bytes = 0;         // bytes of buffers (not trained)
  std::uint64_t activation_bytes = 0;     // bytes of every activation produced by a forward op
  double flops = 0.0;                     // all ops
};
GraphTotals graph_totals(const Graph& g);

// "" when the ops' FLOPs and bytes sum to finite numbers, else what they sum to ("its ops' FLOPs
// or bytes sum past what a double holds (...)"): each op's figures are finite, but two Einsums of
// 1e308 FLOPs printed "inf FLOPs" everywhere (a fuzzing review). The loaders and the training
// step refuse such a graph, each with its own hint.
std::string work_sum_overflow(const Graph& g);

}  // namespace placer
