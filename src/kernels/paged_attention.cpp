// Paged attention (paged_attention.h): argument checks, the tile geometry, the split of the work
// into PagedItems scheduled on the thread pool, the per-ISA kernel tables, the portable kScalar
// kernels, and the K/V row stores / loads. Baseline x86-64 code: no SIMD intrinsics here.
//
// Work split: an item is a chunk of `rows` query rows of one sequence x one kv head (its n_rep
// query heads share every K/V tile). rows = 16 / n_rep (at least 1), halved while there would
// be fewer than two items per thread, so a batch of decodes (one row each) gives
// n_seqs x n_kv_heads items and a long prefill gives many chunks. When there are still fewer
// than two items per thread and some row spans several segments (long-context decode with few
// kv heads), each item is split further by segment: the items leave per-segment partial states
// and a merge pass folds them, in segment order, with the same function an unsplit item uses,
// so splitting never changes a bit. Threads take items from an atomic counter, most expensive
// first.
//
// Scratch (per thread tiles, scores and states; the item list; the partial states) lives in
// thread_local buffers of the calling thread, grown on demand: the decode loop does not allocate.
// Thread-safety: paged_attention may run concurrently from different threads on different pools.
#include "kernels/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/checked_math.h"
#include "base/error.h"
#include "kernels/ops_impl.h"
#include "kernels/ops_vec_scalar.h"
#include "kernels/paged_attention_generic.h"
#include "kernels/paged_attention_impl.h"
#include "kernels/quant_blocks.h"
#include "tensor/fp8.h"

namespace triad::kernels {

namespace {

struct CvtScalar {
  static void rows(DType t, const uint8_t* src, uint64_t row_bytes, int64_t e0, int hd,
                   int64_t n_rows, float* dst) {
    for (int64_t r = 0; r < n_rows; ++r)
      paged_convert_row_scalar(t, src + r * row_bytes, e0, hd, dst + r * hd);
  }
};

void paged_item_scalar(const PagedCtx& c, const PagedItem& it, const PagedScratch& w) {
  g_paged_item<VecScalar, CvtScalar>(c, it, w);
}
void paged_merge_scalar(const PagedCtx& c, float* entries, int64_t n_seg, int head, float* out) {
  g_paged_merge<VecScalar>(c, entries, n_seg, head, out);
}

bool kv_type_ok(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 ||
         t == DType::kF8_E4M3 || t == DType::kF8_E5M2;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t m) {
  return (a + m - 1) / m * m;
}

void check_pool(const char* what, DType t, const uint8_t* base, uint64_t block_bytes,
                uint64_t row_bytes_, int64_t kv_dim, int32_t bs) {
  TRIAD_CHECK(kv_type_ok(t), "paged_attention: unsupported ", what, " dtype ", dtype_name(t));
  TRIAD_CHECK(t != DType::kQ8_0 || kv_dim % 32 == 0, "paged_attention: q8_0 ", what,
              " needs kv_dim % 32 == 0, kv_dim = ", kv_dim);
  const uint64_t need = row_bytes(t, static_cast<uint64_t>(kv_dim));
  TRIAD_CHECK(row_bytes_ >= need, "paged_attention: ", what, " row_bytes ", row_bytes_, " below ",
              need);
  auto bb = checked_mul(row_bytes_, static_cast<uint64_t>(bs));
  TRIAD_CHECK(bb && block_bytes >= *bb, "paged_attention: ", what, " block_bytes ", block_bytes,
              " below block_size * row_bytes");
  TRIAD_CHECK(base, "paged_attention: null ", what, " base");
}

void check_block(const PagedKvLayer& kv, const PagedSeq& s, size_t si, int64_t b) {
  const int32_t id = s.block_table[b];
  TRIAD_CHECK(id >= 0 && (kv.n_blocks <= 0 || id < kv.n_blocks), "paged_attention: sequence ", si,
              " block table entry ", b, " = ", id, " is visible to a query but not a block",
              kv.n_blocks > 0 ? " of the pool" : "");
}

// Checks everything paged_attention.h promises to check; returns the end of the last row range.
int64_t check_paged_args(const AttentionParams& p, const float* q, int64_t q_stride,
                         const int32_t* q_pos, const PagedKvLayer& kv,
                         std::span<const PagedSeq> seqs, const float* out, int64_t out_stride) {
  int64_t end = 0;
  bool any_kv = false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PagedSeq& s = seqs[i];
    TRIAD_CHECK(s.n_q >= 0 && s.q_begin >= 0 && s.q_begin <= (int64_t{1} << 40) &&
                    s.n_q <= (int64_t{1} << 40) && s.n_kv >= 0,
                "paged_attention: sequence ", i, " has bad counts: q_begin ", s.q_begin, ", n_q ",
                s.n_q, ", n_kv ", s.n_kv);
    if (s.n_q == 0) continue;
    TRIAD_CHECK(s.q_begin >= end, "paged_attention: sequence ", i, " rows [", s.q_begin, ", ",
                s.q_begin + s.n_q, ") overlap or precede an earlier sequence's rows (which end at ",
                end, ")");
    end = s.q_begin + s.n_q;
    TRIAD_CHECK(s.n_kv > 0 && s.block_table, "paged_attention: sequence ", i,
                " has queries but no cached keys / block table");
    any_kv = true;
  }
  check_attention_args(p, q, end, q_stride, q_pos, nullptr, nullptr, 0, 0, nullptr, out,
                       out_stride);
  if (!any_kv) return end;
  TRIAD_CHECK(kv.block_size > 0, "paged_attention: block_size ", kv.block_size);
  const int64_t kv_dim = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
  check_pool("K", kv.k_type, kv.k_base, kv.k_block_bytes, kv.k_row_bytes, kv_dim, kv.block_size);
  check_pool("V", kv.v_type, kv.v_base, kv.v_block_bytes, kv.v_row_bytes, kv_dim, kv.block_size);
  // Every block a query sees must be a real block. Rows usually come in position order, so
  // the blocks checked so far are kept as one interval and only new ones are checked.
  const int64_t bs = kv.block_size;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PagedSeq& s = seqs[i];
    int64_t c0 = 0, c1 = -1;  // checked blocks [c0, c1]
    for (int64_t t = s.q_begin; t < s.q_begin + s.n_q; ++t) {
      const int64_t pos = q_pos[t];
      TRIAD_CHECK(pos >= 0 && pos < s.n_kv, "paged_attention: row ", t, " position ", pos,
                  " outside the ", s.n_kv, " cached keys of sequence ", i);
      const int64_t lo = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
      const int64_t b0 = lo / bs, b1 = pos / bs;
      if (c1 < c0 || b1 < c0 - 1 || b0 > c1 + 1) {  // disjoint from the checked interval
        for (int64_t b = b0; b <= b1; ++b) check_block(kv, s, i, b);
        c0 = b0;
        c1 = b1;
        continue;
      }
      for (int64_t b = b0; b < c0; ++b) check_block(kv, s, i, b);
      for (int64_t b = c1 + 1; b <= b1; ++b) check_block(kv, s, i, b);
      c0 = std::min(c0, b0);
      c1 = std::max(c1, b1);
    }
  }
  return end;
}

// Scratch of the calling thread (see the file comment).
struct CallScratch {
  AlignedBuffer<float> f;
  AlignedBuffer<int64_t> i;
  AlignedBuffer<float> part;
  std::vector<PagedItem> items;
  std::vector<int64_t> part_off;
  std::vector<int32_t> n_seg;
  std::vector<int64_t> merge_rows;  // split mode: (sequence << 40 | local row) per query row
};

constexpr int64_t kSegmentKeys = 512;                   // target keys per segment
constexpr uint64_t kMaxPartFloats = uint64_t{1} << 26;  // split only below 256 MiB of partials

}  // namespace

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

PagedGeom paged_geom(int32_t block_size, int head_dim) {
  PagedGeom g;
  g.block_size = block_size;
  const int32_t target = attention_tile_for(head_dim);
  if (block_size <= target) {
    g.tile_keys = block_size * (target / block_size);
    g.max_keys = g.tile_keys;
    g.tiles_per_seg = static_cast<int32_t>(std::max<int64_t>(1, kSegmentKeys / g.tile_keys));
  } else {
    g.sub_keys = target;
    g.subs = static_cast<int32_t>(ceil_div(block_size, target));
    g.max_keys = target;
    g.tiles_per_seg =
        static_cast<int32_t>(g.subs * std::max<int64_t>(1, kSegmentKeys / block_size));
  }
  return g;
}

const PagedKernels& paged_kernels_for(IsaLevel level) {
  TRIAD_CHECK(isa_supported(level), "paged_kernels_for: this CPU cannot run ISA level ",
              isa_name(level));
  static constexpr PagedKernels scalar{IsaLevel::kScalar, &paged_item_scalar, &paged_merge_scalar};
  switch (level) {
    case IsaLevel::kAvx2:
      return paged_kernels_avx2();
    case IsaLevel::kAvx512:
      return paged_kernels_avx512();
    case IsaLevel::kScalar:
      break;
  }
  return scalar;
}

void paged_attention_at(IsaLevel level, const AttentionParams& p, const float* q, int64_t q_stride,
                        const int32_t* q_pos, const PagedKvLayer& kv,
                        std::span<const PagedSeq> seqs, float* out, int64_t out_stride,
                        ThreadPool& pool) {
  const PagedKernels& kern = paged_kernels_for(level);
  const int64_t n_rows_end = check_paged_args(p, q, q_stride, q_pos, kv, seqs, out, out_stride);
  if (n_rows_end == 0) return;
  TRIAD_CHECK(seqs.size() < (size_t{1} << 30), "paged_attention: too many sequences");

  PagedCtx c;
  c.head_dim = p.head_dim;
  c.n_heads = p.n_heads;
  c.n_rep = p.n_heads / p.n_kv_heads;
  c.scale = p.scale;
  c.softcap = p.softcap;
  c.sinks = p.sinks;
  c.window = p.window;
  c.q = q;
  c.q_stride = q_stride;
  c.q_pos = q_pos;
  c.out = out;
  c.out_stride = out_stride;
  c.kv = kv;
  c.seqs = seqs.data();
  c.geom = paged_geom(kv.block_size, p.head_dim);
  c.acc_stride = round_up(p.head_dim, 16);
  c.v_is_k = kv.v_base == kv.k_base && kv.v_type == kv.k_type && kv.v_row_bytes == kv.k_row_bytes &&
             kv.v_block_bytes == kv.k_block_bytes;
  const int nth = pool.size(), nkvh = p.n_kv_heads, nrep = c.n_rep;

  thread_local CallScratch cs;
  // Rows per item.
  int64_t max_nq = 0;
  for (const PagedSeq& s : seqs) max_nq = std::max(max_nq, s.n_q);
  int64_t rows = nrep >= 16 ? 1 : 16 / nrep;
  rows = std::min(rows, max_nq);
  auto count_items = [&](int64_t r) {
    int64_t n = 0;
    for (const PagedSeq& s : seqs) n += ceil_div(s.n_q, r) * nkvh;
    return n;
  };
  while (rows > 1 && count_items(rows) < 2 * nth) rows = (rows + 1) / 2;
  const int64_t base_items = count_items(rows);

  // Segments per sequence, and whether to split items by segment.
  cs.n_seg.assign(seqs.size(), 1);
  const PagedGeom& G = c.geom;
  int32_t max_seg = 1;
  uint64_t part_floats = 0;
  const uint64_t ps = static_cast<uint64_t>(c.acc_stride + kPartHeader);
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].n_q == 0) continue;
    cs.n_seg[i] = static_cast<int32_t>(G.tile_of(seqs[i].n_kv - 1) / G.tiles_per_seg + 1);
    max_seg = std::max(max_seg, cs.n_seg[i]);
    part_floats += static_cast<uint64_t>(seqs[i].n_q) * static_cast<uint64_t>(p.n_heads) *
                   static_cast<uint64_t>(cs.n_seg[i]) * ps;
  }
  const bool split =
      nth > 1 && base_items < 2 * nth && max_seg > 1 && part_floats <= kMaxPartFloats;
  if (split) {
    if (cs.part.size() < part_floats) cs.part.resize(part_floats);
    std::memset(cs.part.data(), 0, part_floats * sizeof(float));  // every "has" flag 0
    cs.part_off.assign(seqs.size(), 0);
    cs.merge_rows.clear();
    int64_t off = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      cs.part_off[i] = off;
      off += seqs[i].n_q * p.n_heads * cs.n_seg[i];
      for (int64_t r = 0; r < seqs[i].n_q; ++r)
        cs.merge_rows.push_back(static_cast<int64_t>(i) << 40 | r);
    }
    c.part = cs.part.data();
    c.part_off = cs.part_off.data();
    c.n_seg = cs.n_seg.data();
  }

  // Items, most expensive first.
  cs.items.clear();
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PagedSeq& s = seqs[i];
    for (int64_t r0 = 0; r0 < s.n_q; r0 += rows) {
      const int32_t nr = static_cast<int32_t>(std::min(rows, s.n_q - r0));
      int64_t lo = INT64_MAX, hi = 0;
      for (int64_t r = r0; r < r0 + nr; ++r) {
        const int64_t pos = q_pos[s.q_begin + r];
        lo = std::min<int64_t>(lo, p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0);
        hi = std::max<int64_t>(hi, pos + 1);
      }
      const int64_t sg0 = G.tile_of(lo) / G.tiles_per_seg,
                    sg1 = G.tile_of(hi - 1) / G.tiles_per_seg;
      for (int32_t g = 0; g < nkvh; ++g) {
        PagedItem it;
        it.seq = static_cast<int32_t>(i);
        it.kv_head = g;
        it.row0 = r0;
        it.n_rows = nr;
        if (!split) {
          it.cost = nr * (hi - lo);
          cs.items.push_back(it);
          continue;
        }
        for (int64_t sg = sg0; sg <= sg1; ++sg) {
          it.seg = static_cast<int32_t>(sg);
          const int64_t k0 = G.begin(sg * G.tiles_per_seg),
                        k1 = G.end((sg + 1) * G.tiles_per_seg - 1);
          it.cost = nr * std::max<int64_t>(0, std::min(hi, k1) - std::max(lo, k0));
          cs.items.push_back(it);
        }
      }
    }
  }
  std::sort(cs.items.begin(), cs.items.end(),
            [](const PagedItem& a, const PagedItem& b) { return a.cost > b.cost; });

  // Per-thread scratch.
  const int64_t hd = p.head_dim, mk4 = round_up(G.max_keys, 4);
  const int64_t n_vec = rows * nrep, nv16 = round_up(n_vec, 16);
  const int64_t score_stride = mk4 + 16;
  const int64_t per_f =
      2 * mk4 * hd + kPagedMaxNq * score_stride + 2 * (2 * nv16 + n_vec * c.acc_stride);
  const int64_t per_i = 6 * rows;
  auto total_f = checked_mul(static_cast<uint64_t>(nth), static_cast<uint64_t>(per_f));
  TRIAD_CHECK(total_f && *total_f < (uint64_t{1} << 36), "paged_attention: scratch size overflows");
  if (cs.f.size() < *total_f) cs.f.resize(*total_f);
  if (cs.i.size() < static_cast<size_t>(nth * per_i)) cs.i.resize(nth * per_i);
  float* const fbuf = cs.f.data();  // (a lambda must not name the thread_local itself)
  int64_t* const ibuf = cs.i.data();
  const PagedItem* const items = cs.items.data();
  const int64_t n_items = static_cast<int64_t>(cs.items.size());

  // Items are claimed one at a time, largest first, by whichever threads are running.
  pool.for_each_chunk(n_items, [&](int64_t k, int tid) {
    PagedScratch w;
    float* f = fbuf + tid * per_f;
    w.kt = f;
    w.vt = w.kt + mk4 * hd;
    w.scores = w.vt + mk4 * hd;
    w.score_stride = score_stride;
    w.seg_m = w.scores + kPagedMaxNq * score_stride;
    w.seg_l = w.seg_m + nv16;
    w.seg_acc = w.seg_l + nv16;
    w.run_m = w.seg_acc + n_vec * c.acc_stride;
    w.run_l = w.run_m + nv16;
    w.run_acc = w.run_l + nv16;
    int64_t* ip = ibuf + tid * per_i;
    w.row_lo = ip;
    w.row_hi = ip + rows;
    w.row_a = ip + 2 * rows;
    w.row_e = ip + 3 * rows;
    w.seg_has = ip + 4 * rows;
    w.run_has = ip + 5 * rows;
    kern.item(c, items[k], w);
  });
  if (!split) return;
  const int64_t* const mrows = cs.merge_rows.data();
  const int64_t n_merge = static_cast<int64_t>(cs.merge_rows.size()) * p.n_heads;
  pool.parallel_for(n_merge, [&](int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) {
      const int64_t mr = mrows[x / p.n_heads];
      const int32_t s = static_cast<int32_t>(mr >> 40);
      const int64_t row = mr & ((int64_t{1} << 40) - 1);
      const int head = static_cast<int>(x % p.n_heads);
      float* entries = c.part + paged_part_index(c, s, row, head, 0) * static_cast<int64_t>(ps);
      float* o = out + (seqs[s].q_begin + row) * out_stride + static_cast<int64_t>(head) * hd;
      kern.merge(c, entries, c.n_seg[s], head, o);
    }
  });
}

void paged_attention(const AttentionParams& p, const float* q, int64_t q_stride,
                     const int32_t* q_pos, const PagedKvLayer& kv, std::span<const PagedSeq> seqs,
                     float* out, int64_t out_stride, ThreadPool& pool) {
  paged_attention_at(best_isa(), p, q, q_stride, q_pos, kv, seqs, out, out_stride, pool);
}

namespace {

void check_row_args(const char* fn, DType type, const void* a, const void* b, int64_t n) {
  TRIAD_CHECK(kv_type_ok(type), fn, ": unsupported dtype ", dtype_name(type));
  TRIAD_CHECK(n >= 0, fn, ": negative element count ", n);
  TRIAD_CHECK(type != DType::kQ8_0 || n % kQK8_0 == 0, fn, ": q8_0 needs n % 32 == 0, n = ", n);
  TRIAD_CHECK(n == 0 || (a && b), fn, ": null pointer");
}

}  // namespace

void kv_store_row(DType type, const float* src, int64_t n, void* dst) {
  check_row_args("kv_store_row", type, src, dst, n);
  uint8_t* d = static_cast<uint8_t*>(dst);
  switch (type) {
    case DType::kF32:
      std::memcpy(d, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_fp16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    case DType::kQ8_0:
      // As GGML's quantize_row_q8_0_ref, step for step.
      for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const float* x = src + b * kQK8_0;
        float amax = 0.f;
        for (int j = 0; j < kQK8_0; ++j) {
          const float v = std::fabs(x[j]);
          amax = amax > v ? amax : v;
        }
        const float scale = amax / 127.f;
        const float id = scale != 0.f ? 1.f / scale : 0.f;
        BlockQ8_0 blk;
        blk.d = f32_to_fp16(scale);
        for (int j = 0; j < kQK8_0; ++j) {
          // |x * id| <= 127 (+ rounding) for finite rows; the clamp only defines what a
          // non-finite input gives (GGML's cast would be undefined there).
          const float r = std::roundf(x[j] * id);
          blk.qs[j] = static_cast<int8_t>(r >= -127.f && r <= 127.f ? r
                                                                    : (r > 0.f   ? 127.f
                                                                       : r < 0.f ? -127.f
                                                                                 : 0.f));
        }
        std::memcpy(d + b * sizeof(BlockQ8_0), &blk, sizeof(BlockQ8_0));
      }
      return;
    case DType::kF8_E4M3:
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_e4m3(src[i]);
      return;
    case DType::kF8_E5M2:
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_e5m2(src[i]);
      return;
    default:
      return;
  }
}

void kv_load_row(DType type, const void* src, int64_t n, float* dst) {
  check_row_args("kv_load_row", type, src, dst, n);
  if (n > 0) paged_convert_row_scalar(type, static_cast<const uint8_t*>(src), 0, n, dst);
}

}  // namespace triad::kernels
