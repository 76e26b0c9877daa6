// Internal to the AVX2 matmul kernels (include only from *_avx2.cpp files, compiled with AVX2,
// FMA and F16C): the horizontal sum, the tile store, unaligned little-endian loads, nibble
// unpacking and table lookup, and the Q3_K scale decoder.
// Thread-safety: pure inline functions.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_impl.h"

namespace triad::kernels::avx2 {

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// kAdd: added to y (a column block after the first, matmul_tiles.h), as the AVX-512 store_tile.
template <int R, int T, bool kAdd = false>
__attribute__((always_inline)) inline void store_tile(const __m256 (&acc)[R][T], float* y, int64_t ys,
                                                      int64_t r, int64_t t) {
#pragma GCC unroll 8
  for (int k = 0; k < T; ++k)
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      float& out = y[(t + k) * ys + r + i];
      out = kAdd ? out + hsum8(acc[i][k]) : hsum8(acc[i][k]);
    }
}

// The tile prologue shared by the quantized kernels: the R weight rows from row r, the Q8
// activation codes and scales of T tokens from token t, and a zeroed accumulator tile.
template <int R>
inline void tile_rows(const MatmulJob& j, int64_t r, const uint8_t* (&w)[R]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
}
template <int T>
inline void tile_acts(const MatmulJob& j, int64_t t, const int8_t* (&xq)[T], const float* (&xd)[T]) {
#pragma GCC unroll 8
  for (int k = 0; k < T; ++k) {
    xq[k] = j.aq + (t + k) * j.aq_stride;
    xd[k] = j.ad + (t + k) * j.as_stride;
  }
}
template <int R, int T>
__attribute__((always_inline)) inline void zero_tile(__m256 (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) acc[i][k] = _mm256_setzero_ps();
}

inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float f16(const uint8_t* p) { return _cvtsh_ss(ld16(p)); }

// 16 nibble bytes -> 32 codes (low nibbles = elements 0..15, high = 16..31).
// (The 16 bytes are broadcast to both lanes by the load; one variable shift moves the high
// nibbles down in the upper lane only.)
inline __m256i nibbles(const uint8_t* qs) {
  const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i v = _mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// The signed weights of 32 nibble codes (nibbles() order) looked up in a 16-entry table.
inline __m256i lookup16(const int8_t* table, const uint8_t* qs) {
  const __m256i t =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
  return _mm256_shuffle_epi8(t, nibbles(qs));
}

// The 16 Q3_K scales (sc - 32, signed) of the block at p (quant_blocks.h get_scales_q3k).
inline __m128i q3k_scales(const uint8_t* p) {
  const uint8_t* q = p + 96;
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  // Low nibbles: scale s < 8 from the low nibble of q[s], s >= 8 from the high one of q[s - 8].
  const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
  // High bits of scale s: bits 2 (s / 4) of q[8 + s % 4], i.e. byte s % 4 of dword s / 4 below.
  const uint32_t h = ld32(q + 8);
  const __m128i hi =
      _mm_and_si128(_mm_set_epi32(static_cast<int>(h >> 6), static_cast<int>(h >> 4),
                                  static_cast<int>(h >> 2), static_cast<int>(h)),
                    _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

}  // namespace triad::kernels::avx2
