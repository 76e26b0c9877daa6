// A loaded transformer and its forward pass: the decoders (llama, qwen2, qwen3, gemma3, and the
// mixture-of-experts qwen3moe, qwen2moe, Mixtral, deepseek2, glm4moe, gpt-oss) and the encoder
// bert (embedding models: bidirectional attention, post-norm blocks; encoder.cpp).
//
// One forward pass, forward_batch(), over the paged K/V cache: the serving engine runs it on
// its shared storage, and the evaluation tools and tests on a private one (SoloSequence,
// solo_sequence.h).
//
// Thread-safety: a Model is immutable after load() and may be shared; forward_batch() uses the
// caller's KvStorage and ForwardScratch, so concurrent forwards need one of each per caller and
// their own ThreadPool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/thread_pool.h"
#include "kernels/paged_attention.h"
#include "kernels/matmul.h"
#include "model/forward_batch.h"
#include "model/kv_storage.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace triad {
namespace gguf { class GgufFile; }

enum class LogitsMode {
  kLast,  // logits of the last token only (generation)
  kAll,   // logits of every token (perplexity, tests)
};

// Sees the input of every weight product of a forward pass before it is multiplied: n_tokens
// rows of w.cols floats, x_stride apart (used to collect importance matrices). Called on the
// forward's calling thread.
class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  virtual void observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tokens,
                       int64_t x_stride) = 0;
};

// Activation buffers reused across forward calls (grow-only).
struct ForwardScratch {
  MatmulObserver* observer = nullptr;  // optional; not owned
  int64_t capacity = 0;  // tokens
  AlignedBuffer<float> x, xn, q, k, v, attn, proj, gate, up;
  // Latent attention: attn_q_a's output [n x q_lora_rank], the raw queries [n x n_heads *
  // (qk_nope + rope)], and the expanded per-head values [n x n_heads * v_head_dim].
  AlignedBuffer<float> qa, q_raw, mla_v;
  // Mixture of experts: router logits [n x n_expert], each token's chosen experts and weights
  // [n x n_expert_used], the rows routed to one expert (gathered inputs, gate, up, output), and
  // per expert its routed (token, weight) pairs.
  // (moe_gate / moe_up / moe_out also serve the shared expert, over all n rows, afterwards.)
  AlignedBuffer<float> router, moe_x, moe_gate, moe_up, moe_out;
  std::vector<int32_t> sel_expert;
  std::vector<float> sel_weight;
  std::vector<int32_t> expert_begin, expert_fill, routed_token;
  std::vector<float> routed_weight;
  std::vector<kernels::PagedSeq> paged_seqs;  // per KV group, per sequence (forward_batch)
  std::vector<int32_t> slot_block, slot_row;  // per KV group, per row: where its K/V goes
  std::vector<int32_t> attn_pos;  // encoders: per row, the query position that sees its whole sequence
  void reserve(const ModelConfig& c, int64_t n_tokens);
};

class Model {
 public:
  // A load-time change of the bound weights (online quantization: quant/online.h), run once
  // after binding, before the model is shared.
  using WeightTransform =
      std::function<void(ModelWeights&, const gguf::GgufFile&, const ModelConfig&)>;
  // Loads and validates a GGUF model. Throws triad::Error with a clear message on any problem
  // (unknown architecture, missing or misshapen tensor, unsupported type).
  // progress, when given, is called as the file's tensor data is read in ahead of use
  // (gguf::GgufFile::prefetch), before the weights are bound and transformed.
  // On a CPU with the AVX-512 kernels, the quantized matrices are then re-laid for them
  // (ModelWeights::relayout; no memory overhead, and only as far as memory allows) unless
  // set_weight_relayout(false) was called, on `threads` threads (0: one per physical core), so a
  // server told to use N cores uses no more while it loads.
  static std::unique_ptr<Model> load(const std::string& path, const WeightTransform& transform = {},
                                     const std::function<void(uint64_t done, uint64_t total)>& progress = {},
                                     int threads = 0);
  // Process-wide: whether Model::load re-lays quantized weights (default true; `--no-repack`
  // and tools that key on the file's tensor addresses, such as the imatrix collector, turn it
  // off). Set it before loading.
  static void set_weight_relayout(bool on);
  static bool weight_relayout();
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return *file_; }

  // One engine step: runs every row of `batch` (each sequence at its own positions, attending
  // through its block tables in `kv`), writes the new K/V rows into their slots, and writes
  // logits [batch.logit_rows.size() x n_vocab]. Each weight matrix is read once for all rows.
  // hidden (when batch.hidden_rows is not empty): [hidden_rows.size() x n_embd] final hidden
  // states, the rows embeddings are pooled from (after output_norm in a decoder; the last
  // block's output in an encoder).
  // PRECONDITIONS (checked): ids < n_vocab, rows grouped by sequence, tables cover the rows; an
  // encoder computes each sequence whole (pos0 == 0, within its positions) and has no logits.
  void forward_batch(const ForwardBatch& batch, KvStorage& kv, ForwardScratch& scratch,
                     float* logits, ThreadPool& pool, float* hidden = nullptr) const;

 private:
  Model() = default;
  // Token embeddings (encoders: plus position and token type 0, through their LayerNorm).
  void embed(std::span<const int32_t> tokens, std::span<const int32_t> positions, float* x, ThreadPool& pool) const;
  // Writes the new K/V rows of layer il (s.k, s.v) into their slots in the cache's dtype.
  void store_kv(int32_t il, int64_t n, KvStorage& kv, const ForwardScratch& s, ThreadPool& pool) const;
  // One post-norm encoder block (bert, encoder.cpp): attention over the whole sequence, then the
  // FFN, each followed by residual add and LayerNorm.
  void encoder_block(int32_t il, const ForwardBatch& b, KvStorage& kv, ForwardScratch& s, ThreadPool& pool) const;
  void attention_block(int32_t il, const ForwardBatch& b, KvStorage& kv, ForwardScratch& s,
                             ThreadPool& pool) const;
  // The q/k/v projections into scratch, bias, QK norm and RoPE.
  void qkv_rope(int32_t il, int64_t n, const int32_t* positions, ForwardScratch& s,
                float* k_out, float* v_out, int64_t kv_stride, ThreadPool& pool) const;
  kernels::AttentionParams attention_params(int32_t il) const;
  // Latent attention (deepseek2) of layer il: queries absorbed into latent space, the latent
  // K row stored, MQA over the latent cache, outputs expanded through attn_v_b.
  void mla_attention_block(int32_t il, const ForwardBatch& b, KvStorage& kv, ForwardScratch& s,
                           ThreadPool& pool) const;
  // The attention output projection of `in` (n rows of `cols`), post-norm and residual add.
  void output_residual(int32_t il, int64_t n, const float* in, int64_t cols, ForwardScratch& s,
                       ThreadPool& pool) const;
  // Router of layer il over s.xn: each token's chosen experts and weights in s.sel_*.
  void route(int32_t il, int64_t n, ForwardScratch& s, ThreadPool& pool) const;
  void ffn_block(int32_t il, int64_t n, ForwardScratch& s, ThreadPool& pool) const;
  // The MoE FFN of layer il on the normalized rows s.xn, accumulated into s.proj (zeroed here).
  void moe_ffn(int32_t il, int64_t n, ForwardScratch& s, ThreadPool& pool) const;

  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace triad
