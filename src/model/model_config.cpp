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
  fail("unsupported architecture '", a, "' (general.architecture); supported: llama, qwen2, qwen3, gemma3, qwen3moe, qwen2moe");
}

int32_t positive_int(const gguf::GgufFile& f, const std::string& key, int64_t max) {
  int64_t v = f.get_int(key);
  TRIAD_CHECK(v > 0 && v <= max, "model metadata '", key, "' = ", v, " is out of range (1..", max, ")");
  return static_cast<int32_t>(v);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  c.arch = parse_arch(c.arch_name);
  c.name = f.get_string("general.name", "");
  const std::string p = c.arch_name + ".";
  constexpr int64_t kMaxDim = 1 << 20;
  c.n_embd = positive_int(f, p + "embedding_length", kMaxDim);
  c.n_layers = positive_int(f, p + "block_count", 4096);
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
    if (f.has(p + "attention.value_length")) {
      TRIAD_CHECK(f.get_int(p + "attention.value_length") == c.head_dim,
                  "model metadata: attention.value_length differs from key_length (unsupported)");
    }
  } else {
    TRIAD_CHECK(c.n_embd % c.n_heads == 0, "model metadata: embedding_length (", c.n_embd,
                ") is not a multiple of attention.head_count (", c.n_heads, ")");
    c.head_dim = c.n_embd / c.n_heads;
  }
  c.norm_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
  TRIAD_CHECK(c.norm_eps > 0 && c.norm_eps < 1, "model metadata: layer_norm_rms_epsilon out of range");

  // RoPE
  c.rope_dim = c.head_dim;
  if (f.has(p + "rope.dimension_count")) c.rope_dim = positive_int(f, p + "rope.dimension_count", 4096);
  TRIAD_CHECK(c.rope_dim <= c.head_dim && c.rope_dim % 2 == 0, "model metadata: rope.dimension_count (",
              c.rope_dim, ") must be even and <= head size (", c.head_dim, ")");
  c.rope_base = static_cast<float>(f.get_float(p + "rope.freq_base", 10000.0));
  TRIAD_CHECK(c.rope_base > 0, "model metadata: rope.freq_base must be positive");
  std::string scaling = f.get_string(p + "rope.scaling.type", "none");
  if (scaling == "linear") {
    double factor = f.get_float(p + "rope.scaling.factor", 1.0);
    TRIAD_CHECK(factor > 0, "model metadata: rope.scaling.factor must be positive");
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    fail("model metadata: rope.scaling.type '", scaling, "' is not supported (none, linear)");
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

  // Experts. llama with experts is Mixtral; the other dense architectures must not declare any.
  const int64_t n_expert = f.get_int(p + "expert_count", 0);
  const bool moe_arch = c.arch == Arch::kQwen3Moe || c.arch == Arch::kQwen2Moe ||
                        (c.arch == Arch::kLlama && n_expert > 0);
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
    c.expert_weights_norm = c.arch == Arch::kQwen3Moe || c.arch == Arch::kLlama;
    if (c.arch == Arch::kQwen2Moe)
      c.n_ff_shexp = f.has(p + "expert_shared_feed_forward_length")
                         ? positive_int(f, p + "expert_shared_feed_forward_length", kMaxDim)
                         : c.n_ff;
    // llama.cpp scales only when the key is present and neither 0 nor 1.
    const double scale = f.get_float(p + "expert_weights_scale", 0.0);
    TRIAD_CHECK(std::isfinite(scale) && scale >= 0, "model metadata '", p, "expert_weights_scale' = ", scale,
                " must be finite and >= 0");
    c.expert_weights_scale = (scale == 0.0 || scale == 1.0) ? 1.f : static_cast<float>(scale);
  }
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
  return os.str();
}

}  // namespace triad
