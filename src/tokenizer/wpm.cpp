// WordPiece tokenization (llama.cpp's llm_tokenizer_wpm_session). The GGUF vocabulary stores
// word-initial pieces with a "▁" prefix and continuation pieces bare (the converter's rewrite of
// BERT's "##"), so each word is matched as "▁" + word.
// Properties: BERT basic tokenization (optional accent stripping via the NFD base character,
// optional lowercasing, control characters dropped, punctuation / ASCII symbols / CJK ideographs
// split into single-character words), then greedy longest match; a word with an unmatched
// position becomes one unknown token. Thread-safety: all state is local.
#include <algorithm>
#include <string>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace triad::tok {

namespace {

bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
         (cp >= 0x2B920 && cp <= 0x2CEAF) ||  // as in the HF implementation (not 0x2B820)
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::vector<std::string> basic_tokenize(const Vocab& v, std::string_view text) {
  std::vector<std::string> words(1);
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = utf8_decode(text, pos);
    if (v.strip_accents) cp = cp_nfd_base(cp);
    const uint8_t fl = cp_flags(cp);
    if (fl & kCpWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == kReplacementChar || (fl & kCpControl)) continue;
    if (v.strip_accents && (fl & kCpMark)) continue;
    std::string s;
    utf8_append(s, v.lowercase ? cp_lower(cp) : cp);
    if ((fl & kCpPunctuation) || (cp < 0x7F && (fl & kCpSymbol)) || is_cjk(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = std::move(s);
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void wpm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::string w;
  for (const std::string& word : basic_tokenize(v, text)) {
    if (word.empty()) continue;
    w = "\xE2\x96\x81" + word;
    const size_t n = w.size();
    const size_t start = out.size();
    for (size_t i = 0; i < n; ++i) {
      bool matched = false;
      for (size_t j = std::min(n, i + v.max_token_len + 1); j > i; --j) {
        const int32_t id = v.find(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {
        out.resize(start);  // discard the word's pieces
        break;
      }
    }
    if (out.size() == start && v.unk >= 0) out.push_back(v.unk);
  }
}

}  // namespace triad::tok
