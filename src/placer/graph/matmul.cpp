#include "placer/graph/matmul.hpp"

#include <algorithm>

#include "placer/graph/graph.hpp"
#include "placer/graph/strides.hpp"

namespace placer {
namespace {

std::uint64_t elements(std::span<const std::int64_t> shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
  return n;
}

}  // namespace

MatMulLayout matmul_layout(std::span<const std::int64_t> shape_a, std::span<const std::int64_t> strides_a,
                           std::span<const std::int64_t> shape_b, std::span<const std::int64_t> strides_b) {
  MatMulLayout r;
  const std::size_t da = shape_a.size(), db = shape_b.size();
  if (da == 0 || db == 0) return r;
  const std::vector<std::int64_t> sa = strides_a.size() == da ? std::vector<std::int64_t>(strides_a.begin(), strides_a.end()) : row_major_strides(shape_a);
  const std::vector<std::int64_t> sb = strides_b.size() == db ? std::vector<std::int64_t>(strides_b.begin(), strides_b.end()) : row_major_strides(shape_b);
  if (da <= 2 && db <= 2) return r;
  // A 3-D operand whose last two dimensions are transposed, its first the outermost, by a matrix:
  // not folded (that would copy it) but one batched product of each matrix transposed, the matrix
  // broadcast over the batch (libtorch 1.13's should_fold).
  auto transposed_batch = [](std::span<const std::int64_t> shape, const std::vector<std::int64_t>& st) {
    return shape.size() == 3 && st[2] != 1 && st[0] == shape[1] * shape[2];
  };
  if ((da == 3 && db == 2 && transposed_batch(shape_a, sa)) || (da == 2 && db == 3 && transposed_batch(shape_b, sb))) {
    const std::size_t matrix = da == 2 ? 0 : 1;
    const std::span<const std::int64_t> m = matrix == 0 ? shape_a : shape_b, batched = matrix == 0 ? shape_b : shape_a;
    r.broadcast_gradient_elements[matrix] = static_cast<std::uint64_t>(std::max<std::int64_t>(batched[0] - 1, 0)) * elements(m);
    r.per_matrix = true;
    return r;
  }
  if (da >= 3 && db <= 2) {
    if (!in_row_major_order(shape_a, sa)) r.copied_elements[0] = elements(shape_a);
    return r;
  }
  if (da <= 2 && db >= 3) {
    // Bᵀ folded: in row-major order when B is its last two dimensions transposed.
    std::vector<std::int64_t> shape_t(shape_b.begin(), shape_b.end()), strides_t = sb;
    std::swap(shape_t[db - 1], shape_t[db - 2]), std::swap(strides_t[db - 1], strides_t[db - 2]);
    if (!in_row_major_order(shape_t, strides_t)) r.copied_elements[1] = elements(shape_b);
    const std::int64_t n = da == 2 ? shape_a[0] : 1, p = shape_b[db - 1];
    if (da == 2 && n > 1 && p > 1) r.transposed_result_elements = elements(shape_b.first(db - 2)) * static_cast<std::uint64_t>(n * p);
    return r;
  }
  // Both batched: broadcast the batch dimensions, then [batch, rows, columns].
  const std::size_t rank = std::max(da, db) - 2;
  std::vector<std::int64_t> batch(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t from_end = rank - k;
    const std::int64_t a = from_end <= da - 2 ? shape_a[da - 2 - from_end] : 1, b = from_end <= db - 2 ? shape_b[db - 2 - from_end] : 1;
    batch[k] = a == 1 ? b : a;
    if (a != b && a != 1 && b != 1) return r;  // (no product: the import refuses it)
  }
  std::uint64_t batch_elements = 1;
  for (std::int64_t d : batch) batch_elements *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
  auto copied = [&](std::span<const std::int64_t> shape, const std::vector<std::int64_t>& strides) -> std::uint64_t {
    const std::size_t d = shape.size();
    // The broadcast batch dimensions' strides: 0 where the operand repeats.
    std::vector<std::int64_t> st(rank, 0);
    for (std::size_t k = 0; k < rank; ++k) {
      const std::size_t from_end = rank - k;
      if (from_end <= d - 2 && shape[d - 2 - from_end] == batch[k]) st[k] = strides[d - 2 - from_end];
    }
    std::vector<int> dims(rank);
    for (std::size_t k = 0; k < rank; ++k) dims[k] = static_cast<int>(k);
    return mergeable(dims, batch, st) ? 0 : batch_elements * static_cast<std::uint64_t>(shape[d - 2] * shape[d - 1]);
  };
  r.copied_elements[0] = copied(shape_a, sa);
  r.copied_elements[1] = copied(shape_b, sb);
  // An operand repeated over some of the batch gets its gradient at the batch's size, then summed.
  auto repeated = [&](std::span<const std::int64_t> shape) {
    const std::uint64_t own = elements(shape.first(shape.size() - 2));
    const std::uint64_t matrix = static_cast<std::uint64_t>(shape[shape.size() - 2] * shape[shape.size() - 1]);
    return own < batch_elements ? (batch_elements - own) * matrix : 0;
  };
  r.broadcast_gradient_elements[0] = repeated(shape_a);
  r.broadcast_gradient_elements[1] = repeated(shape_b);
  return r;
}

std::optional<MatMulLayout> matmul_layout_of(const Graph& g, OpId op) {
  const auto ins = g.op_inputs(op);
  if (ins.size() < 2 || ins[0] == kNoId || ins[1] == kNoId) return std::nullopt;
  const std::vector<std::int64_t> sa = g.tensor_strides(ins[0]), sb = g.tensor_strides(ins[1]);
  return matmul_layout(g.tensor_shape(ins[0]), sa, g.tensor_shape(ins[1]), sb);
}

}  // namespace placer
