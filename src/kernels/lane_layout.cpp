// Scalar re-layout between GGUF blocks and the lane layout (lane_layout.h). Both directions go
// through one decoded group: the full-width code of every element of up to 16 lane blocks plus
// the bytes of their scale fields, so the bit layouts of each side are written down once.
#include "kernels/lane_layout.h"

#include <cstring>
#include <type_traits>

#include "base/error.h"
#include "kernels/quant_blocks.h"

namespace triad::kernels {
namespace {

// How a type's GGUF blocks hold codes and scales.
struct Spec {
  int lb = 32;          // elements per lane block
  int block_elems = 32;  // elements per GGUF block
  int block_bytes = 0;
  int code_bits = 4;    // 2, 3, 4, 5, 6 or 8
  int scale_bytes = 0;  // per 32-element block: scale fields before qh / qs (d, d+m, e)
  bool kquant45 = false, q6k = false, iq4xs = false, q3k = false, q2k = false;
};

Spec spec_of(DType t) {
  Spec s;
  s.block_bytes = static_cast<int>(traits(t).block_bytes);
  switch (t) {
    case DType::kQ4_0: case DType::kIQ4_NL: s.scale_bytes = 2; break;
    case DType::kMXFP4: s.scale_bytes = 1; break;
    case DType::kQ4_1: s.scale_bytes = 4; break;
    case DType::kQ5_0: s.scale_bytes = 2; s.code_bits = 5; break;
    case DType::kQ5_1: s.scale_bytes = 4; s.code_bits = 5; break;
    case DType::kQ8_0: s.scale_bytes = 2; s.code_bits = 8; break;
    case DType::kQ4_K: s.block_elems = 256; s.kquant45 = true; break;
    case DType::kQ5_K: s.block_elems = 256; s.kquant45 = true; s.code_bits = 5; break;
    case DType::kQ6_K: s.block_elems = 256; s.lb = 16; s.q6k = true; s.code_bits = 6; break;
    case DType::kIQ4_XS: s.block_elems = 256; s.iq4xs = true; break;
    case DType::kQ3_K: s.block_elems = 256; s.lb = 16; s.q3k = true; s.code_bits = 3; break;
    case DType::kQ2_K: s.block_elems = 256; s.lb = 16; s.q2k = true; s.code_bits = 2; break;
    default: fail("no lane layout for ", dtype_name(t));
  }
  return s;
}

// One group decoded: codes[l][e] of lane block l, element e; `hdr` the scale bytes of every
// GGUF block of the group (32-element blocks: scale_bytes each; K-quants: 16 per super-block
// (Q6_K: the 16 scales and d, 18 bytes; Q3_K: the 12 scale bytes and d, 14; Q2_K: the 16
// scale bytes, d and dmin, 20); IQ4_XS: 8 per
// super-block (d, scales_h, scales_l)).
struct Group {
  uint8_t codes[16][32];
  uint8_t hdr[64];
};

// GGUF blocks -> Group. nblk: blocks of the group.
void read_blocks(const Spec& s, const uint8_t* p, int nblk, Group& g) {
  if (s.q2k) {  // one super-block: scales[16], qs[64], d, dmin
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      g.codes[e / 16][e % 16] = static_cast<uint8_t>((p[16 + 32 * h + l] >> (2 * k)) & 3);
    }
    std::memcpy(g.hdr, p, 16);
    std::memcpy(g.hdr + 16, p + 80, 4);
    return;
  }
  if (s.q3k) {  // one super-block: hmask[32], qs[64], scales[12], d
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int lo = (p[32 + 32 * h + l] >> (2 * k)) & 3, hi = (p[l] >> (4 * h + k)) & 1;
      g.codes[e / 16][e % 16] = static_cast<uint8_t>(lo | hi << 2);
    }
    std::memcpy(g.hdr, p + 96, 14);
    return;
  }
  if (s.q6k) {  // one super-block of 16 lane blocks of 16
    const uint8_t* ql = p;
    const uint8_t* qh = p + 128;
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
      const uint8_t lo = ql[64 * h + (k & 1) * 32 + l];
      const int low4 = (k < 2 ? lo : lo >> 4) & 15;
      const int high2 = (qh[32 * h + l] >> (2 * k)) & 3;
      g.codes[e / 16][e % 16] = static_cast<uint8_t>(low4 | high2 << 4);
    }
    std::memcpy(g.hdr, p + 192, 18);
    return;
  }
  if (s.iq4xs) {  // sub-block j: nibbles at qs + 16j in Q4_0's order
    for (int b = 0; b < nblk; ++b) {
      const uint8_t* q = p + b * s.block_bytes;
      std::memcpy(g.hdr + 8 * b, q, 8);
      for (int j = 0; j < 8; ++j)
        for (int e = 0; e < 32; ++e)
          g.codes[8 * b + j][e] = static_cast<uint8_t>(e < 16 ? q[8 + 16 * j + e] & 15 : q[8 + 16 * j + e - 16] >> 4);
    }
    return;
  }
  if (s.kquant45) {
    for (int b = 0; b < nblk; ++b) {
      const uint8_t* q = p + b * s.block_bytes;
      std::memcpy(g.hdr + 16 * b, q, 16);
      const uint8_t* qh = q + 16;
      const uint8_t* qs = q + (s.code_bits == 5 ? 48 : 16);
      for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 32; ++i) {
          int c = (qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 15;
          if (s.code_bits == 5) c |= ((qh[i] >> j) & 1) << 4;
          g.codes[8 * b + j][i] = static_cast<uint8_t>(c);
        }
    }
    return;
  }
  for (int b = 0; b < nblk; ++b) {
    const uint8_t* q = p + b * s.block_bytes;
    std::memcpy(g.hdr + s.scale_bytes * b, q, static_cast<size_t>(s.scale_bytes));
    const uint8_t* qs = q + s.scale_bytes + (s.code_bits == 5 ? 4 : 0);
    uint32_t qh = 0;
    if (s.code_bits == 5) std::memcpy(&qh, q + s.scale_bytes, 4);
    for (int e = 0; e < 32; ++e) {
      int c = s.code_bits == 8 ? qs[e] : (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4);
      if (s.code_bits == 5) c |= ((qh >> e) & 1) << 4;
      g.codes[b][e] = static_cast<uint8_t>(c);
    }
  }
}

// Group -> GGUF blocks.
void write_blocks(const Spec& s, const Group& g, int nblk, uint8_t* p) {
  if (s.q2k) {
    std::memset(p + 16, 0, 64);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      p[16 + 32 * h + l] = static_cast<uint8_t>(p[16 + 32 * h + l] | (g.codes[e / 16][e % 16] & 3) << (2 * k));
    }
    std::memcpy(p, g.hdr, 16);
    std::memcpy(p + 80, g.hdr + 16, 4);
    return;
  }
  if (s.q3k) {
    std::memset(p, 0, 96);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int c = g.codes[e / 16][e % 16];
      p[32 + 32 * h + l] = static_cast<uint8_t>(p[32 + 32 * h + l] | (c & 3) << (2 * k));
      p[l] = static_cast<uint8_t>(p[l] | ((c >> 2) & 1) << (4 * h + k));
    }
    std::memcpy(p + 96, g.hdr, 14);
    return;
  }
  if (s.q6k) {
    uint8_t* ql = p;
    uint8_t* qh = p + 128;
    std::memset(p, 0, 192);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
      const int c = g.codes[e / 16][e % 16];
      ql[64 * h + (k & 1) * 32 + l] |= static_cast<uint8_t>((c & 15) << (k < 2 ? 0 : 4));
      qh[32 * h + l] |= static_cast<uint8_t>(((c >> 4) & 3) << (2 * k));
    }
    std::memcpy(p + 192, g.hdr, 18);
    return;
  }
  if (s.iq4xs) {
    for (int b = 0; b < nblk; ++b) {
      uint8_t* q = p + b * s.block_bytes;
      std::memcpy(q, g.hdr + 8 * b, 8);
      for (int j = 0; j < 8; ++j)
        for (int e = 0; e < 16; ++e)
          q[8 + 16 * j + e] = static_cast<uint8_t>((g.codes[8 * b + j][e] & 15) | (g.codes[8 * b + j][e + 16] & 15) << 4);
    }
    return;
  }
  if (s.kquant45) {
    for (int b = 0; b < nblk; ++b) {
      uint8_t* q = p + b * s.block_bytes;
      std::memset(q, 0, static_cast<size_t>(s.block_bytes));
      std::memcpy(q, g.hdr + 16 * b, 16);
      uint8_t* qh = q + 16;
      uint8_t* qs = q + (s.code_bits == 5 ? 48 : 16);
      for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 32; ++i) {
          const int c = g.codes[8 * b + j][i];
          qs[32 * (j / 2) + i] |= static_cast<uint8_t>((c & 15) << (4 * (j % 2)));
          if (s.code_bits == 5) qh[i] |= static_cast<uint8_t>(((c >> 4) & 1) << j);
        }
    }
    return;
  }
  for (int b = 0; b < nblk; ++b) {
    uint8_t* q = p + b * s.block_bytes;
    std::memcpy(q, g.hdr + s.scale_bytes * b, static_cast<size_t>(s.scale_bytes));
    uint8_t* qs = q + s.scale_bytes + (s.code_bits == 5 ? 4 : 0);
    uint32_t qh = 0;
    for (int e = 0; e < 32; ++e) {
      const int c = g.codes[b][e];
      if (s.code_bits == 8) {
        qs[e] = static_cast<uint8_t>(c);
      } else if (e < 16) {
        qs[e] = static_cast<uint8_t>(c & 15);
      } else {
        qs[e - 16] = static_cast<uint8_t>(qs[e - 16] | (c & 15) << 4);
      }
      if (s.code_bits == 5) qh |= static_cast<uint32_t>((c >> 4) & 1) << e;
    }
    if (s.code_bits == 5) std::memcpy(q + s.scale_bytes, &qh, 4);
  }
}

// Eight 6-bit scales biased by 32 (0..63), stored as the 6-bit two's complement of scale - 32
// at bit 6j of 6 bytes (lane_layout.h), and back.
void put_fields6(const uint8_t* biased, uint8_t* o) {
  uint64_t f = 0;
  for (int j = 0; j < 8; ++j) f |= static_cast<uint64_t>((biased[j] - 32) & 63) << (6 * j);
  for (int b = 0; b < 6; ++b) o[b] = static_cast<uint8_t>(f >> (8 * b));
}
void get_fields6(const uint8_t* o, uint8_t* biased) {
  uint64_t f = 0;
  for (int b = 0; b < 6; ++b) f |= static_cast<uint64_t>(o[b]) << (8 * b);
  for (int j = 0; j < 8; ++j) biased[j] = static_cast<uint8_t>(((f >> (6 * j)) + 32) & 63);
}

// Q3_K's 14 scale bytes, GGUF's (12 packed bytes, d: hdr) <-> the lane layout's (scales 0..7
// in bytes 0..5, d in 6..7, scales 8..15 in 8..13).
template <bool kToLanes>
void q3k_scale_block(uint8_t* hdr, std::conditional_t<kToLanes, uint8_t, const uint8_t>* o) {
  uint8_t sc[16];
  if constexpr (kToLanes) {
    get_scales_q3k(hdr, sc);
    put_fields6(sc, o);
    put_fields6(sc + 8, o + 8);
    std::memcpy(o + 6, hdr + 12, 2);
  } else {
    get_fields6(o, sc);
    get_fields6(o + 8, sc + 8);
    std::memset(hdr, 0, 12);
    for (int j = 0; j < 16; ++j) {  // quant_blocks.h get_scales_q3k, inverted
      hdr[j % 8] = static_cast<uint8_t>(hdr[j % 8] | (sc[j] & 15) << (4 * (j / 8)));
      hdr[8 + j % 4] = static_cast<uint8_t>(hdr[8 + j % 4] | (sc[j] >> 4) << (2 * (j / 4)));
    }
    std::memcpy(hdr + 12, o + 6, 2);
  }
}

// One IQ4_XS super-block's 8 header bytes, GGUF's (d, scales_h, scales_l[4]: hdr) <-> the lane
// layout's (its 8 scales in bytes 0..5, d in 6..7). Scale j: nibble j of scales_l (low nibble
// of byte j / 2 first), bits 2j, 2j + 1 of scales_h above it.
template <bool kToLanes>
void iq4xs_scale_block(uint8_t* hdr, std::conditional_t<kToLanes, uint8_t, const uint8_t>* o) {
  uint8_t sc[8];
  if constexpr (kToLanes) {
    const int h = hdr[2] | hdr[3] << 8;
    for (int j = 0; j < 8; ++j)
      sc[j] = static_cast<uint8_t>(((hdr[4 + j / 2] >> (4 * (j % 2))) & 15) | ((h >> (2 * j)) & 3) << 4);
    put_fields6(sc, o);
    std::memcpy(o + 6, hdr, 2);
  } else {
    get_fields6(o, sc);
    int h = 0;
    std::memset(hdr + 4, 0, 4);
    for (int j = 0; j < 8; ++j) {
      hdr[4 + j / 2] = static_cast<uint8_t>(hdr[4 + j / 2] | (sc[j] & 15) << (4 * (j % 2)));
      h |= (sc[j] >> 4) << (2 * j);
    }
    std::memcpy(hdr, o + 6, 2);
    hdr[2] = static_cast<uint8_t>(h);
    hdr[3] = static_cast<uint8_t>(h >> 8);
  }
}

// Group <-> lane layout (lane_layout.h), nl lanes. kToLanes: write p from g; else read g from p.
// Both directions walk the same positions: io(lane byte, value from g) stores the value when
// writing and returns the lane byte, which the reading direction unpacks.
template <bool kToLanes>
void lanes_io(const Spec& s, int nl, Group& g, std::conditional_t<kToLanes, uint8_t, const uint8_t>* p) {
  const int plane = 4 * nl;
  auto* o = p;
  auto io = [&](auto& lane_byte, uint8_t value) -> uint8_t {
    if constexpr (kToLanes) lane_byte = value;
    return lane_byte;
  };
  const int half = s.lb / 2;  // nibble planes pair element e with e + half
  if (s.q3k) {  // Q3_K's scale block comes first
    q3k_scale_block<kToLanes>(g.hdr, o);
    o += 14;
  }
  if (s.q2k) {  // so does Q2_K's: d, -dmin (the fp16 sign bit flipped), the 16 scale bytes
    for (int b = 0; b < 20; ++b) {
      const int from = b < 4 ? 16 + b : b - 4;
      const uint8_t flip = b == 3 ? 0x80 : 0;
      const uint8_t byte = io(o[b], static_cast<uint8_t>(g.hdr[from] ^ flip));
      if constexpr (!kToLanes) g.hdr[from] = static_cast<uint8_t>(byte ^ flip);
    }
    o += 20;
  }
  if (s.q2k) {  // a 2-bit plane: bits 2k, 2k + 1 of byte 4l + b = element 4k + b
    for (int l = 0; l < nl; ++l)
      for (int b = 0; b < 4; ++b) {
        uint8_t byte = 0;
        for (int k = 0; k < 4; ++k) byte = static_cast<uint8_t>(byte | (g.codes[l][4 * k + b] & 3) << (2 * k));
        byte = io(o[4 * l + b], byte);
        if constexpr (!kToLanes)
          for (int k = 0; k < 4; ++k) g.codes[l][4 * k + b] = static_cast<uint8_t>((byte >> (2 * k)) & 3);
      }
    o += 4 * nl;
  } else if (s.q3k) {
    // Plane A, byte 4l + b: lane l's elements b (bits 0..2), 4 + b (bits 3..5) and the low two
    // bits of 8 + b (bits 6..7). Plane H, byte 4l + b (l < 8): in its low nibble lane l's element
    // 12 + b (bits 0..2) and the third bit of its 8 + b (bit 3); in its high nibble the same of
    // lane l + 8.
    for (int l = 0; l < nl; ++l)
      for (int b = 0; b < 4; ++b) {
        uint8_t* c = g.codes[l];
        const uint8_t byte = io(o[4 * l + b], static_cast<uint8_t>((c[b] & 7) | (c[4 + b] & 7) << 3 | (c[8 + b] & 3) << 6));
        if constexpr (!kToLanes) {
          c[b] = byte & 7;
          c[4 + b] = (byte >> 3) & 7;
          c[8 + b] = static_cast<uint8_t>(byte >> 6);
        }
      }
    o += 4 * nl;
    auto nibble = [](const uint8_t* c, int b) { return (c[12 + b] & 7) | ((c[8 + b] >> 2) & 1) << 3; };
    for (int l = 0; l < nl / 2; ++l)
      for (int b = 0; b < 4; ++b) {
        uint8_t* lo = g.codes[l];
        uint8_t* hi = g.codes[l + nl / 2];
        const uint8_t byte = io(o[4 * l + b], static_cast<uint8_t>(nibble(lo, b) | nibble(hi, b) << 4));
        if constexpr (!kToLanes) {
          for (int x = 0; x < 2; ++x) {
            uint8_t* c = x ? hi : lo;
            const int n = (byte >> (4 * x)) & 15;
            c[12 + b] = static_cast<uint8_t>(n & 7);
            c[8 + b] = static_cast<uint8_t>(c[8 + b] | (n >> 3) << 2);
          }
        }
      }
    o += 2 * nl;
  } else if (s.code_bits == 8) {
    for (int k = 0; k < 8; ++k)
      for (int l = 0; l < nl; ++l)
        for (int b = 0; b < 4; ++b) {
          uint8_t& c = g.codes[l][4 * k + b];
          c = io(o[k * plane + 4 * l + b], c);
        }
    o += 8 * plane;
  } else {
    const int planes = s.lb / 8;
    for (int v = 0; v < planes; ++v)
      for (int l = 0; l < nl; ++l)
        for (int b = 0; b < 4; ++b) {
          uint8_t& lo = g.codes[l][4 * v + b];
          uint8_t& hi = g.codes[l][half + 4 * v + b];
          const uint8_t byte = io(o[v * plane + 4 * l + b], static_cast<uint8_t>((lo & 15) | (hi & 15) << 4));
          if constexpr (!kToLanes) {
            lo = byte & 15;
            hi = byte >> 4;
          }
        }
    o += planes * plane;
    if (s.code_bits == 5 || s.code_bits == 6) {
      const int bits = s.code_bits - 4, steps = s.lb / 4;  // k = 0 .. steps-1
      for (int l = 0; l < nl; ++l)
        for (int b = 0; b < 4; ++b) {
          uint8_t byte = 0;
          for (int k = 0; k < steps; ++k)
            byte = static_cast<uint8_t>(byte | ((g.codes[l][4 * k + b] >> 4) & ((1 << bits) - 1)) << (bits * k));
          byte = io(o[4 * l + b], byte);
          if constexpr (!kToLanes)
            for (int k = 0; k < steps; ++k)
              g.codes[l][4 * k + b] = static_cast<uint8_t>(g.codes[l][4 * k + b] |
                                                           ((byte >> (bits * k)) & ((1 << bits) - 1)) << 4);
        }
      o += plane;
    }
  }
  // Scale fields (Q3_K's and Q2_K's came first).
  if (s.q6k) {
    if constexpr (kToLanes) std::memcpy(o, g.hdr, 18); else std::memcpy(g.hdr, o, 18);
  } else if (s.iq4xs) {
    for (int b = 0; b < nl / 8; ++b) iq4xs_scale_block<kToLanes>(g.hdr + 8 * b, o + 8 * b);
  } else if (s.kquant45) {
    const size_t n = static_cast<size_t>(16 * (nl / 8));
    if constexpr (kToLanes) std::memcpy(o, g.hdr, n); else std::memcpy(g.hdr, o, n);
  } else if (!s.q3k && !s.q2k) {
    // Field f (2 bytes each; MXFP4: one 1-byte field) of every lane, field after field.
    const int fw = s.scale_bytes == 1 ? 1 : 2, nf = s.scale_bytes / fw;
    for (int f = 0; f < nf; ++f)
      for (int l = 0; l < nl; ++l)
        for (int b = 0; b < fw; ++b) {
          uint8_t& h = g.hdr[s.scale_bytes * l + fw * f + b];
          h = io(o[(f * nl + l) * fw + b], h);
        }
  }
}

template <bool kToLanes>
void relay_row(DType t, const uint8_t* src, int64_t cols, uint8_t* dst) {
  const Spec s = spec_of(t);
  TRIAD_CHECK(cols % s.block_elems == 0, "lane layout: ", cols, " columns are not whole ", dtype_name(t), " blocks");
  const int64_t nblk = cols / s.block_elems;
  const int blk_per_group = 16 * s.lb / s.block_elems;  // 16, 2 (Q4_K / Q5_K / IQ4_XS) or 1 (Q6_K, Q3_K, Q2_K)
  for (int64_t b0 = 0; b0 < nblk; b0 += blk_per_group) {
    const int nb = static_cast<int>(nblk - b0 < blk_per_group ? nblk - b0 : blk_per_group);
    const int nl = nb * s.block_elems / s.lb;
    const uint64_t off = static_cast<uint64_t>(b0) * static_cast<uint64_t>(s.block_bytes);
    Group g{};
    if constexpr (kToLanes) {
      read_blocks(s, src + off, nb, g);
      lanes_io<true>(s, nl, g, dst + off);
    } else {
      lanes_io<false>(s, nl, g, src + off);
      write_blocks(s, g, nb, dst + off);
    }
  }
}

}  // namespace

bool lane_layout_supported(DType t) {
  switch (t) {
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: case DType::kIQ4_NL: case DType::kIQ4_XS:
    case DType::kMXFP4: case DType::kQ3_K: case DType::kQ2_K:
      return true;
    default: return false;
  }
}

void row_to_lanes(DType t, const uint8_t* blocks, int64_t cols, uint8_t* lanes) {
  relay_row<true>(t, blocks, cols, lanes);
}

void row_from_lanes(DType t, const uint8_t* lanes, int64_t cols, uint8_t* blocks) {
  relay_row<false>(t, lanes, cols, blocks);
}

}  // namespace triad::kernels
