// The executor: ONNX op types mapped to libtorch functions, the prepared model (Engine) and the
// public Executor. Rules: docs/execution.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <ATen/record_function.h>

#include "placer/exec/engine.hpp"
#include "placer/exec/memory_meter.hpp"
#include "placer/graph/op_work.hpp"
#include "placer/graph/training.hpp"
#include "placer/io/onnx_file.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer::exec {
namespace detail {

torch::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::f32: return torch::kFloat;
    case DType::f16: return torch::kHalf;
    case DType::bf16: return torch::kBFloat16;
    case DType::f64: return torch::kDouble;
    case DType::i8: return torch::kChar;
    case DType::u8: return torch::kByte;
    case DType::i16: return torch::kShort;
    case DType::i32: return torch::kInt;
    case DType::boolean: return torch::kBool;
    default: return torch::kLong;  // i64 and the unsigned types torch lacks
  }
}

namespace {

std::string op_label(const Graph& g, OpId op) { return "op '" + g.op_name(op) + "' (" + g.op_type(op) + ")"; }

std::string shape_text(c10::IntArrayRef s) { return dims_text(std::span<const std::int64_t>(s.data(), s.size())); }

// An ONNX TensorProto's value as a CPU tensor.
torch::Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& what) {
  using TP = onnx::TensorProto;
  std::vector<std::int64_t> dims(t.dims().begin(), t.dims().end());
  const DType dtype = dtype_from_onnx(t.data_type());
  const torch::ScalarType st = scalar_type(dtype);
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  torch::Tensor out = torch::empty(dims, torch::TensorOptions().dtype(st));
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    // uint16, uint32 and uint64 have no torch type of their own: held as int64, they are read at
    // their own width (little-endian, as ONNX stores raw data) and widened.
    const std::size_t width = dtype == DType::u16 ? 2 : dtype == DType::u32 ? 4 : static_cast<std::size_t>(out.element_size());
    if (raw.size() != static_cast<std::size_t>(n) * width)
      throw Error(what + ": constant tensor of " + std::to_string(raw.size()) + " bytes does not match its shape");
    if (n > 0 && width == static_cast<std::size_t>(out.element_size())) {
      std::memcpy(out.data_ptr(), raw.data(), raw.size());
    } else if (n > 0) {
      auto* dst = out.data_ptr<std::int64_t>();
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint64_t v = 0;
        std::memcpy(&v, raw.data() + static_cast<std::size_t>(i) * width, width);  // little-endian host
        dst[i] = static_cast<std::int64_t>(v);
      }
    }
    return out;
  }
  auto fill = [&](const auto& field, auto cast) {
    if (static_cast<std::int64_t>(field.size()) != n) throw Error(what + ": constant tensor has the wrong number of values");
    torch::Tensor d = torch::empty({n}, torch::kDouble);
    auto* p = d.data_ptr<double>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(cast(field.Get(static_cast<int>(i))));
    return d.reshape(dims).to(st);
  };
  auto id = [](auto x) { return x; };
  switch (t.data_type()) {
    case TP::FLOAT: return fill(t.float_data(), id);
    case TP::DOUBLE: return fill(t.double_data(), id);
    case TP::INT64: return fill(t.int64_data(), id);
    case TP::INT32: case TP::INT16: case TP::INT8: case TP::UINT8: case TP::UINT16: case TP::BOOL:
      return fill(t.int32_data(), id);
    case TP::UINT32: case TP::UINT64: return fill(t.uint64_data(), id);
    default: throw Error(what + ": constant of ONNX element type " + std::to_string(t.data_type()) + " is not supported");
  }
}

// ONNX pads of the last `nd` dims ([b0..b(nd-1), e0..e(nd-1)]) in torch's order (last dim first).
std::vector<std::int64_t> torch_pads(const std::vector<std::int64_t>& pads, std::size_t nd) {
  std::vector<std::int64_t> out;
  for (std::size_t i = nd; i-- > 0;) out.push_back(pads[i]), out.push_back(pads[i + nd]);
  return out;
}

struct Window {
  std::vector<std::int64_t> kernel, strides, dilations, pads;  // pads: begin..., end...
  bool symmetric = true;
};
// From the IR's shapes (the same as the tensors': the first step checks them), so that the
// preparation can check windows before anything runs.
Window window_of(const Graph& g, OpId op, std::vector<std::int64_t> kernel) {
  const Attributes& a = g.op_attrs(op);
  const std::size_t nd = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  w.strides = a.get_ints("strides", std::vector<std::int64_t>(nd, 1));
  w.dilations = a.get_ints("dilations", std::vector<std::int64_t>(nd, 1));
  w.pads = a.get_ints("pads", std::vector<std::int64_t>(2 * nd, 0));
  const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    auto in = g.tensor_shape(g.op_inputs(op)[0]);
    auto out = g.tensor_shape(g.op_outputs(op)[0]);
    if (in.size() < nd + 2 || out.size() < nd + 2) throw Error(op_label(g, op) + ": input and output ranks do not match the kernel's");
    for (std::size_t i = 0; i < nd; ++i) {
      std::int64_t total = std::max<std::int64_t>(
          0, (out[i + 2] - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - in[i + 2]);
      w.pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pads[i + nd] = total - w.pads[i];
    }
  } else if (auto_pad == "VALID") {
    std::fill(w.pads.begin(), w.pads.end(), 0);
  }
  if (w.pads.size() != 2 * nd || w.strides.size() != nd || w.dilations.size() != nd)
    throw Error(op_label(g, op) + ": pads, strides or dilations do not match the kernel's rank");
  for (std::size_t i = 0; i < nd; ++i) w.symmetric = w.symmetric && w.pads[i] == w.pads[i + nd];
  return w;
}
std::vector<std::int64_t> begin_pads(const Window& w) { return {w.pads.begin(), w.pads.begin() + static_cast<std::ptrdiff_t>(w.kernel.size())}; }

using Tensors = std::vector<torch::Tensor>;

// A Conv's (or ConvInteger's, QLinearConv's) convolution of x by w (and bias b): its window from
// the IR, asymmetric pads applied beforehand.
torch::Tensor conv_of(const OpCall& c, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = torch::Tensor()) {
  const std::size_t nd = static_cast<std::size_t>(x.dim() - 2);
  Window win = window_of(c.g, c.op, std::vector<std::int64_t>(w.sizes().begin() + 2, w.sizes().end()));
  std::vector<std::int64_t> padding = begin_pads(win);
  torch::Tensor input = x;
  if (!win.symmetric) {
    input = torch::constant_pad_nd(x, torch_pads(win.pads, nd), 0);
    std::fill(padding.begin(), padding.end(), 0);
  }
  const std::int64_t groups = c.g.op_attrs(c.op).get_int("group", 1);
  return torch::convolution(input, w, b, win.strides, padding, win.dilations, false, std::vector<std::int64_t>(nd, 0), groups);
}

Tensors op_conv(const OpCall& c) { return {conv_of(c, c.in[0], c.in[1], c.has(2) ? c.in[2] : torch::Tensor())}; }

// Whether a pooling window's pads are given to libtorch as padded input instead: asymmetric ones,
// and pads past half the kernel, which libtorch refuses and ONNX allows ("pad should be at most
// half of kernel size": ONNX's test_maxpool_2d_pads).
bool pre_pad(const Window& w) {
  if (!w.symmetric) return true;
  for (std::size_t i = 0; i < w.kernel.size(); ++i)
    if (2 * w.pads[i] > w.kernel[i]) return true;
  return false;
}

// libtorch pools and reflect/edge pads floating-point tensors only on the CPU ("max_pool2d" not
// implemented for 'Byte'): integers go through float64, exact for them, and back.
torch::Tensor as_floating(const torch::Tensor& x) { return x.is_floating_point() ? x : x.to(torch::kDouble); }
torch::Tensor like(const torch::Tensor& y, const torch::Tensor& x) { return y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type()); }

Tensors op_max_pool(const OpCall& c) {
  torch::Tensor x = as_floating(c.in[0]);
  const std::size_t nd = static_cast<std::size_t>(x.dim() - 2);
  Window win = window_of(c.g, c.op, c.g.op_attrs(c.op).get_ints("kernel_shape"));
  const bool ceil_mode = c.g.op_attrs(c.op).get_int("ceil_mode", 0) != 0;
  std::vector<std::int64_t> padding = begin_pads(win);
  if (pre_pad(win)) {
    x = torch::constant_pad_nd(x, torch_pads(win.pads, nd), -std::numeric_limits<double>::infinity());
    std::fill(padding.begin(), padding.end(), 0);
  }
  if (c.node.output_size() < 2 || c.node.output(1).empty()) {
    torch::Tensor y = nd == 1   ? torch::max_pool1d(x, win.kernel, win.strides, padding, win.dilations, ceil_mode)
                      : nd == 2 ? torch::max_pool2d(x, win.kernel, win.strides, padding, win.dilations, ceil_mode)
                                : torch::max_pool3d(x, win.kernel, win.strides, padding, win.dilations, ceil_mode);
    return {like(y, c.in[0])};
  }
  // Indices: libtorch gives each maximum's place in its (padded) plane; ONNX's count over the whole
  // unpadded tensor, in row-major order of the spatial dimensions (storage_order 0) or column-major
  // (1), after the planes of the batches and channels before.
  auto [y, where] = nd == 1   ? torch::max_pool1d_with_indices(x, win.kernel, win.strides, padding, win.dilations, ceil_mode)
                    : nd == 2 ? torch::max_pool2d_with_indices(x, win.kernel, win.strides, padding, win.dilations, ceil_mode)
                              : torch::max_pool3d_with_indices(x, win.kernel, win.strides, padding, win.dilations, ceil_mode);
  const torch::Tensor& in = c.in[0];
  std::vector<torch::Tensor> at(nd);
  torch::Tensor rest = where;
  for (std::size_t k = nd; k-- > 0;) {
    const std::int64_t extent = x.size(static_cast<std::int64_t>(k + 2));
    at[k] = torch::remainder(rest, extent) - (pre_pad(win) ? win.pads[k] : 0);
    rest = torch::div(rest, extent, "floor");
    // A window whose values are all -inf keeps its first cell, which may be padding: ONNX takes
    // the window's first cell in the tensor (the first along each dimension, in dilation steps).
    if (pre_pad(win)) at[k] = torch::where(at[k] < 0, torch::remainder(at[k], win.dilations[k]), at[k]);
  }
  const bool column_major = c.g.op_attrs(c.op).get_int("storage_order", 0) != 0;
  torch::Tensor flat = torch::zeros_like(where);
  std::int64_t plane = 1;
  for (std::size_t i = 0; i < nd; ++i) {
    const std::size_t k = column_major ? nd - 1 - i : i;
    const std::int64_t extent = in.size(static_cast<std::int64_t>(k + 2));
    flat = flat * extent + at[k];
    plane *= extent;
  }
  std::vector<std::int64_t> planes_shape{in.size(0), in.size(1)};
  planes_shape.resize(static_cast<std::size_t>(in.dim()), 1);
  const torch::Tensor planes = torch::arange(in.size(0) * in.size(1), where.options()).reshape(planes_shape) * plane;
  return {like(y, c.in[0]), flat + planes};
}

Tensors op_avg_pool(const OpCall& c) {
  torch::Tensor x = c.in[0];
  const std::size_t nd = static_cast<std::size_t>(x.dim() - 2);
  Window win = window_of(c.g, c.op, c.g.op_attrs(c.op).get_ints("kernel_shape"));
  const bool ceil_mode = c.g.op_attrs(c.op).get_int("ceil_mode", 0) != 0;
  bool include_pad = c.g.op_attrs(c.op).get_int("count_include_pad", 0) != 0;
  std::vector<std::int64_t> padding = begin_pads(win);
  auto pool = [&](const torch::Tensor& t, bool count_pads) {
    if (nd == 1) return torch::avg_pool1d(t, win.kernel, win.strides, padding, ceil_mode, count_pads);
    if (nd == 2) return torch::avg_pool2d(t, win.kernel, win.strides, padding, ceil_mode, count_pads);
    return torch::avg_pool3d(t, win.kernel, win.strides, padding, ceil_mode, count_pads);
  };
  if (!pre_pad(win)) return {pool(x, include_pad)};
  // Padded with zeros beforehand; without count_include_pad each mean is divided by the share of
  // its window that holds input (the same pooling of a mask of ones).
  std::fill(padding.begin(), padding.end(), 0);
  const torch::Tensor padded = pool(torch::constant_pad_nd(x, torch_pads(win.pads, nd), 0), true);
  if (include_pad) return {padded};
  const torch::Tensor ones = torch::ones({1, 1}, x.options()).expand_as(x.narrow(0, 0, 1).narrow(1, 0, 1)).contiguous();
  return {padded / pool(torch::constant_pad_nd(ones, torch_pads(win.pads, nd), 0), true)};
}

std::vector<std::int64_t> spatial_dims(const torch::Tensor& x) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(x.dim() - 2));
  std::iota(dims.begin(), dims.end(), 2);
  return dims;
}
Tensors op_global_avg_pool(const OpCall& c) { return {c.in[0].mean(spatial_dims(c.in[0]), true)}; }
Tensors op_global_max_pool(const OpCall& c) { return {c.in[0].amax(spatial_dims(c.in[0]), true)}; }

Tensors op_batch_norm(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const double eps = a.get_float("epsilon", 1e-5), momentum = a.get_float("momentum", 0.9);
  // ONNX: running = running * momentum + batch * (1 - momentum); torch's momentum is the latter factor.
  if (!c.training && a.get_int("training_mode", 0) != 0) {
    // The node asks for batch statistics outside a training step (ONNX's
    // test_batchnorm_example_training_mode; it was normalised with the running ones): its running
    // statistics are outputs, by ONNX's formula (the batch's biased variance), not updated in place.
    const torch::Tensor& x = c.in[0];
    torch::Tensor y = torch::batch_norm(x, c.in[1], c.in[2], torch::Tensor(), torch::Tensor(), true, 0.0, eps, true);
    if (c.node.output_size() < 2) return {y};
    std::vector<std::int64_t> dims{0};
    for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    const torch::Tensor mean = x.mean(dims), var = x.var(dims, /*unbiased=*/false);
    return {y, c.in[3] * momentum + mean * (1.0 - momentum), c.in[4] * momentum + var * (1.0 - momentum)};
  }
  torch::Tensor y = torch::batch_norm(c.in[0], c.in[1], c.in[2], c.in[3], c.in[4], c.training, 1.0 - momentum, eps, true);
  if (c.node.output_size() < 2) return {y};
  // The training-mode form (training_mode=1) also gives the running statistics after this batch
  // (updated in place in a training step); check_batch_norm refuses the older saved statistics.
  return {y, c.in[3].detach().clone(), c.in[4].detach().clone()};
}

Tensors op_layer_norm(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = a.get_int("axis", -1);
  if (axis < 0) axis += x.dim();
  std::vector<std::int64_t> shape(x.sizes().begin() + axis, x.sizes().end());
  const torch::Tensor weight = c.has(1) ? c.in[1] : torch::Tensor(), bias = c.has(2) ? c.in[2] : torch::Tensor();
  const double epsilon = a.get_float("epsilon", 1e-5);
  if (c.node.output_size() < 2) return {torch::layer_norm(x, shape, weight, bias, epsilon, true)};
  // The optional Mean and InvStdDev outputs: what the kernel computes for its gradient anyway, of
  // x's rank with the normalised dimensions 1 (ONNX's shape, whichever outputs the node names).
  // They take no gradient (the training step gives them none).
  auto [y, mean, inv_std_dev] = torch::native_layer_norm(x, shape, weight, bias, epsilon);
  std::vector<std::int64_t> stats(x.sizes().begin(), x.sizes().end());
  std::fill(stats.begin() + axis, stats.end(), 1);
  Tensors out{y, mean.detach().reshape(stats), inv_std_dev.detach().reshape(stats)};
  out.resize(std::min<std::size_t>(out.size(), static_cast<std::size_t>(c.node.output_size())));
  return out;
}

Tensors op_reshape_to_ir(const OpCall& c) { return {c.in[0].reshape(c.out_shape(0))}; }
Tensors op_identity(const OpCall& c) { return {c.in[0]}; }

// Dropout: a pass-through for inference; in training mode (the importer's training_mode attribute)
// it keeps each element with probability 1 - ratio, scaled by 1 / (1 - ratio), and gives the mask.
Tensors op_dropout(const OpCall& c) {
  if (c.g.op_attrs(c.op).get_int("training_mode", 0) == 0) {
    if (c.node.output_size() < 2) return {c.in[0]};
    return {c.in[0], torch::ones_like(c.in[0], torch::kBool)};  // keeps everything
  }
  const double ratio = c.has(1) ? c.scalar(1).value_or(0.5) : 0.5;
  const torch::Tensor mask = torch::rand_like(c.in[0]) >= ratio;
  torch::Tensor y = ratio < 1.0 ? c.in[0] * mask / (1.0 - ratio) : torch::zeros_like(c.in[0]);
  if (c.node.output_size() < 2) return {y};
  return {y, mask};
}

Tensors op_gemm(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  torch::Tensor A = a.get_int("transA", 0) ? c.in[0].t() : c.in[0];
  torch::Tensor B = a.get_int("transB", 0) ? c.in[1].t() : c.in[1];
  const double alpha = a.get_float("alpha", 1.0), beta = a.get_float("beta", 1.0);
  if (c.has(2)) return {torch::addmm(c.in[2], A, B, beta, alpha)};
  torch::Tensor y = torch::mm(A, B);
  return {alpha == 1.0 ? y : y * alpha};
}
Tensors op_matmul(const OpCall& c) { return {torch::matmul(c.in[0], c.in[1])}; }
Tensors op_einsum(const OpCall& c) {
  return {torch::einsum(c.g.op_attrs(c.op).get_string("equation", ""), std::vector<torch::Tensor>(c.in.begin(), c.in.end()))};
}

Tensors op_add(const OpCall& c) { return {torch::add(c.in[0], c.in[1])}; }
Tensors op_sub(const OpCall& c) { return {torch::sub(c.in[0], c.in[1])}; }
Tensors op_mul(const OpCall& c) { return {torch::mul(c.in[0], c.in[1])}; }
Tensors op_div(const OpCall& c) {
  if (!c.in[0].is_floating_point()) return {torch::div(c.in[0], c.in[1], "trunc")};
  return {torch::div(c.in[0], c.in[1])};
}
Tensors op_pow(const OpCall& c) {
  if (c.value[1].defined() && c.value[1].numel() == 1) {
    // An integer base to a whole exponent stays in integers (through a double, 4097^2 came out
    // as 16785408).
    const double e = c.value[1].item<double>();
    if (!c.in[0].is_floating_point() && e == std::floor(e) && std::fabs(e) < 0x1p62)
      return {torch::pow(c.in[0], static_cast<std::int64_t>(e))};
    return {torch::pow(c.in[0], e)};
  }
  return {torch::pow(c.in[0], c.in[1])};
}
Tensors op_mod(const OpCall& c) {
  return {c.g.op_attrs(c.op).get_int("fmod", 0) ? torch::fmod(c.in[0], c.in[1]) : torch::remainder(c.in[0], c.in[1])};
}
template <torch::Tensor (*F)(const torch::Tensor&, const torch::Tensor&)>
Tensors variadic(const OpCall& c) {
  torch::Tensor acc = c.in[0];
  for (std::size_t i = 1; i < c.in.size(); ++i) acc = F(acc, c.in[i]);
  return {acc};
}
torch::Tensor max2(const torch::Tensor& a, const torch::Tensor& b) { return torch::maximum(a, b); }
torch::Tensor min2(const torch::Tensor& a, const torch::Tensor& b) { return torch::minimum(a, b); }
// Sum and Mean add into the first sum once it has the output's shape (a + b, then += c, ...), and
// Mean divides it in place: no partial sum beside the next (a QA pass measured a Sum of 3 and a
// Mean of 2 one output above the simulated peak with one; autograd's add and div keep nothing).
Tensors sum_or_mean(const OpCall& c, bool mean) {
  const auto out_shape = c.g.tensor_shape(c.g.op_outputs(c.op)[0]);
  torch::Tensor acc = c.in[0];
  bool owned = false;
  for (std::size_t i = 1; i < c.in.size(); ++i) {
    if (owned && std::ranges::equal(acc.sizes(), out_shape) && acc.scalar_type() == c.in[i].scalar_type()) acc.add_(c.in[i]);
    else acc = acc + c.in[i], owned = true;
  }
  if (!mean) return {acc};
  const double k = static_cast<double>(c.in.size());
  return {owned ? acc.div_(k) : acc / k};
}
Tensors op_sum_n(const OpCall& c) { return sum_or_mean(c, false); }
Tensors op_mean_n(const OpCall& c) { return sum_or_mean(c, true); }

#define PLACER_UNARY(name, expr) \
  Tensors name(const OpCall& c) { const torch::Tensor& x = c.in[0]; return {expr}; }
PLACER_UNARY(op_relu, torch::relu(x))
PLACER_UNARY(op_sigmoid, torch::sigmoid(x))
PLACER_UNARY(op_tanh, torch::tanh(x))
PLACER_UNARY(op_erf, torch::erf(x))
PLACER_UNARY(op_exp, torch::exp(x))
PLACER_UNARY(op_log, torch::log(x))
PLACER_UNARY(op_sqrt, torch::sqrt(x))
PLACER_UNARY(op_neg, torch::neg(x))
PLACER_UNARY(op_abs, torch::abs(x))
PLACER_UNARY(op_reciprocal, torch::reciprocal(x))
PLACER_UNARY(op_ceil, torch::ceil(x))
PLACER_UNARY(op_floor, torch::floor(x))
PLACER_UNARY(op_round, torch::round(x))
PLACER_UNARY(op_sign, torch::sign(x))
PLACER_UNARY(op_not, torch::logical_not(x))
PLACER_UNARY(op_softplus, torch::softplus(x))
PLACER_UNARY(op_leaky_relu, torch::leaky_relu(x, c.g.op_attrs(c.op).get_float("alpha", 0.01)))
PLACER_UNARY(op_elu, torch::elu(x, c.g.op_attrs(c.op).get_float("alpha", 1.0)))
PLACER_UNARY(op_gelu, torch::gelu(x, c.g.op_attrs(c.op).get_string("approximate", "none")))
// HardSwish, and HardSigmoid as PyTorch exports nn.Hardsigmoid (alpha 1/6, beta 1/2), run as
// PyTorch's own kernels, which hold their output alone (the formulas before held 2-3 temporaries of
// the input's size: a QA pass measured a MobileNetV3 block 38% above the simulated peak); another
// HardSigmoid scales in place before it clamps (one temporary).
Tensors op_hard_sigmoid(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const double alpha = c.g.op_attrs(c.op).get_float("alpha", 0.2), beta = c.g.op_attrs(c.op).get_float("beta", 0.5);
  if (pytorch_hard_sigmoid(c.g.op_attrs(c.op))) return {torch::hardsigmoid(x)};
  torch::Tensor t = x * alpha;
  t.add_(beta);
  return {torch::clamp(t, 0.0, 1.0)};
}
PLACER_UNARY(op_hard_swish, torch::hardswish(x))
PLACER_UNARY(op_softmax, torch::softmax(x, c.g.op_attrs(c.op).get_int("axis", -1)))
PLACER_UNARY(op_log_softmax, torch::log_softmax(x, c.g.op_attrs(c.op).get_int("axis", -1)))
PLACER_UNARY(op_cast, x.to(scalar_type(dtype_from_onnx(static_cast<int>(c.g.op_attrs(c.op).get_int("to", 1))))))
#undef PLACER_UNARY

#define PLACER_BINARY(name, expr) \
  Tensors name(const OpCall& c) { const torch::Tensor &a = c.in[0], &b = c.in[1]; return {expr}; }
PLACER_BINARY(op_equal, torch::eq(a, b))
PLACER_BINARY(op_less, torch::lt(a, b))
PLACER_BINARY(op_greater, torch::gt(a, b))
PLACER_BINARY(op_less_equal, torch::le(a, b))
PLACER_BINARY(op_greater_equal, torch::ge(a, b))
PLACER_BINARY(op_and, torch::logical_and(a, b))
PLACER_BINARY(op_or, torch::logical_or(a, b))
#undef PLACER_BINARY
Tensors op_where(const OpCall& c) { return {torch::where(c.in[0], c.in[1], c.in[2])}; }

Tensors op_clip(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  std::optional<double> lo = c.has(1) ? c.scalar(1) : std::nullopt, hi = c.has(2) ? c.scalar(2) : std::nullopt;
  if (!lo && a.find("min")) lo = a.get_float("min", 0);
  if (!hi && a.find("max")) hi = a.get_float("max", 0);
  if (!lo && !hi) return {c.in[0].clone()};  // no bound: ONNX passes the input through (torch.clamp refuses)
  // Both bounds on floats is PyTorch's Hardtanh (ReLU6 is Hardtanh(0, 6), exported as Clip): its
  // gradient is one kernel (hardtanh_backward), where clamp's builds masks and a `where` (libtorch
  // 1.13 on one CPU thread: 18.4 ms against 1.07 ms on [8, 96, 56, 56], 2026-12-02). It passes no
  // gradient at the bounds themselves, clamp's does; both are subgradients.
  if (lo && hi && *lo <= *hi && c.in[0].is_floating_point()) return {torch::hardtanh(c.in[0], *lo, *hi)};
  c10::optional<torch::Scalar> l, h;
  if (lo) l = *lo;
  if (hi) h = *hi;
  return {torch::clamp(c.in[0], l, h)};
}

Tensors op_softmax_like_reduce(const OpCall& c, int which) {
  const Attributes& a = c.g.op_attrs(c.op);
  std::vector<std::int64_t> axes = a.get_ints("axes");
  if (c.has(1)) axes = c.ints(1);
  const bool keep = a.get_int("keepdims", 1) != 0;
  const torch::Tensor& x = c.in[0];
  if (axes.empty()) {
    if (a.get_int("noop_with_empty_axes", 0)) return {x};
    axes.resize(static_cast<std::size_t>(x.dim()));
    std::iota(axes.begin(), axes.end(), 0);
  }
  switch (which) {
    case 0: return {x.mean(axes, keep)};
    case 1: return {x.sum(axes, keep)};
    case 2: return {x.amax(axes, keep)};
    default: return {x.amin(axes, keep)};
  }
}
Tensors op_reduce_mean(const OpCall& c) { return op_softmax_like_reduce(c, 0); }
Tensors op_reduce_sum(const OpCall& c) { return op_softmax_like_reduce(c, 1); }
Tensors op_reduce_max(const OpCall& c) { return op_softmax_like_reduce(c, 2); }
Tensors op_reduce_min(const OpCall& c) { return op_softmax_like_reduce(c, 3); }

Tensors op_concat(const OpCall& c) {
  std::vector<torch::Tensor> parts;  // an empty part the import left out is absent here
  for (const torch::Tensor& part : c.in)
    if (part.defined()) parts.push_back(part);
  return {torch::cat(parts, c.g.op_attrs(c.op).get_int("axis", 0))};
}

Tensors op_split(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = a.get_int("axis", 0);
  if (axis < 0) axis += x.dim();
  std::vector<std::int64_t> sizes = c.has(1) ? c.ints(1) : a.get_ints("split");
  if (sizes.empty()) {
    const auto n = static_cast<std::int64_t>(c.node.output_size());
    const std::int64_t dim = x.size(axis), each = (dim + n - 1) / n;
    for (std::int64_t i = 0; i < n; ++i) sizes.push_back(std::min(each, dim - i * each));
  }
  return torch::split_with_sizes(x, sizes, axis);
}

Tensors op_transpose(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  std::vector<std::int64_t> perm = c.g.op_attrs(c.op).get_ints("perm");
  if (perm.empty())
    for (std::int64_t i = x.dim(); i-- > 0;) perm.push_back(i);
  return {x.permute(perm)};
}

Tensors op_slice(const OpCall& c) {
  torch::Tensor x = c.in[0];
  // Opset 1-9 gives starts, ends and axes as attributes; 10 on as inputs.
  const bool attributes = !c.has(1);
  const auto& attrs = c.g.op_attrs(c.op);
  std::vector<std::int64_t> starts = attributes ? attrs.get_ints("starts") : c.ints(1), ends = attributes ? attrs.get_ints("ends") : c.ints(2),
                            axes, steps;
  if (attributes) axes = attrs.get_ints("axes");
  else if (c.has(3)) axes = c.ints(3);
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (starts.size() != ends.size() || axes.size() != starts.size())
    throw Error(op_label(c.g, c.op) + ": starts, ends and axes of different lengths");
  if (c.has(4)) steps = c.ints(4);
  else steps.assign(starts.size(), 1);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::int64_t axis = axes[i] < 0 ? axes[i] + x.dim() : axes[i];
    const std::int64_t d = x.size(axis), step = steps[i];
    std::int64_t s = starts[i], e = ends[i];
    if (s < 0) s = std::max<std::int64_t>(s, -d) + d;
    if (e < 0) e = std::max<std::int64_t>(e, -d - 1) + d;
    if (step > 0) {
      s = std::clamp<std::int64_t>(s, 0, d), e = std::clamp<std::int64_t>(e, 0, d);
      x = x.slice(axis, s, std::max(s, e), step);
    } else {
      s = std::clamp<std::int64_t>(s, -1, d - 1), e = std::clamp<std::int64_t>(e, -1, d - 1);
      torch::Tensor idx = torch::arange(s, e, step, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
      x = x.index_select(axis, idx);
    }
  }
  return {x};
}

Tensors op_gather(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  torch::Tensor idx = c.in[1];
  std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", 0);
  if (axis < 0) axis += x.dim();
  // ONNX counts negative indices from the end (from -size); libtorch refuses them. Known values
  // are checked once here; indices computed in the step (ids - 5) are wrapped as they come,
  // without a sync. An index out of [-size, size) stays out of range: libtorch's error names it.
  if (!c.value[1].defined() || (c.value[1] < 0).any().item<bool>()) idx = torch::where(idx < 0, idx + x.size(axis), idx);
  if (axis == 0 && x.dim() == 2 && x.is_floating_point()) return {torch::embedding(x, idx)};
  return {x.index_select(axis, idx.reshape(-1)).reshape(c.out_shape(0))};
}

Tensors op_shape(const OpCall& c) {
  auto shape = c.g.tensor_shape(c.g.op_inputs(c.op)[0]);
  const auto rank = static_cast<std::int64_t>(shape.size());
  const Attributes& a = c.g.op_attrs(c.op);
  std::int64_t start = a.get_int("start", 0), end = a.get_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<std::int64_t>(start, 0, rank), end = std::clamp<std::int64_t>(end, start, rank);
  std::vector<std::int64_t> v(shape.begin() + start, shape.begin() + end);
  return {torch::tensor(v, torch::kLong)};
}
Tensors op_size(const OpCall& c) {
  return {torch::tensor(static_cast<std::int64_t>(c.g.tensor_elements(c.g.op_inputs(c.op)[0])), torch::kLong)};
}

Tensors op_constant(const OpCall& c) {
  for (const auto& a : c.node.attribute()) {
    if (a.name() == "value") return {tensor_from_proto(a.t(), op_label(c.g, c.op))};
    if (a.name() == "value_float") return {torch::tensor(a.f(), torch::kFloat)};
    if (a.name() == "value_int") return {torch::tensor(static_cast<std::int64_t>(a.i()), torch::kLong)};
    if (a.name() == "value_floats") return {torch::tensor(std::vector<float>(a.floats().begin(), a.floats().end()), torch::kFloat)};
    if (a.name() == "value_ints")
      return {torch::tensor(std::vector<std::int64_t>(a.ints().begin(), a.ints().end()), torch::kLong)};
  }
  throw Error(op_label(c.g, c.op) + ": Constant without a value this executor reads");
}

Tensors op_constant_of_shape(const OpCall& c) {
  torch::Tensor fill = torch::zeros({1}, torch::kFloat);
  for (const auto& a : c.node.attribute())
    if (a.name() == "value") fill = tensor_from_proto(a.t(), op_label(c.g, c.op)).reshape({-1});
  return {torch::full(c.ints(0), fill.item(), torch::TensorOptions().dtype(fill.scalar_type()).device(c.device))};
}

Tensors op_range(const OpCall& c) {
  const double start = *c.scalar(0), limit = *c.scalar(1), delta = *c.scalar(2);
  return {torch::arange(start, limit, delta, torch::TensorOptions().dtype(scalar_type(c.g.tensor_dtype(c.g.op_outputs(c.op)[0]))).device(c.device))};
}
Tensors op_expand(const OpCall& c) { return {c.in[0].expand(c.out_shape(0))}; }
Tensors op_tile(const OpCall& c) { return {c.in[0].repeat(c.ints(1))}; }

Tensors op_trilu(const OpCall& c) {
  const std::int64_t k = c.has(1) ? static_cast<std::int64_t>(*c.scalar(1)) : 0;
  return {c.g.op_attrs(c.op).get_int("upper", 1) ? torch::triu(c.in[0], k) : torch::tril(c.in[0], k)};
}

Tensors op_pad(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const auto rank = static_cast<std::size_t>(x.dim());
  std::vector<std::int64_t> pads = c.has(1) ? c.ints(1) : c.g.op_attrs(c.op).get_ints("pads");
  if (c.has(3)) {  // pads of the listed axes only
    std::vector<std::int64_t> axes = c.ints(3), full(2 * rank, 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(axes[i] < 0 ? axes[i] + x.dim() : axes[i]);
      full[a] = pads[i], full[a + rank] = pads[i + axes.size()];
    }
    pads = full;
  }
  if (pads.size() != 2 * rank) throw Error(op_label(c.g, c.op) + ": pads do not match the input's rank");
  const std::string mode = c.g.op_attrs(c.op).get_string("mode", "constant");
  if (mode == "constant") {
    // The fill value: input 2 (opset 11 on), or the attribute of opsets 2-10.
    const double value = c.has(2) ? c.scalar(2).value_or(0.0) : c.g.op_attrs(c.op).get_float("value", 0.0);
    return {torch::constant_pad_nd(x, torch_pads(pads, rank), value)};
  }
  // reflect / edge: torch pads the 1 to 3 trailing dims of a batch of channels, so the unpadded
  // leading dims are folded into a batch, under one channel, and unfolded after (a [4, 5] or [5]
  // tensor was refused by libtorch at the first step).
  std::size_t first = 0;
  while (first < rank && pads[first] == 0 && pads[first + rank] == 0) ++first;
  if (first == rank) return {x.clone()};
  if (rank - first > 3)
    throw Error(op_label(c.g, c.op) + ": Pad mode '" + mode + "' pads " + std::to_string(rank - first) + " axes; at most the last 3 are supported");
  std::vector<std::int64_t> tp;
  for (std::size_t i = rank; i-- > first;) tp.push_back(pads[i]), tp.push_back(pads[i + rank]);
  namespace F = torch::nn::functional;
  auto options = F::PadFuncOptions(tp);
  if (mode == "reflect") options.mode(torch::kReflect);
  else if (mode == "edge") options.mode(torch::kReplicate);
  else throw Error(op_label(c.g, c.op) + ": Pad mode '" + mode + "' is not supported");
  const auto sizes = x.sizes();
  std::int64_t batch = 1;
  for (std::size_t i = 0; i < first; ++i) batch *= sizes[i];
  std::vector<std::int64_t> folded{batch, 1};
  folded.insert(folded.end(), sizes.begin() + static_cast<std::ptrdiff_t>(first), sizes.end());
  const torch::Tensor y = F::pad(as_floating(x).reshape(folded), options);
  std::vector<std::int64_t> shape(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(first));
  shape.insert(shape.end(), y.sizes().begin() + 2, y.sizes().end());
  return {like(y.reshape(shape), x)};
}

// ---- Quantized arithmetic, windows, losses (ONNX semantics; integers computed in float64, exact) ----

// A per-tensor or per-axis quantization parameter shaped to broadcast along `axis` of a rank-`rank` tensor.
torch::Tensor along_axis(const torch::Tensor& p, std::int64_t axis, std::int64_t rank) {
  if (p.dim() == 0 || p.numel() == 1) return p.reshape({});
  std::vector<std::int64_t> shape(static_cast<std::size_t>(rank), 1);
  shape[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)] = p.numel();
  return p.reshape(shape);
}
// Rounds half to even and saturates to the range of `type` (uint8 when the zero point is absent).
torch::Tensor saturate(const torch::Tensor& x, torch::ScalarType type) {
  double lo = 0, hi = 255;
  if (type == torch::kChar) lo = -128, hi = 127;
  else if (type == torch::kInt) lo = -2147483648.0, hi = 2147483647.0;
  return torch::round(x).clamp(lo, hi).to(type);
}
torch::Tensor wide(const torch::Tensor& x) { return x.to(torch::kDouble); }
torch::Tensor zero_point(const OpCall& c, std::size_t slot, const torch::Tensor& like) {
  return c.has(slot) ? wide(c.in[slot]) : torch::zeros({}, like.options().dtype(torch::kDouble));
}

// y = saturate(round(x / scale) + zero point): the division in the input's type (float32, as
// ONNX's reference and onnxruntime compute: 0.5 / (5 / 255) is 25.5 there, 25.4999... in double).
Tensors op_quantize_linear(const OpCall& c) {
  const std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", 1), rank = c.in[0].dim();
  const torch::ScalarType type = c.has(2) ? c.in[2].scalar_type() : torch::kByte;
  const torch::Tensor scale = along_axis(c.in[1].to(c.in[0].scalar_type()), axis, rank);
  if (c.in[0].scalar_type() == torch::kFloat && (type == torch::kByte || type == torch::kChar)) {
    // 8 bits: exact in float32, computed in place in one buffer of the input's size (the double
    // temporaries below held 40 bytes per element: a QA pass measured a QDQ pair 82% over).
    torch::Tensor y = c.in[0] / scale;
    y.round_().add_(along_axis(c.has(2) ? c.in[2].to(torch::kFloat) : torch::zeros({}, y.options()), axis, rank));
    y.clamp_(type == torch::kChar ? -128 : 0, type == torch::kChar ? 127 : 255);
    return {y.to(type)};
  }
  const torch::Tensor zp = along_axis(zero_point(c, 2, c.in[0]), axis, rank);
  return {saturate(wide(torch::round(c.in[0] / scale)) + zp, type)};
}
Tensors op_dequantize_linear(const OpCall& c) {
  const std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", 1), rank = c.in[0].dim();
  if (c.in[1].scalar_type() == torch::kFloat && (c.in[0].scalar_type() == torch::kByte || c.in[0].scalar_type() == torch::kChar)) {
    // 8 bits into float32: exact differences, the product in float32 (ONNX's reference), in place
    // in the output.
    torch::Tensor y = c.in[0].to(torch::kFloat);
    if (c.has(2)) y.sub_(along_axis(c.in[2].to(torch::kFloat), axis, rank));
    return {y.mul_(along_axis(c.in[1], axis, rank))};
  }
  const torch::Tensor scale = along_axis(wide(c.in[1]), axis, rank), zp = along_axis(zero_point(c, 2, c.in[0]), axis, rank);
  return {((wide(c.in[0]) - zp) * scale).to(c.in[1].scalar_type())};
}
Tensors op_dynamic_quantize_linear(const OpCall& c) {
  const torch::Tensor& x = c.in[0];  // float32, as ONNX computes it
  const torch::Tensor lo = torch::clamp_max(x.min(), 0.0), hi = torch::clamp_min(x.max(), 0.0);
  torch::Tensor scale = (hi - lo) / 255.0;
  scale = torch::where(scale == 0, torch::ones_like(scale), scale);
  const torch::Tensor zp = torch::round(torch::clamp(-lo / scale, 0, 255));
  return {saturate(wide(torch::round(x / scale)) + wide(zp), torch::kByte), scale, zp.to(torch::kByte)};
}
// Integer products of (x - x_zp) and (w - w_zp), in float64, as int32.
Tensors op_matmul_integer(const OpCall& c) {
  torch::Tensor a = wide(c.in[0]), b = wide(c.in[1]);
  if (c.has(2)) a = a - (c.in[2].numel() > 1 ? wide(c.in[2]).reshape({-1, 1}) : wide(c.in[2]).reshape({}));  // per row
  if (c.has(3)) b = b - wide(c.in[3]);                                                                       // per column
  return {torch::round(torch::matmul(a, b)).to(torch::kInt)};
}
Tensors op_conv_integer(const OpCall& c) {
  torch::Tensor x = wide(c.in[0]), w = wide(c.in[1]);
  if (c.has(2)) x = x - wide(c.in[2]).reshape({});
  if (c.has(3)) w = w - along_axis(wide(c.in[3]), 0, w.dim());  // per output channel
  return {torch::round(conv_of(c, x, w)).to(torch::kInt)};
}
// QLinear*: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp (and QLinearConv's int32 bias).
Tensors op_qlinear(const OpCall& c, bool conv) {
  const torch::Tensor x = wide(c.in[0]) - wide(c.in[2]).reshape({});
  torch::Tensor w = wide(c.in[3]);
  const std::int64_t w_axis = conv ? 0 : w.dim() - 1;  // per output channel, or per column
  w = w - along_axis(wide(c.in[5]), w_axis, w.dim());
  torch::Tensor acc = conv ? conv_of(c, x, w) : torch::matmul(x, w);
  if (conv && c.has(8)) acc = acc + along_axis(wide(c.in[8]), 1, acc.dim());
  const torch::Tensor w_scale = along_axis(wide(c.in[4]), conv ? 1 : acc.dim() - 1, acc.dim());
  const torch::Tensor real = acc * wide(c.in[1]).reshape({}) * w_scale;
  return {saturate(real / wide(c.in[6]).reshape({}) + wide(c.in[7]).reshape({}), c.in[7].scalar_type())};
}
Tensors op_qlinear_conv(const OpCall& c) { return op_qlinear(c, true); }
Tensors op_qlinear_matmul(const OpCall& c) { return op_qlinear(c, false); }

Tensors op_det(const OpCall& c) { return {torch::det(c.in[0])}; }

// RoiAlign (opsets 10-16): per region, output_height x output_width bins, each the mean (or max) of
// sampling_ratio^2 bilinear samples (adaptive: ceil(region / bins) per axis); a sample more than
// one pixel outside the map is 0. half_pixel shifts coordinates by half a pixel; the legacy
// output_half_pixel does not, and makes regions at least one pixel wide. In float64, per region.
Tensors op_roi_align(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor x = c.in[0].to(torch::kDouble).to(torch::kCPU);
  const torch::Tensor rois = c.in[1].to(torch::kDouble).to(torch::kCPU), batch = c.in[2].to(torch::kLong).to(torch::kCPU);
  const std::int64_t out_h = a.get_int("output_height", 1), out_w = a.get_int("output_width", 1), ratio = a.get_int("sampling_ratio", 0);
  const double scale = a.get_float("spatial_scale", 1.0);
  const bool half_pixel = a.get_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const bool max_mode = a.get_string("mode", "avg") == "max";
  const std::int64_t height = x.size(2), width = x.size(3), regions = rois.size(0);
  const double offset = half_pixel ? 0.5 : 0.0;
  std::vector<torch::Tensor> outputs;
  for (std::int64_t r = 0; r < regions; ++r) {
    const auto box = rois[r];
    const double x1 = box[0].item<double>() * scale - offset, y1 = box[1].item<double>() * scale - offset;
    double roi_w = box[2].item<double>() * scale - offset - x1, roi_h = box[3].item<double>() * scale - offset - y1;
    if (!half_pixel) roi_w = std::max(roi_w, 1.0), roi_h = std::max(roi_h, 1.0);
    const double bin_h = roi_h / static_cast<double>(out_h), bin_w = roi_w / static_cast<double>(out_w);
    const std::int64_t grid_h = ratio > 0 ? ratio : static_cast<std::int64_t>(std::ceil(roi_h / static_cast<double>(out_h)));
    const std::int64_t grid_w = ratio > 0 ? ratio : static_cast<std::int64_t>(std::ceil(roi_w / static_cast<double>(out_w)));
    // Sample coordinates along each axis: bin p, sample i at start + p * bin + (i + 0.5) * bin / grid.
    auto coords = [](double start, double bin, std::int64_t bins, std::int64_t grid) {
      std::vector<double> v;
      for (std::int64_t p = 0; p < bins; ++p)
        for (std::int64_t i = 0; i < grid; ++i) v.push_back(start + static_cast<double>(p) * bin + (static_cast<double>(i) + 0.5) * bin / static_cast<double>(std::max<std::int64_t>(grid, 1)));
      return v;
    };
    // Bilinear taps along one axis: low and high indices and weights (0 outside [-1, size]).
    auto taps = [](const std::vector<double>& v, std::int64_t size) {
      std::vector<std::int64_t> lo(v.size()), hi(v.size());
      std::vector<double> wl(v.size()), wh(v.size());
      for (std::size_t k = 0; k < v.size(); ++k) {
        double t = v[k];
        if (t < -1.0 || t > static_cast<double>(size)) {
          lo[k] = hi[k] = 0, wl[k] = wh[k] = 0.0;
          continue;
        }
        t = std::max(t, 0.0);
        auto l = static_cast<std::int64_t>(std::floor(t));
        std::int64_t h = l + 1;
        if (l >= size - 1) l = h = size - 1, t = static_cast<double>(l);
        lo[k] = l, hi[k] = h, wh[k] = t - static_cast<double>(l), wl[k] = 1.0 - wh[k];
      }
      auto opts = torch::TensorOptions().dtype(torch::kLong);
      return std::make_tuple(torch::tensor(lo, opts), torch::tensor(hi, opts), torch::tensor(wl, torch::kDouble), torch::tensor(wh, torch::kDouble));
    };
    const auto [ylo, yhi, wyl, wyh] = taps(coords(y1, bin_h, out_h, grid_h), height);
    const auto [xlo, xhi, wxl, wxh] = taps(coords(x1, bin_w, out_w, grid_w), width);
    const torch::Tensor map = x[batch[r].item<std::int64_t>()];  // [C, H, W]
    auto at = [&](const torch::Tensor& ys, const torch::Tensor& xs) { return map.index_select(1, ys).index_select(2, xs); };
    // [C, out_h * grid_h, out_w * grid_w] samples, as weighted taps.
    const torch::Tensor wy_l = wyl.view({1, -1, 1}), wy_h = wyh.view({1, -1, 1}), wx_l = wxl.view({1, 1, -1}), wx_h = wxh.view({1, 1, -1});
    const std::vector<torch::Tensor> terms = {wy_l * wx_l * at(ylo, xlo), wy_l * wx_h * at(ylo, xhi), wy_h * wx_l * at(yhi, xlo), wy_h * wx_h * at(yhi, xhi)};
    const std::int64_t channels = map.size(0);
    torch::Tensor binned;
    if (max_mode) {
      // onnxruntime's max mode: the largest weighted tap of the bin's samples.
      binned = torch::stack(terms).amax(0);
    } else {
      binned = terms[0] + terms[1] + terms[2] + terms[3];
    }
    binned = binned.view({channels, out_h, grid_h, out_w, grid_w});
    outputs.push_back(max_mode ? binned.amax({2, 4}) : binned.mean({2, 4}));
  }
  return {torch::stack(outputs).to(c.in[0].scalar_type()).to(c.device)};
}

// STFT (opset 17): signal [batch, length, 1 or 2], frames of `window`'s length (or frame_length)
// every frame_step samples, each times the window and transformed; onesided (the default) keeps
// the first n/2 + 1 bins of a real signal. Output [batch, frames, bins, 2].
Tensors op_stft(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const auto step = static_cast<std::int64_t>(*c.scalar(1));
  const std::int64_t n = c.has(2) ? c.in[2].numel() : static_cast<std::int64_t>(*c.scalar(3));
  const bool onesided = c.g.op_attrs(c.op).get_int("onesided", 1) != 0;
  const torch::Tensor wide_x = x.to(torch::kDouble);
  const bool real = x.size(-1) == 1;
  torch::Tensor signal = real ? wide_x.select(-1, 0) : torch::view_as_complex(wide_x.contiguous());
  torch::Tensor frames = signal.unfold(1, n, step);  // [batch, frames, n]
  if (c.has(2)) frames = frames * c.in[2].to(torch::kDouble);
  const torch::Tensor spectrum = onesided && real ? torch::fft::rfft(frames, n, -1) : torch::fft::fft(frames, n, -1);
  return {torch::view_as_real(spectrum.contiguous()).to(x.scalar_type())};
}

// DFT (opsets 17-19): input [batch, ..., 1 (real) or 2 (complex)], along `axis` (counted before the
// last dimension), `dft_length` points (input 1: zero-padded or cut), `onesided` (the first n/2 + 1
// bins), `inverse` (scaled by 1/n, as NumPy's). Output [..., 2]: real and imaginary parts.
Tensors op_dft(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = a.get_int("axis", 1);
  if (axis < 0) axis += x.dim() - 1;
  const bool inverse = a.get_int("inverse", 0) != 0, onesided = a.get_int("onesided", 0) != 0;
  const c10::optional<std::int64_t> n =
      c.has(1) ? c10::optional<std::int64_t>(static_cast<std::int64_t>(*c.scalar(1))) : c10::nullopt;
  const torch::Tensor wide_x = x.to(torch::kDouble);
  torch::Tensor signal = x.size(-1) == 1 ? wide_x.select(-1, 0) : torch::view_as_complex(wide_x.contiguous());
  torch::Tensor spectrum;
  if (inverse) spectrum = torch::fft::ifft(signal, n, axis);
  else if (onesided && x.size(-1) == 1) spectrum = torch::fft::rfft(signal, n, axis);
  else spectrum = torch::fft::fft(signal, n, axis);
  if (onesided && (inverse || x.size(-1) == 2))
    spectrum = spectrum.narrow(axis, 0, spectrum.size(axis) / 2 + 1);
  return {torch::view_as_real(spectrum.contiguous()).to(x.scalar_type())};
}

// Windows of `size` points; periodic (the default) divides by size, symmetric by size - 1.
Tensors op_window(const OpCall& c, int kind) {
  const auto size = static_cast<std::int64_t>(*c.scalar(0));
  const bool periodic = c.g.op_attrs(c.op).get_int("periodic", 1) != 0;
  const double n = static_cast<double>(periodic ? size : size - 1);
  const torch::Tensor k = torch::arange(size, torch::TensorOptions().dtype(torch::kDouble));
  const torch::Tensor phase = 2.0 * M_PI * k / n;
  torch::Tensor w = kind == 0   ? 0.5 - 0.5 * torch::cos(phase)                                      // Hann
                    : kind == 1 ? 25.0 / 46.0 - 21.0 / 46.0 * torch::cos(phase)                      // Hamming
                                : 0.42 - 0.5 * torch::cos(phase) + 0.08 * torch::cos(2.0 * phase);   // Blackman
  return {w.to(scalar_type(c.g.tensor_dtype(c.g.op_outputs(c.op)[0]))).to(c.device)};
}
Tensors op_hann_window(const OpCall& c) { return op_window(c, 0); }
Tensors op_hamming_window(const OpCall& c) { return op_window(c, 1); }
Tensors op_blackman_window(const OpCall& c) { return op_window(c, 2); }

// Losses: reduction and ignore_index as ONNX defines them, which are torch's.
torch::Tensor nll(const OpCall& c, const torch::Tensor& log_prob) {
  const Attributes& a = c.g.op_attrs(c.op);
  namespace F = torch::nn::functional;
  auto options = F::NLLLossFuncOptions().ignore_index(a.get_int("ignore_index", -100));
  const std::string reduction = a.get_string("reduction", "mean");
  if (reduction == "none") options.reduction(torch::kNone);
  else if (reduction == "sum") options.reduction(torch::kSum);
  else options.reduction(torch::kMean);
  // Class weights take no gradient (libtorch's nll_loss has none for them: the IR gives none,
  // op_work's input_takes_gradient); the log-probabilities in row-major order (its 2-D backward
  // wants its gradient so, and an input of another layout gave one of that layout: a QA sweep).
  if (c.has(2)) options.weight(c.in[2].detach());
  return F::nll_loss(log_prob.contiguous(), c.in[1].to(torch::kLong), options);
}
Tensors op_negative_log_likelihood_loss(const OpCall& c) { return {nll(c, c.in[0])}; }
Tensors op_softmax_cross_entropy_loss(const OpCall& c) {
  const torch::Tensor log_prob = torch::log_softmax(c.in[0], 1);
  return {nll(c, log_prob), log_prob};
}

// MaxUnpool: each value to its index in a zeroed output. The indices (MaxPool's, flat over the
// whole tensor) count in the default output shape, (in - 1) x stride + kernel - pads per axis; an
// output_shape of other sizes gets each at the same coordinates (ONNX's
// test_maxunpool_export_with_output_shape).
Tensors op_max_unpool(const OpCall& c) {
  const std::vector<std::int64_t> out_shape = c.out_shape(0);
  const torch::Tensor& x = c.in[0];
  const std::size_t nd = static_cast<std::size_t>(x.dim() - 2);
  const Window win = window_of(c.g, c.op, c.g.op_attrs(c.op).get_ints("kernel_shape"));
  std::vector<std::int64_t> default_shape(out_shape.begin(), out_shape.begin() + 2);
  for (std::size_t i = 0; i < nd; ++i)
    default_shape.push_back((x.size(static_cast<std::int64_t>(i + 2)) - 1) * win.strides[i] + win.kernel[i] - win.pads[i] - win.pads[i + nd]);
  torch::Tensor index = c.in[1].reshape(-1).to(torch::kLong);
  if (default_shape != out_shape) {
    torch::Tensor rest = index, flat = torch::zeros_like(index);
    std::int64_t stride = 1;
    for (std::size_t d = out_shape.size(); d-- > 0;) {
      flat = flat + rest.remainder(default_shape[d]) * stride;
      rest = rest.div(default_shape[d], "floor");
      stride *= out_shape[d];
    }
    index = flat;
  }
  torch::Tensor out = torch::zeros(out_shape, x.options());
  return {out.view(-1).scatter(0, index, x.reshape(-1)).view(out_shape)};
}

// ---- Preparation checks (OpCheck) ----

// The window of a convolution or pooling op, as the op will compute it; its errors as a reason.
std::string check_window(const Graph& g, OpId op, std::vector<std::int64_t> kernel, Window* out = nullptr) {
  try {
    Window w = window_of(g, op, std::move(kernel));
    if (out) *out = w;
  } catch (const Error& e) {
    const std::string what = e.what(), label = op_label(g, op) + ": ";
    return what.rfind(label, 0) == 0 ? what.substr(label.size()) : what;
  }
  return {};
}

std::string check_conv(const Graph& g, OpId op) {
  const auto inputs = g.op_inputs(op);
  if (inputs.size() < 2 || inputs[1] == kNoId) return "no weight input";
  const auto w = g.tensor_shape(inputs[1]);
  if (w.size() < 3) return "a weight of rank " + std::to_string(w.size()) + " (at least 3: out, in, kernel...)";
  return check_window(g, op, std::vector<std::int64_t>(w.begin() + 2, w.end()));
}

std::string check_max_pool(const Graph& g, OpId op) { return check_window(g, op, g.op_attrs(op).get_ints("kernel_shape")); }

std::string check_avg_pool(const Graph& g, OpId op) {
  Window w;
  if (std::string why = check_window(g, op, g.op_attrs(op).get_ints("kernel_shape"), &w); !why.empty()) return why;
  return {};
}

// ---- More elementwise ops, reductions, indexing, normalisations (ONNX semantics, opset 13 on) ----

#define PLACER_UNARY(name, expr) \
  Tensors name(const OpCall& c) { const torch::Tensor& x = c.in[0]; return {expr}; }
PLACER_UNARY(op_sin, torch::sin(x))
PLACER_UNARY(op_cos, torch::cos(x))
PLACER_UNARY(op_tan, torch::tan(x))
PLACER_UNARY(op_asin, torch::asin(x))
PLACER_UNARY(op_acos, torch::acos(x))
PLACER_UNARY(op_atan, torch::atan(x))
PLACER_UNARY(op_sinh, torch::sinh(x))
PLACER_UNARY(op_cosh, torch::cosh(x))
PLACER_UNARY(op_asinh, torch::asinh(x))
PLACER_UNARY(op_acosh, torch::acosh(x))
PLACER_UNARY(op_atanh, torch::atanh(x))
PLACER_UNARY(op_mish, torch::mish(x))
PLACER_UNARY(op_celu, torch::celu(x, c.g.op_attrs(c.op).get_float("alpha", 1.0)))
// ONNX Selu: gamma * (x > 0 ? x : alpha * (exp(x) - 1)), its defaults torch's constants.
PLACER_UNARY(op_selu, torch::elu(x, c.g.op_attrs(c.op).get_float("alpha", 1.67326319217681884765625),
                                 c.g.op_attrs(c.op).get_float("gamma", 1.05070102214813232421875), 1.0))
// ThresholdedRelu is torch's threshold (x where x > alpha, else 0): one kernel, its gradient of the
// input (a `where` held a mask and a zeros tensor besides: a QA pass measured 29% above the model).
// (A NaN stays NaN, as in PyTorch, where ONNX's formula gives 0; so for Shrink below.)
PLACER_UNARY(op_thresholded_relu, torch::threshold(x, c.g.op_attrs(c.op).get_float("alpha", 1.0), 0.0))
PLACER_UNARY(op_is_nan, torch::isnan(x))
PLACER_UNARY(op_bitwise_not, torch::bitwise_not(x))
#undef PLACER_UNARY

// Shrink: x + bias below -lambd, x - bias above lambd, else 0. With bias 0 it is torch's
// hardshrink, with bias = lambd softshrink (one kernel each, as PyTorch's modules run them);
// otherwise two nested `where`s.
// Softsign as PyTorch's softsign runs it, x / (|x| + 1): |x| is freed once 1 + |x| is made (in one
// C++ expression it lived to the end: one input more than PyTorch holds).
Tensors op_softsign(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const torch::Tensor denominator = torch::abs(x) + 1;
  return {x / denominator};
}
Tensors op_shrink(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const double bias = c.g.op_attrs(c.op).get_float("bias", 0.0), lambd = c.g.op_attrs(c.op).get_float("lambd", 0.5);
  if (x.is_floating_point() && bias == 0.0) return {torch::hardshrink(x, lambd)};
  if (x.is_floating_point() && bias == lambd && lambd >= 0.0) return {torch::softshrink(x, lambd)};
  return {torch::where(x < -lambd, x + bias, torch::where(x > lambd, x - bias, torch::zeros_like(x)))};
}
Tensors op_is_inf(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const bool positive = c.g.op_attrs(c.op).get_int("detect_positive", 1) != 0, negative = c.g.op_attrs(c.op).get_int("detect_negative", 1) != 0;
  torch::Tensor out = torch::zeros_like(x, torch::kBool);
  if (positive) out = out | torch::isposinf(x);
  if (negative) out = out | torch::isneginf(x);
  return {out};
}
// PRelu: the slope broadcasts to x (ONNX's unidirectional broadcasting), not only per channel;
// opset 6's slope of one value per channel (the importer's slope_per_channel) is laid along
// dimension 1.
Tensors op_prelu(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  torch::Tensor slope = c.in[1];
  const bool per_channel_attr = c.g.op_attrs(c.op).get_int("slope_per_channel", 0) != 0;
  const bool native = x.is_floating_point() && slope.scalar_type() == x.scalar_type() &&
                      prelu_as_torch_prelu(std::span<const std::int64_t>(x.sizes().data(), x.sizes().size()),
                                           std::span<const std::int64_t>(slope.sizes().data(), slope.sizes().size()), per_channel_attr);
  if (per_channel_attr && x.dim() >= 2) {
    std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim() - 1), 1);
    shape[0] = slope.numel();
    slope = slope.reshape(shape);
  }
  // One slope, or one per channel (dimension 1) broadcast along the others: torch's prelu, one
  // kernel (as nn.PReLU runs); other broadcasts through a `where` (prelu_as_torch_prelu, which the
  // memory rules follow).
  if (native) return {torch::prelu(x, slope.reshape({slope.numel()}))};
  return {torch::where(x >= 0, x, x * slope)};
}

#define PLACER_BINARY(name, expr) \
  Tensors name(const OpCall& c) { const torch::Tensor &a = c.in[0], &b = c.in[1]; return {expr}; }
PLACER_BINARY(op_xor, torch::logical_xor(a, b))
PLACER_BINARY(op_bitwise_and, torch::bitwise_and(a, b))
PLACER_BINARY(op_bitwise_or, torch::bitwise_or(a, b))
PLACER_BINARY(op_bitwise_xor, torch::bitwise_xor(a, b))
Tensors op_bit_shift(const OpCall& c) {
  const torch::Tensor &a = c.in[0], &b = c.in[1];
  if (c.g.op_attrs(c.op).get_string("direction", "") != "LEFT") return {torch::bitwise_right_shift(a, b)};
  torch::Tensor y = torch::bitwise_left_shift(a, b);
  // uint16 and uint32 are held in wider torch types: bits past the type's width are dropped.
  const DType t = c.g.tensor_dtype(c.g.op_outputs(c.op)[0]);
  if (t == DType::u16) y = torch::bitwise_and(y, static_cast<std::int64_t>(0xFFFF));
  if (t == DType::u32) y = torch::bitwise_and(y, static_cast<std::int64_t>(0xFFFFFFFF));
  return {y};
}
#undef PLACER_BINARY

// The axes of a reduction (attribute, or input 1 from opset 18; ReduceSum's from 13), every axis
// when none are given, non-negative.
std::vector<std::int64_t> reduce_axes(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  std::vector<std::int64_t> axes = a.get_ints("axes");
  if (c.has(1)) axes = c.ints(1);
  const std::int64_t rank = c.in[0].dim();
  if (axes.empty()) {
    axes.resize(static_cast<std::size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (auto& axis : axes) axis = axis < 0 ? axis + rank : axis;
  return axes;
}
bool keep_dims(const OpCall& c) { return c.g.op_attrs(c.op).get_int("keepdims", 1) != 0; }
bool noop_reduce(const OpCall& c) {
  return c.g.op_attrs(c.op).get_int("noop_with_empty_axes", 0) && c.g.op_attrs(c.op).get_ints("axes").empty() && !c.has(1);
}
Tensors op_reduce_l1(const OpCall& c) {
  if (noop_reduce(c)) return {c.in[0]};
  // torch.norm(x, 1, dims), which PyTorch exports as ReduceL1: one kernel, no |x| held (floating
  // only: integers as |x| summed).
  if (!c.in[0].is_floating_point()) return {c.in[0].abs().sum(reduce_axes(c), keep_dims(c))};
  return {torch::linalg_vector_norm(c.in[0], 1.0, reduce_axes(c), keep_dims(c))};
}
Tensors op_reduce_l2(const OpCall& c) {
  if (noop_reduce(c)) return {c.in[0]};
  return {torch::linalg_vector_norm(c.in[0], 2.0, reduce_axes(c), keep_dims(c))};  // its gradient at 0 is 0, not NaN
}
Tensors op_reduce_sum_square(const OpCall& c) {
  if (noop_reduce(c)) return {c.in[0]};
  return {(c.in[0] * c.in[0]).sum(reduce_axes(c), keep_dims(c))};
}
Tensors op_reduce_log_sum(const OpCall& c) {
  if (noop_reduce(c)) return {c.in[0]};
  return {c.in[0].sum(reduce_axes(c), keep_dims(c)).log()};
}
Tensors op_reduce_log_sum_exp(const OpCall& c) {
  if (noop_reduce(c)) return {c.in[0]};
  return {torch::logsumexp(c.in[0], reduce_axes(c), keep_dims(c))};
}
Tensors op_reduce_prod(const OpCall& c) {
  if (noop_reduce(c)) return {c.in[0]};
  std::vector<std::int64_t> axes = reduce_axes(c);
  std::sort(axes.rbegin(), axes.rend());  // from the last, so that dropped axes do not renumber the rest
  const bool keep = keep_dims(c);
  torch::Tensor y = c.in[0];
  for (std::int64_t axis : axes) y = y.prod(axis, keep);
  return {y};
}

Tensors op_arg_extreme(const OpCall& c, bool largest) {
  const Attributes& a = c.g.op_attrs(c.op);
  torch::Tensor x = c.in[0];
  std::int64_t axis = a.get_int("axis", 0);
  if (axis < 0) axis += x.dim();
  const bool keep = a.get_int("keepdims", 1) != 0, last = a.get_int("select_last_index", 0) != 0;
  if (!last) return {largest ? x.argmax(axis, keep) : x.argmin(axis, keep)};
  torch::Tensor flipped = x.flip(axis);
  torch::Tensor idx = largest ? flipped.argmax(axis, keep) : flipped.argmin(axis, keep);
  return {x.size(axis) - 1 - idx};
}
Tensors op_arg_max(const OpCall& c) { return op_arg_extreme(c, true); }
Tensors op_arg_min(const OpCall& c) { return op_arg_extreme(c, false); }
// Hardmax (opset 13): 1 where the first largest element along `axis` is, else 0.
Tensors op_hardmax(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", -1);
  if (axis < 0) axis += x.dim();
  return {torch::zeros_like(x).scatter(axis, x.argmax(axis, true), 1.0)};
}

Tensors op_cumsum(const OpCall& c) {
  torch::Tensor x = c.in[0];
  std::int64_t axis = static_cast<std::int64_t>(*c.scalar(1));
  if (axis < 0) axis += x.dim();
  const bool exclusive = c.g.op_attrs(c.op).get_int("exclusive", 0) != 0, reverse = c.g.op_attrs(c.op).get_int("reverse", 0) != 0;
  if (reverse) x = x.flip(axis);
  torch::Tensor y = x.cumsum(axis);
  if (exclusive && x.size(axis) > 0)  // shifted by one (cumsum(x) - x loses small terms, and gives NaN after an inf)
    y = torch::cat({torch::zeros_like(y.narrow(axis, 0, 1)), y.narrow(axis, 0, x.size(axis) - 1)}, axis);
  return {reverse ? y.flip(axis) : y};
}

Tensors op_topk(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = a.get_int("axis", -1);
  if (axis < 0) axis += x.dim();
  const auto k = c.has(1) ? static_cast<std::int64_t>(*c.scalar(1)) : a.get_int("k", 1);  // an attribute before opset 10
  const bool largest = a.get_int("largest", 1) != 0;
  // PyTorch's topk, what a model's torch.topk runs (and holds: its k values and indices). ONNX
  // wants equal values in index order, which topk does not promise: equal values among the k are
  // put in that order (a stable sort of the k by value after one by index); where the k-th value
  // is also among those cut, or a value is NaN, a stable sort of the whole input cut to k instead
  // (which holds the sorted input and its indices). Among 4,096 float32 values equal ones are common.
  if (k > 0 && k <= x.size(axis)) {
    // One more than asked when there is one: the k-th value equal to the next means equals are cut.
    const std::int64_t taken = std::min(k + 1, x.size(axis));
    auto [top, top_indices] = torch::topk(x, taken, axis, largest, /*sorted=*/true);
    torch::Tensor values = top.narrow(axis, 0, k), indices = top_indices.narrow(axis, 0, k);
    bool equal_inside = false, cut_between_equals = false;
    {
      // Three flags read back at once (one wait for the device): a NaN taken, equal neighbours among
      // the k out of index order (topk gives equal values in no promised order), equal values cut.
      torch::NoGradGuard no_grad;
      const torch::Tensor v = top.detach(), no = torch::zeros({}, v.options().dtype(torch::kBool));
      const torch::Tensor i = top_indices.narrow(axis, 0, k);
      const torch::Tensor flags =
          torch::stack({x.is_floating_point() ? torch::isnan(v).any() : no,
                        k > 1 ? ((v.narrow(axis, 1, k - 1) == v.narrow(axis, 0, k - 1)) & (i.narrow(axis, 1, k - 1) < i.narrow(axis, 0, k - 1))).any() : no,
                        taken > k ? (v.narrow(axis, k, 1) == v.narrow(axis, k - 1, 1)).any() : no})
              .to(torch::kCPU);
      const bool* f = flags.data_ptr<bool>();
      equal_inside = f[1], cut_between_equals = f[0] || f[2];
    }
    if (!cut_between_equals) {
      if (equal_inside) {
        const torch::Tensor by_index = std::get<1>(indices.sort(axis));
        values = values.gather(axis, by_index), indices = indices.gather(axis, by_index);
        const torch::Tensor by_value = std::get<1>(values.detach().sort(/*stable=*/true, axis, /*descending=*/largest));
        values = values.gather(axis, by_value), indices = indices.gather(axis, by_value);
      }
      return {values, indices};
    }
  }
  auto [values, indices] = torch::sort(x, /*stable=*/true, axis, /*descending=*/largest);
  return {values.narrow(axis, 0, k), indices.narrow(axis, 0, k)};
}

// Negative indices count from the end of dimension `size` (ONNX); libtorch refuses them. Indices
// that are int64 and none negative (what PyTorch's own models give) are used as they are: the
// wrapping held two int64 copies and a bool mask of them (a QA pass: a GNN's scatter 35-49% above
// the model, 2026-12-01); the test for a negative one is a minimum, which holds nothing of their size.
// (On a GPU the test would wait for the device: indices there are always wrapped.)
torch::Tensor wrapped(const torch::Tensor& idx, std::int64_t size) {
  if (idx.device().is_cpu() && (idx.numel() == 0 || idx.min().item<std::int64_t>() >= 0))
    return idx.scalar_type() == torch::kLong ? idx : idx.to(torch::kLong);
  return torch::where(idx < 0, idx + size, idx).to(torch::kLong);
}

Tensors op_gather_elements(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", 0);
  if (axis < 0) axis += x.dim();
  return {torch::gather(x, axis, wrapped(c.in[1], x.size(axis)))};
}

// GatherND: the last dimension of `indices` indexes x's dimensions after the `batch_dims` first,
// which x and indices share.
Tensors op_gather_nd(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const torch::Tensor& indices = c.in[1];
  const std::int64_t b = c.g.op_attrs(c.op).get_int("batch_dims", 0), depth = indices.size(-1);
  std::int64_t batch = 1;
  for (std::int64_t i = 0; i < b; ++i) batch *= x.size(i);
  std::vector<std::int64_t> x_shape{batch}, idx_shape{batch};
  for (std::int64_t i = b; i < x.dim(); ++i) x_shape.push_back(x.size(i));
  for (std::int64_t i = b; i < indices.dim(); ++i) idx_shape.push_back(indices.size(i));
  const torch::Tensor xf = x.reshape(x_shape), idx = indices.reshape(idx_shape);
  std::vector<std::int64_t> column(static_cast<std::size_t>(idx.dim() - 1), 1);
  column[0] = batch;
  c10::List<c10::optional<torch::Tensor>> index;
  index.push_back(torch::arange(batch, torch::TensorOptions().dtype(torch::kLong).device(x.device())).reshape(column));
  for (std::int64_t j = 0; j < depth; ++j) index.push_back(wrapped(idx.select(-1, j), xf.size(1 + j)));
  return {torch::index(xf, index).reshape(c.out_shape(0))};
}

// OneHot: indices (negative ones count back from depth; out of range: all `off`), depth, values
// [off, on]; the new dimension at `axis`.
Tensors op_one_hot(const OpCall& c) {
  const auto depth = static_cast<std::int64_t>(*c.scalar(1));
  torch::Tensor idx = c.in[0].to(torch::kLong);
  idx = torch::where(idx < 0, idx + depth, idx);
  const torch::Tensor valid = (idx >= 0) & (idx < depth);
  const torch::Tensor hot = (torch::one_hot(torch::where(valid, idx, torch::zeros_like(idx)), depth) * valid.unsqueeze(-1)).to(torch::kBool);
  const torch::Tensor values = c.input_or_value(2).to(idx.device()).reshape({-1});  // [off, on], often a constant
  torch::Tensor y = torch::where(hot, values[1], values[0]);
  std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", -1);
  if (axis < 0) axis += y.dim();
  return {y.movedim(-1, axis)};
}

Tensors op_eye_like(const OpCall& c) {
  const auto shape = c.out_shape(0);
  const std::int64_t k = c.g.op_attrs(c.op).get_int("k", 0);
  const torch::ScalarType type = scalar_type(c.g.tensor_dtype(c.g.op_outputs(c.op)[0]));
  torch::Tensor y = torch::zeros(shape, torch::TensorOptions().dtype(type).device(c.in[0].device()));
  const torch::Tensor rows = torch::arange(shape[0], torch::TensorOptions().dtype(torch::kLong).device(y.device()));
  const torch::Tensor cols = rows + k, inside = (cols >= 0) & (cols < shape[1]);
  return {y.index_put({rows.masked_select(inside), cols.masked_select(inside)}, torch::ones({}, y.options()))};
}

Tensors op_instance_norm(const OpCall& c) {
  return {torch::instance_norm(c.in[0], c.in[1], c.in[2], {}, {}, true, 0.0, c.g.op_attrs(c.op).get_float("epsilon", 1e-5), true)};
}
// GroupNormalization: scale and bias per channel (opset 21) or per group (opset 18).
Tensors op_group_norm(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const std::int64_t groups = c.g.op_attrs(c.op).get_int("num_groups", 1), channels = x.size(1);
  torch::Tensor scale = c.in[1], bias = c.in[2];
  if (scale.numel() != channels) scale = scale.repeat_interleave(channels / groups);
  if (bias.numel() != channels) bias = bias.repeat_interleave(channels / groups);
  return {torch::group_norm(x, groups, scale, bias, c.g.op_attrs(c.op).get_float("epsilon", 1e-5), true)};
}
Tensors op_lp_norm(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const auto p = static_cast<double>(c.g.op_attrs(c.op).get_int("p", 2));
  return {x / torch::linalg_vector_norm(x, p, std::vector<std::int64_t>{c.g.op_attrs(c.op).get_int("axis", -1)}, true)};
}
// MeanVarianceNormalization: (x - mean) / (sqrt(variance) + 1e-9) over `axes` (ONNX's function body).
Tensors op_mvn(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const std::vector<std::int64_t> axes = c.g.op_attrs(c.op).get_ints("axes", {0, 2, 3});
  const torch::Tensor centred = x - x.mean(axes, true);
  return {centred / ((centred * centred).mean(axes, true).sqrt() + 1e-9)};
}
// LRN: x / (bias + alpha / size * sum of squares over channels [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta
// (torch's local_response_norm centres an even window one channel earlier).
Tensors op_lrn(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor& x = c.in[0];
  const std::int64_t size = a.get_int("size", 1), before = (size - 1) / 2, after = size - 1 - before;
  const double alpha = a.get_float("alpha", 1e-4), beta = a.get_float("beta", 0.75), bias = a.get_float("bias", 1.0);
  // As PyTorch's local_response_norm runs it, each step's tensor freed once the next is made: the
  // squares, with the channels padded, as [N, 1, C + size - 1, rest]; their window means along
  // channels; (bias + alpha * mean)^beta; x over it. (alpha / size times the window's sum is alpha
  // times its mean.) The formula written as one expression held every step to its end: 63% above
  // the model in inference.
  torch::Tensor div = (x * x).unsqueeze(1).flatten(3);
  div = torch::constant_pad_nd(div, {0, 0, before, after}, 0);
  div = torch::avg_pool2d(div, {size, 1}, {1, 1}, {0, 0}, false, true).squeeze(1).reshape(x.sizes());
  {
    const torch::Tensor scaled = div.mul(alpha).add(bias);  // alpha * mean freed here, as in Python
    div = scaled.pow(beta);
  }
  return {x / div};
}
// LpPool: (sum over the window of |x|^p)^(1/p), as an average pool of |x|^p times the window.
Tensors op_lp_pool(const OpCall& c) {
  torch::Tensor x = c.in[0].abs().pow(static_cast<double>(c.g.op_attrs(c.op).get_int("p", 2)));
  const std::size_t nd = static_cast<std::size_t>(x.dim() - 2);
  Window win = window_of(c.g, c.op, c.g.op_attrs(c.op).get_ints("kernel_shape"));
  const bool ceil_mode = c.g.op_attrs(c.op).get_int("ceil_mode", 0) != 0;
  x = torch::constant_pad_nd(x, torch_pads(win.pads, nd), 0);
  const std::vector<std::int64_t> none(nd, 0);
  torch::Tensor mean = nd == 1 ? torch::avg_pool1d(x, win.kernel, win.strides, none, ceil_mode, true)
                       : nd == 2 ? torch::avg_pool2d(x, win.kernel, win.strides, none, ceil_mode, true)
                                 : torch::avg_pool3d(x, win.kernel, win.strides, none, ceil_mode, true);
  double window = 1.0;
  for (std::int64_t k : win.kernel) window *= static_cast<double>(k);
  // (sum)^(1/p), its gradient 0 (not NaN) where a window is all zeros.
  const torch::Tensor sum = mean * window, positive = sum > 0;
  const torch::Tensor safe = torch::where(positive, sum, torch::ones_like(sum));
  return {torch::where(positive, safe.pow(1.0 / static_cast<double>(c.g.op_attrs(c.op).get_int("p", 2))), torch::zeros_like(sum))};
}
Tensors op_global_lp_pool(const OpCall& c) {
  const auto p = static_cast<double>(c.g.op_attrs(c.op).get_int("p", 2));
  return {torch::linalg_vector_norm(c.in[0], p, spatial_dims(c.in[0]), true)};
}

// ConvTranspose: PyTorch's transposed convolution where it computes the same window; otherwise the
// full transposed convolution, then the IR's output window of it: pads (or the auto_pad /
// output_shape split of the difference) cut from the front, output_padding and output_shape's extra
// rows added at the end as zeros, then the bias.
Tensors op_conv_transpose(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::Tensor& x = c.in[0];
  const torch::Tensor& w = c.in[1];
  const auto nd = static_cast<std::size_t>(x.dim() - 2);
  const std::vector<std::int64_t> strides = a.get_ints("strides", std::vector<std::int64_t>(nd, 1)),
                                  dilations = a.get_ints("dilations", std::vector<std::int64_t>(nd, 1));
  std::vector<std::int64_t> pads = a.get_ints("pads", std::vector<std::int64_t>(2 * nd, 0));
  const std::int64_t groups = a.get_int("group", 1);
  const std::vector<std::int64_t> out = c.out_shape(0);
  const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
  // The common case in one call, as PyTorch's ConvTranspose runs it: the bias added by the kernel
  // and no window cut (a bias added after held a second output-sized buffer, 15-17% over a
  // transposed convolution's measured peak, and the cut a copy: a QA pass). Pads alike at both
  // ends (or VALID), no other auto_pad nor output_shape, output padding below the stride or the
  // dilation.
  if (!a.find("output_shape") && (auto_pad == "NOTSET" || auto_pad == "VALID")) {
    if (auto_pad == "VALID") pads.assign(2 * nd, 0);  // (no padding)
    const std::vector<std::int64_t> output_padding = a.get_ints("output_padding", std::vector<std::int64_t>(nd, 0));
    bool direct = pads.size() == 2 * nd && output_padding.size() == nd && strides.size() == nd && dilations.size() == nd;
    for (std::size_t i = 0; direct && i < nd; ++i)
      direct = pads[i] == pads[i + nd] && pads[i] >= 0 && output_padding[i] >= 0 &&
               (output_padding[i] < strides[i] || output_padding[i] < dilations[i]);
    if (direct) {
      const c10::optional<torch::Tensor> bias = c.has(2) ? c10::optional<torch::Tensor>(c.in[2]) : c10::nullopt;
      torch::Tensor y = torch::convolution(x, w, bias, strides, std::vector<std::int64_t>(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(nd)),
                                           dilations, true, output_padding, groups);
      if (y.sizes().vec() == out) return {y};
    }
  }
  torch::Tensor y = torch::convolution(x, w, {}, strides, std::vector<std::int64_t>(nd, 0), dilations, true,
                                       std::vector<std::int64_t>(nd, 0), groups);
  for (std::size_t i = 0; i < nd; ++i) {
    const auto dim = static_cast<std::int64_t>(i + 2);
    const std::int64_t full = y.size(dim), want = out[i + 2];
    std::int64_t front = pads[i];
    if (a.find("output_shape") || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const std::vector<std::int64_t> output_padding = a.get_ints("output_padding", std::vector<std::int64_t>(nd, 0));
      const std::int64_t total = std::max<std::int64_t>(0, full + output_padding[i] - want);
      front = auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
    }
    if (front + want > full) {  // rows past the full output: zeros (output_padding)
      std::vector<std::int64_t> grow(2 * static_cast<std::size_t>(y.dim() - dim), 0);
      grow[grow.size() - 1] = front + want - full;
      y = torch::constant_pad_nd(y, grow, 0);
    }
    y = y.narrow(dim, front, want);
  }
  if (c.has(2)) {
    std::vector<std::int64_t> shape(static_cast<std::size_t>(y.dim()), 1);
    shape[1] = -1;
    y = y + c.in[2].reshape(shape);
  }
  return {y};
}

// RandomNormal(Like) / RandomUniform(Like): drawn from libtorch's generator, seeded at preparation.
Tensors op_random(const OpCall& c, bool normal) {
  const Attributes& a = c.g.op_attrs(c.op);
  const torch::TensorOptions options =
      torch::TensorOptions().dtype(scalar_type(c.g.tensor_dtype(c.g.op_outputs(c.op)[0]))).device(c.device);
  if (normal) return {torch::randn(c.out_shape(0), options) * a.get_float("scale", 1.0) + a.get_float("mean", 0.0)};
  const double low = a.get_float("low", 0.0), high = a.get_float("high", 1.0);
  return {torch::rand(c.out_shape(0), options) * (high - low) + low};
}
Tensors op_random_normal(const OpCall& c) { return op_random(c, true); }
Tensors op_random_uniform(const OpCall& c) { return op_random(c, false); }
Tensors op_bernoulli(const OpCall& c) {
  return {torch::bernoulli(c.in[0]).to(scalar_type(c.g.tensor_dtype(c.g.op_outputs(c.op)[0])))};
}

// Resize (opsets 10-19) and Upsample (7-9): separable along each resized axis, exactly as ONNX
// defines the source coordinate of every output index (coordinate_transformation_mode), the
// nearest index (nearest_mode), and the linear or cubic taps (cubic_coeff_a, exclude_outside), taps
// outside the input clamped to its edge. Differentiable (index_select and arithmetic).
struct ResizeSpec {
  std::string mode, transform, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};
ResizeSpec resize_spec(const Graph& g, OpId op) {
  const Attributes& a = g.op_attrs(op);
  ResizeSpec r;
  r.mode = a.get_string("mode", "nearest");
  if (g.op_type(op) == "Upsample") {
    r.transform = "asymmetric", r.nearest = "floor";
    if (r.mode == "bilinear" || r.mode == "trilinear") r.mode = "linear";  // opset 7's names
    return r;
  }
  // (Resize-10 has neither attribute; the importer gives it Upsample's asymmetric and floor.)
  r.transform = a.get_string("coordinate_transformation_mode", "half_pixel");
  r.nearest = a.get_string("nearest_mode", "round_prefer_floor");
  r.cubic_a = a.get_float("cubic_coeff_a", -0.75);
  r.exclude_outside = a.get_int("exclude_outside", 0) != 0;
  return r;
}

torch::Tensor resize_axis(const torch::Tensor& x, std::int64_t axis, std::int64_t out, double scale, const ResizeSpec& r) {
  const std::int64_t in = x.size(axis);
  const auto device = x.device();
  torch::Tensor idx = torch::arange(out, torch::TensorOptions().dtype(torch::kDouble));
  torch::Tensor coord;
  if (r.transform == "half_pixel") coord = (idx + 0.5) / scale - 0.5;
  else if (r.transform == "pytorch_half_pixel") coord = out > 1 ? (idx + 0.5) / scale - 0.5 : torch::zeros_like(idx);
  else if (r.transform == "align_corners") {
    // ONNX's length_resized is length_original x scale, not rounded (0.6 x 4 = 2.4: the second of
    // two outputs samples 3 / 1.4 = 2.14, not 3; ONNX's test_resize_downsample_scales_linear_align_corners).
    const double resized = static_cast<double>(in) * scale;
    coord = resized > 1.0 ? idx * (static_cast<double>(in - 1) / (resized - 1.0)) : torch::zeros_like(idx);
  }
  else if (r.transform == "asymmetric") coord = idx / scale;
  else coord = (idx + 0.5) / scale;  // tf_half_pixel_for_nn (check_resize refuses the rest)
  auto clamped = [&](const torch::Tensor& i) { return i.clamp(0, in - 1).to(torch::kLong).to(device); };
  auto shaped = [&](const torch::Tensor& w) {  // weights along `axis`, broadcast over the rest
    std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
    shape[static_cast<std::size_t>(axis)] = out;
    return w.to(x.scalar_type()).to(device).reshape(shape);
  };
  if (r.mode == "nearest") {
    torch::Tensor n;
    if (r.nearest == "floor") n = coord.floor();
    else if (r.nearest == "ceil") n = coord.ceil();
    else if (r.nearest == "round_prefer_ceil") n = (coord + 0.5).floor();
    else n = torch::where(coord - coord.floor() == 0.5, coord.floor(), coord.round());  // round_prefer_floor
    return x.index_select(axis, clamped(n));
  }
  const torch::Tensor base = coord.floor(), t = coord - base;
  if (r.mode == "linear")
    return x.index_select(axis, clamped(base)) * shaped(1.0 - t) + x.index_select(axis, clamped(base + 1)) * shaped(t);
  // cubic: taps at base-1 .. base+2 with Keys' kernel of parameter a.
  const double a = r.cubic_a;
  auto kernel = [a](const torch::Tensor& d) {
    const torch::Tensor u = d.abs();
    return torch::where(u <= 1, ((a + 2) * u - (a + 3)) * u * u + 1,
                        torch::where(u < 2, ((a * u - 5 * a) * u + 8 * a) * u - 4 * a, torch::zeros_like(u)));
  };
  std::vector<torch::Tensor> weights;
  torch::Tensor total = torch::zeros_like(t);
  for (int k = -1; k <= 2; ++k) {
    torch::Tensor w = kernel(t - k);
    if (r.exclude_outside) w = torch::where((base + k >= 0) & (base + k <= in - 1), w, torch::zeros_like(w));
    total = total + w;
    weights.push_back(w);
  }
  torch::Tensor y;
  for (int k = -1; k <= 2; ++k) {
    torch::Tensor w = weights[static_cast<std::size_t>(k + 1)];
    if (r.exclude_outside) w = w / total;
    torch::Tensor term = x.index_select(axis, clamped(base + k)) * shaped(w);
    y = y.defined() ? y + term : term;
  }
  return y;
}

Tensors op_resize(const OpCall& c) {
  const ResizeSpec r = resize_spec(c.g, c.op);
  const std::vector<std::int64_t> out = c.out_shape(0);
  // Integers are interpolated in float and rounded back (weights of 0.25 in uint8 were 0).
  const bool integer = !c.in[0].is_floating_point() && r.mode != "nearest";
  torch::Tensor y = integer ? c.in[0].to(torch::kFloat) : c.in[0];
  // The scale of each axis: given (Resize's scales input, Upsample's input or attribute), else the
  // output size over the input's.
  std::vector<double> scales;
  const bool upsample = c.g.op_type(c.op) == "Upsample";
  // Resize-10 takes (X, scales); from opset 11, (X, roi, scales, sizes).
  const std::size_t scales_slot = upsample || c.g.op_inputs(c.op).size() == 2 ? 1 : 2;
  if (c.has(scales_slot)) {
    torch::Tensor v = (c.value[scales_slot].defined() ? c.value[scales_slot] : c.in[scales_slot]).to(torch::kCPU).to(torch::kDouble);
    if (v.numel() == y.dim()) scales.assign(v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
  } else if (upsample) {
    scales = [&] {
      std::vector<double> out_scales;
      for (const auto& attr : c.node.attribute())
        if (attr.name() == "scales") out_scales.assign(attr.floats().begin(), attr.floats().end());
      return out_scales;
    }();
  }
  const bool given = scales.size() == static_cast<std::size_t>(y.dim());
  auto scale_of = [&](std::int64_t axis) {
    const auto k = static_cast<std::size_t>(axis);
    return given && scales[k] > 0 ? scales[k] : static_cast<double>(out[k]) / static_cast<double>(y.size(axis));
  };
  // What PyTorch's F.interpolate runs (and holds: its output alone) for the forms it exports, on
  // [N, C, spatial...] resized along the spatial axes: nearest (asymmetric, floor), linear and
  // bilinear and trilinear (half_pixel, or align_corners when the resized lengths are whole),
  // bicubic (half_pixel, a = -0.75, outside taps kept). The scales ONNX gives are PyTorch's scale
  // factors; without them both map by output over input length.
  const std::int64_t rank = y.dim();
  bool spatial = !integer && rank >= 3 && rank <= 5 && !c.g.op_attrs(c.op).get_int("antialias", 0);
  bool whole = true, longer_than_one = true, upscaled = true;
  std::vector<std::int64_t> size;
  std::vector<c10::optional<double>> factors;
  for (std::int64_t axis = 0; spatial && axis < rank; ++axis) {
    const std::int64_t want = out[static_cast<std::size_t>(axis)];
    if (axis < 2) {
      spatial = want == y.size(axis) && scale_of(axis) == 1.0;
      continue;
    }
    size.push_back(want);
    factors.push_back(given ? c10::optional<double>(scale_of(axis)) : c10::nullopt);
    whole = whole && static_cast<double>(y.size(axis)) * scale_of(axis) == static_cast<double>(want);
    longer_than_one = longer_than_one && want > 1;
    // Enlarged a whole number of times, by that scale.
    upscaled = upscaled && y.size(axis) > 0 && want % y.size(axis) == 0 && scale_of(axis) == static_cast<double>(want / y.size(axis));
  }
  if (spatial) {
    const bool half_pixel = r.transform == "half_pixel" || (r.transform == "pytorch_half_pixel" && longer_than_one);
    // Nearest by half pixels, enlarging a whole number of times s, reads input (x + 1/2) / s - 1/2,
    // less than 1/2 from floor(x / s): rounded to the nearest, PyTorch's nearest too (ONNX's
    // defaults; a QA pass measured the formula's gathers 25% above the simulated peak).
    const bool rounded = (r.nearest == "round_prefer_floor" || r.nearest == "round_prefer_ceil") && y.is_floating_point();
    const bool nearest = r.mode == "nearest" && ((r.transform == "asymmetric" && r.nearest == "floor") || (half_pixel && upscaled && rounded));
    const bool linear = r.mode == "linear" && (half_pixel || (r.transform == "align_corners" && whole));
    const bool cubic = r.mode == "cubic" && rank == 4 && half_pixel && r.cubic_a == -0.75 && !r.exclude_outside;
    const bool corners = r.transform == "align_corners";
    if (nearest && rank == 3) return {at::upsample_nearest1d(y, size, factors[0])};
    if (nearest && rank == 4) return {at::upsample_nearest2d(y, size, factors[0], factors[1])};
    if (nearest && rank == 5) return {at::upsample_nearest3d(y, size, factors[0], factors[1], factors[2])};
    if (linear && rank == 3) return {at::upsample_linear1d(y, size, corners, factors[0])};
    if (linear && rank == 4) return {at::upsample_bilinear2d(y, size, corners, factors[0], factors[1])};
    if (linear && rank == 5) return {at::upsample_trilinear3d(y, size, corners, factors[0], factors[1], factors[2])};
    if (cubic) return {at::upsample_bicubic2d(y, size, false, factors[0], factors[1])};
  }
  for (std::int64_t axis = 0; axis < y.dim(); ++axis) {
    const std::int64_t want = out[static_cast<std::size_t>(axis)], have = y.size(axis);
    const double scale = scale_of(axis);
    if (want == have && scale == 1.0) continue;
    y = resize_axis(y, axis, want, scale, r);
  }
  return {integer ? y.round().to(c.in[0].scalar_type()) : y};
}

std::string check_resize(const Graph& g, OpId op) {
  const ResizeSpec r = resize_spec(g, op);
  if (r.mode != "nearest" && r.mode != "linear" && r.mode != "cubic") return "mode '" + r.mode + "' is not nearest, linear or cubic";
  static const std::vector<std::string> transforms = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"};
  if (std::find(transforms.begin(), transforms.end(), r.transform) == transforms.end())
    return "coordinate_transformation_mode '" + r.transform + "' is not supported (" + transforms[0] + ", " + transforms[1] + ", " +
           transforms[2] + ", " + transforms[3] + " and " + transforms[4] + " are)";
  static const std::vector<std::string> nearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(nearest.begin(), nearest.end(), r.nearest) == nearest.end()) return "nearest_mode '" + r.nearest + "' is not one ONNX defines";
  const Attributes& a = g.op_attrs(op);
  if (a.get_int("antialias", 0) != 0) {
    const auto in = g.tensor_shape(g.op_inputs(op)[0]), out = g.tensor_shape(g.op_outputs(op)[0]);
    for (std::size_t i = 0; i < in.size() && i < out.size(); ++i)
      if (out[i] < in[i]) return "antialias when downsampling is not supported";
  }
  if (!a.get_ints("axes").empty()) return "the axes attribute (opset 18) is not supported";
  if (a.get_string("keep_aspect_ratio_policy", "stretch") != "stretch") return "keep_aspect_ratio_policy other than stretch is not supported";
  return {};
}

// RNN, GRU, LSTM (ONNX's equations, gate orders i-o-f-c and z-r-h): PyTorch's own layer for what
// PyTorch exports (below); otherwise the input projections of every time step in one product, then
// the recurrence step by step, for each direction. Differentiable.
enum class Cell { rnn, gru, lstm };
Cell cell_of(std::string_view op_type) { return op_type == "LSTM" ? Cell::lstm : op_type == "GRU" ? Cell::gru : Cell::rnn; }
std::int64_t gates_of(Cell cell) { return cell == Cell::rnn ? 1 : cell == Cell::gru ? 3 : 4; }

// A recurrent layer's W ([dirs, gates * hidden, input]), R ([dirs, gates * hidden, hidden]) or B
// ([dirs, 2 * gates * hidden], `bias`) with its gate blocks put in PyTorch's order (i-f-g-o, r-z-n;
// `to_pytorch`) or back in ONNX's (i-o-f-c, z-r-h): a copy.
torch::Tensor reorder_gates(const torch::Tensor& v, Cell cell, bool bias, bool to_pytorch) {
  if (cell == Cell::rnn) return v.clone();
  const std::int64_t gates = gates_of(cell), dirs = v.size(0);
  // PyTorch's block k is ONNX's block order[k]; the inverse permutation goes back.
  const std::vector<std::int64_t> order = cell == Cell::lstm ? (to_pytorch ? std::vector<std::int64_t>{0, 2, 3, 1} : std::vector<std::int64_t>{0, 3, 1, 2})
                                                             : std::vector<std::int64_t>{1, 0, 2};  // its own inverse
  const torch::Tensor index = torch::tensor(order, torch::TensorOptions().dtype(torch::kLong).device(v.device()));
  if (bias) return v.reshape({dirs, 2, gates, -1}).index_select(2, index).reshape(v.sizes());
  return v.reshape({dirs, gates, -1, v.size(2)}).index_select(1, index).reshape(v.sizes());
}

// Whether `t` is the biases (input 3) of recurrent layer `layer`.
bool is_layer_bias(const Graph& g, OpId layer, TensorId t) {
  const auto ins = g.op_inputs(layer);
  return ins.size() > 3 && ins[3] == t;
}

Tensors op_recurrent(const OpCall& c, Cell cell) {
  const Attributes& a = c.g.op_attrs(c.op);
  const bool batch_first = a.get_int("layout", 0) != 0;
  torch::Tensor x = batch_first ? c.in[0].transpose(0, 1) : c.in[0];  // [seq, batch, input]
  const torch::Tensor& W = c.in[1];
  const torch::Tensor& R = c.in[2];
  const std::int64_t gates = gates_of(cell), hidden = R.size(2), directions = W.size(0);
  const std::int64_t seq = x.size(0), batch = x.size(1);
  const torch::Tensor B = c.has(3) ? c.in[3] : torch::zeros({directions, 2 * gates * hidden}, W.options());
  auto initial = [&](std::size_t slot) {
    if (!c.has(slot)) return torch::zeros({directions, batch, hidden}, W.options());
    return batch_first ? c.in[slot].transpose(0, 1) : c.in[slot];
  };
  const torch::Tensor h0 = initial(5), c0 = cell == Cell::lstm ? initial(6) : torch::Tensor();
  const torch::Tensor P = cell == Cell::lstm && c.has(7) ? c.in[7] : torch::Tensor();
  const std::optional<double> clip = a.find("clip") ? std::optional<double>(a.get_float("clip", 0.0)) : std::nullopt;
  auto clipped = [&](const torch::Tensor& t) { return clip ? t.clamp(-*clip, *clip) : t; };
  const bool linear_before_reset = a.get_int("linear_before_reset", 0) != 0, input_forget = a.get_int("input_forget", 0) != 0;
  const std::string direction = a.get_string("direction", "forward");

  // What PyTorch's nn.LSTM, nn.GRU and nn.RNN export (forward or bidirectional, no clip, no
  // peepholes, GRU's reset after the product) runs as PyTorch runs it: its own layer (at::lstm,
  // gru, rnn_tanh: the native recurrence on the CPU, cuDNN on a GPU), so that its time and the
  // memory it holds and saves are PyTorch's. The weights are given in PyTorch's gate order (i-f-g-o,
  // r-z-n): the parameter leaves the engine keeps so (OpCall::layer_params), views of inputs kept
  // so, or else copies of the inputs reordered, which PyTorch's own modules do not make.
  if (recurrent_as_pytorch_layer(c.g.op_type(c.op), a, P.defined())) {
    std::vector<torch::Tensor> params(c.layer_params.begin(), c.layer_params.end());
    if (params.empty()) {
      const bool ordered = c.pytorch_gate_order;
      const torch::Tensor Wp = ordered ? W : reorder_gates(W, cell, false, true), Rp = ordered ? R : reorder_gates(R, cell, false, true);
      const torch::Tensor Bp = !c.has(3) || ordered ? B : reorder_gates(B, cell, true, true);
      for (std::int64_t d = 0; d < directions; ++d) {
        params.push_back(Wp[d]);
        params.push_back(Rp[d]);
        if (c.has(3)) {
          params.push_back(Bp[d].narrow(0, 0, gates * hidden));
          params.push_back(Bp[d].narrow(0, gates * hidden, gates * hidden));
        }
      }
    }
    const torch::Tensor input = c.in[0];  // [seq, batch, input], or [batch, seq, input] (layout 1)
    const bool bidirectional = directions == 2;
    torch::Tensor out, h_n, c_n;
    if (cell == Cell::lstm) {
      std::tie(out, h_n, c_n) = torch::lstm(input, {h0.contiguous(), c0.contiguous()}, params, c.has(3), 1, 0.0, c.training, bidirectional, batch_first);
    } else if (cell == Cell::gru) {
      std::tie(out, h_n) = torch::gru(input, h0.contiguous(), params, c.has(3), 1, 0.0, c.training, bidirectional, batch_first);
    } else {
      std::tie(out, h_n) = torch::rnn_tanh(input, h0.contiguous(), params, c.has(3), 1, 0.0, c.training, bidirectional, batch_first);
    }
    // PyTorch's [seq, batch, dirs * hidden] (batch first: [batch, seq, ...]) as ONNX's [seq, dirs,
    // batch, hidden] ([batch, seq, dirs, hidden]): views.
    torch::Tensor Y = batch_first ? out.view({batch, seq, directions, hidden}) : out.view({seq, batch, directions, hidden}).permute({0, 2, 1, 3});
    torch::Tensor Y_h = batch_first ? h_n.transpose(0, 1) : h_n;
    Tensors result{Y, Y_h};
    if (cell == Cell::lstm) result.push_back(batch_first ? c_n.transpose(0, 1) : c_n);
    result.resize(std::min<std::size_t>(result.size(), static_cast<std::size_t>(c.node.output_size())));
    return result;
  }

  std::vector<torch::Tensor> ys, hs, cs;
  for (std::int64_t d = 0; d < directions; ++d) {
    const bool reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
    const torch::Tensor Wd = W[d], Rd = R[d], Wb = B[d].narrow(0, 0, gates * hidden), Rb = B[d].narrow(0, gates * hidden, gates * hidden);
    const torch::Tensor projected = torch::matmul(x, Wd.t()) + Wb;  // [seq, batch, gates * hidden]
    torch::Tensor h = h0[d], state = cell == Cell::lstm ? c0[d] : torch::Tensor();
    std::vector<torch::Tensor> out(static_cast<std::size_t>(seq));
    for (std::int64_t step = 0; step < seq; ++step) {
      const std::int64_t t = reverse ? seq - 1 - step : step;
      const torch::Tensor xt = projected[t];
      if (cell == Cell::rnn) {
        h = torch::tanh(clipped(xt + torch::matmul(h, Rd.t()) + Rb));
      } else if (cell == Cell::gru) {
        const auto xg = xt.chunk(3, -1);
        const torch::Tensor Rz = Rd.narrow(0, 0, 2 * hidden), Rh = Rd.narrow(0, 2 * hidden, hidden);
        const auto rzr = (torch::matmul(h, Rz.t()) + Rb.narrow(0, 0, 2 * hidden)).chunk(2, -1);
        const torch::Tensor z = torch::sigmoid(clipped(xg[0] + rzr[0])), r = torch::sigmoid(clipped(xg[1] + rzr[1]));
        const torch::Tensor Rbh = Rb.narrow(0, 2 * hidden, hidden);
        const torch::Tensor candidate = linear_before_reset ? torch::tanh(clipped(xg[2] + r * (torch::matmul(h, Rh.t()) + Rbh)))
                                                            : torch::tanh(clipped(xg[2] + torch::matmul(r * h, Rh.t()) + Rbh));
        h = (1 - z) * candidate + z * h;
      } else {
        const auto g = (xt + torch::matmul(h, Rd.t()) + Rb).chunk(4, -1);  // i, o, f, c
        torch::Tensor i = g[0], o = g[1], f = g[2];
        if (P.defined()) i = i + P[d].narrow(0, 0, hidden) * state, f = f + P[d].narrow(0, 2 * hidden, hidden) * state;
        i = torch::sigmoid(clipped(i));
        f = input_forget ? 1 - i : torch::sigmoid(clipped(f));
        state = f * state + i * torch::tanh(clipped(g[3]));
        if (P.defined()) o = o + P[d].narrow(0, hidden, hidden) * state;
        h = torch::sigmoid(clipped(o)) * torch::tanh(state);
      }
      out[static_cast<std::size_t>(t)] = h;
    }
    ys.push_back(torch::stack(out));  // [seq, batch, hidden]
    hs.push_back(h);
    if (cell == Cell::lstm) cs.push_back(state);
  }
  torch::Tensor Y = torch::stack(ys, 1), Y_h = torch::stack(hs);  // [seq, dirs, batch, hidden], [dirs, batch, hidden]
  torch::Tensor Y_c = cell == Cell::lstm ? torch::stack(cs) : torch::Tensor();
  if (batch_first) {
    Y = Y.permute({2, 0, 1, 3});
    Y_h = Y_h.transpose(0, 1);
    if (Y_c.defined()) Y_c = Y_c.transpose(0, 1);
  }
  Tensors result{Y, Y_h};
  if (cell == Cell::lstm) result.push_back(Y_c);
  result.resize(std::min<std::size_t>(result.size(), static_cast<std::size_t>(c.node.output_size())));
  return result;
}
Tensors op_rnn(const OpCall& c) { return op_recurrent(c, Cell::rnn); }
Tensors op_gru(const OpCall& c) { return op_recurrent(c, Cell::gru); }
Tensors op_lstm(const OpCall& c) { return op_recurrent(c, Cell::lstm); }

std::string check_recurrent(const Graph& g, OpId op) {
  const Attributes& a = g.op_attrs(op);
  const auto inputs = g.op_inputs(op);
  if (inputs.size() > 4 && inputs[4] != kNoId) return "sequence_lens (packed sequences of different lengths) is not supported";
  const std::string direction = a.get_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") return "direction '" + direction + "' is not one ONNX defines";
  return {};
}

// A recurrent node's `activations` (a list of strings, which the IR does not keep): only the
// defaults, what PyTorch exports, run.
std::string check_activations(const onnx::NodeProto& node) {
  const std::vector<std::string> defaults = node.op_type() == "RNN"   ? std::vector<std::string>{"Tanh"}
                                            : node.op_type() == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                      : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  for (const auto& attribute : node.attribute())
    if (attribute.name() == "activations")
      for (int i = 0; i < attribute.strings_size(); ++i)
        if (attribute.strings(i) != defaults[static_cast<std::size_t>(i) % defaults.size()])
          return "activation '" + attribute.strings(i) + "' is not supported (the defaults, what PyTorch exports, are)";
  return {};
}

Tensors op_cast_like(const OpCall& c) { return {c.in[0].to(c.input_or_value(1).scalar_type())}; }

// Compress: the slices along `axis` (or, without it, the elements of the flattened input) where the
// condition, a constant, is true; a shorter condition drops the rest.
Tensors op_compress(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const torch::Tensor condition = c.input_or_value(1).to(torch::kBool).reshape({-1});
  const Attribute* axis_attr = c.g.op_attrs(c.op).find("axis");
  const torch::Tensor source = axis_attr ? x : x.reshape({-1});
  std::int64_t axis = axis_attr ? axis_attr->i : 0;
  if (axis < 0) axis += source.dim();
  const std::int64_t extent = std::min(condition.numel(), source.size(axis));
  const torch::Tensor kept = torch::nonzero(condition.narrow(0, 0, extent)).reshape({-1}).to(x.device());
  return {source.index_select(axis, kept)};
}

// DepthToSpace (DCR: depth, column, row; CRD: PyTorch's pixel_shuffle) and SpaceToDepth.
Tensors op_depth_to_space(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const std::int64_t b = c.g.op_attrs(c.op).get_int("blocksize", 1), n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  const bool crd = c.g.op_attrs(c.op).get_string("mode", "DCR") == "CRD";
  const torch::Tensor t = crd ? x.reshape({n, ch / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3})
                              : x.reshape({n, b, b, ch / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
  return {t.reshape({n, ch / (b * b), h * b, w * b})};
}
Tensors op_space_to_depth(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const std::int64_t b = c.g.op_attrs(c.op).get_int("blocksize", 1), n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  return {x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({n, ch * b * b, h / b, w / b})};
}

// ReverseSequence: along `time_axis`, the first sequence_lens[b] elements of each batch entry b
// reversed, the rest as they are.
Tensors op_reverse_sequence(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const std::int64_t time = a.get_int("time_axis", 0), batch = a.get_int("batch_axis", 1);
  const torch::Tensor& x = c.in[0];
  const torch::Tensor lengths = c.input_or_value(1).to(torch::kLong).to(x.device());
  const std::int64_t steps = x.size(time);
  const torch::Tensor t = torch::arange(steps, torch::TensorOptions().dtype(torch::kLong).device(x.device())).unsqueeze(1);  // [T, 1]
  const torch::Tensor len = lengths.unsqueeze(0);                                                                          // [1, B]
  torch::Tensor idx = torch::where(t < len, len - 1 - t, t);                                                             // [T, B]
  // x with time first and batch second, the index broadcast over the rest.
  const torch::Tensor moved = x.movedim({time, batch}, {0, 1});
  std::vector<std::int64_t> shape(static_cast<std::size_t>(moved.dim()), 1);
  shape[0] = steps, shape[1] = moved.size(1);
  idx = idx.reshape(shape).expand(moved.sizes());
  return {torch::gather(moved, 0, idx).movedim({0, 1}, {time, batch})};
}

// The reduction of ScatterElements and ScatterND (opset 16: add, mul; 18: max, min), as
// scatter_reduce names it.
std::string scatter_reduce_name(const OpCall& c) {
  const std::string r = c.g.op_attrs(c.op).get_string("reduction", "none");
  return r == "add" ? "sum" : r == "mul" ? "prod" : r == "max" ? "amax" : r == "min" ? "amin" : "";
}
Tensors op_scatter_elements(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  std::int64_t axis = c.g.op_attrs(c.op).get_int("axis", 0);
  if (axis < 0) axis += x.dim();
  const torch::Tensor idx = wrapped(c.in[1], x.size(axis));
  const std::string reduce = scatter_reduce_name(c);
  if (reduce.empty()) return {torch::scatter(x, axis, idx, c.in[2])};
  return {torch::scatter_reduce(x, axis, idx, c.in[2], reduce, true)};
}
Tensors op_scatter_nd(const OpCall& c) {
  const torch::Tensor& x = c.in[0];
  const torch::Tensor& indices = c.in[1];
  const std::int64_t k = indices.size(-1);
  // x viewed as [the first k dims' positions, the rest]; each index row one position.
  std::vector<std::int64_t> rest(x.sizes().begin() + k, x.sizes().end()), flat_shape{-1}, update_shape{-1};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  update_shape.insert(update_shape.end(), rest.begin(), rest.end());
  const torch::Tensor rows = indices.reshape({-1, k}).to(torch::kLong);
  torch::Tensor position = torch::zeros({rows.size(0)}, rows.options());
  for (std::int64_t j = 0; j < k; ++j) position = position * x.size(j) + wrapped(rows.select(1, j), x.size(j));
  const torch::Tensor flat = x.reshape(flat_shape), updates = c.in[2].reshape(update_shape);
  const std::string reduce = scatter_reduce_name(c);
  torch::Tensor out;
  if (reduce.empty()) out = flat.index_put({position}, updates);
  else if (reduce == "sum") out = flat.index_add(0, position, updates);
  else out = flat.index_reduce(0, position, updates, reduce == "prod" ? "prod" : reduce, true);
  return {out.reshape(x.sizes())};
}

// GridSample (opset 16; 20's mode names linear and cubic): libtorch's grid_sampler.
Tensors op_grid_sample(const OpCall& c) {
  const Attributes& a = c.g.op_attrs(c.op);
  const std::string mode = a.get_string("mode", "bilinear"), padding = a.get_string("padding_mode", "zeros");
  const std::int64_t interpolation = mode == "nearest" ? 1 : (mode == "bicubic" || mode == "cubic") ? 2 : 0;
  const std::int64_t pad = padding == "border" ? 1 : padding == "reflection" ? 2 : 0;
  return {torch::grid_sampler(c.in[0], c.in[1], interpolation, pad, a.get_int("align_corners", 0) != 0)};
}

std::string check_scatter(const Graph& g, OpId op) {
  const std::string r = g.op_attrs(op).get_string("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min") return "reduction '" + r + "' is not one ONNX defines";
  return {};
}
std::string check_grid_sample(const Graph& g, OpId op) {
  const std::string mode = g.op_attrs(op).get_string("mode", "bilinear"), padding = g.op_attrs(op).get_string("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "linear" && mode != "nearest" && mode != "bicubic" && mode != "cubic") return "mode '" + mode + "' is not one ONNX defines";
  if (padding != "zeros" && padding != "border" && padding != "reflection") return "padding_mode '" + padding + "' is not one ONNX defines";
  if ((mode == "bicubic" || mode == "cubic") && g.tensor_shape(g.op_inputs(op)[0]).size() != 4) return "cubic sampling of a volume is not supported";
  return {};
}
std::string check_depth_to_space(const Graph& g, OpId op) {
  if (g.tensor_shape(g.op_inputs(op)[0]).size() != 4) return "the input must have rank 4";
  return {};
}

std::string check_conv_transpose(const Graph& g, OpId op) {
  const Attributes& a = g.op_attrs(op);
  const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID")
    return "auto_pad '" + auto_pad + "' is not one ONNX defines";
  return {};
}
std::string check_lp_pool(const Graph& g, OpId op) {
  const Attributes& a = g.op_attrs(op);
  if (a.get_int("ceil_mode", 0) != 0) return "ceil_mode (opset 18) is not supported";
  for (std::int64_t d : a.get_ints("dilations"))
    if (d != 1) return "dilations (opset 18) are not supported";
  return check_window(g, op, a.get_ints("kernel_shape"));
}

std::string check_pad(const Graph& g, OpId op) {
  const std::string mode = g.op_attrs(op).get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") return "Pad mode '" + mode + "' is not supported (constant, reflect, edge are)";
  return {};
}

std::string check_slice(const Graph& g, OpId op) {
  const auto inputs = g.op_inputs(op);
  if (inputs.size() > 1 && inputs[1] != kNoId) return {};  // opset 10 on: inputs, checked when read
  const Attributes& a = g.op_attrs(op);
  const auto starts = a.get_ints("starts"), ends = a.get_ints("ends"), axes = a.get_ints("axes");
  if (starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size())) return "starts, ends and axes of different lengths";
  return {};
}

const std::unordered_map<std::string, OpImpl>& op_table() {
  static const std::unordered_map<std::string, OpImpl> table = {
      {"Conv", {op_conv, -1, check_conv}},
      {"BatchNormalization", {op_batch_norm, -1, nullptr, 3}},  // not the saved statistics of opsets < 14
      {"LayerNormalization", {op_layer_norm, -1, nullptr, -1}},
      {"MaxPool", {op_max_pool, -1, check_max_pool, 2}},
      {"AveragePool", {op_avg_pool, -1, check_avg_pool}},
      {"GlobalAveragePool", {op_global_avg_pool}},
      {"GlobalMaxPool", {op_global_max_pool}},
      {"Gemm", {op_gemm}},
      {"MatMul", {op_matmul}},
      {"Einsum", {op_einsum}},
      {"Add", {op_add}},
      {"Sub", {op_sub}},
      {"Mul", {op_mul}},
      {"Div", {op_div}},
      {"Pow", {op_pow}},
      {"Mod", {op_mod}},
      {"Sum", {op_sum_n}},
      {"Max", {variadic<max2>}},
      {"Min", {variadic<min2>}},
      {"Mean", {op_mean_n}},
      {"Relu", {op_relu}},
      {"Sigmoid", {op_sigmoid}},
      {"Tanh", {op_tanh}},
      {"Erf", {op_erf}},
      {"Exp", {op_exp}},
      {"Log", {op_log}},
      {"Sqrt", {op_sqrt}},
      {"Neg", {op_neg}},
      {"Abs", {op_abs}},
      {"Reciprocal", {op_reciprocal}},
      {"Ceil", {op_ceil}},
      {"Floor", {op_floor}},
      {"Round", {op_round}},
      {"Sign", {op_sign}},
      {"Not", {op_not}},
      {"Softplus", {op_softplus}},
      {"LeakyRelu", {op_leaky_relu}},
      {"Elu", {op_elu}},
      {"Gelu", {op_gelu}},
      {"HardSigmoid", {op_hard_sigmoid}},
      {"HardSwish", {op_hard_swish}},
      {"Softmax", {op_softmax}},
      {"LogSoftmax", {op_log_softmax}},
      {"Cast", {op_cast}},
      {"Equal", {op_equal}},
      {"Less", {op_less}},
      {"Greater", {op_greater}},
      {"LessOrEqual", {op_less_equal}},
      {"GreaterOrEqual", {op_greater_equal}},
      {"And", {op_and}},
      {"Or", {op_or}},
      {"Where", {op_where}},
      {"Clip", {op_clip, 1}},
      {"ReduceMean", {op_reduce_mean, 1}},
      {"ReduceSum", {op_reduce_sum, 1}},
      {"ReduceMax", {op_reduce_max, 1}},
      {"ReduceMin", {op_reduce_min, 1}},
      {"Concat", {op_concat}},
      {"Split", {op_split, 1, nullptr, -1}},
      {"Transpose", {op_transpose}},
      {"Slice", {op_slice, 1, check_slice}},
      {"Gather", {op_gather}},
      {"Reshape", {op_reshape_to_ir, 1}},
      {"Flatten", {op_reshape_to_ir}},
      {"Squeeze", {op_reshape_to_ir, 1}},
      {"Unsqueeze", {op_reshape_to_ir, 1}},
      {"Identity", {op_identity}},
      {"Dropout", {op_dropout, 1, nullptr, 2}},
      {"Shape", {op_shape, 0}},
      {"Size", {op_size, 0}},
      {"Constant", {op_constant}},
      {"ConstantOfShape", {op_constant_of_shape, 0}},
      {"Range", {op_range, 0}},
      {"QuantizeLinear", {op_quantize_linear}},
      {"DequantizeLinear", {op_dequantize_linear}},
      {"DynamicQuantizeLinear", {op_dynamic_quantize_linear, -1, nullptr, 3}},
      {"MatMulInteger", {op_matmul_integer}},
      {"ConvInteger", {op_conv_integer}},
      {"QLinearMatMul", {op_qlinear_matmul}},
      {"QLinearConv", {op_qlinear_conv}},
      {"Det", {op_det}},
      {"DFT", {op_dft, 1}},
      {"STFT", {op_stft}},
      {"RoiAlign", {op_roi_align}},
      {"HannWindow", {op_hann_window, 0}},
      {"HammingWindow", {op_hamming_window, 0}},
      {"BlackmanWindow", {op_blackman_window, 0}},
      {"NegativeLogLikelihoodLoss", {op_negative_log_likelihood_loss}},
      {"SoftmaxCrossEntropyLoss", {op_softmax_cross_entropy_loss, -1, nullptr, 2}},
      {"MaxUnpool", {op_max_unpool, 2}},
      {"Expand", {op_expand, 1}},
      {"Tile", {op_tile, 1}},
      {"Trilu", {op_trilu, 1}},
      {"Pad", {op_pad, 1, check_pad}},
      {"Sin", {op_sin}},
      {"Cos", {op_cos}},
      {"Tan", {op_tan}},
      {"Asin", {op_asin}},
      {"Acos", {op_acos}},
      {"Atan", {op_atan}},
      {"Sinh", {op_sinh}},
      {"Cosh", {op_cosh}},
      {"Asinh", {op_asinh}},
      {"Acosh", {op_acosh}},
      {"Atanh", {op_atanh}},
      {"Softsign", {op_softsign}},
      {"Mish", {op_mish}},
      {"Celu", {op_celu}},
      {"Selu", {op_selu}},
      {"ThresholdedRelu", {op_thresholded_relu}},
      {"Shrink", {op_shrink}},
      {"IsNaN", {op_is_nan}},
      {"IsInf", {op_is_inf}},
      {"PRelu", {op_prelu}},
      {"Xor", {op_xor}},
      {"BitwiseAnd", {op_bitwise_and}},
      {"BitwiseOr", {op_bitwise_or}},
      {"BitwiseXor", {op_bitwise_xor}},
      {"BitwiseNot", {op_bitwise_not}},
      {"BitShift", {op_bit_shift}},
      {"ReduceL1", {op_reduce_l1, 1}},
      {"ReduceL2", {op_reduce_l2, 1}},
      {"ReduceSumSquare", {op_reduce_sum_square, 1}},
      {"ReduceLogSum", {op_reduce_log_sum, 1}},
      {"ReduceLogSumExp", {op_reduce_log_sum_exp, 1}},
      {"ReduceProd", {op_reduce_prod, 1}},
      {"ArgMax", {op_arg_max}},
      {"ArgMin", {op_arg_min}},
      {"Hardmax", {op_hardmax}},
      {"CumSum", {op_cumsum, 1}},
      {"TopK", {op_topk, 1, nullptr, 2}},
      {"GatherElements", {op_gather_elements}},
      {"GatherND", {op_gather_nd}},
      {"OneHot", {op_one_hot, 1}},
      {"EyeLike", {op_eye_like}},
      {"InstanceNormalization", {op_instance_norm}},
      {"GroupNormalization", {op_group_norm}},
      {"LpNormalization", {op_lp_norm}},
      {"MeanVarianceNormalization", {op_mvn}},
      {"LRN", {op_lrn}},
      {"LpPool", {op_lp_pool, -1, check_lp_pool}},
      {"GlobalLpPool", {op_global_lp_pool}},
      {"ConvTranspose", {op_conv_transpose, -1, check_conv_transpose}},
      {"RandomNormal", {op_random_normal}},
      {"RandomNormalLike", {op_random_normal}},
      {"RandomUniform", {op_random_uniform}},
      {"RandomUniformLike", {op_random_uniform}},
      {"Bernoulli", {op_bernoulli}},
      {"Resize", {op_resize, 1, check_resize}},
      {"Upsample", {op_resize, 1, check_resize}},
      {"RNN", {op_rnn, -1, check_recurrent, -1}},
      {"GRU", {op_gru, -1, check_recurrent, -1}},
      {"LSTM", {op_lstm, -1, check_recurrent, -1}},
      {"CastLike", {op_cast_like, 1}},
      {"Compress", {op_compress, 1}},
      {"DepthToSpace", {op_depth_to_space, -1, check_depth_to_space}},
      {"SpaceToDepth", {op_space_to_depth, -1, check_depth_to_space}},
      {"ReverseSequence", {op_reverse_sequence, 1}},
      {"ScatterElements", {op_scatter_elements, -1, check_scatter}},
      {"Scatter", {op_scatter_elements, -1, check_scatter}},
      {"ScatterND", {op_scatter_nd, -1, check_scatter}},
      {"GridSample", {op_grid_sample, -1, check_grid_sample}},
  };
  return table;
}

}  // namespace

const OpImpl* find_op_impl(const std::string& type) {
  auto it = op_table().find(type);
  return it == op_table().end() ? nullptr : &it->second;
}

namespace {

// gpu:N is CUDA device N.
// A GPU's CUDA index: the digits after the last ':' of its name (gpu:0, gpu:1, ...).
int cuda_index(const Device& dev) {
  const auto colon = dev.name.rfind(':');
  const std::string digits = colon == std::string::npos ? std::string() : dev.name.substr(colon + 1);
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
    throw Error("device '" + dev.name + "' (a GPU): the executor takes its CUDA device from the number after the last ':' of " +
                "its name (gpu:0, gpu:1, ...), and this name has none");
  return std::stoi(digits);
}

}  // namespace

}  // namespace detail

bool sums_gradients_out_of_place() {
  // A weight read twice gets two partial gradients, which autograd's input buffer sums before
  // AccumulateGrad. In place (PyTorch 2, holding the last reference) two weight-sized buffers are
  // live at the peak of the backward pass; out of place (libtorch 1.x) the sum is a third.
  static const bool out_of_place = [] {
    detail::install_host_meter();
    constexpr std::int64_t n = 128;  // 64 KiB: far above the loss's scalars and the row gradients
    const std::uint64_t weight_bytes = n * n * sizeof(float);
    torch::Tensor w = torch::ones({n, n}).set_requires_grad(true);
    const torch::Tensor x = torch::ones({1, n});
    torch::Tensor loss = torch::mm(x, w).sum() + torch::mm(x, w).sum();
    const std::uint64_t base = detail::read_host_memory().current_bytes;
    detail::reset_host_peak();
    loss.backward();
    const std::uint64_t peak = detail::read_host_memory().peak_bytes - base;
    return peak >= weight_bytes * 5 / 2;
  }();
  return out_of_place;
}

void check_devices_available(const Cluster& cluster, std::span<const DeviceId> devices) {
  std::map<int, std::string> by_index;  // CUDA index -> the first device of `devices` on it
  for (DeviceId d : devices) {
    const Device& dev = cluster.device(d);
    if (dev.kind == DeviceKind::cpu) continue;
    const int index = detail::cuda_index(dev);
    if (auto [it, fresh] = by_index.emplace(index, dev.name); !fresh && it->second != dev.name)
      throw Error("devices '" + it->second + "' and '" + dev.name + "' would both run on CUDA device " + std::to_string(index) +
                  " (the number after the last ':' of a GPU's name)");
  }
  for (const auto& [index, name] : by_index) {
    if (!torch::cuda::is_available())
      throw Error("device '" + name + "': this libtorch has no CUDA (a CPU-only build, or no GPU); see docs/execution.md");
    if (index >= static_cast<int>(torch::cuda::device_count()))
      throw Error("device '" + name + "': libtorch sees only " + std::to_string(torch::cuda::device_count()) + " CUDA devices");
  }
}

namespace detail {

bool OpCall::has(std::size_t slot) const {
  auto inputs = g.op_inputs(op);
  return slot < inputs.size() && inputs[slot] != kNoId;
}

std::vector<std::int64_t> OpCall::ints(std::size_t slot) const {
  if (!has(slot)) throw Error(op_label(g, op) + ": input " + std::to_string(slot) + " is missing");
  const torch::Tensor& v = slot < value.size() && value[slot].defined() ? value[slot] : in[slot];
  if (!v.defined()) throw Error(op_label(g, op) + ": input " + std::to_string(slot) + " has no value");
  torch::Tensor cpu = v.to(torch::kCPU).to(torch::kLong).contiguous();
  const auto* p = cpu.data_ptr<std::int64_t>();
  return {p, p + cpu.numel()};
}

std::optional<double> OpCall::scalar(std::size_t slot) const {
  if (!has(slot)) return std::nullopt;
  const torch::Tensor& v = slot < value.size() && value[slot].defined() ? value[slot] : in[slot];
  if (!v.defined() || v.numel() != 1) throw Error(op_label(g, op) + ": input " + std::to_string(slot) + " must be one value");
  return v.to(torch::kCPU).to(torch::kDouble).item<double>();
}

std::vector<std::int64_t> OpCall::out_shape(std::size_t k) const {
  auto s = g.tensor_shape(g.op_outputs(op)[k]);
  return {s.begin(), s.end()};
}

torch::Tensor OpCall::input_or_value(std::size_t slot) const {
  return in[slot].defined() ? in[slot] : value[slot].to(device);
}

// ---- Engine ---------------------------------------------------------------------------------------

namespace {

// Whether graph op `op` is what the importer made of `node`: it gives one of the node's outputs,
// or stands for the parameter the node aliases, or (an op whose outputs nothing reads) has the
// node's type and none of its outputs is in the graph. The nodes the importer leaves out (those
// that compute only empty set-up values: an empty Constant, a prefix shape of no dimension) give
// no tensor of the graph and so match no op.
bool made_from(const Graph& g, OpId op, const onnx::NodeProto& node) {
  const auto outs = g.op_outputs(op);
  if (!outs.empty()) return std::find(node.output().begin(), node.output().end(), g.tensor_name(outs[0])) != node.output().end();
  if (const Attribute* alias = g.op_attrs(op).find("alias")) return node.output_size() > 0 && node.output(0) == alias->s;
  const std::string type = node.domain().empty() || node.domain() == "ai.onnx" ? node.op_type() : node.domain() + "::" + node.op_type();
  if (g.op_type(op) != type) return false;
  if (std::any_of(node.output().begin(), node.output().end(), [&](const std::string& out) { return !out.empty() && g.find_tensor(out) != kNoId; }))
    return false;
  // And it reads what the node reads (a node left out reads other values than a later op of its type).
  const auto ins = g.op_inputs(op);
  for (int s = 0; s < node.input_size(); ++s)
    if (static_cast<std::size_t>(s) < ins.size() && ins[static_cast<std::size_t>(s)] != kNoId &&
        g.tensor_name(ins[static_cast<std::size_t>(s)]) != node.input(s))
      return false;
  return true;
}

bool is_alias_op(const Graph& g, OpId op) {
  return g.op_outputs(op).empty() && g.op_inputs(op).empty() && g.op_attrs(op).find("alias_of") != nullptr;
}

}  // namespace

Engine::Engine(const std::string& model_path, const ModelOptions& model, const Cluster& cluster,
               std::span<const DeviceId> forward_devices, const ExecOptions& options)
    : options_(options) {
  ensure_threads();
  install_host_meter();  // before any tensor of this engine: parameters and data count as live
  if (is_graph_json_file(model_path))
    throw Error("the executor runs ONNX models (it needs the constants graph JSON does not keep): '" + model_path + "'");
  ModelOptions forward_options = model;
  forward_options.mode = Mode::inference;
  forward_options.onnx.warn = nullptr;  // the command that built this engine read the model and warned already
  graph_ = load_forward_graph(model_path, forward_options);
  // A training step runs what derive_training_step derives: a model it refuses (no output computed
  // from a parameter through differentiable ops, ...) is refused here too, with its reason.
  if (options.mode == Mode::training) (void)derive_training_step(graph_, options.optimizer);
  model_ = read_onnx_file(model_path);  // as the importer reads it
  inline_control_flow_decided_by_shapes(model_, model.onnx.dim_values);
  const std::size_t num_ops = graph_.num_ops();
  // One op per node, in order, but for the nodes that compute only empty set-up values (an empty
  // `roi` of Resize), which the importer leaves out: their readers read nothing there.
  for (int i = 0; i < model_.graph().node_size() && node_index_.size() < num_ops; ++i)
    if (made_from(graph_, static_cast<OpId>(node_index_.size()), model_.graph().node(i))) node_index_.push_back(i);
  if (node_index_.size() != num_ops)
    throw Error("model file '" + model_path + "': the imported graph does not match the file's nodes one for one");
  check_supported(graph_);
  if (forward_devices.size() != num_ops)
    throw Error("placement gives " + std::to_string(forward_devices.size()) + " devices for " + std::to_string(num_ops) + " forward ops");

  // Devices: cpu:N on the host; gpu:N on CUDA device N.
  num_devices_ = cluster.num_devices();
  op_device_.assign(forward_devices.begin(), forward_devices.end());
  std::vector<std::uint8_t> used(num_devices_, 0);
  for (DeviceId d : op_device_) {
    if (d >= num_devices_) throw Error("placement names device id " + std::to_string(d) + ", which the cluster does not have");
    used[d] = 1;
  }
  for (DeviceId d = 0; d < num_devices_; ++d) {
    const Device& dev = cluster.device(d);
    if (dev.kind == DeviceKind::cpu || options_.all_on_cpu) {
      torch_devices_.emplace_back(torch::kCPU);
      continue;
    }
    torch_devices_.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(used[d] ? cuda_index(dev) : 0));
  }
  if (!options_.all_on_cpu) {
    std::vector<DeviceId> used_ids;
    for (DeviceId d = 0; d < num_devices_; ++d)
      if (used[d]) used_ids.push_back(d);
    check_devices_available(cluster, used_ids);  // names, CUDA indices, what libtorch sees
  }
  for (DeviceId d = 0; d < num_devices_; ++d)
    if (used[d]) used_devices_.push_back(d);

  impls_.assign(num_ops, nullptr);
  op_skip_.assign(num_ops, 0);
  op_folded_.assign(num_ops, 0);
  // The training step's rule (graph/training.cpp): gradients stop at ops the IR does not
  // differentiate (Floor, Sign, Mod, comparisons, ...), whatever libtorch could differentiate.
  op_stops_gradient_.assign(num_ops, 0);
  for (OpId op = 0; op < num_ops; ++op)
    op_stops_gradient_[op] = !backward_rule(graph_.op_type(op), graph_.op_attrs(op)).differentiable;
  op_out_slots_.resize(num_ops);
  std::int64_t opset = 0;  // of the default ONNX domain
  for (const auto& o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  for (OpId op = 0; op < num_ops; ++op) {
    const auto& node = this->node(op);
    if (node.op_type() != graph_.op_type(op))
      throw Error("model file '" + model_path + "': node " + std::to_string(op) + " is not the graph's op '" + graph_.op_name(op) + "'");
    // Before opset 13, (Log)Softmax and Hardmax flattened their input at `axis` (default 1) and normalised over
    // every dimension from there; the executor normalises over one (opset 13). They agree when that
    // axis is the last one: anything else would be a silently different result.
    if (opset > 0 && opset < 13 && (node.op_type() == "Softmax" || node.op_type() == "LogSoftmax" || node.op_type() == "Hardmax")) {
      const auto rank = static_cast<std::int64_t>(graph_.tensor_shape(graph_.op_inputs(op)[0]).size());
      std::int64_t axis = graph_.op_attrs(op).get_int("axis", 1);
      if (axis < 0) axis += rank;
      if (axis != rank - 1)
        throw Error(op_label(graph_, op) + ": " + node.op_type() + " of opset " + std::to_string(opset) +
                    " normalises over every axis from " + std::to_string(axis) +
                    " on, which the executor does not run; export the model with opset 13 or later");
    }
    if (node.op_type() == "RNN" || node.op_type() == "GRU" || node.op_type() == "LSTM")
      if (std::string why = check_activations(node); !why.empty()) throw Error(op_label(graph_, op) + ": " + why);
    if (is_alias_op(graph_, op)) {  // its output is a parameter of its own (docs/training-step.md)
      op_skip_[op] = 1;
      continue;
    }
    impls_[op] = find_op_impl(graph_.op_type(op));
    for (const auto& out : node.output()) op_out_slots_[op].push_back(out.empty() ? kNoId : graph_.find_tensor(out));
    // An output the graph keeps that the implementation does not give (BatchNorm's saved
    // statistics of opsets before 14): refused now, not when the first step reaches it.
    if (impls_[op] && impls_[op]->outputs >= 0)
      for (std::size_t k = static_cast<std::size_t>(impls_[op]->outputs); k < op_out_slots_[op].size(); ++k)
        if (op_out_slots_[op][k] != kNoId)
          throw Error(op_label(graph_, op) + ": output " + std::to_string(k) + " ('" + node.output(static_cast<int>(k)) +
                      "') is not one the executor gives (it gives the first " + std::to_string(impls_[op]->outputs) + ")");
  }
  keep_gates_in_pytorch_order();
  fold_constants();
  create_sources();

  // Readers of every tensor among the ops that run each step, each op once, value slots included
  // (a value slot reads the producer's tensor in place: it must live until then too).
  uses_.assign(graph_.num_tensors(), 0);
  uses_on_.assign(graph_.num_tensors() * num_devices_, 0);
  folded_on_.assign(graph_.num_tensors(), {});
  for (OpId op = 0; op < num_ops; ++op) {
    if (op_skip_[op] || op_folded_[op]) continue;
    auto inputs = graph_.op_inputs(op);
    for (std::size_t s = 0; s < inputs.size(); ++s) {
      const TensorId t = inputs[s];
      if (t == kNoId) continue;
      const bool value_slot = impls_[op]->first_value_slot >= 0 && s >= static_cast<std::size_t>(impls_[op]->first_value_slot);
      if (folded_[t].defined()) {
        if (!value_slot) {
          auto& per_device = folded_on_[t];
          if (per_device.empty()) per_device.resize(num_devices_);
          const DeviceId d = op_device_[op];
          if (!per_device[d].defined()) per_device[d] = folded_[t].to(torch_devices_[d]);
        }
        continue;
      }
      if (std::find(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(s), t) == inputs.begin() + static_cast<std::ptrdiff_t>(s))
        ++uses_[t], ++uses_on_[std::size_t{t} * num_devices_ + op_device_[op]];
    }
  }
  if (training()) make_optimizer();
}

void Engine::fold_constants() {
  // An op whose inputs are all known before the step (constants, shapes: every shape is static in
  // the IR; Graph::op_folded) is evaluated once here, on the CPU, as the importer folds shape
  // arithmetic.
  folded_.assign(graph_.num_tensors(), torch::Tensor());
  for (const auto& init : model_.graph().initializer()) {
    const TensorId t = graph_.find_tensor(init.name());
    if (t != kNoId && graph_.tensor_kind(t) == TensorKind::constant) folded_[t] = tensor_from_proto(init, "initializer '" + init.name() + "'");
  }
  torch::NoGradGuard no_grad;
  for (OpId op = 0; op < graph_.num_ops(); ++op) {
    if (op_skip_[op]) continue;
    if (!graph_.op_folded(op)) continue;  // the graph's rule, so that the simulator agrees
    auto inputs = graph_.op_inputs(op);
    std::vector<torch::Tensor> in(inputs.size()), value(inputs.size());
    for (std::size_t s = 0; s < inputs.size(); ++s) {
      if (inputs[s] == kNoId) continue;
      if (folded_[inputs[s]].defined()) {
        in[s] = value[s] = folded_[inputs[s]];
      } else if (graph_.tensor_folded(inputs[s])) {
        // A constant-kind graph input without an initializer (e.g. an integer input left out of
        // --data-inputs): the graph takes it for a set-up value, but the model gives it none.
        throw Error("op '" + graph_.op_name(op) + "' reads '" + graph_.tensor_name(inputs[s]) +
                    "', a constant without a value in the model file (if it is fed each step, name it in --data-inputs)");
      }
    }
    std::vector<torch::Tensor> outs = run_op(op, in, torch::kCPU, false);
    for (std::size_t k = 0; k < outs.size() && k < op_out_slots_[op].size(); ++k)
      if (op_out_slots_[op][k] != kNoId) folded_[op_out_slots_[op][k]] = outs[k].contiguous();
    op_folded_[op] = 1;
  }
  // Only what the step reads stays: a set-up value read by an op that runs each step, or a graph
  // output, as the simulator counts them (on each device that reads them). A folded chain's
  // intermediates are freed (a causal mask built at the longest length and sliced to the one used
  // held every step of the chain: a QA pass measured 12 MiB where the simulator counts 16 KiB), and
  // a kept value that views a larger storage (that slice) gets storage of its own.
  std::vector<char> read(graph_.num_tensors(), 0);
  for (OpId op = 0; op < graph_.num_ops(); ++op)
    if (!op_skip_[op] && !op_folded_[op])
      for (TensorId t : graph_.op_inputs(op))
        if (t != kNoId) read[t] = 1;
  for (TensorId t : graph_.outputs()) read[t] = 1;
  for (TensorId t = 0; t < graph_.num_tensors(); ++t) {
    torch::Tensor& v = folded_[t];
    if (!v.defined()) continue;
    if (!read[t]) v = torch::Tensor();
    else if (v.storage().nbytes() > v.nbytes()) v = v.clone();
  }
}

namespace {

// Whether input `slot` of an op of type `type` decides the shapes of its outputs by its values (a
// Slice's starts, a Reshape's shape, a TopK's K, ...): drawn at random, it gives other shapes than
// the model declares, or none at all (docs/execution.md#sources).
bool decides_shapes(std::string_view type, std::size_t slot) {
  if (type == "Range") return true;
  if (slot == 0) return type == "ConstantOfShape" || type == "HannWindow" || type == "HammingWindow" || type == "BlackmanWindow";
  static const std::unordered_map<std::string_view, std::uint32_t> kSlots = {
      {"Slice", 0b11110},   {"Tile", 0b10},      {"Expand", 0b10},      {"Reshape", 0b10},   {"TopK", 0b10},
      {"Squeeze", 0b10},    {"Unsqueeze", 0b10}, {"Split", 0b10},       {"Compress", 0b10},  {"OneHot", 0b10},
      {"Pad", 0b1010},      {"Resize", 0b1100},  {"Upsample", 0b10},    {"STFT", 0b1010},    {"DFT", 0b110},
      {"CenterCropPad", 0b10}, {"MaxUnpool", 0b100}, {"Col2Im", 0b110}, {"AffineGrid", 0b10}, {"ReduceSum", 0b10}, {"ReduceMean", 0b10}, {"ReduceMax", 0b10}, {"ReduceMin", 0b10},
      {"ReduceProd", 0b10}, {"ReduceL1", 0b10}, {"ReduceL2", 0b10}, {"ReduceLogSum", 0b10}, {"ReduceLogSumExp", 0b10},
      {"ReduceSumSquare", 0b10}};
  const auto it = kSlots.find(type);
  return it != kSlots.end() && slot < 32 && (it->second >> slot & 1u);
}

}  // namespace

void Engine::create_sources() {
  // Drawn on the CPU in tensor-id order from one seed, then moved to the home device, so that every
  // placement starts from the same values.
  torch::manual_seed(options_.seed);
  sources_.assign(graph_.num_tensors(), torch::Tensor());
  source_device_.assign(graph_.num_tensors(), 0);
  for (TensorId t = 0; t < graph_.num_tensors(); ++t) {
    const TensorKind kind = graph_.tensor_kind(t);
    if (graph_.producer(t) != kNoId || folded_[t].defined()) continue;
    if (kind != TensorKind::parameter && kind != TensorKind::buffer && kind != TensorKind::data) continue;
    const OpId home = graph_.param_home(t);
    if (home == kNoId) continue;
    auto shape = graph_.tensor_shape(t);
    std::vector<std::int64_t> dims(shape.begin(), shape.end());
    const torch::ScalarType st = scalar_type(graph_.tensor_dtype(t));
    torch::Tensor v;
    // Data that decides shapes cannot be drawn: said at the first step unless given (set_source_value).
    // Also through the ops that pass its values on as they are (a Cast, a Concat of it into a
    // shape: an _expanded window's size); not through arithmetic, whose result the model may not
    // let decide anything (x * 0 + k, as tests write a value of the step).
    static const std::unordered_set<std::string_view> kPassesValues = {"Cast",      "CastLike", "Identity", "Concat",  "Reshape",
                                                                         "Squeeze",   "Unsqueeze", "Flatten", "Transpose", "Expand",
                                                                         "Slice",     "Gather",   "Split"};
    if (kind == TensorKind::data) {
      std::vector<TensorId> reached{t};
      std::vector<char> seen(graph_.num_tensors(), 0);
      seen[t] = 1;
      while (!reached.empty()) {
        const TensorId x = reached.back();
        reached.pop_back();
        for (OpId c : graph_.consumers(x)) {
          const auto ins = graph_.op_inputs(c);
          for (std::size_t i = 0; i < ins.size(); ++i)
            if (ins[i] == x && decides_shapes(graph_.op_type(c), i)) drawn_settings_.push_back({t, c, i, x});
          if (!kPassesValues.contains(graph_.op_type(c))) continue;
          for (TensorId y : graph_.op_outputs(c))
            if (y != kNoId && !seen[y]) seen[y] = 1, reached.push_back(y);
        }
      }
    }
    if (!is_floating(graph_.tensor_dtype(t))) {
      // Indices: below the smallest table they index (2 when nothing says; a RoiAlign's batch
      // indices below its input's batch); a divisor (of Div or Mod) is 1 or 2, not 0.
      std::int64_t bound = std::numeric_limits<std::int64_t>::max();
      bool divisor = false;
      for (OpId c : graph_.consumers(t)) {
        const auto ins = graph_.op_inputs(c);
        if ((graph_.op_type(c) == "Div" || graph_.op_type(c) == "Mod") && ins.size() > 1 && ins[1] == t) divisor = true;
        if (graph_.op_type(c) == "RoiAlign" && ins.size() > 2 && ins[2] == t && ins[0] != kNoId && !graph_.tensor_shape(ins[0]).empty())
          bound = std::min(bound, graph_.tensor_shape(ins[0])[0]);
        if (graph_.op_type(c) != "Gather" || graph_.op_inputs(c).size() < 2 || graph_.op_inputs(c)[1] != t) continue;
        auto table = graph_.tensor_shape(graph_.op_inputs(c)[0]);
        std::int64_t axis = graph_.op_attrs(c).get_int("axis", 0);
        if (axis < 0) axis += static_cast<std::int64_t>(table.size());
        bound = std::min(bound, table[static_cast<std::size_t>(axis)]);
      }
      const bool indexes = bound != std::numeric_limits<std::int64_t>::max();
      std::int64_t low = 0, high = indexes ? bound : 2;  // [low, high)
      if (divisor && !indexes) low = 1, high = 3;
      else if (divisor && bound >= 2) low = 1;  // an index that is also a divisor: 1 .. bound - 1
      v = torch::randint(low, high, dims, torch::TensorOptions().dtype(st));
    } else if (kind == TensorKind::data) {
      // Normal, except probabilities (a Bernoulli's input: libtorch refuses one outside [0, 1],
      // and `run` on ONNX's test_bernoulli failed so; a Dropout's ratio), which are uniform in [0, 1).
      bool probabilities = false;
      for (OpId c : graph_.consumers(t)) {
        const auto ins = graph_.op_inputs(c);
        if (graph_.op_type(c) == "Bernoulli" && !ins.empty() && ins[0] == t) probabilities = true;
        if (graph_.op_type(c) == "Dropout" && ins.size() > 1 && ins[1] == t) probabilities = true;
      }
      v = probabilities ? torch::rand(dims, torch::TensorOptions().dtype(st)) : torch::randn(dims, torch::TensorOptions().dtype(st));
    } else if (kind == TensorKind::buffer) {
      // Running variance (BatchNormalization slot 4) and a loss's class weights start at 1, everything else at 0.
      bool ones = false;  // a running variance, or a loss's class weights (their input 2)
      for (OpId c : graph_.consumers(t)) {
        const auto ins = graph_.op_inputs(c);
        if (graph_.op_type(c) == "BatchNormalization" && ins.size() > 4 && ins[4] == t) ones = true;
        if ((graph_.op_type(c) == "NegativeLogLikelihoodLoss" || graph_.op_type(c) == "SoftmaxCrossEntropyLoss") && ins.size() > 2 && ins[2] == t)
          ones = true;
      }
      v = ones ? torch::ones(dims, torch::TensorOptions().dtype(st)) : torch::zeros(dims, torch::TensorOptions().dtype(st));
    } else if (dims.size() >= 2) {
      // PyTorch's default for Linear and Conv: uniform in +-1/sqrt(fan in). Fan in is every dim but
      // the first for Conv ([out, in, k...]) and Gemm with transB ([out, in]); a weight MatMul or
      // Gemm without transB reads as B is [in, out]: its first dim.
      double fan_in = static_cast<double>(graph_.tensor_elements(t)) / static_cast<double>(dims[0]);
      for (OpId c : graph_.consumers(t)) {
        const auto ins = graph_.op_inputs(c);
        const bool as_b = ins.size() > 1 && ins[1] == t && dims.size() == 2;
        if (as_b && (graph_.op_type(c) == "MatMul" || (graph_.op_type(c) == "Gemm" && graph_.op_attrs(c).get_int("transB", 0) == 0)))
          fan_in = static_cast<double>(dims[0]);
      }
      const double bound = 1.0 / std::sqrt(std::max(1.0, fan_in));
      v = torch::empty(dims, torch::TensorOptions().dtype(st)).uniform_(-bound, bound);
    } else {
      // Vectors: scales and biases, near one so that normalisations stay well conditioned.
      v = torch::empty(dims, torch::TensorOptions().dtype(st)).uniform_(0.9, 1.1);
    }
    const DeviceId d = op_device_[home];
    const OpId layer = gate_reader_[t];
    if (layer != kNoId) v = reorder_gates(v, cell_of(graph_.op_type(layer)), is_layer_bias(graph_, layer, t), true);
    v = v.to(torch_devices_[d]);
    if (layer != kNoId) {
      // A recurrent layer's weight or bias: one leaf per direction (and per half of a bias), as
      // PyTorch's modules hold them, sharing the tensor's storage.
      const bool bias = is_layer_bias(graph_, layer, t);
      for (std::int64_t k = 0; k < v.size(0); ++k) {
        const torch::Tensor row = v[k];
        const std::int64_t half = row.size(0) / 2;
        for (torch::Tensor part : bias ? std::vector<torch::Tensor>{row.narrow(0, 0, half), row.narrow(0, half, half)} : std::vector<torch::Tensor>{row})
          param_parts_[t].push_back(training() ? part.detach().requires_grad_(true) : part.detach());
      }
      param_ids_.push_back(t);
    } else if (kind == TensorKind::parameter && training()) {
      v.requires_grad_(true);
      param_ids_.push_back(t);
    } else if (kind == TensorKind::parameter) {
      param_ids_.push_back(t);
    }
    sources_[t] = v;
    source_device_[t] = d;
  }
  // PyTorch's list of each such layer's parameters: w_ih, w_hh[, b_ih, b_hh] per direction.
  op_layer_params_.assign(graph_.num_ops(), {});
  for (OpId op = 0; op < graph_.num_ops(); ++op) {
    if (!op_gate_order_[op]) continue;
    const auto ins = graph_.op_inputs(op);
    const bool biases = ins.size() > 3 && ins[3] != kNoId;
    for (std::size_t k = 0; k < param_parts_[ins[1]].size(); ++k) {
      op_layer_params_[op].push_back(param_parts_[ins[1]][k]);
      op_layer_params_[op].push_back(param_parts_[ins[2]][k]);
      if (biases) {
        op_layer_params_[op].push_back(param_parts_[ins[3]][2 * k]);
        op_layer_params_[op].push_back(param_parts_[ins[3]][2 * k + 1]);
      }
    }
  }
}

void Engine::keep_gates_in_pytorch_order() {
  const std::size_t num_ops = graph_.num_ops();
  op_gate_order_.assign(num_ops, 0);
  gate_reader_.assign(graph_.num_tensors(), kNoId);
  param_parts_.assign(graph_.num_tensors(), {});
  for (OpId op = 0; op < num_ops; ++op) {
    const std::string_view type = graph_.op_type(op);
    if (op_skip_[op] || graph_.op_folded(op) || (type != "LSTM" && type != "GRU" && type != "RNN")) continue;
    const auto ins = graph_.op_inputs(op);
    if (!recurrent_as_pytorch_layer(type, graph_.op_attrs(op), ins.size() > 7 && ins[7] != kNoId)) continue;
    // W, R and B (when given): parameters of this layer alone, each read once, on its device.
    bool alone = true;
    for (std::size_t s = 1; s <= 3 && s < ins.size(); ++s) {
      const TensorId t = ins[s];
      if (t == kNoId) {
        alone &= s == 3;
        continue;
      }
      alone &= graph_.tensor_kind(t) == TensorKind::parameter && graph_.producer(t) == kNoId && !graph_.tensor_folded(t) &&
               graph_.param_home(t) == op && graph_.consumers(t).size() == 1 && std::count(ins.begin(), ins.end(), t) == 1;
    }
    if (!alone) continue;
    op_gate_order_[op] = 1;
    for (std::size_t s = 1; s <= 3 && s < ins.size(); ++s)
      if (ins[s] != kNoId) gate_reader_[ins[s]] = op;
  }
}

void Engine::make_optimizer() {
  std::vector<torch::Tensor> params = parameters();
  if (params.empty()) return;
  switch (options_.optimizer) {
    case Optimizer::sgd:
      optimizer_ = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(options_.learning_rate));
      break;
    case Optimizer::momentum:
      optimizer_ = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(options_.learning_rate).momentum(0.9));
      break;
    case Optimizer::adam:
      optimizer_ = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(options_.learning_rate));
      break;
  }
}

std::vector<torch::Tensor> Engine::parameters() const {
  std::vector<torch::Tensor> out;
  for (TensorId t : param_ids_) {
    if (param_parts_[t].empty()) out.push_back(sources_[t]);
    else out.insert(out.end(), param_parts_[t].begin(), param_parts_[t].end());
  }
  return out;
}

namespace {

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// An op's libtorch call. libtorch's own errors (an integer division by zero in the data, an index
// past a table, a kernel this build lacks) come with a C++ backtrace: one line naming the op instead.
// On the CPU, libtorch lacks half-precision kernels for most ops (convolutions, products: "not
// implemented for 'Half'", every fp16 model failed at its first Conv): such an op runs on float32
// copies of its half inputs, and its outputs the graph holds in half precision are made half again.
std::vector<torch::Tensor> call_op_upcast(const OpImpl& impl, const OpCall& call) {
  auto upcast = [](std::span<const torch::Tensor> ts) {
    std::vector<torch::Tensor> out(ts.begin(), ts.end());
    for (auto& t : out)
      if (t.defined() && t.scalar_type() == torch::kHalf) t = t.to(torch::kFloat);
    return out;
  };
  // A recurrent layer's parameter leaves too: the copies are differentiable, so their gradients
  // reach the half-precision leaves.
  const std::vector<torch::Tensor> in = upcast(call.in), value = upcast(call.value), params = upcast(call.layer_params);
  const OpCall wide{call.g, call.op, call.node, call.training, in, value, call.device, call.pytorch_gate_order, params};
  std::vector<torch::Tensor> out = impl.fn(wide);
  const auto outputs = call.node.output();
  for (std::size_t k = 0; k < out.size() && k < static_cast<std::size_t>(outputs.size()); ++k) {
    const TensorId t = outputs[static_cast<int>(k)].empty() ? kNoId : call.g.find_tensor(outputs[static_cast<int>(k)]);
    if (t != kNoId && out[k].defined() && call.g.tensor_dtype(t) == DType::f16 && out[k].scalar_type() == torch::kFloat) out[k] = out[k].to(torch::kHalf);
  }
  return out;
}

std::vector<torch::Tensor> call_op(const OpImpl& impl, const OpCall& call) {
  try {
    if (call.device.is_cpu()) {
      auto half = [](const torch::Tensor& t) { return t.defined() && t.scalar_type() == torch::kHalf; };
      if (std::any_of(call.in.begin(), call.in.end(), half) || std::any_of(call.value.begin(), call.value.end(), half))
        return call_op_upcast(impl, call);
    }
    return impl.fn(call);
  } catch (const c10::Error& e) {
    throw Error(op_label(call.g, call.op) + ": libtorch failed: " + first_line(e.what_without_backtrace()));
  }
}

}  // namespace

std::vector<torch::Tensor> Engine::run_op(OpId op, std::span<const torch::Tensor> inputs, torch::Device device, bool training) const {
  static const std::vector<torch::Tensor> kNone(64);
  std::vector<torch::Tensor> value(inputs.size());
  auto ids = graph_.op_inputs(op);
  for (std::size_t s = 0; s < ids.size() && s < value.size(); ++s)
    if (ids[s] != kNoId && !folded_.empty() && folded_[ids[s]].defined()) value[s] = folded_[ids[s]];
  // Kept values of a layer's weights (the profiler's inputs) are in the order the engine keeps.
  OpCall call{graph_, op, node(op), training, inputs, value, device, op < op_gate_order_.size() && op_gate_order_[op]};
  return call_op(*impls_[op], call);
}

torch::Tensor Engine::fetch(TensorId t, DeviceId d) {
  const bool source = sources_[t].defined();
  const torch::Tensor& base = source ? sources_[t] : values_[t];
  const DeviceId from = source ? source_device_[t] : op_device_[graph_.producer(t)];
  if (!base.defined()) throw Error("tensor '" + graph_.tensor_name(t) + "' has no value when it is read (internal error)");
  if (from == d) return base;
  torch::Tensor& copy = copies_on_[std::size_t{t} * num_devices_ + d];
  if (!copy.defined()) {
    // A copy per (tensor, destination device) per step; between two devices that are the same
    // torch device (several CPUs of a cluster, or the test mode) a clone stands for the transfer.
    copy = torch_devices_[from] == torch_devices_[d] ? base.clone() : base.to(torch_devices_[d]);
    ++copies_;
    // In training the gradient comes back the same way (the copy's autograd node copies it to the
    // source's device): counted when autograd computes it, as the simulator counts the gradient's
    // transfer (copies_per_step counted forward copies only, found by a review).
    if (copy.requires_grad()) copy.register_hook([count = gradient_copies_](const torch::Tensor&) { ++*count; });
  }
  return copy;
}

void Engine::release_outputs() {
  outputs_.clear();
  for (TensorId t : graph_.outputs())
    if (t < values_.size()) values_[t].reset();
}

void Engine::run_forward(bool keep_values) {
  const std::size_t nt = graph_.num_tensors();
  // The last step's values are released before this one runs, its outputs too (a training loop that
  // kept them would hold them through the next forward pass, which the simulator does not model).
  outputs_.clear();
  values_.assign(nt, torch::Tensor());
  copies_on_.assign(nt * num_devices_, torch::Tensor());
  remaining_ = uses_;
  remaining_on_ = uses_on_;
  copies_ = 0;
  *gradient_copies_ = 0;
  if (keep_values) {
    kept_.assign(nt, torch::Tensor());
    for (TensorId t = 0; t < nt; ++t)
      if (sources_[t].defined()) kept_[t] = sources_[t].detach();
  }
  std::vector<std::uint8_t> is_output(nt, 0);
  for (TensorId t : graph_.outputs()) is_output[t] = 1;
  std::vector<torch::Tensor> in, value;
  for (OpId op = 0; op < graph_.num_ops(); ++op) {
    if (op_skip_[op] || op_folded_[op]) continue;
    const DeviceId d = op_device_[op];
    const torch::Device device = torch_devices_[d];
    auto inputs = graph_.op_inputs(op);
    const OpImpl* impl = impls_[op];
    in.assign(inputs.size(), torch::Tensor());
    value.assign(inputs.size(), torch::Tensor());
    for (std::size_t s = 0; s < inputs.size(); ++s) {
      const TensorId t = inputs[s];
      if (t == kNoId) continue;
      const bool value_slot = impl->first_value_slot >= 0 && s >= static_cast<std::size_t>(impl->first_value_slot);
      if (folded_[t].defined()) {
        value[s] = folded_[t];
        if (!value_slot) in[s] = folded_on_[t][d];
      } else if (value_slot) {
        in[s] = sources_[t].defined() ? sources_[t] : values_[t];
      } else {
        in[s] = fetch(t, d);
      }
    }
    OpCall call{graph_, op, node(op), training(), in, value, device, op_gate_order_[op] != 0, op_layer_params_[op]};
    const auto op_start = trace_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    std::vector<torch::Tensor> outs = call_op(*impl, call);
    if (trace_) {
      if (device.is_cuda()) torch::cuda::synchronize(device.index());
      trace_slice(graph_.op_name(op), "forward", d, op_start);
    }
    const auto& slots = op_out_slots_[op];
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const TensorId t = slots[k];
      if (t == kNoId) continue;
      if (k >= outs.size() || !outs[k].defined())
        throw Error(op_label(graph_, op) + ": output " + std::to_string(k) + " is not produced by the executor");
      torch::Tensor out = outs[k];
      const torch::ScalarType want = scalar_type(graph_.tensor_dtype(t));
      if (out.scalar_type() != want) out = out.to(want);
      if (op_stops_gradient_[op] && out.requires_grad()) out = out.detach();
      if (!checked_shapes_) {
        auto shape = graph_.tensor_shape(t);
        if (!std::equal(shape.begin(), shape.end(), out.sizes().begin(), out.sizes().end()))
          throw Error(op_label(graph_, op) + ": output '" + graph_.tensor_name(t) + "' has shape " + shape_text(out.sizes()) +
                      ", the graph says " + shape_text(c10::IntArrayRef(shape.data(), shape.size())));
      }
      if (keep_values) kept_[t] = out.detach();
      // An output nothing reads (a TopK's indices, an LSTM's last state) is let go of at once, as
      // PyTorch frees a result nobody holds (and the simulator at its producer's end); until
      // 2026-11-30 it lived to the next step, into the timed steps' start_bytes.
      if (uses_[t] > 0 || is_output[t]) values_[t] = out;
    }
    // Drop our references after the last reader (autograd keeps what the backward pass needs): a
    // copy on this device after the last reader here, as the simulator frees it; the value after
    // the last reader anywhere. A graph output keeps its own value for outputs_ (its copies go as
    // any tensor's: they lived to the next step, into its start_bytes; a review), a source (a
    // parameter, a data input) lives all step on its device (its copies lived all step too until
    // 2026-12-02, and a tensor's copies until its last reader on any device).
    for (std::size_t s = 0; s < inputs.size(); ++s) {
      const TensorId t = inputs[s];
      if (t == kNoId || folded_[t].defined()) continue;
      if (std::find(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(s), t) != inputs.begin() + static_cast<std::ptrdiff_t>(s)) continue;
      const std::size_t here = std::size_t{t} * num_devices_ + d;
      if (--remaining_on_[here] == 0) copies_on_[here].reset();
      if (--remaining_[t] == 0 && !sources_[t].defined() && !is_output[t]) values_[t].reset();
    }
  }
  checked_shapes_ = true;
  outputs_.clear();
  for (TensorId t : graph_.outputs()) outputs_.push_back(folded_[t].defined() ? folded_[t] : values_[t]);
}

void Engine::forward_only(bool keep_values) {
  torch::NoGradGuard no_grad;
  run_forward(keep_values);
  synchronize();
}

void Engine::forward_recording() {
  run_forward(false);
  synchronize();
}

void Engine::step(bool keep_values) {
  if (!drawn_settings_.empty()) {
    const auto& [t, op, slot, through] = drawn_settings_.front();
    throw Error("graph input '" + graph_.tensor_name(t) + "' " + (through == t ? "is" : "gives ('" + graph_.tensor_name(through) + "')") +
                " input " + std::to_string(slot) + " of op '" + graph_.op_name(op) + "' (" +
                graph_.op_type(op) + "), whose values decide shapes: the model declares the shapes of the values it was made with, and " +
                "the executor draws its data at random (other shapes, or a failure, by seed); store those values in the model (an " +
                "initializer or a Constant node)");
  }
  if (!training()) {
    forward_only(keep_values);
    return;
  }
  for (const torch::Tensor& p : parameters()) p.mutable_grad().reset();  // as zero_grad(set_to_none=True)
  run_forward(keep_values);
  // Loss: the sum over the graph outputs the training step seeds (floating, produced by an op,
  // carrying a gradient) of their mean, summed on the first such output's device.
  torch::Tensor loss;
  const auto outputs = graph_.outputs();
  const auto loss_start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    const torch::Tensor& out = outputs_[i];
    if (graph_.producer(outputs[i]) == kNoId || !out.defined() || !out.requires_grad() || !out.is_floating_point()) continue;
    torch::Tensor term = out.mean();
    loss = loss.defined() ? loss + term.to(loss.device()) : term;
  }
  // No output carries a gradient (every path from a parameter goes through an op that stops
  // gradients): the training step is its forward pass alone, as the IR's (no loss, no update).
  if (trace_ && loss.defined()) trace_slice("loss", "loss", loss_device(), loss_start);
  if (loss.defined()) {
    try {
      loss.backward();
    } catch (const c10::Error& e) {
      throw Error("training step: libtorch's backward pass failed: " + first_line(e.what_without_backtrace()));
    }
    const auto update_start = std::chrono::steady_clock::now();
    if (optimizer_) optimizer_->step();
    if (trace_ && optimizer_) {
      synchronize();
      trace_slice("optimizer", "update", loss_device(), update_start);
    }
    loss_ = loss.detach();
  } else {
    loss_ = torch::Tensor();
  }
  synchronize();
}

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The autograd nodes of a traced step, from libtorch's RecordFunction callbacks, which autograd runs
// around every node it executes (on whichever thread runs it: the caller's for the CPU, one per
// CUDA device). A global callback, so those threads report too; on only while trace_step runs.
struct NodeRecorder {
  std::mutex mutex;
  StepTrace* trace = nullptr;
  std::chrono::steady_clock::time_point start;
  DeviceId device = 0;
};
NodeRecorder g_nodes;

struct NodeStart final : at::ObserverContext {
  std::chrono::steady_clock::time_point t;
};

std::unique_ptr<at::ObserverContext> node_started(const at::RecordFunction&) {
  auto context = std::make_unique<NodeStart>();
  context->t = std::chrono::steady_clock::now();
  return context;
}

void node_ended(const at::RecordFunction& fn, at::ObserverContext* context) {
  const auto end = std::chrono::steady_clock::now();
  std::lock_guard lock(g_nodes.mutex);
  if (g_nodes.trace == nullptr || context == nullptr) return;
  g_nodes.trace->slices.push_back({fn.name(), "backward", g_nodes.device, seconds_between(g_nodes.start, static_cast<NodeStart*>(context)->t),
                                   seconds_between(g_nodes.start, end)});
}

}  // namespace

void Engine::trace_slice(std::string name, const char* category, DeviceId device, std::chrono::steady_clock::time_point start) {
  const auto end = std::chrono::steady_clock::now();
  std::lock_guard lock(g_nodes.mutex);  // autograd's threads may be recording nodes
  trace_->slices.push_back({std::move(name), category, device, seconds_between(trace_start_, start), seconds_between(trace_start_, end)});
}

DeviceId Engine::loss_device() const {
  // The first output the loss sums (made by an op, floating-point; an integer output before it
  // put the trace's loss and update slices on its device: a review).
  for (TensorId t : graph_.outputs())
    if (graph_.producer(t) != kNoId && is_floating(graph_.tensor_dtype(t))) return op_device_[graph_.producer(t)];
  return 0;
}

StepTrace Engine::trace_step() {
  StepTrace trace;
  const bool host = read_host_memory().measured;
  const DeviceId first_device = loss_device();
  at::CallbackHandle nodes = at::INVALID_CALLBACK_HANDLE;
  auto finish = [&] {
    if (nodes != at::INVALID_CALLBACK_HANDLE) at::removeCallback(nodes);
    std::lock_guard lock(g_nodes.mutex);
    g_nodes.trace = nullptr;
    trace_ = nullptr;
  };
  synchronize();
  const std::uint64_t start_bytes = host ? read_host_memory().current_bytes : 0;
  trace_start_ = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(g_nodes.mutex);
    g_nodes.trace = &trace, g_nodes.start = trace_start_, g_nodes.device = first_device;
  }
  trace_ = &trace;
  if (training())
    nodes = at::addGlobalCallback(at::RecordFunctionCallback(node_started, node_ended).scopes({at::RecordScope::BACKWARD_FUNCTION}));
  if (host) start_host_timeline();
  try {
    step();
  } catch (...) {
    if (host) (void)stop_host_timeline();
    finish();
    throw;
  }
  const auto end = std::chrono::steady_clock::now();
  std::vector<HostSample> samples;
  if (host) samples = stop_host_timeline();
  finish();
  trace.step_s = seconds_between(trace_start_, end);
  if (host) {
    const std::int64_t t0 = std::chrono::duration_cast<std::chrono::nanoseconds>(trace_start_.time_since_epoch()).count();
    trace.host_memory.push_back({0.0, start_bytes});
    for (const HostSample& h : samples) trace.host_memory.push_back({std::max(0.0, static_cast<double>(h.t_ns - t0) * 1e-9), h.bytes});
  }
  std::stable_sort(trace.slices.begin(), trace.slices.end(), [](const StepTrace::Slice& a, const StepTrace::Slice& b) { return a.start_s < b.start_s; });
  return trace;
}

void Engine::synchronize() const {
  for (DeviceId d : used_devices_)
    if (torch_devices_[d].is_cuda()) torch::cuda::synchronize(torch_devices_[d].index());
}

std::vector<torch::Tensor> Engine::inputs_for(OpId op, torch::Device device) const {
  auto ids = graph_.op_inputs(op);
  std::vector<torch::Tensor> in(ids.size());
  const OpImpl* impl = impls_[op];
  // Copies, even on the same device: an op run again and again (the profiler's repeats) may write
  // its inputs in place (BatchNormalization's running statistics in training), which must not
  // touch the engine's own tensors.
  auto copy_to = [&](const torch::Tensor& t) { return t.to(device, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true); };
  for (std::size_t s = 0; s < ids.size(); ++s) {
    const TensorId t = ids[s];
    if (t == kNoId) continue;
    const bool value_slot = impl->first_value_slot >= 0 && s >= static_cast<std::size_t>(impl->first_value_slot);
    if (folded_[t].defined()) {
      if (!value_slot) in[s] = copy_to(folded_[t]);
      continue;
    }
    if (!kept_[t].defined()) throw Error("tensor '" + graph_.tensor_name(t) + "' was not kept (internal error)");
    in[s] = value_slot ? kept_[t] : copy_to(kept_[t]);
  }
  return in;
}

void Engine::set_source_value(TensorId t, const torch::Tensor& v) {
  if (t >= sources_.size() || !sources_[t].defined()) throw Error("tensor '" + graph_.tensor_name(t) + "' is no data, parameter or buffer");
  const auto shape = graph_.tensor_shape(t);
  if (v.sizes() != c10::IntArrayRef(shape.data(), shape.size()) || v.scalar_type() != sources_[t].scalar_type())
    throw Error("tensor '" + graph_.tensor_name(t) + "': the value given has another shape or element type than the tensor's " +
                dims_text(shape) + " " + std::string(dtype_name(graph_.tensor_dtype(t))));
  torch::NoGradGuard no_grad;
  std::erase_if(drawn_settings_, [t](const auto& d) { return std::get<0>(d) == t; });  // given: its shapes are the model's
  const OpId layer = gate_reader_[t];
  sources_[t].copy_(layer == kNoId ? v : reorder_gates(v, cell_of(graph_.op_type(layer)), is_layer_bias(graph_, layer, t), true));
}

torch::Tensor Engine::source_value(TensorId t) const {
  if (t >= sources_.size() || !sources_[t].defined()) throw Error("tensor '" + graph_.tensor_name(t) + "' is no data, parameter or buffer");
  torch::NoGradGuard no_grad;
  const OpId layer = gate_reader_[t];
  return layer == kNoId ? sources_[t].detach() : reorder_gates(sources_[t], cell_of(graph_.op_type(layer)), is_layer_bias(graph_, layer, t), false);
}

std::vector<std::vector<float>> Engine::output_values() const {
  std::vector<std::vector<float>> out;
  for (const torch::Tensor& t : outputs_) {
    torch::Tensor c = t.detach().to(torch::kCPU).to(torch::kFloat).contiguous();
    out.emplace_back(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

}  // namespace detail

// ---- Public API -----------------------------------------------------------------------------------

void check_supported(const Graph& forward) {
  for (OpId op = 0; op < forward.num_forward_ops() && op < forward.num_ops(); ++op) {
    if (forward.op_outputs(op).empty() && forward.op_attrs(op).find("alias_of")) continue;
    const detail::OpImpl* impl = detail::find_op_impl(forward.op_type(op));
    if (!impl)
      throw Error("op '" + forward.op_name(op) + "' has type '" + forward.op_type(op) +
                  "', which the executor cannot run (docs/execution.md lists the supported types)");
    if (impl->check)
      if (std::string why = impl->check(forward, op); !why.empty()) throw Error(detail::op_label(forward, op) + ": " + why);
  }
}

StepTimes StepTimes::of(std::vector<double> times_s) {
  StepTimes s;
  s.times_s = times_s;
  if (times_s.empty()) return s;
  std::sort(times_s.begin(), times_s.end());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(times_s.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, times_s.size() - 1);
    return times_s[lo] + (pos - static_cast<double>(lo)) * (times_s[hi] - times_s[lo]);
  };
  s.median_s = at(0.5), s.p10_s = at(0.1), s.p90_s = at(0.9), s.min_s = times_s.front(), s.max_s = times_s.back();
  return s;
}

struct Executor::Impl {
  detail::Engine engine;
  std::vector<MeasuredMemory> memory;  // of the last measure()
};

Executor::Executor(const std::string& model_path, const ModelOptions& model, const Cluster& cluster,
                   std::span<const DeviceId> forward_devices, const ExecOptions& options)
    : impl_(std::make_unique<Impl>(Impl{detail::Engine(model_path, model, cluster, forward_devices, options), {}})) {}
Executor::~Executor() = default;
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;

const Graph& Executor::forward_graph() const { return impl_->engine.graph(); }
void Executor::step() { impl_->engine.step(); }

StepTrace Executor::trace_step() {
  impl_->engine.release_outputs();
  return impl_->engine.trace_step();
}

StepTimes Executor::measure(int steps, int warmup) {
  detail::Engine& e = impl_->engine;
  for (int i = 0; i < warmup; ++i) e.step();
  // What lives between steps (parameters, buffers, optimizer state, data), without the warm-up's
  // outputs, which the next step lets go of before it runs.
  e.release_outputs();
  // The memories the placement's devices run in, those this build can read: the host (index -1),
  // then CUDA devices by index.
  auto read = [](int index) { return index < 0 ? detail::read_host_memory() : detail::read_cuda_memory(index); };
  std::map<int, MeasuredMemory> by_index;
  for (DeviceId d : e.used_devices()) {
    const torch::Device device = e.torch_device(d);
    const int index = device.is_cuda() ? device.index() : -1;
    if (!read(index).measured) continue;
    auto [it, added] = by_index.try_emplace(index);
    if (added) it->second.memory = index < 0 ? "host" : "cuda:" + std::to_string(index);
    it->second.devices.push_back(d);
  }
  std::vector<MeasuredMemory> memory;
  std::vector<int> memory_index;  // per entry of `memory`: -1 (host) or the CUDA index
  for (auto& [index, m] : by_index) {
    std::sort(m.devices.begin(), m.devices.end());
    m.start_bytes = read(index).current_bytes;
    memory.push_back(std::move(m));
    memory_index.push_back(index);
  }

  std::vector<double> times;
  for (int i = 0; i < steps; ++i) {
    for (int index : memory_index) index < 0 ? detail::reset_host_peak() : detail::reset_cuda_peak(index);
    const auto start = std::chrono::steady_clock::now();
    e.step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (std::size_t k = 0; k < memory.size(); ++k) memory[k].peak_bytes = std::max(memory[k].peak_bytes, read(memory_index[k]).peak_bytes);
  }
  impl_->memory = std::move(memory);
  return StepTimes::of(std::move(times));
}

const std::vector<MeasuredMemory>& Executor::measured_memory() const { return impl_->memory; }

std::vector<std::vector<float>> Executor::output_values() const { return impl_->engine.output_values(); }

void Executor::set_input(std::string_view name, const std::string& tensor_file) {
  detail::Engine& e = impl_->engine;
  const TensorId t = e.graph().find_tensor(name);
  if (t == kNoId) throw Error("no tensor named '" + std::string(name) + "'");
  std::ifstream in(tensor_file, std::ios::binary);
  onnx::TensorProto proto;
  if (!in || !proto.ParseFromIstream(&in)) throw Error("cannot read a tensor from '" + tensor_file + "'");
  e.set_source_value(t, detail::tensor_from_proto(proto, "tensor file '" + tensor_file + "'"));
}

std::vector<float> Executor::parameter_value(std::string_view name) const {
  const detail::Engine& e = impl_->engine;
  const TensorId t = e.graph().find_tensor(name);
  if (t == kNoId || !e.is_source(t)) throw Error("no parameter named '" + std::string(name) + "'");
  torch::Tensor c = e.source_value(t).to(torch::kCPU).to(torch::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

std::vector<std::string> Executor::parameter_names() const {
  std::vector<std::string> names;
  for (TensorId t : impl_->engine.parameter_ids()) names.push_back(impl_->engine.graph().tensor_name(t));
  return names;
}

double Executor::last_loss() const { return impl_->engine.last_loss(); }
std::size_t Executor::copies_last_step() const { return impl_->engine.copies_last_step(); }

}  // namespace placer::exec
