// How an answer is written, apart from the request's life: the request in flight (job.cpp) runs
// the engine requests, decodes, applies stop strings and splits tool calls, and reports what
// happened to an Encoder, which writes one wire format (chat.completion, text_completion, or
// the Responses API's response object and events). Encoders never see the engine.
//
// Order of calls, for a streamed request: start(); then per choice any number of text() and
// call_begin() / call_args()... / call_end() groups, then choice_end(); finally exactly one of
// done() or failed(). A request that is not streamed gets only done() or failed(), with every
// choice complete.
// Thread-safety: an Encoder belongs to one request; its calls are serialized by the request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace triad::server {

struct ServedModel;

struct CallOut {
  std::string id;          // call_...
  std::string name;
  std::string arguments;   // JSON text (streaming: what has arrived so far)
  bool complete = true;    // false: the output ended inside the call (or it was malformed)
};

struct ChoiceOut {
  std::string text;                // the generated text after stop strings (tool-call markup included)
  std::string content;             // the text outside tool calls (the text, without tools)
  std::vector<CallOut> calls;      // complete calls (and, streamed, ones cut off)
  json logprobs = json::array();   // one entry per generated token, when requested
  std::string finish;              // "stop", "length" or "tool_calls"
  int32_t completion_tokens = 0;
  std::string reasoning;           // thinking models: the <think> part, apart from content
  int32_t reasoning_tokens = 0;    // the tokens that produced it (and its tags)
  // When prompt logprobs were asked for: one entry per prompt token, {"id", "token", "logprob",
  // "rank", "top": [{"id", "token", "logprob"}...], "offset" (in the decoded prompt)}, the first
  // with null logprob and top.
  json prompt_logprobs;
};

struct UsageOut {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t reasoning_tokens = 0;
  // Speculative decoding: draft tokens the model confirmed and those it did not (OpenAI's
  // Predicted Outputs fields; every draft counts, from a `prediction` or the prompt lookup).
  int32_t accepted_prediction_tokens = 0;
  int32_t rejected_prediction_tokens = 0;
};

class Encoder {
 public:
  virtual ~Encoder() = default;
  virtual void start() {}
  // A piece of content text (possibly empty) after one token; `logprob` is that token's entry
  // when logprobs were requested; `first_token` marks the choice's first token.
  virtual void text(size_t /*choice*/, const std::string& /*piece*/, const json* /*logprob*/, bool /*first_token*/) {}
  // A piece of reasoning text (thinking models, chat only).
  virtual void reasoning(size_t /*choice*/, const std::string& /*piece*/, bool /*first_token*/) {}
  virtual void call_begin(size_t /*choice*/, size_t /*k*/, const CallOut& /*call*/) {}
  virtual void call_args(size_t /*choice*/, size_t /*k*/, const std::string& /*fragment*/) {}
  virtual void call_end(size_t /*choice*/, size_t /*k*/, const CallOut& /*call*/) {}
  virtual void choice_end(size_t /*choice*/, const ChoiceOut& /*out*/) {}
  virtual void done(const std::vector<ChoiceOut>& choices, const UsageOut& usage) = 0;
  virtual void failed(const ApiError& e) = 0;
};

// chat.completion / chat.completion.chunk. `legacy_functions`: the request used the deprecated
// `functions` field, so a call is written as message.function_call with finish_reason
// "function_call".
std::unique_ptr<Encoder> make_chat_encoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model, const GenOptions& opt,
                                           bool legacy_functions);
// text_completion; `echo_text[p]` is prompt p's text, written before its choices' text with echo.
std::unique_ptr<Encoder> make_completion_encoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model,
                                                 const GenOptions& opt, std::vector<std::string> echo_text);

// Server-sent events: `data: {json}\n\n` (with an `event:` line when `event` is not empty).
void write_event(ResponseWriter& w, const json& j, const std::string& event = "");

}  // namespace triad::server
