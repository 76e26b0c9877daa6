// AVX-512 (VNNI) kernels for the weight types that take Q8K activations (act_quant.h: one scale
// per 256, code sums per 16): Q2_K, Q3_K and IQ4_XS, the product matmul_impl.h defines for
// them. Compiled with AVX-512 flags; called only when matmul_isa_supported(kAvx512).
// Integer arithmetic up to the super-block, 64 elements per step:
// - Q2_K / Q3_K: vpmaddubsw(codes, xq) gives 32 int16 pair sums (codes <= 7: no saturation);
//   vpdpwssd multiplies them by the int16 sub-block scales (one per 16 elements, 8 int16 lanes,
//   placed by vpermw from the super-block's 16 scales) and adds them to 16 int32 lanes, so one
//   multiply-add pair per 64 products and no float work until the super-block ends.
//   Q3_K's code offset 4 is removed up front: -4 * vpmaddwd(scales, bsums). Q2_K's minimums:
//   vpmaddwd(mins, bsums), scaled by -dmin * dx in float.
// - IQ4_XS: the table values (vpshufb lookup, |value| <= 127) take the signed path: AVX-512 has
//   no vpsignb, so the activations of a row's negative weights are negated under the weights'
//   sign mask (vpmovb2m) and multiplied with |w| (|pair sum| <= 2 * 127 * 127 < 2^15), then
//   vpdpwssd with the sub-block scales ls - 32 (one per 32 elements).
// - Per super-block and output: one conversion and one FMA with fl(d * dx), as in the AVX2
//   kernels (matmul_q8k_avx2.cpp). Every tile shape, one token or many, runs this arithmetic,
//   so outputs do not depend on the batch.
// Ranges: |pair sum| <= 2 * 127 * 127, |scale| <= 32, 8 pair products per lane and super-block:
// an int32 lane stays below 2^23.
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
// The same with one scale per 32 elements (IQ4_XS): lane m <- scale 2s + m / 16.
constexpr Idx32 make_per32(int s) {
  Idx32 r{};
  for (int m = 0; m < 32; ++m) r.v[m] = static_cast<int16_t>(2 * s + m / 16);
  return r;
}
constexpr Idx32 kPer16[4] = {make_per16(0), make_per16(1), make_per16(2), make_per16(3)};
constexpr Idx32 kPer32[4] = {make_per32(0), make_per32(1), make_per32(2), make_per32(3)};

inline __m512i idx(const Idx32& i) { return _mm512_load_si512(i.v); }

// The 16 Q3_K scales (sc - 32, signed bytes) of the block at p (quant_blocks.h
// get_scales_q3k). The same bit work as the AVX2 kernel's (each ISA file keeps its own copy:
// an inline function shared across files compiled with different flags would be one symbol).
inline __m128i q3k_scales(const uint8_t* p) {
  const uint8_t* q = p + 96;
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
  const uint32_t h = ld32(q + 8);
  const __m128i hi =
      _mm_and_si128(_mm_set_epi32(static_cast<int>(h >> 6), static_cast<int>(h >> 4),
                                  static_cast<int>(h >> 2), static_cast<int>(h)),
                    _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

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

// kQ3: Q3_K (110-byte blocks: hmask[32], qs[64], scales[12], d), else Q2_K (84-byte blocks:
// scales[16] (low nibble scale, high minimum), qs[64], d, dmin). Element 128h + 32k + l of a
// block has the 2 low code bits (qs[32h + l] >> 2k) & 3; Q3_K's third bit is bit 4h + k of
// hmask[l] (code = low | bit << 2, value code - 4). Step s (elements 64s .. 64s+63) is h = s / 2,
// k = 2 (s % 2) in its lower 32 bytes and k + 1 in its upper ones.
template <bool kQ3>
struct KLow {
  static constexpr int kR = 2, kT = 4, kActBytes = 1;
  static constexpr int kRDecode = 4;
  static constexpr int kBytes = kQ3 ? 110 : 84;

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
      [[maybe_unused]] __m512i hm[R];  // Q3_K: hmask in both halves
      __m512i p[R][T];                 // sum_j sc_j * isum_j, 16 lanes
      __m512i bs[T];                   // the 16 int16 code sums, lanes 0..15
      __m512 dx[T];
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        bs[k] = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k] + 16 * g)));
        dx[k] = _mm512_set1_ps(xd[k][g]);
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const uint8_t* pb = w[i] + g * kBytes;
        if constexpr (kQ3) {
          sc[i] = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(q3k_scales(pb)));
          dw[i] = _cvtsh_ss(ld16(pb + 108));
          hm[i] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb)));
          // The code offset: -4 * sum_j sc_j * bsum_j.
#pragma GCC unroll 8
          for (int k = 0; k < T; ++k)
            p[i][k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_slli_epi32(_mm512_madd_epi16(sc[i], bs[k]), 2));
        } else {
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
      }
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int h = s / 2, k0 = 2 * (s % 2);
        // Lower 32 bytes shifted right by 2 k0, upper ones by 2 (k0 + 1) (int16 shift counts).
        const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * k0)),
                                                 _mm256_set1_epi16(static_cast<short>(2 * k0 + 2)), 1);
        [[maybe_unused]] const __m512i sel =
            _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (4 * h + k0))),
                               _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k0 + 1))), 1);
        __m512i codes[R], scv[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          const __m512i q = _mm512_broadcast_i64x4(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i] + g * kBytes + (kQ3 ? 32 : 16) + 32 * h)));
          codes[i] = _mm512_and_si512(_mm512_srlv_epi16(q, shift), m3);
          if constexpr (kQ3)
            codes[i] = _mm512_mask_add_epi8(codes[i], _mm512_test_epi8_mask(hm[i], sel), codes[i],
                                            _mm512_set1_epi8(4));
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

// IQ4_XS (136-byte blocks: d, scales_h, scales_l[4], qs[128]): sub-block j (32 elements)
// holds IQ4_NL-coded nibbles at qs + 16j (Q4_0 nibble layout) with scale ls_j - 32, ls_j =
// nibble j of the little-endian scales_l | (bits 2j..2j+1 of scales_h) << 4.
struct KIq4xs {
  static constexpr int kR = 2, kT = 4, kActBytes = 1;
  static constexpr int kRDecode = 4;
  static constexpr int kBytes = 136;

  // ls_j - 32 as int16 lanes 0..7.
  static inline __m512i scales(const uint8_t* p) {
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(ld32(p + 4))),
                          _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(ld16(p + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    return _mm512_castsi128_si512(_mm256_cvtepi32_epi16(ls));
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
    const int8_t* xq[T];
    const float* xd[T];
    tile_ptrs(j, r, t, w, xq, xd);
    __m512 acc[R][T];
    zero_tile(acc);
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
    const int64_t ng = j.cols / 256;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    for (int64_t g = 0; g < ng; ++g) {
      tiles::prefetch_ahead(w[0], tile_bytes, g * R * kBytes, (g + 1) * R * kBytes);
      __m512i ls[R];
      __m512i p[R][T];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        ls[i] = scales(w[i] + g * kBytes);
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) p[i][k] = _mm512_setzero_si512();
      }
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m512i wa[R], scv[R];
        __mmask64 neg[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          const uint8_t* qs = w[i] + g * kBytes + 8 + 32 * s;
          const __m512i wv = _mm512_shuffle_epi8(table, nibbles_pair(qs, qs + 16));
          wa[i] = _mm512_abs_epi8(wv);
          neg[i] = _mm512_movepi8_mask(wv);
          scv[i] = _mm512_permutexvar_epi16(idx(kPer32[s]), ls[i]);
        }
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) {
          const __m512i xv = _mm512_load_si512(xq[k] + 256 * g + 64 * s);
#pragma GCC unroll 8
          for (int i = 0; i < R; ++i) {
            const __m512i xs = _mm512_mask_sub_epi8(xv, neg[i], _mm512_setzero_si512(), xv);
            p[i][k] = _mm512_dpwssd_epi32(p[i][k], _mm512_maddubs_epi16(wa[i], xs), scv[i]);
          }
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(ld16(w[i] + g * kBytes)));
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k)
          acc[i][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][k]), _mm512_mul_ps(d, _mm512_set1_ps(xd[k][g])),
                                      acc[i][k]);
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

}  // namespace

void matmul_rows_q8k(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (j.type) {
    case DType::kQ3_K: tiles::run<KLow<true>>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_XS: tiles::run<KIq4xs>(j, r0, r1, t0, t1); return;
    default: tiles::run<KLow<false>>(j, r0, r1, t0, t1); return;
  }
}

}  // namespace triad::kernels::avx512
