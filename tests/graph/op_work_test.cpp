// The cost rules of ONNX operators, checked by hand against the ONNX operator specification and the
// conventions of docs/op-rules.md (a multiply-add is 2 FLOPs; every tensor is touched once).
#include "placer/graph/op_work.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <initializer_list>
#include <string>
#include <vector>

#include "placer/util/error.hpp"

namespace placer {
namespace {

using Ts = std::vector<TensorDesc>;

Attribute int_attr(std::string name, std::int64_t v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::integer;
  a.i = v;
  return a;
}
Attribute float_attr(std::string name, double v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::real;
  a.f = v;
  return a;
}
Attribute ints_attr(std::string name, std::vector<std::int64_t> v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::integers;
  a.ints = std::move(v);
  return a;
}
Attribute text_attr(std::string name, std::string v) {
  Attribute a;
  a.name = std::move(name);
  a.kind = Attribute::Kind::text;
  a.s = std::move(v);
  return a;
}
Attributes attrs(std::initializer_list<Attribute> list = {}) {
  Attributes as;
  for (const auto& a : list) as.set(a);
  return as;
}

class OpWorkTest : public ::testing::Test {
 protected:
  // A tensor whose shape lives as long as the test.
  TensorDesc t(std::vector<std::int64_t> shape, DType dtype = DType::f32) {
    shapes_.push_back(std::move(shape));
    return TensorDesc{shapes_.back(), dtype};
  }
  static TensorDesc absent() { return TensorDesc{{}, DType::unknown, false}; }

  static OpWork fwd(std::string_view type, const Attributes& as, const Ts& in, const Ts& out) { return op_work(type, as, in, out); }
  static OpWork bwd(std::string_view type, const Attributes& as, const Ts& in, const Ts& out,
                    std::initializer_list<bool> needs) {
    return backward_work(type, as, in, out, std::span<const bool>(needs.begin(), needs.size()));
  }

 private:
  std::deque<std::vector<std::int64_t>> shapes_;
};

constexpr double kF32 = 4;

// ---- matrix products and convolutions ---------------------------------------------------------------

TEST_F(OpWorkTest, ResNet50FirstConvIsTwiceOutputsTimesKernelVolume) {
  TensorDesc x = t({32, 3, 224, 224}), w = t({64, 3, 7, 7}), y = t({32, 64, 112, 112});
  Attributes as = attrs({ints_attr("kernel_shape", {7, 7}), ints_attr("strides", {2, 2}), ints_attr("pads", {3, 3, 3, 3})});
  OpWork work = op_work("Conv", as, Ts{x, w}, Ts{y});
  EXPECT_EQ(work.flops, 2.0 * 32 * 64 * 112 * 112 * 3 * 7 * 7);
  EXPECT_EQ(work.bytes_read, (32.0 * 3 * 224 * 224 + 64.0 * 3 * 7 * 7) * kF32);
  EXPECT_EQ(work.bytes_written, 32.0 * 64 * 112 * 112 * kF32);
  EXPECT_EQ(work.op_class, OpClass::conv);
}

TEST_F(OpWorkTest, DepthwiseConvDotsOverOneInputChannelAndAddsTheBias) {
  // group == channels: weight [M, C/group = 1, 3, 3]; each output element sums 9 products.
  TensorDesc x = t({8, 32, 56, 56}), w = t({32, 1, 3, 3}), b = t({32}), y = t({8, 32, 56, 56});
  OpWork work = op_work("Conv", attrs({int_attr("group", 32), ints_attr("pads", {1, 1, 1, 1})}), Ts{x, w, b}, Ts{y});
  double outputs = 8.0 * 32 * 56 * 56;
  EXPECT_EQ(work.flops, 2.0 * outputs * 1 * 9 + outputs);
  EXPECT_EQ(work.bytes_read, (8.0 * 32 * 56 * 56 + 32 * 9 + 32) * kF32);
}

TEST_F(OpWorkTest, GroupedConvDotsOverItsGroupsChannels) {
  TensorDesc x = t({1, 64, 28, 28}), w = t({128, 16, 3, 3}), y = t({1, 128, 28, 28});
  EXPECT_EQ(op_work("Conv", attrs({int_attr("group", 4)}), Ts{x, w}, Ts{y}).flops, 2.0 * 128 * 28 * 28 * 16 * 9);
}

TEST_F(OpWorkTest, ConvTransposeScattersEachInputOverItsOutputChannelsAndKernel) {
  // W = [C, M/group, kH, kW]: every input element contributes to 32 x 2 x 2 outputs.
  TensorDesc x = t({4, 64, 16, 16}), w = t({64, 32, 2, 2}), y = t({4, 32, 32, 32});
  OpWork work = op_work("ConvTranspose", attrs({ints_attr("strides", {2, 2})}), Ts{x, w}, Ts{y});
  EXPECT_EQ(work.flops, 2.0 * 4 * 64 * 16 * 16 * 32 * 4);
  EXPECT_EQ(work.op_class, OpClass::conv);
}

// Quantized products: the product of the operands wherever they sit, plus the zero points
// subtracted (ConvInteger, MatMulInteger) or the requantization of each output (QLinear*: 3 per
// element) and QLinearConv's bias; none takes a gradient.
TEST_F(OpWorkTest, QuantizedProductsArePricedAsTheirFloatProducts) {
  TensorDesc x = t({1, 3, 8, 8}, DType::u8), w = t({4, 3, 3, 3}, DType::u8), zx = t({}, DType::u8), zw = t({}, DType::u8);
  TensorDesc acc = t({1, 4, 6, 6}, DType::i32), s = t({}), y = t({1, 4, 6, 6}, DType::u8), bias = t({4}, DType::i32);
  const double conv = 2.0 * 144 * 27;
  EXPECT_EQ(op_work("ConvInteger", attrs(), Ts{x, w}, Ts{acc}).flops, conv);
  EXPECT_EQ(op_work("ConvInteger", attrs(), Ts{x, w, zx, zw}, Ts{acc}).flops, conv + 192 + 108);
  EXPECT_EQ(op_work("ConvInteger", attrs(), Ts{x, w}, Ts{acc}).op_class, OpClass::conv);
  // x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
  EXPECT_EQ(op_work("QLinearConv", attrs(), Ts{x, s, zx, w, s, zw, s, zx}, Ts{y}).flops, conv + 3.0 * 144);
  EXPECT_EQ(op_work("QLinearConv", attrs(), Ts{x, s, zx, w, s, zw, s, zx, bias}, Ts{y}).flops, conv + 4.0 * 144);
  TensorDesc a = t({2, 3}, DType::i8), b = t({3, 4}, DType::i8), p = t({2, 4}, DType::i32), q = t({2, 4}, DType::i8);
  EXPECT_EQ(op_work("MatMulInteger", attrs(), Ts{a, b}, Ts{p}).flops, 2.0 * 8 * 3);
  EXPECT_EQ(op_work("QLinearMatMul", attrs(), Ts{a, s, zx, b, s, zx, s, zx}, Ts{q}).flops, 2.0 * 8 * 3 + 3.0 * 8);
  EXPECT_EQ(op_work("QLinearMatMul", attrs(), Ts{a, s, zx, b, s, zx, s, zx}, Ts{q}).op_class, OpClass::matmul);
  // The QDQ ops and the dynamic quantizer, per element.
  TensorDesc f = t({2, 4});
  EXPECT_EQ(op_work("QuantizeLinear", attrs(), Ts{f, s}, Ts{q}).flops, 3.0 * 8);
  EXPECT_EQ(op_work("DequantizeLinear", attrs(), Ts{q, s}, Ts{f}).flops, 2.0 * 8);
  EXPECT_EQ(op_work("DynamicQuantizeLinear", attrs(), Ts{f}, Ts{q, s, zx}).flops, 5.0 * 8);
  for (const char* type : {"ConvInteger", "QLinearConv", "MatMulInteger", "QLinearMatMul", "QuantizeLinear", "DequantizeLinear",
                           "DynamicQuantizeLinear"})
    EXPECT_FALSE(backward_rule(type).differentiable) << type;
  // A per-axis scale ([4] along axis 1 of [1,4,6,6]) is no broadcast: not a shape mismatch.
  TensorDesc scale = t({4});
  EXPECT_EQ(operand_shape_mismatch("DequantizeLinear", attrs({int_attr("axis", 1)}), Ts{acc, scale}, Ts{t({1, 4, 6, 6})}), "");
}

// Ops ONNX's backend test models use that had no rule (found by importing all of them,
// tests/io/onnx_backend_test.cpp): losses, transforms, windows, RoiAlign, MaxUnpool, Det, NMS, Unique.
TEST_F(OpWorkTest, LossesTransformsAndDetectionOpsHaveRules) {
  // Losses over scores [N=4, C=10] and labels [4].
  TensorDesc scores = t({4, 10}), labels = t({4}, DType::i64), loss = t({});
  EXPECT_EQ(op_work("SoftmaxCrossEntropyLoss", attrs(), Ts{scores, labels}, Ts{loss}).flops, 5.0 * 40 + 2.0 * 4);
  EXPECT_EQ(op_work("NegativeLogLikelihoodLoss", attrs(), Ts{scores, labels}, Ts{loss}).flops, 3.0 * 4);
  EXPECT_TRUE(backward_rule("SoftmaxCrossEntropyLoss").differentiable);
  // DFT of 2 complex rows of N = 8 along axis 1: 5 N log2 N each; of real rows, half.
  TensorDesc complex = t({2, 8, 2}), real = t({2, 8, 1}), spectrum = t({2, 8, 2});
  EXPECT_EQ(op_work("DFT", attrs(), Ts{complex}, Ts{spectrum}).flops, 2 * 5.0 * 8 * 3);
  EXPECT_EQ(op_work("DFT", attrs(), Ts{real}, Ts{spectrum}).flops, 2 * 2.5 * 8 * 3);
  // STFT of a real signal into 3 frames of 5 bins (onesided: frames of 8): a window and a real FFT each.
  TensorDesc signal = t({1, 32, 1}), frames = t({1, 3, 5, 2});
  EXPECT_EQ(op_work("STFT", attrs(), Ts{signal}, Ts{frames}).flops, 3 * (8.0 + 2.5 * 8 * 3));
  // Windows: generators, per element.
  EXPECT_EQ(op_work("HannWindow", attrs(), Ts{t({}, DType::i64)}, Ts{t({16})}).flops, 3.0 * 16);
  EXPECT_FALSE(backward_rule("HannWindow").differentiable);
  // RoiAlign: 2 x 2 samples of 9 FLOPs, plus the average, per output element.
  TensorDesc feature = t({1, 8, 16, 16}), rois = t({3, 4}), batch = t({3}, DType::i64), pooled = t({3, 8, 7, 7});
  EXPECT_EQ(op_work("RoiAlign", attrs({int_attr("sampling_ratio", 2)}), Ts{feature, rois, batch}, Ts{pooled}).flops, 3.0 * 8 * 49 * 37);
  // Det of 5 matrices 4 x 4: 2/3 M^3 each.
  EXPECT_DOUBLE_EQ(op_work("Det", attrs(), Ts{t({5, 4, 4})}, Ts{t({5})}).flops, 5 * (2.0 / 3.0) * 64);
  // MaxUnpool moves bytes only.
  EXPECT_EQ(op_work("MaxUnpool", attrs(), Ts{t({1, 1, 2, 2}), t({1, 1, 2, 2}, DType::i64)}, Ts{t({1, 1, 4, 4})}).flops, 0.0);
  // NonMaxSuppression of 1 x 2 classes x 8 boxes: a sort and every pair, per class. Unique: a sort.
  TensorDesc boxes = t({1, 8, 4}), box_scores = t({1, 2, 8}), selected = t({3, 3}, DType::i64);
  EXPECT_EQ(op_work("NonMaxSuppression", attrs(), Ts{boxes, box_scores}, Ts{selected}).flops, 2 * (8.0 * 3 + 5.0 * 64));
  EXPECT_EQ(op_work("Unique", attrs(), Ts{t({16})}, Ts{t({5})}).flops, 16.0 * 4);
}

TEST_F(OpWorkTest, GemmWithTransBAndBiasIsTwoMNKPlusMN) {
  // Y[M,N] = A[M,K] x B[N,K]^T + C[N], M = 64, K = 1024, N = 4096.
  TensorDesc a = t({64, 1024}), b = t({4096, 1024}), c = t({4096}), y = t({64, 4096});
  OpWork work = op_work("Gemm", attrs({int_attr("transB", 1)}), Ts{a, b, c}, Ts{y});
  EXPECT_EQ(work.flops, 2.0 * 64 * 4096 * 1024 + 64.0 * 4096);
  EXPECT_EQ(work.bytes_read, (64.0 * 1024 + 4096.0 * 1024 + 4096) * kF32);
  EXPECT_EQ(work.bytes_written, 64.0 * 4096 * kF32);
  EXPECT_EQ(work.op_class, OpClass::matmul);
}

TEST_F(OpWorkTest, GemmTakesKFromTransposedAAndCountsAlphaAndBetaScaling) {
  TensorDesc a = t({1024, 64}), b = t({1024, 4096}), c = t({64, 4096}), y = t({64, 4096});
  Attributes as = attrs({int_attr("transA", 1), float_attr("alpha", 0.5), float_attr("beta", 2.0)});
  double mn = 64.0 * 4096;
  EXPECT_EQ(op_work("Gemm", as, Ts{a, b, c}, Ts{y}).flops, 2.0 * mn * 1024 + 3 * mn);
  EXPECT_EQ(op_work("Gemm", attrs({int_attr("transA", 1)}), Ts{a, b}, Ts{y}).flops, 2.0 * mn * 1024);
}

TEST_F(OpWorkTest, BatchedMatMulBroadcastsBatchDimsAndReadsEachOperandOnce) {
  // [2,1,16,32] x [3,32,8] -> [2,3,16,8]: six 16x32x8 products.
  TensorDesc a = t({2, 1, 16, 32}), b = t({3, 32, 8}), y = t({2, 3, 16, 8});
  OpWork work = op_work("MatMul", attrs(), Ts{a, b}, Ts{y});
  EXPECT_EQ(work.flops, 2.0 * 6 * 16 * 8 * 32);
  EXPECT_EQ(work.bytes_read, (2.0 * 16 * 32 + 3.0 * 32 * 8) * kF32);
  EXPECT_EQ(work.bytes_written, 2.0 * 3 * 16 * 8 * kF32);
}

TEST_F(OpWorkTest, MatMulWithAOneDimensionalOperandIsAMatrixVectorProduct) {
  TensorDesc v = t({32}), m = t({32, 10}), y = t({10});
  EXPECT_EQ(op_work("MatMul", attrs(), Ts{v, m}, Ts{y}).flops, 2.0 * 32 * 10);
}

// OpWork::product_min_dim: the least of rows, columns and contracted length of the matrices
// libtorch multiplies (a stack by a matrix folds the stack into the rows, or computed transposed
// into the columns; two stacks multiply matrix by matrix), the same for the gradients.
TEST_F(OpWorkTest, ProductsGiveTheirSmallestDimension) {
  auto matmul = [&](std::vector<std::int64_t> a, std::vector<std::int64_t> b, std::vector<std::int64_t> y) {
    const TensorDesc ta = t(std::move(a)), tb = t(std::move(b)), ty = t(std::move(y));
    const std::uint32_t forward = op_work("MatMul", attrs(), Ts{ta, tb}, Ts{ty}).product_min_dim;
    EXPECT_EQ(bwd("MatMul", attrs(), Ts{ta, tb}, Ts{ty}, {true, true}).product_min_dim, forward);
    return forward;
  };
  EXPECT_EQ(matmul({64, 2048}, {2048, 8192}, {64, 8192}), 64u);
  EXPECT_EQ(matmul({8, 128, 768}, {768, 3072}, {8, 128, 3072}), 768u) << "A's stack folded into 1024 rows";
  EXPECT_EQ(matmul({2, 16, 768}, {768, 3072}, {2, 16, 3072}), 32u);
  EXPECT_EQ(matmul({96, 128, 64}, {96, 64, 128}, {96, 128, 128}), 64u) << "batched: per matrix";
  EXPECT_EQ(matmul({32, 64}, {4, 64, 16}, {4, 32, 16}), 32u) << "B's stack folded into its 64 columns";
  EXPECT_EQ(matmul({16, 32}, {4, 32, 2}, {4, 16, 2}), 8u);
  EXPECT_EQ(matmul({32}, {32, 10}, {10}), 1u) << "a vector";
  EXPECT_EQ(matmul({4, 16, 32}, {32}, {4, 16}), 1u) << "a stack by a vector";
  EXPECT_EQ(matmul({32}, {4, 32, 16}, {4, 16}), 1u) << "a vector by a stack";
  EXPECT_EQ(matmul({2, 3, 4, 32}, {32, 64}, {2, 3, 4, 64}), 24u) << "every stacked dimension folded into the rows";
  EXPECT_EQ(matmul({6, 128, 32}, {1, 32, 256}, {6, 128, 256}), 32u) << "a broadcast batch: per matrix";
  TensorDesc a = t({64, 1024}), b = t({4096, 1024}), c = t({4096}), y = t({64, 4096});
  EXPECT_EQ(op_work("Gemm", attrs({int_attr("transB", 1)}), Ts{a, b, c}, Ts{y}).product_min_dim, 64u);
  EXPECT_EQ(bwd("Gemm", attrs({int_attr("transB", 1)}), Ts{a, b, c}, Ts{y}, {true, true, true}).product_min_dim, 64u);
  EXPECT_EQ(bwd("Gemm", attrs({int_attr("transB", 1)}), Ts{a, b, c}, Ts{y}, {false, false, true}).product_min_dim, 0u)
      << "the bias's gradient alone is a sum, no product";
  TensorDesc at = t({32, 512}), bt = t({32, 2048}), yt = t({512, 2048});
  EXPECT_EQ(op_work("Gemm", attrs({int_attr("transA", 1)}), Ts{at, bt}, Ts{yt}).product_min_dim, 32u) << "K from the transposed A";
  EXPECT_EQ(op_work("Relu", attrs(), Ts{y}, Ts{y}).product_min_dim, 0u);
  TensorDesc x = t({8, 16, 32, 32}), w = t({32, 16, 3, 3}), yc = t({8, 32, 32, 32});
  EXPECT_EQ(op_work("Conv", attrs(), Ts{x, w}, Ts{yc}).product_min_dim, 0u);
}

// OpWork::conv_kernel_area: an ungrouped Conv's kernel area, its gradient's too; none for grouped or
// transposed convolutions, nor for a bias's gradient alone.
TEST_F(OpWorkTest, UngroupedConvolutionsGiveTheirKernelArea) {
  TensorDesc x = t({8, 16, 32, 32}), w3 = t({32, 16, 3, 3}), w1 = t({32, 16, 1, 1}), w71 = t({32, 16, 7, 1}), b = t({32}), y = t({8, 32, 32, 32});
  EXPECT_EQ(op_work("Conv", attrs(), Ts{x, w3}, Ts{y}).conv_kernel_area, 9u);
  EXPECT_EQ(op_work("Conv", attrs(), Ts{x, w1}, Ts{y}).conv_kernel_area, 1u);
  EXPECT_EQ(op_work("Conv", attrs(), Ts{x, w71}, Ts{y}).conv_kernel_area, 7u);
  EXPECT_EQ(bwd("Conv", attrs(), Ts{x, w3, b}, Ts{y}, {true, true, true}).conv_kernel_area, 9u);
  EXPECT_EQ(bwd("Conv", attrs(), Ts{x, w3, b}, Ts{y}, {false, false, true}).conv_kernel_area, 0u);
  TensorDesc wg = t({32, 8, 3, 3});
  EXPECT_EQ(op_work("Conv", attrs({int_attr("group", 2)}), Ts{x, wg}, Ts{y}).conv_kernel_area, 0u);
  TensorDesc xt = t({8, 16, 16, 16}), wt = t({16, 32, 2, 2}), yt = t({8, 32, 32, 32});
  EXPECT_EQ(op_work("ConvTranspose", attrs({ints_attr("strides", {2, 2})}), Ts{xt, wt}, Ts{yt}).conv_kernel_area, 0u);
  EXPECT_EQ(op_work("MatMul", attrs(), Ts{t({4, 8}), t({8, 2})}, Ts{t({4, 2})}).conv_kernel_area, 0u);
  EXPECT_EQ(op_work("Conv", attrs({int_attr("group", 1)}), Ts{x, w3}, Ts{y}).conv_kernel_area, 9u);
  TensorDesc x1 = t({8, 16, 64}), w1d = t({32, 16, 3}), y1 = t({8, 32, 62});
  EXPECT_EQ(op_work("Conv", attrs(), Ts{x1, w1d}, Ts{y1}).conv_kernel_area, 0u) << "2-D convolutions only";
}

TEST_F(OpWorkTest, EinsumCountsEveryIndexCombinationOncePerMultiplyAdd) {
  // Attention scores: sum over d of q[b,h,q,d] k[b,h,k,d] is a batched matmul.
  TensorDesc q = t({8, 12, 128, 64}), k = t({8, 12, 128, 64}), s = t({8, 12, 128, 128});
  OpWork work = op_work("Einsum", attrs({text_attr("equation", "bhqd,bhkd->bhqk")}), Ts{q, k}, Ts{s});
  EXPECT_EQ(work.flops, 2.0 * 8 * 12 * 128 * 128 * 64);
  EXPECT_EQ(work.op_class, OpClass::matmul);

  // Implicit output (j is repeated, so summed) and an ellipsis give the same count as MatMul.
  TensorDesc a = t({4, 16, 32}), b = t({32, 8}), y = t({4, 16, 8});
  EXPECT_EQ(op_work("Einsum", attrs({text_attr("equation", "...ij, jk")}), Ts{a, b}, Ts{y}).flops, 2.0 * 4 * 16 * 8 * 32);

  // An outer product has no sum: one multiply per output element.
  TensorDesc u = t({16}), w = t({8}), o = t({16, 8});
  EXPECT_EQ(op_work("Einsum", attrs({text_attr("equation", "i,j->ij")}), Ts{u, w}, Ts{o}).flops, 16.0 * 8);
}

TEST_F(OpWorkTest, EinsumWithAnEquationThatDoesNotFitItsInputsIsAnError) {
  TensorDesc a = t({4, 16}), y = t({4});
  EXPECT_THROW(op_work("Einsum", attrs({text_attr("equation", "ijk->i")}), Ts{a}, Ts{y}), Error);
}

TEST_F(OpWorkTest, LstmCountsGateProductsAndPointwiseCellWorkPerStep) {
  // seq 5, batch 4, input 8, hidden 16, one direction, with bias: per step and row
  // 2*4*16*(8+16) for W·x and R·h, plus 16 units x (19 pointwise + 8 bias adds).
  TensorDesc x = t({5, 4, 8}), w = t({1, 64, 8}), r = t({1, 64, 16}), b = t({1, 128});
  TensorDesc y = t({5, 1, 4, 16}), yh = t({1, 4, 16}), yc = t({1, 4, 16});
  OpWork work = op_work("LSTM", attrs({int_attr("hidden_size", 16)}), Ts{x, w, r, b}, Ts{y, yh, yc});
  EXPECT_EQ(work.flops, 5.0 * 4 * (2.0 * 4 * 16 * (8 + 16) + 16.0 * (19 + 8)));
  EXPECT_EQ(work.op_class, OpClass::matmul);
  // Each step multiplies [batch, hidden] by R: priced by its smallest dimension, the gradient too.
  EXPECT_EQ(work.product_min_dim, 4u);
  EXPECT_EQ(bwd("LSTM", attrs({int_attr("hidden_size", 16)}), Ts{x, w, r, b}, Ts{y, yh, yc}, {true, true, true, true}).product_min_dim, 4u);
  EXPECT_EQ(bwd("LSTM", attrs({int_attr("hidden_size", 16)}), Ts{x, w, r, b}, Ts{y, yh, yc}, {false, false, true, false}).product_min_dim, 4u)
      << "R's gradient alone still runs the steps' products backwards";
  TensorDesc wide = t({5, 64, 8}), yw = t({5, 1, 64, 16}), hw = t({1, 64, 16});
  EXPECT_EQ(op_work("LSTM", attrs({int_attr("hidden_size", 16)}), Ts{wide, w, r, b}, Ts{yw, hw, hw}).product_min_dim, 16u) << "the hidden size";
  TensorDesc first = t({4, 5, 8}), yf = t({4, 5, 1, 16});
  EXPECT_EQ(op_work("LSTM", attrs({int_attr("hidden_size", 16), int_attr("layout", 1)}), Ts{first, w, r, b}, Ts{yf, yh, yc}).product_min_dim, 4u)
      << "batch first (layout 1)";
}

// ---- normalizations -------------------------------------------------------------------------------

TEST_F(OpWorkTest, InferenceBatchNormIsAnAffineMapOfFourFlopsPerElement) {
  TensorDesc x = t({32, 64, 56, 56}), c = t({64}), y = t({32, 64, 56, 56});
  OpWork work = op_work("BatchNormalization", attrs(), Ts{x, c, c, c, c}, Ts{y});
  double n = 32.0 * 64 * 56 * 56;
  EXPECT_EQ(work.flops, 4 * n);
  EXPECT_EQ(work.bytes_read, (n + 4 * 64) * kF32);
  EXPECT_EQ(work.bytes_written, n * kF32);
  EXPECT_EQ(work.op_class, OpClass::normalization);
}

TEST_F(OpWorkTest, TrainingBatchNormAlsoComputesTheBatchStatistics) {
  TensorDesc x = t({32, 64, 56, 56}), c = t({64}), y = t({32, 64, 56, 56});
  OpWork work = op_work("BatchNormalization", attrs({int_attr("training_mode", 1)}), Ts{x, c, c, c, c}, Ts{y, c, c});
  EXPECT_EQ(work.flops, 8 * 32.0 * 64 * 56 * 56);
}

TEST_F(OpWorkTest, LayerNormIsStatisticsPlusNormalizePlusAffine) {
  TensorDesc x = t({8, 128, 768}), g = t({768}), b = t({768}), y = t({8, 128, 768});
  double n = 8.0 * 128 * 768;
  OpWork work = op_work("LayerNormalization", attrs({int_attr("axis", -1)}), Ts{x, g, b}, Ts{y});
  EXPECT_EQ(work.flops, 8 * n);
  EXPECT_EQ(work.bytes_read, (n + 2 * 768) * kF32);
  EXPECT_EQ(op_work("LayerNormalization", attrs(), Ts{x, g}, Ts{y}).flops, 7 * n);  // no bias
}

// ---- elementwise ----------------------------------------------------------------------------------

TEST_F(OpWorkTest, ReluIsOneFlopPerElementReadOnceWrittenOnce) {
  TensorDesc x = t({32, 64}), y = t({32, 64});
  EXPECT_EQ(op_work("Relu", attrs(), Ts{x}, Ts{y}), (OpWork{2048, 2048 * kF32, 2048 * kF32, OpClass::elementwise}));
}

TEST_F(OpWorkTest, BroadcastAddDoesOneFlopPerOutputAndReadsTheSmallOperandAtItsOwnSize) {
  TensorDesc a = t({8, 128, 768}), b = t({768}), y = t({8, 128, 768});
  double n = 8.0 * 128 * 768;
  EXPECT_EQ(op_work("Add", attrs(), Ts{a, b}, Ts{y}), (OpWork{n, (n + 768) * kF32, n * kF32, OpClass::elementwise}));
}

TEST_F(OpWorkTest, VariadicSumAddsOncePerExtraOperandAndMeanAlsoDivides) {
  TensorDesc a = t({10}), y = t({10});
  EXPECT_EQ(op_work("Sum", attrs(), Ts{a, a, a}, Ts{y}).flops, 20);
  EXPECT_EQ(op_work("Mean", attrs(), Ts{a, a, a}, Ts{y}).flops, 30);
}

TEST_F(OpWorkTest, ActivationsCountTheirArithmeticWithALibraryCallAsOneFlop) {
  TensorDesc x = t({100}), y = t({100});
  EXPECT_EQ(op_work("Sigmoid", attrs(), Ts{x}, Ts{y}).flops, 300);  // exp, add, divide
  EXPECT_EQ(op_work("Tanh", attrs(), Ts{x}, Ts{y}).flops, 100);
  EXPECT_EQ(op_work("Gelu", attrs(), Ts{x}, Ts{y}).flops, 500);
  EXPECT_EQ(op_work("Gelu", attrs({text_attr("approximate", "tanh")}), Ts{x}, Ts{y}).flops, 900);
}

// ---- reductions and pooling ---------------------------------------------------------------------

TEST_F(OpWorkTest, SoftmaxIsFiveFlopsPerElementAndAReduction) {
  TensorDesc x = t({8, 12, 128, 128}), y = t({8, 12, 128, 128});
  OpWork work = op_work("Softmax", attrs({int_attr("axis", -1)}), Ts{x}, Ts{y});
  EXPECT_EQ(work.flops, 5 * 8.0 * 12 * 128 * 128);
  EXPECT_EQ(work.op_class, OpClass::reduction);
}

TEST_F(OpWorkTest, ReduceMeanAddsEveryInputAndDividesEveryOutput) {
  TensorDesc x = t({8, 128, 768}), y = t({8, 128, 1});
  EXPECT_EQ(op_work("ReduceMean", attrs(), Ts{x}, Ts{y}).flops, 8.0 * 128 * 768 + 8.0 * 128);
}

TEST_F(OpWorkTest, PoolingIsOutputElementsTimesKernelSizeAndReadsTheInputOnce) {
  TensorDesc x = t({32, 64, 112, 112}), y = t({32, 64, 56, 56});
  Attributes as = attrs({ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1})});
  double out = 32.0 * 64 * 56 * 56;
  OpWork max = op_work("MaxPool", as, Ts{x}, Ts{y});
  EXPECT_EQ(max, (OpWork{9 * out, 32.0 * 64 * 112 * 112 * kF32, out * kF32, OpClass::pooling}));
  EXPECT_EQ(op_work("AveragePool", as, Ts{x}, Ts{y}), max);
}

// Global pooling reduces the spatial axes (the executor runs `mean`, measured at a reduction's
// speed on the H100 box); its gradient, a broadcast of dY over them, at a pooling gradient's.
TEST_F(OpWorkTest, GlobalPoolingIsAReductionWhoseGradientIsAPoolingGradient) {
  TensorDesc x = t({32, 2048, 7, 7}), y = t({32, 2048, 1, 1});
  OpWork work = op_work("GlobalAveragePool", attrs(), Ts{x}, Ts{y});
  EXPECT_EQ(work.flops, 32.0 * 2048 * 49);
  EXPECT_EQ(work.op_class, OpClass::reduction);
  OpWork grad = bwd("GlobalAveragePool", attrs(), Ts{x}, Ts{y}, {true});
  EXPECT_EQ(grad.op_class, OpClass::pooling);
  EXPECT_EQ(grad.flops, 32.0 * 2048 * 49);
  EXPECT_EQ(grad.bytes_read, 32.0 * 2048 * kF32);       // dY only
  EXPECT_EQ(grad.bytes_written, 32.0 * 2048 * 49 * kF32);  // dX
  for (const char* op : {"GlobalMaxPool", "GlobalLpPool"}) {
    EXPECT_EQ(op_work(op, attrs(), Ts{x}, Ts{y}).op_class, OpClass::reduction) << op;
    EXPECT_EQ(bwd(op, attrs(), Ts{x}, Ts{y}, {true}).op_class, OpClass::pooling) << op;
  }
}

// ---- data movement --------------------------------------------------------------------------------

TEST_F(OpWorkTest, ConcatAndTransposeMoveBytesWithoutFlops) {
  TensorDesc a = t({8, 64, 28, 28}), y = t({8, 128, 28, 28});
  double part = 8.0 * 64 * 28 * 28 * kF32;
  EXPECT_EQ(op_work("Concat", attrs({int_attr("axis", 1)}), Ts{a, a}, Ts{y}),
            (OpWork{0, 2 * part, 2 * part, OpClass::data_movement}));

  TensorDesc x = t({8, 128, 12, 64}), xt = t({8, 12, 128, 64});
  double bytes = 8.0 * 128 * 12 * 64 * kF32;
  EXPECT_EQ(op_work("Transpose", attrs({ints_attr("perm", {0, 2, 1, 3})}), Ts{x}, Ts{xt}),
            (OpWork{0, bytes, bytes, OpClass::data_movement}));
}

TEST_F(OpWorkTest, GatherReadsOnlyTheGatheredRowsAndTheIndices) {
  // An embedding lookup touches 8*128 rows of the 30522-row table, not the whole table.
  TensorDesc table = t({30522, 768}), ids = t({8, 128}, DType::i64), y = t({8, 128, 768});
  OpWork work = op_work("Gather", attrs({int_attr("axis", 0)}), Ts{table, ids}, Ts{y});
  EXPECT_EQ(work.flops, 0);
  EXPECT_EQ(work.bytes_read, 8.0 * 128 * 768 * kF32 + 8.0 * 128 * 8);
  EXPECT_EQ(work.bytes_written, 8.0 * 128 * 768 * kF32);
}

TEST_F(OpWorkTest, SliceReadsOnlyTheOutputSizedRegionPlusItsIndexInputs) {
  TensorDesc x = t({1, 1, 1024, 1024}), idx = t({2}, DType::i64), y = t({1, 1, 256, 256});
  OpWork work = op_work("Slice", attrs(), Ts{x, idx, idx, idx}, Ts{y});
  EXPECT_EQ(work.bytes_read, 256.0 * 256 * kF32 + 3 * 2 * 8);
  EXPECT_EQ(work.bytes_written, 256.0 * 256 * kF32);
}

TEST_F(OpWorkTest, NearestResizeCopiesAndLinearResizeBlendsTwoNeighboursPerResizedAxis) {
  TensorDesc x = t({1, 3, 16, 16}), roi = absent(), scales = t({4}), y = t({1, 3, 32, 32});
  double out = 3.0 * 32 * 32;
  EXPECT_EQ(op_work("Resize", attrs(), Ts{x, roi, scales}, Ts{y}).flops, 0);
  EXPECT_EQ(op_work("Resize", attrs({text_attr("mode", "linear")}), Ts{x, roi, scales}, Ts{y}).flops, out * 2 * 4);
  // Antialiased (opset 18), a downsampling's filter widens by in/out per shrunk axis; an upsampling's
  // does not (a QA pass: priced as plain linear).
  EXPECT_EQ(op_work("Resize", attrs({text_attr("mode", "linear"), int_attr("antialias", 1)}), Ts{x, roi, scales}, Ts{y}).flops, out * 2 * 4);
  TensorDesc half = t({1, 3, 8, 4});
  EXPECT_EQ(op_work("Resize", attrs({text_attr("mode", "linear"), int_attr("antialias", 1)}), Ts{x, roi, scales}, Ts{half}).flops,
            3.0 * 8 * 4 * 2 * 4 * (2 * 4));
}

// ---- aliases and unknown ops ----------------------------------------------------------------------

TEST_F(OpWorkTest, AliasesCostNothing) {
  TensorDesc x = t({8, 128, 768}), shape = t({3}, DType::i64), y = t({1024, 768});
  for (const char* type : {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Constant", "Shape", "Size", "Dropout"}) {
    SCOPED_TRACE(type);
    EXPECT_EQ(op_work(type, attrs(), Ts{x, shape}, Ts{y}), OpWork{});
    EXPECT_EQ(op_work(type, attrs(), Ts{x, shape}, Ts{y}).op_class, OpClass::alias);
  }
}

TEST_F(OpWorkTest, AnUnknownOpTypeIsAnErrorThatNamesTheType) {
  TensorDesc x = t({4}), y = t({4});
  EXPECT_FALSE(is_known_op_type("FooBar"));
  try {
    op_work("FooBar", attrs(), Ts{x}, Ts{y});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown op type 'FooBar'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bwd("FooBar", attrs(), Ts{x}, Ts{y}, {true}), Error);
}

TEST_F(OpWorkTest, AnUnknownOpTypeWithADefaultClassIsOneFlopPerOutputElement) {
  TensorDesc x = t({4, 8}), y = t({4, 8});
  EXPECT_EQ(op_work("FooBar", attrs(), Ts{x}, Ts{y}, OpClass::elementwise),
            (OpWork{32, 32 * kF32, 32 * kF32, OpClass::elementwise}));
  // Its gradient is assumed to cost one forward and to keep the inputs.
  BackwardRule rule = backward_rule("FooBar");
  EXPECT_TRUE(rule.differentiable);
  EXPECT_TRUE(rule.saves_inputs);
  TensorDesc ins[] = {x};
  TensorDesc outs[] = {y};
  const bool needs[] = {true};
  EXPECT_EQ(backward_work("FooBar", attrs(), ins, outs, needs, OpClass::elementwise),
            (OpWork{32, 2 * 32 * kF32, 32 * kF32, OpClass::elementwise}));
}

TEST_F(OpWorkTest, EveryOpTypeOfTheSharedModelsHasARule) {
  for (const char* type :
       {"Add", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Constant", "ConstantOfShape", "Conv",
        "Div", "Erf", "Flatten", "Gather", "Gemm", "GlobalAveragePool", "Identity", "LayerNormalization", "MatMul", "MaxPool",
        "Mul", "Pad", "Pow", "Relu", "Reshape", "Shape", "Sigmoid", "Slice", "Softmax", "Split", "Squeeze", "Sub", "Tanh",
        "Transpose", "Trilu", "Unsqueeze"})
    EXPECT_TRUE(is_known_op_type(type)) << type;
}

// ---- backward -------------------------------------------------------------------------------------

TEST_F(OpWorkTest, ConvBackwardCostsOneForwardPerOperandThatNeedsAGradient) {
  TensorDesc x = t({8, 16, 32, 32}), w = t({32, 16, 3, 3}), y = t({8, 32, 32, 32});
  Attributes as = attrs({ints_attr("pads", {1, 1, 1, 1})});
  double forward = op_work("Conv", as, Ts{x, w}, Ts{y}).flops;
  double xb = 8.0 * 16 * 32 * 32 * kF32, wb = 32.0 * 16 * 9 * kF32, yb = 8.0 * 32 * 32 * 32 * kF32;

  // Frozen input (the first layer): only dW = conv(X, dY), which reads dY and X.
  // (Both convolve with the forward's 3x3 kernel: OpWork::conv_kernel_area.)
  EXPECT_EQ(bwd("Conv", as, Ts{x, w}, Ts{y}, {false, true}), (OpWork{forward, yb + xb, wb, OpClass::conv, 0, 9}));
  // Both: dX = conv_transpose(dY, W) as well, which also reads W.
  EXPECT_EQ(bwd("Conv", as, Ts{x, w}, Ts{y}, {true, true}), (OpWork{2 * forward, yb + xb + wb, xb + wb, OpClass::conv, 0, 9}));
}

TEST_F(OpWorkTest, ConvBiasGradientIsASumOverTheOutput) {
  TensorDesc x = t({8, 16, 32, 32}), w = t({32, 16, 3, 3}), b = t({32}), y = t({8, 32, 32, 32});
  double core = 2.0 * 8 * 32 * 32 * 32 * 16 * 9;
  EXPECT_EQ(bwd("Conv", attrs(), Ts{x, w, b}, Ts{y}, {false, true, true}).flops, core + 8.0 * 32 * 32 * 32);
}

TEST_F(OpWorkTest, MatMulBackwardIsTwoForwardsWhenBothOperandsNeedGradients) {
  TensorDesc a = t({8, 128, 768}), b = t({768, 3072}), y = t({8, 128, 3072});
  double forward = 2.0 * 8 * 128 * 3072 * 768;
  EXPECT_EQ(bwd("MatMul", attrs(), Ts{a, b}, Ts{y}, {true, true}).flops, 2 * forward);
  EXPECT_EQ(bwd("MatMul", attrs(), Ts{a, b}, Ts{y}, {true, false}).flops, forward);
}

TEST_F(OpWorkTest, GemmBackwardAddsTheBiasReduction) {
  TensorDesc a = t({64, 1024}), b = t({4096, 1024}), c = t({4096}), y = t({64, 4096});
  OpWork work = bwd("Gemm", attrs({int_attr("transB", 1)}), Ts{a, b, c}, Ts{y}, {true, true, true});
  EXPECT_EQ(work.flops, 2 * (2.0 * 64 * 4096 * 1024) + 64.0 * 4096);
  EXPECT_EQ(work.op_class, OpClass::matmul);
}

TEST_F(OpWorkTest, ReluBackwardMasksTheGradientWithTheSavedOutput) {
  TensorDesc x = t({1000}), y = t({1000});
  EXPECT_EQ(backward_rule("Relu").saved_outputs, 1u);
  EXPECT_FALSE(backward_rule("Relu").saves_inputs);
  // Reads dY and Y, writes dX; one select per element.
  EXPECT_EQ(bwd("Relu", attrs(), Ts{x}, Ts{y}, {true}), (OpWork{1000, 2000 * kF32, 1000 * kF32, OpClass::elementwise}));
}

TEST_F(OpWorkTest, DropoutIsAnAliasForInferenceAndAKernelInTraining) {
  TensorDesc x = t({1000}), y = t({1000});
  EXPECT_EQ(fwd("Dropout", attrs(), Ts{x}, Ts{y}).op_class, OpClass::alias);
  EXPECT_EQ(bwd("Dropout", attrs(), Ts{x}, Ts{y}, {true}).flops, 0.0);
  const Attributes training = attrs({int_attr("training_mode", 1)});
  // Draw, compare, scale: 3 FLOPs per element; the gradient scales dY by the saved mask: 2.
  EXPECT_EQ(fwd("Dropout", training, Ts{x}, Ts{y}).flops, 3000.0);
  EXPECT_EQ(fwd("Dropout", training, Ts{x}, Ts{y}).op_class, OpClass::elementwise);
  EXPECT_EQ(bwd("Dropout", training, Ts{x}, Ts{y}, {true}).flops, 2000.0);
  EXPECT_EQ(backward_rule("Dropout", training).saved_outputs, 2u) << "the mask";
  EXPECT_EQ(backward_rule("Dropout").saved_outputs, 0u);
}

TEST_F(OpWorkTest, SmoothActivationsCostTwiceTheirForwardBackwards) {
  TensorDesc x = t({1000}), y = t({1000});
  EXPECT_EQ(bwd("Sigmoid", attrs(), Ts{x}, Ts{y}, {true}).flops, 2 * 3000);
  EXPECT_EQ(bwd("Tanh", attrs(), Ts{x}, Ts{y}, {true}).flops, 2 * 1000);
}

TEST_F(OpWorkTest, BroadcastMulBackwardIsOnePassOverTheOutputPerOperand) {
  TensorDesc a = t({8, 128, 768}), b = t({768}), y = t({8, 128, 768});
  double n = 8.0 * 128 * 768;
  // dA = dY * B reads B only; dB = sum(dY * A) reads A.
  EXPECT_EQ(bwd("Mul", attrs(), Ts{a, b}, Ts{y}, {true, false}), (OpWork{n, (n + 768) * kF32, n * kF32, OpClass::elementwise}));
  EXPECT_EQ(bwd("Mul", attrs(), Ts{a, b}, Ts{y}, {true, true}).flops, 2 * n);
}

// LRN sums squares over `size` channels, at most the channels there are: a size of 2^62 priced a
// 1x3x8x8 input at 1.77e21 FLOPs (a fuzzing review).
TEST_F(OpWorkTest, LrnWindowCoversAtMostTheChannels) {
  TensorDesc x = t({1, 3, 8, 8}), y = t({1, 3, 8, 8});
  const double n = 3 * 8 * 8;
  EXPECT_EQ(op_work("LRN", attrs({int_attr("size", 3)}), Ts{x}, Ts{y}).flops, (2 * 3 + 4) * n);
  EXPECT_EQ(op_work("LRN", attrs({int_attr("size", 1)}), Ts{x}, Ts{y}).flops, (2 * 1 + 4) * n);
  EXPECT_EQ(op_work("LRN", attrs({int_attr("size", std::int64_t{1} << 62)}), Ts{x}, Ts{y}).flops, (2 * 3 + 4) * n);
}

TEST_F(OpWorkTest, NormalizationBackwardIsTwiceItsForward) {
  TensorDesc x = t({8, 128, 768}), g = t({768}), b = t({768}), y = t({8, 128, 768});
  double n = 8.0 * 128 * 768;
  OpWork work = bwd("LayerNormalization", attrs(), Ts{x, g, b}, Ts{y}, {true, true, true});
  EXPECT_EQ(work.flops, 2 * 8 * n);
  // Reads dY, X and gamma; writes dX, dgamma, dbeta.
  EXPECT_EQ(work.bytes_read, (2 * n + 768) * kF32);
  EXPECT_EQ(work.bytes_written, (n + 2 * 768) * kF32);
}

TEST_F(OpWorkTest, SoftmaxBackwardIsFourFlopsPerOutputElementFromTheSavedOutput) {
  TensorDesc x = t({8, 12, 128, 128}), y = t({8, 12, 128, 128});
  EXPECT_EQ(bwd("Softmax", attrs(), Ts{x}, Ts{y}, {true}).flops, 4 * 8.0 * 12 * 128 * 128);
  EXPECT_EQ(backward_rule("Softmax").saved_outputs, 1u);
}

TEST_F(OpWorkTest, MaxPoolBackwardRoutesEachOutputGradientOnceAverageSpreadsItOverTheWindow) {
  TensorDesc x = t({32, 64, 112, 112}), y = t({32, 64, 56, 56});
  Attributes as = attrs({ints_attr("kernel_shape", {3, 3}), ints_attr("strides", {2, 2})});
  double out = 32.0 * 64 * 56 * 56;
  EXPECT_EQ(bwd("MaxPool", as, Ts{x}, Ts{y}, {true}).flops, out);
  EXPECT_EQ(bwd("AveragePool", as, Ts{x}, Ts{y}, {true}).flops, 9 * out);
}

TEST_F(OpWorkTest, AveragePoolKeepsItsInputForItsShapeButDoesNotReadIt) {
  // PyTorch's avg_pool2d saves `self` (its backward takes it, for the shape): the input lives until
  // the gradient has run, but the gradient's kernel reads only dY.
  TensorDesc x = t({8, 168, 42, 42}), y = t({8, 168, 21, 21});
  Attributes as = attrs({ints_attr("kernel_shape", {1, 1}), ints_attr("strides", {2, 2})});
  const bool need[] = {true}, none[] = {false};
  EXPECT_EQ(saved_inputs("AveragePool", as, Ts{x}, Ts{y}, need), 1u);
  EXPECT_EQ(saved_inputs("AveragePool", as, Ts{x}, Ts{y}, none), 0u);  // no gradient, nothing kept
  EXPECT_TRUE(backward_rule("AveragePool").saves_inputs);
  EXPECT_EQ(bwd("AveragePool", as, Ts{x}, Ts{y}, {true}).bytes_read, 8.0 * 168 * 21 * 21 * kF32);  // dY alone
  EXPECT_EQ(saved_inputs("GlobalAveragePool", attrs(), Ts{x}, Ts{t({8, 168, 1, 1})}, need), 0u);  // mean: sizes only
}

TEST_F(OpWorkTest, GatherBackwardScatterAddsIntoAFullSizedGradient) {
  TensorDesc table = t({30522, 768}), ids = t({8, 128}, DType::i64), y = t({8, 128, 768});
  OpWork work = bwd("Gather", attrs(), Ts{table, ids}, Ts{y}, {true, false});
  EXPECT_EQ(work.flops, 8.0 * 128 * 768);
  EXPECT_EQ(work.bytes_read, 8.0 * 128 * 768 * kF32 + 8.0 * 128 * 8);  // dY and the indices
  EXPECT_EQ(work.bytes_written, 30522.0 * 768 * kF32);
}

TEST_F(OpWorkTest, ShapeAndOtherNonDifferentiableOpsStopTheGradient) {
  TensorDesc x = t({8, 128}), y = t({2}, DType::i64);
  EXPECT_FALSE(backward_rule("Shape").differentiable);
  EXPECT_EQ(bwd("Shape", attrs(), Ts{x}, Ts{y}, {true}), OpWork{});
  for (const char* type : {"Size", "Equal", "Less", "Greater", "ArgMax", "ArgMin", "NonZero", "Range", "ConstantOfShape",
                           "Constant", "Floor", "Ceil", "Round", "Not", "And", "Or"})
    EXPECT_FALSE(backward_rule(type).differentiable) << type;
}

TEST_F(OpWorkTest, AnIntegerCastGetsNoGradientAFloatCastMovesItBack) {
  TensorDesc f = t({100}), h = t({100}, DType::f16), i = t({100}, DType::i64);
  EXPECT_EQ(bwd("Cast", attrs(), Ts{f}, Ts{i}, {true}), OpWork{});
  EXPECT_EQ(bwd("Cast", attrs(), Ts{f}, Ts{h}, {true}), (OpWork{0, 200, 400, OpClass::data_movement}));
}

TEST_F(OpWorkTest, AliasesPassTheGradientThroughForFree) {
  TensorDesc x = t({8, 128, 768}), shape = t({2}, DType::i64), y = t({1024, 768});
  EXPECT_TRUE(backward_rule("Reshape").differentiable);
  EXPECT_EQ(bwd("Reshape", attrs(), Ts{x, shape}, Ts{y}, {true, false}), OpWork{});
}

TEST_F(OpWorkTest, AddPassesTheGradientOfOperandsOfTheOutputsShapeAndReducesBroadcastOnes) {
  TensorDesc x = t({8, 128, 768}), r = t({8, 128, 768}), bias = t({768}), y = t({8, 128, 768});
  const double n = 8.0 * 128 * 768;
  // A residual sum: both gradients are dY itself, no kernel (an autograd node, not an alias).
  const bool none[] = {false, false}, both[] = {true, true}, first[] = {true, false};
  EXPECT_EQ(passed_gradients("Add", Ts{x, r}, Ts{y}, none), 0u) << "no gradient needed, nothing passed";
  EXPECT_EQ(passed_gradients("Add", Ts{x, r}, Ts{y}, both), 3u);
  EXPECT_EQ(bwd("Add", attrs(), Ts{x, r}, Ts{y}, {true, true}), (OpWork{0, 0, 0, OpClass::elementwise}));
  // A bias: dX passes, dB sums dY over the broadcast axes (reads dY, writes 768 elements).
  EXPECT_EQ(passed_gradients("Add", Ts{x, bias}, Ts{y}, both), 1u);
  EXPECT_EQ(bwd("Add", attrs(), Ts{x, bias}, Ts{y}, {true, true}), (OpWork{n, n * kF32, 768 * kF32, OpClass::elementwise}));
  EXPECT_EQ(passed_gradients("Add", Ts{x, bias}, Ts{y}, first), 1u);
  EXPECT_EQ(bwd("Add", attrs(), Ts{x, bias}, Ts{y}, {true, false}), (OpWork{0, 0, 0, OpClass::elementwise}));
  // Sub's second gradient is -dY: a kernel; Sum passes every operand; Mul none; Mean's operands
  // share dY / k, passed as views of dY and priced as the one division.
  EXPECT_EQ(passed_gradients("Sub", Ts{x, r}, Ts{y}, both), 1u);
  EXPECT_EQ(bwd("Sub", attrs(), Ts{x, r}, Ts{y}, {true, true}), (OpWork{n, n * kF32, n * kF32, OpClass::elementwise}));
  const bool three[] = {true, true, true};
  EXPECT_EQ(passed_gradients("Sum", Ts{x, r, x}, Ts{y}, three), 7u);
  EXPECT_EQ(passed_gradients("Mul", Ts{x, r}, Ts{y}, both), 0u);
  EXPECT_EQ(passed_gradients("Mean", Ts{x, r}, Ts{y}, both), 3u);
  EXPECT_EQ(bwd("Mean", attrs(), Ts{x, r}, Ts{y}, {true, true}), (OpWork{n, n * kF32, n * kF32, OpClass::elementwise}));
  // Add(x, x): the gradient is 2·dY, a kernel; a type change is not a pass either.
  const bool repeated[] = {false, true};
  EXPECT_EQ(passed_gradients("Add", Ts{x, x}, Ts{y}, both, repeated), 0u);
  EXPECT_EQ(passed_gradients("Add", Ts{t({8, 128, 768}, DType::f16), r}, Ts{y}, both), 2u);
}

TEST_F(OpWorkTest, NothingNeedingAGradientCostsNothing) {
  TensorDesc a = t({16, 16}), y = t({16, 16});
  EXPECT_EQ(bwd("MatMul", attrs(), Ts{a, a}, Ts{y}, {false, false}), OpWork{});
}

}  // namespace
}  // namespace placer
