// Internal to exec/: how the profiler times a piece of work (docs/execution.md#the-profiler).
#pragma once

#include <cstdint>
#include <functional>

namespace placer::exec::detail {

// Minor page faults of this process so far (getrusage(RUSAGE_SELF): every thread's).
std::uint64_t process_minor_faults();

struct TimedRuns {
  double median_s = 0.0;  // of the clean runs; of every timed run when none was clean
  int clean = 0;          // timed runs that took no fresh memory
  int faulted = 0;        // timed runs that did: set aside
};

// Calls `body` once untimed, then times it until `repeats` runs (at least 1) were clean, setting
// aside, at most `max_faulted` times (at least 1), a run that took fresh memory from the kernel:
// during which the process took more than `fault_limit` minor page faults, or, in a run of a
// millisecond or more, spent more than a quarter of it (and over 0.5 ms) in the kernel (with
// transparent huge pages one fault maps 2 MiB; the kernel's system time moves by its ticks, so a
// run of a few ticks or less may still be set aside by one, which costs a repeat). Such a run
// measured the kernel mapping and zeroing pages as much as the work: an op timed alone can grow the
// heap on every call (its large output is not put in the block the call before it freed), where
// inside a step it reuses memory that the ops before it freed (BERT-base's 94 MB embedding
// gradient: 4-6 ms in a step, 195-300 ms timed alone).
TimedRuns time_runs(int repeats, const std::function<void()>& body, std::uint64_t fault_limit = 256, int max_faulted = 16);

}  // namespace placer::exec::detail
