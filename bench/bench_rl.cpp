// The learned placers' policy on one core, as train() runs it (single_threaded_math: one torch and
// BLAS thread): sampling K placements (step-by-step decoding with attention, no gradient) and one
// learning pass (sample, teacher-forced log-probabilities, backward), for seq2seq placers of the
// sizes ColocRL and HDP use (groups x hidden x attention, 5 devices, K; ColocRL on Inception-V3 has
// 16 co-location groups, HDP on k80x4 100 groups), and the additive attention alone.
// Figures: docs/learned-placers.md#speed.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <random>

#include "placer/rl/policy.hpp"
#include "placer/rl/trainer.hpp"

namespace {

using namespace placer::rl;

struct Setup {
  Seq2SeqPlacer net{nullptr};
  FeatureTensors x;
  Setup(std::int64_t groups, std::int64_t hidden, std::int64_t attention) {
    single_threaded_math();
    torch::manual_seed(1);
    Seq2SeqOptions o;
    o.types = 30;
    o.numeric = 18;
    o.devices = 5;
    o.hidden = hidden;
    o.attention = attention;
    net = Seq2SeqPlacer(o);
    x.types = torch::rand({groups, 30});
    x.numeric = torch::randn({groups, 18});
  }
};

// Args: groups, hidden, attention, K.
void BM_Sample(benchmark::State& state) {
  Setup s(state.range(0), state.range(1), state.range(2));
  std::mt19937_64 rng(1);
  for (auto _ : state) {
    torch::NoGradGuard no_grad;
    const Encoded e = s.net->encode(s.x);
    benchmark::DoNotOptimize(s.net->sample(e, state.range(3), rng));
  }
  state.counters["placements/s"] = benchmark::Counter(static_cast<double>(state.iterations() * state.range(3)), benchmark::Counter::kIsRate);
}

void BM_LearnStep(benchmark::State& state) {
  Setup s(state.range(0), state.range(1), state.range(2));
  std::mt19937_64 rng(1);
  const std::int64_t k = state.range(3);
  for (auto _ : state) {
    const Encoded e = s.net->encode(s.x);
    const torch::Tensor actions = s.net->sample(e, k, rng);
    const LogProbs lp = s.net->log_probs(e, actions);
    const torch::Tensor loss = -(torch::randn({k}) * lp.log_prob).mean();
    s.net->zero_grad();
    loss.backward();
  }
  state.counters["placements/s"] = benchmark::Counter(static_cast<double>(state.iterations() * k), benchmark::Counter::kIsRate);
}

void BM_Attention(benchmark::State& state) {
  single_threaded_math();
  const std::int64_t k = state.range(3), g = state.range(0), a = state.range(2);
  const torch::Tensor q = torch::randn({k, g, a}, torch::requires_grad()), keys = torch::randn({g, a}, torch::requires_grad()),
                      v = torch::randn({a}, torch::requires_grad());
  for (auto _ : state) {
    const torch::Tensor s = additive_attention(q, keys, v);
    s.sum().backward();
  }
}

}  // namespace

BENCHMARK(BM_Sample)->Args({16, 256, 64, 8})->Args({100, 256, 64, 4})->Args({256, 256, 64, 8})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LearnStep)
    ->Args({16, 256, 64, 8})
    ->Args({100, 256, 64, 4})
    ->Args({100, 256, 64, 8})
    ->Args({256, 256, 64, 8})
    ->Args({256, 256, 64, 16})
    ->Args({256, 256, 256, 8})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Attention)->Args({256, 256, 64, 8})->Args({256, 256, 256, 8})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
