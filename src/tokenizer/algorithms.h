// The tokenization algorithms applied to one raw-text fragment (the special-token split
// has already happened). Internal to the tokenizer module.
// Thread-safety: pure functions of an immutable Vocab; all scratch state is local.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace triad::tok {

// U+2581 "▁", SentencePiece's mark for a space.
inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

// SentencePiece BPE over UTF-8 characters: repeatedly merges the adjacent pair whose
// concatenation is the highest-scoring token (ties: leftmost); characters left without a token
// fall back to byte tokens. `text` already has spaces replaced by "▁".
void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// Byte-level (or raw UTF-8) BPE: pre-tokenizes `text` (valid UTF-8) into words and merges each
// word by merge rank (ties: leftmost).
void bpe_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// Unigram (SentencePiece unigram, llama.cpp's "t5"): charsmap normalization, then Viterbi over
// the piece scores (ugm.cpp).
void ugm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

// WordPiece: BERT basic tokenization, then greedy longest-match per word.
void wpm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out);

}  // namespace triad::tok
