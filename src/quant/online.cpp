#include "quant/online.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "gguf/gguf_file.h"
#include "kernels/quant.h"
#include "quant/mix.h"
#include "quant/quantize.h"
#include "tensor/fp8.h"

namespace triad::quant {
namespace {

bool is_float_type(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// One row to a row-scaled type: codes into dst, returns the row's scale.
float quantize_row_scaled(DType t, const float* x, int64_t n, uint8_t* dst) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (!(amax > 0.f) || !std::isfinite(amax)) {
    std::fill(dst, dst + n, uint8_t{0});
    return 0.f;
  }
  if (t == DType::kF8_E4M3) {
    const float s = amax / 448.f;
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_e4m3(x[i] / s);
    return s;
  }
  const float s = amax / 127.f;
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(std::clamp(x[i] / s, -127.f, 127.f));
    dst[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
  return s;
}

}  // namespace

std::string weight_type_names() {
  return "fp8_e4m3 (fp8), int8 (w8a8), bf16, f16, q8_0, q6_k, q5_k, q5_0, q5_1, q4_k, q4_0, q4_1, "
         "iq4_nl, iq4_xs, q3_k, q2_k, mxfp4";
}

DType parse_weight_type(const std::string& name) {
  std::string n = name;
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "fp8_e4m3" || n == "fp8" || n == "f8_e4m3") return DType::kF8_E4M3;
  if (n == "int8" || n == "w8a8" || n == "i8") return DType::kI8;
  if (auto t = parse_type_name(n); t && can_quantize(*t)) return *t;
  fail("unknown --weight-type '", name, "' (expected one of: ", weight_type_names(), ")");
}

OnlineStats convert_weights(ModelWeights& w, const gguf::GgufFile& f, DType target, int threads) {
  Timer timer;
  OnlineStats st;
  ThreadPool pool(std::max(1, threads));
  const bool scaled = dtype_has_row_scale(target);
  for (ModelWeights::NamedMatrix& nm : w.block_matrices()) {
    kernels::WeightMatrix& m = *nm.matrix;
    if (!is_float_type(m.type)) {
      ++st.kept;
      continue;
    }
    DType t = target;
    if (m.cols % traits(t).block_size != 0) {
      t = row_fallback_type(t);
      if (m.cols % traits(t).block_size != 0) {  // no block type fits: keep it (llama.cpp: F16)
        ++st.unfit;
        continue;
      }
      ++st.fallbacks;
    }
    const uint64_t rb = row_bytes(t, static_cast<uint64_t>(m.cols));
    const uint64_t rows = static_cast<uint64_t>(m.rows);
    // Row scales (if any) follow the codes at the next 64-byte boundary.
    const uint64_t codes_bytes = (rows * rb + 63) / 64 * 64;
    uint8_t* codes = w.own_bytes(codes_bytes + (scaled ? rows * sizeof(float) : 0));
    float* scales = scaled ? reinterpret_cast<float*>(codes + codes_bytes) : nullptr;
    const uint64_t src_rb = row_bytes(m.type, static_cast<uint64_t>(m.cols));
    const auto* src = static_cast<const uint8_t*>(m.data);
    pool.parallel_for(m.rows, [&](int64_t b, int64_t e) {
      std::vector<float> row(static_cast<size_t>(m.cols));
      for (int64_t r = b; r < e; ++r) {
        kernels::dequantize_row(m.type, src + static_cast<uint64_t>(r) * src_rb, row.data(), m.cols);
        uint8_t* dst = codes + static_cast<uint64_t>(r) * rb;
        if (scaled) {
          scales[r] = quantize_row_scaled(t, row.data(), m.cols, dst);
        } else {
          quantize_row(t, row.data(), m.cols, dst, nullptr);
        }
      }
    });
    st.bytes_before += rows * src_rb;
    st.bytes_after += rows * rb + (scaled ? rows * sizeof(float) : 0);
    if (const gguf::TensorInfo* ti = f.find_tensor(nm.name)) f.release_pages(*ti);
    m = kernels::WeightMatrix{t, codes, m.rows, m.cols, scales};
    ++st.converted;
  }
  w.matrix_bytes = w.matrix_bytes - st.bytes_before + st.bytes_after;
  w.bytes_per_token = w.bytes_per_token - st.bytes_before + st.bytes_after;
  st.seconds = timer.seconds();
  log_info("weights: ", st.converted, " matrices converted to ", dtype_name(target), " at load time (",
           st.bytes_before / (1024.0 * 1024.0), " -> ", st.bytes_after / (1024.0 * 1024.0), " MiB",
           st.fallbacks ? ", " + std::to_string(st.fallbacks) + " in the fallback type" : std::string(),
           st.kept ? ", " + std::to_string(st.kept) + " already quantized kept" : std::string(),
           st.unfit ? ", " + std::to_string(st.unfit) + " kept whose rows no block of the type divides" : std::string(),
           ") in ",
           st.seconds, " s");
  return st;
}

Model::WeightTransform online_transform(std::optional<DType> target, int threads) {
  if (!target) return {};
  const DType t = *target;
  return [t, threads](ModelWeights& w, const gguf::GgufFile& f, const ModelConfig&) {
    convert_weights(w, f, t, threads);
  };
}

}  // namespace triad::quant
