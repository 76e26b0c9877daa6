// Weight dequantization (GGML block formats) and activation quantization.
//
// dequantize_row_ref is the scalar ground truth: bit-exact with PyPI gguf.quants.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace triad::kernels {

// Converts n elements of type t at src to f32. PRECONDITION (checked): t is a weight type
// (dtype_supported_for_weights) and n % block_size(t) == 0.
void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n);
// Same result as dequantize_row_ref, using SIMD where the CPU has it.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

}  // namespace triad::kernels
