// JSON Schema -> GBNF (grammar.h), for response_format json_schema and tool arguments.
//
// Every document the grammar admits validates against the schema; where the schema's full
// language cannot be expressed exactly, the grammar admits a subset that still validates
// (never the other way round):
//   - type (each JSON type, or a list), enum, const, anyOf, oneOf (as anyOf: keep the branches
//     disjoint), allOf with one entry, $ref to "#", "#/$defs/..." or "#/definitions/..."
//     (recursion included);
//   - objects: properties in their declared order, required ones always, optional ones may be
//     left out; extra keys only when the schema declares no properties (a map) and
//     additionalProperties is absent, true or a schema (which their values follow);
//   - arrays: prefixItems, items (a schema, or false), minItems / maxItems; uniqueItems when the
//     items are an enum or const of at most 10 values (a state per set of values written);
//   - strings: minLength / maxLength, format date (no 29 February), time and date-time (whole
//     seconds, as Python's validators read them), uuid and
//     email, pattern (a regex subset compiled to grammar rules, so matching is an automaton,
//     never backtracking: literals, ., classes, \d \w \s and their negations, groups,
//     alternation, * + ? {m,n}; ^ and $ only at the ends; an unanchored side admits up to 32
//     characters of any text); pattern with lengths when the pattern implies them or is
//     anchored with its variable length in one repeated character (which takes the bounds);
//   - integers: minimum / maximum / exclusiveMinimum / exclusiveMaximum (as digit ranges),
//     multipleOf (listed when at most 1,000 values; a power of ten; or up to 20, as digits
//     with their remainder);
//   - numbers: minimum / maximum / exclusiveMinimum / exclusiveMaximum with any bound (draft 4's
//     boolean exclusives too), exactly: plain decimals of at most 15 digits (no exponent),
//     compared digit by digit with the bound's shortest decimal form, which decides exactly
//     what the parsed double compares to (DBL_DIG).
// Annotations (title, description, default, examples, $schema, $id, $comment, ...) are ignored.
// Any other keyword, an unknown format, or a combination the grammar cannot express is, under
// `strict`, a GrammarError naming it; without `strict` it is dropped and reported (SchemaOptions).
// Untrusted input: depth, the number of rules and the output size are bounded.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace triad::grammar {

struct SchemaOptions {
  // strict: a keyword the grammar cannot enforce is an error naming it. Otherwise it is dropped
  // (the grammar admits more there than the schema does) and its name added to `dropped`.
  bool strict = false;
  std::vector<std::string>* dropped = nullptr;
  std::string root_name = "root";  // the rule that matches the document
  std::string prefix;              // prepended to every other generated rule name
  bool with_common = true;         // also emit the shared rules (json_schema_common_gbnf)
  int max_depth = 64;            // nesting of subschemas
  size_t max_rules = 4000;       // rules emitted
  size_t max_bytes = 1 << 20;    // GBNF text
};

// GBNF whose `root` admits the JSON documents of `schema`. Throws GrammarError.
// Takes an ordered_json so that properties keep the order the schema declares them in (a model
// answers better when, say, "reasoning" comes before "answer").
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaOptions& opts = {});

// The rules every compiled schema uses (whitespace, generic JSON values, formats): emit them
// once when several schemas (with distinct prefixes and no common rules) share one grammar.
std::string_view json_schema_common_gbnf();

}  // namespace triad::grammar
