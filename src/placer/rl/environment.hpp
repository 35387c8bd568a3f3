// The environment every learned placer trains against: it scores a batch of sampled placements
// (devices of forward ops) on the simulator, in parallel on a small persistent thread pool (one
// Evaluator per thread), and returns one Score per placement in sample order, so that results never
// depend on the number of threads. submit() returns at once, so the caller can run the policy while
// the batch is simulated; wait() blocks until every score is in.
//
// Reward (ColocRL): -sqrt(step time in seconds). A placement that does not fit in memory is scored
// as if it took step_time x penalty x (1 + shortfall fraction), where the shortfall fraction is the
// largest (bytes over the limit / limit) over devices: worse than the same placement fitting, worse
// the more it overflows; it is never kept as the best. Not thread-safe itself: one owner thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "placer/algorithms/placer.hpp"

namespace placer::rl {

struct Score {
  double step_time_s = 0.0;         // simulated step time
  bool fits = true;
  double shortfall_fraction = 0.0;  // max over devices of (peak - limit) / limit; 0 when it fits
  double penalized_time_s = 0.0;    // step time, penalized when it does not fit
  double reward = 0.0;              // -sqrt(penalized_time_s)
};

// The score of one simulated step under `limits` (memory_limits(problem)).
Score score_of(const SimResult& r, const std::vector<std::uint64_t>& limits, double penalty);

class Environment {
 public:
  // threads: simulator threads (0 = every core). penalty: factor for placements that do not fit.
  Environment(const Problem& problem, unsigned threads, double penalty);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  // Starts scoring `placements` (each one device per forward op). REQUIRES: no batch in flight.
  void submit(std::vector<std::vector<DeviceId>> placements);
  // Waits for the batch submitted last; scores in sample order. Rethrows the first error a
  // simulation of the batch threw (after the whole batch is done).
  std::vector<Score> wait();
  std::vector<Score> evaluate(std::vector<std::vector<DeviceId>> placements) {
    submit(std::move(placements));
    return wait();
  }
  unsigned threads() const { return static_cast<unsigned>(workers_.size()); }
  // Seconds spent simulating the batches so far, summed over threads.
  double simulation_seconds() const { return sim_seconds_; }

 private:
  void work(std::size_t worker);
  const Problem& problem_;
  std::vector<std::uint64_t> limits_;
  double penalty_;
  std::vector<std::unique_ptr<Evaluator>> evaluators_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::vector<DeviceId>> batch_;
  std::vector<Score> scores_;
  std::vector<double> worker_seconds_;
  std::size_t next_ = 0, finished_ = 0, generation_ = 0;
  bool stop_ = false;
  double sim_seconds_ = 0.0;
  std::exception_ptr failure_;  // the first error of the batch's simulations, rethrown by wait()
};

}  // namespace placer::rl
