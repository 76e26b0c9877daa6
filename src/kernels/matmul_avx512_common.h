// Internal to the AVX-512 matmul kernels (include only from *_avx512.cpp files, which are
// compiled with AVX-512 F/BW/VL/DQ/VNNI/BF16 flags): horizontal reductions, the tile-store
// helper and the entry points the AVX-512 matmul files share (matmul_avx512.cpp dispatches to
// the quant, packed, q8k and rowscaled ones).
// Thread-safety: pure inline functions.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_impl.h"

namespace triad::kernels::avx512 {

inline __m256 fold256(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

// Sum of the 16 lanes (not _mm512_reduce_add_ps: GCC 12 warns on its internal undefined
// values under -Werror).
inline float hsum16(__m512 v) {
  const __m256 s8 = fold256(v);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [sum(a), sum(b), sum(c), sum(d)].
inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 ab = _mm256_hadd_ps(fold256(a), fold256(b));
  const __m256 cd = _mm256_hadd_ps(fold256(c), fold256(d));
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// Zeroes a tile of accumulators (float or int32 lanes).
template <typename V, int R, int T>
inline void zero_tile(V (&acc)[R][T]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) acc[i][k] = V{};
}

// Reduces acc[i][k] (row r + i, token t + k) and stores it to y[(t + k) * ys + r + i]. Every
// output is reduced in hsum4's order, also in tiles of fewer than 4 rows, so a row's result does
// not depend on the tile it falls in (the thread split and the token count choose tiles).
// kAdd: y += the sums instead (the float kernels' later column blocks, matmul_tiles.h).
template <int R, int T, bool kAdd = false>
inline void store_tile(const __m512 (&acc)[R][T], float* y, int64_t ys, int64_t r, int64_t t) {
#pragma GCC unroll 16
  for (int k = 0; k < T; ++k) {
    float* dst = y + (t + k) * ys + r;
    if constexpr (R % 4 == 0) {
#pragma GCC unroll 4
      for (int i = 0; i < R; i += 4) {
        __m128 v = hsum4(acc[i][k], acc[i + 1][k], acc[i + 2][k], acc[i + 3][k]);
        if constexpr (kAdd) v = _mm_add_ps(_mm_loadu_ps(dst + i), v);
        _mm_storeu_ps(dst + i, v);
      }
    } else {
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const float v = _mm_cvtss_f32(hsum4(acc[i][k], acc[i][k], acc[i][k], acc[i][k]));
        dst[i] = kAdd ? dst[i] + v : v;
      }
    }
  }
}

// Quantized weight types: direct kernels (matmul_quant_avx512.cpp; any token count) and the
// packed prompt kernels (matmul_packed_avx512.cpp; used from kPackedMinTokens tokens on).
void matmul_rows_quant(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void matmul_rows_packed(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
inline constexpr int64_t kPackedMinTokens = 8;
// Q2_K / Q3_K / IQ4_XS against Q8K activations (matmul_q8k_avx512.cpp), FP8 E4M3 and I8 W8A8
// (matmul_rowscaled_avx512.cpp): any token count.
void matmul_rows_q8k(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void matmul_rows_fp8(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void matmul_rows_i8(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

}  // namespace triad::kernels::avx512
