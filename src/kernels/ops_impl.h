// Internal to the element-wise ops (ops.h) and attention (attention.h): the per-ISA function
// tables they dispatch through, the flash-attention work unit each ISA implements, and the
// helpers shared by all variants. Tests include this header to run every ISA level the CPU
// supports in one process against the scalar references (ref/ops_ref.h).
//
// Table entries do NOT check their arguments: the public functions in ops.h / attention.h do
// (check_rope_args, check_attention_args below) and then call the table of best_isa().
//
// Thread-safety: the tables are immutable. The op entries write only their outputs; rope_table
// returns a per-thread cache; attention_at runs on the given pool (one call per pool at a time).
#pragma once

#include <cstdint>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace triad::kernels {

// One flash-attention work unit: `n_rows` query rows x the `n_rep` query heads of one kv head,
// against the kv slots [0, n_kv) of the k / v / kv_pos pointers (already offset to the unit's
// kv range and kv head). The kernel runs the online softmax over key tiles of `tile` slots and
// leaves, for each query vector qi = row * n_rep + rep, its running max m[qi], running sum
// l[qi] and un-normalized accumulator acc[qi * acc_stride + d]. When `out` is set it then also
// writes out[row * out_stride + rep * head_dim + d] = acc / l (zeros when l == 0).
struct AttnUnit {
  int head_dim = 0;
  int n_rep = 0;                    // query heads per kv head
  float scale = 1.f;
  float softcap = 0.f;
  int32_t window = 0;
  int tile = 0;                     // key slots per tile (multiple of 4)
  const float* q = nullptr;         // row 0, first head of the group
  int64_t q_stride = 0;             // floats between query rows
  const int32_t* q_pos = nullptr;   // n_rows positions
  int n_rows = 0;
  const float* k = nullptr;         // slot 0 of this unit, this kv head
  const float* v = nullptr;
  int64_t kv_stride = 0;
  const int32_t* kv_pos = nullptr;  // n_kv positions
  int64_t n_kv = 0;
  float* scores = nullptr;          // scratch: 2 * tile floats (two query vectors' tiles)
  float* m = nullptr;               // state: n_rows * n_rep
  float* l = nullptr;               // state: n_rows * n_rep
  float* acc = nullptr;             // state: n_rows * n_rep * acc_stride
  int64_t acc_stride = 0;           // >= head_dim
  float* out = nullptr;             // optional: row 0, first head of the group
  int64_t out_stride = 0;
};

struct OpsTable {
  IsaLevel level;
  void (*rmsnorm)(const float* x, const float* w, float eps, float* out, int64_t n);
  void (*layernorm)(const float* x, const float* w, const float* b, float eps, float* out,
                    int64_t n);
  void (*softmax)(float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*add_inplace)(float* y, const float* x, int64_t n);
  void (*scale_inplace)(float* y, float s, int64_t n);
  void (*rope)(float* x, int n_heads, int head_dim, int32_t pos, const RopeParams& p);
  void (*attn_unit)(const AttnUnit& u);
};

// True when this CPU can run code of `level` (hardware check; TRIAD_ISA is not consulted).
bool isa_supported(IsaLevel level);
// The table of one ISA level. Throws triad::Error when !isa_supported(level).
const OpsTable& ops_for(IsaLevel level);
// Defined in ops_avx2.cpp / ops_avx512.cpp; attention.cpp / attention_avx2.cpp /
// attention_avx512.cpp.
const OpsTable& ops_table_avx2();
const OpsTable& ops_table_avx512();
void attn_unit_scalar(const AttnUnit& u);
void attn_unit_avx2(const AttnUnit& u);
void attn_unit_avx512(const AttnUnit& u);

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
// Throws triad::Error unless the attention shapes and strides are consistent (see attention.h).
void check_attention_args(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
                          const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
                          int64_t kv_stride, const int32_t* kv_pos, const float* out,
                          int64_t out_stride);

// attention() with the kernels of one ISA level (checks its arguments like attention()).
// Key tile: attention_tile_for(head_dim) slots.
void attention_at(IsaLevel level, const AttentionParams& p, const float* q, int64_t n_q,
                  int64_t q_stride, const int32_t* q_pos, const float* k, const float* v,
                  int64_t n_kv, int64_t kv_stride, const int32_t* kv_pos, float* out,
                  int64_t out_stride, ThreadPool& pool);
// Key slots per tile for a head size: clamp(4096 / head_dim, 16, 256) rounded down to a
// multiple of 4, so one K tile plus one V tile is about 32 KiB (the L1d of the Zen 4 / recent
// Intel cores we target) and all tiles of a unit's query vectors stay in the 1-2 MiB L2.
int attention_tile_for(int head_dim);

}  // namespace triad::kernels
