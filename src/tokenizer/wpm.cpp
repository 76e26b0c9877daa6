// WordPiece tokenization, as Hugging Face tokenizers' BertNormalizer + BertPreTokenizer +
// WordPiece do it (llama.cpp's llm_tokenizer_wpm_session is the same but for accents and long
// words, noted below). The GGUF vocabulary stores word-initial pieces with a "▁" prefix and
// continuation pieces bare (the converter's rewrite of BERT's "##"), so each word is matched as
// "▁" + word.
// Properties: BERT basic tokenization: control characters dropped, whitespace splits; optional
// accent stripping = the canonical decomposition (NFD) with nonspacing marks (Mn) removed, so
// Hangul becomes jamo and spacing / enclosing marks stay (llama.cpp keeps only the first
// codepoint of each decomposition); optional lowercasing; punctuation, ASCII symbols and CJK
// ideographs split into one-character words. Then greedy longest match; a word of more than 100
// characters (HF's max_input_chars_per_word; llama.cpp has no limit) or with an unmatched
// position becomes one unknown token. Thread-safety: all state is local.
#include <algorithm>
#include <string>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace triad::tok {

namespace {

constexpr size_t kMaxWordChars = 100;  // HF WordPiece's max_input_chars_per_word

bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
         (cp >= 0x2B920 && cp <= 0x2CEAF) ||  // as in the HF implementation (not 0x2B820)
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::vector<std::string> basic_tokenize(const Vocab& v, std::string_view text) {
  std::vector<std::string> words(1);
  std::vector<uint32_t> cps;
  size_t pos = 0;
  while (pos < text.size()) {
    const uint32_t raw = utf8_decode(text, pos);
    // Clean-up (NUL, U+FFFD and other controls go; whitespace splits) sees the text as given.
    const uint8_t raw_fl = cp_flags(raw);
    if (raw_fl & kCpWhitespace) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (raw == 0 || raw == kReplacementChar || (raw_fl & kCpControl)) continue;
    cps.clear();
    if (v.strip_accents)
      cp_nfd_append(raw, cps);
    else
      cps.push_back(raw);
    for (const uint32_t cp : cps) {
      if (v.strip_accents && cp_is_nonspacing_mark(cp)) continue;
      const uint32_t c = v.lowercase ? cp_lower(cp) : cp;
      const uint8_t fl = cp_flags(c);
      std::string s;
      utf8_append(s, c);
      if ((fl & kCpPunctuation) || (c < 0x7F && (fl & kCpSymbol)) || is_cjk(c)) {
        if (!words.back().empty()) words.emplace_back();
        words.back() = std::move(s);
        words.emplace_back();
      } else {
        words.back() += s;
      }
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

// Characters (codepoints) of a UTF-8 word.
size_t n_chars(std::string_view w) {
  size_t n = 0;
  for (unsigned char c : w) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

void wpm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::string w;
  for (const std::string& word : basic_tokenize(v, text)) {
    if (word.empty()) continue;
    if (n_chars(word) > kMaxWordChars) {
      if (v.unk >= 0) out.push_back(v.unk);
      continue;
    }
    w = std::string(kSpaceMark) + word;
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
