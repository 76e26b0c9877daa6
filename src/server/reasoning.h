// Reasoning output: the text a thinking model writes between <think> and </think> (Qwen3,
// QwQ, DeepSeek-R1 and their distills) is returned apart from the answer, as vLLM's and
// llama.cpp's reasoning parsers do: message.reasoning_content (delta.reasoning_content when
// streaming), and usage.completion_tokens_details.reasoning_tokens counts its tokens.
//
// The splitter sees the generated text piece by piece (one token's text at a time) and sorts it:
//   - at the start, after optional whitespace, "<think>" opens the reasoning; anything else
//     makes the whole output content. A model whose prompt already ends with "<think>" (the
//     DeepSeek-R1 templates add it) starts inside (starts_inside).
//   - inside, everything up to "</think>" is reasoning; the tag itself is neither, and the
//     whitespace right after it is dropped; the rest is content.
//   - a piece that ends with a possible start of a tag is held back until the next piece says.
//   - an output that ends inside the reasoning (cut by max_tokens) keeps it all as reasoning.
// Feeding the text in any split gives the same reasoning and content as feeding it whole.
// Model output is untrusted: any bytes are accepted; nothing throws.
// Thread-safety: one splitter per choice, used by one thread at a time.
#pragma once

#include <string>
#include <string_view>

namespace triad::server {

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_inside);

  struct Out {
    std::string reasoning;
    std::string content;
    bool thinking = false;  // this piece was (partly) reasoning or a reasoning tag
  };
  Out feed(std::string_view piece);
  // End of output: what is still held back.
  Out flush();

  // Whether the model's chat template teaches <think> (reasoning is split for its outputs).
  static bool template_thinks(std::string_view template_source);
  // Whether a rendered prompt ends inside an open <think> (trailing whitespace ignored).
  static bool prompt_opens_thinking(std::string_view prompt_tail);

 private:
  enum class State { kStart, kInside, kAfter };
  void run(Out& out, bool final);
  State state_;
  std::string held_;
  bool strip_ws_ = false;  // kAfter: drop whitespace until the first other byte
};

}  // namespace triad::server
