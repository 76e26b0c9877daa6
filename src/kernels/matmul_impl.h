// Internal to the matmul kernels (matmul.h is the public interface): the per-call job that the
// driver (matmul.cpp) prepares, the per-ISA row-range kernels it dispatches to, and an entry
// point that runs one chosen ISA level, so tests can cover every level the CPU supports in one
// process.
//
// The algorithm, shared bit for bit (up to float summation order) by every level:
//   F32 weights:  y = sum_c w_c * x_c                            (f32 x, f32 FMA accumulation)
//   F16 weights:  y = sum_c f32(w_c) * x_c                       (weights widened exactly)
//   BF16 weights: y = sum_c f32(w_c) * f32(bf16(x_c))            (activations rounded to bf16,
//                 act_quant.h; products of two bf16 are exact in f32, as in vdpbf16ps)
//   Quantized weights (Q4_0 ... Q8_0, Q2_K ... Q6_K, IQ4_NL, IQ4_XS, MXFP4): activations become
//                 Q8 blocks of 32 (act_quant.h: codes xq, scale dx per block, xs = dx * sum xq
//                 per block), then for every weight scale group g (a 32-block, a K-quant or
//                 IQ4_XS 32 sub-block, a Q6_K, Q3_K or Q2_K 16 sub-block) inside activation block b:
//                   y += fl(ws_g * dx_b) * isum_g   - mn_g * xs_g   (mins: Q4_1 Q5_1 Q4_K Q5_K Q2_K)
//                 where isum_g = sum (q - offset) * xq is an exact integer, ws_g the group's float
//                 scale exactly as dequantization forms it (d, fl(d * sc), Q3_K fl(d * (sc - 32)),
//                 IQ4_XS fl(d * (ls - 32))), mn_g its float
//                 minimum (m, or fl(dmin * mn); with a + sign for the additive Q4_1/Q5_1 m) and
//                 xs_g the activation sum of its elements: xs_b for groups of 32, and for Q2_K's
//                 groups of 16 xs16_g = fl(dx_b * sum of the group's 16 codes).
//   FP8 E4M3 weights (row-scaled): y = s_r * sum_c e4m3(w_c) * x_c      (f32 activations; the
//                 codes widen exactly to f32)
//   I8 weights (W8A8, row-scaled): activations become one Q8 row per token (codes xq, one scale
//                 dx_t = amax_t / 127), y = float(isum) * fl(s_r * dx_t) in f32 with
//                 isum = sum w_c * xq_c an exact integer (|isum| < 2^31 for cols <= 131072,
//                 checked); every level, the reference included, computes exactly this
// So the SIMD kernels and matmul_ref differ only by float rounding in the accumulation (and in
// two associations: the Q6_K panel tiles multiply by dx_b once per 32-block, the sum of its two
// groups' fl(ws_g * isum_g) products; the AVX2 Q2_K / Q3_K panel tiles sum sc_g * isum_g over a
// 32-block's two groups exactly in int32 and multiply by fl(d * dx_b) once, Q2_K's minimums
// likewise by fl(dmin * dx_b)).
//
// Thread-safety: MatmulJob is read-only to the kernels; each kernel call writes only
// y[t * y_stride + r] for its own row and token range, so disjoint ranges may run concurrently.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "tensor/dtype.h"

namespace triad::kernels {

// Everything one matmul call needs, with the activations already prepared for the weight type.
struct MatmulJob {
  DType type = DType::kF32;
  const uint8_t* w = nullptr;  // row r at w + r * row_bytes
  uint64_t row_bytes = 0;
  bool lanes = false;  // quantized rows in the lane layout (lane_layout.h): AVX-512 kernels only
  bool panels = false;  // quantized rows in 16-row panels (panel_layout.h): AVX-512 and AVX2 kernels
  int64_t rows = 0, cols = 0, n_tokens = 0;
  // F32 / F16 weights: the caller's activations.
  const float* x = nullptr;
  int64_t x_stride = 0;  // floats
  // BF16 weights: bf16-rounded activations, rows of xb_stride (multiple of 32) elements, zero
  // padded past cols.
  const uint16_t* xb = nullptr;
  int64_t xb_stride = 0;
  // Quantized weights: Q8 activation codes (rows of aq_stride bytes, a multiple of 64, zero
  // padded past cols), block scales and block sums (rows of as_stride floats).
  const int8_t* aq = nullptr;
  int64_t aq_stride = 0;
  const float* ad = nullptr;
  const float* axs = nullptr;
  // Q8 row activations (I8 weights) on the AVX-512 level: each token's code sum, sum_c xq_c
  // (exact; its kernel flips the weights to unsigned bytes). Not formed for other levels.
  const int32_t* asum = nullptr;
  int64_t as_stride = 0;  // Q8 row activations (I8 weights): ad[t * as_stride] is token t's scale
  // Q2_K weights: the per-16 activation sums xs16 (act_quant.h; rows of xs16_stride floats,
  // zero past cols / 16).
  const float* axs16 = nullptr;
  int64_t xs16_stride = 0;
  // Row-scaled weight types: one float per weight row (WeightMatrix::row_scale).
  const float* row_scale = nullptr;
  // Output.
  float* y = nullptr;
  int64_t y_stride = 0;
};

// A grow-only, 64-byte aligned buffer of at least `floats` floats owned by the calling thread
// (the K-blocked prompt order packs a panel's block of weights there; matmul_tiles.h).
// Defined in matmul.cpp, outside the ISA-flagged files.
float* kernel_scratch(int64_t floats);
// The same for bytes, in two slots of their own: the panel kernels' widened panel and their
// gathered activations. Growing does not keep the contents. Out of the ISA files so that these
// instantiate no AlignedBuffer members there (kernels/isa_error.h says why that matters).
enum class ScratchSlot { kPanel, kActs };
uint8_t* kernel_scratch_bytes(ScratchSlot slot, int64_t bytes);

// Whether a kernel's weight decoder D (any ISA) pairs its minimums with the activation sums per
// 16 (MatmulJob::axs16; a decoder says so with `static constexpr bool kSums16 = true`, Q2_K)
// rather than per 32 (axs).
template <class D>
constexpr bool sums16() {
  if constexpr (requires { D::kSums16; }) {
    return D::kSums16;
  } else {
    return false;
  }
}

// Which prepared activations a weight type uses.
enum class ActKind { kF32, kBf16, kQ8, kQ8Sums16, kQ8Row };
ActKind act_kind(DType weight_type);

// Row-range kernels: compute y for rows [r0, r1) and tokens [t0, t1). The job's arguments are
// already checked. The AVX2 / AVX-512 ones require the CPU to support that level.
using MatmulRowsFn = void (*)(const MatmulJob& job, int64_t r0, int64_t r1, int64_t t0,
                              int64_t t1);
void matmul_rows_ref(const MatmulJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void matmul_rows_avx2(const MatmulJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
void matmul_rows_avx512(const MatmulJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);
// The AVX2 panel kernels (matmul_panels_avx2.cpp): job.panels of a type matmul_runs_panels(kAvx2, ...) accepts.
void matmul_rows_panels_avx2(const MatmulJob& job, int64_t r0, int64_t r1, int64_t t0, int64_t t1);

// True when this CPU can run code of `level` (hardware check; TRIAD_ISA is not consulted).
bool matmul_isa_supported(IsaLevel level);

// matmul() on a chosen ISA level: kScalar runs the reference arithmetic split over the pool,
// kAvx2 / kAvx512 the SIMD kernels. Throws triad::Error on bad arguments (as matmul() does) or
// when !matmul_isa_supported(level).
void matmul_isa(IsaLevel level, const WeightMatrix& w, const float* x, int64_t n_tokens,
                int64_t x_stride, float* y, int64_t y_stride, ThreadPool& pool);

// matmul_group() on a chosen ISA level (matmul_isa is its one-product case).
void matmul_group_isa(IsaLevel level, std::span<const GroupProduct> products, const float* x, int64_t n_tokens,
                      int64_t x_stride, ThreadPool& pool);

// matmul_experts() on a chosen ISA level; with data2 / y2, also the second product set of
// matmul_experts_pair() in the same dispatch.
void matmul_experts_isa(IsaLevel level, const ExpertProducts& e, const float* x, int64_t x_stride, float* y,
                        int64_t y_stride, float* gather, ThreadPool& pool, const void* const* data2 = nullptr,
                        float* y2 = nullptr);

// Throws triad::Error unless the arguments describe a valid product: a weight type
// (dtype_supported_for_matmul) with row scales exactly when it needs them, rows/cols/n_tokens >= 0, cols a multiple of the block size,
// x_stride >= cols, y_stride >= rows, non-null pointers where there is data, and sizes whose
// byte counts fit in 64 bits.
void check_matmul_args(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride,
                       const float* y, int64_t y_stride);

}  // namespace triad::kernels
