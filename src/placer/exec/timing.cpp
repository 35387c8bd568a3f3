#include "placer/exec/timing.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace placer::exec::detail {

std::uint64_t thread_minor_faults() {
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
  return static_cast<std::uint64_t>(usage.ru_minflt);
}

TimedRuns time_runs(int repeats, const std::function<void()>& body, std::uint64_t fault_limit, int max_faulted) {
  repeats = std::max(1, repeats);
  body();
  std::vector<double> clean, faulted;
  while (static_cast<int>(clean.size()) < repeats && static_cast<int>(faulted.size()) < max_faulted) {
    const std::uint64_t faults = thread_minor_faults();
    const auto start = std::chrono::steady_clock::now();
    body();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (thread_minor_faults() - faults > fault_limit ? faulted : clean).push_back(seconds);
  }
  TimedRuns r;
  r.clean = static_cast<int>(clean.size());
  r.faulted = static_cast<int>(faulted.size());
  std::vector<double>& times = clean.empty() ? faulted : clean;
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  r.median_s = times[times.size() / 2];
  return r;
}

}  // namespace placer::exec::detail
