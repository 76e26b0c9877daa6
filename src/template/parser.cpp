// Parser: template text -> syntax tree (ast.h), over the lexer's segments and tokens
// (lexer.h). The parser is recursive descent with jinja2's operator precedence
// (lowest first): conditional, or, and, not, comparisons / in / is, + -, ~, * / // %, **,
// unary - +, then primaries with postfix .attr [item] [a:b:c] (call) and | filters.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "template/ast.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace triad::tmpl {
namespace {

// Maximum height of a syntax tree (see Node::depth).
constexpr int kMaxTreeDepth = 400;

// Sets n->depth from its children and rejects trees taller than kMaxTreeDepth.
NodePtr seal(std::shared_ptr<Node> n) {
  int d = 0;
  for (const NodePtr& c : n->a)
    if (c) d = std::max(d, c->depth);
  n->depth = d + 1;
  if (n->depth > kMaxTreeDepth)
    template_fail("template syntax error, line ", n->line, ": expressions or statements nested deeper than ",
                  kMaxTreeDepth, " levels");
  return n;
}

NodePtr make(NodeKind k, int line, std::vector<NodePtr> a = {}, std::string name = {}) {
  auto n = std::make_shared<Node>();
  n->kind = k;
  n->line = line;
  n->a = std::move(a);
  n->name = std::move(name);
  return seal(std::move(n));
}

class Parser {
 public:
  Parser(std::vector<Segment> segs, const Limits& limits) : segs_(std::move(segs)), limits_(limits) {}

  NodePtr parse_template() {
    std::string end_tag;
    NodePtr body = parse_body({}, end_tag);
    return body;
  }

 private:
  // ---- Statements.
  // Parses statements until a block tag whose first word is in `ends`; returns the body and
  // leaves that tag's tokens current (end_tag = its word). At the end of the input `ends` must be
  // empty.
  NodePtr parse_body(const std::vector<std::string>& ends, std::string& end_tag) {
    Depth d(*this);
    auto body = std::make_shared<Node>();
    body->kind = NodeKind::kBody;
    while (pos_ < segs_.size()) {
      const Segment& s = segs_[pos_];
      line_ = s.line;
      if (s.kind == SegKind::kText) {
        auto t = make(NodeKind::kText, s.line);
        std::const_pointer_cast<Node>(t)->name = s.body;
        body->a.push_back(t);
        ++pos_;
        continue;
      }
      toks_ = tokenize(s.body, s.line);
      tp_ = 0;
      ++pos_;
      if (s.kind == SegKind::kVar) {
        NodePtr e = parse_expr();
        expect_end();
        body->a.push_back(make(NodeKind::kOutput, s.line, {e}));
        continue;
      }
      const Token& t = peek();
      if (t.kind != Tok::kName) fail_here("expected a statement name");
      const std::string word = t.text;
      for (const std::string& e : ends) {
        if (word == e) {
          end_tag = word;
          ++tp_;
          return seal(body);
        }
      }
      ++tp_;
      body->a.push_back(parse_statement(word));
    }
    if (!ends.empty()) {
      std::string want;
      for (const auto& e : ends) want += (want.empty() ? "" : " or ") + e;
      template_fail("template syntax error: unexpected end of template, expected '", want, "'");
    }
    return body;
  }

  NodePtr parse_statement(const std::string& word) {
    const int line = line_;
    if (word == "if") return parse_if(line);
    if (word == "for") return parse_for(line);
    if (word == "set") return parse_set(line);
    if (word == "macro") return parse_macro(line);
    if (word == "filter") {
      NodePtr chain = parse_filter_chain(nullptr);
      expect_end();
      std::string end;
      NodePtr body = parse_body({"endfilter"}, end);
      expect_end();
      return make(NodeKind::kFilterBlock, line, {chain, body});
    }
    if (word == "break" || word == "continue") {
      if (loop_depth_ == 0) fail_here("'" + word + "' outside a loop");
      expect_end();
      return make(word == "break" ? NodeKind::kBreak : NodeKind::kContinue, line);
    }
    if (word == "generation") {  // transformers' assistant-mask extension: plain content here
      expect_end();
      std::string end;
      NodePtr body = parse_body({"endgeneration"}, end);
      expect_end();
      return body;
    }
    fail_here("unknown statement '" + word + "'");
  }

  NodePtr parse_if(int line) {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kIf;
    n->line = line;
    NodePtr cond = parse_expr();
    expect_end();
    for (;;) {
      std::string end;
      NodePtr body = parse_body({"elif", "else", "endif"}, end);
      n->a.push_back(cond);
      n->a.push_back(body);
      if (end == "endif") {
        expect_end();
        return seal(n);
      }
      if (end == "else") {
        expect_end();
        std::string end2;
        NodePtr els = parse_body({"endif"}, end2);
        expect_end();
        n->a.push_back(els);
        return seal(n);
      }
      cond = parse_expr();  // elif
      expect_end();
    }
  }

  NodePtr parse_for(int line) {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kFor;
    n->line = line;
    const bool paren = accept_op("(");
    do {
      n->names.push_back(expect_name());
    } while (accept_op(","));
    if (paren) expect_op(")");
    if (!accept_name("in")) fail_here("expected 'in' in a for loop");
    NodePtr iter = parse_expr(/*allow_cond=*/false);
    NodePtr filter;
    if (accept_name("if")) filter = parse_expr(/*allow_cond=*/false);
    accept_name("recursive");
    expect_end();
    ++loop_depth_;
    const int refs_before = loop_refs_;
    std::string end;
    NodePtr body = parse_body({"else", "endfor"}, end);
    n->flag = loop_refs_ != refs_before;  // the body reads `loop`: build it per iteration
    --loop_depth_;
    NodePtr els;
    expect_end();
    if (end == "else") {
      std::string end2;
      els = parse_body({"endfor"}, end2);
      expect_end();
    }
    n->a = {iter, body, els, filter};
    return seal(n);
  }

  NodePtr parse_set(int line) {
    auto n = std::make_shared<Node>();
    n->line = line;
    std::string first = expect_name();
    if (accept_op(".")) {
      n->kind = NodeKind::kSet;
      n->name = first;
      n->attr = expect_name();
      expect_op("=");
      n->a.push_back(parse_tuple_or_expr());
      expect_end();
      return seal(n);
    }
    n->names.push_back(first);
    while (accept_op(",")) n->names.push_back(expect_name());
    if (accept_op("=")) {
      n->kind = NodeKind::kSet;
      n->a.push_back(parse_tuple_or_expr());
      expect_end();
      return seal(n);
    }
    if (n->names.size() != 1) fail_here("a block set takes one name");
    n->kind = NodeKind::kSetBlock;
    n->name = first;
    NodePtr filter;
    if (peek().kind == Tok::kOp && peek().text == "|") filter = parse_filter_chain(nullptr, /*leading_pipe=*/true);
    expect_end();
    std::string end;
    NodePtr body = parse_body({"endset"}, end);
    expect_end();
    n->a = {body, filter};
    return seal(n);
  }

  NodePtr parse_macro(int line) {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kMacro;
    n->line = line;
    n->name = expect_name();
    expect_op("(");
    std::vector<NodePtr> defaults;
    if (!accept_op(")")) {
      do {
        n->names.push_back(expect_name());
        defaults.push_back(accept_op("=") ? parse_expr() : nullptr);
      } while (accept_op(","));
      expect_op(")");
    }
    expect_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    NodePtr body = parse_body({"endmacro"}, end);
    loop_depth_ = saved;
    expect_end();
    n->a.push_back(body);
    for (auto& d : defaults) n->a.push_back(d);
    return seal(n);
  }

  // ---- Expressions.
  NodePtr parse_tuple_or_expr() {
    NodePtr first = parse_expr();
    if (!(peek().kind == Tok::kOp && peek().text == ",")) return first;
    std::vector<NodePtr> items{first};
    while (accept_op(",")) {
      if (peek().kind == Tok::kEnd) break;
      items.push_back(parse_expr());
    }
    return make(NodeKind::kTuple, line_, std::move(items));
  }

  NodePtr parse_expr(bool allow_cond = true) {
    Depth d(*this);
    NodePtr e = parse_or();
    if (allow_cond && peek_name("if")) {
      ++tp_;
      NodePtr cond = parse_or();
      NodePtr els;
      if (accept_name("else")) els = parse_expr();
      return make(NodeKind::kCond, line_, {cond, e, els});
    }
    return e;
  }
  NodePtr parse_or() {
    NodePtr l = parse_and();
    while (accept_name("or")) l = make(NodeKind::kBinary, line_, {l, parse_and()}, "or");
    return l;
  }
  NodePtr parse_and() {
    NodePtr l = parse_not();
    while (accept_name("and")) l = make(NodeKind::kBinary, line_, {l, parse_not()}, "and");
    return l;
  }
  NodePtr parse_not() {
    Depth d(*this);
    if (accept_name("not")) return make(NodeKind::kUnary, line_, {parse_not()}, "not");
    return parse_compare();
  }
  NodePtr parse_compare() {
    NodePtr l = parse_math1();
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                                 t.text == "<=" || t.text == ">=")) {
        std::string op = t.text;
        ++tp_;
        l = make(NodeKind::kBinary, line_, {l, parse_math1()}, op);
      } else if (t.kind == Tok::kName && t.text == "in") {
        ++tp_;
        l = make(NodeKind::kBinary, line_, {l, parse_math1()}, "in");
      } else if (t.kind == Tok::kName && t.text == "not" && peek(1).kind == Tok::kName && peek(1).text == "in") {
        tp_ += 2;
        l = make(NodeKind::kBinary, line_, {l, parse_math1()}, "notin");
      } else {
        return l;
      }
    }
  }
  NodePtr parse_math1() {
    NodePtr l = parse_concat();
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::kOp && (t.text == "+" || t.text == "-")) {
        std::string op = t.text;
        ++tp_;
        l = make(NodeKind::kBinary, line_, {l, parse_concat()}, op);
      } else {
        return l;
      }
    }
  }
  NodePtr parse_concat() {
    NodePtr l = parse_math2();
    while (accept_op("~")) l = make(NodeKind::kBinary, line_, {l, parse_math2()}, "~");
    return l;
  }
  NodePtr parse_math2() {
    NodePtr l = parse_pow();
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::kOp && (t.text == "*" || t.text == "/" || t.text == "//" || t.text == "%")) {
        std::string op = t.text;
        ++tp_;
        l = make(NodeKind::kBinary, line_, {l, parse_pow()}, op);
      } else {
        return l;
      }
    }
  }
  NodePtr parse_pow() {
    NodePtr l = parse_unary();
    while (accept_op("**")) l = make(NodeKind::kBinary, line_, {l, parse_unary()}, "**");
    return l;
  }
  NodePtr parse_unary() {
    Depth d(*this);
    if (accept_op("-")) return parse_filters_and_tests(make(NodeKind::kUnary, line_, {parse_unary_operand()}, "-"));
    if (accept_op("+")) return parse_filters_and_tests(make(NodeKind::kUnary, line_, {parse_unary_operand()}, "+"));
    return parse_filters_and_tests(parse_postfix(parse_primary()));
  }
  NodePtr parse_unary_operand() {
    Depth d(*this);
    if (accept_op("-")) return make(NodeKind::kUnary, line_, {parse_unary_operand()}, "-");
    if (accept_op("+")) return make(NodeKind::kUnary, line_, {parse_unary_operand()}, "+");
    return parse_postfix(parse_primary());
  }

  NodePtr parse_filters_and_tests(NodePtr e) {
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::kOp && t.text == "|") {
        e = parse_filter_chain(e, /*leading_pipe=*/true, /*one=*/true);
      } else if (t.kind == Tok::kName && t.text == "is") {
        ++tp_;
        auto n = std::make_shared<Node>();
        n->kind = NodeKind::kTest;
        n->line = line_;
        n->flag = accept_name("not");
        n->name = expect_name();
        n->a.push_back(e);
        if (peek().kind == Tok::kOp && peek().text == "(") {
          ++tp_;
          parse_call_args(*n);
        } else if (starts_test_argument()) {
          n->a.push_back(parse_postfix(parse_primary()));
        }
        e = seal(n);
      } else {
        return e;
      }
    }
  }
  bool starts_test_argument() {
    const Token& t = peek();
    if (t.kind == Tok::kString || t.kind == Tok::kInt || t.kind == Tok::kFloat) return true;
    if (t.kind == Tok::kOp) return t.text == "[" || t.text == "{";
    if (t.kind == Tok::kName) {
      static const char* stop[] = {"else", "or", "and", "is", "in", "not", "if", "recursive"};
      for (const char* s : stop)
        if (t.text == s) return false;
      return true;
    }
    return false;
  }

  // Parses `| name(args) | name ...` starting at the current token (a leading '|' is consumed when
  // `leading_pipe`). `operand` is the filtered expression (null inside filter blocks).
  NodePtr parse_filter_chain(NodePtr operand, bool leading_pipe = false, bool one = false) {
    NodePtr e = operand;
    bool first = true;
    for (;;) {
      if (leading_pipe || !first) {
        if (!accept_op("|")) return e;
      }
      first = false;
      auto n = std::make_shared<Node>();
      n->kind = NodeKind::kFilter;
      n->line = line_;
      n->name = expect_name();
      n->a.push_back(e);
      if (accept_op("(")) parse_call_args(*n);
      e = seal(n);
      if (one) return e;
    }
  }

  // After '(' : positional and keyword arguments up to ')', appended to n.a / n.names (names
  // are aligned with a[1..]; "" for positional).
  void parse_call_args(Node& n) {
    while (n.names.size() + 1 < n.a.size()) n.names.push_back("");
    if (accept_op(")")) return;
    do {
      if (peek().kind == Tok::kOp && peek().text == ")") break;
      if (peek().kind == Tok::kName && peek(1).kind == Tok::kOp && peek(1).text == "=") {
        n.names.push_back(peek().text);
        tp_ += 2;
      } else {
        n.names.push_back("");
      }
      n.a.push_back(parse_expr());
    } while (accept_op(","));
    expect_op(")");
  }

  NodePtr parse_postfix(NodePtr e) {
    for (;;) {
      const Token& t = peek();
      if (t.kind != Tok::kOp) return e;
      if (t.text == ".") {
        ++tp_;
        const Token& a = peek();
        if (a.kind == Tok::kName) {
          auto n = make(NodeKind::kAttr, line_, {e}, a.text);
          ++tp_;
          e = n;
        } else if (a.kind == Tok::kInt) {
          auto lit = make(NodeKind::kLiteral, line_);
          std::const_pointer_cast<Node>(lit)->value = Value(a.i);
          ++tp_;
          e = make(NodeKind::kItem, line_, {e, lit});
        } else {
          fail_here("expected an attribute name after '.'");
        }
      } else if (t.text == "[") {
        ++tp_;
        NodePtr parts[3];
        int n_colon = 0;
        if (!(peek().kind == Tok::kOp && peek().text == ":")) parts[0] = parse_expr();
        while (accept_op(":")) {
          ++n_colon;
          if (n_colon > 2) fail_here("too many ':' in a slice");
          if (!(peek().kind == Tok::kOp && (peek().text == ":" || peek().text == "]")))
            parts[n_colon] = parse_expr();
        }
        expect_op("]");
        if (n_colon == 0) {
          if (!parts[0]) fail_here("empty subscript");
          e = make(NodeKind::kItem, line_, {e, parts[0]});
        } else {
          e = make(NodeKind::kSlice, line_, {e, parts[0], parts[1], parts[2]});
        }
      } else if (t.text == "(") {
        ++tp_;
        auto n = std::make_shared<Node>();
        n->kind = NodeKind::kCall;
        n->line = line_;
        n->a.push_back(e);
        parse_call_args(*n);
        e = seal(n);
      } else {
        return e;
      }
    }
  }

  NodePtr parse_primary() {
    Depth d(*this);
    const Token t = peek();
    switch (t.kind) {
      case Tok::kName: {
        ++tp_;
        if (t.text == "true" || t.text == "True") return literal(Value(true));
        if (t.text == "false" || t.text == "False") return literal(Value(false));
        if (t.text == "none" || t.text == "None") return literal(Value::none());
        if (t.text == "loop") ++loop_refs_;
        return make(NodeKind::kName, line_, {}, t.text);
      }
      case Tok::kString: {
        std::string s;
        while (peek().kind == Tok::kString) s += toks_[tp_++].text;  // adjacent literals join
        return literal(Value(std::move(s)));
      }
      case Tok::kInt: ++tp_; return literal(Value(t.i));
      case Tok::kFloat: ++tp_; return literal(Value(t.f));
      case Tok::kOp: {
        if (t.text == "(") {
          ++tp_;
          if (accept_op(")")) return make(NodeKind::kTuple, line_);
          NodePtr first = parse_expr();
          if (accept_op(")")) return first;
          std::vector<NodePtr> items{first};
          while (accept_op(",")) {
            if (peek().kind == Tok::kOp && peek().text == ")") break;
            items.push_back(parse_expr());
          }
          expect_op(")");
          return make(NodeKind::kTuple, line_, std::move(items));
        }
        if (t.text == "[") {
          ++tp_;
          std::vector<NodePtr> items;
          while (!accept_op("]")) {
            items.push_back(parse_expr());
            if (!accept_op(",")) {
              expect_op("]");
              break;
            }
          }
          return make(NodeKind::kList, line_, std::move(items));
        }
        if (t.text == "{") {
          ++tp_;
          std::vector<NodePtr> items;
          while (!accept_op("}")) {
            items.push_back(parse_expr());
            expect_op(":");
            items.push_back(parse_expr());
            if (!accept_op(",")) {
              expect_op("}");
              break;
            }
          }
          return make(NodeKind::kDict, line_, std::move(items));
        }
        break;
      }
      default: break;
    }
    fail_here(t.kind == Tok::kEnd ? "unexpected end of expression" : "unexpected '" + t.text + "'");
  }

  NodePtr literal(Value v) {
    auto n = std::make_shared<Node>();
    n->kind = NodeKind::kLiteral;
    n->line = line_;
    n->value = std::move(v);
    return n;
  }

  // ---- Token helpers.
  const Token& peek(size_t k = 0) const {
    const size_t i = std::min(tp_ + k, toks_.size() - 1);
    return toks_[i];
  }
  bool peek_name(const char* w) const { return peek().kind == Tok::kName && peek().text == w; }
  bool accept_name(const char* w) {
    if (!peek_name(w)) return false;
    ++tp_;
    return true;
  }
  bool accept_op(const char* op) {
    if (peek().kind == Tok::kOp && peek().text == op) {
      ++tp_;
      return true;
    }
    return false;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail_here(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    if (peek().kind != Tok::kName) fail_here("expected a name");
    return toks_[tp_++].text;
  }
  void expect_end() {
    if (peek().kind != Tok::kEnd) fail_here("unexpected '" + peek().text + "'");
  }
  [[noreturn]] void fail_here(const std::string& what) const {
    template_fail("template syntax error, line ", line_, ": ", what);
  }

  struct Depth {
    explicit Depth(Parser& p) : p(p) {
      if (++p.depth_ > p.limits_.max_nesting * 4)
        template_fail("template syntax error, line ", p.line_, ": nesting deeper than ", p.limits_.max_nesting);
    }
    ~Depth() { --p.depth_; }
    Parser& p;
  };

  std::vector<Segment> segs_;
  const Limits& limits_;
  size_t pos_ = 0;
  std::vector<Token> toks_;
  size_t tp_ = 0;
  int line_ = 1;
  int depth_ = 0;
  int loop_depth_ = 0;
  int loop_refs_ = 0;  // `loop` names parsed so far
};

}  // namespace

NodePtr parse_template(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_source_bytes)
    template_fail("the template has ", source.size(), " bytes; the limit is ", limits.max_source_bytes);
  // jinja2 drops a single trailing newline (keep_trailing_newline=False).
  if (source.size() >= 2 && source.substr(source.size() - 2) == "\r\n") source.remove_suffix(2);
  else if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  Parser p(segment(source), limits);
  return p.parse_template();
}

}  // namespace triad::tmpl
