// Internal to the AVX-512 matmul kernels (include only from *_avx512.cpp files, which are
// compiled with AVX-512 F/BW/VL/DQ/VNNI/BF16 flags): horizontal reductions, the tile-store
// helper and the entry points the AVX-512 matmul files share (matmul_avx512.cpp dispatches to
// the quant, packed and rowscaled ones).
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

// Lane i = sum(v[i]) for N <= 16 vectors (lanes from N on: 0), each reduced in hsum4's order
// (the 256-bit halves, then pairs within 128 bits, then the 128-bit halves), so a sum's bits
// do not depend on how many vectors share the call: a tile's results equal a lone row's.
// 15 adds, 30 shuffles and one permute for 16 sums, against about 20 operations per 4 sums
// in a dependent chain for hsum4.
template <int N>
__attribute__((always_inline)) inline __m512 hsum_lanes(const __m512 (&v)[N]) {
  static_assert(N >= 1 && N <= 16);
  auto at = [&](int i) { return i < N ? v[i] : _mm512_setzero_ps(); };
  auto hadd = [](__m512 x, __m512 y) {  // _mm256_hadd_ps's pairs, per 128-bit lane
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xDD));
  };
  __m512 t[8], u[4], w[2];
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {  // [fold256(v[2j]) | fold256(v[2j+1])]
    const __m512 a = at(2 * j), b = at(2 * j + 1);
    t[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) u[m] = hadd(t[2 * m], t[2 * m + 1]);
  w[0] = hadd(u[0], u[1]);
  w[1] = hadd(u[2], u[3]);
  // Low + high 128-bit halves: lane 4L + q then holds the sum of v[8 (L / 2) + 2q + L % 2].
  const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  return _mm512_permutexvar_ps(order, s);
}

// Zeroes a tile of accumulators (float or int32 lanes).
template <typename V, int R, int T>
__attribute__((always_inline)) inline void zero_tile(V (&acc)[R][T]) {
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
__attribute__((always_inline)) inline void store_tile(const __m512 (&acc)[R][T], float* y, int64_t ys,
                                                      int64_t r, int64_t t) {
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
// Weights of a panel type (panel_layout.h) in the panel layout (matmul_panels_avx512.cpp; any
// token count; r0 and r1 whole panels).
void matmul_rows_panels(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// FP8 E4M3 and I8 W8A8 (matmul_rowscaled_avx512.cpp): any token count.
void matmul_rows_fp8(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void matmul_rows_i8(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

}  // namespace triad::kernels::avx512
