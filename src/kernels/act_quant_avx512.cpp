// Activation quantization, AVX-512 variant (compiled with AVX-512 F/BW/VL/DQ flags; called only
// when the CPU has them). Bit-exact with act_quant.cpp's references: the per-block scale and
// its reciprocal are computed with the very same scalar expressions, each element is one
// float product and one round-to-nearest-even conversion (vcvtps2dq under the default MXCSR).
// Thread-safety: pure functions.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the _mm512_undefined_*()
// pass-through of unmasked intrinsics, once inlined at -O3): a known false positive. Diagnostic
// locations are the header's, so the suppression must precede the include.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/act_quant.h"

namespace triad::kernels {
namespace {

// Horizontal max / sum (not GCC's _mm512_reduce_*: GCC 12 warns on their internal
// _mm256_undefined values under -Werror).
inline float hmax16(__m512 v) {
  const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline int hsum16_epi32(__m512i v) {
  const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_act_q8_avx512(const float* x, int64_t n, int8_t* q, float* d, float* xs) {
  const __m512 lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
  for (int64_t b = 0; b < n / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
    const float amax = hmax16(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float db = amax / 127.f;
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    const __m512 vid = _mm512_set1_ps(id);
    __m512 v0 = _mm512_mul_ps(x0, vid), v1 = _mm512_mul_ps(x1, vid);
    v0 = _mm512_min_ps(_mm512_max_ps(v0, lo), hi);
    v1 = _mm512_min_ps(_mm512_max_ps(v1, lo), hi);
    const __m512i i0 = _mm512_cvtps_epi32(v0), i1 = _mm512_cvtps_epi32(v1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kActBlock), _mm512_cvtsepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kActBlock + 16),
                     _mm512_cvtsepi32_epi8(i1));
    const int sum = hsum16_epi32(_mm512_add_epi32(i0, i1));
    d[b] = db;
    xs[b] = db * static_cast<float>(sum);
  }
}

void round_act_bf16_avx512(const float* x, int64_t n, uint16_t* out) {
  const __m512i exp_mask = _mm512_set1_epi32(0x7f800000), sign = _mm512_set1_epi32(int(0x80000000u));
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1), qnan = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
    const __mmask16 sub = _mm512_testn_epi32_mask(u, exp_mask);
    u = _mm512_mask_and_epi32(u, sub, u, sign);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), exp_mask);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), qnan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) out[i] = round_act_bf16_one(x[i]);
}

}  // namespace triad::kernels
