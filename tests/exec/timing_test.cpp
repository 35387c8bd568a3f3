// How the profiler times a piece of work (exec/timing.hpp): runs that page-faulted are set aside.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstddef>
#include <thread>

#include "placer/exec/timing.hpp"

namespace placer {
namespace {

// Maps `bytes` of fresh memory (small pages) and writes every page: one minor fault per page.
void touch_fresh_memory(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  madvise(p, bytes, MADV_NOHUGEPAGE);
  for (std::size_t i = 0; i < bytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
  munmap(p, bytes);
}

TEST(Timing, CountsTheProcesssPageFaults) {
  const std::uint64_t before = exec::detail::process_minor_faults();
  touch_fresh_memory(8 << 20);
  EXPECT_GE(exec::detail::process_minor_faults() - before, 1024u);  // 2048 pages written
}

TEST(Timing, SetsAsideRunsThatPageFaulted) {
  int calls = 0;
  // The untimed call and the first three timed ones map fresh memory and take 50 ms; the rest
  // neither: the median is of the fast ones.
  const auto r = exec::detail::time_runs(5, [&] {
    if (calls++ < 4) {
      touch_fresh_memory(8 << 20);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  EXPECT_EQ(r.faulted, 3);
  EXPECT_EQ(r.clean, 5);
  EXPECT_EQ(calls, 9);
  EXPECT_LT(r.median_s, 0.025);
}

TEST(Timing, KeepsEveryRunWhenAllFaultAndStopsAtTheLimit) {
  int calls = 0;
  const auto r = exec::detail::time_runs(3, [&] {
    ++calls;
    touch_fresh_memory(8 << 20);
  }, 256, 4);
  EXPECT_EQ(r.clean, 0);
  EXPECT_EQ(r.faulted, 4);  // the limit
  EXPECT_EQ(calls, 5);
  EXPECT_GT(r.median_s, 0.0);  // the median of the faulted runs: a time, not nothing
}

TEST(Timing, TimesAtLeastOneRunAndSetsAsideAtLeastOne) {
  int calls = 0;
  const auto r = exec::detail::time_runs(0, [&] { ++calls; });
  EXPECT_EQ(r.clean, 1);
  EXPECT_EQ(calls, 2);
  calls = 0;
  const auto none = exec::detail::time_runs(1, [&] {
    ++calls;
    touch_fresh_memory(8 << 20);
  }, 256, 0);
  EXPECT_EQ(none.faulted, 1);
  EXPECT_EQ(calls, 2);
  EXPECT_GT(none.median_s, 0.0);
}

}  // namespace
}  // namespace placer
