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
// out[i] = gelu(gate[i]) * up[i] with the exact GELU, x/2 (1 + erf(x / sqrt 2)) (BERT's "gelu";
// up may be null). erfc from a Chebyshev fit with relative error below 1.2e-7 (Numerical
// Recipes' erfcc) evaluated in f32, so the result keeps its relative accuracy in the negative
// tail (within 5e-6 down to x = -6; further out f32 rounding of the exponent z^2 dominates).
void gelu_erf_mul(const float* gate, const float* up, float* out, int64_t n);
// gpt-oss's clamped SwiGLU: g = min(gate[i], limit), u = clamp(up[i], -limit, limit),
// out[i] = g * sigmoid(alpha * g) * (u + 1). One scalar loop for every ISA (not in the ops table).
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha = 1.702f,
                float limit = 7.f);
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
  // YaRN (ext_factor > 0): pair i's angle mixes the scaled (interpolated) angle with the
  // unscaled (extrapolated) one, ramp(i) * ext_factor of the latter, where ramp(i) falls from 1
  // at i <= corr_lo to 0 at i >= corr_hi (ggml's rope_yarn_ramp; corr dims from
  // yarn_corr_dims()); cos and sin are multiplied by mscale.
  float ext_factor = 0.f;
  float corr_lo = 0.f, corr_hi = 0.f;
  float mscale = 1.f;
};

// YaRN's correction range for rot_dim rotated dims: the pairs whose wavelength at base
// freq_base completes more than beta_fast turns (lo) / fewer than beta_slow turns (hi) over
// orig_ctx positions, clamped to [0, rot_dim - 1] (as ggml_rope_yarn_corr_dims and HF's
// yarn_find_correction_range).
void yarn_corr_dims(int rot_dim, int32_t orig_ctx, float freq_base, float beta_fast, float beta_slow,
                    float* lo, float* hi);

// Rotates n_heads heads of head_dim floats each (contiguous), all at position `pos`, in place.
void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);

}  // namespace triad::kernels
