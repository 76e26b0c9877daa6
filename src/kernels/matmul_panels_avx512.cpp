// AVX-512 (VNNI) kernels for weights in the panel layout (panel_layout.h): Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS, Q2_K and Q3_K in panels of 16 rows, every token
// count (one token to a prompt) through one tile, so a row's bits never depend on the batch.
//
// A tile is one panel x T <= 8 tokens. Lane r of every vector is row r: for each block b and
// each of its 8 code vectors k (4 bytes of every row), one vpdpbusd per token with the token's
// 4 activation bytes broadcast; the int32 lanes then hold the 16 rows' exact block sums, started
// at -offset * sum(xq) because the codes are unsigned: Q8_0's flipped by 128 (offset 128), Q5_0's
// 0..31 (16), Q4_0's 0..15 (8), Q4_1 / Q5_1's (none), IQ4_NL's table values plus 128 (128).
// Then one convert, one scale multiply (the block's 16 fp16 d widened, times the token's dx) and
// one FMA add them to 16 row accumulators (Q4_1 / Q5_1: one more FMA, the 16 m times the token's
// block sum xs). Those are the tile's outputs: 16 consecutive floats per token, no horizontal sums.
// Same arithmetic as matmul_ref (matmul_impl.h), summed in block order per row:
//   y = sum_b fl(d_b * dx_b) * isum_b (+ m_b * xs_b)   (FMAs per block, in f32).
// Q8_0 tiles read the codes where they lie. The nibble types' codes are widened (nibble masks;
// the fifth bits one masked add; IQ4_NL's a byte shuffle through its table): in registers, block
// by block, by each tile when a panel has at most kInlineWidenTiles token tiles (decode, batched
// decode); else once per panel into the wide format (units of two blocks: 2 x 512 code bytes,
// 2 x 16 fp16 d, and for Q4_1 / Q5_1 2 x 16 fp16 m: a Q8_0 panel's format plus the minimums) in
// the thread's scratch, which every tile then reads (prompts). The codes are the same either way.
// The K-quants (ktile) run the same tile per sub-block: Q4_K (Q5_K: its fifth bits as Q5_0's)
// as Q4_1 with ws = fl(d * sc) and minimum fl(dmin * mn) per 32 (the 6-bit scales unpacked once per super-block and tile), Q6_K
// per 16 with sums started at -32 * (16 codes' sum) and f = isum0 * ws0 + isum1 * ws1 applied
// once per 32-block, f * dx, IQ4_XS as IQ4_NL with ws = fl(d * (ls - 32)), Q2_K and Q3_K with
// the AVX2 panel kernels' arithmetic (q23k_block); their codes are decoded in registers by every
// tile, but for Q3_K panels of two or more token tiles, which are widened once into scaled codes
// (widen_q3k).
// A token tile's activations are gathered block by block (T x 32 codes, T starts, T scales, T
// block sums) once per call, so that a tile addresses every token at a constant offset.
// Thread-safety: writes only the outputs of its rows and tokens; scratch is thread-local.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_avx512_common.h"
#include "kernels/isa_error.h"
#include "kernels/matmul_impl.h"
#include "kernels/panel_gather.h"
#include "kernels/panel_layout.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels::avx512 {
namespace {

constexpr int kMaxT = 8;  // tokens per tile: 8 int32 sums + 8 float accumulators + operands
// Token tiles per panel up to which nibble codes are widened in registers for each tile
// (beyond, the panel is widened once into scratch).
constexpr int64_t kInlineWidenTiles = 2;

constexpr bool is_kquant(DType t) {
  return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kIQ4_XS || t == DType::kQ2_K ||
         t == DType::kQ3_K;
}
constexpr bool has_mins(DType t) {
  return t == DType::kQ4_1 || t == DType::kQ5_1 || t == DType::kQ4_K || t == DType::kQ5_K;
}
constexpr bool has_fifth(DType t) { return t == DType::kQ5_0 || t == DType::kQ5_1; }
constexpr int code_offset(DType t) {
  switch (t) {
    case DType::kQ8_0: case DType::kIQ4_NL: case DType::kIQ4_XS: return 128;
    case DType::kQ6_K: return 32;
    case DType::kQ5_0: return 16;
    case DType::kQ3_K: return 4;
    case DType::kQ2_K: return 1;  // its minimums: the gathered starts are -S (panel_gather.h)
    case DType::kQ4_0: return 8;
    default: return 0;  // Q4_1, Q5_1, Q4_K, Q5_K: minimums instead
  }
}

// A panel's parts per block, as a tile reads them: of kType's layout (panel_layout.h), or with
// kWide of the wide format (codes widened to 512 unsigned bytes, no masks; what widen() writes).
template <DType kType, bool kWide>
struct Format {
  static constexpr bool kReady = kWide || kType == DType::kQ8_0;  // codes are 8 vectors of bytes
  static constexpr bool kFifth = !kReady && has_fifth(kType);
  static constexpr bool kTable = !kReady && kType == DType::kIQ4_NL;  // nibbles index kIq4nlValues
  static constexpr bool kMins = has_mins(kType);
  static constexpr int64_t kCodes = kReady ? 512 : 256, kMasks = kFifth ? 64 : 0, kMinB = kMins ? 32 : 0;
  static constexpr int64_t kPerBlock = kCodes + kMasks + 32 + kMinB;
  static constexpr int64_t kUnitBytes = 2 * kPerBlock;  // = 32 * block bytes for kType's layout
  // Block i of a unit of n blocks.
  static const uint8_t* codes(const uint8_t* unit, int64_t, int64_t i) { return unit + kCodes * i; }
  static const uint8_t* masks(const uint8_t* unit, int64_t n, int64_t i) { return unit + n * kCodes + kMasks * i; }
  static const uint8_t* d(const uint8_t* unit, int64_t n, int64_t i) { return unit + n * (kCodes + kMasks) + 32 * i; }
  static const uint8_t* m(const uint8_t* unit, int64_t n, int64_t i) {
    return unit + n * (kCodes + kMasks + 32) + 32 * i;
  }
};
static_assert(Format<DType::kQ8_0, false>::kUnitBytes == 32 * 34 && Format<DType::kQ5_0, false>::kUnitBytes == 32 * 22 &&
              Format<DType::kQ4_0, false>::kUnitBytes == 32 * 18 && Format<DType::kQ4_1, false>::kUnitBytes == 32 * 20 &&
              Format<DType::kQ5_1, false>::kUnitBytes == 32 * 24 && Format<DType::kIQ4_NL, false>::kUnitBytes == 32 * 18);

// IQ4_NL's values plus 128 (unsigned bytes): a vpshufb table.
struct Iq4nlU8 {
  alignas(16) uint8_t v[16];
};
constexpr Iq4nlU8 make_iq4nl_u8() {
  Iq4nlU8 t{};
  for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
  return t;
}
constexpr Iq4nlU8 kIq4nlU8 = make_iq4nl_u8();

// Nibble vector v of a block (qs, masks: panel_layout.h) widened into its code vectors v (low
// nibbles) and v + 4 (high nibbles), unsigned.
template <bool kFifth, bool kTable = false>
__attribute__((always_inline)) inline void widen_vector(const uint8_t* qs, const uint8_t* masks, int v, __m512i& lo,
                                                        __m512i& hi) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const __m512i q = _mm512_loadu_si512(qs + 64 * v);
  lo = _mm512_and_si512(q, lo4);
  hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo4);
  if constexpr (kTable) {
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nlU8.v)));
    lo = _mm512_shuffle_epi8(table, lo);
    hi = _mm512_shuffle_epi8(table, hi);
  }
  if constexpr (kFifth) {
    const __m512i b4 = _mm512_set1_epi8(0x10);
    uint64_t mlo, mhi;
    std::memcpy(&mlo, masks + 8 * v, 8);
    std::memcpy(&mhi, masks + 8 * (v + 4), 8);
    lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(mlo), lo, b4);  // codes < 16: + 0x10 sets bit 4
    hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(mhi), hi, b4);
  }
}

// One block of a tile: its parts in format F (unit of n blocks, block i), a: the tile's
// gathered activations for the block. Code vector k multiplies activation bytes 4k .. 4k+3.
template <int T, class F>
__attribute__((always_inline)) inline void block(const uint8_t* unit, int64_t n, int64_t i, const uint8_t* a,
                                                 __m512 (&acc)[T]) {
  const int32_t* start = reinterpret_cast<const int32_t*>(a + 32 * T);
  const float* dx = reinterpret_cast<const float*>(a + 36 * T);
  const float* xs = reinterpret_cast<const float*>(a + 40 * T);
  // Up to 2 tokens, two chains of vpdpbusd (the latency would bound a single one); integer
  // sums, so the split changes no bit.
  constexpr int kChains = T <= 2 ? 2 : 1;
  __m512i is[kChains][T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    is[0][t] = _mm512_set1_epi32(start[t]);
    if constexpr (kChains == 2) is[1][t] = _mm512_setzero_si512();
  }
  auto dot = [&](int k, int chain, const __m512i& w) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      int32_t x4;
      std::memcpy(&x4, a + 32 * t + 4 * k, 4);
      is[chain][t] = _mm512_dpbusd_epi32(is[chain][t], w, _mm512_set1_epi32(x4));
    }
  };
  if constexpr (F::kReady) {
    const uint8_t* codes = F::codes(unit, n, i);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) dot(k, k % kChains, _mm512_loadu_si512(codes + 64 * k));
  } else {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m512i lo, hi;
      widen_vector<F::kFifth, F::kTable>(F::codes(unit, n, i), F::masks(unit, n, i), v, lo, hi);
      dot(v, 0, lo);
      dot(v + 4, kChains - 1, hi);
    }
  }
  if constexpr (kChains == 2)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) is[0][t] = _mm512_add_epi32(is[0][t], is[1][t]);
  const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(F::d(unit, n, i))));
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[0][t]), _mm512_mul_ps(ws, _mm512_set1_ps(dx[t])), acc[t]);
  if constexpr (F::kMins) {
    const __m512 mn = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(F::m(unit, n, i))));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(mn, _mm512_set1_ps(xs[t]), acc[t]);
  }
}

// Rows of one panel x T tokens: y[t * ys + r] for r < 16. The panel is in kType's layout (the
// nibble types widened in registers, block by block) or with kWide in the wide format; fastest
// 64-byte aligned.
template <int T, DType kType, bool kWide>
void tile(const uint8_t* panel, int64_t nb, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  using F = Format<kType, kWide>;
  constexpr int64_t kAB = act_block_bytes(T);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* unit = panel + (b / 2) * F::kUnitBytes;
    if (prefetch) prefetch_step<F::kUnitBytes, 2>(unit, 0);
    block<T, F>(unit, 2, 0, acts + b * kAB, acc);
    if (prefetch) prefetch_step<F::kUnitBytes, 2>(unit, 1);
    block<T, F>(unit, 2, 1, acts + (b + 1) * kAB, acc);
  }
  if (b < nb) block<T, F>(panel + (b / 2) * F::kUnitBytes, 1, 0, acts + b * kAB, acc);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
}

// The K-quants (panel_layout.h). One super-block of a tile: a points at the gathered
// activations of its first 32-block (8 follow at kAB bytes each).

// Q4_K / Q5_K (kFifth): per chunk c, sub-blocks 2c and 2c + 1 (one code vector's low and high
// nibbles; Q5_K: a masked add of 0x10 each) in two vpdpbusd chains per token; then per sub-block
// g: acc += isum * fl(fl(d * sc_g) * dx) and acc -= fl(dmin * mn_g) * xs, as Q4_1 with the
// sub-block's scale and minimum.
template <int T, bool kFifth>
__attribute__((always_inline)) inline void q45k_block(const uint8_t* blk, const uint8_t* a, __m512 (&acc)[T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  constexpr int64_t kAt = kFifth ? 512 : 0;  // the scales follow Q5_K's masks
  const __m512i lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30);
  // The 8 sub-blocks' 6-bit scales and minimums, byte 16g + r of sc / mn (g = 0..7).
  alignas(64) uint8_t sc[128], mn[128];
  {
    const __m512i lows03 = _mm512_loadu_si512(blk + kAt + 2048), lows47 = _mm512_loadu_si512(blk + kAt + 2112);
    const __m512i highs = _mm512_loadu_si512(blk + kAt + 2176);
    auto with_high = [&](__m512i low4, __m512i high_at_4) {
      return _mm512_ternarylogic_epi32(low4, high_at_4, hi2, 0xF8);  // low4 | (high & 0x30)
    };
    _mm512_store_si512(sc, with_high(_mm512_and_si512(lows03, lo4), _mm512_slli_epi16(highs, 4)));
    _mm512_store_si512(sc + 64, with_high(_mm512_and_si512(lows47, lo4), highs));
    _mm512_store_si512(mn, with_high(_mm512_and_si512(_mm512_srli_epi16(lows03, 4), lo4), _mm512_slli_epi16(highs, 2)));
    _mm512_store_si512(mn + 64, with_high(_mm512_and_si512(_mm512_srli_epi16(lows47, 4), lo4), _mm512_srli_epi16(highs, 2)));
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kAt + 2240)));
  const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kAt + 2272)));
  auto lanes = [](const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
  };
  for (int c = 0; c < 4; ++c) {
    const uint8_t* a0 = a + 2 * c * kAB;
    const uint8_t* a1 = a0 + kAB;
    __m512i is0[T], is1[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) is0[t] = is1[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      if (pf) prefetch_step<kFifth ? kQ5kPanelBlock : kQ4kPanelBlock, 32>(pf, 8 * c + v);
      const __m512i q = _mm512_loadu_si512(blk + 512 * c + 64 * v);
      __m512i lo = _mm512_and_si512(q, lo4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo4);
      if constexpr (kFifth) {
        const __m512i b4 = _mm512_set1_epi8(0x10);
        uint64_t mlo, mhi;
        std::memcpy(&mlo, blk + 2048 + 64 * (2 * c) + 8 * v, 8);
        std::memcpy(&mhi, blk + 2048 + 64 * (2 * c + 1) + 8 * v, 8);
        lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(mlo), lo, b4);
        hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(mhi), hi, b4);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t x0, x1;
        std::memcpy(&x0, a0 + 32 * t + 4 * v, 4);
        std::memcpy(&x1, a1 + 32 * t + 4 * v, 4);
        is0[t] = _mm512_dpbusd_epi32(is0[t], lo, _mm512_set1_epi32(x0));
        is1[t] = _mm512_dpbusd_epi32(is1[t], hi, _mm512_set1_epi32(x1));
      }
    }
    auto add = [&](int g, const uint8_t* ag, const __m512i (&is)[T]) {
      const __m512 ws = _mm512_mul_ps(d, lanes(sc + 16 * g)), wm = _mm512_mul_ps(dmin, lanes(mn + 16 * g));
      const float* dx = reinterpret_cast<const float*>(ag + 36 * T);
      const float* xs = reinterpret_cast<const float*>(ag + 40 * T);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(ws, _mm512_set1_ps(dx[t])), acc[t]);
        acc[t] = _mm512_fnmadd_ps(wm, _mm512_set1_ps(xs[t]), acc[t]);
      }
    };
    add(2 * c, a0, is0);
    add(2 * c + 1, a1, is1);
  }
}

// Q6_K code vector v (0..7) of 32-block 4h + 2hi + p of a super-block's codes (panel_layout.h):
// ql vector v + 8p's low (hi = 0) or high (hi = 1) nibbles with qh vector v's bit pair 2p + 4hi
// as bits 4-5.
__attribute__((always_inline)) inline __m512i q6k_code(const uint8_t* codes, int h, int p, int hi, int v) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30);
  const __m512i ql = _mm512_loadu_si512(codes + 1024 * h + 64 * (v + 8 * p));
  const __m512i qh = _mm512_loadu_si512(codes + 2048 + 512 * h + 64 * v);
  const __m512i low = hi ? _mm512_srli_epi16(ql, 4) : ql;
  const __m512i high = hi ? (p ? _mm512_srli_epi16(qh, 2) : qh) : (p ? _mm512_slli_epi16(qh, 2) : _mm512_slli_epi16(qh, 4));
  return _mm512_ternarylogic_epi32(_mm512_and_si512(low, lo4), high, hi2, 0xF8);  // low | (high & 0x30)
}

// Q6_K: 32-block by 32-block (b = 4h + 2hi + p), each of its two sub-blocks of 16 (4 code
// vectors) in one vpdpbusd chain per token started at -32 * (the 16 activation codes' sum); then
// f = isum0 * ws0 + isum1 * ws1 (ws = fl(d * sc), f32) and acc += f * dx. Codes are decoded in
// registers by every tile (widening a panel once into scratch for many token tiles, as the
// nibble types do, measured slower: 16 tokens 300 against 376-421 GFLOP/s, 512 on par).
template <int T>
__attribute__((always_inline)) inline void q6k_block(const uint8_t* codes, const uint8_t* scales, const uint8_t* dp,
                                                     const uint8_t* a, __m512 (&acc)[T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dp)));
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
    for (int hi = 0; hi < 2; ++hi) {
#pragma GCC unroll 2
      for (int p = 0; p < 2; ++p) {
        const int b = 4 * h + 2 * hi + p;
        const uint8_t* ab = a + b * kAB;
        const float* dx = reinterpret_cast<const float*>(ab + 36 * T);
        __m512 f[T];
#pragma GCC unroll 2
        for (int sub = 0; sub < 2; ++sub) {
          __m512i is[T];
          const int32_t* start = reinterpret_cast<const int32_t*>(ab + (sub ? 40 : 32) * T);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) is[t] = _mm512_set1_epi32(start[t]);
#pragma GCC unroll 4
          for (int v = 4 * sub; v < 4 * sub + 4; ++v) {
            if (pf) prefetch_step<kQ6kPanelBlock, 64>(pf, 8 * b + v);
            const __m512i c = q6k_code(codes, h, p, hi, v);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
              int32_t x;
              std::memcpy(&x, ab + 32 * t + 4 * v, 4);
              is[t] = _mm512_dpbusd_epi32(is[t], c, _mm512_set1_epi32(x));
            }
          }
          const __m512 ws = _mm512_mul_ps(
              d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32 * b + 16 * sub)))));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t)
            f[t] = sub == 0 ? _mm512_mul_ps(_mm512_cvtepi32_ps(is[t]), ws) : _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), ws, f[t]);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(f[t], _mm512_set1_ps(dx[t]), acc[t]);
      }
    }
  }
}

// IQ4_XS: per sub-block g (a 32-block), as IQ4_NL's tile (codes through the table plus 128,
// sums started at -128 * sum(xq)) with ws = fl(d * (ls_g - 32)), the 6-bit scales unpacked once
// per super-block and tile.
template <int T>
__attribute__((always_inline)) inline void iq4xs_block(const uint8_t* blk, const uint8_t* a, __m512 (&acc)[T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  alignas(64) uint8_t ls[128];  // byte 16g + r: row r's ls_g
  {
    const __m512i lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30);
    const __m512i lows = _mm512_loadu_si512(blk + 2048);
    // highs twice: bytes 16(g % 2) + r of g = 0, 1 and again for g = 2, 3 (or 4, 5 and 6, 7)
    const __m512i highs = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2112)));
    // bit pairs 0 / 1 (g = 0..3) and 2 / 3 (g = 4..7) of highs to bits 4-5, the first two groups
    // of each from the lower copy
    const __m512i h03 = _mm512_mask_blend_epi64(0xF0, _mm512_slli_epi16(highs, 4), _mm512_slli_epi16(highs, 2));
    const __m512i h47 = _mm512_mask_blend_epi64(0xF0, highs, _mm512_srli_epi16(highs, 2));
    _mm512_store_si512(ls, _mm512_ternarylogic_epi32(_mm512_and_si512(lows, lo4), h03, hi2, 0xF8));
    _mm512_store_si512(ls + 64, _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(lows, 4), lo4), h47, hi2, 0xF8));
  }
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2144)));
  const __m512 bias = _mm512_set1_ps(32.f);
  constexpr int kChains = T <= 2 ? 2 : 1;
  for (int g = 0; g < 8; ++g) {
    const uint8_t* ag = a + g * kAB;
    const int32_t* start = reinterpret_cast<const int32_t*>(ag + 32 * T);
    const float* dx = reinterpret_cast<const float*>(ag + 36 * T);
    __m512i is[kChains][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      is[0][t] = _mm512_set1_epi32(start[t]);
      if constexpr (kChains == 2) is[1][t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      if (pf) prefetch_step<kIq4xsPanelBlock, 32>(pf, 4 * g + v);
      __m512i lo, hi;
      widen_vector<false, true>(blk + 256 * g, nullptr, v, lo, hi);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        int32_t x0, x1;
        std::memcpy(&x0, ag + 32 * t + 4 * v, 4);
        std::memcpy(&x1, ag + 32 * t + 4 * (v + 4), 4);
        is[0][t] = _mm512_dpbusd_epi32(is[0][t], lo, _mm512_set1_epi32(x0));
        is[kChains - 1][t] = _mm512_dpbusd_epi32(is[kChains - 1][t], hi, _mm512_set1_epi32(x1));
      }
    }
    const __m512 ws = _mm512_mul_ps(
        d, _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(ls + 16 * g)))),
                         bias));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      if constexpr (kChains == 2) is[0][t] = _mm512_add_epi32(is[0][t], is[1][t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[0][t]), _mm512_mul_ps(ws, _mm512_set1_ps(dx[t])), acc[t]);
    }
  }
}

// Pins an int16 sum in its register at this point (GCC would otherwise reassociate a tile's
// integer adds into a tree and spill the products, as in the AVX2 panel kernels).
__attribute__((always_inline)) inline void pin(__m512i& v) { asm("" : "+v"(v)); }

// Q2_K and Q3_K (panel_layout.h): the AVX2 panel kernels' arithmetic (matmul_panels_avx2.cpp,
// q23k_block) with all 16 rows in one vector, so both give the same bits. Per 32-block s
// (Q2_K's codes: bits 2k of the qs bytes of half n, s = 4n + k; Q3_K's: fields of the 32-block's
// vectors A, B, C), one vpmaddubsw per code vector and
// token with the token's interleaved activation pair broadcast: the int16 lanes 2r and 2r + 1
// sum row r's products over the block's first and second sub-block of 16 (codes <= 7: 8 * 2 *
// 7 * 128 < 2^15, no saturation), and one vpmaddwd with the rows' scale pairs makes
// I = sc0 * isum0 + sc1 * isum1, an exact integer:
// - Q3_K: scales less 32, and the code offset 4 removed by one vpmaddwd of the scale pair with
//   the gathered (-4 S0, -4 S1); acc += I * fl(d * dx).
// - Q2_K: acc += I * fl(d * dx), then acc += M * fl(dmin * dx), M = -(mn0 S0 + mn1 S1) (a
//   vpmaddwd of the minimum pair with the gathered (-S0, -S1)).
// (vpdpbusd would add a code vector's two sub-blocks into one sum: the pairs keep them apart.)
// From kScaledCodesFrom tokens on (Q3_K: kQ3ScaledCodesFrom): scaled codes (below) and vpdpbusd.
constexpr int kScaledCodesFrom = 3, kQ3ScaledCodesFrom = 4;

// Q3_K's code vector v (0..7) of the 32-block whose vectors A, B, C start at abc
// (panel_layout.h): c0..c5 a 3-bit field of A, B or C; c6, c7 the low pair from bits 6-7 of A
// or B and the third bit from bit 6 or 7 of C.
__attribute__((always_inline)) inline __m512i q3k_code(const uint8_t* abc, int v) {
  auto ld = [&](int i) { return _mm512_loadu_si512(abc + 64 * i); };
  if (v < 6) {
    const __m512i x = ld(v / 2);
    return _mm512_and_si512(v % 2 ? _mm512_srli_epi16(x, 3) : x, _mm512_set1_epi8(7));
  }
  const __m512i third = _mm512_and_si512(_mm512_srli_epi16(ld(2), v - 2), _mm512_set1_epi8(4));
  return _mm512_ternarylogic_epi32(_mm512_srli_epi16(ld(v - 6), 6), third, _mm512_set1_epi8(3), 0xEC);  // (a & 3) | third
}

// Q3_K's 6-bit scales of 32-block s less 32, as bytes: byte 16h + 2q + i for row 8h + q's
// sub-block 2s + i (4 bits of the lows, 2 of the highs; panel_layout.h).
__attribute__((always_inline)) inline __m256i q3k_scale_bytes(const uint8_t* blk, int s) {
  auto ld256 = [&](int64_t o) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + o)); };
  const __m256i l = _mm256_and_si256(_mm256_srli_epi16(ld256(1536 + 32 * (s % 4)), 4 * (s / 4)), _mm256_set1_epi8(0x0F));
  const __m256i hb = ld256(1664 + 32 * (s % 2));
  const int up = 4 - 2 * (s / 2);  // bits 2 (s / 2) of a highs byte to bit 4
  const __m256i hi = _mm256_and_si256(up >= 0 ? _mm256_slli_epi16(hb, up) : _mm256_srli_epi16(hb, -up), _mm256_set1_epi8(0x30));
  return _mm256_sub_epi8(_mm256_or_si256(l, hi), _mm256_set1_epi8(32));
}

// The byte operands of Q3_K's scaled codes of one 32-block (q23k_block): byte 4r + j is of row
// r's sub-block j / 2, with S its scale less 32: sc1 = S, sc2 = 2 S, sc4 = 4 S, base = 124 - 4 S.
struct Q3kScaled {
  __m512i sc1, sc2, sc4, base;
};
__attribute__((always_inline)) inline Q3kScaled q3k_scaled(__m256i s8) {
  const __m512i w16 = _mm512_cvtepu8_epi16(s8);
  Q3kScaled q;
  q.sc1 = _mm512_or_si512(w16, _mm512_slli_epi16(w16, 8));
  q.sc2 = _mm512_add_epi8(q.sc1, q.sc1);
  q.sc4 = _mm512_add_epi8(q.sc2, q.sc2);
  q.base = _mm512_sub_epi8(_mm512_set1_epi8(124), q.sc4);
  return q;
}
// Code vector v's scaled codes (code - 4) * S + 124 from the 32-block's vectors A, B, C at abc:
// base plus S, 2 S and 4 S where the code's three bits are set (panel_layout.h: kQ3kLowBit ...).
__attribute__((always_inline)) inline __m512i q3k_scaled_code(const uint8_t* abc, int v, const Q3kScaled& q) {
  auto bit = [](int b) { return _mm512_set1_epi8(static_cast<char>(1 << b)); };
  const int lo = kQ3kLowBit[v], hi = kQ3kHighBit[v];
  const __m512i x = _mm512_loadu_si512(abc + 64 * kQ3kLowVector[v]), y = _mm512_loadu_si512(abc + 64 * kQ3kHighVector[v]);
  __m512i w = _mm512_mask_add_epi8(q.base, _mm512_test_epi8_mask(x, bit(lo)), q.base, q.sc1);
  w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(x, bit(lo + 1)), w, q.sc2);
  return _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(y, bit(hi)), w, q.sc4);
}

// Q3_K's scaled codes of a whole panel (ns super-blocks), made once for many token tiles:
// super-block b's 32-block s, code vector v at kQ3kWideBlock * b + 512 s + 64 v.
constexpr int64_t kQ3kWideBlock = 4096;
void widen_q3k(const uint8_t* panel, int64_t ns, uint8_t* out) {
  for (int64_t b = 0; b < ns; ++b) {
    const uint8_t* blk = panel + kQ3kPanelBlock * b;
    for (int s = 0; s < 8; ++s) {
      prefetch_step<kQ3kPanelBlock, 8>(blk, s);
      const Q3kScaled q = q3k_scaled(q3k_scale_bytes(blk, s));
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) _mm512_store_si512(out + kQ3kWideBlock * b + 512 * s + 64 * v, q3k_scaled_code(blk + 192 * s, v, q));
    }
  }
}

// kWide (Q3_K, T >= kQ3ScaledCodesFrom): the scaled codes are read from `wide` (widen_q3k's
// block), not made.
template <int T, bool kQ3, bool kWide = false>
__attribute__((always_inline)) inline void q23k_block(const uint8_t* blk, const uint8_t* a, __m512 (&acc)[T], const uint8_t* pf,
                                                      const uint8_t* wide = nullptr) {
  constexpr int64_t kAB = act_block_bytes(T);
  constexpr bool kScaledCodes = T >= (kQ3 ? kQ3ScaledCodesFrom : kScaledCodesFrom);
  static_assert(!kWide || (kQ3 && kScaledCodes));
  const __m512i three = _mm512_set1_epi8(3);
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  auto ld256 = [&](int64_t o) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + o)); };
  const __m512 d = _mm512_cvtph_ps(ld256(kQ3 ? 1728 : 1280));
  [[maybe_unused]] __m512 dmin;
  if constexpr (!kQ3) dmin = _mm512_cvtph_ps(ld256(1312));
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    const int n = s / 4, k = s % 4;
    const uint8_t* ab = a + s * kAB;
    const int32_t* start = reinterpret_cast<const int32_t*>(ab + 32 * T);
    const float* dx = reinterpret_cast<const float*>(ab + 36 * T);
    // Row r's two sub-block scales (Q3_K: less 32) as the int16 pair of lane r.
    __m512i scales;
    [[maybe_unused]] __m512i mins;
    [[maybe_unused]] __m256i s8;  // Q3_K: the scales less 32 as bytes, 2r + i for sub-block i
    if constexpr (kQ3) {
      s8 = q3k_scale_bytes(blk, s);
      scales = _mm512_cvtepi8_epi16(s8);
    } else {
      const __m256i raw = ld256(1024 + 32 * s);
      scales = _mm512_cvtepu8_epi16(_mm256_and_si256(raw, lo4));
      mins = _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), lo4));
    }
    // Code vector v (0..7) of this 32-block.
    auto code = [&](int v) {
      if constexpr (kQ3) {
        return q3k_code(blk + 192 * s, v);
      } else {
        const __m512i q = _mm512_loadu_si512(blk + 64 * (8 * n + v));
        return _mm512_and_si512(k ? _mm512_srli_epi16(q, 2 * k) : q, three);
      }
    };
    // Each token's I (Q3_K: with the code offset removed).
    __m512i is[T];
    if constexpr (kScaledCodes) {
      // Scaled codes: each code times its sub-block's scale as a byte, made once per tile from
      // bit tests and masked byte adds, then one vpdpbusd per code vector and token sums I
      // directly: the same exact integer, so the same bits, with fewer operations per token
      // (from 3 tokens on for Q2_K, 4 for Q3_K, they repay the selection).
      // - Q2_K: code * sc <= 3 * 15: sc where bit 0 is set plus 2 sc where bit 1 is.
      // - Q3_K: w = (code - 4) * (sc - 32) + 124, in [0, 252]: 124 - 4 S plus S, 2 S and 4 S by
      //   the code's three bits (S = sc - 32; byte sums wrap, the result fits), and the sums
      //   start at -124 * (S0 + S1) (the gathered (-4 S0, -4 S1) times 31 each).
      // Byte 4r + j: the scale of row r's sub-block 2s + j / 2 (Q3_K: less 32).
      [[maybe_unused]] Q3kScaled q3;
      [[maybe_unused]] __m512i sc1, sc2;
      if constexpr (kQ3 && !kWide) {
        q3 = q3k_scaled(s8);
      } else if constexpr (!kQ3) {
        sc1 = _mm512_or_si512(scales, _mm512_slli_epi16(scales, 8));
        sc2 = _mm512_add_epi8(sc1, sc1);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        is[t] = kQ3 ? _mm512_madd_epi16(_mm512_set1_epi32(start[t]), _mm512_set1_epi16(31)) : _mm512_setzero_si512();
      auto bit = [](int b) { return _mm512_set1_epi8(static_cast<char>(1 << b)); };
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        __m512i w;
        if constexpr (kWide) {
          w = _mm512_loadu_si512(wide + 512 * s + 64 * v);
        } else if constexpr (kQ3) {
          if (pf) prefetch_step<kQ3kPanelBlock, 64>(pf, 8 * s + v);
          w = q3k_scaled_code(blk + 192 * s, v, q3);
        } else {
          if (pf) prefetch_step<kQ2kPanelBlock, 64>(pf, 8 * s + v);
          const __m512i q = _mm512_loadu_si512(blk + 64 * (8 * n + v));
          w = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(q, bit(2 * k)), sc1);
          w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(q, bit(2 * k + 1)), w, sc2);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          int32_t x;
          std::memcpy(&x, ab + 32 * t + 4 * v, 4);
          is[t] = _mm512_dpbusd_epi32(is[t], w, _mm512_set1_epi32(x));
        }
      }
    } else {
      __m512i s16[T];
#pragma GCC unroll 4
      for (int v = 0; v < 8; v += 2) {
        if (pf) prefetch_step<kQ3 ? kQ3kPanelBlock : kQ2kPanelBlock, 32>(pf, 4 * s + v / 2);
        const __m512i c0 = code(v), c1 = code(v + 1);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          int32_t x0, x1;
          std::memcpy(&x0, ab + 32 * t + 4 * v, 4);
          std::memcpy(&x1, ab + 32 * t + 4 * v + 4, 4);
          const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(c0, _mm512_set1_epi32(x0)),
                                             _mm512_maddubs_epi16(c1, _mm512_set1_epi32(x1)));
          s16[t] = v == 0 ? p : _mm512_add_epi16(s16[t], p);
          pin(s16[t]);
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        is[t] = _mm512_madd_epi16(s16[t], scales);
        if constexpr (kQ3)
          is[t] = _mm512_add_epi32(is[t], _mm512_madd_epi16(scales, _mm512_set1_epi32(start[t])));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 x = _mm512_set1_ps(dx[t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(d, x), acc[t]);
      if constexpr (!kQ3) {
        const __m512i m = _mm512_madd_epi16(mins, _mm512_set1_epi32(start[t]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, x), acc[t]);
      }
    }
  }
}

// Rows of one K-quant panel x T tokens (ns super-blocks): y[t * ys + r] for r < 16.
template <int T, DType kType>
void ktile(const uint8_t* panel, int64_t ns, const uint8_t* acts, float* y, int64_t ys, bool prefetch,
           const uint8_t* wide) {
  constexpr int64_t kSB = 8 * act_block_bytes(T);  // a super-block's gathered activations
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < ns; ++b) {
    if constexpr (kType != DType::kQ6_K) {  // units of one super-block
      constexpr int64_t kBlock = kType == DType::kIQ4_XS ? kIq4xsPanelBlock
                                 : kType == DType::kQ4_K ? kQ4kPanelBlock
                                 : kType == DType::kQ5_K ? kQ5kPanelBlock
                                 : kType == DType::kQ3_K ? kQ3kPanelBlock
                                                         : kQ2kPanelBlock;
      const uint8_t* blk = panel + kBlock * b;
      if constexpr (kType == DType::kIQ4_XS) {
        iq4xs_block<T>(blk, acts + b * kSB, acc, prefetch ? blk : nullptr);
      } else if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
        q45k_block<T, kType == DType::kQ5_K>(blk, acts + b * kSB, acc, prefetch ? blk : nullptr);
      } else if constexpr (kType == DType::kQ3_K && T >= kQ3ScaledCodesFrom) {
        if (wide) {
          q23k_block<T, true, true>(blk, acts + b * kSB, acc, nullptr, wide + kQ3kWideBlock * b);
        } else {
          q23k_block<T, true>(blk, acts + b * kSB, acc, prefetch ? blk : nullptr);
        }
      } else {
        q23k_block<T, kType == DType::kQ3_K>(blk, acts + b * kSB, acc, prefetch ? blk : nullptr);
      }
    } else {  // Q6_K: units of two
      const int64_t u = b / 2, n = std::min<int64_t>(2, ns - 2 * u), i = b - 2 * u;
      const uint8_t* unit = panel + 2 * kQ6kPanelBlock * u;
      q6k_block<T>(unit + 3072 * i, unit + 3072 * n + 256 * i, unit + 3328 * n + 32 * i, acts + b * kSB, acc,
                   prefetch ? unit + kQ6kPanelBlock * i : nullptr);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
}

template <DType kType>
void ktile_n(int n, const uint8_t* panel, int64_t ns, const uint8_t* acts, float* y, int64_t ys, bool prefetch,
             const uint8_t* wide) {
  switch (n) {
#define TRIAD_KPANEL_TILE(N) \
  case N: ktile<N, kType>(panel, ns, acts, y, ys, prefetch, wide); return;
    TRIAD_KPANEL_TILE(1) TRIAD_KPANEL_TILE(2) TRIAD_KPANEL_TILE(3) TRIAD_KPANEL_TILE(4)
    TRIAD_KPANEL_TILE(5) TRIAD_KPANEL_TILE(6) TRIAD_KPANEL_TILE(7) TRIAD_KPANEL_TILE(8)
#undef TRIAD_KPANEL_TILE
    default: isa_fail("panel tile of %d tokens", int(n));
  }
}

template <DType kType, bool kWide>
void tile_n(int n, const uint8_t* panel, int64_t nb, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  switch (n) {
#define TRIAD_PANEL_TILE(N) \
  case N: tile<N, kType, kWide>(panel, nb, acts, y, ys, prefetch); return;
    TRIAD_PANEL_TILE(1) TRIAD_PANEL_TILE(2) TRIAD_PANEL_TILE(3) TRIAD_PANEL_TILE(4)
    TRIAD_PANEL_TILE(5) TRIAD_PANEL_TILE(6) TRIAD_PANEL_TILE(7) TRIAD_PANEL_TILE(8)
#undef TRIAD_PANEL_TILE
    default: isa_fail("panel tile of %d tokens", int(n));
  }
}

// A nibble-type panel widened into the wide format.
template <DType kType>
void widen(const uint8_t* panel, int64_t nb, uint8_t* out) {
  using F = Format<kType, false>;
  using W = Format<kType, true>;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t u = b / 2, n = std::min<int64_t>(2, nb - 2 * u), i = b & 1;
    const uint8_t* unit = panel + u * F::kUnitBytes;
    uint8_t* wunit = out + u * W::kUnitBytes;
    prefetch_step<F::kUnitBytes, 2>(unit, static_cast<int>(i));
    uint8_t* o = wunit + W::kCodes * i;
    for (int v = 0; v < 4; ++v) {
      __m512i lo, hi;
      widen_vector<F::kFifth, F::kTable>(F::codes(unit, n, i), F::masks(unit, n, i), v, lo, hi);
      _mm512_storeu_si512(o + 64 * v, lo);
      _mm512_storeu_si512(o + 64 * (v + 4), hi);
    }
    std::memcpy(const_cast<uint8_t*>(W::d(wunit, n, i)), F::d(unit, n, i), 32);
    if constexpr (F::kMins) std::memcpy(const_cast<uint8_t*>(W::m(wunit, n, i)), F::m(unit, n, i), 32);
  }
}

template <DType kType>
void run(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (r0 % kPanelRows != 0 || r1 % kPanelRows != 0) [[unlikely]]
    isa_fail("panel rows [%lld, %lld) are not whole panels", (long long)r0, (long long)r1);
  const int64_t nb = j.cols / 32;
  // The nibble types widen panels of many token tiles into the wide format, and Q3_K into its
  // scaled codes (widen_q3k), in the thread's kPanel scratch; Q8_0 tiles read codes where they
  // lie, the other K-quants' tiles decode theirs in registers.
  constexpr bool kQ3 = kType == DType::kQ3_K;
  constexpr bool kWidens = (kType != DType::kQ8_0 && !is_kquant(kType)) || kQ3;
  uint8_t* wide_panel = nullptr;
  if constexpr (kQ3) {
    wide_panel = kernel_scratch_bytes(ScratchSlot::kPanel, nb / 8 * kQ3kWideBlock);
  } else if constexpr (kWidens) {
    wide_panel = kernel_scratch_bytes(ScratchSlot::kPanel, (nb + 1) / 2 * Format<kType, true>::kUnitBytes);
  }
  // Token chunks whose gathered activations stay in L2 (~256 KiB) while every panel passes.
  const int64_t per_token = act_block_bytes(1) * nb;
  const int64_t chunk = std::max<int64_t>(kMaxT, (int64_t{256} << 10) / per_token / kMaxT * kMaxT);
  const int64_t abytes = std::min(chunk, t1 - t0) * per_token;
  uint8_t* const gathered = kernel_scratch_bytes(ScratchSlot::kActs, abytes);
  for (int64_t tc = t0; tc < t1; tc += chunk) {
    const int64_t te = std::min(t1, tc + chunk), n = te - tc;
    const int64_t parts = (n + kMaxT - 1) / kMaxT;  // token tiles of sizes within one of each other
    auto part = [&](int64_t p) { return tc + p * n / parts; };
    for (int64_t p = 0; p < parts; ++p)
      gather(j, part(p), static_cast<int>(part(p + 1) - part(p)), code_offset(kType), has_mins(kType),
             kType == DType::kQ6_K                              ? Starts::kHalves
             : kType == DType::kQ2_K || kType == DType::kQ3_K ? Starts::kPairs16
                                                               : Starts::kBlock,
             gathered + (part(p) - tc) * per_token);
    // Few token tiles widen codes in registers for each; more widen each panel once (Q3_K from
    // two tiles: its scaled codes cost more than a nibble's widening; every tile of two or more
    // has at least kQ3ScaledCodesFrom tokens).
    const bool widened = kWidens && parts > (kQ3 ? 1 : kInlineWidenTiles);
    {  // the first passes prefetch kPrefetchAhead bytes ahead: start the stream
      const uint8_t* first = j.w + static_cast<uint64_t>(r0) * j.row_bytes;
      const int64_t len = std::min<int64_t>(kPrefetchAhead, (r1 - r0) * static_cast<int64_t>(j.row_bytes));
      for (int64_t l = 0; l < len; l += 64) _mm_prefetch(reinterpret_cast<const char*>(first + l), _MM_HINT_T1);
    }
    for (int64_t r = r0; r < r1; r += kPanelRows) {
      const uint8_t* panel = j.w + static_cast<uint64_t>(r) * j.row_bytes;
      if constexpr (kQ3) {
        if (widened) widen_q3k(panel, nb / 8, wide_panel);
      } else if constexpr (kWidens) {
        if (widened) widen<kType>(panel, nb, wide_panel);
      }
      for (int64_t p = 0; p < parts; ++p) {
        const int nt = static_cast<int>(part(p + 1) - part(p));
        const uint8_t* acts = gathered + (part(p) - tc) * per_token;
        float* y = j.y + part(p) * j.y_stride + r;
        if constexpr (is_kquant(kType)) {
          ktile_n<kType>(nt, panel, nb / 8, acts, y, j.y_stride, !widened && p == 0, widened ? wide_panel : nullptr);
        } else if (widened) {
          tile_n<kType, true>(nt, wide_panel, nb, acts, y, j.y_stride, false);
        } else {
          tile_n<kType, false>(nt, panel, nb, acts, y, j.y_stride, p == 0);
        }
      }
    }
  }
}

}  // namespace

void matmul_rows_panels(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (j.type) {
    case DType::kQ4_0: run<DType::kQ4_0>(j, r0, r1, t0, t1); return;
    case DType::kQ4_1: run<DType::kQ4_1>(j, r0, r1, t0, t1); return;
    case DType::kQ5_0: run<DType::kQ5_0>(j, r0, r1, t0, t1); return;
    case DType::kQ5_1: run<DType::kQ5_1>(j, r0, r1, t0, t1); return;
    case DType::kQ8_0: run<DType::kQ8_0>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_NL: run<DType::kIQ4_NL>(j, r0, r1, t0, t1); return;
    case DType::kQ4_K: run<DType::kQ4_K>(j, r0, r1, t0, t1); return;
    case DType::kQ5_K: run<DType::kQ5_K>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_XS: run<DType::kIQ4_XS>(j, r0, r1, t0, t1); return;
    case DType::kQ6_K: run<DType::kQ6_K>(j, r0, r1, t0, t1); return;
    case DType::kQ2_K: run<DType::kQ2_K>(j, r0, r1, t0, t1); return;
    case DType::kQ3_K: run<DType::kQ3_K>(j, r0, r1, t0, t1); return;
    default: {
      const std::string_view name = dtype_name(j.type);
      isa_fail("no panel kernels for %.*s", int(name.size()), name.data());
    }
  }
}

}  // namespace triad::kernels::avx512
