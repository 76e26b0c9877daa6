// Scale searches shared by the weight quantizers (quantize.cpp): given a group of values and a
// weight per value, choose a scale (and for affine formats a minimum) and integer codes that
// make the weighted squared error small.
//
// These follow the published ggml k-quant algorithms (same inputs, same steps, same rounding),
// so that without importance weights Triad's blocks match what llama.cpp's reference
// quantizers produce; with importance weights the caller passes w = importance * sqrt(sigma2 +
// x^2) and the same searches minimise that weighted error. Written for Triad from the
// algorithms' description; nothing here is copied.
//
// All functions are pure: they write only their outputs.
// Group sizes n are at most 256.
// Thread-safety: pure functions, safe to call concurrently.
#pragma once

#include <cmath>
#include <cstdint>

namespace triad::quant {

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits (the float add rounds). No libm call, so loops vectorize.
inline int nearest_int(float v) {
  const float t = v + 12582912.f;
  int32_t i;
  __builtin_memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// The element of largest magnitude, with its sign (the first of equals; 0 for an all-zero group).
inline float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// Symmetric codes l in [-nmax, nmax - 1] (stored as l + nmax in L) with x ~ scale * l. The
// element of largest magnitude maps to -nmax. rmse_type picks the weights when w is null:
// 0: no search (returns 1 / iscale at once), 1: x^2, 2: 1, 3: |x|, 4: sqrt|x|; with w set those
// weights are used for any rmse_type > 0. nmax <= 127 (codes are stored in int8). Searches 18 scales around nmax / max. Returns the
// scale (0 when every |x| < 1e-15, with L all nmax).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* w);

// Q3_K's symmetric search: as make_qx_quants with x^2 weights (or w), then up to 5 passes that
// move single codes while the weighted fit improves. L gets l + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse, const float* w);

// Affine codes L in [0, nmax] with x ~ scale * L - min (min >= 0 returned in *the_min),
// weighted by w (required). Tries nstep + 1 inverse scales (rmin + rdelta * is + nmax) /
// (max - min) and keeps the least-squares fit with the smallest weighted error (absolute error
// when use_mad). Returns the scale.
float make_qkx2_quants(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                       float rmin, float rdelta, int nstep, bool use_mad);

// Non-negative codes L in [0, nmax] with x ~ scale * L for non-negative x (sub-block scales and
// minimums), weighted by w (or 1 when null): a few candidate scales, then single-code moves
// while the weighted fit improves. Returns the scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* w);

}  // namespace triad::quant
