// Packed block layouts of the GGML quantized weight formats, as they lie in a GGUF file.
//
// Every quantized row is a sequence of blocks; a block encodes `kQK*` consecutive elements in
// the number of bytes fixed by static_assert below (equal to traits(t).block_bytes). The
// structs contain only fixed-width integers, so they have no padding, are trivially copyable,
// and their alignment is 2 bytes (4 for BlockQ8_K). GGUF tensor data is 32-byte aligned and
// every block size is a multiple of its alignment, so a block pointer computed into a tensor is
// properly aligned; code that cannot guarantee that should memcpy the block first.
//
// Half-precision fields (`d`, `m`, `dmin`) hold raw IEEE binary16 bits; read them with
// triad::fp16_to_f32 (tensor/fp16.h). "Nibble" means a 4-bit unsigned field.
//
// Element values, exactly as gguf.quants (PyPI gguf) and ggml compute them, all in float32:
//   Q4_0: x = d * (q - 8)            Q4_1: x = d * q + m
//   Q5_0: x = d * (q - 16)           Q5_1: x = d * q + m
//   Q8_0: x = d * q
//   Q4_K: x = (d * sc) * q - (dmin * mn)      per 32-element sub-block scale sc / min mn
//   Q5_K: same as Q4_K with a 5-bit q
//   Q6_K: x = (d * scale) * (q - 32)         per 16-element sub-block int8 scale
// where (d * sc) and (dmin * mn) are float32 products formed once per sub-block. All of these
// products are exact in float32 (fp16 significands have 11 bits, the integer factors <= 7), so
// only the final add/sub of Q4_1/Q5_1/Q4_K/Q5_K rounds, and a fused multiply-add gives the
// same bits.
//
// Thread-safety: plain data and pure inline functions.
#pragma once

#include <cstdint>
#include <type_traits>

namespace triad::kernels {

inline constexpr int kQK4_0 = 32;  // elements per Q4_0 block
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK_K = 256;       // elements per K-quant super-block
inline constexpr int kKScaleSize = 12;  // bytes of packed 6-bit scales/mins in Q4_K/Q5_K

// Q4_0: 32 elements, symmetric 4-bit.
// qs[j] (j < 16): low nibble = q of element j, high nibble = q of element j + 16.
struct BlockQ4_0 {
  uint16_t d;              // fp16 scale
  uint8_t qs[kQK4_0 / 2];  // nibbles, see above
};

// Q4_1: 32 elements, 4-bit with an offset (min). Nibble layout as Q4_0; q is unsigned 0..15.
struct BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 offset added after scaling
  uint8_t qs[kQK4_1 / 2];
};

// Q5_0: 32 elements, symmetric 5-bit. Low 4 bits as Q4_0's nibbles; bit 4 of element i is
// bit i of the little-endian uint32 in qh[0..3]. q is 0..31, the value uses q - 16.
struct BlockQ5_0 {
  uint16_t d;              // fp16 scale
  uint8_t qh[4];           // high bits, little-endian uint32 (bytes, so the block stays 2-aligned)
  uint8_t qs[kQK5_0 / 2];  // low nibbles
};

// Q5_1: 32 elements, 5-bit with an offset. Bits as Q5_0; q is unsigned 0..31.
struct BlockQ5_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 offset added after scaling
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};

// Q8_0: 32 elements, signed 8-bit: x = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK8_0];
};

// Q2_K: 256 elements in 16 sub-blocks of 16, 2-bit q with a 4-bit scale and a 4-bit min per
// sub-block: x = (d * (scales[s] & 15)) * q - dmin * (scales[s] >> 4), s = i / 16. Element
// 128h + 32k + l (h < 2, k < 4, l < 32) has q = (qs[32h + l] >> 2k) & 3.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble: scale, high nibble: min
  uint8_t qs[kQK_K / 4];       // 2-bit codes, see above
  uint16_t d;                  // fp16 super-block scale of the scales
  uint16_t dmin;               // fp16 super-block scale of the mins
};

// Q3_K: 256 elements in 16 sub-blocks of 16, 3-bit q (value q - 4) with a signed 6-bit scale
// per sub-block: x = (d * (sc_s - 32)) * (q - 4), s = i / 16. Element 128h + 32k + l has its
// low two bits at (qs[32h + l] >> 2k) & 3 and its high bit at bit 4h + k of hmask[l]. The 16
// 6-bit scales are packed in 12 bytes (unpack with get_scales_q3k).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bits
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 16 x 6-bit scales (biased by 32)
  uint16_t d;                // fp16 super-block scale
};

// The 16 values of IQ4_NL / IQ4_XS codes: a non-uniform 4-bit grid, denser near zero.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// The 16 values of MXFP4 codes: FP4 E2M1 (sign, 2-bit exponent, 1-bit mantissa), doubled so
// they are integers; the block scale is halved to match (e8m0_half).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// IQ4_NL: 32 elements, x = d * kIq4nlValues[q]; nibble layout as Q4_0 (qs[j] low nibble:
// element j, high nibble: element j + 16).
struct BlockIQ4_NL {
  uint16_t d;  // fp16 scale
  uint8_t qs[16];
};

// IQ4_XS: 256 elements in 8 sub-blocks of 32 with a 6-bit scale each (biased by 32):
// x = (d * (ls_j - 32)) * kIq4nlValues[q], ls_j = low nibble j of scales_l (nibble j % 2 of
// byte j / 2) | bits 2j..2j+1 of scales_h << 4. Sub-block j's codes are qs[16j .. 16j+15] in
// the Q4_0 nibble layout.
struct BlockIQ4_XS {
  uint16_t d;           // fp16 super-block scale
  uint16_t scales_h;    // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[4];  // low 4 bits of the 8 sub-block scales
  uint8_t qs[kQK_K / 2];
};

// MXFP4 (OCP microscaling FP4): 32 elements, x = e8m0_half(e) * kMxfp4Values[q], nibbles as
// Q4_0. e is a power-of-two exponent byte: e8m0_half(e) = 2^(e - 128) (exact in f32 for every
// e; e < 2 gives the f32 subnormals 2^-128 and 2^-127).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};

inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// e8m0_half(e) of every exponent byte, same bit construction, for the SIMD kernels: one load
// per MXFP4 block instead of a compare, cmov and variable shift (about +15% MXFP4 decode speed
// on a Zen 4). constexpr, so no static initializer runs code compiled for a wider ISA.
struct E8m0HalfTable {
  float v[256];
  constexpr E8m0HalfTable() : v() {
    for (int e = 0; e < 256; ++e) {
      const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
      v[e] = __builtin_bit_cast(float, bits);
    }
  }
};
inline constexpr E8m0HalfTable kE8m0Half{};
static_assert(kE8m0Half.v[0] == 0x1p-128f && kE8m0Half.v[1] == 0x1p-127f &&
              kE8m0Half.v[2] == 0x1p-126f && kE8m0Half.v[128] == 1.f &&
              kE8m0Half.v[255] == 0x1p127f);

// Q4_K: 256 elements in 8 sub-blocks of 32. Sub-block j has a 6-bit scale sc_j and 6-bit min
// mn_j packed in `scales` (unpack with get_scale_min_k4). qs holds 4 chunks of 32 bytes: chunk c
// (bytes 32c .. 32c+31) gives sub-block 2c in its low nibbles and sub-block 2c+1 in its high
// nibbles, element l of the sub-block from byte 32c + l.
struct BlockQ4_K {
  uint16_t d;                   // fp16 super-block scale of the sub-block scales
  uint16_t dmin;                // fp16 super-block scale of the sub-block mins
  uint8_t scales[kKScaleSize];  // 8 x 6-bit scale + 8 x 6-bit min
  uint8_t qs[kQK_K / 2];        // nibbles, see above
};

// Q5_K: as Q4_K plus a fifth bit: bit 4 of element l (0..31) of sub-block j is bit j of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];  // 32 bytes: bit j of qh[l] -> sub-block j, element l
  uint8_t qs[kQK_K / 2];  // low nibbles, laid out as in Q4_K
};

// Q6_K: 256 elements, 6-bit q (stored unsigned 0..63, value uses q - 32), 16 sub-blocks of 16
// with int8 scales. The block is two halves of 128 elements; half h uses ql[64h .. 64h+63] and
// qh[32h .. 32h+31]. For l < 32, the elements 128h + l + 32k (k = 0..3) are:
//   k=0: low nibble of ql[64h + l]       | ((qh[32h + l] >> 0) & 3) << 4
//   k=1: low nibble of ql[64h + 32 + l]  | ((qh[32h + l] >> 2) & 3) << 4
//   k=2: high nibble of ql[64h + l]      | ((qh[32h + l] >> 4) & 3) << 4
//   k=3: high nibble of ql[64h + 32 + l] | ((qh[32h + l] >> 6) & 3) << 4
// Element i uses scales[i / 16].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // sub-block scales
  uint16_t d;                 // fp16 super-block scale
};

// Q8_K: 256 elements, signed 8-bit with an f32 scale; the activation format that llama.cpp's
// K-quant dot products pair with (Triad's kernels use per-32 Q8 activations, act_quant.h; the
// quantizer only sizes a scratch block by it). x = d * qs[i]; bsums[g] = sum of qs[16g .. 16g+15].
struct BlockQ8_K {
  float d;  // f32 scale
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes");
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes");
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must be 24 bytes");
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must be 84 bytes");
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must be 110 bytes");
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block must be 18 bytes");
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block must be 136 bytes");
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block must be 17 bytes");
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must be 292 bytes");
static_assert(std::is_trivially_copyable_v<BlockQ4_K> && std::is_standard_layout_v<BlockQ4_K>);
static_assert(std::is_trivially_copyable_v<BlockQ6_K> && std::is_standard_layout_v<BlockQ6_K>);
static_assert(std::is_trivially_copyable_v<BlockQ8_K> && std::is_standard_layout_v<BlockQ8_K>);

// Unpacks the 6-bit scale and min of sub-block j (0..7) from Q4_K/Q5_K `scales` (12 bytes).
// Packing (bit 7 on the left; A..H = scales of sub-blocks 0..7, a..h = their mins):
//   q[0..3]  = 2 high bits of scale j+4 | 6-bit scale j        (EE AAAAAA ...)
//   q[4..7]  = 2 high bits of min j+4   | 6-bit min j          (ee aaaaaa ...)
//   q[8..11] = low 4 bits of min j+4 << 4 | low 4 bits of scale j+4
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = static_cast<uint8_t>(q[j] & 63);
    *min = static_cast<uint8_t>(q[j + 4] & 63);
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Unpacks the 16 6-bit Q3_K scales (still biased by 32) from their 12 packed bytes. Scale s:
// its low nibble is the low (s < 8) or high (s >= 8) nibble of q[s % 8]; its two high bits are
// bits 2 * (s / 4) of q[8 + s % 4].
inline void get_scales_q3k(const uint8_t* q, uint8_t out[16]) {
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? (q[s] & 15) : (q[s - 8] >> 4);
    const int hi = (q[8 + s % 4] >> (2 * (s / 4))) & 3;
    out[s] = static_cast<uint8_t>(lo | hi << 4);
  }
}

}  // namespace triad::kernels
