// The panel layout: quantized weights of the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0 and IQ4_NL (laid out as Q4_0: its nibbles index kIq4nlValues), and of Q4_K, Q5_K, Q6_K,
// IQ4_XS, Q2_K and Q3_K, re-laid once, at load time, 16 rows at a time ("a panel"), for the panel
// kernels (matmul_panels_avx512.cpp, matmul_panels_avx2.cpp), in exactly the bytes of the GGUF
// blocks (no memory overhead; the GGUF layout is not kept).
//
// Why: the lane layout (lane_layout.h) puts 16 scale groups of one row in the 16 int32 lanes,
// so every output ends in a 16-lane horizontal sum, and a row of 896 columns (28 blocks) fills
// its second group of lanes only three quarters. In a panel lane r is row r: a vpdpbusd of one
// code vector with 4 activation bytes broadcast sums 16 rows' products at once, the 16 int32
// lanes are 16 outputs, and no sum crosses lanes. Activations are used as act_quant.h makes
// them (no re-layout).
//
// Geometry. A panel is 16 rows of `cols` elements, nb = cols / 32 blocks each, taking
// 16 * row_bytes bytes. Its blocks are stored in units of two (block 2u and 2u + 1; the last
// unit holds one block when nb is odd), unit u at offset 32 * bb * u (bb: the type's block
// bytes), each unit in this order, for each of its n blocks in turn within each part:
//   codes   Q8_0: 8 vectors of 64 bytes; vector k byte 4r + j = row r's code of element
//           4k + j, XOR 0x80 (an unsigned byte: code + 128).
//           Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL: 4 vectors of 64 bytes; vector v byte 4r + j = row r's
//           qs[4v + j] (low nibble: element 4v + j, high nibble: element 16 + 4v + j).
//   masks   Q5_0 / Q5_1 only: 8 little-endian uint64; bit 4r + j of mask k = the fifth bit of
//           row r's element 4k + j (code vector k is vector k's low nibbles for k < 4, vector
//           k - 4's high nibbles for k >= 4), so one masked OR of 0x10 completes a code vector.
//   scales  16 fp16 d, row r's at r.
//   mins    Q4_1 / Q5_1 only: 16 fp16 m, row r's at r.
// A unit of two blocks is 32 * bb bytes: a multiple of 64 for every type (bb = 34, 24, 22, 20, 18),
// so a 64-byte aligned panel keeps every code vector aligned (a panel of odd nb ends 32 bytes
// past a multiple of 64: the next panel's vectors are then read unaligned; so does a Q6_K panel
// of an odd super-block count, 3360 bytes being 52.5 lines, and every odd Q3_K super-block,
// 1760 bytes being 27.5 lines).
//
// The K-quants Q4_K, Q5_K, Q6_K and IQ4_XS: nb = cols / 256 super-blocks, sub-block scales unpacked into
// 16-row vectors so a tile reads them as it reads codes, in the same bytes as the GGUF blocks.
//   Q4_K, units of one block, block b at 2304 * b (16 x 144 bytes):
//     codes   2048 bytes: chunk c (0..3) vector v (0..7) at 512c + 64v, byte 4r + j = row r's
//             qs[32c + 4v + j] (low nibble: sub-block 2c's element 4v + j; high: 2c + 1's);
//     lows    at 2048, 128 bytes: byte 16g + r = row r's sub-block g scale & 15 | (min & 15) << 4;
//     highs   at 2176, 64 bytes: byte 16(g % 4) + r, bits 4(g / 4) .. 4(g / 4) + 3 = row r's
//             scale >> 4 | (min >> 4) << 2 (g and g + 4 share a byte);
//     d at 2240, dmin at 2272: 16 fp16 each, row r's at r.
//   Q5_K, as Q4_K (block b at 2816 * b, 16 x 176 bytes) with 512 bytes of fifth bits after the
//     codes: at 2048 + 64g, 8 little-endian uint64 masks of sub-block g; bit 4r + j of mask k =
//     the fifth bit of row r's element 4k + j of sub-block g (bit g of qh[4k + j]); then lows
//     at 2560, highs at 2688, d at 2752, dmin at 2784.
//   IQ4_XS, units of one block, block b at 2176 * b (16 x 136 bytes):
//     codes   2048 bytes: sub-block g (0..7) vector v (0..3) at 256g + 64v, byte 4r + j = row
//             r's qs[16g + 4v + j] (Q4_0's nibble order within the sub-block);
//     lows    at 2048, 64 bytes: byte 16(g % 4) + r, bits 4(g / 4) .. + 3 = row r's ls_g & 15;
//     highs   at 2112, 32 bytes: byte 16(g % 2) + r, bits 2(g / 2) .. + 1 = row r's ls_g >> 4;
//     d       at 2144: 16 fp16, row r's at r.
//   Q6_K, units of two blocks (the last holds one when nb is odd), unit u at 6720 * u, n blocks:
//     codes   at 3072i for block i of the unit: ql half h (0, 1) vector v (0..15) at
//             1024h + 64v, byte 4r + j = row r's ql[64h + 4v + j]; then qh half h vector v
//             (0..7) at 2048 + 512h + 64v, byte 4r + j = row r's qh[32h + 4v + j];
//     scales  at 3072n + 256i: byte 16g + r = row r's int8 scale of sub-block g (0..15);
//     d       at 3328n + 32i: 16 fp16, row r's at r.
//
//   Q2_K and Q3_K, units of one block. Their code bytes go in pairs: with p(u, j) = 16 (j / 2) + 2u + j % 2, bytes 4r, 4r + 1
//   of a code vector hold two elements of a 32-block's first sub-block of 16 and bytes 4r + 2,
//   4r + 3 the same two of its second, so a vpmaddubsw sums each sub-block in its own int16 (the
//   gathered activations are interleaved to match, panel_gather.h). Their sub-block scales are
//   grouped by 32-block s (0..7) and half h (rows 8h .. 8h+7): 16 bytes per (s, h), byte 2q + i
//   for row 8h + q's sub-block 2s + i, so one 16-byte load and a widening give a half panel's
//   int16 scale pairs of one 32-block.
//   Q2_K, block b at 1344 * b (16 x 84 bytes):
//     codes   1024 bytes: vector v (0..15) at 64v, byte 4r + j = row r's qs[32 (v / 8) +
//             p(v % 8, j)] (2-bit code k of a byte: element 128 (v / 8) + 32k + p(v % 8, j));
//     scales  at 1024, 256 bytes: byte 32s + 16h + 2q + i = row 8h + q's scales[2s + i] (low
//             nibble scale, high nibble minimum, as in GGUF);
//     d at 1280, dmin at 1312: 16 fp16 each, row r's at r.
//   Q3_K, block b at 1760 * b (16 x 110 bytes):
//     codes   1536 bytes: 32-block s (0..7) in three vectors A, B, C at 192s, + 64, + 128 that
//             hold its 8 code vectors' 3-bit codes c_v (byte 4r + j: row r's element 32s +
//             p(v, j), c = its two qs bits | its hmask bit << 2): A = c0 | c1 << 3 | (c6 & 3)
//             << 6, B = c2 | c3 << 3 | (c7 & 3) << 6, C = c4 | c5 << 3 | (c6 >> 2) << 6 |
//             (c7 >> 2) << 7. Each code is one AND, a shift and an AND, or (c6, c7) two of
//             those and an OR away, where GGUF's split of the low and high bits cost a shift,
//             an AND, a shift and an OR per code vector (the same bytes);
//     lows    at 1536, 128 bytes: byte 32s + 16h + 2q + i (s 0..3), bits 4(s' / 4) .. + 3 =
//             the low 4 bits of row 8h + q's 6-bit scale of sub-block 2s' + i, s' = s and s + 4;
//     highs   at 1664, 64 bytes: byte 32s + 16h + 2q + i (s 0..1), bits 2(s' / 2) .. + 1 = the
//             top 2 bits of that scale, s' = s, s + 2, s + 4, s + 6;
//     d       at 1728: 16 fp16, row r's at r.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace triad::kernels {

inline constexpr int64_t kPanelRows = 16;
inline constexpr int64_t kQ4kPanelBlock = 2304;  // a Q4_K super-block of a panel (16 x 144 bytes)
inline constexpr int64_t kQ5kPanelBlock = 2816;  // a Q5_K super-block of a panel (16 x 176 bytes)
inline constexpr int64_t kIq4xsPanelBlock = 2176;  // an IQ4_XS super-block of a panel (16 x 136 bytes)
inline constexpr int64_t kQ6kPanelBlock = 3360;  // a Q6_K super-block of a panel (16 x 210 bytes)
inline constexpr int64_t kQ2kPanelBlock = 1344;  // a Q2_K super-block of a panel (16 x 84 bytes)
inline constexpr int64_t kQ3kPanelBlock = 1760;  // a Q3_K super-block of a panel (16 x 110 bytes)
// Where Q3_K's code c_v (v = 0..7) lies in its 32-block's vectors A, B, C (0, 1, 2; above): its
// two low bits from bit kQ3kLowBit[v] of vector kQ3kLowVector[v], its third at bit
// kQ3kHighBit[v] of vector kQ3kHighVector[v].
inline constexpr int kQ3kLowVector[8] = {0, 0, 1, 1, 2, 2, 0, 1}, kQ3kLowBit[8] = {0, 3, 0, 3, 0, 3, 6, 6};
inline constexpr int kQ3kHighVector[8] = {0, 0, 1, 1, 2, 2, 2, 2}, kQ3kHighBit[8] = {2, 5, 2, 5, 2, 5, 6, 7};

// Whether `t` has a panel layout.
bool panel_layout_supported(DType t);

// Whether a matrix of `rows` rows of type `t` can be laid out in panels (rows a multiple of 16).
bool panel_layout_fits(DType t, int64_t rows);

// 16 consecutive GGUF rows of `cols` columns (row r at rows + r * row_bytes) into one panel,
// or back. Both take 16 * row_bytes(t, cols) bytes; exact inverses; src and dst must not overlap.
void panel_from_rows(DType t, const uint8_t* rows, int64_t cols, uint8_t* panel);
void panel_to_rows(DType t, const uint8_t* panel, int64_t cols, uint8_t* rows);

// Row i (0..15) of a panel in GGUF blocks: row_bytes(t, cols) bytes at `row`.
void row_from_panel(DType t, const uint8_t* panel, int i, int64_t cols, uint8_t* row);

}  // namespace triad::kernels
