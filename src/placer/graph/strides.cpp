#include "placer/graph/strides.hpp"

#include <algorithm>

namespace placer {

std::vector<std::int64_t> row_major_strides(std::span<const std::int64_t> shape) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t step = 1;
  for (std::size_t k = shape.size(); k-- > 0;) strides[k] = step, step *= std::max<std::int64_t>(shape[k], 1);
  return strides;
}

bool in_row_major_order(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  std::int64_t step = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 1) continue;
    if (strides[k] != step) return false;
    step *= shape[k];
  }
  return true;
}

bool mergeable(std::span<const int> dims, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  int prev = -1;
  for (int d : dims) {
    const auto k = static_cast<std::size_t>(d);
    if (shape[k] == 1) continue;
    if (prev >= 0 && strides[static_cast<std::size_t>(prev)] != strides[k] * shape[k]) return false;
    prev = d;
  }
  return true;
}

}  // namespace placer
