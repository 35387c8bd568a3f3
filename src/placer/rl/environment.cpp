#include "placer/rl/environment.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <system_error>
#include <utility>

#include "placer/util/error.hpp"

namespace placer::rl {

Score score_of(const SimResult& r, const std::vector<std::uint64_t>& limits, double penalty) {
  Score s;
  s.step_time_s = r.step_time_s;
  s.fits = r.fits;
  for (auto [device, bytes] : r.shortfalls) {
    const double limit = device < limits.size() && limits[device] > 0 ? static_cast<double>(limits[device]) : 1.0;
    s.shortfall_fraction = std::max(s.shortfall_fraction, static_cast<double>(bytes) / limit);
  }
  s.penalized_time_s = r.fits ? r.step_time_s : r.step_time_s * penalty * (1.0 + s.shortfall_fraction);
  s.reward = -std::sqrt(s.penalized_time_s);
  return s;
}

Environment::Environment(const Problem& problem, unsigned threads, double penalty)
    : problem_(problem), limits_(memory_limits(problem)), penalty_(penalty) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  worker_seconds_.assign(threads, 0.0);
  for (unsigned i = 0; i < threads; ++i) evaluators_.push_back(std::make_unique<Evaluator>(problem_));
  try {
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  } catch (const std::system_error& e) {
    // The threads started wait on members that are about to go: stop and join them first.
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    throw Error("cannot start " + std::to_string(threads) + " simulation threads (started " + std::to_string(workers_.size()) +
                "): " + e.what() + "; ask for fewer with --threads");
  }
}

Environment::~Environment() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void Environment::submit(std::vector<std::vector<DeviceId>> placements) {
  {
    std::lock_guard lock(mutex_);
    batch_ = std::move(placements);
    scores_.assign(batch_.size(), Score{});
    next_ = 0;
    finished_ = 0;
    ++generation_;
  }
  wake_.notify_all();
}

std::vector<Score> Environment::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return finished_ == batch_.size(); });
  double total = 0.0;
  for (double& s : worker_seconds_) total += std::exchange(s, 0.0);
  sim_seconds_ += total;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  return std::move(scores_);
}

void Environment::work(std::size_t worker) {
  std::size_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && next_ < batch_.size()); });
    if (stop_) return;
    while (next_ < batch_.size()) {
      const std::size_t i = next_++;
      lock.unlock();
      const auto start = std::chrono::steady_clock::now();
      // A simulation that throws (a step time past what a double holds) ends the search with its
      // error, rethrown by wait(): thrown out of the thread it aborted the process (a review).
      Score s;
      std::exception_ptr failed;
      try {
        s = score_of(evaluators_[worker]->evaluate(batch_[i]), limits_, penalty_);
      } catch (...) {
        failed = std::current_exception();
      }
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      lock.lock();
      if (failed && !failure_) failure_ = failed;
      scores_[i] = s;
      worker_seconds_[worker] += took;
      if (++finished_ == batch_.size()) done_.notify_all();
    }
    seen = generation_;
  }
}

}  // namespace placer::rl
