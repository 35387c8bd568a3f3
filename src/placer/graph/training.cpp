#include "placer/graph/training.hpp"

#include <algorithm>
#include <memory>

#include "placer/graph/einsum.hpp"
#include "placer/graph/matmul.hpp"
#include "placer/util/error.hpp"

namespace placer {

std::string_view optimizer_name(Optimizer o) {
  switch (o) {
    case Optimizer::sgd: return "sgd";
    case Optimizer::momentum: return "momentum";
    case Optimizer::adam: return "adam";
  }
  return "sgd";
}

Optimizer parse_optimizer(std::string_view name) {
  if (name == "sgd") return Optimizer::sgd;
  if (name == "momentum") return Optimizer::momentum;
  if (name == "adam") return Optimizer::adam;
  throw Error("unknown optimizer '" + std::string(name) + "' (known: sgd, momentum, adam)");
}

Mode parse_mode(std::string_view name) {
  if (name == "training") return Mode::training;
  if (name == "inference") return Mode::inference;
  throw Error("unknown mode '" + std::string(name) + "' (known: training, inference)");
}

namespace {

struct UpdateRule {
  const char* type;
  double flops_per_element;     // arithmetic of one update of one element
  double reads_per_element;     // parameter, gradient and state elements read
  double writes_per_element;    // parameter and state elements written
  std::uint32_t state_copies;   // optimizer state kept per parameter element
};

// w -= lr*g; momentum: v = mu*v + g, w -= lr*v; Adam: two moments, bias correction, sqrt and divide.
UpdateRule update_rule(Optimizer o) {
  switch (o) {
    case Optimizer::sgd: return {"SGDUpdate", 2, 2, 1, 0};
    case Optimizer::momentum: return {"MomentumUpdate", 4, 3, 2, 1};
    case Optimizer::adam: return {"AdamUpdate", 12, 4, 3, 2};
  }
  return {"SGDUpdate", 2, 2, 1, 0};
}

// The elements of the copy of operand `i` (0 or 1) that product `o` makes to multiply it (0: none):
// a MatMul's (matmul_layout) or a two-operand Einsum's batched product's (einsum_layout).
std::uint64_t copied_elements(const Graph& fwd, OpId o, std::size_t i) {
  const std::string& type = fwd.op_type(o);
  if (type == "MatMul")
    if (const auto layout = matmul_layout_of(fwd, o)) return layout->copied_elements[i];
  if (type == "Einsum" && fwd.op_inputs(o).size() == 2)
    if (const auto layout = einsum_layout_of(fwd, o); layout && layout->product && layout->copied[i])
      return fwd.tensor_elements(fwd.op_inputs(o)[i]);
  return 0;
}

// Whether the gradient of forward op `o` for its first input is dY broadcast or permuted back to
// the input's shape, which autograd makes a view of dY: ReduceSum's (sum_backward expands dY), a
// one-operand Einsum's (a sum, or a permutation, einsum_layout).
bool expands_gradient(const Graph& fwd, OpId o) {
  const std::string& type = fwd.op_type(o);
  if (type == "ReduceSum" || type == "Transpose") return true;  // (a Transpose's: dY permuted back)
  if (type != "Einsum" || fwd.op_inputs(o).size() != 1) return false;
  const auto layout = einsum_layout_of(fwd, o);
  return layout && !layout->product;
}

}  // namespace

std::string_view update_op_type(Optimizer o) { return update_rule(o).type; }

Optimizer step_optimizer(const Graph& step, Optimizer fallback) {
  for (OpId o = 0; o < step.num_ops(); ++o) {
    if (step.op_role(o) != OpRole::update) continue;
    for (Optimizer k : {Optimizer::sgd, Optimizer::momentum, Optimizer::adam})
      if (step.op_type(o) == update_op_type(k)) return k;
    return fallback;
  }
  return fallback;
}

Graph derive_training_step(const Graph& fwd, Optimizer optimizer) {
  const std::size_t num_fwd = fwd.num_ops();
  for (OpId o = 0; o < num_fwd; ++o)
    if (fwd.op_role(o) != OpRole::forward)
      throw Error("cannot derive a training step from graph '" + fwd.name() + "': it already holds backward or update ops");

  // The loss goes on the graph's outputs: without any, the step would train nothing, silently.
  if (fwd.outputs().empty())
    throw Error("cannot derive a training step from graph '" + fwd.name() +
                "': it has no outputs to put a loss on (use inference mode, or name its outputs)");

  // Names the step gives its own ops and tensors must not be the forward graph's.
  auto new_op_name = [&](std::string name) {
    if (fwd.find_op(name) != kNoId)
      throw Error("the training step names an op '" + name + "', which the forward graph already has: rename that op (placer " +
                  "names gradients '<op>/grad', updates 'update/<parameter>' and losses 'loss/<output>')");
    return name;
  };
  auto new_tensor_name = [&](std::string name) {
    if (fwd.find_tensor(name) != kNoId)
      throw Error("the training step names a tensor '" + name + "', which the forward graph already has: rename that tensor " +
                  "(placer names gradients 'grad/<tensor>/<op>')");
    return name;
  };

  // Which tensors carry a gradient: parameters, and float outputs of differentiable ops with an
  // input that carries one.
  std::vector<bool> requires_grad(fwd.num_tensors(), false);
  bool has_parameters = false;
  for (TensorId t = 0; t < fwd.num_tensors(); ++t) {
    requires_grad[t] = fwd.tensor_kind(t) == TensorKind::parameter;
    has_parameters = has_parameters || requires_grad[t];
  }
  for (OpId o : fwd.topological_order()) {
    const BackwardRule rule = backward_rule(fwd.op_type(o), fwd.op_attrs(o));
    if (!rule.differentiable) continue;
    bool any = false;
    const auto ins = fwd.op_inputs(o);
    for (std::size_t i = 0; i < ins.size(); ++i) any = any || (ins[i] != kNoId && requires_grad[ins[i]] && input_takes_gradient(fwd.op_type(o), i));
    if (!any) continue;
    const auto outs = fwd.op_outputs(o);
    for (std::size_t i = 0; i < outs.size(); ++i)
      requires_grad[outs[i]] = (rule.grad_outputs == 0 || i < rule.grad_outputs) && is_floating(fwd.tensor_dtype(outs[i]));
  }

  GraphBuilder b(fwd.name());
  std::vector<TensorId> max_pool_indices(num_fwd, kNoId);  // forward op -> the indices its gradient reads
  std::vector<TensorId> recurrent_state(num_fwd, kNoId);    // forward op -> the steps' state its gradient reads
  std::vector<TensorId> product_copies(num_fwd, kNoId);     // forward op -> a product's operand copies its gradient reads
  std::vector<std::uint8_t> product_copied(num_fwd, 0);     // forward op -> the operands (bit i = slot i) those copies replace
  std::vector<TensorId> kept_intermediates(num_fwd, kNoId);  // forward op -> what its formula keeps for the gradient
  for (TensorId t = 0; t < fwd.num_tensors(); ++t) {
    auto shape = fwd.tensor_shape(t);
    b.add_tensor(fwd.tensor_name(t), {shape.begin(), shape.end()}, fwd.tensor_dtype(t), fwd.tensor_kind(t));
  }
  for (OpId o = 0; o < num_fwd; ++o) {
    OpSpec spec{.name = fwd.op_name(o), .type = fwd.op_type(o)};
    auto ins = fwd.op_inputs(o);
    auto outs = fwd.op_outputs(o);
    spec.inputs.assign(ins.begin(), ins.end());
    spec.outputs.assign(outs.begin(), outs.end());
    spec.attrs = fwd.op_attrs(o);
    spec.module = fwd.module_name(fwd.op_module(o));
    spec.call = fwd.op_call(o);
    spec.work = fwd.op_work(o);
    // Declared views (graph JSON); an alias's first output is derived again by the builder.
    spec.view_outputs = fwd.op_view_outputs(o) & ~(spec.work.op_class == OpClass::alias ? 1u : 0u);
    // A max pool whose input carries a gradient keeps the argmax of each window for its gradient:
    // PyTorch's int64 indices (max_pool2d_with_indices), twice Y's bytes in float32. The ONNX
    // Indices output when the node has one, else an output the step adds.
    if (spec.type == "MaxPool" && !ins.empty() && ins[0] != kNoId && requires_grad[ins[0]] && !outs.empty() && outs[0] != kNoId) {
      if (outs.size() > 1 && outs[1] != kNoId) {
        max_pool_indices[o] = outs[1];
      } else {
        auto shape = fwd.tensor_shape(outs[0]);
        max_pool_indices[o] = b.add_tensor(new_tensor_name(fwd.tensor_name(outs[0]) + "/indices"), {shape.begin(), shape.end()}, DType::i64,
                                           TensorKind::activation);
        spec.outputs.resize(2, kNoId);
        spec.outputs[1] = max_pool_indices[o];
      }
    }
    // A recurrent op (RNN, GRU, LSTM) with a gradient to compute keeps every time step's state for
    // it (recurrent_saved_steps: PyTorch's per-step gate activations, cell states and hidden states,
    // not the stacked output): an output the step adds, of kept x directions x seq x batch x hidden
    // elements, which its gradient reads instead of the op's outputs.
    bool any_grad = false;
    for (TensorId t : ins) any_grad = any_grad || (t != kNoId && requires_grad[t]);
    if (ins.size() > 2 && ins[0] != kNoId && ins[2] != kNoId && any_grad)
      if (const auto r = recurrent_sizes(spec.type, spec.attrs, fwd.tensor_shape(ins[0]), fwd.tensor_shape(ins[2]))) {
        // A batch-first input (layout 1, or a transposed view) is copied into step-major order for
        // each direction's input projection, whose weights' gradient keeps that copy: part of the
        // state (a bidirectional layer keeps two: measured).
        std::int64_t elements = recurrent_saved_steps(*r) * r->directions * r->seq * r->batch * r->hidden;
        if (r->batch_first || !fwd.tensor_in_order(ins[0])) elements += r->directions * r->seq * r->batch * r->input;
        const std::vector<std::int64_t> shape{elements};
        recurrent_state[o] = b.add_tensor(new_tensor_name(spec.name + "/state"), shape, fwd.tensor_dtype(ins[0]), TensorKind::activation);
        spec.outputs.push_back(recurrent_state[o]);  // after the node's outputs (GRU: Y, Y_h; an LSTM may give Y alone)
      }
    // A product (MatMul, Einsum) keeps the operands it copied into its order (matmul_layout,
    // einsum_layout) for the gradients, the left one for the right one's gradient and the other
    // way round (PyTorch's mm and bmm): an output the step adds, which the gradient reads instead
    // of those operands.
    if (any_grad && ins.size() == 2 && outs.size() == 1 && ins[0] != kNoId && ins[1] != kNoId) {
      std::int64_t elements = 0;
      for (std::size_t i = 0; i < 2; ++i)
        if (const std::uint64_t copy = copied_elements(fwd, o, i); copy > 0 && requires_grad[ins[1 - i]]) {
          product_copied[o] |= static_cast<std::uint8_t>(1u << i);
          elements += static_cast<std::int64_t>(copy);
        }
      if (elements > 0) {
        const std::vector<std::int64_t> shape{elements};
        product_copies[o] = b.add_tensor(new_tensor_name(spec.name + "/copies"), shape, fwd.tensor_dtype(ins[0]), TensorKind::activation);
        spec.outputs.push_back(product_copies[o]);
      }
    }
    // An op PyTorch runs as a formula keeps some of its intermediates for the gradient
    // (kept_intermediate_elements): an output the step adds, which the gradient reads.
    if (any_grad && !ins.empty() && ins[0] != kNoId && !outs.empty()) {
      std::vector<TensorDesc> in_desc;
      for (TensorId t : ins) in_desc.push_back(t == kNoId ? TensorDesc{{}, DType::unknown, false} : TensorDesc{fwd.tensor_shape(t), fwd.tensor_dtype(t), true});
      std::vector<TensorDesc> out_desc;
      for (TensorId t : outs) out_desc.push_back(t == kNoId ? TensorDesc{{}, DType::unknown, false} : TensorDesc{fwd.tensor_shape(t), fwd.tensor_dtype(t), true});
      if (const std::uint64_t kept = kept_intermediate_elements(spec.type, spec.attrs, in_desc, out_desc); kept > 0) {
        const std::vector<std::int64_t> shape{static_cast<std::int64_t>(kept)};
        kept_intermediates[o] = b.add_tensor(new_tensor_name(spec.name + "/kept"), shape, fwd.tensor_dtype(ins[0]), TensorKind::activation);
        spec.outputs.push_back(kept_intermediates[o]);
      }
    }
    b.add_op(std::move(spec));
  }
  for (TensorId t : fwd.outputs()) b.mark_output(t);

  // A model with parameters none of whose outputs carries a gradient (an output that is a graph
  // input, or reached only through integer or non-differentiable ops) would give a "training
  // step" of forward ops alone: refused, as a graph without outputs is.
  bool any_loss = false;
  std::string output_names;
  for (TensorId t : fwd.outputs()) {
    any_loss = any_loss || (requires_grad[t] && fwd.producer(t) != kNoId);
    if (output_names.size() < 200) output_names += (output_names.empty() ? "'" : ", '") + fwd.tensor_name(t) + "'";
  }
  if (has_parameters && !any_loss)
    throw Error("cannot derive a training step from graph '" + fwd.name() + "': none of its outputs (" + output_names +
                ") is computed from its parameters through differentiable ops, so a loss on them would train nothing (use "
                "inference mode)");

  // Partial gradients of each tensor, in the order they are produced.
  std::vector<std::vector<TensorId>> partials(fwd.num_tensors());
  // Per tensor of the step: a gradient that is a view (shares the storage of another gradient), one
  // that is a broadcast view (a sum's gradient, dY expanded back), and the backward op that made it.
  std::vector<char> gradient_view, gradient_expanded;
  std::vector<OpId> gradient_producer;
  auto grad_tensor = [&](TensorId of, const std::string& from) {
    auto shape = fwd.tensor_shape(of);
    TensorId g = b.add_tensor(new_tensor_name("grad/" + fwd.tensor_name(of) + "/" + from), {shape.begin(), shape.end()}, fwd.tensor_dtype(of),
                              TensorKind::gradient);
    partials[of].push_back(g);
    gradient_view.resize(std::size_t{g} + 1, 0);
    gradient_expanded.resize(std::size_t{g} + 1, 0);
    gradient_producer.resize(std::size_t{g} + 1, kNoId);
    return g;
  };
  // Autograd sums a tensor's partial gradients into the first that arrives when it may write there,
  // else into a new tensor (PyTorch's input buffer: never into a view it does not hold alone, an
  // outer Add's dY that a sibling may still read, nor into a broadcast view, whose elements share
  // memory). The partial the step puts first holds the sum: one that owns its storage when any does
  // (the sum then costs that partial's storage, as PyTorch's new tensor does once it is freed); when
  // all are broadcast views, the first is made a tensor of its own (a tensor read by two
  // ReduceSums: the sum was counted as no memory, 25% under). When every partial is a view and not
  // all are broadcast, the sum goes into the first view that is not broadcast (one tensor under
  // when it is shared: rare; an op that passes views on makes its sum a tensor of its own, below).
  auto settle_sum = [&](std::vector<TensorId>& ps) {
    if (ps.size() < 2 || !gradient_view[ps[0]]) return;
    // One that owns its storage first (a view an Add passed on came first and took the sum in
    // place unless the reader passed views itself: a QA pass); else a view that is not broadcast.
    auto owner = std::find_if(ps.begin(), ps.end(), [&](TensorId t) { return !gradient_view[t]; });
    if (owner == ps.end() && gradient_expanded[ps[0]])
      owner = std::find_if(ps.begin(), ps.end(), [&](TensorId t) { return !gradient_expanded[t]; });
    if (owner != ps.end()) {
      std::rotate(ps.begin(), owner, owner + 1);
      return;
    }
    if (!gradient_expanded[ps[0]]) return;
    const OpId producer = gradient_producer[ps[0]];
    if (producer == kNoId) return;
    OpSpec& made = b.op(producer);
    for (std::size_t j = 0; j < made.outputs.size() && j < 32; ++j)
      if (made.outputs[j] == ps[0]) made.view_outputs &= ~(1u << j);
    gradient_view[ps[0]] = gradient_expanded[ps[0]] = 0;
  };
  auto module_of = [&](OpId o) { return fwd.module_name(fwd.op_module(o)); };

  // The loss: one op per graph output that carries a gradient, seeding its gradient.
  for (TensorId t : fwd.outputs()) {
    if (!requires_grad[t] || fwd.producer(t) == kNoId) continue;
    OpId producer = fwd.producer(t);
    OpSpec loss{.name = new_op_name("loss/" + fwd.tensor_name(t)), .type = std::string(kLossOpType), .inputs = {t}};
    loss.outputs = {grad_tensor(t, "loss")};
    loss.module = module_of(producer);
    loss.call = fwd.op_call(producer);
    loss.role = OpRole::backward;
    loss.forward_op = producer;
    // A softmax cross-entropy-like loss reads its input once and writes its gradient once.
    double bytes = static_cast<double>(fwd.tensor_bytes(t));
    loss.work = OpWork{4.0 * static_cast<double>(fwd.tensor_elements(t)), bytes, bytes, OpClass::elementwise};
    b.add_op(std::move(loss));
  }

  // Backward ops in reverse topological order.
  auto topo = fwd.topological_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    OpId o = *it;
    auto ins = fwd.op_inputs(o);
    auto outs = fwd.op_outputs(o);
    std::vector<bool> needs(ins.size(), false);
    bool any_needed = false, any_incoming = false;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      needs[i] = ins[i] != kNoId && requires_grad[ins[i]] && input_takes_gradient(fwd.op_type(o), i);
      any_needed = any_needed || needs[i];
    }
    for (TensorId t : outs) any_incoming = any_incoming || !partials[t].empty();
    if (!any_needed || !any_incoming || !backward_rule(fwd.op_type(o), fwd.op_attrs(o)).differentiable) continue;

    const BackwardRule rule = backward_rule(fwd.op_type(o), fwd.op_attrs(o));
    OpSpec spec{.name = new_op_name(fwd.op_name(o) + "/grad"), .type = fwd.op_type(o) + "Grad"};
    spec.module = module_of(o);
    spec.call = fwd.op_call(o);
    spec.role = OpRole::backward;
    spec.forward_op = o;
    spec.attrs = fwd.op_attrs(o);
    std::vector<TensorDesc> in_desc, out_desc;
    for (TensorId t : ins) in_desc.push_back(fwd.tensor_desc(t));
    for (TensorId t : outs) out_desc.push_back(fwd.tensor_desc(t));
    auto needs_flags = std::make_unique<bool[]>(needs.size()), repeated = std::make_unique<bool[]>(ins.size());
    for (std::size_t i = 0; i < needs.size(); ++i) needs_flags[i] = needs[i];
    const std::vector<bool> earlier = repeated_ids(ins);
    for (std::size_t i = 0; i < ins.size(); ++i) repeated[i] = earlier[i];
    const std::span<const bool> needs_span{needs_flags.get(), needs.size()}, repeated_span{repeated.get(), ins.size()};
    spec.work = backward_work(fwd.op_type(o), fwd.op_attrs(o), in_desc, out_desc, needs_span, OpClass::elementwise, repeated_span);
    // Gradients passed through unchanged (Add's operands; an alias's) are views of the incoming
    // gradient, the op's first input.
    const std::uint32_t passed = passed_gradients(fwd.op_type(o), in_desc, out_desc, needs_span, repeated_span);
    const bool alias = spec.work.op_class == OpClass::alias;
    // The incoming gradient: the partials of the first output (one per reader of it).
    std::vector<TensorId>* first = outs.empty() || partials[outs[0]].empty() ? nullptr : &partials[outs[0]];
    // A Concat's gradients are slices of dY (PyTorch's narrow): views of a part of it.
    const bool slices = fwd.op_type(o) == "Concat" && !alias;
    // A gradient broadcast back from dY (PyTorch's sum_backward: an expand) or permuted back (an
    // Einsum's permute) is a view of dY: ReduceSum's, a one-operand Einsum's. No kernel.
    const bool expands = first != nullptr && !alias && expands_gradient(fwd, o);
    if (expands) spec.work = OpWork{0.0, 0.0, 0.0, spec.work.op_class};
    bool views = (passed != 0 || alias || slices || expands) && first != nullptr;
    double accumulate_flops = 0.0, accumulate_bytes = 0.0;
    for (TensorId t : outs)
      if (partials[t].size() > 1) {
        // Summing k partial gradients of a tensor used k times.
        accumulate_flops += static_cast<double>((partials[t].size() - 1) * fwd.tensor_elements(t));
        accumulate_bytes += static_cast<double>((partials[t].size() - 1) * fwd.tensor_bytes(t));
      }
    for (TensorId t : outs) settle_sum(partials[t]);
    if (views && first->size() > 1) {
      // Autograd's input buffer adds the partials into one of them in place when it holds the only
      // reference to it, else into a new tensor: the one put first must own its storage, not view
      // one that a sibling gradient may still read (an outer Add's dY). With none such, the sum is
      // a tensor of its own and nothing is a view of it.
      auto owner = std::find_if(first->begin(), first->end(), [&](TensorId t) { return !gradient_view[t]; });
      if (owner == first->end()) views = false;
      else std::rotate(first->begin(), owner, owner + 1);
    }
    for (TensorId t : outs) {
      spec.inputs.insert(spec.inputs.end(), partials[t].begin(), partials[t].end());
      // Autograd's input buffer adds each partial after the first into it as it arrives.
      for (std::size_t k = 1; k < partials[t].size(); ++k) b.set_tensor_accumulated(partials[t][k]);
    }
    // What autograd saves for the gradients computed (saved_inputs: a product keeps only the operands
    // the other gradients need, a quotient its dividend only for the divisor's gradient).
    const std::uint64_t kept = saved_inputs(fwd.op_type(o), fwd.op_attrs(o), in_desc, out_desc, needs_span, repeated_span);
    for (std::size_t i = 0; i < ins.size(); ++i)
      if (ins[i] != kNoId && fwd.tensor_kind(ins[i]) != TensorKind::constant && (i >= 64 ? rule.saves_inputs : (kept >> i & 1u) != 0) &&
          !(i < 8 && (product_copied[o] >> i & 1u)))
        spec.inputs.push_back(ins[i]);
    if (recurrent_state[o] != kNoId) spec.inputs.push_back(recurrent_state[o]);
    if (product_copies[o] != kNoId) spec.inputs.push_back(product_copies[o]);
    if (kept_intermediates[o] != kNoId) spec.inputs.push_back(kept_intermediates[o]);
    // A power by a set-up scalar (PyTorch's pow(Tensor, Scalar), as the executor runs it) keeps its
    // base alone; by a tensor, its result too (pow(Tensor, Tensor)).
    const bool scalar_power = fwd.op_type(o) == "Pow" && ins.size() > 1 && ins[1] != kNoId &&
                              (fwd.tensor_folded(ins[1]) || fwd.tensor_kind(ins[1]) == TensorKind::constant) && fwd.tensor_elements(ins[1]) == 1;
    for (std::size_t j = 0; j < outs.size() && j < 32 && recurrent_state[o] == kNoId && !scalar_power; ++j)
      if ((rule.saved_outputs >> j & 1u) && outs[j] != kNoId)
        spec.inputs.push_back(j == 0 && max_pool_indices[o] != kNoId ? max_pool_indices[o] : outs[j]);
    // ... and reads no result (the rule priced it as read: a QA pass).
    if (scalar_power && (rule.saved_outputs & 1u) && !outs.empty() && outs[0] != kNoId && spec.work.bytes_read > 0)
      spec.work.bytes_read = std::max(0.0, spec.work.bytes_read - static_cast<double>(fwd.tensor_bytes(outs[0])));

    spec.work.flops += accumulate_flops;
    spec.work.bytes_read += accumulate_bytes;
    if (accumulate_flops > 0 && (passed != 0 || alias || expands)) {
      // The partials are summed by a kernel of their own, which reads all k and writes the sum, before
      // the node runs (its own kernel, if any, then reads the sum again); what passes through
      // shares the sum.
      double incoming = 0.0;
      for (TensorId t : outs)
        if (!partials[t].empty()) incoming += static_cast<double>(fwd.tensor_bytes(t));
      spec.work.op_class = alias ? OpClass::elementwise : spec.work.op_class;
      spec.work.bytes_read += incoming;
      spec.work.bytes_written += incoming;
    }
    // An alias's first output is a view when the op stays an alias (the graph derives it), else
    // when declared; the gradients it passes through likewise.
    std::uint32_t view_bits = 0;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      if (!needs[i] || repeated[i]) continue;
      const std::size_t slot = spec.outputs.size();
      const bool stays_alias = spec.work.op_class == OpClass::alias;
      // A view has the incoming gradient's type and size (an op priced as an alias may not).
      const bool same_size = fwd.tensor_dtype(ins[i]) == fwd.tensor_dtype(outs[0]) && fwd.tensor_elements(ins[i]) == fwd.tensor_elements(outs[0]);
      // A Concat input read in two slots gets the sum of two slices: a tensor of its own.
      const bool slice = slices && views && fwd.tensor_dtype(ins[i]) == fwd.tensor_dtype(outs[0]) &&
                         std::count(ins.begin(), ins.end(), ins[i]) == 1;
      const bool expanded = expands && views && i == 0 && fwd.tensor_dtype(ins[i]) == fwd.tensor_dtype(outs[0]);
      const bool view = slot < 32 && (slice || expanded || (same_size && (stays_alias ? slot == 0 : views && (alias ? slot == 0 : i < 32 && (passed >> i & 1u)))));
      if (view) view_bits |= 1u << slot;
      const TensorId g = grad_tensor(ins[i], fwd.op_name(o));
      spec.outputs.push_back(g);
      gradient_view[g] = view;
      // (Broadcast: larger than dY. A permutation, a Transpose's or an Einsum's, is no broadcast.)
      gradient_expanded[g] = view && expanded && fwd.tensor_elements(ins[i]) > fwd.tensor_elements(outs[0]);
    }
    if (spec.work.op_class != OpClass::alias) spec.view_outputs = view_bits;
    const OpId made = b.add_op(std::move(spec));
    for (TensorId t : b.op(made).outputs)
      if (t != kNoId && t < gradient_producer.size()) gradient_producer[t] = made;
  }

  // One update per trainable parameter that received a gradient.
  const UpdateRule update = update_rule(optimizer);
  for (TensorId p = 0; p < fwd.num_tensors(); ++p) {
    if (fwd.tensor_kind(p) != TensorKind::parameter || partials[p].empty()) continue;
    OpSpec spec{.name = new_op_name("update/" + fwd.tensor_name(p)), .type = update.type, .inputs = {p}};
    settle_sum(partials[p]);
    spec.inputs.insert(spec.inputs.end(), partials[p].begin(), partials[p].end());
    // AccumulateGrad adds each partial after the first into the parameter's gradient as it arrives.
    for (std::size_t k = 1; k < partials[p].size(); ++k) b.set_tensor_accumulated(partials[p][k]);
    OpId home = fwd.param_home(p);
    if (home != kNoId) {
      spec.module = module_of(home);
      spec.call = fwd.op_call(home);
    }
    spec.role = OpRole::update;
    spec.param = p;
    const double n = static_cast<double>(fwd.tensor_elements(p));
    const double elem = dtype_size(fwd.tensor_dtype(p));
    const double extra = static_cast<double>(partials[p].size() - 1);
    spec.work = OpWork{(update.flops_per_element + extra) * n, (update.reads_per_element + extra) * n * elem,
                       update.writes_per_element * n * elem, OpClass::optimizer};
    b.add_op(std::move(spec));
  }
  b.set_num_forward_ops(num_fwd);
  b.set_optimizer_state_copies(update.state_copies);
  Graph step = std::move(b).build();
  // The backward pass roughly doubles the forward's work: a forward graph near the limit passes.
  if (const std::string overflow = work_sum_overflow(step); !overflow.empty())
    throw Error("the training step of graph '" + fwd.name() + "': " + overflow + " (its forward pass alone does not; try --mode inference)");
  return step;
}

}  // namespace placer
