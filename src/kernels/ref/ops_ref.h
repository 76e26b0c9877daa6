// Scalar references (ground truth) for the element-wise ops of ops.h and for attention
// (paged_attention.h, tested against ref::attention over the same values laid out contiguously).
// Straightforward loops with the textbook formulas, accumulating in double; the SIMD kernels
// are tested against these. Same semantics and argument meaning as the public functions;
// arguments are assumed valid (the tests pass valid ones).
//
// Thread-safety: pure functions (they write only their outputs).
#pragma once

#include <cstdint>

#include "kernels/paged_attention.h"
#include "kernels/ops.h"

namespace triad::kernels::ref {

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n);
void layernorm(const float* x, const float* w, const float* b, float eps, float* out, int64_t n);
// Max-subtracted: x[i] = exp(x[i] - max) / sum_j exp(x[j] - max).
void softmax(float* x, int64_t n);
// silu(x) = x / (1 + exp(-x)).
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_mul(const float* gate, const float* up, float* out, int64_t n);
// gelu(x) = 0.5 x (1 + erf(x / sqrt 2)) (std::erfc in double for the negative tail).
void gelu_erf_mul(const float* gate, const float* up, float* out, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void scale_inplace(float* y, float s, int64_t n);
// Angles theta_i = pos * freq_scale * freq_base^(-2i / rot_dim), evaluated per element.
void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);

// Two passes per query vector: scores of the visible keys (dot products in double, then
// scale and softcap), max, exp and sum, weighted sum of V -- all in double, rounded to f32 at
// the end. A query with no visible key gets zeros.
void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
               const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
               int64_t kv_stride, const int32_t* kv_pos, float* out, int64_t out_stride);

}  // namespace triad::kernels::ref
