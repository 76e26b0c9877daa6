// tokenizer.json -> GGUF tokenizer metadata (hf_tokenizer.h).
#include "convert/hf_tokenizer.h"

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/inspect.h"

namespace triad::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string q(std::string_view s) { return gguf::quote_bytes(s, 120, '\'');}

// Known byte-level BPE split patterns -> llama.cpp's tokenizer.ggml.pre names.
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string pre_name(const json& pre) {
  if (pre.is_object() && pre.value("type", "") == "ByteLevel" && pre.value("use_regex", true)) return "gpt-2";
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array()) {
    std::string pattern;
    bool byte_level = false;
    for (const json& p : pre["pretokenizers"]) {
      if (!p.is_object()) continue;
      const std::string t = p.value("type", "");
      if (t == "ByteLevel") byte_level = true;
      if (t == "Split" && p.contains("pattern") && p["pattern"].is_object() && p["pattern"].contains("Regex") &&
          p["pattern"]["Regex"].is_string()) {
        if (!pattern.empty()) fail("convert: tokenizer.json has several split patterns (not supported yet)");
        pattern = p["pattern"]["Regex"].get<std::string>();
      }
    }
    if (byte_level && pattern == kQwen2Pattern) return "qwen2";
    if (byte_level && pattern == kLlama3Pattern) return "llama-bpe";
    fail("convert: tokenizer.json's pre-tokenizer (split pattern ", q(pattern), ") is not one Triad recognises yet "
         "(Qwen2's, Llama 3's, GPT-2's)");
  }
  fail("convert: tokenizer.json's pre-tokenizer is not a byte-level BPE one Triad recognises yet");
}

// A token named by tokenizer_config.json ("<s>" or {"content": "<s>"}).
std::string token_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

// A WordPiece tokenizer.json (BERT) as llama.cpp's converter writes it: tokenizer model "bert",
// word-initial pieces with a "▁" prefix and "##" continuation pieces bare (its "phantom space"
// vocabulary), special tokens as control tokens and unchanged, [CLS] / [SEP] as BOS / EOS and
// separator, and the normalizer's lower-casing and accent stripping.
void write_wordpiece(gguf::GgufWriter& w, const json& tok, const json& tcfg, int64_t n) {
  const json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("convert: tokenizer.json has no vocab");
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), 5);
  std::vector<uint8_t> have(static_cast<size_t>(n), 0);
  std::map<std::string, int64_t> by_text;
  auto put = [&](const std::string& text, const json& id, int32_t type) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n)
      fail("convert: tokenizer.json gives token ", q(text), " an id outside the vocabulary of ", n);
    const auto i = static_cast<size_t>(id.get<int64_t>());
    if (have[i] && by_text.count(text) == 0) fail("convert: tokenizer.json gives id ", i, " to two tokens");
    have[i] = 1;
    by_text[text] = static_cast<int64_t>(i);
    types[i] = type;
    if (type == 3) {
      tokens[i] = text;
    } else if (text.size() > 2 && text.compare(0, 2, "##") == 0) {
      tokens[i] = text.substr(2);
    } else {
      tokens[i] = "\xE2\x96\x81" + text;
    }
  };
  for (const auto& [text, id] : model["vocab"].items()) put(text, id, 1);
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const json& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail("convert: a tokenizer.json added token lacks its content or id");
      put(a["content"].get<std::string>(), a["id"], a.value("special", false) ? 3 : 4);
    }
  for (int64_t i = 0; i < n; ++i)
    if (!have[static_cast<size_t>(i)]) tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
  w.add_string("tokenizer.ggml.model", "bert");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  auto id_of = [&](const char* key, const char* fallback) -> int64_t {
    std::string t = tcfg.is_object() && tcfg.contains(key) ? token_text(tcfg[key]) : std::string();
    if (t.empty()) t = fallback;
    const auto it = by_text.find(t);
    return it == by_text.end() ? -1 : it->second;
  };
  // BERT's special tokens; BOS / EOS are [CLS] / [SEP] (llama.cpp's SpecialVocab does the same).
  const int64_t cls = id_of("cls_token", "[CLS]"), sep = id_of("sep_token", "[SEP]"), unk = id_of("unk_token", "[UNK]"),
                pad = id_of("pad_token", "[PAD]"), mask = id_of("mask_token", "[MASK]");
  if (cls < 0 || sep < 0) fail("convert: the WordPiece tokenizer has no [CLS] / [SEP] tokens");
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(cls));
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(sep));
  w.add_u32("tokenizer.ggml.seperator_token_id", static_cast<uint32_t>(sep));
  w.add_u32("tokenizer.ggml.cls_token_id", static_cast<uint32_t>(cls));
  if (unk >= 0) w.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
  if (pad >= 0) w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(pad));
  if (mask >= 0) w.add_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(mask));
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", true);
  w.add_bool("tokenizer.ggml.add_sep_token", true);
  // The normalizer: BertNormalizer's flags (strip_accents null follows lowercase, as in HF), or
  // Lowercase / StripAccents steps of a sequence.
  std::function<void(const json&)> normalizer = [&](const json& nz) {
    if (!nz.is_object()) return;
    const std::string t = nz.value("type", "");
    if (t == "BertNormalizer") {
      if (nz.contains("lowercase") && nz["lowercase"].is_boolean())
        w.add_bool("tokenizer.ggml.normalizer.lowercase", nz["lowercase"].get<bool>());
      if (nz.contains("strip_accents") && nz["strip_accents"].is_boolean())
        w.add_bool("tokenizer.ggml.normalizer.strip_accents", nz["strip_accents"].get<bool>());
    } else if (t == "Lowercase") {
      w.add_bool("tokenizer.ggml.normalizer.lowercase", true);
    } else if (t == "StripAccents") {
      w.add_bool("tokenizer.ggml.normalizer.strip_accents", true);
    } else if (t == "Sequence" && nz.contains("normalizers") && nz["normalizers"].is_array()) {
      for (const json& x : nz["normalizers"]) normalizer(x);
    }
  };
  if (tok.contains("normalizer")) normalizer(tok["normalizer"]);
}

// tokenizer.json's vocabulary and added tokens, by id and by text, checked against config.json's
// vocab_size (ids past the tokenizer's own, up to vocab_size, become padding as llama.cpp pads).
struct HfVocab {
  std::map<int64_t, std::string> by_id;
  std::map<std::string, int64_t> by_text;
  std::map<int64_t, bool> added;  // added token id -> special
  int64_t n = 0;                  // config.json's vocab_size

  // A token id named by tokenizer_config.json's key (a text), else config.json's cfg_key; -1.
  int64_t id_of(const json& tcfg, const json& cfg, const char* key, const char* cfg_key) const {
    if (tcfg.is_object() && tcfg.contains(key)) {
      const std::string t = token_text(tcfg[key]);
      const auto it = by_text.find(t);
      if (!t.empty() && it != by_text.end()) return it->second;
    }
    if (cfg.contains(cfg_key)) {
      const json& v = cfg[cfg_key].is_array() && !cfg[cfg_key].empty() ? cfg[cfg_key][0] : cfg[cfg_key];
      if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < n) return v.get<int64_t>();
    }
    return -1;
  }
};

// Gives id `id` (a JSON value from tokenizer.json) to `text`; a bad id, or an id already given to
// another text, is an error.
void put_token(HfVocab& v, const std::string& text, const json& id) {
  if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 24))
    fail("convert: tokenizer.json gives token ", q(text), " a bad id");
  const int64_t i = id.get<int64_t>();
  const auto it = v.by_id.find(i);
  if (it != v.by_id.end() && it->second != text)
    fail("convert: tokenizer.json gives id ", i, " to both ", q(it->second), " and ", q(text));
  v.by_id[i] = text;
  v.by_text[text] = i;
}

// tokenizer.json's added tokens (after the model's own vocabulary), then the check that every id
// fits config.json's vocab_size.
void read_added_tokens(const json& tok, HfVocab& v) {
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const json& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail("convert: a tokenizer.json added token lacks its content or id");
      put_token(v, a["content"].get<std::string>(), a["id"]);
      v.added[a["id"].get<int64_t>()] = a.value("special", false);
    }
  const int64_t max_id = v.by_id.empty() ? -1 : v.by_id.rbegin()->first;
  if (max_id >= v.n) fail("convert: tokenizer.json has token id ", max_id, " but config.json's vocab_size is ", v.n);
}

HfVocab read_vocab(const json& tok, int64_t n_vocab_cfg) {
  const json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("convert: tokenizer.json has no vocab");
  HfVocab v;
  v.n = n_vocab_cfg;
  for (const auto& [text, id] : model["vocab"].items()) put_token(v, text, id);
  read_added_tokens(tok, v);
  return v;
}

// The merges, each as its two parts ("a b" or ["a", "b"]).
std::vector<std::pair<std::string, std::string>> read_merges(const json& model) {
  std::vector<std::pair<std::string, std::string>> merges;
  if (!model.contains("merges") || !model["merges"].is_array()) return merges;
  merges.reserve(model["merges"].size());
  for (const json& m : model["merges"]) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) fail("convert: the tokenizer.json merge ", q(s), " is not \"a b\"");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail("convert: a tokenizer.json merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return merges;
}

// BOS / EOS / padding ids and whether BOS is added: tokenizer_config.json's add_bos_token, else
// (as llama.cpp) a template post-processor adds BOS and a byte-level one does not.
void special_ids(gguf::GgufWriter& w, const HfVocab& v, const json& tok, const json& tcfg, const json& cfg) {
  if (const int64_t b = v.id_of(tcfg, cfg, "bos_token", "bos_token_id"); b >= 0)
    w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(b));
  if (const int64_t e = v.id_of(tcfg, cfg, "eos_token", "eos_token_id"); e >= 0)
    w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(e));
  if (const int64_t p = v.id_of(tcfg, cfg, "pad_token", "pad_token_id"); p >= 0)
    w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(p));
  if (tcfg.is_object() && tcfg.contains("add_bos_token") && tcfg["add_bos_token"].is_boolean()) {
    w.add_bool("tokenizer.ggml.add_bos_token", tcfg["add_bos_token"].get<bool>());
  } else if (tok.contains("post_processor") && tok["post_processor"].is_object()) {
    const json& pp = tok["post_processor"];
    bool templ = pp.value("type", "") == "TemplateProcessing", byte_level = pp.value("type", "") == "ByteLevel";
    if (pp.value("type", "") == "Sequence" && pp.contains("processors") && pp["processors"].is_array())
      for (const json& x : pp["processors"])
        if (x.is_object() && x.value("type", "") == "TemplateProcessing") templ = true;
    if (templ || byte_level) w.add_bool("tokenizer.ggml.add_bos_token", templ);
  }
  if (tcfg.is_object() && tcfg.contains("add_eos_token") && tcfg["add_eos_token"].is_boolean())
    w.add_bool("tokenizer.ggml.add_eos_token", tcfg["add_eos_token"].get<bool>());
}

// The chat template: tokenizer_config.json's (a string, or the "default" of a list), else
// chat_template.jinja.
void chat_template(gguf::GgufWriter& w, const fs::path& dir, const json& tcfg) {
  std::string tmpl;
  if (tcfg.is_object() && tcfg.contains("chat_template")) {
    const json& t = tcfg["chat_template"];
    if (t.is_string()) {
      tmpl = t.get<std::string>();
    } else if (t.is_array()) {
      for (const json& e : t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
          tmpl = e["template"].get<std::string>();
    }
  }
  std::error_code ec;
  if (tmpl.empty() && fs::exists(dir / "chat_template.jinja", ec)) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    tmpl = ss.str();
  }
  if (!tmpl.empty()) w.add_string("tokenizer.chat_template", tmpl);
}

// A byte-level BPE tokenizer.json (GPT-2, Qwen2, Llama 3) as llama.cpp writes it: model "gpt2",
// the split pattern named by tokenizer.ggml.pre, the merges as "a b".
void write_byte_bpe(gguf::GgufWriter& w, const json& tok, const json& tcfg, const json& cfg, int64_t n_vocab_cfg) {
  const std::string pre = pre_name(tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : json(nullptr));
  const HfVocab v = read_vocab(tok, n_vocab_cfg);
  const int64_t n = v.n;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), 5);  // UNUSED padding, as llama.cpp pads
  for (int64_t i = 0; i < n; ++i) {
    const auto it = v.by_id.find(i);
    if (it == v.by_id.end()) {
      tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
      continue;
    }
    tokens[static_cast<size_t>(i)] = it->second;
    const auto sp = v.added.find(i);
    // Added tokens: control when special or when they look special (llama.cpp's rule), else
    // user-defined.
    const std::string& t = it->second;
    auto ends = [&](std::string_view a, std::string_view b) {
      return t.size() >= a.size() + b.size() && t.compare(0, a.size(), a) == 0 && t.compare(t.size() - b.size(), b.size(), b) == 0;
    };
    const bool looks_special = t == "<pad>" || t == "<mask>" || ends("<|", "|>") || ends("<\xEF\xBD\x9C", "\xEF\xBD\x9C>");
    types[static_cast<size_t>(i)] = sp == v.added.end() ? 1 : (sp->second || looks_special ? 3 : 4);
  }
  std::vector<std::string> merges;
  for (auto& [a, b] : read_merges(tok["model"])) merges.push_back(a + " " + b);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  special_ids(w, v, tok, tcfg, cfg);
}

// Whether a SentencePiece tokenizer.json puts "▁" before the text (llama.cpp's add_space_prefix),
// from the forms Hugging Face writes: Llama 2 / Mistral v0.1 (normalizer Prepend("▁") +
// Replace(" ", "▁")), newer Llama / Mistral (pre-tokenizer Metaspace with prepend_scheme "first"
// or "always", or add_prefix_space) and Gemma (Replace(" ", "▁") alone; its Split on " " is a
// no-op after that). Anything else (e.g. a Unicode normalization) is refused by name, as is a
// tokenizer that does not turn spaces into "▁".
bool spm_space_prefix(const json& tok) {
  static const std::string kMeta = "\xE2\x96\x81";  // ▁
  bool prefix = false, escapes = false;
  auto normalizer = [&](const json& nz) {
    const std::string t = nz.is_object() ? nz.value("type", "") : "";
    if (t == "Prepend" && nz.value("prepend", "") == kMeta) {
      prefix = true;
    } else if (t == "Replace" && nz.contains("pattern") && nz["pattern"].is_object() &&
               nz["pattern"].value("String", "") == " " && nz.value("content", "") == kMeta) {
      escapes = true;
    } else {
      fail("convert: the SentencePiece tokenizer.json's normalizer ", q(nz.is_object() ? t : nz.dump()),
           " is not supported (Prepend \"\xE2\x96\x81\" and Replace \" \" -> \"\xE2\x96\x81\" are)");
    }
  };
  if (tok.contains("normalizer") && !tok["normalizer"].is_null()) {
    const json& nz = tok["normalizer"];
    if (nz.is_object() && nz.value("type", "") == "Sequence" && nz.contains("normalizers") && nz["normalizers"].is_array()) {
      for (const json& x : nz["normalizers"]) normalizer(x);
    } else {
      normalizer(nz);
    }
  }
  auto pre = [&](const json& p) {
    const std::string t = p.is_object() ? p.value("type", "") : "";
    if (t == "Metaspace" && p.value("replacement", kMeta) == kMeta) {
      escapes = true;
      const std::string scheme = p.contains("prepend_scheme") && p["prepend_scheme"].is_string()
                                     ? p["prepend_scheme"].get<std::string>()
                                     : (p.value("add_prefix_space", true) ? "always" : "never");
      if (scheme != "never") prefix = true;
    } else if (t == "Split" && escapes && p.contains("pattern") && p["pattern"].is_object() &&
               p["pattern"].value("String", "") == " ") {
      // no spaces are left to split on
    } else {
      fail("convert: the SentencePiece tokenizer.json's pre-tokenizer ", q(p.is_object() ? t : p.dump()),
           " is not supported (Metaspace is)");
    }
  };
  if (tok.contains("pre_tokenizer") && !tok["pre_tokenizer"].is_null()) {
    const json& p = tok["pre_tokenizer"];
    if (p.is_object() && p.value("type", "") == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
      for (const json& x : p["pretokenizers"]) pre(x);
    } else {
      pre(p);
    }
  }
  if (!escapes) fail("convert: the tokenizer.json has byte fallback but does not turn spaces into \"\xE2\x96\x81\" (not a SentencePiece tokenizer Triad recognises)");
  return prefix;
}

// A SentencePiece BPE tokenizer.json (Llama 2, Mistral, Gemma: model BPE with byte_fallback) as
// llama.cpp's "llama" tokenizer: pieces with scores, merged by score. Hugging Face keeps the
// order of merges instead of scores, so a piece's score is minus the rank of the first merge that
// makes it: merging the highest-scored pair is then merging the lowest-ranked rule, and the GGUF
// tokenizes as tokenizer.json does. (llama.cpp's converter gives every piece of such a folder
// the same score, -1000, which merges leftmost-first; Triad does not copy that.) Pieces no merge
// makes score below every merged piece. Byte pieces <0xXX> are byte tokens, the model's
// unk_token unknown, added tokens control (special) or user-defined.
void write_spm(gguf::GgufWriter& w, const json& tok, const json& tcfg, const json& cfg, int64_t n_vocab_cfg) {
  const bool space_prefix = spm_space_prefix(tok);
  const json& model = tok["model"];
  const HfVocab v = read_vocab(tok, n_vocab_cfg);
  const int64_t n = v.n;
  const auto merges = read_merges(model);
  std::vector<float> scores(static_cast<size_t>(n), 0.0f);
  std::vector<bool> made(static_cast<size_t>(n), false);
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto it = v.by_text.find(merges[r].first + merges[r].second);
    if (it == v.by_text.end())
      fail("convert: the tokenizer.json merge ", q(merges[r].first + " " + merges[r].second), " makes a token not in the vocabulary");
    const auto id = static_cast<size_t>(it->second);
    if (!made[id]) scores[id] = -static_cast<float>(r);
    made[id] = true;
  }
  const std::string unk = model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), 5);
  auto is_byte = [](const std::string& t) {
    auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
    return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
  };
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (!made[k]) scores[k] = -static_cast<float>(merges.size()) - static_cast<float>(i);
    const auto it = v.by_id.find(i);
    if (it == v.by_id.end()) {
      tokens[k] = "[PAD" + std::to_string(i) + "]";
      continue;
    }
    tokens[k] = it->second;
    const auto sp = v.added.find(i);
    if (is_byte(it->second)) types[k] = 6;
    else if (!unk.empty() && it->second == unk) types[k] = 2;
    else if (sp != v.added.end()) types[k] = sp->second ? 3 : 4;
    else types[k] = 1;
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", scores);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_bool("tokenizer.ggml.add_space_prefix", space_prefix);
  if (const auto it = unk.empty() ? v.by_text.end() : v.by_text.find(unk); it != v.by_text.end())
    w.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(it->second));
  special_ids(w, v, tok, tcfg, cfg);
}

// RFC 4648 base64 (the precompiled charsmap in tokenizer.json); padding optional.
std::vector<uint8_t> base64_decode(const std::string& in) {
  std::vector<uint8_t> out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else fail("convert: tokenizer.json's precompiled_charsmap is not base64");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// A Unigram tokenizer.json (SentencePiece unigram: T5, XLM-R, multilingual E5 / MiniLM) as
// llama.cpp's "t5" vocabulary: the pieces and their scores, the normalizer's precompiled charsmap,
// "▁" for spaces with a space prefix per the Metaspace pre-tokenizer, and merged whitespace where
// a WhitespaceSplit pre-tokenizer or a Replace of " {2,}" by " " asks for it. BOS / EOS and
// whether they are added come from the post-processor (XLM-R "<s> $A </s>", T5 "$A </s>").
void write_unigram(gguf::GgufWriter& w, const json& tok, const json& tcfg, const json& cfg, int64_t n_vocab_cfg) {
  const json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_array()) fail("convert: the Unigram tokenizer.json has no vocab list");
  HfVocab v;
  v.n = n_vocab_cfg;
  std::vector<float> scores;
  const json& vocab = model["vocab"];
  if (static_cast<int64_t>(vocab.size()) > n_vocab_cfg)
    fail("convert: tokenizer.json has ", vocab.size(), " pieces but config.json's vocab_size is ", n_vocab_cfg);
  for (size_t i = 0; i < vocab.size(); ++i) {
    const json& e = vocab[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      fail("convert: Unigram piece ", i, " of tokenizer.json is not [text, score]");
    const std::string t = e[0].get<std::string>();
    if (v.by_text.count(t)) fail("convert: tokenizer.json has the Unigram piece ", q(t), " twice");
    put_token(v, t, json(i));
    scores.push_back(e[1].get<float>());
  }
  read_added_tokens(tok, v);
  const int64_t unk = model.contains("unk_id") && model["unk_id"].is_number_integer() ? model["unk_id"].get<int64_t>() : -1;
  if (unk < 0 || unk >= static_cast<int64_t>(vocab.size())) fail("convert: the Unigram tokenizer.json has no unk_id");
  const bool byte_fallback = model.value("byte_fallback", false);
  const int64_t n = v.n;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<float> sc(static_cast<size_t>(n), 0.0f);
  std::vector<int32_t> types(static_cast<size_t>(n), 5);
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const auto it = v.by_id.find(i);
    if (it == v.by_id.end()) {
      tokens[k] = "[PAD" + std::to_string(i) + "]";
      continue;
    }
    tokens[k] = it->second;
    if (k < scores.size()) sc[k] = scores[k];
    const auto ad = v.added.find(i);
    const std::string& t = it->second;
    const bool byte = byte_fallback && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
    if (i == unk) types[k] = 2;
    else if (ad != v.added.end()) types[k] = ad->second ? 3 : 4;
    else if (byte) types[k] = 6;
    else types[k] = 1;
  }
  // Normalizer: the precompiled charsmap, and a " {2,}" -> " " replacement (merged whitespace).
  std::vector<uint8_t> charsmap;
  bool merge_spaces = false;
  std::function<void(const json&)> normalizer = [&](const json& nz) {
    if (nz.is_null()) return;
    const std::string t = nz.is_object() ? nz.value("type", "") : "";
    if (t == "Precompiled") {
      if (nz.contains("precompiled_charsmap") && nz["precompiled_charsmap"].is_string())
        charsmap = base64_decode(nz["precompiled_charsmap"].get<std::string>());
      else if (!nz.contains("precompiled_charsmap") || !nz["precompiled_charsmap"].is_null())
        fail("convert: the Precompiled normalizer of tokenizer.json has no charsmap");
    } else if (t == "Replace" && nz.contains("pattern") && nz["pattern"].is_object() &&
               nz["pattern"].value("Regex", "") == " {2,}" && nz.value("content", "") == " ") {
      merge_spaces = true;
    } else if (t == "Sequence" && nz.contains("normalizers") && nz["normalizers"].is_array()) {
      for (const json& x : nz["normalizers"]) normalizer(x);
    } else {
      fail("convert: the Unigram tokenizer.json's normalizer ", q(nz.dump()).substr(0, 100),
           " is not one Triad supports (Precompiled, Replace \" {2,}\" -> \" \")");
    }
  };
  if (tok.contains("normalizer")) normalizer(tok["normalizer"]);
  // Pre-tokenizer: Metaspace ("▁", the prefix scheme), optionally after WhitespaceSplit.
  bool metaspace = false, space_prefix = true;
  std::function<void(const json&)> pre = [&](const json& p) {
    if (p.is_null()) return;
    const std::string t = p.is_object() ? p.value("type", "") : "";
    if (t == "Metaspace") {
      metaspace = true;
      if (p.value("replacement", "\xE2\x96\x81") != "\xE2\x96\x81")
        fail("convert: the Metaspace pre-tokenizer of tokenizer.json replaces spaces by something other than \"\xE2\x96\x81\"");
      if (p.contains("prepend_scheme") && p["prepend_scheme"].is_string())
        space_prefix = p["prepend_scheme"].get<std::string>() != "never";
      else if (p.contains("add_prefix_space") && p["add_prefix_space"].is_boolean())
        space_prefix = p["add_prefix_space"].get<bool>();
    } else if (t == "WhitespaceSplit") {
      merge_spaces = true;
    } else if (t == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
      for (const json& x : p["pretokenizers"]) pre(x);
    } else {
      fail("convert: the Unigram tokenizer.json's pre-tokenizer ", q(p.dump()).substr(0, 100),
           " is not one Triad supports (Metaspace, WhitespaceSplit)");
    }
  };
  if (tok.contains("pre_tokenizer")) pre(tok["pre_tokenizer"]);
  if (!metaspace) fail("convert: the Unigram tokenizer.json has no Metaspace pre-tokenizer (spaces as \"\xE2\x96\x81\")");
  w.add_string("tokenizer.ggml.model", "t5");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_f32_array("tokenizer.ggml.scores", sc);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_bool("tokenizer.ggml.add_space_prefix", space_prefix);
  w.add_bool("tokenizer.ggml.remove_extra_whitespaces", merge_spaces);
  if (!charsmap.empty()) w.add_u8_array("tokenizer.ggml.precompiled_charsmap", charsmap);
  w.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
  if (const int64_t p = v.id_of(tcfg, cfg, "pad_token", "pad_token_id"); p >= 0)
    w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(p));
  // BOS / EOS from the post-processor's single-sequence template (else tokenizer_config.json's
  // names, nothing added).
  int64_t bos = -1, eos = -1;
  bool add_bos = false, add_eos = false;
  const json pp = tok.contains("post_processor") ? tok["post_processor"] : json();
  auto special = [&](const json& item) -> int64_t {
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object()) return -1;
    const auto it = v.by_text.find(item["SpecialToken"].value("id", ""));
    return it == v.by_text.end() ? -1 : it->second;
  };
  if (pp.is_object() && (pp.value("type", "") == "RobertaProcessing" || pp.value("type", "") == "BertProcessing")) {
    auto named = [&](const char* key) -> int64_t {
      if (!pp.contains(key) || !pp[key].is_array() || pp[key].size() != 2 || !pp[key][0].is_string()) return -1;
      const auto it = v.by_text.find(pp[key][0].get<std::string>());
      return it == v.by_text.end() ? -1 : it->second;
    };
    bos = named("cls"), eos = named("sep");
    add_bos = bos >= 0, add_eos = eos >= 0;
  } else if (pp.is_object() && pp.value("type", "") == "TemplateProcessing" && pp.contains("single") && pp["single"].is_array()) {
    bool seen_seq = false;
    for (const json& item : pp["single"]) {
      if (item.is_object() && item.contains("Sequence")) {
        seen_seq = true;
      } else if (const int64_t id = special(item); id >= 0) {
        (seen_seq ? eos : bos) = id;
        (seen_seq ? add_eos : add_bos) = true;
      }
    }
  }
  if (bos < 0) bos = v.id_of(tcfg, cfg, "bos_token", "bos_token_id");
  if (eos < 0) eos = v.id_of(tcfg, cfg, "eos_token", "eos_token_id");
  if (bos >= 0) w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  if (eos >= 0) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
  w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
  w.add_bool("tokenizer.ggml.add_eos_token", add_eos);
}

}  // namespace

void write_gguf_tokenizer(gguf::GgufWriter& w, const json& tok, const json& tcfg, const fs::path& dir, const json& cfg,
                          int64_t n_vocab_cfg) {
  const std::string type = tok.contains("model") && tok["model"].is_object() ? tok["model"].value("type", "") : "";
  if (type == "WordPiece") {
    write_wordpiece(w, tok, tcfg, n_vocab_cfg);
  } else if (type == "BPE" && tok["model"].value("byte_fallback", false)) {
    write_spm(w, tok, tcfg, cfg, n_vocab_cfg);
  } else if (type == "BPE") {
    write_byte_bpe(w, tok, tcfg, cfg, n_vocab_cfg);
  } else if (type == "Unigram") {
    write_unigram(w, tok, tcfg, cfg, n_vocab_cfg);
  } else {
    fail("convert: tokenizer.json's model ", q(type), " is not supported (BPE, BPE with byte fallback, Unigram, WordPiece are)");
  }
  if (type != "WordPiece") chat_template(w, dir, tcfg);
}

}  // namespace triad::convert
