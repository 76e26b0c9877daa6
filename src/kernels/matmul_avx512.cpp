// AVX-512 matmul kernels for F32, F16 and BF16 weights, and the AVX-512 row-range entry point
// (quantized types are in matmul_quant_avx512.cpp and matmul_packed_avx512.cpp; FP8 / I8 in
// matmul_rowscaled_avx512.cpp). Compiled with AVX-512 flags; called only
// when matmul_isa_supported(kAvx512).
//
// Design (first measured on the 2-core Zen 4 dev machine with bench/matmul_bench.cpp; one core's
// measured peaks there: 112 GFLOP/s f32 FMA, 228 GFLOP/s vdpbf16ps, 445 GOP/s vpdpbusd at ~3.5 GHz):
// - F32: 4 rows x 6 tokens of f32 FMA accumulators per tile, summed in column blocks
//   (matmul_tiles.h block_cols). From 32 tokens on, the K-blocked order (matmul_tiles.h
//   run_kblocked) keeps a token tile's activations in L1: on the Intel Xeon VM (two FMA ports,
//   245 GFLOP/s per core) 149-190 GFLOP/s per core at 512 tokens on Qwen2.5 shapes, against
//   104-148 with the token rows streaming from L2 and prefetch on.
// - F16: weights widened with vcvtph2ps (exact), then f32 FMA with the f32 activations. A
//   prompt widens each panel's block once into f32 (PackF16) and runs the F32 tile on it: 147-173
//   GFLOP/s per core on the Xeon VM (against 137-153 widening in every tile). One token widens
//   in the tile. This CPU has no f16 dot-product instruction, so converting the activations to
//   f16 would buy nothing; converting them to bf16 would lose precision.
// - BF16: vdpbf16ps on bf16 weights x bf16-rounded activations: 196 GFLOP/s per core at 512
//   tokens against 101 for widening the weights and using f32 FMA on Zen 4 (same tile;
//   in-process measurement, 4864x896), and 68 vs 40 GB/s cache-resident at one token. (On the
//   Xeon VM vdpbf16ps runs at half the FMA rate: 103-114 GFLOP/s.) Products of two
//   bf16 are exact; only the activation rounding (2^-8 relative) differs from f32 arithmetic,
//   and matmul_ref applies the same rounding. (vdpbf16ps also treats bf16 subnormal weights as
//   zero; activations are flushed before rounding on every path, act_quant.h.) AVX-512 CPUs
//   without BF16 (Ice Lake, Cascade Lake, VMs that mask it) compute the same sums with two FMAs
//   per pair (KBf16<false>).
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

// Row r + i of the tile as a typed pointer to the Part's weights (column c is element
// c - p.w_c0).
template <typename W, int R>
inline void part_rows(const tiles::Part& p, int64_t r, const W* (&w)[R]) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) w[i] = reinterpret_cast<const W*>(p.w + static_cast<uint64_t>(r + i - p.w_r0) * p.w_rs);
}

// A block's sums into y: stored for the first block, added to y after it (tiles::Part). Always
// inlined: were acc's address passed to a call, GCC would have the tile's loads alias it and
// store every accumulator after every step.
template <int R, int T>
__attribute__((always_inline)) inline void finish_part(const __m512 (&acc)[R][T], const tiles::Part& p,
                                                       const MatmulJob& j, int64_t r, int64_t t) {
  if (p.first) store_tile<R, T>(acc, j.y, j.y_stride, r, t);
  else store_tile<R, T, true>(acc, j.y, j.y_stride, r, t);
}

// F32 and F16 weights against f32 activations.
template <bool kHalf>
struct KFloat {
  static constexpr int kR = 4, kT = 6, kActBytes = 4, kKStep = 16;
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

  // Columns [p.c0, p.c1) of an R x T tile (tiles::run_kblocked); a full row is one part.
  // Software prefetch where asked (not in the K-blocked prompt order: its weights come from L2).
  template <int R, int T>
  static void tile_part(const MatmulJob& j, int64_t r, int64_t t, const tiles::Part& p) {
    const W* w[R];
    part_rows(p, r, w);
    const float* x[T];
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k) x[k] = j.x + (t + k) * j.x_stride;
    __m512 acc[R][T];
    zero_tile(acc);
    const int64_t K = p.c1;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    const bool pf = p.prefetch;
    int64_t c = p.c0;
    for (; c + 16 <= K; c += 16) {
      if (pf)
        tiles::prefetch_ahead(reinterpret_cast<const uint8_t*>(w[0]), tile_bytes, c * R * int64_t{sizeof(W)},
                              (c + 16) * R * int64_t{sizeof(W)});
      __m512 wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = load_w(w[i] + (c - p.w_c0));
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
      for (int i = 0; i < R; ++i) wv[i] = load_w_masked(w[i] + (c - p.w_c0), m);
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_fmadd_ps(wv[i], xv, acc[i][k]);
      }
    }
    finish_part(acc, p, j, r, t);
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    tiles::tile_blocks<KFloat, R, T>(j, r, t);
  }
};

// BF16 weights against bf16-rounded activations, 32 products per vdpbf16ps (kNative), or on
// AVX-512 CPUs without BF16 the same sums with two FMAs per pair of products: vdpbf16ps adds
// lane i's odd product and then its even one to the accumulator, each rounded once (products of
// two bf16 are exact in f32), which is what fma(odd) then fma(even) computes. (Only subnormals
// differ: vdpbf16ps reads bf16 subnormal weights as zero and flushes subnormal sums.) The
// emulation runs the tile's odd products first and then its even ones, so that an R x T tile
// holds its accumulators and one half of each operand in the 32 registers.
template <bool kNative>
struct KBf16 {
  static constexpr int kR = 4, kT = 6, kActBytes = 2, kKStep = 32;

  // 32 bf16 of one row (c - p.w_c0 onward; masked at the tail) and of each token, into acc.
  template <int R, int T>
  __attribute__((always_inline)) static inline void step(const uint16_t* const (&w)[R],
                                                         const uint16_t* const (&x)[T], int64_t wc, int64_t c,
                                                         __mmask32 m, __m512 (&acc)[R][T]) {
    auto load_w = [&](int i) {
      return m == static_cast<__mmask32>(~0u) ? _mm512_loadu_si512(w[i] + wc) : _mm512_maskz_loadu_epi16(m, w[i] + wc);
    };
    if constexpr (kNative) {
      __m512bh wv[R];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) wv[i] = (__m512bh)load_w(i);
#pragma GCC unroll 16
      for (int k = 0; k < T; ++k) {
        const __m512bh xv = (__m512bh)_mm512_load_si512(x[k] + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) acc[i][k] = _mm512_dpbf16_ps(acc[i][k], wv[i], xv);
      }
    } else {
      const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
      auto odd = [&](__m512i v) { return _mm512_castsi512_ps(_mm512_and_si512(v, hi)); };
      auto even = [](__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); };
      auto half = [&](auto split) {
        __m512 wv[R];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) wv[i] = split(load_w(i));
#pragma GCC unroll 16
        for (int k = 0; k < T; ++k) {
          const __m512 xv = split(_mm512_load_si512(x[k] + c));
#pragma GCC unroll 8
          for (int i = 0; i < R; ++i) acc[i][k] = _mm512_fmadd_ps(wv[i], xv, acc[i][k]);
        }
      };
      half(odd);
      half(even);
    }
  }

  template <int R, int T>
  static void tile_part(const MatmulJob& j, int64_t r, int64_t t, const tiles::Part& p) {
    const uint16_t* w[R];
    part_rows(p, r, w);
    const uint16_t* x[T];
#pragma GCC unroll 16
    for (int k = 0; k < T; ++k) x[k] = j.xb + (t + k) * j.xb_stride;
    __m512 acc[R][T];
    zero_tile(acc);
    const int64_t K = p.c1;
    const int64_t tile_bytes = R * static_cast<int64_t>(j.row_bytes);
    const bool pf = p.prefetch;
    int64_t c = p.c0;
    for (; c + 32 <= K; c += 32) {
      if (pf) tiles::prefetch_ahead(reinterpret_cast<const uint8_t*>(w[0]), tile_bytes, c * R * 2, (c + 32) * R * 2);
      step(w, x, c - p.w_c0, c, static_cast<__mmask32>(~0u), acc);
    }
    // Activation rows are zero padded to a multiple of 32; weights are masked.
    if (c < K) step(w, x, c - p.w_c0, c, static_cast<__mmask32>((uint64_t{1} << (K - c)) - 1), acc);
    finish_part(acc, p, j, r, t);
  }

  template <int R, int T>
  static void tile(const MatmulJob& j, int64_t r, int64_t t) {
    tiles::tile_blocks<KBf16, R, T>(j, r, t);
  }
};

// F16 weights widened to f32 once per K-blocked panel block (exact, KFloat<true>'s widening),
// for KFloat<false>.
struct PackF16 {
  static constexpr int64_t kBytes = 4;
  static void pack(const MatmulJob& j, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* dst, uint64_t rs) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(j.w + static_cast<uint64_t>(r) * j.row_bytes) + c0;
      float* d = reinterpret_cast<float*>(dst + static_cast<uint64_t>(r - r0) * rs);
      const int64_t n = c1 - c0;
      int64_t c = 0;
      for (; c + 16 <= n; c += 16) _mm512_store_ps(d + c, KFloat<true>::load_w(src + c));
      if (c < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - c)) - 1);
        _mm512_mask_storeu_ps(d + c, m, KFloat<true>::load_w_masked(src + c, m));
      }
    }
  }
};

// Few tokens: the weights stream from memory once per call, row tiles outer (tiles::run, with
// software prefetch). From kKBlockedMinTokens on the product is compute-bound: the K-blocked
// order. Both compute every output alike (bitwise).
inline constexpr int64_t kKBlockedMinTokens = 32;
template <class Kern>
void run_float(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  if (t1 - t0 < kKBlockedMinTokens) {
    tiles::run<Kern>(j, r0, r1, t0, t1);
  } else if constexpr (std::is_same_v<Kern, KFloat<true>>) {
    tiles::run_kblocked<KFloat<false>, PackF16>(j, r0, r1, t0, t1);
  } else {
    tiles::run_kblocked<Kern>(j, r0, r1, t0, t1);
  }
}

}  // namespace
}  // namespace avx512

void matmul_rows_avx512(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (j.type) {
    case DType::kF32: avx512::run_float<avx512::KFloat<false>>(j, r0, r1, t0, t1); return;
    case DType::kF16: avx512::run_float<avx512::KFloat<true>>(j, r0, r1, t0, t1); return;
    case DType::kBF16:
      if (cpu_features().avx512bf16) avx512::run_float<avx512::KBf16<true>>(j, r0, r1, t0, t1);
      else avx512::run_float<avx512::KBf16<false>>(j, r0, r1, t0, t1);
      return;
    case DType::kF8_E4M3: avx512::matmul_rows_fp8(j, r0, r1, t0, t1); return;
    case DType::kI8: avx512::matmul_rows_i8(j, r0, r1, t0, t1); return;
    default: avx512::matmul_rows_quant(j, r0, r1, t0, t1); return;
  }
}

}  // namespace triad::kernels
