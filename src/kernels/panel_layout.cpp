// Scalar re-layout between GGUF rows and the panel layout (panel_layout.h). Both directions go
// through one place per block that names where each GGUF byte goes (BlockMap), so the layout
// is written down once.
#include "kernels/panel_layout.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels {
namespace {

constexpr int kRows = static_cast<int>(kPanelRows);

struct Spec {
  int bb = 0;        // GGUF block bytes
  int code_bytes;    // per block per row in the codes part (Q8_0 32, the nibble types 16)
  bool q8 = false, q5 = false, mins = false;  // Q8_0; a fifth bit (Q5_0, Q5_1); an m (Q4_1, Q5_1)
};

Spec spec_of(DType t) {
  switch (t) {
    case DType::kQ4_0: case DType::kIQ4_NL: return {18, 16, false, false, false};
    case DType::kQ4_1: return {20, 16, false, false, true};
    case DType::kQ5_0: return {22, 16, false, true, false};
    case DType::kQ5_1: return {24, 16, false, true, true};
    case DType::kQ8_0: return {34, 32, true, false, false};
    default: fail("no panel layout for ", dtype_name(t));
  }
}

// Where block b (of nb) of row r lives in the panel, per part.
struct BlockMap {
  int64_t codes = 0;   // the block's code vectors (16 * code_bytes bytes)
  int64_t masks = 0;   // Q5_0 / Q5_1: its 8 masks (64 bytes)
  int64_t scales = 0;  // its 16 fp16 d
  int64_t mins = 0;    // Q4_1 / Q5_1: its 16 fp16 m
};

BlockMap map_block(const Spec& s, int64_t nb, int64_t b) {
  const int64_t u = b / 2, first = 2 * u;
  const int64_t n = std::min<int64_t>(2, nb - first);  // blocks in the unit
  const int64_t i = b - first;                         // position in the unit
  const int64_t base = static_cast<int64_t>(32) * s.bb * u;
  const int64_t cpart = static_cast<int64_t>(kRows) * s.code_bytes;
  BlockMap m;
  m.codes = base + i * cpart;
  int64_t at = base + n * cpart;
  if (s.q5) {
    m.masks = at + i * 64;
    at += n * 64;
  }
  m.scales = at + i * 32;
  m.mins = at + n * 32 + i * 32;
  return m;
}

// Word-sized copies between a GGUF block and its panel bytes, in the direction `to_panel`.
template <class W>
inline void move_word(uint8_t* gguf, uint8_t* panel, bool to_panel, W flip = 0) {
  W v;
  std::memcpy(&v, to_panel ? gguf : panel, sizeof(W));
  v ^= flip;
  std::memcpy(to_panel ? panel : gguf, &v, sizeof(W));
}

// One GGUF block of row r <-> its bytes in the panel, in the direction `to_panel`.
void move_block(const Spec& s, const BlockMap& m, int r, uint8_t* blk, uint8_t* panel, bool to_panel) {
  move_word<uint16_t>(blk, panel + m.scales + 2 * r, to_panel);  // d
  if (s.mins) move_word<uint16_t>(blk + 2, panel + m.mins + 2 * r, to_panel);  // m
  const int qh_at = s.mins ? 4 : 2;
  if (s.q8) {  // 4 codes at a time, element 4k + j to vector k byte 4r + j, flipped
    for (int k = 0; k < 8; ++k) move_word<uint32_t>(blk + 2 + 4 * k, panel + m.codes + 64 * k + 4 * r, to_panel, 0x80808080u);
    return;
  }
  uint8_t* qs = blk + qh_at + (s.q5 ? 4 : 0);
  for (int v = 0; v < 4; ++v) move_word<uint32_t>(qs + 4 * v, panel + m.codes + 64 * v + 4 * r, to_panel);
  if (!s.q5) return;
  // qh (bit e: element e's fifth bit): bits 4k .. 4k+3 <-> bits 4r .. 4r+3 of mask k.
  uint32_t qh;
  std::memcpy(&qh, blk + qh_at, 4);
  if (!to_panel) qh = 0;
  for (int k = 0; k < 8; ++k) {
    uint64_t mask;
    uint8_t* at = panel + m.masks + 8 * k;
    std::memcpy(&mask, at, 8);
    if (to_panel) {
      mask = (mask & ~(uint64_t{0xF} << (4 * r))) | (uint64_t{(qh >> (4 * k)) & 0xFu} << (4 * r));
      std::memcpy(at, &mask, 8);
    } else {
      qh |= static_cast<uint32_t>((mask >> (4 * r)) & 0xF) << (4 * k);
    }
  }
  if (!to_panel) std::memcpy(blk + qh_at, &qh, 4);
}

// Q4_K / Q5_K (panel_layout.h; `five`: Q5_K): super-block b of row r <-> its panel bytes
// (units of one block).
void move_q45k(bool five, int64_t b, int r, uint8_t* blk, uint8_t* panel, bool to_panel) {
  const int64_t extra = five ? 512 : 0;  // Q5_K's masks after the codes
  uint8_t* at = panel + (five ? kQ5kPanelBlock : kQ4kPanelBlock) * b;
  move_word<uint16_t>(blk, at + extra + 2240 + 2 * r, to_panel);      // d
  move_word<uint16_t>(blk + 2, at + extra + 2272 + 2 * r, to_panel);  // dmin
  uint8_t* qs = blk + (five ? 48 : 16);
  for (int c = 0; c < 4; ++c)
    for (int v = 0; v < 8; ++v) move_word<uint32_t>(qs + 32 * c + 4 * v, at + 512 * c + 64 * v + 4 * r, to_panel);
  if (five) {  // bit g of qh[4k + j] <-> bit 4r + j of mask k of sub-block g
    uint8_t* qh = blk + 16;
    if (!to_panel) std::memset(qh, 0, 32);
    for (int g = 0; g < 8; ++g) {
      for (int k = 0; k < 8; ++k) {
        uint8_t* m = at + 2048 + 64 * g + 8 * k;
        uint64_t mask;
        std::memcpy(&mask, m, 8);
        for (int j = 0; j < 4; ++j) {
          const uint64_t bit = uint64_t{1} << (4 * r + j);
          if (to_panel) {
            mask = (qh[4 * k + j] >> g) & 1 ? mask | bit : mask & ~bit;
          } else if (mask & bit) {
            qh[4 * k + j] = static_cast<uint8_t>(qh[4 * k + j] | 1 << g);
          }
        }
        if (to_panel) std::memcpy(m, &mask, 8);
      }
    }
  }
  uint8_t* q = blk + 4;  // the 12 packed bytes of 8 6-bit scales and mins
  uint8_t* lows = at + extra + 2048;
  uint8_t* highs = at + extra + 2176;
  if (to_panel) {
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, mn;
      get_scale_min_k4(g, q, &sc, &mn);
      lows[16 * g + r] = static_cast<uint8_t>((sc & 0xF) | (mn & 0xF) << 4);
      uint8_t& h = highs[16 * (g % 4) + r];
      const int sh = 4 * (g / 4);
      h = static_cast<uint8_t>((h & ~(0xF << sh)) | ((sc >> 4) | (mn >> 4) << 2) << sh);
    }
    return;
  }
  uint8_t sc[8], mn[8];
  for (int g = 0; g < 8; ++g) {
    const uint8_t lo = lows[16 * g + r], hi = static_cast<uint8_t>(highs[16 * (g % 4) + r] >> (4 * (g / 4)));
    sc[g] = static_cast<uint8_t>((lo & 0xF) | (hi & 3) << 4);
    mn[g] = static_cast<uint8_t>((lo >> 4) | ((hi >> 2) & 3) << 4);
  }
  for (int j = 0; j < 4; ++j) {  // get_scale_min_k4's packing (quant_blocks.h)
    q[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
  }
}

// IQ4_XS (panel_layout.h): super-block b of row r <-> its panel bytes (units of one block).
void move_iq4xs(int64_t b, int r, uint8_t* blk, uint8_t* panel, bool to_panel) {
  uint8_t* at = panel + kIq4xsPanelBlock * b;
  move_word<uint16_t>(blk, at + 2144 + 2 * r, to_panel);  // d
  for (int g = 0; g < 8; ++g)
    for (int v = 0; v < 4; ++v) move_word<uint32_t>(blk + 8 + 16 * g + 4 * v, at + 256 * g + 64 * v + 4 * r, to_panel);
  uint8_t* lows = at + 2048;
  uint8_t* highs = at + 2112;
  uint16_t sh;
  std::memcpy(&sh, blk + 2, 2);
  uint8_t* sl = blk + 4;
  if (!to_panel) {
    sh = 0;
    std::memset(sl, 0, 4);
  }
  for (int g = 0; g < 8; ++g) {
    uint8_t& lo = lows[16 * (g % 4) + r];
    uint8_t& hi = highs[16 * (g % 2) + r];
    const int lsh = 4 * (g / 4), hsh = 2 * (g / 2);
    if (to_panel) {
      const int ls = ((sl[g / 2] >> (4 * (g % 2))) & 15) | ((sh >> (2 * g)) & 3) << 4;
      lo = static_cast<uint8_t>((lo & ~(15 << lsh)) | (ls & 15) << lsh);
      hi = static_cast<uint8_t>((hi & ~(3 << hsh)) | (ls >> 4) << hsh);
    } else {
      sl[g / 2] = static_cast<uint8_t>(sl[g / 2] | ((lo >> lsh) & 15) << (4 * (g % 2)));
      sh = static_cast<uint16_t>(sh | ((hi >> hsh) & 3) << (2 * g));
    }
  }
  if (!to_panel) std::memcpy(blk + 2, &sh, 2);
}

// Q6_K (panel_layout.h): super-block b (of nb) of row r <-> its panel bytes (units of two).
void move_q6k(int64_t nb, int64_t b, int r, uint8_t* blk, uint8_t* panel, bool to_panel) {
  const int64_t u = b / 2, n = std::min<int64_t>(2, nb - 2 * u), i = b - 2 * u;
  uint8_t* unit = panel + 2 * kQ6kPanelBlock * u;
  uint8_t* codes = unit + 3072 * i;
  for (int h = 0; h < 2; ++h) {
    for (int v = 0; v < 16; ++v) move_word<uint32_t>(blk + 64 * h + 4 * v, codes + 1024 * h + 64 * v + 4 * r, to_panel);
    for (int v = 0; v < 8; ++v)
      move_word<uint32_t>(blk + 128 + 32 * h + 4 * v, codes + 2048 + 512 * h + 64 * v + 4 * r, to_panel);
  }
  uint8_t* scales = unit + 3072 * n + 256 * i;
  for (int g = 0; g < 16; ++g) move_word<uint8_t>(blk + 192 + g, scales + 16 * g + r, to_panel);
  move_word<uint16_t>(blk + 208, unit + 3328 * n + 32 * i + 2 * r, to_panel);  // d
}

// Bits [at, at + n) of byte `b` <-> the low n bits of `v`, in the direction `to_panel` (b is the
// panel's byte, v the GGUF side's value).
inline void move_field(uint8_t& b, int at, int n, int& v, bool to_panel) {
  const int mask = (1 << n) - 1;
  if (to_panel) {
    b = static_cast<uint8_t>((b & ~(mask << at)) | (v & mask) << at);
  } else {
    v = (b >> at) & mask;
  }
}

// Q2_K / Q3_K code bytes (panel_layout.h): `groups` groups of 32 bytes from `src` of row r <->
// vectors v = 8g + u at 64v, bytes 4r .. 4r + 3 = src[32g + 2u, + 1] and src[32g + 16 + 2u, + 1].
void move_pairs(uint8_t* src, uint8_t* vectors, int r, int groups, bool to_panel) {
  for (int g = 0; g < groups; ++g)
    for (int u = 0; u < 8; ++u) {
      uint8_t* v = vectors + 64 * (8 * g + u) + 4 * r;
      move_word<uint16_t>(src + 32 * g + 2 * u, v, to_panel);
      move_word<uint16_t>(src + 32 * g + 16 + 2 * u, v + 2, to_panel);
    }
}

// Q2_K (panel_layout.h): super-block b of row r <-> its panel bytes (units of one block).
void move_q2k(int64_t b, int r, uint8_t* blk, uint8_t* panel, bool to_panel) {
  uint8_t* at = panel + kQ2kPanelBlock * b;
  move_pairs(blk + 16, at, r, 2, to_panel);
  for (int g = 0; g < 16; ++g) move_word<uint8_t>(blk + g, at + 1024 + 32 * (g / 2) + 16 * (r / 8) + 2 * (r % 8) + g % 2, to_panel);
  move_word<uint16_t>(blk + 80, at + 1280 + 2 * r, to_panel);  // d
  move_word<uint16_t>(blk + 82, at + 1312 + 2 * r, to_panel);  // dmin
}

// Bits [gat, gat + n) of the GGUF byte g <-> bits [pat, pat + n) of the panel byte p.
inline void move_bits(uint8_t& g, int gat, uint8_t& p, int pat, int n, bool to_panel) {
  int v = 0;
  move_field(to_panel ? g : p, to_panel ? gat : pat, n, v, false);
  move_field(to_panel ? p : g, to_panel ? pat : gat, n, v, true);
}

// Q3_K (panel_layout.h): super-block b of row r <-> its panel bytes (units of one block).
void move_q3k(int64_t b, int r, uint8_t* blk, uint8_t* panel, bool to_panel) {
  uint8_t* at = panel + kQ3kPanelBlock * b;
  // Code vector v of 32-block s = 4n + k, byte 4r + j: element 32s + l, l = p(v, j), whose two
  // low bits are bits 2k, 2k + 1 of qs[32n + l] and whose third is bit 4n + k of hmask[l].
  // Its three bits go to byte 4r + j of the 32-block's vectors kQ3kLowVector[v] and
  // kQ3kHighVector[v].
  for (int s = 0; s < 8; ++s) {
    const int n = s / 4, k = s % 4;
    for (int v = 0; v < 8; ++v)
      for (int j = 0; j < 4; ++j) {
        const int l = 16 * (j / 2) + 2 * v + j % 2;
        uint8_t* abc = at + 192 * s + 4 * r + j;
        move_bits(blk[32 + 32 * n + l], 2 * k, abc[64 * kQ3kLowVector[v]], kQ3kLowBit[v], 2, to_panel);
        move_bits(blk[l], 4 * n + k, abc[64 * kQ3kHighVector[v]], kQ3kHighBit[v], 1, to_panel);
      }
  }
  move_word<uint16_t>(blk + 108, at + 1728 + 2 * r, to_panel);  // d
  uint8_t sc[16] = {};
  if (to_panel) get_scales_q3k(blk + 96, sc);
  const int pair = 16 * (r / 8) + 2 * (r % 8);  // row r's place in a 32-byte group
  for (int g = 0; g < 16; ++g) {  // sub-block g = 2s + i of 32-block s
    const int s = g / 2, i = g % 2;
    int lo = sc[g] & 15, hi = sc[g] >> 4;
    move_field(at[1536 + 32 * (s % 4) + pair + i], 4 * (s / 4), 4, lo, to_panel);
    move_field(at[1664 + 32 * (s % 2) + pair + i], 2 * (s / 2), 2, hi, to_panel);
    sc[g] = static_cast<uint8_t>(lo | hi << 4);
  }
  if (to_panel) return;
  uint8_t* q = blk + 96;  // get_scales_q3k's packing (quant_blocks.h)
  for (int j = 0; j < 8; ++j) q[j] = static_cast<uint8_t>((sc[j] & 15) | (sc[j + 8] & 15) << 4);
  for (int j = 0; j < 4; ++j)
    q[8 + j] = static_cast<uint8_t>(sc[j] >> 4 | (sc[j + 4] >> 4) << 2 | (sc[j + 8] >> 4) << 4 | (sc[j + 12] >> 4) << 6);
}

void move_row(DType t, int64_t cols, int r, uint8_t* row, uint8_t* panel, bool to_panel) {
  if (t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kIQ4_XS || t == DType::kQ2_K ||
      t == DType::kQ3_K) {
    TRIAD_CHECK(cols % 256 == 0, "panel layout: cols ", cols, " is not a multiple of 256");
    const int64_t nb = cols / 256;
    for (int64_t b = 0; b < nb; ++b) {
      if (t == DType::kQ6_K) {
        move_q6k(nb, b, r, row + 210 * b, panel, to_panel);
      } else if (t == DType::kQ2_K) {
        move_q2k(b, r, row + 84 * b, panel, to_panel);
      } else if (t == DType::kQ3_K) {
        move_q3k(b, r, row + 110 * b, panel, to_panel);
      } else if (t == DType::kIQ4_XS) {
        move_iq4xs(b, r, row + 136 * b, panel, to_panel);
      } else {
        move_q45k(t == DType::kQ5_K, b, r, row + (t == DType::kQ5_K ? 176 : 144) * b, panel, to_panel);
      }
    }
    return;
  }
  const Spec s = spec_of(t);
  TRIAD_CHECK(cols % 32 == 0, "panel layout: cols ", cols, " is not a multiple of 32");
  const int64_t nb = cols / 32;
  for (int64_t b = 0; b < nb; ++b) move_block(s, map_block(s, nb, b), r, row + b * s.bb, panel, to_panel);
}

}  // namespace

bool panel_layout_supported(DType t) {
  return t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ5_0 || t == DType::kQ5_1 || t == DType::kQ8_0 ||
         t == DType::kIQ4_NL || t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K ||
         t == DType::kIQ4_XS || t == DType::kQ2_K || t == DType::kQ3_K;
}

bool panel_layout_fits(DType t, int64_t rows) {
  return panel_layout_supported(t) && rows > 0 && rows % kPanelRows == 0;
}

void panel_from_rows(DType t, const uint8_t* rows, int64_t cols, uint8_t* panel) {
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  // Q5_0 / Q5_K's masks and the K-quants' packed scale bits are written a few bits per row into bytes read
  // first: start them from zero.
  std::memset(panel, 0, static_cast<size_t>(kRows * rb));
  for (int r = 0; r < kRows; ++r)
    move_row(t, cols, r, const_cast<uint8_t*>(rows) + rb * static_cast<uint64_t>(r), panel, true);
}

void panel_to_rows(DType t, const uint8_t* panel, int64_t cols, uint8_t* rows) {
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  for (int r = 0; r < kRows; ++r) row_from_panel(t, panel, r, cols, rows + rb * static_cast<uint64_t>(r));
}

void row_from_panel(DType t, const uint8_t* panel, int i, int64_t cols, uint8_t* row) {
  TRIAD_CHECK(i >= 0 && i < kRows, "panel layout: row ", i, " out of 0..15");
  move_row(t, cols, i, row, const_cast<uint8_t*>(panel), false);
}

}  // namespace triad::kernels
