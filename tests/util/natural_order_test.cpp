#include "placer/util/natural_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace placer {
namespace {

// inspect lists modules in this order: blocks.2 before blocks.10 (text order put blocks.10 and
// blocks.11 between blocks.1 and blocks.2; found by a review).
TEST(NaturalLess, NumbersCompareAsNumbers) {
  std::vector<std::string> names{"blocks.10", "", "blocks.2", "blocks.1", "head", "blocks.11", "blocks.1.attn", "blocks.02", "b"};
  std::sort(names.begin(), names.end(), NaturalLess{});
  EXPECT_EQ(names, (std::vector<std::string>{"", "b", "blocks.1", "blocks.1.attn", "blocks.02", "blocks.2", "blocks.10", "blocks.11", "head"}));
  const NaturalLess less;
  EXPECT_FALSE(less("x", "x"));
  EXPECT_TRUE(less("x9", "x10"));
  EXPECT_FALSE(less("x10", "x9"));
  EXPECT_TRUE(less("layer99999999999999999999", "layer100000000000000000000"));  // past 64 bits
  EXPECT_NE(less("a07", "a7"), less("a7", "a07"));                               // strict: one of them comes first
}

}  // namespace
}  // namespace placer
