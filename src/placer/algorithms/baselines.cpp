// Baselines: the best single device, round-robin, and seeded random placements.
#include <algorithm>
#include <chrono>
#include <limits>
#include <random>

#include "placer/algorithms/families.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

// Devices a baseline spreads over: the GPUs when the cluster has any ("gpus"), or every device.
std::vector<DeviceId> candidate_devices(const Cluster& c, const std::string& which) {
  if (which == "all") {
    std::vector<DeviceId> all(c.num_devices());
    for (DeviceId d = 0; d < all.size(); ++d) all[d] = d;
    return all;
  }
  if (which != "gpus") throw Error("option 'devices' must be 'gpus' or 'all', got '" + which + "'");
  std::vector<DeviceId> gpus = c.device_ids(DeviceKind::gpu);
  return gpus.empty() ? candidate_devices(c, "all") : gpus;
}

class SinglePlacer final : public Placer {
 public:
  PlacementResult place(const Problem& p, const Budget&, Observer& observer, std::uint64_t) override {
    Evaluator eval(p);
    const std::size_t nf = p.graph.num_forward_ops();
    DeviceId best = 0, fastest = 0;
    double best_time = 0.0, fastest_time = 0.0;
    bool any_fits = false;
    for (DeviceId d = 0; d < p.cluster.num_devices(); ++d) {
      std::vector<DeviceId> all_on(nf, d);
      const SimResult& r = eval.evaluate(all_on);
      if (d == 0 || r.step_time_s < fastest_time) fastest = d, fastest_time = r.step_time_s;
      if (r.fits && (!any_fits || r.step_time_s < best_time)) best = d, best_time = r.step_time_s, any_fits = true;
      observer.on_progress({.samples = d + 1, .samples_total = p.cluster.num_devices(), .best_step_time_s = any_fits ? best_time : 0.0});
    }
    if (!any_fits)
      return finish(p, std::vector<DeviceId>(nf, fastest), eval.evaluations(),
                    "fits on no single device; the fastest device is shown");
    return finish(p, std::vector<DeviceId>(nf, best), eval.evaluations());
  }
};

class RoundRobinPlacer final : public Placer {
 public:
  explicit RoundRobinPlacer(const PlacerOptions& o) : devices_(o.get_one_of("devices", "gpus", {"gpus", "all"})) {}
  PlacementResult place(const Problem& p, const Budget&, Observer&, std::uint64_t) override {
    const std::vector<DeviceId> devices = candidate_devices(p.cluster, devices_);
    std::vector<DeviceId> fwd(p.graph.num_forward_ops());
    std::size_t next = 0;
    for (OpId o : p.graph.topological_order())
      if (o < fwd.size()) fwd[o] = devices[next++ % devices.size()];
    PlacementResult r = finish(p, std::move(fwd), 1);
    if (!r.sim.fits) r.note = "round-robin deals ops without regard to memory (no repair)";
    return r;
  }

 private:
  std::string devices_;
};

class RandomPlacer final : public Placer {
 public:
  explicit RandomPlacer(const PlacerOptions& o) : devices_(o.get_one_of("devices", "gpus", {"gpus", "all"})) {}
  PlacementResult place(const Problem& p, const Budget& budget, Observer& observer, std::uint64_t seed) override {
    const std::vector<DeviceId> devices = candidate_devices(p.cluster, devices_);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> pick(0, devices.size() - 1);
    Evaluator eval(p);
    // --samples draws, or as many as --seconds allows (both: whichever ends first); one without either.
    const Deadline deadline = Deadline::after(budget.seconds);
    const bool timed = budget.seconds > 0;
    // One device: every draw is the same placement (a one-device cluster spent all of --seconds on it: a QA pass).
    const std::size_t samples = devices.size() == 1 ? 1 : budget.samples > 0 ? budget.samples : timed ? std::numeric_limits<std::size_t>::max() : 1;
    std::vector<DeviceId> fwd(p.graph.num_forward_ops()), best;
    double best_time = 0.0;
    bool best_fits = false;
    std::uint64_t best_shortfall = 0;
    for (std::size_t s = 0; s < samples && (s == 0 || (!observer.stop_requested() && !deadline.passed())); ++s) {  // one at least
      for (auto& d : fwd) d = devices[pick(rng)];
      const SimResult& r = eval.evaluate(fwd);
      // Keep the fastest that fits; until something fits, the closest to fitting (the smallest
      // shortfall in bytes over all devices), then the fastest.
      std::uint64_t shortfall = 0;
      for (const auto& [device, bytes] : r.shortfalls) shortfall += bytes;
      const bool better = best.empty() || (r.fits && !best_fits) ||
                          (r.fits && best_fits && r.step_time_s < best_time) ||
                          (!r.fits && !best_fits && (shortfall < best_shortfall || (shortfall == best_shortfall && r.step_time_s < best_time)));
      if (better) best = fwd, best_time = r.step_time_s, best_fits = r.fits, best_shortfall = shortfall;
      observer.on_progress({.samples = s + 1, .samples_total = budget.samples > 0 || !timed ? samples : 0,
                            .best_step_time_s = best_fits ? best_time : 0.0,
                            .last_mean_step_time_s = r.step_time_s});
    }
    PlacementResult r = finish(p, std::move(best), eval.evaluations());
    if (!r.sim.fits)
      r.note = "none of the " + std::to_string(r.samples) + " random placement" + (r.samples == 1 ? "" : "s") +
               " drawn fits (no repair); the closest to fitting is shown";
    return r;
  }

 private:
  std::string devices_;
};

const std::vector<OptionDoc> kDeviceOption = {{"devices", "gpus", "spread over 'gpus' (all devices when there is none) or 'all'"}};

}  // namespace

void register_baselines(std::vector<PlacerInfo>& r) {
  r.push_back({"single", "baseline", "everything on the fastest single device that fits", {},
               [](const PlacerOptions&) { return std::make_unique<SinglePlacer>(); }});
  r.push_back({"round-robin", "baseline", "ops in topological order dealt to devices in turn", kDeviceOption,
               [](const PlacerOptions& o) { return std::make_unique<RoundRobinPlacer>(o); }});
  r.push_back({"random", "baseline", "uniformly random device per op (best of --samples draws, or of as many as --seconds allows), seeded",
               kDeviceOption,
               [](const PlacerOptions& o) { return std::make_unique<RandomPlacer>(o); }});
}

}  // namespace placer
