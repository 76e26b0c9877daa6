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
  bool active() const { return !tools.empty() && choice != "none"; }
};

// Reads tools / tool_choice / parallel_tool_calls; throws ApiError (400) on bad ones.
ToolRequest parse_tools(const json& body);

// GBNF for the request's calls (requires active()); parameter schemas are compiled under their
// `strict` flag. Throws grammar::GrammarError on a schema it cannot compile.
std::string tool_grammar(const ToolRequest& t);

// Instructions describing the tools and the call format, for models whose chat template does
// not render tools itself.
std::string tool_instructions(const ToolRequest& t);

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text
};

struct ParsedOutput {
  std::string content;          // text outside calls (trimmed)
  std::vector<ToolCall> calls;  // complete, well-formed calls in order
};

// Splits a finished completion into text and calls.
ParsedOutput parse_tool_output(std::string_view text);

// Streaming: feed() returns the text that is certainly content (holding back a possible start
// of "<tool_call>"); once a call opens, text goes to the call buffer and each completed call is
// returned by take_calls().
class ToolStreamSplitter {
 public:
  std::string feed(std::string_view piece);
  std::vector<ToolCall> take_calls();
  // End of stream: held-back text that turned out not to start a call; an unfinished call is
  // returned as text too (it cannot be a call).
  std::string flush();
  bool saw_call() const { return saw_call_; }

 private:
  enum class Mode { kUndecided, kBare, kText };
  std::string feed_text(std::string_view piece);
  std::string feed_raw(std::string_view piece);
  Mode mode_ = Mode::kUndecided;
  std::string pre_;      // leading whitespace while undecided
  std::string bare_;     // a possible bare call object (the answer opened with "{")
  std::string held_;     // possible prefix of the open tag (content mode)
  std::string ws_;       // whitespace after a call, not yet known to be content
  std::string call_;     // inside a call: text since the open tag
  bool in_call_ = false;
  bool saw_call_ = false;
  std::vector<ToolCall> done_;
};

}  // namespace triad::server
