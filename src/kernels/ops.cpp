// The public element-wise ops of ops.h: argument checks, then dispatch to the function table of
// best_isa() (chosen once). Also the portable kScalar table (ops_generic.h over VecScalar), the
// ISA-table lookup ops_for(), and the per-thread rope angle cache shared by all ISA levels.
// Baseline x86-64 code: no SIMD intrinsics here.
//
// Thread-safety: the tables are immutable after first use (function-local statics); the rope
// cache is thread_local; every op writes only its outputs.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/ops_generic.h"
#include "kernels/ops_impl.h"
#include "kernels/ops_vec_scalar.h"

namespace triad::kernels {

bool isa_supported(IsaLevel level) { return cpu_supports(level); }

const OpsTable& ops_for(IsaLevel level) {
  TRIAD_CHECK(isa_supported(level), "ops_for: this CPU cannot run ISA level ", isa_name(level));
  static constexpr OpsTable scalar = make_ops_table<VecScalar>(IsaLevel::kScalar);
  switch (level) {
    case IsaLevel::kAvx2: return ops_table_avx2();
    case IsaLevel::kAvx512: return ops_table_avx512();
    case IsaLevel::kScalar: break;
  }
  return scalar;
}

namespace {

const OpsTable& active() {
  static const OpsTable& t = ops_for(best_isa());
  return t;
}

void check_n(const char* op, int64_t n, bool allow_empty) {
  TRIAD_CHECK(allow_empty ? n >= 0 : n > 0, op, ": bad element count ", n);
}

struct RopeCache {
  bool valid = false;
  int32_t pos = 0;
  int rot_dim = 0;
  float base = 0.f, scale = 0.f, ext = 0.f, lo = 0.f, hi = 0.f, mscale = 0.f;
  std::vector<float> cos, sin, cos2, sin2;
  RopeTable view;
};

}  // namespace

const RopeTable& rope_table(int32_t pos, const RopeParams& p) {
  thread_local RopeCache c;
  if (c.valid && c.pos == pos && c.rot_dim == p.rot_dim && c.base == p.freq_base &&
      c.scale == p.freq_scale && c.ext == p.ext_factor && c.lo == p.corr_lo && c.hi == p.corr_hi &&
      c.mscale == p.mscale)
    return c.view;
  const int half = p.rot_dim / 2;
  c.cos.resize(half);
  c.sin.resize(half);
  c.cos2.resize(2 * half);
  c.sin2.resize(2 * half);
  const double log_base = std::log(static_cast<double>(p.freq_base));
  const double ppos = static_cast<double>(pos) * static_cast<double>(p.freq_scale);
  for (int i = 0; i < half; ++i) {
    double theta = ppos * std::exp(-2.0 * i / p.rot_dim * log_base);
    if (p.ext_factor != 0.f) {  // YaRN: mix in the unscaled angle on the fast-turning pairs
      const double extrap = static_cast<double>(pos) * std::exp(-2.0 * i / p.rot_dim * log_base);
      const double y = (i - static_cast<double>(p.corr_lo)) / std::max(0.001, static_cast<double>(p.corr_hi - p.corr_lo));
      const double mix = (1.0 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
      theta = theta * (1.0 - mix) + extrap * mix;
    }
    float cs = static_cast<float>(std::cos(theta) * p.mscale), sn = static_cast<float>(std::sin(theta) * p.mscale);
    c.cos[i] = cs;
    c.sin[i] = sn;
    c.cos2[2 * i] = c.cos2[2 * i + 1] = cs;
    c.sin2[2 * i] = -sn;
    c.sin2[2 * i + 1] = sn;
  }
  c.valid = true;
  c.pos = pos;
  c.rot_dim = p.rot_dim;
  c.base = p.freq_base;
  c.scale = p.freq_scale;
  c.ext = p.ext_factor;
  c.lo = p.corr_lo;
  c.hi = p.corr_hi;
  c.mscale = p.mscale;
  c.view = RopeTable{half, c.cos.data(), c.sin.data(), c.cos2.data(), c.sin2.data()};
  return c.view;
}

void yarn_corr_dims(int rot_dim, int32_t orig_ctx, float freq_base, float beta_fast, float beta_slow,
                    float* lo, float* hi) {
  auto dim = [&](float turns) {
    return rot_dim * std::log(static_cast<double>(orig_ctx) / (turns * 2.0 * M_PI)) / (2.0 * std::log(freq_base));
  };
  *lo = static_cast<float>(std::max(0.0, std::floor(dim(beta_fast))));
  *hi = static_cast<float>(std::min(rot_dim - 1.0, std::ceil(dim(beta_slow))));
}

void check_rope_args(const float* x, int n_heads, int head_dim, const RopeParams& p) {
  TRIAD_CHECK(n_heads >= 0 && head_dim > 0, "rope: bad shape n_heads=", n_heads,
              " head_dim=", head_dim);
  TRIAD_CHECK(p.rot_dim > 0 && p.rot_dim <= head_dim && p.rot_dim % 2 == 0,
              "rope: rot_dim ", p.rot_dim, " must be even and in (0, head_dim=", head_dim, "]");
  TRIAD_CHECK(p.layout == RopeLayout::kNormal || p.layout == RopeLayout::kNeox,
              "rope: unknown layout");
  TRIAD_CHECK(std::isfinite(p.freq_base) && p.freq_base > 0.f, "rope: bad freq_base ",
              p.freq_base);
  TRIAD_CHECK(std::isfinite(p.freq_scale), "rope: bad freq_scale ", p.freq_scale);
  TRIAD_CHECK(std::isfinite(p.ext_factor) && std::isfinite(p.corr_lo) && std::isfinite(p.corr_hi) &&
                  std::isfinite(p.mscale),
              "rope: bad YaRN parameters");
  TRIAD_CHECK(x != nullptr || n_heads == 0, "rope: null data");
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  check_n("rmsnorm", n, false);
  TRIAD_CHECK(x && out, "rmsnorm: null pointer");
  active().rmsnorm(x, w, eps, out, n);
}

void layernorm(const float* x, const float* w, const float* b, float eps, float* out, int64_t n) {
  check_n("layernorm", n, false);
  TRIAD_CHECK(x && out, "layernorm: null pointer");
  active().layernorm(x, w, b, eps, out, n);
}

void softmax(float* x, int64_t n) {
  check_n("softmax", n, true);
  if (n == 0) return;
  TRIAD_CHECK(x, "softmax: null pointer");
  active().softmax(x, n);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  check_n("silu_mul", n, true);
  if (n == 0) return;
  TRIAD_CHECK(gate && out, "silu_mul: null pointer");
  active().silu_mul(gate, up, out, n);
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha, float limit) {
  check_n("swiglu_oai", n, true);
  TRIAD_CHECK(gate && up && out, "swiglu_oai: null pointer");
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.f + std::exp(-alpha * g)) * (u + 1.f);
  }
}

void gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
  check_n("gelu_mul", n, true);
  if (n == 0) return;
  TRIAD_CHECK(gate && out, "gelu_mul: null pointer");
  active().gelu_mul(gate, up, out, n);
}

void gelu_erf_mul(const float* gate, const float* up, float* out, int64_t n) {
  check_n("gelu_erf_mul", n, true);
  if (n == 0) return;
  TRIAD_CHECK(gate && out, "gelu_erf_mul: null pointer");
  active().gelu_erf_mul(gate, up, out, n);
}

void add_inplace(float* y, const float* x, int64_t n) {
  check_n("add_inplace", n, true);
  if (n == 0) return;
  TRIAD_CHECK(y && x, "add_inplace: null pointer");
  active().add_inplace(y, x, n);
}

void scale_inplace(float* y, float s, int64_t n) {
  check_n("scale_inplace", n, true);
  if (n == 0) return;
  TRIAD_CHECK(y, "scale_inplace: null pointer");
  active().scale_inplace(y, s, n);
}

void rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p) {
  check_rope_args(x, n_heads, head_dim, p);
  active().rope(x, n_heads, head_dim, pos, p);
}

}  // namespace triad::kernels
