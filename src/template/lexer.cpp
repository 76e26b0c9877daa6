// The template lexer (see lexer.h).
#include "template/lexer.h"

#include <cctype>
#include <cstring>

#include "template/value.h"

namespace triad::tmpl {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

// Cuts the source into segments, applying jinja2's whitespace rules as its lexer does:
//  - after a tag ending in '-', all whitespace is consumed; after any other block or comment
//    tag (unless it ends in '+'), one newline (trim_blocks);
//  - before a tag starting with '-', the text loses its trailing whitespace; before a block or
//    comment tag not starting with '+', spaces and tabs between the start of the line and the
//    tag are removed (lstrip_blocks). "Start of the line" is a newline in the text, or the start
//    of the template, or a previous tag whose consumed whitespace ended with a newline.
std::vector<Segment> segment(std::string_view src) {
  std::vector<Segment> out;
  size_t i = 0;
  int line = 1;
  bool line_starting = true;
  auto lines_in = [&](size_t from, size_t to) {
    int n = 0;
    for (size_t k = from; k < to && k < src.size(); ++k) n += src[k] == '\n';
    return n;
  };
  for (;;) {
    size_t open = std::string_view::npos;
    for (size_t k = i; k + 1 < src.size(); ++k) {
      if (src[k] == '{' && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')) {
        open = k;
        break;
      }
    }
    if (open == std::string_view::npos) {
      if (i < src.size()) out.push_back({SegKind::kText, std::string(src.substr(i)), line});
      break;
    }
    std::string text(src.substr(i, open - i));
    const int text_line = line;
    line += lines_in(i, open);
    const char type = src[open + 1];
    const SegKind kind = type == '{' ? SegKind::kVar : type == '%' ? SegKind::kBlock : SegKind::kComment;
    size_t p = open + 2;
    const bool left_minus = p < src.size() && src[p] == '-';
    const bool left_plus = p < src.size() && src[p] == '+';
    if (left_minus || left_plus) ++p;
    if (left_minus) {
      size_t e = text.size();
      while (e > 0 && is_space(text[e - 1])) --e;
      text.resize(e);
    } else if (kind != SegKind::kVar && !left_plus) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool blank = true;
        for (size_t k = l_pos; k < text.size(); ++k) blank = blank && (text[k] == ' ' || text[k] == '\t');
        if (blank) text.resize(l_pos);
      }
    }
    if (!text.empty()) out.push_back({SegKind::kText, std::move(text), text_line});
    const char* close = kind == SegKind::kVar ? "}}" : kind == SegKind::kBlock ? "%}" : "#}";
    size_t end = std::string_view::npos;
    if (kind == SegKind::kComment) {
      end = src.find(close, p);
    } else {
      char quote = 0;  // "%}" inside a string literal does not end the tag
      for (size_t k = p; k + 1 < src.size(); ++k) {
        const char c = src[k];
        if (quote) {
          if (c == '\\') ++k;
          else if (c == quote) quote = 0;
          continue;
        }
        if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == close[0] && src[k + 1] == close[1]) {
          end = k;
          break;
        }
      }
    }
    if (end == std::string_view::npos)
      template_fail("template syntax error, line ", line, ": unclosed '", src.substr(open, 2), "'");
    size_t body_end = end;
    const bool right_minus = body_end > p && src[body_end - 1] == '-';
    const bool right_plus = body_end > p && src[body_end - 1] == '+';
    if (right_minus || right_plus) --body_end;
    if (kind != SegKind::kComment) out.push_back({kind, std::string(src.substr(p, body_end - p)), line});
    line += lines_in(open, end + 2);
    i = end + 2;
    // What the tag's end consumes.
    size_t c = i;
    if (right_minus) {
      while (c < src.size() && is_space(src[c])) ++c;
    } else if (kind != SegKind::kVar && !right_plus) {
      if (c < src.size() && src[c] == '\n') ++c;
      else if (c + 1 < src.size() && src[c] == '\r' && src[c + 1] == '\n') c += 2;
    }
    line_starting = c > i ? src[c - 1] == '\n' : false;
    line += lines_in(i, c);
    i = c;
  }
  return out;
}

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  auto err = [&](const std::string& what) -> void {
    template_fail("template syntax error, line ", line, ": ", what);
  };
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::kName, s.substr(i, j - i)});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') num += s[k];
      Token t{is_float ? Tok::kFloat : Tok::kInt, num};
      try {
        if (is_float) t.f = std::stod(num);
        else t.i = std::stoll(num);
      } catch (const std::exception&) {
        err("number out of range: " + num);
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      bool closed = false;
      while (j < s.size()) {
        const char d = s[j];
        if (d == c) {
          closed = true;
          ++j;
          break;
        }
        if (d == '\\' && j + 1 < s.size()) {
          const char e = s[j + 1];
          j += 2;
          switch (e) {
            case 'n': v += '\n'; break;
            case 't': v += '\t'; break;
            case 'r': v += '\r'; break;
            case '0': v += '\0'; break;
            case '\\': v += '\\'; break;
            case '\'': v += '\''; break;
            case '"': v += '"'; break;
            case '\n': break;
            case 'u':
            case 'x': {
              const size_t n = e == 'u' ? 4 : 2;
              if (j + n > s.size()) err("bad escape in string");
              uint32_t cp = 0;
              for (size_t k = 0; k < n; ++k) {
                const char h = s[j + k];
                if (!std::isxdigit(static_cast<unsigned char>(h))) err("bad escape in string");
                cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
              }
              j += n;
              append_utf8(v, cp);
              break;
            }
            default:
              v += '\\';
              v += e;
          }
          continue;
        }
        v += d;
        ++j;
      }
      if (!closed) err("unterminated string");
      out.push_back({Tok::kString, std::move(v)});
      i = j;
      continue;
    }
    static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
    bool matched = false;
    for (const char* op : two) {
      if (s.compare(i, 2, op) == 0) {
        out.push_back({Tok::kOp, op});
        i += 2;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (std::strchr("+-*/%~<>()[]{}.,:|=", c) != nullptr) {
      out.push_back({Tok::kOp, std::string(1, c)});
      ++i;
      continue;
    }
    err(std::string("unexpected character '") + c + "'");
  }
  out.push_back({Tok::kEnd, ""});
  return out;
}

}  // namespace triad::tmpl
