// AVX-512 (VNNI) prompt-processing kernels for quantized weights: many tokens per call.
// Compiled with AVX-512 flags; called only when matmul_isa_supported(kAvx512).
//
// The direct kernels (matmul_quant_avx512.cpp) spend three float instructions per row x token
// pair for every 64 products, because a 16-lane vpdpbusd result mixes two scale groups. Here
// both operands are re-laid so that lane l of every vector belongs to scale group l of a run of
// 16 groups ("lane blocks" of LB = 32 elements, or 16 for the Q6_K / Q3_K / Q2_K sub-blocks): vector k holds
// bytes 4k .. 4k+3 of each of the 16 lane blocks. LB/4 vpdpbusd then accumulate complete
// group sums in the 16 int32 lanes, and only then one convert, one scale multiply and one FMA
// (plus one FMA for minimums) are spent per pair: 8 VNNI instructions for 3-4 float ones.
//   - Activations (Q8 codes, act_quant.h) are re-laid once per token chunk by every thread
//     (cheap: a register transpose per 512 bytes), with per-lane-block offset corrections
//     init = -offset * sum(xq) and the lane-expanded scales / block sums.
//   - Weights in GGUF blocks are decoded (the same decoders as the direct kernels) and re-laid
//     for a tile of 3 or 4 rows once per token chunk and K block of about 12 KiB (Packer), then
//     used by every token tile of the chunk from L1 (the tiles' lane sums kept between K
//     blocks). Weights in the lane layout (lane_layout.h, laid out once at load) are only
//     widened (LanePacker, lane_packers_avx512.h: no transposes), and serve every token count,
//     one token included: up to 4 tokens (8 for the 16-element lane-block types), each row's
//     group is widened into registers just before its use and serves every token of a token
//     tile of up to 4 there (fused; a second tile widens it again from L1), with the same
//     operations as a tile, so a row's bits never depend on the batch.
// Same arithmetic as matmul_ref (matmul_impl.h): integer group sums are exact, each is scaled by
// fl(ws * dx) and accumulated in f32; minimums are added as mins * xs.
// Thread-safety: writes only the outputs of its rows and tokens; scratch is thread-local.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

#include "base/aligned_buffer.h"
#include "kernels/matmul_avx512_common.h"
#include "kernels/matmul_decode_avx512.h"
#include "kernels/matmul_impl.h"
#include "kernels/lane_packers_avx512.h"
#include "kernels/matmul_tiles.h"

namespace triad::kernels::avx512 {
namespace {

// ---- Register transposes: natural order (lane block after lane block) -> lane-block order.

// Index vectors for vpermt2d butterflies (see transpose_32 / transpose_16).
struct Idx16 {
  alignas(64) int32_t v[16];
};
constexpr Idx16 make_swap(int bit) {  // swap register bit `bit` with lane bit `bit`: output A
  Idx16 r{};
  for (int l = 0; l < 16; ++l) r.v[l] = ((l >> bit) & 1 ? 16 : 0) | (l & ~(1 << bit));
  return r;
}
constexpr Idx16 with_bit(Idx16 r, int bit) {
  for (int l = 0; l < 16; ++l) r.v[l] |= 1 << bit;
  return r;
}
// Last stage of the 32-element transpose: output lane l' = 2j + s takes the element that the
// first two stages left at lane (s, d2, j1, j0) of register j2 (a) / j2 + 4 (b).
constexpr Idx16 make_last32() {
  Idx16 r{};
  for (int l = 0; l < 16; ++l) {
    const int j2 = (l >> 3) & 1, j1 = (l >> 2) & 1, j0 = (l >> 1) & 1, s = l & 1;
    r.v[l] = (j2 ? 16 : 0) | (s << 3) | (j1 << 1) | j0;
  }
  return r;
}
// Last stage of the 16-element transpose: output lane l' = 4j + s (j = j1 j0, s = s1 s0) takes
// lane (s1, s0, d1, j0) of register (j1, d0).
constexpr Idx16 make_last16() {
  Idx16 r{};
  for (int l = 0; l < 16; ++l) {
    const int j1 = (l >> 3) & 1, j0 = (l >> 2) & 1, s1 = (l >> 1) & 1, s0 = l & 1;
    r.v[l] = (j1 ? 16 : 0) | (s1 << 3) | (s0 << 2) | j0;
  }
  return r;
}
constexpr Idx16 kSwap0A = make_swap(0), kSwap0B = with_bit(make_swap(0), 0);
constexpr Idx16 kSwap1A = make_swap(1), kSwap1B = with_bit(make_swap(1), 1);
constexpr Idx16 kLast32A = make_last32(), kLast32B = with_bit(make_last32(), 2);
constexpr Idx16 kLast16A = make_last16(), kLast16B = with_bit(make_last16(), 1);

inline void butterfly(__m512i& a, __m512i& b, const Idx16& ia, const Idx16& ib) {
  const __m512i na = _mm512_permutex2var_epi32(a, _mm512_load_si512(ia.v), b);
  const __m512i nb = _mm512_permutex2var_epi32(a, _mm512_load_si512(ib.v), b);
  a = na;
  b = nb;
}

// n[j] holds lane blocks 2j, 2j+1 (32 bytes each, natural order). Afterwards n[k] holds dword k
// of lane block l in lane l.
inline void transpose_32(__m512i (&n)[8]) {
  for (int m = 0; m < 8; m += 2) butterfly(n[m], n[m + 1], kSwap0A, kSwap0B);
  for (int m : {0, 1, 4, 5}) butterfly(n[m], n[m + 2], kSwap1A, kSwap1B);
  for (int m = 0; m < 4; ++m) butterfly(n[m], n[m + 4], kLast32A, kLast32B);
}
// n[j] holds lane blocks 4j .. 4j+3 (16 bytes each). Afterwards n[k] holds dword k of lane
// block l in lane l.
inline void transpose_16(__m512i (&n)[4]) {
  butterfly(n[0], n[1], kSwap0A, kSwap0B);
  butterfly(n[2], n[3], kSwap0A, kSwap0B);
  butterfly(n[0], n[2], kLast16A, kLast16B);
  butterfly(n[1], n[3], kLast16A, kLast16B);
}

// ---- Per-type packing.

// Layout of one group (16 lane blocks) of a packed weight row: codes (kLB * 16 bytes), then 16
// float scales, then (types with minimums) 16 float minimums.
template <class D>
struct Packer;

// The 32-block types (Q4_0 ... Q8_0, IQ4_NL, MXFP4): a decoder group is two blocks.
template <class D>
  requires(D::kGroup == 64)
struct Packer<D> {
  static constexpr int kLB = 32;
  static void pack(const uint8_t* row, int64_t cols, int64_t g, uint8_t* out) {
    const int64_t nb = cols / 32;  // blocks in the row
    __m512i n[8];
    alignas(64) float ws[16], mn[16];
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 16 * g + 2 * j;  // first block of pair j
      typename D::Group gs;
      if (b + 1 < nb) {
        D::group(row, b / 2, gs);
        n[j] = gs.codes;
      } else if (b < nb) {
        D::half(row, b / 2, gs);
        n[j] = gs.codes;
      } else {
        n[j] = _mm512_setzero_si512();
      }
    }
    for (int l = 0; l < 16; ++l) {
      const int64_t b = 16 * g + l;
      const uint8_t* p = row + b * D::kBytes;
      ws[l] = b < nb ? D::block_scale(p) : 0.f;
      mn[l] = b < nb ? D::block_min(p) : 0.f;
    }
    transpose_32(n);
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + 64 * k, n[k]);
    std::memcpy(out + 512, ws, 64);
    if constexpr (D::kMins) std::memcpy(out + 576, mn, 64);
  }
};

// The scale part of a packed Q4_K / Q5_K group from the two super-blocks' [fl(d * sc_j) x 8 |
// fl(dmin * mn_j) x 8] (DK45::Group::wm): 16 scales, then the 16 minimums negated (the kernel
// adds mins * xs).
inline void k45_scales(const __m512 (&wm)[2], __m512& ws, __m512& mn) {
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i hi = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  ws = _mm512_permutex2var_ps(wm[0], lo, wm[1]);
  mn = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_permutex2var_ps(wm[0], hi, wm[1]));
}

// The scale part of a packed IQ4_XS group: lanes 0..7 from the first super-block's [fl(d * (ls_j -
// 32)) x 8 | 0] (DIq4xs::Group::wm), 8..15 from the second's.
inline __m512 pair_scales(const __m512 (&wm)[2]) {
  return _mm512_insertf32x8(wm[0], _mm512_castps512_ps256(wm[1]), 1);
}

// Q4_K / Q5_K / IQ4_XS: a group is two super-blocks (16 lanes of 32-element sub-blocks).
template <class D>
  requires(std::is_same_v<D, DK45<false>> || std::is_same_v<D, DK45<true>> || std::is_same_v<D, DIq4xs>)
struct Packer<D> {
  static constexpr int kLB = 32;
  static void pack(const uint8_t* row, int64_t cols, int64_t g, uint8_t* out) {
    const int64_t nsb = cols / 256;
    __m512i n[8];
    __m512 wm[2];
    for (int h = 0; h < 2; ++h) {
      const int64_t sb = 2 * g + h;
      if (sb < nsb) {
        typename D::Group gs;
        D::group(row, sb, gs);
        wm[h] = gs.wm;
        for (int s = 0; s < 4; ++s) {
          __m512 ws_unused;
          D::step(row, sb, s, gs, n[4 * h + s], ws_unused);
        }
      } else {
        wm[h] = _mm512_setzero_ps();
        for (int s = 0; s < 4; ++s) n[4 * h + s] = _mm512_setzero_si512();
      }
    }
    transpose_32(n);
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + 64 * k, n[k]);
    if constexpr (D::kMins) {
      __m512 ws, mn;
      k45_scales(wm, ws, mn);
      _mm512_store_ps(reinterpret_cast<float*>(out + 512), ws);
      _mm512_store_ps(reinterpret_cast<float*>(out + 576), mn);
    } else {
      _mm512_store_ps(reinterpret_cast<float*>(out + 512), pair_scales(wm));
    }
  }
};

// Q6_K / Q3_K / Q2_K: a group is one super-block (16 lanes of 16-element sub-blocks).
template <class D>
  requires(std::is_same_v<D, DQ6K> || std::is_same_v<D, DQ3K> || std::is_same_v<D, DQ2K>)
struct Packer<D> {
  static constexpr int kLB = 16;
  static void pack(const uint8_t* row, int64_t, int64_t g, uint8_t* out) {
    typename D::Group gs;
    D::group(row, g, gs);
    __m512i n[4];
    for (int s = 0; s < 4; ++s) {
      __m512 ws_unused;
      D::step(row, g, s, gs, n[s], ws_unused);
    }
    transpose_16(n);
    for (int k = 0; k < 4; ++k) _mm512_store_si512(out + 64 * k, n[k]);
    _mm512_store_ps(out + 256, gs.wm);
    if constexpr (D::kMins) _mm512_store_ps(out + 320, gs.mn);
  }
};

// Per-token re-laid activations, one group (16 lane blocks) after another: codes (kLB * 16
// bytes), init (16 int32: -offset * lane-block code sum), dx (16 floats), xs (16 floats,
// types with minimums: the lane block's activation sum, per 32 (axs) or, kSums16, per 16 (axs16)).
template <int kLB, int kOff, bool kMins, bool kSums16>
void relay_token(const MatmulJob& j, int64_t t, int64_t ngroups, uint8_t* out, int64_t gbytes) {
  static_assert(!kSums16 || kLB == 16, "sums per 16 pair with 16-element lane blocks");
  const int8_t* q = j.aq + t * j.aq_stride;
  const float* d = j.ad + t * j.as_stride;
  const float* xs = kSums16 ? j.axs16 + t * j.xs16_stride : j.axs + t * j.as_stride;
  const int64_t nbytes = j.cols;            // codes in the row
  const int64_t nblk = j.cols / 32;         // activation blocks
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t g = 0; g < ngroups; ++g) {
    uint8_t* o = out + g * gbytes;
    constexpr int kRegs = kLB / 4;
    __m512i n[kRegs];
    for (int k = 0; k < kRegs; ++k) {
      const int64_t off = g * kLB * 16 + 64 * k;
      const int64_t left = nbytes - off;
      if (left >= 64) {
        n[k] = _mm512_load_si512(q + off);
      } else if (left > 0) {
        n[k] = _mm512_maskz_loadu_epi8(_cvtu64_mask64((uint64_t{1} << left) - 1), q + off);
      } else {
        n[k] = _mm512_setzero_si512();
      }
    }
    if constexpr (kLB == 32) {
      transpose_32(n);
    } else {
      transpose_16(n);
    }
    __m512i sum = _mm512_setzero_si512();
    for (int k = 0; k < kRegs; ++k) {
      _mm512_store_si512(o + 64 * k, n[k]);
      sum = _mm512_dpbusd_epi32(sum, ones, n[k]);
    }
    const __m512i init = _mm512_mullo_epi32(sum, _mm512_set1_epi32(-kOff));
    _mm512_store_si512(o + kLB * 16, init);
    alignas(64) float dx[16], sx[16];
    for (int l = 0; l < 16; ++l) {
      const int64_t b = kLB == 32 ? 16 * g + l : 8 * g + l / 2;  // activation block of lane l
      dx[l] = b < nblk ? d[b] : 0.f;
      if constexpr (kMins) sx[l] = b < nblk ? xs[kSums16 ? 16 * g + l : b] : 0.f;
    }
    std::memcpy(o + kLB * 16 + 64, dx, 64);
    if constexpr (kMins) std::memcpy(o + kLB * 16 + 128, sx, 64);
  }
}

// Per-thread grow-only scratch shared by every type: re-laid activations and packed weights.
struct Scratch {
  AlignedBuffer<uint8_t> acts, weights;
  AlignedBuffer<float> partials;
  // n vectors of partial sums (K-blocked tiles).
  __m512* partial(int64_t n) {
    if (static_cast<int64_t>(partials.size()) < 16 * n) partials.resize(static_cast<size_t>(16 * n));
    return reinterpret_cast<__m512*>(partials.data());
  }
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// P: Packer<D> (weights in GGUF blocks) or LanePacker<D> (the lane layout).
template <class D, class P>
struct Packed {
  static constexpr int kLB = P::kLB;
  // Tiles: kR rows x up to kFusedMax tokens where a token chunk holds at most that many
  // (decode: fused); else 3 rows x 4 tokens for chunks of up to kSmallChunk tokens (batched decode: 16
  // tokens are four full tiles, where 4 x 3 left a one-token tile) and 4 x 3 for prompts (each
  // activation vector, read from L2 there, then serves 4 rows). Every output's arithmetic is
  // the same in every shape, so the choice never changes a result.
  static constexpr int kR = 4, kT = 3;
  static constexpr int64_t kSmallChunk = 48;
  // From the lane layout a fused tile of 4 tokens (widened registers: 16 accumulators) beats
  // one 3 x 4 tile, whose packing would serve that tile alone.
  static constexpr int kFusedMax = requires { &P::regs; } ? 4 : kT;
  // Chunks of up to kFusedTokens tokens run as fused tiles: two of them for the 16-element
  // lane-block types from the lane layout (Q6_K, Q3_K, Q2_K: widening a row tile's groups twice
  // in registers beat packing them for 3 x 4 tiles at 5-8 tokens, by 5-25% in matmul_bench;
  // the 32-element types were as fast or faster on the tiles), else one.
  static constexpr int kFusedTokens = requires { &P::regs; } && kLB == 16 ? 2 * kFusedMax : kFusedMax;
  // Token tiles up to which the row tiles prefetch the weights (beyond, arithmetic dominates
  // and the weights are re-read from cache for every token chunk).
  static constexpr int64_t kPrefetchTokenTiles = 64;
  static constexpr int kCodeBytes = kLB * 16;
  static constexpr int64_t kWGroupBytes = kCodeBytes + 64 + (D::kMins ? 64 : 0);
  static constexpr int64_t kAGroupBytes = kCodeBytes + 128 + (D::kMins ? 64 : 0);

  // One group of a tile: row i's packed group at wg + i * wrow, token k's at ag + k * arow.
  template <int R, int T>
  static inline void group(__m512 (&acc)[R][T], const uint8_t* wg, const uint8_t* ag, int64_t wrow, int64_t arow) {
    __m512i iacc[R][T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) {
      const __m512i init = D::kOff ? _mm512_load_si512(ag + k * arow + kCodeBytes) : _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) iacc[i][k] = init;
    }
#pragma GCC unroll 8
    for (int s = 0; s < kLB / 4; ++s) {
      __m512i wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = _mm512_load_si512(wg + i * wrow + 64 * s);
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        __m512i xv = _mm512_load_si512(ag + k * arow + 64 * s);
        // One load per token vector: without this GCC folds the load into each of the R
        // vpdpbusd (R loads instead of one; the loads then bound the tile, not the VNNI ports).
        __asm__("" : "+v"(xv));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) iacc[i][k] = _mm512_dpbusd_epi32(iacc[i][k], wv[i], xv);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 ws = _mm512_load_ps(wg + i * wrow + kCodeBytes);
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        const __m512 dx = _mm512_load_ps(ag + k * arow + kCodeBytes + 64);
        acc[i][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[i][k]), _mm512_mul_ps(ws, dx), acc[i][k]);
        if constexpr (D::kMins) {
          const __m512 mn = _mm512_load_ps(wg + i * wrow + kCodeBytes + 64);
          acc[i][k] = _mm512_fmadd_ps(mn, _mm512_load_ps(ag + k * arow + kCodeBytes + 128), acc[i][k]);
        }
      }
    }
  }

  template <int R, int T>
  static inline void zero(__m512 (&acc)[R][T]) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) acc[i][k] = _mm512_setzero_ps();
  }

  // y[k * ys + i] = sum of acc[i][k]'s lanes, for the rows_valid first rows; every sum in
  // hsum4's order, whatever the tile's shape.
  template <int R, int T>
  __attribute__((always_inline)) static inline void store(const __m512 (&acc)[R][T], float* y, int64_t ys, int rows_valid) {
    __m512 v[R * T];
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k)
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) v[k * R + i] = acc[i][k];
    alignas(64) float sums[16];
    if constexpr (R * T <= 4) {  // decode: hsum4 itself (the same order, a third of the shuffles)
      _mm_store_ps(sums, hsum4(v[0], v[R * T > 1 ? 1 : 0], v[R * T > 2 ? 2 : 0], v[R * T > 3 ? 3 : 0]));
    } else {
      _mm512_store_ps(sums, hsum_lanes<R * T>(v));
    }
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) {
      float* dst = y + k * ys;
      if (rows_valid == R) {
        std::memcpy(dst, sums + k * R, sizeof(float) * R);
      } else {
        for (int i = 0; i < rows_valid; ++i) dst[i] = sums[k * R + i];
      }
    }
  }

  // Where a tile's K block of groups starts and ends: its R x T lane accumulators start at zero
  // (first block) or from `part`, and end reduced into y (last block) or saved in `part`. The
  // lanes add the groups in the same order either way, so blocking K never changes a bit.
  struct KBlock {
    __m512* part = nullptr;  // R * T vectors (blocks after the first, or before the last)
    bool first = true, last = true;
  };

  // rows: R packed rows of ng groups (row i at pw + i * wrow); acts: token k's first group at
  // pa + k * arow. [pf_begin, pf_end): the bytes of a later row tile of the weights that this
  // tile prefetches, spread over its groups (few tokens: the weights stream from memory while
  // the tiles compute); an empty range prefetches nothing.
  // kSplitK: the row has several K blocks (else kb is {null, first, last}, and the tile keeps
  // the code it had before K blocks: a variant that tested kb ran 5-9% slower on one block).
  template <int R, int T, bool kSplitK>
  static void tile(const uint8_t* pw, int64_t wrow, const uint8_t* pa, int64_t arow, int64_t ng, const KBlock& kb,
                   float* y, int64_t ys, int rows_valid, uintptr_t pf_begin = 0, uintptr_t pf_end = 0) {
    __m512 acc[R][T];
    if (!kSplitK || kb.first) {
      zero<R, T>(acc);
    } else {
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) acc[i][k] = _mm512_load_ps(kb.part + i * T + k);
    }
    const uintptr_t pf_len = pf_end - pf_begin;
    for (int64_t g = 0; g < ng; ++g) {
      if (pf_len) {
        const uintptr_t b = (pf_begin + pf_len * g / ng) & ~uintptr_t{63};
        const uintptr_t e = pf_begin + pf_len * (g + 1) / ng;
        for (uintptr_t a = b; a < e; a += 64) tiles::prefetch_line(a);
      }
      group<R, T>(acc, pw + g * kWGroupBytes, pa + g * kAGroupBytes, wrow, arow);
    }
    if (!kSplitK || kb.last) {
      store<R, T>(acc, y, ys, rows_valid);
    } else {
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) _mm512_store_ps(kb.part + i * T + k, acc[i][k]);
    }
  }

  // A tile whose T tokens are all of the chunk (decode): each group of the rows is widened just
  // before it is used (in registers from the lane layout; into gbuf, kR groups, from GGUF
  // blocks), so the weights stream from memory while the arithmetic runs. The same operations
  // as tile in the same order: the same bits.
  template <int T>
  static void fused(const MatmulJob& j, int64_t r, int rv, const uint8_t* pa, int64_t ng, uint8_t* gbuf,
                    float* y, int64_t ys) {
    __m512 acc[kR][T];
    zero<kR, T>(acc);
    const int64_t arow = ng * kAGroupBytes;
    const uint64_t rb = j.row_bytes;
    const uint8_t* w0 = j.w + static_cast<uint64_t>(r) * rb;
    const int64_t tile_bytes = kR * static_cast<int64_t>(rb);
    if constexpr (requires { &P::regs; }) {
      // From the lane layout: each row's group is widened into registers and used there by
      // every token, with group<kR, T>'s operations in its order (the same bits).
      for (int64_t g = 0; g < ng; ++g) {
        tiles::prefetch_ahead(w0, tile_bytes, g * tile_bytes / ng, (g + 1) * tile_bytes / ng);
        const uint8_t* ag = pa + g * kAGroupBytes;
#pragma GCC unroll 4
        for (int i = 0; i < kR; ++i) {
          if (i >= rv) break;
          GroupRegs<kLB, D::kMins> wr;
          P::regs(j.w + static_cast<uint64_t>(r + i) * rb, j.cols, g, wr);
#pragma GCC unroll 4
          for (int k = 0; k < T; ++k) {
            const uint8_t* ak = ag + k * arow;
            __m512i ia = D::kOff ? _mm512_load_si512(ak + kCodeBytes) : _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int s = 0; s < kLB / 4; ++s) ia = _mm512_dpbusd_epi32(ia, wr.c[s], _mm512_load_si512(ak + 64 * s));
            acc[i][k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(wr.ws, _mm512_load_ps(ak + kCodeBytes + 64)),
                                        acc[i][k]);
            if constexpr (D::kMins) acc[i][k] = _mm512_fmadd_ps(wr.mn, _mm512_load_ps(ak + kCodeBytes + 128), acc[i][k]);
          }
        }
      }
      store<kR, T>(acc, y, ys, rv);
      return;
    }
    for (int64_t g = 0; g < ng; ++g) {
      // The weights stream from memory: prefetch this group's share of a later row tile.
      tiles::prefetch_ahead(w0, tile_bytes, g * tile_bytes / ng, (g + 1) * tile_bytes / ng);
      for (int i = 0; i < rv; ++i)
        P::pack(j.w + static_cast<uint64_t>(r + i) * rb, j.cols, g, gbuf + i * kWGroupBytes);
      group<kR, T>(acc, gbuf, pa + g * kAGroupBytes, kWGroupBytes, arow);
    }
    store<kR, T>(acc, y, ys, rv);
  }

  // fused<n> for n in [1, kFusedMax].
  static inline void fused_n(int n, const MatmulJob& j, int64_t r, int rv, const uint8_t* pa, int64_t ng,
                             uint8_t* gbuf, float* y, int64_t ys) {
    switch (n) {
      case 1: fused<1>(j, r, rv, pa, ng, gbuf, y, ys); break;
      case 2: fused<2>(j, r, rv, pa, ng, gbuf, y, ys); break;
      case 3: fused<3>(j, r, rv, pa, ng, gbuf, y, ys); break;
      default: fused<kFusedMax>(j, r, rv, pa, ng, gbuf, y, ys); break;
    }
  }

  template <int RB, int T, bool kSplitK>
  static inline void tile_rem(int rem, const uint8_t* pw, int64_t wrow, const uint8_t* pa, int64_t arow, int64_t ng,
                              const KBlock& kb, float* y, int64_t ys, int rv) {
    if constexpr (T > 0) {
      if (rem == T) {
        tile<RB, T, kSplitK>(pw, wrow, pa, arow, ng, kb, y, ys, rv);
      } else {
        tile_rem<RB, T - 1, kSplitK>(rem, pw, wrow, pa, arow, ng, kb, y, ys, rv);
      }
    }
  }

  // Packed weights per K block of a row tile: small enough to stay in L1 beside a token tile's
  // activations of the block while every token tile of the chunk uses them.
  // 12 KiB: of 6, 8, 12, 16 KiB and whole rows, the best or near it for 12 and 16 tokens on
  // 8960- and 4864-column rows (matmul_bench, Zen 4); whole rows of 8960 columns were 10-35%
  // slower, their 34 KiB of packed rows (3 x 4 tiles) spilling from L1.
  static constexpr int64_t kBlockWeightBytes = int64_t{12} << 10;

  // Rows [r0, r1) x tokens [tc, te) of the chunk (activations re-laid in pa) in RB x TB tiles:
  // every RB rows are packed once per K block of groups (into pw), then used by every token
  // tile from L1; long rows take several blocks, the tiles' accumulators kept between them.
  template <int RB, int TB>
  static void rows_tiled(const MatmulJob& j, int64_t r0, int64_t r1, int64_t tc, int64_t te,
                         const uint8_t* pa, uint8_t* pw, int64_t ng) {
    const int64_t max_bg = std::max<int64_t>(1, kBlockWeightBytes / (RB * kWGroupBytes));
    if (ng > max_bg) {
      rows_tiled_k<RB, TB, true>(j, r0, r1, tc, te, pa, pw, ng, max_bg);
    } else {
      rows_tiled_k<RB, TB, false>(j, r0, r1, tc, te, pa, pw, ng, max_bg);
    }
  }
  template <int RB, int TB, bool kSplitK>
  static void rows_tiled_k(const MatmulJob& j, int64_t r0, int64_t r1, int64_t tc, int64_t te,
                           const uint8_t* pa, uint8_t* pw, int64_t ng, int64_t max_bg) {
    const uint64_t rb = j.row_bytes;
    const int64_t per_tok = ng * kAGroupBytes;
    // K blocks of equal size (bg groups, the last one shorter), at most max_bg groups each.
    const int64_t nblk = (ng + max_bg - 1) / max_bg;
    const int64_t bg = (ng + nblk - 1) / nblk;
    const int64_t wrow = bg * kWGroupBytes;
    // Few token tiles: the weights stream from memory while the tiles compute, every token
    // tile prefetching its share of a later row tile (without, memory and arithmetic took
    // turns: matmul_bench --stream-batch 1).
    const int64_t full = (te - tc) / TB;
    const int64_t ntiles = (te - tc + TB - 1) / TB;
    const int64_t tile_bytes = RB * static_cast<int64_t>(rb);
    const bool pf = full > 0 && full <= kPrefetchTokenTiles && tile_bytes <= tiles::kPrefetchMaxTileBytes;
    const int64_t pf_parts = nblk * full;
    __m512* parts = kSplitK ? scratch().partial(ntiles * RB * TB) : nullptr;
    for (int64_t r = r0; r < r1; r += RB) {
      const int rv = static_cast<int>(std::min<int64_t>(RB, r1 - r));
      const uintptr_t pf0 = reinterpret_cast<uintptr_t>(j.w) + static_cast<uintptr_t>(r) * rb +
                            static_cast<uintptr_t>(tiles::prefetch_distance(tile_bytes));
      for (int64_t blk = 0; blk < nblk; ++blk) {
        const int64_t g0 = blk * bg, g1 = std::min(ng, g0 + bg);
        for (int i = 0; i < RB; ++i) {
          uint8_t* dst = pw + i * wrow;
          if (i < rv) {
            for (int64_t g = g0; g < g1; ++g)
              P::pack(j.w + static_cast<uint64_t>(r + i) * rb, j.cols, g, dst + (g - g0) * kWGroupBytes);
          } else {
            std::memset(dst, 0, static_cast<size_t>(wrow));
          }
        }
        const uint8_t* pab = pa + g0 * kAGroupBytes;
        int64_t t = tc, k = 0;
        for (; t + TB <= te; t += TB, ++k) {
          const KBlock kb{parts ? parts + k * RB * TB : nullptr, blk == 0, blk == nblk - 1};
          const int64_t part = blk * full + k;
          tile<RB, TB, kSplitK>(pw, wrow, pab + (t - tc) * per_tok, per_tok, g1 - g0, kb, j.y + t * j.y_stride + r,
                                j.y_stride, rv, pf ? pf0 + static_cast<uintptr_t>(part * tile_bytes / pf_parts) : 0,
                                pf ? pf0 + static_cast<uintptr_t>((part + 1) * tile_bytes / pf_parts) : 0);
        }
        if (t < te) {
          const KBlock kb{parts ? parts + k * RB * TB : nullptr, blk == 0, blk == nblk - 1};
          tile_rem<RB, TB - 1, kSplitK>(static_cast<int>(te - t), pw, wrow, pab + (t - tc) * per_tok, per_tok, g1 - g0,
                                        kb, j.y + t * j.y_stride + r, j.y_stride, rv);
        }
      }
    }
  }

  static void run(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
    const int64_t ng = (j.cols + kLB * 16 - 1) / (kLB * 16);
    AlignedBuffer<uint8_t>& abuf = scratch().acts;
    AlignedBuffer<uint8_t>& wbuf = scratch().weights;
    const int64_t wbytes = kR * ng * kWGroupBytes;
    if (static_cast<int64_t>(wbuf.size()) < wbytes) wbuf.resize(static_cast<size_t>(wbytes));
    // Token chunk: re-laid activations of about 640 KiB, a multiple of 12 tokens (whole tiles
    // of either shape).
    const int64_t per_tok = ng * kAGroupBytes;
    int64_t chunk = std::max<int64_t>(12, (int64_t{640} << 10) / per_tok / 12 * 12);
    chunk = std::min(chunk, t1 - t0);
    const int64_t abytes = chunk * per_tok;
    if (static_cast<int64_t>(abuf.size()) < abytes) abuf.resize(static_cast<size_t>(abytes));
    for (int64_t tc = t0; tc < t1; tc += chunk) {
      const int64_t te = std::min(t1, tc + chunk);
      for (int64_t t = tc; t < te; ++t)
        relay_token<kLB, D::kOff, D::kMins, sums16<D>()>(j, t, ng, abuf.data() + (t - tc) * per_tok, kAGroupBytes);
      const int64_t n = te - tc;
      if (n > kFusedTokens) {
        if (n <= kSmallChunk) {
          rows_tiled<3, 4>(j, r0, r1, tc, te, abuf.data(), wbuf.data(), ng);
        } else {
          rows_tiled<kR, kT>(j, r0, r1, tc, te, abuf.data(), wbuf.data(), ng);
        }
        continue;
      }
      // Fused token tiles (at most kFusedMax tokens each, sizes within one of each other): each
      // row tile's groups are widened just before their use, once per token tile; the second
      // tile finds the row tile's weights in L1.
      const int64_t parts = (n + kFusedMax - 1) / kFusedMax;
      for (int64_t r = r0; r < r1; r += kR) {
        const int rv = static_cast<int>(std::min<int64_t>(kR, r1 - r));
        uint8_t* gbuf = wbuf.data();
        if (rv < kR) std::memset(gbuf, 0, kR * kWGroupBytes);
        for (int64_t p = 0; p < parts; ++p) {
          const int64_t a = p * n / parts, b = (p + 1) * n / parts;
          fused_n(static_cast<int>(b - a), j, r, rv, abuf.data() + a * per_tok, ng, gbuf,
                  j.y + (tc + a) * j.y_stride + r, j.y_stride);
        }
      }
    }
  }
};

template <class D>
inline void run_packed(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (j.lanes) {
    Packed<D, LanePacker<D>>::run(j, r0, r1, t0, t1);
  } else {
    Packed<D, Packer<D>>::run(j, r0, r1, t0, t1);
  }
}

}  // namespace

void matmul_rows_packed(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (j.type) {
    case DType::kQ4_0: run_packed<D32<DType::kQ4_0>>(j, r0, r1, t0, t1); return;
    case DType::kQ4_1: run_packed<D32<DType::kQ4_1>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_0: run_packed<D32<DType::kQ5_0>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_1: run_packed<D32<DType::kQ5_1>>(j, r0, r1, t0, t1); return;
    case DType::kQ8_0: run_packed<D32<DType::kQ8_0>>(j, r0, r1, t0, t1); return;
    case DType::kQ4_K: run_packed<DK45<false>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_K: run_packed<DK45<true>>(j, r0, r1, t0, t1); return;
    case DType::kQ6_K: run_packed<DQ6K>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_NL: run_packed<DTab32<false>>(j, r0, r1, t0, t1); return;
    case DType::kMXFP4: run_packed<DTab32<true>>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_XS: run_packed<DIq4xs>(j, r0, r1, t0, t1); return;
    case DType::kQ3_K: run_packed<DQ3K>(j, r0, r1, t0, t1); return;
    case DType::kQ2_K: run_packed<DQ2K>(j, r0, r1, t0, t1); return;
    default: break;
  }
  matmul_rows_ref(j, r0, r1, t0, t1);  // not reached: every quantized type is handled above
}

}  // namespace triad::kernels::avx512
