// paged_attention_bench: speed of kernels::paged_attention (paged_attention.h) on
// Qwen2.5-0.5B-shaped attention (14 query / 2 kv heads, head_dim 64), block size 16, blocks at
// shuffled ids, with 1 and 2 threads, at every ISA level the CPU supports.
//
//   decode:  16 sequences x 1 query at context 128 / 1024 / 4096 (f16 K/V; all four K/V dtypes
//            at 1024), and 1 sequence x 1 query at 4096 (split over threads by segment).
//            GB/s of K + V bytes read (every cached row of every sequence, once). The pool is
//            cycled through enough copies ("layers") to exceed the last-level cache, as in a
//            real decode step; the DRAM read bandwidth (membw.h) is printed for comparison.
//   prefill: 512 queries over 512 keys (causal), and a 512-query chunk at the tail of 2048
//            keys; GFLOP/s counting 4 * n_heads * head_dim flops per visible (query, key) pair.
// Each figure is the best of several timed trials (the dev machine is shared).
//
// usage: paged_attention_bench [--isa scalar|avx2|avx512] [--huge-pages] [--min-time SECONDS]
//   --huge-pages: madvise(MADV_HUGEPAGE) on the pools (KvStorage maps them the same way, without
//   it); with 4 KiB pages every block of a decode is a TLB miss.
// Thread-safety: single-threaded driver; the kernel runs on a ThreadPool.
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "kernels/membw.h"
#include "kernels/ops_impl.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_attention_impl.h"
#include "tensor/dtype.h"

namespace {

using namespace triad;
using namespace triad::kernels;

double g_min_time = 0.3;
bool g_huge = false;  // --huge-pages: madvise(MADV_HUGEPAGE) on the pools

// An anonymous mapping like KvStorage's (optionally with transparent huge pages).
class Mapping {
 public:
  explicit Mapping(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("mmap");
      std::exit(1);
    }
    if (g_huge) madvise(p, bytes, MADV_HUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
  }
  ~Mapping() { munmap(data_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* data() { return data_; }

 private:
  uint8_t* data_;
  size_t bytes_;
};
constexpr int kHeads = 14, kKvHeads = 2, kHeadDim = 64, kBlock = 16;
constexpr int64_t kKvDim = int64_t{kKvHeads} * kHeadDim, kWidth = int64_t{kHeads} * kHeadDim;

// Best seconds per call of fn over 3 trials of at least g_min_time / 3 each.
template <typename F>
double best_seconds(F&& fn) {
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
    int64_t reps = 0;
    Timer t;
    do {
      fn();
      ++reps;
    } while (t.seconds() < g_min_time / 3);
    best = std::min(best, t.seconds() / static_cast<double>(reps));
  }
  return best;
}

std::vector<float> random_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// `copies` pools ("layers") of the same layout, each holding every sequence's rows.
struct Pools {
  std::vector<std::unique_ptr<Mapping>> k, v;
  std::vector<PagedKvLayer> layers;
  std::vector<std::vector<int32_t>> tables;
  std::vector<PagedSeq> seqs;
  uint64_t bytes_per_call = 0;  // K + V rows read by one call
};

Pools make_pools(DType kt, DType vt, const std::vector<int32_t>& n_kv,
                 const std::vector<int32_t>& n_q) {
  std::mt19937 rng(1);
  Pools P;
  int32_t n_blocks = 0;
  for (int32_t n : n_kv) n_blocks += (n + kBlock - 1) / kBlock;
  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  PagedKvLayer L;
  L.k_type = kt;
  L.v_type = vt;
  L.block_size = kBlock;
  L.n_blocks = n_blocks;
  L.k_row_bytes = row_bytes(kt, kKvDim);
  L.v_row_bytes = row_bytes(vt, kKvDim);
  L.k_block_bytes = L.k_row_bytes * kBlock;
  L.v_block_bytes = L.v_row_bytes * kBlock;
  const uint64_t pool_bytes = (L.k_block_bytes + L.v_block_bytes) * n_blocks;
  const int copies = static_cast<int>(std::max<uint64_t>(1, (uint64_t{96} << 20) / pool_bytes));
  std::vector<float> row = random_vec(rng, kKvDim);
  std::vector<uint8_t> krow(L.k_row_bytes), vrow(L.v_row_bytes);
  int64_t q_begin = 0;
  size_t next = 0;
  for (size_t s = 0; s < n_kv.size(); ++s) {
    std::vector<int32_t> t((n_kv[s] + kBlock - 1) / kBlock);
    for (int32_t& b : t) b = ids[next++];
    P.tables.push_back(std::move(t));
    P.bytes_per_call += static_cast<uint64_t>(n_kv[s]) * (L.k_row_bytes + L.v_row_bytes);
  }
  for (size_t s = 0; s < n_kv.size(); ++s) {
    P.seqs.push_back(PagedSeq{q_begin, n_q[s], P.tables[s].data(), n_kv[s]});
    q_begin += n_q[s];
  }
  for (int c = 0; c < copies; ++c) {
    P.k.push_back(std::make_unique<Mapping>(L.k_block_bytes * n_blocks));
    P.v.push_back(std::make_unique<Mapping>(L.v_block_bytes * n_blocks));
    // Every row slot gets data (a few distinct random rows, so the store is quick).
    for (int64_t r = 0; r < int64_t{n_blocks} * kBlock; ++r) {
      if (r % 61 == 0) {
        row = random_vec(rng, kKvDim);
        kv_store_row(kt, row.data(), kKvDim, krow.data());
        kv_store_row(vt, row.data(), kKvDim, vrow.data());
      }
      std::memcpy(P.k.back()->data() + r * L.k_row_bytes, krow.data(), L.k_row_bytes);
      std::memcpy(P.v.back()->data() + r * L.v_row_bytes, vrow.data(), L.v_row_bytes);
    }
    L.k_base = P.k.back()->data();
    L.v_base = P.v.back()->data();
    P.layers.push_back(L);
  }
  return P;
}

AttentionParams params() {
  return AttentionParams{kHeads, kKvHeads, kHeadDim, 1.f / std::sqrt(float{kHeadDim}), 0, 0.f};
}

// One timed configuration: n_kv / n_q per sequence, queries at the tail of each context.
void bench_case(IsaLevel level, ThreadPool& pool, const char* what, DType kt, DType vt,
                const std::vector<int32_t>& n_kv, const std::vector<int32_t>& n_q) {
  Pools P = make_pools(kt, vt, n_kv, n_q);
  std::mt19937 rng(2);
  int64_t rows = 0;
  double pairs = 0;
  std::vector<int32_t> pos;
  for (size_t s = 0; s < n_kv.size(); ++s) {
    for (int32_t r = 0; r < n_q[s]; ++r) {
      pos.push_back(n_kv[s] - n_q[s] + r);
      pairs += n_kv[s] - n_q[s] + r + 1;
    }
    rows += n_q[s];
  }
  std::vector<float> q = random_vec(rng, rows * kWidth), out(rows * kWidth);
  const AttentionParams p = params();
  size_t layer = 0;
  const double s = best_seconds([&] {
    paged_attention_at(level, p, q.data(), kWidth, pos.data(), P.layers[layer], P.seqs, out.data(),
                       kWidth, pool);
    layer = (layer + 1) % P.layers.size();
  });
  const double flops = 4.0 * kWidth * pairs;
  std::printf("  %-30s %-4s/%-4s t%d %9.1f us %7.1f GB/s %7.1f GFLOP/s\n", what,
              dtype_name(kt).data(), dtype_name(vt).data(), pool.size(), s * 1e6,
              static_cast<double>(P.bytes_per_call) / s / 1e9, flops / s / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const char* only_isa = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
      g_min_time = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--huge-pages") == 0) {
      g_huge = true;
    } else if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      only_isa = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: paged_attention_bench [--isa scalar|avx2|avx512] [--huge-pages] "
                   "[--min-time S]\n");
      return 2;
    }
  }
  std::printf("CPU: %s; %d/%d heads, head_dim %d, block %d\n", cpu_summary().c_str(), kHeads,
              kKvHeads, kHeadDim, kBlock);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::printf("DRAM read bandwidth, %d thread(s): %.1f GB/s\n", threads,
                measure_read_bandwidth_gbs(pool, size_t{256} << 20, 3));
  }
  const DType f16 = DType::kF16;
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    const char* short_isa = level == IsaLevel::kScalar ? "scalar"
                            : level == IsaLevel::kAvx2 ? "avx2"
                                                       : "avx512";
    if (!isa_supported(level) || (only_isa && std::strcmp(only_isa, short_isa) != 0)) continue;
    std::printf("[%s]\n", isa_name(level));
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int32_t ctx : {128, 1024, 4096}) {
        const std::string name = "decode 16 x 1q @ " + std::to_string(ctx);
        bench_case(level, pool, name.c_str(), f16, f16, std::vector<int32_t>(16, ctx),
                   std::vector<int32_t>(16, 1));
      }
      for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0})
        bench_case(level, pool, "decode 16 x 1q @ 1024", t, t, std::vector<int32_t>(16, 1024),
                   std::vector<int32_t>(16, 1));
      bench_case(level, pool, "decode 1 x 1q @ 4096", f16, f16, {4096}, {1});
      bench_case(level, pool, "prefill 512q x 512", f16, f16, {512}, {512});
      bench_case(level, pool, "prefill 512q x 512", DType::kQ8_0, DType::kQ8_0, {512}, {512});
      bench_case(level, pool, "chunk 512q @ 2048", f16, f16, {2048}, {512});
    }
  }
  return 0;
}
