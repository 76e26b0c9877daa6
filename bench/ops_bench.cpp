// ops_bench: speed of the element-wise ops (ops.h) at every ISA level the CPU supports
// (attention: paged_attention_bench).
//
//   element-wise ops: GB/s of bytes read + written, at n = 896 (a Qwen2.5-0.5B hidden row,
//                     L1-resident) and 4864 (its FFN row).
//
// usage: ops_bench [--min-time SECONDS]
// Thread-safety: single-threaded driver.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
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
  std::printf("CPU: %s\n", cpu_summary().c_str());
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (!isa_supported(level)) continue;
    std::printf("[%s]\n", isa_name(level));
    bench_elementwise(level);
  }
  return 0;
}
