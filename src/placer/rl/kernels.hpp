// Fused element-wise kernels of the learned placers' policy on one core, in plain C++ (no torch):
// an LSTM cell (gate activations and state update in one pass over the gates), and the additive
// attention v . tanh(q + k) with its gradient, fused so that the B x G x A tanh activations are
// never stored (libtorch has no fused form of either; matrix products stay with libtorch). tanh is a rational approximation
// (Eigen's, a few ulp on [-7.9, 7.9], +-1 beyond) that vectorizes; each kernel is compiled for
// AVX2 + FMA and for plain x86-64 and picked by the CPU at the first call, so results are
// reproducible on one machine (not bit for bit across CPUs) and independent of the thread count.
// float32, row-major.
#pragma once

#include <cstdint>

namespace placer::rl::kernels {

// tanh(x) by the kernels' approximation (for tests and scalar callers).
float fast_tanh(float x);

// One LSTM cell step for b rows of h units (gate order i, f, g, o): `gates` [b, 4h] holds the
// pre-activations and is overwritten with the activations; writes c = f c_prev + i g, tanh(c) and
// h = o tanh(c) ([b, h] each).
void lstm_cell(float* gates, const float* c_prev, float* c, float* tanh_c, float* h_out, std::int64_t b, std::int64_t h);

// Additive attention scores s[r, g] = sum_a v[a] tanh(q[r, a] + kt[a, g]) for q [rows, a], the keys
// transposed kt [a, g] and v [a].
void attention_scores(const float* q, std::int64_t rows, const float* kt, std::int64_t g, std::int64_t a, const float* v, float* s);

// Gradient of attention_scores given ds [rows, g]: writes dq [rows, a] and adds to dkt [a, g] and
// dv [a]. `scratch` holds a x g floats.
void attention_backward(const float* q, std::int64_t rows, const float* kt, std::int64_t g, std::int64_t a, const float* v, const float* ds,
                        float* dq, float* dkt, float* dv, float* scratch);

}  // namespace placer::rl::kernels
