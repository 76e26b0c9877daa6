// Run-time CPU feature detection. Kernels are compiled per ISA level and chosen from this at
// start-up, so one binary uses AVX-512 (VNNI) where present and AVX2 elsewhere. BF16
// (vdpbf16ps) is a feature within the AVX-512 level, not a level: Ice Lake, Cascade Lake and
// VMs that mask it run the AVX-512 kernels, and the one kernel that uses vdpbf16ps (BF16
// weights) emulates it there with two FMAs (matmul_avx512.cpp).
#pragma once

#include <string>

namespace triad {

enum class IsaLevel {
  kScalar = 0,  // portable C++ only
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (BF16 optional: CpuFeatures::avx512bf16)
};

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
};

// What this CPU supports (detected once).
const CpuFeatures& cpu_features();
// Whether a CPU with features f can run the kernels of `level` (pure; unit-tested).
bool features_support(const CpuFeatures& f, IsaLevel level);
// Whether this CPU can run the kernels of `level` (regardless of TRIAD_ISA): the one test
// every dispatcher uses.
bool cpu_supports(IsaLevel level);
// The best level this CPU supports, lowered by the TRIAD_ISA environment variable
// ("scalar", "avx2", "avx512") when set, so tests can exercise every path on one machine.
IsaLevel best_isa();
const char* isa_name(IsaLevel level);
// Human-readable summary of the level in use and its optional features, e.g. "AVX-512 (VNNI,
// BF16)" or "AVX-512 (VNNI; no BF16: emulated)".
std::string cpu_summary();
// Physical core count (falls back to logical CPUs).
int physical_cores();

}  // namespace triad
