// Activation quantization for the matmul kernels (internal to src/kernels; see matmul.h).
//
// Per-call activation formats, each with a scalar reference and SIMD variants that are
// bit-exact with it (the SIMD matmul kernels and matmul_ref see the very same numbers):
//
// - "Q8 activations" (paired with every other quantized weight type, 32-block and K-quant):
//   each block of 32 consecutive values x[32b .. 32b+31] of a token row becomes
//       amax   = max |x_i|                         (float)
//       d[b]   = amax / 127                        (float division, round-to-nearest)
//       q_i    = round_half_even(x_i * (127 / amax))  in [-127, 127]   (q_i = 0 when amax == 0)
//       xs[b]  = d[b] * (sum_i q_i)                (one rounding; the exact integer sum times d)
//   xs lets kernels apply per-block weight minimums without touching q again. Non-finite
//   inputs give unspecified (but finite-index, no UB) codes; rows must hold finite floats for a
//   meaningful product. Blocks of 32 (rather than 256 for K-quants) were chosen for accuracy:
//   every quantized weight type has a per-32 (or per-16) float scale anyway, so the kernels
//   multiply per 32-block in float at no extra cost (see matmul_avx512.cpp).
// - "Q8 row activations" (paired with I8 W8A8 weights): the same rule with one block spanning
//   the whole row: amax over the row, d = amax / 127, q_i = round_half_even(x_i * (127 / amax)).
// - "Q8 activations with sums per 16" (paired with Q2_K, whose minimums are per 16 elements):
//   the Q8 activations above plus, for every 16 values, xs16[j] = d[j / 2] * (sum of the 16
//   codes q[16j .. 16j + 15]) (one rounding: the integer sum, |sum| <= 2032, is exact in float).
//   (Q2_K used llama.cpp's Q8_K, one scale per 256, until its kernels moved to the lane layout
//   and the packed kernels, which work per group of 16 anyway; per-32 scales also round the
//   activations more finely.)
// - "BF16 activations" (paired with BF16 weights): x rounded to bfloat16 with
//   round-to-nearest-even after flushing f32 subnormal inputs to zero (as the AVX-512 BF16
//   instructions do); NaN stays a quiet NaN.
//
// Thread-safety: pure functions writing only their outputs.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"

namespace triad::kernels {

inline constexpr int kActBlock = 32;        // elements per Q8 activation block

// Quantizes n values (n % 32 == 0, checked by callers) into q[n], d[n/32], xs[n/32].
void quantize_act_q8_ref(const float* x, int64_t n, int8_t* q, float* d, float* xs);
// Quantizes a row of n values into q[n] and its one scale *d.
void quantize_act_q8_row_ref(const float* x, int64_t n, int8_t* q, float* d);
// Rounds n values to bf16 (see above) into out[n].
void round_act_bf16_ref(const float* x, int64_t n, uint16_t* out);

// The same functions on a given ISA level (kScalar runs the reference). Precondition: the CPU
// supports `level`. Results are bit-identical to the reference on every level.
void quantize_act_q8(IsaLevel level, const float* x, int64_t n, int8_t* q, float* d, float* xs);
void round_act_bf16(IsaLevel level, const float* x, int64_t n, uint16_t* out);
// (The AVX-512 level runs the AVX2 variant of this one.)
void quantize_act_q8_row(IsaLevel level, const float* x, int64_t n, int8_t* q, float* d);
// xs16[n / 16] from the Q8 codes q[n] and block scales d[n / 32] of one row (n % 32 == 0); one
// function for every level (it is exact integer work and one multiply per 16 values).
void act_sums16(const int8_t* q, const float* d, int64_t n, float* xs16);

// Per-ISA variants (act_quant_avx2.cpp, act_quant_avx512.cpp).
void quantize_act_q8_avx2(const float* x, int64_t n, int8_t* q, float* d, float* xs);
void round_act_bf16_avx2(const float* x, int64_t n, uint16_t* out);
void quantize_act_q8_row_avx2(const float* x, int64_t n, int8_t* q, float* d);
void quantize_act_q8_avx512(const float* x, int64_t n, int8_t* q, float* d, float* xs);
void round_act_bf16_avx512(const float* x, int64_t n, uint16_t* out);

// The scalar bf16 rounding rule above, for one value.
uint16_t round_act_bf16_one(float x);

}  // namespace triad::kernels
