// How PyTorch evaluates a MatMul (libtorch 1.13's at::matmul, the executor's kernel), as far as
// memory goes. By the operands' ranks:
// - both at most 2-D: one matrix product (mm, mv, dot), which reads transposed operands as they are;
// - A of 3 or more dimensions, B of 1 or 2: A's leading dimensions folded into its rows, a view
//   of A only when A is in row-major order (else a copy, `contiguous()`), then mm; but a 3-D A
//   whose last two dimensions are transposed and whose first is the outermost (a permute(0, 2, 1)
//   of a row-major tensor) by a matrix is a batched product of each matrix transposed, B
//   broadcast over the batch (matmul's `should_fold`): no copy;
// - A of 1 or 2, B of 3 or more: the product computed transposed, matmul(Bᵀ, Aᵀ), which folds Bᵀ
//   as above (a copy unless B is a transposed row-major tensor), and for a 2-D A the result
//   transposed back by a copy (`contiguous()`), the transposed result held until then; the same
//   exception for a 3-D B whose last two dimensions are transposed;
// - both of 3 or more: each operand broadcast to the common batch dimensions (stride 0 where it
//   repeats) and reshaped to [batch, rows, columns], a copy of that broadcast size when its batch
//   dimensions cannot be merged in place (PyTorch's `view` rule), then one batched product.
// The output is the product's storage, in row-major order. Autograd keeps each copy for the other
// operand's gradient (mm's and bmm's saved operands), and a broadcast operand's gradient is
// computed at the batch's size and then summed to the operand's (`broadcast_gradient_elements`).
//
//   MatMulLayout l = matmul_layout({8, 4, 128, 64}, q_strides, {8, 4, 64, 128}, k_t_strides);
//   l.copied_elements[0];  // Q copied into [32, 128, 64] when Q is a permuted view
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "placer/graph/types.hpp"

namespace placer {

class Graph;

struct MatMulLayout {
  std::uint64_t copied_elements[2] = {0, 0};  // per operand: the elements of its copy (0: none)
  std::uint64_t transposed_result_elements = 0;  // a 2-D A by a B of 3 or more: the result computed transposed, then copied
  // Per operand broadcast over the batched product's batch: the elements its gradient holds at the
  // batch's size beyond its own size, before it is summed (0: not broadcast).
  std::uint64_t broadcast_gradient_elements[2] = {0, 0};
  // A transposed 3-D operand by a matrix: one product per matrix of the batch, not one product of
  // the batch folded into rows (OpWork::product_min_dim is then a matrix's).
  bool per_matrix = false;
};

// `strides_*` in elements (empty: row-major). Shapes that do not multiply give no copies.
MatMulLayout matmul_layout(std::span<const std::int64_t> shape_a, std::span<const std::int64_t> strides_a,
                           std::span<const std::int64_t> shape_b, std::span<const std::int64_t> strides_b);

// matmul_layout of MatMul op `op` of `g`, its operands laid out as the graph has them
// (Graph::tensor_strides); none when an operand is absent.
std::optional<MatMulLayout> matmul_layout_of(const Graph& g, OpId op);

}  // namespace placer
