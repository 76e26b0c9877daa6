// AVX2 + FMA + F16C matmul kernels for every weight type (the path of CPUs without AVX-512;
// also the AVX-512 level's rows under --batch-invariant for the types whose AVX-512 kernels
// depend on the batch: matmul.cpp's rows_fn). Compiled with AVX2 flags; called only when
// matmul_isa_supported(kAvx2).
//
// Same algorithm as the AVX-512 kernels (matmul_impl.h), 32 elements per step in 256-bit
// registers (16 of them, so tiles are smaller: 4 rows x 3 tokens for float weights, 2 x 3 for
// quantized ones):
// - F32 / F16 / BF16: f32 FMA; F16 widened with vcvtph2ps, BF16 (weights and the bf16-rounded
//   activations) widened by a 16-bit shift, both exact. Rows are summed in column blocks
//   (matmul_tiles.h), and from 32 tokens on in the K-blocked order with F16 / BF16 weights
//   widened to f32 once per panel block, as the AVX-512 kernels do. Tails go through a
//   zero-padded copy.
// - Quantized: per 32 weights an unsigned code vector (a 32-block or K-quant sub-block in
//   natural order) and an 8-lane scale vector; vpmaddubsw (codes <= 63, so no int16
//   saturation) + vpmaddwd(1) give exact int32 sums of 4 products, the code offset is removed
//   with the activation sums (init = -offset * sum of 4 xq), then acc += float(p) * (ws * dx).
//   Q8_0 codes are signed: vpmaddubsw(|w|, sign(xq, w)) (|w| <= 128, |xq| <= 127: no
//   saturation). Minimums are added per 32-block as mins * xs.
// - Q6_K and Q3_K have a scale per 16 elements (lanes 0..3 / 4..7 of the scale vector).
// - Q3_K: 3-bit codes (offset 4) with a scale per 16 elements, as Q6_K.
// - Q2_K: 2-bit codes with a scale and a minimum per 16 elements; the minimums are added per
//   16 as mins * xs16 (lanes 0..3 / 4..7 again).
// - IQ4_NL / IQ4_XS / MXFP4: a vpshufb table lookup of the nibbles gives the signed weights
//   (|value| <= 127), which take the Q8_0 path; scales d, fl(d * (ls - 32)) and e8m0_half(e)
//   (the MXFP4 table holds doubled FP4 values, quant_blocks.h).
// Thread-safety: writes only the outputs of the given rows and tokens.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/fp8_vec_avx2.h"
#include "kernels/matmul_avx2_common.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_tiles.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels {
namespace avx2 {
namespace {

// ---- Float weights ----

// kKind: 0 = F32, 1 = F16, 2 = BF16, 3 = BF16 weights widened to f32 (PackHalf<2>) against the
// bf16 activations. Summed in column blocks (matmul_tiles.h block_cols), 8 lanes of partial
// sums per block: one token (tiles::run, row tiles outer) and a prompt (the K-blocked order,
// run_float) give the same bits.
template <int kKind>
struct KFloat {
  static constexpr bool kBf16Acts = kKind == 2 || kKind == 3;
  static constexpr int kR = 4, kT = 3, kActBytes = kBf16Acts ? 2 : 4, kKStep = 8;
  static constexpr int kWBytes = kKind == 0 || kKind == 3 ? 4 : 2;

  // 8 weights at p as f32.
  static inline __m256 load_w(const uint8_t* p) {
    if constexpr (kKind == 0 || kKind == 3) {
      return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (kKind == 1) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
  }
  // 8 activations of token row x (f32, or bf16 for BF16 weights) from element c.
  static inline __m256 load_x(const void* x, int64_t c) {
    if constexpr (kBf16Acts) {
      const uint16_t* p = static_cast<const uint16_t*>(x) + c;
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    } else {
      return _mm256_loadu_ps(static_cast<const float*>(x) + c);
    }
  }

  // Columns [p.c0, p.c1) of an R x T tile (tiles::run_kblocked, tiles::tile_blocks). Software
  // prefetch where asked (not in the K-blocked prompt order: its weights come from L2).
  template <int R, int T>
  static void tile_part(const MatmulJob& j, int64_t r, int64_t t, const tiles::Part& p) {
    const uint8_t* w[R];  // row r + i's column c at w[i] + (c - p.w_c0) * kWBytes
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) w[i] = p.w + static_cast<uint64_t>(r + i - p.w_r0) * p.w_rs;
    const void* x[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) {
      if constexpr (kBf16Acts) {
        x[k] = j.xb + (t + k) * j.xb_stride;
      } else {
        x[k] = j.x + (t + k) * j.x_stride;
      }
    }
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) acc[i][k] = _mm256_setzero_ps();
    const int64_t K = p.c1;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    const bool pf = p.prefetch;
    int64_t c = p.c0;
    for (; c + 8 <= K; c += 8) {
      if (pf) tiles::prefetch_ahead(w[0], tile_bytes, c * R * kWBytes, (c + 8) * R * kWBytes);
      __m256 wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = load_w(w[i] + (c - p.w_c0) * kWBytes);
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        const __m256 xv = load_x(x[k], c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm256_fmadd_ps(wv[i], xv, acc[i][k]);
      }
    }
    if (c < K) {  // fewer than 8 left: go through zero-padded copies
      const int64_t n = K - c;
      alignas(32) uint8_t wbuf[R][32];
      __m256 wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        std::memset(wbuf[i], 0, sizeof(wbuf[i]));
        std::memcpy(wbuf[i], w[i] + (c - p.w_c0) * kWBytes, static_cast<size_t>(n * kWBytes));
        wv[i] = load_w(wbuf[i]);
      }
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        alignas(32) uint8_t xbuf[32] = {};
        const int xb = kBf16Acts ? 2 : 4;
        std::memcpy(xbuf, static_cast<const uint8_t*>(x[k]) + c * xb, static_cast<size_t>(n * xb));
        const __m256 xv = load_x(xbuf, 0);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm256_fmadd_ps(wv[i], xv, acc[i][k]);
      }
    }
    if (p.first) {
      store_tile<R, T>(acc, j.y, j.y_stride, r, t);
    } else {
      store_tile<R, T, true>(acc, j.y, j.y_stride, r, t);
    }
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    tiles::tile_blocks<KFloat, R, T>(j, r, t);
  }
};

// F16 (kKind 1) or BF16 (2) weights widened to f32 once per K-blocked panel block (exact,
// KFloat's widening), for KFloat<0> / KFloat<3>: a prompt's tiles then run f32 FMA alone
// (vcvtph2ps is two uops per 8 weights on Zen 3: widened in every tile it held F16 prompts to
// 76-102 GFLOP/s, against 106-151 so).
template <int kKind>
struct PackHalf {
  static constexpr int64_t kBytes = 4;
  static void pack(const MatmulJob& j, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* dst, uint64_t rs) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = j.w + static_cast<uint64_t>(r) * j.row_bytes + c0 * 2;
      float* d = reinterpret_cast<float*>(dst + static_cast<uint64_t>(r - r0) * rs);
      const int64_t n = c1 - c0;
      int64_t c = 0;
      for (; c + 8 <= n; c += 8) _mm256_store_ps(d + c, KFloat<kKind>::load_w(src + 2 * c));
      if (c < n) {
        alignas(32) uint8_t buf[16] = {};
        std::memcpy(buf, src + 2 * c, static_cast<size_t>(2 * (n - c)));
        alignas(32) float f[8];
        _mm256_store_ps(f, KFloat<kKind>::load_w(buf));
        std::memcpy(d + c, f, static_cast<size_t>(4 * (n - c)));
      }
    }
  }
};

// Few tokens: the weights stream from memory once per call, row tiles outer (tiles::run, with
// software prefetch). From kKBlockedMinTokens on the product is compute-bound: the K-blocked
// order (F16 and BF16 widened once per panel block). Both compute every output alike (bitwise).
inline constexpr int64_t kKBlockedMinTokens = 32;
template <int kKind>
void run_float(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (t1 - t0 < kKBlockedMinTokens) {
    tiles::run<KFloat<kKind>>(j, r0, r1, t0, t1);
  } else if constexpr (kKind == 0) {
    tiles::run_kblocked<KFloat<0>>(j, r0, r1, t0, t1);
  } else {
    tiles::run_kblocked<KFloat<kKind == 1 ? 0 : 3>, PackHalf<kKind>>(j, r0, r1, t0, t1);
  }
}

// ---- Quantized weights: decoders produce, per 32-element step, codes (or signed weights for
// Q8_0 and the table types), an 8-lane scale vector, and (types with mins) the step's 32-block
// minimum. ----

struct Step {
  __m256i codes;
  __m256 ws;
  float min;
  __m256 mn16;  // minimums per 16 (kSums16 types): the step's two sub-blocks' mins / 4, per16's lanes
};

// 0x10 in byte i where bit i of `bits` is set.
inline __m256i bits_to_0x10(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                       3, 3, 3, 3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i hit = _mm256_cmpeq_epi8(_mm256_and_si256(spread, sel), sel);
  return _mm256_and_si256(hit, _mm256_set1_epi8(0x10));
}

template <DType kType>
struct D32 {
  static constexpr bool kHasM = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  static constexpr bool kFive = kType == DType::kQ5_0 || kType == DType::kQ5_1;
  static constexpr bool kSigned = kType == DType::kQ8_0;
  static constexpr int kBytes = kSigned ? 34 : (kFive ? (kHasM ? 24 : 22) : (kHasM ? 20 : 18));
  static constexpr int kGroup = 32, kSteps = 1;
  static constexpr int kOff = kSigned ? 0 : (kHasM ? 0 : (kFive ? 16 : 8));
  static constexpr bool kMins = kHasM;
  struct Group {};
  static inline void group(const uint8_t*, int64_t, Group&) {}
  static inline void step(const uint8_t* row, int64_t g, int, const Group&, Step& st) {
    const uint8_t* p = row + g * kBytes;
    st.ws = _mm256_set1_ps(f16(p));
    if constexpr (kHasM) st.min = f16(p + 2);
    if constexpr (kSigned) {
      st.codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    } else {
      const int qs_off = (kHasM ? 4 : 2) + (kFive ? 4 : 0);
      st.codes = nibbles(p + qs_off);
      if constexpr (kFive) st.codes = _mm256_or_si256(st.codes, bits_to_0x10(ld32(p + (kHasM ? 4 : 2))));
    }
  }
};

template <bool kFive>
struct DK45 {
  static constexpr int kBytes = kFive ? 176 : 144;
  static constexpr int kGroup = 256, kSteps = 8, kOff = 0;
  static constexpr bool kSigned = false, kMins = true;
  struct Group {
    alignas(32) float sc[8];  // fl(d * sc_j)
    alignas(32) float mn[8];  // -fl(dmin * mn_j)
  };
  static inline void group(const uint8_t* row, int64_t g, Group& gs) {
    const uint8_t* p = row + g * kBytes;
    const uint32_t a = ld32(p + 4), b = ld32(p + 8), c = ld32(p + 12);
    const uint32_t sc_lo = a & 0x3f3f3f3fu, mn_lo = b & 0x3f3f3f3fu;
    const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    const __m128i sc = _mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo));
    const __m128i mn = _mm_set_epi32(0, 0, static_cast<int>(mn_hi), static_cast<int>(mn_lo));
    const __m256 d = _mm256_set1_ps(f16(p)), dmin = _mm256_set1_ps(-f16(p + 2));
    _mm256_store_ps(gs.sc, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
    _mm256_store_ps(gs.mn, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
  }
  static inline void step(const uint8_t* row, int64_t g, int s, const Group& gs, Step& st) {
    const uint8_t* p = row + g * kBytes;
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + (kFive ? 48 : 16) + 32 * (s / 2)));
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    st.codes = (s & 1) ? _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4) : _mm256_and_si256(q, lo4);
    if constexpr (kFive) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << s));
      const __m256i hit = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
      st.codes = _mm256_or_si256(st.codes, _mm256_and_si256(hit, _mm256_set1_epi8(0x10)));
    }
    st.ws = _mm256_broadcast_ss(gs.sc + s);
    st.min = gs.mn[s];
  }
};

// fl(d * v_j) for the 16 signed int8 scales in v, into out[16].
inline void scale16(__m128i v, __m256 d, float* out) {
  _mm256_store_ps(out, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
  _mm256_store_ps(out + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))));
}

// The 8-lane vector of a 32-element step s of a type with one value per 16 elements:
// lanes 0..3 v[2s] (elements 0..15), lanes 4..7 v[2s + 1].
inline __m256 per16(const float* v, int s) {
  return _mm256_set_m128(_mm_broadcast_ss(v + 2 * s + 1), _mm_broadcast_ss(v + 2 * s));
}

struct DQ6K {
  static constexpr int kBytes = 210;
  static constexpr int kGroup = 256, kSteps = 8, kOff = 32;
  static constexpr bool kSigned = false, kMins = false;
  struct Group {
    alignas(32) float sc[16];  // fl(d * scale_j)
  };
  static inline void group(const uint8_t* row, int64_t g, Group& gs) {
    const uint8_t* p = row + g * kBytes;
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
    const __m256 d = _mm256_set1_ps(f16(p + 208));
    scale16(sc, d, gs.sc);
  }
  static inline void step(const uint8_t* row, int64_t g, int s, const Group& gs, Step& st) {
    const uint8_t* p = row + g * kBytes;
    const int h = s / 4, k = s % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32 * (k & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i lo = (k >= 2) ? _mm256_and_si256(_mm256_srli_epi16(ql, 4), lo4) : _mm256_and_si256(ql, lo4);
    __m256i hb;
    switch (k) {
      case 0: hb = _mm256_slli_epi16(qh, 4); break;
      case 1: hb = _mm256_slli_epi16(qh, 2); break;
      case 2: hb = qh; break;
      default: hb = _mm256_srli_epi16(qh, 2); break;
    }
    st.codes = _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
    st.ws = per16(gs.sc, s);
    st.min = 0.f;
  }
};

// IQ4_NL (kMx = false: fp16 d, kIq4nlValues) and MXFP4 (kMx = true: e8m0_half(e),
// kMxfp4Values): 32-element blocks of table values.
template <bool kMx>
struct DTab32 {
  static constexpr int kBytes = kMx ? 17 : 18;
  static constexpr int kGroup = 32, kSteps = 1, kOff = 0;
  static constexpr bool kSigned = true, kMins = false;
  struct Group {};
  static inline void group(const uint8_t*, int64_t, Group&) {}
  static inline void step(const uint8_t* row, int64_t g, int, const Group&, Step& st) {
    const uint8_t* p = row + g * kBytes;
    if constexpr (kMx) {
      st.ws = _mm256_broadcast_ss(kE8m0Half.v + p[0]);
      st.codes = lookup16(kMxfp4Values, p + 1);
    } else {
      // d: vpbroadcastw from memory, a 4-lane vcvtph2ps and a lane copy (three instructions,
      // against four for a scalar load, move, convert and broadcast).
      const __m128 d4 = _mm_cvtph_ps(_mm_set1_epi16(static_cast<short>(ld16(p))));
      st.ws = _mm256_set_m128(d4, d4);
      st.codes = lookup16(kIq4nlValues, p + 2);
    }
    st.min = 0.f;
  }
};

// Q3_K: a 256-element super-block of 16 sub-blocks of 16 with scales fl(d * (sc_j - 32)); step s
// (elements 32s .. 32s+31) has the low code bits (qs[32h + l] >> 2k) & 3 and the third bit
// (hmask[l] >> (4h + k)) & 1, h = s / 4, k = s % 4; value code - 4.
struct DQ3K {
  static constexpr int kBytes = 110;
  static constexpr int kGroup = 256, kSteps = 8, kOff = 4;
  static constexpr bool kSigned = false, kMins = false;
  struct Group {
    alignas(32) float sc[16];  // fl(d * (sc_j - 32))
  };
  static inline void group(const uint8_t* row, int64_t g, Group& gs) {
    const uint8_t* p = row + g * kBytes;
    scale16(q3k_scales(p), _mm256_set1_ps(f16(p + 108)), gs.sc);
  }
  static inline void step(const uint8_t* row, int64_t g, int s, const Group& gs, Step& st) {
    const uint8_t* p = row + g * kBytes;
    const int h = s / 4, k = s % 4;
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 + 32 * h));
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), _mm256_set1_epi8(3));
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k)));
    const __m256i hit = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
    st.codes = _mm256_or_si256(lo, _mm256_and_si256(hit, _mm256_set1_epi8(4)));
    st.ws = per16(gs.sc, s);
    st.min = 0.f;
  }
};

// Q2_K (84-byte blocks: scales[16] (low nibble scale, high nibble minimum), qs[64], d, dmin):
// 16 sub-blocks of 16 with scales fl(d * sc_j) and minimums fl(dmin * mn_j); step s (elements
// 32s .. 32s+31) has the codes (qs[32h + l] >> 2k) & 3, h = s / 4, k = s % 4.
struct DQ2K {
  static constexpr int kBytes = 84;
  static constexpr int kGroup = 256, kSteps = 8, kOff = 0;
  static constexpr bool kSigned = false, kMins = false, kSums16 = true;
  struct Group {
    alignas(32) float sc[16];  // fl(d * sc_j)
    alignas(32) float mn[16];  // -fl(dmin * mn_j) / 4 (spread over a sub-block's 4 lanes)
  };
  static inline void group(const uint8_t* row, int64_t g, Group& gs) {
    const uint8_t* p = row + g * kBytes;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    scale16(_mm_and_si128(v, m4), _mm256_set1_ps(f16(p + 80)), gs.sc);
    // -dmin / 4 is exact (fp16 dmin is at least 2^-24), so fl(-dmin / 4 * mn) = -fl(dmin * mn) / 4.
    scale16(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm256_set1_ps(-0.25f * f16(p + 82)), gs.mn);
  }
  static inline void step(const uint8_t* row, int64_t g, int s, const Group& gs, Step& st) {
    const uint8_t* p = row + g * kBytes;
    const int h = s / 4, k = s % 4;
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * h));
    st.codes = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), _mm256_set1_epi8(3));
    st.ws = per16(gs.sc, s);
    st.min = 0.f;
    st.mn16 = per16(gs.mn, s);
  }
};

// IQ4_XS: a 256-element super-block of 8 sub-blocks of 32 IQ4_NL table nibbles (qs + 16j, Q4_0's
// order), scale fl(d * (ls_j - 32)) (see the AVX-512 decoder, matmul_decode_avx512.h).
struct DIq4xs {
  static constexpr int kBytes = 136;
  static constexpr int kGroup = 256, kSteps = 8, kOff = 0;
  static constexpr bool kSigned = true, kMins = false;
  struct Group {
    alignas(32) float sc[8];  // fl(d * (ls_j - 32))
  };
  static inline void group(const uint8_t* row, int64_t g, Group& gs) {
    const uint8_t* p = row + g * kBytes;
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(ld32(p + 4))), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(ld16(p + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    _mm256_store_ps(gs.sc, _mm256_mul_ps(_mm256_set1_ps(f16(p)), _mm256_cvtepi32_ps(ls)));
  }
  static inline void step(const uint8_t* row, int64_t g, int s, const Group& gs, Step& st) {
    st.codes = lookup16(kIq4nlValues, row + g * kBytes + 8 + 16 * s);
    st.ws = _mm256_broadcast_ss(gs.sc + s);
    st.min = 0.f;
  }
};

template <class D>
struct KQuant {
  static constexpr int kR = 2, kT = 3, kActBytes = 1;
  static constexpr int kRDecode = 4;  // rows per tile for a single token (tiles::run)

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
    tile_rows(j, r, w);
    const int8_t* xq[T];
    const float* xd[T];
    tile_acts(j, t, xq, xd);
    const float* xs[T];  // per 32, or per 16 (kSums16)
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k)
      xs[k] = sums16<D>() ? j.axs16 + (t + k) * j.xs16_stride : j.axs + (t + k) * j.as_stride;
    __m256 acc[R][T];
    zero_tile(acc);
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t ng = j.cols / D::kGroup;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    for (int64_t g = 0; g < ng; ++g) {
      tiles::prefetch_ahead(w[0], tile_bytes, g * R * D::kBytes, (g + 1) * R * D::kBytes);
      typename D::Group gs[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) D::group(w[i], g, gs[i]);
#pragma GCC unroll 8
      for (int s = 0; s < D::kSteps; ++s) {
        Step st[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) D::step(w[i], g, s, gs[i], st[i]);
        const int64_t b = g * (D::kGroup / 32) + s;  // 32-block index
#pragma GCC unroll 8
        for (int k = 0; k < T; ++k) {
          const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq[k] + 32 * b));
          const __m256 dx = _mm256_broadcast_ss(xd[k] + b);
          __m256i init = _mm256_setzero_si256();
          if constexpr (D::kOff != 0) {
            const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), ones16);
            init = _mm256_sub_epi32(init, _mm256_mullo_epi32(s4, _mm256_set1_epi32(D::kOff)));
          }
#pragma GCC unroll 8
          for (int i = 0; i < R; ++i) {
            __m256i p16;
            if constexpr (D::kSigned) {
              p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(st[i].codes), _mm256_sign_epi8(xv, st[i].codes));
            } else {
              p16 = _mm256_maddubs_epi16(st[i].codes, xv);
            }
            const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(p16, ones16), init);
            acc[i][k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(st[i].ws, dx), acc[i][k]);
            if constexpr (D::kMins) {
              // Spread min * xs over the 8 lanes (exact: multiplying by 1/8).
              const __m256 mx = _mm256_set1_ps(st[i].min * 0.125f);
              acc[i][k] = _mm256_fmadd_ps(mx, _mm256_broadcast_ss(xs[k] + b), acc[i][k]);
            }
            if constexpr (sums16<D>()) acc[i][k] = _mm256_fmadd_ps(st[i].mn16, per16(xs[k] + 2 * b, 0), acc[i][k]);
          }
        }
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

// ---- Row-scaled online types (dtype_has_row_scale) ----

// FP8 E4M3 weights, f32 activations: 16 codes widen to binary16 in three integer ops
// (fp8_vec_avx2.h: exactly e4m3 * 2^-8), vcvtph2ps makes them f32, and the row's scale absorbs
// the 2^8.
struct KFp8 {
  static constexpr int kR = 4, kT = 2, kActBytes = 4;

  static inline void load_w16(const uint8_t* p, __m256& lo, __m256& hi) {
    const __m256i h = e4m3x16_to_f16_scaled(p);
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint8_t* w[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) w[i] = j.w + static_cast<uint64_t>(r + i) * j.row_bytes;
    const float* x[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) x[k] = j.x + (t + k) * j.x_stride;
    __m256 acc[R][T];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) acc[i][k] = _mm256_setzero_ps();
    const int64_t K = j.cols;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    auto step = [&](const uint8_t* const* wp, const float* const* xp) {
      __m256 lo[R], hi[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) load_w16(wp[i], lo[i], hi[i]);
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        const __m256 x0 = _mm256_loadu_ps(xp[k]), x1 = _mm256_loadu_ps(xp[k] + 8);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          acc[i][k] = _mm256_fmadd_ps(lo[i], x0, acc[i][k]);
          acc[i][k] = _mm256_fmadd_ps(hi[i], x1, acc[i][k]);
        }
      }
    };
    int64_t c = 0;
    for (; c + 16 <= K; c += 16) {
      tiles::prefetch_ahead(w[0], tile_bytes, c * R, (c + 16) * R);
      const uint8_t* wp[R];
      const float* xp[T];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wp[i] = w[i] + c;
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) xp[k] = x[k] + c;
      step(wp, xp);
    }
    if (c < K) {  // fewer than 16 left: zero-padded copies (code 0 is +0)
      const int64_t n = K - c;
      alignas(32) uint8_t wbuf[R][16];
      alignas(32) float xbuf[T][16];
      const uint8_t* wp[R];
      const float* xp[T];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        std::memset(wbuf[i], 0, sizeof(wbuf[i]));
        std::memcpy(wbuf[i], w[i] + c, static_cast<size_t>(n));
        wp[i] = wbuf[i];
      }
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        std::memset(xbuf[k], 0, sizeof(xbuf[k]));
        std::memcpy(xbuf[k], x[k] + c, static_cast<size_t>(n) * 4);
        xp[k] = xbuf[k];
      }
      step(wp, xp);
    }
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k)
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i)
        j.y[(t + k) * j.y_stride + r + i] = hsum8(acc[i][k]) * (j.row_scale[r + i] * 256.f);
  }
};

// I8 weights x Q8 row activations (W8A8): exact int32 dot products, 32 codes per step with
// vpmaddubsw(|w|, sign(xq, w)) (|w|, |xq| <= 127: no int16 saturation) and vpmaddwd(1), one
// float scale fl(s_r * dx_t) per output.
struct KI8 {
  static constexpr int kR = 2, kT = 4, kActBytes = 1;

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const int8_t* w[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
      w[i] = reinterpret_cast<const int8_t*>(j.w + static_cast<uint64_t>(r + i) * j.row_bytes);
    const int8_t* xq[T];
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) xq[k] = j.aq + (t + k) * j.aq_stride;
    __m256i acc[R][T];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) acc[i][k] = _mm256_setzero_si256();
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t K = j.cols;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    auto step = [&](const __m256i* wv) {
      __m256i wa[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wa[i] = _mm256_abs_epi8(wv[i]);
#pragma GCC unroll 8
      for (int k = 0; k < T; ++k) {
        // The activation rows are zero padded to a multiple of 64 bytes (prepare_activations).
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[k] + 0));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
          const __m256i p16 = _mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(xv, wv[i]));
          acc[i][k] = _mm256_add_epi32(acc[i][k], _mm256_madd_epi16(p16, ones16));
        }
        xq[k] += 32;
      }
    };
    int64_t c = 0;
    for (; c + 32 <= K; c += 32) {
      tiles::prefetch_ahead(reinterpret_cast<const uint8_t*>(w[0]), tile_bytes, c * R, (c + 32) * R);
      __m256i wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[i] + c));
      step(wv);
    }
    if (c < K) {  // fewer than 32 left: zero-padded weight copies (the activations are padded)
      alignas(32) int8_t wbuf[R][32];
      __m256i wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        std::memset(wbuf[i], 0, sizeof(wbuf[i]));
        std::memcpy(wbuf[i], w[i] + c, static_cast<size_t>(K - c));
        wv[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(wbuf[i]));
      }
      step(wv);
    }
#pragma GCC unroll 8
    for (int k = 0; k < T; ++k) {
      const float dx = j.ad[(t + k) * j.as_stride];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) {
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc[i][k]), _mm256_extracti128_si256(acc[i][k], 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        const float scale = j.row_scale[r + i] * dx;
        j.y[(t + k) * j.y_stride + r + i] = static_cast<float>(_mm_cvtsi128_si32(s4)) * scale;
      }
    }
  }
};

}  // namespace
}  // namespace avx2

void matmul_rows_avx2(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  using namespace avx2;
  if (j.panels) {  // matmul.cpp lays back panels of the other types
    matmul_rows_panels_avx2(j, r0, r1, t0, t1);
    return;
  }
  switch (j.type) {
    case DType::kF32: run_float<0>(j, r0, r1, t0, t1); return;
    case DType::kF16: run_float<1>(j, r0, r1, t0, t1); return;
    case DType::kBF16: run_float<2>(j, r0, r1, t0, t1); return;
    case DType::kQ4_0: tiles::run<KQuant<D32<DType::kQ4_0>>>(j, r0, r1, t0, t1); return;
    case DType::kQ4_1: tiles::run<KQuant<D32<DType::kQ4_1>>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_0: tiles::run<KQuant<D32<DType::kQ5_0>>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_1: tiles::run<KQuant<D32<DType::kQ5_1>>>(j, r0, r1, t0, t1); return;
    case DType::kQ8_0: tiles::run<KQuant<D32<DType::kQ8_0>>>(j, r0, r1, t0, t1); return;
    case DType::kQ4_K: tiles::run<KQuant<DK45<false>>>(j, r0, r1, t0, t1); return;
    case DType::kQ5_K: tiles::run<KQuant<DK45<true>>>(j, r0, r1, t0, t1); return;
    case DType::kQ6_K: tiles::run<KQuant<DQ6K>>(j, r0, r1, t0, t1); return;
    case DType::kQ2_K: tiles::run<KQuant<DQ2K>>(j, r0, r1, t0, t1); return;
    case DType::kQ3_K: tiles::run<KQuant<DQ3K>>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_XS: tiles::run<KQuant<DIq4xs>>(j, r0, r1, t0, t1); return;
    case DType::kIQ4_NL: tiles::run<KQuant<DTab32<false>>>(j, r0, r1, t0, t1); return;
    case DType::kMXFP4: tiles::run<KQuant<DTab32<true>>>(j, r0, r1, t0, t1); return;
    case DType::kF8_E4M3: tiles::run<KFp8>(j, r0, r1, t0, t1); return;
    case DType::kI8: tiles::run<KI8>(j, r0, r1, t0, t1); return;
    default: break;
  }
  matmul_rows_ref(j, r0, r1, t0, t1);  // not reached: every weight type is handled above
}

}  // namespace triad::kernels
