#include "base/cpu_features.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace triad {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512dq = __builtin_cpu_supports("avx512dq");
    c.avx512vnni = __builtin_cpu_supports("avx512vnni");
    c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    // F16C: CPUID.1:ECX bit 29.
    unsigned a, b, cx, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(cx), "=d"(d) : "a"(1), "c"(0));
    c.f16c = (cx >> 29) & 1;
    return c;
  }();
  return f;
}

bool features_support(const CpuFeatures& f, IsaLevel level) {
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (level) {
    case IsaLevel::kScalar: return true;
    case IsaLevel::kAvx2: return avx2;
    case IsaLevel::kAvx512: return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
  }
  return false;
}

bool cpu_supports(IsaLevel level) { return features_support(cpu_features(), level); }

IsaLevel best_isa() {
  static const IsaLevel level = [] {
    IsaLevel l = IsaLevel::kScalar;
    if (cpu_supports(IsaLevel::kAvx2)) l = IsaLevel::kAvx2;
    if (cpu_supports(IsaLevel::kAvx512)) l = IsaLevel::kAvx512;
    if (const char* env = std::getenv("TRIAD_ISA")) {
      IsaLevel cap = l;
      if (std::strcmp(env, "scalar") == 0) cap = IsaLevel::kScalar;
      if (std::strcmp(env, "avx2") == 0) cap = IsaLevel::kAvx2;
      if (std::strcmp(env, "avx512") == 0) cap = IsaLevel::kAvx512;
      if (static_cast<int>(cap) < static_cast<int>(l)) l = cap;
    }
    return l;
  }();
  return level;
}

const char* isa_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar: return "scalar";
    case IsaLevel::kAvx2: return "AVX2 (FMA, F16C)";
    case IsaLevel::kAvx512: return "AVX-512 (VNNI)";
  }
  return "?";
}

std::string cpu_summary() {
  const IsaLevel l = best_isa();
  if (l != IsaLevel::kAvx512) return isa_name(l);
  return cpu_features().avx512bf16 ? "AVX-512 (VNNI, BF16)" : "AVX-512 (VNNI; no BF16: emulated)";
}

int physical_cores() {
  // Count distinct (physical id, core id) pairs in /proc/cpuinfo.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0, core = -1;
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = std::atoi(line.substr(line.find(':') + 1).c_str());
    if (line.rfind("core id", 0) == 0) {
      core = std::atoi(line.substr(line.find(':') + 1).c_str());
      cores.insert({phys, core});
    }
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

}  // namespace triad
