// Scalar reference dequantization of GGML weight formats to f32: the ground truth the SIMD
// variants and the matmul kernels are tested against.
//
// Properties:
// - Bit-exact with PyPI gguf.quants.dequantize (gguf 0.19, which mirrors ggml's
//   dequantize_row_*): all arithmetic in float32, fp16 fields widened exactly, sub-block factors
//   formed as float32 products (d * sc, dmin * mn, d * scale), then each element as a product
//   followed by the add/sub, in the reference's order. Every product here is exact in float32
//   (an fp16 significand has 11 bits, sc/mn 6, q at most 6, scale 7: <= 24 bits in all, and
//   no product can underflow), so only the final add/sub rounds and an FMA contraction by the
//   compiler could not change a result.
// - F32/F16/BF16 are pure bit conversions: NaN payloads and signs are preserved.
// - Source blocks are copied with memcpy, so src needs no particular alignment.
// Thread-safety: pure functions; concurrent calls on distinct dst are safe.
#include <cstring>

#include "base/error.h"
#include "kernels/dequant_isa.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "tensor/fp16.h"

namespace triad::kernels {
namespace {

template <typename Block>
inline Block load_block(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

inline uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void deq_f32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void deq_f16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = fp16_to_f32(h);
  }
}

void deq_bf16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf16_to_f32(h);
  }
}

void deq_q8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ8_0>(src + b * sizeof(BlockQ8_0));
    const float d = fp16_to_f32(blk.d);
    float* y = dst + b * kQK8_0;
    for (int i = 0; i < kQK8_0; ++i) y[i] = static_cast<float>(blk.qs[i]) * d;
  }
}

void deq_q4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ4_0>(src + b * sizeof(BlockQ4_0));
    const float d = fp16_to_f32(blk.d);
    float* y = dst + b * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * static_cast<float>((blk.qs[j] & 0x0F) - 8);
      y[j + kQK4_0 / 2] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
    }
  }
}

void deq_q4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ4_1>(src + b * sizeof(BlockQ4_1));
    const float d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m);
    float* y = dst + b * kQK4_1;
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      y[j] = d * static_cast<float>(blk.qs[j] & 0x0F) + m;
      y[j + kQK4_1 / 2] = d * static_cast<float>(blk.qs[j] >> 4) + m;
    }
  }
}

void deq_q5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ5_0>(src + b * sizeof(BlockQ5_0));
    const float d = fp16_to_f32(blk.d);
    const uint32_t qh = load_u32_le(blk.qh);
    float* y = dst + b * kQK5_0;
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0F) | static_cast<int>((qh >> j) & 1) << 4;
      const int hi = (blk.qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
      y[j] = d * static_cast<float>(lo - 16);
      y[j + kQK5_0 / 2] = d * static_cast<float>(hi - 16);
    }
  }
}

void deq_q5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ5_1>(src + b * sizeof(BlockQ5_1));
    const float d = fp16_to_f32(blk.d), m = fp16_to_f32(blk.m);
    const uint32_t qh = load_u32_le(blk.qh);
    float* y = dst + b * kQK5_1;
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0F) | static_cast<int>((qh >> j) & 1) << 4;
      const int hi = (blk.qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
      y[j] = d * static_cast<float>(lo) + m;
      y[j + kQK5_1 / 2] = d * static_cast<float>(hi) + m;
    }
  }
}

void deq_q2_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ2_K>(src + b * sizeof(BlockQ2_K));
    const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
    float* y = dst + b * kQK_K;
    for (int i = 0; i < kQK_K; ++i) {
      const int s = i / 16, h = i / 128, k = (i / 32) % 4, l = i % 32;
      const float dl = d * static_cast<float>(blk.scales[s] & 15);
      const float ml = dmin * static_cast<float>(blk.scales[s] >> 4);
      y[i] = dl * static_cast<float>((blk.qs[32 * h + l] >> (2 * k)) & 3) - ml;
    }
  }
}

void deq_q3_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ3_K>(src + b * sizeof(BlockQ3_K));
    const float d = fp16_to_f32(blk.d);
    uint8_t sc[16];
    get_scales_q3k(blk.scales, sc);
    float* y = dst + b * kQK_K;
    for (int i = 0; i < kQK_K; ++i) {
      const int h = i / 128, k = (i / 32) % 4, l = i % 32;
      const float dl = d * static_cast<float>(static_cast<int>(sc[i / 16]) - 32);
      const int lo = (blk.qs[32 * h + l] >> (2 * k)) & 3;
      const int hi = (blk.hmask[l] >> (4 * h + k)) & 1;
      y[i] = dl * static_cast<float>(lo - (hi ? 0 : 4));
    }
  }
}

void deq_iq4_nl(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockIQ4_NL>(src + b * sizeof(BlockIQ4_NL));
    const float d = fp16_to_f32(blk.d);
    float* y = dst + b * 32;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[blk.qs[j] & 15]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[blk.qs[j] >> 4]);
    }
  }
}

void deq_iq4_xs(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockIQ4_XS>(src + b * sizeof(BlockIQ4_XS));
    const float d = fp16_to_f32(blk.d);
    float* y = dst + b * kQK_K;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ((blk.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((blk.scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = blk.qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[32 * ib + j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 15]);
        y[32 * ib + j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

void deq_mxfp4(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockMXFP4>(src + b * sizeof(BlockMXFP4));
    const float d = e8m0_half(blk.e);
    float* y = dst + b * 32;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kMxfp4Values[blk.qs[j] & 15]);
      y[j + 16] = d * static_cast<float>(kMxfp4Values[blk.qs[j] >> 4]);
    }
  }
}

void deq_q4_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ4_K>(src + b * sizeof(BlockQ4_K));
    const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
    float* y = dst + b * kQK_K;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      get_scale_min_k4(j, blk.scales, &sc, &mn);
      const float ds = d * static_cast<float>(sc);
      const float dm = dmin * static_cast<float>(mn);
      const uint8_t* q = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l)
        y[32 * j + l] = ds * static_cast<float>((q[l] >> shift) & 0x0F) - dm;
    }
  }
}

void deq_q5_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ5_K>(src + b * sizeof(BlockQ5_K));
    const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
    float* y = dst + b * kQK_K;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      get_scale_min_k4(j, blk.scales, &sc, &mn);
      const float ds = d * static_cast<float>(sc);
      const float dm = dmin * static_cast<float>(mn);
      const uint8_t* q = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0x0F) | ((blk.qh[l] >> j) & 1) << 4;
        y[32 * j + l] = ds * static_cast<float>(v) - dm;
      }
    }
  }
}

void deq_q6_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto blk = load_block<BlockQ6_K>(src + b * sizeof(BlockQ6_K));
    const float d = fp16_to_f32(blk.d);
    float ds[kQK_K / 16];
    for (int s = 0; s < kQK_K / 16; ++s) ds[s] = d * static_cast<float>(blk.scales[s]);
    float* y = dst + b * kQK_K;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      float* yh = y + 128 * h;
      const float* dh = ds + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0x0F) | ((qh[l] >> 0) & 3) << 4) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4) - 32;
        const int q2 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
        const int q3 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
        // Element 128h + r uses scale 8h + r / 16.
        yh[l] = dh[l / 16] * static_cast<float>(q0);
        yh[l + 32] = dh[2 + l / 16] * static_cast<float>(q1);
        yh[l + 64] = dh[4 + l / 16] * static_cast<float>(q2);
        yh[l + 96] = dh[6 + l / 16] * static_cast<float>(q3);
      }
    }
  }
}

}  // namespace

namespace detail {

int64_t check_dequant_args(DType t, const void* src, const float* dst, int64_t n) {
  TRIAD_CHECK(dtype_supported_for_weights(t), "dequantize: unsupported weight type id ",
              static_cast<uint32_t>(t));
  const DTypeTraits& tr = traits(t);
  TRIAD_CHECK(n >= 0, "dequantize ", tr.name, ": negative element count ", n);
  TRIAD_CHECK(n % tr.block_size == 0, "dequantize ", tr.name, ": element count ", n,
              " is not a multiple of the block size ", tr.block_size);
  TRIAD_CHECK(n == 0 || (src != nullptr && dst != nullptr), "dequantize ", tr.name,
              ": null source or destination");
  return n / tr.block_size;
}

}  // namespace detail

void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = detail::check_dequant_args(t, src, dst, n);
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kF32:
      deq_f32(s, dst, n);
      return;
    case DType::kF16:
      deq_f16(s, dst, n);
      return;
    case DType::kBF16:
      deq_bf16(s, dst, n);
      return;
    case DType::kQ8_0:
      deq_q8_0(s, dst, nb);
      return;
    case DType::kQ4_0:
      deq_q4_0(s, dst, nb);
      return;
    case DType::kQ4_1:
      deq_q4_1(s, dst, nb);
      return;
    case DType::kQ5_0:
      deq_q5_0(s, dst, nb);
      return;
    case DType::kQ5_1:
      deq_q5_1(s, dst, nb);
      return;
    case DType::kQ2_K:
      deq_q2_k(s, dst, nb);
      return;
    case DType::kQ3_K:
      deq_q3_k(s, dst, nb);
      return;
    case DType::kIQ4_NL:
      deq_iq4_nl(s, dst, nb);
      return;
    case DType::kIQ4_XS:
      deq_iq4_xs(s, dst, nb);
      return;
    case DType::kMXFP4:
      deq_mxfp4(s, dst, nb);
      return;
    case DType::kQ4_K:
      deq_q4_k(s, dst, nb);
      return;
    case DType::kQ5_K:
      deq_q5_k(s, dst, nb);
      return;
    case DType::kQ6_K:
      deq_q6_k(s, dst, nb);
      return;
    default:
      break;
  }
  fail("dequantize: no reference for type ", dtype_name(t));
}

}  // namespace triad::kernels
