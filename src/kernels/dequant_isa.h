// Internal to the dequantization kernels (quant.h is the public interface): argument checking
// shared by every variant and the per-ISA entry points that dequantize_row dispatches to.
// Tests include this header to run each ISA variant the CPU supports against the reference.
//
// Thread-safety: all functions are pure (they write only dst) and may run concurrently.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace triad::kernels::detail {

// Throws triad::Error unless t is a weight type (dtype_supported_for_weights), n >= 0, n is a
// multiple of t's block size, and src/dst are non-null when n > 0. Returns n / block_size.
int64_t check_dequant_args(DType t, const void* src, const float* dst, int64_t n);

// AVX2 + FMA + F16C variant (call only when best_isa() >= kAvx2). Arguments already checked.
// Returns false, writing nothing, for a type it has no SIMD code for (the caller then uses the
// reference). Equal bit for bit to dequantize_row_ref, except that an F16 signalling NaN comes
// out as the matching quiet NaN (the F16C conversion quiets it).
bool dequantize_row_avx2(DType t, const void* src, float* dst, int64_t n);

}  // namespace triad::kernels::detail
