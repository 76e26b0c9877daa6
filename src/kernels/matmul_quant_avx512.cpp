// AVX-512 (VNNI) matmul kernels for the quantized weight types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4 against Q8 activations (act_quant.h). Compiled with AVX-512 flags;
// called only when matmul_isa_supported(kAvx512).
//
// One kernel for all types: a per-type decoder turns 64 weights at a time into unsigned 8-bit
// codes q in natural element order plus a 16-lane float scale vector (lane l covers elements
// 4l .. 4l+3, so a 32-block spans 8 lanes and a Q6_K 16-sub-block 4 lanes). Per row x token
// pair and 64 elements the kernel then does
//     p   = vpdpbusd(init, q, xq)          exact int32: sum over 4 elements of q * xq, where
//                                          init = -offset * (sum of those 4 xq) removes the
//                                          type's code offset (4, 8, 16, 32, or 128 for Q8_0,
//                                          IQ4_NL, IQ4_XS and MXFP4, whose signed values become
//                                          value + 128)
//     acc += float(p) * (ws * dx)           ws: the weight group scale, dx: the activation
//                                          block scale, both lane-expanded
// and weight minimums (Q4_1/Q5_1: +m, Q4_K/Q5_K/Q2_K: -fl(dmin * mn)) are added once per group
// as mins * xs with the activation block sums xs (Q2_K: the sums per 16). This is exactly the algorithm of
// matmul_impl.h, so results match matmul_ref up to float summation order.
// Weight decoding is shared by the T tokens of a tile (4 rows x 3 tokens), activation
// preparation (dx expansion and the offset correction) by its R rows. These kernels serve
// calls with fewer than kPackedMinTokens tokens; with more, matmul_rows_quant hands over to the
// packed kernels (matmul_packed_avx512.cpp), which reach about twice their rate there.
// Token generation (one token) is bound by weight streaming: about 15-22 GB/s per core from
// cache for Q4_0 / Q4_K / Q5_K / Q6_K and 30-37 GB/s for Q8_0 (F16: ~48); the per-32-block
// activation scales cost 3 float instructions per row and 64 weights (convert, scale, FMA),
// which is what keeps the 4/5-bit types below the DRAM rate of two cores.
// Thread-safety: writes only the outputs of the given rows and tokens.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the _mm512_undefined_*()
// pass-through of unmasked intrinsics, once inlined at -O3): a known false positive. Diagnostic
// locations are the header's, so the suppression must precede the include.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_avx512_common.h"
#include "kernels/matmul_decode_avx512.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_tiles.h"

namespace triad::kernels::avx512 {
namespace {

// ---- One token (token generation), K-quants: the combined scales fl(ws * dx) of a
// super-block are formed with one multiply per row and only permuted into place per 64-element
// step, saving the per-step scale multiply and activation-scale expansion.
// The same for the 32-block types needs their fp16 block scales gathered into a vector first;
// all three ways tried were slower on Zen 4 than the generic tile's per-step decoding (in-process
// A/B, 1024x896, one thread, from L2): scalar loads into a stack array (store-forwarding
// stalls), vpgatherdd (about 2x slower), and one vpermt2w over two masked loads per 4 blocks
// (Q8_0 31 vs 36 GB/s, Q4_0 15.6 vs 17.7). So they use the generic tile with T = 1.

template <class D>
struct Gemv {
  static constexpr bool kUsed = false;  // the generic tile with T = 1
};

// Q4_K / Q5_K / IQ4_XS (kQ6 = false: 8 sub-blocks of 32) and Q6_K / Q3_K (kQ6 = true: 16 of
// 16): one super-block per group.
template <class D, bool kQ6>
struct GemvK {
  template <int R>
  static void rows(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
    const int8_t* xq = j.aq + t * j.aq_stride;
    const float* xd = j.ad + t * j.as_stride;
    const float* xs = j.axs + t * j.as_stride;
    __m512 acc[R], acc2[R];  // two chains per row: the FMA latency would bound one
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) acc[i] = acc2[i] = _mm512_setzero_ps();
    const int64_t nsb = j.cols / 256;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    for (int64_t g = 0; g < nsb; ++g) {
      tiles::prefetch_ahead(w[0], tile_bytes, g * R * D::kBytes, (g + 1) * R * D::kBytes);
      // Q4_K / Q5_K: [dx of the 8 sub-blocks | minus their block sums xs], against
      // wm = [ws | mins]; IQ4_XS: the same without minimums (wm's upper lanes are zero).
      // Q6_K: dx of the activation block of each of the 16 sub-blocks.
      __m512 dxs;
      if constexpr (kQ6) {
        dxs = _mm512_permutexvar_ps(load_idx(kIdxDup), _mm512_castps256_ps512(_mm256_loadu_ps(xd + 8 * g)));
      } else if constexpr (!D::kMins) {
        dxs = _mm512_zextps256_ps512(_mm256_loadu_ps(xd + 8 * g));
      } else {
        const __m256 nxs = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_loadu_ps(xs + 8 * g));
        dxs = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(xd + 8 * g)), nxs, 1);
      }
      typename D::Group gs[R];
      __m512 sm[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        D::group(w[i], g, gs[i]);
        sm[i] = _mm512_mul_ps(gs[i].wm, dxs);
        if constexpr (D::kMins) acc[i] = _mm512_mask_add_ps(acc[i], 0xFF00, acc[i], sm[i]);  // mins
      }
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m512i xv = _mm512_load_si512(xq + 256 * g + 64 * s);
        __m512i init = _mm512_setzero_si512();
        if constexpr (D::kOff != 0) {
          const __m512i c = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                _mm512_set1_epi8(static_cast<char>(D::kOff)), xv);
          init = _mm512_sub_epi32(_mm512_setzero_si512(), c);
        }
        const __m512i idx = load_idx(kQ6 ? kIdxQ6[s] : kIdxK4[s]);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          __m512i codes;
          __m512 unused;
          D::step(w[i], g, s, gs[i], codes, unused);
          const __m512i p = _mm512_dpbusd_epi32(init, codes, xv);
          __m512& a = (s & 1) ? acc2[i] : acc[i];
          a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx, sm[i]), a);
        }
      }
    }
    __m512 out[R][1];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) out[i][0] = _mm512_add_ps(acc[i], acc2[i]);
    store_tile<R, 1>(out, j.y, j.y_stride, r, t);
  }
};
template <bool kFive>
struct Gemv<DK45<kFive>> : GemvK<DK45<kFive>, false> {
  static constexpr bool kUsed = true;
};
template <>
struct Gemv<DQ6K> : GemvK<DQ6K, true> {
  static constexpr bool kUsed = true;
};
template <>
struct Gemv<DIq4xs> : GemvK<DIq4xs, false> {
  static constexpr bool kUsed = true;
};
template <>
struct Gemv<DQ3K> : GemvK<DQ3K, true> {
  static constexpr bool kUsed = true;
};

template <class D>
struct KQuant {
  static constexpr int kR = 4, kT = 3, kActBytes = 1;

  // Adds one 64-element step of every pair of the tile.
  template <int R, int T>
  static inline void pairs(__m512 (&acc)[R][T], const __m512i (&codes)[R], const __m512 (&ws)[R],
                           const int8_t* const (&xq)[T], const float* const (&xd)[T], int64_t e) {
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k) {
      const __m512i xv = _mm512_load_si512(xq[k] + e);
      const __m512 dx = expand_pair(xd[k] + e / 32);
      __m512i init = _mm512_setzero_si512();
      if constexpr (D::kOff != 0) {
        const __m512i c = _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                              _mm512_set1_epi8(static_cast<char>(D::kOff)), xv);
        init = _mm512_sub_epi32(_mm512_setzero_si512(), c);
      }
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        const __m512i p = _mm512_dpbusd_epi32(init, codes[i], xv);
        acc[i][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(ws[i], dx), acc[i][k]);
      }
    }
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    if constexpr (T == 1 && Gemv<D>::kUsed) {
      Gemv<D>::template rows<R>(j, r, t);
      return;
    }
    const uint8_t* w[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
    const int8_t* xq[T];
    const float* xd[T];
    const float* xs[T];
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k) {
      xq[k] = j.aq + (t + k) * j.aq_stride;
      xd[k] = j.ad + (t + k) * j.as_stride;
      xs[k] = sums16<D>() ? j.axs16 + (t + k) * j.xs16_stride : j.axs + (t + k) * j.as_stride;
    }
    __m512 acc[R][T];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) acc[i][k] = _mm512_setzero_ps();
    const int64_t ng = j.cols / D::kGroup;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    constexpr int64_t kGroupBytes = D::kBytes * (D::kGroup == 64 ? 2 : 1);
    for (int64_t g = 0; g < ng; ++g) {
      tiles::prefetch_ahead(w[0], tile_bytes, g * R * kGroupBytes, (g + 1) * R * kGroupBytes);
      typename D::Group gs[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) D::group(w[i], g, gs[i]);
      if constexpr (D::kMins) {
#pragma GCC unroll 16
        for (int k = 0; k < T; ++k) {
          const __m512 xsv = D::xs_vec(xs[k], g);
#pragma GCC unroll 8
          for (int i = 0; i < R; ++i) acc[i][k] = _mm512_fmadd_ps(D::mins(gs[i]), xsv, acc[i][k]);
        }
      }
#pragma GCC unroll 4
      for (int s = 0; s < D::kSteps; ++s) {
        __m512i codes[R];
        __m512 ws[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) D::step(w[i], g, s, gs[i], codes[i], ws[i]);
        pairs<R, T>(acc, codes, ws, xq, xd, g * D::kGroup + s * 64);
      }
    }
    if constexpr (D::kGroup == 64) {
      if (j.cols % 64 != 0) {  // a lone last 32-block
        typename D::Group gs[R];
        __m512i codes[R];
        __m512 ws[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          D::half(w[i], ng, gs[i]);
          codes[i] = gs[i].codes;
          ws[i] = gs[i].ws;
        }
        if constexpr (D::kMins) {
#pragma GCC unroll 16
          for (int k = 0; k < T; ++k) {
            const __m512 xsv = D::xs_vec(xs[k], ng);
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) acc[i][k] = _mm512_fmadd_ps(D::mins(gs[i]), xsv, acc[i][k]);
          }
        }
        pairs<R, T>(acc, codes, ws, xq, xd, ng * 64);
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

}  // namespace

void matmul_rows_quant(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (j.panels) {
    matmul_rows_panels(j, r0, r1, t0, t1);
    return;
  }
  if (j.lanes || t1 - t0 >= kPackedMinTokens) {  // the lane layout: packed kernels only
    matmul_rows_packed(j, r0, r1, t0, t1);
    return;
  }
  switch (j.type) {
    case DType::kQ4_0: tiles::run<KQuant<D32<DType::kQ4_0>>>(j, r0, r1, t0, t1); return;
    case DType::kQ4_1: tiles::run<KQuant<D32<DType::kQ4_1>>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_0: tiles::run<KQuant<D32<DType::kQ5_0>>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_1: tiles::run<KQuant<D32<DType::kQ5_1>>>(j, r0, r1, t0, t1); return;
    case DType::kQ8_0: tiles::run<KQuant<D32<DType::kQ8_0>>>(j, r0, r1, t0, t1); return;
    case DType::kQ4_K: tiles::run<KQuant<DK45<false>>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_K: tiles::run<KQuant<DK45<true>>>(j, r0, r1, t0, t1); return;
    case DType::kQ6_K: tiles::run<KQuant<DQ6K>>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_NL: tiles::run<KQuant<DTab32<false>>>(j, r0, r1, t0, t1); return;
    case DType::kMXFP4: tiles::run<KQuant<DTab32<true>>>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_XS: tiles::run<KQuant<DIq4xs>>(j, r0, r1, t0, t1); return;
    case DType::kQ3_K: tiles::run<KQuant<DQ3K>>(j, r0, r1, t0, t1); return;
    case DType::kQ2_K: tiles::run<KQuant<DQ2K>>(j, r0, r1, t0, t1); return;
    default: break;
  }
  matmul_rows_ref(j, r0, r1, t0, t1);  // not reached: every weight type is handled above
}

}  // namespace triad::kernels::avx512
