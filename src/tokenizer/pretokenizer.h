// BPE pre-tokenizer: splits text into words with a sequence of PCRE2 regexes, as llama.cpp's
// unicode_regex_split() does (internal to the tokenizer module).
//
// Properties:
// - Each regex refines the current pieces: inside every piece, matches become pieces and so do
//   the unmatched gaps between them (nothing is dropped); an empty match is a split point. Each
//   piece is matched on its own, so lookarounds and $ never see past its ends.
// - Patterns are llama.cpp's (tokenizer.ggml.pre selects the set), compiled with UTF + UCP and
//   $ = end of subject. To match llama.cpp's category emulation, \p{Lu}/\p{Ll}/\p{Lt}/\p{Lm}/
//   \p{Lo} mean any letter and \d means [0-9]. (Known remaining difference: llama.cpp's \p{S}
//   leaves out '~'; only pre-tokenizers outside the tested set use \p{S}.)
// - Input must be valid UTF-8 (the caller sanitizes it).
// Thread-safety: immutable after init(); split() may run concurrently (per-thread match data).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace triad::tok {

// What a tokenizer.ggml.pre value selects (llama.cpp's pre-type table).
struct PreTypeConfig {
  std::string name;                 // canonical name
  std::vector<std::string> regexes;
  bool byte_encode = true;          // GPT-2 byte-level mapping of each word
  bool clean_spaces = true;         // decode() clean-up of " ," etc.
  bool ignore_merges = false;       // a word that is a whole token is taken as is
  bool add_bos = false;             // default for tokenizer.ggml.add_bos_token
  bool escape_whitespaces = false;  // ' ' -> "▁" before BPE (gemma4)
};

// Fills `out` for a known name and returns true; returns false for an unknown one (then `out`
// holds the "default" configuration).
bool pre_type_config(std::string_view pre, PreTypeConfig& out);

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Compiles the patterns; throws triad::Error naming a pattern PCRE2 rejects.
  void init(const std::vector<std::string>& patterns);
  bool empty() const { return regexes_.empty(); }
  // Appends the words of `text` (valid UTF-8) as views into it.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

// The pattern rewritten for PCRE2 as described above (exposed for tests).
std::string adapt_pattern(std::string_view pattern);

}  // namespace triad::tok
