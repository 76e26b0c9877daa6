// Cutting special-token texts out of the input before the tokenization algorithm runs
// (llama.cpp's tokenizer_st_partition). Internal to the tokenizer module.
//
// Properties:
// - Same result as llama.cpp: special tokens are taken longest text first (ties: lower id), each
//   splitting every remaining raw fragment at all its non-overlapping occurrences, so a shorter
//   token never matches inside a longer one already cut out. Tokens with the lstrip / rstrip
//   attribute also remove the ASCII whitespace before / after them.
// - User-defined tokens are always split out; control and unknown ones only with parse_special.
// - Fast: a byte trie over all special texts finds, in one pass over the input, which special
//   tokens occur at all; only those are then applied in order (vocabularies such as Gemma's
//   have thousands of control tokens).
// Thread-safety: SpecialMatcher is immutable after build(); split() may run concurrently.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace triad::tok {

struct Fragment {
  int32_t token;  // >= 0: this special token; -1: raw text [off, off + len)
  size_t off;
  size_t len;
};

class SpecialMatcher {
 public:
  void build(const Vocab& v);
  // The fragments of `text`, in order (empty for empty text).
  std::vector<Fragment> split(const Vocab& v, std::string_view text, bool parse_special) const;

 private:
  // Ranks (indices into Vocab::specials) of the special tokens whose text occurs in `text`,
  // ascending.
  std::vector<int32_t> occurring(std::string_view text) const;

  int32_t child(int32_t node, unsigned char c) const;

  // Flat byte trie: node k's children are edges [first_[k], first_[k] + count_[k]), sorted by
  // byte; the root's children are also in a direct table.
  std::vector<uint32_t> first_;
  std::vector<uint32_t> count_;
  std::vector<unsigned char> edge_byte_;
  std::vector<int32_t> edge_child_;
  int32_t root_[256];
  std::vector<int32_t> terminal_;  // node -> rank, or -1
  size_t n_specials_ = 0;
};

}  // namespace triad::tok
