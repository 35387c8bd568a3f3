// Strides of tensors as PyTorch lays them out, in elements: the graph's views and permuted outputs
// (Graph::tensor_strides) and the layout rules of products (einsum_layout, matmul_layout) use them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace placer {

// The strides of a tensor of `shape` in row-major order (a dimension of size 0 counts as 1).
std::vector<std::int64_t> row_major_strides(std::span<const std::int64_t> shape);

// Whether elements laid out with `strides` are in row-major order (dimensions of size 1 aside):
// PyTorch's is_contiguous().
bool in_row_major_order(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);

// Whether dimensions `dims` of a tensor of `shape` laid out with `strides`, taken in this order,
// merge into one without a copy (PyTorch's `view`): each one of size > 1 steps over the whole
// extent of the next such one.
bool mergeable(std::span<const int> dims, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);

}  // namespace placer
