// Tool calling (tool_calls.h).
#include "server/tool_calls.h"

#include <set>


namespace triad::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kSealedOpen = "\x1E<tool_call>";
constexpr std::string_view kSealedClose = "</tool_call>\x1E";
constexpr int kMaxCallDepth = 64;

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\n' || s[a] == '\t' || s[a] == '\r')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\n' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return std::string(s.substr(a, b - a));
}

// Bracket depth outside strings stays within the bound (so the recursive JSON parser is safe).
bool shallow_enough(std::string_view s) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) {
        esc = false;
      } else if (c == '\\') {
        esc = true;
      } else if (c == '"') {
        in_str = false;
      }
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxCallDepth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

// One call's body (between the tags): {"name": ..., "arguments": {...}} -> a call, or false.
bool parse_call(std::string_view body, ToolCall& out) {
  const std::string t = trim(body);
  if (t.empty() || t.size() > (1u << 20) || !shallow_enough(t)) return false;
  const json j = json::parse(t, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  json args = j.contains("arguments") ? j["arguments"] : (j.contains("parameters") ? j["parameters"] : json::object());
  if (args.is_string()) {
    const std::string a = args.get<std::string>();
    if (!shallow_enough(a)) return false;
    args = json::parse(a, nullptr, false);
  }
  if (!args.is_object()) return false;
  out.name = j["name"].get<std::string>();
  // The canonical form keeps the model's own text of the arguments (what streaming sends).
  CallScanner sc;
  sc.feed(t);
  if (sc.args_done() && sc.name() == out.name && json::parse(sc.args(), nullptr, false) == args) {
    out.arguments = sc.args();
  } else {
    out.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return true;
}

}  // namespace

bool valid_tool_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

std::string_view call_open_tag(bool sealed) { return sealed ? kSealedOpen : kOpen; }
std::string_view call_close_tag(bool sealed) { return sealed ? kSealedClose : kClose; }

void append_unsealed(std::string& out, std::string_view text) {
  for (size_t at = text.find(kSeal); at != std::string_view::npos; at = text.find(kSeal)) {
    out.append(text.substr(0, at));
    out += "\xEF\xBF\xBD";
    text.remove_prefix(at + 1);
  }
  out.append(text);
}

void CallScanner::feed(std::string_view piece) {
  if (stage_ == kDone || stage_ == kFailed) return;
  buf_ += piece;
  while (step()) {
  }
}

std::string CallScanner::take_args() {
  std::string out = args_.substr(args_taken_);
  args_taken_ = args_.size();
  return out;
}

// Whether the JSON string opening at buf_[at] is closed within buf_.
bool CallScanner::name_closed(size_t at) const {
  bool esc = false;
  for (size_t k = at + 1; k < buf_.size(); ++k) {
    if (esc) esc = false;
    else if (buf_[k] == '\\') esc = true;
    else if (buf_[k] == '"') return true;
  }
  return false;
}

bool CallScanner::step() {
  auto skip_ws = [&] {
    while (pos_ < buf_.size() && (buf_[pos_] == ' ' || buf_[pos_] == '\n' || buf_[pos_] == '\t' || buf_[pos_] == '\r')) ++pos_;
    return pos_ < buf_.size();
  };
  // A literal at pos_: advances to the next stage, waits for more text, or fails.
  auto literal = [&](std::string_view l, Stage next) {
    if (!skip_ws()) return false;
    const size_t n = std::min(l.size(), buf_.size() - pos_);
    if (buf_.compare(pos_, n, l.substr(0, n)) != 0) {
      stage_ = kFailed;
      return false;
    }
    if (n < l.size()) return false;
    pos_ += l.size();
    stage_ = next;
    return true;
  };
  switch (stage_) {
    case kOpenBrace: return literal("{", kNameKey);
    case kNameKey: return literal("\"name\"", kNameColon);
    case kNameColon: return literal(":", kName);
    case kComma: return literal(",", kArgsKey);
    case kArgsKey: return literal("\"arguments\"", kArgsColon);
    case kArgsColon: return literal(":", kArgsOpen);
    case kName: {
      if (!skip_ws()) return false;
      if (buf_[pos_] != '"') {
        stage_ = kFailed;
        return false;
      }
      bool esc = false;
      for (size_t k = pos_ + 1; k < buf_.size(); ++k) {
        if (k - pos_ > 1024) break;  // no tool is named that long
        const char c = buf_[k];
        if (esc) {
          esc = false;
        } else if (c == '\\') {
          esc = true;
        } else if (c == '"') {
          const json n = json::parse(std::string_view(buf_).substr(pos_, k + 1 - pos_), nullptr, false);
          if (!n.is_string()) break;
          name_ = n.get<std::string>();
          pos_ = k + 1;
          stage_ = kComma;
          return true;
        }
      }
      if (buf_.size() - pos_ > 1024 || (buf_.size() > pos_ && stage_ == kName && name_closed(pos_))) stage_ = kFailed;
      return false;
    }
    case kArgsOpen:
      if (!skip_ws()) return false;
      if (buf_[pos_] != '{') {
        stage_ = kFailed;
        return false;
      }
      stage_ = kArgs;
      return true;
    case kArgs: {
      const size_t start = pos_;
      while (pos_ < buf_.size()) {
        if (closer_.closes(buf_[pos_++])) {
          args_.append(buf_, start, pos_ - start);
          stage_ = kDone;
          buf_.clear();
          pos_ = 0;
          return false;
        }
      }
      args_.append(buf_, start, pos_ - start);
      buf_.clear();
      pos_ = 0;
      return false;
    }
    case kDone:
    case kFailed: return false;
  }
  return false;
}

namespace {

// One function declaration ({"name", "description", "parameters", "strict"}) at `p`.
ToolSpec parse_function(const json& f, const std::string& p) {
  if (!f.contains("name") || !f["name"].is_string() || !valid_tool_name(f["name"].get<std::string>()))
    bad(p + ".name", "function names must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
  ToolSpec s;
  s.name = f["name"].get<std::string>();
  if (f.contains("description") && !f["description"].is_null()) {
    if (!f["description"].is_string()) bad(p + ".description", "'description' must be a string");
    s.description = f["description"].get<std::string>();
  }
  s.parameters = json{{"type", "object"}, {"properties", json::object()}};
  if (f.contains("parameters") && !f["parameters"].is_null()) {
    if (!f["parameters"].is_object()) bad(p + ".parameters", "'parameters' must be a JSON Schema object");
    s.parameters = f["parameters"];
  }
  s.strict = f.contains("strict") && f["strict"].is_boolean() && f["strict"].get<bool>();
  return s;
}

void add_tool(ToolRequest& t, ToolSpec s, const std::string& p) {
  for (const ToolSpec& o : t.tools)
    if (o.name == s.name) bad(p + ".name", "two tools are named '" + s.name + "'");
  t.tools.push_back(std::move(s));
}

void check_named(const ToolRequest& t, const char* param) {
  for (const ToolSpec& s : t.tools)
    if (s.name == t.named) return;
  bad(param, std::string(param) + " names '" + t.named + "', which is not in the declared functions");
}

ToolRequest parse_legacy_functions(const json& body, const json& fns) {
  ToolRequest t;
  t.legacy = true;
  t.parallel = false;  // function_call holds one call
  if (!fns.is_array()) bad("functions", "'functions' must be an array");
  if (fns.size() > 128) bad("functions", "at most 128 functions");
  for (size_t i = 0; i < fns.size(); ++i) {
    const std::string p = "functions[" + std::to_string(i) + "]";
    if (!fns[i].is_object()) bad(p, p + " must be an object");
    add_tool(t, parse_function(fns[i], p), p);
  }
  if (const json* c = field(body, "function_call")) {
    if (c->is_string() && (*c == "none" || *c == "auto")) {
      t.choice = c->get<std::string>();
    } else if (c->is_object() && c->contains("name") && (*c)["name"].is_string()) {
      t.choice = "named";
      t.named = (*c)["name"].get<std::string>();
      check_named(t, "function_call");
    } else {
      bad("function_call", "function_call must be 'none', 'auto' or {\"name\": ...}");
    }
  }
  return t;
}

}  // namespace

ToolRequest parse_tools(const json& body) {
  if (const json* fns = field(body, "functions")) {
    if (field(body, "tools") || field(body, "tool_choice"))
      bad("functions", "use either 'tools' or the deprecated 'functions', not both");
    return parse_legacy_functions(body, *fns);
  }
  if (field(body, "function_call")) bad("function_call", "'function_call' needs 'functions'");
  ToolRequest t;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "'tools' must be an array");
    if (tools->size() > 128) bad("tools", "at most 128 tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& e = (*tools)[i];
      const std::string p = "tools[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("type") || e["type"] != "function")
        bad(p + ".type", p + " must be {\"type\": \"function\", \"function\": {...}}");
      if (!e.contains("function") || !e["function"].is_object()) bad(p + ".function", p + " needs a 'function' object");
      add_tool(t, parse_function(e["function"], p + ".function"), p + ".function");
    }
  }
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_string()) {
      const std::string v = c->get<std::string>();
      if (v != "none" && v != "auto" && v != "required")
        bad("tool_choice", "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
      t.choice = v;
    } else if (c->is_object() && c->contains("function") && (*c)["function"].is_object() &&
               (*c)["function"].contains("name") && (*c)["function"]["name"].is_string()) {
      t.choice = "named";
      t.named = (*c)["function"]["name"].get<std::string>();
      check_named(t, "tool_choice");
    } else {
      bad("tool_choice", "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (t.tools.empty() && t.choice != "none" && t.choice != "auto") bad("tool_choice", "tool_choice needs 'tools'");
  }
  if (auto p = opt_bool(body, "parallel_tool_calls")) t.parallel = *p;
  return t;
}

ParsedOutput parse_tool_output(std::string_view text, bool bare, bool sealed) {
  const std::string_view open_tag = call_open_tag(sealed), close_tag = call_close_tag(sealed);
  ParsedOutput out;
  const std::string whole = trim(text);
  if (bare && !whole.empty() && whole[0] == '{') {  // a bare call object
    ToolCall call;
    if (parse_call(whole, call)) {
      out.calls.push_back(std::move(call));
      return out;
    }
  }
  std::string content;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t open = text.find(open_tag, pos);
    if (open == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    const size_t body = open + open_tag.size();
    const size_t close = text.find(close_tag, body);
    ToolCall call;
    if (close == std::string_view::npos || !parse_call(text.substr(body, close - body), call)) {
      // Not a call: keep it as text and look for a later one.
      const size_t end = close == std::string_view::npos ? text.size() : close + close_tag.size();
      content += text.substr(pos, (sealed ? open : end) - pos);  // a sealed non-call is not text
      pos = end;
      if (close == std::string_view::npos) break;
      continue;
    }
    content += text.substr(pos, open - pos);
    out.calls.push_back(std::move(call));
    pos = close + close_tag.size();
  }
  out.content = trim(content);
  return out;
}

std::string ToolStreamSplitter::feed(std::string_view piece) {
  if (mode_ == Mode::kUndecided) {
    // Leading whitespace is held until the first other character says whether the answer is a
    // bare call object ("{") or text.
    pre_ += piece;
    const size_t first = pre_.find_first_not_of(" \n\t\r");
    if (first == std::string::npos) return {};
    if (bare_calls_ && pre_[first] == '{') {
      mode_ = Mode::kBare;
      bare_ = std::move(pre_);
      pre_.clear();
      scan(bare_);
      return {};
    }
    mode_ = Mode::kText;
    std::string p = std::move(pre_);
    pre_.clear();
    return feed_text(p);
  }
  if (mode_ == Mode::kBare) {
    bare_ += piece;
    scan(piece);
    return {};
  }
  return feed_text(piece);
}

void ToolStreamSplitter::scan(std::string_view piece) {
  scanner_.feed(piece);
  if (!begun_ && scanner_.named()) {
    events_.push_back({CallEvent::kBegin, scanner_.name()});
    begun_ = true;
  }
  if (begun_) {
    std::string frag = scanner_.take_args();
    if (!frag.empty()) events_.push_back({CallEvent::kArgs, std::move(frag)});
  }
}

void ToolStreamSplitter::complete(const ToolCall& call) {
  if (begun_ && (scanner_.name() != call.name || (!scanner_.args().empty() && scanner_.args() != call.arguments))) {
    // What streamed is not this call (a key given twice): end it, and report the call whole.
    abandon();
  }
  if (!begun_) {
    events_.push_back({CallEvent::kBegin, call.name});
    events_.push_back({CallEvent::kArgs, call.arguments});
  } else if (scanner_.args().empty()) {
    events_.push_back({CallEvent::kArgs, call.arguments});  // the arguments were not an inline object
  } else if (std::string rest = scanner_.take_args(); !rest.empty()) {
    events_.push_back({CallEvent::kArgs, std::move(rest)});
  }
  events_.push_back({CallEvent::kEnd, call.arguments});
  done_.push_back(call);
  scanner_ = CallScanner();
  begun_ = false;
}

bool ToolStreamSplitter::abandon() {
  const bool was = begun_;
  if (was) events_.push_back({CallEvent::kAbandon, {}});
  scanner_ = CallScanner();
  begun_ = false;
  return was;
}

std::vector<CallEvent> ToolStreamSplitter::take_events() {
  std::vector<CallEvent> out;
  out.swap(events_);
  return out;
}

std::string ToolStreamSplitter::feed_text(std::string_view piece) {
  std::string emit = feed_raw(piece);
  if (!saw_call_) return emit;
  // After a call, whitespace (the separators between calls) is not content unless real text
  // follows it.
  ws_ += emit;
  if (ws_.find_first_not_of(" \n\t\r") == std::string::npos) return {};
  std::string out;
  out.swap(ws_);
  return out;
}

std::string ToolStreamSplitter::feed_raw(std::string_view piece) {
  std::string emit;
  std::string buf = held_ + std::string(piece);
  held_.clear();
  while (!buf.empty()) {
    if (in_call_) {
      const size_t old = call_.size();
      call_ += buf;
      buf.clear();
      const size_t close = call_.find(close_);
      scan(std::string_view(call_).substr(old, close == std::string::npos ? std::string::npos : close > old ? close - old : 0));
      if (close == std::string::npos) break;
      ToolCall c;
      if (parse_call(std::string_view(call_).substr(0, close), c)) {
        complete(c);
      } else if (!abandon() && !sealed_) {
        emit += std::string(open_) + call_.substr(0, close + close_.size());  // not a call: text
      }
      buf = call_.substr(close + close_.size());
      call_.clear();
      in_call_ = false;
      continue;
    }
    const size_t open = buf.find(open_);
    if (open != std::string::npos) {
      emit += buf.substr(0, open);
      buf = buf.substr(open + open_.size());
      in_call_ = true;
      saw_call_ = true;
      continue;
    }
    // Hold back the longest suffix that could start the open tag.
    size_t keep = 0;
    for (size_t k = std::min(buf.size(), open_.size() - 1); k > 0; --k)
      if (buf.compare(buf.size() - k, k, open_.substr(0, k)) == 0) {
        keep = k;
        break;
      }
    emit += buf.substr(0, buf.size() - keep);
    held_ = buf.substr(buf.size() - keep);
    buf.clear();
  }
  return emit;
}

std::vector<ToolCall> ToolStreamSplitter::take_calls() {
  std::vector<ToolCall> out;
  out.swap(done_);
  return out;
}

std::string ToolStreamSplitter::flush() {
  if (mode_ == Mode::kUndecided) {
    std::string out = std::move(pre_);
    pre_.clear();
    return out;
  }
  if (mode_ == Mode::kBare) {
    mode_ = Mode::kText;
    ToolCall call;
    if (parse_call(bare_, call)) {
      complete(call);
      saw_call_ = true;
      bare_.clear();
      return {};
    }
    std::string bare;
    bare.swap(bare_);
    abandon();
    std::string text = feed_text(bare);  // not a call after all: text, with any tagged calls in it
    return text + flush();
  }
  std::string out = held_;
  held_.clear();
  if (ws_.find_first_not_of(" \n\t\r") != std::string::npos) out = ws_ + out;
  ws_.clear();
  if (in_call_) {
    // An unfinished call is text, unless it streamed as a call or was sealed.
    if (!abandon() && !sealed_) out += std::string(open_) + call_;
    call_.clear();
    in_call_ = false;
  }
  return out;
}

}  // namespace triad::server
