// libFuzzer target for the chat-template engine: parses the input as a template and renders it
// with a fixed chat context (system / user / assistant turns, a tool call and its result, a
// tool list), the way the server renders a request. When the input holds a NUL byte, the text
// after it is parsed as a JSON context instead (falling back to the fixed one when it is not
// an object). A TemplateError is the expected outcome for bad input; a crash, a sanitizer
// report, another exception type, a hang or a huge allocation is a finding.
// Also linked into template_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
// Thread-safety: stateless; libFuzzer calls it from one thread.
#include <cstddef>
#include <cstdint>
#include <string>

#include "template/template.h"

namespace {

const nlohmann::ordered_json& default_context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in Paris? \u00e9\u4f60"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"t\": 21}"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source = input.substr(0, nul);
  nlohmann::ordered_json ctx = default_context();
  if (nul != std::string::npos) {
    auto parsed = nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) ctx = std::move(parsed);
  }
  triad::tmpl::Limits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  try {
    const triad::tmpl::Template t(source, limits);
    const std::string out = t.render(ctx);
    (void)out;
  } catch (const triad::tmpl::TemplateError&) {
  }
  return 0;
}
