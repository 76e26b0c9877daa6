// The encoder block of bert (BERT, all-MiniLM, BGE, E5) and nomic-bert (nomic-embed-text):
// Model::encoder_block. The embeddings (token + token type (+ learned position), LayerNorm) are
// Model::embed's; the pass's frame (rows, slots, hidden outputs) is forward_batch's, shared with
// the decoders.
//
// A block, post-norm as in BERT:
//   q, k, v = x Wq + bq, x Wk + bk, x Wv + bv     (biases: bert; nomic-bert has none, and RoPE
//                                                  rotates q and k instead of learned positions)
//   x = LayerNorm(x + softmax(q k^T / sqrt(d)) v Wo + bo)          (every token sees every token)
//   x = LayerNorm(x + ffn(x))    bert: gelu(x Wup + bup) Wdown + bdown (exact erf GELU)
//                                nomic-bert: (silu(x Wgate) * x Wup) Wdown
// The attention runs through the paged kernel like a decoder's: K/V rows are written into the
// sequence's blocks, and each query is placed at its sequence's last position (s.attn_pos), so
// the causal mask shows it every key. A sequence's rows thus depend on its own tokens only,
// whatever shares the step.
#include <algorithm>

#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "model/layer_ops.h"
#include "model/model.h"

namespace triad {
namespace {

// x[t] = LayerNorm(x[t] + y[t]) for n rows of E.
void residual_layernorm(float* x, const float* y, const float* w, const float* b, float eps, int64_t n, int64_t E,
                        ThreadPool& pool) {
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      kernels::add_inplace(x + t * E, y + t * E, E);
      kernels::layernorm(x + t * E, w, b, eps, x + t * E, E);
    }
  });
}

}  // namespace

void Model::encoder_block(int32_t il, const ForwardBatch& b, KvStorage& kv, ForwardScratch& s,
                          ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  mm_group(s, {{L.wq, s.q.data(), Q}, {L.wk, s.k.data(), KV}, {L.wv, s.v.data(), KV}}, s.x.data(), n, E, pool);
  const kernels::RopeParams rope = c.rope_params(il);
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      float* q = s.q.data() + t * Q;
      float* k = s.k.data() + t * KV;
      if (L.bq) kernels::add_inplace(q, L.bq, Q);
      if (L.bk) kernels::add_inplace(k, L.bk, KV);
      if (L.bv) kernels::add_inplace(s.v.data() + t * KV, L.bv, KV);
      if (c.rope_dim > 0) {
        kernels::rope(q, c.n_heads, c.head_dim, b.positions[static_cast<size_t>(t)], rope);
        kernels::rope(k, c.n_kv_heads, c.head_dim, b.positions[static_cast<size_t>(t)], rope);
      }
    }
  });
  store_kv(il, n, kv, s, pool);
  const int32_t g = kv.group_of_layer(il);
  const size_t n_seqs = b.seqs.size();
  std::span<const kernels::PagedSeq> seqs(s.paged_seqs.data() + g * n_seqs, n_seqs);
  kernels::paged_attention(attention_params(il), s.q.data(), Q, s.attn_pos.data(), kv.layer(il), seqs,
                           s.attn.data(), Q, pool);
  mm(s, L.wo, s.attn.data(), n, Q, s.proj.data(), E, pool);
  add_rows(s.proj.data(), L.bo, n, E, pool);
  residual_layernorm(s.x.data(), s.proj.data(), L.attn_out_norm, L.attn_out_norm_b, c.norm_eps, n, E, pool);

  if (L.w_gate.data != nullptr) {  // nomic-bert: SwiGLU
    mm_group(s, {{L.w_gate, s.gate.data(), F}, {L.w_up, s.up.data(), F}}, s.x.data(), n, E, pool);
    pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) kernels::silu_mul(s.gate.data() + t * F, s.up.data() + t * F, s.gate.data() + t * F, F);
    });
  } else {
    mm(s, L.w_up, s.x.data(), n, E, s.gate.data(), F, pool);
    pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        float* u = s.gate.data() + t * F;
        if (L.b_up) kernels::add_inplace(u, L.b_up, F);
        kernels::gelu_erf_mul(u, nullptr, u, F);
      }
    });
  }
  mm(s, L.w_down, s.gate.data(), n, F, s.proj.data(), E, pool);
  add_rows(s.proj.data(), L.b_down, n, E, pool);
  residual_layernorm(s.x.data(), s.proj.data(), L.out_norm, L.out_norm_b, c.norm_eps, n, E, pool);
}

}  // namespace triad
