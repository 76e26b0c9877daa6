// Context-free grammars over Unicode text, compiled from GBNF (llama.cpp's grammar syntax), for
// constrained decoding (matcher.h runs them).
//
// GBNF, as accepted here:
//   rule      ::= NAME "::=" alternatives          (rules follow each other; "root" is the start)
//   alternatives ::= sequence ("|" sequence)*
//   sequence  ::= (element postfix?)*
//   element   ::= "literal" | [char class] | [^negated class] | . | NAME | "(" alternatives ")"
//   postfix   ::= * | + | ? | {m} | {m,} | {m,n}
// Literals and classes take the escapes \n \r \t \\ \" \' \] \[ \- \/ \xHH \uHHHH \UHHHHHHHH;
// `#` starts a comment to the end of the line. Whitespace, newlines included, separates tokens;
// a rule ends where the next `NAME ::=` begins (so alternatives may continue on the next line,
// a superset of llama.cpp's stricter line rule).
//
// Compiled form: every rule is a list of alternatives, each a sequence of elements that are a
// character set (sorted disjoint code point ranges) or a reference to a rule. Repetitions
// become helper rules (x* is r ::= x r | empty, right-recursive so that matching keeps a flat
// stack; x{m,n} is m copies then n-m nested optionals).
//
// Untrusted input: the source, the number of rules and elements after expanding repetitions,
// repetition counts and nesting depth are bounded (Limits); undefined rules, left recursion
// (direct, indirect, or behind rules that can match the empty string: the matcher could never
// advance) and a root that matches no finite string are errors. Every error is a GrammarError
// naming the problem and its line; nothing is ever allocated beyond the limits.
//
// Thread-safety: a Grammar is immutable after construction; share it freely.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace triad::grammar {

class GrammarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Limits {
  size_t max_source_bytes = 1 << 20;
  size_t max_elements = 200000;    // elements of every rule after expanding repetitions
  size_t max_rules = 50000;
  uint32_t max_repeat = 10000;     // largest m or n in {m,n}
  int max_nesting = 200;           // parentheses
};

enum class ElemKind : uint8_t {
  kEndAlt,   // ends an alternative (another one follows)
  kEndRule,  // ends the last alternative of a rule
  kChars,    // matches one code point of char_sets[value]
  kRule,     // matches rule `value`
};

struct Elem {
  ElemKind kind;
  uint32_t value;
};

using CodeRange = std::pair<uint32_t, uint32_t>;  // inclusive

// Sorted, merged (overlapping and adjacent ranges joined) copy of a set of ranges.
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> r);
// Every code point in [0, U+10FFFF] that normalized ranges `r` leave out.
std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& r);

class Grammar {
 public:
  // Parses and checks GBNF source; the start rule is `root`. Throws GrammarError.
  static Grammar from_gbnf(std::string_view source, const Limits& limits = {});

  // Flat element array: rule r's alternatives start at alt_starts(r)[i]; each runs to a
  // kEndAlt / kEndRule element.
  const std::vector<Elem>& elems() const { return elems_; }
  const std::vector<uint32_t>& alt_starts(uint32_t rule) const { return alts_[rule]; }
  const std::vector<CodeRange>& char_set(uint32_t id) const { return sets_[id]; }
  bool set_contains(uint32_t id, uint32_t cp) const;
  // Whether the set holds every code point in [lo, hi].
  bool set_covers(uint32_t id, uint32_t lo, uint32_t hi) const;
  // Whether the set holds some code point in [lo, hi].
  bool set_intersects(uint32_t id, uint32_t lo, uint32_t hi) const;
  uint32_t root() const { return root_; }
  size_t n_rules() const { return alts_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // Bounded repetitions: x{m,n} leaves a chain of n-m nested optional rules, innermost first,
  // o_0 ::= x | empty and o_k ::= x o_(k-1) | empty, where o_k allows k+1 more repetitions.
  // Text that repeats x fewer than `horizon` times (or none) cannot tell o_k from o_(horizon-1)
  // when k >= horizon, so a position in such an o_k has the same position in o_(horizon-1) as
  // its equivalent; any other position is its own.
  uint32_t equivalent_position(uint32_t pos, uint32_t horizon) const;
  // k + 1 for a position in chain rule o_k (the repetitions it still allows), else 0.
  uint32_t chain_remaining(uint32_t pos) const;
  // The number of rules in pos's chain (0 outside chains).
  uint32_t chain_length(uint32_t pos) const;
  // The same position in the chain rule allowing `remaining` repetitions (pos itself when the
  // chain has no such rule or no such position there).
  uint32_t chain_position(uint32_t pos, uint32_t remaining) const;
  // A rule's place in a chain: o_k of a chain of `length` rules starting at rule `base` (its
  // o_0); length 0 outside chains.
  struct Chain {
    uint32_t base = 0, k = 0, length = 0;
  };
  bool is_end(uint32_t pos) const {
    return elems_[pos].kind == ElemKind::kEndAlt || elems_[pos].kind == ElemKind::kEndRule;
  }

 private:
  friend class GbnfParser;
  std::vector<Elem> elems_;
  std::vector<std::vector<uint32_t>> alts_;
  std::vector<std::vector<CodeRange>> sets_;
  std::vector<std::string> names_;
  std::vector<uint32_t> elem_rule_;  // the rule of each element
  std::vector<Chain> chain_;         // per rule
  uint32_t root_ = 0;
};

// GBNF for one JSON value of any type (RFC 8259; whitespace bounded so that a model cannot
// pad forever), rooted at an object: the grammar of response_format json_object.
std::string_view json_object_gbnf();

}  // namespace triad::grammar
