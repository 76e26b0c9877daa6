// Scalar references of the element-wise ops (see ops_ref.h): double-precision loops with the
// textbook formulas and std::exp / std::tanh / std::sin / std::cos.
// Thread-safety: pure functions.
#include "kernels/ref/ops_ref.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace triad::kernels::ref {

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * r * (w ? w[i] : 1.0));
}

void layernorm(const float* x, const float* w, const float* b, float eps, float* out, int64_t n) {
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const double r = 1.0 / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>((x[i] - mean) * r * (w ? w[i] : 1.0) + (b ? b[i] : 0.0));
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  std::vector<double> e(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[i] = std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[i] / sum);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * (up ? up[i] : 1.0));
  }
}

void gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double y = 0.5 * g * (1.0 + std::tanh(c * (g + 0.044715 * g * g * g)));
    out[i] = static_cast<float>(y * (up ? up[i] : 1.0));
  }
}

void gelu_erf_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double y = 0.5 * g * std::erfc(-g / std::sqrt(2.0));
    out[i] = static_cast<float>(y * (up ? up[i] : 1.0));
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p) {
  const int half = p.rot_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      // Pair i's frequency; YaRN blends the scaled and the unscaled one (HF's inv_freq mask).
      const double unscaled = std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.rot_dim);
      double freq = unscaled * p.freq_scale;
      if (p.ext_factor != 0.f) {
        const double span = std::max(0.001, static_cast<double>(p.corr_hi) - p.corr_lo);
        const double ramp = std::min(1.0, std::max(0.0, (i - static_cast<double>(p.corr_lo)) / span));
        const double keep = (1.0 - ramp) * p.ext_factor;
        freq = freq * (1.0 - keep) + unscaled * keep;
      }
      const double theta = static_cast<double>(pos) * freq;
      const double c = std::cos(theta) * p.mscale, s = std::sin(theta) * p.mscale;
      const int ia = p.layout == RopeLayout::kNormal ? 2 * i : i;
      const int ib = p.layout == RopeLayout::kNormal ? 2 * i + 1 : i + half;
      const double a = xh[ia], b = xh[ib];
      xh[ia] = static_cast<float>(a * c - b * s);
      xh[ib] = static_cast<float>(a * s + b * c);
    }
  }
}

}  // namespace triad::kernels::ref
