// JSON Schema's `pattern` (an ECMA-262 regex subset) compiled to a GBNF expression for the body
// of a JSON string, so that matching is an automaton: literals and escapes, classes ([...], \d
// \w \s and their negations: ASCII-based complements), groups, alternation, the quantifiers
// ? * + {m} {m,} {m,n}, and ^ / $ anchors (an unanchored side admits up to 32 more characters).
// minLength / maxLength are applied exactly when the pattern implies them or when it is anchored
// and all its variable length sits in one repeated character; otherwise they are reported as
// unenforceable. Used by json_schema.cpp; written for this project.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace triad::grammar {

// Called for a keyword the grammar cannot enforce ("minLength" / "maxLength") and why; the
// caller decides (an error under strict, else the keyword is dropped).
using Unenforceable = std::function<void(const std::string& keyword, const std::string& why)>;

// The GBNF expression for a string body matching `re`, held to lengths [min_len, max_len]
// (max_len -1: none). Throws GrammarError ("json_schema: pattern: ...") for a regex outside the
// subset or bounds that admit no string.
std::string pattern_to_gbnf(const std::string& re, int64_t min_len, int64_t max_len,
                            const Unenforceable& unenforceable);

}  // namespace triad::grammar
