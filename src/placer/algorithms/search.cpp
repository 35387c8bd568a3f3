// Search placers with the simulator as the objective:
// - local-search: simulated annealing over groups of ops, started from the best of the constructive
//   placers (or another algorithm's placement), in independent chains run on every core; by
//   default it searches modules, then co-location groups, then single ops, each level from the
//   best placement the one before found;
// - optimal: the optimum over groups for small problems, by exhaustive enumeration (simulating
//   every placement) or, when that is too large, an integer program solved with CBC over a
//   load + communication model whose solution is then simulated.
// Both are deterministic under the seed: they stop on sample counts, never on the clock, unless a
// wall-time budget is given, and results never depend on how many threads ran them; except that
// the integer program stops at its own time limit (ip-seconds), so a problem CBC cannot prove
// optimal within it may get another solution on a slower or busier machine.
#include <coin/CbcModel.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <system_error>
#include <thread>

#include "placer/algorithms/families.hpp"
#include "placer/algorithms/grouping.hpp"
#include "placer/util/error.hpp"
#include "placer/util/text.hpp"

namespace placer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The devices a search places on: the GPUs ("gpus"; every device when there are fewer than two,
// since one device leaves nothing to search) or all.
std::vector<DeviceId> devices_of(const Cluster& c, const std::string& which, const std::string& algo) {
  std::vector<DeviceId> all(c.num_devices());
  for (DeviceId d = 0; d < all.size(); ++d) all[d] = d;
  if (which == "all") return all;
  if (which != "gpus") throw Error(algo + ": option 'devices' must be 'gpus' or 'all', got '" + which + "'");
  std::vector<DeviceId> gpus = c.device_ids(DeviceKind::gpu);
  return gpus.size() < 2 ? all : gpus;
}

unsigned thread_count(const Budget& budget) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return budget.threads == 0 ? hw : budget.threads;
}

// A seed per chain or worker, derived from the placer's seed (splitmix64).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Forward ops of each group.
std::vector<std::vector<OpId>> members_of(const Grouping& grouping) {
  std::vector<std::vector<OpId>> members(grouping.num_groups);
  for (OpId o = 0; o < grouping.group_of.size(); ++o) members[grouping.group_of[o]].push_back(o);
  return members;
}

std::uint64_t total_shortfall(const SimResult& r) {
  std::uint64_t s = 0;
  for (const auto& [d, bytes] : r.shortfalls) s += bytes;
  return s;
}

// What a search keeps as its best: a placement that fits beats one that does not; among those that
// fit, the faster; among those that do not, the one closer to fitting.
struct Candidate {
  std::vector<DeviceId> devices;  // forward ops
  bool fits = false;
  double step_time_s = kInf;
  std::uint64_t shortfall_bytes = std::numeric_limits<std::uint64_t>::max();
  bool better_than(const Candidate& o) const {
    if (fits != o.fits) return fits;
    if (fits) return step_time_s < o.step_time_s;
    return shortfall_bytes != o.shortfall_bytes ? shortfall_bytes < o.shortfall_bytes : step_time_s < o.step_time_s;
  }
  void take(std::span<const DeviceId> d, const SimResult& r) {
    devices.assign(d.begin(), d.end());
    fits = r.fits, step_time_s = r.step_time_s, shortfall_bytes = total_shortfall(r);
  }
  bool beaten_by(const SimResult& r) const {
    Candidate c;
    c.fits = r.fits, c.step_time_s = r.step_time_s, c.shortfall_bytes = total_shortfall(r);
    return devices.empty() || c.better_than(*this);
  }
};

// Lowers `best` to `value` atomically.
void atomic_min(std::atomic<double>& best, double value) {
  double now = best.load();
  while (value < now && !best.compare_exchange_weak(now, value)) {
  }
}

// Runs `work(worker)` on `threads` threads while the calling thread reports progress to the
// observer (it is the thread that runs place()) and passes on a stop request. The first error a
// worker throws (a simulation past what a double holds) stops the others and is rethrown here:
// thrown out of its thread it aborted the process (a review).
template <typename Work>
void run_workers(unsigned threads, Work&& work, Observer& observer, std::atomic<bool>& stop, std::atomic<std::size_t>& samples,
                 std::size_t samples_total, std::atomic<double>& best_time, Clock::time_point start) {
  if (observer.stop_requested()) stop = true;
  std::mutex mutex;
  std::condition_variable finished;
  unsigned running = threads;
  std::exception_ptr failure;
  std::vector<std::thread> pool;
  pool.reserve(threads);
  try {
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::exception_ptr failed;
        try {
          work(t);
        } catch (...) {
          failed = std::current_exception();
          stop = true;
        }
        const std::lock_guard lock(mutex);
        if (failed && !failure) failure = failed;
        --running;
        finished.notify_one();
      });
  } catch (const std::system_error& e) {
    stop = true;  // the threads started end at their next check
    for (auto& t : pool) t.join();
    throw Error("cannot start " + std::to_string(threads) + " search threads (started " + std::to_string(pool.size()) + "): " + e.what() +
                "; ask for fewer with --threads");
  }
  auto report = [&] {
    const double best = best_time.load();
    observer.on_progress({.samples = samples.load(), .samples_total = samples_total, .best_step_time_s = best == kInf ? 0.0 : best,
                          .elapsed_s = std::chrono::duration<double>(Clock::now() - start).count()});
  };
  for (;;) {
    {
      std::unique_lock lock(mutex);
      if (finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return running == 0; })) break;
    }
    if (observer.stop_requested()) stop = true;
    report();
  }
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  report();
}

// Passes a stop request on to an algorithm run inside another; keeps its progress to itself.
class Inner final : public Observer {
 public:
  explicit Inner(const Observer& outer) : outer_(outer) {}
  bool stop_requested() const override { return outer_.stop_requested(); }

 private:
  const Observer& outer_;
};

// ---------------------------------------------------------------------------------------------
// local-search

struct AnnealingSettings {
  double t_start = 0.002;  // initial temperature, as a fraction of the start's step time
  double t_end = 1e-5;     // final temperature, likewise
  double swap_share = 0.3; // share of moves that swap two groups' devices
  double pull_share = 0.5; // share of the other moves that take a neighbour group's device
};

// One annealing chain from `start`, `samples` attempts long (or `seconds`).
// Moves: swap the devices of two groups, or re-place one group (every op of it) on another
// candidate device: a random one, or (pull) the device of a random group it exchanges tensors
// with, which removes transfers where the start (or a random move) scattered neighbours.
// Cost: the step time, plus, for a placement that does not fit, the start's step time times
// (1 + 10 x the shortfall's share of the overflowing devices' memory), so that a start that does
// not fit first drives memory down. (A share of every candidate's memory let a CPU of 12.8 GiB
// among four GPUs of 0.6 GiB weaken the penalty sixfold: Inception-V3 at 5% of k80x4 did not fit
// once the CPU took part, a review.) Metropolis acceptance; geometric cooling by sample count (by elapsed
// time when only seconds bound the chain).
Candidate anneal(const Problem& p, const std::vector<std::vector<OpId>>& members, const GroupGraph& neighbours,
                 const std::vector<DeviceId>& candidates,
                 const std::vector<DeviceId>& start, std::size_t samples, double seconds, const AnnealingSettings& settings,
                 std::uint64_t seed, std::atomic<bool>& stop, std::atomic<std::size_t>& progress, std::atomic<double>& best_time) {
  Evaluator eval(p);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<std::size_t> pick_group(0, members.size() - 1);
  const Clock::time_point began = Clock::now();

  const std::vector<std::uint64_t> limits = memory_limits(p);
  std::vector<DeviceId> current = start;
  const SimResult& initial = eval.evaluate(current);  // valid until the next evaluation
  ++progress;
  Candidate best;
  best.take(current, initial);
  if (initial.fits) atomic_min(best_time, initial.step_time_s);
  const double scale = initial.step_time_s > 0.0 ? initial.step_time_s : 1.0;
  auto cost_of = [&](const SimResult& r) {
    if (r.fits) return r.step_time_s;
    double capacity = 0.0;
    for (const auto& [d, bytes] : r.shortfalls) capacity += static_cast<double>(limits[d]);
    return r.step_time_s + scale * (1.0 + 10.0 * static_cast<double>(total_shortfall(r)) / std::max(capacity, 1.0));
  };
  double current_cost = cost_of(initial);
  const double t0 = settings.t_start * scale, t1 = settings.t_end * scale;

  std::vector<std::pair<OpId, DeviceId>> undo;
  auto move_group = [&](std::size_t g, DeviceId d) {
    for (OpId o : members[g])
      if (current[o] != d) undo.push_back({o, current[o]}), current[o] = d;
  };
  // k counts simulated placements (the start is the first): an attempt that changes nothing (a
  // swap of two groups on one device) is not one, and spent a sample (a fifth of them on
  // Inception-V3 by ops). A run of attempts that change nothing ends the chain.
  std::size_t idle = 0;
  constexpr std::size_t kMaxIdle = 10000;
  for (std::size_t k = 1; (samples == 0 || k < samples) && !stop.load() && idle < kMaxIdle;) {
    double elapsed_share = 0.0;
    if (seconds > 0.0) {
      elapsed_share = std::chrono::duration<double>(Clock::now() - began).count() / seconds;
      if (elapsed_share >= 1.0) break;
    }
    const double share = samples > 0 ? std::max(static_cast<double>(k) / static_cast<double>(samples), elapsed_share) : elapsed_share;
    const double temperature = t0 * std::pow(t1 / t0, share);

    undo.clear();
    const std::size_t g = pick_group(rng);
    const DeviceId here = current[members[g].front()];
    if (members.size() > 1 && unit(rng) < settings.swap_share) {
      std::size_t h = pick_group(rng);
      if (h == g) h = (h + 1) % members.size();
      const DeviceId there = current[members[h].front()];
      // Nothing to swap, or a group would land on a device the search may not use (a start may
      // have used others: the CPU under devices=gpus): not simulated.
      if (there == here || std::find(candidates.begin(), candidates.end(), here) == candidates.end() ||
          std::find(candidates.begin(), candidates.end(), there) == candidates.end()) {
        ++idle;
        continue;
      }
      move_group(g, there);
      move_group(h, here);
    } else {
      std::uniform_int_distribution<std::size_t> pick_device(0, candidates.size() - 1);
      DeviceId d = candidates[pick_device(rng)];
      const std::uint32_t first = neighbours.adj_begin[g], last = neighbours.adj_begin[g + 1];
      if (last > first && unit(rng) < settings.pull_share) {
        std::uniform_int_distribution<std::uint32_t> pick_neighbour(first, last - 1);
        const DeviceId theirs = current[members[neighbours.adj[pick_neighbour(rng)]].front()];
        if (std::find(candidates.begin(), candidates.end(), theirs) != candidates.end()) d = theirs;
      }
      if (d == here) {
        if (candidates.size() < 2) {
          ++idle;
          continue;
        }
        d = candidates[(std::find(candidates.begin(), candidates.end(), d) - candidates.begin() + 1) % candidates.size()];
      }
      move_group(g, d);
    }
    if (undo.empty()) {
      ++idle;
      continue;
    }
    idle = 0;
    ++k;
    const SimResult& r = eval.evaluate(current);
    ++progress;
    const double cost = cost_of(r);
    if (best.beaten_by(r)) {
      best.take(current, r);
      if (r.fits) atomic_min(best_time, r.step_time_s);
    }
    const double delta = cost - current_cost;
    if (delta <= 0.0 || unit(rng) < std::exp(-delta / temperature)) {
      current_cost = cost;
    } else {
      for (auto it = undo.rbegin(); it != undo.rend(); ++it) current[it->first] = it->second;
    }
  }
  return best;
}

// init=best: the constructive placers a search may start from, best first (a tie keeps the
// earlier); those not registered are skipped.
constexpr const char* kBestStarts[] = {"m-sct", "heft", "m-etf", "critical-path", "scotch", "metis", "expert", "single"};
constexpr const char* kDefaultLevels = "module,colocation,op";
constexpr std::size_t kDefaultSamples = 8000;  // local-search's budget when none is given

class LocalSearchPlacer final : public Placer {
 public:
  explicit LocalSearchPlacer(const PlacerOptions& o)
      : init_(o.get("init", "best")), max_groups_(o.get_int("max-groups", 0)), devices_(o.get_one_of("devices", "gpus", {"gpus", "all"})),
        devices_given_(o.all().count("devices") > 0), chains_(o.get_int("chains", 8)) {
    // Levels: groupings separated by commas, searched in turn.
    const std::string groups = o.get("groups", kDefaultLevels);
    levels_ = split_commas(groups);
    for (const std::string& level : levels_)
      if (level.empty()) throw Error("local-search: option 'groups' has an empty grouping in '" + groups + "'");
    if (levels_.size() > 8) throw Error("local-search: option 'groups' gives more than 8 groupings");
    settings_.t_start = o.get_double("t-start", settings_.t_start);
    settings_.t_end = o.get_double("t-end", settings_.t_end);
    settings_.swap_share = o.get_double("swap", settings_.swap_share);
    settings_.pull_share = o.get_double("pull", settings_.pull_share);
    if (chains_ < 1 || chains_ > 4096) throw Error("local-search: option 'chains' must be from 1 to 4096");
    if (max_groups_ < 0) throw Error("local-search: option 'max-groups' must be >= 0");
    if (!(settings_.t_start > 0.0 && settings_.t_end > 0.0)) throw Error("local-search: temperatures must be positive");
    // The schedule cools: a t-end above t-start heated the search as it went (accepted without a word: a QA pass).
    if (settings_.t_end > settings_.t_start)
      throw Error(fmt::format("local-search: t-end ({:g}) is above t-start ({:g}): the temperature cools from t-start to t-end", settings_.t_end,
                              settings_.t_start));
    if (!(settings_.swap_share >= 0.0 && settings_.swap_share <= 1.0)) throw Error("local-search: option 'swap' must be in [0, 1]");
    if (!(settings_.pull_share >= 0.0 && settings_.pull_share <= 1.0)) throw Error("local-search: option 'pull' must be in [0, 1]");
    if (init_ == "local-search") throw Error("local-search: option 'init' cannot be local-search itself");
    if (o.all().count("init") && init_.empty()) throw Error("local-search: option 'init' is empty (an algorithm's name)");
    // Checked here, before a model loads (it failed after loading it: found by a review).
    if (init_ != "best") {
      try {
        find_placer(init_);
      } catch (const Error& e) {
        throw Error("local-search: option 'init': " + std::string(e.what()));
      }
    }
    for (const std::string& level : levels_) check_grouping(level);
  }

  PlacementResult place(const Problem& p, const Budget& given, Observer& observer, std::uint64_t seed) override {
    if (p.graph.num_forward_ops() == 0) throw Error("local-search: the graph has no forward op to place");
    // No budget: 8000 samples in all, the start's included, exactly as --samples 8000 (the start's
    // were counted on top: 8012 reported, a QA pass).
    Budget budget = given;
    if (budget.samples == 0 && !(budget.seconds > 0.0)) budget.samples = kDefaultSamples;
    const Clock::time_point start = Clock::now();
    std::vector<DeviceId> candidates = devices_of(p.cluster, devices_, "local-search");
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

    // The start: another algorithm's placement, or (best) the best of the constructive placers.
    // The start spends from the same budget, at most half of it, so that the chains keep the
    // rest: a learned start trains for what it is given (4000 samples of the default 8000),
    // optimal enumerates up to it. Random draws once, as without a budget (given one, it would draw until
    // the budget ends). A start that takes no budget (m-etf, ...) evaluates a few placements.
    std::vector<std::string> inits;
    if (init_ == "best") {
      for (const char* name : kBestStarts) {
        try {
          find_placer(name);
          inits.emplace_back(name);
        } catch (const Error&) {
        }
      }
    } else {
      inits.push_back(init_);
    }
    Inner inner(observer);
    Budget start_budget{.threads = budget.threads};
    if (inits.size() != 1 || inits.front() != "random") {
      start_budget.samples = budget.samples > 0 ? std::max<std::size_t>(1, budget.samples / 2) : 0;
      start_budget.seconds = budget.seconds / 2;
    }
    Candidate best;
    std::string from;
    std::size_t start_samples = 0;
    std::vector<std::string> failed, reasons;
    for (std::size_t i = 0; i < inits.size(); ++i) {
      const std::string& name = inits[i];
      // After the first start, more are tried while the start's half of the budget lasts; the
      // best start's last, `single`, whatever is left (one simulation per device), so that the
      // search never ends slower than the fastest device alone (with --seconds 2 on a graph of
      // 20,000 readers of one tensor it ended at 674 ms, against single's 544 ms: a QA pass).
      const bool always = init_ == "best" && i + 1 == inits.size() && name == "single";
      if (!best.devices.empty() && !always &&
          (observer.stop_requested() || (budget.samples > 0 && start_samples >= start_budget.samples) ||
           (budget.seconds > 0.0 && elapsed() >= start_budget.seconds)))
        continue;
      if (always && observer.stop_requested() && !best.devices.empty()) break;
      // Each start gets what the starts before it left of the start's half (each had all of it:
      // with --samples 60, m-sct, heft and m-etf took 43), at least a sample and a millisecond.
      Budget left = start_budget;
      if (start_budget.samples > 0) left.samples = start_budget.samples > start_samples ? start_budget.samples - start_samples : 1;
      if (start_budget.seconds > 0.0) left.seconds = std::max(1e-3, start_budget.seconds - elapsed());
      if (always) left = Budget{.threads = budget.threads};
      PlacementResult r;
      try {
        r = make_placer(name, {})->place(p, left, inner, seed);
      } catch (...) {
        // Any start's failure is skipped when another start is left (it skipped placer's errors only:
        // a solver library's exception, CBC's CoinError being none of std::exception's, or running
        // out of memory in one start ended the whole search; a review).
        if (inits.size() == 1) throw;
        failed.push_back(name);  // e.g. a scheduler whose families fit nowhere
        try {
          throw;
        } catch (const std::exception& e) {
          reasons.push_back(e.what());
        } catch (...) {
          reasons.push_back("an error in a solver library");
        }
        continue;
      }
      start_samples += r.samples;
      Candidate c;
      c.take(r.forward_devices, r.sim);
      if (best.devices.empty() || c.better_than(best)) best = std::move(c), from = name;
    }
    if (best.devices.empty()) {
      // The starts' reasons (a reviewer met this line with nothing to act on), each once with the
      // starts that gave it (a cluster's overflowing route fails all eight alike).
      std::vector<std::pair<std::string, std::string>> by_reason;  // reason, the starts that gave it
      for (std::size_t i = 0; i < failed.size(); ++i) {
        auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& r) { return r.first == reasons[i]; });
        if (it == by_reason.end()) by_reason.push_back({reasons[i], failed[i]});
        else it->second += ", " + failed[i];
      }
      std::string why;
      for (const auto& [reason, names] : by_reason) why += (why.empty() ? "" : "; ") + names + ": " + reason;
      throw Error("local-search: no start placement: every start algorithm failed (" + why + ")");
    }

    // The levels: each grouping in turn anneals from the best placement so far, with an equal
    // share of what the start left of the budget (samples: kDefaultSamples in all by default,
    // none when only seconds bound it).
    const bool out_of_samples = budget.samples > 0 && start_samples >= budget.samples;
    const std::size_t total = budget.samples > 0 ? (out_of_samples ? 0 : budget.samples - start_samples) : 0;
    const bool out_of_time = budget.seconds > 0.0 && elapsed() >= budget.seconds;
    std::atomic<std::size_t> samples{start_samples};  // progress counts the start's too
    std::atomic<bool> stop{false};
    std::atomic<double> best_time{best.fits ? best.step_time_s : kInf};
    const std::size_t levels = levels_.size();
    std::string note = "from " + from + " (" + fmt::format("{:.2f} ms", best.step_time_s * 1e3) +
                       (best.fits ? "" : ", does not fit") + ")";
    // A start that does not fit: the CPUs take part (as the list schedulers do when the GPUs cannot
    // hold the model), unless 'devices' was given. With a twentieth of k80x4's memory, Inception-V3
    // never fit on the GPUs alone (a QA pass).
    if (!best.fits && !devices_given_ && candidates.size() < p.cluster.num_devices()) {
      candidates = devices_of(p.cluster, "all", "local-search");
      note += ", groups may move to every device (the start does not fit)";
    }
    bool too_few_samples = false, searched = false;
    if (observer.stop_requested()) stop = true;
    for (std::size_t level = 0; level < levels && !out_of_samples && !out_of_time && !stop.load(); ++level) {
      // Fewer groups than devices leave nothing to search (co-location folds a chain into one).
      std::string grouping_note;
      const Grouping grouping =
          make_grouping_at_least(p, levels_[level], static_cast<std::size_t>(max_groups_), candidates.size(), grouping_note);
      const std::vector<std::vector<OpId>> members = members_of(grouping);
      const GroupGraph neighbours = group_graph(p, grouping);
      note += (level == 0 ? ", " : " -> ") + std::to_string(grouping.num_groups) + (grouping.num_groups == 1 ? " group" : " groups");
      if (levels > 1) note += " (" + levels_[level] + ")";
      if (!grouping_note.empty()) note += " [" + grouping_note + "]";

      // This level's samples, shared by its chains. A chain spends its first sample on the
      // start, so a chain needs two to try one move: a small budget runs fewer chains (as many as
      // it gives two samples each), never chains that only re-simulate the start.
      const std::size_t level_total = total / levels + (level < total % levels ? 1 : 0);
      const std::size_t chains = level_total > 0 ? std::clamp<std::size_t>(level_total / 2, 1, static_cast<std::size_t>(chains_))
                                                 : static_cast<std::size_t>(chains_);
      if (level + 1 == levels) note += ", " + std::to_string(chains) + " chains";
      if (total > 0 && level_total < 2) {
        too_few_samples = too_few_samples || level_total == 1;
        continue;
      }
      std::vector<std::size_t> per_chain(chains, 0);
      if (level_total > 0)
        for (std::size_t c = 0; c < chains; ++c) per_chain[c] = level_total / chains + (c < level_total % chains ? 1 : 0);
      // A time budget the start (and the levels before) already spent leaves nothing (0 seconds
      // would mean no limit); what is left is shared by the levels still to run.
      const double spent_s = elapsed();
      if (budget.seconds > 0.0 && spent_s >= budget.seconds) break;
      const double seconds = budget.seconds > 0.0 ? (budget.seconds - spent_s) / static_cast<double>(levels - level) : 0.0;

      std::vector<Candidate> results(chains);
      std::atomic<std::size_t> next{0};
      const std::vector<DeviceId> from_devices = best.devices;
      const unsigned threads = static_cast<unsigned>(std::min<std::size_t>(thread_count(budget), chains));
      run_workers(
          threads,
          [&](unsigned) {
            for (std::size_t c = next++; c < chains; c = next++) {
              if (level_total > 0 && per_chain[c] == 0) continue;
              // The chains share the time budget (with or without a sample budget beside it): a
              // thread runs up to ceil(chains / threads) of them in turn, each for its slice, so
              // that they end within --seconds whatever the threads (each took the whole of it,
              // and a search ran chains / threads times too long).
              const double slice = seconds > 0.0 ? seconds / static_cast<double>((chains + threads - 1) / threads) : 0.0;
              results[c] = anneal(p, members, neighbours, candidates, from_devices, per_chain[c], slice, settings_,
                                  derive_seed(seed, level * 4096 + c), stop, samples, best_time);
            }
          },
          observer, stop, samples, budget.samples > 0 ? std::max(budget.samples, start_samples) : total > 0 ? start_samples + total : 0,
          best_time, start);
      searched = true;
      for (const Candidate& c : results)  // chain order: ties go to the lower chain
        if (!c.devices.empty() && c.better_than(best)) best = c;
    }
    if (!failed.empty()) {
      note += "; not started from";
      for (const std::string& name : failed) note += " " + name;
      note += " (failed)";
    }
    if (!best.fits) note += "; no placement found that fits, the one closest to fitting is shown";
    if (out_of_time) note += "; the time budget was spent on the start, no search";
    else if (out_of_samples) note += "; the sample budget was spent on the start, no search";
    else if (too_few_samples && !searched) note += "; too few samples left after the start to try a move at any level: no search";
    if (stop.load()) note += "; stopped early";
    return finish(p, std::move(best.devices), samples.load(), note);
  }

 private:
  std::string init_;
  std::vector<std::string> levels_;
  std::int64_t max_groups_;
  std::string devices_;
  bool devices_given_;  // 'devices' given: kept even when the start does not fit
  std::int64_t chains_;
  AnnealingSettings settings_;
};

// ---------------------------------------------------------------------------------------------
// optimal

// Devices a placement can swap without changing anything the simulator sees: the same specs,
// memory limit and op times, and swapping the two maps the cluster onto itself: for every pair of
// devices (x, y), the route between their images crosses as many channels, of the same latency
// and bandwidth, and the channels correspond one to one across all routes (so that transfers that
// share a link still share one). Routes that merely look alike from each device, as a multiset,
// are not enough: a GPU with the fast link to the CPU and its twin with the fast link to a third
// GPU are not interchangeable. (Events at exactly equal times are still ordered by device id, so
// a swapped placement can differ in such ties.) Returns, per candidate index, the index of its
// class's first member.
std::vector<std::size_t> interchangeable(const Problem& p, const std::vector<DeviceId>& candidates) {
  const Cluster& c = p.cluster;
  const std::vector<std::uint64_t> limits = memory_limits(p);
  constexpr ChannelId kUnmapped = std::numeric_limits<ChannelId>::max();
  auto swap_is_automorphism = [&](DeviceId a, DeviceId b) {
    auto image = [&](DeviceId x) { return x == a ? b : x == b ? a : x; };
    std::vector<ChannelId> to(c.num_channels(), kUnmapped), from(c.num_channels(), kUnmapped);
    for (DeviceId x = 0; x < c.num_devices(); ++x)
      for (DeviceId y = 0; y < c.num_devices(); ++y) {
        if (x == y) continue;
        const auto r1 = c.route(x, y), r2 = c.route(image(x), image(y));
        if (r1.size() != r2.size()) return false;
        for (std::size_t k = 0; k < r1.size(); ++k) {
          const ChannelId u = r1[k], v = r2[k];
          if (c.channel_bandwidth(u) != c.channel_bandwidth(v) || c.channel_latency_s(u) != c.channel_latency_s(v)) return false;
          if (to[u] == kUnmapped && from[v] == kUnmapped) to[u] = v, from[v] = u;
          else if (to[u] != v || from[v] != u) return false;
        }
      }
    return true;
  };
  auto same = [&](DeviceId a, DeviceId b) {
    Device da = c.device(a), db = c.device(b);
    da.name = db.name;
    if (!(da == db) || limits[a] != limits[b]) return false;
    for (OpId o = 0; o < p.graph.num_ops(); ++o)
      if (p.costs.time_s(o, a) != p.costs.time_s(o, b)) return false;
    return swap_is_automorphism(a, b);
  };
  std::vector<std::size_t> first(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    first[i] = i;
    for (std::size_t j = 0; j < i; ++j)
      if (first[j] == j && same(candidates[j], candidates[i])) {
        first[i] = j;
        break;
      }
  }
  return first;
}

class OptimalPlacer final : public Placer {
 public:
  explicit OptimalPlacer(const PlacerOptions& o)
      : groups_(o.get("groups", "colocation")), max_groups_(o.get_int("max-groups", 12)),
        max_evaluations_(o.get_double("max-evaluations", 2e6)), method_(o.get("method", "auto")), devices_(o.get_one_of("devices", "gpus", {"gpus", "all"})),
        ip_seconds_(o.get_double("ip-seconds", 20.0)) {
    check_grouping(groups_);
    if (method_ != "auto" && method_ != "exhaustive" && method_ != "ip")
      throw Error("optimal: option 'method' must be 'auto', 'exhaustive' or 'ip', got '" + method_ + "'");
    if (max_groups_ < 1) throw Error("optimal: option 'max-groups' must be at least 1");
    if (!(ip_seconds_ > 0.0)) throw Error("optimal: option 'ip-seconds' must be positive");
    // Enumeration numbers placements with 64-bit integers; 1e15 simulations would take years.
    if (!(max_evaluations_ >= 1.0 && max_evaluations_ <= 1e15))
      throw Error("optimal: option 'max-evaluations' must be in [1, 1e15]");
  }

  PlacementResult place(const Problem& p, const Budget& budget, Observer& observer, std::uint64_t) override {
    if (p.graph.num_forward_ops() == 0) throw Error("optimal: the graph has no forward op to place");
    const std::vector<DeviceId> candidates = devices_of(p.cluster, devices_, "optimal");
    if (candidates.size() > kMaxDevices)
      throw Error("optimal: too large: " + std::to_string(candidates.size()) + " devices to choose from (at most " +
                  std::to_string(kMaxDevices) + "); use a smaller cluster");
    if (candidates.size() == 1) return finish(p, std::vector<DeviceId>(p.graph.num_forward_ops(), candidates[0]), 0, "one device");
    // Fewer groups than devices leave nothing to choose (co-location folds a chain into one).
    std::string grouping_note;
    const Grouping grouping =
        make_grouping_at_least(p, groups_, static_cast<std::size_t>(max_groups_), candidates.size(), grouping_note);
    const double space = std::pow(static_cast<double>(candidates.size()), static_cast<double>(grouping.num_groups));
    const bool exhaustive = method_ == "exhaustive" || (method_ == "auto" && space <= max_evaluations_);
    if (exhaustive && space > max_evaluations_)
      throw Error("optimal: too large to enumerate: " + std::to_string(candidates.size()) + "^" + std::to_string(grouping.num_groups) +
                  " placements (max-evaluations " + std::to_string(static_cast<long long>(max_evaluations_)) +
                  "); lower max-groups or use method=ip");
    if (!exhaustive && grouping.num_groups > kMaxIpGroups)
      throw Error("optimal: too large: " + std::to_string(grouping.num_groups) + " groups for the integer program (at most " +
                  std::to_string(kMaxIpGroups) + "); lower max-groups");
    PlacementResult r = exhaustive ? enumerate(p, grouping, candidates, budget, observer) : integer_program(p, grouping, candidates, budget);
    if (!grouping_note.empty()) r.note += (r.note.empty() ? "" : "; ") + grouping_note;
    // Optimal within what it searched (whole groups, the note says how many): say so where that
    // leaves devices out.
    if (candidates.size() < p.cluster.num_devices())
      r.note += "; on " + std::to_string(candidates.size()) + " of the " + std::to_string(p.cluster.num_devices()) + " devices" +
                (p.cluster.num_devices() <= kMaxDevices ? std::string(" (option devices=all adds the others)")
                                                        : " (optimal takes at most " + std::to_string(kMaxDevices) +
                                                              "; the other placers can use them all)");
    return r;
  }

 private:
  static constexpr std::size_t kMaxDevices = 8, kMaxIpGroups = 24;  // the papers' and presets' boxes of 8 GPUs

  // For an error that nothing fits: the CPU could take part, when the search left it out.
  std::string cpu_hint(const Problem& p) const {
    const bool gpus_only = devices_ == "gpus" && p.cluster.device_ids(DeviceKind::gpu).size() >= 2 && p.cluster.num_devices() <= kMaxDevices;
    return gpus_only && !p.cluster.device_ids(DeviceKind::cpu).empty() ? " (over the GPUs only: --opt devices=all lets the CPU take part)"
                                                                       : "";
  }
  static constexpr int kSavedSolutions = 10;

  // Every placement of the groups on the candidates, group 0 only on the first device of each
  // class of interchangeable devices (a placement with group 0 elsewhere has a twin that is the
  // same up to renaming devices). Placements are numbered (group 0's choice, then groups 1.. as
  // base-D digits); threads take blocks of numbers; the best is the fastest that fits, ties to the
  // lower number, so the result does not depend on the threads.
  PlacementResult enumerate(const Problem& p, const Grouping& grouping, const std::vector<DeviceId>& candidates, const Budget& budget,
                            Observer& observer) const {
    const Clock::time_point start = Clock::now();
    const std::size_t ng = grouping.num_groups, nd = candidates.size();
    const std::vector<std::vector<OpId>> members = members_of(grouping);
    const std::vector<std::size_t> cls = interchangeable(p, candidates);
    std::vector<std::size_t> first_choices;
    for (std::size_t k = 0; k < nd; ++k)
      if (cls[k] == k) first_choices.push_back(k);
    std::uint64_t rest = 1;
    for (std::size_t g = 1; g < ng; ++g) rest *= nd;
    const std::uint64_t total = rest * first_choices.size();
    constexpr std::uint64_t kBlock = 1024;
    // A sample budget takes the first placements in order (the same ones whatever the threads); a
    // time budget or a stop request ends the enumeration before the next simulation.
    const std::uint64_t limit = budget.samples > 0 ? std::min<std::uint64_t>(total, budget.samples) : total;

    struct Best {
      bool found = false;
      double time = kInf;
      std::uint64_t index = 0;
      std::vector<DeviceId> devices;
    };
    // The one-device placements come first, whatever their numbers: a budget that stops the
    // enumeration early then still compares with them (the all-GPU one of Inception-V3 on h100-box
    // is the last number; cut at 300 placements, the result was 28 times slower than it: a QA pass).
    // The enumeration then skips their numbers.
    std::vector<std::uint64_t> one_device;  // ascending, as first_choices
    for (std::size_t j = 0; j < first_choices.size(); ++j)
      one_device.push_back(j * rest + (nd > 1 ? first_choices[j] * ((rest - 1) / (nd - 1)) : 0));
    // Simulated in order of the devices' total op time (the fastest alone first: with --samples 1,
    // h100-box's CPU came first), ties in number order.
    std::vector<std::size_t> by_speed(one_device.size());
    std::iota(by_speed.begin(), by_speed.end(), std::size_t{0});
    {
      std::vector<double> alone(one_device.size(), 0.0);
      for (std::size_t j = 0; j < one_device.size(); ++j)
        for (OpId o = 0; o < p.graph.num_ops(); ++o) alone[j] += p.costs.time_s(o, candidates[first_choices[j]]);
      std::stable_sort(by_speed.begin(), by_speed.end(), [&](std::size_t a, std::size_t b) { return alone[a] < alone[b]; });
    }
    Best first;
    std::size_t first_samples = 0;
    {
      Evaluator eval(p);
      std::vector<DeviceId> fwd(p.graph.num_forward_ops());
      for (std::size_t j : by_speed) {
        if (first_samples >= limit || observer.stop_requested()) break;
        std::fill(fwd.begin(), fwd.end(), candidates[first_choices[j]]);
        const SimResult& r = eval.evaluate(fwd);
        ++first_samples;
        if (r.fits && (!first.found || r.step_time_s < first.time || (r.step_time_s == first.time && one_device[j] < first.index)))
          first = {true, r.step_time_s, one_device[j], fwd};
      }
    }
    // The numbers enumerated: the first `limit - first_samples` that are not one-device placements
    // (none when the one-device placements were cut short).
    std::uint64_t end = first_samples < one_device.size() ? 0 : limit - first_samples;
    for (std::uint64_t n : one_device)
      if (n < end) ++end;
    end = std::min(end, total);
    const std::uint64_t blocks = (end + kBlock - 1) / kBlock;

    const unsigned threads = static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(thread_count(budget), blocks)));
    std::vector<Best> best(threads);
    std::atomic<std::uint64_t> next_block{0};
    std::atomic<std::size_t> samples{first_samples};
    std::atomic<bool> stop{observer.stop_requested()};
    std::atomic<double> best_time{first.found ? first.time : kInf};
    const bool timed = budget.seconds > 0.0;
    run_workers(
        threads,
        [&](unsigned t) {
          Evaluator eval(p);
          std::vector<std::size_t> digit(ng);
          std::vector<DeviceId> fwd(p.graph.num_forward_ops());
          for (std::uint64_t b = next_block++; b < blocks && !stop.load(); b = next_block++) {
            const std::uint64_t lo = b * kBlock, hi = std::min(end, lo + kBlock);
            // Decode `lo`, then count up.
            std::uint64_t x = lo % rest;
            digit[0] = first_choices[lo / rest];
            for (std::size_t g = 1; g < ng; ++g) digit[g] = x % nd, x /= nd;
            for (std::size_t g = 0; g < ng; ++g)
              for (OpId o : members[g]) fwd[o] = candidates[digit[g]];
            std::size_t done = 0;  // simulated in this block
            for (std::uint64_t i = lo; i < hi; ++i) {
              // The clock and a stop request are read before every simulation (a clock read costs
              // little beside one): a block of 1,024 ran past --seconds 0.01 eightfold.
              if (stop.load(std::memory_order_relaxed) ||
                  (timed && std::chrono::duration<double>(Clock::now() - start).count() >= budget.seconds)) {
                stop = true;
                break;
              }
              if (!std::binary_search(one_device.begin(), one_device.end(), i)) {
                ++done;
                const SimResult& r = eval.evaluate(fwd);
                if (r.fits && (!best[t].found || r.step_time_s < best[t].time)) {
                  best[t] = {true, r.step_time_s, i, fwd};
                  atomic_min(best_time, r.step_time_s);
                }
              }
              // Next number: groups 1.. as an odometer, then group 0's next choice.
              std::size_t g = 1;
              for (; g < ng; ++g) {
                digit[g] = digit[g] + 1 == nd ? 0 : digit[g] + 1;
                for (OpId o : members[g]) fwd[o] = candidates[digit[g]];
                if (digit[g] != 0) break;
              }
              if (g == ng && i + 1 < total) {
                digit[0] = first_choices[(i + 1) / rest];
                for (OpId o : members[0]) fwd[o] = candidates[digit[0]];
              }
            }
            samples += done;
            if (timed && std::chrono::duration<double>(Clock::now() - start).count() >= budget.seconds) stop = true;
          }
        },
        observer, stop, samples, limit, best_time, start);
    const Best* winner = first.found ? &first : nullptr;
    for (const Best& b : best)
      if (b.found && (!winner || b.time < winner->time || (b.time == winner->time && b.index < winner->index))) winner = &b;
    if (!winner && samples.load() < total)
      throw Error("optimal: stopped (budget or interrupt) before finding a placement that fits in memory" + cpu_hint(p));
    if (!winner)
      throw Error("optimal: no placement of the " + std::to_string(ng) + " groups on the " + std::to_string(nd) +
                  " devices fits in memory" + cpu_hint(p));
    std::string note = "exhaustive over " + std::to_string(ng) + " groups: " + std::to_string(samples.load()) + " placements simulated";
    if (samples.load() < total) note += "; stopped early (budget or interrupt): not proven optimal";
    return finish(p, winner->devices, samples.load(), note);
  }

  // The integer program (CBC) over a load + communication model, not the simulator:
  //   x[g][k] in {0,1}: group g on candidate k; sum_k x[g][k] = 1;
  //   per device: sum_g time[g][k] x[g][k] <= T (family times: the op, its gradients, its updates)
  //               sum_g bytes[g] x[g][k] <= limit[k] (resident + activation bytes; see below);
  //   y[g][h] >= x[g][k] - x[h][k] and y[g][h] >= x[h][k] - x[g][k] for each pair of groups that
  //   exchange tensors and each k (y = 1 when they are apart);
  //   minimise T + sum c[g][h] y[g][h], c = the mean transfer time of the bytes between them
  //   (twice in training: the gradients come back).
  // Identical devices are ordered (see solve) so that CBC does not search twins. Memory counts
  // activations in full first; when nothing is feasible, at half (a quarter, none). The model
  // knows loads, not dependencies (a chain of groups spread over devices runs no faster), so the
  // solutions CBC kept (up to 10, best first) and the one-device placements are simulated and the
  // fastest that fits is returned; when none fits, the devices the program's best solution
  // overfilled get their budget cut by the shortfall and it is solved again. Step times reported
  // are the simulator's.
  PlacementResult integer_program(const Problem& p, const Grouping& grouping, const std::vector<DeviceId>& candidates,
                                  const Budget& budget) const {
    const GroupGraph gg = group_graph(p, grouping);
    const std::size_t ng = gg.num_groups, nd = candidates.size();
    const std::vector<std::uint64_t> limits = memory_limits(p);
    const bool training = p.graph.num_ops() > p.graph.num_forward_ops();
    double latency = 0.0, seconds_per_byte = 0.0;
    std::size_t pairs = 0;
    for (DeviceId a : candidates)
      for (DeviceId b : candidates)
        if (a != b) latency += p.cluster.route_latency_s(a, b), seconds_per_byte += 1.0 / p.cluster.route_bandwidth(a, b), ++pairs;
    latency /= static_cast<double>(pairs), seconds_per_byte /= static_cast<double>(pairs);
    struct Pair {
      std::size_t g, h;
      double cost_s;
    };
    std::vector<Pair> edges;
    for (std::size_t g = 0; g < ng; ++g)
      for (std::uint32_t i = gg.adj_begin[g]; i < gg.adj_begin[g + 1]; ++i)
        if (gg.adj[i] > g) edges.push_back({g, gg.adj[i], (training ? 2.0 : 1.0) * (latency + gg.adj_bytes[i] * seconds_per_byte)});

    // One time limit for every round of the program.
    const double time_limit = budget.seconds > 0.0 ? std::min(budget.seconds, ip_seconds_) : ip_seconds_;
    const Clock::time_point began = Clock::now();
    std::vector<double> budget_bytes(nd);
    for (std::size_t k = 0; k < nd; ++k) budget_bytes[k] = static_cast<double>(limits[candidates[k]]);
    Evaluator eval(p);
    double activation_weight = 1.0;
    std::optional<std::vector<DeviceId>> closest;
    std::uint64_t closest_shortfall = std::numeric_limits<std::uint64_t>::max();
    std::string status;
    bool timed_out = false;  // a round ended at the time limit without any solution
    bool one_devices_failed = false;  // a round simulated every one-device placement: none fits
    // The simulations stay within --samples (at least one is made): the program's solutions and
    // the one-device placements are simulated best first until it is spent.
    bool cut = false;
    const auto out_of_samples = [&] { return budget.samples > 0 && eval.evaluations() >= budget.samples; };
    for (int round = 0; round < 8 && !cut; ++round) {
      const double left = time_limit - std::chrono::duration<double>(Clock::now() - began).count();
      if (left <= 0.0) {
        timed_out = true;
        break;
      }
      std::vector<double> bytes(ng);
      for (std::size_t g = 0; g < ng; ++g)
        bytes[g] = static_cast<double>(gg.static_bytes[g]) + activation_weight * static_cast<double>(gg.activation_bytes[g]);
      bool infeasible = false;
      const std::vector<std::vector<std::size_t>> solutions = solve(gg, candidates, edges, bytes, budget_bytes, left, status, infeasible);
      if (solutions.empty()) {
        // Out of time is not infeasible: relaxing the memory rows would not help.
        if (!infeasible) {
          timed_out = true;
          break;
        }
        if (activation_weight == 0.0) break;
        activation_weight = activation_weight > 0.25 ? activation_weight / 2 : 0.0;
        continue;
      }
      // The program's solutions (best first), then every group on one device: the simulator picks.
      // The one-device placements are simulated once, in the first round that has solutions: none
      // fitted if a later round runs, and the closest of them is kept already (each round
      // simulated them again, spending --samples: a review).
      const std::size_t one_device = one_devices_failed ? 0 : nd;
      Candidate best;
      std::string picked;
      std::vector<DeviceId> group_devices(ng);
      std::size_t simulated = 0;
      std::vector<std::pair<DeviceId, std::uint64_t>> first_shortfalls;  // the program's best solution's
      for (std::size_t i = 0; i < solutions.size() + one_device; ++i) {
        if (!best.devices.empty() && out_of_samples()) {
          cut = true;
          break;
        }
        ++simulated;
        for (std::size_t g = 0; g < ng; ++g) group_devices[g] = candidates[i < solutions.size() ? solutions[i][g] : i - solutions.size()];
        const std::vector<DeviceId> fwd = expand_groups(grouping, group_devices);
        const SimResult& r = eval.evaluate(fwd);
        if (i == 0) first_shortfalls = r.shortfalls;
        if (best.beaten_by(r))
          best.take(fwd, r), picked = i == 0 ? "the program's best solution"
                                 : i < solutions.size()
                                     ? "its solution #" + std::to_string(i + 1)
                                     : "everything on " + p.cluster.device(candidates[i - solutions.size()]).name;
      }
      if (best.fits)
        return finish(p, std::move(best.devices), eval.evaluations(),
                      "integer program (CBC) over " + std::to_string(ng) + " groups, " + status +
                          " for the load + communication model; of its " + std::to_string(solutions.size()) + " solution(s)" +
                          (one_device > 0 ? " and the " + std::to_string(nd) + " one-device placements" : std::string()) +
                          (cut ? " (cut short by --samples: the first " + std::to_string(simulated) + " simulated)" : std::string()) +
                          " the simulator kept " + picked);
      if (best.shortfall_bytes < closest_shortfall) closest = best.devices, closest_shortfall = best.shortfall_bytes;
      if (one_device > 0 && !cut) one_devices_failed = true;  // every one simulated, none fits
      if (cut || out_of_samples()) {
        cut = true;
        break;
      }
      for (const auto& [d, short_bytes] : first_shortfalls)
        for (std::size_t k = 0; k < nd; ++k)
          if (candidates[k] == d)
            budget_bytes[k] = std::max(0.0, budget_bytes[k] - static_cast<double>(short_bytes) - 0.02 * static_cast<double>(limits[d]));
    }
    // No solution within the time limit, or none at all (CBC called the program infeasible even
    // with activations left out: with op times of 1e20 s that is the numbers, not the memory):
    // the best one-device placement that fits, if any.
    if ((timed_out || !closest) && !one_devices_failed) {
      Candidate best;
      std::string on;
      bool tried = false;
      for (DeviceId d : candidates) {
        if (tried && out_of_samples()) {
          cut = true;
          break;
        }
        tried = true;
        const std::vector<DeviceId> fwd(p.graph.num_forward_ops(), d);
        const SimResult& r = eval.evaluate(fwd);
        if (r.fits && best.beaten_by(r)) best.take(fwd, r), on = p.cluster.device(d).name;
      }
      if (best.fits)
        return finish(p, std::move(best.devices), eval.evaluations(),
                      (timed_out ? "integer program (CBC): no solution within its time limit (" + std::to_string(time_limit) + " s)"
                                 : "integer program (CBC): no solution (" + status + ")") +
                          "; everything on " + on + ", the best one-device placement");
      if (timed_out && !closest)
        throw Error("optimal: the integer program found no solution within its time limit (" + std::to_string(time_limit) +
                    " s) and " + (cut ? "none of the one-device placements simulated within --samples" : std::string("no single device")) +
                    " holds the model; " +
                    // The limit is --seconds when that is the shorter (raising ip-seconds then changed nothing: a QA pass).
                    (budget.seconds > 0.0 && budget.seconds < ip_seconds_   ? std::string("raise --seconds")
                     : budget.seconds > 0.0 && budget.seconds == ip_seconds_ ? std::string("raise --seconds and ip-seconds")
                                                                             : std::string("raise ip-seconds")) +
                    " or lower max-groups" + cpu_hint(p));
    }
    if (closest)
      return finish(p, std::move(*closest), eval.evaluations(),
                    std::string("integer program (CBC): no solution found that fits in memory") +
                        (cut ? " before --samples was spent" : "") + "; the one closest to fitting is shown");
    throw Error("optimal: no placement of the " + std::to_string(ng) + " groups on the " + std::to_string(nd) +
                " devices fits in memory (integer program infeasible)" + cpu_hint(p));
  }

  // Solves the program above: the solutions CBC kept (best first), each the candidate index of
  // every group; none when CBC proved it infeasible (`infeasible` set) or found none in the time
  // limit. Every group on one device, where that fits the memory rows, is given to CBC as a start.
  template <typename Edges>
  static std::vector<std::vector<std::size_t>> solve(const GroupGraph& gg, const std::vector<DeviceId>& candidates,
                                                       const Edges& edges,
                                                       const std::vector<double>& bytes, const std::vector<double>& budget_bytes,
                                                       double time_limit, std::string& status, bool& infeasible) {
    const std::size_t ng = gg.num_groups, nd = candidates.size();
    auto x = [&](std::size_t g, std::size_t k) { return static_cast<int>(g * nd + k); };
    const int t_col = static_cast<int>(ng * nd);
    auto y = [&](std::size_t e) { return t_col + 1 + static_cast<int>(e); };
    const int num_cols = t_col + 1 + static_cast<int>(edges.size());
    std::vector<int> rows, cols;
    std::vector<double> values, row_lo, row_hi;
    int row = 0;
    auto add = [&](int c, double v) { rows.push_back(row), cols.push_back(c), values.push_back(v); };
    auto end_row = [&](double lo, double hi) { row_lo.push_back(lo), row_hi.push_back(hi), ++row; };
    for (std::size_t g = 0; g < ng; ++g) {
      for (std::size_t k = 0; k < nd; ++k) add(x(g, k), 1.0);
      end_row(1.0, 1.0);
    }
    for (std::size_t k = 0; k < nd; ++k) {
      for (std::size_t g = 0; g < ng; ++g) add(x(g, k), gg.time_s[g * gg.num_devices + candidates[k]]);
      add(t_col, -1.0);
      end_row(-COIN_DBL_MAX, 0.0);
      for (std::size_t g = 0; g < ng; ++g) add(x(g, k), bytes[g]);
      end_row(-COIN_DBL_MAX, budget_bytes[k]);
    }
    // Symmetry: devices with the same group times and memory budget are interchangeable in this
    // model (transfers cost their mean whatever the pair), so within each such class, its j-th
    // device takes group g only when its (j-1)-th holds a group before g: every solution has a
    // twin of this form, and CBC need not search the others.
    std::vector<std::size_t> previous(nd, nd);  // the class member before each device, nd for none
    for (std::size_t k = 0; k < nd; ++k)
      for (std::size_t j = k; j-- > 0;) {
        bool same = budget_bytes[j] == budget_bytes[k];
        for (std::size_t g = 0; g < ng && same; ++g)
          same = gg.time_s[g * gg.num_devices + candidates[j]] == gg.time_s[g * gg.num_devices + candidates[k]];
        if (same) {
          previous[k] = j;
          break;
        }
      }
    for (std::size_t k = 0; k < nd; ++k) {
      if (previous[k] == nd) continue;
      for (std::size_t g = 0; g < ng; ++g) {  // x[g][k] <= sum_{h<g} x[h][previous]
        add(x(g, k), 1.0);
        for (std::size_t h = 0; h < g; ++h) add(x(h, previous[k]), -1.0);
        end_row(-COIN_DBL_MAX, 0.0);
      }
    }
    for (std::size_t e = 0; e < edges.size(); ++e)
      for (std::size_t k = 0; k < nd; ++k)
        for (double sign : {1.0, -1.0}) {
          add(y(e), 1.0);
          add(x(edges[e].g, k), -sign);
          add(x(edges[e].h, k), sign);
          end_row(0.0, COIN_DBL_MAX);
        }
    std::vector<double> col_lo(num_cols, 0.0), col_hi(num_cols, 1.0), objective(num_cols, 0.0);
    col_hi[t_col] = COIN_DBL_MAX;
    objective[t_col] = 1.0;
    for (std::size_t e = 0; e < edges.size(); ++e) objective[y(e)] = edges[e].cost_s;
    // Scale to milliseconds for CBC's tolerances.
    for (double& v : objective) v *= 1e3;
    CoinPackedMatrix matrix(false, rows.data(), cols.data(), values.data(), static_cast<CoinBigIndex>(values.size()));
    matrix.setDimensions(row, num_cols);
    OsiClpSolverInterface solver;
    solver.loadProblem(matrix, col_lo.data(), col_hi.data(), objective.data(), row_lo.data(), row_hi.data());
    for (int c = 0; c < t_col; ++c) solver.setInteger(c);
    solver.messageHandler()->setLogLevel(0);
    CbcModel model(solver);
    model.setLogLevel(0);
    model.messageHandler()->setLogLevel(0);
    model.setMaximumSeconds(time_limit);
    model.setMaximumSavedSolutions(kSavedSolutions);
    // Starts: every group on the first device of its class (the symmetry rows allow no other).
    std::vector<double> start_solution;
    double start_objective = COIN_DBL_MAX;
    for (std::size_t k = 0; k < nd; ++k) {
      if (previous[k] != nd) continue;
      double load = 0.0, used = 0.0;
      for (std::size_t g = 0; g < ng; ++g) load += gg.time_s[g * gg.num_devices + candidates[k]], used += bytes[g];
      if (used > budget_bytes[k] || load * 1e3 >= start_objective) continue;
      start_solution.assign(num_cols, 0.0);
      for (std::size_t g = 0; g < ng; ++g) start_solution[x(g, k)] = 1.0;
      start_solution[t_col] = load;
      start_objective = load * 1e3;
    }
    if (!start_solution.empty()) model.setBestSolution(start_solution.data(), num_cols, start_objective, true);
    model.branchAndBound();
    infeasible = model.isProvenInfeasible();
    if (!model.bestSolution()) {
      status = infeasible ? "CBC proved the program infeasible" : "CBC found none";
      return {};
    }
    status = model.isProvenOptimal() ? "optimal" : "best found in the time limit (not proven optimal)";
    std::vector<std::vector<std::size_t>> solutions;
    auto decode = [&](const double* sol) {
      std::vector<std::size_t> choice(ng, 0);
      for (std::size_t g = 0; g < ng; ++g)
        for (std::size_t k = 0; k < nd; ++k)
          if (sol[x(g, k)] > 0.5) choice[g] = k;
      if (std::find(solutions.begin(), solutions.end(), choice) == solutions.end()) solutions.push_back(std::move(choice));
    };
    decode(model.bestSolution());
    for (int i = 0; i < model.numberSavedSolutions(); ++i) decode(model.savedSolution(i));
    return solutions;
  }

  std::string groups_;
  std::int64_t max_groups_;
  double max_evaluations_;
  std::string method_, devices_;
  double ip_seconds_;
};

}  // namespace

void register_search(std::vector<PlacerInfo>& r) {
  r.push_back({"local-search", "search",
               "simulated annealing over groups with the simulator, from the best constructive placement, in chains on every core",
               {{"init", "best",
                 "where the search starts: an algorithm's placement, or 'best', the fastest of m-sct, heft, m-etf, critical-path, "
                 "scotch, metis, expert and single (tried in that order while the start's budget lasts); the start spends up to "
                 "half of --samples and --seconds (a learned start rounds its half up to whole batches), random draws once"},
                {"groups", kDefaultLevels,
                 "what moves together: colocation, module[:DEPTH], module-call[:DEPTH] or op; several, separated by commas, are "
                 "searched in turn, in the order given, each from the best placement so far with an equal share of the budget"},
                {"max-groups", "0", "coarsen the groups to at most this many (0: no limit)"},
                {"devices", "gpus",
                 "devices groups move to: 'gpus' (every device when there are fewer than two, or when the start does not fit "
                 "on the GPUs) or 'all'"},
                {"chains", "8",
                 "independent annealing chains (1 to 4096) sharing the samples and the seconds (with a sample budget alone, "
                 "results depend on chains, not on threads)"},
                {"t-start", "0.002", "initial temperature, as a fraction of the start's step time"},
                {"t-end", "0.00001", "final temperature, likewise (geometric cooling)"},
                {"swap", "0.3", "share of moves that swap two groups' devices (the rest move one group)"},
                {"pull", "0.5", "share of one-group moves that go to the device of a group it exchanges tensors with"}},
               [](const PlacerOptions& o) { return std::make_unique<LocalSearchPlacer>(o); }});
  r.push_back({"optimal", "search",
               "the best placement of a few groups (max-groups): every placement simulated, or an integer program (CBC) over a load + "
               "communication model when too many; optimal for those groups, not over single ops",
               {{"groups", "colocation", "grouping: colocation, module[:DEPTH], module-call[:DEPTH] or op"},
                {"max-groups", "12", "coarsen the groups to at most this many"},
                {"max-evaluations", "2000000", "enumerate when devices^groups is at most this; otherwise the integer program"},
                {"method", "auto", "auto, exhaustive or ip (the integer program over a load + communication model)"},
                {"devices", "gpus", "devices to place on (at most 8): 'gpus' (every device when there are fewer than two) or 'all'"},
                {"ip-seconds", "20", "time limit of the integer program (and the budget's seconds when lower)"}},
               [](const PlacerOptions& o) { return std::make_unique<OptimalPlacer>(o); }});
}

}  // namespace placer
