// Internal to exec/: how the profiler times a piece of work (docs/execution.md#the-profiler).
#pragma once

#include <cstdint>
#include <functional>

namespace placer::exec::detail {

// Minor page faults of the calling thread so far (getrusage(RUSAGE_THREAD)).
std::uint64_t thread_minor_faults();

struct TimedRuns {
  double median_s = 0.0;  // of the clean runs; of every timed run when none was clean
  int clean = 0;          // timed runs that page-faulted at most the limit
  int faulted = 0;        // timed runs that page-faulted more: set aside
};

// Calls `body` once untimed, then times it until `repeats` runs (at least 1) were clean, setting
// aside a run during which the thread page-faulted more than `fault_limit` times, at most
// `max_faulted` of them. Such a run measured the kernel mapping fresh memory as much as the work:
// an op timed alone can grow the heap on every call (its large output does not fit the holes that
// the calls before it left), where inside a step it reuses memory that the ops before it freed
// (BERT-base's 94 MB embedding gradient: 4-6 ms in a step, 195-300 ms timed alone).
TimedRuns time_runs(int repeats, const std::function<void()>& body, std::uint64_t fault_limit = 256, int max_faulted = 16);

}  // namespace placer::exec::detail
