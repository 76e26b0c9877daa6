// Scale searches for the weight quantizers (see scale_search.h).
#include "quant/scale_search.h"

#include <algorithm>
#include <cstring>

namespace triad::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Sums run in element order, as ggml's reference quantizers add them, so that (without
// importance weights) the chosen scales and codes match llama.cpp's; the roundings are
// computed in separate float-only loops that the compiler vectorizes.
// nearest_int(v) clamped to [lo, hi], as a float: the same value, in float-only operations
// that vectorize (round half to even by adding and subtracting 1.5 * 2^23).
inline float round_clamp(float v, float lo, float hi) {
  const float r = (v + 12582912.f) - 12582912.f;
  return std::min(hi, std::max(lo, r));
}

inline float pick_weight(int rmse_type, const float* w, int i, float x) {
  if (w) return w[i];
  switch (rmse_type) {
    case 1: return x * x;
    case 2: return 1.f;
    case 3: return std::fabs(x);
    default: return std::sqrt(std::fabs(x));
  }
}

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* w) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax);
    return 0.f;
  }
  float iscale = -static_cast<float>(nmax) / max;
  auto code = [&](float is, float v) { return std::clamp(nearest_int(is * v), -nmax, nmax - 1); };
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(code(iscale, x[i]) + nmax);
    return 1 / iscale;
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = code(iscale, x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float wi = pick_weight(rmse_type, w, i, x[i]);
    sumlx += wi * x[i] * static_cast<float>(l);
    suml2 += wi * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 > 0 ? sumlx / suml2 : 0.f;
  float best = scale * sumlx;
  float wt[256];  // the weights, once (groups are at most 256 values)
  for (int i = 0; i < n; ++i) wt[i] = pick_weight(rmse_type, w, i, x[i]);
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    float lf[256];
    const float lo = static_cast<float>(-nmax), hi = static_cast<float>(nmax - 1);
    for (int i = 0; i < n; ++i) lf[i] = round_clamp(iscale * x[i], lo, hi);
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      sumlx += wt[i] * x[i] * lf[i];
      suml2 += wt[i] * lf[i] * lf[i];
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + code(iscale, x[i]));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse, const float* w) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  auto code = [&](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  if (do_rmse) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = code(iscale * x[i]);
      L[i] = static_cast<int8_t>(l);
      const float wi = w ? w[i] : x[i] * x[i];
      sumlx += wi * x[i] * static_cast<float>(l);
      suml2 += wi * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float wi = w ? w[i] : x[i] * x[i];
        const float li = static_cast<float>(L[i]);
        float slx = sumlx - wi * x[i] * li;
        if (slx > 0) {
          float sl2 = suml2 - wi * li * li;
          const int new_l = code(x[i] * sl2 / slx);
          if (new_l != L[i]) {
            slx += wi * x[i] * static_cast<float>(new_l);
            sl2 += wi * static_cast<float>(new_l) * static_cast<float>(new_l);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = static_cast<int8_t>(new_l);
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
    return suml2 > 0 ? sumlx / suml2 : 0.f;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(code(iscale * x[i]) + nmax);
  return 1 / iscale;
}

float make_qkx2_quants(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  const float fmax = static_cast<float>(nmax);
  float C[256], Caux[256];  // codes as floats (groups are at most 256 values)
  // Weighted error of codes F under (scale, min).
  auto error_of = [&](const float* F, float sc, float mn) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = sc * F[i] + mn - x[i];
      e += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  float iscale = fmax / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) C[i] = round_clamp(iscale * (x[i] - min), 0.f, fmax);
  float best_error = error_of(C, scale, min);
  for (int is = 0; nstep >= 1 && is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + fmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) Caux[i] = round_clamp(iscale * (x[i] - min), 0.f, fmax);
    for (int i = 0; i < n; ++i) {
      const float fl = Caux[i];
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      const float cur_error = error_of(Caux, this_scale, this_min);
      if (cur_error < best_error) {
        std::memcpy(C, Caux, static_cast<size_t>(n) * sizeof(float));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(C[i]);
  *the_min = -min;
  return scale;
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* w) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  auto wt = [&](int i) { return w ? w[i] : 1.f; };
  auto code = [&](float is, float v) { return std::min(nmax, std::max(0, nearest_int(is * v))); };
  float iscale = static_cast<float>(nmax) / max;
  auto mse_of = [&](float is) {
    const float s = 1 / is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - s * static_cast<float>(code(is, x[i]));
      mse += wt(i) * diff * diff;
    }
    return mse;
  };
  float best_mse = mse_of(iscale);
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float cand = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float mse = mse_of(cand);
    if (mse < best_mse) {
      best_mse = mse;
      iscale = cand;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = code(iscale, x[i]);
    L[i] = static_cast<uint8_t>(l);
    sumlx += wt(i) * x[i] * static_cast<float>(l);
    suml2 += wt(i) * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - wt(i) * x[i] * li;
      float sl2 = suml2 - wt(i) * li * li;
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, std::max(0, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          slx += wt(i) * x[i] * static_cast<float>(new_l);
          sl2 += wt(i) * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return suml2 > 0 ? sumlx / suml2 : 0.f;
}

}  // namespace triad::quant
