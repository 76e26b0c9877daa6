// The element-wise / row-wise ops of ops.h written once over a float-vector type S
// (VecScalar, VecAvx2 or VecAvx512: width S::W, loads/stores with partial tails, fma, exp,
// tanh, horizontal sum/max). ops.cpp, ops_avx2.cpp and ops_avx512.cpp instantiate them.
//
// Precision: sums (rmsnorm, layernorm, softmax) accumulate in f32 over 4 independent vector
// accumulators; gelu uses the identity 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)), which keeps full
// relative accuracy where 1 + tanh u cancels (large negative x).
//
// Everything is in an anonymous namespace and every function is a template on S: the
// instantiations have internal linkage in each ISA's file. Arguments are not checked here.
// Thread-safety: pure functions of their arguments (rope reads the per-thread rope_table cache).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops_impl.h"

namespace triad::kernels {
namespace {

// Applies out[i] = f(a[i], b[i]) (b may be null: f receives `b_default`) in vectors.
template <class S, class F>
inline void map2(const float* a, const float* b, float b_default, float* out, int64_t n, F f) {
  using V = typename S::V;
  const V bd = S::set1(b_default);
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) S::store(out + i, f(S::load(a + i), b ? S::load(b + i) : bd));
  if (i < n) {
    int r = static_cast<int>(n - i);
    S::store_part(out + i, f(S::load_part(a + i, r), b ? S::load_part(b + i, r) : bd), r);
  }
}

// Sum of f(x[i]) over n elements, with 4 accumulators; the lanes past n of the last vector
// read `fill`, which f must map to 0.
template <class S, class F>
inline float reduce_sum(const float* x, int64_t n, float fill, F f) {
  using V = typename S::V;
  V a0 = S::zero(), a1 = S::zero(), a2 = S::zero(), a3 = S::zero();
  int64_t i = 0;
  for (; i + 4 * S::W <= n; i += 4 * S::W) {
    a0 = S::add(a0, f(S::load(x + i)));
    a1 = S::add(a1, f(S::load(x + i + S::W)));
    a2 = S::add(a2, f(S::load(x + i + 2 * S::W)));
    a3 = S::add(a3, f(S::load(x + i + 3 * S::W)));
  }
  for (; i + S::W <= n; i += S::W) a0 = S::add(a0, f(S::load(x + i)));
  if (i < n) a1 = S::add(a1, f(S::load_part(x + i, static_cast<int>(n - i), fill)));
  return S::hsum(S::add(S::add(a0, a1), S::add(a2, a3)));
}

template <class S>
void g_rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  using V = typename S::V;
  float ss = reduce_sum<S>(x, n, 0.f, [](V v) { return S::mul(v, v); });
  const V r = S::set1(1.f / std::sqrt(ss / static_cast<float>(n) + eps));
  map2<S>(x, w, 1.f, out, n, [&](V a, V b) { return S::mul(S::mul(a, r), b); });
}

template <class S>
void g_layernorm(const float* x, const float* w, const float* b, float eps, float* out,
                 int64_t n) {
  using V = typename S::V;
  const float mean = reduce_sum<S>(x, n, 0.f, [](V v) { return v; }) / static_cast<float>(n);
  const V mv = S::set1(mean);
  // Two-pass variance (no cancellation); padding lanes read the mean and add 0.
  const float sq = reduce_sum<S>(x, n, mean, [&](V v) {
    V d = S::sub(v, mv);
    return S::mul(d, d);
  });
  const V r = S::set1(1.f / std::sqrt(sq / static_cast<float>(n) + eps));
  // out = (x - mean) * r * w + b, in two passes so w and b may each be null.
  map2<S>(x, w, 1.f, out, n, [&](V a, V wv) { return S::mul(S::mul(S::sub(a, mv), r), wv); });
  if (b) map2<S>(out, b, 0.f, out, n, [](V a, V bv) { return S::add(a, bv); });
}

template <class S>
void g_softmax(float* x, int64_t n) {
  using V = typename S::V;
  if (n <= 0) return;
  V mx = S::set1(-__builtin_inff());
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) mx = S::max(mx, S::load(x + i));
  if (i < n) mx = S::max(mx, S::load_part(x + i, static_cast<int>(n - i), -__builtin_inff()));
  const V m = S::set1(S::hmax(mx));
  V sum = S::zero();
  i = 0;
  for (; i + S::W <= n; i += S::W) {
    V e = S::exp(S::sub(S::load(x + i), m));
    S::store(x + i, e);
    sum = S::add(sum, e);
  }
  if (i < n) {
    int r = static_cast<int>(n - i);
    V e = S::exp(S::sub(S::load_part(x + i, r, -__builtin_inff()), m));
    S::store_part(x + i, e, r);
    sum = S::add(sum, e);
  }
  const V inv = S::set1(1.f / S::hsum(sum));
  map2<S>(x, nullptr, 0.f, x, n, [&](V a, V) { return S::mul(a, inv); });
}

template <class S>
void g_silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  using V = typename S::V;
  const V one = S::set1(1.f), neg = S::set1(-1.f);
  map2<S>(gate, up, 1.f, out, n, [&](V g, V u) {
    return S::mul(S::div(g, S::add(one, S::exp(S::mul(g, neg)))), u);
  });
}

template <class S>
void g_gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
  using V = typename S::V;
  // gelu(x) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
  const V one = S::set1(1.f), c1 = S::set1(-2.f * 0.7978845608028654f),
          c3 = S::set1(-2.f * 0.7978845608028654f * 0.044715f);
  map2<S>(gate, up, 1.f, out, n, [&](V g, V u) {
    V g2 = S::mul(g, g);
    V m2u = S::mul(g, S::fma(c3, g2, c1));
    return S::mul(S::div(g, S::add(one, S::exp(m2u))), u);
  });
}

template <class S>
void g_gelu_erf_mul(const float* gate, const float* up, float* out, int64_t n) {
  using V = typename S::V;
  // gelu(x) = x/2 erfc(-x / sqrt 2) = max(x, 0) - |x|/2 erfc(|x| / sqrt 2), with
  // erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), z >= 0 (no branch, no cancellation for x < 0).
  static constexpr float kP[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                   0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
  const V one = S::set1(1.f), half = S::set1(0.5f), zero = S::zero(), rsqrt2 = S::set1(0.70710678118654752f);
  map2<S>(gate, up, 1.f, out, n, [&](V g, V u) {
    const V ax = S::max(g, S::sub(zero, g));
    const V z = S::mul(ax, rsqrt2);
    const V t = S::div(one, S::fma(half, z, one));
    V p = S::set1(kP[9]);
    for (int i = 8; i >= 0; --i) p = S::fma(p, t, S::set1(kP[i]));
    const V erfc = S::mul(t, S::exp(S::sub(p, S::mul(z, z))));
    const V y = S::sub(S::max(g, zero), S::mul(S::mul(half, ax), erfc));
    return S::mul(y, u);
  });
}

template <class S>
void g_add_inplace(float* y, const float* x, int64_t n) {
  using V = typename S::V;
  map2<S>(y, x, 0.f, y, n, [](V a, V b) { return S::add(a, b); });
}

template <class S>
void g_scale_inplace(float* y, float s, int64_t n) {
  using V = typename S::V;
  const V sv = S::set1(s);
  map2<S>(y, nullptr, 0.f, y, n, [&](V a, V) { return S::mul(a, sv); });
}

template <class S>
void g_rope(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p) {
  using V = typename S::V;
  const RopeTable& t = rope_table(pos, p);
  const int half = t.n_pairs;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    if (p.layout == RopeLayout::kNormal) {
      // out = x * (c, c) + swap(x) * (-s, s) over interleaved pairs.
      int d = 0;
      if constexpr (S::W > 1) {
        for (; d + S::W <= 2 * half; d += S::W) {
          V v = S::load(xh + d);
          S::store(xh + d, S::fma(S::swap_pairs(v), S::load(t.sin2 + d),
                                  S::mul(v, S::load(t.cos2 + d))));
        }
      }
      for (; d < 2 * half; d += 2) {
        float a = xh[d], b = xh[d + 1], c = t.cos2[d], s = t.sin2[d + 1];
        xh[d] = a * c - b * s;
        xh[d + 1] = a * s + b * c;
      }
    } else {
      // out_a = a c - b s, out_b = a s + b c with a = x[i], b = x[i + half].
      float* xb = xh + half;
      int i = 0;
      for (; i + S::W <= half; i += S::W) {
        V a = S::load(xh + i), b = S::load(xb + i), c = S::load(t.cos + i), s = S::load(t.sin + i);
        S::store(xh + i, S::sub(S::mul(a, c), S::mul(b, s)));
        S::store(xb + i, S::fma(a, s, S::mul(b, c)));
      }
      for (; i < half; ++i) {
        float a = xh[i], b = xb[i], c = t.cos[i], s = t.sin[i];
        xh[i] = a * c - b * s;
        xb[i] = a * s + b * c;
      }
    }
  }
}

template <class S>
constexpr OpsTable make_ops_table(IsaLevel level) {
  return OpsTable{level,           &g_rmsnorm<S>,     &g_layernorm<S>,
                  &g_softmax<S>,   &g_silu_mul<S>,    &g_gelu_mul<S>,
                  &g_gelu_erf_mul<S>, &g_add_inplace<S>, &g_scale_inplace<S>, &g_rope<S>};
}

}  // namespace
}  // namespace triad::kernels
