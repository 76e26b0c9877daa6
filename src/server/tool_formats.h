// The tool-call syntaxes that model families are trained on. A chat template teaches its model
// one of them; the server detects which from the template's text (detect_tool_format), holds the
// model's calls to it (tool_grammar, tool_calls.h), describes it to models whose template does not
// list tools (tool_instructions), and rewrites what the model writes into the canonical form
//   <tool_call>
//   {"name": "NAME", "arguments": {...}}
//   </tool_call>
// as it streams (CallNormalizer), so that one parser (ToolStreamSplitter, parse_tool_output)
// reads every family. The syntaxes, as their templates render an assistant's calls:
//   kHermes      the canonical form (Qwen 2.5/3, QwQ, Hermes; and our default)
//   kDeepSeekV31 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//                (DeepSeek V3.1, V3.2)
//   kDeepSeekR1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{ARGS}\n```<｜tool▁call▁end｜>
//                (DeepSeek V3 / R1 and their distills), calls separated by "\n"
//   kKimiK2      <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{ARGS}<|tool_call_end|>...<|tool_calls_section_end|>
//   kGlm45       <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n...</tool_call>
//                (GLM 4.5 / 4.6; a string value is written raw, any other as JSON)
//   kQwen3Coder  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//   kHarmony     gpt-oss: <|channel|>analysis<|message|>...<|end|><|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{ARGS}
//                (then <|call|>, which ends the generation). Its channels are split by
//                HarmonySplitter (reasoning.h), which writes calls in the canonical form itself.
// Model output is untrusted: the normalizer accepts any bytes and never throws; what does not
// read as a call passes through as text.
// Thread-safety: free functions are stateless; a CallNormalizer belongs to one stream.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/openai_request.h"
#include "server/tool_calls.h"

namespace triad::server {

enum class ToolFormat { kHermes, kDeepSeekV31, kDeepSeekR1, kKimiK2, kGlm45, kQwen3Coder, kHarmony };

// The syntax a chat template teaches (kHermes when it shows none of the others).
ToolFormat detect_tool_format(std::string_view template_source);
const char* tool_format_name(ToolFormat f);

// The marker texts of format f's calls (and "<think>" / "</think>"): a model's vocabulary may
// hold them as control tokens (llama.cpp's converter makes <｜...｜> and <|...|> tokens control),
// which the output must then render and grammars allow (ServedModel::rendered_tokens).
std::vector<std::string_view> tool_format_markers(ToolFormat f);

// The text whose appearance opens the calls (free text under tool_choice "auto" never contains it).
std::string_view tool_trigger(ToolFormat f);

// One call in the canonical form (its arguments given as JSON text), sealed or not (tool_calls.h).
std::string canonical_call(std::string_view name, std::string_view arguments, bool sealed);

// GBNF for the request's calls in format f (requires t.active()). Parameter schemas are compiled
// under their `strict` flag, and `dropped` (when given) receives the keywords non-strict ones had
// to drop. Under tool_choice "auto" free text (never containing tool_trigger(f)) may come first,
// then calls; "required" and a named tool force calls from the first token (kHarmony: after an
// optional analysis message); `parallel_tool_calls: false` allows one call. After the calls only
// end-of-generation is allowed. Throws grammar::GrammarError on a schema it cannot compile.
std::string tool_grammar(const ToolRequest& t, ToolFormat f, std::vector<std::string>* dropped = nullptr);

// Instructions describing the tools and format f's call syntax, for models whose chat template
// does not render the tools itself.
std::string tool_instructions(const ToolRequest& t, ToolFormat f);

// Streaming rewrite of a format's calls into the canonical form, sealed (tool_calls.h: read the
// output with sealed = true); text outside calls passes through, unsealed (the markers that wrap
// a run of calls are dropped; a call marker outside them is text). Calls whose arguments are JSON in
// the model's syntax stream their arguments as they arrive; XML-style calls (kGlm45,
// kQwen3Coder) are rewritten when they close, their values typed by the tool's parameter schema
// (a property declared "string" stays text; otherwise a value that parses as JSON is JSON).
// Feeding the text in any split gives the same output as feeding it whole. kHermes and kHarmony
// pass text through unchanged.
class CallNormalizer {
 public:
  CallNormalizer(ToolFormat f, const ToolRequest* tools);
  std::string feed(std::string_view piece);
  // End of output: held-back text. A call the output ended inside (cut off by max_tokens) is
  // not text: its canonical text stays unfinished (the parser drops it: parse_tool_output with
  // drop_unfinished, or the splitter abandons it), or, still in its header or an XML body, is
  // dropped.
  std::string flush();

 private:
  enum class State { kText, kHeader, kArgs, kTrailer, kXmlBody };
  void run(std::string& out, bool final);
  ToolFormat f_;
  const ToolRequest* tools_;
  State state_ = State::kText;
  std::string buf_;
  std::string raw_;  // kHeader / kXmlBody: the call's raw text from its open marker
  size_t xml_pos_ = 0;      // kXmlBody: where scanning raw_ resumes
  bool in_value_ = false;   // kXmlBody: scanning is inside a value
  bool in_section_ = false; // between a section's open and close markers
  JsonCloser closer_;      // kArgs: where the arguments' JSON closes
  bool args_open_ = false;
};

// Whole-text form of CallNormalizer.
std::string normalize_calls(ToolFormat f, std::string_view text, const ToolRequest* tools);

}  // namespace triad::server
