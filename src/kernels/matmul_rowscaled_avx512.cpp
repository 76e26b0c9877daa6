// AVX-512 kernels for the row-scaled online weight types (dtype_has_row_scale): FP8 E4M3 with
// f32 activations and I8 W8A8 with Q8 row activations (matmul_impl.h gives the products).
// Compiled with AVX-512 flags; called only when matmul_isa_supported(kAvx512).
// - FP8 E4M3: 32 codes per step widen to binary16 in three integer instructions on 512 bits
//   (the sign-extended byte shifted left by 7 and masked: exactly e4m3 * 2^-8, as in
//   fp8_vec_avx2.h), two vcvtph2ps make 32 f32 weights, and every token of the tile takes two
//   FMAs. The row's scale absorbs the 2^8: y = hsum * fl(s_r * 256), as in the AVX2 kernel.
// - I8: vpdpbusd multiplies unsigned by signed bytes, and both operands are signed here. The
//   weights are flipped to w + 128 (one xor per row and 64 codes, shared by the tile's tokens),
//   and 128 times the token's code sum (MatmulJob::asum, formed once per token by the driver) is
//   subtracted: sum (w + 128) xq - 128 sum xq = sum w xq. One vpdpbusd per row x token pair and
//   64 codes, nothing else per pair. Every int32 lane holds an exact partial sum (< 2^31 for the
//   row lengths matmul accepts), and the lanes add with wrap-around, which is exact because
//   the total is below 2^31 (checked by the driver). Then y = float(isum) * fl(s_r * dx_t).
// Both kernels run the same arithmetic for every tile shape (the token count never changes an
// output), so their results do not depend on the batch.
// Tails (cols not a multiple of 32 / 64) use masked loads: code 0 is +0 in both types, and the
// Q8 activation rows are zero padded to a multiple of 64 (prepare_activations).
// Thread-safety: writes only the outputs of the given rows and tokens.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_avx512_common.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_tiles.h"

namespace triad::kernels::avx512 {
namespace {

struct KFp8 {
  static constexpr int kR = 4, kT = 3, kActBytes = 4;

  // 32 codes -> two vectors of 16 f32 (e4m3 * 2^-8).
  static inline void widen(__m256i codes, __m512& lo, __m512& hi) {
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(codes), 7),
                                       _mm512_set1_epi16(static_cast<short>(0xBF80)));
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
    const float* x[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) x[k] = j.x + (t + k) * j.x_stride;
    __m512 acc[R][T];
    zero_tile(acc);
    const int64_t K = j.cols;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    // 32 weights per step; the tail (fewer than 32) through masked loads (code 0 is +0).
    auto step = [&](int64_t c, __mmask32 m) {
      const __mmask16 m0 = static_cast<__mmask16>(m), m1 = static_cast<__mmask16>(m >> 16);
      __m512 lo[R], hi[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) widen(_mm256_maskz_loadu_epi8(m, w[i] + c), lo[i], hi[i]);
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        const __m512 x0 = _mm512_maskz_loadu_ps(m0, x[k] + c), x1 = _mm512_maskz_loadu_ps(m1, x[k] + c + 16);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          acc[i][k] = _mm512_fmadd_ps(lo[i], x0, acc[i][k]);
          acc[i][k] = _mm512_fmadd_ps(hi[i], x1, acc[i][k]);
        }
      }
    };
    int64_t c = 0;
    for (; c + 32 <= K; c += 32) {
      tiles::prefetch_ahead(w[0], tile_bytes, c * R, (c + 32) * R);
      step(c, ~__mmask32{0});
    }
    if (c < K) step(c, static_cast<__mmask32>((uint64_t{1} << (K - c)) - 1));
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k)
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i)
        j.y[(t + k) * j.y_stride + r + i] = hsum16(acc[i][k]) * (j.row_scale[r + i] * 256.f);
  }
};

// [sum(a), sum(b), sum(c), sum(d)] of int32 lanes, with wrap-around.
inline __m128i hsum4_epi32(__m512i a, __m512i b, __m512i c, __m512i d) {
  auto fold = [](__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  };
  const __m256i ab = _mm256_hadd_epi32(fold(a), fold(b));
  const __m256i cd = _mm256_hadd_epi32(fold(c), fold(d));
  const __m256i abcd = _mm256_hadd_epi32(ab, cd);
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

inline int32_t hsum_epi32(__m512i v) {
  __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i q = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  q = _mm_add_epi32(q, _mm_unpackhi_epi64(q, q));
  q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 1));
  return _mm_cvtsi128_si32(q);
}

struct KI8 {
  static constexpr int kR = 4, kT = 5, kActBytes = 1;

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
    const int8_t* xq[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) xq[k] = j.aq + (t + k) * j.aq_stride;
    __m512i acc[R][T];
    zero_tile(acc);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const int64_t K = j.cols;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    auto step = [&](const __m512i (&wu)[R], int64_t c) {
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        const __m512i xv = _mm512_load_si512(xq[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_dpbusd_epi32(acc[i][k], wu[i], xv);
      }
    };
    int64_t c = 0;
    for (; c + 64 <= K; c += 64) {
      // Full token tiles (prompts) are compute-bound and find the rows in cache after the
      // chunk's first tile: software prefetch only for decode-sized tiles.
      if constexpr (T < kT) tiles::prefetch_ahead(w[0], tile_bytes, c * R, (c + 64) * R);
      __m512i wu[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wu[i] = _mm512_xor_si512(_mm512_loadu_si512(w[i] + c), flip);
      step(wu, c);
    }
    if (c < K) {  // masked weights become 128 after the flip, against zero-padded activations
      const __mmask64 m = _cvtu64_mask64((uint64_t{1} << (K - c)) - 1);
      __m512i wu[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wu[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, w[i] + c), flip);
      step(wu, c);
    }
    // isum = sum - 128 * sum xq (mod 2^32, exact), y = float(isum) * fl(s_r * dx): the same
    // operations per output in the 4-row and the 1-row form.
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) {
      const float dx = j.ad[(t + k) * j.as_stride];
      const uint32_t corr = static_cast<uint32_t>(j.asum[t + k]) << 7;  // 128 * sum xq, mod 2^32
      float* dst = j.y + (t + k) * j.y_stride + r;
      if constexpr (R % 4 == 0) {
#pragma GCC unroll 4
        for (int i = 0; i < R; i += 4) {
          const __m128i isum = _mm_sub_epi32(hsum4_epi32(acc[i][k], acc[i + 1][k], acc[i + 2][k], acc[i + 3][k]),
                                             _mm_set1_epi32(static_cast<int>(corr)));
          const __m128 sc = _mm_mul_ps(_mm_loadu_ps(j.row_scale + r + i), _mm_set1_ps(dx));
          _mm_storeu_ps(dst + i, _mm_mul_ps(_mm_cvtepi32_ps(isum), sc));
        }
      } else {
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          const int32_t isum = static_cast<int32_t>(static_cast<uint32_t>(hsum_epi32(acc[i][k])) - corr);
          dst[i] = static_cast<float>(isum) * (j.row_scale[r + i] * dx);
        }
      }
    }
  }
};

}  // namespace

void matmul_rows_fp8(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  tiles::run<KFp8>(j, r0, r1, t0, t1);
}
void matmul_rows_i8(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  tiles::run<KI8>(j, r0, r1, t0, t1);
}

}  // namespace triad::kernels::avx512
