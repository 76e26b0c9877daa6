// Activation quantization (act_quant.h): the scalar references and the per-ISA dispatch.
//
// Properties: the reference defines the formats bit for bit; the AVX2 / AVX-512 variants
// (act_quant_avx2.cpp, act_quant_avx512.cpp) evaluate the same float expressions in the same
// order per element (max, one division per block, one product and one round-to-nearest-even
// conversion per element), so they produce identical bits.
// Thread-safety: pure functions.
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/act_quant.h"
#include "tensor/fp16.h"

namespace triad::kernels {

void quantize_act_q8_ref(const float* x, int64_t n, int8_t* q, float* d, float* xs) {
  for (int64_t b = 0; b < n / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    float amax = 0.f;
    for (int i = 0; i < kActBlock; ++i) {
      const float a = std::fabs(xb[i]);
      amax = a > amax ? a : amax;
    }
    const float db = amax / 127.f;
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    int sum = 0;
    for (int i = 0; i < kActBlock; ++i) {
      float v = xb[i] * id;
      // A no-op for finite input (|v| <= 127 * (1 + 2^-23)); keeps NaN / inf from becoming
      // undefined behaviour in the conversion.
      v = v > 127.f ? 127.f : v;
      v = v < -127.f ? -127.f : v;
      if (v != v) v = 0.f;
      const int qi = static_cast<int>(std::nearbyint(v));
      q[b * kActBlock + i] = static_cast<int8_t>(qi);
      sum += qi;
    }
    d[b] = db;
    xs[b] = db * static_cast<float>(sum);
  }
}

void quantize_act_q8_row_ref(const float* x, int64_t n, int8_t* q, float* d) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    amax = a > amax ? a : amax;
  }
  const float id = amax > 0.f ? 127.f / amax : 0.f;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * id;
    v = v > 127.f ? 127.f : v;  // as in quantize_act_q8_ref: only non-finite input is clamped
    v = v < -127.f ? -127.f : v;
    if (v != v) v = 0.f;
    q[i] = static_cast<int8_t>(std::nearbyint(v));
  }
  *d = amax / 127.f;
}

uint16_t round_act_bf16_one(float x) {
  uint32_t u = f32_to_bits(x);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;                       // subnormal -> +-0
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

void round_act_bf16_ref(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = round_act_bf16_one(x[i]);
}

void quantize_act_q8(IsaLevel level, const float* x, int64_t n, int8_t* q, float* d, float* xs) {
  switch (level) {
    case IsaLevel::kAvx512: quantize_act_q8_avx512(x, n, q, d, xs); return;
    case IsaLevel::kAvx2: quantize_act_q8_avx2(x, n, q, d, xs); return;
    case IsaLevel::kScalar: break;
  }
  quantize_act_q8_ref(x, n, q, d, xs);
}

void quantize_act_q8_row(IsaLevel level, const float* x, int64_t n, int8_t* q, float* d) {
  if (level == IsaLevel::kScalar) {
    quantize_act_q8_row_ref(x, n, q, d);
  } else {
    quantize_act_q8_row_avx2(x, n, q, d);
  }
}

void act_sums16(const int8_t* q, const float* d, int64_t n, float* xs16) {
  for (int64_t j = 0; j < n / 16; ++j) {
    int32_t s = 0;
    for (int i = 0; i < 16; ++i) s += q[16 * j + i];
    xs16[j] = d[j / 2] * static_cast<float>(s);
  }
}

void round_act_bf16(IsaLevel level, const float* x, int64_t n, uint16_t* out) {
  switch (level) {
    case IsaLevel::kAvx512: round_act_bf16_avx512(x, n, out); return;
    case IsaLevel::kAvx2: round_act_bf16_avx2(x, n, out); return;
    case IsaLevel::kScalar: break;
  }
  round_act_bf16_ref(x, n, out);
}

}  // namespace triad::kernels
