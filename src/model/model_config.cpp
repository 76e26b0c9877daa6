#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "gguf/gguf_file.h"

namespace triad {
namespace {

Arch parse_arch(const std::string& a) {
  if (a == "llama") return Arch::kLlama;
  if (a == "qwen2") return Arch::kQwen2;
  if (a == "qwen3") return Arch::kQwen3;
  if (a == "gemma3") return Arch::kGemma3;
  if (a == "qwen3moe") return Arch::kQwen3Moe;
  if (a == "qwen2moe") return Arch::kQwen2Moe;
  if (a == "deepseek2") return Arch::kDeepseek2;
  if (a == "glm4moe") return Arch::kGlm4Moe;
  if (a == "gpt-oss") return Arch::kGptOss;
  if (a == "bert") return Arch::kBert;
  if (a == "nomic-bert") return Arch::kNomicBert;
  fail("unsupported architecture '", a,
       "' (general.architecture); supported: llama, qwen2, qwen3, gemma3, qwen3moe, qwen2moe, deepseek2, glm4moe, "
       "gpt-oss, bert, nomic-bert");
}

// An optional integer key in [lo, hi] (def when absent), checked before narrowing.
int32_t int_in(const gguf::GgufFile& f, const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  const int64_t v = f.get_int(key, def);
  TRIAD_CHECK(v >= lo && v <= hi, "model metadata '", key, "' = ", v, " is out of range (", lo, "..", hi, ")");
  return static_cast<int32_t>(v);
}

int32_t positive_int(const gguf::GgufFile& f, const std::string& key, int64_t max) {
  int64_t v = f.get_int(key);
  TRIAD_CHECK(v > 0 && v <= max, "model metadata '", key, "' = ", v, " is out of range (1..", max, ")");
  return static_cast<int32_t>(v);
}

// deepseek2's attention metadata. Two forms exist: files with attention.key_length_mla (the
// converter split attn_kv_b into attn_k_b / attn_v_b) state the cached latent row as
// key_length = kv_lora_rank + rope dims and value_length = kv_lora_rank, and the per-head sizes
// as *_mla; older files state the per-head sizes as key_length / value_length.
void read_mla(const gguf::GgufFile& f, const std::string& p, ModelConfig& c, double kq_mscale) {
  constexpr int64_t kMax = 1 << 16;
  c.kv_lora_rank = positive_int(f, p + "attention.kv_lora_rank", kMax);
  c.q_lora_rank = int_in(f, p + "attention.q_lora_rank", 0, 0, kMax);
  // llama.cpp's temperature tuning (Mistral's converter) is not implemented: refuse rather than
  // compute something else.
  TRIAD_CHECK(f.get_float(p + "attention.temperature_scale", 0.0) == 0.0, "model metadata '", p,
              "attention.temperature_scale' (attention temperature tuning) is not supported");
  TRIAD_CHECK(f.has(p + "rope.dimension_count"), "model metadata '", p, "rope.dimension_count' is missing");
  const bool mla_keys = f.has(p + "attention.key_length_mla");
  const int32_t k_head = mla_keys ? positive_int(f, p + "attention.key_length_mla", kMax)
                                  : positive_int(f, p + "attention.key_length", kMax);
  c.v_head_dim = mla_keys ? positive_int(f, p + "attention.value_length_mla", kMax)
                          : positive_int(f, p + "attention.value_length", kMax);
  if (mla_keys) {
    TRIAD_CHECK(c.head_dim == c.kv_lora_rank + c.rope_dim &&
                    f.get_int(p + "attention.value_length", 0) == c.kv_lora_rank,
                "model metadata: attention.key_length / value_length (", c.head_dim, " / ",
                f.get_int(p + "attention.value_length", 0), ") must be kv_lora_rank + rope dims / kv_lora_rank (",
                c.kv_lora_rank + c.rope_dim, " / ", c.kv_lora_rank, ")");
  }
  TRIAD_CHECK(k_head > c.rope_dim, "model metadata: the key head (", k_head, ") must be larger than rope.dimension_count (",
              c.rope_dim, ")");
  c.qk_nope = k_head - c.rope_dim;
  TRIAD_CHECK(c.kv_lora_rank + c.rope_dim <= kMax, "model metadata: kv_lora_rank + rope dims (",
              c.kv_lora_rank + c.rope_dim, ") exceeds ", kMax);
  // The cache and the attention kernel see one latent "head" per token.
  c.n_kv_heads = 1;
  c.head_dim = c.kv_lora_rank + c.rope_dim;
  // llama.cpp: kq_scale = mscale^2 / sqrt(per-head key size).
  c.attn_scale = static_cast<float>(kq_mscale * kq_mscale / std::sqrt(static_cast<double>(k_head)));
}

// deepseek2's and glm4moe's routing metadata (llama.cpp's keys and defaults).
void read_deepseek_experts(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  c.n_layer_dense_lead = int_in(f, p + "leading_dense_block_count", 0, 0, c.n_layers);
  const int64_t shared = f.get_int(p + "expert_shared_count", 0);
  TRIAD_CHECK(shared >= 0 && shared <= 64, "model metadata '", p, "expert_shared_count' = ", shared,
              " is out of range (0..64)");
  c.n_ff_shexp = c.n_ff_exp * static_cast<int32_t>(shared);
  c.expert_weights_norm = f.has(p + "expert_weights_norm") && f.get_bool(p + "expert_weights_norm");
  // expert_gating_func: 1 softmax, 2 sigmoid. Absent: softmax for deepseek2 (V2, V2.5 files),
  // except GLM-4.7 Lite (47 or 48 layers, a vocabulary of 154880), and sigmoid for glm4moe, as
  // llama.cpp decides.
  int64_t absent = c.arch == Arch::kGlm4Moe ? 2 : 1;
  if (c.arch == Arch::kDeepseek2 && (c.n_layers == 47 || c.n_layers == 48)) {
    const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
    if (tokens != nullptr && tokens->is_array() && tokens->array_size() == 154880) absent = 2;
  }
  const int64_t gating = f.get_int(p + "expert_gating_func", absent);
  TRIAD_CHECK(gating == 0 || gating == 1 || gating == 2, "model metadata '", p, "expert_gating_func' = ", gating,
              " is not supported (1 softmax, 2 sigmoid)");
  c.expert_gating_sigmoid = gating == 2;
  c.n_expert_groups = int_in(f, p + "expert_group_count", 0, 0, 4096);
  c.n_group_used = int_in(f, p + "expert_group_used_count", 0, 0, 4096);
  if (c.n_expert_groups > 1) {
    TRIAD_CHECK(c.n_expert % c.n_expert_groups == 0 && c.n_expert / c.n_expert_groups >= 2,
                "model metadata '", p, "expert_group_count' = ", c.n_expert_groups,
                " must divide expert_count (", c.n_expert, ") into groups of at least 2");
    TRIAD_CHECK(c.n_group_used >= 1 && c.n_group_used <= c.n_expert_groups &&
                    c.n_group_used * (c.n_expert / c.n_expert_groups) >= c.n_expert_used,
                "model metadata '", p, "expert_group_used_count' = ", c.n_group_used,
                " must be in 1..", c.n_expert_groups, " and leave at least expert_used_count experts");
  }
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
  }
  return "?";
}

Pooling parse_pooling(const std::string& s) {
  if (s == "none") return Pooling::kNone;
  if (s == "mean") return Pooling::kMean;
  if (s == "cls") return Pooling::kCls;
  if (s == "last") return Pooling::kLast;
  fail("pooling must be none, mean, cls or last, not '", s, "'");
}

kernels::RopeParams ModelConfig::rope_params(int32_t il) const {
  const bool local = layer_is_local(il);
  kernels::RopeParams r;
  r.layout = rope_layout;
  r.rot_dim = rope_dim;
  r.freq_base = local ? rope_base_local : rope_base;
  // gemma3's sliding-window layers never scale (llama.cpp's freq_scale_swa = 1, HF's
  // rope_local_base_freq without rope_scaling).
  const bool scaled = !(local && arch == Arch::kGemma3);
  r.freq_scale = scaled ? rope_freq_scale : 1.f;
  if (scaled && rope_yarn) {
    r.ext_factor = 1.f;
    r.corr_lo = yarn_corr_lo;
    r.corr_hi = yarn_corr_hi;
    r.mscale = rope_mscale;
  } else if (scaled) {
    r.mscale = rope_mscale;
  }
  return r;
}

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  c.arch = parse_arch(c.arch_name);
  c.name = f.get_string("general.name", "");
  const std::string p = c.arch_name + ".";
  constexpr int64_t kMaxDim = 1 << 20;
  c.n_embd = positive_int(f, p + "embedding_length", kMaxDim);
  c.n_layers = positive_int(f, p + "block_count", 4096);
  // block_count includes the multi-token-prediction layers (DeepSeek-V3, GLM-4.5) that the
  // converter appends; they are not part of the forward pass and are never bound.
  const int32_t nextn = int_in(f, p + "nextn_predict_layers", 0, 0, c.n_layers - 1);
  c.n_layers -= nextn;
  c.n_heads = positive_int(f, p + "attention.head_count", 4096);
  c.n_kv_heads = f.has(p + "attention.head_count_kv")
                     ? positive_int(f, p + "attention.head_count_kv", 4096)
                     : c.n_heads;
  TRIAD_CHECK(c.n_heads % c.n_kv_heads == 0, "model metadata: attention.head_count (", c.n_heads,
              ") is not a multiple of attention.head_count_kv (", c.n_kv_heads, ")");
  c.n_ff = positive_int(f, p + "feed_forward_length", kMaxDim);
  c.n_ctx_train = f.has(p + "context_length") ? positive_int(f, p + "context_length", 1 << 24) : 4096;
  if (f.has(p + "attention.key_length")) {
    c.head_dim = positive_int(f, p + "attention.key_length", 4096);
    if (f.has(p + "attention.value_length") && c.arch != Arch::kDeepseek2) {
      TRIAD_CHECK(f.get_int(p + "attention.value_length") == c.head_dim,
                  "model metadata: attention.value_length differs from key_length (unsupported)");
    }
  } else {
    TRIAD_CHECK(c.n_embd % c.n_heads == 0, "model metadata: embedding_length (", c.n_embd,
                ") is not a multiple of attention.head_count (", c.n_heads, ")");
    c.head_dim = c.n_embd / c.n_heads;
  }
  const bool layer_norm = c.arch == Arch::kBert || c.arch == Arch::kNomicBert;
  c.norm_eps = static_cast<float>(layer_norm ? f.get_float(p + "attention.layer_norm_epsilon", 1e-12)
                                             : f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
  TRIAD_CHECK(c.norm_eps > 0 && c.norm_eps < 1, "model metadata: layer_norm_rms_epsilon out of range");

  // RoPE
  c.rope_dim = c.head_dim;
  if (f.has(p + "rope.dimension_count")) c.rope_dim = positive_int(f, p + "rope.dimension_count", 4096);
  TRIAD_CHECK(c.rope_dim <= c.head_dim && c.rope_dim % 2 == 0, "model metadata: rope.dimension_count (",
              c.rope_dim, ") must be even and <= head size (", c.head_dim, ")");
  c.rope_base = static_cast<float>(f.get_float(p + "rope.freq_base", 10000.0));
  TRIAD_CHECK(c.rope_base > 0, "model metadata: rope.freq_base must be positive");
  std::string scaling = f.get_string(p + "rope.scaling.type", "none");
  double factor = 1.0;
  if (scaling == "linear" || scaling == "yarn") {
    factor = f.get_float(p + "rope.scaling.factor", 1.0);
    TRIAD_CHECK(std::isfinite(factor) && factor > 0, "model metadata: rope.scaling.factor must be positive");
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    fail("model metadata: rope.scaling.type '", scaling, "' is not supported (none, linear, yarn)");
  }
  // rope.scaling.attn_factor multiplies cos / sin (llama.cpp's rope_attn_factor).
  const double attn_factor = f.get_float(p + "rope.scaling.attn_factor", 1.0);
  TRIAD_CHECK(std::isfinite(attn_factor) && attn_factor > 0, "model metadata: rope.scaling.attn_factor must be positive");
  // YaRN's attention temperature: mscale = 1 + log_mul * ln(factor) where the GGUF's
  // rope.scaling.yarn_log_multiplier is 0.1 * HF's mscale_all_dim (deepseek2 only).
  const double yarn_log_mul = f.get_float(p + "rope.scaling.yarn_log_multiplier", 0.0);
  TRIAD_CHECK(std::isfinite(yarn_log_mul) && yarn_log_mul >= 0, "model metadata: rope.scaling.yarn_log_multiplier is bad");
  double kq_mscale = 1.0;  // the attention scale is multiplied by its square (deepseek2)
  c.rope_mscale = static_cast<float>(attn_factor);
  if (scaling == "yarn" && factor > 1.0) {
    c.rope_yarn = true;
    const int64_t orig = f.has(p + "rope.scaling.original_context_length")
                             ? positive_int(f, p + "rope.scaling.original_context_length", 1 << 24)
                             : c.n_ctx_train;
    // Defaults and keys as llama.cpp: beta_fast 32, beta_slow 1.
    const double beta_fast = f.get_float(p + "rope.scaling.yarn_beta_fast", 32.0);
    const double beta_slow = f.get_float(p + "rope.scaling.yarn_beta_slow", 1.0);
    TRIAD_CHECK(std::isfinite(beta_fast) && std::isfinite(beta_slow) && beta_fast > 0 && beta_slow > 0,
                "model metadata: rope.scaling.yarn_beta_fast / yarn_beta_slow must be positive");
    TRIAD_CHECK(c.rope_base > 1.f, "model metadata: YaRN needs rope.freq_base > 1");
    kernels::yarn_corr_dims(c.rope_dim, static_cast<int32_t>(orig), c.rope_base, static_cast<float>(beta_fast),
                            static_cast<float>(beta_slow), &c.yarn_corr_lo, &c.yarn_corr_hi);
    if (c.arch == Arch::kDeepseek2 && yarn_log_mul > 0) {
      // DeepSeek (HF DeepseekV2YarnRotaryEmbedding with mscale == mscale_all_dim, as llama.cpp
      // assumes): cos / sin unscaled, the temperature moved into the attention scale.
      kq_mscale = attn_factor * (1.0 + yarn_log_mul * std::log(factor));
    } else if (c.arch == Arch::kDeepseek2) {
      // No yarn_log_multiplier: llama.cpp's deepseek2 graph puts 1 + 0.1 ln(factor) on cos /
      // sin and also, squared, into the attention scale (HF would only do the former); we
      // follow llama.cpp, whose converter wrote these files.
      c.rope_mscale = static_cast<float>(attn_factor * (1.0 + 0.1 * std::log(factor)));
      kq_mscale = c.rope_mscale;
    } else {
      // Plain YaRN (HF _compute_yarn_parameters): cos / sin times 1 + 0.1 ln(factor).
      c.rope_mscale = static_cast<float>(attn_factor * (1.0 + 0.1 * std::log(factor)));
    }
  }
  c.rope_base_local = c.rope_base;

  c.sliding_window = static_cast<int32_t>(f.get_int(p + "attention.sliding_window", 0));
  TRIAD_CHECK(c.sliding_window >= 0, "model metadata: attention.sliding_window is negative");
  c.layer_uses_window.assign(c.n_layers, c.sliding_window > 0 ? 1 : 0);

  switch (c.arch) {
    case Arch::kLlama:
      c.rope_layout = kernels::RopeLayout::kNormal;
      break;
    case Arch::kQwen2:
      c.rope_layout = kernels::RopeLayout::kNeox;
      c.qkv_bias = true;
      break;
    case Arch::kQwen3:
      c.rope_layout = kernels::RopeLayout::kNeox;
      c.qk_norm = true;
      break;
    case Arch::kQwen3Moe:
      c.rope_layout = kernels::RopeLayout::kNeox;
      c.qk_norm = true;
      break;
    case Arch::kQwen2Moe:
      c.rope_layout = kernels::RopeLayout::kNeox;
      break;
    case Arch::kDeepseek2:
      c.rope_layout = kernels::RopeLayout::kNormal;  // llama.cpp: LLAMA_ROPE_TYPE_NORM
      break;
    case Arch::kGlm4Moe:
      // GLM-4.5: neox pairs over the partial rotary dims, q/k/v biases (bound when present),
      // QK norm only in the files that have it (the 355B model), and the norm before the FFN
      // stored as post_attention_norm (HF's post_attention_layernorm).
      c.rope_layout = kernels::RopeLayout::kNeox;
      c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
      c.ffn_norm_name = "post_attention_norm";
      break;
    case Arch::kGptOss: {
      // gpt-oss: neox RoPE (YaRN from metadata, on every layer), attention sinks, q/k/v/o biases,
      // sliding-window and full layers alternating (llama.cpp's default pattern 2: layer il is
      // windowed when il % n < n - 1), the norm before the FFN stored as post_attention_norm, and
      // the clamped SwiGLU in the experts.
      c.rope_layout = kernels::RopeLayout::kNeox;
      c.ffn_norm_name = "post_attention_norm";
      c.ffn_act = FfnActivation::kSwigluOai;
      TRIAD_CHECK(c.sliding_window > 0, "model metadata '", p, "attention.sliding_window' is missing (gpt-oss)");
      const int32_t pattern = int_in(f, p + "attention.sliding_window_pattern", 2, 1, 4096);
      for (int32_t il = 0; il < c.n_layers; ++il) c.layer_uses_window[il] = il % pattern < pattern - 1 ? 1 : 0;
      c.rope_base_local = static_cast<float>(f.get_float(p + "rope.freq_base_swa", c.rope_base));
      break;
    }
    case Arch::kBert:
    case Arch::kNomicBert: {
      c.encoder = true;
      c.causal = f.has(p + "attention.causal") && f.get_bool(p + "attention.causal");
      TRIAD_CHECK(!c.causal, "model metadata '", p, "attention.causal' = true: a causal ", c.arch_name, " is not supported");
      if (c.arch == Arch::kBert) {
        c.qkv_bias = true;
        c.rope_dim = 0;  // learned absolute positions
      } else {
        c.rope_layout = kernels::RopeLayout::kNeox;  // rotary over the whole head
        c.ffn_act = FfnActivation::kSilu;
      }
      const int64_t pooling = f.get_int(p + "pooling_type", 0);
      TRIAD_CHECK(pooling >= 0 && pooling <= 3, "model metadata '", p, "pooling_type' = ", pooling,
                  " is not supported (0 none, 1 mean, 2 cls, 3 last)");
      c.pooling = static_cast<Pooling>(pooling);
      break;
    }
    case Arch::kGemma3:
      c.rope_layout = kernels::RopeLayout::kNeox;
      c.qk_norm = true;
      c.post_norms = true;
      c.ffn_act = FfnActivation::kGeluTanh;
      c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
      // Five local (sliding-window, RoPE base 10000) layers, then one global layer.
      c.rope_base_local = 10000.f;
      for (int32_t il = 0; il < c.n_layers; ++il)
        c.layer_uses_window[il] = (c.sliding_window > 0 && (il + 1) % 6 != 0) ? 1 : 0;
      break;
  }
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // Gemma 3 scales scores by query_pre_attn_scalar^-1/2, which GGUF does not store: head_dim for
  // every size but 27B (62 layers), where it is n_embd / n_head (llama.cpp's rule, by layer count).
  if (c.arch == Arch::kGemma3 && c.n_layers == 62)
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd) / static_cast<float>(c.n_heads));
  if (c.arch == Arch::kDeepseek2) read_mla(f, p, c, kq_mscale);

  // Experts. llama with experts is Mixtral; the other dense architectures must not declare any.
  const int64_t n_expert = f.get_int(p + "expert_count", 0);
  // (deepseek2 without experts: every layer dense, as llama.cpp allows.)
  const bool moe_arch = c.arch == Arch::kQwen3Moe || c.arch == Arch::kQwen2Moe || c.arch == Arch::kGlm4Moe ||
                        c.arch == Arch::kGptOss ||
                        ((c.arch == Arch::kLlama || c.arch == Arch::kDeepseek2) && n_expert > 0);
  if (!moe_arch) {
    TRIAD_CHECK(n_expert == 0, "model metadata '", p, "expert_count' = ", n_expert, ": ", c.arch_name,
                " with experts is not supported");
  } else {
    c.n_expert = positive_int(f, p + "expert_count", 4096);
    c.n_expert_used = positive_int(f, p + "expert_used_count", 4096);
    TRIAD_CHECK(c.n_expert_used <= c.n_expert, "model metadata '", p, "expert_used_count' = ",
                c.n_expert_used, " exceeds '", p, "expert_count' = ", c.n_expert);
    // llama.cpp: without expert_feed_forward_length, an expert of the qwen MoE families is
    // n_ff / n_expert_used wide, and Mixtral's (llama) is n_ff wide (its converter writes the
    // expert size as feed_forward_length).
    c.n_ff_exp = f.has(p + "expert_feed_forward_length")
                     ? positive_int(f, p + "expert_feed_forward_length", kMaxDim)
                 : c.arch == Arch::kLlama ? c.n_ff
                                          : std::max(1, c.n_ff / c.n_expert_used);
    // llama.cpp's graphs: qwen3moe and Mixtral always renormalize the top-k weights (Mixtral's
    // softmax over the chosen logits is the same thing), qwen2moe never does; qwen2moe adds a
    // shared expert of expert_shared_feed_forward_length (default n_ff).
    // (gpt-oss takes the softmax over the k chosen router logits: the same weights.)
    c.expert_weights_norm = c.arch == Arch::kQwen3Moe || c.arch == Arch::kLlama || c.arch == Arch::kGptOss;
    if (c.arch == Arch::kQwen2Moe) {
      c.n_ff_shexp = f.has(p + "expert_shared_feed_forward_length")
                         ? positive_int(f, p + "expert_shared_feed_forward_length", kMaxDim)
                         : c.n_ff;
      c.shexp_gated = true;
    }
    if (c.arch == Arch::kDeepseek2 || c.arch == Arch::kGlm4Moe) read_deepseek_experts(f, p, c);
    // llama.cpp scales only when the key is present and neither 0 nor 1.
    const double scale = f.get_float(p + "expert_weights_scale", 0.0);
    TRIAD_CHECK(std::isfinite(scale) && scale >= 0, "model metadata '", p, "expert_weights_scale' = ", scale,
                " must be finite and >= 0");
    c.expert_weights_scale = (scale == 0.0 || scale == 1.0) ? 1.f : static_cast<float>(scale);
    TRIAD_CHECK(std::isfinite(c.expert_weights_scale), "model metadata '", p, "expert_weights_scale' = ", scale,
                " overflows a float");
  }
  // Every float the kernels take must survive narrowing (a finite double can overflow a float).
  TRIAD_CHECK(std::isfinite(c.rope_base) && std::isfinite(c.rope_base_local) && std::isfinite(c.rope_freq_scale) &&
                  c.rope_freq_scale > 0.f && std::isfinite(c.rope_mscale) && std::isfinite(c.yarn_corr_lo) &&
                  std::isfinite(c.yarn_corr_hi) && std::isfinite(c.attn_scale) && c.attn_scale > 0.f,
              "model metadata: RoPE or attention scaling out of range (freq_base ", c.rope_base, ", freq_scale ",
              c.rope_freq_scale, ", cos/sin scale ", c.rope_mscale, ", attention scale ", c.attn_scale, ")");
  return c;
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << arch_name << (name.empty() ? "" : " '" + name + "'") << ": " << n_layers << " layers, hidden "
     << n_embd << ", heads " << n_heads << "/" << n_kv_heads << " (q/kv) x " << head_dim << ", ffn "
     << n_ff << ", vocab " << n_vocab;
  if (sliding_window > 0) os << ", sliding window " << sliding_window;
  if (n_expert > 0) os << ", experts " << n_expert_used << " of " << n_expert << " x ffn " << n_ff_exp;
  if (n_ff_shexp > 0) os << " + shared ffn " << n_ff_shexp;
  if (n_layer_dense_lead > 0) os << " (first " << n_layer_dense_lead << " layers dense)";
  if (is_mla())
    os << ", latent attention: kv rank " << kv_lora_rank << " + rope " << rope_dim << " cached per token, q rank "
       << q_lora_rank << ", head k " << qk_nope << "+" << rope_dim << " / v " << v_head_dim;
  if (rope_yarn) os << ", YaRN x" << 1.f / rope_freq_scale;
  if (encoder) os << ", encoder (bidirectional), " << pooling_name(pooling) << " pooling";
  return os.str();
}

}  // namespace triad
