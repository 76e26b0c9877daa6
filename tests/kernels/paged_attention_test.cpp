// Paged attention (kernels/paged_attention.h) at every ISA level this CPU supports (up to
// best_isa(), so TRIAD_ISA caps it):
//  - table-driven against the scalar reference ref::attention (double precision, ref/ops_ref.h)
//    on the same values (the contiguous K/V it reads are kv_load_row of the stored rows, so the
//    cache dtype's rounding is identical and only the kernel's arithmetic is measured): K and V dtypes independently, MHA / GQA / MQA, head sizes 8..256, block sizes
//    1..128 (tiles of several blocks and blocks cut into sub-tiles), windows with released
//    (kNoBlock) blocks, softcap, several sequences of different lengths with shuffled block ids
//    in one call, decode rows and prefill chunks at the tail of the context, long contexts
//    (several segments, split over threads). Pass iff |got - want| <= atol + rtol |want|.
//  - bitwise invariance: a sequence alone vs batched with others, 1 / 2 / 3 threads, a prompt
//    computed whole vs in chunks vs row by row (decode), and released blocks present vs kNoBlock.
//  - kv_store_row / kv_load_row: f32 exact, f16 / bf16 against tensor/fp16.h, q8_0 against the
//    GGML reference quantizer re-written here; argument checks.
#include "kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/ops_impl.h"
#include "kernels/paged_attention_impl.h"
#include "kernels/ref/ops_ref.h"
#include "tensor/fp8.h"
#include "tensor/fp16.h"

namespace triad::kernels {
namespace {

std::vector<IsaLevel> levels_to_test() {
  std::vector<IsaLevel> v;
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512})
    if (static_cast<int>(l) <= static_cast<int>(best_isa()) && isa_supported(l)) v.push_back(l);
  return v;
}

const char* short_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kQ8_0:
      return "q8";
    case DType::kF8_E4M3:
      return "e4m3";
    case DType::kF8_E5M2:
      return "e5m2";
    default:
      return "other";
  }
}

std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct SeqSpec {
  int32_t n_kv;
  int32_t n_q;  // query rows at positions n_kv - n_q .. n_kv - 1
};

struct Case {
  std::string name;
  int n_heads = 14, n_kv_heads = 2, head_dim = 64;
  DType kt = DType::kF16, vt = DType::kF16;
  int32_t bs = 16;
  int32_t window = 0;
  float softcap = 0.f;
  int threads = 2;
  std::vector<SeqSpec> seqs;
  double rtol = 1e-5, atol = 1e-6;
  bool v_is_k = false;  // latent attention: the V pool is the K pool (V = each key row)
  bool sinks = false;   // per-head sink logits (gpt-oss), some far above and below the scores
};

// A paged pool for one layer with every sequence's K/V rows stored at shuffled block ids.
struct Fixture {
  AttentionParams p;
  PagedKvLayer kv;
  std::vector<uint8_t> kmem, vmem;
  std::vector<float> sink_logits;
  int64_t kv_dim = 0;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<int32_t>> tables;  // full tables (no kNoBlock)
  std::vector<std::vector<float>> k, v;      // per sequence: n_kv x kv_dim, as loaded back
  std::vector<float> q;                      // query rows (stride qs), with a gap row between
  std::vector<int32_t> q_pos;                // sequences
  std::vector<int64_t> q_begin;
  int64_t qs = 0, os = 0, n_rows = 0;

  Fixture(const Case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
    p.window = c.window;
    p.softcap = c.softcap;
    if (c.sinks) {
      sink_logits = random_vec(rng, static_cast<size_t>(c.n_heads), -3.f, 3.f);
      sink_logits[0] = 40.f;   // dominates: the output shrinks toward 0
      sink_logits[1] = -60.f;  // negligible
      p.sinks = sink_logits.data();
    }
    kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
    specs = c.seqs;
    kv.k_type = c.kt;
    kv.v_type = c.vt;
    kv.block_size = c.bs;
    kv.k_row_bytes = row_bytes(c.kt, kv_dim) + 6;  // odd padding: rows are not aligned
    kv.v_row_bytes = row_bytes(c.vt, kv_dim) + 10;
    kv.k_block_bytes = kv.k_row_bytes * c.bs + 64;
    kv.v_block_bytes = kv.v_row_bytes * c.bs + 32;
    if (c.v_is_k) {
      kv.v_type = kv.k_type;
      kv.v_row_bytes = kv.k_row_bytes;
      kv.v_block_bytes = kv.k_block_bytes;
    }
    int32_t total = 3;  // a few spare blocks
    for (const SeqSpec& s : specs) total += (s.n_kv + c.bs - 1) / c.bs;
    kv.n_blocks = total;
    // 0xFF everywhere: NaN in every dtype, so reading a row that was never written shows.
    kmem.assign(kv.k_block_bytes * total, 0xFF);
    vmem.assign(kv.v_block_bytes * total, 0xFF);
    kv.k_base = kmem.data();
    kv.v_base = c.v_is_k ? kmem.data() : vmem.data();
    std::vector<int32_t> ids(total);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    size_t next = 0;
    const int64_t width = static_cast<int64_t>(c.n_heads) * c.head_dim;
    qs = width + 3;
    os = width + 5;
    for (const SeqSpec& s : specs) {
      std::vector<int32_t> table((s.n_kv + c.bs - 1) / c.bs);
      for (int32_t& b : table) b = ids[next++];
      std::vector<float> kf = random_vec(rng, s.n_kv * kv_dim, -1.f, 1.f);
      std::vector<float> vf = random_vec(rng, s.n_kv * kv_dim, -1.f, 1.f);
      for (int64_t j = 0; j < s.n_kv; ++j) {
        uint8_t* kr = kmem.data() + table[j / c.bs] * kv.k_block_bytes + j % c.bs * kv.k_row_bytes;
        uint8_t* vr = vmem.data() + table[j / c.bs] * kv.v_block_bytes + j % c.bs * kv.v_row_bytes;
        kv_store_row(c.kt, kf.data() + j * kv_dim, kv_dim, kr);
        kv_load_row(c.kt, kr, kv_dim, kf.data() + j * kv_dim);
        if (c.v_is_k) {
          std::copy_n(kf.data() + j * kv_dim, kv_dim, vf.data() + j * kv_dim);
          continue;
        }
        kv_store_row(c.vt, vf.data() + j * kv_dim, kv_dim, vr);
        kv_load_row(c.vt, vr, kv_dim, vf.data() + j * kv_dim);
      }
      tables.push_back(std::move(table));
      k.push_back(std::move(kf));
      v.push_back(std::move(vf));
      q_begin.push_back(n_rows);
      for (int32_t r = 0; r < s.n_q; ++r) q_pos.push_back(s.n_kv - s.n_q + r);
      q_pos.push_back(0);  // the gap row (belongs to no sequence)
      n_rows += s.n_q + 1;
    }
    q = random_vec(rng, n_rows * qs, -2.f, 2.f);
  }

  // Table of sequence i with the blocks that no query of rows [r0, r0 + n) can see released.
  std::vector<int32_t> released_table(size_t i, int64_t first_pos) const {
    std::vector<int32_t> t = tables[i];
    if (p.window <= 0) return t;
    for (size_t b = 0; b < t.size(); ++b)
      if (static_cast<int64_t>(b + 1) * kv.block_size - 1 <= first_pos - p.window) t[b] = kNoBlock;
    return t;
  }

  std::vector<PagedSeq> paged_seqs(std::vector<std::vector<int32_t>>& hold) const {
    std::vector<PagedSeq> out;
    hold.clear();
    for (size_t i = 0; i < specs.size(); ++i)
      hold.push_back(released_table(i, specs[i].n_kv - specs[i].n_q));
    for (size_t i = 0; i < specs.size(); ++i)
      out.push_back(PagedSeq{q_begin[i], specs[i].n_q, hold[i].data(), specs[i].n_kv});
    return out;
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double excess = err - (atol + rtol * std::fabs(want[i]));
    if (std::isnan(got[i]) != std::isnan(want[i]) || excess > worst_excess) {
      worst_excess = std::isnan(got[i]) != std::isnan(want[i]) ? INFINITY : excess;
      worst = i;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " got " << got[worst] << " want "
                               << want[worst];
}

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

using Param = std::tuple<Case, IsaLevel>;
class PagedAttentionTest : public ::testing::TestWithParam<Param> {};

TEST_P(PagedAttentionTest, MatchesScalarReference) {
  const auto& [c, level] = GetParam();
  Fixture f(c, static_cast<uint32_t>(std::hash<std::string>{}(c.name)));
  const float sentinel = 12345.f;
  std::vector<float> got(f.n_rows * f.os, sentinel), want(f.n_rows * f.os, sentinel);
  std::vector<std::vector<int32_t>> hold;
  const std::vector<PagedSeq> seqs = f.paged_seqs(hold);
  ThreadPool pool(c.threads);
  paged_attention_at(level, f.p, f.q.data(), f.qs, f.q_pos.data(), f.kv, seqs, got.data(), f.os,
                     pool);
  for (size_t i = 0; i < f.specs.size(); ++i) {
    std::vector<int32_t> kv_pos(f.specs[i].n_kv);
    std::iota(kv_pos.begin(), kv_pos.end(), 0);
    const int64_t r0 = f.q_begin[i];
    ref::attention(f.p, f.q.data() + r0 * f.qs, f.specs[i].n_q, f.qs, f.q_pos.data() + r0,
                   f.k[i].data(), f.v[i].data(), f.specs[i].n_kv, f.kv_dim, kv_pos.data(),
                   want.data() + r0 * f.os, f.os);
  }
  expect_close(got, want, c.rtol, c.atol, c.name + " @ " + isa_name(level));
  // Gap rows and row padding are never written.
  const int64_t width = static_cast<int64_t>(c.n_heads) * c.head_dim;
  for (int64_t t = 0; t < f.n_rows; ++t) {
    const bool gap = std::find(f.q_begin.begin(), f.q_begin.end(), t + 1) != f.q_begin.end() ||
                     t == f.n_rows - 1;
    for (int64_t x = gap ? 0 : width; x < f.os; ++x) {
      ASSERT_EQ(got[t * f.os + x], sentinel) << c.name << " row " << t << " col " << x;
    }
  }
  if (level == best_isa()) {  // the public function dispatches to this very kernel
    std::vector<float> pub(got.size(), sentinel);
    paged_attention(f.p, f.q.data(), f.qs, f.q_pos.data(), f.kv, seqs, pub.data(), f.os, pool);
    EXPECT_TRUE(same_bits(pub.data(), got.data(), got.size())) << c.name;
  }
}

// Sequences of different lengths: decodes (1 row) and prefill tails.
const std::vector<SeqSpec> kMix = {{1, 1}, {37, 1}, {200, 1}, {150, 23}, {64, 64}, {97, 5}};

std::vector<Case> make_cases() {
  std::vector<Case> v;
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0};
  for (DType kt : types) {
    for (DType vt : types) {
      const std::string tn = std::string(short_name(kt)) + "_" + short_name(vt);
      v.push_back({.name = "gqa_" + tn, .kt = kt, .vt = vt, .seqs = kMix});
      v.push_back({.name = "mqa_hd128_bs32_win_cap_" + tn,
                   .n_heads = 8,
                   .n_kv_heads = 1,
                   .head_dim = 128,
                   .kt = kt,
                   .vt = vt,
                   .bs = 32,
                   .window = 45,
                   .softcap = 20.f,
                   .seqs = kMix});
    }
  }
  // FP8 caches: each format for K and V, and mixed with f16.
  for (auto [kt, vt] : {std::pair{DType::kF8_E4M3, DType::kF8_E4M3}, std::pair{DType::kF8_E5M2, DType::kF8_E5M2},
                        std::pair{DType::kF8_E4M3, DType::kF16}, std::pair{DType::kF16, DType::kF8_E5M2}}) {
    const std::string tn = std::string(short_name(kt)) + "_" + short_name(vt);
    v.push_back({.name = "gqa_" + tn, .kt = kt, .vt = vt, .seqs = kMix});
    v.push_back({.name = "mqa_hd128_bs32_win_cap_" + tn, .n_heads = 8, .n_kv_heads = 1, .head_dim = 128,
                 .kt = kt, .vt = vt, .bs = 32, .window = 45, .softcap = 20.f, .seqs = kMix});
    v.push_back({.name = "mha_hd72_bs16_" + tn, .n_heads = 4, .n_kv_heads = 4, .head_dim = 72,
                 .kt = kt, .vt = vt, .bs = 16, .seqs = kMix});
  }
  auto add = [&](Case c) { v.push_back(std::move(c)); };
  add({.name = "mha_hd64_bs1", .n_heads = 4, .n_kv_heads = 4, .bs = 1, .seqs = kMix});
  add({.name = "mha_hd64_bs1_win",
       .n_heads = 4,
       .n_kv_heads = 4,
       .kt = DType::kF32,
       .vt = DType::kF32,
       .bs = 1,
       .window = 30,
       .seqs = kMix});
  add({.name = "gqa_bs32_win_f32",
       .kt = DType::kF32,
       .vt = DType::kF32,
       .bs = 32,
       .window = 40,
       .seqs = kMix});
  add({.name = "gqa_bs16_cap_q8",
       .kt = DType::kQ8_0,
       .vt = DType::kQ8_0,
       .softcap = 5.f,
       .seqs = kMix});
  add({.name = "gqa_bs48", .bs = 48, .window = 70, .seqs = kMix});             // 48-key tiles
  add({.name = "gqa_bs100_subtiles", .bs = 100, .window = 90, .seqs = kMix});  // 64 + 36
  add({.name = "gqa_bs128_subtiles", .kt = DType::kBF16, .bs = 128, .seqs = kMix});
  add({.name = "mqa_hd128_bs16", .n_heads = 8, .n_kv_heads = 1, .head_dim = 128, .seqs = kMix});
  add({.name = "hd8_f32_bs16",
       .n_heads = 8,
       .n_kv_heads = 4,
       .head_dim = 8,
       .kt = DType::kF32,
       .vt = DType::kF32,
       .seqs = kMix});
  add({.name = "hd8_f16_bs1_win",
       .n_heads = 8,
       .n_kv_heads = 4,
       .head_dim = 8,
       .bs = 1,
       .window = 20,
       .seqs = kMix});
  add({.name = "hd8_q8_unaligned_heads",
       .n_heads = 8,
       .n_kv_heads = 4,
       .head_dim = 8,
       .kt = DType::kQ8_0,
       .vt = DType::kQ8_0,
       .seqs = kMix});  // 4 heads per Q8_0 block
  add({.name = "hd12_f16_f32",
       .n_heads = 6,
       .n_kv_heads = 2,
       .head_dim = 12,
       .vt = DType::kF32,
       .bs = 16,
       .window = 33,
       .seqs = kMix});
  add({.name = "hd256_gemma_like",
       .n_heads = 4,
       .n_kv_heads = 1,
       .head_dim = 256,
       .window = 100,
       .softcap = 50.f,
       .seqs = kMix});
  add({.name = "hd64_mqa_threads1", .n_heads = 4, .n_kv_heads = 1, .threads = 1, .seqs = kMix});
  // Attention sinks (gpt-oss): with a window, and a long decode split into segments (the sink
  // joins in the merge).
  add({.name = "sinks_gqa_win", .n_heads = 8, .n_kv_heads = 2, .window = 37, .seqs = kMix, .sinks = true});
  add({.name = "sinks_long_decode_split", .n_heads = 4, .n_kv_heads = 1, .kt = DType::kQ8_0,
       .seqs = {{1500, 1}, {600, 3}}, .sinks = true});
  // Latent attention (DeepSeek MLA, absorbed): one KV head whose rows are both K and V.
  for (DType t : {DType::kF16, DType::kQ8_0, DType::kBF16, DType::kF8_E4M3}) {
    add({.name = std::string("latent_v_is_k_hd96_") + short_name(t), .n_heads = 8, .n_kv_heads = 1,
         .head_dim = 96, .kt = t, .vt = t, .seqs = kMix, .v_is_k = true});
  }
  add({.name = "latent_v_is_k_long_decode_split", .n_heads = 16, .n_kv_heads = 1, .head_dim = 576,
       .seqs = {{1300, 1}, {40, 40}}, .v_is_k = true});
  // Long contexts: several 512-key segments; a lone decode is split over the threads.
  add({.name = "long_mqa_decode_split",
       .n_heads = 4,
       .n_kv_heads = 1,
       .kt = DType::kQ8_0,
       .seqs = {{1500, 1}}});
  add({.name = "long_gqa_decodes", .seqs = {{1300, 1}, {2100, 2}}});
  add({.name = "long_prefill_segments", .n_heads = 4, .n_kv_heads = 2, .seqs = {{700, 700}}});
  add({.name = "long_window_chunk",
       .n_heads = 8,
       .n_kv_heads = 2,
       .head_dim = 128,
       .kt = DType::kBF16,
       .vt = DType::kQ8_0,
       .window = 300,
       .seqs = {{1100, 40}, {900, 1}}});
  return v;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const IsaLevel l = std::get<1>(info.param);
  const char* isa = l == IsaLevel::kScalar ? "scalar" : l == IsaLevel::kAvx2 ? "avx2" : "avx512";
  return std::get<0>(info.param).name + "_" + isa;
}

INSTANTIATE_TEST_SUITE_P(AllCases, PagedAttentionTest,
                         ::testing::Combine(::testing::ValuesIn(make_cases()),
                                            ::testing::ValuesIn(levels_to_test())),
                         param_name);

// ---- Bitwise invariance ----------------------------------------------------------------------

std::vector<float> run_all(IsaLevel level, const Fixture& f, int threads) {
  std::vector<float> out(f.n_rows * f.os, 0.f);
  std::vector<std::vector<int32_t>> hold;
  const std::vector<PagedSeq> seqs = f.paged_seqs(hold);
  ThreadPool pool(threads);
  paged_attention_at(level, f.p, f.q.data(), f.qs, f.q_pos.data(), f.kv, seqs, out.data(), f.os,
                     pool);
  return out;
}

TEST(PagedAttentionInvariance, BatchAndThreads) {
  for (int32_t window : {0, 9, 40}) {
    Case c{.name = "inv", .window = window, .seqs = kMix};
    c.seqs.push_back({1400, 1});  // a long decode: split by segment when alone on 2 threads
    Fixture f(c, 7 + window);
    for (IsaLevel level : levels_to_test()) {
      const std::string what = std::string(isa_name(level)) + " window " + std::to_string(window);
      const std::vector<float> all2 = run_all(level, f, 2);
      EXPECT_TRUE(same_bits(all2.data(), run_all(level, f, 1).data(), all2.size())) << what;
      EXPECT_TRUE(same_bits(all2.data(), run_all(level, f, 3).data(), all2.size())) << what;
      // Each sequence alone, its rows copied to the start of a fresh q buffer.
      for (size_t i = 0; i < f.specs.size(); ++i) {
        const int64_t r0 = f.q_begin[i], n = f.specs[i].n_q;
        std::vector<float> q(f.q.begin() + r0 * f.qs, f.q.begin() + (r0 + n) * f.qs);
        std::vector<int32_t> pos(f.q_pos.begin() + r0, f.q_pos.begin() + r0 + n);
        const std::vector<int32_t> table = f.released_table(i, pos[0]);
        const PagedSeq s{0, n, table.data(), f.specs[i].n_kv};
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          std::vector<float> out(n * f.os, 0.f);
          paged_attention_at(level, f.p, q.data(), f.qs, pos.data(), f.kv, {&s, 1}, out.data(),
                             f.os, pool);
          for (int64_t r = 0; r < n; ++r)
            EXPECT_TRUE(same_bits(out.data() + r * f.os, all2.data() + (r0 + r) * f.os,
                                  f.p.n_heads * f.p.head_dim))
                << what << " sequence " << i << " row " << r << " threads " << threads;
        }
      }
    }
  }
}

// One prompt of n tokens: whole (n_kv = n) vs chunks (n_kv = chunk end, blocks before the
// chunk's first window released) vs one row at a time (decode); all bitwise equal.
void check_chunking(const Case& c, const std::vector<int32_t>& chunks) {
  Fixture f(c, 99);
  const int32_t n = c.seqs[0].n_kv;
  ASSERT_EQ(c.seqs[0].n_q, n);
  const int64_t w = static_cast<int64_t>(c.n_heads) * c.head_dim;
  for (IsaLevel level : levels_to_test()) {
    const std::vector<float> whole = run_all(level, f, 2);
    std::vector<float> chunked(whole.size(), 0.f), decode(whole.size(), 0.f);
    ThreadPool pool(2);
    auto run_range = [&](int32_t b, int32_t e, std::vector<float>& out) {
      const std::vector<int32_t> table = f.released_table(0, b);
      const PagedSeq s{b, e - b, table.data(), e};
      paged_attention_at(level, f.p, f.q.data(), f.qs, f.q_pos.data(), f.kv, {&s, 1}, out.data(),
                         f.os, pool);
    };
    int32_t b = 0;
    for (int32_t len : chunks) {
      const int32_t e = std::min(n, b + len);
      run_range(b, e, chunked);
      b = e;
    }
    ASSERT_EQ(b, n);
    for (int32_t t = 0; t < n; ++t) run_range(t, t + 1, decode);
    for (int32_t t = 0; t < n; ++t) {
      ASSERT_TRUE(same_bits(chunked.data() + t * f.os, whole.data() + t * f.os, w))
          << c.name << " @ " << isa_name(level) << " chunked row " << t;
      ASSERT_TRUE(same_bits(decode.data() + t * f.os, whole.data() + t * f.os, w))
          << c.name << " @ " << isa_name(level) << " decode row " << t;
    }
  }
}

TEST(PagedAttentionInvariance, ChunkedPrefillAndDecode) {
  const std::vector<int32_t> chunks = {1, 5, 64, 100, 3, 250, 1000};
  check_chunking({.name = "chunk_mqa_f16", .n_heads = 4, .n_kv_heads = 1, .seqs = {{1100, 1100}}},
                 chunks);
  check_chunking({.name = "chunk_gqa_q8_win",
                  .kt = DType::kQ8_0,
                  .vt = DType::kBF16,
                  .window = 200,
                  .softcap = 30.f,
                  .seqs = {{700, 700}}},
                 chunks);
  // A window shorter than a tile: each row's keys are a partial tile whose start differs from
  // that of the rows it shares an item with.
  check_chunking({.name = "chunk_gqa_small_window", .window = 13, .seqs = {{300, 300}}}, chunks);
  check_chunking({.name = "chunk_bs1_f32",
                  .n_heads = 2,
                  .n_kv_heads = 2,
                  .head_dim = 8,
                  .kt = DType::kF32,
                  .vt = DType::kF32,
                  .bs = 1,
                  .window = 70,
                  .seqs = {{600, 600}}},
                 chunks);
}

// ---- Row stores ------------------------------------------------------------------------------

// GGML's quantize_row_q8_0_ref, written out again: 34-byte blocks.
std::vector<uint8_t> q8_reference(const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() / 32 * 34);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    const uint16_t h = f32_to_fp16(d);
    std::memcpy(&out[b * 34], &h, 2);
    for (int j = 0; j < 32; ++j)
      out[b * 34 + 2 + j] =
          static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[b * 32 + j] * id)));
  }
  return out;
}

std::vector<float> store_test_row(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x = random_vec(rng, 256, -3.f, 3.f);
  for (int j = 32; j < 64; ++j) x[j] = 0.f;  // an all-zero block (d = 0)
  // A block with amax 127: d = 1 and id = 1 exactly, so x * id = 2.5 is a true tie, which
  // roundf rounds away from zero (3, not the 2 of round-to-nearest-even).
  for (int j = 64; j < 96; ++j) x[j] = 0.25f * static_cast<float>(j - 80);
  x[64] = 127.f;
  x[65] = 2.5f;
  x[66] = -2.5f;
  x[67] = 0.5f;
  x[100] = 1e-6f;    // f16 subnormal
  x[101] = 70000.f;  // f16 overflow -> inf
  x[102] = -0.f;
  x[103] = bits_to_f32(0x3f808000u);  // bf16 tie -> even (down)
  x[104] = bits_to_f32(0x3f818000u);  // bf16 tie -> even (up)
  x[105] = bits_to_f32(0x3f801000u);  // f16 tie (1 + 2^-11) -> even (1)
  x[106] = 65504.f;
  x[107] = 1e-30f;                                // bf16 keeps it, f16 flushes to 0
  for (int j = 128; j < 160; ++j) x[j] *= 1e-3f;  // a small-scale block
  return x;
}

TEST(KvRowStore, RoundTrips) {
  const std::vector<float> x = store_test_row(5);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> back(n);
  std::vector<uint8_t> buf(n * 4 + 1);
  // f32: exact (into an unaligned destination).
  kv_store_row(DType::kF32, x.data(), n, buf.data() + 1);
  kv_load_row(DType::kF32, buf.data() + 1, n, back.data());
  EXPECT_TRUE(same_bits(x.data(), back.data(), n));
  // f16 / bf16: the bits of tensor/fp16.h's round-to-nearest-even conversions.
  for (DType t : {DType::kF16, DType::kBF16}) {
    kv_store_row(t, x.data(), n, buf.data() + 1);
    kv_load_row(t, buf.data() + 1, n, back.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t want = t == DType::kF16 ? f32_to_fp16(x[i]) : f32_to_bf16(x[i]);
      uint16_t got;
      std::memcpy(&got, buf.data() + 1 + 2 * i, 2);
      ASSERT_EQ(got, want) << short_name(t) << " element " << i << " = " << x[i];
      const float wf = t == DType::kF16 ? fp16_to_f32(want) : bf16_to_f32(want);
      ASSERT_EQ(f32_to_bits(back[i]), f32_to_bits(wf)) << short_name(t) << " element " << i;
    }
  }
  EXPECT_EQ(f32_to_fp16(x[105]), 0x3c00);  // the tie case really is a tie, to even
  EXPECT_EQ(f32_to_bf16(x[103]), 0x3f80);
  EXPECT_EQ(f32_to_bf16(x[104]), 0x3f82);
  // q8_0: byte for byte the GGML reference; loads give fp16(d) * q.
  const std::vector<uint8_t> want = q8_reference(x);
  kv_store_row(DType::kQ8_0, x.data(), n, buf.data() + 1);
  ASSERT_EQ(0, std::memcmp(buf.data() + 1, want.data(), want.size()));
  kv_load_row(DType::kQ8_0, buf.data() + 1, n, back.data());
  for (int64_t i = 0; i < n; ++i) {
    uint16_t d;
    std::memcpy(&d, &want[i / 32 * 34], 2);
    const float wf =
        fp16_to_f32(d) * static_cast<float>(static_cast<int8_t>(want[i / 32 * 34 + 2 + i % 32]));
    ASSERT_EQ(f32_to_bits(back[i]), f32_to_bits(wf)) << "q8_0 element " << i;
  }
  for (int j = 32; j < 64; ++j) EXPECT_EQ(back[j], 0.f);  // d = 0 block
  auto q_of = [&](int i) { return static_cast<int8_t>(buf[1 + i / 32 * 34 + 2 + i % 32]); };
  EXPECT_EQ(q_of(64), 127);
  EXPECT_EQ(q_of(65), 3);
  EXPECT_EQ(q_of(66), -3);
  EXPECT_EQ(q_of(67), 1);
  EXPECT_EQ(fp16_to_f32(static_cast<uint16_t>(buf[1 + 2 * 34] | buf[2 + 2 * 34] << 8)), 1.f);
  // fp8: the bytes of tensor/fp8.h's conversions (round to nearest even, saturating); loads
  // give the exact FP8 values; values beyond the largest finite one saturate.
  for (DType t : {DType::kF8_E4M3, DType::kF8_E5M2}) {
    std::vector<float> big(x);
    big[7] = 1e6f;
    big[8] = -1e6f;
    kv_store_row(t, big.data(), n, buf.data() + 1);
    kv_load_row(t, buf.data() + 1, n, back.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t want8 = t == DType::kF8_E4M3 ? f32_to_e4m3(big[i]) : f32_to_e5m2(big[i]);
      ASSERT_EQ(buf[1 + i], want8) << short_name(t) << " element " << i;
      const float wf = t == DType::kF8_E4M3 ? e4m3_to_f32(want8) : e5m2_to_f32(want8);
      ASSERT_EQ(f32_to_bits(back[i]), f32_to_bits(wf)) << short_name(t) << " element " << i;
    }
    EXPECT_EQ(back[7], t == DType::kF8_E4M3 ? 448.f : 57344.f);
    EXPECT_EQ(back[8], t == DType::kF8_E4M3 ? -448.f : -57344.f);
  }
}

TEST(KvRowStore, BadArgumentsThrow) {
  std::vector<float> x(64, 1.f);
  std::vector<uint8_t> buf(512);
  EXPECT_THROW(kv_store_row(DType::kQ8_0, x.data(), 48, buf.data()), Error);
  EXPECT_THROW(kv_store_row(DType::kQ4_0, x.data(), 32, buf.data()), Error);
  EXPECT_THROW(kv_store_row(DType::kF16, x.data(), -1, buf.data()), Error);
  EXPECT_THROW(kv_store_row(DType::kF16, x.data(), 4, nullptr), Error);
  EXPECT_THROW(kv_load_row(DType::kQ8_0, buf.data(), 33, x.data()), Error);
  EXPECT_THROW(kv_load_row(DType::kI8, buf.data(), 4, x.data()), Error);
  kv_store_row(DType::kF16, x.data(), 0, nullptr);  // nothing to do
}

TEST(PagedAttentionArguments, BadInputThrows) {
  Case c{.name = "args",
         .n_heads = 4,
         .n_kv_heads = 2,
         .head_dim = 8,
         .kt = DType::kF32,
         .bs = 4,
         .window = 8,
         .seqs = {{20, 2}, {10, 1}}};
  Fixture f(c, 3);
  ThreadPool pool(1);
  std::vector<float> out(f.n_rows * f.os);
  std::vector<std::vector<int32_t>> hold;
  auto call = [&](const Fixture& fx, std::vector<PagedSeq> seqs, const std::vector<int32_t>& pos) {
    paged_attention(fx.p, fx.q.data(), fx.qs, pos.data(), fx.kv, seqs, out.data(), fx.os, pool);
  };
  const std::vector<PagedSeq> good = f.paged_seqs(hold);
  call(f, good, f.q_pos);  // fine as is
  {
    std::vector<int32_t> pos = f.q_pos;
    pos[0] = 20;  // == n_kv
    EXPECT_THROW(call(f, good, pos), Error);
    pos[0] = -1;
    EXPECT_THROW(call(f, good, pos), Error);
  }
  {
    std::vector<PagedSeq> s = good;
    std::swap(s[0], s[1]);  // rows out of order
    EXPECT_THROW(call(f, s, f.q_pos), Error);
    s = good;
    s[1].q_begin = 1;  // overlaps sequence 0's rows
    EXPECT_THROW(call(f, s, f.q_pos), Error);
  }
  {
    std::vector<int32_t> t = f.tables[0];
    t[4] = kNoBlock;  // block 4 (positions 16..19) is visible to both queries
    std::vector<PagedSeq> s = good;
    s[0].block_table = t.data();
    EXPECT_THROW(call(f, s, f.q_pos), Error);
    t[4] = f.kv.n_blocks;  // not a block of the pool
    EXPECT_THROW(call(f, s, f.q_pos), Error);
    t = f.tables[0];
    t[0] = kNoBlock;  // positions 0..3: outside both windows (queries at 18, 19, window 8)
    s[0].block_table = t.data();
    call(f, s, f.q_pos);
  }
  {
    Fixture g(c, 3);
    g.kv.k_type = DType::kQ8_0;  // kv_dim 16 is not a multiple of 32
    EXPECT_THROW(call(g, good, g.q_pos), Error);
    g.kv.k_type = DType::kQ4_0;
    EXPECT_THROW(call(g, good, g.q_pos), Error);
    g.kv.k_type = DType::kF32;
    g.kv.k_row_bytes = 16 * 4 - 1;
    EXPECT_THROW(call(g, good, g.q_pos), Error);
    g.kv.k_row_bytes = f.kv.k_row_bytes;
    g.kv.k_block_bytes = g.kv.k_row_bytes * 4 - 1;
    EXPECT_THROW(call(g, good, g.q_pos), Error);
    g.kv.k_block_bytes = f.kv.k_block_bytes;
    g.kv.block_size = 0;
    EXPECT_THROW(call(g, good, g.q_pos), Error);
  }
  {
    Fixture g(c, 3);
    g.p.n_kv_heads = 3;  // 4 % 3 != 0
    EXPECT_THROW(call(g, good, g.q_pos), Error);
  }
}

}  // namespace
}  // namespace triad::kernels
