// Internal to the AVX-512 packed kernels (include only from matmul_packed_avx512.cpp): widening
// a group of weights in the lane layout (lane_layout.h) into the packed kernels' registers.
// The codes already lie in lane-block order at their stored width, so a group is only widened
// (and, shift, masked merges, table lookups; no transposes) and its 16 lane scales (and
// minimums) decoded. LanePacker<D>::regs(row, cols, g, r) fills GroupRegs for decoder D
// (matmul_decode_avx512.h) with the same values the GGUF-layout Packer stores, so a row's
// results do not depend on the layout; LanePacker<D>::pack stores them in the packed group
// format (codes, then ws at +kLB * 16, then mins).
// Thread-safety: pure inline functions over read-only data.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/matmul_decode_avx512.h"

namespace triad::kernels::avx512 {

// Bit k of every byte of h moved to bit 4 (the fifth code bit of code vector k); epi16 shifts
// are safe because only bit 4 of each byte is kept.
template <int k>
inline __m512i high_bit_to4(__m512i h) {
  if constexpr (k < 4) return _mm512_slli_epi16(h, 4 - k);
  else if constexpr (k == 4) return h;
  else return _mm512_srli_epi16(h, k - 4);
}

// lo | (h & m) per byte.
inline __m512i merge_bits(__m512i lo, __m512i h, char m) {
  return _mm512_ternarylogic_epi64(lo, h, _mm512_set1_epi8(m), 0xF8);
}

// Code vectors v (low nibbles) and v + 4 (high nibbles) of a 4-bit nibble plane (lane_layout.h),
// with the fifth bits of a high-bit plane hb (kFive) or looked up in a 16-entry table (kTable).
template <int v, bool kFive, bool kTable>
inline void widen_nibbles(const uint8_t* p, int plane, __mmask64 m, __m512i hb, __m512i table, __m512i (&c)[8]) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const __m512i n = _mm512_maskz_loadu_epi8(m, p + v * plane);
  __m512i lo = _mm512_and_si512(n, lo4), hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), lo4);
  if constexpr (kFive) {
    lo = merge_bits(lo, high_bit_to4<v>(hb), 0x10);
    hi = merge_bits(hi, high_bit_to4<v + 4>(hb), 0x10);
  }
  if constexpr (kTable) {
    lo = _mm512_shuffle_epi8(table, lo);
    hi = _mm512_shuffle_epi8(table, hi);
  }
  c[v] = lo;
  c[v + 4] = hi;
}

// The four nibble planes of a group, widened into the eight code vectors.
template <bool kFive, bool kTable>
inline void widen_nibble_planes(const uint8_t* p, int plane, __mmask64 m, __m512i hb, __m512i table, __m512i (&c)[8]) {
  widen_nibbles<0, kFive, kTable>(p, plane, m, hb, table, c);
  widen_nibbles<1, kFive, kTable>(p, plane, m, hb, table, c);
  widen_nibbles<2, kFive, kTable>(p, plane, m, hb, table, c);
  widen_nibbles<3, kFive, kTable>(p, plane, m, hb, table, c);
}

// A widened group in registers: kLB / 4 code vectors, the 16 lane scales and (types with
// minimums) the 16 lane minimums as the kernel adds them. LanePacker<D>::regs fills one; pack stores it in the
// packed group format (codes, then ws at +kLB * 16, then mins).
template <int kLB, bool kMins>
struct GroupRegs {
  __m512i c[kLB / 4];
  __m512 ws;
  __m512 mn;  // kMins only: what the kernel multiplies by the lane's activation sum
};
template <int kLB, bool kMins>
inline void store_group(const GroupRegs<kLB, kMins>& r, uint8_t* out) {
#pragma GCC unroll 8
  for (int k = 0; k < kLB / 4; ++k) _mm512_store_si512(out + 64 * k, r.c[k]);
  _mm512_store_ps(reinterpret_cast<float*>(out + kLB * 16), r.ws);
  if constexpr (kMins) _mm512_store_ps(reinterpret_cast<float*>(out + kLB * 16 + 64), r.mn);
}

// Every LanePacker: regs(row, cols, g, r) widens group g of a lane-layout row into registers;
// pack stores it.
template <class Self, int kLB, bool kMins>
struct LanePackerBase {
  static void pack(const uint8_t* row, int64_t cols, int64_t g, uint8_t* out) {
    GroupRegs<kLB, kMins> r;
    Self::regs(row, cols, g, r);
    store_group(r, out);
  }
};

template <class D>
struct LanePacker;

// e8m0_half(e) (quant_blocks.h) of 16 exponents, lanes outside `valid` zero: (e - 1) << 23 is
// the f32 2^(e - 128) for e >= 2; e = 0 and 1 give the subnormals 0x00200000 << e. Five integer
// operations in place of a 16-element gather from kE8m0Half.
inline __m512 e8m0_half16(__m512i e, __mmask16 valid) {
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __mmask16 tiny = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  const __m512i bits = _mm512_mask_sllv_epi32(normal, tiny, _mm512_set1_epi32(0x00200000), e);
  return _mm512_maskz_mov_ps(valid, _mm512_castsi512_ps(bits));
}

// The 32-element block types: a group is up to 16 blocks, lane l = block 16g + l.
template <class D>
  requires(D::kGroup == 64)
struct LanePacker<D> : LanePackerBase<LanePacker<D>, 32, D::kMins> {
  static constexpr int kLB = 32;
  static inline void regs(const uint8_t* row, int64_t cols, int64_t g, GroupRegs<32, D::kMins>& r) {
    const int64_t nb = cols / 32;
    const int nl = static_cast<int>(std::min<int64_t>(16, nb - 16 * g));
    const uint8_t* p = row + g * 16 * D::kBytes;
    const int plane = 4 * nl;
    const __mmask64 m = nl == 16 ? ~uint64_t{0} : (uint64_t{1} << plane) - 1;
    const __mmask16 m16 = static_cast<__mmask16>((1u << nl) - 1);
    const uint8_t* sc;
    if constexpr (D::kQ8) {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) r.c[k] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, p + k * plane), flip);
      sc = p + 8 * plane;
    } else {
      const __m512i hb = D::kFive ? _mm512_maskz_loadu_epi8(m, p + 4 * plane) : _mm512_setzero_si512();
      __m512i table = _mm512_setzero_si512();
      if constexpr (D::kTable) table = D::table();
      widen_nibble_planes<D::kFive, D::kTable>(p, plane, m, hb, table, r.c);
      sc = p + (D::kFive ? 5 : 4) * plane;
    }
    if constexpr (D::kExpScale) {  // MXFP4: exponent bytes
      r.ws = e8m0_half16(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m16, sc)), m16);
    } else {
      r.ws = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m16, sc));
    }
    if constexpr (D::kMins) r.mn = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m16, sc + 2 * nl));
  }
};

// The 16 lane scales fl(d * sc_j) and minimums -fl(dmin * mn_j) of a Q4_K / Q5_K lane-layout
// group from its nsb (1 or 2) adjacent 16-byte headers (d, dmin, 12 packed scale bytes), both
// super-blocks at once: DK45::group's bit work on each 128-bit half, then one qword permute puts
// [sc of the first, sc of the second] and [mn, mn] side by side. The same per-lane arithmetic as
// DK45::group and k45_scales, so the same values (an absent second super-block reads zero
// bytes: scales and minimums +0, as k45_scales gives).
inline void k45_pair_scales(const uint8_t* hdr, int nsb, __m512& ws, __m512& mn) {
  const __m256i v = _mm256_maskz_loadu_epi8(nsb == 2 ? ~0u : 0xFFFFu, hdr);
  // Per half, dwords [d | dmin, A, B, C] (see DK45::group): sc[0..3] = A & 0x3f, sc[4..7] =
  // (C & 0x0f) | ((A >> 2) & 0x30), mn[0..3] = B & 0x3f, mn[4..7] = ((C >> 4) & 0x0f) | ((B >> 2) & 0x30).
  const __m256i x = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1)), _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4));
  const __m256i y = _mm256_srli_epi32(_mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1)), 2);
  const __m256i m1 = _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
  const __m256i m2 = _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030);
  const __m256i scm8 = _mm256_ternarylogic_epi32(x, m1, _mm256_and_si256(y, m2), 0xEA);  // (x & m1) | t
  // Qwords [sc0, mn0, sc1, mn1] -> [sc0, sc1, mn0, mn1].
  const __m256i q = _mm256_permute4x64_epi64(scm8, _MM_SHUFFLE(3, 1, 2, 0));
  const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)));
  const __m512 mv = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)));
  const __m512 h = _mm512_cvtph_ps(v);  // halves 0, 1: d, dmin of the first; 8, 9 of the second
  const __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8), h);
  const __m512 dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9), h);
  ws = _mm512_mul_ps(sc, d);
  mn = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(mv, dmin));
}

// Group g of a lane-layout row of 256-element super-blocks taken two per group (Q4_K, Q5_K,
// IQ4_XS): nsb (1 or 2) super-blocks of 8 lanes each, at p, with nibble planes of `plane` bytes
// and the mask of a plane's bytes.
struct SuperPair {
  int nsb, plane;
  const uint8_t* p;
  __mmask64 m;
  SuperPair(const uint8_t* row, int64_t cols, int64_t g, int block_bytes)
      : nsb(static_cast<int>(std::min<int64_t>(2, cols / 256 - 2 * g))),
        plane(32 * nsb),
        p(row + g * 2 * block_bytes),
        m(nsb == 2 ? ~uint64_t{0} : (uint64_t{1} << plane) - 1) {}
};

// Q4_K / Q5_K: a group is one or two super-blocks (8 or 16 lanes of 32-element sub-blocks).
template <bool kFive>
struct LanePacker<DK45<kFive>> : LanePackerBase<LanePacker<DK45<kFive>>, 32, true> {
  using D = DK45<kFive>;
  static constexpr int kLB = 32;
  static inline void regs(const uint8_t* row, int64_t cols, int64_t g, GroupRegs<32, true>& r) {
    const SuperPair sp(row, cols, g, D::kBytes);
    const __m512i hb = kFive ? _mm512_maskz_loadu_epi8(sp.m, sp.p + 4 * sp.plane) : _mm512_setzero_si512();
    widen_nibble_planes<kFive, false>(sp.p, sp.plane, sp.m, hb, _mm512_setzero_si512(), r.c);
    k45_pair_scales(sp.p + (kFive ? 5 : 4) * sp.plane, sp.nsb, r.ws, r.mn);
  }
};

// Sixteen signed 6-bit scale fields (lane_layout.h: fields 0..7 at bit 6j of bytes 0..5, 8..15
// at bit 6 (j - 8) of bytes 8..13) from a vector holding those 16 bytes in every 128-bit lane:
// vpshufb puts the two bytes that hold field j in the top half of 32-bit lane j, one variable
// shift moves the field's top bit to bit 31 and an arithmetic shift sign-extends it (three
// operations; GGUF's orders split each scale into a nibble and high bits in other bytes).
inline __m512i fields6_x16(__m512i v) {
  // Lane j: bytes b, b + 1 with b = 8 (j / 8) + 6 (j % 8) / 8 hold the field at bit 6 (j % 8) % 8.
  constexpr auto pick = [](int b) { return static_cast<int>(0x8080u | uint32_t(b) << 16 | uint32_t(b + 1) << 24); };
  const __m512i idx = _mm512_setr_epi32(pick(0), pick(0), pick(1), pick(2), pick(3), pick(3), pick(4), pick(5),
                                        pick(8), pick(8), pick(9), pick(10), pick(11), pick(11), pick(12), pick(13));
  const __m512i up = _mm512_setr_epi32(10, 4, 6, 8, 10, 4, 6, 8, 10, 4, 6, 8, 10, 4, 6, 8);
  return _mm512_srai_epi32(_mm512_sllv_epi32(_mm512_shuffle_epi8(v, idx), up), 26);
}

// The 16 lane scales fl(d * (ls_j - 32)) of an IQ4_XS lane-layout group from its nsb (1 or 2)
// scale blocks at hdr (lane_layout.h: a super-block's 8 scales as 6-bit fields, then its d),
// each half with its own d: DIq4xs::group's per-lane arithmetic, so the same scales (when
// nsb == 1, lanes 8..15 read zero bytes: +0, as pair_scales gives; their codes and activations
// are zero, so every output keeps its bits).
inline __m512 iq4xs_lane_scales(const uint8_t* hdr, int nsb) {
  const __m512i v = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8(nsb == 2 ? 0xFFFF : 0x00FF, hdr));
  // Halves 0..7 of the first 256 bits: d of the first super-block (bytes 6, 7); 8..15: of the second.
  const __m512i dw = _mm512_shuffle_epi8(v, _mm512_setr_epi32(0x07060706, 0x07060706, 0x07060706, 0x07060706,
                                                              0x0F0E0F0E, 0x0F0E0F0E, 0x0F0E0F0E, 0x0F0E0F0E,
                                                              0, 0, 0, 0, 0, 0, 0, 0));
  return _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(dw)), _mm512_cvtepi32_ps(fields6_x16(v)));
}

// The 16 lane scales fl(d * (sc_j - 32)) of a Q3_K lane-layout group from its scale block at p
// (lane_layout.h: its 16 scales as 6-bit fields around d, in bytes 6..7; the window's last two
// bytes are codes, unused): DQ3K::group's per-lane arithmetic, so the same scales.
inline __m512 q3k_lane_scales(const uint8_t* p) {
  const __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(ld16(p + 6))));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(fields6_x16(v)));
}

// IQ4_XS: a group is one or two super-blocks (8 or 16 lanes of 32-element sub-blocks) whose table
// nibbles widen as IQ4_NL's do; the scales come from each super-block's scale block.
template <>
struct LanePacker<DIq4xs> : LanePackerBase<LanePacker<DIq4xs>, 32, false> {
  using D = DIq4xs;
  static constexpr int kLB = 32;
  static inline void regs(const uint8_t* row, int64_t cols, int64_t g, GroupRegs<32, false>& r) {
    const SuperPair sp(row, cols, g, D::kBytes);
    widen_nibble_planes<false, true>(sp.p, sp.plane, sp.m, _mm512_setzero_si512(), D::table(), r.c);
    r.ws = iq4xs_lane_scales(sp.p + 4 * sp.plane, sp.nsb);
  }
};

// Q6_K: a group is one super-block (16 lanes of 16-element sub-blocks).
template <>
struct LanePacker<DQ6K> : LanePackerBase<LanePacker<DQ6K>, 16, false> {
  static constexpr int kLB = 16;
  static inline void regs(const uint8_t* row, int64_t, int64_t g, GroupRegs<16, false>& r) {
    const uint8_t* p = row + g * DQ6K::kBytes;
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    const __m512i n0 = _mm512_loadu_si512(p), n1 = _mm512_loadu_si512(p + 64);
    const __m512i qh = _mm512_loadu_si512(p + 128);
    r.c[0] = merge_bits(_mm512_and_si512(n0, lo4), _mm512_slli_epi16(qh, 4), 0x30);
    r.c[1] = merge_bits(_mm512_and_si512(n1, lo4), _mm512_slli_epi16(qh, 2), 0x30);
    r.c[2] = merge_bits(_mm512_and_si512(_mm512_srli_epi16(n0, 4), lo4), qh, 0x30);
    r.c[3] = merge_bits(_mm512_and_si512(_mm512_srli_epi16(n1, 4), lo4), _mm512_srli_epi16(qh, 2), 0x30);
    DQ6K::Group gs;
    DQ6K::group(p, 0, gs);  // scales at +192, d at +208: the same offsets as a GGUF block
    r.ws = gs.wm;
  }
};

// Words 16..31 shifted right by 4: Q3_K's nibble plane, broadcast to both halves, then holds
// lanes 0..7's nibbles in the low half and lanes 8..15's in the high half, each at bits 0..3 of
// its byte.
alignas(64) inline constexpr int16_t kQ3NibbleShift[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                           4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};

// Q3_K: a group is one super-block (16 lanes of 16-element sub-blocks): the 14-byte scale
// block, the 64-byte plane of code vectors 0, 1 and the low bits of 2, the 32-byte nibble plane
// of code vector 3 and the third bits of 2 (lane_layout.h). Nine operations widen the four code
// vectors.
template <>
struct LanePacker<DQ3K> : LanePackerBase<LanePacker<DQ3K>, 16, false> {
  static constexpr int kLB = 16;
  static inline void regs(const uint8_t* row, int64_t, int64_t g, GroupRegs<16, false>& r) {
    const uint8_t* p = row + g * DQ3K::kBytes;
    const __m512i a = _mm512_loadu_si512(p + 14);
    const __m512i h = _mm512_srlv_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 78))),
                                        _mm512_load_si512(kQ3NibbleShift));
    const __m512i m7 = _mm512_set1_epi8(7);
    r.c[0] = _mm512_and_si512(a, m7);
    r.c[1] = _mm512_and_si512(_mm512_srli_epi16(a, 3), m7);
    r.c[2] = merge_bits(_mm512_and_si512(_mm512_srli_epi16(a, 6), _mm512_set1_epi8(3)), _mm512_srli_epi16(h, 1), 0x04);
    r.c[3] = _mm512_and_si512(h, m7);
    r.ws = q3k_lane_scales(p);
  }
};

// Q2_K: a group is one super-block (16 lanes of 16-element sub-blocks): d and -dmin, the 16
// scale bytes, then the 64-byte 2-bit plane (code vector k is bits 2k, 2k+1; lane_layout.h).
// The same scales and minimums as q2k_scales (-dmin's fp16 negated exactly).
template <>
struct LanePacker<DQ2K> : LanePackerBase<LanePacker<DQ2K>, 16, true> {
  static constexpr int kLB = 16;
  static inline void regs(const uint8_t* row, int64_t, int64_t g, GroupRegs<16, true>& r) {
    const uint8_t* p = row + g * DQ2K::kBytes;
    const __m512i a = _mm512_loadu_si512(p + 20);
    const __m512i m3 = _mm512_set1_epi8(3);
    r.c[0] = _mm512_and_si512(a, m3);
    r.c[1] = _mm512_and_si512(_mm512_srli_epi16(a, 2), m3);
    r.c[2] = _mm512_and_si512(_mm512_srli_epi16(a, 4), m3);
    r.c[3] = _mm512_and_si512(_mm512_srli_epi16(a, 6), m3);
    const __m128 dd = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));  // d, -dmin, (scale bytes)
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4)));
    r.ws = _mm512_mul_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(15))));
    r.mn = _mm512_mul_ps(_mm512_broadcastss_ps(_mm_movehdup_ps(dd)), _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)));
  }
};

}  // namespace triad::kernels::avx512
