// Quantizes a whole GGUF model file into another (what `triad quantize` runs).
//
// Contract:
// - Input tensors of type F32, F16 or BF16 are quantized to the type the mix chooses (mix.h);
//   already-quantized tensors are copied when the chosen type is theirs, and requantized
//   (dequantized to f32 first) only with allow_requantize, else the call fails naming the
//   tensor. Tensors the mix does not quantize (norms, biases, the MoE router) are copied.
// - Tensors are written in llama.cpp's order (by block number, then name), the order its
//   layer-dependent rules count in.
// - Metadata is copied, with general.file_type and general.quantization_version set for the
//   mix; with an imatrix the quantize.imatrix.* keys record which file was used.
// - Streaming: the input is memory-mapped, each output tensor is produced while it is written,
//   and each input tensor's pages are released once it is done, so the resident set stays near
//   the largest tensor (its input pages plus its output), not the model.
// - The output is written to OUT.tmp and renamed into place only when complete: after any
//   error (bad type, a user-chosen type that cannot hold a tensor's rows, a truncated or
//   malformed input, a full disk) no output file is left.
// - Rows are quantized in parallel on the pool's threads.
// Thread-safety: one call per pool at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "quant/imatrix.h"
#include "quant/mix.h"
#include "tensor/dtype.h"

namespace triad::quant {

struct QuantizeOptions {
  Mix mix;
  MixOptions mix_options;
  bool allow_requantize = false;
  const Imatrix* imatrix = nullptr;  // optional importance weights
  std::string imatrix_path;          // recorded in the output's metadata
  bool measure_error = true;         // per-tensor relative RMS error (costs a dequantization)
};

// What happened to one tensor.
struct TensorReport {
  std::string name;
  std::vector<int64_t> shape;
  DType from, to;
  bool quantized = false;  // false: copied unchanged
  bool fallback = false;   // the wanted type could not hold the rows
  bool used_imatrix = false;
  uint64_t bytes_in = 0, bytes_out = 0;
  double rel_rmse = 0;     // sqrt(sum (x - q)^2 / sum x^2), when measured
};

struct QuantizeSummary {
  std::vector<TensorReport> tensors;
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t params = 0;
  double seconds = 0;
  double bits_per_weight() const { return params ? 8.0 * static_cast<double>(bytes_out) / static_cast<double>(params) : 0; }
};

// Called after each tensor is written (index, count, its report).
using QuantizeProgress = std::function<void(size_t index, size_t count, const TensorReport&)>;

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path,
                               const QuantizeOptions& opt, ThreadPool& pool,
                               const QuantizeProgress& progress = {});

}  // namespace triad::quant
