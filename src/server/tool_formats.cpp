// Tool-call syntaxes of model families (tool_formats.h).
#include "server/tool_formats.h"

#include <algorithm>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "server/tool_calls.h"

namespace triad::server {
namespace {

// The markers of the formats whose calls are rewritten (none for kHermes / kHarmony).
struct Markers {
  std::string_view section_open, section_close;  // wrap a run of calls (dropped); may be empty
  std::string_view open, close;                  // one call
  std::string_view args_begin;                   // JSON formats: ends the header (name) before {ARGS}
  bool xml = false;                              // kGlm45 / kQwen3Coder: the body is read whole at close
};

constexpr std::string_view kDsSectionOpen = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>";
constexpr std::string_view kDsSectionClose = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>";
constexpr std::string_view kDsOpen = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>";
constexpr std::string_view kDsClose = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>";
constexpr std::string_view kDsSep = "<\xEF\xBD\x9Ctool\xE2\x96\x81sep\xEF\xBD\x9C>";
constexpr std::string_view kKimiSectionOpen = "<|tool_calls_section_begin|>";
constexpr std::string_view kKimiSectionClose = "<|tool_calls_section_end|>";
constexpr std::string_view kKimiOpen = "<|tool_call_begin|>";
constexpr std::string_view kKimiClose = "<|tool_call_end|>";
constexpr std::string_view kKimiArgs = "<|tool_call_argument_begin|>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

Markers markers(ToolFormat f) {
  switch (f) {
    case ToolFormat::kDeepSeekV31: return {kDsSectionOpen, kDsSectionClose, kDsOpen, kDsClose, kDsSep, false};
    case ToolFormat::kDeepSeekR1: return {kDsSectionOpen, kDsSectionClose, kDsOpen, kDsClose, "```json", false};
    case ToolFormat::kKimiK2: return {kKimiSectionOpen, kKimiSectionClose, kKimiOpen, kKimiClose, kKimiArgs, false};
    case ToolFormat::kGlm45:
    case ToolFormat::kQwen3Coder: return {{}, {}, kCallOpen, kCallClose, {}, true};
    case ToolFormat::kHermes:
    case ToolFormat::kHarmony: break;
  }
  return {};
}

constexpr size_t kMaxHeader = 1024;    // a call's text before its arguments
constexpr size_t kMaxTrailer = 256;    // after its arguments, before its close marker
constexpr size_t kMaxXmlCall = 1 << 20;

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

// The function name in a JSON format's header (the text between the open marker and args_begin).
std::string header_name(ToolFormat f, std::string_view h) {
  h = trim(h);
  if (f == ToolFormat::kDeepSeekR1) {  // function<｜tool▁sep｜>NAME\n
    const size_t sep = h.find(kDsSep);
    if (sep == std::string_view::npos || trim(h.substr(0, sep)) != "function") return {};
    h = trim(h.substr(sep + kDsSep.size()));
  } else if (f == ToolFormat::kKimiK2) {  // functions.NAME:IDX
    if (h.substr(0, 10) == "functions.") h.remove_prefix(10);
    const size_t colon = h.rfind(':');
    if (colon != std::string_view::npos &&
        std::all_of(h.begin() + static_cast<std::ptrdiff_t>(colon) + 1, h.end(), [](char c) { return c >= '0' && c <= '9'; }))
      h = h.substr(0, colon);
  }
  return valid_tool_name(h) ? std::string(h) : std::string();
}

// Length of the longest suffix of s that is a proper prefix of one of the markers.
size_t partial_marker(std::string_view s, std::initializer_list<std::string_view> ms) {
  size_t best = 0;
  for (std::string_view m : ms) {
    if (m.empty()) continue;
    for (size_t n = std::min(s.size(), m.size() - 1); n > best; --n)
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        best = n;
        break;
      }
  }
  return best;
}

const ToolSpec* find_tool(const ToolRequest* t, std::string_view name) {
  if (!t) return nullptr;
  for (const ToolSpec& s : t->tools)
    if (s.name == name) return &s;
  return nullptr;
}

// Whether a parameter's schema says its value is text (written raw by the XML formats).
bool string_typed(const json& s) {
  if (!s.is_object()) return false;
  if (s.contains("type") && s["type"] == "string") return true;
  if (s.contains("const")) return s["const"].is_string();
  if (s.contains("enum") && s["enum"].is_array() && !s["enum"].empty())
    return std::all_of(s["enum"].begin(), s["enum"].end(), [](const json& v) { return v.is_string(); });
  return false;
}

// An XML-style value as JSON: text for string-typed parameters (and for values that are not
// JSON), else the value parsed (Python's True/False/None as the Qwen3-Coder template writes them).
json xml_value(const ToolSpec* spec, const std::string& key, std::string_view raw) {
  const json* schema = nullptr;
  if (spec && spec->parameters.is_object() && spec->parameters.contains("properties") &&
      spec->parameters["properties"].is_object() && spec->parameters["properties"].contains(key))
    schema = &spec->parameters["properties"][key];
  if (schema && string_typed(*schema)) return json(std::string(raw));
  const std::string_view t = trim(raw);
  if (t == "True") return true;
  if (t == "False") return false;
  if (t == "None") return nullptr;
  if (!t.empty() && t.size() < (1u << 20)) {
    json v = json::parse(t, nullptr, /*allow_exceptions=*/false);
    if (!v.is_discarded()) {
      try {
        check_depth(v, 32);
        return v;
      } catch (const ApiError&) {
      }
    }
  }
  return json(std::string(raw));
}

// Reads an XML-style call body (between <tool_call> and </tool_call>); false when it is not one.
bool parse_xml_call(ToolFormat f, std::string_view body, const ToolRequest* tools, std::string& name, json& args) {
  std::string_view key_open, key_close, val_open, val_close;
  if (f == ToolFormat::kGlm45) {
    const size_t nl = body.find_first_of("\n<");
    name = std::string(trim(body.substr(0, nl)));
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl);
    key_open = "<arg_key>";
    key_close = "</arg_key>";
    val_open = "<arg_value>";
    val_close = "</arg_value>";
  } else {
    body = trim(body);
    constexpr std::string_view kFn = "<function=", kFnEnd = "</function>";
    if (body.substr(0, kFn.size()) != kFn || body.size() < kFnEnd.size() ||
        body.substr(body.size() - kFnEnd.size()) != kFnEnd)
      return false;
    const size_t gt = body.find('>');
    name = std::string(body.substr(kFn.size(), gt - kFn.size()));
    body = body.substr(gt + 1, body.size() - kFnEnd.size() - gt - 1);
    key_open = "<parameter=";
    key_close = ">";
    val_open = "";
    val_close = "</parameter>";
  }
  if (!valid_tool_name(name)) return false;
  const ToolSpec* spec = find_tool(tools, name);
  args = json::object();
  for (;;) {
    body = trim(body);
    if (body.empty()) return true;
    if (body.substr(0, key_open.size()) != key_open) return false;
    body.remove_prefix(key_open.size());
    const size_t kc = body.find(key_close);
    if (kc == std::string_view::npos) return false;
    const std::string key(trim(body.substr(0, kc)));
    if (key.empty() || key.size() > 256 || key.find('<') != std::string::npos) return false;
    body.remove_prefix(kc + key_close.size());
    std::string_view value;
    if (f == ToolFormat::kGlm45) {
      body = trim(body);
      if (body.substr(0, val_open.size()) != val_open) return false;
      body.remove_prefix(val_open.size());
    }
    const size_t vc = body.find(val_close);
    if (vc == std::string_view::npos) return false;
    value = body.substr(0, vc);
    if (f == ToolFormat::kQwen3Coder) {  // written as "\n" VALUE "\n"
      if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
      if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    }
    body.remove_prefix(vc + val_close.size());
    if (args.contains(key)) return false;
    args[key] = xml_value(spec, key, value);
  }
}

}  // namespace

ToolFormat detect_tool_format(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("<|channel|>") && (has("<|call|>") || has("to=functions."))) return ToolFormat::kHarmony;
  if (has(kKimiOpen) && has(kKimiArgs)) return ToolFormat::kKimiK2;
  if (has(kDsOpen) && has(kDsSep)) return has("```json") ? ToolFormat::kDeepSeekR1 : ToolFormat::kDeepSeekV31;
  if (has("<arg_key>") && has("<arg_value>")) return ToolFormat::kGlm45;
  if (has("<function=") && has("<parameter=")) return ToolFormat::kQwen3Coder;
  return ToolFormat::kHermes;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kDeepSeekV31: return "deepseek-v3.1";
    case ToolFormat::kDeepSeekR1: return "deepseek-r1";
    case ToolFormat::kKimiK2: return "kimi-k2";
    case ToolFormat::kGlm45: return "glm-4.5";
    case ToolFormat::kQwen3Coder: return "qwen3-coder";
    case ToolFormat::kHarmony: return "harmony";
  }
  return "?";
}

std::string_view tool_trigger(ToolFormat f) {
  switch (f) {
    case ToolFormat::kDeepSeekV31:
    case ToolFormat::kDeepSeekR1: return kDsSectionOpen;
    case ToolFormat::kKimiK2: return kKimiSectionOpen;
    case ToolFormat::kHarmony: return " to=functions.";
    default: return kCallOpen;
  }
}

std::vector<std::string_view> tool_format_markers(ToolFormat f) {
  std::vector<std::string_view> out = {"<think>", "</think>"};
  switch (f) {
    case ToolFormat::kDeepSeekV31:
    case ToolFormat::kDeepSeekR1: out.insert(out.end(), {kDsSectionOpen, kDsSectionClose, kDsOpen, kDsClose, kDsSep}); break;
    case ToolFormat::kKimiK2: out.insert(out.end(), {kKimiSectionOpen, kKimiSectionClose, kKimiOpen, kKimiClose, kKimiArgs}); break;
    case ToolFormat::kGlm45:
      out.insert(out.end(), {kCallOpen, kCallClose, "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"});
      break;
    case ToolFormat::kHermes:
    case ToolFormat::kQwen3Coder: out.insert(out.end(), {kCallOpen, kCallClose}); break;
    case ToolFormat::kHarmony:
      out.insert(out.end(), {"<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|constrain|>"});
      break;
  }
  return out;
}

std::string canonical_call(std::string_view name, std::string_view arguments, bool sealed) {
  return std::string(call_open_tag(sealed)) + "\n{\"name\": " + json(std::string(name)).dump() + ", \"arguments\": " +
         std::string(arguments) + "}\n" + std::string(call_close_tag(sealed));
}

CallNormalizer::CallNormalizer(ToolFormat f, const ToolRequest* tools) : f_(f), tools_(tools) {}

std::string CallNormalizer::feed(std::string_view piece) {
  if (f_ == ToolFormat::kHermes || f_ == ToolFormat::kHarmony) return std::string(piece);
  buf_.append(piece);
  std::string out;
  run(out, false);
  return out;
}

std::string CallNormalizer::flush() {
  if (f_ == ToolFormat::kHermes || f_ == ToolFormat::kHarmony) return {};
  std::string out;
  run(out, true);
  return out;
}

void CallNormalizer::run(std::string& out, bool final) {
  const Markers m = markers(f_);
  for (;;) {
    switch (state_) {
      case State::kText: {
        size_t at = std::string::npos;
        std::string_view which;
        for (std::string_view mk : {m.section_open, m.section_close, m.open}) {
          if (mk.empty()) continue;
          const size_t p = buf_.find(mk);
          if (p < at) {
            at = p;
            which = mk;
          }
        }
        if (at == std::string::npos) {
          const size_t keep = final ? 0 : partial_marker(buf_, {m.section_open, m.section_close, m.open});
          append_unsealed(out, std::string_view(buf_).substr(0, buf_.size() - keep));
          buf_.erase(0, buf_.size() - keep);
          return;
        }
        append_unsealed(out, std::string_view(buf_).substr(0, at));
        buf_.erase(0, at + which.size());
        // A section wraps the calls of the formats that have one: their markers mean something
        // only in order (the grammar allows a call only inside a section); elsewhere they are text.
        if (which == m.section_open && !in_section_) {
          in_section_ = true;
        } else if (which == m.section_close && in_section_) {
          in_section_ = false;
        } else if (which == m.open && (m.section_open.empty() || in_section_)) {
          raw_.assign(which);
          xml_pos_ = which.size();
          in_value_ = false;
          state_ = m.xml ? State::kXmlBody : State::kHeader;
        } else {
          out += which;
        }
        continue;
      }
      case State::kHeader: {
        raw_ += buf_;
        buf_.clear();
        // Markers are looked for within the first kMaxHeader bytes only, and a decision waits
        // until a marker starting there would be whole: so any split of the text decides alike.
        const size_t body = m.open.size(), limit = body + kMaxHeader;
        size_t ab = raw_.find(m.args_begin, body), cl = raw_.find(m.close, body);
        if (ab > limit) ab = std::string::npos;
        if (cl > limit) cl = std::string::npos;
        if (ab != std::string::npos && (cl == std::string::npos || ab < cl)) {
          const std::string name = header_name(f_, std::string_view(raw_).substr(body, ab - body));
          if (!name.empty()) {
            out += std::string(call_open_tag(true)) + "\n{\"name\": " + json(name).dump() + ", \"arguments\": ";
            buf_ = raw_.substr(ab + m.args_begin.size());
            raw_.clear();
            closer_ = JsonCloser();
            args_open_ = false;
            state_ = State::kArgs;
            continue;
          }
        }
        if (ab == std::string::npos && cl == std::string::npos && raw_.size() <= limit + std::max(m.args_begin.size(), m.close.size())) {
          if (final) raw_.clear();  // the output ended inside a call's header: a call cut off
          return;
        }
        // Not a call: its text is text (scanned again after the open marker).
        out += m.open;
        buf_ = raw_.substr(m.open.size());
        raw_.clear();
        state_ = State::kText;
        if (final) {
          out += buf_;
          buf_.clear();
          return;
        }
        continue;
      }
      case State::kArgs: {
        size_t k = 0;
        if (!args_open_) {
          while (k < buf_.size() && is_ws(buf_[k])) ++k;
          if (k == buf_.size()) {
            buf_.clear();
            return;
          }
          if (buf_[k] != '{') {  // not a call after all: end it malformed, so the parser drops it
            out += "\n" + std::string(call_close_tag(true));
            buf_.erase(0, k);
            state_ = State::kTrailer;
            continue;
          }
          args_open_ = true;
        }
        const size_t start = k;
        bool closed = false;
        while (k < buf_.size() && !closed) closed = closer_.closes(buf_[k++]);
        append_unsealed(out, std::string_view(buf_).substr(start, k - start));
        buf_.erase(0, k);
        if (!closed) return;  // flush: the call stays unfinished
        out += "}\n" + std::string(call_close_tag(true));
        raw_.clear();
        state_ = State::kTrailer;
        continue;
      }
      case State::kTrailer: {  // R1's "\n```", then the close marker
        const size_t cl = buf_.find(m.close);
        if (cl != std::string::npos && cl <= kMaxTrailer) {
          buf_.erase(0, cl + m.close.size());
          state_ = State::kText;
          continue;
        }
        if (final) {  // the output ended before the call's close marker
          buf_.clear();
          state_ = State::kText;
          return;
        }
        if (buf_.size() > kMaxTrailer + m.close.size()) {
          state_ = State::kText;  // no close marker: what follows is text
          continue;
        }
        return;
      }
      case State::kXmlBody: {
        raw_ += buf_;
        buf_.clear();
        // The call ends at the first close marker outside a value (a string value may hold one:
        // code that writes a tool call). Scanning resumes where it stopped.
        const std::string_view val_open = f_ == ToolFormat::kGlm45 ? "<arg_value>" : "<parameter=";
        const std::string_view val_close = f_ == ToolFormat::kGlm45 ? "</arg_value>" : "</parameter>";
        size_t cl = std::string::npos;
        for (;;) {
          if (in_value_) {
            const size_t vc = raw_.find(val_close, xml_pos_);
            if (vc == std::string::npos) {
              xml_pos_ = std::max(xml_pos_, raw_.size() - std::min(raw_.size(), val_close.size() - 1));
              break;
            }
            xml_pos_ = vc + val_close.size();
            in_value_ = false;
            continue;
          }
          const size_t vo = raw_.find(val_open, xml_pos_), c = raw_.find(m.close, xml_pos_);
          if (c != std::string::npos && (vo == std::string::npos || c < vo)) {
            cl = c;
            break;
          }
          if (vo != std::string::npos) {
            xml_pos_ = vo + val_open.size();
            in_value_ = true;
            continue;
          }
          xml_pos_ = std::max(xml_pos_, raw_.size() - std::min(raw_.size(), std::max(val_open.size(), m.close.size()) - 1));
          break;
        }
        if (cl > kMaxXmlCall) cl = std::string::npos;
        if (cl == std::string::npos) {
          const bool too_long = raw_.size() > kMaxXmlCall + m.close.size();
          if (too_long) {
            buf_ = raw_.substr(m.open.size());  // not a call: its text is text
            out += m.open;
            state_ = State::kText;
          }
          if (too_long || final) raw_.clear();  // final: a call cut off
          if (too_long) continue;
          return;
        }
        std::string name;
        json args;
        if (parse_xml_call(f_, std::string_view(raw_).substr(m.open.size(), cl - m.open.size()), tools_, name, args)) {
          out += canonical_call(name, args.dump(-1, ' ', false, json::error_handler_t::replace), /*sealed=*/true);
        } else {
          append_unsealed(out, std::string_view(raw_).substr(0, cl + m.close.size()));
        }
        buf_ = raw_.substr(cl + m.close.size());
        raw_.clear();
        state_ = State::kText;
        continue;
      }
    }
  }
}

std::string normalize_calls(ToolFormat f, std::string_view text, const ToolRequest* tools) {
  CallNormalizer n(f, tools);
  std::string out = n.feed(text);
  return out + n.flush();
}

}  // namespace triad::server

// ---- grammars ------------------------------------------------------------------------------

namespace triad::server {
namespace {

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

// The code points of UTF-8 text (the grammar matches code points).
std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// A code point inside a GBNF character class.
std::string class_char(const std::string& cp) {
  if (cp.size() == 1 && (cp[0] == ']' || cp[0] == '\\' || cp[0] == '^' || cp[0] == '-' || cp[0] == '"')) return "\\" + cp;
  if (cp == "\n") return "\\n";
  return cp;
}

// Rules `NAME0`: text that never contains `tag` (NAMEj: j code points of it just seen). The tag's
// first code point must not occur again in it (true of every marker used here).
std::string free_text_rules(const std::string& name, std::string_view tag) {
  const std::vector<std::string> cps = code_points(tag);
  const std::string first = class_char(cps[0]);
  std::string g = name + "0 ::= [^" + first + "] " + name + "0 | " + lit(cps[0]) + " " + name + "1 | \"\"\n";
  for (size_t j = 1; j < cps.size(); ++j) {
    std::string rule = name + std::to_string(j) + " ::= ";
    if (j + 1 < cps.size()) rule += lit(cps[j]) + " " + name + std::to_string(j + 1) + " | ";
    rule += lit(cps[0]) + " " + name + "1 | [^" + first + class_char(cps[j]) + "] " + name + "0 | \"\"\n";
    g += rule;
  }
  return g;
}

// An XML-style call's parameters: each declared property in order (the required ones always, the
// others optionally), a string-typed value as raw text, any other as JSON of its schema.
std::string xml_params_rules(ToolFormat f, const ToolSpec& s, const std::string& pre, std::vector<std::string>* dropped) {
  const json& p = s.parameters;
  std::string g, seq;
  const bool glm = f == ToolFormat::kGlm45;
  const std::string_view val_close = glm ? "</arg_value>" : "</parameter>";
  bool raw_text = false;
  if (p.contains("properties") && p["properties"].is_object()) {
    std::vector<std::string> required;
    if (p.contains("required") && p["required"].is_array())
      for (const json& r : p["required"])
        if (r.is_string()) required.push_back(r.get<std::string>());
    size_t j = 0;
    for (const auto& [key, ps] : p["properties"].items()) {
      const std::string v = pre + "p" + std::to_string(j++);
      if (string_typed(ps)) {
        std::string alts;
        for (const char* kw : {"enum", "const"}) {
          if (!ps.contains(kw)) continue;
          for (const json& e : ps[kw].is_array() ? ps[kw] : json::array({ps[kw]}))
            if (e.is_string()) alts += (alts.empty() ? "" : " | ") + lit(e.get<std::string>());
        }
        const bool bounded = ps.contains("maxLength") && ps["maxLength"].is_number_unsigned() &&
                             ps["maxLength"].get<uint64_t>() <= 4096;
        if (alts.empty() && bounded) {
          // A length-bounded string: exactly its length range, without "<" (so that the value
          // cannot run into the closing tag).
          const uint64_t lo = ps.contains("minLength") && ps["minLength"].is_number_unsigned() ? ps["minLength"].get<uint64_t>() : 0;
          const uint64_t hi = ps["maxLength"].get<uint64_t>();
          alts = "[^<]{" + std::to_string(std::min(lo, hi)) + "," + std::to_string(hi) + "}";
        }
        if (alts.empty()) {
          alts = pre + "text0";
          raw_text = true;
        }
        if (!ps.contains("enum") && !ps.contains("const")) {
          for (const char* kw : {"minLength", "maxLength", "pattern", "format"}) {
            if ((kw == std::string_view("minLength") || kw == std::string_view("maxLength")) && bounded) continue;
            if (!ps.contains(kw)) continue;
            if (s.strict)
              throw grammar::GrammarError("'" + std::string(kw) + "' of parameter '" + key + "' of '" + s.name +
                                          "' cannot be enforced in this model's tool-call format (" + tool_format_name(f) +
                                          "), which writes strings raw");
            if (dropped && std::find(dropped->begin(), dropped->end(), kw) == dropped->end()) dropped->push_back(kw);
          }
        }
        g += v + " ::= " + alts + "\n";
      } else {
        grammar::SchemaOptions o;
        o.strict = s.strict;
        o.dropped = dropped;
        o.root_name = v;
        o.prefix = v + "-";
        o.with_common = false;
        g += grammar::json_schema_to_gbnf(ps, o);
      }
      const std::string entry = glm ? lit("<arg_key>" + key + "</arg_key>\n<arg_value>") + " " + v + " " + lit("</arg_value>\n")
                                    : lit("<parameter=" + key + ">\n") + " " + v + " " + lit("\n</parameter>\n");
      const bool req = std::find(required.begin(), required.end(), key) != required.end();
      seq += " " + (req ? entry : "( " + entry + " )?");
    }
  }
  if (raw_text) g += free_text_rules(pre + "text", val_close);
  return g + pre + "xml ::= " + (seq.empty() ? "\"\"" : seq) + "\n";
}

}  // namespace

std::string tool_grammar(const ToolRequest& t, ToolFormat f, std::vector<std::string>* dropped) {
  const bool xml = f == ToolFormat::kGlm45 || f == ToolFormat::kQwen3Coder;
  std::string g, alts;
  for (size_t i = 0; i < t.tools.size(); ++i) {
    const ToolSpec& s = t.tools[i];
    if (t.choice == "named" && s.name != t.named) continue;
    const std::string pre = "tc" + std::to_string(i) + "-";
    std::string args = pre + "args";
    if (xml) {
      g += xml_params_rules(f, s, pre, dropped);
      args = pre + "xml";
    } else {
      grammar::SchemaOptions o;
      o.strict = s.strict;
      o.dropped = dropped;
      o.root_name = args;
      o.prefix = pre;
      o.with_common = false;
      g += grammar::json_schema_to_gbnf(s.parameters, o);
    }
    std::string head;
    switch (f) {
      case ToolFormat::kHermes: head = lit(json(s.name).dump() + ", \"arguments\": "); break;
      case ToolFormat::kDeepSeekV31: head = lit(s.name + std::string(kDsSep)); break;
      case ToolFormat::kDeepSeekR1: head = lit(s.name + "\n```json\n"); break;
      case ToolFormat::kKimiK2: head = lit(s.name + ":") + " [0-9]{1,4} " + lit(kKimiArgs); break;
      case ToolFormat::kGlm45: head = lit(s.name + "\n"); break;
      case ToolFormat::kQwen3Coder: head = lit(s.name + ">\n"); break;
      case ToolFormat::kHarmony: head = lit(s.name + "<|channel|>commentary json<|message|>"); break;
    }
    g += pre + "fn ::= " + head + " " + args + "\n";
    alts += (alts.empty() ? "" : " | ") + pre + "fn";
  }
  const bool many = t.parallel && t.choice != "named";
  const bool autoc = t.choice == "auto";
  auto calls = [&](std::string_view open, std::string_view sep, std::string_view close) {
    g += "tc-calls ::= " + (open.empty() ? std::string() : lit(open) + " ") + "tc-call" +
         (many ? " ( " + (sep.empty() ? std::string() : lit(sep) + " ") + "tc-call )*" : std::string()) +
         (close.empty() ? std::string() : " " + lit(close)) + "\n";
  };
  switch (f) {
    case ToolFormat::kHermes:
      g += "tc-call ::= " + lit(std::string(kCallOpen) + "\n{\"name\": ") + " ( " + alts + " ) " +
           lit("}\n" + std::string(kCallClose)) + "\n";
      calls("", "\n", "");
      break;
    case ToolFormat::kDeepSeekV31:
      g += "tc-call ::= " + lit(kDsOpen) + " ( " + alts + " ) " + lit(kDsClose) + "\n";
      calls(kDsSectionOpen, "", kDsSectionClose);
      break;
    case ToolFormat::kDeepSeekR1:
      g += "tc-call ::= " + lit(std::string(kDsOpen) + "function" + std::string(kDsSep)) + " ( " + alts + " ) " +
           lit("\n```" + std::string(kDsClose)) + "\n";
      calls(kDsSectionOpen, "\n", kDsSectionClose);
      break;
    case ToolFormat::kKimiK2:
      g += "tc-call ::= " + lit(std::string(kKimiOpen) + "functions.") + " ( " + alts + " ) " + lit(kKimiClose) + "\n";
      calls(kKimiSectionOpen, "", kKimiSectionClose);
      break;
    case ToolFormat::kGlm45:
      g += "tc-call ::= " + lit(kCallOpen) + " ( " + alts + " ) " + lit(kCallClose) + "\n";
      calls("", "\n", "");
      break;
    case ToolFormat::kQwen3Coder:
      g += "tc-call ::= " + lit(std::string(kCallOpen) + "\n<function=") + " ( " + alts + " ) " +
           lit("</function>\n" + std::string(kCallClose)) + "\n";
      calls("", "\n", "");
      break;
    case ToolFormat::kHarmony:
      // One call per message (<|call|> ends the generation), after an optional analysis message.
      g += "tc-calls ::= " + lit(" to=functions.") + " ( " + alts + " )\n";
      g += "hm-analysis ::= " + lit("<|channel|>analysis<|message|>") + " hm-text " + lit("<|end|><|start|>assistant") + "\n";
      g += "hm-final ::= " + lit("<|channel|>final<|message|>") + " hm-text\n";
      g += "hm-text ::= [^<] hm-text | \"<\" hm-lt | \"\"\nhm-lt ::= [^<|] hm-text | \"<\" hm-lt | \"\"\n";
      g += std::string("root ::= hm-analysis? ") + (autoc ? "( hm-final | tc-calls )" : "tc-calls") + "\n";
      return g + std::string(grammar::json_schema_common_gbnf());
  }
  if (autoc) {
    if (f == ToolFormat::kHermes) {
      // Free text, then calls; or one bare call object, the way many models answer (an answer
      // that opens with "{" is one: free text starts with anything else).
      g += "root ::= tc-start tc-calls? | tc-bare\n";
      g += "tc-bare ::= " + lit("{\"name\": ") + " ( " + alts + " ) \"}\"\n";
      g += "tc-start ::= [^<{] tc-free0 | \"<\" tc-free1 | \"\"\n";
    } else {
      g += "root ::= tc-free0 tc-calls?\n";
    }
    g += free_text_rules("tc-free", tool_trigger(f));
  } else {
    g += "root ::= tc-calls\n";
  }
  return g + std::string(grammar::json_schema_common_gbnf());
}

std::string tool_instructions(const ToolRequest& t, ToolFormat f) {
  std::string s = "You can call these functions:\n<tools>\n";
  for (const ToolSpec& fn : t.tools) {
    json d = {{"type", "function"}, {"function", {{"name", fn.name}, {"description", fn.description}, {"parameters", fn.parameters}}}};
    s += d.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  s += "</tools>\nTo call a function, write ";
  switch (f) {
    case ToolFormat::kDeepSeekV31:
      s += "the calls as\n" + std::string(kDsSectionOpen) + std::string(kDsOpen) + "<function-name>" + std::string(kDsSep) +
           "<arguments-object>" + std::string(kDsClose) + std::string(kDsSectionClose) + "\nwith one " +
           std::string(kDsOpen) + "..." + std::string(kDsClose) + " per call.";
      break;
    case ToolFormat::kDeepSeekR1:
      s += "the calls as\n" + std::string(kDsSectionOpen) + std::string(kDsOpen) + "function" + std::string(kDsSep) +
           "<function-name>\n```json\n<arguments-object>\n```" + std::string(kDsClose) + std::string(kDsSectionClose) +
           "\nwith one " + std::string(kDsOpen) + "..." + std::string(kDsClose) + " per call, separated by newlines.";
      break;
    case ToolFormat::kKimiK2:
      s += "the calls as\n" + std::string(kKimiSectionOpen) + std::string(kKimiOpen) + "functions.<function-name>:0" +
           std::string(kKimiArgs) + "<arguments-object>" + std::string(kKimiClose) + std::string(kKimiSectionClose) +
           "\nwith one " + std::string(kKimiOpen) + "..." + std::string(kKimiClose) + " per call, numbered from 0.";
      break;
    case ToolFormat::kGlm45:
      s += "one block per call:\n<tool_call><function-name>\n<arg_key><argument-name></arg_key>\n"
           "<arg_value><argument-value></arg_value>\n</tool_call>\nwith one key and value per argument.";
      break;
    case ToolFormat::kQwen3Coder:
      s += "one block per call:\n<tool_call>\n<function=<function-name>>\n<parameter=<argument-name>>\n"
           "<argument-value>\n</parameter>\n</function>\n</tool_call>\nwith one parameter block per argument.";
      break;
    case ToolFormat::kHarmony:
      s += "a commentary message to the function: to=functions.<function-name><|channel|>commentary json<|message|>"
           "<arguments-object>";
      break;
    case ToolFormat::kHermes:
      s += "one block per call, each a JSON object with the function's name and arguments:\n<tool_call>\n"
           "{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call>";
      break;
  }
  if (t.choice == "required") s += "\nYou must call at least one function.";
  if (t.choice == "named") s += "\nCall the function " + t.named + ".";
  return s;
}

}  // namespace triad::server
