// Internal to the SIMD kernels: FP8 codes widened to f32 with AVX2 + F16C (include only from
// translation units compiled with those flags: the AVX2 and AVX-512 kernel files).
//
// Both widenings are exact. E5M2 is the top byte of a binary16. For E4M3 the sign-extended byte
// shifted left by 7 puts the 7 magnitude bits into a binary16's exponent/mantissa field and the
// sign into bit 15 (bit 14, a copy of the sign, is masked off): that binary16 is e4m3 * 2^-8 for
// every finite code, normal or subnormal, so callers multiply by 2^8 (or fold it into a scale).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace triad::kernels {
namespace {  // internal linkage: each ISA file gets its own copy

// 16 codes -> 16 binary16 values (e4m3 * 2^-8).
inline __m256i e4m3x16_to_f16_scaled(const uint8_t* p) {
  const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_slli_epi16(v, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
}
// 16 codes -> 16 binary16 values (exact).
inline __m256i e5m2x16_to_f16(const uint8_t* p) {
  return _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 8);
}

// n codes of a stored row (E4M3 when e4m3, else E5M2) -> n floats; tails through a zero-padded
// copy.
inline void fp8_row_to_f32(bool e4m3, const uint8_t* src, int64_t n, float* dst) {
  const __m256 k256 = _mm256_set1_ps(256.f);
  int64_t i = 0;
  alignas(16) uint8_t tail[16];
  while (i < n) {
    const uint8_t* p = src + i;
    const int64_t m = n - i < 16 ? n - i : 16;
    if (m < 16) {
      for (int k = 0; k < 16; ++k) tail[k] = k < m ? p[k] : 0;
      p = tail;
    }
    const __m256i h = e4m3 ? e4m3x16_to_f16_scaled(p) : e5m2x16_to_f16(p);
    __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    __m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
    if (e4m3) {
      lo = _mm256_mul_ps(lo, k256);
      hi = _mm256_mul_ps(hi, k256);
    }
    if (m == 16) {
      _mm256_storeu_ps(dst + i, lo);
      _mm256_storeu_ps(dst + i + 8, hi);
    } else {
      alignas(32) float buf[16];
      _mm256_store_ps(buf, lo);
      _mm256_store_ps(buf + 8, hi);
      for (int64_t k = 0; k < m; ++k) dst[i + k] = buf[k];
    }
    i += m;
  }
}

}  // namespace
}  // namespace triad::kernels
