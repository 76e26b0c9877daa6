// Hugging Face folder -> GGUF (hf_convert.h).
#include "convert/hf_convert.h"
#include "convert/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "gguf/gguf_writer.h"
#include "gguf/inspect.h"
#include "quant/quantize.h"
#include "safetensors/safetensors.h"
#include "tensor/fp16.h"

namespace triad::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using safetensors::Tensor;

std::string q(std::string_view s) { return gguf::quote_bytes(s, 120, '\''); }

constexpr uint64_t kMaxJsonBytes = 256u << 20;

// A JSON object (or, with array_ok, an array) of the folder; null when absent and not required.
json read_json(const fs::path& p, bool required, bool array_ok = false) {
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    if (required) fail("convert: ", q(p.string()), " is missing");
    return nullptr;
  }
  if (fs::file_size(p, ec) > kMaxJsonBytes) fail("convert: ", q(p.string()), " is over ", kMaxJsonBytes, " bytes");
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (safetensors::json_nesting(text) > 64) fail("convert: ", q(p.string()), " nests too deeply");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !(j.is_object() || (array_ok && j.is_array())))
    fail("convert: ", q(p.string()), " is not a JSON ", array_ok ? "object or array" : "object");
  return j;
}

int64_t cfg_int(const json& c, const char* key, int64_t def, bool required) {
  if (!c.contains(key) || c[key].is_null()) {
    if (required) fail("convert: config.json has no '", key, "'");
    return def;
  }
  if (!c[key].is_number_integer() || c[key].get<int64_t>() < 0 || c[key].get<int64_t>() > (int64_t{1} << 40))
    fail("convert: config.json '", key, "' is not a non-negative integer");
  return c[key].get<int64_t>();
}

double cfg_num(const json& c, const char* key, double def) {
  if (!c.contains(key) || c[key].is_null()) return def;
  if (!c[key].is_number()) fail("convert: config.json '", key, "' is not a number");
  return c[key].get<double>();
}

struct Arch {
  std::string name;         // GGUF general.architecture
  bool permute_qk = false;  // llama: rotate-half rows -> interleaved pairs
  bool qkv_bias = false;    // qwen2
  bool qk_norm = false;     // qwen3
  bool encoder = false;     // bert
  bool gemma = false;       // gemma3: RMS norms scale by (1 + w), stored as such; pre / post norms
};

Arch arch_of(const json& cfg) {
  if (!cfg.contains("architectures") || !cfg["architectures"].is_array() || cfg["architectures"].empty() ||
      !cfg["architectures"][0].is_string())
    fail("convert: config.json names no 'architectures'");
  const std::string a = cfg["architectures"][0].get<std::string>();
  if (a == "Qwen2ForCausalLM") return {"qwen2", false, true, false};
  if (a == "Qwen3ForCausalLM") return {"qwen3", false, false, true};
  if (a == "LlamaForCausalLM" || a == "MistralForCausalLM") return {"llama", true, false, false};
  if (a == "Gemma3ForCausalLM" || a == "Gemma3ForConditionalGeneration") return {"gemma3", false, false, true, false, true};
  if (a == "BertModel" || a == "BertForMaskedLM") return {"bert", false, true, false, true};
  if (a == "NomicBertModel") return {"nomic-bert", false, false, false, true};
  fail("convert: architecture ", q(a), " is not supported yet (supported: Qwen2ForCausalLM, Qwen3ForCausalLM, "
       "LlamaForCausalLM, MistralForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration (its text model), BertModel, "
       "NomicBertModel)");
}

// The folder's tokenizer (tokenizer.json, tokenizer_config.json, chat_template.jinja) as GGUF keys.
void write_tokenizer(gguf::GgufWriter& w, const fs::path& dir, const json& cfg, int64_t n_vocab) {
  write_gguf_tokenizer(w, read_json(dir / "tokenizer.json", true), read_json(dir / "tokenizer_config.json", false), dir, cfg,
                       n_vocab);
}

// One output tensor: its HF source, GGUF name and shape (rows x cols, or a vector).
struct Plan {
  std::string hf, gguf;
  std::vector<int64_t> shape;  // HF order: [rows, cols] or [n]
  int64_t permute_heads = 0;   // llama q/k: rows regrouped per head (0: none)
  bool keep_f32 = false;       // stays F32 whatever the output type (as llama.cpp keeps positions)
  float add = 0.f;             // added to every value (gemma's norms: HF scales by 1 + w, GGUF stores 1 + w)
};

// Gemma 3's text model: a Gemma3ForConditionalGeneration keeps it under text_config (its vision
// tower is not converted), and a config may leave out what transformers' Gemma3TextConfig
// defaults, which are filled in here. What Triad's gemma3 (like llama.cpp's) hard-wires must
// hold: every 6th layer global and the others sliding-window, local RoPE base 10000, attention
// scaled by 1/sqrt(head_dim), no soft-capping, GELU (tanh).
json gemma3_text_config(const json& top) {
  json c = top.contains("text_config") && top["text_config"].is_object() ? top["text_config"] : top;
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (!c.contains(k) && top.contains(k)) c[k] = top[k];
  const std::pair<const char*, json> defaults[] = {
      {"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_hidden_layers", 26},
      {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256}, {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"query_pre_attn_scalar", 256}, {"sliding_window", 4096},
      {"rope_local_base_freq", 10000.0}, {"hidden_activation", "gelu_pytorch_tanh"}, {"tie_word_embeddings", true}};
  for (const auto& [k, v] : defaults)
    if (!c.contains(k) || c[k].is_null()) c[k] = v;
  const int64_t head_dim = cfg_int(c, "head_dim", 0, true), n_layer = cfg_int(c, "num_hidden_layers", 0, true);
  // GGUF has no key for it: Triad (as llama.cpp) takes head_dim, or hidden / heads for the
  // 62-layer 27B.
  const double want_qpas = n_layer == 62 ? static_cast<double>(cfg_int(c, "hidden_size", 0, true)) /
                                               static_cast<double>(std::max<int64_t>(1, cfg_int(c, "num_attention_heads", 1, true)))
                                         : static_cast<double>(head_dim);
  if (!c["query_pre_attn_scalar"].is_number() || c["query_pre_attn_scalar"].get<double>() != want_qpas)
    fail("convert: gemma3 with query_pre_attn_scalar ", c["query_pre_attn_scalar"].dump(), " is not supported (a ", n_layer,
         "-layer gemma3 scales attention by ", want_qpas, "^-1/2, as llama.cpp reads it)");
  for (const char* k : {"final_logit_softcapping", "attn_logit_softcapping"})
    if (c.contains(k) && !c[k].is_null()) fail("convert: gemma3 with ", k, " is not supported");
  if (cfg_num(c, "rope_local_base_freq", 10000.0) != 10000.0)
    fail("convert: gemma3 with rope_local_base_freq ", c["rope_local_base_freq"].dump(), " is not supported (10000 is)");
  const std::string act = c["hidden_activation"].is_string() ? c["hidden_activation"].get<std::string>() : "";
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    fail("convert: gemma3 with hidden_activation ", q(act), " is not supported (gelu_pytorch_tanh is)");
  if (c.contains("sliding_window_pattern") && !c["sliding_window_pattern"].is_null() && c["sliding_window_pattern"] != 6)
    fail("convert: gemma3 with sliding_window_pattern ", c["sliding_window_pattern"].dump(), " is not supported (6 is)");
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    const json& lt = c["layer_types"];
    if (static_cast<int64_t>(lt.size()) != n_layer) fail("convert: gemma3 layer_types has ", lt.size(), " entries for ", n_layer, " layers");
    for (int64_t il = 0; il < n_layer; ++il) {
      const std::string want = (il + 1) % 6 != 0 ? "sliding_attention" : "full_attention";
      if (lt[static_cast<size_t>(il)] != want)
        fail("convert: gemma3 layer ", il, " is ", lt[static_cast<size_t>(il)].dump(), " (Triad's gemma3 has ", want, " there)");
    }
  }
  if (!c["tie_word_embeddings"].is_boolean() || !c["tie_word_embeddings"].get<bool>())
    fail("convert: gemma3 with untied embeddings is not supported");
  return c;
}

uint32_t file_type(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kQ8_0: return 7;
    case DType::kBF16: return 32;
    default: return 1;
  }
}

// RoPE scaling (config.json's rope_scaling, or rope_parameters with a rope_type) as llama.cpp's
// converter writes it: linear (positions divided by the factor) and YaRN (with the original
// context and beta_fast / beta_slow when given). Llama 3's frequency ramp, the dynamic (NTK)
// kind and a non-default YaRN attention_factor are refused.
void rope_scaling_keys(gguf::GgufWriter& w, const std::string& a, const json& rs) {
  const std::string type = rs.contains("rope_type") && rs["rope_type"].is_string() ? rs["rope_type"].get<std::string>()
                                                                                  : rs.value("type", "");
  if (type == "default" || type.empty()) return;
  if (type != "linear" && type != "yarn")
    fail("convert: rope scaling ", q(type), " is not supported (linear and yarn are)");
  const double factor = cfg_num(rs, "factor", 0.0);
  if (!(factor >= 1.0) || !std::isfinite(factor)) fail("convert: rope scaling needs a factor >= 1, got ", factor);
  w.add_string(a + ".rope.scaling.type", type);
  w.add_f32(a + ".rope.scaling.factor", static_cast<float>(factor));
  if (type == "yarn") {
    const int64_t orig = cfg_int(rs, "original_max_position_embeddings", 0, true);
    if (orig < 1) fail("convert: yarn scaling needs original_max_position_embeddings");
    w.add_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(orig));
    if (rs.contains("beta_fast") && !rs["beta_fast"].is_null())
      w.add_f32(a + ".rope.scaling.yarn_beta_fast", static_cast<float>(cfg_num(rs, "beta_fast", 32.0)));
    if (rs.contains("beta_slow") && !rs["beta_slow"].is_null())
      w.add_f32(a + ".rope.scaling.yarn_beta_slow", static_cast<float>(cfg_num(rs, "beta_slow", 1.0)));
    // HF scales cos / sin by attention_factor, by default 1 + 0.1 ln(factor), which Triad (like
    // llama.cpp) derives from the factor; another value is refused rather than ignored.
    const double def = 1.0 + 0.1 * std::log(factor);
    if (rs.contains("attention_factor") && !rs["attention_factor"].is_null() &&
        std::fabs(cfg_num(rs, "attention_factor", def) - def) > 1e-6)
      fail("convert: yarn attention_factor ", cfg_num(rs, "attention_factor", def), " (not the default ", def,
           ") is not supported");
  }
}

// sentence-transformers' pooling (modules.json -> its Pooling module's config.json) as GGUF
// pooling_type: 1 mean, 2 cls, 3 last; 0 when the folder names none.
uint32_t pooling_type(const fs::path& dir) {
  const json modules = read_json(dir / "modules.json", false, /*array_ok=*/true);
  if (!modules.is_array()) return 0;
  for (const json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) continue;
    const std::string type = m["type"].get<std::string>();
    if (type.size() < 7 || type.compare(type.size() - 7, 7, "Pooling") != 0) continue;
    const std::string path = m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
    if (path.find("..") != std::string::npos) fail("convert: modules.json names the pooling folder ", q(path));
    const json pc = read_json(dir / path / "config.json", true);
    if (pc.value("pooling_mode_mean_tokens", false)) return 1;
    if (pc.value("pooling_mode_cls_token", false)) return 2;
    if (pc.value("pooling_mode_lasttoken", false)) return 3;
    const std::string mode = pc.value("pooling_mode", "");
    if (mode == "mean") return 1;
    if (mode == "cls") return 2;
    if (mode == "lasttoken") return 3;
    fail("convert: ", q((dir / path / "config.json").string()), " asks for a pooling Triad does not have (mean, cls, last)");
  }
  return 0;
}

// nomic-bert's tensors in llama.cpp's names: the fused Wqkv stays one attn_qkv matrix, fc11 /
// fc12 are the FFN's up / gate.
void nomic_plan(const safetensors::Checkpoint& ck, gguf::GgufWriter& w, const fs::path& dir, const json& cfg,
                int64_t n_embd, int64_t n_layer, int64_t n_ff, int64_t n_types, int64_t n_vocab, std::vector<Plan>& plan) {
  const Tensor* embd = ck.find("embeddings.word_embeddings.weight");
  TRIAD_CHECK(embd && embd->shape == (std::vector<int64_t>{n_vocab, n_embd}), "convert: embeddings.word_embeddings.weight is ",
              embd ? "misshapen" : "missing", " (config.json implies [", n_vocab, ", ", n_embd, "])");
  write_tokenizer(w, dir, cfg, n_vocab);
  plan.push_back({"embeddings.word_embeddings.weight", "token_embd.weight", {n_vocab, n_embd}, 0});
  plan.push_back({"embeddings.token_type_embeddings.weight", "token_types.weight", {n_types, n_embd}, 0, true});
  plan.push_back({"emb_ln.weight", "token_embd_norm.weight", {n_embd}, 0});
  plan.push_back({"emb_ln.bias", "token_embd_norm.bias", {n_embd}, 0});
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i) + ".", b = "blk." + std::to_string(i) + ".";
    plan.push_back({p + "attn.Wqkv.weight", b + "attn_qkv.weight", {3 * n_embd, n_embd}, 0});
    plan.push_back({p + "attn.out_proj.weight", b + "attn_output.weight", {n_embd, n_embd}, 0});
    plan.push_back({p + "norm1.weight", b + "attn_output_norm.weight", {n_embd}, 0});
    plan.push_back({p + "norm1.bias", b + "attn_output_norm.bias", {n_embd}, 0});
    plan.push_back({p + "mlp.fc11.weight", b + "ffn_up.weight", {n_ff, n_embd}, 0});
    plan.push_back({p + "mlp.fc12.weight", b + "ffn_gate.weight", {n_ff, n_embd}, 0});
    plan.push_back({p + "mlp.fc2.weight", b + "ffn_down.weight", {n_embd, n_ff}, 0});
    plan.push_back({p + "norm2.weight", b + "layer_output_norm.weight", {n_embd}, 0});
    plan.push_back({p + "norm2.bias", b + "layer_output_norm.bias", {n_embd}, 0});
  }
}

// BERT (bert): metadata with llama.cpp's keys and the tensor plan in its names. HF names may
// carry a "bert." prefix (BertForMaskedLM); LayerNorm parameters may be gamma / beta.
void bert_layout(gguf::GgufWriter& w, const fs::path& dir, const json& cfg, const std::string& a, int64_t n_embd,
                 int64_t n_layer, int64_t n_ff, int64_t n_head, int64_t n_vocab, const ConvertOptions& opt,
                 std::unique_ptr<safetensors::Checkpoint>& ck, std::vector<Plan>& plan) {
  const bool nomic = a == "nomic-bert";
  int64_t n_pos = 0;
  double rope_base = 0;
  if (nomic) {
    // nomic-bert (NomicBertModel): as llama.cpp converts it, only its post-norm, bias-free,
    // SwiGLU form with rotary over whole heads; anything else is named and refused.
    auto need = [&](const char* key, const json& want) {
      if (!cfg.contains(key) || cfg[key] != want)
        fail("convert: nomic-bert with ", key, " = ", cfg.contains(key) ? cfg[key].dump() : std::string("(absent)"),
             " is not supported (", want.dump(), " is)");
    };
    need("activation_function", "swiglu");
    need("prenorm", false);
    need("rotary_emb_fraction", 1.0);
    need("rotary_emb_interleaved", false);
    need("qkv_proj_bias", false);
    need("mlp_fc1_bias", false);
    need("mlp_fc2_bias", false);
    if (cfg.value("causal", false)) fail("convert: a causal nomic-bert is not supported");
    if (cfg.contains("moe_every_n_layers") && cfg["moe_every_n_layers"].is_number() && cfg["moe_every_n_layers"] != 0)
      fail("convert: nomic-bert with experts (moe_every_n_layers) is not supported");
    if (cfg.contains("rotary_emb_scale_base") && !cfg["rotary_emb_scale_base"].is_null())
      fail("convert: nomic-bert with rotary_emb_scale_base is not supported");
    // nomic-embed-text v1 / v1.5 say 8192 positions but were trained for 2048 (llama.cpp's rule).
    n_pos = cfg_int(cfg, "n_positions", 2048, false);
    if (n_pos == 8192 && cfg_int(cfg, "max_trained_positions", 2048, false) == 2048) n_pos = 2048;
    rope_base = cfg_num(cfg, "rotary_emb_base", 10000.0);
    if (!(rope_base > 0) || !std::isfinite(rope_base)) fail("convert: rotary_emb_base must be positive");
  } else {
    const std::string act = cfg.value("hidden_act", "gelu");
    if (act != "gelu") fail("convert: bert with hidden_act ", q(act), " is not supported (only the exact \"gelu\")");
    const std::string pos_type = cfg.value("position_embedding_type", "absolute");
    if (pos_type != "absolute") fail("convert: bert with position_embedding_type ", q(pos_type), " is not supported");
    n_pos = cfg_int(cfg, "max_position_embeddings", 512, false);
  }
  const int64_t n_types = cfg_int(cfg, "type_vocab_size", 2, false);
  TRIAD_CHECK(n_pos > 0 && n_pos <= (int64_t{1} << 20) && n_types > 0 && n_types <= 1024,
              "convert: config.json's max_position_embeddings (", n_pos, ") or type_vocab_size (", n_types,
              ") is out of range");
  w.add_string("general.architecture", a);
  w.add_string("general.name", dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string());
  w.add_u32("general.file_type", file_type(opt.out_type));
  w.add_u32(a + ".context_length", static_cast<uint32_t>(n_pos));
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(n_embd));
  w.add_u32(a + ".block_count", static_cast<uint32_t>(n_layer));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(n_ff));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(n_head));
  w.add_f32(a + ".attention.layer_norm_epsilon",
            static_cast<float>(cfg_num(cfg, cfg.contains("layer_norm_eps") ? "layer_norm_eps" : "layer_norm_epsilon", 1e-12)));
  w.add_bool(a + ".attention.causal", false);
  if (nomic) w.add_f32(a + ".rope.freq_base", static_cast<float>(rope_base));
  if (const uint32_t pooling = pooling_type(dir); pooling != 0) w.add_u32(a + ".pooling_type", pooling);
  w.add_u32("tokenizer.ggml.token_type_count", static_cast<uint32_t>(n_types));

  ck = safetensors::Checkpoint::open_dir(dir.string());
  if (nomic) {
    nomic_plan(*ck, w, dir, cfg, n_embd, n_layer, n_ff, n_types, n_vocab, plan);
    return;
  }
  const std::string pre = ck->find("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  auto hf = [&](const std::string& name) { return pre + name; };
  // LayerNorm parameters: weight/bias, or gamma/beta in older checkpoints.
  auto norm = [&](const std::string& base, const std::string& gguf_base) {
    const bool old = ck->find(hf(base + ".gamma")) != nullptr;
    plan.push_back({hf(base + (old ? ".gamma" : ".weight")), gguf_base + ".weight", {n_embd}, 0});
    plan.push_back({hf(base + (old ? ".beta" : ".bias")), gguf_base + ".bias", {n_embd}, 0});
  };
  const Tensor* embd = ck->find(hf("embeddings.word_embeddings.weight"));
  TRIAD_CHECK(embd && embd->shape == (std::vector<int64_t>{n_vocab, n_embd}), "convert: embeddings.word_embeddings.weight is ",
              embd ? "misshapen" : "missing", " (config.json implies [", n_vocab, ", ", n_embd, "])");
  write_tokenizer(w, dir, cfg, n_vocab);
  plan.push_back({hf("embeddings.word_embeddings.weight"), "token_embd.weight", {n_vocab, n_embd}, 0});
  plan.push_back({hf("embeddings.token_type_embeddings.weight"), "token_types.weight", {n_types, n_embd}, 0, true});
  plan.push_back({hf("embeddings.position_embeddings.weight"), "position_embd.weight", {n_pos, n_embd}, 0, true});
  norm("embeddings.LayerNorm", "token_embd_norm");
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".", b = "blk." + std::to_string(i) + ".";
    for (const auto& [h, g] : {std::pair<const char*, const char*>{"attention.self.query", "attn_q"},
                              {"attention.self.key", "attn_k"},
                              {"attention.self.value", "attn_v"},
                              {"attention.output.dense", "attn_output"}}) {
      plan.push_back({hf(p + h + ".weight"), b + g + ".weight", {n_embd, n_embd}, 0});
      plan.push_back({hf(p + h + ".bias"), b + g + ".bias", {n_embd}, 0});
    }
    norm(p + "attention.output.LayerNorm", b + "attn_output_norm");
    plan.push_back({hf(p + "intermediate.dense.weight"), b + "ffn_up.weight", {n_ff, n_embd}, 0});
    plan.push_back({hf(p + "intermediate.dense.bias"), b + "ffn_up.bias", {n_ff}, 0});
    plan.push_back({hf(p + "output.dense.weight"), b + "ffn_down.weight", {n_embd, n_ff}, 0});
    plan.push_back({hf(p + "output.dense.bias"), b + "ffn_down.bias", {n_embd}, 0});
    norm(p + "output.LayerNorm", b + "layer_output_norm");
  }
}

// Checkpoint tensors a bert conversion leaves out, as llama.cpp's does: the position-id buffer,
// the pooler and the masked-LM / next-sentence heads (the embedding is pooled from the hidden
// states).
bool bert_unused(const std::string& name) {
  std::string n = name.rfind("bert.", 0) == 0 ? name.substr(5) : name;
  return n == "embeddings.position_ids" || n.rfind("pooler.", 0) == 0 || n.rfind("cls.", 0) == 0;
}

}  // namespace

DType parse_out_type(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  if (s == "q8_0") return DType::kQ8_0;
  fail("convert: --outtype must be f32, f16, bf16 or q8_0 (quantize further with `triad quantize`), not ", q(s));
}

namespace {
ConvertSummary convert_impl(const std::string& dir_s, const std::string& out_path, const ConvertOptions& opt,
                            const std::function<void(const ConvertProgress&)>& progress);
}  // namespace

ConvertSummary convert_hf(const std::string& dir_s, const std::string& out_path, const ConvertOptions& opt,
                          const std::function<void(const ConvertProgress&)>& progress) {
  try {
    return convert_impl(dir_s, out_path, opt, progress);
  } catch (const json::exception& e) {  // a JSON value of the wrong type somewhere in the folder's files
    fail("convert: ", q(dir_s), " has a malformed JSON file: ", e.what());
  }
}

namespace {
ConvertSummary convert_impl(const std::string& dir_s, const std::string& out_path, const ConvertOptions& opt,
                            const std::function<void(const ConvertProgress&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir(dir_s);
  TRIAD_CHECK(opt.out_type == DType::kF32 || opt.out_type == DType::kF16 || opt.out_type == DType::kBF16 ||
                  opt.out_type == DType::kQ8_0,
              "convert: unsupported output type");
  json cfg = read_json(dir / "config.json", true);
  const Arch arch = arch_of(cfg);
  if (arch.gemma) cfg = gemma3_text_config(cfg);
  const std::string& a = arch.name;
  // Sizes under their usual names, or the GPT-2 style names some configs use (nomic-bert).
  auto size = [&](const char* key, const char* alt) {
    return cfg_int(cfg, cfg.contains(key) || !cfg.contains(alt) ? key : alt, 0, true);
  };
  const int64_t n_embd = size("hidden_size", "n_embd"), n_layer = size("num_hidden_layers", "n_layer"),
                n_ff = size("intermediate_size", "n_inner"), n_head = size("num_attention_heads", "n_head"),
                n_kv = cfg_int(cfg, "num_key_value_heads", n_head, false), n_vocab = cfg_int(cfg, "vocab_size", 0, true);
  TRIAD_CHECK(n_embd > 0 && n_layer > 0 && n_ff > 0 && n_head > 0 && n_kv > 0 && n_vocab > 0 && n_head % n_kv == 0,
              "convert: config.json's sizes are inconsistent (hidden ", n_embd, ", layers ", n_layer, ", heads ", n_head,
              "/", n_kv, ", vocab ", n_vocab, ")");
  const int64_t head_dim = cfg_int(cfg, "head_dim", n_embd / n_head, false);
  TRIAD_CHECK(head_dim > 0 && head_dim % 2 == 0, "convert: head dimension ", head_dim, " must be even and positive");
  // Bounds before anything is sized from them (products then fit easily in 64 bits).
  constexpr int64_t kMaxDim = int64_t{1} << 20, kMaxVocab = int64_t{1} << 24, kMaxLayers = 4096;
  TRIAD_CHECK(n_embd <= kMaxDim && n_ff <= kMaxDim && n_head <= kMaxDim && head_dim <= kMaxDim && n_vocab <= kMaxVocab &&
                  n_layer <= kMaxLayers && n_head * head_dim <= kMaxDim * 16,
              "convert: config.json's sizes are beyond what Triad converts (hidden, FFN, heads and head size up to 2^20, "
              "vocabulary up to 2^24, layers up to 4096)");
  gguf::GgufWriter w;
  std::unique_ptr<safetensors::Checkpoint> ck;
  std::vector<Plan> plan;
  bool tied = false;
  if (arch.encoder) {
    bert_layout(w, dir, cfg, a, n_embd, n_layer, n_ff, n_head, n_vocab, opt, ck, plan);
  } else {
    tied = cfg.value("tie_word_embeddings", false);
    // RoPE: rope_theta and rope_scaling, or (transformers 5) both under rope_parameters.
    double rope_theta = cfg_num(cfg, "rope_theta", 10000.0);
    json scaling = cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object() ? cfg["rope_scaling"] : json(nullptr);
    if (cfg.contains("rope_parameters") && cfg["rope_parameters"].is_object()) {
      const json& rp = cfg["rope_parameters"];
      rope_theta = cfg_num(rp, "rope_theta", rope_theta);
      if (rp.value("rope_type", "default") != "default") scaling = rp;
    }

    w.add_string("general.architecture", a);
    w.add_string("general.name", dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string());
    w.add_u32("general.file_type", file_type(opt.out_type));
    w.add_u32(a + ".context_length", static_cast<uint32_t>(cfg_int(cfg, "max_position_embeddings", 4096, false)));
    w.add_u32(a + ".embedding_length", static_cast<uint32_t>(n_embd));
    w.add_u32(a + ".block_count", static_cast<uint32_t>(n_layer));
    w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(n_ff));
    w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(n_head));
    w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(n_kv));
    w.add_f32(a + ".rope.freq_base", static_cast<float>(rope_theta));
    w.add_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(cfg_num(cfg, "rms_norm_eps", 1e-6)));
    if (head_dim != n_embd / n_head || cfg.contains("head_dim")) {
      w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(head_dim));
      w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(head_dim));
    }
    if (arch.name == "llama") w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
    if (arch.gemma) w.add_u32(a + ".attention.sliding_window", static_cast<uint32_t>(cfg_int(cfg, "sliding_window", 0, true)));
    if (scaling.is_object()) rope_scaling_keys(w, a, scaling);
    // The weights first: the embedding's real shape bounds what the tokenizer may size.
    // Gemma3ForConditionalGeneration keeps its text model under language_model.
    ck = safetensors::Checkpoint::open_dir(dir_s);
    std::string mp = "model.";
    if (arch.gemma)
      for (const char* cand : {"model.", "language_model.model.", "model.language_model."})
        if (ck->find(std::string(cand) + "embed_tokens.weight")) mp = cand;
    const Tensor* embd = ck->find(mp + "embed_tokens.weight");
    TRIAD_CHECK(embd && embd->shape == (std::vector<int64_t>{n_vocab, n_embd}), "convert: ", mp, "embed_tokens.weight is ",
                embd ? "misshapen" : "missing", " (config.json implies [", n_vocab, ", ", n_embd, "])");
    write_tokenizer(w, dir, cfg, n_vocab);

    // The tensors, in llama.cpp's order, each checked against the config.
    const float norm_add = arch.gemma ? 1.f : 0.f;
    plan.push_back({mp + "embed_tokens.weight", "token_embd.weight", {n_vocab, n_embd}, 0});
    for (int64_t i = 0; i < n_layer; ++i) {
      const std::string p = mp + "layers." + std::to_string(i) + ".", b = "blk." + std::to_string(i) + ".";
      plan.push_back({p + "input_layernorm.weight", b + "attn_norm.weight", {n_embd}, 0, false, norm_add});
      plan.push_back({p + "self_attn.q_proj.weight", b + "attn_q.weight", {n_head * head_dim, n_embd}, arch.permute_qk ? n_head : 0});
      plan.push_back({p + "self_attn.k_proj.weight", b + "attn_k.weight", {n_kv * head_dim, n_embd}, arch.permute_qk ? n_kv : 0});
      plan.push_back({p + "self_attn.v_proj.weight", b + "attn_v.weight", {n_kv * head_dim, n_embd}, 0});
      if (arch.qkv_bias) {
        plan.push_back({p + "self_attn.q_proj.bias", b + "attn_q.bias", {n_head * head_dim}, 0});
        plan.push_back({p + "self_attn.k_proj.bias", b + "attn_k.bias", {n_kv * head_dim}, 0});
        plan.push_back({p + "self_attn.v_proj.bias", b + "attn_v.bias", {n_kv * head_dim}, 0});
      }
      if (arch.qk_norm) {
        plan.push_back({p + "self_attn.q_norm.weight", b + "attn_q_norm.weight", {head_dim}, 0, false, norm_add});
        plan.push_back({p + "self_attn.k_norm.weight", b + "attn_k_norm.weight", {head_dim}, 0, false, norm_add});
      }
      plan.push_back({p + "self_attn.o_proj.weight", b + "attn_output.weight", {n_embd, n_head * head_dim}, 0});
      if (arch.gemma) {  // a norm after attention and one on each side of the FFN
        plan.push_back({p + "post_attention_layernorm.weight", b + "post_attention_norm.weight", {n_embd}, 0, false, 1.f});
        plan.push_back({p + "pre_feedforward_layernorm.weight", b + "ffn_norm.weight", {n_embd}, 0, false, 1.f});
        plan.push_back({p + "post_feedforward_layernorm.weight", b + "post_ffw_norm.weight", {n_embd}, 0, false, 1.f});
      } else {
        plan.push_back({p + "post_attention_layernorm.weight", b + "ffn_norm.weight", {n_embd}, 0});
      }
      plan.push_back({p + "mlp.gate_proj.weight", b + "ffn_gate.weight", {n_ff, n_embd}, 0});
      plan.push_back({p + "mlp.up_proj.weight", b + "ffn_up.weight", {n_ff, n_embd}, 0});
      plan.push_back({p + "mlp.down_proj.weight", b + "ffn_down.weight", {n_embd, n_ff}, 0});
    }
    plan.push_back({mp + "norm.weight", "output_norm.weight", {n_embd}, 0, false, norm_add});
    if (!arch.gemma && (!tied || ck->find("lm_head.weight"))) plan.push_back({"lm_head.weight", "output.weight", {n_vocab, n_embd}, 0});
  }

  // FP8 checkpoints: config.json's quantization_config names the method and the scale blocks.
  std::array<int64_t, 2> fp8_block{128, 128};
  if (cfg.contains("quantization_config") && cfg["quantization_config"].is_object()) {
    const json& qc = cfg["quantization_config"];
    const std::string method = qc.value("quant_method", "");
    if (method != "fp8") fail("convert: quantization_config.quant_method ", q(method), " is not supported (fp8 is)");
    if (qc.contains("weight_block_size")) {
      const json& b = qc["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() || b[0].get<int64_t>() < 1 ||
          b[1].get<int64_t>() < 1 || b[0].get<int64_t>() > 65536 || b[1].get<int64_t>() > 65536)
        fail("convert: quantization_config.weight_block_size must be two positive integers");
      fp8_block = {b[0].get<int64_t>(), b[1].get<int64_t>()};
    }
  }
  std::set<std::string> used;
  ConvertSummary sum;
  sum.architecture = a;
  for (size_t k = 0; k < plan.size(); ++k) {
    const Plan& pl = plan[k];
    const Tensor* t = ck->find(pl.hf);
    if (!t) fail("convert: tensor ", q(pl.hf), " is missing from ", q(dir_s));
    if (t->shape != pl.shape) {
      std::string got, want;
      for (int64_t d : t->shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      for (int64_t d : pl.shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      fail("convert: tensor ", q(pl.hf), " is [", got, "] but config.json implies [", want, "]");
    }
    // FP8 weights (DeepSeek-V3/R1, Qwen3-FP8) come with one scale per block of
    // quantization_config.weight_block_size (default 128 x 128) in "<name>_scale_inv".
    const Tensor* scale = nullptr;
    if (t->dtype == safetensors::DType::kF8E4M3 || t->dtype == safetensors::DType::kF8E5M2) {
      scale = ck->find(pl.hf + "_scale_inv");
      if (scale == nullptr || pl.shape.size() != 2)
        fail("convert: FP8 tensor ", q(pl.hf), " has no block scales (", q(pl.hf + "_scale_inv"), ")");
      if (scale->dtype != safetensors::DType::kF32 && scale->dtype != safetensors::DType::kBF16)
        fail("convert: block scales ", q(scale->name), " are ", safetensors::dtype_name(scale->dtype), " (F32 or BF16 expected)");
      const int64_t sr = (pl.shape[0] + fp8_block[0] - 1) / fp8_block[0], sc = (pl.shape[1] + fp8_block[1] - 1) / fp8_block[1];
      if (scale->shape != std::vector<int64_t>{sr, sc})
        fail("convert: block scales ", q(scale->name), " do not match ", q(pl.hf), " in ", fp8_block[0], "x", fp8_block[1],
             " blocks (expected [", sr, ", ", sc, "])");
      used.insert(scale->name);
    } else if (t->dtype != safetensors::DType::kF32 && t->dtype != safetensors::DType::kF16 &&
               t->dtype != safetensors::DType::kBF16) {
      fail("convert: tensor ", q(pl.hf), " is ", safetensors::dtype_name(t->dtype), " (F32, F16, BF16 or FP8 with block scales supported)");
    }
    used.insert(pl.hf);
    const bool vec = pl.shape.size() == 1;
    const int64_t rows = vec ? 1 : pl.shape[0], cols = vec ? pl.shape[0] : pl.shape[1];
    DType out = vec || pl.keep_f32 ? DType::kF32 : opt.out_type;
    if (out == DType::kQ8_0 && cols % 32 != 0) out = DType::kF16;  // rows Q8_0 cannot hold, as llama.cpp
    const std::vector<int64_t> dims = vec ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows};
    const int64_t heads = pl.permute_heads;
    const float add = pl.add;
    const int64_t block_r = fp8_block[0], block_c = fp8_block[1];
    w.add_tensor_producer(pl.gguf, out, dims, [t, scale, block_r, block_c, rows, cols, out, heads, add, &progress, k, &plan,
                                               &pl](uint8_t* dst) {
      if (progress) progress({k, plan.size(), pl.hf, pl.gguf, out});
      // One row at a time: the source row (permuted for llama's q/k), as f32, then the output type.
      const safetensors::DType sd = t->dtype;
      const size_t es = safetensors::dtype_size(sd);
      safetensors::Tensor row = *t;
      row.shape = scale ? std::vector<int64_t>{1, cols} : std::vector<int64_t>{cols};
      row.n_elements = static_cast<uint64_t>(cols);
      row.n_bytes = static_cast<uint64_t>(cols) * es;
      // FP8: the row's block scales, as a 1-row scale tensor over 1 x block_c blocks.
      safetensors::Tensor srow;
      const int64_t n_sc = scale ? (cols + block_c - 1) / block_c : 0;
      if (scale) {
        srow = *scale;
        srow.shape = {1, n_sc};
        srow.n_elements = static_cast<uint64_t>(n_sc);
        srow.n_bytes = static_cast<uint64_t>(n_sc) * safetensors::dtype_size(scale->dtype);
      }
      std::vector<float> x(static_cast<size_t>(cols));
      const size_t out_row = row_bytes(out, cols);
      const int64_t hd = heads > 0 ? rows / heads : 0;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t src = r;
        if (heads > 0) {  // output row h*hd + 2j + s <- input row h*hd + s*hd/2 + j
          const int64_t h = r / hd, rem = r % hd, j = rem / 2, s = rem % 2;
          src = h * hd + s * (hd / 2) + j;
        }
        row.data = t->data + static_cast<uint64_t>(src) * static_cast<uint64_t>(cols) * es;
        if (scale) {
          srow.data = scale->data + static_cast<uint64_t>(src / block_r) * srow.n_bytes;
          safetensors::to_f32(row, x.data(), &srow, 1, block_c);
        } else {
          safetensors::to_f32(row, x.data());
        }
        if (add != 0.f)
          for (float& e : x) e += add;
        uint8_t* o = dst + static_cast<size_t>(r) * out_row;
        if (out == DType::kF32) {
          std::memcpy(o, x.data(), x.size() * sizeof(float));
        } else if (out == DType::kF16 || out == DType::kBF16) {
          for (int64_t c = 0; c < cols; ++c) {
            const uint16_t h16 = out == DType::kF16 ? f32_to_fp16(x[static_cast<size_t>(c)]) : f32_to_bf16(x[static_cast<size_t>(c)]);
            std::memcpy(o + 2 * c, &h16, 2);
          }
        } else {
          quant::quantize_row(out, x.data(), cols, o, nullptr);
        }
      }
    });
    sum.bytes_in += t->n_bytes;
    sum.bytes_out += row_bytes(out, cols) * static_cast<uint64_t>(rows);
  }
  for (const Tensor* t : ck->tensors()) {
    if (used.count(t->name)) continue;
    if (t->name.size() >= 19 && t->name.compare(t->name.size() - 19, 19, "rotary_emb.inv_freq") == 0) continue;
    if (tied && t->name == "lm_head.weight") continue;
    if (arch.gemma && t->name.size() >= 14 && t->name.compare(t->name.size() - 14, 14, "lm_head.weight") == 0) continue;  // tied
    if (arch.encoder && bert_unused(t->name)) continue;
    if (arch.gemma && (t->name.rfind("vision_tower.", 0) == 0 || t->name.rfind("multi_modal_projector.", 0) == 0 ||
                       t->name.rfind("model.vision_tower.", 0) == 0 || t->name.rfind("model.multi_modal_projector.", 0) == 0))
      continue;  // the vision half of Gemma3ForConditionalGeneration (not converted)
    fail("convert: tensor ", q(t->name), " is not part of the ", a, " layout Triad converts (is config.json's architecture right?)");
  }
  w.write_file(out_path);
  sum.tensors = plan.size();
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}
}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

std::string converted_model_path(const std::string& dir_s, const std::function<void(const std::string&)>& log) {
  const fs::path dir = fs::absolute(fs::path(dir_s));
  // The key: the converter's version and every input's name, size and modification time.
  constexpr const char* kConverterVersion = "triad-convert-1";
  std::vector<fs::path> inputs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool input = n == "config.json" || n == "tokenizer.json" || n == "tokenizer_config.json" ||
                       n == "chat_template.jinja" || n == "model.safetensors.index.json" ||
                       (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0);
    if (input && e.is_regular_file(ec)) inputs.push_back(e.path());
  }
  TRIAD_CHECK(!ec, "convert: cannot list ", q(dir.string()), ": ", ec.message());
  std::sort(inputs.begin(), inputs.end());
  std::string manifest = kConverterVersion;
  for (const fs::path& p : inputs) {
    struct stat st {};
    TRIAD_CHECK(::stat(p.c_str(), &st) == 0, "convert: cannot stat ", q(p.string()));
    manifest.append("\n").append(p.filename().string()).append(" ").append(std::to_string(st.st_size));
    manifest.append(" ").append(std::to_string(st.st_mtim.tv_sec)).append(".").append(std::to_string(st.st_mtim.tv_nsec));
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(manifest.data()), manifest.size(), digest);
  static const char* kHex = "0123456789abcdef";
  std::string key;
  for (int i = 0; i < 8; ++i) {
    key += kHex[digest[i] >> 4];
    key += kHex[digest[i] & 15];
  }
  const char* home_env = std::getenv("TRIAD_HOME");
  const char* user_home = std::getenv("HOME");
  const fs::path home = home_env && *home_env ? fs::path(home_env)
                        : fs::path(user_home && *user_home ? user_home : "/tmp") / ".cache" / "triad";
  const fs::path cache = home / "converted";
  fs::create_directories(cache, ec);
  TRIAD_CHECK(!ec, "convert: cannot create ", q(cache.string()), ": ", ec.message());
  std::string name = dir.filename().string();
  if (name.empty()) name = dir.parent_path().filename().string();
  const fs::path target = cache / (name + "-" + key + ".gguf");
  if (fs::exists(target, ec)) {
    if (log) log("using the converted copy " + target.string() + " of " + dir.string());
    return target.string();
  }
  // Only now (a cache miss) are the weights opened: the output keeps their precision.
  DType out = DType::kF16;
  {
    bool first = true;
    std::unique_ptr<safetensors::Checkpoint> ck = safetensors::Checkpoint::open_dir(dir.string());
    for (const Tensor* t : ck->tensors()) {
      if (t->shape.size() != 2) continue;
      const DType d = t->dtype == safetensors::DType::kF32 ? DType::kF32
                      : t->dtype == safetensors::DType::kBF16 ? DType::kBF16 : DType::kF16;
      if (first) out = d;
      else if (d != out) out = DType::kF16;
      first = false;
    }
  }
  if (log) log("converting " + dir.string() + " (" + std::string(dtype_name(out)) + ") to " + target.string() + " (once)");
  ConvertOptions opt;
  opt.out_type = out;
  size_t last_decile = 0;
  // Written under a name of this process's own, then renamed into place: two processes
  // converting the same folder each write whole files, and the cache only ever holds one.
  const fs::path mine = cache / (name + "-" + key + "." + std::to_string(::getpid()) + ".partial.gguf");
  const ConvertSummary s = convert_hf(dir.string(), mine.string(), opt, [&](const ConvertProgress& p) {
    const size_t decile = (p.index + 1) * 10 / std::max<size_t>(1, p.count);
    if (log && decile != last_decile) log("converting: " + std::to_string(decile * 10) + "%");
    last_decile = decile;
  });
  fs::rename(mine, target, ec);
  if (ec) {
    fs::remove(mine);
    fail("convert: cannot move the converted file into ", q(target.string()), ": ", ec.message());
  }
  if (log) log("converted in " + std::to_string(s.seconds) + " s");
  return target.string();
}

}  // namespace triad::convert
