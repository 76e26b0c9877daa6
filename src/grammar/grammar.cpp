// GBNF parser and grammar checks (grammar.h). Written for this project: llama.cpp's parser is
// the model for the syntax, not the code; none of the Debian packages parses GBNF.
#include "grammar/grammar.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace triad::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct Item {
  bool is_rule;
  uint32_t value;  // set id or rule id
};
using Seq = std::vector<Item>;
using Alts = std::vector<Seq>;

}  // namespace

std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> r) {
  std::sort(r.begin(), r.end());
  std::vector<CodeRange> out;
  for (const CodeRange& c : r) {
    if (!out.empty() && c.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, c.second);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& r) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const CodeRange& c : r) {
    if (c.first > next) out.push_back({next, c.first - 1});
    next = c.second + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

class GbnfParser {
 public:
  GbnfParser(std::string_view src, const Limits& lim) : src_(src), lim_(lim) {}

  Grammar parse() {
    if (src_.size() > lim_.max_source_bytes)
      fail("the grammar is " + std::to_string(src_.size()) + " bytes; the limit is " +
           std::to_string(lim_.max_source_bytes));
    skip_ws();
    if (at_end()) fail("the grammar is empty");
    while (!at_end()) {
      const size_t name_pos = pos_;
      const std::string name = parse_name();
      skip_ws();
      if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      const uint32_t id = rule_id(name, name_pos);
      if (defined_[id]) fail_at(name_pos, "rule '" + name + "' is defined twice");
      defined_[id] = true;
      rules_[id] = parse_alternatives(0, name);
      skip_ws();
    }
    for (size_t r = 0; r < rules_.size(); ++r)
      if (!defined_[r]) fail_at(first_use_[r], "rule '" + names_[r] + "' is used but never defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) fail("the grammar has no 'root' rule");
    check(root->second);
    return flatten(root->second);
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& msg) const {
    size_t line = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) line += src_[i] == '\n';
    throw GrammarError("grammar: " + msg + " (line " + std::to_string(line) + ")");
  }
  [[noreturn]] void fail(const std::string& msg) const { fail_at(pos_, msg); }
  [[noreturn]] static void fail_global(const std::string& msg) { throw GrammarError("grammar: " + msg); }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek() const { return at_end() ? '\0' : src_[pos_]; }

  void skip_ws() {
    while (!at_end()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && name_char(src_[pos_])) ++pos_;
    if (pos_ == start) fail(std::string("expected a rule name, found '") + peek() + "'");
    return std::string(src_.substr(start, pos_ - start));
  }

  // At `NAME ws* ::=`? (the start of the next rule: ends the current sequence)
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < src_.size() && name_char(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n' || src_[p] == '\r')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    return new_rule(name, at);
  }
  uint32_t new_rule(const std::string& name, size_t at) {
    if (rules_.size() >= lim_.max_rules)
      fail_at(at, "more than " + std::to_string(lim_.max_rules) + " rules (after expanding repetitions)");
    const uint32_t id = static_cast<uint32_t>(rules_.size());
    rules_.emplace_back();
    chain_.emplace_back();
    names_.push_back(name);
    defined_.push_back(false);
    first_use_.push_back(at);
    ids_.emplace(name, id);
    return id;
  }
  uint32_t helper_rule(const std::string& base, Alts alts) {
    const uint32_t id = new_rule(base + "_" + std::to_string(rules_.size()), pos_);
    defined_[id] = true;
    rules_[id] = std::move(alts);
    return id;
  }

  void count(size_t n) {
    if (n > lim_.max_elements || n_elems_ > lim_.max_elements - n)
      fail("the grammar has more than " + std::to_string(lim_.max_elements) +
           " elements after expanding repetitions");
    n_elems_ += n;
  }

  uint32_t set_id(std::vector<CodeRange> ranges) {
    auto it = set_ids_.find(ranges);
    if (it != set_ids_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(sets_.size());
    sets_.push_back(ranges);
    set_ids_.emplace(std::move(ranges), id);
    return id;
  }

  // One UTF-8 code point of the source.
  uint32_t next_code_point() {
    const auto b0 = static_cast<unsigned char>(src_[pos_]);
    int n = 0;
    uint32_t cp = 0;
    if (b0 < 0x80) {
      ++pos_;
      return b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      n = 1, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      n = 2, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      n = 3, cp = b0 & 0x07;
    } else {
      fail("invalid UTF-8 in the grammar");
    }
    if (pos_ + static_cast<size_t>(n) >= src_.size()) fail("truncated UTF-8 in the grammar");
    for (int i = 1; i <= n; ++i) {
      const auto b = static_cast<unsigned char>(src_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar");
      cp = cp << 6 | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(n) + 1;
    if (cp > kMaxCodePoint) fail("invalid UTF-8 in the grammar");
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (at_end()) fail("truncated escape sequence");
      const char c = src_[pos_++];
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("bad hex digit in an escape sequence");
      }
      v = v << 4 | d;
    }
    if (v > kMaxCodePoint) fail("escaped code point is beyond U+10FFFF");
    return v;
  }

  // A character of a literal or class, escapes decoded.
  uint32_t parse_char() {
    if (at_end()) fail("unterminated literal or character class");
    if (src_[pos_] != '\\') return next_code_point();
    ++pos_;
    if (at_end()) fail("truncated escape sequence");
    const char c = src_[pos_++];
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'b': return '\b';
      case '0': return 0;
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^': case '.':
        return static_cast<unsigned char>(c);
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      default: break;
    }
    --pos_;
    fail(std::string("unknown escape '\\") + c + "'");
  }

  Alts parse_alternatives(int depth, const std::string& rule) {
    if (depth > lim_.max_nesting) fail("parentheses nested more than " + std::to_string(lim_.max_nesting) + " deep");
    Alts alts;
    alts.push_back(parse_sequence(depth, rule));
    while (true) {
      skip_ws();
      if (peek() != '|') break;
      ++pos_;
      alts.push_back(parse_sequence(depth, rule));
    }
    return alts;
  }

  Seq parse_sequence(int depth, const std::string& rule) {
    Seq seq;
    while (true) {
      skip_ws();
      if (at_end() || peek() == '|' || peek() == ')') break;
      if (at_rule_start()) {
        if (depth > 0) fail("unclosed '('");
        break;
      }
      Seq sym = parse_element(depth, rule);
      // Postfix operators (whitespace allowed before them, as in llama.cpp).
      skip_ws();
      const char op = peek();
      if (op == '*' || op == '+' || op == '?' || op == '{') {
        ++pos_;
        uint32_t lo = 0, hi = 0;
        bool unbounded = false;
        if (op == '*') {
          unbounded = true;
        } else if (op == '+') {
          lo = 1, unbounded = true;
        } else if (op == '?') {
          hi = 1;
        } else {
          skip_ws();
          lo = parse_count();
          skip_ws();
          if (peek() == ',') {
            ++pos_;
            skip_ws();
            if (peek() == '}') {
              unbounded = true;
            } else {
              hi = parse_count();
            }
          } else {
            hi = lo;
          }
          skip_ws();
          if (peek() != '}') fail("expected '}' to close a repetition");
          ++pos_;
          if (!unbounded && hi < lo) fail("repetition {m,n} with n < m");
        }
        sym = repeat(std::move(sym), lo, hi, unbounded, rule);
      }
      seq.insert(seq.end(), sym.begin(), sym.end());
    }
    return seq;
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!at_end() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(src_[pos_] - '0');
      if (v > lim_.max_repeat) fail("repetition count above the limit of " + std::to_string(lim_.max_repeat));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in a repetition");
    return static_cast<uint32_t>(v);
  }

  Seq repeat(Seq sym, uint32_t lo, uint32_t hi, bool unbounded, const std::string& rule) {
    Item x;
    if (sym.size() == 1) {
      x = sym[0];
    } else {
      x = Item{true, helper_rule(rule, Alts{sym})};
    }
    Seq out;
    count(lo);
    out.assign(lo, x);
    if (unbounded) {
      // r ::= x r | empty
      count(2);
      const uint32_t r = helper_rule(rule, Alts{});
      rules_[r] = Alts{Seq{x, Item{true, r}}, Seq{}};
      out.push_back(Item{true, r});
    } else if (hi > lo) {
      // o_k ::= x o_{k+1} | empty, innermost first
      count(2 * static_cast<size_t>(hi - lo));
      uint32_t inner = 0, chain_base = 0;
      bool have_inner = false;
      for (uint32_t k = 0; k < hi - lo; ++k) {
        Seq s{x};
        if (have_inner) s.push_back(Item{true, inner});
        inner = helper_rule(rule, Alts{s, Seq{}});
        if (k == 0) chain_base = inner;
        chain_[inner] = Grammar::Chain{chain_base, k, hi - lo};
        have_inner = true;
      }
      out.push_back(Item{true, inner});
    }
    return out;
  }

  Seq parse_element(int depth, const std::string& rule) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      Seq s;
      while (peek() != '"') {
        if (at_end()) fail("unterminated literal");
        const uint32_t cp = parse_char();
        s.push_back(Item{false, set_id({{cp, cp}})});
      }
      ++pos_;
      count(s.size());
      return s;
    }
    if (c == '[') {
      ++pos_;
      bool neg = false;
      if (peek() == '^') {
        neg = true;
        ++pos_;
      }
      std::vector<CodeRange> ranges;
      while (peek() != ']') {
        if (at_end()) fail("unterminated character class");
        const uint32_t a = parse_char();
        uint32_t b = a;
        if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
          ++pos_;
          b = parse_char();
          if (b < a) fail("character range out of order");
        }
        ranges.push_back({a, b});
        if (ranges.size() > 4096) fail("character class with more than 4096 ranges");
      }
      ++pos_;
      ranges = normalize_ranges(std::move(ranges));
      if (neg) ranges = complement_ranges(ranges);
      count(1);
      return Seq{Item{false, set_id(std::move(ranges))}};
    }
    if (c == '.') {
      ++pos_;
      count(1);
      return Seq{Item{false, set_id({{0, kMaxCodePoint}})}};
    }
    if (c == '(') {
      ++pos_;
      Alts alts = parse_alternatives(depth + 1, rule);
      skip_ws();
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      count(1);
      return Seq{Item{true, helper_rule(rule, std::move(alts))}};
    }
    if (name_char(c)) {
      const size_t at = pos_;
      const std::string name = parse_name();
      count(1);
      return Seq{Item{true, rule_id(name, at)}};
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  // Nullable and productive rules by worklists (linear in the grammar size), then left recursion
  // by an iterative depth-first search.
  void check(uint32_t root) {
    const size_t n = rules_.size();
    // occurrences: for each rule, the (rule, alt) pairs whose sequences reference it
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> uses(n);
    for (uint32_t r = 0; r < n; ++r)
      for (uint32_t a = 0; a < rules_[r].size(); ++a)
        for (const Item& it : rules_[r][a])
          if (it.is_rule) uses[it.value].push_back({r, a});
    auto fixpoint = [&](bool productive) {
      std::vector<char> yes(n, 0);
      std::vector<std::vector<uint32_t>> left(n);  // per alt: items not yet known good
      std::vector<uint32_t> work;
      for (uint32_t r = 0; r < n; ++r) {
        left[r].resize(rules_[r].size());
        for (uint32_t a = 0; a < rules_[r].size(); ++a) {
          uint32_t k = 0;
          bool dead = false;
          for (const Item& it : rules_[r][a]) {
            if (it.is_rule) {
              ++k;
            } else if (!productive || sets_[it.value].empty()) {
              dead = true;  // a character is never empty; an empty class never matches
            }
          }
          left[r][a] = dead ? UINT32_MAX : k;
          if (k == 0 && !dead && !yes[r]) {
            yes[r] = 1;
            work.push_back(r);
          }
        }
      }
      while (!work.empty()) {
        const uint32_t b = work.back();
        work.pop_back();
        for (auto [r, a] : uses[b]) {
          if (left[r][a] == UINT32_MAX || left[r][a] == 0) continue;
          if (--left[r][a] == 0 && !yes[r]) {
            yes[r] = 1;
            work.push_back(r);
          }
        }
      }
      return yes;
    };
    const std::vector<char> nullable = fixpoint(false);
    const std::vector<char> productive = fixpoint(true);
    if (!productive[root]) fail_global("the root rule matches no finite string");
    // Left-corner graph: r -> s when s can be the first thing r matches.
    std::vector<std::vector<uint32_t>> edges(n);
    for (uint32_t r = 0; r < n; ++r)
      for (const Seq& s : rules_[r])
        for (const Item& it : s) {
          if (!it.is_rule) break;
          edges[r].push_back(it.value);
          if (!nullable[it.value]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t s0 = 0; s0 < n; ++s0) {
      if (color[s0]) continue;
      stack.push_back({s0, 0});
      color[s0] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i < edges[r].size()) {
          const uint32_t t = edges[r][i++];
          if (color[t] == 1)
            fail_global("rule '" + names_[t] + "' is left-recursive (it can reach itself without matching a character)");
          if (color[t] == 0) {
            color[t] = 1;
            stack.push_back({t, 0});
          }
        } else {
          color[r] = 2;
          stack.pop_back();
        }
      }
    }
  }

  Grammar flatten(uint32_t root) {
    Grammar g;
    g.root_ = root;
    g.names_ = names_;
    g.sets_ = sets_;
    g.chain_ = chain_;
    g.alts_.resize(rules_.size());
    g.elems_.reserve(n_elems_ + 2 * rules_.size());
    for (uint32_t r = 0; r < rules_.size(); ++r) {
      const Alts& alts = rules_[r];
      for (size_t a = 0; a < alts.size(); ++a) {
        g.alts_[r].push_back(static_cast<uint32_t>(g.elems_.size()));
        for (const Item& it : alts[a])
          g.elems_.push_back(Elem{it.is_rule ? ElemKind::kRule : ElemKind::kChars, it.value});
        g.elems_.push_back(Elem{a + 1 == alts.size() ? ElemKind::kEndRule : ElemKind::kEndAlt, 0});
        g.elem_rule_.resize(g.elems_.size(), r);
      }
    }
    return g;
  }

  std::string_view src_;
  Limits lim_;
  size_t pos_ = 0;
  size_t n_elems_ = 0;
  std::vector<Alts> rules_;
  std::vector<Grammar::Chain> chain_;  // per rule
  std::vector<std::string> names_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<CodeRange>> sets_;
  std::map<std::vector<CodeRange>, uint32_t> set_ids_;
};

Grammar Grammar::from_gbnf(std::string_view source, const Limits& limits) {
  return GbnfParser(source, limits).parse();
}

bool Grammar::set_contains(uint32_t id, uint32_t cp) const {
  const std::vector<CodeRange>& s = sets_[id];
  // First range whose end is >= cp.
  auto it = std::lower_bound(s.begin(), s.end(), cp, [](const CodeRange& r, uint32_t v) { return r.second < v; });
  return it != s.end() && it->first <= cp;
}

uint32_t Grammar::chain_remaining(uint32_t pos) const {
  if (pos >= elems_.size()) return 0;
  const Chain& c = chain_[elem_rule_[pos]];
  return c.length == 0 ? 0 : c.k + 1;
}

uint32_t Grammar::equivalent_position(uint32_t pos, uint32_t horizon) const {
  return horizon != 0 && chain_remaining(pos) > horizon ? chain_position(pos, horizon) : pos;
}

uint32_t Grammar::chain_length(uint32_t pos) const {
  return pos < elems_.size() ? chain_[elem_rule_[pos]].length : 0;
}

uint32_t Grammar::chain_position(uint32_t pos, uint32_t remaining) const {
  if (pos >= elems_.size()) return pos;
  const uint32_t r = elem_rule_[pos];
  const Chain& c = chain_[r];
  if (remaining == 0 || remaining > c.length || c.k + 1 == remaining) return pos;
  const uint32_t target = c.base + remaining - 1;  // a chain's rules are made one after another
  // The rules read `x o_(k-1) | empty` (o_0: `x | empty`): the same offset in the same
  // alternative, where the target has an element of the same kind there.
  const std::vector<uint32_t>& from = alts_[r];
  const std::vector<uint32_t>& to = alts_[target];
  if (from.size() != to.size()) return pos;
  for (size_t a = from.size(); a-- > 0;) {
    if (pos < from[a]) continue;
    const uint32_t p = to[a] + (pos - from[a]);
    return p < elems_.size() && elems_[p].kind == elems_[pos].kind && !is_end(p) ? p : pos;
  }
  return pos;
}

bool Grammar::set_covers(uint32_t id, uint32_t lo, uint32_t hi) const {
  const std::vector<CodeRange>& s = sets_[id];
  auto it = std::lower_bound(s.begin(), s.end(), lo, [](const CodeRange& r, uint32_t v) { return r.second < v; });
  return it != s.end() && it->first <= lo && it->second >= hi;  // ranges are merged: one must hold it all
}

bool Grammar::set_intersects(uint32_t id, uint32_t lo, uint32_t hi) const {
  const std::vector<CodeRange>& s = sets_[id];
  auto it = std::lower_bound(s.begin(), s.end(), lo, [](const CodeRange& r, uint32_t v) { return r.second < v; });
  return it != s.end() && it->first <= hi;
}

std::string_view json_object_gbnf() {
  // Whitespace between tokens is bounded (a model in JSON mode could otherwise loop on newlines
  // forever) and holds at most one newline, so the text never contains "\n\n", a common stop
  // string; strings exclude raw control characters as RFC 8259 requires.
  static constexpr std::string_view kJson = R"gbnf(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
ws     ::= [ \t]{0,8} | "\n" [ \t]{0,16}
)gbnf";
  return kJson;
}

}  // namespace triad::grammar
