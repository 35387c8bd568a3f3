#include "placer/algorithms/placer.hpp"

#include <charconv>

#include <algorithm>
#include <cmath>

#include "placer/sim/placement.hpp"
#include "placer/util/error.hpp"

namespace placer {

std::string PlacerOptions::get(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

// Numbers are read whole with std::from_chars: no leading space or '+', no hex ("0x10"), no
// trailing text; nan and inf are refused too (they get past every range check: "x < 1" is false
// for nan).
double PlacerOptions::get_double(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size() && !text.empty() && std::isfinite(v)) return v;
  throw Error("option '" + key + "' expects a finite number, got '" + text + "'");
}

std::int64_t PlacerOptions::get_int(const std::string& key, std::int64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) return v;
  throw Error("option '" + key + "' expects an integer, got '" + text + "'");
}

bool PlacerOptions::get_flag(const std::string& key, bool fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  if (it->second != "0" && it->second != "1") throw Error("option '" + key + "' expects 0 or 1, got '" + it->second + "'");
  return it->second == "1";
}

std::string PlacerOptions::get_one_of(const std::string& key, const std::string& fallback,
                                      std::initializer_list<std::string_view> allowed) const {
  const std::string value = get(key, fallback);
  std::string names;
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    const std::string_view a = allowed.begin()[i];
    if (value == a) return value;
    names += (i == 0 ? "'" : i + 1 == allowed.size() ? " or '" : ", '") + std::string(a) + "'";
  }
  throw Error("option '" + key + "' must be " + names + ", got '" + value + "'");
}

const PlacerInfo& find_placer(const std::string& name) {
  for (const auto& info : placer_registry())
    if (info.name == name) return info;
  std::string known;
  for (const auto& info : placer_registry()) known += (known.empty() ? "" : ", ") + info.name;
  throw Error("unknown placement algorithm '" + name + "' (known: " + known + ")");
}

std::unique_ptr<Placer> make_placer(const std::string& name, const PlacerOptions& options) {
  const PlacerInfo& info = find_placer(name);
  for (const auto& [key, value] : options.all()) {
    bool known = false;
    for (const auto& doc : info.options) known = known || doc.key == key;
    if (!known) {
      std::string keys;
      for (const auto& doc : info.options) keys += (keys.empty() ? "" : ", ") + doc.key;
      throw Error("algorithm '" + name + "' has no option '" + key + "' (options: " + (keys.empty() ? "none" : keys) + ")");
    }
  }
  return info.make(options);
}

Evaluator::Evaluator(const Problem& problem) : problem_(problem), sim_(problem.graph, problem.cluster, problem.costs, problem.sim) {}

const SimResult& Evaluator::evaluate(std::span<const DeviceId> forward_devices) {
  expand_placement(problem_.graph, forward_devices, all_);
  ++evaluations_;
  return sim_.simulate(all_);
}

PlacementResult finish(const Problem& problem, std::vector<DeviceId> forward_devices, std::size_t samples, std::string note) {
  Evaluator eval(problem);
  PlacementResult r;
  r.sim = eval.evaluate(forward_devices);
  r.forward_devices = std::move(forward_devices);
  r.samples = std::max<std::size_t>(samples, 1);  // a result was simulated, here if nowhere else
  r.note = std::move(note);
  return r;
}

namespace {

// The forward op each op of the step is placed with.
std::vector<OpId> anchors(const Graph& g) {
  const std::size_t nf = g.num_forward_ops();
  std::vector<OpId> anchor(g.num_ops());
  for (OpId o = 0; o < g.num_ops(); ++o) {
    if (o < nf) {
      anchor[o] = o;
      continue;
    }
    OpId a = g.forward_op(o);
    if (a == kNoId && g.updated_param(o) != kNoId) a = g.param_home(g.updated_param(o));
    anchor[o] = a == kNoId || a >= nf ? 0 : a;
  }
  return anchor;
}

}  // namespace

std::vector<double> family_times(const Problem& problem) {
  const Graph& g = problem.graph;
  const std::size_t nd = problem.cluster.num_devices();
  std::vector<double> t(g.num_forward_ops() * nd, 0.0);
  if (g.num_forward_ops() == 0) return t;
  const std::vector<OpId> anchor = anchors(g);
  for (OpId o = 0; o < g.num_ops(); ++o)
    for (DeviceId d = 0; d < nd; ++d) t[std::size_t{anchor[o]} * nd + d] += problem.costs.time_s(o, d);
  return t;
}

FamilyMemory family_memory(const Problem& problem) {
  const Graph& g = problem.graph;
  FamilyMemory m;
  m.static_bytes.assign(g.num_forward_ops(), 0);
  m.activation_bytes.assign(g.num_forward_ops(), 0);
  m.partial_gradient_bytes.assign(g.num_forward_ops(), 0);
  if (g.num_forward_ops() == 0) return m;
  const std::vector<OpId> anchor = anchors(g);
  const bool training = g.num_forward_ops() != g.num_ops();
  if (training)
    // The partial gradients that update ops read (the parameter, then its partials), each charged
    // to the forward op whose gradient wrote it; one passed through (a view) takes no memory, one
    // summed as it arrives (all but the first) none that lasts.
    for (OpId u = static_cast<OpId>(g.num_forward_ops()); u < g.num_ops(); ++u) {
      if (g.op_role(u) != OpRole::update) continue;
      const auto ins = g.op_inputs(u);
      for (std::size_t i = 1; i < ins.size(); ++i) {
        const OpId b = ins[i] == kNoId ? kNoId : g.producer(ins[i]);
        if (b == kNoId || g.tensor_is_view(ins[i]) || g.tensor_accumulated(ins[i])) continue;
        if (const OpId o = g.forward_op(b); o != kNoId && o < g.num_forward_ops()) m.partial_gradient_bytes[o] += g.tensor_bytes(ins[i]);
      }
    }
  std::vector<TensorId> charged_for(g.num_ops(), kNoId);  // per family anchor, the last set-up value charged to it
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    if (g.tensor_folded(t)) {
      // A set-up value is in the memory of every device that reads it: charged to each reading
      // family (once per family; families on one device share it in the simulator).
      for (OpId c : g.consumers(t))
        if (!g.op_folded(c) && charged_for[anchor[c]] != t) charged_for[anchor[c]] = t, m.static_bytes[anchor[c]] += g.tensor_bytes(t);
      continue;
    }
    if (g.producer(t) == kNoId) {
      const OpId home = g.param_home(t);
      if (home == kNoId) continue;
      std::uint64_t bytes = g.tensor_bytes(t);
      bytes += g.optimizer_state_bytes(t);
      m.static_bytes[anchor[home]] += bytes;
    } else if (!g.tensor_is_view(t) && !g.tensor_accumulated(t)) {
      // A view takes no memory of its own, a partial gradient summed as it arrives none that lasts
      // (as in the simulator).
      m.activation_bytes[anchor[g.producer(t)]] += g.tensor_bytes(t);
    }
  }
  return m;
}

std::vector<std::uint64_t> memory_limits(const Problem& problem) {
  std::vector<std::uint64_t> limits(problem.cluster.num_devices());
  for (DeviceId d = 0; d < limits.size(); ++d) limits[d] = memory_limit_bytes(problem.cluster, d, problem.sim);
  return limits;
}

}  // namespace placer
