// Bad input, found by mutation: every JSON file placer reads (graph, cluster, placement, profile),
// mutated at random with a fixed seed, taken through what `placer simulate` does with it (parse,
// resolve the placement, price, simulate, critical path, lower bounds). Each run must end in a
// result or in placer::Error with a message; a crash fails the whole test program, any other
// exception (a library's own, whose message names no file) fails the test. A longer campaign:
// PLACER_MUTATION_RUNS=100000 PLACER_MUTATION_SEED=7 build/release/placer_sim_tests --gtest_filter='InputMutation.*'.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "placer/cluster/cluster.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/training.hpp"
#include "placer/io/graph_json.hpp"
#include "placer/io/onnx.hpp"
#include "placer/sim/placement.hpp"
#include "placer/sim/simulator.hpp"
#include "placer/util/error.hpp"
#include "support/paths.hpp"

namespace placer {
namespace {

using nlohmann::json;

// Every node of a document, with the container that holds it (null for the root).
void collect(json& node, json* parent, std::vector<std::pair<json*, json*>>& out) {
  out.push_back({&node, parent});
  if (node.is_structured())
    for (auto& child : node) collect(child, &node, out);
}

void collect_strings(const json& node, std::vector<std::string>& out) {
  if (node.is_string()) out.push_back(node.get<std::string>());
  if (node.is_structured())
    for (const auto& child : node) collect_strings(child, out);
}

// One structural mutation of `doc`: a value replaced by another type or an extreme, a key or an
// element removed, an element duplicated, two elements swapped, a name replaced by another name of
// the document (a duplicate, a dangling reference, a cycle).
void mutate(json& doc, std::mt19937_64& rng) {
  std::vector<std::pair<json*, json*>> nodes;
  collect(doc, nullptr, nodes);
  std::vector<std::string> strings;
  collect_strings(doc, strings);
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  auto [node, parent] = nodes[pick(nodes.size())];
  const std::vector<json> values = {nullptr, true, false, 0, -1, 1, 3, 0.5, -0.5, 1e308, -1e308,
                                    std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::int64_t>::min(),
                                    9.3e18, "", "gpu:7", "cpu:0", "float99", json::array(), json::object(),
                                    json::array({1, 2}), json::array({-1}), json::array({0})};
  switch (pick(6)) {
    case 0:
      *node = values[pick(values.size())];
      break;
    case 1:
      if (!strings.empty()) *node = strings[pick(strings.size())];
      break;
    case 2:  // remove a key or an element
      if (node->is_object() && !node->empty()) {
        auto it = node->begin();
        std::advance(it, static_cast<std::ptrdiff_t>(pick(node->size())));
        node->erase(it.key());
      } else if (node->is_array() && !node->empty()) {
        node->erase(pick(node->size()));
      }
      break;
    case 3:  // duplicate an element of an array
      if (node->is_array() && !node->empty()) node->push_back(json((*node)[pick(node->size())]));
      else if (parent && parent->is_array()) parent->push_back(json(*node));
      break;
    case 4:  // swap two elements of an array
      if (node->is_array() && node->size() > 1) std::swap((*node)[pick(node->size())], (*node)[pick(node->size())]);
      break;
    default:  // numbers: scale, negate, make non-integral
      if (node->is_number()) {
        const double v = node->get<double>();
        const double choices[] = {-v, v * 1e12, v + 0.5, v * 0.0, std::ldexp(v, 60)};
        *node = choices[pick(5)];
      }
      break;
  }
}

struct Inputs {
  json graph, cluster, placement, profile;
};

// What `placer simulate --placement P --profile F` does with the four documents.
void simulate_all(const Inputs& in) {
  const Graph g = graph_from_json(in.graph, "graph.json");
  const Cluster c = parse_cluster_json(in.cluster, "cluster.json");
  const PlacementSpec spec = parse_placement_json(in.placement, "placement.json");
  const Profile profile = Profile::from_json(in.profile, "profile.json");
  const CostTable costs(g, c, CostModel::defaults(), &profile);
  const std::vector<DeviceId> devices = expand_placement(g, resolve_forward_placement(spec, g, c, "placement.json"));
  Simulator sim(g, c, costs);
  const SimResult& r = sim.simulate(devices);
  EXPECT_FALSE(std::isnan(r.step_time_s));
  (void)sim.critical_path();
  (void)lower_bounds(g, c, costs);
}

TEST(InputMutation, MutatedInputsEndInAResultOrAnErrorNeverACrash) {
  // A small real model: the Inception-V3 bundled in examples/, its training step with momentum.
  const Graph step = derive_training_step(load_onnx(test::example("inception_v3.onnx"), {}), Optimizer::momentum);
  const Cluster k80 = cluster_preset("k80x4");
  Inputs base{graph_to_json(step), cluster_to_json(k80), json::object(), json::object()};
  base.placement = {{"default", "gpu:0"},
                    {"devices", {{step.module_name(step.op_module(10)), "gpu:1"}, {step.op_name(40), "cpu:0"}}}};
  Profile profile;
  for (OpId o = 0; o < step.num_ops(); o += 7) {
    profile.set_by_name(DeviceKind::gpu, step.op_name(o), 1e-4 + 1e-6 * o);
    profile.set_by_signature(DeviceKind::cpu, op_signature(step, o), 2e-3);
  }
  profile.set_model(CostModel::defaults());
  base.profile = profile.to_json();
  simulate_all(base);  // the unmutated inputs simulate

  const long long runs = test::env_or("PLACER_MUTATION_RUNS", 400);
  std::mt19937_64 rng(static_cast<std::uint64_t>(test::env_or("PLACER_MUTATION_SEED", 20261123)));
  long long results = 0, errors = 0;
  for (long long run = 0; run < runs; ++run) {
    Inputs in = base;
    json* docs[] = {&in.graph, &in.cluster, &in.placement, &in.profile};
    json& doc = *docs[run % 4];
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) mutate(doc, rng);
    try {
      simulate_all(in);
      ++results;
    } catch (const Error& e) {
      // One line that says something (README: every error is one line on stderr).
      EXPECT_GT(std::string(e.what()).size(), 10u) << "run " << run;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "run " << run << ": " << e.what();
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "run " << run << ": not a placer::Error: " << e.what();
    }
  }
  // The mutations reach both outcomes (a campaign where every input fails to parse proves little).
  EXPECT_GT(results, runs / 10);
  EXPECT_GT(errors, runs / 10);
  std::printf("%lld runs: %lld results, %lld errors\n", runs, results, errors);
}

}  // namespace
}  // namespace placer
