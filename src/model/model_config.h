// ModelConfig: the immutable properties of a model, read from GGUF metadata (llama.cpp's
// "hparams"). Run-time choices (threads, context size) live elsewhere.
//
// One decoder-only transformer family covers llama (and Mixtral: llama with experts), qwen2, qwen3,
// gemma3, qwen3moe, qwen2moe, deepseek2 (multi-head latent attention), glm4moe and gpt-oss; the
// differences between them are the feature fields below, set per architecture in
// model_config.cpp. bert (BERT, all-MiniLM, BGE, E5) and nomic-bert (nomic-embed-text) are the
// encoders: bidirectional attention, post-LayerNorm blocks, no output head (see `encoder`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace triad {
namespace gguf { class GgufFile; }

enum class Arch { kLlama, kQwen2, kQwen3, kGemma3, kQwen3Moe, kQwen2Moe, kDeepseek2, kGlm4Moe, kGptOss, kBert, kNomicBert };

// How a sequence's final hidden states become one embedding (GGUF {arch}.pooling_type, llama.cpp's
// numbering): the mean over its tokens, its first token's ([CLS]), or its last token's.
enum class Pooling { kNone = 0, kMean = 1, kCls = 2, kLast = 3 };
const char* pooling_name(Pooling p);
// "none" | "mean" | "cls" | "last"; throws triad::Error otherwise.
Pooling parse_pooling(const std::string& s);

enum class FfnActivation {
  kSilu,      // SwiGLU: silu(gate) * up   (llama, qwen)
  kGeluTanh,  // GeGLU:  gelu_tanh(gate) * up  (gemma)
  kSwigluOai, // gpt-oss: clamped, min(gate, 7) * sigmoid(1.702 gate) * (clamp(up, +-7) + 1)
};

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;      // general.architecture
  std::string name;           // general.name (may be empty)

  int32_t n_vocab = 0;        // rows of token_embd
  int32_t n_embd = 0;         // hidden size
  int32_t n_layers = 0;
  int32_t n_heads = 0;        // query heads
  int32_t n_kv_heads = 0;     // key/value heads; can be < n_heads (GQA/MQA), divides n_heads
  int32_t head_dim = 0;       // per-head size of q, k and v (key_length == value_length)
  int32_t n_ff = 0;           // FFN inner size
  int32_t n_ctx_train = 0;    // trained context length (the default context cap)
  float norm_eps = 1e-5f;     // RMSNorm epsilon (LayerNorm's for bert)

  // RoPE
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kNormal;
  int32_t rope_dim = 0;       // rotated dims per head
  float rope_base = 10000.f;        // global (full-attention) layers
  float rope_base_local = 10000.f;  // sliding-window layers (gemma3 uses its own base)
  float rope_freq_scale = 1.f;      // linear or YaRN scaling: positions multiplied by this
  // YaRN (rope.scaling.type "yarn"): see kernels::RopeParams. rope_mscale multiplies cos / sin.
  bool rope_yarn = false;
  float yarn_corr_lo = 0.f, yarn_corr_hi = 0.f;
  float rope_mscale = 1.f;

  // Attention
  float attn_scale = 0.f;     // multiplies q.k; 1/sqrt(head_dim) unless the arch says otherwise
  int32_t sliding_window = 0; // tokens; 0 = no sliding-window layers
  std::vector<uint8_t> layer_uses_window;  // per layer: 1 = sliding-window (local) layer

  // Architecture features
  bool qkv_bias = false;      // attn_{q,k,v}.bias present (qwen2)
  bool qk_norm = false;       // per-head RMSNorm of q and k before RoPE (qwen3, gemma3; glm4moe
                              // when its files have attn_q_norm)
  std::string ffn_norm_name = "ffn_norm";  // the pre-FFN norm's tensor (glm4moe: post_attention_norm)
  bool post_norms = false;    // RMSNorm of attention and FFN outputs before the residual (gemma3)
  float embd_scale = 1.f;     // token embeddings multiplied by this (gemma: sqrt(n_embd))
  FfnActivation ffn_act = FfnActivation::kSilu;
  bool tied_output = false;   // no output.weight: logits use token_embd

  // Encoders (bert, nomic-bert). Every token attends to every token of its sequence (not
  // causal), so a sequence is computed whole in one step and its K/V are never shared through
  // the prefix cache. Embeddings are token + token type 0 (token_types) + (bert) a learned
  // position (position_embd, n_ctx_train rows), through a LayerNorm; each block is post-norm:
  // x = LN(x + attn(x)), x = LN(x + ffn(x)). bert: biases everywhere, ffn = down(gelu(up x))
  // with the exact (erf) GELU. nomic-bert: q/k/v from one fused matrix (attn_qkv), neox RoPE
  // on q and k (rope_dim > 0), no biases, ffn = down(silu(gate x) * up x). No output head: the
  // model gives hidden states (embeddings), never logits.
  bool encoder = false;
  bool causal = true;          // {arch}.attention.causal (false for bert)
  int32_t n_token_types = 0;   // rows of token_types
  Pooling pooling = Pooling::kNone;  // {arch}.pooling_type (the model's own; kNone when absent)
  bool has_logits() const { return !encoder; }

  // Mixture of experts (n_expert > 0: every layer's FFN): a router (ffn_gate_inp) scores the
  // n_expert experts per token; softmax over all of them, the n_expert_used most probable are
  // run (ties: the lower expert id first), their probabilities renormalized to sum 1 when
  // expert_weights_norm, then multiplied by expert_weights_scale; the token's FFN output is the
  // weighted sum of those experts' SwiGLU outputs (inner size n_ff_exp).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  bool expert_weights_norm = false;
  float expert_weights_scale = 1.f;
  // A shared expert (qwen2moe) that every token runs besides its routed ones, its SwiGLU output
  // scaled by sigmoid(ffn_gate_inp_shexp . x); 0 = none.
  int32_t n_ff_shexp = 0;
  bool shexp_gated = false;      // qwen2moe; deepseek2's shared experts are not gated
  // deepseek2 and glm4moe: the first n_layer_dense_lead layers have a dense FFN (n_ff); the router may score
  // with sigmoid instead of softmax and add a per-expert selection bias (exp_probs_b, used to
  // choose, not to weigh); with n_expert_groups > 1 a token first keeps the n_group_used groups
  // whose two best (biased) scores sum highest, then chooses its experts among them.
  int32_t n_layer_dense_lead = 0;
  bool expert_gating_sigmoid = false;
  int32_t n_expert_groups = 0;
  int32_t n_group_used = 0;
  bool is_moe() const { return n_expert > 0; }
  bool layer_is_moe(int32_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }

  // Multi-head latent attention (deepseek2; kv_lora_rank > 0). A token's keys and values are
  // one latent row per layer: kv_lora_rank normalized latent values and rope_dim rotated key
  // dims, shared by all heads. The cache holds only that row (n_kv_heads = 1, head_dim =
  // kv_lora_rank + rope_dim, V = its first kv_lora_rank values), and attention runs on it
  // directly: each head's no-rope query part is absorbed into latent space through attn_k_b,
  // and its latent output expanded to v_head_dim values through attn_v_b (the "absorbed" MQA
  // form of llama.cpp and vLLM). q_dim() is then the absorbed query size.
  int32_t q_lora_rank = 0;   // 0: queries from attn_q directly (V2-Lite)
  int32_t kv_lora_rank = 0;
  int32_t qk_nope = 0;       // per-head query / key dims without rotary
  int32_t v_head_dim = 0;    // per-head value dims after attn_v_b
  bool is_mla() const { return kv_lora_rank > 0; }
  int32_t q_head_raw() const { return qk_nope + rope_dim; }  // a head of attn_q(_b)'s output

  // Reads and validates the configuration; throws triad::Error naming the bad key.
  static ModelConfig from_gguf(const gguf::GgufFile& f);
  // Size in floats of one token's K (or V) for one layer.
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  int32_t q_dim() const { return n_heads * head_dim; }
  // The RoPE of layer il (sliding-window layers of gemma3 use their own base and no scaling).
  kernels::RopeParams rope_params(int32_t il) const;
  bool layer_is_local(int32_t il) const {
    return sliding_window > 0 && il < static_cast<int32_t>(layer_uses_window.size()) &&
           layer_uses_window[il];
  }
  std::string summary() const;
};

}  // namespace triad
