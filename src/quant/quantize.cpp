// Weight quantizers (see quantize.h). Each format has a reference quantizer (no importance
// weights; for the 32-element formats exactly gguf.quants' arithmetic, for the K-quants ggml's
// published searches) and a weighted one; quantize_row keeps, per block, the weighted one's
// result only when its importance-weighted error is smaller.
//
// This file is compiled with -ffp-contract=off: a fused multiply-add would change the
// rounding of expressions such as x * id + 8.5f that must match the references bit for bit.
#include "quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "quant/scale_search.h"
#include "tensor/fp16.h"

namespace triad::quant {
namespace {

using namespace triad::kernels;
constexpr float kEps = 1e-15f;

inline uint16_t h(float v) { return f32_to_fp16(v); }
inline float hf(uint16_t v) { return fp16_to_f32(v); }

// Search weights from importance weights: w_j = imp_j * sqrt(sigma2 + x_j^2), favouring the
// important channels and, among them, the large values. Returns their sum.
float search_weights(const float* x, const float* imp, int n, float sigma2, float* w) {
  float sum = 0;
  for (int j = 0; j < n; ++j) {
    w[j] = imp[j] * std::sqrt(sigma2 + x[j] * x[j]);
    sum += w[j];
  }
  return sum;
}

// ---- 32-element formats: reference (gguf.quants / ggml *_ref) ----

void q8_0_ref(const float* x, uint8_t* out) {
  BlockQ8_0 b{};
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1 / d : 0;
  b.d = h(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  std::memcpy(out, &b, sizeof b);
}

// Symmetric 4/5-bit codes: q = min(nmax*2-1, trunc(x * id + nmax + 0.5)).
void sym_codes(const float* x, int nmax, float* d_out, uint8_t* q) {
  const float max = signed_absmax(x, 32);
  const float d = max / static_cast<float>(-nmax);
  const float id = d != 0 ? 1 / d : 0;
  const float off = static_cast<float>(nmax) + 0.5f;
  for (int j = 0; j < 32; ++j)
    q[j] = static_cast<uint8_t>(std::min(2 * nmax - 1, static_cast<int>(x[j] * id + off)));
  *d_out = d;
}

// Affine 4/5-bit codes: q = min(levels, trunc((x - min) * id + 0.5)).
void affine_codes(const float* x, int levels, float* d_out, float* m_out, uint8_t* q) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / static_cast<float>(levels);
  const float id = d != 0 ? 1 / d : 0;
  for (int j = 0; j < 32; ++j)
    q[j] = static_cast<uint8_t>(std::min(levels, static_cast<int>((x[j] - min) * id + 0.5f)));
  *d_out = d;
  *m_out = min;
}

void pack_q4(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | (q[j + 16] << 4));
}
void pack_q5(const uint8_t* q, uint8_t* qh, uint8_t* qs) {
  uint32_t hbits = 0;
  for (int j = 0; j < 32; ++j) hbits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(hbits >> (8 * k));
  pack_q4(q, qs);
}

void write_q4_0(float d, const uint8_t* q, uint8_t* out) {
  BlockQ4_0 b{};
  b.d = h(d);
  pack_q4(q, b.qs);
  std::memcpy(out, &b, sizeof b);
}
void write_q5_0(float d, const uint8_t* q, uint8_t* out) {
  BlockQ5_0 b{};
  b.d = h(d);
  pack_q5(q, b.qh, b.qs);
  std::memcpy(out, &b, sizeof b);
}
void write_q4_1(float d, float m, const uint8_t* q, uint8_t* out) {
  BlockQ4_1 b{};
  b.d = h(d);
  b.m = h(m);
  pack_q4(q, b.qs);
  std::memcpy(out, &b, sizeof b);
}
void write_q5_1(float d, float m, const uint8_t* q, uint8_t* out) {
  BlockQ5_1 b{};
  b.d = h(d);
  b.m = h(m);
  pack_q5(q, b.qh, b.qs);
  std::memcpy(out, &b, sizeof b);
}

void q32_ref(DType t, const float* x, uint8_t* out) {
  uint8_t q[32];
  float d, m;
  switch (t) {
    case DType::kQ8_0: q8_0_ref(x, out); return;
    case DType::kQ4_0: sym_codes(x, 8, &d, q); write_q4_0(d, q, out); return;
    case DType::kQ5_0: sym_codes(x, 16, &d, q); write_q5_0(d, q, out); return;
    case DType::kQ4_1: affine_codes(x, 15, &d, &m, q); write_q4_1(d, m, q, out); return;
    case DType::kQ5_1: affine_codes(x, 31, &d, &m, q); write_q5_1(d, m, q, out); return;
    default: fail("quantize: no 32-element quantizer for ", dtype_name(t));
  }
}

// Weighted: w[j] = imp[j] * sqrt(sigma2 + x[j]^2), sigma2 the row's mean square.
void q32_weighted(DType t, const float* x, const float* imp, float sigma2, uint8_t* out) {
  float w[32];
  search_weights(x, imp, 32, sigma2, w);
  int8_t L[32];
  uint8_t q[32];
  switch (t) {
    case DType::kQ8_0: {
      const float d = make_qx_quants(32, 127, x, L, 1, w);  // codes l + 127, l in [-127, 126]
      BlockQ8_0 b{};
      b.d = h(d);
      for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(L[j] - 127);
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case DType::kQ4_0:
    case DType::kQ5_0: {
      const int nmax = t == DType::kQ4_0 ? 8 : 16;
      const float d = make_qx_quants(32, nmax, x, L, 1, w);
      for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(L[j]);
      if (t == DType::kQ4_0) write_q4_0(d, q, out);
      else write_q5_0(d, q, out);
      return;
    }
    case DType::kQ4_1:
    case DType::kQ5_1: {
      const int nmax = t == DType::kQ4_1 ? 15 : 31;
      float min;
      const float d = make_qkx2_quants(32, nmax, x, w, q, &min, -0.9f, 0.05f, 36, false);
      if (t == DType::kQ4_1) write_q4_1(d, -min, q, out);
      else write_q5_1(d, -min, q, out);
      return;
    }
    default: fail("quantize: no 32-element quantizer for ", dtype_name(t));
  }
}

// ---- K-quants ----

// Packs 8 6-bit scales and mins of Q4_K/Q5_K (inverse of get_scale_min_k4).
void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  std::memset(scales, 0, kKScaleSize);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Codes of the non-negative sub-block scales and minimums of Q4_K / Q5_K / Q2_K: with importance
// weights (sw: each sub-block's summed weight) the weighted search, else ggml's mapping of the
// largest to `levels`. Returns the super-block factors {d, dmin}.
std::pair<float, float> quantize_scale_pairs(int n, int levels, const float* scales, const float* mins,
                                             const float* sw, uint8_t* ls, uint8_t* lm) {
  if (sw) return {make_qp_quants(n, levels, scales, ls, sw), make_qp_quants(n, levels, mins, lm, sw)};
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < n; ++j) {
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float fl = static_cast<float>(levels);
  const float inv_scale = max_scale > 0 ? fl / max_scale : 0.f;
  const float inv_min = max_min > 0 ? fl / max_min : 0.f;
  for (int j = 0; j < n; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(levels, nearest_int(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(levels, nearest_int(inv_min * mins[j])));
  }
  return {max_scale / fl, max_min / fl};
}

// Q4_K / Q5_K: scales and mins of the 8 sub-blocks, then their 6-bit codes, then the element
// codes recomputed against the stored (rounded) scales.
template <bool kFive>
void q45k(const float* x, const float* imp, uint8_t* out) {
  constexpr int nmax = kFive ? 31 : 15;
  uint8_t L[kQK_K], ls[8], lm[8];
  float scales[8], mins[8], w[32], sw[8];
  float sum_x2 = 0;
  for (int l = 0; l < kQK_K; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2 * sum_x2 / kQK_K;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    if (imp) {
      sw[j] = search_weights(xs, imp + 32 * j, 32, sigma2, w);
      scales[j] = make_qkx2_quants(32, nmax, xs, w, L + 32 * j, &mins[j], -0.9f, 0.05f, 36,
                                   false);
    } else {
      float s2 = 0;
      for (int l = 0; l < 32; ++l) s2 += xs[l] * xs[l];
      const float av_x = std::sqrt(s2 / 32);
      for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
      scales[j] = kFive ? make_qkx2_quants(32, nmax, xs, w, L + 32 * j, &mins[j], -0.5f, 0.1f,
                                           15, false)
                        : make_qkx2_quants(32, nmax, xs, w, L + 32 * j, &mins[j], -1.f, 0.1f,
                                           20, false);
    }
  }
  const auto [d_block, m_block] = quantize_scale_pairs(8, 63, scales, mins, imp ? sw : nullptr, ls, lm);
  uint8_t packed[kKScaleSize];
  pack_scale_min_k4(ls, lm, packed);
  const uint16_t dh = h(d_block), mh = h(m_block);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, packed, &sc, &m);
    const float d = hf(dh) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = hf(mh) * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
  if constexpr (kFive) {
    BlockQ5_K b{};
    b.d = dh;
    b.dmin = mh;
    std::memcpy(b.scales, packed, kKScaleSize);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < kQK_K; n += 64) {
      uint8_t* ql = b.qs + n / 2;
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j], l2 = L[n + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          b.qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          b.qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
    std::memcpy(out, &b, sizeof b);
  } else {
    BlockQ4_K b{};
    b.d = dh;
    b.dmin = mh;
    std::memcpy(b.scales, packed, kKScaleSize);
    for (int n = 0; n < kQK_K; n += 64)
      for (int l = 0; l < 32; ++l)
        b.qs[n / 2 + l] = static_cast<uint8_t>(L[n + l] | (L[n + l + 32] << 4));
    std::memcpy(out, &b, sizeof b);
  }
}

void q6k(const float* x, const float* imp, uint8_t* out) {
  BlockQ6_K b{};
  int8_t L[kQK_K];
  float scales[16], w[16];
  float sigma2 = 0;
  if (imp) {
    for (int l = 0; l < kQK_K; ++l) sigma2 += x[l] * x[l];
    sigma2 /= kQK_K;
  }
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float* xs = x + 16 * ib;
    if (imp) {
      search_weights(xs, imp + 16 * ib, 16, sigma2, w);
    }
    const float scale = make_qx_quants(16, 32, xs, L + 16 * ib, 1, imp ? w : nullptr);
    scales[ib] = scale;
    if (std::fabs(scale) > max_abs_scale) {
      max_abs_scale = std::fabs(scale);
      max_scale = scale;
    }
  }
  if (max_abs_scale < kEps) {
    std::memcpy(out, &b, sizeof b);  // all zero
    return;
  }
  const float iscale = -128.f / max_scale;
  b.d = h(1 / iscale);
  for (int ib = 0; ib < 16; ++ib)
    b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  for (int j = 0; j < 16; ++j) {
    const float d = hf(b.d) * static_cast<float>(b.scales[j]);
    if (d == 0) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
  }
  for (int j = 0; j < kQK_K; j += 128) {
    uint8_t* ql = b.ql + j / 2;
    uint8_t* qh = b.qh + j / 4;
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
      const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                   ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
  }
  std::memcpy(out, &b, sizeof b);
}

// Packs 2-bit codes (elements 128h + 32k + l at bits 2k of qs[32h + l]).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
}

void q3k(const float* x, const float* imp, uint8_t* out) {
  BlockQ3_K b{};
  int8_t L[kQK_K];
  float scales[16], w[16], sw[16];
  float sigma2 = 0;
  if (imp) {
    for (int l = 0; l < kQK_K; ++l) sigma2 += x[l] * x[l];
    sigma2 = 2 * sigma2 / kQK_K;
  }
  for (int j = 0; j < 16; ++j) {
    const float* xs = x + 16 * j;
    if (imp) {
      sw[j] = search_weights(xs, imp + 16 * j, 16, sigma2, w);
      scales[j] = make_qx_quants(16, 4, xs, L + 16 * j, 1, w);
    } else {
      scales[j] = make_q3_quants(16, 4, xs, L + 16 * j, true, nullptr);
    }
  }
  int8_t Ls[16];
  float d_block = 0;
  if (imp) {
    d_block = make_qx_quants(16, 32, scales, Ls, 1, sw);  // Ls = l + 32 in [0, 63]
  } else {
    const float max_scale = signed_absmax(scales, 16);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j)
        Ls[j] = static_cast<int8_t>(std::clamp(nearest_int(iscale * scales[j]), -32, 31) + 32);
      d_block = 1 / iscale;
    } else {
      for (int j = 0; j < 16; ++j) Ls[j] = 0;  // an all-zero block: scale bytes zero, as ggml
    }
  }
  for (int j = 0; j < 16; ++j) {
    const int l = Ls[j];
    if (j < 8) b.scales[j] = static_cast<uint8_t>(l & 0xF);
    else b.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
    b.scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
  b.d = h(d_block);
  uint8_t s6[16];
  get_scales_q3k(b.scales, s6);
  for (int j = 0; j < 16; ++j) {
    const float d = hf(b.d) * static_cast<float>(int{s6[j]} - 32);
    if (d == 0) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
  }
  uint8_t U[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    int l = L[j];
    if (l > 3) {
      b.hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
      l -= 4;
    }
    U[j] = static_cast<uint8_t>(l);
  }
  pack_2bit(U, b.qs);
  std::memcpy(out, &b, sizeof b);
}

void q2k(const float* x, const float* imp, uint8_t* out) {
  BlockQ2_K b{};
  uint8_t L[kQK_K], Ls[16], Lm[16];
  float scales[16], mins[16], w[16], sw[16];
  float sigma2 = 0;
  if (imp) {
    for (int l = 0; l < kQK_K; ++l) sigma2 += x[l] * x[l];
    sigma2 /= kQK_K;
  }
  for (int j = 0; j < 16; ++j) {
    const float* xs = x + 16 * j;
    if (imp) {
      sw[j] = search_weights(xs, imp + 16 * j, 16, sigma2, w);
      scales[j] = make_qkx2_quants(16, 3, xs, w, L + 16 * j, &mins[j], -0.9f, 0.05f, 36, false);
    } else {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(xs[l]);
      scales[j] = make_qkx2_quants(16, 3, xs, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
    }
  }
  const auto [d_block, m_block] = quantize_scale_pairs(16, 15, scales, mins, imp ? sw : nullptr, Ls, Lm);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
  b.d = h(d_block);
  b.dmin = h(m_block);
  for (int j = 0; j < 16; ++j) {
    const float d = hf(b.d) * static_cast<float>(b.scales[j] & 0xF);
    if (d == 0) continue;
    const float dm = hf(b.dmin) * static_cast<float>(b.scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
  }
  pack_2bit(L, b.qs);
  std::memcpy(out, &b, sizeof b);
}

// ---- non-linear 4-bit grids ----

// Index of the IQ4 grid value nearest to v (ties to the upper one), by table: the grid values
// are integers, so the midpoints between neighbours are multiples of 1/2 and every half-unit
// interval [b/2, (b+1)/2) has a single answer (the number of midpoints <= b/2). One conversion
// and one load per value instead of a branchy search.
struct Iq4Table {
  static constexpr int kHalf = 300;  // covers |v| < 150 (codes clamp beyond the grid's ends)
  uint8_t idx[2 * kHalf];
  Iq4Table() {
    for (int b = -kHalf; b < kHalf; ++b) {
      int n = 0;
      for (int k = 0; k < 15; ++k) n += 2 * (kIq4nlValues[k] + kIq4nlValues[k + 1]) <= 2 * b;
      idx[b + kHalf] = static_cast<uint8_t>(n);
    }
  }
};
const Iq4Table kIq4Table;

inline int iq4_index(float v) {
  const float c = std::min(149.f, std::max(-149.f, v));
  const int b = static_cast<int>(2 * c + 1024.f) - 1024;  // floor(2c): the sum is positive
  return kIq4Table.idx[b + Iq4Table::kHalf];
}

// Scale of one 32-element IQ4 group: the weighted least-squares scale over 15 candidate
// inverse scales (both signs of the grid's asymmetric ends). Codes go to L.
float iq4_group_scale(const float* x, const float* w, uint8_t* L) {
  constexpr int kTry = 7;
  const float max = signed_absmax(x, 32);
  if (std::fabs(max) < kEps) {
    for (int j = 0; j < 32; ++j) L[j] = 0;
    return 0;
  }
  const float v0 = kIq4nlValues[0];
  auto fit = [&](float id, float* sumqx, float* sumq2) {
    float q[32];
    for (int j = 0; j < 32; ++j) q[j] = kIq4nlValues[iq4_index(id * x[j])];
    float a = 0, b = 0;
    for (int j = 0; j < 32; ++j) {
      a += w[j] * q[j] * x[j];
      b += w[j] * q[j] * q[j];
    }
    *sumqx = a;
    *sumq2 = b;
  };
  float d = -max / v0;
  float sumqx, sumq2;
  fit(1 / d, &sumqx, &sumq2);
  d = sumq2 > 0 ? sumqx / sumq2 : d;
  float best = d * sumqx;
  for (int itry = -kTry; itry <= kTry; ++itry) {
    const float id = (static_cast<float>(itry) + v0) / max;
    fit(id, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  const float id = d != 0 ? 1 / d : 0;
  for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(iq4_index(id * x[j]));
  return d;
}

void iq4_weights(const float* x, const float* imp, int n, float sigma2, float* w) {
  if (imp) {
    search_weights(x, imp, n, sigma2, w);
  } else {
    for (int j = 0; j < n; ++j) w[j] = x[j] * x[j];
  }
}

void iq4_nl(const float* x, const float* imp, uint8_t* out) {
  float s2 = 0, w[32];
  for (int j = 0; j < 32; ++j) s2 += x[j] * x[j];
  iq4_weights(x, imp, 32, 2 * s2 / 32, w);
  uint8_t L[32];
  const float d = iq4_group_scale(x, w, L);
  BlockIQ4_NL b{};
  b.d = h(d);
  pack_q4(L, b.qs);
  std::memcpy(out, &b, sizeof b);
}

void iq4_xs(const float* x, const float* imp, uint8_t* out) {
  float s2 = 0;
  for (int j = 0; j < kQK_K; ++j) s2 += x[j] * x[j];
  const float sigma2 = 2 * s2 / kQK_K;
  float scales[8], w[32];
  uint8_t L[kQK_K];
  for (int ib = 0; ib < 8; ++ib) {
    iq4_weights(x + 32 * ib, imp ? imp + 32 * ib : nullptr, 32, sigma2, w);
    scales[ib] = iq4_group_scale(x + 32 * ib, w, L + 32 * ib);
  }
  const float max_scale = signed_absmax(scales, 8);
  BlockIQ4_XS b{};
  const float d = -max_scale / 32;
  b.d = h(d);
  const float id = d != 0 ? 1 / d : 0;
  for (int ib = 0; ib < 8; ++ib) {
    const int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
    const float dl = hf(b.d) * static_cast<float>(l);
    const float idl = dl != 0 ? 1 / dl : 0;
    for (int j = 0; j < 32; ++j)
      L[32 * ib + j] = static_cast<uint8_t>(iq4_index(idl * x[32 * ib + j]));
    const int u = l + 32;
    b.scales_l[ib / 2] |= static_cast<uint8_t>((u & 15) << (4 * (ib % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | ((u >> 4) << (2 * ib)));
    pack_q4(L + 32 * ib, b.qs + 16 * ib);
  }
  std::memcpy(out, &b, sizeof b);
}

// MXFP4: the exponent puts the block's largest magnitude in the grid's top octave (as ggml and
// gguf.quants do); each code is the nearest grid value (first of equals). With importance
// weights the neighbouring exponents are tried too and the smallest weighted error kept.
void mxfp4(const float* x, const float* imp, uint8_t* out) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  int e = amax > 0 ? std::clamp(std::ilogb(amax) - 2 + 127, 0, 255) : 0;
  auto encode = [&](int ee, BlockMXFP4& b) {
    b.e = static_cast<uint8_t>(ee);
    const float d = e8m0_half(b.e);
    double err = 0;
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) {
      int best = 0;
      float best_err = std::fabs(d * kMxfp4Values[0] - x[j]);
      for (int k = 1; k < 16; ++k) {
        const float er = std::fabs(d * kMxfp4Values[k] - x[j]);
        if (er < best_err) {
          best_err = er;
          best = k;
        }
      }
      q[j] = static_cast<uint8_t>(best);
      if (imp) err += static_cast<double>(imp[j]) * best_err * best_err;
    }
    pack_q4(q, b.qs);
    return err;
  };
  BlockMXFP4 b{};
  double best = encode(e, b);
  if (imp) {
    for (int ee : {e - 1, e + 1}) {
      if (ee < 0 || ee > 255) continue;
      BlockMXFP4 c{};
      const double err = encode(ee, c);
      if (err < best) {
        best = err;
        b = c;
      }
    }
  }
  std::memcpy(out, &b, sizeof b);
}

void kquant(DType t, const float* x, const float* imp, uint8_t* out) {
  switch (t) {
    case DType::kQ2_K: q2k(x, imp, out); return;
    case DType::kQ3_K: q3k(x, imp, out); return;
    case DType::kQ4_K: q45k<false>(x, imp, out); return;
    case DType::kQ5_K: q45k<true>(x, imp, out); return;
    case DType::kQ6_K: q6k(x, imp, out); return;
    case DType::kIQ4_NL: iq4_nl(x, imp, out); return;
    case DType::kIQ4_XS: iq4_xs(x, imp, out); return;
    case DType::kMXFP4: mxfp4(x, imp, out); return;
    default: fail("quantize: no K-quantizer for ", dtype_name(t));
  }
}

// Formats whose quantizer takes the importance weights block by block (kquant): the K-quants
// and the non-linear grids.
bool is_kquant(DType t) {
  return t == DType::kQ2_K || t == DType::kQ3_K || t == DType::kQ4_K || t == DType::kQ5_K ||
         t == DType::kQ6_K || t == DType::kIQ4_NL || t == DType::kIQ4_XS || t == DType::kMXFP4;
}

}  // namespace

// Every type Triad computes with can be written (and the other way round).
bool can_quantize(DType t) { return dtype_supported_for_weights(t); }

double weighted_sq_error(const float* x, const float* y, int64_t n, const float* imp) {
  double e = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    e += (imp ? static_cast<double>(imp[i]) : 1.0) * d * d;
  }
  return e;
}

void quantize_row(DType t, const float* x, int64_t n, void* dst, const float* importance) {
  TRIAD_CHECK(can_quantize(t), "quantize: cannot write type ", dtype_name(t));
  const DTypeTraits& tr = traits(t);
  TRIAD_CHECK(n >= 0 && n % tr.block_size == 0, "quantize ", tr.name, ": row of ", n,
              " values is not a multiple of the block size ", tr.block_size);
  auto* out = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::kF32: std::memcpy(out, x, static_cast<size_t>(n) * 4); return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = f32_to_fp16(x[i]);
        std::memcpy(out + 2 * i, &v, 2);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &v, 2);
      }
      return;
    default: break;
  }
  const int bs = static_cast<int>(tr.block_size), bb = static_cast<int>(tr.block_bytes);
  const int64_t nb = n / bs;
  const bool k = is_kquant(t);
  float sigma2 = 0;
  if (importance && !k) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
    sigma2 = n > 0 ? static_cast<float>(s / static_cast<double>(n)) : 0.f;
  }
  uint8_t cand[sizeof(BlockQ8_K)];
  float ya[kQK_K], yb[kQK_K];
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * bs;
    uint8_t* ob = out + b * bb;
    if (k) kquant(t, xb, nullptr, ob);
    else q32_ref(t, xb, ob);
    if (!importance) continue;
    const float* ib = importance + b * bs;
    if (k) kquant(t, xb, ib, cand);
    else q32_weighted(t, xb, ib, sigma2, cand);
    dequantize_row_ref(t, ob, ya, bs);
    dequantize_row_ref(t, cand, yb, bs);
    if (weighted_sq_error(xb, yb, bs, ib) < weighted_sq_error(xb, ya, bs, ib))
      std::memcpy(ob, cand, static_cast<size_t>(bb));
  }
}

}  // namespace triad::quant
