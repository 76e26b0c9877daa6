// VecScalar: a one-lane "vector" (a plain float) so the generic op and attention templates
// (ops_generic.h, paged_attention_generic.h) also give the portable kScalar level, compiled for
// baseline x86-64 in ops.cpp / attention.cpp. exp and tanh are std::exp / std::tanh.
//
// Everything is in an anonymous namespace (internal linkage), like the SIMD variants.
// Thread-safety: stateless.
#pragma once

#include <algorithm>
#include <cmath>

namespace triad::kernels {
namespace {

struct VecScalar {
  using V = float;
  static constexpr int W = 1;

  static V zero() { return 0.f; }
  static V set1(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  // Never needed with one lane (a loop in steps of W leaves no tail); kept for the interface.
  static V load_part(const float* p, int n, float fill = 0.f) { return n > 0 ? *p : fill; }
  static void store_part(float* p, V v, int n) {
    if (n > 0) *p = v;
  }

  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V max(V a, V b) { return std::max(a, b); }
  static V fma(V a, V b, V c) { return a * b + c; }

  static float hsum(V v) { return v; }
  static void hsum4(V a, V b, V c, V d, float* out) {
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
  }
  static float hmax(V v) { return v; }
  static V exp(V x) { return std::exp(x); }
  static V tanh(V x) { return std::tanh(x); }
};

}  // namespace
}  // namespace triad::kernels
