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
//
// gpt-oss writes its answer in harmony channels instead (HarmonySplitter): messages of the form
//   [<|start|>assistant][ to=RECIPIENT]<|channel|>CHANNEL[ json|<|constrain|>json]<|message|>BODY<|end|>
// (a message ends at <|end|>, <|call|>, <|return|> or the next <|start|>). The analysis channel is
// reasoning; final (and commentary without a recipient, a preamble) is content; a message to
// functions.NAME is a tool call, written into the content as a sealed canonical call
// (tool_calls.h) with its body as the arguments, streamed as it arrives, and closed only when
// the body is a whole JSON value. Output that does not open with a harmony header is content.
//
// Model output is untrusted: any bytes are accepted; nothing throws.
// Thread-safety: one splitter per choice, used by one thread at a time.
#pragma once

#include <string>
#include <string_view>

#include "server/tool_calls.h"

namespace triad::server {

// What the reasoning splitters share: text in, reasoning and content out.
class ChannelSplitter {
 public:
  virtual ~ChannelSplitter() = default;
  struct Out {
    std::string reasoning;
    std::string content;
    bool thinking = false;  // this piece was (partly) reasoning or a reasoning tag
  };
  virtual Out feed(std::string_view piece) = 0;
  // End of output: what is still held back.
  virtual Out flush() = 0;
};

class ReasoningSplitter : public ChannelSplitter {
 public:
  explicit ReasoningSplitter(bool starts_inside);

  Out feed(std::string_view piece) override;
  Out flush() override;

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

class HarmonySplitter : public ChannelSplitter {
 public:
  // split_reasoning false (--reasoning-format none): the analysis is content too (calls are still
  // read: harmony is how the model writes them).
  explicit HarmonySplitter(bool split_reasoning = true) : split_reasoning_(split_reasoning) {}
  Out feed(std::string_view piece) override;
  Out flush() override;
  // Whether a chat template writes harmony messages (gpt-oss).
  static bool template_is_harmony(std::string_view template_source);

 private:
  enum class State { kHeader, kBody, kPlain };
  enum class Kind { kReasoning, kContent, kCall };
  void run(Out& out, bool final);
  void begin(Out& out, std::string_view header);
  void body(Out& out, std::string_view text);
  void end(Out& out);
  bool split_reasoning_;
  State state_ = State::kHeader;
  Kind kind_ = Kind::kContent;
  bool first_ = true;  // before the first message's header has been read
  std::string held_;
  JsonCloser closer_;  // kCall: where the body's JSON closes
  bool opened_ = false, closed_ = false;
};

}  // namespace triad::server
