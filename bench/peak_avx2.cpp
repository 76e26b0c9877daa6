// The AVX2 FMA throughput peak for the matmul benchmark (compiled with AVX2 + FMA flags; call
// only where the CPU has them): 256-bit vfmadd231ps retired per second on one core, from 12
// independent dependency chains (enough to cover the latency).
// Thread-safety: pure.
#include <immintrin.h>

#include <chrono>

#include "peak.h"

namespace triad::bench {

double measure_fma_peak_avx2(long iters) {
  const auto t0 = std::chrono::steady_clock::now();
  __m256 a[12];
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  float sink[8];
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  _mm256_storeu_ps(sink, s);
  __asm__ volatile("" : : "r"(sink) : "memory");
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 12.0 * static_cast<double>(iters) / sec;
}

}  // namespace triad::bench
