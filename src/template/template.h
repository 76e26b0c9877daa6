// A Jinja2 template engine for chat templates (tokenizer.chat_template in GGUF files).
//
// Covers the language the published chat templates use, with the semantics of Python's jinja2
// as Hugging Face transformers configures it (an immutable sandbox with trim_blocks and
// lstrip_blocks, `raise_exception`, `strftime_now` and a `tojson` that keeps non-ASCII text):
//   - text, {{ expressions }}, {% statements %}, {# comments #}, whitespace control (-, +);
//   - if / elif / else, for (tuple targets, `if` filters, else, loop.*, break / continue),
//     set (names, tuples, namespace attributes, block set), macro (defaults, keyword args),
//     filter blocks, and the `generation` tag (rendered as plain content);
//   - literals (strings, numbers, lists, dicts, tuples, true/false/none), arithmetic, string
//     concatenation (~), comparisons, `in`, `not`, `and`, `or`, conditional expressions,
//     attribute and item access, slices, calls, filters and tests;
//   - the filters, tests, string / dict methods and globals listed in builtins.cpp.
// Undefined values behave like jinja2's default Undefined: they print as nothing, are false,
// iterate as empty, and raise when their attributes are read or when they are called.
//
// Untrusted input: a template (from a GGUF file or --chat-template-file) and the messages of a
// request. Every failure is a TemplateError with a message (HTTP 400 for the server), never a
// crash: parse nesting, macro recursion, output size and evaluation steps are bounded.
// Thread-safety: a parsed Template is immutable; render() may run on several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "template/value.h"

namespace triad::tmpl {

struct Limits {
  size_t max_source_bytes = 1 << 20;     // template text
  int max_nesting = 128;                 // statement / expression nesting while parsing
  int max_call_depth = 64;               // macro calls within macro calls
  size_t max_output_bytes = 8u << 20;    // rendered text (also any intermediate string)
  uint64_t max_steps = 2'000'000;        // evaluated nodes and loop iterations (real chat
                                         // templates take thousands; this stops runaway
                                         // loops in well under a second)
};

struct Node;

class Template {
 public:
  // Parses `source`; throws TemplateError naming the line of a syntax error.
  explicit Template(std::string_view source, Limits limits = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `context` (a JSON object: messages, tools, add_generation_prompt, bos_token,
  // ...) as the global variables. Throws TemplateError.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const Node> root_;
  Limits limits_;
};

}  // namespace triad::tmpl
