// Import speed: what every placer command pays before it does anything else. Measures ONNX import
// and training-step derivation for the largest shared models, graph-JSON load of NASNet-A large's
// training step, and, for a generated graph of one million ops, its build, its training step and
// its graph-JSON save and load. Figures and the command that produced them: docs/performance.md.
//
//   build/release/bench_import                                  # everything
//   build/release/bench_import --benchmark_filter=Onnx          # ONNX import only
//
// Shared models are read from ../shared/models (PLACER_MODELS=dir overrides); a benchmark whose
// model is missing reports an error and the others still run.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "placer/graph/graph.hpp"
#include "placer/graph/training.hpp"
#include "placer/io/graph_json.hpp"
#include "placer/io/onnx.hpp"

namespace {

using namespace placer;

std::string shared_model(const std::string& name) {
  const char* env = std::getenv("PLACER_MODELS");
  return std::string(env ? env : PLACER_SHARED_MODELS) + "/" + name + ".onnx";
}

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("placer_bench_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Files written by the benchmarks, removed when the program ends.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    std::error_code ignored;
    for (const auto& p : paths) std::filesystem::remove(p, ignored);
  }
};
TempFiles& temp_files() {
  static TempFiles files;
  return files;
}

// Reports the graph's op count, and ops processed per second, next to the time.
void count_ops(benchmark::State& state, std::size_t ops) {
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ops_per_s"] = benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate);
}

// Times `make` (which returns a Graph) once per iteration; freeing the graph is left out of the time.
template <typename Make>
void time_graph(benchmark::State& state, Make make) {
  std::size_t ops = 0;
  for (auto _ : state) {
    Graph g = make();
    state.PauseTiming();
    ops = g.num_ops();
    { Graph freed = std::move(g); }
    state.ResumeTiming();
  }
  count_ops(state, ops);
}

bool have_model(benchmark::State& state, const std::string& path) {
  if (std::filesystem::exists(path)) return true;
  state.SkipWithError(("model not found: " + path).c_str());
  return false;
}

// ---- shared models --------------------------------------------------------------------------------

void BM_OnnxImport(benchmark::State& state, const std::string& model) {
  const std::string path = shared_model(model);
  if (!have_model(state, path)) return;
  time_graph(state, [&] { return load_onnx(path, {}); });
}

void BM_TrainingStep(benchmark::State& state, const std::string& model) {
  const std::string path = shared_model(model);
  if (!have_model(state, path)) return;
  const Graph forward = load_onnx(path, {});
  time_graph(state, [&] { return derive_training_step(forward, Optimizer::adam); });
}

#define PLACER_MODEL_BENCHMARKS(fn)                                                               \
  BENCHMARK_CAPTURE(fn, nasnet_large, std::string("nasnet_large"))->Unit(benchmark::kMillisecond); \
  BENCHMARK_CAPTURE(fn, nmt4, std::string("nmt4"))->Unit(benchmark::kMillisecond);                 \
  BENCHMARK_CAPTURE(fn, gpt2, std::string("gpt2"))->Unit(benchmark::kMillisecond);                 \
  BENCHMARK_CAPTURE(fn, inception_v3, std::string("inception_v3"))->Unit(benchmark::kMillisecond)

PLACER_MODEL_BENCHMARKS(BM_OnnxImport);
PLACER_MODEL_BENCHMARKS(BM_TrainingStep);

// Graph-JSON load of NASNet-A large's training step (Adam): the step is derived and saved once,
// by the first run of the fixture, to a temporary file.
class NasnetStepJson : public benchmark::Fixture {
 public:
  using benchmark::Fixture::SetUp;
  void SetUp(benchmark::State& state) override {
    static const std::string saved = [] {
      const std::string model = shared_model("nasnet_large");
      if (!std::filesystem::exists(model)) return std::string();
      std::string path = temp_file("nasnet_large_step.graph.json");
      save_graph_json(derive_training_step(load_onnx(model, {}), Optimizer::adam), path);
      temp_files().paths.push_back(path);
      return path;
    }();
    path_ = saved;
    if (path_.empty()) state.SkipWithError(("model not found: " + shared_model("nasnet_large")).c_str());
  }

 protected:
  std::string path_;
};

BENCHMARK_DEFINE_F(NasnetStepJson, Load)(benchmark::State& state) {
  if (path_.empty()) return;
  time_graph(state, [&] { return load_graph_json(path_); });
  state.counters["file_bytes"] = static_cast<double>(std::filesystem::file_size(path_));
}
BENCHMARK_REGISTER_F(NasnetStepJson, Load)->Unit(benchmark::kMillisecond);

// ---- a generated graph of a million ops -----------------------------------------------------------

constexpr std::size_t kGeneratedOps = 1'000'000;
constexpr std::uint64_t kGeneratedSeed = 42;

// A layered random DAG, the same for the same seed: `kChains` parallel chains read one data input
// x[32, 512]; at each layer every chain appends one op to its current tensor: a MatMul with a
// weight of its own [512, 512] (40%), an Add of a skip connection to a tensor of one of the last 16
// layers of this or a neighbouring chain (30%), or a Relu (30%). The first layer is all MatMuls.
// Every op is priced by the ONNX cost rules, as an import would. Module of an op: "chains.<c>".
Graph generated_graph(std::size_t num_ops, std::uint64_t seed) {
  constexpr std::size_t kChains = 64, kHistory = 16;
  constexpr std::int64_t kBatch = 32, kWidth = 512;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<std::size_t> pick_history(0, kHistory - 1);
  std::uniform_int_distribution<std::size_t> pick_neighbour(0, 2);  // chain c-1, c or c+1

  GraphBuilder b("generated-" + std::to_string(num_ops));
  const TensorId x = b.add_tensor("x", {kBatch, kWidth}, DType::f32, TensorKind::data);
  // history[c][layer % kHistory]: the tensor chain c held after `layer`.
  std::vector<std::vector<TensorId>> history(kChains, std::vector<TensorId>(kHistory, x));
  std::vector<TensorId> current(kChains, x);
  const std::vector<std::int64_t> act_shape{kBatch, kWidth};
  const TensorDesc act{act_shape, DType::f32, true};
  const std::vector<std::int64_t> weight_shape{kWidth, kWidth};
  const TensorDesc weight{weight_shape, DType::f32, true};

  std::size_t ops = 0;
  for (std::size_t layer = 0; ops < num_ops; ++layer) {
    for (std::size_t c = 0; c < kChains && ops < num_ops; ++c, ++ops) {
      const std::string prefix = "/chains." + std::to_string(c) + "/";
      const std::string suffix = "_" + std::to_string(layer);
      const double r = layer == 0 ? 0.0 : coin(rng);
      OpSpec spec;
      spec.module = "chains." + std::to_string(c);
      TensorId out = b.add_tensor("t" + std::to_string(ops), act_shape, DType::f32, TensorKind::activation);
      spec.outputs = {out};
      if (r < 0.4) {
        TensorId w = b.add_tensor("chains." + std::to_string(c) + ".w" + std::to_string(layer), weight_shape, DType::f32,
                                  TensorKind::parameter);
        spec.name = prefix + "MatMul" + suffix, spec.type = "MatMul", spec.inputs = {current[c], w};
        const TensorDesc ins[] = {act, weight};
        spec.work = op_work("MatMul", {}, ins, {&act, 1});
      } else if (r < 0.7) {
        // Layers before this one only (the ring holds the last kHistory of them): the graph stays acyclic.
        const std::size_t back = std::min<std::size_t>(pick_history(rng), layer - 1);
        const std::size_t from = (c + kChains - 1 + pick_neighbour(rng)) % kChains;
        const TensorId skip = history[from][(layer - 1 - back) % kHistory];
        spec.name = prefix + "Add" + suffix, spec.type = "Add", spec.inputs = {current[c], skip};
        const TensorDesc ins[] = {act, act};
        spec.work = op_work("Add", {}, ins, {&act, 1});
      } else {
        spec.name = prefix + "Relu" + suffix, spec.type = "Relu", spec.inputs = {current[c]};
        spec.work = op_work("Relu", {}, {&act, 1}, {&act, 1});
      }
      b.add_op(std::move(spec));
      current[c] = out;
    }
    for (std::size_t c = 0; c < kChains; ++c) history[c][layer % kHistory] = current[c];
  }
  for (TensorId t : current) b.mark_output(t);
  return std::move(b).build();
}

const Graph& million_op_graph() {
  static const Graph g = generated_graph(kGeneratedOps, kGeneratedSeed);
  return g;
}

// The generated graph saved once as graph JSON.
const std::string& million_op_graph_json() {
  static const std::string path = [] {
    std::string p = temp_file("generated_1m.graph.json");
    save_graph_json(million_op_graph(), p);
    temp_files().paths.push_back(p);
    return p;
  }();
  return path;
}

void BM_Generated_Build(benchmark::State& state) {
  time_graph(state, [] { return generated_graph(kGeneratedOps, kGeneratedSeed); });
}
BENCHMARK(BM_Generated_Build)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Generated_TrainingStep(benchmark::State& state) {
  const Graph& forward = million_op_graph();
  time_graph(state, [&] { return derive_training_step(forward, Optimizer::adam); });
}
BENCHMARK(BM_Generated_TrainingStep)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Generated_JsonSave(benchmark::State& state) {
  const Graph& g = million_op_graph();
  const std::string path = temp_file("generated_1m_save.graph.json");
  temp_files().paths.push_back(path);
  for (auto _ : state) save_graph_json(g, path);
  count_ops(state, g.num_ops());
  state.counters["file_bytes"] = static_cast<double>(std::filesystem::file_size(path));
}
BENCHMARK(BM_Generated_JsonSave)->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_Generated_JsonLoad(benchmark::State& state) {
  const std::string& path = million_op_graph_json();
  time_graph(state, [&] { return load_graph_json(path); });
}
BENCHMARK(BM_Generated_JsonLoad)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
