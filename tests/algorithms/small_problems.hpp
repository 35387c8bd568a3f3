// Hand-drawn problems for the scheduler and search tests: a graph written op by op with exact op
// times (a profile by op name), on n identical GPUs around one switch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "placer/algorithms/placer.hpp"
#include "placer/cost/cost_model.hpp"
#include "placer/graph/training.hpp"

namespace placer::test {

// n GPUs, each linked to one switch: a transfer crosses two hops of `bandwidth` and `latency`.
inline Cluster switch_gpus(int n, std::uint64_t memory_bytes = 1'000'000'000'000, double bandwidth = 1e9, double latency = 1e-6) {
  std::vector<Device> devices;
  std::vector<Link> links;
  for (int i = 0; i < n; ++i) {
    // (Appended, not "gpu:" + std::to_string(i): GCC 12 warns of an overlap that cannot happen.)
    const std::string index = std::to_string(i), name = std::string("gpu:").append(index);
    devices.push_back(Device{.name = name, .kind = DeviceKind::gpu, .model = "test", .peak_flops = 1e12,
                             .memory_bandwidth_bytes_per_s = 1e12, .memory_bytes = memory_bytes, .op_overhead_s = 0.0, .streams = 1});
    links.push_back(Link{.name = std::string("l").append(index), .a = name, .b = "sw", .bandwidth_ab_bytes_per_s = bandwidth,
                         .bandwidth_ba_bytes_per_s = bandwidth, .latency_s = latency});
  }
  return Cluster::build("test", std::move(devices), {"sw"}, std::move(links));
}

// A graph written op by op; every op gets a fixed time on GPUs through a profile.
struct Sketch {
  GraphBuilder b{"sketch"};
  Profile profile;
  TensorId tensor(const std::string& name, std::int64_t bytes, TensorKind kind = TensorKind::activation) {
    return b.add_tensor(name, {bytes}, DType::u8, kind);
  }
  OpId op(const std::string& name, std::vector<TensorId> in, std::vector<TensorId> out, double seconds) {
    profile.set_by_name(DeviceKind::gpu, name, seconds);
    OpSpec spec{.name = name, .type = "Relu", .inputs = std::move(in), .outputs = std::move(out)};
    spec.work.op_class = OpClass::elementwise;
    return b.add_op(std::move(spec));
  }
};

// The training step (SGD) of four modules in a chain, each a MatMul with a [160,160] parameter
// whose [64,160] output is viewed twice (two Reshapes) before the next module reads it: placers'
// memory estimates count the views as copies and every output as kept for the backward pass, so
// they see far more than the simulator keeps.
inline Graph viewed_chain_step() {
  GraphBuilder b("viewed");
  TensorId x = b.add_tensor("x", {64, 160}, DType::f32, TensorKind::data);
  for (int i = 0; i < 4; ++i) {
    const std::string m = std::string("fc").append(std::to_string(i));
    TensorId w = b.add_tensor(m + ".w", {160, 160}, DType::f32, TensorKind::parameter);
    TensorId y = b.add_tensor(m + ".y", {64, 160}, DType::f32, TensorKind::activation);
    OpSpec spec{.name = m + "/MatMul", .type = "MatMul", .inputs = {x, w}, .outputs = {y}, .module = m};
    spec.work = OpWork{.flops = 2.0 * 64 * 160 * 160, .bytes_read = 0, .bytes_written = 0, .op_class = OpClass::matmul};
    b.add_op(std::move(spec));
    for (int v = 0; v < 2; ++v) {
      const std::string index = std::to_string(v);
      TensorId view = b.add_tensor(m + ".v" + index, {64, 160}, DType::f32, TensorKind::activation);
      OpSpec reshape{.name = m + "/Reshape_" + index, .type = "Reshape", .inputs = {y}, .outputs = {view}, .module = m};
      reshape.work.op_class = OpClass::alias;
      b.add_op(std::move(reshape));
      y = view;
    }
    x = y;
  }
  b.mark_output(x);
  return derive_training_step(std::move(b).build(), Optimizer::sgd);
}

// A sketch priced on a cluster: owns what a Problem borrows.
struct Priced {
  Graph graph;
  Cluster cluster;
  CostTable costs;
  Priced(Sketch&& s, Cluster c)
      : graph(std::move(s.b).build()), cluster(std::move(c)), costs(graph, cluster, CostModel::defaults(), &s.profile) {}
  Problem problem() const { return Problem{graph, cluster, costs, {}}; }
};

// Two ops in a chain, a CPU and a GPU: each device's total time is finite (1e308 s and 1e300 s),
// but op0 on the GPU then op1 on the CPU adds up past what a double holds, which the simulator
// refuses with an error (a profile's absurd figures).
inline Priced overflowing_chain() {
  Sketch s;
  const TensorId x = s.tensor("x", 1000, TensorKind::data), a = s.tensor("a", 1000), b = s.tensor("b", 1000);
  s.op("op0", {x}, {a}, 1e308);
  s.op("op1", {a}, {b}, 1e300);
  s.profile.set_by_name(DeviceKind::cpu, "op0", 1e300);
  s.profile.set_by_name(DeviceKind::cpu, "op1", 1e308);
  s.b.mark_output(b);
  auto device = [](std::string name, DeviceKind kind) {
    return Device{.name = std::move(name), .kind = kind, .model = "t", .peak_flops = 1e12, .memory_bandwidth_bytes_per_s = 1e12,
                  .memory_bytes = 1 << 30, .op_overhead_s = 0, .streams = 1};
  };
  return Priced(std::move(s), Cluster::build("t", {device("cpu:0", DeviceKind::cpu), device("gpu:0", DeviceKind::gpu)}, {},
                                             {Link{.a = "cpu:0", .b = "gpu:0", .bandwidth_ab_bytes_per_s = 1e9, .bandwidth_ba_bytes_per_s = 1e9}}));
}

inline PlacementResult run_placer(const std::string& name, const Problem& p, Budget budget = {}, std::uint64_t seed = 1,
                                  std::map<std::string, std::string> options = {}) {
  NullObserver quiet;
  return make_placer(name, PlacerOptions(std::move(options)))->place(p, budget, quiet, seed);
}

// The best placement that fits, by trying every one (devices^forward ops).
struct BruteForce {
  double step_time_s = 0.0;
  std::vector<DeviceId> devices;
};
inline BruteForce brute_force(const Problem& p) {
  const std::size_t nf = p.graph.num_forward_ops(), nd = p.cluster.num_devices();
  Evaluator eval(p);
  std::vector<DeviceId> fwd(nf, 0);
  BruteForce best{.step_time_s = -1.0};
  for (;;) {
    const SimResult& r = eval.evaluate(fwd);
    if (r.fits && (best.step_time_s < 0 || r.step_time_s < best.step_time_s)) best = {r.step_time_s, fwd};
    std::size_t i = 0;
    while (i < nf && ++fwd[i] == nd) fwd[i++] = 0;
    if (i == nf) break;
  }
  return best;
}

}  // namespace placer::test
