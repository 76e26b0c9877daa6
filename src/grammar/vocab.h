// The vocabulary as bytes, for constrained decoding (matcher.h): every generable token in a byte
// trie laid out in pre-order (a rejected prefix skips its whole subtree), the long tokens in a
// trie of their own, and per-token character counts; and TokenMask, a bitset over the vocabulary.
//
// Thread-safety: a Vocab is immutable after construction; share it freely.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace triad {
class Tokenizer;
}

namespace triad::grammar {

// The vocabulary as bytes, for masks.
class Vocab {
 public:
  // pieces[id]: the bytes token id adds to the output. Tokens with generable[id] == 0 (control,
  // unknown and unused tokens) or an empty piece are never allowed under a grammar; eog_ids are
  // allowed when the grammar is complete.
  Vocab(std::vector<std::string> pieces, const std::vector<char>& generable, std::vector<int32_t> eog_ids);
  // From a model's tokenizer: pieces as the incremental decoder emits them (also_render: control
  // tokens it renders, which are then generable too).
  static std::shared_ptr<const Vocab> from_tokenizer(const Tokenizer& tok, const std::vector<int32_t>& also_render = {});

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog_ids() const { return eog_; }

  // Trie in pre-order: node 0 is the root (empty prefix); node i's subtree is [i, end).
  struct Node {
    uint8_t byte;
    uint8_t sub_chars;  // the most characters of a token in this subtree (at most 255)
    uint8_t chars;      // the characters of the bytes up to here (at most 255)
    uint8_t unused = 0;
    uint16_t depth;     // bytes up to here
    uint16_t n_tok;     // tokens whose piece ends here: tokens[tok_begin, tok_begin + n_tok)
    uint32_t end;
    uint32_t tok_begin;
  };
  struct Trie {
    std::vector<Node> nodes;
    std::vector<int32_t> tokens;
    int max_depth = 0;
  };
  // Every generable token.
  const Trie& trie() const { return trie_; }
  const std::vector<Node>& nodes() const { return trie_.nodes; }
  int max_depth() const { return trie_.max_depth; }
  // The most characters one token can start (its bytes that are not UTF-8 continuation bytes).
  int max_chars() const { return max_chars_; }
  // Tokens of at least kLongChars characters (runs of spaces or dashes in code vocabularies),
  // in their own trie: masks treat them apart (see Matcher) so that bounded repetitions longer
  // than that share their work whatever the vocabulary's longest token.
  static constexpr int kLongChars = 33;
  // Bounded repetitions this many or more repetitions from their bound accept the same tokens
  // (none but the long ones can reach the bound): the longest token's characters plus 2, at
  // most kLongChars.
  uint32_t repeat_horizon() const {
    return static_cast<uint32_t>(std::min(max_chars_ + 2, kLongChars));
  }
  const Trie& long_trie() const { return long_trie_; }
  const std::vector<int32_t>& long_ids() const { return long_ids_; }  // ascending
  // Token id's characters (at most 255).
  int chars(int32_t id) const { return chars_[static_cast<size_t>(id)]; }
  // Bitset of the tokens of at most n characters, n < kLongChars.
  const std::vector<uint64_t>& tokens_up_to(int n) const { return up_to_[static_cast<size_t>(n)]; }

 private:
  static Trie build_trie(const std::vector<std::string>& pieces, std::vector<int32_t> ids);

  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
  Trie trie_, long_trie_;
  std::vector<int32_t> long_ids_;
  std::vector<uint8_t> chars_;
  std::vector<std::vector<uint64_t>> up_to_;
  int max_chars_ = 0;
};

// Bitset over the vocabulary.
struct TokenMask {
  std::vector<uint64_t> bits;
  void reset(int32_t n_vocab) { bits.assign((static_cast<size_t>(n_vocab) + 63) / 64, 0); }
  void set(int32_t id) { bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  bool test(int32_t id) const { return bits[static_cast<size_t>(id) >> 6] >> (id & 63) & 1; }
  size_t count() const;
  std::vector<int32_t> ids() const;  // the set tokens, ascending
};

}  // namespace triad::grammar
