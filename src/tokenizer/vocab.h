// The vocabulary read from GGUF metadata, shared by the SPM, BPE and WordPiece algorithms
// (internal to the tokenizer module).
//
// Properties:
// - load_vocab() reproduces llama.cpp's llama_vocab::load(): per-model defaults for the special
//   ids and flags, tokenizer.ggml.* overrides, the text-based detection of EOT/EOM/FIM/EOG
//   tokens (those become control tokens), "unused" marking, and the per-model lstrip/rstrip
//   attributes (phi-3). Where llama.cpp depends on hash-map order (several EOT candidates), the
//   first candidate in its list wins, so the result is deterministic.
// - Everything is validated: array types and lengths, token types, merges, duplicate tokens;
//   failures throw triad::Error naming the key.
// Thread-safety: immutable after load_vocab() returns.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_index.h"
#include "tokenizer/tokenizer.h"

namespace triad::tok {

// Per-token attribute bits (llama.cpp's llama_token_attr).
constexpr uint16_t kAttrNormal = 1 << 0;
constexpr uint16_t kAttrUnknown = 1 << 1;
constexpr uint16_t kAttrControl = 1 << 2;
constexpr uint16_t kAttrUserDefined = 1 << 3;
constexpr uint16_t kAttrUnused = 1 << 4;
constexpr uint16_t kAttrByte = 1 << 5;
constexpr uint16_t kAttrLstrip = 1 << 6;   // eat whitespace before the token when splitting
constexpr uint16_t kAttrRstrip = 1 << 7;   // eat whitespace after it

enum class VocabType { kSpm, kBpe, kWpm, kUgm };

struct Vocab {
  Vocab() = default;
  Vocab(const Vocab&) = delete;  // `index` views the strings of `text`
  Vocab& operator=(const Vocab&) = delete;

  VocabType type = VocabType::kSpm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // pre-tokenizer name in effect

  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<uint16_t> attr;
  std::vector<TokenAttr> public_attr;
  StringIndex index;  // views into `text`
  size_t max_token_len = 0;

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  std::vector<int32_t> eog;  // sorted, unique

  bool add_space_prefix = false;
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;
  bool ignore_merges = false;
  bool clean_spaces = false;
  bool escape_whitespaces = false;  // BPE: replace ' ' by "▁" before merging (gemma4)
  bool byte_encode = true;          // BPE: GPT-2 byte-level mapping (false: raw UTF-8, gemma4)
  bool remove_extra_whitespaces = false;  // Unigram: drop runs of spaces, "▁" before each word
  bool lowercase = true;             // WordPiece normalizer
  bool strip_accents = true;

  // Control, user-defined and unknown tokens, longest text first (ties: lower id first).
  std::vector<int32_t> specials;
  // SPM byte fallback: the token for each byte (<0xNN>, else the 1-byte text), -1 if none.
  std::array<int32_t, 256> byte_token{};

  // BPE merges: key = first + '\xff' + second -> rank (position in tokenizer.ggml.merges);
  // the keys live in merge_keys.
  std::string merge_keys;
  StringIndex merges;
  PreTokenizer pretokenizer;  // BPE only

  // Unigram: the precompiled charsmap (raw bytes, ugm.cpp), the pieces it matches (normal,
  // user-defined and unused tokens) sorted by text, and the unknown token's score.
  std::string charsmap;
  std::vector<int32_t> ugm_sorted;
  double ugm_unk_score = -10.0;

  int32_t n_tokens() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const { return index.find(s); }
  int32_t merge_rank(std::string& key_buf, std::string_view a, std::string_view b) const {
    key_buf.assign(a);
    key_buf.push_back('\xff');
    key_buf.append(b);
    return merges.find(key_buf);
  }
  bool is_eog(int32_t id) const;
};

// Throws triad::Error on malformed or unsupported metadata.
void load_vocab(const gguf::GgufFile& f, Vocab& v);

}  // namespace triad::tok
