// The paged-attention work item (paged_attention_impl.h) written once over a float-vector type
// S (VecScalar, VecAvx2, VecAvx512) and a row converter Cvt (stored K/V rows -> f32), both given
// by the including file: paged_attention.cpp, paged_attention_avx2.cpp, paged_attention_avx512.cpp.
//
// Per item (n_rows query rows x the n_rep heads of one kv head), per segment, per tile:
//   each row's visible keys in the tile form one range [a, e) (causal / window mask by position);
//   the union of the rows' ranges is converted to f32 once (K rows padded to groups of 4 with
//   zeros, kNoBlock rows zero), so the tile is read from the pool once per item;
//   consecutive rows with the same range form a group whose query vectors go through the kernels
//   up to kPagedMaxNq at a time (AVX2: 2), sharing every K / V register load:
//     s_j = q . k_j for 4 keys at a time from the range start rounded down to a multiple of 4
//         from the tile start (fixed lanes: each dot is hsum4 of a vector accumulator over d);
//     softmax step: scale, softcap, keys outside [a, e) masked, m' = max(m, max_j s_j),
//         p_j = exp(s_j - m'), l = l e^(m - m') + sum_j p_j;
//     acc = acc e^(m - m') + sum_{j in [a, e)} p_j v_j   (keys in order, f32 fmas).
// Once a tile is converted the next tile's rows are prefetched (blocks lie at scattered
// addresses the hardware prefetchers do not follow), so its DRAM reads overlap this tile's math.
// A segment's state is folded into the running one in segment order (exact merge formula, the
// same function the split-mode merge pass uses); the output is acc / l.
//
// Why the result of a query does not depend on the call: its ranges [a, e) and their 4-aligned
// starts depend only on its own position and the fixed tile edges; every per-vector operation is
// the same instruction sequence whichever vectors share a kernel pass; the scalar steps (softmax
// step, fold, normalize) are noinline, so one compiled copy serves every call site (GCC would
// otherwise be free to contract a * b + c differently in different inlined copies).
//
// Everything is in an anonymous namespace and templated (internal linkage per ISA file).
// Thread-safety: an item writes only its output rows / partial entries and its scratch.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/paged_attention_impl.h"

namespace triad::kernels {
namespace {

template <class S>
constexpr int paged_max_nq() {
  return S::W == 8 ? 2 : kPagedMaxNq;  // AVX2 has 16 registers: 2 x 4 accumulators
}

// s[i][j] = q[i] . k_j for j < n4 (a multiple of 4), keys at k + j * hd.
template <class S, int NQ>
inline void paged_dots(const float* const* q, const float* k, int hd, int n4, float* const* s) {
  using V = typename S::V;
  const int nf = hd / S::W * S::W, rem = hd - nf;
  for (int j = 0; j < n4; j += 4) {
    const float* k0 = k + static_cast<int64_t>(j) * hd;
    const float* k1 = k0 + hd;
    const float* k2 = k1 + hd;
    const float* k3 = k2 + hd;
    V a[NQ][4];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i)
      for (int c = 0; c < 4; ++c) a[i][c] = S::zero();
    for (int d = 0; d < nf; d += S::W) {
      const V x0 = S::load(k0 + d), x1 = S::load(k1 + d), x2 = S::load(k2 + d),
              x3 = S::load(k3 + d);
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) {
        const V qv = S::load(q[i] + d);
        a[i][0] = S::fma(qv, x0, a[i][0]);
        a[i][1] = S::fma(qv, x1, a[i][1]);
        a[i][2] = S::fma(qv, x2, a[i][2]);
        a[i][3] = S::fma(qv, x3, a[i][3]);
      }
    }
    if (rem) {
      const V x0 = S::load_part(k0 + nf, rem), x1 = S::load_part(k1 + nf, rem),
              x2 = S::load_part(k2 + nf, rem), x3 = S::load_part(k3 + nf, rem);
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) {
        const V qv = S::load_part(q[i] + nf, rem);
        a[i][0] = S::fma(qv, x0, a[i][0]);
        a[i][1] = S::fma(qv, x1, a[i][1]);
        a[i][2] = S::fma(qv, x2, a[i][2]);
        a[i][3] = S::fma(qv, x3, a[i][3]);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) S::hsum4(a[i][0], a[i][1], a[i][2], a[i][3], s[i] + j);
  }
}

// acc[i][d0 .. d0 + R*W) = acc[i] * alpha[i] + sum_{j < n} p[i][j] v_j (v_j at v + j * hd).
template <class S, int NQ, int R>
inline void paged_pv_block(float* const* acc, const typename S::V* al, const float* const* p,
                           const float* v, int hd, int n, int d0) {
  using V = typename S::V;
  V c[NQ][R];
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) c[i][r] = S::mul(S::load(acc[i] + d0 + r * S::W), al[i]);
  for (int j = 0; j < n; ++j) {
    V pj[NQ];
#pragma GCC unroll 4
    for (int i = 0; i < NQ; ++i) pj[i] = S::set1(p[i][j]);
    const float* vj = v + static_cast<int64_t>(j) * hd + d0;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V vv = S::load(vj + r * S::W);
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) c[i][r] = S::fma(pj[i], vv, c[i][r]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) S::store(acc[i] + d0 + r * S::W, c[i][r]);
}

template <class S, int NQ>
inline void paged_pv(float* const* acc, const float* alpha, const float* const* p, const float* v,
                     int hd, int n) {
  using V = typename S::V;
  constexpr int kMaxRegs = NQ == 1 ? 8 : 4;  // accumulators per query vector in one pass
  V al[NQ];
  for (int i = 0; i < NQ; ++i) al[i] = S::set1(alpha[i]);
  int d = 0;
  for (; d + kMaxRegs * S::W <= hd; d += kMaxRegs * S::W)
    paged_pv_block<S, NQ, kMaxRegs>(acc, al, p, v, hd, n, d);
  if (kMaxRegs > 4 && d + 4 * S::W <= hd) {
    paged_pv_block<S, NQ, 4>(acc, al, p, v, hd, n, d);
    d += 4 * S::W;
  }
  if (d + 2 * S::W <= hd) {
    paged_pv_block<S, NQ, 2>(acc, al, p, v, hd, n, d);
    d += 2 * S::W;
  }
  if (d + S::W <= hd) {
    paged_pv_block<S, NQ, 1>(acc, al, p, v, hd, n, d);
    d += S::W;
  }
  if (d < hd) {
    const int rem = hd - d;
    for (int i = 0; i < NQ; ++i) {
      V c = S::mul(S::load_part(acc[i] + d, rem), al[i]);
      for (int j = 0; j < n; ++j)
        c = S::fma(S::set1(p[i][j]), S::load_part(v + static_cast<int64_t>(j) * hd + d, rem), c);
      S::store_part(acc[i] + d, c, rem);
    }
  }
}

// Turns the raw dots s[0 .. n4) of one query vector into p_j = exp(score_j - m') in place, with
// keys outside [lo, hi) masked (p = 0); updates the running max m and sum l; returns the factor
// e^(m - m') the accumulator must be rescaled by.
template <class S>
[[gnu::noinline]] float paged_softmax_step(float* s, int n4, int lo, int hi, float scale,
                                           float softcap, float* m, float* l) {
  using V = typename S::V;
  const float kNegInf = -__builtin_inff();
  const V sc = S::set1(scale);
  const bool capped = softcap > 0.f;
  const V cap = S::set1(softcap), inv_cap = S::set1(capped ? 1.f / softcap : 0.f);
  int i = 0;
  for (; i + S::W <= n4; i += S::W) {
    V x = S::mul(S::load(s + i), sc);
    if (capped) x = S::mul(cap, S::tanh(S::mul(x, inv_cap)));
    S::store(s + i, x);
  }
  if (i < n4) {
    V x = S::mul(S::load_part(s + i, n4 - i), sc);
    if (capped) x = S::mul(cap, S::tanh(S::mul(x, inv_cap)));
    S::store_part(s + i, x, n4 - i);
  }
  for (int j = 0; j < lo; ++j) s[j] = kNegInf;
  for (int j = hi; j < n4; ++j) s[j] = kNegInf;
  V mx = S::set1(kNegInf);
  for (i = 0; i + S::W <= n4; i += S::W) mx = S::max(mx, S::load(s + i));
  if (i < n4) mx = S::max(mx, S::load_part(s + i, n4 - i, kNegInf));
  const float tmax = S::hmax(mx);
  const float m_new = tmax > *m ? tmax : *m;
  if (m_new == kNegInf) {  // only -inf scores so far (non-finite input): contribute nothing
    for (int j = 0; j < n4; ++j) s[j] = 0.f;
    return 1.f;
  }
  const V mv = S::set1(m_new);
  V sum = S::zero();
  for (i = 0; i + S::W <= n4; i += S::W) {
    const V e = S::exp(S::sub(S::load(s + i), mv));
    S::store(s + i, e);
    sum = S::add(sum, e);
  }
  if (i < n4) {
    const V e = S::exp(S::sub(S::load_part(s + i, n4 - i, kNegInf), mv));
    S::store_part(s + i, e, n4 - i);
    sum = S::add(sum, e);
  }
  const float alpha = std::exp(*m - m_new);  // 0 on the first visible tile
  *l = *l * alpha + S::hsum(sum);
  *m = m_new;
  return alpha;
}

// Folds segment state (sm, sl, sacc) into the running state (rm, rl, racc):
// M = max, w = e^(m - M), l = rl wr + sl ws, acc = racc wr + sacc ws.
template <class S>
[[gnu::noinline]] void paged_fold(float* rm, float* rl, float* racc, float sm, float sl,
                                  const float* sacc, int hd) {
  using V = typename S::V;
  const float mx = sm > *rm ? sm : *rm;
  if (mx == -__builtin_inff()) return;  // both states only saw -inf scores
  const float wr = std::exp(*rm - mx), ws = std::exp(sm - mx);
  const float ls = sl * ws;
  *rl = *rl * wr + ls;
  *rm = mx;
  const V vr = S::set1(wr), vs = S::set1(ws);
  int d = 0;
  for (; d + S::W <= hd; d += S::W)
    S::store(racc + d, S::fma(S::load(sacc + d), vs, S::mul(S::load(racc + d), vr)));
  if (d < hd) {
    const int rem = hd - d;
    S::store_part(racc + d,
                  S::fma(S::load_part(sacc + d, rem), vs, S::mul(S::load_part(racc + d, rem), vr)),
                  rem);
  }
}

// o[d] = acc[d] / l (zeros when l == 0).
// The softmax sum of a (row, head) state (max m, sum l) with the head's sink logit joined:
// l + exp(sink - m), the accumulator staying relative to m (a sink far above m sends the output
// to 0, as it should).
inline float paged_sum_with_sink(const PagedCtx& c, int head, float m, float l) {
  return c.sinks == nullptr ? l : l + std::exp(c.sinks[head] - m);
}

template <class S>
[[gnu::noinline]] void paged_normalize(const float* acc, float l, int hd, float* o) {
  using V = typename S::V;
  const V inv = S::set1(l > 0.f ? 1.f / l : 0.f);
  int d = 0;
  for (; d + S::W <= hd; d += S::W) S::store(o + d, S::mul(S::load(acc + d), inv));
  if (d < hd) S::store_part(o + d, S::mul(S::load_part(acc + d, hd - d), inv), hd - d);
}

// The rows for keys [j0, j1) of kv head elements [e0, e0 + hd) of one pool into dst (row j at
// dst + (j - j0) * hd). Rows of kNoBlock (or out-of-range) blocks, which no query sees, are
// zeros.
template <class Cvt>
void paged_load_rows(const PagedCtx& c, bool is_v, const PagedSeq& sq, int64_t e0, int64_t j0,
                     int64_t j1, float* dst) {
  const PagedKvLayer& kv = c.kv;
  const DType t = is_v ? kv.v_type : kv.k_type;
  const uint8_t* base = is_v ? kv.v_base : kv.k_base;
  const uint64_t bb = is_v ? kv.v_block_bytes : kv.k_block_bytes;
  const uint64_t rb = is_v ? kv.v_row_bytes : kv.k_row_bytes;
  const int hd = c.head_dim;
  const int64_t bs = kv.block_size;
  for (int64_t j = j0; j < j1;) {
    const int64_t b = j / bs, r = j % bs;
    const int64_t n = j1 - j < bs - r ? j1 - j : bs - r;
    const int32_t blk = sq.block_table[b];
    if (blk < 0 || (kv.n_blocks > 0 && blk >= kv.n_blocks)) {
      std::memset(dst, 0, static_cast<size_t>(n * hd) * sizeof(float));
    } else {
      const uint8_t* src = base + static_cast<uint64_t>(blk) * bb + static_cast<uint64_t>(r) * rb;
      Cvt::rows(t, src, rb, e0, hd, n, dst);
    }
    dst += n * hd;
    j += n;
  }
}

// Prefetches (into L1/L2) the stored rows of kv head g for the keys [j0, j1) of both pools, so
// the next tile's DRAM reads overlap this tile's arithmetic (blocks sit at scattered addresses,
// where the hardware prefetchers do not follow).
inline void paged_prefetch(const PagedCtx& c, const PagedSeq& sq, int g, int64_t j0, int64_t j1) {
  const PagedKvLayer& kv = c.kv;
  const int64_t e0 = static_cast<int64_t>(g) * c.head_dim, e1 = e0 + c.head_dim;
  // Byte range [lo, hi) of elements [a, b) within a row.
  auto byte_range = [](DType t, int64_t a, int64_t b, uint64_t& lo, uint64_t& hi) {
    if (t == DType::kQ8_0) {
      lo = static_cast<uint64_t>(a / 32 * 34);
      hi = static_cast<uint64_t>((b + 31) / 32 * 34);
    } else {
      const uint64_t es = row_bytes(t, 1);
      lo = static_cast<uint64_t>(a) * es;
      hi = static_cast<uint64_t>(b) * es;
    }
  };
  uint64_t klo, khi, vlo, vhi;
  byte_range(kv.k_type, e0, e1, klo, khi);
  byte_range(kv.v_type, e0, e1, vlo, vhi);
  // The lines of row[lo, hi) (rows are not line-aligned in general: one line more than the
  // span may be touched, hence the extra prefetch of the last byte).
  const int64_t bs = kv.block_size;
  for (int64_t j = j0; j < j1; ++j) {
    const int32_t blk = sq.block_table[j / bs];
    if (blk < 0 || (kv.n_blocks > 0 && blk >= kv.n_blocks)) continue;
    const uint64_t r = static_cast<uint64_t>(j % bs);
    const uint8_t* kr =
        kv.k_base + static_cast<uint64_t>(blk) * kv.k_block_bytes + r * kv.k_row_bytes;
    const uint8_t* vr =
        kv.v_base + static_cast<uint64_t>(blk) * kv.v_block_bytes + r * kv.v_row_bytes;
    for (uint64_t o = klo; o < khi; o += 64) __builtin_prefetch(kr + o, 0, 3);
    __builtin_prefetch(kr + khi - 1, 0, 3);
    for (uint64_t o = vlo; o < vhi; o += 64) __builtin_prefetch(vr + o, 0, 3);
    __builtin_prefetch(vr + vhi - 1, 0, 3);
  }
}

// One kernel pass over NQ query vectors of a group (same key range).
template <class S, int NQ>
inline void paged_pass(const PagedCtx& c, const float* const* qs, float* const* accs,
                       float* const* ms, float* const* ls, float* scores, int64_t sstride,
                       const float* kt, const float* vt, int n4, int lo, int hi) {
  float* ss[NQ];
  const float* ps[NQ];
  float alpha[NQ];
  for (int i = 0; i < NQ; ++i) ss[i] = scores + i * sstride;
  paged_dots<S, NQ>(qs, kt, c.head_dim, n4, ss);
  for (int i = 0; i < NQ; ++i) {
    alpha[i] = paged_softmax_step<S>(ss[i], n4, lo, hi, c.scale, c.softcap, ms[i], ls[i]);
    ps[i] = ss[i] + lo;
  }
  paged_pv<S, NQ>(accs, alpha, ps, vt, c.head_dim, hi - lo);
}

// Tile t of an item: t_row0 = absolute first query row, R rows; keys [pf0, pf1) are prefetched.
template <class S, class Cvt>
void paged_tile(const PagedCtx& c, const PagedSeq& sq, int g, int64_t t_row0, int R,
                const PagedScratch& w, int64_t t, int64_t pf0, int64_t pf1) {
  const int hd = c.head_dim, nrep = c.n_rep;
  const int64_t k0 = c.geom.begin(t);
  const int64_t k1 = c.geom.end(t) < sq.n_kv ? c.geom.end(t) : sq.n_kv;
  int64_t A = INT64_MAX, E = INT64_MIN;
  for (int r = 0; r < R; ++r) {
    const int64_t a = w.row_lo[r] > k0 ? w.row_lo[r] : k0;
    const int64_t e = w.row_hi[r] < k1 ? w.row_hi[r] : k1;
    w.row_a[r] = a;
    w.row_e[r] = e;
    if (a < e) {
      A = a < A ? a : A;
      E = e > E ? e : E;
    }
  }
  if (A >= E) {  // no row sees this tile: it is not read
    paged_prefetch(c, sq, g, pf0, pf1);
    return;
  }
  const int64_t A4 = k0 + ((A - k0) & ~int64_t{3}), E4 = k0 + ((E - k0 + 3) & ~int64_t{3});
  const int64_t e0 = static_cast<int64_t>(g) * hd;
  std::memset(w.kt, 0, static_cast<size_t>((A - A4) * hd) * sizeof(float));
  paged_load_rows<Cvt>(c, false, sq, e0, A, E, w.kt + (A - A4) * hd);
  std::memset(w.kt + (E - A4) * hd, 0, static_cast<size_t>((E4 - E) * hd) * sizeof(float));
  const float* vbase = w.kt;  // latent attention: the V tile is the K tile
  if (!c.v_is_k) {
    paged_load_rows<Cvt>(c, true, sq, e0, A, E, w.vt + (A - A4) * hd);
    vbase = w.vt;
  }
  paged_prefetch(c, sq, g, pf0, pf1);

  constexpr int kNq = paged_max_nq<S>();
  for (int r = 0; r < R;) {
    const int64_t a = w.row_a[r], e = w.row_e[r];
    if (a >= e) {
      ++r;
      continue;
    }
    const int rb = r;
    while (r < R && w.row_a[r] == a && w.row_e[r] == e) w.seg_has[r++] = 1;
    const int64_t a4 = k0 + ((a - k0) & ~int64_t{3}), e4 = k0 + ((e - k0 + 3) & ~int64_t{3});
    const int n4 = static_cast<int>(e4 - a4), lo = static_cast<int>(a - a4),
              hi = static_cast<int>(e - a4);
    const float* kt = w.kt + (a4 - A4) * hd;
    const float* vt = vbase + (a - A4) * hd;
    const int v_end = r * nrep;
    for (int vi = rb * nrep; vi < v_end;) {
      const int nq = v_end - vi < kNq ? v_end - vi : kNq;
      const float* qs[kPagedMaxNq];
      float* accs[kPagedMaxNq];
      float* ms[kPagedMaxNq];
      float* ls[kPagedMaxNq];
      for (int i = 0; i < nq; ++i) {
        const int row = (vi + i) / nrep, rep = (vi + i) % nrep;
        qs[i] = c.q + (t_row0 + row) * c.q_stride + (static_cast<int64_t>(g) * nrep + rep) * hd;
        accs[i] = w.seg_acc + (vi + i) * c.acc_stride;
        ms[i] = w.seg_m + vi + i;
        ls[i] = w.seg_l + vi + i;
      }
      switch (nq) {
        case 1:
          paged_pass<S, 1>(c, qs, accs, ms, ls, w.scores, w.score_stride, kt, vt, n4, lo, hi);
          break;
        case 2:
          paged_pass<S, 2>(c, qs, accs, ms, ls, w.scores, w.score_stride, kt, vt, n4, lo, hi);
          break;
        case 3:
          if constexpr (kNq >= 3)
            paged_pass<S, 3>(c, qs, accs, ms, ls, w.scores, w.score_stride, kt, vt, n4, lo, hi);
          break;
        default:
          if constexpr (kNq >= 4)
            paged_pass<S, 4>(c, qs, accs, ms, ls, w.scores, w.score_stride, kt, vt, n4, lo, hi);
          break;
      }
      vi += nq;
    }
  }
}

template <class S, class Cvt>
void g_paged_item(const PagedCtx& c, const PagedItem& it, const PagedScratch& w) {
  const float kNegInf = -__builtin_inff();
  const PagedSeq& sq = c.seqs[it.seq];
  const int hd = c.head_dim, nrep = c.n_rep, R = it.n_rows, g = it.kv_head;
  const int64_t t_row0 = sq.q_begin + it.row0;
  const int64_t n_vec = static_cast<int64_t>(R) * nrep;
  int64_t lo_min = INT64_MAX, hi_max = 0;
  for (int r = 0; r < R; ++r) {
    const int64_t p = c.q_pos[t_row0 + r];
    const int64_t lo = c.window > 0 && p - c.window + 1 > 0 ? p - c.window + 1 : 0;
    w.row_lo[r] = lo;
    w.row_hi[r] = p + 1;
    lo_min = lo < lo_min ? lo : lo_min;
    hi_max = p + 1 > hi_max ? p + 1 : hi_max;
    w.run_has[r] = 0;
  }
  const int64_t tps = c.geom.tiles_per_seg;
  const int64_t t_first = c.geom.tile_of(lo_min), t_last = c.geom.tile_of(hi_max - 1);
  const int64_t sg0 = it.seg >= 0 ? it.seg : t_first / tps;
  const int64_t sg1 = it.seg >= 0 ? it.seg : t_last / tps;
  for (int64_t sg = sg0; sg <= sg1; ++sg) {
    for (int64_t i = 0; i < n_vec; ++i) {
      w.seg_m[i] = kNegInf;
      w.seg_l[i] = 0.f;
      std::memset(w.seg_acc + i * c.acc_stride, 0, static_cast<size_t>(hd) * sizeof(float));
    }
    for (int r = 0; r < R; ++r) w.seg_has[r] = 0;
    const int64_t tb = t_first > sg * tps ? t_first : sg * tps;
    const int64_t te = t_last + 1 < (sg + 1) * tps ? t_last + 1 : (sg + 1) * tps;
    for (int64_t t = tb; t < te; ++t) {
      // The next tile's keys that some row of the item may see: prefetched once this tile is
      // converted, so they load while it is computed.
      int64_t p0 = 0, p1 = 0;
      if (t + 1 < te) {
        p0 = c.geom.begin(t + 1) > lo_min ? c.geom.begin(t + 1) : lo_min;
        p1 = c.geom.end(t + 1) < hi_max ? c.geom.end(t + 1) : hi_max;
      }
      paged_tile<S, Cvt>(c, sq, g, t_row0, R, w, t, p0, p1);
    }

    if (it.seg >= 0) {  // split mode: leave the partial states
      const int64_t ps = paged_part_stride(c);
      for (int64_t i = 0; i < n_vec; ++i) {
        const int64_t row = it.row0 + i / nrep;
        const int head = g * nrep + static_cast<int>(i % nrep);
        float* e = c.part + paged_part_index(c, it.seq, row, head, sg) * ps;
        e[0] = w.seg_m[i];
        e[1] = w.seg_l[i];
        e[2] = w.seg_has[i / nrep] ? 1.f : 0.f;
        e[3] = 0.f;
        if (w.seg_has[i / nrep])
          std::memcpy(e + kPartHeader, w.seg_acc + i * c.acc_stride,
                      static_cast<size_t>(hd) * sizeof(float));
      }
      continue;
    }
    for (int64_t i = 0; i < n_vec; ++i) {
      const int r = static_cast<int>(i / nrep);
      if (!w.seg_has[r]) continue;
      float* racc = w.run_acc + i * c.acc_stride;
      const float* sacc = w.seg_acc + i * c.acc_stride;
      if (!w.run_has[r]) {  // the first segment the row sees becomes the running state
        w.run_m[i] = w.seg_m[i];
        w.run_l[i] = w.seg_l[i];
        std::memcpy(racc, sacc, static_cast<size_t>(hd) * sizeof(float));
      } else {
        paged_fold<S>(w.run_m + i, w.run_l + i, racc, w.seg_m[i], w.seg_l[i], sacc, hd);
      }
    }
    for (int r = 0; r < R; ++r) w.run_has[r] |= w.seg_has[r];
  }
  if (it.seg >= 0) return;
  for (int64_t i = 0; i < n_vec; ++i) {
    const int r = static_cast<int>(i / nrep), rep = static_cast<int>(i % nrep);
    float* o = c.out + (t_row0 + r) * c.out_stride + (static_cast<int64_t>(g) * nrep + rep) * hd;
    if (w.run_has[r])
      paged_normalize<S>(w.run_acc + i * c.acc_stride,
                         paged_sum_with_sink(c, g * nrep + rep, w.run_m[i], w.run_l[i]), hd, o);
    else
      std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
  }
}

template <class S>
void g_paged_merge(const PagedCtx& c, float* entries, int64_t n_seg, int head, float* out) {
  const int hd = c.head_dim;
  const int64_t ps = paged_part_stride(c);
  float* run = nullptr;
  for (int64_t s = 0; s < n_seg; ++s) {
    float* e = entries + s * ps;
    if (e[2] == 0.f) continue;
    if (!run)
      run = e;  // the first segment the row sees is the running state (as g_paged_item)
    else
      paged_fold<S>(run, run + 1, run + kPartHeader, e[0], e[1], e + kPartHeader, hd);
  }
  if (run)
    paged_normalize<S>(run + kPartHeader, paged_sum_with_sink(c, head, run[0], run[1]), hd, out);
  else
    std::memset(out, 0, static_cast<size_t>(hd) * sizeof(float));
}

}  // namespace
}  // namespace triad::kernels
