// Matrix x vector / matrix x matrix products with quantized (or 16/32-bit) weights.
#pragma once

#include <cstdint>
#include <span>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace triad::kernels {

// A weight matrix as stored in GGUF: `rows` rows of `cols` elements each, row-major, one row
// taking row_bytes(type, cols) bytes. (A GGUF tensor with ne = {cols, rows}.)
struct WeightMatrix {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features (multiple of the type's block size)
  // One float per row for the row-scaled online types (dtype_has_row_scale: FP8 E4M3 and I8),
  // where row r's weights are row_scale[r] * code; null for every GGUF type.
  const float* row_scale = nullptr;
  // Rows in the lane layout (kernels/lane_layout.h) instead of GGUF blocks: set by the load-time
  // re-layout (ModelWeights::relayout) for the types lane_layout_supported() names.
  bool lanes = false;
  // Rows in 16-row panels (kernels/panel_layout.h) instead of GGUF blocks (never with `lanes`):
  // set by the load-time re-layout for the types and row counts panel_layout_fits() accepts.
  bool panels = false;
};

// Y[t*y_stride + r] = sum_c W[r][c] * X[t*x_stride + c], for t < n_tokens, r < rows.
// Each weight row is read once per call for all tokens. Runs on every thread of the pool.
// X and Y must not overlap.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool);

// Several products of one input in one dispatch: y_i = W_i x for every product i (a layer's
// q / k / v, or its gate / up). The activations are prepared once for each kind the weights
// pair with, and the products' row chunks are claimed together, so the pool's threads meet once
// for the group instead of once per product. Every output is bitwise that of matmul() of its
// product alone (rows are computed alike whatever the split). At most kMaxGroupProducts; every
// product is checked (as matmul() checks it) before any runs; outputs must not overlap each
// other or x.
struct GroupProduct {
  WeightMatrix w;
  float* y = nullptr;
  int64_t y_stride = 0;
};
inline constexpr int kMaxGroupProducts = 4;
void matmul_group(std::span<const GroupProduct> products, const float* x, int64_t n_tokens, int64_t x_stride,
                  ThreadPool& pool);

// The experts of a mixture-of-experts layer applied to their routed rows: n matrices of one
// type and shape (`shape`'s type / rows / cols; row_scale types are not supported), expert e's
// bytes at data[e], and the routed rows grouped by expert: rows [begin[e], begin[e + 1]) go to
// expert e (begin has n + 1 ascending entries from 0). Routed row r reads input row src[r] of x
// (src null: row r itself) and writes output row r of y. An expert with no rows costs nothing.
struct ExpertProducts {
  WeightMatrix shape;                   // type, rows, cols (shape.data unused)
  const void* const* data = nullptr;    // per expert
  int32_t n = 0;                        // experts
  const int32_t* begin = nullptr;       // n + 1 offsets
  const int32_t* src = nullptr;         // per routed row: its input row (or null)
};
// Y[r] = W_e X[src(r)] for every routed row r of every expert e: with src, the rows are first
// gathered into `gather` (begin[n] x cols floats, used only then). When no expert has more than
// a few rows (decode), the experts are spread over the threads, each product whole on one
// thread (one dispatch for all); otherwise each expert's product runs on every thread in turn.
// A row's result is the same as matmul() of its expert alone over the same rows.
void matmul_experts(const ExpertProducts& e, const float* x, int64_t x_stride, float* y, int64_t y_stride,
                    float* gather, ThreadPool& pool);
// Two product sets of one shape over the same routed rows (each expert's gate and up): e.data
// into y and data2 into y2, in one dispatch (decode: the 2n products spread over the threads
// together). Each row's results are those of two matmul_experts() calls.
void matmul_experts_pair(const ExpertProducts& e, const void* const* data2, const float* x, int64_t x_stride, float* y,
                         float* y2, int64_t y_stride, float* gather, ThreadPool& pool);

// Whether the kernels of ISA `level` run weights of type `t` in the panel layout
// (kernels/panel_layout.h) themselves: AVX2 and AVX-512 every panel type, scalar none. Panels
// elsewhere still multiply correctly, laid back into GGUF blocks on the fly (slowly).
bool matmul_runs_panels(IsaLevel level, DType t);
// Whether the load-time re-layout puts `t` into panels for `level`: where its panel kernels run
// and beat its GGUF-block (or lane) kernels (today: every type they run).
bool matmul_prefers_panels(IsaLevel level, DType t);

// Batch invariance: whether a token's output row is bitwise the same whatever else shares the
// call (the number of tokens, the thread count). The scalar and AVX2 kernels always are, and so
// is every weight in the lane layout or in panels (WeightMatrix::lanes / panels: what a model
// loads into on AVX-512), each of which runs one kernel for every token count. Quantized weights in GGUF blocks on AVX-512
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4) are not: from
// kPackedMinTokens tokens on the packed prompt kernels take over and sum in another order.
// set_matmul_batch_invariant(true) makes those run their AVX2 rows on AVX-512 CPUs, so every
// type is invariant there too, at their speed. (F32, F16, BF16, FP8 and I8
// are invariant on every level.) Process-wide; set it before serving.
void set_matmul_batch_invariant(bool on);
bool matmul_batch_invariant_requested();
// Whether matmul() is batch-invariant for every weight type on this CPU, as configured.
bool matmul_is_batch_invariant();

// Scalar reference of the same computation (same activation rounding as the fast path).
void matmul_ref(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride,
                float* y, int64_t y_stride);

}  // namespace triad::kernels
