// The <think> splitter (reasoning.h).
#include "server/reasoning.h"

#include <algorithm>

#include "server/tool_formats.h"

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

// ---- harmony ----------------------------------------------------------------------------------

namespace triad::server {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};
constexpr size_t kMaxHeader = 512;

// The word after `key` in a header (up to whitespace or the next "<|").
std::string_view header_field(std::string_view h, std::string_view key) {
  const size_t at = h.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view v = h.substr(at + key.size());
  const size_t stop = std::min(v.find_first_of(" \t\n"), v.find("<|"));
  return v.substr(0, stop);
}

}  // namespace

bool HarmonySplitter::template_is_harmony(std::string_view src) {
  return src.find("<|channel|>") != std::string_view::npos && src.find("<|message|>") != std::string_view::npos;
}

ChannelSplitter::Out HarmonySplitter::feed(std::string_view piece) {
  Out out;
  if (state_ == State::kBody && kind_ == Kind::kReasoning) out.thinking = true;
  held_.append(piece);
  run(out, false);
  return out;
}

ChannelSplitter::Out HarmonySplitter::flush() {
  Out out;
  run(out, true);
  return out;
}

void HarmonySplitter::begin(Out& out, std::string_view header) {
  const std::string_view to = header_field(header, "to=");
  const std::string_view channel = header_field(header, "<|channel|>");
  kind_ = Kind::kContent;
  if (to.substr(0, 10) == "functions." && to.size() > 10) {
    kind_ = Kind::kCall;
    closer_ = JsonCloser();
    opened_ = closed_ = false;
    out.content += std::string(call_open_tag(true)) + "\n{\"name\": " +
                   nlohmann::json(std::string(to.substr(10))).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   ", \"arguments\": ";
  } else if (channel == "analysis" && split_reasoning_) {
    kind_ = Kind::kReasoning;
    out.thinking = true;
  }
}

void HarmonySplitter::body(Out& out, std::string_view text) {
  if (kind_ == Kind::kReasoning) {
    out.reasoning += text;
    if (!text.empty()) out.thinking = true;
    return;
  }
  if (kind_ == Kind::kContent) {
    append_unsealed(out.content, text);
    return;
  }
  // A call's arguments: its JSON value, streamed until it closes (what follows is dropped).
  size_t k = 0;
  if (closed_) return;
  if (!opened_) {
    while (k < text.size() && is_ws(text[k])) ++k;
    if (k == text.size()) return;
    opened_ = true;
  }
  const size_t start = k;
  while (k < text.size() && !closed_) closed_ = closer_.closes(text[k++]);
  append_unsealed(out.content, text.substr(start, k - start));
}

void HarmonySplitter::end(Out& out) {
  if (kind_ == Kind::kCall && closed_) out.content += "}\n" + std::string(call_close_tag(true));
  kind_ = Kind::kContent;
}

void HarmonySplitter::run(Out& out, bool final) {
  for (;;) {
    if (state_ == State::kPlain) {
      append_unsealed(out.content, held_);
      held_.clear();
      return;
    }
    if (state_ == State::kHeader) {
      // A header is looked for within the first kMaxHeader bytes, and the decision waits until a
      // marker starting there would be whole: so any split of the text decides alike.
      const size_t ws = std::find_if(held_.begin(), held_.end(), [](char c) { return !is_ws(c); }) - held_.begin();
      const std::string_view rest = std::string_view(held_).substr(ws);
      if (first_) {
        // Output that does not open like a harmony header is plain content.
        auto compatible = [&](std::string_view p) {
          const size_t n = std::min(rest.size(), p.size());
          return rest.substr(0, n) == p.substr(0, n);
        };
        if (!(compatible("<|") || compatible("to=") || compatible("assistant"))) {
          state_ = State::kPlain;
          continue;
        }
      }
      const size_t at = held_.find(kMessage);
      if (at != std::string::npos && at <= kMaxHeader) {
        begin(out, std::string_view(held_).substr(0, at));
        held_.erase(0, at + kMessage.size());
        first_ = false;
        state_ = State::kBody;
        continue;
      }
      // At the end, what follows no header is the answer's text (unless it is a header's start).
      if (held_.size() > kMaxHeader + kMessage.size() ||
          (final && !rest.empty() && (first_ || held_.find("<|") == std::string::npos))) {
        state_ = State::kPlain;  // not a header after all
        continue;
      }
      if (final) held_.clear();  // a header with no message says nothing
      return;
    }
    // kBody: up to the earliest message end.
    size_t at = std::string::npos, len = 0;
    for (std::string_view e : kEnds) {
      const size_t p = held_.find(e);
      if (p < at) {
        at = p;
        len = e == "<|start|>" ? 0 : e.size();  // <|start|> belongs to the next header
      }
    }
    if (at == std::string::npos) {
      size_t keep = 0;
      if (!final)
        for (std::string_view e : kEnds) keep = std::max(keep, partial_tag(held_, e));
      body(out, std::string_view(held_).substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      if (final) end(out);
      return;
    }
    body(out, std::string_view(held_).substr(0, at));
    held_.erase(0, at + len);
    end(out);
    state_ = State::kHeader;
  }
}

}  // namespace triad::server
