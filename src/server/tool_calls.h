// Tool calling for /v1/chat/completions: the request's `tools`, `tool_choice` and
// `parallel_tool_calls`; the grammar that makes a model's calls well-formed; and the parser that
// turns its output back into OpenAI `tool_calls`.
//
// The call format is the one Qwen 2.5/3 and Hermes-style templates teach their models, and the
// one the system instructions we add for other models describe:
//   <tool_call>
//   {"name": "NAME", "arguments": {...}}
//   </tool_call>
// Under tool_choice `auto`, free text may come first (text that never contains "<tool_call>"),
// and once the model opens a call the grammar holds it to a declared tool name and that tool's
// parameter schema (json_schema.h). Many models (Llama 3, small Qwen coders) answer with a bare
// {"name": ..., "arguments": ...} object instead: under `auto` an answer that opens with "{" is
// held to that form, and the parser reads it as one call; `required` and a named tool force calls from the first
// token; `parallel_tool_calls: false` allows one call. After the calls only end-of-generation is
// allowed.
//
// Model output is untrusted: the parser accepts any bytes and never throws; what does not parse
// as a call stays text.
// Thread-safety: free functions are stateless; a ToolStreamSplitter belongs to one stream.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/openai_request.h"

namespace triad::server {

struct ToolSpec {
  std::string name;
  std::string description;
  json parameters;  // a JSON Schema (an empty object schema when the request gave none)
  bool strict = false;  // function.strict: unknown formats in `parameters` are errors
};

struct ToolRequest {
  std::vector<ToolSpec> tools;  // empty: no tools
  std::string choice = "auto";  // "none" | "auto" | "required" | "named"
  std::string named;            // the forced function with choice "named"
  bool parallel = true;
  bool legacy = false;          // given as the deprecated functions / function_call
  bool active() const { return !tools.empty() && choice != "none"; }
};

// Reads tools / tool_choice / parallel_tool_calls, or the deprecated functions / function_call
// (one call at most, answered as message.function_call); throws ApiError (400) on bad ones.
ToolRequest parse_tools(const json& body);

// GBNF for the request's calls (requires active()); parameter schemas are compiled under their
// `strict` flag, and `dropped` (when given) receives the keywords non-strict ones had to drop.
// Throws grammar::GrammarError on a schema it cannot compile.
std::string tool_grammar(const ToolRequest& t, std::vector<std::string>* dropped = nullptr);

// Instructions describing the tools and the call format, for models whose chat template does
// not render tools itself.
std::string tool_instructions(const ToolRequest& t);

struct ToolCall {
  std::string name;
  // JSON text: the model's own text of the arguments object when the call has the canonical
  // form {"name": ..., "arguments": {...}} (so streamed fragments add up to it), else the
  // object re-serialized.
  std::string arguments;
};

// Reads one call's text as it grows, when it has the canonical form the tool grammar writes,
// {"name": "NAME", "arguments": {...}} (whitespace allowed between tokens): the name as soon as
// its string is closed, then the arguments object's text byte by byte as it arrives. Text of
// another form sets failed() (the call can then only be reported whole, once it is complete).
class CallScanner {
 public:
  void feed(std::string_view piece);
  bool failed() const { return stage_ == kFailed; }
  bool named() const { return stage_ > kName && stage_ != kFailed; }
  bool args_done() const { return stage_ == kDone; }
  const std::string& name() const { return name_; }
  const std::string& args() const { return args_; }  // the arguments' text so far
  // Argument text that arrived since the last call.
  std::string take_args();

 private:
  enum Stage { kOpenBrace, kNameKey, kNameColon, kName, kComma, kArgsKey, kArgsColon, kArgsOpen, kArgs, kDone, kFailed };
  bool name_closed(size_t at) const;
  bool step();  // one stage forward over buf_; false when more text is needed or it failed
  std::string buf_;
  size_t pos_ = 0;
  Stage stage_ = kOpenBrace;
  std::string name_, args_;
  size_t args_taken_ = 0;
  int depth_ = 0;
  bool in_str_ = false, esc_ = false;
};

struct ParsedOutput {
  std::string content;          // text outside calls (trimmed)
  std::vector<ToolCall> calls;  // complete, well-formed calls in order
};

// Splits a finished completion into text and calls.
ParsedOutput parse_tool_output(std::string_view text);

// What a streamed call does, in order per call: kBegin (its name is known), kArgs (fragments of
// the arguments' text, which add up to the finished call's `arguments`), then kEnd (the call is
// complete and well-formed: also returned by take_calls()) or kAbandon (the text stopped being a
// call, or the stream ended inside it; a call that streamed no kBegin is simply text).
struct CallEvent {
  enum Kind { kBegin, kArgs, kEnd, kAbandon } kind;
  std::string text;  // kBegin: the name; kArgs: the fragment; kEnd: the arguments
};

// Streaming: feed() returns the text that is certainly content (holding back a possible start
// of "<tool_call>"); once a call opens, text goes to the call buffer, its progress is reported
// by take_events() as it is generated, and each completed call is returned by take_calls().
// The text of a tagged call that began streaming and was then abandoned is not returned as
// content (it was shown as a call).
class ToolStreamSplitter {
 public:
  std::string feed(std::string_view piece);
  std::vector<ToolCall> take_calls();
  std::vector<CallEvent> take_events();
  // End of stream: held-back text that turned out not to start a call; an unfinished call is
  // returned as text too (it cannot be a call).
  std::string flush();
  bool saw_call() const { return saw_call_; }

 private:
  enum class Mode { kUndecided, kBare, kText };
  std::string feed_text(std::string_view piece);
  std::string feed_raw(std::string_view piece);
  void scan(std::string_view piece);      // feeds the current call's scanner, queueing events
  void complete(const ToolCall& call);    // the current call ended well-formed
  bool abandon();                         // it did not: true when it had begun streaming
  Mode mode_ = Mode::kUndecided;
  std::string pre_;      // leading whitespace while undecided
  std::string bare_;     // a possible bare call object (the answer opened with "{")
  std::string held_;     // possible prefix of the open tag (content mode)
  std::string ws_;       // whitespace after a call, not yet known to be content
  std::string call_;     // inside a call: text since the open tag
  bool in_call_ = false;
  bool saw_call_ = false;
  std::vector<ToolCall> done_;
  CallScanner scanner_;                   // the current call (tagged or bare)
  bool begun_ = false;                    // kBegin was queued for the current call
  std::vector<CallEvent> events_;
};

}  // namespace triad::server
