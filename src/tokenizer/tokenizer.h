// Tokenizers built from GGUF metadata (tokenizer.ggml.*), matching llama.cpp token for token.
//
// Supported vocabularies (tokenizer.ggml.model):
// - "llama": SentencePiece-style (SPM). Score-driven bigram merging over UTF-8 characters, "▁"
//   for spaces, an optional space prefix (tokenizer.ggml.add_space_prefix, default true), byte
//   fallback to <0xNN> tokens, then the unknown token.
// - "gpt2" (and "gemma4"): BPE with ranked merges (tokenizer.ggml.merges) after a PCRE2
//   pre-tokenizer chosen by tokenizer.ggml.pre; byte-level (GPT-2 byte->unicode mapping) except
//   for gemma4, which works on raw UTF-8 with "▁" for spaces.
// - "bert": WordPiece. BERT basic tokenization (lowercase / accent stripping per
//   tokenizer.ggml.normalizer.*, default on), punctuation and CJK splitting, greedy
//   longest-match with continuation pieces, [UNK] for unmatched words.
// - "t5": Unigram (SentencePiece unigram models: T5, XLM-R, multilingual E5 / MiniLM). The
//   precompiled charsmap normalizes the text (tokenizer.ggml.precompiled_charsmap), spaces become
//   "▁" (tokenizer.ggml.add_space_prefix, tokenizer.ggml.remove_extra_whitespaces), then Viterbi
//   picks the pieces with the highest total score; EOS appended by default.
// Special tokens: control, user-defined and unknown-typed tokens are cut out of the text first,
// longest text first (llama.cpp's order). User-defined tokens are always recognized;
// control/unknown ones only with parse_special. Defaults for BOS/EOS/UNK/add_bos follow
// llama.cpp per model type when the metadata leaves them out.
//
// Untrusted input: malformed metadata (missing/mistyped arrays, length mismatches, bad merges,
// duplicate tokens, out-of-range token types) throws triad::Error naming the key; any byte
// string can be encoded (invalid UTF-8 becomes U+FFFD for the BPE/WordPiece pre-tokenizers; SPM
// falls back to byte tokens); out-of-range ids passed to the decoding functions throw.
//
// Thread-safety: a Tokenizer is immutable after construction; all const members may be called
// concurrently. An IncrementalDecoder is a small mutable object for one stream (one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triad {

namespace gguf {
class GgufFile;
}

// A token's declared type, from tokenizer.ggml.token_type (1..6). Tokens whose text llama.cpp
// treats as control (EOT/EOG/FIM texts such as "<|endoftext|>") report kControl; type 0
// ("undefined") reports kUnused.
enum class TokenAttr : uint8_t { kNormal, kUnknown, kControl, kUserDefined, kUnused, kByte };

class Tokenizer {
 public:
  struct Impl;

  // Builds the tokenizer from the file's tokenizer.ggml.* metadata. Throws triad::Error.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& f);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS / append EOS as the vocabulary says (BERT: [CLS] ... [SEP]).
  // parse_special: also recognize control-token texts such as "<start_of_turn>" in `text`.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes token `id` decodes to (SPM: "▁" -> " ", <0xNN> -> the byte; BPE: byte-level
  // unmapping; user-defined tokens: their text). Control and unknown tokens give "" unless
  // render_special, then their text.
  std::string token_piece(int32_t id) const { return token_piece(id, false); }
  std::string token_piece(int32_t id, bool render_special) const;
  // Concatenated pieces. When the vocabulary adds a space prefix, the first piece loses one
  // leading space (a leading, unrendered BOS is skipped for this). BPE/WordPiece vocabularies
  // that ask for it get llama.cpp's clean-up of " ," " ." " 's" style spaces.
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none
  int32_t eot_id() const;  // -1 if none
  // EOS, EOT, EOM and the other end-of-generation tokens llama.cpp recognizes (e.g.
  // <end_of_turn>, <|im_end|>, <|eot_id|>, <|endoftext|>, FIM pad/repo/sep).
  bool is_end_of_generation(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;
  const std::string& token_text(int32_t id) const;  // throws on an out-of-range id
  TokenAttr token_attr(int32_t id) const;            // throws on an out-of-range id
  std::string_view model_type() const;               // tokenizer.ggml.model: "llama" | "gpt2" | "bert" ...
  std::string_view pre_type() const;                 // tokenizer.ggml.pre as used ("default" when absent)
  bool add_bos() const;
  bool add_eos() const;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Incremental detokenizer for streaming: feed ids one at a time; push() returns only complete
// UTF-8. A multi-byte character split across tokens is held back until it completes; bytes that
// can no longer form a valid character are emitted as U+FFFD. Pieces keep their leading space
// (as llama.cpp streams them). flush() returns what is left (an incomplete tail as U+FFFD).
class IncrementalDecoder {
 public:
  // also_render: control tokens rendered as their text even without render_special (the tool-call
  // markers a model's output format needs to be seen).
  explicit IncrementalDecoder(const Tokenizer& tok, bool render_special = false, std::vector<int32_t> also_render = {});
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::vector<int32_t> also_render_;  // sorted
  std::string pending_;  // bytes not yet returned (at most one incomplete character)
};

}  // namespace triad
