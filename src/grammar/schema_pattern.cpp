// JSON Schema `pattern` -> GBNF (schema_pattern.h).
#include "grammar/schema_pattern.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace triad::grammar {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw GrammarError("json_schema: " + msg); }

// One code point as it must appear inside a GBNF character class.
std::string class_char(uint32_t cp) {
  char buf[16];
  if (cp < 0x20 || cp == '"' || cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == 0x7F) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    return buf;
  }
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  std::snprintf(buf, sizeof buf, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", cp);
  return buf;
}

using Ranges = std::vector<CodeRange>;

Ranges norm(Ranges r) { return normalize_ranges(std::move(r)); }
Ranges complement(const Ranges& r) { return complement_ranges(r); }
// Characters a JSON string may hold unescaped: no quote, backslash or control character.
Ranges json_safe(const Ranges& r) {
  const Ranges safe = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
  Ranges o;
  for (const CodeRange& a : r)
    for (const CodeRange& b : safe) {
      const uint32_t lo = std::max(a.first, b.first), hi = std::min(a.second, b.second);
      if (lo <= hi) o.push_back({lo, hi});
    }
  return norm(o);
}
std::string class_expr(const Ranges& r) {
  if (r.empty()) fail("pattern: a character class matches no character a JSON string can hold");
  std::string o = "[";
  for (const CodeRange& c : r) {
    o += class_char(c.first);
    if (c.second != c.first) {
      o += '-';
      o += class_char(c.second);
    }
  }
  return o + "]";
}

class PatternCompiler {
 public:
  explicit PatternCompiler(const Unenforceable& unenforceable) : unenforceable_(unenforceable) {}


  // A compiled regex piece: its GBNF expression and the range of its length in characters (mx
  // -1: unbounded); `single` when it is one character (a literal or a class).
  struct Rx {
    std::string e;
    int64_t mn = 0, mx = 0;
    bool single = false;
  };
  static int64_t add_len(int64_t x, int64_t y) { return x < 0 || y < 0 ? -1 : std::min<int64_t>(x + y, 1 << 30); }

  // A pattern as the body of a JSON string, held to lengths [min_len, max_len] (max -1: none).
  // The lengths are exact when the pattern implies them, or when it is anchored and all its
  // variable length sits in one repeated character (as "^[a-z]+$" or "^[A-Z][a-z0-9_]*$"):
  // that repetition's bounds then take them. Otherwise they cannot be enforced.
  std::string compile(const std::string& re, int64_t min_len, int64_t max_len) {
    rx_ = re;
    rp_ = 0;
    bool anchored_start = false, anchored_end = false;
    if (!rx_.empty() && rx_[0] == '^') {
      anchored_start = true;
      ++rp_;
    }
    top_.clear();
    Rx body = rx_alt(0);
    if (rp_ < rx_.size() && rx_[rp_] == '$') {
      anchored_end = true;
      ++rp_;
    }
    if (rp_ != rx_.size()) fail("pattern: unexpected '" + std::string(1, rx_[rp_]) + "' at offset " + std::to_string(rp_));
    const bool anchored = anchored_start && anchored_end;
    const bool implied = anchored && body.mn >= min_len && (max_len < 0 || (body.mx >= 0 && body.mx <= max_len));
    if (anchored && ((max_len >= 0 && body.mn > max_len) || (body.mx >= 0 && body.mx < min_len)))
      fail("'pattern' and the length bounds admit no string");
    bool lengths_dropped = false;
    if (!implied && (min_len > 0 || max_len >= 0)) {
      // One variable element, a repeated single character, takes the length bounds.
      size_t var = top_.size();
      bool ok = anchored && !top_.empty();
      for (size_t i = 0; ok && i < top_.size(); ++i) {
        if (top_[i].rx.mn == top_[i].rx.mx) {
          continue;
        } else if (var == top_.size() && top_[i].atom.single) {
          var = i;
        } else {
          ok = false;
        }
      }
      if (!ok || var == top_.size()) {
        const std::string why = "'pattern' with minLength / maxLength is supported when the pattern is anchored (^...$) "
                                "and its variable length is one repeated character";
        if (min_len > 0) unenforceable("minLength", why);
        if (max_len >= 0) unenforceable("maxLength", why);
        lengths_dropped = true;
      }
    }
    if (!implied && !lengths_dropped && (min_len > 0 || max_len >= 0)) {
      size_t var = 0;
      int64_t fixed = 0;
      for (size_t i = 0; i < top_.size(); ++i) {
        if (top_[i].rx.mn == top_[i].rx.mx) fixed += top_[i].rx.mn;
        else var = i;
      }
      const TopElem& v = top_[var];
      const int64_t lo = std::max<int64_t>(v.lo, min_len - fixed);
      const int64_t hi = max_len < 0 ? v.hi : (v.hi < 0 ? max_len - fixed : std::min<int64_t>(v.hi, max_len - fixed));
      if (hi >= 0 && hi < lo) fail("'pattern' and the length bounds admit no string");
      std::string out;
      for (size_t i = 0; i < top_.size(); ++i) {
        std::string e = top_[i].rx.e;
        if (i == var) e = "(" + v.atom.e + "){" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
        out += (out.empty() ? "" : " ") + e;
      }
      return "(" + out + ")";
    }
    const std::string any = "json-char{0,32}";
    return (anchored_start ? "" : any + " ") + "(" + body.e + ")" + (anchored_end ? "" : " " + any);
  }

  uint32_t rx_cp() {
    const auto b0 = static_cast<unsigned char>(rx_[rp_]);
    int n = b0 < 0x80 ? 0 : (b0 & 0xE0) == 0xC0 ? 1 : (b0 & 0xF0) == 0xE0 ? 2 : (b0 & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || rp_ + static_cast<size_t>(n) >= rx_.size()) fail("pattern: invalid UTF-8");
    uint32_t cp = n == 0 ? b0 : b0 & (0x3F >> n);
    for (int i = 1; i <= n; ++i) {
      const auto b = static_cast<unsigned char>(rx_[rp_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("pattern: invalid UTF-8");
      cp = cp << 6 | (b & 0x3F);
    }
    rp_ += static_cast<size_t>(n) + 1;
    return cp;
  }

  // A literal code point as JSON text (escaped where JSON requires it).
  static std::string rx_literal(uint32_t cp) {
    if (cp == '"') return "\"\\\\\\\"\"";   // JSON \" as GBNF "\\\""
    if (cp == '\\') return "\"\\\\\\\\\"";  // JSON \\ as GBNF "\\\\"
    if (cp < 0x20) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "\"\\\\u%04X\"", cp);
      return buf;
    }
    return class_expr({{cp, cp}});
  }

  // Escape classes \d \w \s (and negations) as ranges; 0 when `c` is not one.
  static bool rx_class_escape(char c, Ranges& out) {
    Ranges r;
    switch (c) {
      case 'd': case 'D': r = {{'0', '9'}}; break;
      case 'w': case 'W': r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; break;
      case 's': case 'S': r = {{'\t', '\r'}, {' ', ' '}}; break;
      default: return false;
    }
    out = (c >= 'A' && c <= 'Z') ? complement(norm(r)) : norm(r);
    return true;
  }

  uint32_t rx_escaped_char(char c) {
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      default: break;
    }
    if (std::string("\\^$.|?*+()[]{}/-\"'").find(c) != std::string::npos) return static_cast<unsigned char>(c);
    if ((c >= '1' && c <= '9') || c == 'k') fail("pattern: backreferences are not supported");
    if (c == 'b' || c == 'B' || c == 'A' || c == 'z' || c == 'Z') fail("pattern: assertions (\\" + std::string(1, c) + ") are not supported");
    fail("pattern: unsupported escape '\\" + std::string(1, c) + "'");
  }

  Rx rx_alt(int depth) {
    if (depth > 64) fail("pattern: groups nest too deep");
    std::vector<Rx> alts{rx_seq(depth)};
    while (rp_ < rx_.size() && rx_[rp_] == '|') {
      ++rp_;
      alts.push_back(rx_seq(depth));
    }
    if (depth == 0 && alts.size() > 1) top_.clear();  // not one sequence
    if (alts.size() == 1) return alts[0];
    Rx o{"(", alts[0].mn, alts[0].mx, false};
    for (size_t i = 0; i < alts.size(); ++i) {
      o.e += (i ? " | " : "") + (alts[i].e.empty() ? "\"\"" : alts[i].e);
      o.mn = std::min(o.mn, alts[i].mn);
      o.mx = o.mx < 0 || alts[i].mx < 0 ? -1 : std::max(o.mx, alts[i].mx);
    }
    o.e += ")";
    return o;
  }

  Rx rx_seq(int depth) {
    Rx o;
    while (rp_ < rx_.size() && rx_[rp_] != '|' && rx_[rp_] != ')') {
      if (rx_[rp_] == '$' && rp_ + 1 == rx_.size()) break;
      Rx atom = rx_atom(depth);
      const Rx plain = atom;
      int64_t lo = 1, hi = 1;
      // quantifier
      if (rp_ < rx_.size()) {
        const char q = rx_[rp_];
        std::string rep;
        if (q == '*' || q == '+' || q == '?') {
          rep = std::string(1, q);
          lo = q == '+' ? 1 : 0;
          hi = q == '?' ? 1 : -1;
          ++rp_;
        } else if (q == '{') {
          const size_t close = rx_.find('}', rp_);
          if (close == std::string::npos) fail("pattern: unterminated {m,n}");
          const std::string inner = rx_.substr(rp_ + 1, close - rp_ - 1);
          const size_t comma = inner.find(',');
          auto num = [&](const std::string& t) {
            if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
              fail("pattern: bad repetition {" + inner + "}");
            return std::stoi(t);
          };
          if (comma == std::string::npos) {
            lo = hi = num(inner);
            rep = std::string("{") + std::to_string(lo) + "}";
          } else if (comma + 1 == inner.size()) {
            lo = num(inner.substr(0, comma));
            hi = -1;
            rep = std::string("{") + std::to_string(lo) + ",}";
          } else {
            lo = num(inner.substr(0, comma));
            hi = num(inner.substr(comma + 1));
            if (hi < lo) fail("pattern: repetition {m,n} with n < m");
            rep = std::string("{") + std::to_string(lo) + "," + std::to_string(hi) + "}";
          }
          rp_ = close + 1;
        }
        if (!rep.empty()) {
          if (rp_ < rx_.size() && rx_[rp_] == '?') ++rp_;  // lazy: same language
          if (rp_ < rx_.size() && rx_[rp_] == '+') fail("pattern: possessive quantifiers are not supported");
          atom.e = "(" + atom.e + ")" + rep;
          atom.mn = std::min<int64_t>(atom.mn * lo, 1 << 30);
          atom.mx = hi < 0 || atom.mx < 0 ? (atom.mx == 0 ? 0 : -1) : std::min<int64_t>(atom.mx * hi, 1 << 30);
          atom.single = false;
        }
      }
      if (depth == 0) top_.push_back({atom, plain, lo, hi});
      o.e += (o.e.empty() ? "" : " ") + atom.e;
      o.mn = std::min<int64_t>(o.mn + atom.mn, 1 << 30);
      o.mx = add_len(o.mx, atom.mx);
    }
    return o;
  }

  static Rx one(std::string e) { return Rx{std::move(e), 1, 1, true}; }

  Rx rx_atom(int depth) {
    const char c = rx_[rp_];
    if (c == '(') {
      ++rp_;
      if (rp_ < rx_.size() && rx_[rp_] == '?') {
        if (rp_ + 1 < rx_.size() && rx_[rp_ + 1] == ':') {
          rp_ += 2;
        } else {
          fail("pattern: lookarounds and named groups are not supported");
        }
      }
      Rx inner = rx_alt(depth + 1);
      if (rp_ >= rx_.size() || rx_[rp_] != ')') fail("pattern: missing ')'");
      ++rp_;
      inner.e = std::string("(") + (inner.e.empty() ? "\"\"" : inner.e) + ")";
      return inner;
    }
    if (c == '[') return one(rx_class());
    if (c == '.') {
      ++rp_;
      return one(class_expr(json_safe(complement({{'\n', '\n'}}))));
    }
    if (c == '^' || c == '$') fail("pattern: anchors are supported only at the start and end");
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("pattern: a quantifier with nothing to repeat");
    if (c == '\\') {
      if (rp_ + 1 >= rx_.size()) fail("pattern: trailing backslash");
      const char e = rx_[rp_ + 1];
      rp_ += 2;
      Ranges r;
      if (rx_class_escape(e, r)) return one(class_expr(json_safe(r)));
      if (e == 'u') {
        if (rp_ + 4 > rx_.size()) fail("pattern: truncated \\u escape");
        uint32_t cp = 0;
        for (int k = 0; k < 4; ++k) {
          const char h = rx_[rp_ + static_cast<size_t>(k)];
          const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (v < 0) fail("pattern: bad \\u escape");
          cp = cp << 4 | static_cast<uint32_t>(v);
        }
        rp_ += 4;
        return one(rx_literal(cp));
      }
      return one(rx_literal(rx_escaped_char(e)));
    }
    return one(rx_literal(rx_cp()));
  }

  std::string rx_class() {
    ++rp_;  // '['
    bool neg = false;
    if (rp_ < rx_.size() && rx_[rp_] == '^') {
      neg = true;
      ++rp_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (rp_ >= rx_.size()) fail("pattern: unterminated character class");
      if (rx_[rp_] == ']' && !first) break;
      first = false;
      uint32_t a;
      if (rx_[rp_] == '\\') {
        if (rp_ + 1 >= rx_.size()) fail("pattern: trailing backslash");
        const char e = rx_[rp_ + 1];
        rp_ += 2;
        Ranges esc;
        if (rx_class_escape(e, esc)) {
          r.insert(r.end(), esc.begin(), esc.end());
          continue;
        }
        a = rx_escaped_char(e);
      } else {
        a = rx_cp();
      }
      uint32_t b = a;
      if (rp_ + 1 < rx_.size() && rx_[rp_] == '-' && rx_[rp_ + 1] != ']') {
        ++rp_;
        if (rx_[rp_] == '\\') {
          if (rp_ + 1 >= rx_.size()) fail("pattern: trailing backslash");
          const char e = rx_[rp_ + 1];
          rp_ += 2;
          b = rx_escaped_char(e);
        } else {
          b = rx_cp();
        }
        if (b < a) fail("pattern: character range out of order");
      }
      r.push_back({a, b});
      if (r.size() > 1024) fail("pattern: character class too large");
    }
    ++rp_;  // ']'
    Ranges set = norm(r);
    if (neg) set = complement(set);
    return class_expr(json_safe(set));
  }

 private:
  void unenforceable(const std::string& keyword, const std::string& why) { unenforceable_(keyword, why); }

  const Unenforceable& unenforceable_;
  std::string rx_;
  size_t rp_ = 0;
  struct TopElem {
    Rx rx;        // as quantified
    Rx atom;      // before its quantifier
    int64_t lo = 1, hi = 1;
  };
  std::vector<TopElem> top_;  // the pattern's top-level sequence (empty when it has alternatives)
};

}  // namespace

std::string pattern_to_gbnf(const std::string& re, int64_t min_len, int64_t max_len,
                            const Unenforceable& unenforceable) {
  return PatternCompiler(unenforceable).compile(re, min_len, max_len);
}

}  // namespace triad::grammar
