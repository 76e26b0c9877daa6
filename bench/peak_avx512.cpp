// Measured per-core instruction-throughput peaks for the matmul benchmark (compiled with AVX-512
// flags; call only on AVX-512 machines): how many 512-bit FMA / VNNI dot / BF16 dot instructions
// one core retires per second, from 12 independent dependency chains (enough to cover the
// latency). Converted by the caller to flop/s (FMA: 32 flop, vpdpbusd: 128 int ops,
// vdpbf16ps: 64 flop per instruction).
// Thread-safety: pure; run concurrently on several threads to measure all cores.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <chrono>

#include "base/cpu_features.h"
#include "peak.h"

namespace triad::bench {
namespace {

template <typename F>
double per_second(long iters, F&& body) {
  const auto t0 = std::chrono::steady_clock::now();
  body(iters);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 12.0 * static_cast<double>(iters) / s;
}

}  // namespace

PeakRates measure_peak_avx512(long iters) {
  PeakRates r;
  r.fma = per_second(iters, [](long n) {
    __m512 a[12];
    const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
    for (long it = 0; it < n; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
    }
    float sink[16];
    __m512 s = a[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
    _mm512_storeu_ps(sink, s);
    __asm__ volatile("" : : "r"(sink) : "memory");
  });
  r.vnni = per_second(iters, [](long n) {
    __m512i a[12];
    const __m512i b = _mm512_set1_epi8(3), c = _mm512_set1_epi8(-5);
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_epi32(i);
    for (long it = 0; it < n; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbusd_epi32(a[i], b, c);
    }
    int sink[16];
    __m512i s = a[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, a[i]);
    _mm512_storeu_si512(sink, s);
    __asm__ volatile("" : : "r"(sink) : "memory");
  });
  if (!triad::cpu_features().avx512bf16) return r;
  r.bf16 = per_second(iters, [](long n) {
    __m512 a[12];
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3a83);
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
    for (long it = 0; it < n; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], b, c);
    }
    float sink[16];
    __m512 s = a[0];
    for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
    _mm512_storeu_ps(sink, s);
    __asm__ volatile("" : : "r"(sink) : "memory");
  });
  return r;
}

}  // namespace triad::bench
