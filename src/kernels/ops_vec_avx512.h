// VecAvx512: the 16-lane AVX-512F float vector that the generic op and attention templates
// (ops_generic.h, paged_attention_generic.h) are instantiated with in the *_avx512.cpp files.
//
// Include ONLY from files compiled with the AVX-512 flags (names ending in _avx512.cpp).
// Everything is in an anonymous namespace, so each including file gets its own copy with
// internal linkage and no AVX-512 code can leak into baseline code through a merged symbol.
//
// exp: same reduction and degree-7 polynomial as VecAvx2 (about 2 ulp), but scaled with
// vscalefps, which handles overflow (+inf) and gradual underflow (subnormals, then 0) exactly.
// tanh: odd Taylor series to x^9 for |x| < 0.25, else sign(x) (1 - t) / (1 + t), t = exp(-2|x|).
// Thread-safety: stateless.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace triad::kernels {
namespace {

// GCC 12 warns (-Wmaybe-uninitialized) about the _mm512_undefined_ps() pass-through inside
// several unmasked intrinsics; the zero-masking forms with an all-ones mask compile to the same
// instruction without it.
constexpr __mmask16 kAll16 = 0xFFFF;

struct VecAvx512 {
  using V = __m512;
  static constexpr int W = 16;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static __mmask16 lanes(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  // The first n (0..16) lanes from p (nothing beyond p[n-1] is touched); the others are `fill`.
  static V load_part(const float* p, int n, float fill = 0.f) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), lanes(n), p);
  }
  static void store_part(float* p, V v, int n) { _mm512_mask_storeu_ps(p, lanes(n), v); }

  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V max(V a, V b) { return _mm512_maskz_max_ps(kAll16, a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }  // a*b + c
  // (x0,x1,x2,x3,...) -> (x1,x0,x3,x2,...)
  static V swap_pairs(V x) { return _mm512_maskz_permute_ps(kAll16, x, 0xB1); }

  static float hsum(V v) {
    __m256 s8 = _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xFF, v, 0), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[0..3] = hsum(a), hsum(b), hsum(c), hsum(d).
  static void hsum4(V a, V b, V c, V d, float* out) {
    auto half = [](V v) {
      return _mm256_add_ps(_mm512_maskz_extractf32x8_ps(0xFF, v, 0),
                           _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    };
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(half(a), half(b)), _mm256_hadd_ps(half(c), half(d)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  static float hmax(V v) {
    __m256 s8 = _mm256_max_ps(_mm512_maskz_extractf32x8_ps(0xFF, v, 0), _mm512_maskz_extractf32x8_ps(0xFF, v, 1));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  static V exp(V x) {
    // Clamp so n stays a small integer; scalef then yields 0 / +inf where due. NaN stays NaN.
    V xc = _mm512_maskz_min_ps(kAll16, set1(100.f), _mm512_maskz_max_ps(kAll16, set1(-110.f), x));
    V n = _mm512_maskz_roundscale_ps(kAll16, _mm512_mul_ps(xc, set1(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V r = _mm512_fnmadd_ps(n, set1(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
    V p = set1(1.f / 5040.f);
    p = fma(p, r, set1(1.f / 720.f));
    p = fma(p, r, set1(1.f / 120.f));
    p = fma(p, r, set1(1.f / 24.f));
    p = fma(p, r, set1(1.f / 6.f));
    p = fma(p, r, set1(0.5f));
    p = fma(p, r, set1(1.f));
    p = fma(p, r, set1(1.f));
    return _mm512_maskz_scalef_ps(kAll16, p, n);
  }

  static V tanh(V x) {
    V ax = _mm512_abs_ps(x);
    V t = exp(_mm512_mul_ps(ax, set1(-2.f)));
    V big = _mm512_div_ps(_mm512_sub_ps(set1(1.f), t), _mm512_add_ps(set1(1.f), t));
    V x2 = _mm512_mul_ps(ax, ax);
    V p = set1(62.f / 2835.f);
    p = fma(p, x2, set1(-17.f / 315.f));
    p = fma(p, x2, set1(2.f / 15.f));
    p = fma(p, x2, set1(-1.f / 3.f));
    p = fma(p, x2, set1(1.f));
    V small = _mm512_mul_ps(p, ax);
    V r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, set1(0.25f), _CMP_LT_OQ), big, small);
    // Copy the sign of x onto r.
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(r), _mm512_and_si512(_mm512_castps_si512(x), sign)));
  }
};

}  // namespace
}  // namespace triad::kernels
