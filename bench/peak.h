// Measured instruction-throughput peaks (instructions per second on one core), used by the
// matmul benchmark to print achieved / peak. Thread-safety: pure functions.
#pragma once

namespace triad::bench {

struct PeakRates {
  double fma = 0;   // 512-bit vfmadd231ps per second (32 flop each)
  double vnni = 0;  // 512-bit vpdpbusd per second (64 int8 multiply-adds = 128 ops each)
  double bf16 = 0;  // 512-bit vdpbf16ps per second (32 bf16 multiply-adds = 64 flop each); 0 when
                    // the CPU has no AVX-512 BF16
};

// Runs `iters` iterations of 12 independent instructions of each kind (AVX-512 VNNI CPUs only;
// vdpbf16ps only where cpu_features().avx512bf16).
PeakRates measure_peak_avx512(long iters);

// 256-bit vfmadd231ps per second on one core (16 flop each), from 12 independent chains (AVX2 +
// FMA CPUs; peak_avx2.cpp).
double measure_fma_peak_avx2(long iters);

}  // namespace triad::bench
