// Internal to the AVX-512 quantized matmul kernels (include only from *_avx512.cpp files): the
// per-type weight decoders shared by the direct kernels (matmul_quant_avx512.cpp) and the packing
// step of the prompt kernels (matmul_packed_avx512.cpp).
//
// A decoder turns 64 weights at a time into unsigned 8-bit codes q in natural element order
// plus a 16-lane float scale vector (lane l covers elements 4l .. 4l+3: a 32-block spans 8
// lanes, a Q6_K / Q3_K / Q2_K 16-sub-block 4 lanes). Each provides kGroup (elements per group: 64 or 256),
// kSteps (64-element steps per group), kOff (code offset: value = ws * (q - kOff)), kMins, a
// per-row Group state, group(), step(), mins() / xs_vec() (types with minimums: the
// activation sums per 32, or per 16 where the decoder sets kSums16, Q2_K), and for
// 32-block types half() (a lone last 32-block) and block_scale() / block_min() (one block's
// float scale and minimum, for the packing step).
// Thread-safety: pure inline functions over read-only data.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "tensor/dtype.h"

namespace triad::kernels::avx512 {

alignas(64) inline constexpr int32_t kIdxPair[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
// Lanes [2s x 8, 2s+1 x 8] of a vector of 8 sub-block scales (Q4_K / Q5_K step s).
alignas(64) inline constexpr int32_t kIdxK4[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
// Lanes [2s x 8, 2s+1 x 8] for s = 0..7: the pair of 32-blocks of step s of a 16-block group.
alignas(64) inline constexpr int32_t kIdxStep[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
    {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};
// Lane j <- lane j / 2 (8 activation-block scales spread over 16 Q6_K sub-blocks).
alignas(64) inline constexpr int32_t kIdxDup[16] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};
// Lanes [4s x 4, 4s+1 x 4, 4s+2 x 4, 4s+3 x 4] of 16 sub-block scales (Q6_K step s).
alignas(64) inline constexpr int32_t kIdxQ6[4][16] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
    {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
    {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
    {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};
// Lanes 8..15 moved to 0..7 (the mins half of a Q4_K / Q5_K scale vector).
alignas(64) inline constexpr int32_t kIdxHi8[16] = {8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0};

inline __m512i load_idx(const int32_t* p) { return _mm512_load_si512(p); }

inline uint16_t ld16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t ld32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// [f(a) x 8, f(b) x 8] from two fp16 values.
inline __m512 expand_fp16_pair(const uint8_t* a, const uint8_t* b) {
  const __m128i h = _mm_cvtsi32_si128(static_cast<int>(ld16(a) | uint32_t{ld16(b)} << 16));
  return _mm512_permutexvar_ps(load_idx(kIdxPair), _mm512_castps128_ps512(_mm_cvtph_ps(h)));
}
// [p[0] x 8, p[1] x 8].
inline __m512 expand_pair(const float* p) {
  const __m128 v = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
  return _mm512_permutexvar_ps(load_idx(kIdxPair), _mm512_castps128_ps512(v));
}

// 32 nibble bytes -> 64 codes: block 0 elements 0..15 (low nibbles of qs0), 16..31 (high),
// then block 1 likewise. With qs1 == nullptr only block 0 is read (upper codes are zero).
inline __m512i nibbles_pair(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i a = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  __m512i z = _mm512_zextsi256_si512(a);
  if (qs1) {
    const __m256i b =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)));
    z = _mm512_inserti64x4(z, b, 1);
  }
  const __m512i shift = _mm512_set_epi32(0x00040004, 0x00040004, 0x00040004, 0x00040004, 0, 0, 0,
                                         0, 0x00040004, 0x00040004, 0x00040004, 0x00040004, 0, 0, 0,
                                         0);
  return _mm512_and_si512(_mm512_srlv_epi16(z, shift), _mm512_set1_epi8(0x0F));
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0: a group is two 32-blocks.
template <DType kType>
struct D32 {
  static constexpr bool kHasM = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  static constexpr bool kFive = kType == DType::kQ5_0 || kType == DType::kQ5_1;
  static constexpr bool kQ8 = kType == DType::kQ8_0;
  static constexpr int kBytes = kQ8 ? 34 : (kFive ? (kHasM ? 24 : 22) : (kHasM ? 20 : 18));
  static constexpr int kGroup = 64, kSteps = 1;
  static constexpr int kOff = kQ8 ? 128 : (kHasM ? 0 : (kFive ? 16 : 8));
  static constexpr bool kMins = kHasM;
  static constexpr bool kTable = false, kExpScale = false;
  struct Group {
    __m512i codes;
    __m512 ws;
    __m512 mins;
  };

  static inline void decode(const uint8_t* p0, const uint8_t* p1, Group& g) {
    // p1 == nullptr: only block p0 (upper lanes get zero scale and min).
    if constexpr (kQ8) {
      __m512i z = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2)));
      if (p1) z = _mm512_inserti64x4(z, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + 2)), 1);
      g.codes = _mm512_xor_si512(z, _mm512_set1_epi8(static_cast<char>(0x80)));
    } else {
      const int qs_off = (kHasM ? 4 : 2) + (kFive ? 4 : 0);
      g.codes = nibbles_pair(p0 + qs_off, p1 ? p1 + qs_off : nullptr);
      if constexpr (kFive) {
        const int qh_off = kHasM ? 4 : 2;
        uint64_t bits = ld32(p0 + qh_off);
        if (p1) bits |= uint64_t{ld32(p1 + qh_off)} << 32;
        g.codes = _mm512_mask_add_epi8(g.codes, _cvtu64_mask64(bits), g.codes, _mm512_set1_epi8(16));
      }
    }
    static const uint8_t kZero[4] = {0, 0, 0, 0};
    const uint8_t* q1 = p1 ? p1 : kZero;
    g.ws = expand_fp16_pair(p0, q1);
    if constexpr (kHasM) g.mins = expand_fp16_pair(p0 + 2, q1 + 2);
  }
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * 2 * kBytes;
    decode(p, p + kBytes, g);
  }
  static inline void half(const uint8_t* row, int64_t gi, Group& g) {
    decode(row + gi * 2 * kBytes, nullptr, g);
  }
  static inline void step(const uint8_t*, int64_t, int, const Group& g, __m512i& codes, __m512& ws) {
    codes = g.codes;
    ws = g.ws;
  }
  static inline __m512 mins(const Group& g) { return g.mins; }
  static inline float block_scale(const uint8_t* p) { return _cvtsh_ss(ld16(p)); }
  static inline float block_min(const uint8_t* p) { return kHasM ? _cvtsh_ss(ld16(p + 2)) : 0.f; }
  // Activation block sums matching mins(): each of a block's 8 lanes carries 1/8 of it.
  static inline __m512 xs_vec(const float* xs, int64_t gi) {
    return _mm512_mul_ps(expand_pair(xs + 2 * gi), _mm512_set1_ps(0.125f));
  }
};

// IQ4_NL (kMx = false: fp16 d, kIq4nlValues) and MXFP4 (kMx = true: e8m0_half(e),
// kMxfp4Values): 32-element blocks of 16 signed table values (quant_blocks.h), nibbles as
// Q4_0. A vpshufb lookup gives value + 128 as the unsigned code (IQ4_NL 1..241, MXFP4
// 116..140), so they take Q8_0's
// offset 128; a group is two blocks, as for the other 32-block types.
template <bool kMx>
struct DTab32 {
  static constexpr int kBytes = kMx ? 17 : 18;
  static constexpr int kGroup = 64, kSteps = 1, kOff = 128;
  static constexpr bool kMins = false, kHasM = false, kFive = false, kQ8 = false, kTable = true;
  static constexpr bool kExpScale = kMx;  // block scales are e8m0 exponent bytes
  struct Group {
    __m512i codes;
    __m512 ws;
    __m512 mins;
  };
  static inline __m512i table() {
    const int8_t* v = kMx ? kMxfp4Values : kIq4nlValues;
    const __m128i t = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v)),
                                   _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm512_broadcast_i32x4(t);
  }
  static inline float block_scale(const uint8_t* p) {
    return kMx ? kE8m0Half.v[p[0]] : _cvtsh_ss(ld16(p));
  }
  static inline float block_min(const uint8_t*) { return 0.f; }
  static inline void decode(const uint8_t* p0, const uint8_t* p1, Group& g) {
    // p1 == nullptr: only block p0 (upper lanes get zero scale; their activations are zero).
    constexpr int kQs = kMx ? 1 : 2;
    g.codes = _mm512_shuffle_epi8(table(), nibbles_pair(p0 + kQs, p1 ? p1 + kQs : nullptr));
    if constexpr (kMx) {
      const __m128 s = _mm_setr_ps(kE8m0Half.v[p0[0]], p1 ? kE8m0Half.v[p1[0]] : 0.f, 0.f, 0.f);
      g.ws = _mm512_permutexvar_ps(load_idx(kIdxPair), _mm512_castps128_ps512(s));
    } else {
      static const uint8_t kZero[2] = {0, 0};
      g.ws = expand_fp16_pair(p0, p1 ? p1 : kZero);
    }
    g.mins = _mm512_setzero_ps();
  }
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * 2 * kBytes;
    decode(p, p + kBytes, g);
  }
  static inline void half(const uint8_t* row, int64_t gi, Group& g) {
    decode(row + gi * 2 * kBytes, nullptr, g);
  }
  static inline void step(const uint8_t*, int64_t, int, const Group& g, __m512i& codes, __m512& ws) {
    codes = g.codes;
    ws = g.ws;
  }
  static inline __m512 mins(const Group& g) { return g.mins; }
  static inline __m512 xs_vec(const float*, int64_t) { return _mm512_setzero_ps(); }
};

// Q4_K / Q5_K: a group is a 256-element super-block of 8 sub-blocks of 32.
template <bool kFive>
struct DK45 {
  static constexpr int kBytes = kFive ? 176 : 144;
  static constexpr int kGroup = 256, kSteps = 4, kOff = 0;
  static constexpr bool kMins = true;
  struct Group {
    __m512 wm;  // lanes 0..7: fl(d * sc_j); lanes 8..15: fl(dmin * mn_j) (subtracted)
  };
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * kBytes;
    // v: 32-bit lanes [d | dmin, A, B, C] with A, B, C the 12 packed scale bytes. The 6-bit
    // scales and mins are (per byte, see get_scale_min_k4):
    //   sc[0..3] = A & 0x3f    sc[4..7] = (C & 0x0f) | ((A >> 2) & 0x30)
    //   mn[0..3] = B & 0x3f    mn[4..7] = ((C >> 4) & 0x0f) | ((B >> 2) & 0x30)
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i x = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i y = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2);
    const __m128i m1 = _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    const __m128i m2 = _mm_setr_epi32(0, 0x30303030, 0, 0x30303030);
    const __m128i scm8 = _mm_ternarylogic_epi32(x, m1, _mm_and_si128(y, m2), 0xEA);  // (x & m1) | t
    const __m512 scm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(scm8));  // [sc0..7, mn0..7]
    const __m512 dd = _mm512_permutexvar_ps(load_idx(kIdxPair), _mm512_castps128_ps512(_mm_cvtph_ps(v)));
    g.wm = _mm512_mul_ps(scm, dd);  // [fl(d * sc_j), fl(dmin * mn_j)]
  }
  static inline void step(const uint8_t* row, int64_t gi, int s, const Group& g, __m512i& codes,
                          __m512& ws) {
    const uint8_t* p = row + gi * kBytes;
    const uint8_t* qs = p + (kFive ? 48 : 16);
    const __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * s)));
    const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004,
                                           0x0004000400040004, 0x0004000400040004, 0, 0, 0, 0);
    codes = _mm512_and_si512(_mm512_srlv_epi16(z, shift), _mm512_set1_epi8(0x0F));
    if constexpr (kFive) {
      const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
      const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * s))),
                                             _mm256_set1_epi8(static_cast<char>(1 << (2 * s + 1))), 1);
      codes = _mm512_mask_add_epi8(codes, _mm512_test_epi8_mask(h, sel), codes, _mm512_set1_epi8(16));
    }
    ws = _mm512_permutexvar_ps(load_idx(kIdxK4[s]), g.wm);
  }
  // Minus the minimums, in lanes 0..7.
  static inline __m512 mins(const Group& g) {
    return _mm512_maskz_permutexvar_ps(0x00FF, load_idx(kIdxHi8), _mm512_sub_ps(_mm512_setzero_ps(), g.wm));
  }
  static inline __m512 xs_vec(const float* xs, int64_t gi) {
    return _mm512_maskz_loadu_ps(0x00FF, xs + 8 * gi);
  }
};

// IQ4_XS: a group is a 256-element super-block of 8 sub-blocks of 32 (136-byte blocks: d,
// scales_h, scales_l[4], qs[128]). Sub-block j holds IQ4_NL table nibbles at qs + 16j (Q4_0's
// nibble order) with the scale fl(d * (ls_j - 32)), ls_j = nibble j of scales_l | (bits 2j,
// 2j+1 of scales_h) << 4. As for IQ4_NL, a vpshufb lookup gives value + 128 (offset 128).
struct DIq4xs {
  static constexpr int kBytes = 136;
  static constexpr int kGroup = 256, kSteps = 4, kOff = 128;
  static constexpr bool kMins = false;
  struct Group {
    __m512 wm;  // lanes 0..7: fl(d * (ls_j - 32)); lanes 8..15: 0
  };
  static inline __m512i table() {
    const __m128i t = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)),
                                   _mm_set1_epi8(static_cast<char>(0x80)));
    return _mm512_broadcast_i32x4(t);
  }
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * kBytes;
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(ld32(p + 4))), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(ld16(p + 2)), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    const __m256 ws = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(ld16(p))), _mm256_cvtepi32_ps(ls));
    g.wm = _mm512_zextps256_ps512(ws);
  }
  static inline void step(const uint8_t* row, int64_t gi, int s, const Group& g, __m512i& codes,
                          __m512& ws) {
    const uint8_t* qs = row + gi * kBytes + 8 + 32 * s;
    codes = _mm512_shuffle_epi8(table(), nibbles_pair(qs, qs + 16));
    ws = _mm512_permutexvar_ps(load_idx(kIdxK4[s]), g.wm);
  }
  static inline __m512 mins(const Group&) { return _mm512_setzero_ps(); }
  static inline __m512 xs_vec(const float*, int64_t) { return _mm512_setzero_ps(); }
};

// The 2-bit codes of step s (elements 64s .. 64s+63) of a Q3_K / Q2_K super-block whose 64 code
// bytes are at qs: element 128h + 32k + l has (qs[32h + l] >> 2k) & 3, so step s is h = s / 2
// with k = 2 (s % 2) in its lower 32 bytes and k + 1 in its upper ones.
inline __m512i low2_step(const uint8_t* qs, int s) {
  const int h = s >> 1, k0 = 2 * (s & 1);
  const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h)));
  const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * k0)),
                                           _mm256_set1_epi16(static_cast<short>(2 * k0 + 2)), 1);
  return _mm512_and_si512(_mm512_srlv_epi16(q, shift), _mm512_set1_epi8(3));
}

// The 16 Q3_K scales sc_j - 32 of the block at p (quant_blocks.h get_scales_q3k), one per
// 32-bit lane. The 12 scale bytes at +96 hold sc_j's low 4 bits in byte j % 8 (the high nibble
// from j = 8 on) and its two high bits in byte 8 + j % 4 (bits 2 (j / 4), 2 (j / 4) + 1): each
// lane takes its two bytes (vpmovzxbd of the broadcast bytes), shifts them by its own count and
// merges them. (The AVX2 kernel does the same bit work in bytes; each ISA file keeps its own
// copy: an inline function shared across files compiled with different flags would be one
// symbol.)
inline __m512i q3k_scales(const uint8_t* p) {
  const uint8_t* q = p + 96;
  uint64_t lo8;
  std::memcpy(&lo8, q, 8);
  const __m512i lo = _mm512_cvtepu8_epi32(_mm_set1_epi64x(static_cast<long long>(lo8)));  // bytes 0-7, twice
  const __m512i hi = _mm512_cvtepu8_epi32(_mm_set1_epi32(static_cast<int>(ld32(q + 8))));  // bytes 8-11, 4 times
  const __m512i l = _mm512_srlv_epi32(lo, _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4));
  const __m512i h = _mm512_slli_epi32(
      _mm512_srlv_epi32(hi, _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6)), 4);
  // Bits 0-3 from l, bits 4-5 from h.
  const __m512i sc = _mm512_and_si512(_mm512_ternarylogic_epi32(l, h, _mm512_set1_epi32(0x0F), 0xE4),
                                      _mm512_set1_epi32(0x3F));
  return _mm512_sub_epi32(sc, _mm512_set1_epi32(32));
}

// Q3_K (110-byte blocks: hmask[32], qs[64], scales[12], d): a group is a 256-element super-block
// of 16 sub-blocks of 16 with scales fl(d * (sc_j - 32)); element 128h + 32k + l has the low code
// bits (qs[32h + l] >> 2k) & 3 and the third bit (hmask[l] >> (4h + k)) & 1, value code - 4
// (offset 4). Step s (elements 64s .. 64s+63) is h = s / 2 with k = 2 (s % 2) in its lower 32
// bytes and k + 1 in its upper ones.
struct DQ3K {
  static constexpr int kBytes = 110;
  static constexpr int kGroup = 256, kSteps = 4, kOff = 4;
  static constexpr bool kMins = false;
  struct Group {
    __m512 wm;  // fl(d * (sc_j - 32)), j = 0..15
  };
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * kBytes;
    g.wm = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(ld16(p + 108))), _mm512_cvtepi32_ps(q3k_scales(p)));
  }
  static inline void step(const uint8_t* row, int64_t gi, int s, const Group& g, __m512i& codes,
                          __m512& ws) {
    const uint8_t* p = row + gi * kBytes;
    const int h = s >> 1, k0 = 2 * (s & 1);
    const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i sel = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (4 * h + k0))),
                                           _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k0 + 1))), 1);
    codes = low2_step(p + 32, s);
    codes = _mm512_mask_add_epi8(codes, _mm512_test_epi8_mask(hm, sel), codes, _mm512_set1_epi8(4));
    ws = _mm512_permutexvar_ps(load_idx(kIdxQ6[s]), g.wm);
  }
  static inline __m512 mins(const Group&) { return _mm512_setzero_ps(); }
  static inline __m512 xs_vec(const float*, int64_t) { return _mm512_setzero_ps(); }
};

// Q2_K's 16 sub-block scales fl(d * sc_j) and minimums, negated, -fl(dmin * mn_j), from its 16
// scale bytes at sc (low nibble scale, high nibble minimum) and d, dmin at dd.
inline void q2k_scales(const uint8_t* sc, const uint8_t* dd, __m512& ws, __m512& mn) {
  const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
  const __m512i m4 = _mm512_set1_epi32(0x0F);
  ws = _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(ld16(dd))), _mm512_cvtepi32_ps(_mm512_and_si512(v, m4)));
  mn = _mm512_mul_ps(_mm512_set1_ps(-_cvtsh_ss(ld16(dd + 2))), _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)));
}

// Q2_K (84-byte blocks: scales[16], qs[64], d, dmin): a group is a 256-element super-block of 16
// sub-blocks of 16 with scales fl(d * sc_j) and minimums fl(dmin * mn_j), added per sub-block
// against the activation sums per 16 (kSums16: MatmulJob::axs16); its codes are Q3_K's low bits
// (low2_step).
struct DQ2K {
  static constexpr int kBytes = 84;
  static constexpr int kGroup = 256, kSteps = 4, kOff = 0;
  static constexpr bool kMins = true, kSums16 = true;
  struct Group {
    __m512 wm;  // fl(d * sc_j), j = 0..15
    __m512 mn;  // -fl(dmin * mn_j)
  };
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * kBytes;
    q2k_scales(p, p + 80, g.wm, g.mn);
  }
  static inline void step(const uint8_t* row, int64_t gi, int s, const Group& g, __m512i& codes,
                          __m512& ws) {
    codes = low2_step(row + gi * kBytes + 16, s);
    ws = _mm512_permutexvar_ps(load_idx(kIdxQ6[s]), g.wm);
  }
  static inline __m512 mins(const Group& g) { return g.mn; }
  // The 16 activation sums per 16 of super-block gi (xs: the token's axs16 row).
  static inline __m512 xs_vec(const float* xs16, int64_t gi) { return _mm512_loadu_ps(xs16 + 16 * gi); }
};

// Q6_K: a group is a 256-element super-block of 16 sub-blocks of 16.
struct DQ6K {
  static constexpr int kBytes = 210;
  static constexpr int kGroup = 256, kSteps = 4, kOff = 32;
  static constexpr bool kMins = false;
  struct Group {
    __m512 wm;  // fl(d * scale_j), j = 0..15
  };
  static inline void group(const uint8_t* row, int64_t gi, Group& g) {
    const uint8_t* p = row + gi * kBytes;
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    const float d = _cvtsh_ss(ld16(p + 208));
    g.wm = _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sc));
  }
  static inline void step(const uint8_t* row, int64_t gi, int s, const Group& g, __m512i& codes,
                          __m512& ws) {
    const uint8_t* p = row + gi * kBytes;
    const int h = s >> 1;
    const __m512i ql = _mm512_loadu_si512(p + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    __m512i lo, hb;
    if ((s & 1) == 0) {
      lo = _mm512_and_si512(ql, lo4);
      // Lower 256 bits: qh bits 0-1 -> 4-5; upper: qh bits 2-3 -> 4-5.
      hb = _mm512_sllv_epi16(qh, _mm512_set_epi64(0x0002000200020002, 0x0002000200020002,
                                                  0x0002000200020002, 0x0002000200020002,
                                                  0x0004000400040004, 0x0004000400040004,
                                                  0x0004000400040004, 0x0004000400040004));
    } else {
      lo = _mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4);
      // Lower: qh bits 4-5 stay; upper: qh bits 6-7 -> 4-5.
      hb = _mm512_srlv_epi16(qh, _mm512_set_epi64(0x0002000200020002, 0x0002000200020002,
                                                  0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0));
    }
    codes = _mm512_ternarylogic_epi64(lo, hb, _mm512_set1_epi8(0x30), 0xF8);  // lo | (hb & 0x30)
    ws = _mm512_permutexvar_ps(load_idx(kIdxQ6[s]), g.wm);
  }
  static inline __m512 mins(const Group&) { return _mm512_setzero_ps(); }
  static inline __m512 xs_vec(const float*, int64_t) { return _mm512_setzero_ps(); }
};

}  // namespace triad::kernels::avx512
