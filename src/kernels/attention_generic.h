// The flash-attention work unit (AttnUnit, ops_impl.h) written once over a float-vector type S
// (VecScalar, VecAvx2, VecAvx512). attention.cpp, attention_avx2.cpp and attention_avx512.cpp
// instantiate it; attention.cpp schedules the units on the thread pool.
//
// Algorithm, per unit (n_rows query rows x the n_rep query heads sharing one kv head):
//   for each key tile of u.tile slots:
//     find the tile's min / max kv position; per query row decide: no key visible (skip the
//     tile), all visible (no per-key mask), or some (mask those hidden to -inf);
//     for the row's n_rep heads, two at a time (each K / V vector loaded into a register feeds
//     both heads' fmas; all heads read the same tile while it is hot in L1):
//       s_j = scale q.k_j (4 keys x 2 heads per step), optional softcap c tanh(s_j / c), mask,
//       m' = max(m, max_j s_j), p_j = exp(s_j - m'), l = l e^(m - m') + sum_j p_j,
//       acc = acc e^(m - m') + sum_j p_j v_j   (up to 8 accumulator registers per pass over V),
//       m = m'.
// Only two tiles of scores (2 x u.tile floats) exist at a time: the n_q x n_kv score matrix is
// never built. Accumulation is f32 throughout.
//
// Everything is in an anonymous namespace and templated on S (internal linkage per ISA file).
// Thread-safety: a unit writes only its own state / scratch / output rows, so units with
// distinct buffers run concurrently.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops_impl.h"

namespace triad::kernels {
namespace {

// s[i][j] = q[i] . k_j for NQ query vectors and the nk keys at k + j * ks (hd floats each):
// 4 keys x NQ queries per step, so each K load feeds NQ fmas.
template <class S, int NQ>
inline void attn_dots(const float* const* q, const float* k, int64_t ks, int nk, int hd,
                      float* const* s) {
  using V = typename S::V;
  const int nf = hd / S::W * S::W, rem = hd - nf;
  int j = 0;
  for (; j + 4 <= nk; j += 4) {
    const float* kr[4] = {k + j * ks, k + (j + 1) * ks, k + (j + 2) * ks, k + (j + 3) * ks};
    V a[NQ][4];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; ++i)
      for (int c = 0; c < 4; ++c) a[i][c] = S::zero();
    for (int d = 0; d < nf; d += S::W) {
      const V k0 = S::load(kr[0] + d), k1 = S::load(kr[1] + d), k2 = S::load(kr[2] + d),
              k3 = S::load(kr[3] + d);
#pragma GCC unroll 2
      for (int i = 0; i < NQ; ++i) {
        const V qv = S::load(q[i] + d);
        a[i][0] = S::fma(qv, k0, a[i][0]);
        a[i][1] = S::fma(qv, k1, a[i][1]);
        a[i][2] = S::fma(qv, k2, a[i][2]);
        a[i][3] = S::fma(qv, k3, a[i][3]);
      }
    }
    if (rem) {
      const V k0 = S::load_part(kr[0] + nf, rem), k1 = S::load_part(kr[1] + nf, rem),
              k2 = S::load_part(kr[2] + nf, rem), k3 = S::load_part(kr[3] + nf, rem);
#pragma GCC unroll 2
      for (int i = 0; i < NQ; ++i) {
        const V qv = S::load_part(q[i] + nf, rem);
        a[i][0] = S::fma(qv, k0, a[i][0]);
        a[i][1] = S::fma(qv, k1, a[i][1]);
        a[i][2] = S::fma(qv, k2, a[i][2]);
        a[i][3] = S::fma(qv, k3, a[i][3]);
      }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NQ; ++i) S::hsum4(a[i][0], a[i][1], a[i][2], a[i][3], s[i] + j);
  }
  for (; j < nk; ++j) {
    const float* kj = k + j * ks;
    for (int i = 0; i < NQ; ++i) {
      V a = S::zero();
      for (int d = 0; d < nf; d += S::W) a = S::fma(S::load(q[i] + d), S::load(kj + d), a);
      if (rem) a = S::fma(S::load_part(q[i] + nf, rem), S::load_part(kj + nf, rem), a);
      s[i][j] = S::hsum(a);
    }
  }
}

// acc[i][d0 .. d0 + R*W) = acc[i] * alpha[i] + sum_j p[i][j] * v_j, for NQ query vectors:
// NQ x R accumulators stay in registers for one pass over the V tile; each V load feeds NQ fmas.
template <class S, int NQ, int R>
inline void attn_pv_block(float* const* acc, const typename S::V* al, const float* const* p,
                          const float* v, int64_t vs, int nk, int d0) {
  using V = typename S::V;
  V c[NQ][R];
#pragma GCC unroll 2
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) c[i][r] = S::mul(S::load(acc[i] + d0 + r * S::W), al[i]);
  for (int j = 0; j < nk; ++j) {
    V pj[NQ];
#pragma GCC unroll 2
    for (int i = 0; i < NQ; ++i) pj[i] = S::set1(p[i][j]);
    const float* vj = v + j * vs + d0;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V vv = S::load(vj + r * S::W);
#pragma GCC unroll 2
      for (int i = 0; i < NQ; ++i) c[i][r] = S::fma(pj[i], vv, c[i][r]);
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) S::store(acc[i] + d0 + r * S::W, c[i][r]);
}

template <class S, int NQ>
inline void attn_pv(float* const* acc, const float* alpha, const float* const* p, const float* v,
                    int64_t vs, int nk, int hd) {
  using V = typename S::V;
  constexpr int kMaxRegs = NQ == 1 ? 8 : 4;  // accumulators per query vector in one pass
  V al[NQ];
  for (int i = 0; i < NQ; ++i) al[i] = S::set1(alpha[i]);
  int d = 0;
  for (; d + kMaxRegs * S::W <= hd; d += kMaxRegs * S::W)
    attn_pv_block<S, NQ, kMaxRegs>(acc, al, p, v, vs, nk, d);
  if (kMaxRegs > 4 && d + 4 * S::W <= hd) {
    attn_pv_block<S, NQ, 4>(acc, al, p, v, vs, nk, d);
    d += 4 * S::W;
  }
  if (d + 2 * S::W <= hd) {
    attn_pv_block<S, NQ, 2>(acc, al, p, v, vs, nk, d);
    d += 2 * S::W;
  }
  if (d + S::W <= hd) {
    attn_pv_block<S, NQ, 1>(acc, al, p, v, vs, nk, d);
    d += S::W;
  }
  if (d < hd) {
    const int rem = hd - d;
    for (int i = 0; i < NQ; ++i) {
      V c = S::mul(S::load_part(acc[i] + d, rem), al[i]);
      for (int j = 0; j < nk; ++j)
        c = S::fma(S::set1(p[i][j]), S::load_part(v + j * vs + d, rem), c);
      S::store_part(acc[i] + d, c, rem);
    }
  }
}

// Turns the raw dots s[0..nk) of one query vector into p_j = exp(score_j - m') in place
// (score = scale * dot, softcapped, -inf where hidden), updates its running max m and sum l,
// and returns the factor e^(m - m') its accumulator must be rescaled by.
template <class S>
inline float attn_softmax_step(float* s, int nk, typename S::V scale, bool capped,
                               typename S::V cap, typename S::V inv_cap, bool all_visible,
                               const int32_t* kp, int64_t qp, int64_t window, float& m,
                               float& l) {
  using V = typename S::V;
  const float kNegInf = -__builtin_inff();
  V mx = S::set1(kNegInf);
  int i = 0;
  for (; i + S::W <= nk; i += S::W) {
    V x = S::mul(S::load(s + i), scale);
    if (capped) x = S::mul(cap, S::tanh(S::mul(x, inv_cap)));
    S::store(s + i, x);
    mx = S::max(mx, x);
  }
  if (i < nk) {
    const int rem = nk - i;
    V x = S::mul(S::load_part(s + i, rem), scale);
    if (capped) x = S::mul(cap, S::tanh(S::mul(x, inv_cap)));
    S::store_part(s + i, x, rem);
    mx = S::max(mx, S::load_part(s + i, rem, kNegInf));
  }
  float tmax = S::hmax(mx);
  if (!all_visible) {
    tmax = kNegInf;
    for (int j = 0; j < nk; ++j) {
      const int64_t kpj = kp[j];
      if (kpj > qp || (window > 0 && qp - kpj >= window))
        s[j] = kNegInf;
      else
        tmax = s[j] > tmax ? s[j] : tmax;
    }
  }
  const float m_new = tmax > m ? tmax : m;
  if (m_new == kNegInf) {  // only -inf scores so far (non-finite input): contribute nothing
    for (int j = 0; j < nk; ++j) s[j] = 0.f;
    return 1.f;
  }
  const V mv = S::set1(m_new);
  V sum = S::zero();
  i = 0;
  for (; i + S::W <= nk; i += S::W) {
    V e = S::exp(S::sub(S::load(s + i), mv));
    S::store(s + i, e);
    sum = S::add(sum, e);
  }
  if (i < nk) {
    const int rem = nk - i;
    V e = S::exp(S::sub(S::load_part(s + i, rem, kNegInf), mv));
    S::store_part(s + i, e, rem);
    sum = S::add(sum, e);
  }
  const float alpha = std::exp(m - m_new);  // 0 on the first visible tile
  l = l * alpha + S::hsum(sum);
  m = m_new;
  return alpha;
}

template <class S>
void g_attn_unit(const AttnUnit& u) {
  using V = typename S::V;
  const float kNegInf = -__builtin_inff();
  const int hd = u.head_dim, nrep = u.n_rep, T = u.tile;
  const int n_vec = u.n_rows * nrep;
  for (int qi = 0; qi < n_vec; ++qi) {
    u.m[qi] = kNegInf;
    u.l[qi] = 0.f;
    float* a = u.acc + qi * u.acc_stride;
    for (int d = 0; d < hd; ++d) a[d] = 0.f;
  }
  const V scale = S::set1(u.scale);
  const bool capped = u.softcap > 0.f;
  const V cap = S::set1(u.softcap), inv_cap = S::set1(capped ? 1.f / u.softcap : 0.f);
  const int64_t window = u.window;

  for (int64_t j0 = 0; j0 < u.n_kv; j0 += T) {
    const int nk = static_cast<int>(u.n_kv - j0 < T ? u.n_kv - j0 : T);
    const int32_t* kp = u.kv_pos + j0;
    int64_t pmin = kp[0], pmax = kp[0];
    for (int j = 1; j < nk; ++j) {
      pmin = kp[j] < pmin ? kp[j] : pmin;
      pmax = kp[j] > pmax ? kp[j] : pmax;
    }
    const float* kt = u.k + j0 * u.kv_stride;
    const float* vt = u.v + j0 * u.kv_stride;
    for (int r = 0; r < u.n_rows; ++r) {
      const int64_t qp = u.q_pos[r];
      if (pmin > qp || (window > 0 && qp - pmax >= window)) continue;  // nothing visible
      const bool all_visible = pmax <= qp && (window <= 0 || qp - pmin < window);
      // The row's heads two at a time (they share every K / V load), then an odd one alone.
      for (int rep = 0; rep < nrep;) {
        const int nq = rep + 1 < nrep ? 2 : 1;
        const float* qs[2];
        float* ss[2];
        float* accs[2];
        float alpha[2];
        for (int i = 0; i < nq; ++i) {
          const int qi = r * nrep + rep + i;
          qs[i] = u.q + r * u.q_stride + (rep + i) * hd;
          ss[i] = u.scores + i * T;
          accs[i] = u.acc + qi * u.acc_stride;
        }
        if (nq == 2)
          attn_dots<S, 2>(qs, kt, u.kv_stride, nk, hd, ss);
        else
          attn_dots<S, 1>(qs, kt, u.kv_stride, nk, hd, ss);
        for (int i = 0; i < nq; ++i) {
          const int qi = r * nrep + rep + i;
          alpha[i] = attn_softmax_step<S>(ss[i], nk, scale, capped, cap, inv_cap, all_visible,
                                          kp, qp, window, u.m[qi], u.l[qi]);
        }
        if (nq == 2)
          attn_pv<S, 2>(accs, alpha, ss, vt, u.kv_stride, nk, hd);
        else
          attn_pv<S, 1>(accs, alpha, ss, vt, u.kv_stride, nk, hd);
        rep += nq;
      }
    }
  }

  if (!u.out) return;
  for (int qi = 0; qi < n_vec; ++qi) {
    const int r = qi / nrep, rep = qi % nrep;
    float* o = u.out + r * u.out_stride + rep * hd;
    const float* a = u.acc + qi * u.acc_stride;
    const V inv = S::set1(u.l[qi] > 0.f ? 1.f / u.l[qi] : 0.f);
    int d = 0;
    for (; d + S::W <= hd; d += S::W) S::store(o + d, S::mul(S::load(a + d), inv));
    if (d < hd) S::store_part(o + d, S::mul(S::load_part(a + d, hd - d), inv), hd - d);
  }
}

}  // namespace
}  // namespace triad::kernels
