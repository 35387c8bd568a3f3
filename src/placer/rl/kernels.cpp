#include "placer/rl/kernels.hpp"

#include <algorithm>

// Every kernel body is compiled twice, for AVX2 + FMA and for the baseline, and the first call
// picks one for the CPU (KERNEL, at the end).
#if defined(__x86_64__) && defined(__GNUC__)
#define PLACER_X86 1
#endif

// Lets GCC turn the branch-free clamps into vector selects (nothing here relies on FP traps).
#pragma GCC optimize("no-trapping-math")

namespace placer::rl::kernels {
namespace {

// Eigen's rational approximation of tanh (generic_fast_tanh_float): x P(x^2) / Q(x^2) on the
// clamped input. Branch-free, so that loops over it vectorize.
[[gnu::always_inline]] inline float tanh_approx(float x) {
  constexpr float clamp = 7.90531110763549805f;
  x = x > clamp ? clamp : x;
  x = x < -clamp ? -clamp : x;
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

[[gnu::always_inline]] inline float sigmoid_approx(float x) { return 0.5f + 0.5f * tanh_approx(0.5f * x); }

constexpr std::int64_t kLanes = 16;  // partial sums kept apart so that reductions vectorize

[[gnu::always_inline]] inline void lstm_cell_impl(float* gates, const float* c_prev, float* c, float* tanh_c, float* h_out, std::int64_t b, std::int64_t h) {
  for (std::int64_t r = 0; r < b; ++r) {
    float* __restrict g = gates + r * 4 * h;
    for (std::int64_t j = 0; j < 2 * h; ++j) g[j] = sigmoid_approx(g[j]);  // i, f
    for (std::int64_t j = 2 * h; j < 3 * h; ++j) g[j] = tanh_approx(g[j]);
    for (std::int64_t j = 3 * h; j < 4 * h; ++j) g[j] = sigmoid_approx(g[j]);  // o
    const float* a = g;
    const float* cp = c_prev + r * h;
    float* cn = c + r * h;
    float* tc = tanh_c + r * h;
    float* hn = h_out + r * h;
    for (std::int64_t j = 0; j < h; ++j) cn[j] = a[h + j] * cp[j] + a[j] * a[2 * h + j];
    for (std::int64_t j = 0; j < h; ++j) tc[j] = tanh_approx(cn[j]);
    for (std::int64_t j = 0; j < h; ++j) hn[j] = a[3 * h + j] * tc[j];
  }
}

[[gnu::always_inline]] inline void attention_scores_impl(const float* q, std::int64_t rows, const float* kt, std::int64_t g, std::int64_t a, const float* v, float* s) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * g;
    std::fill(sr, sr + g, 0.0f);
    for (std::int64_t i = 0; i < a; ++i) {
      const float qa = q[r * a + i], va = v[i];
      const float* kr = kt + i * g;
      for (std::int64_t j = 0; j < g; ++j) sr[j] += va * tanh_approx(qa + kr[j]);
    }
  }
}

[[gnu::always_inline]] inline void attention_backward_impl(const float* q, std::int64_t rows, const float* kt, std::int64_t g, std::int64_t a, const float* v, const float* ds,
                        float* dq, float* dkt, float* dv, float* scratch) {
  // scratch[i, j] accumulates ds * tanh over the rows; dv is its sum over j at the end.
  std::fill(scratch, scratch + a * g, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* dr = ds + r * g;
    for (std::int64_t i = 0; i < a; ++i) {
      const float qa = q[r * a + i], va = v[i];
      const float* kr = kt + i * g;
      float* dk = dkt + i * g;
      float* sv = scratch + i * g;
      float lanes[kLanes] = {};
      std::int64_t j = 0;
      for (; j + kLanes <= g; j += kLanes)
        for (std::int64_t l = 0; l < kLanes; ++l) {
          const float t = tanh_approx(qa + kr[j + l]);
          const float dsj = dr[j + l];
          sv[j + l] += dsj * t;
          const float d = dsj * va * (1.0f - t * t);
          lanes[l] += d;
          dk[j + l] += d;
        }
      float total = 0.0f;
      for (; j < g; ++j) {
        const float t = tanh_approx(qa + kr[j]);
        sv[j] += dr[j] * t;
        const float d = dr[j] * va * (1.0f - t * t);
        total += d;
        dk[j] += d;
      }
      for (std::int64_t l = 0; l < kLanes; ++l) total += lanes[l];
      dq[r * a + i] = total;
    }
  }
  for (std::int64_t i = 0; i < a; ++i) {
    float total = 0.0f;
    for (std::int64_t j = 0; j < g; ++j) total += scratch[i * g + j];
    dv[i] += total;
  }
}

}  // namespace

float fast_tanh(float x) { return tanh_approx(x); }

// KERNEL(name, (parameters), (arguments)): name_avx2, the body compiled for AVX2 + FMA, and name,
// which calls it where the CPU has both and the baseline body otherwise.
#ifdef PLACER_X86
#define KERNEL(name, params, args)                                                             \
  __attribute__((target("avx2,fma"))) static void name##_avx2 params { name##_impl args; }      \
  void name params {                                                                            \
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); \
    if (avx2)                                                                                   \
      name##_avx2 args;                                                                         \
    else                                                                                        \
      name##_impl args;                                                                         \
  }
#else
#define KERNEL(name, params, args) \
  void name params { name##_impl args; }
#endif

KERNEL(lstm_cell, (float* gates, const float* c_prev, float* c, float* tanh_c, float* h_out, std::int64_t b, std::int64_t h),
       (gates, c_prev, c, tanh_c, h_out, b, h))
KERNEL(attention_scores, (const float* q, std::int64_t rows, const float* kt, std::int64_t g, std::int64_t a, const float* v, float* s),
       (q, rows, kt, g, a, v, s))
KERNEL(attention_backward,
       (const float* q, std::int64_t rows, const float* kt, std::int64_t g, std::int64_t a, const float* v, const float* ds, float* dq,
        float* dkt, float* dv, float* scratch),
       (q, rows, kt, g, a, v, ds, dq, dkt, dv, scratch))

}  // namespace placer::rl::kernels
