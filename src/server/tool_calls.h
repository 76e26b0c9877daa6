// Tool calling for /v1/chat/completions: the request's `tools`, `tool_choice` and
// `parallel_tool_calls`, and the parser that turns a model's output back into OpenAI `tool_calls`
// (the grammar that makes calls well-formed, and the other families' syntaxes, are in
// tool_formats.h).
//
// The parser reads the canonical call form, the one Qwen 2.5/3 and Hermes-style templates teach
// their models and the one the other families' calls are rewritten into (CallNormalizer):
//   <tool_call>
//   {"name": "NAME", "arguments": {...}}
//   </tool_call>
// Many models (Llama 3, small Qwen coders) answer with a bare {"name": ..., "arguments": ...}
// object instead: with `bare` calls on (the canonical format), an answer that opens with "{" is
// read as one call.
//
// Sealed calls: the rewriters (CallNormalizer, HarmonySplitter) write the calls they read in the
// canonical form between sealed tags, the canonical tags with the ASCII record separator outside
// them, and replace that byte in the model's own text (with U+FFFD), so that text a model of
// another family writes in the canonical form is never taken for a call. Reading sealed output,
// a sealed call that does not parse, or never closes, is neither a call nor text (the model
// never wrote that text).
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

// Where a JSON value written piece by piece closes: fed one byte at a time, it says when a byte
// closes the outermost bracket (brackets inside strings, and escaped quotes, do not count).
class JsonCloser {
 public:
  bool closes(char c) {
    if (in_str_) {
      if (esc_) esc_ = false;
      else if (c == '\\') esc_ = true;
      else if (c == '"') in_str_ = false;
    } else if (c == '"') {
      in_str_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      return --depth_ == 0;
    }
    return false;
  }

 private:
  int depth_ = 0;
  bool in_str_ = false, esc_ = false;
};

// A function name OpenAI accepts: 1 to 64 of a-z, A-Z, 0-9, _ and -.
bool valid_tool_name(std::string_view n);

inline constexpr char kSeal = '\x1E';
std::string_view call_open_tag(bool sealed);   // "<tool_call>", sealed "\x1E<tool_call>"
std::string_view call_close_tag(bool sealed);  // "</tool_call>", sealed "</tool_call>\x1E"
// Appends model text with the seal byte replaced by U+FFFD.
void append_unsealed(std::string& out, std::string_view text);

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
  JsonCloser closer_;
};

struct ParsedOutput {
  std::string content;          // text outside calls (trimmed)
  std::vector<ToolCall> calls;  // complete, well-formed calls in order
};

// Splits a finished completion into text and calls. bare: an answer that is one
// {"name": ..., "arguments": ...} object is a call (the canonical format's models do that).
// sealed: the text is a rewriter's output (calls between sealed tags).
ParsedOutput parse_tool_output(std::string_view text, bool bare = true, bool sealed = false);

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
  explicit ToolStreamSplitter(bool bare_calls = true, bool sealed = false)
      : bare_calls_(bare_calls), sealed_(sealed), open_(call_open_tag(sealed)), close_(call_close_tag(sealed)) {}
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
  bool bare_calls_;       // an answer opening with "{" may be a bare call object
  bool sealed_;           // reads a rewriter's output: calls between sealed tags
  std::string_view open_, close_;
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
