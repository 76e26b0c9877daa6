// AVX2 (FMA, F16C) kernels for weights in the panel layout (panel_layout.h): Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS, Q2_K and Q3_K in panels of 16 rows (the types
// the AVX-512 panel kernels run), every token count through one tile, so a row's bits never
// depend on the batch.
//
// The AVX-512 panel kernels (matmul_panels_avx512.cpp) with 8 rows per 256-bit vector and
// without VNNI: lane r of every vector is row 8h + r of half h of the panel. For each block b
// and each code vector k (4 bytes of each of the 8 rows), one vpmaddubsw per token with the
// token's 4 activation bytes broadcast gives 16 int16 pair sums; four of them are added in
// int16 and one vpmaddwd(1) makes 8 int32 row sums:
// - Q4_0 / Q4_1 / Q5_0 / Q5_1: unsigned codes <= 31, so |4 x pair| <= 4 * 2 * 31 * 128 < 2^15
//   (no saturation); sums start at -offset * sum(xq) (Q4_0 8, Q5_0 16; minimums otherwise).
// - Q8_0 and IQ4_NL (its nibbles looked up as signed values): vpmaddubsw(|w|, sign(xq, w))
//   (|w| <= 128, |xq| <= 127: no saturation), one vpmaddwd per code vector.
// Then per block, as every panel kernel: acc += float(isum) * fl(d * dx) (+ m * xs), in f32,
// in block order: the AVX-512 panel kernels' arithmetic, so both give the same bits.
// A tile is T <= 4 tokens x one half panel, or x both halves when T <= 2. The unsigned types'
// codes are decoded in registers when a panel has one token tile (decode), else the panel is
// widened once (512 code bytes per block, then d and m) into the thread's scratch, from which
// every tile loads four code vectors at a time and holds them in registers across its tokens
// (batched decode, prompts); the signed types decode in registers.
// Thread-safety: writes only the outputs of its rows and tokens; scratch is thread-local.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/isa_error.h"
#include "kernels/matmul_impl.h"
#include "kernels/panel_gather.h"
#include "kernels/panel_layout.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels {
namespace avx2 {
namespace {

constexpr int kMaxT = 4;  // tokens per tile

constexpr bool is_kquant(DType t) {
  return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kIQ4_XS || t == DType::kQ2_K ||
         t == DType::kQ3_K;
}

template <DType kType>
struct Type {
  static constexpr bool kSigned = kType == DType::kQ8_0 || kType == DType::kIQ4_NL;
  static constexpr bool kFifth = kType == DType::kQ5_0 || kType == DType::kQ5_1;
  static constexpr bool kMins = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  static constexpr int kOff = kType == DType::kQ4_0 ? 8 : kType == DType::kQ5_0 ? 16 : 0;
  // The panel layout's parts (panel_layout.h), per block of a unit of n blocks.
  static constexpr int64_t kCodes = kType == DType::kQ8_0 ? 512 : 256, kMasks = kFifth ? 64 : 0;
  static constexpr int64_t kUnitBytes = 2 * (kCodes + kMasks + 32 + (kMins ? 32 : 0));
  // The wide format (unsigned types): per block 512 code bytes, 16 fp16 d, (16 fp16 m).
  static constexpr int64_t kWideBlock = 512 + 32 + (kMins ? 32 : 0);
};

// Pins an accumulator in its register at this point. Integer adds are associative, so GCC
// otherwise reassociates a tile's int32 sums into a tree: it computed every product of a Q8_0 block
// first and spilled them (182 stack operands in the 4-token tile).
__attribute__((always_inline)) inline void pin(__m256i& v) { asm("" : "+x"(v)); }

// IQ4_NL's values (signed bytes): a vpshufb table in both lanes.
inline __m256i iq4nl_table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// 0x10 in byte i where bit i of the 32 bits at p (little-endian) is set. The bits are
// broadcast straight from memory (vpbroadcastd m32: a load, no vector ALU op).
inline __m256i bits_to_0x10(const uint8_t* p) {
  int32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel), _mm256_set1_epi8(0x10));
}

// Where block i of a unit of n blocks keeps its parts, in the panel layout or (kWide) in the
// wide format (unit = the block, n = 1, i = 0).
template <DType kType, bool kWide>
struct Parts {
  using Y = Type<kType>;
  static const uint8_t* codes(const uint8_t* unit, int64_t i) { return unit + (kWide ? 0 : Y::kCodes * i); }
  static const uint8_t* masks(const uint8_t* unit, int64_t n, int64_t i) { return unit + n * Y::kCodes + Y::kMasks * i; }
  static const uint8_t* d(const uint8_t* unit, int64_t n, int64_t i) {
    return kWide ? unit + 512 : unit + n * (Y::kCodes + Y::kMasks) + 32 * i;
  }
  static const uint8_t* m(const uint8_t* unit, int64_t n, int64_t i) {
    return kWide ? unit + 544 : unit + n * (Y::kCodes + Y::kMasks + 32) + 32 * i;
  }
};

// Code vectors v (low nibbles: code vector v) and v + 4 (high nibbles) of half h of a nibble
// block: unsigned codes, or IQ4_NL's signed values.
template <DType kType>
__attribute__((always_inline)) inline void nibble_vectors(const uint8_t* codes, const uint8_t* masks, int v, int h,
                                                          __m256i& lo, __m256i& hi) {
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * v + 32 * h));
  lo = _mm256_and_si256(q, lo4);
  hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4);
  if constexpr (kType == DType::kIQ4_NL) {
    lo = _mm256_shuffle_epi8(iq4nl_table(), lo);
    hi = _mm256_shuffle_epi8(iq4nl_table(), hi);
  }
  if constexpr (Type<kType>::kFifth) {
    // Code vector v's 64 fifth bits: half h's are bits 32h.. (bytes 4h..4h+3).
    lo = _mm256_or_si256(lo, bits_to_0x10(masks + 8 * v + 4 * h));
    hi = _mm256_or_si256(hi, bits_to_0x10(masks + 8 * (v + 4) + 4 * h));
  }
}

// One block of a tile of T tokens x NH halves from half h0: parts of block i of a unit of n
// blocks (Parts<kType, kWide>), a: the tile's gathered activations for the block.
template <int T, int NH, DType kType, bool kWide>
__attribute__((always_inline)) inline void block(const uint8_t* unit, int64_t n, int64_t i, int h0, const uint8_t* a,
                                                 __m256 (&acc)[NH][T]) {
  using Y = Type<kType>;
  using P = Parts<kType, kWide>;
  const int32_t* start = reinterpret_cast<const int32_t*>(a + 32 * T);
  const float* dx = reinterpret_cast<const float*>(a + 36 * T);
  const float* xs = reinterpret_cast<const float*>(a + 40 * T);
  const __m256i ones = _mm256_set1_epi16(1);
  auto x4 = [&](int t, int k) {
    int32_t v;
    std::memcpy(&v, a + 32 * t + 4 * k, 4);
    return _mm256_set1_epi32(v);
  };
  const uint8_t* codes = P::codes(unit, i);
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh) {
    const int h = h0 + hh;
    __m256i is[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) is[t] = _mm256_set1_epi32(start[t]);
    if constexpr (Y::kSigned) {
      // vpmaddubsw(|w|, sign(xq, w)) per code vector k.
      auto dot = [&](int k, __m256i w) {
        const __m256i wa = _mm256_abs_epi8(w);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(x4(t, k), w)), ones));
          pin(is[t]);
        }
      };
      if constexpr (kType == DType::kQ8_0) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)
          dot(k, _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 64 * k + 32 * h)),
                                  _mm256_set1_epi8(static_cast<char>(0x80))));
      } else {
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          __m256i lo, hi;
          nibble_vectors<kType>(codes, nullptr, v, h, lo, hi);
          dot(v, lo);
          dot(v + 4, hi);
        }
      }
    } else if constexpr (kWide) {
      // Code vectors 0..3, then 4..7, held in registers while every token's broadcasts meet
      // them: four pair sums added in int16, one vpmaddwd per token and group.
      auto w = [&](int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * k + 32 * h)); };
#pragma GCC unroll 2
      for (int g = 0; g < 2; ++g) {
        const int k = 4 * g;
        const __m256i w0 = w(k), w1 = w(k + 1), w2 = w(k + 2), w3 = w(k + 3);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i s = _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w0, x4(t, k)), _mm256_maddubs_epi16(w1, x4(t, k + 1))),
                                             _mm256_add_epi16(_mm256_maddubs_epi16(w2, x4(t, k + 2)), _mm256_maddubs_epi16(w3, x4(t, k + 3))));
          is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(s, ones));
          pin(is[t]);
        }
      }
    } else {
      // Nibble vectors {0, 1}, then {2, 3}: code vectors v and v + 4 each, four pair sums.
      const uint8_t* masks = Y::kFifth ? P::masks(unit, n, i) : nullptr;
#pragma GCC unroll 2
      for (int g = 0; g < 2; ++g) {
        __m256i s[T];
#pragma GCC unroll 2
        for (int v = 2 * g; v < 2 * g + 2; ++v) {
          __m256i lo, hi;
          nibble_vectors<kType>(codes, masks, v, h, lo, hi);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x4(t, v)), _mm256_maddubs_epi16(hi, x4(t, v + 4)));
            s[t] = v == 2 * g ? p : _mm256_add_epi16(s[t], p);
            pin(s[t]);
          }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(s[t], ones));
          pin(is[t]);
        }
      }
    }
    const __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P::d(unit, n, i) + 16 * h)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[t]), _mm256_mul_ps(ws, _mm256_set1_ps(dx[t])), acc[hh][t]);
    if constexpr (Y::kMins) {
      const __m256 mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P::m(unit, n, i) + 16 * h)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[hh][t] = _mm256_fmadd_ps(mn, _mm256_set1_ps(xs[t]), acc[hh][t]);
    }
  }
}

// Rows 8 h0 .. 8 (h0 + NH) of one panel x T tokens: y[t * ys + r - 8 h0]. The panel is in
// kType's layout, or with kWide in the wide format.
template <int T, int NH, DType kType, bool kWide>
void tile(const uint8_t* panel, int64_t nb, int h0, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  using Y = Type<kType>;
  constexpr int64_t kAB = act_block_bytes(T);
  __m256 acc[NH][T];
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[hh][t] = _mm256_setzero_ps();
  if constexpr (kWide) {
    for (int64_t b = 0; b < nb; ++b) block<T, NH, kType, true>(panel + b * Y::kWideBlock, 1, 0, h0, acts + b * kAB, acc);
  } else {
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const uint8_t* unit = panel + (b / 2) * Y::kUnitBytes;
      if (prefetch) prefetch_step<Y::kUnitBytes, 2>(unit, 0);
      block<T, NH, kType, false>(unit, 2, 0, h0, acts + b * kAB, acc);
      if (prefetch) prefetch_step<Y::kUnitBytes, 2>(unit, 1);
      block<T, NH, kType, false>(unit, 2, 1, h0, acts + (b + 1) * kAB, acc);
    }
    if (b < nb) block<T, NH, kType, false>(panel + (b / 2) * Y::kUnitBytes, 1, 0, h0, acts + b * kAB, acc);
  }
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ys + 8 * hh, acc[hh][t]);
}

// The 16 rows of one panel x n <= kMaxT tokens: both halves in one tile up to 2 tokens.
template <DType kType, bool kWide>
void panel_tiles(int n, const uint8_t* panel, int64_t nb, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  switch (n) {
    case 1: tile<1, 2, kType, kWide>(panel, nb, 0, acts, y, ys, prefetch); return;
    case 2: tile<2, 2, kType, kWide>(panel, nb, 0, acts, y, ys, prefetch); return;
    case 3:
      tile<3, 1, kType, kWide>(panel, nb, 0, acts, y, ys, prefetch);
      tile<3, 1, kType, kWide>(panel, nb, 1, acts, y + 8, ys, false);
      return;
    case 4:
      tile<4, 1, kType, kWide>(panel, nb, 0, acts, y, ys, prefetch);
      tile<4, 1, kType, kWide>(panel, nb, 1, acts, y + 8, ys, false);
      return;
    default: isa_fail("panel tile of %d tokens", int(n));
  }
}

// ---- The K-quants Q4_K and Q6_K (panel_layout.h): one super-block of a tile of T tokens x NH
// halves from half h0; a points at the gathered activations of its first 32-block (8 follow at
// act_block_bytes(T) each). The AVX-512 kernels' arithmetic (matmul_panels_avx512.cpp q45k_block,
// q6k_block), so both give the same bits.

// Q4_K / Q5_K (kFifth): per chunk c, sub-blocks 2c (low nibbles) and 2c + 1 (high; Q5_K: the
// fifth bits ORed in from its masks). Q4_K's codes <= 15: eight pair sums added in int16
// (8 * 2 * 15 * 128 < 2^15), one vpmaddwd per sub-block; Q5_K's <= 31: four, two vpmaddwd. Then
// per sub-block g: acc += isum * fl(fl(d * sc_g) * dx) and acc -= fl(dmin * mn_g) * xs.
template <int T, int NH, bool kFifth>
__attribute__((always_inline)) inline void q45k_block(const uint8_t* blk, int h0, const uint8_t* a, __m256 (&acc)[NH][T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  constexpr int64_t kAt = kFifth ? 512 : 0;  // the scales follow Q5_K's masks
  const __m256i lo4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi16(1);
  // The 8 sub-blocks' 6-bit scales and minimums, byte 16g + r of sc / mn.
  alignas(32) uint8_t sc[128], mn[128];
  for (int q = 0; q < 2; ++q) {
    auto ld = [&](int64_t o) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + o + 32 * q)); };
    auto st = [&](uint8_t* o, __m256i low4, __m256i high_at_4) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(o + 32 * q), _mm256_or_si256(low4, _mm256_and_si256(high_at_4, hi2)));
    };
    const __m256i l03 = ld(kAt + 2048), l47 = ld(kAt + 2112), hg = ld(kAt + 2176);
    st(sc, _mm256_and_si256(l03, lo4), _mm256_slli_epi16(hg, 4));
    st(sc + 64, _mm256_and_si256(l47, lo4), hg);
    st(mn, _mm256_and_si256(_mm256_srli_epi16(l03, 4), lo4), _mm256_slli_epi16(hg, 2));
    st(mn + 64, _mm256_and_si256(_mm256_srli_epi16(l47, 4), lo4), _mm256_srli_epi16(hg, 2));
  }
  auto lanes = [](const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  };
  for (int c = 0; c < 4; ++c) {
    const uint8_t* a0 = a + 2 * c * kAB;
    const uint8_t* a1 = a0 + kAB;
#pragma GCC unroll 2
    for (int hh = 0; hh < NH; ++hh) {
      const int h = h0 + hh;
      __m256i s0[T], s1[T];    // int16 pair sums
      __m256i is0[T], is1[T];  // Q5_K: the first four vectors' sums, int32
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        if (pf) prefetch_step<kFifth ? kQ5kPanelBlock : kQ4kPanelBlock, 32 * NH>(pf, (NH * c + hh) * 8 + v);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 512 * c + 64 * v + 32 * h));
        __m256i lo = _mm256_and_si256(q, lo4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4);
        if constexpr (kFifth) {
          lo = _mm256_or_si256(lo, bits_to_0x10(blk + 2048 + 64 * (2 * c) + 8 * v + 4 * h));
          hi = _mm256_or_si256(hi, bits_to_0x10(blk + 2048 + 64 * (2 * c + 1) + 8 * v + 4 * h));
        }
        const bool first = kFifth ? v % 4 == 0 : v == 0;
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          int32_t x0, x1;
          std::memcpy(&x0, a0 + 32 * t + 4 * v, 4);
          std::memcpy(&x1, a1 + 32 * t + 4 * v, 4);
          const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_set1_epi32(x0));
          const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_set1_epi32(x1));
          s0[t] = first ? p0 : _mm256_add_epi16(s0[t], p0);
          s1[t] = first ? p1 : _mm256_add_epi16(s1[t], p1);
          pin(s0[t]);
          pin(s1[t]);
        }
        if constexpr (kFifth) {
          if (v == 3) {
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              is0[t] = _mm256_madd_epi16(s0[t], ones);
              is1[t] = _mm256_madd_epi16(s1[t], ones);
            }
          }
        }
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kAt + 2240 + 16 * h)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kAt + 2272 + 16 * h)));
      auto add = [&](int g, const uint8_t* ag, const __m256i (&s)[T], const __m256i (&first4)[T]) {
        const __m256 ws = _mm256_mul_ps(d, lanes(sc + 16 * g + 8 * h)), wm = _mm256_mul_ps(dmin, lanes(mn + 16 * g + 8 * h));
        const float* dx = reinterpret_cast<const float*>(ag + 36 * T);
        const float* xs = reinterpret_cast<const float*>(ag + 40 * T);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          __m256i sum = _mm256_madd_epi16(s[t], ones);
          if constexpr (kFifth) sum = _mm256_add_epi32(first4[t], sum);
          const __m256 is = _mm256_cvtepi32_ps(sum);
          acc[hh][t] = _mm256_fmadd_ps(is, _mm256_mul_ps(ws, _mm256_set1_ps(dx[t])), acc[hh][t]);
          acc[hh][t] = _mm256_fnmadd_ps(wm, _mm256_set1_ps(xs[t]), acc[hh][t]);
        }
      };
      add(2 * c, a0, s0, is0);
      add(2 * c + 1, a1, s1, is1);
    }
  }
}

// Code vectors c0, c1 against token t's activation bytes 4v .. 4v + 7 of a gathered block ab
// (panel_gather.h): their two vpmaddubsw, added in int16.
__attribute__((always_inline)) inline __m256i pair_products(__m256i c0, __m256i c1, const uint8_t* ab, int t, int v) {
  int32_t x0, x1;
  std::memcpy(&x0, ab + 32 * t + 4 * v, 4);
  std::memcpy(&x1, ab + 32 * t + 4 * v + 4, 4);
  return _mm256_add_epi16(_mm256_maddubs_epi16(c0, _mm256_set1_epi32(x0)), _mm256_maddubs_epi16(c1, _mm256_set1_epi32(x1)));
}

// Q6_K code vector v (0..7) of 32-block 4 hq + 2 hi + p, rows of half h (the AVX-512 q6k_code).
__attribute__((always_inline)) inline __m256i q6k_code(const uint8_t* codes, int hq, int p, int hi, int v, int h) {
  const __m256i lo4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30);
  const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 1024 * hq + 64 * (v + 8 * p) + 32 * h));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 2048 + 512 * hq + 64 * v + 32 * h));
  const __m256i low = hi ? _mm256_srli_epi16(ql, 4) : ql;
  const __m256i high = hi ? (p ? _mm256_srli_epi16(qh, 2) : qh) : (p ? _mm256_slli_epi16(qh, 2) : _mm256_slli_epi16(qh, 4));
  return _mm256_or_si256(_mm256_and_si256(low, lo4), _mm256_and_si256(high, hi2));
}

// Q6_K: 32-block by 32-block, each sub-block of 16 (4 code vectors, codes <= 63: two pair sums
// added in int16, 2 * 2 * 63 * 128 < 2^15) started at -32 * its codes' sum; then
// f = isum0 * ws0 + isum1 * ws1 (ws = fl(d * sc)) and acc += f * dx.
template <int T, int NH>
__attribute__((always_inline)) inline void q6k_block(const uint8_t* codes, const uint8_t* scales, const uint8_t* dp, int h0,
                                                     const uint8_t* a, __m256 (&acc)[NH][T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh) {
    const int h = h0 + hh;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dp + 16 * h)));
    for (int hq = 0; hq < 2; ++hq) {
#pragma GCC unroll 2
      for (int hi = 0; hi < 2; ++hi) {
#pragma GCC unroll 2
        for (int p = 0; p < 2; ++p) {
          const int b = 4 * hq + 2 * hi + p;
          const uint8_t* ab = a + b * kAB;
          const float* dx = reinterpret_cast<const float*>(ab + 36 * T);
          __m256 f[T];
#pragma GCC unroll 2
          for (int sub = 0; sub < 2; ++sub) {
            __m256i is[T];
            const int32_t* start = reinterpret_cast<const int32_t*>(ab + (sub ? 40 : 32) * T);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) is[t] = _mm256_set1_epi32(start[t]);
#pragma GCC unroll 2
            for (int v = 4 * sub; v < 4 * sub + 4; v += 2) {
              if (pf) prefetch_step<kQ6kPanelBlock, 32 * NH>(pf, 32 * hh + 4 * b + v / 2);
              const __m256i c0 = q6k_code(codes, hq, p, hi, v, h), c1 = q6k_code(codes, hq, p, hi, v + 1, h);
#pragma GCC unroll 4
              for (int t = 0; t < T; ++t)
                is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(pair_products(c0, c1, ab, t, v), ones));
            }
            const __m256 ws = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                   _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 32 * b + 16 * sub + 8 * h)))));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
              f[t] = sub == 0 ? _mm256_mul_ps(_mm256_cvtepi32_ps(is[t]), ws) : _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[t]), ws, f[t]);
          }
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) acc[hh][t] = _mm256_fmadd_ps(f[t], _mm256_set1_ps(dx[t]), acc[hh][t]);
        }
      }
    }
  }
}

// IQ4_XS: per sub-block g (a 32-block), as IQ4_NL's tiles (the nibbles looked up as signed
// values, vpmaddubsw(|w|, sign(xq, w))) with ws = fl(d * (ls_g - 32)).
template <int T, int NH>
__attribute__((always_inline)) inline void iq4xs_block(const uint8_t* blk, int h0, const uint8_t* a, __m256 (&acc)[NH][T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  const __m256i lo4 = _mm256_set1_epi8(0x0F), hi2 = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi16(1);
  alignas(32) uint8_t ls[128];  // byte 16g + r: row r's ls_g
  {
    auto ld = [&](int64_t o) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + o)); };
    auto st = [&](int64_t o, __m256i low4, __m256i high_at_4) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(ls + o), _mm256_or_si256(low4, _mm256_and_si256(high_at_4, hi2)));
    };
    const __m256i l0 = ld(2048), l1 = ld(2080), hg = ld(2112);
    st(0, _mm256_and_si256(l0, lo4), _mm256_slli_epi16(hg, 4));   // g = 0, 1
    st(32, _mm256_and_si256(l1, lo4), _mm256_slli_epi16(hg, 2));  // g = 2, 3
    st(64, _mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4), hg);  // g = 4, 5
    st(96, _mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4), _mm256_srli_epi16(hg, 2));  // g = 6, 7
  }
  const __m256 bias = _mm256_set1_ps(32.f);
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh) {
    const int h = h0 + hh;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2144 + 16 * h)));
    for (int g = 0; g < 8; ++g) {
      const uint8_t* ag = a + g * kAB;
      const float* dx = reinterpret_cast<const float*>(ag + 36 * T);
      __m256i is[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) is[t] = _mm256_setzero_si256();
      auto dot = [&](int k, __m256i w) {
        const __m256i wa = _mm256_abs_epi8(w);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          int32_t x;
          std::memcpy(&x, ag + 32 * t + 4 * k, 4);
          is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(_mm256_set1_epi32(x), w)), ones));
        }
      };
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        if (pf) prefetch_step<kIq4xsPanelBlock, 32 * NH>(pf, (8 * hh + g) * 4 + v);
        __m256i lo, hi;
        nibble_vectors<DType::kIQ4_NL>(blk + 256 * g, nullptr, v, h, lo, hi);
        dot(v, lo);
        dot(v + 4, hi);
      }
      const __m256 ws = _mm256_mul_ps(
          d, _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ls + 16 * g + 8 * h)))),
                           bias));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t)
        acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[t]), _mm256_mul_ps(ws, _mm256_set1_ps(dx[t])), acc[hh][t]);
    }
  }
}

// ---- Q2_K and Q3_K (panel_layout.h): one super-block of a tile of T tokens x NH halves from
// half h0, 32-block by 32-block (s = 4n + k: Q2_K's codes are bits 2k of the qs bytes of half
// n; Q3_K's are fields of the 32-block's three vectors).
// The codes and gathered activations go in pairs (panel_layout.h), so the 8 vpmaddubsw of a
// 32-block add up in int16 (codes <= 7: 8 * 2 * 7 * 128 < 2^15) into each row's sum over its
// first sub-block (even int16) and over its second (odd), and one vpmaddwd with the row's scale
// pair makes sc0 * isum0 + sc1 * isum1: a 32-block's scaled sum is one exact integer (the
// reference multiplies each sub-block's isum by fl(d * sc) in float: the same sum up to rounding):
// - Q3_K: I = sum over both sub-blocks of (sc - 32) * (sum code * xq - 4 * sum xq), the offset
//   term one vpmaddwd of the scale pair with the gathered (-4 S0, -4 S1); acc += I * fl(d * dx).
// - Q2_K: I = sc0 isum0 + sc1 isum1, M = -(mn0 S0 + mn1 S1) (one vpmaddwd of the minimum pair
//   with the gathered (-S0, -S1)); acc += I * fl(d * dx), then acc += M * fl(dmin * dx).
template <int T, int NH, bool kQ3>
__attribute__((always_inline)) inline void q23k_block(const uint8_t* blk, int h0, const uint8_t* a, __m256 (&acc)[NH][T], const uint8_t* pf) {
  constexpr int64_t kAB = act_block_bytes(T);
  const __m256i three = _mm256_set1_epi8(3);
  [[maybe_unused]] const __m256i four = _mm256_set1_epi8(4), seven = _mm256_set1_epi8(7);
  const __m128i lo4 = _mm_set1_epi8(0x0F);
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh) {
    const int h = h0 + hh;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (kQ3 ? 1728 : 1280) + 16 * h)));
    [[maybe_unused]] __m256 dmin;
    if constexpr (!kQ3) dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 1312 + 16 * h)));
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const int n = s / 4, k = s % 4;
      const uint8_t* ab = a + s * kAB;
      const int32_t* start = reinterpret_cast<const int32_t*>(ab + 32 * T);
      const float* dx = reinterpret_cast<const float*>(ab + 36 * T);
      auto ld128 = [&](int64_t o) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + o + 16 * h)); };
      // Row 8h + q's two sub-block scales (Q3_K: less 32) as the int16 pair of lane q.
      __m256i scales;
      [[maybe_unused]] __m256i mins;
      if constexpr (kQ3) {  // the 6-bit scale: 4 bits of the lows, 2 of the highs (panel_layout.h)
        const __m128i l = _mm_and_si128(_mm_srli_epi16(ld128(1536 + 32 * (s % 4)), 4 * (s / 4)), lo4);
        const __m128i hb = ld128(1664 + 32 * (s % 2));
        const int up = 4 - 2 * (s / 2);  // bits 2 (s / 2) of a highs byte to bit 4
        const __m128i hi = _mm_and_si128(up >= 0 ? _mm_slli_epi16(hb, up) : _mm_srli_epi16(hb, -up), _mm_set1_epi8(0x30));
        scales = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(l, hi), _mm_set1_epi8(32)));
      } else {
        const __m128i raw = ld128(1024 + 32 * s);
        scales = _mm256_cvtepu8_epi16(_mm_and_si128(raw, lo4));
        mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), lo4));
      }
      // Code vector v (0..7) of this 32-block.
      auto code = [&](int v) {
        if constexpr (kQ3) {  // c0..c5 a 3-bit field of A, B or C; c6, c7 bits of two (panel_layout.h)
          auto abc = [&](int i) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 192 * s + 64 * i + 32 * h)); };
          if (v < 6) {
            const __m256i x = abc(v / 2);
            return _mm256_and_si256(v % 2 ? _mm256_srli_epi16(x, 3) : x, seven);
          }
          return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(abc(v - 6), 6), three),
                                 _mm256_and_si256(_mm256_srli_epi16(abc(2), v - 2), four));
        } else {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * (8 * n + v) + 32 * h));
          return _mm256_and_si256(k ? _mm256_srli_epi16(q, 2 * k) : q, three);
        }
      };
      __m256i s16[T];
#pragma GCC unroll 4
      for (int v = 0; v < 8; v += 2) {
        if (pf) prefetch_step<kQ3 ? kQ3kPanelBlock : kQ2kPanelBlock, 32 * NH>(pf, (8 * hh + s) * 4 + v / 2);
        const __m256i c0 = code(v), c1 = code(v + 1);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i p = pair_products(c0, c1, ab, t, v);
          s16[t] = v == 0 ? p : _mm256_add_epi16(s16[t], p);
          pin(s16[t]);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256i is = _mm256_madd_epi16(s16[t], scales);
        if constexpr (kQ3) is = _mm256_add_epi32(is, _mm256_madd_epi16(scales, _mm256_set1_epi32(start[t])));
        const __m256 x = _mm256_set1_ps(dx[t]);
        acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(d, x), acc[hh][t]);
        if constexpr (!kQ3) {
          const __m256i m = _mm256_madd_epi16(mins, _mm256_set1_epi32(start[t]));
          acc[hh][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, x), acc[hh][t]);
        }
      }
    }
  }
}

// Rows 8 h0 .. 8 (h0 + NH) of one K-quant panel x T tokens (ns super-blocks).
template <int T, int NH, DType kType>
void ktile(const uint8_t* panel, int64_t ns, int h0, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  constexpr int64_t kSB = 8 * act_block_bytes(T);  // a super-block's gathered activations
  __m256 acc[NH][T];
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[hh][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < ns; ++b) {
    if constexpr (kType == DType::kQ4_K || kType == DType::kQ5_K) {
      constexpr bool kFifth = kType == DType::kQ5_K;
      constexpr int64_t kBlock = kFifth ? kQ5kPanelBlock : kQ4kPanelBlock;
      const uint8_t* blk = panel + kBlock * b;
      q45k_block<T, NH, kFifth>(blk, h0, acts + b * kSB, acc, prefetch ? blk : nullptr);
    } else if constexpr (kType == DType::kQ2_K || kType == DType::kQ3_K) {
      constexpr bool kQ3 = kType == DType::kQ3_K;
      constexpr int64_t kBlock = kQ3 ? kQ3kPanelBlock : kQ2kPanelBlock;
      const uint8_t* blk = panel + kBlock * b;
      q23k_block<T, NH, kQ3>(blk, h0, acts + b * kSB, acc, prefetch ? blk : nullptr);
    } else if constexpr (kType == DType::kIQ4_XS) {
      const uint8_t* blk = panel + kIq4xsPanelBlock * b;
      iq4xs_block<T, NH>(blk, h0, acts + b * kSB, acc, prefetch ? blk : nullptr);
    } else {
      const int64_t u = b / 2, n = std::min<int64_t>(2, ns - 2 * u), i = b - 2 * u;
      const uint8_t* unit = panel + 2 * kQ6kPanelBlock * u;
      q6k_block<T, NH>(unit + 3072 * i, unit + 3072 * n + 256 * i, unit + 3328 * n + 32 * i, h0, acts + b * kSB, acc,
                       prefetch ? unit + kQ6kPanelBlock * i : nullptr);
    }
  }
#pragma GCC unroll 2
  for (int hh = 0; hh < NH; ++hh)
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ys + 8 * hh, acc[hh][t]);
}

template <DType kType>
void panel_ktiles(int n, const uint8_t* panel, int64_t ns, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  switch (n) {
    case 1: ktile<1, 2, kType>(panel, ns, 0, acts, y, ys, prefetch); return;
    case 2: ktile<2, 2, kType>(panel, ns, 0, acts, y, ys, prefetch); return;
    case 3:
      ktile<3, 1, kType>(panel, ns, 0, acts, y, ys, prefetch);
      ktile<3, 1, kType>(panel, ns, 1, acts, y + 8, ys, false);
      return;
    case 4:
      ktile<4, 1, kType>(panel, ns, 0, acts, y, ys, prefetch);
      ktile<4, 1, kType>(panel, ns, 1, acts, y + 8, ys, false);
      return;
    default: isa_fail("panel tile of %d tokens", int(n));
  }
}

// An unsigned type's panel widened into the wide format.
template <DType kType>
void widen(const uint8_t* panel, int64_t nb, uint8_t* out) {
  using Y = Type<kType>;
  using P = Parts<kType, false>;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t u = b / 2, n = std::min<int64_t>(2, nb - 2 * u), i = b & 1;
    const uint8_t* unit = panel + u * Y::kUnitBytes;
    uint8_t* o = out + b * Y::kWideBlock;
    prefetch_step<Y::kUnitBytes, 2>(unit, static_cast<int>(i));
    const uint8_t* masks = Y::kFifth ? P::masks(unit, n, i) : nullptr;
    for (int h = 0; h < 2; ++h)
      for (int v = 0; v < 4; ++v) {
        __m256i lo, hi;
        nibble_vectors<kType>(P::codes(unit, i), masks, v, h, lo, hi);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o + 64 * v + 32 * h), lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o + 64 * (v + 4) + 32 * h), hi);
      }
    std::memcpy(o + 512, P::d(unit, n, i), 32);
    if constexpr (Y::kMins) std::memcpy(o + 544, P::m(unit, n, i), 32);
  }
}

template <DType kType>
void run(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  using Y = Type<kType>;
  if (r0 % kPanelRows != 0 || r1 % kPanelRows != 0) [[unlikely]]
    isa_fail("panel rows [%lld, %lld) are not whole panels", (long long)r0, (long long)r1);
  const int64_t nb = j.cols / 32;
  // The unsigned 32-block types widen panels of several token tiles (into the thread's
  // kPanel scratch); the signed types and the K-quants decode their codes in every tile.
  constexpr bool kWidens = !Y::kSigned && !is_kquant(kType);
  uint8_t* const wide_panel = kWidens ? kernel_scratch_bytes(ScratchSlot::kPanel, nb * Y::kWideBlock) : nullptr;
  // The offsets the gathered starts remove (Q2_K: its minimums, subtracted; panel_gather.h).
  constexpr int code_offset = kType == DType::kQ6_K ? 32 : kType == DType::kQ3_K ? 4 : kType == DType::kQ2_K ? 1 : Y::kOff;
  constexpr Starts starts = kType == DType::kQ6_K                              ? Starts::kHalves
                            : kType == DType::kQ2_K || kType == DType::kQ3_K ? Starts::kPairs16
                                                                              : Starts::kBlock;
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
      gather(j, part(p), static_cast<int>(part(p + 1) - part(p)), code_offset, Y::kMins || kType == DType::kQ4_K || kType == DType::kQ5_K,
             starts, gathered + (part(p) - tc) * per_token);
    const bool widened = kWidens && parts > 1;
    {  // the first passes prefetch kPrefetchAhead bytes ahead: start the stream
      const uint8_t* first = j.w + static_cast<uint64_t>(r0) * j.row_bytes;
      const int64_t len = std::min<int64_t>(kPrefetchAhead, (r1 - r0) * static_cast<int64_t>(j.row_bytes));
      for (int64_t l = 0; l < len; l += 64) _mm_prefetch(reinterpret_cast<const char*>(first + l), _MM_HINT_T1);
    }
    for (int64_t r = r0; r < r1; r += kPanelRows) {
      const uint8_t* panel = j.w + static_cast<uint64_t>(r) * j.row_bytes;
      if constexpr (kWidens)
        if (widened) widen<kType>(panel, nb, wide_panel);
      for (int64_t p = 0; p < parts; ++p) {
        const int nt = static_cast<int>(part(p + 1) - part(p));
        const uint8_t* acts = gathered + (part(p) - tc) * per_token;
        float* y = j.y + part(p) * j.y_stride + r;
        if constexpr (is_kquant(kType)) {
          panel_ktiles<kType>(nt, panel, nb / 8, acts, y, j.y_stride, p == 0);
        } else if (widened) {
          if constexpr (kWidens) panel_tiles<kType, true>(nt, wide_panel, nb, acts, y, j.y_stride, false);
        } else {
          panel_tiles<kType, false>(nt, panel, nb, acts, y, j.y_stride, p == 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace avx2

void matmul_rows_panels_avx2(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  using namespace avx2;
  switch (j.type) {
    case DType::kQ4_0: run<DType::kQ4_0>(j, r0, r1, t0, t1); return;
    case DType::kQ4_1: run<DType::kQ4_1>(j, r0, r1, t0, t1); return;
    case DType::kQ5_0: run<DType::kQ5_0>(j, r0, r1, t0, t1); return;
    case DType::kQ5_1: run<DType::kQ5_1>(j, r0, r1, t0, t1); return;
    case DType::kQ8_0: run<DType::kQ8_0>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_NL: run<DType::kIQ4_NL>(j, r0, r1, t0, t1); return;
    case DType::kQ4_K: run<DType::kQ4_K>(j, r0, r1, t0, t1); return;
    case DType::kQ5_K: run<DType::kQ5_K>(j, r0, r1, t0, t1); return;
    case DType::kQ6_K: run<DType::kQ6_K>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_XS: run<DType::kIQ4_XS>(j, r0, r1, t0, t1); return;
    case DType::kQ2_K: run<DType::kQ2_K>(j, r0, r1, t0, t1); return;
    case DType::kQ3_K: run<DType::kQ3_K>(j, r0, r1, t0, t1); return;
    default: {
      const std::string_view name = dtype_name(j.type);
      isa_fail("no AVX2 panel kernels for %.*s", int(name.size()), name.data());
    }
  }
}

}  // namespace triad::kernels
