// The lane layout: quantized weight rows re-laid once, at load time, for the AVX-512 VNNI
// kernels, in exactly the bytes of the GGUF block layout (no memory overhead; the GGUF layout
// is not kept).
//
// Why: a 16-lane vpdpbusd sums 4 products per 32-bit lane, so a kernel that wants complete
// integer sums per scale group wants lane l of every code vector to belong to group l. The GGUF
// blocks keep each group's codes together instead, so the prompt kernels used to transpose
// every weight row on every call (43% of a 16-way decode step). In the lane layout the codes
// already lie transposed, at their GGUF width (2, 3, 4, 5, 6 or 8 bits), and a kernel only widens
// them (and, shift; masked merges for the fifth or the two high bits).
//
// Geometry. A row is cut into lane blocks of LB elements: the 32-element blocks of Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4; the 32-element sub-blocks of Q4_K, Q5_K and IQ4_XS; the
// 16-element sub-blocks of Q6_K, Q3_K and Q2_K (LB = 16). A group is 16 consecutive lane blocks
// (the last group of a row may have fewer, nl: for Q4_K, Q5_K and IQ4_XS 8 or 16, for the LB = 16
// types always 16). A group takes exactly the bytes of its blocks and starts where its first block starts. Lane l of the
// group is lane block l; "byte 4l + b" below is byte b of lane l in a plane of 4 * nl bytes.
// Within a group, in this order (Q3_K and Q2_K: their scale blocks first, see below):
//   code planes   8-bit codes (Q8_0): 8 planes; plane k byte 4l+b = code of element 4k+b.
//                 4-bit codes (32-element lane blocks): 4 planes; plane v byte 4l+b = element
//                 4v+b in the low nibble, element 16+4v+b in the high nibble (for Q4_0,
//                 Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 this is the block's qs[4v+b] as is; for
//                 IQ4_XS sub-block j's qs[16j + 4v + b]).
//                 Q6_K: 2 planes; plane v byte 4l+b = the low 4 bits of element 4v+b (low
//                 nibble) and of element 8+4v+b (high nibble).
//                 Q2_K: one 2-bit plane; bits 2k, 2k+1 of byte 4l+b = element 4k+b.
//                 Q3_K: a 64-byte plane; byte 4l+b = element b (bits 0..2), element 4+b (bits
//                 3..5) and the low two bits of element 8+b (bits 6..7); then a 32-byte plane
//                 of nibbles, byte 4l+b (l < 8) = lane l's nibble (low) and lane l+8's (high),
//                 a nibble holding element 12+b (bits 0..2) and the third bit of element 8+b
//                 (bit 3). So code vectors 0, 1 and 3 are one shift and mask each, 2 a merge.
//   high bits     Q5_0, Q5_1, Q5_K: one plane; bit k of byte 4l+b = bit 4 of element 4k+b
//                 (k = 0..7). Q6_K: one plane; bits 2k, 2k+1 of byte 4l+b = bits 4, 5 of
//                 element 4k+b (k = 0..3).
//   scales        32-element blocks: d (fp16) of every lane, then (Q4_1, Q5_1) m of every
//                 lane; MXFP4: the exponent byte of every lane. Q4_K / Q5_K: the 16 header
//                 bytes (d, dmin, 12 packed scales) of each super-block, as stored; IQ4_XS, per
//                 super-block, its 8 scales ls_j - 32 as 6-bit fields (two's complement) at bit
//                 6j of 6 bytes, then d (GGUF: d, scales_h, scales_l). Q6_K: the
//                 16 int8 sub-block scales, then d. Q2_K, at the group's start: d, -dmin (fp16,
//                 the sign bit flipped), then the 16 scale bytes (scale | minimum << 4): one
//                 load converts both, which the kernel uses as they are.
//                 Q3_K, at the group's start: a 14-byte scale block of sixteen 6-bit fields
//                 sc_j - 32 (two's complement; GGUF stores sc_j biased by 32), field j at bit
//                 6j of bytes 0..5 for j < 8, d in bytes 6..7, field j at bit 6 (j - 8) of
//                 bytes 8..13 for j >= 8: each field lies within two adjacent bytes, so a
//                 kernel extracts all 16 with one byte shuffle and two shifts (GGUF's order
//                 splits each scale into a nibble and two high bits in other bytes).
// So "code vector k" of a full group (bytes 4k .. 4k+3 of each lane block, one 64-byte vector)
// is one plane or one nibble half of one, which is what the kernels multiply.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace triad::kernels {

// Whether `t` has a lane layout (the types of the AVX-512 packed kernels).
bool lane_layout_supported(DType t);

// Re-lays one row of `cols` elements (a multiple of the type's block size) from the GGUF block
// layout into the lane layout, or back. Both take row_bytes(t, cols) bytes; the two functions
// are exact inverses. src and dst must not overlap.
void row_to_lanes(DType t, const uint8_t* blocks, int64_t cols, uint8_t* lanes);
void row_from_lanes(DType t, const uint8_t* lanes, int64_t cols, uint8_t* blocks);

}  // namespace triad::kernels
