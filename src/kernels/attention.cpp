// Flash-style causal GQA attention (attention.h): argument checks, the split of the work into
// AttnUnits (attention_generic.h) scheduled on the thread pool, and the portable kScalar unit.
// Baseline x86-64 code: no SIMD intrinsics here (the units of each ISA come from ops_for()).
//
// Key tile: attention_tile_for(head_dim) = clamp(4096 / head_dim, 16, 256) slots (64 for
// head_dim 64, 16 for 256, 256 for 8), i.e. one K tile plus one V tile of a kv head is ~32 KiB:
// it fits the 32 KiB L1d of the Zen 4 / recent Intel cores we target while the n_rep x rows
// query vectors of a unit reuse it, and a unit's whole working set (tile, scores, accumulators)
// stays far inside the 1-2 MiB L2.
//
// Work split: a unit is a block of `rows` query rows x one kv head (its n_rep query heads share
// every K/V tile load). rows = 16 / n_rep (at least 1), halved while there would be fewer than
// two units per thread. When there are still fewer units than threads (decode with few kv
// heads, e.g. MQA) and the cache spans >= 2 tiles, the kv range is split into chunks too; each
// chunk leaves its (max, sum, accumulator) and a merge pass combines them exactly
// (out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c). Threads take units from an atomic
// counter, most expensive (latest query rows) first.
//
// Scratch (per thread: two score tiles plus the units' state) lives in a thread_local buffer of
// the calling thread, grown on demand, so the decode loop does not allocate.
// out must not overlap q, k or v (units of other rows may still be reading them).
// Thread-safety: attention() may run concurrently from different threads on different pools.
#include "kernels/attention.h"

#include <atomic>
#include <cmath>

#include "base/aligned_buffer.h"
#include "base/checked_math.h"
#include "base/error.h"
#include "kernels/attention_generic.h"
#include "kernels/ops_impl.h"
#include "kernels/ops_vec_scalar.h"

namespace triad::kernels {

void attn_unit_scalar(const AttnUnit& u) { g_attn_unit<VecScalar>(u); }

int attention_tile_for(int head_dim) {
  int t = head_dim > 0 ? 4096 / head_dim : 256;
  t = t < 16 ? 16 : (t > 256 ? 256 : t);
  return t & ~3;
}

void check_attention_args(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
                          const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
                          int64_t kv_stride, const int32_t* kv_pos, const float* out,
                          int64_t out_stride) {
  TRIAD_CHECK(p.n_heads > 0 && p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0,
              "attention: n_heads ", p.n_heads, " must be a positive multiple of n_kv_heads ",
              p.n_kv_heads);
  TRIAD_CHECK(p.head_dim > 0 && p.head_dim <= 65536, "attention: bad head_dim ", p.head_dim);
  TRIAD_CHECK(std::isfinite(p.scale), "attention: scale is not finite");
  TRIAD_CHECK(std::isfinite(p.softcap) && p.softcap >= 0.f, "attention: bad softcap ", p.softcap);
  TRIAD_CHECK(p.window >= 0, "attention: negative window ", p.window);
  TRIAD_CHECK(n_q >= 0 && n_kv >= 0, "attention: bad counts n_q=", n_q, " n_kv=", n_kv);
  const int64_t width = static_cast<int64_t>(p.n_heads) * p.head_dim;  // < 2^47: no overflow
  const int64_t kv_width = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  if (n_q > 0) {
    TRIAD_CHECK(q && q_pos && out, "attention: null q, q_pos or out");
    TRIAD_CHECK(q_stride >= width && out_stride >= width, "attention: q_stride ", q_stride,
                " / out_stride ", out_stride, " below n_heads * head_dim = ", width);
    TRIAD_CHECK(checked_mul(static_cast<uint64_t>(n_q), static_cast<uint64_t>(q_stride)) &&
                    checked_mul(static_cast<uint64_t>(n_q), static_cast<uint64_t>(out_stride)),
                "attention: q / out size overflows");
  }
  if (n_kv > 0) {
    TRIAD_CHECK(k && v && kv_pos, "attention: null k, v or kv_pos");
    TRIAD_CHECK(kv_stride >= kv_width, "attention: kv_stride ", kv_stride,
                " below n_kv_heads * head_dim = ", kv_width);
    TRIAD_CHECK(checked_mul(static_cast<uint64_t>(n_kv), static_cast<uint64_t>(kv_stride)),
                "attention: k / v size overflows");
  }
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round16(int64_t a) { return (a + 15) / 16 * 16; }

// Combines the per-chunk states of query vector (t, h) into its output row.
void merge_chunks(const float* pm, const float* pl, const float* pacc, int64_t acc_stride,
                  int n_chunks, int hd, float* o) {
  float mx = -__builtin_inff();
  for (int c = 0; c < n_chunks; ++c) mx = pm[c] > mx ? pm[c] : mx;
  for (int d = 0; d < hd; ++d) o[d] = 0.f;
  if (mx == -__builtin_inff()) return;  // no visible key
  float l = 0.f;
  for (int c = 0; c < n_chunks; ++c) {
    if (pm[c] == -__builtin_inff()) continue;
    const float w = std::exp(pm[c] - mx);
    l += w * pl[c];
    const float* a = pacc + c * acc_stride;
    for (int d = 0; d < hd; ++d) o[d] += w * a[d];
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int d = 0; d < hd; ++d) o[d] *= inv;
}

}  // namespace

void attention_at(IsaLevel level, const AttentionParams& p, const float* q, int64_t n_q,
                  int64_t q_stride, const int32_t* q_pos, const float* k, const float* v,
                  int64_t n_kv, int64_t kv_stride, const int32_t* kv_pos, float* out,
                  int64_t out_stride, ThreadPool& pool) {
  check_attention_args(p, q, n_q, q_stride, q_pos, k, v, n_kv, kv_stride, kv_pos, out,
                       out_stride);
  if (n_q == 0) return;
  const OpsTable& ops = ops_for(level);
  const int hd = p.head_dim, nkvh = p.n_kv_heads, nrep = p.n_heads / p.n_kv_heads;
  if (n_kv == 0) {  // nothing visible anywhere
    for (int64_t t = 0; t < n_q; ++t)
      for (int64_t i = 0; i < static_cast<int64_t>(p.n_heads) * hd; ++i) out[t * out_stride + i] = 0.f;
    return;
  }
  const int tile = attention_tile_for(hd);
  const int nth = pool.size();

  int64_t rows = nrep >= 16 ? 1 : 16 / nrep;
  if (rows > n_q) rows = n_q;
  while (rows > 1 && ceil_div(n_q, rows) * nkvh < 2 * nth) rows = (rows + 1) / 2;
  const int64_t units = ceil_div(n_q, rows) * nkvh;
  const int64_t n_tiles = ceil_div(n_kv, tile);
  int64_t n_chunks = 1;
  if (units < nth && n_tiles >= 2) {
    n_chunks = ceil_div(nth, units);
    if (n_chunks > n_tiles) n_chunks = n_tiles;
  }
  const int64_t chunk_len = ceil_div(n_tiles, n_chunks) * tile;
  n_chunks = ceil_div(n_kv, chunk_len);

  // Scratch: per thread [2 score tiles | m | l | acc], then the chunk states when split.
  const int64_t acc_stride = round16(hd);
  const int64_t n_vec = rows * nrep;
  const int64_t per_thread = 2 * round16(tile) + 2 * round16(n_vec) + n_vec * acc_stride;
  int64_t n_part = 0;  // query vectors x chunks
  if (n_chunks > 1) {
    auto np = checked_mul(static_cast<uint64_t>(n_q) * static_cast<uint64_t>(p.n_heads),
                          static_cast<uint64_t>(n_chunks));
    TRIAD_CHECK(np && *np < (uint64_t{1} << 40), "attention: too many query rows");
    n_part = static_cast<int64_t>(*np);
  }
  auto total = checked_add(static_cast<uint64_t>(nth) * static_cast<uint64_t>(per_thread),
                           static_cast<uint64_t>(n_part) * static_cast<uint64_t>(acc_stride + 2));
  TRIAD_CHECK(total && *total < (uint64_t{1} << 40), "attention: scratch size overflows");
  thread_local AlignedBuffer<float> scratch;
  if (scratch.size() < *total) scratch.resize(*total);
  // A lambda does not capture a thread_local (it would name the worker's own): use a pointer.
  float* const sbuf = scratch.data();
  float* part_m = sbuf + nth * per_thread;
  float* part_l = part_m + n_part;
  float* part_acc = part_l + n_part;

  const int64_t n_tasks = units * n_chunks;
  std::atomic<int64_t> next{0};
  pool.run([&](int tid, int) {
    float* base = sbuf + tid * per_thread;
    AttnUnit u;
    u.head_dim = hd;
    u.n_rep = nrep;
    u.scale = p.scale;
    u.softcap = p.softcap;
    u.window = p.window;
    u.tile = tile;
    u.q_stride = q_stride;
    u.kv_stride = kv_stride;
    u.scores = base;
    u.m = base + 2 * round16(tile);
    u.l = u.m + round16(n_vec);
    u.acc = u.l + round16(n_vec);
    u.acc_stride = acc_stride;
    u.out_stride = out_stride;
    for (;;) {
      const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= n_tasks) break;
      const int64_t id = n_tasks - 1 - t;  // latest query rows (most keys) first
      const int64_t c = id % n_chunks, g = id / n_chunks % nkvh, qb = id / n_chunks / nkvh;
      const int64_t r0 = qb * rows, j0 = c * chunk_len;
      u.n_rows = static_cast<int>(n_q - r0 < rows ? n_q - r0 : rows);
      u.n_kv = n_kv - j0 < chunk_len ? n_kv - j0 : chunk_len;
      u.q = q + r0 * q_stride + g * nrep * hd;
      u.q_pos = q_pos + r0;
      u.k = k + j0 * kv_stride + g * hd;
      u.v = v + j0 * kv_stride + g * hd;
      u.kv_pos = kv_pos + j0;
      u.out = n_chunks == 1 ? out + r0 * out_stride + g * nrep * hd : nullptr;
      ops.attn_unit(u);
      if (n_chunks == 1) continue;
      for (int64_t qi = 0; qi < u.n_rows * nrep; ++qi) {
        const int64_t h = g * nrep + qi % nrep, row = r0 + qi / nrep;
        const int64_t idx = (row * p.n_heads + h) * n_chunks + c;
        part_m[idx] = u.m[qi];
        part_l[idx] = u.l[qi];
        const float* a = u.acc + qi * acc_stride;
        float* dst = part_acc + idx * acc_stride;
        for (int d = 0; d < hd; ++d) dst[d] = a[d];
      }
    }
  });
  if (n_chunks == 1) return;
  pool.parallel_for(n_q * p.n_heads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t row = i / p.n_heads, h = i % p.n_heads, base = i * n_chunks;
      merge_chunks(part_m + base, part_l + base, part_acc + base * acc_stride, acc_stride,
                   static_cast<int>(n_chunks), hd, out + row * out_stride + h * hd);
    }
  });
}

void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
               const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
               int64_t kv_stride, const int32_t* kv_pos, float* out, int64_t out_stride,
               ThreadPool& pool) {
  attention_at(best_isa(), p, q, n_q, q_stride, q_pos, k, v, n_kv, kv_stride, kv_pos, out,
               out_stride, pool);
}

}  // namespace triad::kernels
