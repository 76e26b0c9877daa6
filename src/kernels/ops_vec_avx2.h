// VecAvx2: the 8-lane AVX2 + FMA float vector that the generic op and attention templates
// (ops_generic.h, paged_attention_generic.h) are instantiated with in the *_avx2.cpp files.
//
// Include ONLY from files compiled with -mavx2 -mfma (names ending in _avx2.cpp). Everything is
// in an anonymous namespace, so each including file gets its own copy with internal linkage and
// no AVX2 code can leak, through an inline symbol merged by the linker, into baseline code.
//
// exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-7 Taylor polynomial for e^r
// (truncation < 6e-9), scaled by 2^n through the exponent bits: about 2 ulp (< 3e-7 relative)
// over the normal range; results below FLT_MIN flush to 0, x above 88.38 gives +inf.
// tanh: odd Taylor series to x^9 for |x| < 0.25 (error < 1e-8 relative), else
// sign(x) (1 - t) / (1 + t) with t = exp(-2|x|) (< 5e-7 relative).
// Thread-safety: stateless.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace triad::kernels {
namespace {

struct VecAvx2 {
  using V = __m256;
  static constexpr int W = 8;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  // Lane mask whose first n (0..8) lanes are set.
  static __m256i lanes(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
  }
  // The first n lanes from p (nothing beyond p[n-1] is touched); the others are `fill`.
  static V load_part(const float* p, int n, float fill = 0.f) {
    __m256i m = lanes(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m),
                            _mm256_castsi256_ps(m));
  }
  static void store_part(float* p, V v, int n) { _mm256_maskstore_ps(p, lanes(n), v); }

  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }  // a*b + c
  // (x0,x1,x2,x3,...) -> (x1,x0,x3,x2,...)
  static V swap_pairs(V x) { return _mm256_permute_ps(x, 0xB1); }

  static float hsum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[0..3] = hsum(a), hsum(b), hsum(c), hsum(d).
  static void hsum4(V a, V b, V c, V d, float* out) {
    V t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  static float hmax(V v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  static V exp(V x) {
    const V lo = set1(-87.33654f), hi = set1(88.37626f);
    // max/min return their second operand when one is NaN: written this way a NaN input stays NaN.
    V xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
    V n = _mm256_round_ps(_mm256_mul_ps(xc, set1(1.44269504088896341f)),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm256_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    V p = set1(1.f / 5040.f);
    p = fma(p, r, set1(1.f / 720.f));
    p = fma(p, r, set1(1.f / 120.f));
    p = fma(p, r, set1(1.f / 24.f));
    p = fma(p, r, set1(1.f / 6.f));
    p = fma(p, r, set1(0.5f));
    p = fma(p, r, set1(1.f));
    p = fma(p, r, set1(1.f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    V res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    res = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), res);
    return _mm256_blendv_ps(res, set1(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  }

  static V tanh(V x) {
    const V sign = set1(-0.f);
    V ax = _mm256_andnot_ps(sign, x);
    // Large |x|: (1 - t) / (1 + t), t = exp(-2|x|).
    V t = exp(_mm256_mul_ps(ax, set1(-2.f)));
    V big = _mm256_div_ps(_mm256_sub_ps(set1(1.f), t), _mm256_add_ps(set1(1.f), t));
    // Small |x|: x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835.
    V x2 = _mm256_mul_ps(ax, ax);
    V p = set1(62.f / 2835.f);
    p = fma(p, x2, set1(-17.f / 315.f));
    p = fma(p, x2, set1(2.f / 15.f));
    p = fma(p, x2, set1(-1.f / 3.f));
    p = fma(p, x2, set1(1.f));
    V small = _mm256_mul_ps(p, ax);
    V r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, set1(0.25f), _CMP_LT_OQ));
    return _mm256_or_ps(r, _mm256_and_ps(sign, x));
  }
};

}  // namespace
}  // namespace triad::kernels
