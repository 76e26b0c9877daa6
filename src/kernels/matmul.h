// Matrix x vector / matrix x matrix products with quantized (or 16/32-bit) weights.
#pragma once

#include <cstdint>

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
};

// Y[t*y_stride + r] = sum_c W[r][c] * X[t*x_stride + c], for t < n_tokens, r < rows.
// Each weight row is read once per call for all tokens. Runs on every thread of the pool.
// X and Y must not overlap.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool);

// Scalar reference of the same computation (same activation rounding as the fast path).
void matmul_ref(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride,
                float* y, int64_t y_stride);

}  // namespace triad::kernels
