// libFuzzer target for the tool-call output parser (src/server/tool_calls.h): model output is
// untrusted. The input is split at its first byte into chunk sizes; the whole text goes through
// parse_tool_output() and, chunk by chunk, through a ToolStreamSplitter. Both must find the
// same calls (a mismatch aborts: a finding), every call's arguments must be a JSON object, the
// streamed events must be well nested (begin, fragments, then end or abandon) with each ended
// call's fragments adding up to its arguments, and nothing may crash, throw, hang or allocate
// without bound. The same text also goes through the <think> reasoning splitter, whole and in
// chunks (they must agree).
// Also linked into tool_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/reasoning.h"
#include "server/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace triad::server;
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 7;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ParsedOutput whole = parse_tool_output(text);
  ToolStreamSplitter s;
  std::vector<ToolCall> streamed;
  std::vector<ToolCall> ended;   // from the events
  bool open = false;
  std::string args;
  auto events = [&] {
    for (const CallEvent& e : s.take_events()) {
      switch (e.kind) {
        case CallEvent::kBegin:
          if (open) std::abort();
          open = true;
          args.clear();
          ended.push_back({e.text, ""});
          break;
        case CallEvent::kArgs:
          if (!open) std::abort();
          args += e.text;
          break;
        case CallEvent::kEnd:
          if (!open || args != e.text) std::abort();
          ended.back().arguments = e.text;
          open = false;
          break;
        case CallEvent::kAbandon:
          if (!open) std::abort();
          ended.pop_back();
          open = false;
          break;
      }
    }
  };
  for (size_t i = 0; i < text.size(); i += step) {
    (void)s.feed(text.substr(i, step));
    for (ToolCall& c : s.take_calls()) streamed.push_back(std::move(c));
    events();
  }
  (void)s.flush();
  for (ToolCall& c : s.take_calls()) streamed.push_back(std::move(c));
  events();
  if (open || ended.size() != streamed.size()) std::abort();
  for (size_t i = 0; i < ended.size(); ++i)
    if (ended[i].name != streamed[i].name || ended[i].arguments != streamed[i].arguments) std::abort();
  if (streamed.size() != whole.calls.size()) std::abort();
  for (size_t i = 0; i < streamed.size(); ++i) {
    if (streamed[i].name != whole.calls[i].name || streamed[i].arguments != whole.calls[i].arguments) std::abort();
    const json a = json::parse(streamed[i].arguments, nullptr, false);
    if (!a.is_object()) std::abort();
  }
  // The reasoning splitter (server/reasoning.h) on the same text, starting outside and inside
  // the reasoning: chunk by chunk it must split exactly as the whole text does, and lose or add
  // no byte beyond the tags and the whitespace after "</think>".
  for (bool inside : {false, true}) {
    ReasoningSplitter w(inside), c(inside);
    ReasoningSplitter::Out a = w.feed(text), af = w.flush();
    std::string reasoning, content;
    for (size_t i = 0; i < text.size(); i += step) {
      ReasoningSplitter::Out o = c.feed(text.substr(i, step));
      reasoning += o.reasoning;
      content += o.content;
    }
    ReasoningSplitter::Out cf = c.flush();
    if (a.reasoning + af.reasoning != reasoning + cf.reasoning || a.content + af.content != content + cf.content)
      std::abort();
    if (reasoning.size() + cf.reasoning.size() + content.size() + cf.content.size() > text.size()) std::abort();
  }
  return 0;
}
