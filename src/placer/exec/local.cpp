// Threads and the `local` cluster preset: the machine placer runs on, detected from /proc and
// measured by short libtorch benchmarks (docs/execution.md, "The local preset").
#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "placer/cost/cost_model.hpp"
#include "placer/exec/exec.hpp"
#include "placer/graph/op_work.hpp"
#include "placer/util/error.hpp"
#include "placer/util/host.hpp"
#include "placer/util/text.hpp"

namespace placer::exec {
namespace {

bool g_threads_configured = false;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Best of a few timed runs of `body` (each run `reps` calls), seconds per call.
template <typename F>
double best_time_s(const torch::Device& device, int reps, int runs, F body) {
  body();
  sync(device);
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) body();
    sync(device);
    best = std::min(best, seconds_since(start) / reps);
  }
  return best;
}

// A kernel timed alone: its op type (a gradient by its own type), the work the cost model gives
// it, and its time.
struct TimedKernel {
  std::string type;
  bool gradient = false;
  OpWork work;
  double seconds = 0;
};

struct Measured {
  double peak_flops = 0, bandwidth = 0, overhead_s = 0;
  double product_flops = 0, convolution_flops = 0;  // the two rates the peak is the better of
  // CPUs: the rate of a mix of convolutions (below), the conv class's; 0 where not measured.
  double convolution_mix_flops = 0;
  double convolution_1x1_flops = 0;                 // CPUs: the 1x1 convolution of the mix (the 3x3 one: convolution_flops)
  std::vector<TimedKernel> kernels;                 // CPUs: kernels no class prices (below)
  double backward_overhead_s = -1;                  // per autograd node of a backward pass; -1: not measured
  std::vector<Device::BandwidthPoint> bandwidth_by_size;
  // CPUs: products by their smallest dimension (below): (rows, FLOP/s beyond the per-op overhead).
  std::vector<std::pair<std::uint64_t, double>> product_rates;
};

// The peak: the best fp32 throughput libtorch reaches on the device, of a large matrix product
// (the presets' definition) and a large 3x3 convolution. Products and convolutions run in different
// libraries (BLAS; oneDNN on CPUs), and where the BLAS picks a slow kernel the product alone is
// far below what convolutions reach: on a KVM machine whose CPU OpenBLAS did not recognise (it ran
// its generic "Prescott" kernel) products ran at 12-29 GFLOP/s and convolutions at about 110, so a
// fit gave convolutions an efficiency of 4, its ceiling, and priced them at 4x a peak that moved
// from run to run (found by a review). Best of five runs each.
void measure_peak(const torch::Device& device, Measured& m) {
  torch::NoGradGuard no_grad;
  const bool gpu = device.is_cuda();
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  const std::int64_t n = gpu ? 4096 : 768;
  torch::Tensor a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts), c = torch::empty({n, n}, opts);
  const double mm_s = best_time_s(device, gpu ? 20 : 3, 5, [&] { torch::mm_out(c, a, b); });
  const double mm = 2.0 * static_cast<double>(n) * n * n / mm_s;
  // [batch, 64, 56, 56] through 64 3x3 filters (a ResNet stage): 1.85 GFLOP at batch 8.
  const std::int64_t batch = gpu ? 64 : 8, ch = 64, hw = 56;
  torch::Tensor x = torch::randn({batch, ch, hw, hw}, opts), w = torch::randn({ch, ch, 3, 3}, opts);
  const double conv_s = best_time_s(device, gpu ? 20 : 2, 5, [&] { (void)torch::conv2d(x, w, {}, 1, 1); });
  const double conv = 2.0 * static_cast<double>(batch) * ch * hw * hw * ch * 9 / conv_s;
  m.product_flops = mm, m.convolution_flops = conv;
  m.peak_flops = std::max(mm, conv);
  if (!gpu) {
    // A CPU's convolutions run at rates that depend on their shape: a ResNet bottleneck's 1x1
    // convolution, [16, 256, 56, 56] to 64 channels, ran at 119-125 GFLOP/s on a 2-core AMD machine
    // where the 3x3 one above ran at 183-194 (at batch 8 the 1x1 one ran at 87: libtorch takes
    // another path under batch 16). The conv class is priced at the two's time-weighted mean (the
    // harmonic mean of their rates): a mix of 3x3 and 1x1 layers as ResNets and Inceptions have.
    torch::Tensor x1 = torch::randn({16, 256, 56, 56}, opts), w1 = torch::randn({64, 256, 1, 1}, opts);
    const double conv1_s = best_time_s(device, 1, 3, [&] { (void)torch::conv2d(x1, w1); });
    const double conv1 = 2.0 * 16 * 256 * 56 * 56 * 64 / conv1_s;
    m.convolution_mix_flops = 2.0 / (1.0 / conv + 1.0 / conv1);
    m.convolution_1x1_flops = conv1;
  }
}

// A CPU's products by their smallest dimension: the BLAS runs a thin product far below a large
// one's rate (on a 2-core AMD machine on 2026-12-01, an LSTM language model's per-step products,
// [64, 2048] by a [8192, 2048] weight, ran at 79 GFLOP/s in its step; that weight alone, timed
// here, gave 44 GFLOP/s on 8 rows and 59 on 16, where a 768-square product ran at 105). Timed as
// the executor runs a Gemm with transB (PyTorch's Linear): addmm of a bias and the transpose of a
// weight of a recurrent layer's size (64 MiB, past the caches as a model's weights are), at rows 8
// to 256; at 1024 rows (a 16 MiB weight, 1024 to 4096 features, 8.6 GFLOP like the 256 rows') the
// large products of a transformer. The work is the cost model's (op_work's Gemm with C); best of
// 2 runs.
void measure_products(Measured& m) {
  const torch::Device cpu(torch::kCPU);
  torch::NoGradGuard no_grad;
  auto timed = [&](std::int64_t rows, const torch::Tensor& w, const torch::Tensor& bias) {
    const std::int64_t n = w.size(0), k = w.size(1);
    torch::Tensor x = torch::randn({rows, k});
    Attributes trans_b;
    trans_b.set(Attribute{.name = "transB", .kind = Attribute::Kind::integer, .i = 1});
    const std::vector<std::int64_t> x_shape{rows, k}, w_shape{n, k}, bias_shape{n}, y_shape{rows, n};
    const TensorDesc ins[3] = {{x_shape, DType::f32}, {w_shape, DType::f32}, {bias_shape, DType::f32}}, out{y_shape, DType::f32};
    const double flops = op_work("Gemm", trans_b, ins, std::span(&out, 1)).flops;
    const double seconds = best_time_s(cpu, 1, 2, [&] { (void)torch::addmm(bias, x, w.t()); }) - m.overhead_s;
    if (seconds > 0) m.product_rates.push_back({static_cast<std::uint64_t>(rows), flops / seconds});
  };
  {
    const torch::Tensor w = torch::randn({8192, 2048}), bias = torch::randn({8192});
    for (const std::int64_t rows : {8, 16, 32, 64, 128, 256}) timed(rows, w, bias);
  }
  timed(1024, torch::randn({4096, 1024}), torch::randn({4096}));
}

// Attributes of a 2-D pooling window.
Attributes pool_attributes(std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
  Attributes a;
  a.set(Attribute{.name = "kernel_shape", .kind = Attribute::Kind::integers, .ints = {kernel, kernel}});
  a.set(Attribute{.name = "strides", .kind = Attribute::Kind::integers, .ints = {stride, stride}});
  a.set(Attribute{.name = "pads", .kind = Attribute::Kind::integers, .ints = {pad, pad, pad, pad}});
  return a;
}

// A kernel timed alone with the work the cost model gives its op (a gradient: its forward type's
// backward work, every input needing a gradient).
// `key`, when given, is the efficiency's key where it is not the type (priced_type).
void add_kernel(Measured& m, std::string type, bool gradient, const Attributes& attrs, const std::vector<std::vector<std::int64_t>>& in_shapes,
                const std::vector<std::int64_t>& out_shape, double seconds, std::string_view key = {}) {
  std::vector<TensorDesc> ins;
  for (const auto& shape : in_shapes) ins.push_back(TensorDesc{shape, DType::f32});
  const TensorDesc out{out_shape, DType::f32};
  if (gradient && !type.ends_with("Grad")) throw Error("add_kernel: a gradient's type ends in Grad, got " + type);
  const std::string forward = gradient ? type.substr(0, type.size() - 4) : type;
  static constexpr bool kAll[5] = {true, true, true, true, true};
  if (ins.size() > std::size(kAll)) throw Error("add_kernel: at most 5 inputs");
  const std::span<const bool> need_span(kAll, ins.size());
  OpWork w = gradient ? backward_work(forward, attrs, ins, std::span(&out, 1), need_span) : op_work(forward, attrs, ins, std::span(&out, 1));
  m.kernels.push_back({key.empty() ? std::move(type) : std::string(key), gradient, w, seconds});
}

std::vector<std::int64_t> shape_of(const torch::Tensor& t) { return std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()); }

// A CPU gradient's time through autograd, as the executor's backward runs it: d`inputs` of `y` for
// a random dY, best of 3.
double gradient_s(const torch::Tensor& y, const std::vector<torch::Tensor>& inputs) {
  const torch::Tensor dy = torch::randn_like(y);
  return best_time_s(torch::Device(torch::kCPU), 1, 3, [&] { (void)torch::autograd::grad({y}, inputs, {dy}, /*retain_graph=*/true); });
}

// Pointwise and row kernels of transformers and recurrent layers that a CPU runs far below their
// class (BERT-base's training step profiled on a 2-core AMD machine on 2026-12-01: Erf took 3.5 ns
// per element and its gradient 3.3, Softmax 0.9, LayerNormalization 0.5, where a Relu takes 0.1;
// their classes priced them at 0.06-0.4 of their time, 5% of the step). Timed alone: Erf, its
// gradient, Tanh and Sigmoid on [4, 128, 3072] (a transformer's hidden activation); Softmax over
// the last axis of [8, 12, 128, 128] (attention scores); LayerNormalization over the last axis of
// [8, 128, 768] with scale and bias; gradients through autograd, as the executor's backward runs.
void measure_row_kernels(Measured& m) {
  const torch::Device cpu(torch::kCPU);
  torch::AutoGradMode grad_mode(true);
  Attributes last_axis;
  last_axis.set(Attribute{.name = "axis", .kind = Attribute::Kind::integer, .i = -1});
  {
    torch::Tensor x = torch::randn({4, 128, 3072}).requires_grad_(true);
    const auto shape = shape_of(x);
    {
      torch::NoGradGuard no_grad;
      add_kernel(m, "Erf", false, {}, {shape}, shape, best_time_s(cpu, 1, 3, [&] { (void)torch::erf(x); }));
      add_kernel(m, "Tanh", false, {}, {shape}, shape, best_time_s(cpu, 1, 3, [&] { (void)torch::tanh(x); }));
      add_kernel(m, "Sigmoid", false, {}, {shape}, shape, best_time_s(cpu, 1, 3, [&] { (void)torch::sigmoid(x); }));
    }
    add_kernel(m, "ErfGrad", true, {}, {shape}, shape, gradient_s(torch::erf(x), {x}));
  }
  {
    torch::Tensor x = torch::randn({8, 12, 128, 128}).requires_grad_(true);
    const auto shape = shape_of(x);
    {
      torch::NoGradGuard no_grad;
      add_kernel(m, "Softmax", false, last_axis, {shape}, shape, best_time_s(cpu, 1, 3, [&] { (void)torch::softmax(x, -1); }));
    }
    add_kernel(m, "SoftmaxGrad", true, last_axis, {shape}, shape, gradient_s(torch::softmax(x, -1), {x}));
  }
  {
    torch::Tensor x = torch::randn({8, 128, 768}).requires_grad_(true), w = torch::randn({768}).requires_grad_(true),
                  b = torch::randn({768}).requires_grad_(true);
    const auto shape = shape_of(x);
    const std::vector<std::vector<std::int64_t>> ins{shape, {768}, {768}};
    {
      torch::NoGradGuard no_grad;
      add_kernel(m, "LayerNormalization", false, last_axis, ins, shape,
                 best_time_s(cpu, 1, 3, [&] { (void)torch::layer_norm(x, {768}, w, b, 1e-5, true); }));
    }
    add_kernel(m, "LayerNormalizationGrad", true, last_axis, ins, shape, gradient_s(torch::layer_norm(x, {768}, w, b, 1e-5, true), {x, w, b}));
  }
}

// Image kernels that libtorch's CPU runs in kernels of their own, far below their class (a QA pass
// over twelve architectures, 2026-12-02, one thread of a 2-core virtual machine, per op against the
// cost model): a depthwise convolution (MobileNetV2's, 3x3, one channel per group) and its gradient
// took 3.9 and 4.3 times what the dense convolutions' rate priced; a transposed convolution (U-Net's
// 2x2, stride 2) 2.1-2.7 times; a reflect pad and its gradient 8-10 times what a copy's bandwidth
// priced; InstanceNormalization 7 times. Each timed alone on a shape of those models with the work
// the cost model gives it, gradients through autograd as the executor's backward runs them.
void measure_image_kernels(Measured& m) {
  const torch::Device cpu(torch::kCPU);
  auto ints = [](std::string name, std::vector<std::int64_t> v) {
    return Attribute{.name = std::move(name), .kind = Attribute::Kind::integers, .ints = std::move(v)};
  };
  torch::AutoGradMode grad_mode(true);
  for (const std::int64_t stride : {1, 2}) {
    // Depthwise 3x3, pad 1, on [4, 96, 56, 56] (MobileNetV2's second block), at strides 1 and 2
    // (the second runs at a third of the first's rate per FLOP: its time follows its input).
    const std::int64_t c = 96;
    torch::Tensor x = torch::randn({4, c, 56, 56}).requires_grad_(true), w = torch::randn({c, 1, 3, 3}).requires_grad_(true);
    Attributes a;
    a.set(Attribute{.name = "group", .kind = Attribute::Kind::integer, .i = c});
    a.set(ints("pads", {1, 1, 1, 1}));
    a.set(ints("kernel_shape", {3, 3}));
    a.set(ints("strides", {stride, stride}));
    auto conv = [&] { return torch::conv2d(x, w, {}, stride, 1, 1, c); };
    const torch::Tensor y = conv();
    const std::vector<std::vector<std::int64_t>> ins{shape_of(x), shape_of(w)};
    {
      torch::NoGradGuard no_grad;
      add_kernel(m, "Conv", false, a, ins, shape_of(y), best_time_s(cpu, 1, 3, [&] { (void)conv(); }),
                 stride == 1 ? kDepthwiseConv : kStridedDepthwiseConv);
    }
    add_kernel(m, "ConvGrad", true, a, ins, shape_of(y), gradient_s(y, {x, w}), stride == 1 ? kDepthwiseConvGrad : kStridedDepthwiseConvGrad);
  }
  {
    // Transposed 2x2, stride 2, with a bias: [4, 128, 16, 16] to 64 channels (U-Net's up-sampling).
    torch::Tensor x = torch::randn({4, 128, 16, 16}).requires_grad_(true), w = torch::randn({128, 64, 2, 2}).requires_grad_(true),
                  b = torch::randn({64}).requires_grad_(true);
    Attributes a;
    a.set(ints("strides", {2, 2}));
    a.set(ints("kernel_shape", {2, 2}));
    auto up = [&] { return torch::conv_transpose2d(x, w, b, 2); };
    const torch::Tensor y = up();
    const std::vector<std::vector<std::int64_t>> ins{shape_of(x), shape_of(w), {64}};
    {
      torch::NoGradGuard no_grad;
      add_kernel(m, "ConvTranspose", false, a, ins, shape_of(y), best_time_s(cpu, 1, 3, [&] { (void)up(); }));
    }
    add_kernel(m, "ConvTransposeGrad", true, a, ins, shape_of(y), gradient_s(y, {x, w, b}));
  }
  {
    // Reflect and edge pads of 1 around [4, 64, 32, 32] (a style network's), and
    // InstanceNormalization with scale and bias on it.
    torch::Tensor x = torch::randn({4, 64, 32, 32}).requires_grad_(true);
    namespace F = torch::nn::functional;
    for (const bool reflect : {true, false}) {
      Attributes a;
      a.set(Attribute{.name = "mode", .kind = Attribute::Kind::text, .s = reflect ? "reflect" : "edge"});
      a.set(ints("pads", {0, 0, 1, 1, 0, 0, 1, 1}));
      auto options = F::PadFuncOptions({1, 1, 1, 1});
      if (reflect) options.mode(torch::kReflect);
      else options.mode(torch::kReplicate);
      const torch::Tensor y = F::pad(x, options);
      {
        torch::NoGradGuard no_grad;
        add_kernel(m, "Pad", false, a, {shape_of(x)}, shape_of(y), best_time_s(cpu, 1, 3, [&] { (void)F::pad(x, options); }),
                   reflect ? kReflectPad : kEdgePad);
      }
      add_kernel(m, "PadGrad", true, a, {shape_of(x)}, shape_of(y), gradient_s(y, {x}), reflect ? kReflectPadGrad : kEdgePadGrad);
    }
    torch::Tensor scale = torch::randn({64}).requires_grad_(true), bias = torch::randn({64}).requires_grad_(true);
    auto norm = [&] { return torch::instance_norm(x, scale, bias, {}, {}, true, 0.0, 1e-5, true); };
    const std::vector<std::vector<std::int64_t>> ins{shape_of(x), {64}, {64}};
    {
      torch::NoGradGuard no_grad;
      add_kernel(m, "InstanceNormalization", false, {}, ins, shape_of(x), best_time_s(cpu, 1, 3, [&] { (void)norm(); }));
    }
    add_kernel(m, "InstanceNormalizationGrad", true, {}, ins, shape_of(x), gradient_s(norm(), {x, scale, bias}));
  }
}

// Kernels of a CPU that no roofline class prices: libtorch's CPU pooling runs far below its class
// (MaxPool about 2.8 ns per window element, against 0.1 ns per element for a Relu, on a 2-core AMD
// machine on 2026-11-30: an Inception-V3's pools took 20 times what their class priced). Timed
// alone on a [4, 64, 56, 56] input, forward and gradient, with the work the cost model gives them.
void measure_cpu_kernels(Measured& m) {
  const torch::Device cpu(torch::kCPU);
  auto opts = torch::TensorOptions().dtype(torch::kFloat);
  const std::int64_t n = 4, c = 64, hw = 56;
  torch::Tensor x = torch::randn({n, c, hw, hw}, opts);
  const std::vector<std::int64_t> x_shape{n, c, hw, hw};
  auto timed = [&](std::string type, const Attributes& attrs, std::vector<std::int64_t> out_shape, bool gradient, double seconds) {
    add_kernel(m, std::move(type), gradient, attrs, {x_shape}, out_shape, seconds);
  };
  {
    // ONNX's MaxPool 3x3, stride 2, pad 1 (ResNet's): torch's max_pool2d, and in training
    // max_pool2d_with_indices; the gradient scatters by the indices.
    const Attributes a = pool_attributes(3, 2, 1);
    torch::NoGradGuard no_grad;
    auto [y, indices] = torch::max_pool2d_with_indices(x, {3, 3}, {2, 2}, {1, 1});
    torch::Tensor dy = torch::randn_like(y);
    const std::vector<std::int64_t> y_shape(y.sizes().begin(), y.sizes().end());
    // Both forms timed, the slower kept (profiles of small models saw 4.9-7.2 ns per element for
    // the form with indices; this benchmark, the same as without).
    const double plain_s = best_time_s(cpu, 2, 3, [&] { (void)torch::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}); });
    const double with_indices_s = best_time_s(cpu, 2, 3, [&] { (void)torch::max_pool2d_with_indices(x, {3, 3}, {2, 2}, {1, 1}); });
    timed("MaxPool", a, y_shape, false, std::max(plain_s, with_indices_s));
    timed("MaxPoolGrad", a, y_shape, true, best_time_s(cpu, 2, 3, [&] {
            (void)torch::max_pool2d_with_indices_backward(dy, x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, indices);
          }));
  }
  {
    // AveragePool 3x3, stride 1, pad 1 (Inception's shape), padding not counted (ONNX's default;
    // torchvision's Inception exports it counted, the same kernel).
    const Attributes a = pool_attributes(3, 1, 1);
    torch::NoGradGuard no_grad;
    torch::Tensor y = torch::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, false, false);
    torch::Tensor dy = torch::randn_like(y);
    timed("AveragePool", a, x_shape, false, best_time_s(cpu, 2, 3, [&] { (void)torch::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, false, false); }));
    timed("AveragePoolGrad", a, x_shape, true, best_time_s(cpu, 2, 3, [&] {
            (void)torch::avg_pool2d_backward(dy, x, {3, 3}, {1, 1}, {1, 1}, false, false, c10::nullopt);
          }));
  }
  {
    // BatchNormalization by its batch's statistics (a training step's forward): libtorch's CPU
    // kernel runs far below its class, which priced it as if by running statistics (1.45 ns per
    // element here on a 2-core AMD machine, 2026-12-01; ResNet-50's training step's norms at 0.19
    // of their profiled time, docs/execution.md).
    Attributes a;
    a.set(Attribute{.name = "training_mode", .kind = Attribute::Kind::integer, .i = 1});
    torch::NoGradGuard no_grad;
    const torch::Tensor w = torch::randn({c}, opts), b = torch::randn({c}, opts);
    torch::Tensor mean = torch::zeros({c}, opts), var = torch::ones({c}, opts);
    add_kernel(m, "BatchNormalization", false, a, {x_shape, {c}, {c}, {c}, {c}}, x_shape,
               best_time_s(cpu, 2, 3, [&] { (void)torch::batch_norm(x, w, b, mean, var, true, 0.1, 1e-5, true); }),
               kTrainingBatchNormalization);
  }
  {
    // Their gradients through autograd (native_batch_norm_backward, by the batch's statistics):
    // 1.9-3.2 times what their class priced in the QA pass's CNNs, 2026-12-02 (ResNet-50's at 0.34
    // of their profiled time, docs/execution.md). And GlobalAveragePool's (a mean's: dY expanded
    // and divided, 6-10 times its class's price there), on [4, 64, 56, 56].
    torch::AutoGradMode grad_mode(true);
    torch::Tensor xg = x.clone().requires_grad_(true), w = torch::randn({c}, opts).requires_grad_(true),
                  b = torch::randn({c}, opts).requires_grad_(true);
    torch::Tensor mean = torch::zeros({c}, opts), var = torch::ones({c}, opts);
    const torch::Tensor y = torch::batch_norm(xg, w, b, mean, var, true, 0.1, 1e-5, true), dy = torch::randn_like(y);
    add_kernel(m, "BatchNormalizationGrad", true, {}, {x_shape, {c}, {c}, {c}, {c}}, x_shape,
               best_time_s(cpu, 2, 3, [&] { (void)torch::autograd::grad({y}, {xg, w, b}, {dy}, /*retain_graph=*/true); }));
    const torch::Tensor pooled = xg.mean({2, 3}, true), dp = torch::randn_like(pooled);
    add_kernel(m, "GlobalAveragePoolGrad", true, {}, {x_shape}, {n, c, 1, 1},
               best_time_s(cpu, 2, 3, [&] { (void)torch::autograd::grad({pooled}, {xg}, {dp}, /*retain_graph=*/true); }));
  }
  measure_row_kernels(m);
  measure_image_kernels(m);
}

// The autograd engine's fixed cost per node: a backward pass through a chain of one-element adds
// (each node passes its gradient on and launches no kernel), per node. In an eager framework a
// gradient pays this beside its kernels' launch (docs/execution.md#the-local-preset).
double backward_overhead_s(const torch::Device& device) {
  constexpr int kNodes = 200;
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  torch::Tensor x = torch::ones({1}, opts.requires_grad(true)), one = torch::ones({1}, opts);
  double best = std::numeric_limits<double>::infinity();
  for (int run = 0; run < 6; ++run) {
    torch::Tensor y = x;
    for (int i = 0; i < kNodes; ++i) y = y + one;
    sync(device);
    const auto start = std::chrono::steady_clock::now();
    y.backward();
    sync(device);
    if (run > 0) best = std::min(best, seconds_since(start) / kNodes);  // the first run warms the engine
    x.mutable_grad().reset();
  }
  return best;
}

// The peak (above), a streaming copy (read + write bytes), and a one-element add (the framework's
// fixed cost per op). About a second on a CPU.
Measured measure_device(const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const bool gpu = device.is_cuda();
  Measured m;
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  measure_peak(device, m);
  if (!gpu) measure_cpu_kernels(m);
  const std::int64_t elems = gpu ? (64ll << 20) : (8ll << 20);
  torch::Tensor src = torch::ones({elems}, opts), dst = torch::empty({elems}, opts);
  const double copy_s = best_time_s(device, gpu ? 20 : 4, 3, [&] { dst.copy_(src); });
  m.bandwidth = 2.0 * static_cast<double>(elems) * 4.0 / copy_s;
  torch::Tensor x = torch::ones({1}, opts), y = torch::ones({1}, opts);
  m.overhead_s = best_time_s(device, 2000, 3, [&] { torch::add(x, y); });
  if (!gpu) measure_products(m);
  // On a CPU, what its caches give a smaller working set: the same copy of 512 KiB to 32 MiB in
  // all (read + written), a one-element copy's time taken off (the cost model adds the per-op
  // overhead), never below the bandwidth of a larger one. (GPUs: not measured; their small copies
  // are launch-bound.)
  if (!gpu) {
    // The fixed cost of a copy (a one-element add allocates its result; a copy does not).
    torch::Tensor one = torch::ones({1}, opts), into = torch::empty({1}, opts);
    const double copy_overhead_s = best_time_s(device, 2000, 3, [&] { into.copy_(one); });
    for (std::int64_t bytes = 512 << 10; bytes <= (32ll << 20); bytes *= 4) {
      const std::int64_t n = bytes / 8;  // floats per buffer: two buffers of bytes / 2
      torch::Tensor a = torch::ones({n}, opts), b = torch::empty({n}, opts);
      const int reps = static_cast<int>(std::max<std::int64_t>(4, (64ll << 20) / bytes));
      const double raw = best_time_s(device, reps, 3, [&] { b.copy_(a); });
      // A point whose fixed cost is half its time or more says more about the overhead than about
      // the bandwidth: left out (the curve's first point then covers smaller sizes).
      const double t = raw - copy_overhead_s;
      if (t > 0.5 * raw) m.bandwidth_by_size.push_back({static_cast<std::uint64_t>(bytes), static_cast<double>(bytes) / t});
    }
    double floor = m.bandwidth;
    for (auto it = m.bandwidth_by_size.rbegin(); it != m.bandwidth_by_size.rend(); ++it) floor = it->bytes_per_s = std::max(it->bytes_per_s, floor);
  }
  {
    torch::AutoGradMode grad(true);
    // A gradient is a node and at least one kernel (the chain's nodes pass their gradient on and launch none).
    m.backward_overhead_s = m.overhead_s + backward_overhead_s(device);
  }
  return m;
}

// A device measured above, with what the peak alone cannot say: the per-node cost of gradients,
// and, of products and convolutions, the one slower than the peak reaches the cost model's
// efficiency for its class in that proportion (on a 2-core AMD machine on 2026-11-30, products
// ran at 100 GFLOP/s and convolutions at 185: priced at the convolutions' peak, the products of
// seventeen models' training steps took 1.8 times their model, docs/execution.md#the-local-preset).
Device measured_device(std::string name, DeviceKind kind, std::string model, const Measured& m, std::uint64_t memory) {
  Device d{std::move(name), kind, std::move(model), m.peak_flops, m.bandwidth, memory, m.overhead_s, 1};
  const CostModel defaults = CostModel::defaults();
  for (const auto& [cls, rate] : {std::pair{OpClass::matmul, m.product_flops}, std::pair{OpClass::conv, m.convolution_flops}})
    if (rate > 0 && rate < m.peak_flops) {
      d.efficiency[static_cast<std::size_t>(cls)].compute = defaults.of(kind, cls).compute * rate / m.peak_flops;
    }
  // Where a mix of convolutions was measured, the class runs at that mix's rate: measured on the
  // shapes models have, it takes no default fraction (which priced the 3x3 convolutions of VGG-16 at
  // half the rate they ran at, docs/execution.md#the-local-preset).
  if (m.convolution_mix_flops > 0)
    d.efficiency[static_cast<std::size_t>(OpClass::conv)].compute = std::min(1.0, m.convolution_mix_flops / m.peak_flops);
  d.backward_op_overhead_s = m.backward_overhead_s;
  d.bandwidth_by_size = m.bandwidth_by_size;
  // Products by their smallest dimension at their measured rates, no default fraction (the matmul
  // class's efficiency above still prices the class's other ops: Einsum).
  for (const auto& [rows, rate] : m.product_rates)
    d.product_efficiency_by_size.push_back({rows, std::min(1.0, rate / m.peak_flops)});
  // Ungrouped convolutions by their kernel: the 1x1 and 3x3 ones of the mix at their own rates (a
  // 7x1 between them in log(area), a 5x5 or 7x7 at the 3x3's); the mix still prices the others
  // (grouped; depthwise and transposed ones where their own entries below price them). VGG-16's 3x3
  // convolutions took 0.77 of what the mix priced them at.
  if (m.convolution_1x1_flops > 0 && m.convolution_flops > 0)
    d.conv_efficiency_by_kernel = {{1, std::min(1.0, m.convolution_1x1_flops / m.peak_flops)}, {9, std::min(1.0, m.convolution_flops / m.peak_flops)}};
  // A kernel slower than its class's roofline gets an efficiency of its own type, so that its FLOPs
  // (a copy's bytes: the pads) take its measured time.
  for (const TimedKernel& k : m.kernels)
    if (auto e = type_efficiency_for(k.work, d, defaults, k.gradient, k.seconds)) d.efficiency_by_type[k.type] = *e;
  return d;
}

std::uint64_t memory_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 8ull << 30;
}

// GPU memory through the CUDA runtime libtorch loaded (no CUDA headers needed at build time).
std::uint64_t gpu_memory_bytes(int index) {
  using SetDevice = int (*)(int);
  using MemGetInfo = int (*)(std::size_t*, std::size_t*);
  auto set_device = reinterpret_cast<SetDevice>(dlsym(RTLD_DEFAULT, "cudaSetDevice"));
  auto mem_get_info = reinterpret_cast<MemGetInfo>(dlsym(RTLD_DEFAULT, "cudaMemGetInfo"));
  std::size_t free_bytes = 0, total_bytes = 0;
  if (set_device && mem_get_info && set_device(index) == 0 && mem_get_info(&free_bytes, &total_bytes) == 0) return total_bytes;
  return 16ull << 30;  // unknown: docs/execution.md
}

// The GPU's own name ("NVIDIA H100 80GB HBM3") through the CUDA driver libtorch's runtime loaded
// (cuDeviceGet, cuDeviceGetName: no CUDA headers at build time), so that profiles of two GPU
// machines tell their GPUs apart (a profile's `machine` names each device's model); "" when the
// driver is not loaded or does not say.
std::string gpu_name(int index) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!driver) return "";
  using DeviceGet = int (*)(int*, int);
  using DeviceGetName = int (*)(char*, int, int);
  auto get = reinterpret_cast<DeviceGet>(dlsym(driver, "cuDeviceGet"));
  auto get_name = reinterpret_cast<DeviceGetName>(dlsym(driver, "cuDeviceGetName"));
  char name[256] = {};
  int device = 0;
  std::string result;
  if (get && get_name && get(&device, index) == 0 && get_name(name, static_cast<int>(sizeof name) - 1, device) == 0) result = name;
  dlclose(driver);  // the reference RTLD_NOLOAD took
  return result;
}

// `measure`: false gives the layout alone (local_cluster_layout): every measured figure 1 (FLOP/s,
// bytes/s), overheads and latencies 0.
Cluster build_local(bool measure) {
  // The threads a command asked for (--threads) stay: detecting the machine once reset them to the
  // default, so `run --threads 2 --cluster local` ran on one thread while reporting two.
  if (!g_threads_configured) configure_threads(0);
  std::vector<Device> devices;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const Measured unmeasured{.peak_flops = 1, .bandwidth = 1};
  const Measured cpu = measure ? measure_device(torch::kCPU) : unmeasured;
  devices.push_back(measured_device("cpu:0", DeviceKind::cpu,
                                    host_cpu_model() + " (" + std::to_string(cores) + " hardware threads, " +
                                        std::to_string(torch::get_num_threads()) + " used by libtorch)",
                                    cpu, memory_total_bytes()));
  std::vector<std::string> switches;
  std::vector<Link> links;
  if (torch::cuda::is_available()) {
    const auto count = static_cast<int>(torch::cuda::device_count());
    if (count > 0) switches.push_back("host");
    links.push_back(Link{"cpu:0<->host", "cpu:0", "host", cpu.bandwidth, cpu.bandwidth, 0});
    for (int g = 0; g < count; ++g) {
      const torch::Device dev(torch::kCUDA, static_cast<c10::DeviceIndex>(g));
      const Measured m = measure ? measure_device(dev) : unmeasured;
      const std::string name = "gpu:" + std::to_string(g);
      const std::string own = gpu_name(g);
      devices.push_back(measured_device(name, DeviceKind::gpu, (own.empty() ? "" : own + ", ") + "CUDA device " + std::to_string(g), m,
                                        gpu_memory_bytes(g)));
      if (!measure) {
        links.push_back(Link{name + "<->host", name, "host", 1, 1, 0});
        continue;
      }
      // Host link: pageable 64 MiB copies each way for bandwidth, a 4-byte copy for latency.
      torch::Tensor host = torch::ones({16ll << 20}), small = torch::ones({1});
      torch::Tensor on_gpu = host.to(dev);
      const double h2d = best_time_s(dev, 3, 3, [&] { on_gpu.copy_(host); });
      const double d2h = best_time_s(dev, 3, 3, [&] { host.copy_(on_gpu); });
      const double latency = best_time_s(dev, 200, 3, [&] { (void)small.to(dev); });
      const double bytes = static_cast<double>(host.numel()) * 4.0;
      links.push_back(Link{name + "<->host", name, "host", bytes / d2h, bytes / h2d, latency});
    }
  }
  if (switches.empty()) links.clear();
  return Cluster::build("local", std::move(devices), std::move(switches), std::move(links));
}

}  // namespace

namespace detail {
void ensure_threads() {
  if (!g_threads_configured) configure_threads(0);
}
}  // namespace detail

// Host memory is kept by the process once allocated, as libtorch's CUDA caching allocator keeps GPU
// memory: glibc otherwise maps every tensor above its mmap threshold (at most 32 MiB, adapted at run
// time) afresh and unmaps it when freed, so every step page-faults its large activations again. On a
// 16-core H100 machine that made an all-CPU ResNet-50 inference step 2.3 times slower (1434 ms
// against 613 ms) and its time depend on what else the step allocated (docs/execution.md).
// Trimming is off altogether (-1, glibc's documented value): a threshold of INT_MAX (2 GiB) still
// gave back the top of the heap whenever a step freed more than that at once, and VGG-16's
// inference step (4 GiB of activations at batch 32) page-faulted about 2 GiB again every step:
// 535,000 minor faults and 3.5 s of system time per 13 s step on a 2-core machine.
static void keep_host_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, std::numeric_limits<int>::max());
    mallopt(M_TRIM_THRESHOLD, -1);
    mallopt(M_TOP_PAD, 64 << 20);
  });
}

int configure_threads(int requested) {
  keep_host_memory();
  int n = requested;
  if (n <= 0) {
    if (const char* env = std::getenv("PLACER_THREADS"); env && *env) {
      const std::string text = env;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size() || n < 0 || n > (1 << 16))
        throw Error("PLACER_THREADS='" + text + "' is not a number of threads (0 to 65536; 0: the default)");
      // A setting of the environment, shared by machines of every size: at most this one's.
      if (const unsigned hw = std::thread::hardware_concurrency(); hw > 0 && static_cast<unsigned>(n) > hw) n = static_cast<int>(hw);
    }
    // One hardware thread is left to the rest of the machine: on a 2-core machine a second OpenMP
    // thread that shares its core with anything else stalls every parallel region (docs/execution.md).
    if (n <= 0) n = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()) - 1);
  }
  // More threads than the machine runs at once only contend, and OpenBLAS reserves a buffer per
  // thread (1000 threads reserved 27 GB of address space; under a memory limit it retried forever).
  if (const unsigned hw = std::thread::hardware_concurrency(); hw > 0 && static_cast<unsigned>(n) > hw)
    throw Error("--threads " + std::to_string(n) + ": more intra-op threads than this machine's " + std::to_string(hw) +
                " hardware threads");
  torch::set_num_threads(n);
  // OpenBLAS (Debian's libtorch does its matrix products there) keeps its own pool.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(n);
  g_threads_configured = true;
  return n;
}

Cluster detect_local_cluster() {
  static std::once_flag once;
  static std::optional<Cluster> local;
  std::call_once(once, [] { local = build_local(true); });
  return *local;
}

Cluster local_cluster_layout() { return build_local(false); }

void register_exec_presets() { register_cluster_preset("local", [] { return detect_local_cluster(); }); }

namespace {
class PlacerWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::SourceLocation&, const std::string& msg, bool) override {
    if (msg.find("is in beta and the API may change") != std::string::npos) return;
    std::fprintf(stderr, "placer: warning: libtorch: %s\n", one_line(msg).c_str());
  }
};
}  // namespace

void route_libtorch_warnings() {
  static PlacerWarnings handler;  // lives as long as the process: libtorch keeps the pointer
  c10::Warning::set_warning_handler(&handler);
}

}  // namespace placer::exec
