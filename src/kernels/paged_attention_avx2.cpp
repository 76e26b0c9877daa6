// The AVX2 + FMA + F16C paged-attention kernels: paged_attention_generic.h instantiated with
// VecAvx2 (8 lanes, two query vectors per kernel pass) and a row converter using vcvtph2ps
// (f16), a 16-bit shift (bf16) and sign-extended int8 times the block scale (q8_0), all exact.
// Compiled with -mavx2 -mfma -mf16c; reached only through paged_kernels_for(kAvx2).
// Thread-safety: see paged_attention_generic.h.
#include <immintrin.h>

#include "kernels/ops_vec_avx2.h"
#include "kernels/fp8_vec_avx2.h"
#include "kernels/paged_attention_generic.h"

namespace triad::kernels {
namespace {

struct CvtAvx2 {
  static void f16(const uint8_t* src, int hd, float* dst) {
    int d = 0;
    for (; d + 8 <= hd; d += 8)
      _mm256_storeu_ps(
          dst + d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * d))));
    for (; d < hd; ++d) dst[d] = paged_fp16(src + 2 * d);
  }
  static void bf16(const uint8_t* src, int hd, float* dst) {
    int d = 0;
    for (; d + 8 <= hd; d += 8) {
      const __m256i x =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * d)));
      _mm256_storeu_ps(dst + d, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
    }
    if (d < hd) paged_convert_row_scalar(DType::kBF16, src, d, hd - d, dst + d);
  }
  static void q8(const uint8_t* blk, int n32, float* dst) {
    for (int b = 0; b < n32; ++b, blk += 34, dst += 32) {
      const __m256 d = _mm256_set1_ps(paged_fp16(blk));
      for (int i = 0; i < 4; ++i) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * i));
        _mm256_storeu_ps(dst + 8 * i,
                         _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
      }
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

void paged_item_avx2(const PagedCtx& c, const PagedItem& it, const PagedScratch& w) {
  g_paged_item<VecAvx2, CvtAvx2>(c, it, w);
}
void paged_merge_avx2(const PagedCtx& c, float* entries, int64_t n_seg, int head, float* out) {
  g_paged_merge<VecAvx2>(c, entries, n_seg, head, out);
}

}  // namespace

const PagedKernels& paged_kernels_avx2() {
  static constexpr PagedKernels t{IsaLevel::kAvx2, &paged_item_avx2, &paged_merge_avx2};
  return t;
}

}  // namespace triad::kernels
