#include "placer/exec/timing.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "placer/util/stats.hpp"

namespace placer::exec::detail {

namespace {

struct Usage {
  std::uint64_t minor_faults = 0;
  double system_s = 0.0;
};

// The whole process's: libtorch's worker threads write most of a large output.
Usage process_usage() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return {};
  return {static_cast<std::uint64_t>(u.ru_minflt), static_cast<double>(u.ru_stime.tv_sec) + 1e-6 * static_cast<double>(u.ru_stime.tv_usec)};
}

}  // namespace

std::uint64_t process_minor_faults() { return process_usage().minor_faults; }

TimedRuns time_runs(int repeats, const std::function<void()>& body, std::uint64_t fault_limit, int max_faulted) {
  repeats = std::max(1, repeats);
  max_faulted = std::max(1, max_faulted);
  body();
  std::vector<double> clean, faulted;
  while (static_cast<int>(clean.size()) < repeats && static_cast<int>(faulted.size()) < max_faulted) {
    const Usage before = process_usage();
    const auto start = std::chrono::steady_clock::now();
    body();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Usage after = process_usage();
    // Many faults, or (huge pages: one fault per 2 MiB) much of the run in the kernel. The kernel's
    // share is read only for runs of a millisecond or more: the kernel splits a process's CPU time
    // between user and system by the ticks it sampled, so across a run of microseconds the system
    // time can jump by a tick's worth (a trivial run was set aside under load: a flaky test).
    const double system_s = after.system_s - before.system_s;
    const bool fresh_memory = after.minor_faults - before.minor_faults > fault_limit ||
                              (seconds >= 1e-3 && system_s > 5e-4 && system_s > 0.25 * seconds);
    (fresh_memory ? faulted : clean).push_back(seconds);
  }
  TimedRuns r;
  r.clean = static_cast<int>(clean.size());
  r.faulted = static_cast<int>(faulted.size());
  std::vector<double>& times = clean.empty() ? faulted : clean;
  r.median_s = median_of(times);
  return r;
}

}  // namespace placer::exec::detail
