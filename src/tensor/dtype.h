// Element types of weights and activations, numbered as GGUF/GGML number them.
//
// Quantized types store fixed-size blocks of `block_size()` elements in `block_bytes()` bytes;
// a row of n elements (n a multiple of block_size) takes n / block_size * block_bytes bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace triad {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMXFP4 = 39,
  // Triad-internal types (never read from or written to a GGUF file; dtype_traits(id) does not
  // know them): 8-bit floats for online FP8 weights and the FP8 KV cache (tensor/fp8.h).
  kF8_E4M3 = 0x10001,
  kF8_E5M2 = 0x10002,
};

struct DTypeTraits {
  std::string_view name;
  uint32_t block_size;   // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
};

// Traits of a GGUF type id, or nullopt for ids Triad does not know (untrusted input; the
// internal types are unknown here).
std::optional<DTypeTraits> dtype_traits(uint32_t type_id);
// Traits of a known type (precondition: t is one of the enumerators above).
const DTypeTraits& traits(DType t);
inline std::string_view dtype_name(DType t) { return traits(t).name; }
// Whether Triad can compute with weights of this type as a GGUF file stores them (dequantize and
// multiply).
bool dtype_supported_for_weights(DType t);
// Whether a weight matrix of this type carries one float scale per row next to its codes
// (kernels::WeightMatrix::row_scale): the online types FP8 E4M3 (w = s_r * e4m3) and I8 (W8A8:
// w = s_r * q). Such matrices are made at load time (--weight-type), never read from a file.
bool dtype_has_row_scale(DType t);
// dtype_supported_for_weights(t) or dtype_has_row_scale(t): what the matmul kernels accept.
bool dtype_supported_for_matmul(DType t);
// Bytes of a row of n elements; precondition: n % block_size == 0.
inline uint64_t row_bytes(DType t, uint64_t n) {
  const DTypeTraits& tr = traits(t);
  return n / tr.block_size * tr.block_bytes;
}

}  // namespace triad
