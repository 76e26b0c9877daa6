// Scalar conversions between f32 and the two 8-bit float formats of the OCP FP8 specification
// (as PyTorch's float8_e4m3fn / float8_e5m2 and NVIDIA's FP8 define them):
//   E4M3 ("fn"): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is
//                NaN; the largest finite magnitude is 448 (S.1111.110); subnormals m * 2^-9.
//   E5M2:        1 sign, 5 exponent bits (bias 15), 2 mantissa bits: the top byte of an IEEE
//                binary16 (infinities and NaNs as there); the largest finite magnitude is 57344.
// Encoding rounds to nearest, ties to even, and saturates: a finite input beyond the largest
// finite value becomes that value (so scaled weights and cached keys never turn into NaN/inf);
// NaN encodes as NaN. Decoding is exact.
// Thread-safety: pure inline functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "tensor/fp16.h"

namespace triad {

namespace fp8_detail {
// Rounds |x| (finite, >= 0) to the format with kMant mantissa bits, exponent bias kBias and
// largest finite code kMaxCode (sign excluded); returns the 7-bit magnitude code.
template <int kMant, int kBias, uint32_t kMaxCode>
inline uint32_t encode_magnitude(float a) {
  const float min_normal = std::ldexp(1.f, 1 - kBias);
  uint32_t code;
  if (a < min_normal) {
    // Subnormal range: a multiple of 2^(1 - bias - mant); rounding up may reach the smallest
    // normal, whose code is the next integer, so the formula stays right.
    code = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, kBias - 1 + kMant)));
  } else {
    int e = std::ilogb(a);  // a = 2^e * (1 + f)
    const float f = std::ldexp(a, -e) - 1.f;  // exact
    uint32_t m = static_cast<uint32_t>(std::nearbyint(std::ldexp(f, kMant)));
    if (m == (1u << kMant)) {
      m = 0;
      ++e;
    }
    const int biased = e + kBias;
    if (biased > static_cast<int>(kMaxCode >> kMant)) return kMaxCode;
    code = (static_cast<uint32_t>(biased) << kMant) | m;
  }
  return code > kMaxCode ? kMaxCode : code;
}
}  // namespace fp8_detail

inline uint8_t f32_to_e4m3(float x) {
  const uint32_t sign = (f32_to_bits(x) >> 24) & 0x80u;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7f);
  const float a = std::fabs(x);
  if (a >= 448.f) return static_cast<uint8_t>(sign | 0x7e);
  return static_cast<uint8_t>(sign | fp8_detail::encode_magnitude<3, 7, 0x7e>(a));
}

inline float e4m3_to_f32(uint8_t v) {
  const uint32_t e = (v >> 3) & 15u, m = v & 7u;
  float a;
  if ((v & 0x7f) == 0x7f) {
    a = std::nanf("");
  } else if (e == 0) {
    a = std::ldexp(static_cast<float>(m), -9);
  } else {
    a = std::ldexp(1.f + static_cast<float>(m) / 8.f, static_cast<int>(e) - 7);
  }
  return (v & 0x80) ? -a : a;
}

inline uint8_t f32_to_e5m2(float x) {
  const uint32_t sign = (f32_to_bits(x) >> 24) & 0x80u;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7e);
  const float a = std::fabs(x);
  if (a >= 57344.f) return static_cast<uint8_t>(sign | 0x7b);
  return static_cast<uint8_t>(sign | fp8_detail::encode_magnitude<2, 15, 0x7b>(a));
}

inline float e5m2_to_f32(uint8_t v) { return fp16_to_f32(static_cast<uint16_t>(v << 8)); }

}  // namespace triad
