#include "placer/util/stats.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace placer {
namespace {

// The middle value of an odd count, the mean of the two middle values of an even one (fit's error
// and the profiler's op times took the upper one: a review), whatever the order; 0 for none.
TEST(MedianOf, IsTheMiddleOrTheMeanOfTheTwoMiddles) {
  EXPECT_EQ(median_of({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median_of({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median_of({2.0, 1.0}), 1.5);
  EXPECT_EQ(median_of({7.0}), 7.0);
  EXPECT_EQ(median_of({}), 0.0);
  const std::vector<double> kept{5.0, 1.0, 4.0, 2.0};
  EXPECT_EQ(median_of(kept), 3.0);
  EXPECT_EQ(kept, (std::vector<double>{5.0, 1.0, 4.0, 2.0}));  // the caller's values are left as they were
}

}  // namespace
}  // namespace placer
