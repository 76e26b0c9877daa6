// Quantization mixes and llama.cpp's per-tensor type rules (see mix.h).
#include "quant/mix.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace triad::quant {
namespace {

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The block index of "blk.N...." names, or -1.
int layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int v = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])) && v < 1000000)
    v = v * 10 + (name[i++] - '0');
  return v;
}

// The first and last eighth of the layers and every third one between get more bits.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

}  // namespace

DType row_fallback_type(DType t) {
  switch (t) {
    case DType::kQ2_K:
    case DType::kQ3_K: return DType::kQ4_0;
    case DType::kIQ4_XS: return DType::kIQ4_NL;
    case DType::kQ4_K: return DType::kQ5_0;
    case DType::kQ5_K: return DType::kQ5_1;
    case DType::kQ6_K: return DType::kQ8_0;
    default: return t;
  }
}

const std::vector<Mix>& mixes() {
  static const std::vector<Mix> kMixes = {
      {"Q2_K", DType::kQ2_K, 10, "2.6 bpw: Q2_K, attn_v/ffn_down Q3_K-Q4_K, very lossy"},
      {"Q3_K_S", DType::kQ3_K, 11, "3.4 bpw: Q3_K throughout"},
      {"Q3_K_M", DType::kQ3_K, 12, "3.7 bpw: Q3_K, attn_v/attn_output/ffn_down Q4_K-Q5_K"},
      {"Q3_K_L", DType::kQ3_K, 13, "4.0 bpw: Q3_K, attn_v/attn_output/ffn_down Q5_K"},
      {"IQ4_XS", DType::kIQ4_XS, 30, "4.25 bpw: non-linear 4-bit grid, 6-bit sub-block scales"},
      {"Q4_0", DType::kQ4_0, 2, "4.5 bpw: legacy 32-blocks, symmetric"},
      {"IQ4_NL", DType::kIQ4_NL, 25, "4.5 bpw: non-linear 4-bit grid, 32-blocks"},
      {"Q4_K_S", DType::kQ4_K, 14, "4.6 bpw: Q4_K, first attn_v/ffn_down layers Q5_K"},
      {"Q4_K_M", DType::kQ4_K, 15, "4.9 bpw: Q4_K, half of attn_v/ffn_down Q6_K (recommended)"},
      {"Q4_1", DType::kQ4_1, 3, "5.0 bpw: legacy 32-blocks with a minimum"},
      {"Q5_0", DType::kQ5_0, 8, "5.5 bpw: legacy 32-blocks, symmetric"},
      {"Q5_K_S", DType::kQ5_K, 16, "5.5 bpw: Q5_K throughout"},
      {"Q5_K_M", DType::kQ5_K, 17, "5.7 bpw: Q5_K, half of attn_v/ffn_down Q6_K"},
      {"Q5_1", DType::kQ5_1, 9, "6.0 bpw: legacy 32-blocks with a minimum"},
      {"Q6_K", DType::kQ6_K, 18, "6.6 bpw: Q6_K throughout"},
      {"Q8_0", DType::kQ8_0, 7, "8.5 bpw: nearly lossless"},
      {"MXFP4_MOE", DType::kMXFP4, 38, "MoE experts MXFP4 (4.25 bpw), everything else Q8_0"},
      {"BF16", DType::kBF16, 32, "16 bpw: bfloat16"},
      {"F16", DType::kF16, 1, "16 bpw: IEEE half"},
      {"F32", DType::kF32, 0, "32 bpw: no quantization"},
  };
  return kMixes;
}

std::optional<Mix> find_mix(std::string_view name) {
  std::string u = upper(name);
  // llama.cpp's aliases: the bare K-quant names mean their _M mix.
  if (u == "Q3_K" || u == "Q4_K" || u == "Q5_K") u += "_M";
  for (const Mix& m : mixes())
    if (m.name == u) return m;
  return std::nullopt;
}

std::optional<DType> parse_type_name(std::string_view name) {
  const std::string u = upper(name);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4})
    if (dtype_name(t) == u) return t;
  return std::nullopt;
}

struct NamePattern::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

NamePattern::NamePattern(const std::string& pattern) {
  auto impl = std::make_shared<Impl>();
  int err = 0;
  PCRE2_SIZE off = 0;
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &err,
                             &off, nullptr);
  if (impl->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("bad regular expression '", pattern, "' at offset ", off, ": ",
         reinterpret_cast<const char*>(msg));
  }
  impl_ = std::move(impl);
}

bool NamePattern::search(std::string_view name) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  TRIAD_CHECK(md != nullptr, "out of memory matching a tensor name");
  const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(), 0,
                             0, md, nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

TensorTypeOverride parse_override(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    fail("--tensor-type '", spec, "': expected REGEX=TYPE, e.g. ffn_down=q6_k");
  const std::string pat = spec.substr(0, eq), tname = spec.substr(eq + 1);
  const auto t = parse_type_name(tname);
  if (!t) fail("--tensor-type '", spec, "': unknown type '", tname, "'");
  try {
    return TensorTypeOverride{pat, NamePattern(pat), *t};
  } catch (const Error& e) {
    fail("--tensor-type '", spec, "': ", e.what());
  }
}

bool should_quantize(std::string_view name, int n_dims) {
  if (n_dims < 2) return false;
  if (name.size() < 6 || name.substr(name.size() - 6) != "weight") return false;
  for (std::string_view skip : {"ffn_gate_inp", "position_embd", "token_types", "ssm_conv1d",
                                "pos_embd", "altup", "laurel", "per_layer_model_proj"})
    if (contains(name, skip)) return false;
  return true;
}

bool tensor_order(std::string_view a, std::string_view b) {
  const int la = layer_of(a), lb = layer_of(b);
  if (la != lb) return la < lb;
  return a < b;
}

void MixCounters::count(std::string_view name) {
  if (contains(name, "attn_v.weight")) ++n_attn_v;
  else if (contains(name, "ffn_down")) ++n_ffn_down;
}

TypeChoice choose_type(const Mix& mix, const MixOptions& opt, const ModelShape& shape,
                       std::string_view name, int64_t ne0, MixCounters& counters,
                       int64_t n_mat) {
  DType t = mix.base;
  const bool quantized_mix = traits(mix.base).block_size > 1;
  const bool is_output = name == "output.weight" || (!shape.has_output && name == "token_embd.weight");
  int n = std::max(1, shape.n_layer);
  int il = std::max(0, layer_of(name));
  const int n_gqa = shape.n_head_kv > 0 ? shape.n_head / shape.n_head_kv : 1;
  const std::string& f = mix.name;
  const bool iq4 = f == "IQ4_NL" || f == "IQ4_XS";
  if (!opt.pure && quantized_mix) {
    if (is_output) {
      if (f == "MXFP4_MOE" || ne0 % 256 != 0 || shape.arch == "falcon") t = DType::kQ8_0;
      else if (t != DType::kQ8_0) t = DType::kQ6_K;
    } else if (f == "MXFP4_MOE") {
      t = n_mat > 1 ? DType::kMXFP4 : DType::kQ8_0;  // stacked experts only
    } else if (contains(name, "attn_v.weight")) {
      il = counters.i_attn_v++;
      n = std::max(1, counters.n_attn_v);
      if (f == "Q2_K") t = n_gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
      else if (f == "Q3_K_M") t = il < 2 ? DType::kQ5_K : DType::kQ4_K;
      else if (f == "Q3_K_L") t = DType::kQ5_K;
      else if ((f == "Q4_K_M" || f == "Q5_K_M") && use_more_bits(il, n)) t = DType::kQ6_K;
      else if (f == "Q4_K_S" && il < 4) t = DType::kQ5_K;
      else if (iq4 && n_gqa >= 4) t = DType::kQ5_K;
      if (shape.n_expert == 8) t = DType::kQ8_0;
    } else if (contains(name, "attn_k.weight")) {
      if (shape.n_expert == 8) t = DType::kQ8_0;
    } else if (contains(name, "ffn_down")) {
      if (shape.n_expert <= 1) {
        il = counters.i_ffn_down;
        n = std::max(1, counters.n_ffn_down);
      }
      ++counters.i_ffn_down;
      const bool falcon = shape.arch == "falcon";
      if (f == "Q2_K") t = DType::kQ3_K;
      else if (f == "Q3_K_M")
        t = il < n / 16 ? DType::kQ5_K : (!falcon || use_more_bits(il, n)) ? DType::kQ4_K : DType::kQ3_K;
      else if (f == "Q3_K_L") t = falcon ? DType::kQ4_K : DType::kQ5_K;
      else if (f == "Q4_K_M") {
        if (falcon) t = il < n / 16 ? DType::kQ6_K : use_more_bits(il, n) ? DType::kQ5_K : DType::kQ4_K;
        else if (use_more_bits(il, n)) t = DType::kQ6_K;
      } else if (iq4 && il < n / 8 && !opt.has_imatrix) t = DType::kQ5_K;
      else if (f == "Q5_K_M" && use_more_bits(il, n)) t = DType::kQ6_K;
      else if (f == "Q4_K_S" && !falcon && il < n / 8) t = DType::kQ5_K;
      else if ((f == "Q4_0" || f == "Q5_0") && opt.has_imatrix && il < n / 8)
        t = f == "Q4_0" ? DType::kQ4_1 : DType::kQ5_1;
    } else if (contains(name, "attn_output.weight")) {
      if (shape.arch != "falcon") {
        if (shape.n_expert == 8) {
          if (f == "Q2_K" || f == "Q3_K_S" || f == "Q3_K_M" || f == "Q4_K_S" || f == "Q4_K_M" || iq4)
            t = DType::kQ5_K;
        } else {
          if (f == "Q2_K") t = DType::kQ3_K;
          else if (f == "Q3_K_M") t = DType::kQ4_K;
          else if (f == "Q3_K_L") t = DType::kQ5_K;
        }
      } else if (f == "Q3_K_L") {
        t = DType::kQ4_K;
      }
    } else if (contains(name, "attn_qkv.weight")) {
      if (f == "Q3_K_M" || f == "Q3_K_L") t = DType::kQ4_K;
      else if (f == "Q4_K_M") t = DType::kQ5_K;
      else if (f == "Q5_K_M") t = DType::kQ6_K;
    }
  }
  bool user = false;
  for (const TensorTypeOverride& o : opt.overrides) {
    if (o.re.search(name)) {
      t = o.type;
      user = true;
      break;
    }
  }
  if (opt.token_embedding_type && name == "token_embd.weight") {
    t = *opt.token_embedding_type;
    user = true;
  }
  if (opt.output_type && is_output) {
    t = *opt.output_type;
    user = true;
  }
  TypeChoice c{t, false, t, user};
  if (ne0 % traits(t).block_size != 0) {
    c.fallback = true;
    c.type = row_fallback_type(t);
    if (ne0 % traits(c.type).block_size != 0) c.type = DType::kF16;
  }
  return c;
}

}  // namespace triad::quant
