// Small statistics over samples.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace placer {

// The median of `v`: the middle value, or the mean of the two middle values of an even
// count (the upper one alone was taken in places: a review); 0 for none.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  const double upper = *mid;
  return v.size() % 2 ? upper : (upper + *std::max_element(v.begin(), mid)) / 2;
}

}  // namespace placer
