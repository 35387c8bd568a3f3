// Graph partitioning with the real libraries, as the device-placement papers' baselines did:
// METIS (`metis`: METIS_PartGraphKway or METIS_PartGraphRecursive) and Scotch (`scotch`:
// SCOTCH_graphMap onto a weighted complete architecture). Both work on the group graph (ColocRL
// co-location groups coarsened to at most 256 by default, as in the papers): vertex weights are a
// group's family time on its fastest target device, edge weights the bytes between groups, both
// scaled to integers (edges at least 1); there are as many parts as target devices, with target
// part weights proportional to each device's peak FLOP/s.
// Partitioners know nothing of memory, so a repair pass follows: while the simulated placement
// overflows a device, its groups move, lightest compute first, to the target device with the most
// free memory (any device once the targets are full) until the moved groups' resident bytes (static
// + activations of their families) cover the overflow; then the placement is simulated again. A
// group never goes back to a device it has been on, and the least overflowing placement is kept.
// Deterministic under the seed (METIS_OPTION_SEED; Scotch through a context of its own, with
// SCOTCH_OPTIONNUMDETERMINISTIC, one thread and a seeded random generator, under a lock all the same).
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <numeric>
#include <string>

extern "C" {
#include <metis.h>
#include <scotch.h>
}

#include "placer/algorithms/families.hpp"
#include "placer/algorithms/grouping.hpp"
#include "placer/sim/placement.hpp"
#include "placer/util/error.hpp"

namespace placer {
namespace {

std::vector<DeviceId> target_devices(const Cluster& c, const std::string& which) {
  std::vector<DeviceId> all(c.num_devices());
  std::iota(all.begin(), all.end(), DeviceId{0});
  if (which == "all") return all;
  if (which != "gpus") throw Error("option 'devices' must be 'gpus' or 'all', got '" + which + "'");
  std::vector<DeviceId> gpus = c.device_ids(DeviceKind::gpu);
  return gpus.empty() ? all : gpus;
}

// Integer weights sum to about this: fine enough for 256 groups, and far from 32-bit overflow in
// the libraries' sums and products (Scotch multiplies loads by architecture weights).
constexpr double kWeightTotal = 1e6;

// Positive integers proportional to `values`, summing to about `total` (each at least 1).
template <typename Int>
std::vector<Int> scaled(const std::vector<double>& values, double total) {
  const double sum = std::accumulate(values.begin(), values.end(), 0.0);
  std::vector<Int> out(values.size(), 1);
  if (!(sum > 0.0)) return out;
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<Int>(std::max<long long>(1, std::llround(values[i] / sum * total)));
  return out;
}

// The weighted graph handed to a partitioner (CSR, both directions of every edge).
struct WeightedGraph {
  std::vector<double> vertex;
  std::vector<std::uint32_t> begin, adj;
  std::vector<double> edge;
  std::vector<double> part_share;  // per part, summing to 1
};

// METIS reports some troubles with printf and carries on: a part it cannot bisect ("***Cannot bisect
// a graph with 0 vertices! ***You are trying to partition a graph into too many parts!", which
// weights skewed over dozens of parts give) leaves that part empty. On placer's stdout that would
// break `--json`, so for the call stdout goes to a temporary file, whose text comes back (one line,
// trimmed) for the result's note. Process-wide (file descriptor 1): one call at a time.
class StdoutCapture {
 public:
  StdoutCapture() : lock_(mutex()) {
    std::fflush(stdout);
    file_ = std::tmpfile();
    saved_ = file_ ? ::dup(STDOUT_FILENO) : -1;
    if (saved_ >= 0 && ::dup2(::fileno(file_), STDOUT_FILENO) < 0) {
      ::close(saved_);
      saved_ = -1;
    }
  }
  ~StdoutCapture() { restore(); }
  StdoutCapture(const StdoutCapture&) = delete;
  StdoutCapture& operator=(const StdoutCapture&) = delete;
  // Puts stdout back and returns what was written meanwhile, runs of whitespace and '*' as one space.
  std::string finish() {
    restore();
    std::string text;
    if (!file_) return text;
    std::rewind(file_);
    char buf[512];
    std::size_t got = 0;
    while ((got = std::fread(buf, 1, sizeof buf, file_)) > 0 && text.size() < 4096) text.append(buf, got);
    std::fclose(file_);
    file_ = nullptr;
    std::string out;
    for (char ch : text) {
      const bool space = ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '*';  // METIS's "***" too
      if (!space) out += ch;
      else if (!out.empty() && out.back() != ' ') out += ' ';
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::lock_guard<std::mutex> lock_;
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

// `said`: what METIS printed, if anything (see StdoutCapture).
std::vector<std::uint32_t> partition_metis(const WeightedGraph& w, std::uint64_t seed, bool recursive, double imbalance, std::string& said) {
  const std::size_t n = w.vertex.size(), k = w.part_share.size();
  idx_t nvtxs = static_cast<idx_t>(n), ncon = 1, nparts = static_cast<idx_t>(k), objval = 0;
  std::vector<idx_t> xadj(w.begin.begin(), w.begin.end()), adjncy(w.adj.begin(), w.adj.end());
  std::vector<idx_t> vwgt = scaled<idx_t>(w.vertex, kWeightTotal), adjwgt = scaled<idx_t>(w.edge, kWeightTotal), part(n, 0);
  std::vector<real_t> tpwgts(k);
  for (std::size_t i = 0; i < k; ++i) tpwgts[i] = static_cast<real_t>(w.part_share[i]);
  real_t ubvec = static_cast<real_t>(imbalance);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed % 2147483647u);
  options[METIS_OPTION_NUMBERING] = 0;
  idx_t dummy = 0;  // METIS reads no edge arrays of an edgeless graph, but wants valid pointers
  idx_t* adj_ptr = adjncy.empty() ? &dummy : adjncy.data();
  idx_t* adjw_ptr = adjwgt.empty() ? &dummy : adjwgt.data();
  StdoutCapture capture;
  const int rc = recursive ? METIS_PartGraphRecursive(&nvtxs, &ncon, xadj.data(), adj_ptr, vwgt.data(), nullptr, adjw_ptr, &nparts,
                                                      tpwgts.data(), &ubvec, options, &objval, part.data())
                           : METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adj_ptr, vwgt.data(), nullptr, adjw_ptr, &nparts,
                                                 tpwgts.data(), &ubvec, options, &objval, part.data());
  said = capture.finish();
  if (rc != METIS_OK)
    throw Error("metis: METIS_PartGraph" + std::string(recursive ? "Recursive" : "Kway") + " failed (code " + std::to_string(rc) + ") on " +
                std::to_string(n) + " groups into " + std::to_string(k) + " parts");
  return {part.begin(), part.end()};
}

std::mutex& scotch_lock() {
  static std::mutex m;
  return m;
}

std::vector<std::uint32_t> partition_scotch(const WeightedGraph& w, std::uint64_t seed, double imbalance) {
  const std::size_t n = w.vertex.size(), k = w.part_share.size();
  std::vector<SCOTCH_Num> verttab(w.begin.begin(), w.begin.end()), edgetab(w.adj.begin(), w.adj.end());
  std::vector<SCOTCH_Num> velotab = scaled<SCOTCH_Num>(w.vertex, kWeightTotal), edlotab = scaled<SCOTCH_Num>(w.edge, kWeightTotal);
  std::vector<SCOTCH_Num> archw = scaled<SCOTCH_Num>(w.part_share, 1000), parttab(n, 0);
  SCOTCH_Num dummy = 0;
  std::lock_guard<std::mutex> lock(scotch_lock());
  SCOTCH_Graph graph, bound;
  SCOTCH_Arch arch;
  SCOTCH_Strat strat;
  SCOTCH_Context context;
  if (SCOTCH_graphInit(&graph) != 0) throw Error("scotch: SCOTCH_graphInit failed");
  if (SCOTCH_contextInit(&context) != 0) {
    SCOTCH_graphExit(&graph);
    throw Error("scotch: SCOTCH_contextInit failed");
  }
  SCOTCH_archInit(&arch);
  SCOTCH_stratInit(&strat);
  bool is_bound = false;
  std::string failed;
  // A context of its own: deterministic (Scotch 7 otherwise may run multi-threaded algorithms whose
  // result depends on the threads' timing), one thread (its result also depends on the number of
  // threads, which by default is the machine's: a review saw another mapping with
  // SCOTCH_PTHREAD_NUMBER=1 than with 2, 4 or 8), and its own random generator, seeded.
  if (SCOTCH_contextOptionSetNum(&context, SCOTCH_OPTIONNUMDETERMINISTIC, 1) != 0)
    failed = "SCOTCH_contextOptionSetNum";
  else if (SCOTCH_contextThreadSpawn(&context, 1, nullptr) != 0)
    failed = "SCOTCH_contextThreadSpawn";
  else if (SCOTCH_contextRandomClone(&context) != 0)
    failed = "SCOTCH_contextRandomClone";
  else if (SCOTCH_graphBuild(&graph, 0, static_cast<SCOTCH_Num>(n), verttab.data(), nullptr, velotab.data(), nullptr,
                        static_cast<SCOTCH_Num>(edgetab.size()), edgetab.empty() ? &dummy : edgetab.data(),
                        edlotab.empty() ? &dummy : edlotab.data()) != 0)
    failed = "SCOTCH_graphBuild";
  else if (SCOTCH_graphCheck(&graph) != 0)
    failed = "SCOTCH_graphCheck";
  else if (SCOTCH_archCmpltw(&arch, static_cast<SCOTCH_Num>(k), archw.data()) != 0)
    failed = "SCOTCH_archCmpltw";
  else if (SCOTCH_stratGraphMapBuild(&strat, SCOTCH_STRATQUALITY, static_cast<SCOTCH_Num>(k), imbalance - 1.0) != 0)
    failed = "SCOTCH_stratGraphMapBuild";
  else if (SCOTCH_contextBindGraph(&context, &graph, &bound) != 0)
    failed = "SCOTCH_contextBindGraph";
  else {
    is_bound = true;
    // Scotch seeds with the value's lowest bit set (seeds 2k and 2k + 1 gave one mapping): odd values.
    SCOTCH_contextRandomSeed(&context, static_cast<SCOTCH_Num>(seed % 1073741823u * 2 + 1));
    SCOTCH_contextRandomReset(&context);
    if (SCOTCH_graphMap(&bound, &arch, &strat, parttab.data()) != 0) failed = "SCOTCH_graphMap";
  }
  if (is_bound) SCOTCH_graphExit(&bound);
  SCOTCH_stratExit(&strat);
  SCOTCH_archExit(&arch);
  SCOTCH_graphExit(&graph);
  SCOTCH_contextExit(&context);
  if (!failed.empty())
    throw Error("scotch: " + failed + " failed on " + std::to_string(n) + " groups into " + std::to_string(k) + " parts");
  std::vector<std::uint32_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint32_t>(parttab[i]);
  return out;
}

// Moves groups off devices the simulation finds over their limit (see the header comment). A group
// goes only to a device it has not been moved to before (the resident bytes it is moved by are an estimate below
// its peak: on nmt with a twentieth of k80x4's memory, one group went back and forth between two
// GPUs for every round while the CPU had gigabytes free, a QA pass), and the placement that
// overflowed least of those simulated is kept. Returns what stopped the rounds before a fit or the
// end of the moves to try, if anything.
enum class RepairCut { none, rounds, deadline };
RepairCut repair_memory(const Problem& p, const Grouping& grouping, const GroupGraph& gg, const std::vector<DeviceId>& targets,
                          std::vector<DeviceId>& group_device, std::size_t max_rounds, Evaluator& eval,
                          const Deadline& deadline) {
  const std::vector<std::uint64_t> limits = memory_limits(p);
  const std::size_t nd = p.cluster.num_devices();
  std::vector<double> fastest(gg.num_groups, std::numeric_limits<double>::infinity());
  for (std::size_t grp = 0; grp < gg.num_groups; ++grp)
    for (DeviceId d : targets) fastest[grp] = std::min(fastest[grp], gg.time_s[grp * nd + d]);
  // Devices each group was moved to (nd <= 64): not its partition's, to which it may return once
  // (VGG-16 at 2% of k80x4 took 12% longer when a group could never go back where METIS put it).
  std::vector<std::uint64_t> been(gg.num_groups, 0);
  std::vector<DeviceId> all(nd);
  std::iota(all.begin(), all.end(), DeviceId{0});
  std::vector<DeviceId> best = group_device;
  double best_over = std::numeric_limits<double>::infinity();
  bool evaluated = true;  // the current placement has been simulated, or needs no comparison (no round ran)
  bool stopped = true;    // by max_rounds or the deadline (not by a fit, nor by having nothing to move)
  for (std::size_t round = 0; round < max_rounds && !deadline.passed(); ++round) {
    const SimResult& r = eval.evaluate(expand_groups(grouping, group_device));
    evaluated = true;
    double over_total = 0.0;
    for (const auto& [d, over] : r.shortfalls) over_total += static_cast<double>(over);
    if (over_total < best_over) best_over = over_total, best = group_device;
    if (r.fits) {
      stopped = false;
      break;
    }
    std::vector<double> free(nd);
    for (DeviceId d = 0; d < nd; ++d) free[d] = static_cast<double>(limits[d]) - static_cast<double>(r.devices[d].peak_memory_bytes);
    bool moved_any = false;
    for (const auto& [full, over] : r.shortfalls) {
      std::vector<std::uint32_t> mine;
      for (std::uint32_t grp = 0; grp < gg.num_groups; ++grp)
        if (group_device[grp] == full && gg.static_bytes[grp] + gg.activation_bytes[grp] > 0) mine.push_back(grp);
      std::stable_sort(mine.begin(), mine.end(), [&](std::uint32_t a, std::uint32_t b) { return fastest[a] < fastest[b]; });
      double moved = 0.0;
      for (std::uint32_t grp : mine) {
        if (moved >= static_cast<double>(over)) break;
        const double bytes = static_cast<double>(gg.static_bytes[grp] + gg.activation_bytes[grp]);
        auto most_free = [&](const std::vector<DeviceId>& among) {
          DeviceId pick = kNoId;
          for (DeviceId d : among)
            if (d != full && !(been[grp] >> d & 1u) && (pick == kNoId || free[d] > free[pick])) pick = d;
          return pick;
        };
        DeviceId dest = most_free(targets);
        if (dest == kNoId || free[dest] < bytes) {
          const DeviceId any = most_free(all);
          if (any != kNoId && (dest == kNoId || free[any] > free[dest])) dest = any;
        }
        if (dest == kNoId) continue;  // it has been on every device: the next group
        group_device[grp] = dest;
        been[grp] |= std::uint64_t{1} << dest;
        free[dest] -= bytes;
        free[full] += bytes;
        moved += bytes;
        moved_any = true;
      }
    }
    if (!moved_any) {
      stopped = false;
      break;
    }
    evaluated = false;
  }
  // Which limit ended the rounds, judged as they end (the deadline may pass during the last
  // simulation below: a review).
  const RepairCut cut = !stopped ? RepairCut::none : deadline.passed() ? RepairCut::deadline : RepairCut::rounds;
  // The last round's moves (simulated by no round) may overflow more than the best seen: simulated
  // once more to compare, as finish() simulates a result (not one of the budget's samples: the
  // placement it simulates is the one finish() would have simulated before this comparison).
  if (!evaluated) {
    std::vector<DeviceId> devices;
    expand_placement(p.graph, expand_groups(grouping, group_device), devices);
    const SimResult& r = eval.simulator().simulate(devices);
    double over_total = 0.0;
    for (const auto& [d, over] : r.shortfalls) over_total += static_cast<double>(over);
    if (over_total < best_over) best_over = over_total, best = group_device;
  }
  group_device = best;
  return cut;
}

class PartitionPlacer final : public Placer {
 public:
  PartitionPlacer(bool scotch, const PlacerOptions& o)
      : scotch_(scotch),
        groups_(o.get("groups", "colocation")),
        max_groups_(o.get_int("max-groups", 256)),
        devices_(o.get_one_of("devices", "gpus", {"gpus", "all"})),
        method_(o.get("method", "kway")),
        imbalance_(o.get_double("imbalance", 1.05)),
        repair_rounds_(o.get_int("repair-rounds", 32)) {
    check_grouping(groups_);
    if (max_groups_ < 0) throw Error("option 'max-groups' must be >= 0 (0: no limit)");
    if (method_ != "kway" && method_ != "recursive") throw Error("option 'method' must be 'kway' or 'recursive'");
    if (!(imbalance_ >= 1.0)) throw Error("option 'imbalance' must be >= 1 (1.05: parts may be 5% over their target)");
    if (repair_rounds_ < 0) throw Error("option 'repair-rounds' must be >= 0");
  }

  PlacementResult place(const Problem& p, const Budget& budget, Observer& observer, std::uint64_t seed) override {
    const auto began = std::chrono::steady_clock::now();
    std::vector<DeviceId> targets = target_devices(p.cluster, devices_);
    const std::size_t nd = p.cluster.num_devices();
    // Co-location folds a chain (VGG, an MLP) into a handful of groups that no partition can
    // balance: below 4 groups per device, partition the ops themselves, coarsened as asked.
    std::string note;
    // (One target takes every group: no count is too few.)
    const Grouping grouping =
        make_grouping_at_least(p, groups_, static_cast<std::size_t>(max_groups_), targets.size() > 1 ? 4 * targets.size() : 1, note);
    const GroupGraph gg = group_graph(p, grouping);
    // Fewer groups than devices (max-groups below the device count): as many parts as groups, on
    // the fastest devices (METIS cannot split a graph into more parts than vertices).
    if (gg.num_groups < targets.size()) {
      std::stable_sort(targets.begin(), targets.end(),
                       [&](DeviceId a, DeviceId b) { return p.cluster.device(a).peak_flops > p.cluster.device(b).peak_flops; });
      targets.resize(std::max<std::size_t>(gg.num_groups, 1));
      std::sort(targets.begin(), targets.end());
      note += std::string(note.empty() ? "" : "; ") + "fewer groups than devices: one part per group, on the fastest devices";
    }
    const std::size_t k = targets.size();

    WeightedGraph w;
    w.vertex.assign(gg.num_groups, std::numeric_limits<double>::infinity());
    for (std::size_t grp = 0; grp < gg.num_groups; ++grp)
      for (DeviceId d : targets) w.vertex[grp] = std::min(w.vertex[grp], gg.time_s[grp * nd + d]);
    w.begin = gg.adj_begin;
    w.adj = gg.adj;
    w.edge = gg.adj_bytes;
    double flops = 0.0;
    for (DeviceId d : targets) flops += p.cluster.device(d).peak_flops;
    for (DeviceId d : targets) w.part_share.push_back(p.cluster.device(d).peak_flops / flops);

    std::vector<std::uint32_t> part(gg.num_groups, 0);
    if (gg.num_groups <= k) {
      // One part per group, as the note says: METIS may leave a part empty on a graph this small
      // (two groups on k80x4 both went to one GPU).
      for (std::size_t grp = 0; grp < gg.num_groups; ++grp) part[grp] = static_cast<std::uint32_t>(grp);
    } else if (k > 1) {
      std::string said;
      part = scotch_ ? partition_scotch(w, seed, imbalance_) : partition_metis(w, seed, method_ == "recursive", imbalance_, said);
      if (!said.empty()) note += std::string(note.empty() ? "" : "; ") + "METIS said (a part it could not split stays empty): " + said;
    }
    std::vector<DeviceId> group_device(gg.num_groups);
    for (std::size_t grp = 0; grp < gg.num_groups; ++grp) group_device[grp] = targets[part[grp]];

    Evaluator eval(p);
    // The repair rounds (one simulation each) stay within --samples and --seconds.
    std::size_t rounds = static_cast<std::size_t>(repair_rounds_);
    if (budget.samples > 0) rounds = std::min(rounds, budget.samples);
    const Deadline deadline = Deadline::after(budget.seconds, began);
    const RepairCut cut = repair_memory(p, grouping, gg, targets, group_device, rounds, eval, deadline);
    observer.on_progress({.samples = eval.evaluations()});
    PlacementResult r = finish(p, expand_groups(grouping, group_device), eval.evaluations(), note);
    if (!r.sim.fits)
      r.note += (r.note.empty() ? "" : "; ") + std::string("the partition still overflows device memory after the repair pass") +
                // Said only when the limit stopped it (whenever --samples was under repair-rounds
                // before, even when the repair had nothing left to move: a review).
                (cut == RepairCut::deadline                                                      ? " (cut short by --seconds)"
                 : cut == RepairCut::rounds && rounds < static_cast<std::size_t>(repair_rounds_) ? " (cut short by --samples)"
                                                                                                   : "");
    return r;
  }

 private:
  bool scotch_;
  std::string groups_;
  std::int64_t max_groups_;
  std::string devices_, method_;
  double imbalance_;
  std::int64_t repair_rounds_;
};

std::vector<OptionDoc> partition_options(bool metis) {
  std::vector<OptionDoc> docs = {
      {"groups", "colocation", "grouping of ops before partitioning: colocation, module[:DEPTH], module-call[:DEPTH] or op"},
      {"max-groups", "256", "coarsen the grouping to at most this many groups (0: no limit); 256 as in the papers"},
      {"devices", "gpus", "partition over 'gpus' (all devices when there is none) or 'all'"},
      {"imbalance", "1.05", "largest allowed part weight over its target (1.05: 5% over)"},
      {"repair-rounds", "32",
       "memory repair: at most this many rounds of moving groups off overflowing devices (and within --samples and --seconds)"},
  };
  if (metis) docs.push_back({"method", "kway", "METIS_PartGraphKway ('kway') or METIS_PartGraphRecursive ('recursive')"});
  return docs;
}

}  // namespace

void register_partitioners(std::vector<PlacerInfo>& r) {
  r.push_back({"metis", "partitioning", "METIS k-way partition of the group graph (compute-weighted vertices, byte-weighted edges), "
               "parts proportional to device speed, then memory repair",
               partition_options(true), [](const PlacerOptions& o) { return std::make_unique<PartitionPlacer>(false, o); }});
  r.push_back({"scotch", "partitioning", "Scotch mapping of the group graph onto a weighted complete architecture of the devices, "
               "then memory repair",
               partition_options(false), [](const PlacerOptions& o) { return std::make_unique<PartitionPlacer>(true, o); }});
}

}  // namespace placer
