// AVX2 kernel for the weight type that takes Q8K activations (act_quant.h: one scale per 256,
// code sums per 16): Q2_K, the product matmul_impl.h defines for it (AVX-512 CPUs run
// matmul_q8k_avx512.cpp). Integer arithmetic up to the super-block:
// - vpmaddubsw(codes, xq) gives 16 pair sums, vpmaddwd with the step's two int16 sub-block scales
//   (one per 16 elements, picked by vpshufb from the half super-block's 8 scales) 8 int32 lanes
//   already scaled; they add up over the super-block's 8 steps of 32. The minimums:
//   vpmaddwd(mins, bsums), scaled by -dmin * dx in float.
// - Per super-block and output: one conversion and one FMA with fl(d * dx).
// Ranges: |pair sum| <= 2 * 3 * 127, |scale| <= 15, so an int32 lane stays far below 2^31 over
// a super-block.
// Thread-safety: writes only the outputs of the given rows and tokens.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_avx2_common.h"
#include "kernels/matmul_tiles.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels::avx2 {
namespace {

// vpshufb control for step k (0..3) of a half super-block: int16 lane 2k of the low 128-bit
// lane and 2k + 1 of the high one, each repeated, from 8 int16 scales held in both lanes.
inline __m256i scale_ctrl(int k) {
  const char a = static_cast<char>(4 * k), b = static_cast<char>(4 * k + 1);
  const char c = static_cast<char>(4 * k + 2), e = static_cast<char>(4 * k + 3);
  return _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, c, e, c, e, c, e, c, e,
                          c, e, c, e, c, e, c, e);
}

// Q2_K (84-byte blocks: scales[16] (low nibble scale, high minimum), qs[64], d, dmin). Element
// 128h + 32k + l of a block has the code (qs[32h + l] >> 2k) & 3.
struct KQ2 {
  static constexpr int kR = 2, kT = 3, kActBytes = 1;
  static constexpr int kBytes = 84;

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
    tile_rows(j, r, w);
    const int8_t* xq[T];
    const float* xd[T];
    tile_acts(j, t, xq, xd);
    const int16_t* xb[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) xb[k] = j.bsums + (t + k) * j.bs_stride;
    __m256 acc[R][T];
    zero_tile(acc);
    const __m256i m3 = _mm256_set1_epi8(3);
    const int64_t ng = j.cols / 256;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    for (int64_t g = 0; g < ng; ++g) {
      tiles::prefetch_ahead(w[0], tile_bytes, g * R * kBytes, (g + 1) * R * kBytes);
      __m256i sc16[R];
      float dw[R];
      __m256i p[R][T];  // sum_j sc_j * isum_j, 8 lanes
      __m256i bs[T];
      __m256 dx[T];
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        bs[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k] + 16 * g));
        dx[k] = _mm256_broadcast_ss(xd[k] + g);
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const uint8_t* pb = w[i] + g * kBytes;
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        sc16[i] = _mm256_cvtepu8_epi16(_mm_and_si128(s, m4));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
        dw[i] = f16(pb + 80);
        const __m256 dmin = _mm256_set1_ps(-f16(pb + 82));
        // The minimums: -dmin * dx * sum_j mn_j * bsum_j.
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) {
          const __m256 m = _mm256_cvtepi32_ps(_mm256_madd_epi16(mn16, bs[k]));
          acc[i][k] = _mm256_fmadd_ps(m, _mm256_mul_ps(dmin, dx[k]), acc[i][k]);
          p[i][k] = _mm256_setzero_si256();
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i sch[R], q[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          sch[i] = h ? _mm256_permute2x128_si256(sc16[i], sc16[i], 0x11)
                     : _mm256_permute2x128_si256(sc16[i], sc16[i], 0x00);
          q[i] = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(w[i] + g * kBytes + 16 + 32 * h));
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const int64_t e = 256 * g + 128 * h + 32 * k;  // first element of the step
          const __m256i ctrl = scale_ctrl(k);
          __m256i codes[R], scv[R];
#pragma GCC unroll 8
          for (int i = 0; i < R; ++i) {
            codes[i] = _mm256_and_si256(_mm256_srli_epi16(q[i], 2 * k), m3);
            scv[i] = _mm256_shuffle_epi8(sch[i], ctrl);
          }
#pragma GCC unroll 8
          for (int kk = 0; kk < T; ++kk) {
            const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq[kk] + e));
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i)
              p[i][kk] = _mm256_add_epi32(
                  p[i][kk], _mm256_madd_epi16(_mm256_maddubs_epi16(codes[i], xv), scv[i]));
          }
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m256 d = _mm256_set1_ps(dw[i]);
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k)
          acc[i][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i][k]), _mm256_mul_ps(d, dx[k]), acc[i][k]);
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

}  // namespace

void matmul_rows_q8k(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  tiles::run<KQ2>(j, r0, r1, t0, t1);
}

}  // namespace triad::kernels::avx2
