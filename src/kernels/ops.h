// Element-wise and row-wise operators used by the model layers.
// Each function has a scalar reference in ref/ (namespace triad::kernels::ref) and dispatches
// to SIMD versions when the CPU has them. All sizes are in elements.
#pragma once

#include <cstdint>

namespace triad::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]    (w may be null: no scale)
void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n);
// out[i] = (x[i] - mean) / sqrt(var + eps) * w[i] + b[i]   (w, b may be null)
void layernorm(const float* x, const float* w, const float* b, float eps, float* out, int64_t n);
// In-place softmax over n elements.
void softmax(float* x, int64_t n);
// out[i] = silu(gate[i]) * up[i]   (up may be null: out = silu(gate))
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// out[i] = gelu_tanh(gate[i]) * up[i]   (up may be null)
void gelu_mul(const float* gate, const float* up, float* out, int64_t n);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// y[i] *= s
void scale_inplace(float* y, float s, int64_t n);

enum class RopeLayout {
  kNormal,  // rotate pairs (x[2i], x[2i+1])            (llama)
  kNeox,    // rotate pairs (x[i], x[i + rot_dim/2])     (qwen2, gemma, neox)
};

struct RopeParams {
  RopeLayout layout = RopeLayout::kNormal;
  int rot_dim = 0;           // rotated dims per head (<= head_dim); the rest pass through
  float freq_base = 10000.f;
  float freq_scale = 1.f;    // linear position scaling: angle uses pos * freq_scale
};

// Rotates n_heads heads of head_dim floats each (contiguous), all at position `pos`, in place.
void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);

}  // namespace triad::kernels
