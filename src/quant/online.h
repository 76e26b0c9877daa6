// Online weight quantization: `--weight-type T` on serve / run / bench / perplexity converts a
// model's F32 / F16 / BF16 projection matrices to T while it loads, as vLLM's
// `--quantization fp8` does: no calibration, nothing written to disk.
//
// Types:
//   fp8_e4m3 (alias fp8): one f32 scale per output row s = amax / 448, codes e4m3(w / s) rounded
//            to nearest even (tensor/fp8.h); computed as FP8 weights widened in registers times
//            f32 activations (kernels/matmul_impl.h). 8 bits per weight + 32 per row.
//   int8 (alias w8a8): W8A8. s = amax / 127, codes round(w / s) in [-127, 127]; activations are
//            quantized per token at run time (one scale per token) and rows are dotted in int32.
//   any GGUF type `triad quantize` writes (bf16, f16, q8_0, q6_k, q4_k, ...): each row through
//            the same reference quantizer (quant/quantize.h, no importance weights). K-quant and
//            IQ4_XS rows that 256 does not divide get llama.cpp's fallback type (mix.h); rows
//            that no block of the type divides stay as stored.
// Which matrices: the attention and FFN projections of every layer (the weights a decode step
// streams). The token embedding and output matrices keep their file type (vLLM likewise leaves
// lm_head unquantized). Matrices already stored in a quantized type are left as they are.
//
// Thread-safety: convert_weights runs on the loading thread with a pool of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/model.h"
#include "tensor/dtype.h"

namespace triad::quant {

// Parses a --weight-type value; throws triad::Error listing the accepted names when unknown.
DType parse_weight_type(const std::string& name);
// The accepted names, for --help.
std::string weight_type_names();

struct OnlineStats {
  int converted = 0;          // matrices converted
  int kept = 0;               // matrices left in their (already quantized) file type
  int fallbacks = 0;          // matrices written in the fallback type of the target
  int unfit = 0;              // matrices kept because neither the type nor its fallback fits
  uint64_t bytes_before = 0;  // of the converted matrices, as stored in the file
  uint64_t bytes_after = 0;   // of the converted matrices, codes plus row scales
  double seconds = 0;
};

// Converts w's block matrices to `target` (see above) with `threads` threads, releasing each
// source tensor's pages from the resident set once converted, and updates w.matrix_bytes and
// w.bytes_per_token. Logs one summary line.
OnlineStats convert_weights(ModelWeights& w, const gguf::GgufFile& f, DType target, int threads);

// A Model::WeightTransform that calls convert_weights (for Model::load); no-op when empty.
Model::WeightTransform online_transform(std::optional<DType> target, int threads);

}  // namespace triad::quant
