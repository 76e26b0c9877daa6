// Loading the vocabulary from GGUF metadata (see vocab.h). The defaults, detection lists and
// workarounds are llama.cpp's (llama_vocab::impl::load), applied in the same order.
// Thread-safety: load_vocab() writes only the Vocab it is given.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cstring>
#include <cctype>
#include <limits>

#include "base/error.h"
#include "base/log.h"
#include "gguf/gguf_file.h"

namespace triad::tok {

namespace {

constexpr std::string_view kKeyModel = "tokenizer.ggml.model";
constexpr std::string_view kKeyPre = "tokenizer.ggml.pre";
constexpr std::string_view kKeyTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kKeyScores = "tokenizer.ggml.scores";
constexpr std::string_view kKeyTypes = "tokenizer.ggml.token_type";
constexpr std::string_view kKeyMerges = "tokenizer.ggml.merges";

// Wraps a GgufFile getter so a type mismatch reads as a tokenizer error.
template <typename F>
auto meta(std::string_view key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    fail("tokenizer metadata '", key, "': ", e.what());
  }
}

int32_t find_text(const Vocab& v, std::initializer_list<std::string_view> candidates) {
  for (std::string_view c : candidates) {
    const int32_t id = v.find(c);
    if (id >= 0) return id;
  }
  return -1;
}

void make_control(Vocab& v, int32_t id) {
  if (id < 0) return;
  if ((v.attr[id] & kAttrControl) == 0) {
    log_debug("tokenizer: token ", id, " '", v.text[id], "' looks like a control token; marking it control");
    v.attr[id] |= kAttrControl;
    if (v.public_attr[id] == TokenAttr::kNormal || v.public_attr[id] == TokenAttr::kUserDefined)
      v.public_attr[id] = TokenAttr::kControl;
  }
}

void read_tokens(const gguf::GgufFile& f, Vocab& v) {
  const gguf::Value* tv = f.find(kKeyTokens);
  TRIAD_CHECK(tv != nullptr, "tokenizer metadata '", kKeyTokens, "' is missing");
  TRIAD_CHECK(tv->type == gguf::ValueType::kArray && tv->elem_type == gguf::ValueType::kString,
              "tokenizer metadata '", kKeyTokens, "' must be an array of strings");
  const std::vector<std::string>& strs =
      meta(kKeyTokens, [&]() -> const std::vector<std::string>& { return tv->strings(); });
  const size_t n = strs.size();
  TRIAD_CHECK(n > 0, "tokenizer metadata '", kKeyTokens, "' is empty");
  TRIAD_CHECK(n <= static_cast<size_t>(std::numeric_limits<int32_t>::max()), "tokenizer: ", n,
              " tokens is too many");

  std::vector<float> scores;
  if (f.has(kKeyScores)) {
    scores = meta(kKeyScores, [&] { return f.get_float_array(kKeyScores); });
    TRIAD_CHECK(scores.size() == n, "tokenizer metadata '", kKeyScores, "' has ", scores.size(),
                " entries for ", n, " tokens");
  }
  std::vector<int64_t> types;
  if (f.has(kKeyTypes)) {
    types = meta(kKeyTypes, [&] { return f.get_int_array(kKeyTypes); });
    TRIAD_CHECK(types.size() == n, "tokenizer metadata '", kKeyTypes, "' has ", types.size(),
                " entries for ", n, " tokens");
  }

  v.text.resize(n);
  v.score.assign(n, 0.0f);
  v.attr.assign(n, kAttrNormal);
  v.public_attr.assign(n, TokenAttr::kNormal);
  v.index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& t = v.text[i];
    t = strs[i];
    if (t.empty()) t = "[EMPTY_" + std::to_string(i) + "]";  // llama.cpp's placeholder
    v.max_token_len = std::max(v.max_token_len, t.size());
    if (!scores.empty()) v.score[i] = scores[i];
    if (!types.empty()) {
      switch (types[i]) {
        case 0: v.attr[i] = 0; v.public_attr[i] = TokenAttr::kUnused; break;  // undefined
        case 1: break;
        case 2: v.attr[i] = kAttrUnknown; v.public_attr[i] = TokenAttr::kUnknown; break;
        case 3: v.attr[i] = kAttrControl; v.public_attr[i] = TokenAttr::kControl; break;
        case 4: v.attr[i] = kAttrUserDefined; v.public_attr[i] = TokenAttr::kUserDefined; break;
        case 5: v.attr[i] = kAttrUnused; v.public_attr[i] = TokenAttr::kUnused; break;
        case 6: v.attr[i] = kAttrByte; v.public_attr[i] = TokenAttr::kByte; break;
        default:
          fail("tokenizer metadata '", kKeyTypes, "'[", i, "] = ", types[i], " is not a token type (0..6)");
      }
    }
  }
  // The index views the strings in place, so it is built once `text` is final.
  for (size_t i = 0; i < n; ++i) {
    const int32_t prev = v.index.insert(v.text[i], static_cast<int32_t>(i));
    TRIAD_CHECK(prev < 0, "tokenizer: duplicate token '", v.text[i], "' (ids ", prev, " and ", i, ")");
  }
}

void read_merges(const gguf::GgufFile& f, Vocab& v) {
  const gguf::Value* mv = f.find(kKeyMerges);
  TRIAD_CHECK(mv != nullptr, "tokenizer metadata '", kKeyMerges, "' is missing (required for BPE)");
  TRIAD_CHECK(mv->type == gguf::ValueType::kArray && mv->elem_type == gguf::ValueType::kString,
              "tokenizer metadata '", kKeyMerges, "' must be an array of strings");
  const std::vector<std::string>& ms =
      meta(kKeyMerges, [&]() -> const std::vector<std::string>& { return mv->strings(); });
  TRIAD_CHECK(ms.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "tokenizer: too many merges");
  // Keys are "first\xffsecond", stored back to back in merge_keys (built fully before indexing,
  // so the views stay valid).
  size_t total = 0;
  std::vector<size_t> split(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string& m = ms[i];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    TRIAD_CHECK(sp != std::string::npos && sp + 1 < m.size(), "tokenizer metadata '", kKeyMerges, "'[", i,
                "] = '", m, "' is not two parts separated by a space");
    split[i] = sp;
    total += m.size();
  }
  v.merge_keys.reserve(total);
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string& m = ms[i];
    v.merge_keys.append(m, 0, split[i]);
    v.merge_keys.push_back('\xff');
    v.merge_keys.append(m, split[i] + 1, std::string::npos);
  }
  v.merges.reserve(ms.size());
  size_t off = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    const size_t len = ms[i].size();
    v.merges.insert(std::string_view(v.merge_keys).substr(off, len), static_cast<int32_t>(i));  // first wins
    off += len;
  }
}

// Reads an optional token-id key into `id` (llama.cpp keeps the default on a bad value).
void read_id(const gguf::GgufFile& f, std::string_view key, int32_t& id, int32_t n) {
  if (id >= n) id = -1;  // a default outside this vocabulary
  if (!f.has(key)) return;
  const int64_t val = meta(key, [&] { return f.get_int(key); });
  if (val < 0 || val >= n) {
    log_warn("tokenizer: ", key, " = ", val, " is outside the vocabulary of ", n, " tokens; ignored");
    return;
  }
  id = static_cast<int32_t>(val);
}

void detect_special_tokens(Vocab& v) {
  // EOT / EOM / FIM tokens by text, in llama.cpp's candidate order; found ones become control.
  auto detect = [&](int32_t& id, std::initializer_list<std::string_view> texts) {
    if (id >= 0) return;  // given by the metadata
    id = find_text(v, texts);
    make_control(v, id);
  };
  detect(v.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                 "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                 "<end_of_utterance>"});
  detect(v.eom, {"<|eom_id|>"});
  detect(v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
                     "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"});
  detect(v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                     "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"});
  detect(v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
                     "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"});
  detect(v.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(v.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(v.fim_sep, {"<|file_sep|>"});

  // Control tokens named "...unused..." are unused.
  for (size_t i = 0; i < v.text.size(); ++i) {
    if ((v.attr[i] & kAttrControl) && v.text[i].find("unused") != std::string::npos) v.attr[i] |= kAttrUnused;
  }

  // End-of-generation set.
  std::vector<int32_t> eog;
  for (int32_t id : {v.fim_pad, v.fim_rep, v.fim_sep})
    if (id >= 0) eog.push_back(id);
  static const std::string_view kEogTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
      "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
      "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};
  for (std::string_view t : kEogTexts) {
    const int32_t id = v.find(t);
    if (id < 0) continue;
    eog.push_back(id);
    make_control(v, id);
  }
  // gpt-oss: these are always rendered.
  for (std::string_view t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int32_t id = v.find(t);
    if (id >= 0) {
      v.attr[id] = kAttrUserDefined;
      v.public_attr[id] = TokenAttr::kUserDefined;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) eog.push_back(id);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  auto in_eog = [&](std::string_view t) {
    const int32_t id = v.find(t);
    return id >= 0 && std::binary_search(eog.begin(), eog.end(), id) ? id : -1;
  };
  // o200k_harmony / solar-open: "<|end|>" ends a message, not the generation.
  const int32_t end_id = in_eog("<|end|>");
  if (end_id >= 0 && ((in_eog("<|return|>") >= 0 && (in_eog("<|call|>") >= 0 || in_eog("<|calls|>") >= 0)) ||
                      ((in_eog("<|call|>") >= 0 || in_eog("<|calls|>") >= 0) && in_eog("<|flush|>") >= 0))) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    v.attr[end_id] = kAttrUserDefined;
    v.public_attr[end_id] = TokenAttr::kUserDefined;
  }
  // gemma4 / paddleocr: "</s>" is a normal token when "<|tool_response>" exists.
  const int32_t s_id = in_eog("</s>");
  if (s_id >= 0 && in_eog("<|tool_response>") >= 0) {
    eog.erase(std::find(eog.begin(), eog.end(), s_id));
    v.attr[s_id] = kAttrNormal;
    v.public_attr[s_id] = TokenAttr::kNormal;
  }
  v.eog = std::move(eog);
}

void set_strip_attrs(const gguf::GgufFile& f, Vocab& v) {
  std::string name = meta("general.name", [&] { return f.get_string("general.name", ""); });
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string arch = meta("general.architecture", [&] { return f.get_string("general.architecture", ""); });
  auto contains = [](const std::string& s, std::initializer_list<std::string_view> subs) {
    for (std::string_view sub : subs)
      if (s.find(sub) != std::string::npos) return true;
    return false;
  };
  auto set = [&](std::string_view text, uint16_t bit, bool on) {
    const int32_t id = v.find(text);
    if (id < 0) return;
    v.attr[id] = on ? (v.attr[id] | bit) : (v.attr[id] & ~bit);
  };
  if (contains(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) || contains(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set("<mask>", kAttrLstrip, true);
  } else if (contains(name, {"phi-3", "phi3"})) {
    for (int32_t id : v.specials) v.attr[id] |= kAttrRstrip;
    set("</s>", kAttrRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, kAttrRstrip, false);
  } else if (contains(name, {"modern-bert"})) {
    set("[MASK]", kAttrLstrip, true);
  }
}

}  // namespace

bool Vocab::is_eog(int32_t id) const { return id >= 0 && std::binary_search(eog.begin(), eog.end(), id); }

void load_vocab(const gguf::GgufFile& f, Vocab& v) {
  TRIAD_CHECK(f.has(kKeyModel), "tokenizer metadata '", kKeyModel, "' is missing");
  v.model = meta(kKeyModel, [&] { return f.get_string(kKeyModel); });
  std::string pre = meta(kKeyPre, [&] { return f.get_string(kKeyPre, ""); });

  PreTypeConfig pcfg;
  if (v.model == "llama") {
    v.type = VocabType::kSpm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (v.model == "bert") {
    v.type = VocabType::kWpm;
    v.bos = 101, v.unk = 100, v.sep = 102, v.pad = 0, v.mask = 103;
    v.add_bos = true, v.add_sep = true, v.clean_spaces = true;
  } else if (v.model == "gpt2" || v.model == "gemma4") {
    v.type = VocabType::kBpe;
    if (v.model == "gpt2") {
      v.bos = 11, v.eos = 11;
    } else {
      pre = "gemma4";
    }
    if (pre.empty()) {
      log_warn("tokenizer: no tokenizer.ggml.pre in the file; using the 'default' pre-tokenizer "
               "(tokenization may differ from the model's own)");
      pre = "default";
    }
    if (!pre_type_config(pre, pcfg)) {
      log_warn("tokenizer: unknown pre-tokenizer '", pre, "'; using the 'default' regexes "
               "(tokenization may differ from the model's own)");
    }
    v.clean_spaces = pcfg.clean_spaces;
    v.ignore_merges = pcfg.ignore_merges;
    v.add_bos = pcfg.add_bos;
    v.escape_whitespaces = pcfg.escape_whitespaces;
    v.byte_encode = pcfg.byte_encode;
  } else if (v.model == "t5") {
    v.type = VocabType::kUgm;
    v.eos = 1, v.unk = 2, v.pad = 0;
    v.add_eos = true;
    v.escape_whitespaces = true;
    v.remove_extra_whitespaces =
        meta("tokenizer.ggml.remove_extra_whitespaces", [&] { return f.get_bool("tokenizer.ggml.remove_extra_whitespaces", false); });
    if (f.has("tokenizer.ggml.precompiled_charsmap")) {
      const std::vector<int64_t> bytes = meta("tokenizer.ggml.precompiled_charsmap", [&] {
        return f.get_int_array("tokenizer.ggml.precompiled_charsmap");
      });
      v.charsmap.reserve(bytes.size());
      for (const int64_t b : bytes) {
        TRIAD_CHECK(b >= -128 && b <= 255, "tokenizer metadata 'tokenizer.ggml.precompiled_charsmap' must be an array of bytes");
        v.charsmap.push_back(static_cast<char>(b));
      }
      TRIAD_CHECK(v.charsmap.size() >= 4, "tokenizer metadata 'tokenizer.ggml.precompiled_charsmap' is too short (",
                  v.charsmap.size(), " bytes) for its size header");
      uint32_t units = 0;
      std::memcpy(&units, v.charsmap.data(), 4);
      TRIAD_CHECK(units % 4 == 0 && units <= v.charsmap.size() - 4, "tokenizer metadata 'tokenizer.ggml.precompiled_charsmap' "
                  "says its character trie takes ", units, " bytes, but ", v.charsmap.size() - 4, " follow its header");
    }
  } else {
    fail("tokenizer: unsupported tokenizer model '", v.model, "' (supported: llama, gpt2, gemma4, bert, t5)");
  }
  v.pre = v.type == VocabType::kBpe ? pcfg.name : (pre.empty() ? "default" : pre);
  v.add_space_prefix = meta("tokenizer.ggml.add_space_prefix",
                            [&] { return f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix); });

  read_tokens(f, v);
  if (v.type == VocabType::kBpe) {
    read_merges(f, v);
    v.pretokenizer.init(pcfg.regexes);
  }

  const int32_t n = v.n_tokens();
  read_id(f, "tokenizer.ggml.bos_token_id", v.bos, n);
  read_id(f, "tokenizer.ggml.eos_token_id", v.eos, n);
  read_id(f, "tokenizer.ggml.eot_token_id", v.eot, n);
  read_id(f, "tokenizer.ggml.eom_token_id", v.eom, n);
  read_id(f, "tokenizer.ggml.unknown_token_id", v.unk, n);
  read_id(f, "tokenizer.ggml.seperator_token_id", v.sep, n);
  read_id(f, "tokenizer.ggml.padding_token_id", v.pad, n);
  read_id(f, "tokenizer.ggml.mask_token_id", v.mask, n);
  read_id(f, "tokenizer.ggml.fim_pre_token_id", v.fim_pre, n);
  read_id(f, "tokenizer.ggml.fim_suf_token_id", v.fim_suf, n);
  read_id(f, "tokenizer.ggml.fim_mid_token_id", v.fim_mid, n);
  read_id(f, "tokenizer.ggml.fim_pad_token_id", v.fim_pad, n);
  read_id(f, "tokenizer.ggml.fim_rep_token_id", v.fim_rep, n);
  read_id(f, "tokenizer.ggml.fim_sep_token_id", v.fim_sep, n);
  read_id(f, "tokenizer.ggml.prefix_token_id", v.fim_pre, n);  // deprecated names
  read_id(f, "tokenizer.ggml.suffix_token_id", v.fim_suf, n);
  read_id(f, "tokenizer.ggml.middle_token_id", v.fim_mid, n);

  auto read_flag = [&](std::string_view key, bool& flag) { flag = meta(key, [&] { return f.get_bool(key, flag); }); };
  read_flag("tokenizer.ggml.add_bos_token", v.add_bos);
  read_flag("tokenizer.ggml.add_eos_token", v.add_eos);
  read_flag("tokenizer.ggml.add_sep_token", v.add_sep);
  if (v.model == "gemma4") v.add_bos = true;  // llama.cpp's Gemma 4 override
  TRIAD_CHECK(!v.add_bos || v.bos >= 0, "tokenizer: add_bos_token is set but there is no BOS token id");
  TRIAD_CHECK(!v.add_eos || v.eos >= 0, "tokenizer: add_eos_token is set but there is no EOS token id");
  TRIAD_CHECK(!v.add_sep || v.sep >= 0, "tokenizer: add_sep_token is set but there is no separator token id");
  read_flag("tokenizer.ggml.normalizer.lowercase", v.lowercase);
  v.strip_accents = v.lowercase;
  read_flag("tokenizer.ggml.normalizer.strip_accents", v.strip_accents);

  detect_special_tokens(v);

  for (int32_t id = 0; id < n; ++id)
    if (v.attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.specials.push_back(id);
  std::stable_sort(v.specials.begin(), v.specials.end(),
                   [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });
  set_strip_attrs(f, v);

  if (v.type == VocabType::kUgm) {
    TRIAD_CHECK(v.unk >= 0, "tokenizer: a Unigram vocabulary needs an unknown token");
    double min_score = 0.0;
    bool any = false;
    for (int32_t id = 0; id < n; ++id) {
      const uint16_t a = v.attr[static_cast<size_t>(id)];
      if (a & kAttrNormal) {
        min_score = any ? std::min<double>(min_score, v.score[static_cast<size_t>(id)]) : v.score[static_cast<size_t>(id)];
        any = true;
      }
      if (a & (kAttrNormal | kAttrUserDefined | kAttrUnused)) v.ugm_sorted.push_back(id);
    }
    v.ugm_unk_score = min_score - 10.0;
    std::sort(v.ugm_sorted.begin(), v.ugm_sorted.end(),
              [&](int32_t a, int32_t b) { return v.text[static_cast<size_t>(a)] < v.text[static_cast<size_t>(b)]; });
  }

  // SPM byte fallback table.
  v.byte_token.fill(-1);
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
    const char raw = static_cast<char>(b);
    int32_t id = v.find(name);
    if (id < 0) id = v.find(std::string_view(&raw, 1));
    v.byte_token[b] = id;
  }
}

}  // namespace triad::tok
