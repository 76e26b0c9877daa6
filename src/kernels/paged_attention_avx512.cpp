// The AVX-512 paged-attention kernels: paged_attention_generic.h instantiated with VecAvx512
// (16 lanes; head sizes that are not a multiple of 16 use masked tails) and a row converter
// using vcvtph2ps (f16), a 16-bit shift (bf16) and sign-extended int8 times the block scale
// (q8_0), all exact, so the tiles hold the same values as kv_load_row. Compiled with the
// AVX-512 flags; reached only through paged_kernels_for(kAvx512).
// Thread-safety: see paged_attention_generic.h.
#include <immintrin.h>

#include "kernels/ops_vec_avx512.h"
#include "kernels/fp8_vec_avx2.h"
#include "kernels/paged_attention_generic.h"

namespace triad::kernels {
namespace {

struct CvtAvx512 {
  static __mmask16 lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

  static void f16(const uint8_t* src, int hd, float* dst) {
    int d = 0;
    for (; d + 16 <= hd; d += 16)
      _mm512_storeu_ps(
          dst + d,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * d))));
    if (d < hd) {
      const __mmask16 m = lanes(hd - d);
      _mm512_mask_storeu_ps(dst + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + 2 * d)));
    }
  }
  static void bf16(const uint8_t* src, int hd, float* dst) {
    int d = 0;
    for (; d + 16 <= hd; d += 16) {
      const __m512i x =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * d)));
      _mm512_storeu_ps(dst + d, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
    }
    if (d < hd) {
      const __mmask16 m = lanes(hd - d);
      const __m512i x = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src + 2 * d));
      _mm512_mask_storeu_ps(dst + d, m, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
    }
  }
  // Whole Q8_0 blocks: n32 blocks of 32 elements from blk.
  static void q8(const uint8_t* blk, int n32, float* dst) {
    for (int b = 0; b < n32; ++b, blk += 34, dst += 32) {
      const __m512 d = _mm512_set1_ps(paged_fp16(blk));
      const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
      _mm512_storeu_ps(dst, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
      _mm512_storeu_ps(dst + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
    }
  }

  static void rows(DType t, const uint8_t* src, uint64_t row_bytes, int64_t e0, int hd,
                   int64_t n_rows, float* dst) {
    switch (t) {
      case DType::kF16:
        for (int64_t r = 0; r < n_rows; ++r) f16(src + r * row_bytes + 2 * e0, hd, dst + r * hd);
        return;
      case DType::kBF16:
        for (int64_t r = 0; r < n_rows; ++r) bf16(src + r * row_bytes + 2 * e0, hd, dst + r * hd);
        return;
      case DType::kQ8_0:
        if (e0 % 32 == 0 && hd % 32 == 0) {
          for (int64_t r = 0; r < n_rows; ++r)
            q8(src + r * row_bytes + e0 / 32 * 34, hd / 32, dst + r * hd);
          return;
        }
        break;
      case DType::kF8_E4M3:
      case DType::kF8_E5M2:
        for (int64_t r = 0; r < n_rows; ++r)
          fp8_row_to_f32(t == DType::kF8_E4M3, src + r * row_bytes + e0, hd, dst + r * hd);
        return;
      default:
        break;
    }
    for (int64_t r = 0; r < n_rows; ++r)
      paged_convert_row_scalar(t, src + r * row_bytes, e0, hd, dst + r * hd);
  }
};

void paged_item_avx512(const PagedCtx& c, const PagedItem& it, const PagedScratch& w) {
  g_paged_item<VecAvx512, CvtAvx512>(c, it, w);
}
void paged_merge_avx512(const PagedCtx& c, float* entries, int64_t n_seg, int head, float* out) {
  g_paged_merge<VecAvx512>(c, entries, n_seg, head, out);
}

}  // namespace

const PagedKernels& paged_kernels_avx512() {
  static constexpr PagedKernels t{IsaLevel::kAvx512, &paged_item_avx512, &paged_merge_avx512};
  return t;
}

}  // namespace triad::kernels
