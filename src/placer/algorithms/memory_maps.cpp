// Memory-filling module maps as Hugging Face Accelerate computes them (`infer_auto_device_map`,
// `get_balanced_memory`), for `device_map="sequential"` and `"balanced"`:
// - Devices are filled in order, GPUs first (gpu:0, gpu:1, ...), then the CPU as the overflow
//   device. Top-level modules are taken in execution order (the order of their first op in the
//   topological order); ops of the top level are items of their own, so they land on the device of
//   the module before them (or after them, at the start).
// - A module that does not fit in what is left of the current device is split into its children
//   (its direct ops and its child modules), as Accelerate does without `no_split_module_classes`;
//   a module without child modules cannot be split and moves, whole, to the next device.
// - Size of an item: the static bytes of its ops' families (parameters and optimizer state) plus,
//   in a training step, the bytes of the forward activations its ops produce (they stay alive
//   until the backward pass reads them) and of the partial gradients of the parameters its ops
//   read (one per read, alive until the parameter's update at the end of the step). On top of what a device holds, room is kept for the largest transient
//   working set placed there (the rest of an op family's outputs: the gradients of activations;
//   in inference, the op's outputs): our own rule (Accelerate reserves room for the largest layer
//   still to place on gpu:0 and the CPU only, to load offloaded weights into).
// - "balanced" caps every GPU but the last at total size / number of GPUs + a buffer of 1.25 x
//   the mean size of the leaf modules (Accelerate's get_balanced_memory); the last GPU keeps its
//   whole budget.
// Our estimate of memory is not the simulator's: when the simulated placement does not fit (or
// exceeds max-memory-fraction somewhere), the budgets of the devices that overflowed shrink (in
// proportion, then by the overflow) and the map is recomputed (at most `repair-rounds` times), so
// that the result honours the memory limits wherever the model fits at all; when it fits at once,
// the budgets grow while the simulated map still fits (the estimate is high), so that each device
// is filled as far as the simulator allows.
#include <algorithm>
#include <deque>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "placer/algorithms/families.hpp"
#include "placer/algorithms/grouping.hpp"
#include "placer/util/error.hpp"
#include "placer/util/units.hpp"

namespace placer {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Modules as a tree with the forward ops under each, and per module its size and reserve.
struct ModuleTree {
  std::vector<std::vector<ModuleId>> children;
  std::vector<std::vector<OpId>> direct_ops;  // forward ops whose own module it is, topological order
  std::vector<std::uint32_t> first_rank;      // smallest topological rank of an op in the subtree
  std::vector<std::uint64_t> size_bytes;      // subtree totals
  std::vector<std::uint64_t> reserve_bytes;   // largest activation family in the subtree
  std::vector<std::uint64_t> op_size, op_reserve;
  std::vector<std::uint32_t> op_rank;
};

ModuleTree build_tree(const Problem& p) {
  const Graph& g = p.graph;
  const std::size_t nf = g.num_forward_ops(), nm = std::max<std::size_t>(g.num_modules(), 1);
  const bool training = nf != g.num_ops();
  const FamilyMemory mem = family_memory(p);
  ModuleTree t;
  t.children.resize(nm);
  t.direct_ops.resize(nm);
  t.first_rank.assign(nm, kNone);
  t.size_bytes.assign(nm, 0);
  t.reserve_bytes.assign(nm, 0);
  t.op_size.assign(nf, 0);
  t.op_reserve.assign(nf, 0);
  t.op_rank.assign(nf, kNone);
  const std::vector<std::uint32_t> rank = execution_ranks(g);  // parameter aliases where they are read
  for (OpId o : g.topological_order())
    if (o < nf) t.op_rank[o] = rank[o], t.direct_ops[g.op_module(o)].push_back(o);
  for (OpId o = 0; o < nf; ++o) {
    std::uint64_t activations = 0;
    if (training)
      for (TensorId out : g.op_outputs(o)) activations += g.tensor_bytes(out);
    t.op_size[o] = mem.static_bytes[o] + activations + mem.partial_gradient_bytes[o];
    const std::uint64_t held = activations + mem.partial_gradient_bytes[o];
    t.op_reserve[o] = mem.activation_bytes[o] > held ? mem.activation_bytes[o] - held : 0;
    const ModuleId m = g.op_module(o);
    t.size_bytes[m] += t.op_size[o];
    t.reserve_bytes[m] = std::max(t.reserve_bytes[m], t.op_reserve[o]);
    t.first_rank[m] = std::min(t.first_rank[m], t.op_rank[o]);
  }
  // Parents have smaller ids than their children: one backward sweep totals the subtrees.
  for (ModuleId m = static_cast<ModuleId>(g.num_modules()); m-- > 1;) {
    const ModuleId parent = g.module_parent(m);
    t.children[parent].push_back(m);
    t.size_bytes[parent] += t.size_bytes[m];
    t.reserve_bytes[parent] = std::max(t.reserve_bytes[parent], t.reserve_bytes[m]);
    t.first_rank[parent] = std::min(t.first_rank[parent], t.first_rank[m]);
  }
  return t;
}

struct Item {
  bool module = false;
  std::uint32_t id = 0;  // module id or op id
};

class ModuleMap {
 public:
  ModuleMap(const Problem& p, const ModuleTree& t) : p_(p), t_(t) {}

  // Children of a module in execution order: its direct ops and its child modules that hold ops.
  std::vector<Item> children(ModuleId m) const {
    std::vector<std::pair<std::uint32_t, Item>> ranked;
    for (OpId o : t_.direct_ops[m]) ranked.push_back({t_.op_rank[o], Item{false, o}});
    for (ModuleId c : t_.children[m])
      if (t_.first_rank[c] != kNone) ranked.push_back({t_.first_rank[c], Item{true, c}});
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Item> out;
    for (const auto& [rank, item] : ranked) out.push_back(item);
    return out;
  }

  std::uint64_t size(const Item& it) const { return it.module ? t_.size_bytes[it.id] : t_.op_size[it.id]; }
  std::uint64_t reserve(const Item& it) const { return it.module ? t_.reserve_bytes[it.id] : t_.op_reserve[it.id]; }
  bool splittable(const Item& it) const { return it.module && !t_.children[it.id].empty(); }

  // Fills `devices` in order under `budget` (per device id: what it holds, working set included),
  // the items' own sizes also under `cap` (balanced's share per GPU), except that an item larger
  // than a share that cannot be split takes an empty GPU of its own. (Both are ours: the working set
  // counted against the share, and an unsplittable item larger than a share, such as a first
  // layer with its batch of data or BERT's embedding table, skipped every GPU but the last, and
  // everything after it followed it there.) Throws Error when an item fits nowhere.
  std::vector<DeviceId> fill(const std::vector<DeviceId>& devices, const std::vector<std::uint64_t>& budget,
                             const std::vector<std::uint64_t>& cap) const {
    const Graph& g = p_.graph;
    std::vector<DeviceId> placement(g.num_forward_ops(), devices.front());
    std::deque<Item> todo;
    for (const Item& it : children(0)) todo.push_back(it);
    std::size_t current = 0;
    std::uint64_t used = 0, reserved = 0;
    while (!todo.empty()) {
      const Item it = todo.front();
      const DeviceId d = devices[current];
      const std::uint64_t need = used + size(it) + std::max(reserved, reserve(it));
      const bool within_share = used + size(it) <= cap[d] || (used == 0 && !splittable(it));
      if (need <= budget[d] && within_share) {
        todo.pop_front();
        assign(it, d, placement);
        used += size(it);
        reserved = std::max(reserved, reserve(it));
        continue;
      }
      if (splittable(it)) {
        todo.pop_front();
        const std::vector<Item> parts = children(it.id);
        todo.insert(todo.begin(), parts.begin(), parts.end());
        continue;
      }
      if (++current == devices.size()) {
        const Device& last = p_.cluster.device(devices.back());
        const std::uint64_t left = budget[d] > used + reserved ? budget[d] - used - reserved : 0;
        throw Error(std::string(it.module ? "module '" + g.module_name(it.id) + "'" : "op '" + g.op_name(it.id) + "'") + " (" +
                    human_bytes(static_cast<double>(size(it) + reserve(it))) + " with its working set) fits on no device in this fill order: the "
                    "last one, " + last.name + ", has " + human_bytes(static_cast<double>(left)) + " of its " +
                    human_bytes(static_cast<double>(budget[d])) + " of budget left" +
                    (used + reserved > 0 ? " after the items before it" : std::string(" (nothing else on it)")));
      }
      used = reserved = 0;
    }
    return placement;
  }

 private:
  void assign(const Item& it, DeviceId d, std::vector<DeviceId>& placement) const {
    if (!it.module) {
      placement[it.id] = d;
      return;
    }
    for (OpId o : t_.direct_ops[it.id]) placement[o] = d;
    for (ModuleId c : t_.children[it.id]) assign(Item{true, c}, d, placement);
  }

  const Problem& p_;
  const ModuleTree& t_;
};

// GPUs in id order, then the CPUs (the overflow devices); CPUs only when there is no GPU.
std::vector<DeviceId> fill_order(const Cluster& c) {
  std::vector<DeviceId> order = c.device_ids(DeviceKind::gpu);
  for (DeviceId d : c.device_ids(DeviceKind::cpu)) order.push_back(d);
  return order;
}

class MemoryMapPlacer final : public Placer {
 public:
  MemoryMapPlacer(bool balanced, const PlacerOptions& o)
      : balanced_(balanced), fraction_(o.get_double("max-memory-fraction", 1.0)), rounds_(o.get_int("repair-rounds", 32)) {
    if (!(fraction_ > 0.0 && fraction_ <= 1.0)) throw Error("option 'max-memory-fraction' must be in (0, 1]");
    if (rounds_ < 0) throw Error("option 'repair-rounds' must be >= 0");
  }

  PlacementResult place(const Problem& p, const Budget& given, Observer& observer, std::uint64_t) override {
    const ModuleTree tree = build_tree(p);
    const ModuleMap map(p, tree);
    const std::vector<DeviceId> devices = fill_order(p.cluster);
    const std::vector<DeviceId> gpus = p.cluster.device_ids(DeviceKind::gpu);
    const std::vector<std::uint64_t> limits = memory_limits(p);
    // get_balanced_memory: total / GPUs, plus 1.25 x the mean leaf module as a buffer; the last
    // GPU keeps its whole budget in case the buffer is not enough.
    std::uint64_t per_gpu = std::numeric_limits<std::uint64_t>::max();
    if (balanced_ && gpus.size() > 1) {
      std::uint64_t leaf_total = 0, leaves = 0;
      for (ModuleId m = 1; m < tree.children.size(); ++m)
        if (tree.children[m].empty() && tree.first_rank[m] != kNone) leaf_total += tree.size_bytes[m], ++leaves;
      const std::uint64_t buffer = leaves == 0 ? 0 : static_cast<std::uint64_t>(1.25 * static_cast<double>(leaf_total / leaves));
      per_gpu = tree.size_bytes[0] / gpus.size() + buffer;
    }
    // The budgets of a fill: each device's limit x max-memory-fraction x `grow` (see below); and
    // balanced's cap on what every GPU but the last holds of the items' sizes.
    auto budgets = [&](double grow) {
      std::vector<std::uint64_t> b(limits.size());
      for (std::size_t d = 0; d < b.size(); ++d) {
        const double scaled = static_cast<double>(limits[d]) * fraction_ * grow;
        b[d] = scaled >= 0x1p64 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(scaled);
      }
      return b;
    };
    std::vector<std::uint64_t> cap(limits.size(), std::numeric_limits<std::uint64_t>::max());
    for (std::size_t i = 0; i + 1 < gpus.size(); ++i) cap[gpus[i]] = per_gpu;
    // Fits the memory limits and max-memory-fraction, as simulated.
    auto allowed = [&](std::size_t d) { return static_cast<double>(limits[d]) * fraction_; };
    auto within = [&](const SimResult& r) {
      if (!r.fits) return false;
      for (std::size_t d = 0; d < r.devices.size(); ++d)
        if (static_cast<double>(r.devices[d].peak_memory_bytes) > allowed(d)) return false;
      return true;
    };
    Evaluator eval(p);
    // The simulations (repair rounds and growth steps) stay within --samples.
    const auto spent = [&] { return given.samples > 0 && eval.evaluations() >= given.samples; };
    // The estimate is about twice what the simulator keeps in training: where it says the model
    // fits nowhere, budgets up to 4x are tried before giving up (a model the CPU alone holds was
    // refused: a review), and the simulation below judges the map. If even that map cannot be
    // made to fit, the estimate's own error (which module fits nowhere) is the clearer answer.
    double base = 1.0;
    std::vector<std::uint64_t> budget = budgets(base);
    std::vector<DeviceId> placement;
    std::optional<Error> fits_nowhere;
    for (const double grow : {1.0, 1.5, 2.0, 3.0, 4.0}) {
      try {
        budget = budgets(base = grow);
        placement = map.fill(devices, budget, cap);
        break;
      } catch (const Error& e) {
        if (!fits_nowhere) fits_nowhere = e;
        if (grow == 4.0) throw *fits_nowhere;
      }
    }
    const auto unless_fits_nowhere = [&](PlacementResult result) {
      if (fits_nowhere && !result.sim.fits) throw *fits_nowhere;
      return result;
    };
    std::vector<std::uint32_t> overflowed(budget.size(), 0);  // rounds in which each device overflowed
    std::int64_t round = 0;
    for (; round < rounds_ && !observer.stop_requested() && !spent(); ++round) {
      const SimResult& r = eval.evaluate(placement);
      observer.on_progress({.samples = eval.evaluations(), .best_step_time_s = r.fits ? r.step_time_s : 0.0});
      if (within(r)) {
        // Our estimate counts every forward output as alive until the backward pass (and views as
        // copies), about twice what the simulator keeps on the shared models: filled to the
        // estimate, a GPU ends half full and the rest overflows to the next device and the CPU.
        // When the first fill fits, the budgets grow (up to 4x, by bisection) for as long as the
        // simulated map still fits, so that each device is filled as the simulator sees it.
        std::string note;
        if (round == 0) {
          bool cut = false;
          placement = grown(map, devices, budgets, base, cap, within, eval, std::move(placement), observer, spent, cut);
          if (cut) note = "the budgets' growth (as far as the simulated map fits) was cut short by --samples";
        }
        return finish(p, std::move(placement), eval.evaluations(), note);
      }
      // Our estimate was short: shrink those budgets and fill again. A device's first overflow
      // shrinks its budget in proportion (limit / simulated peak, less 2%): cut by the whole
      // overflow, a budget could drop to nothing when the overflow was mostly working set, which
      // holding fewer modules hardly shrinks (BERT in inference at 1% of p100x8's memory ended
      // with three GPUs empty and 243 ops on the CPU). A device that overflows again loses its
      // whole overflow (and 1% of its limit): what is left is not in proportion to what it holds.
      // The overflow is measured against the limit x max-memory-fraction (Accelerate's max_memory,
      // which the map is asked to honour), not the full limit alone.
      for (std::size_t d = 0; d < r.devices.size(); ++d) {
        const double peak = static_cast<double>(r.devices[d].peak_memory_bytes);
        if (!(peak > allowed(d))) continue;
        if (overflowed[d]++ == 0) {
          budget[d] = static_cast<std::uint64_t>(static_cast<double>(budget[d]) * allowed(d) / peak * 0.98);
        } else {
          const double cut = peak - allowed(d) + static_cast<double>(limits[d] / 100);
          budget[d] = static_cast<double>(budget[d]) > cut ? budget[d] - static_cast<std::uint64_t>(cut) : 0;
        }
      }
      try {
        placement = map.fill(devices, budget, cap);
      } catch (const Error&) {
        // What the cuts took fits nowhere by the estimate: the devices the simulation left room on
        // (the CPU, mostly) take more, in proportion to that room (limit / simulated peak, less
        // 2%; a device that held nothing, and none beyond, 4x its limit by the estimate), and the
        // map is filled again (it gave up here while the CPU was half empty: a review).
        const std::vector<std::uint64_t> most = budgets(4.0);
        bool grew = false;
        for (std::size_t d = 0; d < r.devices.size(); ++d) {
          const double peak = static_cast<double>(r.devices[d].peak_memory_bytes);
          if (peak > allowed(d) || budget[d] >= most[d]) continue;
          const double scaled = peak > 0 ? static_cast<double>(budget[d]) * allowed(d) / peak * 0.98 : static_cast<double>(most[d]);
          const std::uint64_t more = scaled >= static_cast<double>(most[d]) ? most[d] : static_cast<std::uint64_t>(scaled);
          if (more > budget[d]) budget[d] = more, grew = true;
        }
        try {
          if (!grew) throw;
          placement = map.fill(devices, budget, cap);
        } catch (const Error& e) {
          return unless_fits_nowhere(
              finish(p, std::move(placement), eval.evaluations(), std::string("the map overflows and no other budget fits: ") + e.what()));
        }
      }
    }
    // The last refill was not simulated in the loop: say it overflows only if it does.
    PlacementResult result = unless_fits_nowhere(finish(p, std::move(placement), eval.evaluations()));
    const std::string after = rounds_ == 0 ? " (repair-rounds=0: not repaired)"
                              : " after " + std::to_string(round) + " round" + (round == 1 ? "" : "s") + " of budget repair" +
                                    (round < rounds_ ? " (cut short by --samples or an interrupt)" : "");
    if (!result.sim.fits)
      result.note = "the map still overflows" + after;
    else if (!within(result.sim))
      result.note = "the map fits but uses more than max-memory-fraction of a device's memory" + after;
    return result;
  }

 private:
  // The map filled with budgets grown by the largest factor in [base, 4] (six bisection steps) whose
  // simulated map stays `within` the limits; `placement` is the map at factor `base`, which does.
  template <typename Budgets, typename Within, typename Spent>
  std::vector<DeviceId> grown(const ModuleMap& map, const std::vector<DeviceId>& devices, Budgets budgets, double base,
                              const std::vector<std::uint64_t>& cap, Within within, Evaluator& eval, std::vector<DeviceId> placement,
                              Observer& observer, Spent spent, bool& cut) const {
    double lo = base, hi = 4.0;
    if (lo >= hi) return placement;
    for (int step = 0; step < 6 && !observer.stop_requested(); ++step) {
      if (spent()) {
        cut = true;
        break;
      }
      const double mid = std::sqrt(lo * hi);
      std::vector<DeviceId> candidate;
      try {
        candidate = map.fill(devices, budgets(mid), cap);
      } catch (const Error&) {
        hi = mid;  // cannot happen with larger budgets than a fill that worked; kept safe
        continue;
      }
      if (candidate == placement) {  // the same map: nothing the larger budgets change yet
        lo = mid;
        continue;
      }
      const SimResult& r = eval.evaluate(candidate);
      observer.on_progress({.samples = eval.evaluations(), .best_step_time_s = r.fits ? r.step_time_s : 0.0});
      if (within(r)) lo = mid, placement = std::move(candidate);
      else hi = mid;
    }
    return placement;
  }

  bool balanced_;
  double fraction_;
  std::int64_t rounds_;
};

const std::vector<OptionDoc> kMapOptions = {
    {"max-memory-fraction", "1.0", "fill each device up to this fraction of its memory limit (Accelerate's max_memory)"},
    {"repair-rounds", "32", "when the simulated map overflows, shrink the budgets that overflowed and refill, at most this often"},
};

}  // namespace

void register_memory_maps(std::vector<PlacerInfo>& r) {
  r.push_back({"sequential", "memory-map",
               "Accelerate's device_map=\"sequential\": whole modules in execution order fill gpu:0, gpu:1, ..., then the CPU",
               kMapOptions, [](const PlacerOptions& o) { return std::make_unique<MemoryMapPlacer>(false, o); }});
  r.push_back({"balanced", "memory-map",
               "Accelerate's device_map=\"balanced\": modules spread evenly by memory over the GPUs, CPU as overflow",
               kMapOptions, [](const PlacerOptions& o) { return std::make_unique<MemoryMapPlacer>(true, o); }});
}

}  // namespace placer
