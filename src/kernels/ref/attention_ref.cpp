// Scalar reference attention (see ops_ref.h): for each query row and head, a first pass over
// all kv slots collects the scores of the visible ones (causal: kv_pos <= q_pos; window w > 0:
// q_pos - kv_pos < w), a second forms exp(s - max) / sum and the weighted sum of V; a head's
// sink logit, when given, adds exp(sink - max) to the sum only. Double
// precision throughout; O(n_kv) scratch per query vector, no tiling, no threads.
// Thread-safety: pure function.
#include <cmath>
#include <vector>

#include "kernels/ref/ops_ref.h"

namespace triad::kernels::ref {

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
               const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
               int64_t kv_stride, const int32_t* kv_pos, float* out, int64_t out_stride) {
  const int hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  std::vector<double> s(static_cast<size_t>(n_kv));
  std::vector<char> vis(static_cast<size_t>(n_kv));
  std::vector<double> o(static_cast<size_t>(hd));
  for (int64_t t = 0; t < n_q; ++t) {
    for (int h = 0; h < p.n_heads; ++h) {
      const int g = h / group;
      const float* qv = q + t * q_stride + static_cast<int64_t>(h) * hd;
      double mx = -INFINITY;
      bool any = false;
      for (int64_t j = 0; j < n_kv; ++j) {
        const int64_t dist = static_cast<int64_t>(q_pos[t]) - kv_pos[j];
        vis[j] = dist >= 0 && (p.window <= 0 || dist < p.window);
        if (!vis[j]) continue;
        const float* kv = k + j * kv_stride + static_cast<int64_t>(g) * hd;
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(qv[d]) * kv[d];
        double sc = dot * p.scale;
        if (p.softcap > 0) sc = p.softcap * std::tanh(sc / p.softcap);
        s[j] = sc;
        mx = any && mx > sc ? mx : sc;
        any = true;
      }
      float* ov = out + t * out_stride + static_cast<int64_t>(h) * hd;
      for (int d = 0; d < hd; ++d) o[d] = 0;
      double sum = 0;
      for (int64_t j = 0; j < n_kv; ++j) {
        if (!vis[j]) continue;
        const double w = std::exp(s[j] - mx);
        sum += w;
        const float* vv = v + j * kv_stride + static_cast<int64_t>(g) * hd;
        for (int d = 0; d < hd; ++d) o[d] += w * vv[d];
      }
      if (p.sinks != nullptr && any) {  // the sink's weight joins the sum (with its own max)
        const double sink = p.sinks[h];
        if (sink > mx) {
          const double r = std::exp(mx - sink);
          for (int d = 0; d < hd; ++d) o[d] *= r;
          sum = sum * r + 1.0;
        } else {
          sum += std::exp(sink - mx);
        }
      }
      for (int d = 0; d < hd; ++d) ov[d] = any ? static_cast<float>(o[d] / sum) : 0.f;
    }
  }
}

}  // namespace triad::kernels::ref
