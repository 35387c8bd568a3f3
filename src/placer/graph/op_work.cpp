// Cost rules of ONNX operators. One sorted table, kRules, maps an op type to its rule: the forward
// formula, the op class, and how the gradient is priced and what it keeps alive. The reasoning behind
// every number is in docs/op-rules.md; comments here say why where the code alone cannot.
//
// Conventions (docs/op-rules.md has the full table):
// - A multiply-add is 2 FLOPs; a comparison, select or math-library call (exp, log, sqrt, erf, tanh,
//   sin, pow) is 1. Elementwise ops are memory bound, so finer accounting of transcendentals would
//   not change a roofline time.
// - Every tensor an op touches is read (or written) once: the roofline lower bound. Caches and tiling
//   make that true for weights, broadcast operands and overlapping pooling windows in practice.
// - O(channels) side computations (BatchNorm's 1/sqrt(var + eps), Softmax's per-row log) are ignored.
#include "placer/graph/op_work.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "placer/graph/einsum.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {

std::uint64_t TensorDesc::elements() const {
  if (!present) return 0;
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    assert(d >= 0 && "TensorDesc: shapes must be fully known");
    n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
  }
  return n;
}

namespace {

struct Rule;

// What a forward or backward formula sees.
struct Ctx {
  const Attributes& attrs;
  std::span<const TensorDesc> in;
  std::span<const TensorDesc> out;
  const Rule& rule;
};

// Which inputs get a gradient in one backward call.
struct Grads {
  std::vector<char> need;  // per input slot
  bool operator[](std::size_t i) const { return i < need.size() && need[i]; }
};

using ForwardFn = OpWork (*)(const Ctx&);
// Returns the FLOPs of the gradient; `fwd` is the forward work of the same op.
using BackwardFn = double (*)(const Ctx&, const OpWork& fwd, const Grads&);

inline constexpr std::uint32_t kAll = 0xFFFFFFFFu;

struct Rule {
  std::string_view type;
  OpClass op_class;
  ForwardFn forward;
  double k1 = 0.0;  // forward constants, meaning per formula (usually FLOPs per element)
  double k2 = 0.0;
  BackwardFn backward = nullptr;  // nullptr: not differentiable
  double bk = 0.0;                // backward constant (a factor), meaning per formula
  // Forward inputs the gradient reads (bit i = slot i). With `cross`, the masked slots are operands
  // of a product: operand j is read only when another operand needs a gradient (dA = dY·B needs B).
  std::uint32_t saved_inputs = 0;
  bool cross = false;
  // Forward outputs the gradient reads (bit i = slot i; a rule's `true` is the first output).
  std::uint32_t saved_outputs = 0;
  // Outputs that carry a gradient (0: all floating outputs). BatchNorm's running statistics and
  // LayerNorm's Mean/InvStdDev are side outputs that never receive one.
  std::uint8_t grad_outputs = 0;
  // Operands whose gradient is dY itself when they are not broadcast (bit i = slot i): Add's and
  // Sum's, Sub's first; Mean's, which share dY / k. Autograd passes it on without a kernel
  // (passed_gradients; Mean's division is priced).
  std::uint32_t passes = 0;
  // The class of the gradient's kernel when it is not the forward's (global pooling: the forward is
  // a reduction, its gradient a pooling backward kernel).
  std::optional<OpClass> backward_class = std::nullopt;
  // Inputs autograd keeps for the gradient although its kernel reads only their shapes (bit i =
  // slot i): PyTorch's avg_pool2d saves `self`. They live until the gradient has run (saved_inputs)
  // but are not priced as read (backward_work).
  std::uint32_t kept_inputs = 0;
};

// ---- helpers --------------------------------------------------------------------------------------

const TensorDesc* slot(std::span<const TensorDesc> ts, std::size_t i) {
  return i < ts.size() && ts[i].present ? &ts[i] : nullptr;
}
double elems(std::span<const TensorDesc> ts, std::size_t i) {
  const TensorDesc* t = slot(ts, i);
  return t ? static_cast<double>(t->elements()) : 0.0;
}
double sum_bytes(std::span<const TensorDesc> ts, std::size_t from = 0) {
  double b = 0.0;
  for (std::size_t i = from; i < ts.size(); ++i)
    if (ts[i].present) b += static_cast<double>(ts[i].bytes());
  return b;
}
double dim(std::span<const TensorDesc> ts, std::size_t i, std::size_t d) {
  const TensorDesc* t = slot(ts, i);
  return t && d < t->shape.size() ? static_cast<double>(t->shape[d]) : 0.0;
}
std::size_t rank(std::span<const TensorDesc> ts, std::size_t i) {
  const TensorDesc* t = slot(ts, i);
  return t ? t->shape.size() : 0;
}
std::size_t present_count(std::span<const TensorDesc> ts) {
  return static_cast<std::size_t>(std::count_if(ts.begin(), ts.end(), [](const TensorDesc& t) { return t.present; }));
}
// Integer and boolean tensors never carry a gradient; unknown is given the benefit of the doubt.
bool grad_capable(DType t) { return is_floating(t) || t == DType::unknown; }

OpWork io(const Ctx& c, double flops) { return {flops, sum_bytes(c.in), sum_bytes(c.out), c.rule.op_class}; }


// ---- forward formulas -----------------------------------------------------------------------------

OpWork f_alias(const Ctx&) { return {}; }

// Copies, permutations and fills: bytes only.
OpWork f_copy(const Ctx& c) { return io(c, 0.0); }

// k1 FLOPs per output element.
OpWork f_pointwise(const Ctx& c) { return io(c, c.rule.k1 * elems(c.out, 0)); }

// Variadic Sum/Max/Min/Mean: k1 per element per extra operand, plus k2 per element (Mean's divide).
OpWork f_variadic(const Ctx& c) {
  double n = static_cast<double>(present_count(c.in));
  return io(c, elems(c.out, 0) * (c.rule.k1 * std::max(n - 1.0, 0.0) + c.rule.k2));
}

// Reductions: k1 per input element, k2 per output element (Mean's divide, L2's sqrt, LogSum's log).
OpWork f_reduce(const Ctx& c) { return io(c, c.rule.k1 * elems(c.in, 0) + c.rule.k2 * elems(c.out, 0)); }

OpWork f_gelu(const Ctx& c) {
  // erf form: x * 0.5 * (1 + erf(x / sqrt 2)) = 5; tanh form adds the cubic polynomial: 9.
  double per = c.attrs.get_string("approximate", "none") == "tanh" ? 9.0 : 5.0;
  return io(c, per * elems(c.out, 0));
}

// Y = 2*K*|Y| covers every MatMul case of the spec: batch broadcasting is already in Y's shape, and
// a 1-D operand only removes a unit dim from Y. A's last dim is always the contraction.
double matmul_core(const Ctx& c) {
  std::size_t r = rank(c.in, 0);
  return r == 0 ? 0.0 : 2.0 * elems(c.out, 0) * dim(c.in, 0, r - 1);
}
// The product's smallest dimension (OpWork::product_min_dim) as libtorch's matmul runs it: an
// operand of one dimension is a vector (M or N = 1); a stack of matrices by one matrix folds the
// stack into the product's rows (A's) or, computed transposed, into its columns (B's); two stacks
// multiply matrix by matrix.
std::uint32_t clamp_dim(double d) { return d >= 4294967295.0 ? 0xFFFFFFFFu : d > 0 ? static_cast<std::uint32_t>(d) : 0u; }
std::uint32_t matmul_min_dim(const Ctx& c) {
  const std::size_t ra = rank(c.in, 0), rb = rank(c.in, 1);
  if (ra == 0 || rb == 0) return 0;
  const double k = dim(c.in, 0, ra - 1);
  double m = ra >= 2 ? dim(c.in, 0, ra - 2) : 1.0, n = rb >= 2 ? dim(c.in, 1, rb - 1) : 1.0;
  if (ra >= 3 && rb <= 2)
    for (std::size_t d = 0; d + 2 < ra; ++d) m *= dim(c.in, 0, d);
  if (ra <= 2 && rb >= 3)
    for (std::size_t d = 0; d + 2 < rb; ++d) n *= dim(c.in, 1, d);
  return clamp_dim(std::min({m, n, k}));
}
OpWork f_matmul(const Ctx& c) {
  OpWork w = io(c, matmul_core(c));
  w.product_min_dim = matmul_min_dim(c);
  return w;
}

double gemm_core(const Ctx& c) {
  double k = c.attrs.get_int("transA", 0) ? dim(c.in, 0, 0) : dim(c.in, 0, 1);
  return 2.0 * elems(c.out, 0) * k;
}
OpWork f_gemm(const Ctx& c) {
  double mn = elems(c.out, 0);
  double flops = gemm_core(c);
  if (c.attrs.get_float("alpha", 1.0) != 1.0) flops += mn;
  if (slot(c.in, 2)) {
    flops += mn;                                              // + C
    if (c.attrs.get_float("beta", 1.0) != 1.0) flops += mn;  // beta * C
  }
  OpWork w = io(c, flops);
  // Rows, columns and the contracted length (A's second dimension, its first when transposed).
  const double k = c.attrs.get_int("transA", 0) ? dim(c.in, 0, 0) : dim(c.in, 0, 1);
  if (rank(c.out, 0) == 2) w.product_min_dim = clamp_dim(std::min({dim(c.out, 0, 0), dim(c.out, 0, 1), k}));
  return w;
}

// Einsum: the naive contraction visits every combination of index values once; each visit multiplies
// the n operands (n-1 multiplies) and, when some index is summed, accumulates (1 add).
double einsum_core(const Ctx& c) {
  if (!c.attrs.find("equation")) throw Error("Einsum: missing 'equation' attribute");
  const std::string eq = c.attrs.get_string("equation", "");
  std::vector<std::size_t> ranks;
  std::vector<std::span<const std::int64_t>> shapes;
  for (const TensorDesc& t : c.in) ranks.push_back(t.shape.size()), shapes.push_back(t.shape);
  const EinsumLabels labels = parse_einsum(eq, ranks);
  const std::vector<std::int64_t> size = einsum_label_sizes(eq, labels, shapes);
  std::vector<char> used(size.size(), 0), kept(size.size(), 0);
  for (const auto& dims : labels.operands)
    for (int label : dims) used[static_cast<std::size_t>(label)] = 1;
  for (int label : labels.output) kept[static_cast<std::size_t>(label)] = 1;
  double visits = 1.0;
  bool summed = false;
  for (std::size_t label = 0; label < size.size(); ++label) {
    if (!used[label]) continue;
    visits *= static_cast<double>(size[label]);
    summed = summed || !kept[label];
  }
  const auto n = static_cast<double>(labels.operands.size());
  return visits * std::max(n - 1.0 + (summed ? 1.0 : 0.0), 0.0);
}
OpWork f_einsum(const Ctx& c) { return io(c, einsum_core(c)); }

// Conv: every output element is a dot product over (C/group) x kernel, and W = [M, C/group, k...]
// holds exactly that extent, so `group` (and strides, pads, dilations) enter through the shapes.
double conv_core(const Ctx& c) {
  double per = dim(c.in, 1, 1);
  for (std::size_t d = 2; d < rank(c.in, 1); ++d) per *= dim(c.in, 1, d);
  return 2.0 * elems(c.out, 0) * per;
}
// ConvTranspose: W = [C, M/group, k...]; every input element scatters into (M/group) x kernel outputs.
double conv_transpose_core(const Ctx& c) {
  double per = dim(c.in, 1, 1);
  for (std::size_t d = 2; d < rank(c.in, 1); ++d) per *= dim(c.in, 1, d);
  return 2.0 * elems(c.in, 0) * per;
}
// The table marks ConvTranspose with k1 = 1.
double conv_like_core(const Ctx& c) { return c.rule.k1 != 0.0 ? conv_transpose_core(c) : conv_core(c); }
OpWork f_conv(const Ctx& c) {
  OpWork w = io(c, conv_like_core(c) + (slot(c.in, 2) ? elems(c.out, 0) : 0.0));
  // 2-D convolutions only: the curve is measured on them (a 1-D or 3-D one runs other kernels).
  if (c.rule.k1 == 0.0 && c.attrs.get_int("group", 1) == 1 && rank(c.in, 1) == 4) {
    double area = 1.0;
    for (std::size_t d = 2; d < rank(c.in, 1); ++d) area *= dim(c.in, 1, d);
    w.conv_kernel_area = clamp_dim(area);
  }
  return w;
}

// Quantized products (integer arithmetic, no gradient). ConvInteger and MatMulInteger take x and w
// in slots 0 and 1 and subtract their zero points (slots 2 and 3) once per element; QLinearConv
// and QLinearMatMul take w in slot 3 and requantize every output (scale, round, add the zero
// point: 3 per element), QLinearConv adding its int32 bias (slot 8).
OpWork f_integer_product(const Ctx& c) {
  const double core = c.rule.op_class == OpClass::conv ? conv_core(c) : matmul_core(c);
  return io(c, core + (slot(c.in, 2) ? elems(c.in, 0) : 0.0) + (slot(c.in, 3) ? elems(c.in, 1) : 0.0));
}
OpWork f_qlinear_product(const Ctx& c) {
  const TensorDesc none{};
  const std::array<TensorDesc, 2> operands{slot(c.in, 0) ? c.in[0] : none, slot(c.in, 3) ? c.in[3] : none};
  const Ctx product{c.attrs, operands, c.out, c.rule};
  const double core = c.rule.op_class == OpClass::conv ? conv_core(product) : matmul_core(product);
  return io(c, core + 3.0 * elems(c.out, 0) + (slot(c.in, 8) ? elems(c.out, 0) : 0.0));
}

// Losses. SoftmaxCrossEntropyLoss: a log-softmax over the scores (5 per element), then per label
// the gather, weight and sum (2). NegativeLogLikelihoodLoss: gather, weight and sum per target (3).
OpWork f_softmax_cross_entropy(const Ctx& c) { return io(c, 5.0 * elems(c.in, 0) + 2.0 * elems(c.in, 1)); }
OpWork f_negative_log_likelihood(const Ctx& c) { return io(c, 3.0 * elems(c.in, 1)); }

// A fast Fourier transform of length N: 5 N log2 N FLOPs (complex radix-2), half for real input.
double fft_flops(double n, bool real) { return (real ? 2.5 : 5.0) * n * std::log2(std::max(n, 2.0)); }
// DFT: input [batch..., N, 1 or 2] along `axis`; as many transforms as the output has rows.
OpWork f_dft(const Ctx& c) {
  const auto r = static_cast<std::int64_t>(rank(c.in, 0));
  std::int64_t axis = c.attrs.get_int("axis", 1);
  if (axis < 0) axis += r;
  if (r < 2 || axis < 0 || axis >= r - 1) return io(c, 0.0);
  const double n = std::max(dim(c.in, 0, static_cast<std::size_t>(axis)), dim(c.out, 0, static_cast<std::size_t>(axis)));
  const double along = dim(c.out, 0, static_cast<std::size_t>(axis));
  const double transforms = along > 0 ? elems(c.out, 0) / (along * 2.0) : 0.0;
  return io(c, transforms * fft_flops(n, dim(c.in, 0, static_cast<std::size_t>(r - 1)) == 1));
}
// STFT: output [batch, frames, bins, 2]; each frame is windowed (N) and transformed, N the frame
// length (2 (bins - 1) when onesided).
OpWork f_stft(const Ctx& c) {
  const double bins = dim(c.out, 0, 2);
  const double n = c.attrs.get_int("onesided", 1) ? 2.0 * std::max(bins - 1.0, 1.0) : bins;
  const double frames = dim(c.out, 0, 0) * dim(c.out, 0, 1);
  return io(c, frames * (n + fft_flops(n, dim(c.in, 0, 2) <= 1)));
}
// RoiAlign: each output element averages sampling_ratio^2 bilinear samples (4 taps, 9 FLOPs each);
// an adaptive ratio (0) is taken as 2.
OpWork f_roi_align(const Ctx& c) {
  const auto ratio = static_cast<double>(c.attrs.get_int("sampling_ratio", 0));
  const double samples = ratio > 0 ? ratio * ratio : 4.0;
  return io(c, elems(c.out, 0) * (9.0 * samples + 1.0));
}
// NonMaxSuppression: per batch and class, a sort of the B boxes by score and, at worst, an IoU
// (about 10 FLOPs) of every pair. Unique: a sort of its input. Both give data-dependent shapes,
// imported only when the model declares them.
OpWork f_non_max_suppression(const Ctx& c) {
  const double boxes = dim(c.in, 1, 2), lists = dim(c.in, 1, 0) * dim(c.in, 1, 1);
  return io(c, lists * (boxes * std::log2(std::max(boxes, 2.0)) + 5.0 * boxes * boxes));
}
OpWork f_sort(const Ctx& c) { return io(c, elems(c.in, 0) * std::log2(std::max(elems(c.in, 0), 2.0))); }

// Det: an LU factorisation per M x M matrix, 2/3 M^3.
OpWork f_det(const Ctx& c) {
  const std::size_t r = rank(c.in, 0);
  const double m = r >= 2 ? dim(c.in, 0, r - 1) : 0.0;
  return io(c, m > 0 ? elems(c.in, 0) / (m * m) * (2.0 / 3.0) * m * m * m : 0.0);
}

// Normalize-and-affine is 4 per element (subtract mean, scale by 1/sigma, times gamma, plus beta);
// computing the statistics is 4 more (1 add for the mean; subtract, square, add for the variance).
OpWork f_batchnorm(const Ctx& c) {
  double per = c.attrs.get_int("training_mode", 0) ? 8.0 : 4.0;
  return io(c, per * elems(c.out, 0));
}
OpWork f_layernorm(const Ctx& c) { return io(c, (slot(c.in, 2) ? 8.0 : 7.0) * elems(c.out, 0)); }
OpWork f_lrn(const Ctx& c) {
  // square-sum over `size` channels (2 each), then (bias + alpha/size * s)^beta and a divide.
  // A window wider than the channels sums them all (a size of 2^62 was priced as given: a fuzzing review).
  double size = static_cast<double>(c.attrs.get_int("size", 1));
  if (rank(c.in, 0) >= 2) size = std::min(size, dim(c.in, 0, 1));
  return io(c, (2.0 * size + 4.0) * elems(c.out, 0));
}

// Pooling: k1 per output element per kernel position.
OpWork f_pool(const Ctx& c) {
  double kernel = 1.0;
  for (std::int64_t k : c.attrs.get_ints("kernel_shape")) kernel *= static_cast<double>(k);
  return io(c, c.rule.k1 * elems(c.out, 0) * kernel);
}
// Global pooling: the kernel is the whole spatial extent, so k1 per input element.
OpWork f_global_pool(const Ctx& c) { return io(c, c.rule.k1 * elems(c.in, 0)); }

OpWork f_topk(const Ctx& c) {
  // A heap of K along the axis: log2 K comparisons per input element.
  std::size_t r = rank(c.in, 0);
  std::int64_t axis = c.attrs.get_int("axis", -1);
  if (axis < 0) axis += static_cast<std::int64_t>(r);
  double k = r ? dim(c.out, 0, static_cast<std::size_t>(std::clamp<std::int64_t>(axis, 0, static_cast<std::int64_t>(r) - 1)))
               : 1.0;
  return io(c, elems(c.in, 0) * std::max(1.0, std::ceil(std::log2(std::max(k, 1.0)))));
}

// Slice reads only the region it copies (strided rows of the data), plus its index inputs.
OpWork f_slice(const Ctx& c) { return {0.0, sum_bytes(c.out) + sum_bytes(c.in, 1), sum_bytes(c.out), c.rule.op_class}; }

// Gather/GatherElements/GatherND read only the gathered elements (the output's size, in the data's
// element type) and the indices; the rest of the data tensor is never touched.
OpWork f_gather(const Ctx& c) {
  const TensorDesc* data = slot(c.in, 0);
  double gathered = elems(c.out, 0) * (data ? dtype_size(data->dtype) : 0);
  return {0.0, gathered + sum_bytes(c.in, 1), sum_bytes(c.out), c.rule.op_class};
}

// Scatter copies data to the output and overwrites (or, with `reduction`, combines) the updates.
OpWork f_scatter(const Ctx& c) {
  bool combines = c.attrs.get_string("reduction", "none") != "none";
  return io(c, combines ? elems(c.in, 2) : 0.0);
}

// Interpolation: each output element blends 2^r (linear) or 4^r (cubic) neighbours along the r
// interpolated axes, a multiply-add each. Nearest is a copy.
double interpolation(std::string_view mode, double axes) {
  if (mode == "linear" || mode == "bilinear") return 2.0 * std::pow(2.0, axes);
  if (mode == "cubic" || mode == "bicubic") return 2.0 * std::pow(4.0, axes);
  return 0.0;
}
OpWork f_resize(const Ctx& c) {
  double axes = 0, widened = 1.0;
  // An antialiased downsampling (opset 18) stretches its filter by in/out along each shrunk axis:
  // that many times the taps (a half-size linear resize reads 4 inputs per axis, not 2).
  const bool antialias = c.attrs.get_int("antialias", 0) != 0;
  for (std::size_t d = 0; d < rank(c.out, 0); ++d)
    if (d >= rank(c.in, 0) || dim(c.in, 0, d) != dim(c.out, 0, d)) {
      ++axes;
      if (antialias && d < rank(c.in, 0) && dim(c.out, 0, d) > 0 && dim(c.in, 0, d) > dim(c.out, 0, d))
        widened *= static_cast<double>(dim(c.in, 0, d)) / static_cast<double>(dim(c.out, 0, d));
    }
  return io(c, elems(c.out, 0) * interpolation(c.attrs.get_string("mode", "nearest"), axes) * widened);
}
OpWork f_grid_sample(const Ctx& c) {
  double axes = rank(c.in, 0) >= 2 ? static_cast<double>(rank(c.in, 0) - 2) : 0.0;
  return io(c, elems(c.out, 0) * interpolation(c.attrs.get_string("mode", "bilinear"), axes));
}

// Fused recurrent ops (LSTM G=4, GRU G=3, RNN G=1 in k1). Per step, batch row and direction: the
// gate products W·x and R·h (2·G·H·(I+H)), then pointwise work per hidden unit with the spec's
// default activations (sigmoid counts 3, tanh 1, as the standalone ops do):
//   LSTM: 4 gate sums + 3 sigmoids (9) + 2 tanh + cell f*c+i*g (3) + o*tanh(c) (1) = 19
//   GRU:  2 gate sums + r*(R·h)+W·x (2) + 2 sigmoids (6) + tanh (1) + (1-z)*h'+z*h (4) = 15
//   RNN:  1 gate sum + tanh = 2
// plus the biases Wb and Rb (2·G per unit) and LSTM peepholes (3 multiply-adds = 6 per unit).
struct RecurrentShape {
  double steps = 0;  // directions x seq_length x batch
  double gates = 0, hidden = 0, input = 0, pointwise = 0;
  double batch = 0;
};
RecurrentShape recurrent_shape(const Ctx& c) {
  RecurrentShape s;
  s.gates = c.rule.k1;
  s.input = dim(c.in, 1, 2);
  s.hidden = dim(c.in, 2, 2);
  if (s.hidden == 0) s.hidden = static_cast<double>(c.attrs.get_int("hidden_size", 0));
  double seq = dim(c.in, 0, 0), batch = dim(c.in, 0, 1);
  if (c.attrs.get_int("layout", 0)) std::swap(seq, batch);
  s.steps = dim(c.in, 1, 0) * seq * batch;
  s.batch = batch;
  double per_unit = c.rule.k2;
  if (slot(c.in, 3)) per_unit += 2.0 * s.gates;
  if (s.gates == 4 && slot(c.in, 7)) per_unit += 6.0;
  s.pointwise = s.steps * s.hidden * per_unit;
  return s;
}
// Each step multiplies the batch's hidden state, [batch, hidden], by R: a thin product wherever the
// batch is small, which a device's product curve prices by that smallest dimension
// (OpWork::product_min_dim). (libtorch's CPU layers multiply the inputs of every step in one
// product of seq x batch rows beforehand; priced at the step's rate too.)
OpWork f_recurrent(const Ctx& c) {
  RecurrentShape s = recurrent_shape(c);
  OpWork w = io(c, s.steps * 2.0 * s.gates * s.hidden * (s.input + s.hidden) + s.pointwise);
  if (s.batch > 0 && s.hidden > 0) w.product_min_dim = clamp_dim(std::min(s.batch, s.hidden));
  return w;
}

// ---- backward formulas ----------------------------------------------------------------------------

// How many of the first n inputs get a gradient.
double operands(const Grads& g, std::size_t n) {
  double count = 0;
  for (std::size_t i = 0; i < n; ++i) count += g[i] ? 1.0 : 0.0;
  return count;
}

// k times the forward FLOPs, once for all inputs (activations, normalizations, reductions).
double b_times_forward(const Ctx& c, const OpWork& fwd, const Grads&) { return c.rule.bk * fwd.flops; }
// k per output element (Softmax, MaxPool, TopK: the work follows the output, not the forward).
double b_times_output(const Ctx& c, const OpWork&, const Grads&) { return c.rule.bk * elems(c.out, 0); }
// k per output element for each input that needs a gradient (binary elementwise ops, where each
// operand's gradient is its own pass over dY, reduced over its broadcast axes; Gather's scatter-add).
double b_per_operand(const Ctx& c, const OpWork&, const Grads& g) {
  return c.rule.bk * operands(g, c.in.size()) * elems(c.out, 0);
}
// Matrix products and convolutions: the gradient of each operand is one product the size of the
// forward (dA = dY·Bᵀ, dB = Aᵀ·dY; conv's data and weight gradients), the "2x forward" of the
// 6N training rule. A bias gradient is a sum of dY over everything but its axis.
double b_matmul(const Ctx& c, const OpWork&, const Grads& g) { return matmul_core(c) * operands(g, 2); }
double b_gemm(const Ctx& c, const OpWork&, const Grads& g) {
  return gemm_core(c) * operands(g, 2) + (g[2] ? elems(c.out, 0) : 0.0);
}
double b_conv(const Ctx& c, const OpWork&, const Grads& g) {
  return conv_like_core(c) * operands(g, 2) + (g[2] ? elems(c.out, 0) : 0.0);
}
double b_einsum(const Ctx& c, const OpWork&, const Grads& g) { return einsum_core(c) * operands(g, c.in.size()); }
// Back-propagation through time always runs the recurrence backwards (dh through Rᵀ, one R-sized
// product per step) once anything needs a gradient; dX, dW and dR add one forward-sized product
// each; the pointwise gate derivatives cost 2x their forward.
double b_recurrent(const Ctx& c, const OpWork&, const Grads& g) {
  RecurrentShape s = recurrent_shape(c);
  double mm_x = s.steps * 2.0 * s.gates * s.hidden * s.input;
  double mm_h = s.steps * 2.0 * s.gates * s.hidden * s.hidden;
  double flops = mm_h + 2.0 * s.pointwise;
  if (g[0]) flops += mm_x;
  if (g[1]) flops += mm_x;
  if (g[2]) flops += mm_h;
  if (g[3]) flops += s.steps * 2.0 * s.gates * s.hidden;
  return flops;
}
// Linear interpolation's gradient scatters each dY with the same weights (as many FLOPs as the
// forward); nearest's accumulates the dY of all copies of an element, one add per output element.
double b_resize(const Ctx& c, const OpWork& fwd, const Grads&) { return fwd.flops > 0 ? fwd.flops : elems(c.out, 0); }

// ---- the table ------------------------------------------------------------------------------------

using enum OpClass;

constexpr std::uint32_t slots(std::initializer_list<int> ss) {
  std::uint32_t m = 0;
  for (int s : ss) m |= 1u << s;
  return m;
}

// Shape-only ops. `differentiable` ones pass the gradient through unchanged, for free.
constexpr Rule alias_op(std::string_view t, bool differentiable) {
  return {t, alias, f_alias, 0, 0, differentiable ? b_times_forward : nullptr};
}
// Unary elementwise: k FLOPs per element; gradient `bk` x forward.
constexpr Rule unary(std::string_view t, double k, double bk, std::uint32_t saved, bool saves_out) {
  return {t, elementwise, f_pointwise, k, 0, b_times_forward, bk, saved, false, saves_out ? 1u : 0u};
}
// Binary (broadcasting) elementwise: gradient `bk` per output element per operand needing one.
constexpr Rule binary(std::string_view t, double k, double bk, std::uint32_t saved, bool cross, bool saves_out) {
  return {t, elementwise, f_pointwise, k, 0, b_per_operand, bk, saved, cross, saves_out ? 1u : 0u};
}
constexpr Rule variadic(std::string_view t, double k2, std::uint32_t saved, bool saves_out) {
  return {t, elementwise, f_variadic, 1, k2, b_per_operand, 1, saved, false, saves_out ? 1u : 0u};
}
// Elementwise ops without a gradient: comparisons, logic, rounding (zero derivative a.e.), bits.
constexpr Rule no_grad(std::string_view t, OpClass cls, ForwardFn f, double k = 1) { return {t, cls, f, k}; }
// Data movement: bytes only; the gradient moves the bytes back.
constexpr Rule copy_op(std::string_view t, ForwardFn f = f_copy, std::uint32_t saved = 0) {
  return {t, data_movement, f, 0, 0, b_times_forward, 0, saved};
}
constexpr Rule norm(std::string_view t, ForwardFn f, double k, std::uint32_t saved) {
  return {t, normalization, f, k, 0, b_times_forward, 2, saved, false, false, 1};
}
constexpr Rule reduce(std::string_view t, double k1, double k2, double bk, std::uint32_t saved, bool saves_out) {
  return {t, reduction, f_reduce, k1, k2, b_times_forward, bk, saved, false, saves_out ? 1u : 0u};
}
// Global pooling reduces each channel's spatial dimensions (the executor runs `mean`, `amax`,
// `linalg_vector_norm`: reduction kernels, measured so on the H100 box); its gradient is a pooling
// backward kernel (docs/cost-model.md).
constexpr Rule global_pool(std::string_view t, double k1, std::uint32_t saved, std::uint32_t saved_out) {
  Rule r{t, reduction, f_global_pool, k1, 0, b_times_forward, 1, saved, false, saved_out};
  r.backward_class = pooling;
  return r;
}

// `r` whose gradient keeps the inputs of `slots` alive for their shapes alone (Rule::kept_inputs).
constexpr Rule keeping(Rule r, std::uint32_t slots) {
  r.kept_inputs = slots;
  return r;
}

// `r` with the gradients of `slots` passed through when those operands are not broadcast.
constexpr Rule passing(Rule r, std::uint32_t slots) {
  r.passes = slots;
  return r;
}

// Sorted by type (checked below) for binary search. FLOP constants: see docs/op-rules.md.
constexpr auto kRules = std::to_array<Rule>({
    unary("Abs", 1, 1, kAll, false),
    unary("Acos", 1, 2, kAll, false),
    unary("Acosh", 1, 2, kAll, false),
    passing(binary("Add", 1, 1, 0, false, false), kAll),
    no_grad("And", elementwise, f_pointwise),
    no_grad("ArgMax", reduction, f_reduce),
    no_grad("ArgMin", reduction, f_reduce),
    unary("Asin", 1, 2, kAll, false),
    unary("Asinh", 1, 2, kAll, false),
    unary("Atan", 1, 2, kAll, false),
    unary("Atanh", 1, 2, kAll, false),
    // Averaging spreads each dY/k over its window: as many FLOPs as the forward, no value read; but
    // autograd keeps X (avg_pool2d_backward takes `self`, for its shape).
    keeping({"AveragePool", pooling, f_pool, 1, 0, b_times_forward, 1}, slots({0})),
    norm("BatchNormalization", f_batchnorm, 0, slots({0, 1, 3, 4})),
    no_grad("Bernoulli", data_movement, f_copy),
    no_grad("BitShift", elementwise, f_pointwise),
    no_grad("BitwiseAnd", elementwise, f_pointwise),
    no_grad("BitwiseNot", elementwise, f_pointwise),
    no_grad("BitwiseOr", elementwise, f_pointwise),
    no_grad("BitwiseXor", elementwise, f_pointwise),
    no_grad("BlackmanWindow", data_movement, f_pointwise, 5),  // generators: two cosines, scaled and summed
    // Integer casts get no gradient through the dtype filter of backward_work, not the rule.
    copy_op("Cast"),
    copy_op("CastLike"),
    no_grad("Ceil", elementwise, f_pointwise),
    unary("Celu", 5, 2, kAll, false),
    unary("Clip", 2, 1, slots({0}), false),
    copy_op("Compress", f_copy, slots({1})),
    copy_op("Concat"),
    alias_op("Constant", false),
    no_grad("ConstantOfShape", data_movement, f_copy),
    {"Conv", conv, f_conv, 0, 0, b_conv, 0, slots({0, 1}), true},
    {"ConvInteger", conv, f_integer_product},
    {"ConvTranspose", conv, f_conv, 1, 0, b_conv, 0, slots({0, 1}), true},
    unary("Cos", 1, 2, kAll, false),
    unary("Cosh", 1, 2, kAll, false),
    {"CumSum", reduction, f_reduce, 1, 0, b_times_forward, 1},
    // Linear: the gradient is the transform back, as many FLOPs as the forward.
    {"DFT", elementwise, f_dft, 0, 0, b_times_forward, 1},
    copy_op("DepthToSpace"),
    no_grad("DequantizeLinear", elementwise, f_pointwise, 2),  // (x - zero point) * scale
    // The gradient det(A) A^-T: an inverse (about 3 times the factorisation).
    {"Det", matmul, f_det, 0, 0, b_times_forward, 3, kAll, false, slots({0})},
    // dA = dY / B, dB = -dA·Y (= -dY·A / B²): B for either gradient, A with it (op-rules.md).
    binary("Div", 1, 2, slots({0, 1}), false, false),
    alias_op("Dropout", true),
    // The scale and zero point of the whole tensor (its min and max: 2 per element), then
    // QuantizeLinear's 3 per element.
    no_grad("DynamicQuantizeLinear", elementwise, f_reduce, 5),
    {"Einsum", matmul, f_einsum, 0, 0, b_einsum, 0, kAll, true},
    unary("Elu", 4, 2, kAll, false),
    no_grad("Equal", elementwise, f_pointwise),
    unary("Erf", 1, 2, kAll, false),
    unary("Exp", 1, 2, 0, true),
    // The gradient of a broadcast sums dY over the broadcast axes: one add per output element.
    {"Expand", data_movement, f_copy, 0, 0, b_per_operand, 1},
    no_grad("EyeLike", data_movement, f_copy),
    alias_op("Flatten", true),
    no_grad("Floor", elementwise, f_pointwise),
    {"GRU", matmul, f_recurrent, 3, 15, b_recurrent, 0, kAll, false, kAll},
    // Gathers' gradient scatter-adds dY into a zeroed data-shaped tensor.
    {"Gather", data_movement, f_gather, 0, 0, b_per_operand, 1, slots({1})},
    {"GatherElements", data_movement, f_gather, 0, 0, b_per_operand, 1, slots({1})},
    {"GatherND", data_movement, f_gather, 0, 0, b_per_operand, 1, slots({1})},
    {"Gelu", elementwise, f_gelu, 0, 0, b_times_forward, 2, kAll},
    {"Gemm", matmul, f_gemm, 0, 0, b_gemm, 0, slots({0, 1}), true},
    global_pool("GlobalAveragePool", 1, 0, 0),
    global_pool("GlobalLpPool", 2, kAll, slots({0})),
    global_pool("GlobalMaxPool", 1, kAll, slots({0})),
    no_grad("Greater", elementwise, f_pointwise),
    no_grad("GreaterOrEqual", elementwise, f_pointwise),
    {"GridSample", data_movement, f_grid_sample, 0, 0, b_times_forward, 2, slots({0, 1})},
    norm("GroupNormalization", f_pointwise, 8, slots({0, 1})),
    no_grad("HammingWindow", data_movement, f_pointwise, 3),
    no_grad("HannWindow", data_movement, f_pointwise, 3),
    unary("HardSigmoid", 4, 1, kAll, false),
    unary("HardSwish", 5, 1, kAll, false),
    no_grad("Hardmax", reduction, f_pointwise),
    alias_op("Identity", true),
    norm("InstanceNormalization", f_pointwise, 8, slots({0, 1})),
    no_grad("IsInf", elementwise, f_pointwise),
    no_grad("IsNaN", elementwise, f_pointwise),
    {"LRN", normalization, f_lrn, 0, 0, b_times_forward, 2, kAll, false, false},
    {"LSTM", matmul, f_recurrent, 4, 19, b_recurrent, 0, kAll, false, kAll},
    norm("LayerNormalization", f_layernorm, 0, slots({0, 1})),
    unary("LeakyRelu", 2, 1, kAll, false),
    no_grad("Less", elementwise, f_pointwise),
    no_grad("LessOrEqual", elementwise, f_pointwise),
    unary("Log", 1, 2, kAll, false),
    // dX = dY - exp(Y) * sum(dY): exp, sum, multiply, subtract = 4 per element.
    {"LogSoftmax", reduction, f_pointwise, 5, 0, b_times_output, 4, 0, false, slots({0})},
    norm("LpNormalization", f_pointwise, 3, kAll),
    {"LpPool", pooling, f_pool, 2, 0, b_times_forward, 1, kAll, false, slots({0})},
    {"MatMul", matmul, f_matmul, 0, 0, b_matmul, 0, slots({0, 1}), true},
    {"MatMulInteger", matmul, f_integer_product},
    variadic("Max", 0, kAll, true),
    // dX routes each dY to its window's argmax (found by comparing X with Y, or kept as indices).
    {"MaxPool", pooling, f_pool, 1, 0, b_times_output, 1, slots({0}), false, slots({0}), 1},
    // Scatters each value to its saved index (a zero-filled output); the gradient gathers it back.
    copy_op("MaxUnpool", f_copy, slots({1})),
    // Mean's operands share one gradient, dY / k (the executor divides the sum in place, autograd
    // divides dY once and passes the quotient on): views of dY, which holds as many bytes, priced
    // as the division (backward_work).
    passing(variadic("Mean", 1, 0, false), kAll),
    norm("MeanVarianceNormalization", f_pointwise, 6, kAll),
    no_grad("MelWeightMatrix", data_movement, f_copy),
    variadic("Min", 0, kAll, true),
    unary("Mish", 5, 2, kAll, false),
    no_grad("Mod", elementwise, f_pointwise),
    binary("Mul", 1, 1, slots({0, 1}), true, false),
    unary("Neg", 1, 1, 0, false),
    // dX scatters -weight into a zeroed input-shaped tensor at each target: as many FLOPs again.
    {"NegativeLogLikelihoodLoss", reduction, f_negative_log_likelihood, 0, 0, b_times_forward, 1, slots({1, 2}), false, 0, 1},
    no_grad("NonMaxSuppression", reduction, f_non_max_suppression),
    // One compare per input element, then the compaction writes the indices.
    no_grad("NonZero", data_movement, f_reduce),
    no_grad("Not", elementwise, f_pointwise),
    no_grad("OneHot", data_movement, f_copy),
    no_grad("Or", elementwise, f_pointwise),
    binary("PRelu", 2, 2, kAll, false, false),
    copy_op("Pad"),
    // dA = dY*B*A^(B-1), dB = dY*Y*ln A: 3 per element per operand.
    binary("Pow", 1, 3, kAll, false, true),
    {"QLinearConv", conv, f_qlinear_product},
    {"QLinearMatMul", matmul, f_qlinear_product},
    // Dividing by the scale, rounding, adding the zero point and saturating: 3 per element.
    no_grad("QuantizeLinear", elementwise, f_pointwise, 3),
    {"RNN", matmul, f_recurrent, 1, 2, b_recurrent, 0, kAll, false, kAll},
    no_grad("RandomNormal", data_movement, f_copy),
    no_grad("RandomNormalLike", data_movement, f_copy),
    no_grad("RandomUniform", data_movement, f_copy),
    no_grad("RandomUniformLike", data_movement, f_copy),
    no_grad("Range", data_movement, f_copy),
    unary("Reciprocal", 1, 2, 0, true),
    reduce("ReduceL1", 2, 0, 1, kAll, false),
    reduce("ReduceL2", 2, 1, 1, kAll, true),
    reduce("ReduceLogSum", 1, 1, 1, 0, true),
    reduce("ReduceLogSumExp", 2, 1, 1, kAll, true),
    reduce("ReduceMax", 1, 0, 1, kAll, true),
    reduce("ReduceMean", 1, 1, 1, 0, false),
    reduce("ReduceMin", 1, 0, 1, kAll, true),
    reduce("ReduceProd", 1, 0, 2, kAll, true),
    reduce("ReduceSum", 1, 0, 1, 0, false),
    reduce("ReduceSumSquare", 2, 0, 1, kAll, false),
    unary("Relu", 1, 1, 0, true),
    alias_op("Reshape", true),
    {"Resize", data_movement, f_resize, 0, 0, b_resize},
    copy_op("ReverseSequence", f_copy, slots({1})),
    // The gradient scatters each dY back over its samples' taps.
    {"RoiAlign", data_movement, f_roi_align, 0, 0, b_times_forward, 1, slots({1, 2})},
    no_grad("Round", elementwise, f_pointwise),
    {"STFT", elementwise, f_stft, 0, 0, b_times_forward, 1, slots({2})},
    copy_op("Scatter", f_scatter, slots({1})),
    copy_op("ScatterElements", f_scatter, slots({1})),
    copy_op("ScatterND", f_scatter, slots({1})),
    unary("Selu", 5, 2, kAll, false),
    alias_op("Shape", false),
    unary("Shrink", 2, 1, kAll, false),
    unary("Sigmoid", 3, 2, 0, true),
    no_grad("Sign", elementwise, f_pointwise),
    unary("Sin", 1, 2, kAll, false),
    unary("Sinh", 1, 2, kAll, false),
    alias_op("Size", false),
    copy_op("Slice", f_slice),
    // max, subtract, exp, sum, divide = 5; dX = Y * (dY - sum(dY * Y)) = 4 per element.
    {"Softmax", reduction, f_pointwise, 5, 0, b_times_output, 4, 0, false, slots({0})},
    // dScores = (softmax - one-hot) x weight x dLoss: about 2 per score element.
    {"SoftmaxCrossEntropyLoss", reduction, f_softmax_cross_entropy, 0, 0, b_times_forward, 0.4, slots({0, 1, 2}), false, 0, 1},
    unary("Softplus", 3, 2, kAll, false),
    unary("Softsign", 3, 2, kAll, false),
    copy_op("SpaceToDepth"),
    copy_op("Split"),
    unary("Sqrt", 1, 2, 0, true),
    alias_op("Squeeze", true),
    passing(binary("Sub", 1, 1, 0, false, false), slots({0})),  // dB = -dY: a kernel
    passing(variadic("Sum", 0, 0, false), kAll),
    unary("Tan", 1, 2, 0, true),
    unary("Tanh", 1, 2, 0, true),
    unary("ThresholdedRelu", 2, 1, kAll, false),
    {"Tile", data_movement, f_copy, 0, 0, b_per_operand, 1},
    // The gradient scatters dY back to the K positions kept in the Indices output.
    {"TopK", reduction, f_topk, 0, 0, b_times_output, 1, 0, false, slots({1}), 1},
    copy_op("Transpose"),
    copy_op("Trilu"),
    no_grad("Unique", reduction, f_sort),
    alias_op("Unsqueeze", true),
    {"Upsample", data_movement, f_resize, 0, 0, b_resize},
    binary("Where", 1, 1, slots({0}), false, false),
    no_grad("Xor", elementwise, f_pointwise),
});

static_assert(std::ranges::adjacent_find(kRules, std::ranges::greater_equal{}, &Rule::type) == kRules.end(),
              "kRules must be sorted by type without duplicates");

const Rule* find_rule(std::string_view type) {
  auto it = std::ranges::lower_bound(kRules, type, {}, &Rule::type);
  return it != kRules.end() && it->type == type ? &*it : nullptr;
}

// An op type the rules do not know, priced as the caller's default class: one FLOP per output
// element, every input and output touched once, differentiable at one forward's worth, and (being
// unknown) assumed to keep its inputs for the gradient.
Rule unknown_rule(std::string_view type, OpClass cls) {
  if (cls == alias) return alias_op(type, true);
  return {type, cls, f_pointwise, 1, 0, b_times_forward, 1, kAll};
}

// Dropout in training mode (its `training_mode` attribute, which the importer sets from the input
// of that name) draws a mask, keeps the elements it keeps scaled by 1/(1-ratio) and writes the
// mask as a second output: a kernel, not the pass-through it is for inference. Its gradient
// multiplies dY by the saved mask and the scale (2 of the forward's 3 FLOPs per element).
constexpr Rule kTrainingDropout = {"Dropout", elementwise, f_pointwise, 3, 0, b_times_forward, 2.0 / 3.0, 0, false, slots({1})};

// A reflect or edge Pad: PyTorch's reflection_pad and replication_pad backward take `self` (for its
// sizes), so the input lives until the gradient has run (a reflect-padded convolution's training
// step was 12% under: a QA pass; until then a temporary of the input's size while the gradient ran
// stood in for it, right only where the input's life ends there); a constant pad's keeps nothing.
constexpr Rule kKeepingPad = keeping(copy_op("Pad"), slots({0}));

// The rule of an op type as its attributes make it: a training Dropout's, a reflect or edge Pad's.
const Rule* rule_with(std::string_view type, const Attributes& attrs) {
  if (type == "Dropout" && attrs.get_int("training_mode", 0) != 0) return &kTrainingDropout;
  if (type == "Pad") {
    const std::string mode = attrs.get_string("mode", "constant");
    if (mode == "reflect" || mode == "edge" || mode == "wrap") return &kKeepingPad;  // (wrap is run as reflect)
  }
  return find_rule(type);
}

Rule rule_for(std::string_view type, std::optional<OpClass> unknown_default, const Attributes* attrs = nullptr) {
  if (const Rule* r = attrs ? rule_with(type, *attrs) : find_rule(type)) return *r;
  if (unknown_default) return unknown_rule(type, *unknown_default);
  throw Error("unknown op type '" + std::string(type) +
              "': no cost rule (--unknown-ops CLASS prices it as that class, e.g. elementwise, for the simulator; run, profile "
              "and validate cannot execute it)");
}

// Work from a rule is counted from attributes and shapes: absurd attributes (an LRN size or a
// pooling kernel below zero) gave negative FLOPs, which every later sum and cost then carried.
OpWork checked(std::string_view op_type, const OpWork& w) {
  for (const double v : {w.flops, w.bytes_read, w.bytes_written})
    if (!(v >= 0) || !std::isfinite(v))
      throw Error(std::string(op_type) + ": its attributes and shapes give " + (std::isfinite(v) ? "negative" : "non-finite") +
                  " work (" + fmt::format("{:.6g}", w.flops) + " FLOPs, " + fmt::format("{:.6g}", w.bytes_read + w.bytes_written) +
                  " bytes): check its attributes");
  return w;
}

}  // namespace

OpWork op_work(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
               std::span<const TensorDesc> outputs, std::optional<OpClass> unknown_default) {
  Rule rule = rule_for(op_type, unknown_default, &attrs);
  return checked(op_type, rule.forward(Ctx{attrs, inputs, outputs, rule}));
}

std::string attribute_mismatch(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs) {
  const auto list = [](const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t k = 0; k < v.size() && k < 8; ++k) s += (k ? ", " : "") + std::to_string(v[k]);
    return s + (v.size() > 8 ? ", ...]" : "]");
  };
  for (const char* name : {"group", "blocksize"})
    if (const Attribute* a = attrs.find(name); a && a->kind == Attribute::Kind::integer && a->i <= 0)
      return "attribute '" + std::string(name) + "' is " + std::to_string(a->i) + " (a positive integer)";
  const TensorDesc* x = !inputs.empty() && inputs[0].present ? &inputs[0] : nullptr;
  const bool conv = op_type == "Conv" || op_type == "ConvTranspose";
  const bool pool = op_type == "MaxPool" || op_type == "AveragePool" || op_type == "LpPool";
  if (conv || pool) {
    const std::size_t spatial = x && x->shape.size() >= 2 ? x->shape.size() - 2 : 0;
    for (const char* name : {"kernel_shape", "strides", "dilations", "pads"}) {
      if (!attrs.find(name)) continue;
      const std::vector<std::int64_t> v = attrs.get_ints(name);
      const bool pads = std::string_view(name) == "pads";
      for (std::int64_t k : v)
        if (pads ? k < 0 : k <= 0)
          return "attribute '" + std::string(name) + "' is " + list(v) + (pads ? " (no negative padding)" : " (positive integers)");
      if (x && x->shape.size() >= 3 && v.size() != (pads ? 2 : 1) * spatial)
        return "attribute '" + std::string(name) + "' is " + list(v) + ": " + std::to_string((pads ? 2 : 1) * spatial) + " values for an input of " +
               dims_text(x->shape) + " (" + (pads ? "a start and an end per spatial axis" : "one per spatial axis") + ")";
    }
    if (pool && !attrs.find("kernel_shape")) return "attribute 'kernel_shape' is missing (a pool's window)";
    if (x && x->shape.size() < 3) return "its input " + dims_text(x->shape) + " has no spatial axis ([N, C, D1, ...])";
    const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
    if (pool && x && (auto_pad == "NOTSET" || auto_pad == "VALID")) {
      const std::vector<std::int64_t> kernel = attrs.get_ints("kernel_shape"), dilations = attrs.get_ints("dilations"),
                                      strides = attrs.get_ints("strides"),
                                      pads = auto_pad == "NOTSET" ? attrs.get_ints("pads") : std::vector<std::int64_t>{};
      // With ceil_mode the last window may run past the padded input by less than a stride (ONNX's
      // and PyTorch's output size, ceil((padded - extent) / stride) + 1, is then still 1: SqueezeNet's
      // last 3x3 pool of stride 2 on a 2x2 map; a review).
      const bool ceil_mode = attrs.get_int("ceil_mode", 0) != 0;
      for (std::size_t k = 0; k < spatial && k < kernel.size(); ++k) {
        const std::int64_t d = k < dilations.size() ? dilations[k] : 1, s = k < strides.size() ? strides[k] : 1;
        // The window's extent, (kernel - 1) x dilation + 1, and the padded size, past 2^63 taken as
        // larger than any other.
        std::int64_t extent = 0, padded = x->shape[k + 2];
        const bool huge_window = __builtin_mul_overflow(kernel[k] - 1, d, &extent) || __builtin_add_overflow(extent, 1, &extent);
        if (2 * spatial == pads.size() &&
            (__builtin_add_overflow(padded, pads[k], &padded) || __builtin_add_overflow(padded, pads[k + spatial], &padded)))
          continue;  // padded past 2^63: any window fits
        std::int64_t over = 0;
        if (x->shape[k + 2] < 0 || (!huge_window && (__builtin_sub_overflow(extent, padded, &over) || over <= 0 || (ceil_mode && over < s))))
          continue;
        return "its window spans " + (huge_window ? std::string("more than 2^63") : std::to_string(extent)) + " on spatial axis " +
               std::to_string(k) + " (kernel " + std::to_string(kernel[k]) + ", dilation " + std::to_string(d) + "), more than its padded input " +
               std::to_string(padded) + (ceil_mode ? " by a stride (" + std::to_string(s) + ") or more: no window would start in it" : "");
      }
    }
  }
  if (op_type == "LSTM" || op_type == "GRU" || op_type == "RNN") {
    const std::string direction = attrs.get_string("direction", "forward");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
      return "attribute 'direction' is '" + utf8_prefix(direction, 40) + "' ('forward', 'reverse' or 'bidirectional')";
    if (const Attribute* h = attrs.find("hidden_size"); h && h->kind == Attribute::Kind::integer) {
      if (h->i <= 0) return "attribute 'hidden_size' is " + std::to_string(h->i) + " (a positive integer)";
      if (inputs.size() > 2 && inputs[2].present && inputs[2].shape.size() == 3 && inputs[2].shape[2] != h->i)
        return "attribute 'hidden_size' is " + std::to_string(h->i) + " but its recurrence weights R are " + dims_text(inputs[2].shape) +
               " ([directions, gates x hidden, hidden])";
    }
  }
  if (op_type == "LRN" && attrs.get_int("size", 1) <= 0) return "attribute 'size' is " + std::to_string(attrs.get_int("size", 1)) + " (a positive integer)";
  if (op_type == "RoiAlign" && attrs.get_int("sampling_ratio", 0) < 0)
    return "attribute 'sampling_ratio' is " + std::to_string(attrs.get_int("sampling_ratio", 0)) + " (0 for adaptive, or a positive count)";
  if ((op_type == "GlobalAveragePool" || op_type == "GlobalMaxPool" || op_type == "GlobalLpPool") && x && x->shape.size() < 2)
    return "its input " + dims_text(x->shape) + " is not [N, C, ...]";
  return "";
}

std::string operand_shape_mismatch(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                                   std::span<const TensorDesc> outputs) {
  using Dims = std::vector<std::int64_t>;
  const Rule* rule = find_rule(op_type);
  if (!rule || outputs.empty() || !outputs[0].present) return "";
  const std::span<const std::int64_t> y = outputs[0].shape;
  // Numpy broadcasting of `a` and `b`; nullopt when a pair of dimensions is neither equal nor 1.
  auto broadcast = [](const Dims& a, std::span<const std::int64_t> b) -> std::optional<Dims> {
    Dims out(std::max(a.size(), b.size()), 1);
    for (std::size_t k = 0; k < out.size(); ++k) {
      const std::int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1, z = k < b.size() ? b[b.size() - 1 - k] : 1;
      if (x != z && x != 1 && z != 1) return std::nullopt;
      out[out.size() - 1 - k] = x == 1 ? z : x;
    }
    return out;
  };
  // (Quantize- and DequantizeLinear's scales are per tensor or per `axis`, not broadcast.)
  const bool pointwise = ((rule->forward == f_pointwise && rule->op_class == elementwise) || rule->forward == f_variadic ||
                          op_type == "Softmax" || op_type == "LogSoftmax" || op_type == "Hardmax") &&
                         op_type != "QuantizeLinear" && op_type != "DequantizeLinear";
  if (pointwise) {
    std::optional<Dims> all = Dims{};
    std::string operands;
    for (const TensorDesc& t : inputs) {
      if (!t.present) continue;
      operands += (operands.empty() ? "" : " and ") + dims_text(t.shape);
      if (all) all = broadcast(*all, t.shape);
    }
    if (operands.empty()) return "";
    if (!all)
      return "its inputs " + operands + " do not broadcast together" +
             (op_type == "PRelu" ? std::string(" (a slope per channel of [N,C,H,W] is [C,1,1]: shapes align from the last dimension)") : "");
    if (!std::ranges::equal(*all, y)) return "its inputs " + operands + " give an output of " + dims_text(*all) + ", not " + dims_text(y);
    return "";
  }
  const TensorDesc* a = slot(inputs, 0);
  const TensorDesc* b = slot(inputs, 1);
  if (!a || !b) return "";
  if (op_type == "MatMul") {
    // 1-D operands gain a dimension (prepended to A, appended to B) that the output drops.
    Dims ad(a->shape.begin(), a->shape.end()), bd(b->shape.begin(), b->shape.end());
    if (ad.empty() || bd.empty()) return "MatMul of a scalar " + dims_text(a->shape) + " by " + dims_text(b->shape);
    const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
    if (a1) ad.insert(ad.begin(), 1);
    if (b1) bd.push_back(1);
    if (ad.back() != bd[bd.size() - 2])
      return "A " + dims_text(a->shape) + " and B " + dims_text(b->shape) + " do not share an inner dimension (" + std::to_string(ad.back()) +
             " and " + std::to_string(bd[bd.size() - 2]) + ")";
    std::optional<Dims> batch = broadcast(Dims(ad.begin(), ad.end() - 2), std::span(bd).first(bd.size() - 2));
    if (!batch) return "the batch dimensions of A " + dims_text(a->shape) + " and B " + dims_text(b->shape) + " do not broadcast together";
    Dims out = *batch;
    if (!a1) out.push_back(ad[ad.size() - 2]);
    if (!b1) out.push_back(bd.back());
    if (!std::ranges::equal(out, y)) return "A " + dims_text(a->shape) + " by B " + dims_text(b->shape) + " gives " + dims_text(out) + ", not " + dims_text(y);
    return "";
  }
  if (op_type == "Gemm") {
    if (a->shape.size() != 2 || b->shape.size() != 2) return "A " + dims_text(a->shape) + " and B " + dims_text(b->shape) + " must be matrices";
    const bool ta = attrs.get_int("transA", 0) != 0, tb = attrs.get_int("transB", 0) != 0;
    const std::int64_t m = ta ? a->shape[1] : a->shape[0], k_a = ta ? a->shape[0] : a->shape[1];
    const std::int64_t k_b = tb ? b->shape[1] : b->shape[0], n = tb ? b->shape[0] : b->shape[1];
    if (k_a != k_b)
      return "A " + dims_text(a->shape) + (ta ? " (transposed)" : "") + " and B " + dims_text(b->shape) + (tb ? " (transposed)" : "") +
             " do not share an inner dimension (" + std::to_string(k_a) + " and " + std::to_string(k_b) + ")";
    const Dims out{m, n};
    if (!std::ranges::equal(out, y)) return "A " + dims_text(a->shape) + " by B " + dims_text(b->shape) + " gives " + dims_text(out) + ", not " + dims_text(y);
    if (const TensorDesc* c = slot(inputs, 2); c && !broadcast(out, c->shape).has_value())
      return "C " + dims_text(c->shape) + " does not broadcast to " + dims_text(out);
    return "";
  }
  if (op_type == "Conv") {
    const std::span<const std::int64_t> x = a->shape, w = b->shape;
    if (x.size() < 3 || w.size() != x.size() || y.size() != x.size())
      return "input " + dims_text(x) + ", weight " + dims_text(w) + " and output " + dims_text(y) + " must share one rank of 3 or more";
    const std::int64_t group = attrs.get_int("group", 1);
    if (group <= 0 || x[1] % group != 0 || x[1] / group != w[1] || w[0] % group != 0)
      return "input " + dims_text(x) + " has " + std::to_string(x[1]) + " channels, but weight " + dims_text(w) + " takes " + std::to_string(w[1]) +
             " per group in " + std::to_string(group) + " group(s)";
    if (y[0] != x[0] || y[1] != w[0])
      return "output " + dims_text(y) + " should have the input's batch " + std::to_string(x[0]) + " and the weight's " + std::to_string(w[0]) +
             " output channels";
    if (const TensorDesc* bias = slot(inputs, 2); bias && !std::ranges::equal(bias->shape, Dims{w[0]}))
      return "bias " + dims_text(bias->shape) + " should be [" + std::to_string(w[0]) + "], one per output channel";
    return "";
  }
  return "";
}

std::string unknown_ops_priced_note(const std::map<std::string, std::size_t>& guessed, OpClass as) {
  std::string types;
  std::size_t ops = 0;
  for (const auto& [type, count] : guessed) types += (types.empty() ? "" : ", ") + type + " (" + std::to_string(count) + ")", ops += count;
  return "--unknown-ops priced " + std::to_string(ops) + " op" + (ops == 1 ? "" : "s") + " of types without a cost rule as " +
         std::string(op_class_name(as)) + (as == OpClass::alias ? " (no work: their times taken as zero)" : " (one FLOP per output element)") + ": " +
         types + (as == OpClass::alias ? "; a guess" : "; their FLOPs and times are guesses");
}

bool is_known_op_type(std::string_view op_type) { return find_rule(op_type) != nullptr; }

bool input_takes_gradient(std::string_view op_type, std::size_t slot) {
  return !(slot == 2 && (op_type == "NegativeLogLikelihoodLoss" || op_type == "SoftmaxCrossEntropyLoss"));
}

BackwardRule backward_rule(std::string_view op_type, const Attributes& attrs) {
  const Rule* r = rule_with(op_type, attrs);
  if (!r) return {true, true, false};
  if (!r->backward) return {false, false, false};
  if (r->op_class == alias) return {true, false, false};
  return {true, (r->saved_inputs | r->kept_inputs) != 0, r->saved_outputs, r->grad_outputs};
}

std::uint32_t passed_gradients(std::string_view op_type, std::span<const TensorDesc> inputs, std::span<const TensorDesc> outputs,
                               std::span<const bool> needs_grad, std::span<const bool> repeated) {
  const Rule* rule = find_rule(op_type);
  const TensorDesc* y = slot(outputs, 0);
  if (!rule || rule->passes == 0 || !y || outputs.size() != 1) return 0;
  // A tensor in two slots gets the sum of two gradients: conservatively, then nothing passes.
  for (bool r : repeated)
    if (r) return 0;
  std::uint32_t mask = 0;
  for (std::size_t i = 0; i < inputs.size() && i < needs_grad.size() && i < 32; ++i) {
    const TensorDesc& x = inputs[i];
    if (!(rule->passes >> i & 1u) || !needs_grad[i] || !x.present || x.dtype != y->dtype || !grad_capable(x.dtype)) continue;
    if (std::equal(x.shape.begin(), x.shape.end(), y->shape.begin(), y->shape.end())) mask |= 1u << i;
  }
  return mask;
}

namespace {

// The forward inputs the gradient reads (bit j = slot j, j < 64), given which inputs get a gradient
// computed (`need`: passed-through ones already left out): the rule's saved slots (every slot of a
// rule that keeps all of them), less a product's operand when no other operand needs a gradient,
// and with `dividend_for_divisor_only` a quotient's dividend when the divisor needs none.
std::uint64_t read_inputs(const Rule& rule, std::span<const TensorDesc> inputs, const Grads& need, bool dividend_for_divisor_only) {
  auto saved_slot = [&](std::size_t j) {
    return inputs[j].present && (j < 32 ? (rule.saved_inputs >> j & 1u) != 0 : rule.saved_inputs == kAll);
  };
  int operands_needing = 0;
  for (std::size_t j = 0; j < inputs.size(); ++j) operands_needing += saved_slot(j) && need[j];
  std::uint64_t mask = 0;
  for (std::size_t j = 0; j < inputs.size() && j < 64; ++j) {
    if (!saved_slot(j)) continue;
    if (rule.cross && operands_needing - int{need[j]} == 0) continue;  // read only for the others' gradients
    if (dividend_for_divisor_only && j == 0 && !need[1]) continue;     // dA = dY / B: the dividend only for dB
    mask |= std::uint64_t{1} << j;
  }
  return mask;
}

}  // namespace

std::uint64_t saved_inputs(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                           std::span<const TensorDesc> outputs, std::span<const bool> needs_grad, std::span<const bool> repeated) {
  const Rule* rule = rule_with(op_type, attrs);
  std::uint64_t all = 0;
  for (std::size_t j = 0; j < inputs.size() && j < 64; ++j) all |= std::uint64_t{inputs[j].present} << j;
  if (!rule) return all;
  if (!rule->backward || rule->op_class == alias || (rule->saved_inputs | rule->kept_inputs) == 0) return 0;
  // What the gradients computed need: the inputs that need one, less those passed through.
  const std::uint32_t passed = passed_gradients(op_type, inputs, outputs, needs_grad, repeated);
  Grads need;
  need.need.assign(inputs.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < inputs.size() && i < needs_grad.size(); ++i) {
    need.need[i] = needs_grad[i] && inputs[i].present && grad_capable(inputs[i].dtype) && !(i < 32 && (passed >> i & 1u));
    any = any || need.need[i];
  }
  if (!any) return 0;
  std::uint64_t kept = 0;  // kept for their shapes (Rule::kept_inputs)
  for (std::size_t j = 0; j < inputs.size() && j < 32; ++j) kept |= std::uint64_t{inputs[j].present && (rule->kept_inputs >> j & 1u)} << j;
  return read_inputs(*rule, inputs, need, op_type == "Div") | kept;
}

OpWork backward_work(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                     std::span<const TensorDesc> outputs, std::span<const bool> needs_grad,
                     std::optional<OpClass> unknown_default, std::span<const bool> repeated) {
  Rule rule = rule_for(op_type, unknown_default, &attrs);
  if (!rule.backward || rule.op_class == alias) return {};
  const std::uint32_t passed = passed_gradients(op_type, inputs, outputs, needs_grad, repeated);

  Grads g;
  g.need.assign(inputs.size(), 0);
  bool any_input = false;
  for (std::size_t i = 0; i < inputs.size() && i < needs_grad.size(); ++i) {
    g.need[i] = needs_grad[i] && inputs[i].present && grad_capable(inputs[i].dtype);
    any_input = any_input || g.need[i];
  }
  // dY: the floating outputs that carry a gradient. With none (an integer Cast, say) nothing flows.
  std::size_t carrying = rule.grad_outputs ? std::min<std::size_t>(rule.grad_outputs, outputs.size()) : outputs.size();
  double incoming = 0.0;
  bool any_output = false;
  for (std::size_t i = 0; i < carrying; ++i)
    if (outputs[i].present && grad_capable(outputs[i].dtype)) {
      incoming += static_cast<double>(outputs[i].bytes());
      any_output = true;
    }
  if (!any_input || !any_output) return {};
  // Gradients passed through cost nothing: the op's kernel (if any) computes the others. With
  // none left it is an autograd node that runs no kernel (its per-op overhead remains).
  bool any_kernel = false;
  for (std::size_t i = 0; i < g.need.size(); ++i) {
    if (i < 32 && (passed >> i & 1u)) g.need[i] = 0;
    any_kernel = any_kernel || g.need[i];
  }
  if (!any_kernel) {
    // (Mean's one division of dY, which every operand's gradient shares.)
    if (op_type == "Mean") return {elems(outputs, 0), incoming, incoming, rule.op_class};
    return {0.0, 0.0, 0.0, rule.backward_class.value_or(rule.op_class)};
  }

  Ctx ctx{attrs, inputs, outputs, rule};
  OpWork fwd = rule.forward(ctx);
  OpWork w;
  w.op_class = rule.backward_class.value_or(rule.op_class);
  w.flops = rule.backward(ctx, fwd, g);
  // A product's operand gradients multiply matrices of the same dimensions, a convolution's
  // convolve with the same kernel (a bias's gradient alone is a sum). A recurrent layer's runs its
  // steps' products backwards whatever needs a gradient (b_recurrent).
  if (g[0] || g[1] || (rule.forward == f_recurrent && std::any_of(g.need.begin(), g.need.end(), [](char n) { return n != 0; })))
    w.product_min_dim = fwd.product_min_dim, w.conv_kernel_area = fwd.conv_kernel_area;

  // The saved inputs of the first 32 slots (a product operand is read only for the gradients of the
  // other operands; a Div's dividend is priced as read whichever operand needs a gradient).
  const std::uint64_t read = read_inputs(rule, inputs, g, false) & 0xFFFFFFFFu;
  double saved = 0.0;
  for (std::size_t j = 0; j < inputs.size() && j < 32; ++j)
    if (read >> j & 1u) saved += static_cast<double>(inputs[j].bytes());
  for (std::size_t j = 0; j < outputs.size() && j < 32; ++j)
    if ((rule.saved_outputs >> j & 1u) && outputs[j].present) saved += static_cast<double>(outputs[j].bytes());
  // A training Dropout whose mask is no output of the graph still keeps one (a byte per element).
  if (op_type == "Dropout" && !slot(outputs, 1)) saved += elems(outputs, 0);

  // A tensor read in several slots (Mul(x, x)) is read once and gets one gradient.
  auto repeated_slot = [&](std::size_t i) { return i < repeated.size() && repeated[i]; };
  for (std::size_t j = 0; j < inputs.size(); ++j)
    if (repeated_slot(j) && j < 32 && (read >> j & 1u)) saved -= static_cast<double>(inputs[j].bytes());
  w.bytes_read = incoming + saved;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (g[i] && !repeated_slot(i)) w.bytes_written += static_cast<double>(inputs[i].bytes());
  return checked(op_type, w);
}

std::uint64_t RecurrentSizes::step_elements() const {
  return static_cast<std::uint64_t>(seq) * static_cast<std::uint64_t>(batch) * static_cast<std::uint64_t>(hidden);
}

std::optional<RecurrentSizes> recurrent_sizes(std::string_view op_type, const Attributes& attrs, std::span<const std::int64_t> x_shape,
                                              std::span<const std::int64_t> r_shape) {
  RecurrentSizes r;
  r.gates = op_type == "LSTM" ? 4 : op_type == "GRU" ? 3 : op_type == "RNN" ? 1 : 0;
  if (r.gates == 0 || x_shape.size() != 3 || r_shape.size() != 3) return std::nullopt;
  r.batch_first = attrs.get_int("layout", 0) != 0;
  r.seq = x_shape[r.batch_first ? 1 : 0], r.batch = x_shape[r.batch_first ? 0 : 1], r.input = x_shape[2];
  r.directions = r_shape[0], r.hidden = r_shape[2];
  if (r.seq <= 0 || r.batch <= 0 || r.hidden <= 0 || r.directions <= 0 || r_shape[1] != r.gates * r.hidden) return std::nullopt;
  return r;
}

bool pytorch_hard_sigmoid(const Attributes& attrs) {
  return std::abs(attrs.get_float("alpha", 0.2) - 1.0 / 6.0) < 1e-6 && attrs.get_float("beta", 0.5) == 0.5;
}

bool prelu_as_torch_prelu(std::span<const std::int64_t> x_shape, std::span<const std::int64_t> slope_shape, bool slope_per_channel) {
  std::int64_t n = 1;
  for (std::int64_t d : slope_shape) n *= d;
  if (n == 1) return !x_shape.empty();
  if (slope_per_channel) return x_shape.size() >= 2;
  if (x_shape.size() < 2 || slope_shape.size() > x_shape.size() || x_shape[1] != n) return false;
  // Dimension 1 of x in the slope's axes (aligned from the last).
  const std::ptrdiff_t axis = static_cast<std::ptrdiff_t>(slope_shape.size()) - static_cast<std::ptrdiff_t>(x_shape.size() - 1);
  return axis >= 0 && slope_shape[static_cast<std::size_t>(axis)] == n;
}

bool recurrent_as_pytorch_layer(std::string_view op_type, const Attributes& attrs, bool peepholes) {
  if (op_type != "LSTM" && op_type != "GRU" && op_type != "RNN") return false;
  if (attrs.find("clip") || attrs.get_int("input_forget", 0) != 0 || attrs.get_string("direction", "forward") == "reverse") return false;
  if (op_type == "GRU" && attrs.get_int("linear_before_reset", 0) == 0) return false;
  return !(op_type == "LSTM" && peepholes);
}

std::int64_t recurrent_saved_steps(const RecurrentSizes& r) { return r.gates == 1 ? 1 : 7; }

std::uint64_t kept_intermediate_elements(std::string_view op_type, const Attributes& attrs, std::span<const TensorDesc> inputs,
                                         std::span<const TensorDesc> outputs) {
  if (inputs.empty() || !inputs[0].present || !is_floating(inputs[0].dtype)) return 0;
  const std::uint64_t x = inputs[0].elements();
  if (op_type == "Softsign") return x;
  if (op_type == "Dropout" && attrs.get_int("training_mode", 0) != 0 && !slot(outputs, 1)) {
    const std::uint64_t size = std::max<std::uint64_t>(1, dtype_size(inputs[0].dtype));
    return (x + size - 1) / size;
  }
  if (op_type == "LRN") {
    const auto shape = inputs[0].shape;
    if (shape.size() < 3 || shape[1] <= 0) return 0;
    const std::int64_t size = std::max<std::int64_t>(1, attrs.get_int("size", 1));
    const std::uint64_t padded = x / static_cast<std::uint64_t>(shape[1]) * static_cast<std::uint64_t>(shape[1] + size - 1);
    return padded + 2 * x;
  }
  return 0;
}

}  // namespace placer
