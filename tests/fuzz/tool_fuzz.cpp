// libFuzzer target for the tool-call output parser (src/server/tool_calls.h): model output is
// untrusted. The input is split at its first byte into chunk sizes; the whole text goes through
// parse_tool_output() and, chunk by chunk, through a ToolStreamSplitter. Both must find the
// same calls (a mismatch aborts: a finding), every call's arguments must be a JSON object, the
// streamed events must be well nested (begin, fragments, then end or abandon) with each ended
// call's fragments adding up to its arguments, and nothing may crash, throw, hang or allocate
// without bound. The same text also goes through the <think> reasoning splitter, whole and in
// chunks (they must agree), and through each model family's call syntax (tool_formats.h): the
// CallNormalizer must rewrite it alike whole and in chunks, the rewritten text must read as the
// same calls whole (parse_tool_output) and streamed (ToolStreamSplitter), and the harmony splitter
// must split it alike whole and in chunks.
// Also linked into tool_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/reasoning.h"
#include "server/tool_calls.h"
#include "server/tool_formats.h"

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
  auto same_split = [&](ChannelSplitter& w, ChannelSplitter& c, bool bounded) {
    ChannelSplitter::Out a = w.feed(text), af = w.flush();
    std::string reasoning, content;
    for (size_t i = 0; i < text.size(); i += step) {
      ChannelSplitter::Out o = c.feed(text.substr(i, step));
      reasoning += o.reasoning;
      content += o.content;
    }
    ChannelSplitter::Out cf = c.flush();
    if (a.reasoning + af.reasoning != reasoning + cf.reasoning || a.content + af.content != content + cf.content)
      std::abort();
    if (bounded && reasoning.size() + cf.reasoning.size() + content.size() + cf.content.size() > text.size()) std::abort();
  };
  for (bool inside : {false, true}) {
    ReasoningSplitter w(inside), c(inside);
    same_split(w, c, /*bounded=*/true);
  }
  // The families' syntaxes.
  for (ToolFormat f : {ToolFormat::kDeepSeekV31, ToolFormat::kDeepSeekR1, ToolFormat::kKimiK2, ToolFormat::kGlm45,
                       ToolFormat::kQwen3Coder}) {
    const std::string norm = normalize_calls(f, text, nullptr);
    CallNormalizer n(f, nullptr);
    ToolStreamSplitter sp(/*bare_calls=*/false, /*sealed=*/true);
    std::string chunked;
    std::vector<ToolCall> calls;
    for (size_t i = 0; i < text.size(); i += step) {
      const std::string piece = n.feed(text.substr(i, step));
      chunked += piece;
      (void)sp.feed(piece);
    }
    const std::string tail = n.flush();
    chunked += tail;
    (void)sp.feed(tail);
    (void)sp.flush();
    if (chunked != norm) std::abort();
    const ParsedOutput p = parse_tool_output(norm, false, /*sealed=*/true);
    std::vector<ToolCall> sc = sp.take_calls();
    if (sc.size() != p.calls.size()) std::abort();
    for (size_t i = 0; i < sc.size(); ++i) {
      if (sc[i].name != p.calls[i].name || sc[i].arguments != p.calls[i].arguments) std::abort();
      if (!json::parse(sc[i].arguments, nullptr, false).is_object()) std::abort();
    }
  }
  {
    HarmonySplitter w, c;  // its calls' canonical text is longer than the model's: not bounded
    same_split(w, c, /*bounded=*/false);
  }
  return 0;
}
