// The <think> splitter (reasoning.h).
#include "server/reasoning.h"

#include <algorithm>

namespace triad::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool starts_inside)
    : state_(starts_inside ? State::kInside : State::kStart) {}

bool ReasoningSplitter::template_thinks(std::string_view src) { return src.find(kOpen) != std::string_view::npos; }

bool ReasoningSplitter::prompt_opens_thinking(std::string_view tail) {
  while (!tail.empty() && is_ws(tail.back())) tail.remove_suffix(1);
  return tail.size() >= kOpen.size() && tail.substr(tail.size() - kOpen.size()) == kOpen;
}

ReasoningSplitter::Out ReasoningSplitter::feed(std::string_view piece) {
  Out out;
  if (state_ == State::kInside) out.thinking = true;
  held_.append(piece);
  run(out, false);
  return out;
}

ReasoningSplitter::Out ReasoningSplitter::flush() {
  Out out;
  run(out, true);
  return out;
}

void ReasoningSplitter::run(Out& out, bool final) {
  for (;;) {
    if (state_ == State::kStart) {
      const size_t ws = std::find_if(held_.begin(), held_.end(), [](char c) { return !is_ws(c); }) - held_.begin();
      const std::string_view rest = std::string_view(held_).substr(ws);
      if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, ws + kOpen.size());
        state_ = State::kInside;
        out.thinking = true;
        continue;
      }
      if (!final && (rest.empty() || kOpen.substr(0, rest.size()) == rest)) return;  // may still open
      state_ = State::kAfter;
      continue;
    }
    if (state_ == State::kInside) {
      const size_t at = held_.find(kClose);
      if (at != std::string::npos) {
        out.reasoning += held_.substr(0, at);
        held_.erase(0, at + kClose.size());
        state_ = State::kAfter;
        strip_ws_ = true;
        out.thinking = true;
        continue;
      }
      const size_t keep = final ? 0 : partial_tag(held_, kClose);
      out.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      if (!out.reasoning.empty()) out.thinking = true;
      return;
    }
    // kAfter: content, without the whitespace that follows </think>.
    if (strip_ws_) {
      const size_t ws = std::find_if(held_.begin(), held_.end(), [](char c) { return !is_ws(c); }) - held_.begin();
      held_.erase(0, ws);
      if (!held_.empty()) strip_ws_ = false;
    }
    out.content += held_;
    held_.clear();
    return;
  }
}

}  // namespace triad::server
