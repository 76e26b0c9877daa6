// Model weights bound from a GGUF file, each checked at load time for presence, dtype and shape.
//
// Matrices point into the file's mapping (zero copy); small vectors (norm weights, biases) are
// converted to owned f32 arrays. A load-time conversion (online quantization, --weight-type) may
// replace matrices with ones in storage the weights own (block_matrices, own_bytes). Immutable
// after load; safe to share across threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "kernels/matmul.h"
#include "model/model_config.h"

namespace triad {
namespace gguf { class GgufFile; struct TensorInfo; }

// n matrices of one shape and type: the experts of a mixture-of-experts FFN matrix (or the
// per-head matrices of latent attention). Either one 3-D
// GGUF tensor [cols, rows, n] (experts back to back: "ffn_gate_exps") or, in older Mixtral
// files, n 2-D tensors ("ffn_gate.0" ... "ffn_gate.N-1") wherever the file put them. at(e) is
// expert e's matrix (zero copy in both layouts).
struct ExpertMatrices {
  kernels::WeightMatrix first;        // expert 0
  std::vector<const void*> data;      // per expert: its matrix's bytes
  int32_t n() const { return static_cast<int32_t>(data.size()); }
  kernels::WeightMatrix at(int32_t e) const {
    kernels::WeightMatrix w = first;
    w.data = data[static_cast<size_t>(e)];
    return w;
  }
};

struct LayerWeights {
  const float* attn_norm = nullptr;   // [n_embd]
  kernels::WeightMatrix wq, wk, wv;   // [q_dim x n_embd], [kv_dim x n_embd] x2
  const float* bq = nullptr;          // [q_dim]   (qkv_bias only)
  const float* bk = nullptr;          // [kv_dim]
  const float* bv = nullptr;          // [kv_dim]
  const float* q_norm = nullptr;      // [head_dim] (qk_norm only)
  const float* k_norm = nullptr;      // [head_dim]
  kernels::WeightMatrix wo;           // [n_embd x q_dim]   (MLA: [n_embd x n_heads*v_head_dim])
  const float* bo = nullptr;          // [n_embd] attn_output.bias (gpt-oss)
  const float* attn_sinks = nullptr;  // [n_heads] sink logits (gpt-oss)
  // Multi-head latent attention (deepseek2) instead of wq / wk / wv:
  kernels::WeightMatrix wq_a;         // [q_lora_rank x n_embd]  (q_lora_rank > 0; else wq is
  const float* q_a_norm = nullptr;    // [q_lora_rank]            [n_heads*(qk_nope+rope) x n_embd])
  kernels::WeightMatrix wq_b;         // [n_heads*(qk_nope+rope) x q_lora_rank]
  kernels::WeightMatrix wkv_a;        // [kv_lora_rank+rope x n_embd] (attn_kv_a_mqa)
  const float* kv_a_norm = nullptr;   // [kv_lora_rank]
  ExpertMatrices wk_b;                // per head [kv_lora_rank x qk_nope]: absorbs q_nope
  ExpertMatrices wv_b;                // per head [v_head_dim x kv_lora_rank]: expands the output
  const float* post_attn_norm = nullptr;  // [n_embd] (post_norms only)
  const float* ffn_norm = nullptr;    // [n_embd]
  kernels::WeightMatrix w_gate, w_up; // [n_ff x n_embd]        (dense FFN)
  kernels::WeightMatrix w_down;       // [n_embd x n_ff]
  kernels::WeightMatrix gate_inp;     // [n_expert x n_embd]    (MoE: the router)
  ExpertMatrices gate_exps, up_exps;  // n_expert x [n_ff_exp x n_embd]
  ExpertMatrices down_exps;           // n_expert x [n_embd x n_ff_exp]
  const float* exp_probs_b = nullptr;           // [n_expert] selection bias (deepseek2, optional)
  const float* gate_inp_b = nullptr;            // [n_expert] router bias (gpt-oss)
  // Per-expert biases (gpt-oss): [n_expert x n_ff_exp] for gate and up, [n_expert x n_embd] down.
  const float* gate_exps_b = nullptr;
  const float* up_exps_b = nullptr;
  const float* down_exps_b = nullptr;
  const float* gate_inp_shexp = nullptr;        // [n_embd] (shared expert's gate; qwen2moe)
  kernels::WeightMatrix gate_shexp, up_shexp;   // [n_ff_shexp x n_embd]
  kernels::WeightMatrix down_shexp;             // [n_embd x n_ff_shexp]
  const float* post_ffn_norm = nullptr;   // [n_embd] (post_norms only)
  // Encoder (bert) blocks: the LayerNorms after the attention and the FFN residual adds
  // (attn_output_norm, layer_output_norm, each with a bias), the non-gated FFN's biases.
  const float* attn_out_norm = nullptr;   // [n_embd]
  const float* attn_out_norm_b = nullptr; // [n_embd]
  const float* out_norm = nullptr;        // [n_embd]
  const float* out_norm_b = nullptr;      // [n_embd]
  const float* b_up = nullptr;            // [n_ff]
  const float* b_down = nullptr;          // [n_embd]
};

struct ModelWeights {
  kernels::WeightMatrix token_embd;   // [n_vocab x n_embd]
  const float* output_norm = nullptr; // [n_embd]
  kernels::WeightMatrix output;       // [n_vocab x n_embd] (token_embd when tied; none for encoders)
  // Encoders (bert): learned positions and token types (one row read per token), and the
  // LayerNorm of the summed embeddings.
  kernels::WeightMatrix pos_embd;     // [n_ctx_train x n_embd]
  kernels::WeightMatrix token_types;  // [n_token_types x n_embd]
  const float* embd_norm = nullptr;   // [n_embd]
  const float* embd_norm_b = nullptr; // [n_embd]
  std::vector<LayerWeights> layers;
  uint64_t matrix_bytes = 0;          // bytes of all weight matrices
  uint64_t bytes_per_token = 0;       // weight bytes one decode step reads (the roofline numerator)

  // One attention or FFN projection of a layer, by its GGUF tensor name.
  struct NamedMatrix {
    std::string name;
    kernels::WeightMatrix* matrix;
  };
  // Every layer's projection matrices (attn q/k/v/output or MLA q/q_a/q_b/kv_a/output, shared
  // experts, dense ffn gate/up/down), in layer order. (Routed experts and MLA's per-head
  // attn_k_b / attn_v_b are not among them: load-time conversion leaves them as stored.)
  std::vector<NamedMatrix> block_matrices();
  // Storage owned by the weights for matrices made at load time (64-byte aligned; the address
  // stays valid for the weights' life, moves included): zeroed, or with zeroed false
  // uninitialized, for a matrix the caller writes whole (its pages then become resident only
  // as they are written).
  uint8_t* own_bytes(size_t n, bool zeroed = true);
  // Whether p lies in storage made by own_bytes.
  bool owns(const void* p) const;

  // Re-lays the quantized matrices for the kernels of ISA `level`. AVX-512: into the lane layout
  // (kernels/lane_layout.h) every block matrix, the output matrix (token_embd too when it is
  // the tied output; get_rows reads it through row_from_lanes / row_from_panel), the routed
  // experts and latent attention's per-head matrices, of a type that has one; matrices of a
  // panel type its panel kernels serve best (kernels::matmul_prefers_panels: Q4_0 ... Q8_0,
  // IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) with whole panels of rows (not experts) go into
  // 16-row panels instead (kernels/panel_layout.h). AVX2: only the matrices that its panel
  // kernels serve best (today every panel type, Q3_K included) go into panels; the rest keep
  // their GGUF blocks. Scalar: nothing. Same bytes: a matrix in the file's
  // mapping is copied into storage the weights own and its pages are released; one made at
  // load time is re-laid in place. Copies stop where they would pass `budget` bytes (0: 7/8 of
  // the memory the OS reports available, so a model larger than memory keeps running from its
  // mapping): the rest stays in GGUF layout.
  struct Relayout {
    int matrices = 0;         // re-laid (every expert and head counted)
    int kept = 0;             // left in GGUF layout for want of memory (an expert set counts once)
    uint64_t kept_bytes = 0;  // their bytes
  };
  Relayout relayout(const gguf::GgufFile& f, IsaLevel level, int threads, uint64_t budget = 0);
  // Whether any matrix the forward pass multiplies by has a type with a lane layout but is still
  // in GGUF blocks, in neither lanes nor panels (all of them without relayout): on AVX-512 such
  // a matrix's rows depend on the batch (kernels/matmul.h batch invariance).
  bool has_gguf_layout_quant() const;

  // Binds every tensor the config needs; fills config.n_vocab and config.tied_output.
  // Throws triad::Error naming the tensor that is missing, misshapen or of an unsupported type.
  static ModelWeights bind(const gguf::GgufFile& f, ModelConfig& config);

 private:
  std::vector<AlignedBuffer<float>> owned_;  // converted vectors
  std::vector<AlignedBuffer<uint8_t>> owned_bytes_;  // matrices made at load time
  // n f32 values of a 1-D tensor, or with rows > 1 of a 2-D [n / rows, rows] one.
  const float* vector_f32(const gguf::GgufFile& f, const std::string& name, int64_t n, bool required,
                          int64_t rows = 1);
  kernels::WeightMatrix matrix(const gguf::GgufFile& f, const std::string& name, int64_t rows,
                               int64_t cols);
  // A 3-D tensor [cols, rows, n] as n matrices.
  // `what` names the n in errors ("experts", "heads").
  ExpertMatrices stacked(const gguf::TensorInfo& t, int64_t n, int64_t rows, int64_t cols, const char* what);
  // The experts of one FFN matrix of layer `blk` ("blk.N."), kind "gate", "up" or "down":
  // the stacked tensor "ffn_<kind>_exps.weight" or, without it, "ffn_<kind>.<e>.weight" for
  // every expert e.
  ExpertMatrices experts(const gguf::GgufFile& f, const std::string& blk, const std::string& kind, int64_t n,
                         int64_t rows, int64_t cols);
  uint64_t expert_bytes_ = 0;  // bytes of all expert matrices (a token reads n_expert_used of n)
  void bind_mla(const gguf::GgufFile& f, const ModelConfig& c, int32_t il, LayerWeights& L);
  static ModelWeights bind_encoder(const gguf::GgufFile& f, ModelConfig& c);
};

}  // namespace triad
