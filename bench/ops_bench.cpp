// ops_bench: speed of the element-wise ops (ops.h) and of flash attention (attention.h) at
// every ISA level the CPU supports, with 1 and 2 threads for attention.
//
//   element-wise ops: GB/s of bytes read + written, at n = 896 (a Qwen2.5-0.5B hidden row,
//                     L1-resident) and 4864 (its FFN row).
//   attention decode: n_q = 1 against n_kv cached slots; GB/s of K + V bytes read (the kernel
//                     is bound by streaming the cache).
//   attention prefill: n_q = n_kv, causal; GFLOP/s counting 4 * n_heads * head_dim flops per
//                     visible (query, key) pair (q.k and p.v), n_kv (n_kv + 1) / 2 pairs.
// Shapes: Qwen2.5-0.5B (14 / 2 heads, head_dim 64), gemma3-270M (4 / 1, 256), stories260K
// (8 / 4, 8). Each figure is the best of several timed trials (the dev machine is shared).
//
// usage: ops_bench [--min-time SECONDS]
// Thread-safety: single-threaded driver; attention runs on a ThreadPool.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "kernels/ops_impl.h"

namespace {

using namespace triad;
using namespace triad::kernels;

double g_min_time = 0.2;

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

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void bench_elementwise(IsaLevel level) {
  const OpsTable& t = ops_for(level);
  for (int64_t n : {896, 4864}) {
    std::vector<float> x = random_vec(n, 1), y = random_vec(n, 2), out(n);
    const double row = static_cast<double>(n) * sizeof(float);
    auto report = [&](const char* name, double bytes, double s) {
      std::printf("  %-10s n=%-5lld %8.3f us %7.1f GB/s\n", name, static_cast<long long>(n),
                  s * 1e6, bytes / s / 1e9);
    };
    report("rmsnorm", 3 * row, best_seconds([&] { t.rmsnorm(x.data(), y.data(), 1e-6f, out.data(), n); }));
    report("layernorm", 3 * row, best_seconds([&] {
      t.layernorm(x.data(), y.data(), y.data(), 1e-6f, out.data(), n);
    }));
    report("softmax", 2 * row, best_seconds([&] {
      std::memcpy(out.data(), x.data(), n * sizeof(float));
      t.softmax(out.data(), n);
    }));
    report("silu_mul", 3 * row, best_seconds([&] { t.silu_mul(x.data(), y.data(), out.data(), n); }));
    report("gelu_mul", 3 * row, best_seconds([&] { t.gelu_mul(x.data(), y.data(), out.data(), n); }));
    report("add", 3 * row, best_seconds([&] { t.add_inplace(out.data(), x.data(), n); }));
    // rope: n / 64 heads of 64 at a new position each call (cold angle cache).
    RopeParams rp{RopeLayout::kNeox, 64, 1e6f, 1.f};
    int32_t pos = 0;
    report("rope", 2 * row, best_seconds([&] {
      t.rope(out.data(), static_cast<int>(n / 64), 64, pos++, rp);
    }));
  }
}

struct AttnShape {
  const char* model;
  int n_heads, n_kv_heads, head_dim;
};

void bench_attention(IsaLevel level, int threads) {
  const AttnShape shapes[] = {{"qwen2.5-0.5b", 14, 2, 64}, {"gemma3-270m", 4, 1, 256},
                              {"stories260k", 8, 4, 8}};
  ThreadPool pool(threads);
  for (const AttnShape& sh : shapes) {
    AttentionParams p{sh.n_heads, sh.n_kv_heads, sh.head_dim,
                      1.f / std::sqrt(static_cast<float>(sh.head_dim)), 0, 0.f};
    const int64_t width = static_cast<int64_t>(sh.n_heads) * sh.head_dim;
    const int64_t kv_width = static_cast<int64_t>(sh.n_kv_heads) * sh.head_dim;
    for (int64_t n_kv : {int64_t{512}, int64_t{4096}}) {
      std::vector<float> k = random_vec(n_kv * kv_width, 3), v = random_vec(n_kv * kv_width, 4);
      std::vector<int32_t> pos(n_kv);
      for (int64_t j = 0; j < n_kv; ++j) pos[j] = static_cast<int32_t>(j);
      // Decode: the last position.
      std::vector<float> q = random_vec(width, 5), out(width);
      double s = best_seconds([&] {
        attention_at(level, p, q.data(), 1, width, pos.data() + n_kv - 1, k.data(), v.data(),
                     n_kv, kv_width, pos.data(), out.data(), width, pool);
      });
      const double kv_bytes = 2.0 * n_kv * kv_width * sizeof(float);
      std::printf("  %-13s decode  n_kv=%-5lld t%d %9.1f us %7.1f GB/s\n", sh.model,
                  static_cast<long long>(n_kv), threads, s * 1e6, kv_bytes / s / 1e9);
      if (n_kv > 512) continue;  // prefill at 512 only (keeps the run short)
      std::vector<float> qp = random_vec(n_kv * width, 6), outp(n_kv * width);
      s = best_seconds([&] {
        attention_at(level, p, qp.data(), n_kv, width, pos.data(), k.data(), v.data(), n_kv,
                     kv_width, pos.data(), outp.data(), width, pool);
      });
      const double flops = 4.0 * width * (static_cast<double>(n_kv) * (n_kv + 1) / 2);
      std::printf("  %-13s prefill n=%-7lld t%d %9.1f us %7.1f GFLOP/s\n", sh.model,
                  static_cast<long long>(n_kv), threads, s * 1e6, flops / s / 1e9);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
      g_min_time = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: ops_bench [--min-time SECONDS]\n");
      return 2;
    }
  }
  std::printf("CPU: %s, tile (head_dim 8/64/256): %d/%d/%d slots\n", cpu_summary().c_str(),
              attention_tile_for(8), attention_tile_for(64), attention_tile_for(256));
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (!isa_supported(level)) continue;
    std::printf("[%s]\n", isa_name(level));
    bench_elementwise(level);
    for (int threads : {1, 2}) bench_attention(level, threads);
  }
  return 0;
}
