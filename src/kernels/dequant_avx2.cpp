// AVX2 dequantization of GGML weight formats to f32 (compiled with -mavx2 -mfma -mf16c; only
// called when best_isa() >= kAvx2).
//
// Properties:
// - Same bits as dequantize_row_ref: the quantized integers are unpacked bytewise, widened to
//   int32 and converted exactly; the float work is the reference's, operation for operation
//   (product, then add/sub). The products are exact in float32 (see dequant_ref.cpp), so
//   whether the compiler contracts mul+add into an FMA (GCC's C++ default, -ffp-contract=fast,
//   with this file's -mfma) cannot change a result.
// - F16 uses the F16C conversion, which is exact for every non-NaN input and quiets a
//   signalling NaN (the reference keeps its payload as it is).
// - Unaligned src and dst are fine (unaligned loads/stores; scalar fields read with memcpy).
// Thread-safety: pure; concurrent calls on distinct dst are safe.
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/dequant_isa.h"
#include "kernels/quant_blocks.h"
#include "tensor/fp16.h"

namespace triad::kernels::detail {
namespace {

inline float load_fp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The 32 bytes of x as four vectors of 8 int32, in order (zero- or sign-extended).
struct Widened {
  __m256i v[4];
};
inline Widened widen_u8(__m256i x) {
  const __m128i lo = _mm256_castsi256_si128(x), hi = _mm256_extracti128_si256(x, 1);
  return {{_mm256_cvtepu8_epi32(lo), _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)),
           _mm256_cvtepu8_epi32(hi), _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))}};
}
inline Widened widen_i8(__m256i x) {
  const __m128i lo = _mm256_castsi256_si128(x), hi = _mm256_extracti128_si256(x, 1);
  return {{_mm256_cvtepi8_epi32(lo), _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)),
           _mm256_cvtepi8_epi32(hi), _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))}};
}

// y[i] = q[i] * d for the 32 elements of w.
inline void store_mul(const Widened& w, __m256 d, float* y) {
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(w.v[k]), d));
}
// y[i] = d * q[i] + m.
inline void store_mul_add(const Widened& w, __m256 d, __m256 m, float* y) {
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_ps(y + 8 * k, _mm256_add_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(w.v[k])), m));
}
// y[i] = d * q[i] - m.
inline void store_mul_sub(const Widened& w, __m256 d, __m256 m, float* y) {
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(w.v[k])), m));
}

// The 16 nibble bytes of a Q4/Q5 block as 32 bytes in element order: low nibbles (elements
// 0..15), then high nibbles (16..31).
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i x = load16(qs), mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(x, 4), mask), _mm_and_si128(x, mask));
}

// Byte i (0..31) = `value` if bit i of bits is set, else 0.
inline __m256i bits_to_bytes(uint32_t bits, char value) {
  const __m256i spread = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                            0x0202020202020202, 0x0303030303030303);
  const __m256i bitmask = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bitmask), bitmask);
  return _mm256_and_si256(b, _mm256_set1_epi8(value));
}

inline uint32_t load_u32_le(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // x86 is little-endian
  return v;
}

void deq_f16(const uint8_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  for (; i < n; ++i) dst[i] = load_fp16(src + 2 * i);
}

void deq_bf16(const uint8_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(load16(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf16_to_f32(h);
  }
}

void deq_q8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(BlockQ8_0);
    const __m256 d = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ8_0, d)));
    store_mul(widen_i8(load32(p + offsetof(BlockQ8_0, qs))), d, dst + b * kQK8_0);
  }
}

void deq_q4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(BlockQ4_0);
    const __m256 d = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ4_0, d)));
    const __m256i q = _mm256_sub_epi8(nibbles_32(p + offsetof(BlockQ4_0, qs)), _mm256_set1_epi8(8));
    store_mul(widen_i8(q), d, dst + b * kQK4_0);
  }
}

void deq_q4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(BlockQ4_1);
    const __m256 d = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ4_1, d)));
    const __m256 m = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ4_1, m)));
    store_mul_add(widen_u8(nibbles_32(p + offsetof(BlockQ4_1, qs))), d, m, dst + b * kQK4_1);
  }
}

void deq_q5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(BlockQ5_0);
    const __m256 d = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ5_0, d)));
    const __m256i hi = bits_to_bytes(load_u32_le(p + offsetof(BlockQ5_0, qh)), 0x10);
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles_32(p + offsetof(BlockQ5_0, qs)), hi),
                                      _mm256_set1_epi8(16));
    store_mul(widen_i8(q), d, dst + b * kQK5_0);
  }
}

void deq_q5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(BlockQ5_1);
    const __m256 d = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ5_1, d)));
    const __m256 m = _mm256_set1_ps(load_fp16(p + offsetof(BlockQ5_1, m)));
    const __m256i hi = bits_to_bytes(load_u32_le(p + offsetof(BlockQ5_1, qh)), 0x10);
    const __m256i q = _mm256_or_si256(nibbles_32(p + offsetof(BlockQ5_1, qs)), hi);
    store_mul_add(widen_u8(q), d, m, dst + b * kQK5_1);
  }
}

// Q4_K and Q5_K share everything but the fifth bit.
template <bool kFiveBit>
void deq_q45_k(const uint8_t* src, float* dst, int64_t nb) {
  using Block = std::conditional_t<kFiveBit, BlockQ5_K, BlockQ4_K>;
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(Block);
    const float d = load_fp16(p + offsetof(Block, d));
    const float dmin = load_fp16(p + offsetof(Block, dmin));
    const uint8_t* scales = p + offsetof(Block, scales);
    const uint8_t* qs = p + offsetof(Block, qs);
    __m256i qh = _mm256_setzero_si256();
    if constexpr (kFiveBit) qh = load32(p + offsetof(BlockQ5_K, qh));
    float* y = dst + b * kQK_K;
    for (int c = 0; c < 4; ++c) {
      const __m256i x = load32(qs + 32 * c);
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        uint8_t sc, mn;
        get_scale_min_k4(j, scales, &sc, &mn);
        const __m256 ds = _mm256_set1_ps(d * static_cast<float>(sc));
        const __m256 dm = _mm256_set1_ps(dmin * static_cast<float>(mn));
        __m256i q = _mm256_and_si256(half ? _mm256_srli_epi16(x, 4) : x, low4);
        if constexpr (kFiveBit) {
          const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);
          q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));  // bit is 0/1 per byte: no carry
        }
        store_mul_sub(widen_u8(q), ds, dm, y + 32 * j);
      }
    }
  }
}

void deq_q6_k(const uint8_t* src, float* dst, int64_t nb) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two_bits = _mm256_set1_epi8(0x30);
  const __m256i offset = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = src + b * sizeof(BlockQ6_K);
    const float d = load_fp16(p + offsetof(BlockQ6_K, d));
    float ds[kQK_K / 16];
    for (int s = 0; s < kQK_K / 16; ++s)
      ds[s] = d * static_cast<float>(static_cast<int8_t>(p[offsetof(BlockQ6_K, scales) + s]));
    float* y = dst + b * kQK_K;
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(p + offsetof(BlockQ6_K, ql) + 64 * h);
      const __m256i ql1 = load32(p + offsetof(BlockQ6_K, ql) + 64 * h + 32);
      const __m256i qh = load32(p + offsetof(BlockQ6_K, qh) + 32 * h);
      // ((qh >> 2k) & 3) << 4, formed bytewise for k = 0..3.
      const __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(qh, 4), two_bits);
      const __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(qh, 2), two_bits);
      const __m256i h2 = _mm256_and_si256(qh, two_bits);
      const __m256i h3 = _mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits);
      const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(ql0, low4), h0),
                            _mm256_or_si256(_mm256_and_si256(ql1, low4), h1),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), h2),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4), h3)};
      for (int k = 0; k < 4; ++k) {
        const Widened w = widen_i8(_mm256_sub_epi8(q[k], offset));
        // Elements 128h + 32k + l: scale 8h + 2k for l < 16, 8h + 2k + 1 above.
        const __m256 s0 = _mm256_set1_ps(ds[8 * h + 2 * k]);
        const __m256 s1 = _mm256_set1_ps(ds[8 * h + 2 * k + 1]);
        float* yk = y + 128 * h + 32 * k;
        _mm256_storeu_ps(yk + 0, _mm256_mul_ps(s0, _mm256_cvtepi32_ps(w.v[0])));
        _mm256_storeu_ps(yk + 8, _mm256_mul_ps(s0, _mm256_cvtepi32_ps(w.v[1])));
        _mm256_storeu_ps(yk + 16, _mm256_mul_ps(s1, _mm256_cvtepi32_ps(w.v[2])));
        _mm256_storeu_ps(yk + 24, _mm256_mul_ps(s1, _mm256_cvtepi32_ps(w.v[3])));
      }
    }
  }
}

}  // namespace

bool dequantize_row_avx2(DType t, const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, s, static_cast<size_t>(n) * sizeof(float));
      return true;
    case DType::kF16:
      deq_f16(s, dst, n);
      return true;
    case DType::kBF16:
      deq_bf16(s, dst, n);
      return true;
    case DType::kQ8_0:
      deq_q8_0(s, dst, n / kQK8_0);
      return true;
    case DType::kQ4_0:
      deq_q4_0(s, dst, n / kQK4_0);
      return true;
    case DType::kQ4_1:
      deq_q4_1(s, dst, n / kQK4_1);
      return true;
    case DType::kQ5_0:
      deq_q5_0(s, dst, n / kQK5_0);
      return true;
    case DType::kQ5_1:
      deq_q5_1(s, dst, n / kQK5_1);
      return true;
    case DType::kQ4_K:
      deq_q45_k<false>(s, dst, n / kQK_K);
      return true;
    case DType::kQ5_K:
      deq_q45_k<true>(s, dst, n / kQK_K);
      return true;
    case DType::kQ6_K:
      deq_q6_k(s, dst, n / kQK_K);
      return true;
    default:
      return false;
  }
}

}  // namespace triad::kernels::detail
