// The work one op does, from its type, attributes and tensor shapes alone, following the ONNX
// operator specification (not any particular model file): FLOPs (a multiply-add counts 2), bytes
// read and written, and the op class that decides which roofline efficiency applies. Also the
// rules of the backward pass: how much work an op's gradient takes and which forward tensors it
// keeps alive. Pure functions; thread-safe.
//
//   TensorDesc x{{32, 3, 224, 224}, DType::f32}, w{{64, 3, 7, 7}, DType::f32}, y{{32, 64, 112, 112}, DType::f32};
//   OpWork work = op_work("Conv", attrs, {x, w}, {y});   // work.flops == 2 * 32*64*112*112 * 3*7*7
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "placer/graph/types.hpp"

namespace placer {

// A view of one tensor's shape and element type. An absent optional input (empty ONNX name) has an
// empty shape and DType::unknown, and `present == false`.
struct TensorDesc {
  std::span<const std::int64_t> shape;
  DType dtype = DType::unknown;
  bool present = true;
  std::uint64_t elements() const;
  std::uint64_t bytes() const { return elements() * dtype_size(dtype); }
};

struct OpWork {
  double flops = 0.0;          // floating-point operations, 2 per multiply-add
  double bytes_read = 0.0;     // bytes of inputs the op must read
  double bytes_written = 0.0;  // bytes of outputs it writes
  OpClass op_class = OpClass::alias;
  // A matrix product's smallest dimension (MatMul, Gemm and their gradients: the least of the rows,
  // columns and contracted length of each matrix multiplied, as PyTorch runs it, batch dimensions
  // folded into rows where it folds them; a recurrent layer's and its gradient's: the least of its
  // batch and hidden size, its step's product), by which a CPU's BLAS slows down on thin products
  // (Device::product_efficiency_by_size); 0 for any other op.
  std::uint32_t product_min_dim = 0;
  // An ungrouped 2-D Conv's kernel area (the product of its weight's spatial dimensions: 1 for a
  // 1x1, 9 for a 3x3), by which a CPU's convolutions run at different rates
  // (Device::conv_efficiency_by_kernel); the same for its gradient; 0 for any other op.
  std::uint32_t conv_kernel_area = 0;
  bool operator==(const OpWork&) const = default;
};

// Work of a forward op. Aliases (Identity, Reshape, Flatten, Squeeze, Unsqueeze, Constant, Shape,
// Size, Dropout for inference, ...) do no work: all zeros and OpClass::alias. A Dropout whose
// `training_mode` attribute is 1 (set by the ONNX importer from that input) is an elementwise kernel.
// REQUIRES: inputs and outputs in ONNX slot order, shapes fully known (positive dims).
// Throws Error naming the type when `op_type` is not known to the rules and `unknown_default` is
// empty; with a default, an unknown op is priced as that class with one FLOP per output element.
OpWork op_work(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
               std::span<const TensorDesc> outputs, std::optional<OpClass> unknown_default = std::nullopt);

// What contradicts the ONNX shape rule among an op's tensors, for the ops whose work op_work reads
// from more than one of them: elementwise ops and Softmax (the output is the inputs broadcast
// together), MatMul (numpy's rule), Gemm (inner dimensions, output [M, N]) and Conv (channels
// against the weight and `group`, output batch and channels). "" when they agree, or for any other
// op (ONNX models are checked against ONNX's own rules on import; this serves graph JSON, whose
// shapes are written by hand or by generators).
std::string operand_shape_mismatch(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                                   std::span<const TensorDesc> outputs);

// What is wrong with the attributes of an ONNX op that the rules (or the executor) read, against
// the op's input shapes: "" when nothing is. Windows (Conv, ConvTranspose and the pools: kernel,
// strides, dilations of positive values, one per spatial axis; pads not negative, two per axis; a
// pool's window within its padded input, or past it by less than a stride with ceil_mode), `group` and `blocksize` positive, a recurrent op's
// `direction` and a `hidden_size` that R's shape agrees with, LRN's `size` positive, RoiAlign's
// `sampling_ratio` not negative, a global pool's input of at least [N, C]. Both importers call it:
// ONNX's shape rules leave these unchecked, and graph JSON has no other check of them (a MaxPool
// window of 2^62 was priced at 3.7e19 FLOPs, a negative one refused only by the sign of its work:
// a fuzzing pass).
std::string attribute_mismatch(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs);

// True when the rules know `op_type` (forward and backward).
// The rules, their formulas and the reasoning behind them: docs/op-rules.md.
bool is_known_op_type(std::string_view op_type);
// What an import says when --unknown-ops priced ops (`guessed`: op type -> how many) as `as`:
// "--unknown-ops priced 2 ops of types without a cost rule as elementwise (...): T (2); ...".
std::string unknown_ops_priced_note(const std::map<std::string, std::size_t>& guessed, OpClass as);

// The sizes of a recurrent op (RNN, GRU, LSTM) read from its input X ([seq, batch, input], or
// [batch, seq, input] with `layout` 1) and its recurrence weights R ([directions, gates x hidden,
// hidden]): nullopt for another op type or shapes that do not fit.
struct RecurrentSizes {
  std::int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 0, gates = 0;  // gates: RNN 1, GRU 3, LSTM 4
  bool batch_first = false;
  std::uint64_t step_elements() const;  // seq x batch x hidden: one direction's outputs
};
std::optional<RecurrentSizes> recurrent_sizes(std::string_view op_type, const Attributes& attrs, std::span<const std::int64_t> x_shape,
                                              std::span<const std::int64_t> r_shape);
// Whether a recurrent node has the form PyTorch's nn.LSTM, nn.GRU and nn.RNN export (forward or
// bidirectional, no clip, no input_forget, a GRU's reset applied after the product, no peepholes:
// `peepholes`, an LSTM's input P is given): the executor runs those as PyTorch's own layer, and the
// memory rules below are that layer's.
bool recurrent_as_pytorch_layer(std::string_view op_type, const Attributes& attrs, bool peepholes);
// Whether a HardSigmoid is PyTorch's (alpha 1/6, beta 1/2), which the executor runs as torch's
// hardsigmoid, one kernel; another runs as clamp(x * alpha + beta, 0, 1).
bool pytorch_hard_sigmoid(const Attributes& attrs);
// Whether a floating PRelu runs as torch's prelu (the executor; the memory rules follow): one slope,
// or one per channel (dimension 1 of x) broadcast along the others, or opset 6's slope per channel
// (`slope_per_channel`); else it runs through a `where`.
bool prelu_as_torch_prelu(std::span<const std::int64_t> x_shape, std::span<const std::int64_t> slope_shape, bool slope_per_channel);
// What PyTorch's recurrence on the CPU (at::lstm, gru, rnn_tanh) keeps from the forward pass for the
// gradient, per direction, in tensors of [seq, batch, hidden]: every step's gate activations (one
// buffer of `gates` x hidden, activated in place), an LSTM's cell state and its tanh, a GRU's
// candidate and the blend's operands, and every step's hidden state. Measured on the host meter
// (docs/training-step.md): LSTM 7, GRU 7, RNN 1.
std::int64_t recurrent_saved_steps(const RecurrentSizes& r);

// What an op that PyTorch runs as a formula of several kernels keeps of that formula's intermediate
// tensors for its gradient (autograd's saved tensors, beyond its inputs and outputs), in elements of
// its first input's type; 0 for other ops. The training step adds them as an output of the op,
// `<op>/kept`, which its gradient reads. Softsign, x / (1 + |x|): 1 + |x|. LRN, as PyTorch's
// local_response_norm: the squares padded along channels (the window pool's input) and bias + alpha
// * mean and its power (the power's and the division's operands). A Dropout in training mode whose
// mask is no output: the mask, a byte per element (as elements of the input's type, rounded up).
std::uint64_t kept_intermediate_elements(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                                         std::span<const TensorDesc> outputs);

// How the backward pass treats an op.
struct BackwardRule {
  bool differentiable = true;  // false: gradients stop here (Shape, comparisons, ArgMax, integer ops, ...)
  bool saves_inputs = false;   // the gradient reads the forward inputs (MatMul, Conv, Mul, Sigmoid via input, ...)
  std::uint32_t saved_outputs = 0;  // outputs the gradient reads, bit i = slot i (Relu, Sigmoid, Softmax: Y; TopK: Indices; Dropout: mask)
  // Outputs that carry a gradient, from the first (0: every floating output). BatchNorm's running
  // statistics and LayerNorm's Mean/InvStdDev never receive one.
  std::uint32_t grad_outputs = 0;
};
// Whether input `slot` of an op of type `op_type` takes a gradient when it carries one: every input
// of a differentiable op but a loss's class weights (NegativeLogLikelihoodLoss's and
// SoftmaxCrossEntropyLoss's input 2: constants of the loss, which PyTorch cannot differentiate).
bool input_takes_gradient(std::string_view op_type, std::size_t slot);

// `saves_inputs` is coarse: some ops keep only some inputs (Gather its indices, Conv and MatMul the
// operand the other gradient needs); docs/op-rules.md lists them. An unknown op type gets the
// conservative {differentiable, saves_inputs}, the rule it is priced by when given a default class.
// `attrs`: the op's attributes (a Dropout in training mode is a kernel, not an alias).
BackwardRule backward_rule(std::string_view op_type, const Attributes& attrs = Attributes{});

// The forward inputs the gradient of an op keeps until it runs (bit i = slot i; a slot past 31 is
// kept when the rule keeps every input), as PyTorch's autograd saves them: only what the gradients
// that are computed need. A product's operand (Mul, MatMul, Gemm, Conv) is kept only when another
// operand needs a gradient (dA = dY·B keeps B), a quotient's dividend only when the divisor does
// (dA = dY/B), an input of an op whose gradient it feeds (Sigmoid via its input, normalizations,
// Pow, ...) whenever the op has a gradient to compute, and what autograd keeps for its shape alone
// (AveragePool's input: PyTorch's avg_pool2d saves it; not priced as read by backward_work).
// `needs_grad[i]`: input i needs a gradient.
// An unknown op type keeps every input; an alias, or an op whose gradients are all passed
// through (Add), keeps none.
std::uint64_t saved_inputs(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                           std::span<const TensorDesc> outputs, std::span<const bool> needs_grad, std::span<const bool> repeated = {});

// Work of the gradient of a forward op. `needs_grad[i]` says whether input i needs a gradient.
// Matrix products and convolutions cost one forward pass per operand that needs a gradient (the
// data gradient and the weight gradient); other ops cost a per-type multiple of their forward
// work. Bytes: the incoming output gradients, the saved tensors, and the input gradients written.
// Only floating inputs get a gradient and only floating outputs carry one: all zeros (OpClass::alias)
// when none does (an integer Cast), for non-differentiable ops and for aliases (a gradient passes
// through a Reshape unchanged). Unknown types are handled as in op_work.
// `repeated[i]`: input i is the tensor of an earlier slot (Mul(x, x)), read once and given one gradient.
// Gradients that passed_gradients() passes through cost nothing; when every gradient passes, the
// work is zero but of the op's class (an autograd node that launches no kernel, not an alias).
OpWork backward_work(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                     std::span<const TensorDesc> outputs, std::span<const bool> needs_grad,
                     std::optional<OpClass> unknown_default = std::nullopt, std::span<const bool> repeated = {});

// Operands whose gradient is the output's gradient itself (bit i = input slot i), which autograd
// passes on without a kernel: Add's and Sum's operands and Sub's first (and Mean's, which share one
// dY / k: as many bytes as dY, one division priced), when the operand needs a
// gradient and has the output's shape and element type (a broadcast operand's gradient sums dY over
// the broadcast axes; Sub's second is -dY). 0 for other ops and when a tensor fills two slots
// (Add(x, x)'s gradient is 2·dY). The training step makes these gradients views of dY (no memory).
std::uint32_t passed_gradients(std::string_view op_type, std::span<const TensorDesc> inputs, std::span<const TensorDesc> outputs,
                               std::span<const bool> needs_grad, std::span<const bool> repeated = {});

}  // namespace placer
