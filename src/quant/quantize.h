// Weight quantizers: rows of f32 values to the GGML block formats (kernels/quant_blocks.h), so
// that files Triad writes load in llama.cpp and the other way round.
//
// Without importance weights each type follows the reference quantizer that llama.cpp applies
// when it has no imatrix, so for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16 and BF16 the blocks equal
// PyPI gguf.quants' bit for bit (tests/quant), and the K-quants use ggml's published scale
// searches.
//
// With importance weights (an imatrix row: the mean squared activation of each input channel,
// imatrix.h), every type except F32/F16/BF16 searches its scales for the smallest *weighted*
// squared error sum_j imp_j * (x_j - dequant(q)_j)^2, the expected error of the layer's output
// under the calibration activations, and keeps whichever of the weighted search and the
// reference quantization has the smaller weighted error for each block. So a block's weighted
// error with importance weights is never larger than without them.
//
// Thread-safety: pure functions (thread-local scratch only); rows may be quantized in parallel.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace triad::quant {

// Whether quantize_row can write type t.
bool can_quantize(DType t);

// Quantizes n values of one row (n % block_size(t) == 0, checked) into dst, which must hold
// row_bytes(t, n) bytes. importance: n non-negative weights, or null for the reference
// quantizer. Non-finite inputs give unspecified (but in-range) codes.
void quantize_row(DType t, const float* x, int64_t n, void* dst, const float* importance);

// Weighted squared error sum_j imp_j * (x_j - y_j)^2 (imp null: plain squared error) of n
// values, in double.
double weighted_sq_error(const float* x, const float* y, int64_t n, const float* imp);

}  // namespace triad::quant
