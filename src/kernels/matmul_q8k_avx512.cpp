// AVX-512 (VNNI) kernel for the weight type that takes Q8K activations (act_quant.h: one scale
// per 256, code sums per 16): Q2_K, the product matmul_impl.h defines for it. Compiled with
// AVX-512 flags; called only when matmul_isa_supported(kAvx512).
// Integer arithmetic up to the super-block, 64 elements per step:
// - vpmaddubsw(codes, xq) gives 32 int16 pair sums (codes <= 3: no saturation); vpdpwssd
//   multiplies them by the int16 sub-block scales (one per 16 elements, 8 int16 lanes, placed by
//   vpermw from the super-block's 16 scales) and adds them to 16 int32 lanes, so one
//   multiply-add pair per 64 products and no float work until the super-block ends. The
//   minimums: vpmaddwd(mins, bsums), scaled by -dmin * dx in float.
// - Per super-block and output: one conversion and one FMA with fl(d * dx), as in the AVX2
//   kernels (matmul_q8k_avx2.cpp). Every tile shape, one token or many, runs this arithmetic,
//   so outputs do not depend on the batch.
// Ranges: |pair sum| <= 2 * 3 * 127, |scale| <= 15, 8 pair products per lane and super-block:
// an int32 lane stays below 2^17.
// Thread-safety: writes only the outputs of the given rows and tokens.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_avx512_common.h"
#include "kernels/matmul_decode_avx512.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_tiles.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels::avx512 {
namespace {

// vpermw index of step s of a 256-element super-block with one scale per 16 elements: int16
// lane m <- scale 4s + m / 8.
struct Idx32 {
  alignas(64) int16_t v[32];
};
constexpr Idx32 make_per16(int s) {
  Idx32 r{};
  for (int m = 0; m < 32; ++m) r.v[m] = static_cast<int16_t>(4 * s + m / 8);
  return r;
}
constexpr Idx32 kPer16[4] = {make_per16(0), make_per16(1), make_per16(2), make_per16(3)};

inline __m512i idx(const Idx32& i) { return _mm512_load_si512(i.v); }

template <int R, int T>
inline void tile_ptrs(const MatmulJob& j, int64_t r, int64_t t, const uint8_t* (&w)[R],
                      const int8_t* (&xq)[T], const float* (&xd)[T]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
#pragma GCC unroll 8
  for (int k = 0; k < T; ++k) {
    xq[k] = j.aq + (t + k) * j.aq_stride;
    xd[k] = j.ad + (t + k) * j.as_stride;
  }
}

// Q2_K (84-byte blocks: scales[16] (low nibble scale, high minimum), qs[64], d, dmin). Element
// 128h + 32k + l of a block has the code (qs[32h + l] >> 2k) & 3. Step s (elements 64s ..
// 64s+63) is h = s / 2, k = 2 (s % 2) in its lower 32 bytes and k + 1 in its upper ones.
struct KQ2 {
  static constexpr int kR = 2, kT = 4, kActBytes = 1;
  static constexpr int kRDecode = 4;
  static constexpr int kBytes = 84;

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
    const int8_t* xq[T];
    const float* xd[T];
    tile_ptrs(j, r, t, w, xq, xd);
    const int16_t* xb[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) xb[k] = j.bsums + (t + k) * j.bs_stride;
    __m512 acc[R][T];
    zero_tile(acc);
    const __m512i m3 = _mm512_set1_epi8(3);
    const int64_t ng = j.cols / 256;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    for (int64_t g = 0; g < ng; ++g) {
      tiles::prefetch_ahead(w[0], tile_bytes, g * R * kBytes, (g + 1) * R * kBytes);
      __m512i sc[R];  // the 16 int16 sub-block scales in lanes 0..15
      float dw[R];
      __m512i p[R][T];  // sum_j sc_j * isum_j, 16 lanes
      __m512i bs[T];    // the 16 int16 code sums, lanes 0..15
      __m512 dx[T];
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        bs[k] = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k] + 16 * g)));
        dx[k] = _mm512_set1_ps(xd[k][g]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const uint8_t* pb = w[i] + g * kBytes;
        const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pb));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        sc[i] = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s, m4)));
        const __m512i mn = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4)));
        dw[i] = _cvtsh_ss(ld16(pb + 80));
        const __m512 dmin = _mm512_set1_ps(-_cvtsh_ss(ld16(pb + 82)));
        // The minimums: -dmin * dx * sum_j mn_j * bsum_j.
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) {
          const __m512 m = _mm512_cvtepi32_ps(_mm512_madd_epi16(mn, bs[k]));
          acc[i][k] = _mm512_fmadd_ps(m, _mm512_mul_ps(dmin, dx[k]), acc[i][k]);
          p[i][k] = _mm512_setzero_si512();
        }
      }
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int h = s / 2, k0 = 2 * (s % 2);
        // Lower 32 bytes shifted right by 2 k0, upper ones by 2 (k0 + 1) (int16 shift counts).
        const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * k0)),
                                                 _mm256_set1_epi16(static_cast<short>(2 * k0 + 2)), 1);
        __m512i codes[R], scv[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          const __m512i q = _mm512_broadcast_i64x4(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i] + g * kBytes + 16 + 32 * h)));
          codes[i] = _mm512_and_si512(_mm512_srlv_epi16(q, shift), m3);
          scv[i] = _mm512_permutexvar_epi16(idx(kPer16[s]), sc[i]);
        }
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) {
          const __m512i xv = _mm512_load_si512(xq[k] + 256 * g + 64 * s);
#pragma GCC unroll 8
          for (int i = 0; i < R; ++i)
            p[i][k] = _mm512_dpwssd_epi32(p[i][k], _mm512_maddubs_epi16(codes[i], xv), scv[i]);
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m512 d = _mm512_set1_ps(dw[i]);
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k)
          acc[i][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][k]), _mm512_mul_ps(d, dx[k]), acc[i][k]);
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

}  // namespace

void matmul_rows_q8k(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  tiles::run<KQ2>(j, r0, r1, t0, t1);
}

}  // namespace triad::kernels::avx512
