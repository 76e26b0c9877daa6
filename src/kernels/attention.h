// Causal multi-head attention with grouped-query heads over a contiguous K/V cache.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"

namespace triad::kernels {

struct AttentionParams {
  int n_heads = 0;         // query heads
  int n_kv_heads = 0;      // key/value heads; n_heads % n_kv_heads == 0 (GQA/MQA)
  int head_dim = 0;        // elements per head (same for K and V)
  float scale = 1.f;       // multiplies q.k before softmax
  int32_t window = 0;      // sliding window in tokens: a query at position p sees keys at
                           // positions (p - window, p]; 0 means no window (full causal)
  float softcap = 0.f;     // when > 0, scores become softcap * tanh(score / softcap)
};

// out[t][h*head_dim + d] = sum_j softmax_j(scale * q[t][h] . k[j][kvh]) * v[j][kvh][d]
// over cache slots j < n_kv whose position kv_pos[j] satisfies the causal/window mask against
// q_pos[t]. q: n_q rows of stride q_stride floats; k, v: n_kv rows of stride kv_stride floats
// (kv head g at offset g*head_dim); out: n_q rows of stride out_stride.
// Implemented flash-style: online softmax over key tiles sized to stay in L1/L2.
void attention(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
               const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
               int64_t kv_stride, const int32_t* kv_pos, float* out, int64_t out_stride,
               ThreadPool& pool);

}  // namespace triad::kernels
