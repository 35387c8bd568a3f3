// The human expert of the device-placement papers (Mirhoseini et al. 2017, 2018; Baechi), with the
// model family read from the graph's structure, never from names:
// - Recurrent models (some module is called more than once — time steps unrolled — and there are
//   LSTM-cell-like modules: Sigmoid and Tanh gates under a repeatedly called module): one recurrent
//   layer per GPU. The layers are the smallest such modules (`cells.0`, `enc.1`, `dec.3`), taken in
//   execution order and dealt to the GPUs in turn (layer i on GPU i mod #GPUs), so that encoder and
//   decoder layers are each spread. Ops outside the layers that feed one (embedding lookups, glue
//   between steps, attention with input feeding) go with the first layer they feed; ops that feed
//   no layer (the output projection to the vocabulary, softmax, loss) are the head.
//   Our reading of the papers, whose baseline text we could not quote here: Mirhoseini et al.
//   follow the hand placements of Sutskever et al. 2014 and Wu et al. 2016 (GNMT), where each LSTM
//   layer, the attention and the softmax are computed by a GPU; the embedding sits with the first
//   layer and the softmax with the last. Options move the embedding or the head to the CPU (as the
//   TensorFlow tutorials of the time pinned embeddings), or the head to a GPU of its own. When one
//   layer per GPU overflows memory, the split of consecutive layers below is used if it fits.
// - Other models (CNNs, transformers): everything on one GPU, the fastest that holds it (the
//   simulator says so; the largest first among equally fast ones); when none does, consecutive
//   layers in execution order are split over the first 2, 3, ... GPUs in that order (or the 2, 3,
//   ... with the most memory), evenly by compute (or, if that overflows, evenly by memory), using
//   as few GPUs as fit.
//   Layers are the top-level modules, refined into their children while one holds more than a
//   quarter of a GPU's even share of the compute.
#include <algorithm>
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

// The GPUs, fastest first, then the one with the most memory (its limit in this problem), then by
// id; every device when the cluster has no GPU.
std::vector<DeviceId> expert_gpus(const Cluster& c, const SimOptions& options) {
  std::vector<DeviceId> gpus = c.device_ids(DeviceKind::gpu);
  if (gpus.empty()) {
    gpus.resize(c.num_devices());
    std::iota(gpus.begin(), gpus.end(), DeviceId{0});
  }
  std::stable_sort(gpus.begin(), gpus.end(), [&](DeviceId a, DeviceId b) {
    if (c.device(a).peak_flops != c.device(b).peak_flops) return c.device(a).peak_flops > c.device(b).peak_flops;
    return memory_limit_bytes(c, a, options) > memory_limit_bytes(c, b, options);
  });
  return gpus;
}

// ---- Recurrent models ---------------------------------------------------------------------------

// The recurrent layers: the smallest modules whose subtree holds Sigmoid and Tanh ops and is called
// more than once. In execution order. Empty when the graph is not recurrent.
std::vector<ModuleId> recurrent_layers(const Graph& g, std::span<const std::uint32_t> rank) {
  const std::size_t nf = g.num_forward_ops(), nm = g.num_modules();
  if (nm == 0) return {};
  std::uint32_t max_call = 0;
  for (OpId o = 0; o < nf; ++o) max_call = std::max(max_call, g.op_call(o));
  if (max_call == 0) return {};  // calls count from 0: a module run twice has call 1
  std::vector<std::uint8_t> sigmoid(nm, 0), tanh(nm, 0), repeated(nm, 0), candidate(nm, 0), has_candidate_child(nm, 0);
  std::vector<std::uint32_t> first(nm, kNone);
  for (OpId o = 0; o < nf; ++o) {
    const ModuleId m = g.op_module(o);
    sigmoid[m] |= g.op_type(o) == "Sigmoid";
    tanh[m] |= g.op_type(o) == "Tanh";
    repeated[m] |= g.op_call(o) > 0;
    first[m] = std::min(first[m], rank[o]);
  }
  for (ModuleId m = static_cast<ModuleId>(nm); m-- > 1;) {
    const ModuleId parent = g.module_parent(m);
    sigmoid[parent] |= sigmoid[m], tanh[parent] |= tanh[m], repeated[parent] |= repeated[m];
    first[parent] = std::min(first[parent], first[m]);
  }
  for (ModuleId m = 1; m < nm; ++m) candidate[m] = sigmoid[m] && tanh[m] && repeated[m];
  for (ModuleId m = 1; m < nm; ++m)
    if (candidate[m]) has_candidate_child[g.module_parent(m)] = 1;
  std::vector<ModuleId> layers;
  for (ModuleId m = 1; m < nm; ++m)
    if (candidate[m] && !has_candidate_child[m]) layers.push_back(m);
  std::sort(layers.begin(), layers.end(), [&](ModuleId a, ModuleId b) { return first[a] < first[b]; });
  return layers;
}

bool is_embedding(const Graph& g, OpId o) {
  if (g.op_type(o) != "Gather" || g.op_inputs(o).empty()) return false;
  const TensorId table = g.op_inputs(o)[0];
  return table != kNoId && g.producer(table) == kNoId && g.tensor_kind(table) == TensorKind::parameter;
}

// ---- Layered models -----------------------------------------------------------------------------

struct Unit {
  bool module;
  std::uint32_t id;
  std::uint32_t first_rank;
};

// Splits `weights` (in order) into `parts` consecutive runs minimising the heaviest run; returns
// the index where each run starts (first is 0).
std::vector<std::size_t> linear_partition(const std::vector<double>& weights, std::size_t parts) {
  const std::size_t n = weights.size();
  parts = std::max<std::size_t>(1, std::min(parts, n));
  std::vector<double> prefix(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  if (n * n * parts > 20'000'000) {
    // Too many units for the exact dynamic programme: bisect on the heaviest run and cut greedily,
    // still giving every part at least one unit.
    auto cuts_for = [&](double limit) {
      std::vector<std::size_t> starts{0};
      double run = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const bool must = n - i == parts - starts.size() && i > 0;
        if (i > 0 && starts.size() < parts && (must || run + weights[i] > limit)) starts.push_back(i), run = 0.0;
        run += weights[i];
      }
      return starts;
    };
    auto heaviest = [&](const std::vector<std::size_t>& starts) {
      double worst = 0.0;
      for (std::size_t k = 0; k < starts.size(); ++k)
        worst = std::max(worst, prefix[k + 1 < starts.size() ? starts[k + 1] : n] - prefix[starts[k]]);
      return worst;
    };
    double lo = *std::max_element(weights.begin(), weights.end()), hi = prefix[n];
    for (int iter = 0; iter < 60; ++iter) {
      const double mid = 0.5 * (lo + hi);
      (heaviest(cuts_for(mid)) <= mid ? hi : lo) = mid;
    }
    return cuts_for(hi);
  }
  const double inf = std::numeric_limits<double>::infinity();
  // cost[k][i]: best heaviest run splitting the first i units into k runs.
  std::vector<std::vector<double>> cost(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> cut(parts + 1, std::vector<std::size_t>(n + 1, 0));
  cost[0][0] = 0.0;
  for (std::size_t k = 1; k <= parts; ++k)
    for (std::size_t i = k; i <= n; ++i)
      for (std::size_t j = k - 1; j < i; ++j) {
        const double c = std::max(cost[k - 1][j], prefix[i] - prefix[j]);
        if (c < cost[k][i]) cost[k][i] = c, cut[k][i] = j;
      }
  std::vector<std::size_t> starts(parts);
  std::size_t i = n;
  for (std::size_t k = parts; k >= 1; --k) {
    starts[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return starts;
}

class ExpertPlacer final : public Placer {
 public:
  explicit ExpertPlacer(const PlacerOptions& o) : embedding_(o.get("embedding", "first-layer")), head_(o.get("head", "last-layer")) {
    if (embedding_ != "first-layer" && embedding_ != "cpu") throw Error("option 'embedding' must be 'first-layer' or 'cpu'");
    if (head_ != "last-layer" && head_ != "next-gpu" && head_ != "cpu") throw Error("option 'head' must be 'last-layer', 'next-gpu' or 'cpu'");
  }

  PlacementResult place(const Problem& p, const Budget&, Observer& observer, std::uint64_t) override {
    const std::vector<std::uint32_t> rank = execution_ranks(p.graph);  // parameter aliases where they are read
    const std::vector<ModuleId> layers = recurrent_layers(p.graph, rank);
    if (!layers.empty()) {
      PlacementResult r = place_recurrent(p, layers, rank);
      if (r.sim.fits) return r;
      // One layer per GPU overflows: split consecutive layers as for other models, if that fits.
      PlacementResult split = place_layered(p, rank, observer);
      if (split.sim.fits) {
        split.note = "one recurrent layer per GPU does not fit the memory limits; consecutive layers split instead";
        return split;
      }
      // Neither fits: the recurrent placement, counting the splits simulated too (it said 1 sample).
      r.samples += split.samples;
      r.note += "; no split of consecutive layers over the GPUs fits either";
      return r;
    }
    return place_layered(p, rank, observer);
  }

 private:
  DeviceId cpu_or(const Cluster& c, DeviceId fallback) const {
    const std::vector<DeviceId> cpus = c.device_ids(DeviceKind::cpu);
    return cpus.empty() ? fallback : cpus.front();
  }

  PlacementResult place_recurrent(const Problem& p, const std::vector<ModuleId>& layers, std::span<const std::uint32_t> rank) {
    const Graph& g = p.graph;
    const std::size_t nf = g.num_forward_ops();
    const std::vector<DeviceId> gpus = expert_gpus(p.cluster, p.sim);
    std::vector<DeviceId> layer_device(g.num_modules(), kNone);
    for (std::size_t i = 0; i < layers.size(); ++i) layer_device[layers[i]] = gpus[i % gpus.size()];
    std::vector<DeviceId> dev(nf, kNone);
    for (OpId o = 0; o < nf; ++o)
      for (ModuleId m = g.op_module(o);; m = g.module_parent(m)) {
        if (layer_device[m] != kNone) {
          dev[o] = layer_device[m];
          break;
        }
        if (m == 0) break;
      }
    // Ops outside the layers: with the earliest layer op they feed (reverse topological sweep).
    const std::vector<OpId> order(g.topological_order().begin(), g.topological_order().end());
    std::vector<std::uint8_t> in_layer(nf, 0);
    for (OpId o = 0; o < nf; ++o) in_layer[o] = dev[o] != kNone;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const OpId o = *it;
      if (o >= nf || in_layer[o]) continue;
      OpId best = kNone;
      for (OpId s : g.successors(o))
        if (s < nf && dev[s] != kNone && (best == kNone || rank[s] < rank[best])) best = s;
      if (best != kNone) dev[o] = dev[best];
    }
    const DeviceId last_layer = layer_device[layers.back()];
    DeviceId head = last_layer;
    // The GPU after the last layer's; when every GPU holds a layer there is none (taking the
    // first again put the head beside the first layer), and the head stays with the last layer.
    const bool no_next_gpu = head_ == "next-gpu" && layers.size() >= gpus.size();
    if (head_ == "next-gpu" && !no_next_gpu) head = gpus[layers.size()];
    if (head_ == "cpu") head = cpu_or(p.cluster, last_layer);
    for (OpId o = 0; o < nf; ++o) {
      if (embedding_ == "cpu" && is_embedding(g, o)) dev[o] = cpu_or(p.cluster, dev[o] == kNone ? head : dev[o]);
      if (dev[o] == kNone) dev[o] = head;
    }
    // Parameter aliases (edge-less) sit with the op that reads the alias.
    for (OpId o = 0; o < nf; ++o) {
      const std::string alias = g.op_attrs(o).get_string("alias", "");
      if (alias.empty()) continue;
      const TensorId t = g.find_tensor(alias);
      if (t != kNoId && g.param_home(t) != kNoId && g.param_home(t) < nf) dev[o] = dev[g.param_home(t)];
    }
    PlacementResult r = finish(p, std::move(dev), 1);
    if (no_next_gpu)
      r.note = "head=next-gpu: each of the " + std::to_string(gpus.size()) + " GPUs holds a recurrent layer, so the head stays with the last one";
    // Asked for a CPU the cluster does not have: said, not silently ignored.
    if (p.cluster.device_ids(DeviceKind::cpu).empty())
      for (const auto& [option, value] : {std::pair{"embedding", &embedding_}, std::pair{"head", &head_}})
        if (*value == "cpu")
          r.note += (r.note.empty() ? "" : "; ") + std::string(option) + "=cpu: the cluster has no CPU, so the " + option + " stays with " +
                    (std::string_view(option) == "head" ? "the last layer" : "the first layer it feeds");
    if (!r.sim.fits) r.note += (r.note.empty() ? "" : "; ") + std::string("one recurrent layer per GPU does not fit the memory limits");
    return r;
  }

  // When no split over the GPUs fits, the one closest to fitting (the least memory over, summed
  // over the devices), marked as not fitting, with a note saying so.
  PlacementResult place_layered(const Problem& p, std::span<const std::uint32_t> rank, Observer& observer) {
    const Graph& g = p.graph;
    const std::size_t nf = g.num_forward_ops(), nm = std::max<std::size_t>(g.num_modules(), 1);
    const std::vector<DeviceId> gpus = expert_gpus(p.cluster, p.sim);
    const std::size_t nd = p.cluster.num_devices();
    const std::vector<double> family = family_times(p);
    const FamilyMemory mem = family_memory(p);
    const bool training = nf != g.num_ops();

    // Compute (on the fastest GPU) and memory (static + saved activations + parameter gradients)
    // per module subtree.
    std::vector<std::vector<ModuleId>> children(nm);
    std::vector<std::vector<OpId>> direct(nm);
    std::vector<double> op_time(nf), op_mem(nf), mod_time(nm, 0.0), mod_mem(nm, 0.0);
    std::vector<std::uint32_t> first(nm, kNone);
    for (OpId o = 0; o < nf; ++o) {
      op_time[o] = family[std::size_t{o} * nd + gpus.front()];
      double activations = 0;
      if (training)
        for (TensorId t : g.op_outputs(o)) activations += static_cast<double>(g.tensor_bytes(t));
      op_mem[o] = static_cast<double>(mem.static_bytes[o]) + activations + static_cast<double>(mem.partial_gradient_bytes[o]);
      const ModuleId m = g.op_module(o);
      direct[m].push_back(o);
      mod_time[m] += op_time[o], mod_mem[m] += op_mem[o];
      first[m] = std::min(first[m], rank[o]);
    }
    for (ModuleId m = static_cast<ModuleId>(g.num_modules()); m-- > 1;) {
      const ModuleId parent = g.module_parent(m);
      children[parent].push_back(m);
      mod_time[parent] += mod_time[m], mod_mem[parent] += mod_mem[m];
      first[parent] = std::min(first[parent], first[m]);
    }
    auto expand = [&](ModuleId m) {
      std::vector<Unit> out;
      for (OpId o : direct[m]) out.push_back({false, o, rank[o]});
      for (ModuleId c : children[m])
        if (first[c] != kNone) out.push_back({true, c, first[c]});
      std::sort(out.begin(), out.end(), [](const Unit& a, const Unit& b) { return a.first_rank < b.first_rank; });
      return out;
    };
    const double total_time = mod_time[0];
    const double grain = total_time / (4.0 * static_cast<double>(gpus.size()));
    std::vector<Unit> units = expand(0);
    for (bool refined = true; refined;) {
      refined = false;
      std::vector<Unit> next;
      for (const Unit& u : units) {
        if (u.module && !children[u.id].empty() && mod_time[u.id] > grain) {
          const std::vector<Unit> parts = expand(u.id);
          next.insert(next.end(), parts.begin(), parts.end());
          refined = true;
        } else {
          next.push_back(u);
        }
      }
      units = std::move(next);
    }
    std::sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.first_rank < b.first_rank; });

    // Unit of every op: the unit whose subtree holds it (a unit is an op or a module subtree).
    std::vector<std::uint32_t> unit_of_module(nm, kNone), unit_of(nf, kNone);
    for (std::uint32_t i = 0; i < units.size(); ++i) {
      if (units[i].module)
        unit_of_module[units[i].id] = i;
      else
        unit_of[units[i].id] = i;
    }
    for (OpId o = 0; o < nf; ++o) {
      if (unit_of[o] != kNone) continue;
      for (ModuleId m = g.op_module(o);; m = g.module_parent(m)) {
        if (unit_of_module[m] != kNone) {
          unit_of[o] = unit_of_module[m];
          break;
        }
        if (m == 0) break;
      }
    }
    std::vector<double> unit_time(units.size(), 0.0), unit_mem(units.size(), 0.0);
    for (OpId o = 0; o < nf; ++o) unit_time[unit_of[o]] += op_time[o], unit_mem[unit_of[o]] += op_mem[o];

    Evaluator eval(p);
    std::vector<DeviceId> dev(nf), closest;
    double closest_over = 0.0;
    std::string closest_overflow;
    // The GPUs tried: each alone in turn (fastest first, the largest first among equals) until one
    // holds the model, then the first k = 2, 3, ... of them together, and for each k the k with
    // the most memory when they are others (a fast GPU too small for its share kept every split
    // of the fastest from fitting).
    std::vector<DeviceId> largest = gpus;
    std::stable_sort(largest.begin(), largest.end(), [&](DeviceId a, DeviceId b) {
      return memory_limit_bytes(p.cluster, a, p.sim) > memory_limit_bytes(p.cluster, b, p.sim);
    });
    std::vector<std::vector<DeviceId>> tries;
    for (DeviceId d : gpus) tries.push_back({d});
    for (std::size_t k = 2; k <= gpus.size(); ++k) {
      const auto first = [k](const std::vector<DeviceId>& order) {
        return std::vector<DeviceId>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
      };
      std::vector<DeviceId> fastest = first(gpus), most_memory = first(largest);
      tries.push_back(fastest);
      std::sort(fastest.begin(), fastest.end()), std::sort(most_memory.begin(), most_memory.end());
      if (fastest != most_memory) tries.push_back(first(largest));
    }
    std::uint64_t failed_alone = 0;  // the most memory of a GPU that did not hold it alone
    for (std::size_t t = 0; t < tries.size() && !observer.stop_requested(); ++t) {
      const std::vector<DeviceId>& on = tries[t];
      const std::size_t k = on.size();
      // Alone, a GPU holds the model exactly when its memory does: none with less than one that
      // did not is simulated (k80x8's eight equal GPUs took eight simulations before a split).
      if (k == 1) {
        const std::uint64_t limit = memory_limit_bytes(p.cluster, on[0], p.sim);
        if (t > 0 && limit <= failed_alone) continue;
        failed_alone = std::max(failed_alone, limit);
      }
      for (const std::vector<double>* weights : {&unit_time, &unit_mem}) {
        const std::vector<std::size_t> starts = linear_partition(*weights, k);
        std::vector<DeviceId> unit_device(units.size());
        for (std::size_t part = 0; part < starts.size(); ++part) {
          const std::size_t end = part + 1 < starts.size() ? starts[part + 1] : units.size();
          for (std::size_t u = starts[part]; u < end; ++u) unit_device[u] = on[part];
        }
        for (OpId o = 0; o < nf; ++o) dev[o] = unit_device[unit_of[o]];
        const SimResult& r = eval.evaluate(dev);
        observer.on_progress({.samples = eval.evaluations(), .best_step_time_s = r.fits ? r.step_time_s : 0.0});
        if (r.fits) return finish(p, dev, eval.evaluations());
        double over = 0.0;
        for (const auto& [d, bytes] : r.shortfalls) over += static_cast<double>(bytes);
        if ((closest.empty() || over < closest_over) && !r.shortfalls.empty()) {
          closest = dev, closest_over = over;
          closest_overflow = p.cluster.device(r.shortfalls.front().first).name + " over by " +
                             human_bytes(static_cast<double>(r.shortfalls.front().second)) + (r.shortfalls.size() > 1 ? ", ..." : "");
        }
        if (k == 1) break;  // one GPU: both splits are the same
      }
    }
    if (closest.empty()) return finish(p, std::vector<DeviceId>(nf, gpus.front()), eval.evaluations(), "stopped before any split was tried");
    const std::string over = std::to_string(gpus.size()) + " " + (p.cluster.device(gpus.front()).kind == DeviceKind::gpu ? "GPU(s)" : "device(s)");
    return finish(p, std::move(closest), eval.evaluations(),
                  (observer.stop_requested() ? "stopped before every split was tried; none of those tried over the " + over + " fits"
                                             : "no split of its layers over the " + over + " fits the memory limits") +
                      ": the one closest to fitting is shown (" + closest_overflow + ")");
  }

  std::string embedding_, head_;
};

}  // namespace

void register_expert(std::vector<PlacerInfo>& r) {
  r.push_back({"expert", "baseline",
               "the papers' human expert: one LSTM layer per GPU for recurrent models; otherwise one GPU, then consecutive layers "
               "split evenly by compute over as few GPUs as fit",
               {{"embedding", "first-layer", "recurrent models: embedding lookups with the first layer they feed ('first-layer') or on the CPU ('cpu')"},
                {"head", "last-layer",
                 "recurrent models: output projection, softmax and loss with the last layer ('last-layer'), on the GPU after it "
                 "('next-gpu') or on the CPU ('cpu')"}},
               [](const PlacerOptions& o) { return std::make_unique<ExpertPlacer>(o); }});
}

}  // namespace placer
