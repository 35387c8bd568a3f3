#include "placer/util/units.hpp"

#include <gtest/gtest.h>

namespace placer {
namespace {

TEST(Units, SecondsInTheUnitOfTheirSize) {
  EXPECT_EQ(human_seconds(15e-6), "15.0 us");
  EXPECT_EQ(human_seconds(0.0123), "12.30 ms");
  EXPECT_EQ(human_seconds(1.2344), "1.234 s");
  EXPECT_EQ(human_seconds(0.99996e-3), "1.00 ms");  // rounded up into the next unit
  EXPECT_EQ(human_seconds(2e6), "2.000e+06 s");
}

// A profile's residual can be negative: it printed "-3416205.2 us" for -3.416 s (a review).
TEST(Units, NegativeSecondsKeepTheUnitOfTheirSize) {
  EXPECT_EQ(human_seconds(-3.4162052), "-3.416 s");
  EXPECT_EQ(human_seconds(-0.6843306), "-684.33 ms");
  EXPECT_EQ(human_seconds(-12e-6), "-12.0 us");
}

TEST(Units, BytesAndCounts) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(97.5 * 1024 * 1024), "97.5 MiB");
  EXPECT_EQ(human_bytes(0x1p58), "256.0 PiB");  // was "262144.0 TiB" (a QA pass)
  EXPECT_EQ(human_bytes(0x1p64), "16.0 EiB");
  EXPECT_EQ(human_bytes(1e30), "1.00e+30 B");
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(999.996), "1.00K");
  EXPECT_EQ(human_count(25.6e6), "25.60M");
  EXPECT_EQ(human_count(999.99e15), "999.99P");
  EXPECT_EQ(human_count(1e300), "1.00e+300");  // was 300 digits and a "P" (found by a fuzzing review)
}

}  // namespace
}  // namespace placer
