// Activation quantization, AVX2 variant (compiled with AVX2/FMA/F16C flags; called only when the
// CPU has them). Bit-exact with act_quant.cpp's references (same scalar scale expressions, one
// float product and one round-to-nearest-even vcvtps2dq per element).
// Thread-safety: pure functions.
#include <immintrin.h>

#include "kernels/act_quant.h"

namespace triad::kernels {
namespace {

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline int hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_act_q8_avx2(const float* x, int64_t n, int8_t* q, float* d, float* xs) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  for (int64_t b = 0; b < n / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    __m256 v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(xb + 8 * k);
    const __m256 m = _mm256_max_ps(
        _mm256_max_ps(_mm256_and_ps(v[0], abs_mask), _mm256_and_ps(v[1], abs_mask)),
        _mm256_max_ps(_mm256_and_ps(v[2], abs_mask), _mm256_and_ps(v[3], abs_mask)));
    const float amax = hmax8(m);
    const float db = amax / 127.f;
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i iv[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 s = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[k], vid), lo), hi);
      iv[k] = _mm256_cvtps_epi32(s);
    }
    const int sum = hsum8_epi32(
        _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])));
    // Pack 32 int32 -> 32 int8 (values already in [-127, 127]); packs work per 128-bit lane,
    // so restore element order with a final dword permutation.
    const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]), p23 = _mm256_packs_epi32(iv[2], iv[3]);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kActBlock), ordered);
    d[b] = db;
    xs[b] = db * static_cast<float>(sum);
  }
}

void quantize_act_q8_row_avx2(const float* x, int64_t n, int8_t* q, float* d) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  // max(|x|, m) keeps m where |x| is NaN, as the reference's comparison does.
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m);
  float amax = hmax8(m);
  for (; i < n; ++i) {
    const float a = x[i] < 0.f ? -x[i] : x[i];
    amax = a > amax ? a : amax;
  }
  const float id = amax > 0.f ? 127.f / amax : 0.f;
  const __m256 vid = _mm256_set1_ps(id);
  const __m256 lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i iv[4];
    for (int k = 0; k < 4; ++k)
      iv[k] = _mm256_cvtps_epi32(
          _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), vid), lo), hi));
    const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i),
                        _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
  for (; i < n; ++i) {  // the tail as the reference: clamp, then round half to even
    float v = x[i] * id;
    v = v > 127.f ? 127.f : v;
    v = v < -127.f ? -127.f : v;
    if (v != v) v = 0.f;
    q[i] = static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(v)));
  }
  *d = amax / 127.f;
}

void round_act_bf16_avx2(const float* x, int64_t n, uint16_t* out) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000), sign = _mm256_set1_epi32(int(0x80000000u));
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), bias = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1), qnan = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i is_sub = _mm256_cmpeq_epi32(_mm256_and_si256(u, exp_mask), _mm256_setzero_si256());
    u = _mm256_blendv_epi8(u, _mm256_and_si256(u, sign), is_sub);
    // NaN: |u| > 0x7f800000 (signed compare is fine: both sides are non-negative).
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), exp_mask);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
    const __m256i rn = _mm256_or_si256(_mm256_srli_epi32(u, 16), qnan);
    const __m256i res = _mm256_blendv_epi8(r, rn, is_nan);
    // 8 x u32 (each < 65536) -> 8 x u16.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(res), _mm256_extracti128_si256(res, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  for (; i < n; ++i) out[i] = round_act_bf16_one(x[i]);
}

}  // namespace triad::kernels
