// How libtorch's matmul copies its operands (measured on the host meter: tests/exec/memory_meter_test.cpp).
#include "placer/graph/matmul.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace placer {
namespace {

using Dims = std::vector<std::int64_t>;

MatMulLayout layout(const Dims& a, const Dims& sa, const Dims& b, const Dims& sb) { return matmul_layout(a, sa, b, sb); }

// Attention's heads, [B, T, H, d] viewed as [B, H, T, d]: the batch dimensions B and H cannot be
// merged in place, so the batched product copies Q, and Kᵀ (its last two dimensions swapped too).
TEST(MatMulLayout, BatchedOperandsAreCopiedWhenTheirBatchDimensionsCannotMerge) {
  const Dims q{2, 3, 5, 4}, q_strides{60, 4, 12, 1};  // a [2, 5, 3, 4] tensor viewed as [2, 3, 5, 4]
  const Dims kt{2, 3, 4, 5}, kt_strides{60, 4, 1, 12};
  const MatMulLayout qk = layout(q, q_strides, kt, kt_strides);
  EXPECT_EQ(qk.copied_elements[0], 120u);
  EXPECT_EQ(qk.copied_elements[1], 120u);
  EXPECT_EQ(qk.transposed_result_elements, 0u);
  // In row-major order, or with only the matrix dimensions transposed: merged in place.
  const MatMulLayout plain = layout(q, {}, kt, {60, 20, 1, 4});
  EXPECT_EQ(plain.copied_elements[0], 0u);
  EXPECT_EQ(plain.copied_elements[1], 0u);
  // A batch dimension broadcast from 1 repeats with stride 0: merged with another, a copy of the
  // broadcast size; alone (or all broadcast), in place.
  EXPECT_EQ(layout({2, 3, 5, 4}, {}, {1, 3, 4, 6}, {}).copied_elements[1], 2u * 3 * 4 * 6);
  EXPECT_EQ(layout({2, 3, 5, 4}, {}, {1, 1, 4, 6}, {}).copied_elements[1], 0u);
  EXPECT_EQ(layout({2, 3, 5, 4}, {}, {3, 4, 6}, {}).copied_elements[1], 2u * 3 * 4 * 6) << "a missing leading dimension repeats too";
  EXPECT_EQ(layout({2, 3, 5, 4}, {}, {2, 1, 4, 6}, {}).copied_elements[1], 2u * 3 * 4 * 6);
  EXPECT_EQ(layout({1, 3, 5, 4}, {}, {1, 3, 4, 6}, {}).copied_elements[0], 0u);
}

// A batched A by a matrix: A's batch folded into its rows, in place only when A is in row-major
// order. A matrix by a batched B: computed transposed, Bᵀ folded likewise (in place when B is a
// transposed row-major tensor), the result transposed back by a copy.
// A 3-D operand whose last two dimensions are transposed, its first the outermost (x.transpose(1, 2)
// of a row-major tensor), by a matrix: libtorch 1.13's matmul does not fold it (that would copy it)
// but runs one batched product of transposed matrices, the matrix broadcast over the batch; that
// operand's gradient is then computed at the batch's size before it is summed. A broadcast operand
// of a batched product likewise.
TEST(MatMulLayout, ATransposedBatchByAMatrixIsABatchedProductWithoutCopies) {
  const MatMulLayout tokens = layout({8, 128, 64}, {8192, 1, 128}, {64, 32}, {});
  EXPECT_EQ(tokens.copied_elements[0], 0u);
  EXPECT_EQ(tokens.copied_elements[1], 0u);
  EXPECT_EQ(tokens.broadcast_gradient_elements[0], 0u);
  EXPECT_EQ(tokens.broadcast_gradient_elements[1], 7u * 64 * 32);
  // The matrix on the left, the transposed batch on the right: no copy, no transposed result.
  const MatMulLayout left = layout({32, 64}, {}, {8, 64, 128}, {8192, 1, 64});
  EXPECT_EQ(left.copied_elements[1], 0u);
  EXPECT_EQ(left.transposed_result_elements, 0u);
  EXPECT_EQ(left.broadcast_gradient_elements[0], 7u * 32 * 64);
  // Permuted otherwise (the batch not outermost): folded through a copy, as before.
  EXPECT_EQ(layout({8, 128, 64}, {64, 512, 1}, {64, 32}, {}).copied_elements[0], 8u * 128 * 64);
  // Both batched, B repeated over the first batch dimension: its gradient at [2, 3] matrices.
  const MatMulLayout repeated = layout({2, 3, 5, 4}, {}, {3, 4, 6}, {});
  EXPECT_EQ(repeated.broadcast_gradient_elements[0], 0u);
  EXPECT_EQ(repeated.broadcast_gradient_elements[1], 3u * 4 * 6);
}

TEST(MatMulLayout, AMatrixOperandFoldsTheOthersBatchIntoItsRows) {
  const Dims a{2, 3, 5, 4};
  EXPECT_EQ(layout(a, {60, 4, 12, 1}, {4, 6}, {}).copied_elements[0], 120u);
  EXPECT_EQ(layout(a, {}, {4, 6}, {1, 4}).copied_elements[0], 0u) << "A in order; B transposed is mm's business";
  const MatMulLayout left = layout({6, 4}, {}, {2, 3, 4, 5}, {});
  EXPECT_EQ(left.copied_elements[1], 120u) << "Bᵀ is not in order";
  EXPECT_EQ(left.transposed_result_elements, 2u * 3 * 6 * 5);
  EXPECT_EQ(layout({6, 4}, {}, {2, 3, 4, 5}, {60, 20, 1, 4}).copied_elements[1], 0u) << "B a transposed [2, 3, 5, 4]";
  EXPECT_EQ(layout({4}, {}, {2, 3, 4, 5}, {}).transposed_result_elements, 0u) << "a vector: the result needs no transposing";
  EXPECT_EQ(layout({5, 4}, {}, {4, 6}, {}).copied_elements[0], 0u);
}

}  // namespace
}  // namespace placer
