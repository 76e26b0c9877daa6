// Internal to the element-wise ops (ops.h): the per-ISA function tables they dispatch through
// and the helpers shared by all variants. Tests include this header to run every ISA level the CPU
// supports in one process against the scalar references (ref/ops_ref.h).
//
// Table entries do NOT check their arguments: the public functions in ops.h do
// (check_rope_args below) and then call the table of best_isa().
//
// Thread-safety: the tables are immutable. The op entries write only their outputs; rope_table
// returns a per-thread cache.
#pragma once

#include <cstdint>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/ops.h"

namespace triad::kernels {

struct OpsTable {
  IsaLevel level;
  void (*rmsnorm)(const float* x, const float* w, float eps, float* out, int64_t n);
  void (*layernorm)(const float* x, const float* w, const float* b, float eps, float* out,
                    int64_t n);
  void (*softmax)(float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_erf_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*add_inplace)(float* y, const float* x, int64_t n);
  void (*scale_inplace)(float* y, float s, int64_t n);
  void (*rope)(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);
};

// True when this CPU can run code of `level` (hardware check; TRIAD_ISA is not consulted).
bool isa_supported(IsaLevel level);
// The table of one ISA level. Throws triad::Error when !isa_supported(level).
const OpsTable& ops_for(IsaLevel level);
// Defined in ops_avx2.cpp / ops_avx512.cpp.
const OpsTable& ops_table_avx2();
const OpsTable& ops_table_avx512();

// The cos / sin of every rotated pair at one position: pair i has angle
// theta_i = pos * freq_scale * freq_base^(-2i / rot_dim), computed in double. cos, sin hold
// rot_dim/2 values; cos2 / sin2 hold rot_dim values laid out for the kNormal interleaving:
// cos2 = (c0, c0, c1, c1, ...), sin2 = (-s0, s0, -s1, s1, ...). Cached per thread for the last
// (pos, params) asked (q and k of a layer share it): valid until this thread's next call.
struct RopeTable {
  int n_pairs = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  const float* cos2 = nullptr;
  const float* sin2 = nullptr;
};
const RopeTable& rope_table(int32_t pos, const RopeParams& p);

// Throws triad::Error unless n_heads >= 0, head_dim > 0, rot_dim is even and in
// (0, head_dim], freq_base > 0 and finite, freq_scale finite, and x is non-null when there
// is data.
void check_rope_args(const float* x, int n_heads, int head_dim, const RopeParams& p);
}  // namespace triad::kernels
