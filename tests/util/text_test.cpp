#include "placer/util/text.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace placer {
namespace {

// Shapes in messages: every dimension up to rank 21, then the first 16, the rank and the last 4
// (a rank of 10,002 made an error line of 20,178 characters: a QA pass).
TEST(DimsText, ShowsEveryDimensionOrTheEndsAndTheRank) {
  EXPECT_EQ(dims_text(std::vector<std::int64_t>{}), "[]");
  EXPECT_EQ(dims_text(std::vector<std::int64_t>{32, 128}), "[32,128]");
  std::vector<std::int64_t> dims(21);
  std::iota(dims.begin(), dims.end(), 1);
  EXPECT_EQ(dims_text(dims), "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21]");
  dims.resize(10002);
  std::iota(dims.begin(), dims.end(), 1);
  EXPECT_EQ(dims_text(dims), "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,...(10002 dimensions)...,9999,10000,10001,10002]");
}

}  // namespace
}  // namespace placer
