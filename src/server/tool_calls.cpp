// Tool calling (tool_calls.h).
#include "server/tool_calls.h"

#include <set>

#include "grammar/json_schema.h"

namespace triad::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr int kMaxCallDepth = 64;

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// A GBNF literal for raw text.
std::string lit(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

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
  out.arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  return true;
}

}  // namespace

ToolRequest parse_tools(const json& body) {
  ToolRequest t;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad("tools", "'tools' must be an array");
    if (tools->size() > 128) bad("tools", "at most 128 tools");
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& e = (*tools)[i];
      const std::string p = "tools[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("type") || e["type"] != "function")
        bad(p + ".type", p + " must be {\"type\": \"function\", \"function\": {...}}");
      if (!e.contains("function") || !e["function"].is_object()) bad(p + ".function", p + " needs a 'function' object");
      const json& f = e["function"];
      if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>()))
        bad(p + ".function.name", "function names must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -");
      ToolSpec s;
      s.name = f["name"].get<std::string>();
      if (!names.insert(s.name).second) bad(p + ".function.name", "two tools are named '" + s.name + "'");
      if (f.contains("description") && !f["description"].is_null()) {
        if (!f["description"].is_string()) bad(p + ".function.description", "'description' must be a string");
        s.description = f["description"].get<std::string>();
      }
      s.parameters = json{{"type", "object"}, {"properties", json::object()}};
      if (f.contains("parameters") && !f["parameters"].is_null()) {
        if (!f["parameters"].is_object()) bad(p + ".function.parameters", "'parameters' must be a JSON Schema object");
        s.parameters = f["parameters"];
      }
      s.strict = f.contains("strict") && f["strict"].is_boolean() && f["strict"].get<bool>();
      t.tools.push_back(std::move(s));
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
      bool found = false;
      for (const ToolSpec& s : t.tools) found = found || s.name == t.named;
      if (!found) bad("tool_choice", "tool_choice names '" + t.named + "', which is not in 'tools'");
    } else {
      bad("tool_choice", "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (t.tools.empty() && t.choice != "none" && t.choice != "auto") bad("tool_choice", "tool_choice needs 'tools'");
  }
  if (auto p = opt_bool(body, "parallel_tool_calls")) t.parallel = *p;
  return t;
}

std::string tool_grammar(const ToolRequest& t) {
  std::string g;
  std::string alts;
  for (size_t i = 0; i < t.tools.size(); ++i) {
    const ToolSpec& s = t.tools[i];
    if (t.choice == "named" && s.name != t.named) continue;
    grammar::SchemaOptions o;
    o.strict = s.strict;
    o.root_name = "tc" + std::to_string(i) + "-args";
    o.prefix = "tc" + std::to_string(i) + "-";
    o.with_common = false;
    g += grammar::json_schema_to_gbnf(s.parameters, o);
    const std::string fn = "tc" + std::to_string(i) + "-fn";
    g += fn + " ::= " + lit(json(s.name).dump() + ", \"arguments\": ") + " " + o.root_name + "\n";
    alts += (alts.empty() ? "" : " | ") + fn;
  }
  g += "tc-call ::= " + lit(std::string(kOpen) + "\n{\"name\": ") + " ( " + alts + " ) " + lit("}\n" + std::string(kClose)) + "\n";
  const bool many = t.parallel && t.choice != "named";
  g += std::string("tc-calls ::= tc-call") + (many ? " ( \"\\n\" tc-call )*" : "") + "\n";
  if (t.choice == "auto") {
    // Free text that never contains "<tool_call>" (a matcher of the tag's prefixes), then calls;
    // or one bare call object, the way many models answer (an answer that opens with "{" is
    // one: free text starts with anything else).
    g += "root ::= tc-start tc-calls? | tc-bare\n";
    g += "tc-bare ::= " + lit("{\"name\": ") + " ( " + alts + " ) \"}\"\n";
    g += "tc-start ::= [^<{] tc-free0 | \"<\" tc-free1 | \"\"\n";
    g += "tc-free0 ::= [^<] tc-free0 | \"<\" tc-free1 | \"\"\n";
    for (size_t j = 1; j < kOpen.size(); ++j) {
      const char c = kOpen[j];
      std::string rule = "tc-free" + std::to_string(j) + " ::= ";
      if (j + 1 < kOpen.size()) rule += lit(std::string(1, c)) + " tc-free" + std::to_string(j + 1) + " | ";
      rule += "\"<\" tc-free1 | [^<" + std::string(1, c) + "] tc-free0 | \"\"\n";
      g += rule;
    }
  } else {
    g += "root ::= tc-calls\n";
  }
  g += grammar::json_schema_common_gbnf();
  return g;
}

std::string tool_instructions(const ToolRequest& t) {
  std::string s = "You can call these functions:\n<tools>\n";
  for (const ToolSpec& f : t.tools) {
    json d = {{"type", "function"}, {"function", {{"name", f.name}, {"description", f.description}, {"parameters", f.parameters}}}};
    s += d.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  s += "</tools>\nTo call a function, write one block per call, each a JSON object with the function's name and "
       "arguments:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call>";
  if (t.choice == "required") s += "\nYou must call at least one function.";
  if (t.choice == "named") s += "\nCall the function " + t.named + ".";
  return s;
}

ParsedOutput parse_tool_output(std::string_view text) {
  ParsedOutput out;
  const std::string whole = trim(text);
  if (!whole.empty() && whole[0] == '{') {  // a bare call object
    ToolCall call;
    if (parse_call(whole, call)) {
      out.calls.push_back(std::move(call));
      return out;
    }
  }
  std::string content;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    const size_t body = open + kOpen.size();
    const size_t close = text.find(kClose, body);
    ToolCall call;
    if (close == std::string_view::npos || !parse_call(text.substr(body, close - body), call)) {
      // Not a call: keep it as text and look for a later one.
      const size_t end = close == std::string_view::npos ? text.size() : close + kClose.size();
      content += text.substr(pos, end - pos);
      pos = end;
      if (close == std::string_view::npos) break;
      continue;
    }
    content += text.substr(pos, open - pos);
    out.calls.push_back(std::move(call));
    pos = close + kClose.size();
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
    if (pre_[first] == '{') {
      mode_ = Mode::kBare;
      bare_ = std::move(pre_);
      pre_.clear();
      return {};
    }
    mode_ = Mode::kText;
    std::string p = std::move(pre_);
    pre_.clear();
    return feed_text(p);
  }
  if (mode_ == Mode::kBare) {
    bare_ += piece;
    return {};
  }
  return feed_text(piece);
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
      call_ += buf;
      buf.clear();
      const size_t close = call_.find(kClose);
      if (close == std::string::npos) break;
      ToolCall c;
      if (parse_call(std::string_view(call_).substr(0, close), c)) {
        done_.push_back(std::move(c));
      } else {
        emit += std::string(kOpen) + call_.substr(0, close + kClose.size());  // not a call: text
      }
      buf = call_.substr(close + kClose.size());
      call_.clear();
      in_call_ = false;
      continue;
    }
    const size_t open = buf.find(kOpen);
    if (open != std::string::npos) {
      emit += buf.substr(0, open);
      buf = buf.substr(open + kOpen.size());
      in_call_ = true;
      saw_call_ = true;
      continue;
    }
    // Hold back the longest suffix that could start the open tag.
    size_t keep = 0;
    for (size_t k = std::min(buf.size(), kOpen.size() - 1); k > 0; --k)
      if (buf.compare(buf.size() - k, k, kOpen.substr(0, k)) == 0) {
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
      done_.push_back(std::move(call));
      saw_call_ = true;
      bare_.clear();
      return {};
    }
    std::string text = feed_text(bare_);  // not a call after all: text, with any tagged calls in it
    bare_.clear();
    return text + flush();
  }
  std::string out = held_;
  held_.clear();
  if (ws_.find_first_not_of(" \n\t\r") != std::string::npos) out = ws_ + out;
  ws_.clear();
  if (in_call_) {
    out += std::string(kOpen) + call_;
    call_.clear();
    in_call_ = false;
  }
  return out;
}

}  // namespace triad::server
