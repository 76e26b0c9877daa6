// Numbers as digit grammars, for the JSON Schema compiler (json_schema.h): integer ranges,
// integer multiples of k within a range, and decimal ranges whose bounds are doubles. Each builds
// a GBNF expression over the digits of a number's text, with rules named through `add_rule`
// (body -> rule name; the compiler shares equal bodies). Internal to src/grammar.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace triad::grammar::digits {

using RuleFn = std::function<std::string(const std::string& hint, const std::string& body)>;

inline constexpr int64_t kIntLimit = 999999999999999;  // 15 digits: what integer rules admit

// "( a | b | ... )", or the one alternative alone; "" for none.
std::string alternation(const std::vector<std::string>& alts);

// Integers in [lo, hi] (|lo|, |hi| <= kIntLimit), without leading zeros or "-0".
std::string int_range(int64_t lo, int64_t hi);

// Non-negative integers in [lo, hi] divisible by k: digit states (position, tight against lo's
// / hi's digits, remainder so far), the free ones shared by remaining length. "" when none.
std::string mod_range(uint64_t lo, uint64_t hi, int k, const RuleFn& add_rule);

// A non-negative decimal: integer digits (no leading zeros; "0" for zero) and fraction digits
// (no trailing zeros).
struct Dec {
  std::string ip = "0", fp;
};
// The shortest decimal that reads back as |v|.
Dec dec_of(double v);

struct DecBound {
  Dec v;
  bool inclusive = true;
};

// Magnitudes m with lo <= m (or <) and m <= hi (or <; none: unbounded), written without sign or
// exponent with at most 15 digits in all (see digit_ranges.cpp for why that is exact). "" when
// no such number exists.
std::string decimal_range(const DecBound& lo, const std::optional<DecBound>& hi, const RuleFn& add_rule);

}  // namespace triad::grammar::digits
