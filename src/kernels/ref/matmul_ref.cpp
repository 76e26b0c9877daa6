// Scalar reference of the matmul algorithm (matmul_impl.h describes it): matmul_ref() and the
// row-range kernel matmul_rows_ref() that the kScalar level runs on the thread pool.
//
// Properties:
// - Decodes each weight row into exact small integers (q - offset) plus the per-group float
//   scales and per-32-block float minimums, formed exactly as dequantization forms them
//   (d, fl(d * sc), fl(dmin * mn)); integer dot products are exact, each group term is
//   fl(ws * dx) * isum, and everything is accumulated in double, so this is the algorithm's
//   value up to one rounding per group scale.
// - F32 / F16 / BF16 / FP8 E4M3 products are exact in double (bf16 activations are rounded
//   first, as the SIMD kernels do); FP8 rows are scaled once at the end; I8 (W8A8) dot products
//   are exact integers scaled by fl(s_r * dx_t).
// Thread-safety: matmul_rows_ref writes only its own outputs and uses thread-local grow-only
// scratch, so disjoint ranges may run concurrently; matmul_ref allocates per call.
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/act_quant.h"
#include "kernels/matmul.h"
#include "kernels/lane_layout.h"
#include "kernels/matmul_impl.h"
#include "kernels/panel_layout.h"
#include "kernels/quant_blocks.h"
#include "tensor/fp16.h"
#include "tensor/fp8.h"

namespace triad::kernels {
namespace {

inline float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

// One decoded weight row: vals[i] = q_i - offset, the scale of group g (of `group` elements),
// and the minimum coefficient of 32-block b (added as mins[b] * xs[b]); Q2_K has a minimum per
// 16 elements instead (mins16[s], added as mins16[s] * xs16[s]).
struct DecodedRow {
  std::vector<int8_t> vals;
  std::vector<float> scales;
  std::vector<float> mins;
  std::vector<float> mins16;
  int group = 32;
  bool has_mins = false;
};

template <typename Block>
inline Block load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

void decode_row(DType t, const uint8_t* row, int64_t cols, DecodedRow& out) {
  out.vals.resize(static_cast<size_t>(cols));
  out.mins.assign(static_cast<size_t>(cols / 32), 0.f);
  out.group = (t == DType::kQ6_K || t == DType::kQ2_K || t == DType::kQ3_K) ? 16 : 32;
  out.mins16.clear();
  out.scales.resize(static_cast<size_t>(cols / out.group));
  out.has_mins = t == DType::kQ4_1 || t == DType::kQ5_1 || t == DType::kQ4_K || t == DType::kQ5_K;
  int8_t* v = out.vals.data();
  float* sc = out.scales.data();
  float* mn = out.mins.data();
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1: {
      const bool has_m = t == DType::kQ4_1;
      const int bytes = has_m ? 20 : 18;
      const int off = has_m ? 0 : 8;
      for (int64_t b = 0; b < cols / 32; ++b) {
        const uint8_t* p = row + b * bytes;
        const uint8_t* qs = p + (has_m ? 4 : 2);
        sc[b] = f16(p);
        if (has_m) mn[b] = f16(p + 2);
        for (int j = 0; j < 16; ++j) {
          v[32 * b + j] = static_cast<int8_t>((qs[j] & 15) - off);
          v[32 * b + j + 16] = static_cast<int8_t>((qs[j] >> 4) - off);
        }
      }
      break;
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool has_m = t == DType::kQ5_1;
      const int bytes = has_m ? 24 : 22;
      const int off = has_m ? 0 : 16;
      for (int64_t b = 0; b < cols / 32; ++b) {
        const uint8_t* p = row + b * bytes;
        const uint8_t* qhp = p + (has_m ? 4 : 2);
        const uint8_t* qs = qhp + 4;
        const uint32_t qh = uint32_t{qhp[0]} | uint32_t{qhp[1]} << 8 | uint32_t{qhp[2]} << 16 |
                            uint32_t{qhp[3]} << 24;
        sc[b] = f16(p);
        if (has_m) mn[b] = f16(p + 2);
        for (int j = 0; j < 16; ++j) {
          const int lo = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
          const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
          v[32 * b + j] = static_cast<int8_t>(lo - off);
          v[32 * b + j + 16] = static_cast<int8_t>(hi - off);
        }
      }
      break;
    }
    case DType::kQ8_0:
      for (int64_t b = 0; b < cols / 32; ++b) {
        const BlockQ8_0 blk = load<BlockQ8_0>(row + b * sizeof(BlockQ8_0));
        sc[b] = fp16_to_f32(blk.d);
        std::memcpy(v + 32 * b, blk.qs, 32);
      }
      break;
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = t == DType::kQ5_K;
      for (int64_t sb = 0; sb < cols / kQK_K; ++sb) {
        const uint8_t* p = row + sb * (five ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K));
        const float d = f16(p), dmin = f16(p + 2);
        const uint8_t* scales = p + 4;
        const uint8_t* qh = p + 16;
        const uint8_t* qs = p + (five ? 48 : 16);
        for (int j = 0; j < 8; ++j) {
          uint8_t s, m;
          get_scale_min_k4(j, scales, &s, &m);
          sc[8 * sb + j] = d * static_cast<float>(s);
          mn[8 * sb + j] = -(dmin * static_cast<float>(m));
        }
        int8_t* vs = v + sb * kQK_K;
        for (int c = 0; c < 4; ++c) {
          for (int l = 0; l < 32; ++l) {
            int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
            if (five) {
              lo |= ((qh[l] >> (2 * c)) & 1) << 4;
              hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            vs[64 * c + l] = static_cast<int8_t>(lo);
            vs[64 * c + 32 + l] = static_cast<int8_t>(hi);
          }
        }
      }
      break;
    }
    case DType::kQ2_K:
      out.mins16.resize(static_cast<size_t>(cols / 16));
      for (int64_t sb = 0; sb < cols / kQK_K; ++sb) {
        const BlockQ2_K blk = load<BlockQ2_K>(row + sb * sizeof(BlockQ2_K));
        const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
        for (int s = 0; s < 16; ++s) {
          sc[16 * sb + s] = d * static_cast<float>(blk.scales[s] & 15);
          out.mins16[static_cast<size_t>(16 * sb + s)] = -(dmin * static_cast<float>(blk.scales[s] >> 4));
        }
        for (int i = 0; i < kQK_K; ++i)
          v[sb * kQK_K + i] =
              static_cast<int8_t>((blk.qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3);
      }
      break;
    case DType::kQ3_K:
      for (int64_t sb = 0; sb < cols / kQK_K; ++sb) {
        const BlockQ3_K blk = load<BlockQ3_K>(row + sb * sizeof(BlockQ3_K));
        const float d = fp16_to_f32(blk.d);
        uint8_t s6[16];
        get_scales_q3k(blk.scales, s6);
        for (int s = 0; s < 16; ++s) sc[16 * sb + s] = d * static_cast<float>(int{s6[s]} - 32);
        for (int i = 0; i < kQK_K; ++i) {
          const int h = i / 128, k = (i / 32) % 4, l = i % 32;
          const int lo = (blk.qs[32 * h + l] >> (2 * k)) & 3;
          const int hi = (blk.hmask[l] >> (4 * h + k)) & 1;
          v[sb * kQK_K + i] = static_cast<int8_t>(lo - (hi ? 0 : 4));
        }
      }
      break;
    case DType::kIQ4_NL:
    case DType::kMXFP4:
      for (int64_t b = 0; b < cols / 32; ++b) {
        const bool nl = t == DType::kIQ4_NL;
        const uint8_t* p = row + b * (nl ? sizeof(BlockIQ4_NL) : sizeof(BlockMXFP4));
        const uint8_t* qs = p + (nl ? 2 : 1);
        const int8_t* values = nl ? kIq4nlValues : kMxfp4Values;
        sc[b] = nl ? f16(p) : e8m0_half(p[0]);
        for (int j = 0; j < 16; ++j) {
          v[32 * b + j] = values[qs[j] & 15];
          v[32 * b + j + 16] = values[qs[j] >> 4];
        }
      }
      break;
    case DType::kIQ4_XS:
      for (int64_t sb = 0; sb < cols / kQK_K; ++sb) {
        const BlockIQ4_XS blk = load<BlockIQ4_XS>(row + sb * sizeof(BlockIQ4_XS));
        const float d = fp16_to_f32(blk.d);
        for (int ib = 0; ib < 8; ++ib) {
          const int ls = ((blk.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((blk.scales_h >> (2 * ib)) & 3) << 4);
          sc[8 * sb + ib] = d * static_cast<float>(ls - 32);
          for (int j = 0; j < 16; ++j) {
            v[sb * kQK_K + 32 * ib + j] = kIq4nlValues[blk.qs[16 * ib + j] & 15];
            v[sb * kQK_K + 32 * ib + j + 16] = kIq4nlValues[blk.qs[16 * ib + j] >> 4];
          }
        }
      }
      break;
    case DType::kQ6_K:
      for (int64_t sb = 0; sb < cols / kQK_K; ++sb) {
        const BlockQ6_K blk = load<BlockQ6_K>(row + sb * sizeof(BlockQ6_K));
        const float d = fp16_to_f32(blk.d);
        for (int j = 0; j < 16; ++j) sc[16 * sb + j] = d * static_cast<float>(blk.scales[j]);
        int8_t* vs = v + sb * kQK_K;
        for (int h = 0; h < 2; ++h) {
          const uint8_t* ql = blk.ql + 64 * h;
          const uint8_t* qh = blk.qh + 32 * h;
          for (int l = 0; l < 32; ++l) {
            vs[128 * h + l] = static_cast<int8_t>(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
            vs[128 * h + l + 32] =
                static_cast<int8_t>(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            vs[128 * h + l + 64] =
                static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            vs[128 * h + l + 96] =
                static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
          }
        }
      }
      break;
    default:
      fail("matmul_ref: no quantized decoding for ", dtype_name(t));
  }
}

double dot_quant(const DecodedRow& w, const int8_t* xq, const float* xd, const float* xs,
                 const float* xs16, int64_t cols) {
  double acc = 0.0;
  const int g = w.group;
  for (int64_t k = 0; k < cols / g; ++k) {
    int32_t isum = 0;
    for (int i = 0; i < g; ++i) isum += int32_t{w.vals[k * g + i]} * int32_t{xq[k * g + i]};
    const float s = w.scales[k] * xd[k * g / 32];
    acc += static_cast<double>(s) * static_cast<double>(isum);
  }
  if (w.has_mins) {
    for (int64_t b = 0; b < cols / 32; ++b)
      acc += static_cast<double>(w.mins[b]) * static_cast<double>(xs[b]);
  }
  for (size_t k = 0; k < w.mins16.size(); ++k)
    acc += static_cast<double>(w.mins16[k]) * static_cast<double>(xs16[k]);
  return acc;
}

}  // namespace

ActKind act_kind(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16: return ActKind::kF32;
    case DType::kBF16: return ActKind::kBf16;
    case DType::kF8_E4M3: return ActKind::kF32;
    case DType::kI8: return ActKind::kQ8Row;
    case DType::kQ2_K: return ActKind::kQ8Sums16;
    default: return ActKind::kQ8;
  }
}

void matmul_rows_ref(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const int64_t cols = j.cols;
  switch (j.type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = j.w + static_cast<uint64_t>(r) * j.row_bytes;
        for (int64_t t = t0; t < t1; ++t) {
          double acc = 0.0;
          if (j.type == DType::kF32) {
            const float* x = j.x + t * j.x_stride;
            for (int64_t c = 0; c < cols; ++c) {
              float wv;
              std::memcpy(&wv, row + 4 * c, 4);
              acc += static_cast<double>(wv) * static_cast<double>(x[c]);
            }
          } else if (j.type == DType::kF16) {
            const float* x = j.x + t * j.x_stride;
            for (int64_t c = 0; c < cols; ++c)
              acc += static_cast<double>(f16(row + 2 * c)) * static_cast<double>(x[c]);
          } else {
            const uint16_t* xb = j.xb + t * j.xb_stride;
            for (int64_t c = 0; c < cols; ++c) {
              uint16_t h;
              std::memcpy(&h, row + 2 * c, 2);
              acc += static_cast<double>(bf16_to_f32(h)) * static_cast<double>(bf16_to_f32(xb[c]));
            }
          }
          j.y[t * j.y_stride + r] = static_cast<float>(acc);
        }
      }
      return;
    case DType::kF8_E4M3:
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = j.w + static_cast<uint64_t>(r) * j.row_bytes;
        for (int64_t t = t0; t < t1; ++t) {
          const float* x = j.x + t * j.x_stride;
          double acc = 0.0;
          for (int64_t c = 0; c < cols; ++c)
            acc += static_cast<double>(e4m3_to_f32(row[c])) * static_cast<double>(x[c]);
          j.y[t * j.y_stride + r] = static_cast<float>(acc * static_cast<double>(j.row_scale[r]));
        }
      }
      return;
    case DType::kI8:
      for (int64_t r = r0; r < r1; ++r) {
        const int8_t* row = reinterpret_cast<const int8_t*>(j.w + static_cast<uint64_t>(r) * j.row_bytes);
        for (int64_t t = t0; t < t1; ++t) {
          const int8_t* xq = j.aq + t * j.aq_stride;
          int64_t isum = 0;
          for (int64_t c = 0; c < cols; ++c) isum += static_cast<int64_t>(row[c]) * xq[c];
          // Exactly matmul_impl.h's y = float(isum) * fl(s_r * dx_t), in float as the SIMD
          // levels compute it, so every level gives the same bits (float(isum) rounds once
          // |isum| > 2^24).
          const float scale = j.row_scale[r] * j.ad[t * j.as_stride];
          j.y[t * j.y_stride + r] = static_cast<float>(static_cast<int32_t>(isum)) * scale;
        }
      }
      return;
    default:
      break;
  }
  thread_local DecodedRow dec;
  for (int64_t r = r0; r < r1; ++r) {
    decode_row(j.type, j.w + static_cast<uint64_t>(r) * j.row_bytes, cols, dec);
    for (int64_t t = t0; t < t1; ++t) {
      const double acc = dot_quant(dec, j.aq + t * j.aq_stride, j.ad + t * j.as_stride, j.axs + t * j.as_stride,
                                   j.axs16 ? j.axs16 + t * j.xs16_stride : nullptr, cols);
      j.y[t * j.y_stride + r] = static_cast<float>(acc);
    }
  }
}

void matmul_ref(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride,
                float* y, int64_t y_stride) {
  check_matmul_args(w, x, n_tokens, x_stride, y, y_stride);
  if (w.rows == 0 || n_tokens == 0) return;
  if (w.lanes || w.panels) {  // the same computation on the rows laid back into GGUF blocks
    const uint64_t rb = row_bytes(w.type, static_cast<uint64_t>(w.cols));
    std::vector<uint8_t> blocks(static_cast<size_t>(rb * static_cast<uint64_t>(w.rows)));
    const auto* from = static_cast<const uint8_t*>(w.data);
    for (int64_t r = 0; r < w.rows; r += w.panels ? kPanelRows : 1) {
      const uint64_t o = rb * static_cast<uint64_t>(r);
      if (w.panels) {
        panel_to_rows(w.type, from + o, w.cols, blocks.data() + o);
      } else {
        row_from_lanes(w.type, from + o, w.cols, blocks.data() + o);
      }
    }
    WeightMatrix b = w;
    b.data = blocks.data();
    b.lanes = false;
    b.panels = false;
    matmul_ref(b, x, n_tokens, x_stride, y, y_stride);
    return;
  }
  MatmulJob j;
  j.type = w.type;
  j.w = static_cast<const uint8_t*>(w.data);
  j.row_bytes = row_bytes(w.type, static_cast<uint64_t>(w.cols));
  j.rows = w.rows;
  j.cols = w.cols;
  j.n_tokens = n_tokens;
  j.x = x;
  j.x_stride = x_stride;
  j.y = y;
  j.y_stride = y_stride;
  j.row_scale = w.row_scale;
  std::vector<uint16_t> xb;
  std::vector<int8_t> aq;
  std::vector<float> ad, axs, xs16;
  const size_t n = static_cast<size_t>(n_tokens), cols = static_cast<size_t>(w.cols);
  switch (act_kind(w.type)) {
    case ActKind::kF32: break;
    case ActKind::kBf16:
      xb.resize(n * cols);
      for (size_t t = 0; t < n; ++t)
        round_act_bf16_ref(x + static_cast<int64_t>(t) * x_stride, w.cols, xb.data() + t * cols);
      j.xb = xb.data();
      j.xb_stride = w.cols;
      break;
    case ActKind::kQ8:
    case ActKind::kQ8Sums16:
      aq.resize(n * cols);
      ad.resize(n * cols / 32);
      axs.resize(n * cols / 32);
      for (size_t t = 0; t < n; ++t)
        quantize_act_q8_ref(x + static_cast<int64_t>(t) * x_stride, w.cols, aq.data() + t * cols,
                            ad.data() + t * cols / 32, axs.data() + t * cols / 32);
      j.aq = aq.data();
      j.aq_stride = w.cols;
      j.ad = ad.data();
      j.axs = axs.data();
      j.as_stride = w.cols / 32;
      if (act_kind(w.type) == ActKind::kQ8Sums16) {
        xs16.resize(n * cols / 16);
        for (size_t t = 0; t < n; ++t)
          act_sums16(aq.data() + t * cols, ad.data() + t * cols / 32, w.cols, xs16.data() + t * cols / 16);
        j.axs16 = xs16.data();
        j.xs16_stride = w.cols / 16;
      }
      break;
    case ActKind::kQ8Row:
      aq.resize(n * cols);
      ad.resize(n);
      for (size_t t = 0; t < n; ++t)
        quantize_act_q8_row_ref(x + static_cast<int64_t>(t) * x_stride, w.cols, aq.data() + t * cols,
                                ad.data() + t);
      j.aq = aq.data();
      j.aq_stride = w.cols;
      j.ad = ad.data();
      j.as_stride = 1;
      break;
  }
  matmul_rows_ref(j, 0, w.rows, 0, n_tokens);
}

}  // namespace triad::kernels
