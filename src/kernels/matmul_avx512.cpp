// AVX-512 matmul kernels for F32, F16 and BF16 weights, and the AVX-512 row-range entry point
// (quantized types are in matmul_quant_avx512.cpp, matmul_packed_avx512.cpp and
// matmul_q8k_avx512.cpp; FP8 / I8 in matmul_rowscaled_avx512.cpp). Compiled with AVX-512 flags; called only
// when matmul_isa_supported(kAvx512).
//
// Design (measured on the 2-core Zen 4 dev machine with bench/matmul_bench.cpp; one core's
// measured peaks: 112 GFLOP/s f32 FMA, 228 GFLOP/s vdpbf16ps, 445 GOP/s vpdpbusd at ~3.5 GHz):
// - F32: 4 rows x 6 tokens of f32 FMA accumulators per tile: ~90 GFLOP/s per core at 512 tokens.
// - F16: weights widened on the fly with vcvtph2ps (exact), then f32 FMA with the f32
//   activations; the widening is shared by the tile's 6 tokens: ~100 GFLOP/s per core (89% of
//   the FMA peak). This CPU has no f16 dot-product instruction, so converting the activations
//   to f16 would buy nothing; converting them to bf16 would lose precision.
// - BF16: vdpbf16ps on bf16 weights x bf16-rounded activations: 196 GFLOP/s per core at 512
//   tokens against 101 for widening the weights and using f32 FMA (same tile; in-process
//   measurement, 4864x896), and 68 vs 40 GB/s cache-resident at one token. Products of two
//   bf16 are exact; only the activation rounding (2^-8 relative) differs from f32 arithmetic,
//   and matmul_ref applies the same rounding. (vdpbf16ps also treats bf16 subnormal weights as
//   zero; activations are flushed before rounding on every path, act_quant.h.)
// - Token generation streams the weights with software prefetch (matmul_tiles.h).
// Tails (cols not a multiple of 16 / 32) use masked loads, so no byte past a row is read.
// Thread-safety: writes only the outputs of the given rows and tokens.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the _mm512_undefined_*()
// pass-through of unmasked intrinsics, once inlined at -O3): a known false positive. Diagnostic
// locations are the header's, so the suppression must precede the include.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <type_traits>

#include "kernels/matmul_avx512_common.h"
#include "kernels/matmul_impl.h"
#include "kernels/matmul_tiles.h"

namespace triad::kernels {
namespace avx512 {
namespace {

// Row i of the tile as a typed pointer, token k's activation row.
template <typename W, int R>
inline void row_ptrs(const MatmulJob& j, int64_t r, const W* (&w)[R]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
    w[i] = reinterpret_cast<const W*>(j.w + static_cast<uint64_t>(r + i) * j.row_bytes);
}

// F32 and F16 weights against f32 activations.
template <bool kHalf>
struct KFloat {
  static constexpr int kR = 4, kT = 6, kActBytes = 4;
  using W = std::conditional_t<kHalf, uint16_t, float>;

  static inline __m512 load_w(const W* p) {
    if constexpr (kHalf) {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      return _mm512_loadu_ps(p);
    }
  }
  static inline __m512 load_w_masked(const W* p, __mmask16 m) {
    if constexpr (kHalf) {
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    } else {
      return _mm512_maskz_loadu_ps(m, p);
    }
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const W* w[R];
    row_ptrs(j, r, w);
    const float* x[T];
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k) x[k] = j.x + (t + k) * j.x_stride;
    __m512 acc[R][T];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) acc[i][k] = _mm512_setzero_ps();
    const int64_t K = j.cols;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    int64_t c = 0;
    for (; c + 16 <= K; c += 16) {
      tiles::prefetch_ahead(reinterpret_cast<const uint8_t*>(w[0]), tile_bytes,
                            c * R * int64_t{sizeof(W)}, (c + 16) * R * int64_t{sizeof(W)});
      __m512 wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = load_w(w[i] + c);
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) {
        const __m512 xv = _mm512_loadu_ps(x[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_fmadd_ps(wv[i], xv, acc[i][k]);
      }
    }
    if (c < K) {
      const __mmask16 m = static_cast<__mmask16>((1u << (K - c)) - 1);
      __m512 wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = load_w_masked(w[i] + c, m);
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_fmadd_ps(wv[i], xv, acc[i][k]);
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

// BF16 weights against bf16-rounded activations, 32 products per vdpbf16ps.
struct KBf16 {
  static constexpr int kR = 4, kT = 6, kActBytes = 2;

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    const uint16_t* w[R];
    row_ptrs(j, r, w);
    const uint16_t* x[T];
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k) x[k] = j.xb + (t + k) * j.xb_stride;
    __m512 acc[R][T];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) acc[i][k] = _mm512_setzero_ps();
    const int64_t K = j.cols;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    int64_t c = 0;
    for (; c + 32 <= K; c += 32) {
      tiles::prefetch_ahead(reinterpret_cast<const uint8_t*>(w[0]), tile_bytes, c * R * 2,
                            (c + 32) * R * 2);
      __m512bh wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = (__m512bh)_mm512_loadu_si512(w[i] + c);
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) {
        const __m512bh xv = (__m512bh)_mm512_load_si512(x[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_dpbf16_ps(acc[i][k], wv[i], xv);
      }
    }
    if (c < K) {
      // Activation rows are zero padded to a multiple of 32; weights are masked.
      const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (K - c)) - 1);
      __m512bh wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, w[i] + c);
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) {
        const __m512bh xv = (__m512bh)_mm512_load_si512(x[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_dpbf16_ps(acc[i][k], wv[i], xv);
      }
    }
    store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  }
};

}  // namespace
}  // namespace avx512

void matmul_rows_avx512(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (j.type) {
    case DType::kF32: tiles::run<avx512::KFloat<false>>(j, r0, r1, t0, t1); return;
    case DType::kF16: tiles::run<avx512::KFloat<true>>(j, r0, r1, t0, t1); return;
    case DType::kBF16: tiles::run<avx512::KBf16>(j, r0, r1, t0, t1); return;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kIQ4_XS: avx512::matmul_rows_q8k(j, r0, r1, t0, t1); return;
    case DType::kF8_E4M3: avx512::matmul_rows_fp8(j, r0, r1, t0, t1); return;
    case DType::kI8: avx512::matmul_rows_i8(j, r0, r1, t0, t1); return;
    default: avx512::matmul_rows_quant(j, r0, r1, t0, t1); return;
  }
}

}  // namespace triad::kernels
