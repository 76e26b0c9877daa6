// GBNF parsing and checks, byte-level matching (UTF-8 included) and token masks checked against
// a brute-force simulation of every token.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cstdlib>
#include <filesystem>

#include "gguf/gguf_file.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace triad::grammar;

namespace {

std::shared_ptr<const Grammar> gbnf(std::string_view src) {
  return std::make_shared<const Grammar>(Grammar::from_gbnf(src));
}

// A vocabulary of the given pieces; id 0 is an end-of-generation token.
std::shared_ptr<const Vocab> vocab(std::vector<std::string> pieces) {
  pieces.insert(pieces.begin(), "</s>");
  std::vector<char> gen(pieces.size(), 1);
  gen[0] = 0;
  return std::make_shared<const Vocab>(pieces, gen, std::vector<int32_t>{0});
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text, bool complete = true) {
  auto c = std::make_shared<Constraint>(g, vocab({"a"}));
  Matcher m(c);
  if (!m.accept_bytes(text)) return false;
  return !complete || m.accepting();
}

void expect_error(std::string_view src, std::string_view needle) {
  try {
    Grammar::from_gbnf(src);
    ADD_FAILURE() << "no error for: " << src;
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Gbnf, ParsesAndMatchesBasics) {
  auto g = gbnf(R"(root ::= "ab" [c-e]+ ("x" | "yz")? tail   # comment
tail ::= [^q]{2}
)");
  EXPECT_TRUE(matches(g, "abcdxzz"));
  EXPECT_TRUE(matches(g, "abeyzqq", false) == false);
  EXPECT_TRUE(matches(g, "abc12"));
  EXPECT_FALSE(matches(g, "ab12"));
  EXPECT_FALSE(matches(g, "abcxq"));                // tail takes no q
  EXPECT_FALSE(matches(g, "abcx"));                 // tail needs two characters
  EXPECT_TRUE(matches(g, "abcx", false));           // ... but the prefix is fine
  EXPECT_TRUE(matches(g, "abceyzé\xe2\x82\xac"));   // multi-byte characters in [^q]
}

TEST(Gbnf, OnlyWellFormedUtf8Matches) {
  auto g = gbnf("root ::= [^\\x00]*");
  EXPECT_TRUE(matches(g, "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xed\x9f\xbf\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(matches(g, "\xf0\x80\x81\xbb", false));  // overlong '{'
  EXPECT_FALSE(matches(g, "\xc1\xbb", false));            // overlong
  EXPECT_FALSE(matches(g, "\xe0\x81", false));            // overlong, caught at the second byte
  EXPECT_FALSE(matches(g, "\xed\xa0\x80", false));       // a surrogate
  EXPECT_FALSE(matches(g, "\xf4\x90\x80\x80", false));  // beyond U+10FFFF
  EXPECT_FALSE(matches(g, "\x80", false));                 // a lone continuation byte
  EXPECT_FALSE(matches(g, "\xc3"));                        // incomplete at the end
  EXPECT_TRUE(matches(g, "\xc3", false));
}

TEST(Gbnf, AlternativesMayContinueOnTheNextLine) {
  auto g = gbnf("root ::= a\n  | b\na ::= \"1\"\nb ::= \"2\" \"3\"?\n");
  EXPECT_TRUE(matches(g, "1"));
  EXPECT_TRUE(matches(g, "23"));
  EXPECT_FALSE(matches(g, "3"));
}

TEST(Gbnf, RepetitionCounts) {
  auto g = gbnf(R"(root ::= "x"{2,4} "y"{3} "z"{1,})");
  EXPECT_FALSE(matches(g, "xyyyz"));
  EXPECT_TRUE(matches(g, "xxyyyz"));
  EXPECT_TRUE(matches(g, "xxxxyyyzzz"));
  EXPECT_FALSE(matches(g, "xxxxxyyyz"));
  EXPECT_FALSE(matches(g, "xxyyz"));
}

TEST(Gbnf, EscapesAndUnicode) {
  auto g = gbnf(R"(root ::= "\x41\u00e9\U0001F600\n\"\\" [\[\]\-]  "€")");
  EXPECT_TRUE(matches(g, "Aé😀\n\"\\-€"));
  EXPECT_TRUE(matches(g, "Aé😀\n\"\\]€"));
  EXPECT_FALSE(matches(g, "Aé😀\n\"\\x€"));
}

TEST(Gbnf, Errors) {
  expect_error("", "empty");
  expect_error("root ::= foo", "'foo' is used but never defined");
  expect_error("a ::= \"x\"", "no 'root'");
  expect_error("root ::= \"x", "unterminated");
  expect_error("root ::= [a-", "unterminated");
  expect_error("root ::= [z-a]", "out of order");
  expect_error("root ::= (\"x\"", "expected ')'");
  expect_error("root ::= root \"x\" | \"y\"", "left-recursive");
  expect_error("root ::= a \"x\"\na ::= b\nb ::= \"\" | root", "left-recursive");
  expect_error("root ::= e root | \"y\"\ne ::= \"z\"?", "left-recursive");
  expect_error("root ::= \"x\" root", "no finite string");
  expect_error("root ::= \"x\"{5,2}", "n < m");
  expect_error("root ::= \"x\"{100000}", "limit");
  expect_error("root ::= \"x\"{0,9999} \"y\"{0,9999} \"z\"{0,9999} \"w\"{0,9999} \"v\"{0,9999}"
               " \"u\"{0,9999} \"t\"{0,9999} \"s\"{0,9999} \"r\"{0,9999} \"q\"{0,9999} \"p\"{0,9999}",
               "more than");
  expect_error("root ::= \"\\q\"", "unknown escape");
  expect_error("root ::= \"x\"\nroot ::= \"y\"", "defined twice");
  expect_error("root ::= " + std::string(300, '(') + "\"x\"" + std::string(300, ')'), "nested");
  expect_error("root ::= \"\xff\"", "UTF-8");
  expect_error("root ::= \"a\" $", "unexpected character");
}

TEST(Gbnf, AmbiguityIsBounded) {
  // Equal stacks merge (nodes are hash-consed): every split of a run of x's is one state.
  auto g = gbnf("root ::= a*\na ::= \"x\" | \"x\" \"x\" | \"x\" \"x\" \"x\" | b\nb ::= \"x\"+");
  auto c = std::make_shared<Constraint>(g, vocab({"x"}), MatcherLimits{64, 4096, 8});
  Matcher m(c);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(m.accept_bytes("x"));
  EXPECT_TRUE(m.accepting());
  // Truly distinct stacks (each x remembers whether an a or a b closes it) double every step:
  // the limit stops them with an error instead of exhausting memory.
  auto h = gbnf("root ::= \"x\" root \"a\" | \"x\" root \"b\" | \"\"");
  auto ch = std::make_shared<Constraint>(h, vocab({"x"}), MatcherLimits{64, 4096, 8});
  Matcher mh(ch);
  EXPECT_THROW(
      {
        for (int i = 0; i < 20; ++i) mh.accept_bytes("x");
      },
      GrammarError);
}

TEST(Gbnf, JsonObjectGrammar) {
  auto g = gbnf(json_object_gbnf());
  EXPECT_TRUE(matches(g, R"({"a": [1, -2.5e3, true, null, {"b": "\u00e9\n"}], "c": {}})"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_TRUE(matches(g, "{\n  \"k\" : \"v\"\n}"));
  EXPECT_FALSE(matches(g, "[]"));             // the root is an object
  EXPECT_FALSE(matches(g, R"({"a": 01})"));   // no leading zeros
  EXPECT_FALSE(matches(g, R"({"a": "x)", false) == false);
  EXPECT_FALSE(matches(g, "{\"a\": \"\x01\"}"));  // raw control character
  EXPECT_FALSE(matches(g, R"({"a" 1})"));
  EXPECT_FALSE(matches(g, R"({"a": 1,})"));
  EXPECT_FALSE(matches(g, R"({'a': 1})"));
  EXPECT_TRUE(matches(g, R"({"a": "x)", false));
}

// The mask must equal what feeding each token's bytes says, in every state along random walks;
// with the memoized trie walk, and with the unmemoized one it falls back to (walk_states 1).
class MatcherBruteForce : public ::testing::TestWithParam<size_t> {};
INSTANTIATE_TEST_SUITE_P(WalkStates, MatcherBruteForce, ::testing::Values(size_t{4096}, size_t{1}));

TEST_P(MatcherBruteForce, MaskEqualsBruteForce) {
  std::vector<std::string> pieces = {"{", "}", "{\"", "\":", "\"", ",", " ", "\n", "a", "ab", "b\"", "\": \"",
                                     "1", "12", "-", ".", "e", "true", "tr", "ue", "null", "[", "]", "],",
                                     "\\", "\\n", "\\u", "00", "e9", "é", "\xc3", "\xa9", "\xe2\x82", "\xac",
                                     "\"}", "\"},", "}}", " {\"", "x\":1}", "\x01"};
  auto v = vocab(pieces);
  MatcherLimits lim;
  lim.walk_states = GetParam();
  auto c = std::make_shared<Constraint>(gbnf(json_object_gbnf()), v, lim);
  std::mt19937 rng(7);
  TokenMask mask;
  int checked_states = 0;
  for (int walk = 0; walk < 40; ++walk) {
    Matcher m(c);
    for (int step = 0; step < 40; ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v->n_vocab(); ++id) {
        Matcher probe = m;
        const bool ok = probe.accept_token(id);
        EXPECT_EQ(mask.test(id), ok) << "token '" << v->piece(id) << "' (id " << id << ") at walk " << walk
                                     << " step " << step;
        if (ok) allowed.push_back(id);
      }
      ++checked_states;
      if (allowed.empty() || (allowed.size() == 1 && allowed[0] == 0)) break;
      int32_t pick;
      do {
        pick = allowed[rng() % allowed.size()];
      } while (pick == 0 && allowed.size() > 1 && step < 30);
      if (pick == 0) break;
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
  EXPECT_GT(checked_states, 400);
  const Constraint::Stats s = c->stats();
  EXPECT_GT(s.state_hits, 0);
  EXPECT_GT(s.positions_computed, 0);
  EXPECT_GT(s.uncertain_checked, 0);  // deep stacks exercised the context-dependent path
}

// Random walks (uniform among the allowed tokens, id 0 = end-of-generation excluded) that check
// at every step that the mask equals what feeding each token's bytes says. Returns the steps
// taken; on_pick sees every token taken.
int walk_against_brute_force(const std::shared_ptr<Constraint>& c, uint32_t seed, int walks, int steps,
                             const std::function<void(int32_t)>& on_pick = nullptr) {
  const Vocab& v = c->vocab();
  std::mt19937 rng(seed);
  TokenMask mask;
  int taken = 0;
  for (int w = 0; w < walks; ++w) {
    Matcher m(c);
    for (int s = 0; s < steps; ++s, ++taken) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v.n_vocab(); ++id) {
        Matcher probe = m;
        const bool ok = probe.accept_token(id);
        if (mask.test(id) != ok) {
          ADD_FAILURE() << "token " << id << " '" << v.piece(id) << "': mask says " << mask.test(id) << ", its bytes say "
                        << ok << " (walk " << w << ", step " << s << ")";
          return taken;
        }
        if (ok && id != 0) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      if (on_pick) on_pick(pick);
      if (!m.accept_token(pick)) {
        ADD_FAILURE() << "an allowed token was refused: " << pick;
        return taken;
      }
    }
  }
  return taken;
}

// Long bounded repetitions (maxLength, {m,n}): positions farther from the bound than any token
// is long share one trie walk, and the masks still equal brute force right up to the bound.
TEST(Matcher, LongRepetitionsShareStackTops) {
  auto v = vocab({"\"", "a", "b", "ab", "ba", "abc", "cab", "a\"", "ab\",", "\",", ",", ",ab", "bcab", "ccc\"", "x"});
  ASSERT_EQ(v->max_chars(), 4);
  auto g = gbnf(R"(root ::= "\"" [a-c]{0,60} "\"" ( "," [a-c]{2,50} )?)");
  auto c = std::make_shared<Constraint>(g, v);
  const int steps = walk_against_brute_force(c, 3, 30, 200);
  EXPECT_GT(steps, 500);
  // 110 repetition positions; only those within max_chars() + 2 of a bound are walked apart.
  EXPECT_LT(c->stats().positions_computed, 40);
}

// A vocabulary with tokens of kLongChars characters and more (code vocabularies have runs of
// 100+ spaces or dashes): repetitions share their walks from kLongChars on, the long tokens are
// checked on the real stack, and the masks still equal brute force far from and near the bounds.
TEST(Matcher, LongTokensAreCheckedOnTheRealStack) {
  const std::string a33(33, 'a'), a40(40, 'a'), b40(40, 'b');
  auto v = vocab({"\"", "a", "b", "ab", "abc", "a\"", "\",", ",", ",ab", a33, a40, a33 + "\"", b40 + "\",", "\"," + a40,
                  std::string(90, 'c'), "x"});
  ASSERT_GE(v->max_chars(), Vocab::kLongChars);
  ASSERT_EQ(v->long_ids().size(), 6u);
  auto g = gbnf(R"(root ::= "\"" [a-c]{0,150} "\"" ( "," [a-c]{2,120} )?)");
  auto c = std::make_shared<Constraint>(g, v);
  int long_taken = 0;
  const int steps =
      walk_against_brute_force(c, 9, 60, 200, [&](int32_t pick) { long_taken += v->piece(pick).size() >= 33; });
  EXPECT_GT(steps, 1000);
  EXPECT_GT(long_taken, 50);
  // 268 repetition positions; apart from those within kLongChars of a bound, they share walks.
  EXPECT_LT(c->stats().positions_computed, 90);
}

// Trie walks give one state to partial characters whose every completion each stack takes
// (C3 and D0 stand for C2; E2 for E1); the masks must still equal brute force, including where
// a set takes only some completions (U+3000-U+3005 of E3's U+3000-U+3FFF).
TEST(Matcher, PartialCharactersMatchBruteForce) {
  auto v = vocab({"x", "\xc2", "\xc3", "\xd0", "\xc3\xa9", "\xd0\x96", "\xc2\x80", "\x80", "\x85", "\x86", "\xbf",
                  "\xe1", "\xe2", "\xe2\x80", "\xe2\x80\x94", "\xe1\xbf", "\xe3", "\xe3\x80", "\xe3\x80\x85",
                  "\xe3\x80\x86", "\xe5\x80\x80", "\xf0\x9f", "\x98\x80", "x\xc3", "\xa9x", "\x80\x86x"});
  auto g = gbnf(R"(root ::= ( [\u0080-\u07ff] | [\u1000-\u2fff] | [\u3000-\u3005] | "x" ){0,40})");
  auto c = std::make_shared<Constraint>(g, v);
  const int steps = walk_against_brute_force(c, 5, 40, 60);
  EXPECT_GT(steps, 1000);
}

TEST(Matcher, EndOfGenerationOnlyWhenAccepting) {
  auto v = vocab({"{", "}", "\"a\":1"});
  auto c = std::make_shared<Constraint>(gbnf(json_object_gbnf()), v);
  Matcher m(c);
  TokenMask mask;
  m.fill_mask(mask);
  EXPECT_FALSE(mask.test(0));
  EXPECT_TRUE(mask.test(1));
  EXPECT_FALSE(m.accept_token(0));
  ASSERT_TRUE(m.accept_token(1));
  ASSERT_TRUE(m.accept_token(3));
  ASSERT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.can_continue());
  m.fill_mask(mask);
  EXPECT_EQ(mask.count(), 1u);
  EXPECT_TRUE(mask.test(0));
}

// On real vocabularies (SPM with byte tokens; BPE): along random walks the mask equals
// brute force over every token, and no allowed token leads to a state with nothing allowed.
TEST(Matcher, RealVocabulariesNeverDeadEnd) {
  const char* td = std::getenv("TRIAD_TESTDATA");
  const std::filesystem::path dir = td ? td : "../shared/testdata";
  // JSON mode, and a nested schema whose bounded repetitions, formats and enums give many
  // distinct stack tops with context-dependent tokens.
  const std::string schema_src = json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "id": {"type": "string", "format": "uuid"},
      "who": {"type": "object", "properties": {"email": {"type": "string", "format": "email"},
                                               "nick": {"type": "string", "maxLength": 12}}},
      "tags": {"type": "array", "items": {"enum": ["a", "b\"c", "\u00e9"]}, "maxItems": 3},
      "n": {"type": ["integer", "null"], "minimum": 1, "maximum": 300}
    },
    "required": ["id", "who", "tags", "n"]})"));
  int vocabs = 0;
  for (const char* name : {"models/stories260K.gguf", "tokenizer/ggml-vocab-llama-spm.gguf", "tokenizer/ggml-vocab-gpt-2.gguf"}) {
    const auto path = dir / name;
    if (!std::filesystem::exists(path)) {
      std::printf("skipping %s: missing\n", path.c_str());
      continue;
    }
    ++vocabs;
    auto file = triad::gguf::GgufFile::open(path.string());
    auto tok = triad::Tokenizer::from_gguf(*file);
    auto v = Vocab::from_tokenizer(*tok);
    for (const std::string& src : {std::string(json_object_gbnf()), schema_src}) {
      auto c = std::make_shared<Constraint>(gbnf(src), v);
      std::mt19937 rng(11);
      TokenMask mask;
      const bool brute = v->n_vocab() <= 4096;
      for (int walk = 0; walk < 12; ++walk) {
        Matcher m(c);
        for (int step = 0; step < (brute ? 60 : 25); ++step) {
          m.fill_mask(mask);
          ASSERT_GT(mask.count(), 0u) << name << ": dead end at walk " << walk << " step " << step;
          std::vector<int32_t> allowed;
          for (int32_t id = 0; id < v->n_vocab(); ++id) {
            if (brute || rng() % 64 == 0) {  // large vocabularies: a random sample
              Matcher probe = m;
              ASSERT_EQ(mask.test(id), probe.accept_token(id)) << name << ": token " << id << " '" << v->piece(id) << "'";
            }
            if (mask.test(id) && std::find(v->eog_ids().begin(), v->eog_ids().end(), id) == v->eog_ids().end())
              allowed.push_back(id);
          }
          if (allowed.empty()) break;
          ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
        }
      }
    }
  }
  if (vocabs == 0) GTEST_SKIP() << "no test vocabularies under " << dir;
}

// ---- JSON Schema -> grammar


namespace {

std::shared_ptr<const Grammar> schema_grammar(const char* schema, bool strict = false) {
  SchemaOptions o;
  o.strict = strict;
  return gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(schema), o));
}

void expect_schema_error(const char* schema, std::string_view needle, bool strict = false) {
  try {
    schema_grammar(schema, strict);
    ADD_FAILURE() << "no error for: " << schema;
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(JsonSchema, ObjectsRequiredOptionalAndOrder) {
  auto g = schema_grammar(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                              "c": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false})");
  for (const char* ok : {R"({"a": 1})", R"({"a":1,"b":"x"})", R"({"a": -3, "c": true})", R"({"a":0,"b":"","c":false})"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {R"({"b":"x"})", R"({"a":1,"d":2})", R"({"b":"x","a":1})", "{}", R"({"a":1,})", R"({"a":"1"})"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  // A map: any keys, values from additionalProperties.
  auto m = schema_grammar(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(matches(m, R"({"x": 1, "y": 2})"));
  EXPECT_TRUE(matches(m, "{}"));
  EXPECT_FALSE(matches(m, R"({"x": "1"})"));
}

TEST(JsonSchema, IntegerRanges) {
  auto g = schema_grammar(R"({"type": "integer", "minimum": 5, "maximum": 123})");
  for (int v = -5; v <= 200; ++v) EXPECT_EQ(matches(g, std::to_string(v)), v >= 5 && v <= 123) << v;
  EXPECT_FALSE(matches(g, "05"));
  auto n = schema_grammar(R"({"type": "integer", "minimum": -20, "exclusiveMaximum": -2})");
  for (int v = -30; v <= 5; ++v) EXPECT_EQ(matches(n, std::to_string(v)), v >= -20 && v <= -3) << v;
  auto z = schema_grammar(R"({"type": "integer", "exclusiveMinimum": -6, "maximum": 1000})");
  for (int v = -10; v <= 1010; ++v) EXPECT_EQ(matches(z, std::to_string(v)), v >= -5 && v <= 1000) << v;
  EXPECT_FALSE(matches(z, "-0"));
  auto open_hi = schema_grammar(R"({"type": "integer", "minimum": 10})");
  EXPECT_TRUE(matches(open_hi, "123456789"));
  EXPECT_FALSE(matches(open_hi, "9"));
}

namespace {

// Every JSON number text of up to `len` characters over "-0123456789." (all of them plain
// decimals of at most 15 digits, which the number grammar admits exactly when in range).
std::vector<std::string> short_numbers(size_t len) {
  std::vector<std::string> out, cur{""};
  const std::string alphabet = "-0123456789.";
  for (size_t l = 1; l <= len; ++l) {
    std::vector<std::string> next;
    for (const std::string& p : cur)
      for (char c : alphabet) next.push_back(p + c);
    for (const std::string& t : next)
      if (!nlohmann::json::parse(t, nullptr, false).is_discarded() && nlohmann::json::parse(t).is_number()) out.push_back(t);
    cur = std::move(next);
  }
  return out;
}

}  // namespace

TEST(JsonSchema, DecimalBoundsAreExact) {
  // A document validates when the number its text parses to (strtod: correctly rounded, as
  // Python's float(); integers this short are exact) lies within the bounds. The grammar must
  // admit exactly those, for every short number, whatever the bound: negative, fractional,
  // exclusive, not representable in binary (0.1), tiny and huge exponents, draft 4's booleans.
  struct Case {
    const char* schema;
    std::function<bool(double)> ok;
  };
  const std::vector<Case> cases = {
      {R"({"type": "number", "minimum": 0, "maximum": 1})", [](double x) { return x >= 0 && x <= 1; }},
      {R"({"type": "number", "minimum": 5, "maximum": 30})", [](double x) { return x >= 5 && x <= 30; }},
      {R"({"type": "number", "exclusiveMinimum": 0.1, "exclusiveMaximum": 2.55})", [](double x) { return x > 0.1 && x < 2.55; }},
      {R"({"type": "number", "minimum": -2.5, "maximum": -0.25})", [](double x) { return x >= -2.5 && x <= -0.25; }},
      {R"({"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 0})", [](double x) { return x > -1 && x < 0; }},
      {R"({"type": "number", "minimum": -0.01})", [](double x) { return x >= -0.01; }},
      {R"({"type": "number", "exclusiveMaximum": 0.3})", [](double x) { return x < 0.3; }},
      {R"({"type": "number", "minimum": 1e-300, "maximum": 1e300})", [](double x) { return x >= 1e-300 && x <= 1e300; }},
      {R"({"type": "number", "exclusiveMinimum": -1e-7, "maximum": 12.5})", [](double x) { return x > -1e-7 && x <= 12.5; }},
      {R"({"type": "number", "minimum": 0.5, "maximum": 0.5})", [](double x) { return x == 0.5; }},
      {R"({"type": "number", "minimum": 3, "exclusiveMinimum": true, "maximum": 99.9, "exclusiveMaximum": false})",
       [](double x) { return x > 3 && x <= 99.9; }},
      {R"({"type": "number", "minimum": 2, "exclusiveMinimum": 1.5, "maximum": 7, "exclusiveMaximum": 7})",
       [](double x) { return x >= 2 && x < 7; }},
  };
  const std::vector<std::string> numbers = short_numbers(5);
  ASSERT_GT(numbers.size(), 10000u);
  for (const Case& c : cases) {
    auto g = schema_grammar(c.schema);
    size_t admitted = 0;
    for (const std::string& t : numbers) {
      const bool want = c.ok(std::strtod(t.c_str(), nullptr));
      ASSERT_EQ(matches(g, t), want) << c.schema << " on " << t;
      admitted += want;
    }
    EXPECT_GT(admitted, 0u) << c.schema;
  }
  // Longer numbers near the bounds: what is admitted validates; the bound itself and its
  // closest 15-digit neighbours are decided exactly.
  auto g = schema_grammar(R"({"type": "number", "minimum": 0.1, "exclusiveMaximum": 0.30000000000000004})");
  for (const char* ok : {"0.1", "0.10000000000001", "0.3", "0.29999999999999", "0.2"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"0.09999999999999", "0.099", "1e-1", "0.300000000000001", "-0.1", "00.2"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  expect_schema_error(R"({"type": "number", "maximum": -1e20})", "at most 15 digits");
  auto huge = schema_grammar(R"({"type": "number", "exclusiveMaximum": 1e20})");
  EXPECT_TRUE(matches(huge, "999999999999999"));
  expect_schema_error(R"({"type": "number", "minimum": 2, "maximum": 1})", "admit no value");
  expect_schema_error(R"({"type": "number", "exclusiveMinimum": 1, "maximum": 1})", "admit no value");
}

TEST(JsonSchema, EnumConstArraysTuples) {
  auto e = schema_grammar(R"({"enum": ["red", "gr\"een", 1, null, {"k": [1]}]})");
  for (const char* ok : {R"("red")", R"("gr\"een")", "1", "null", R"({"k":[1]})"}) EXPECT_TRUE(matches(e, ok)) << ok;
  EXPECT_FALSE(matches(e, R"("blue")"));
  auto c = schema_grammar(R"({"const": "x"})");
  EXPECT_TRUE(matches(c, R"("x")"));
  EXPECT_FALSE(matches(c, R"("y")"));
  auto a = schema_grammar(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  for (const char* ok : {"[1, 2]", "[1,2,3]", "[ 1 , 2 ]"}) EXPECT_TRUE(matches(a, ok)) << ok;
  for (const char* bad : {"[]", "[1]", "[1,2,3,4]", "[1,\"2\"]"}) EXPECT_FALSE(matches(a, bad)) << bad;
  auto t = schema_grammar(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})");
  for (const char* ok : {"[]", R"(["a"])", R"(["a", 1])"}) EXPECT_TRUE(matches(t, ok)) << ok;
  for (const char* bad : {"[1]", R"(["a", 1, 2])", R"(["a", "b"])"}) EXPECT_FALSE(matches(t, bad)) << bad;
  auto t2 = schema_grammar(R"({"type": "array", "prefixItems": [{"const": 0}], "items": {"type": "boolean"}, "minItems": 2})");
  EXPECT_TRUE(matches(t2, "[0, true, false]"));
  EXPECT_FALSE(matches(t2, "[0]"));
  EXPECT_FALSE(matches(t2, "[true, 0]"));
}

TEST(JsonSchema, RefsRecursionAnyOfTypeLists) {
  auto g = schema_grammar(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v", "kids"]}},
      "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3, "kids": [{"v": 4, "kids": []}]}]})"));
  EXPECT_FALSE(matches(g, R"({"v": 1, "kids": [{"v": 2}]})"));
  auto u = schema_grammar(R"({"anyOf": [{"type": "string", "maxLength": 2}, {"type": ["integer", "null"]}]})");
  for (const char* ok : {R"("ab")", "7", "null"}) EXPECT_TRUE(matches(u, ok)) << ok;
  for (const char* bad : {R"("abc")", "true", "1.5"}) EXPECT_FALSE(matches(u, bad)) << bad;
}

TEST(JsonSchema, StringFormatsLengthsPatterns) {
  auto d = schema_grammar(R"({"type": "string", "format": "date"})");
  for (const char* ok : {R"("2024-02-28")", R"("1999-12-31")", R"("2023-04-30")"}) EXPECT_TRUE(matches(d, ok)) << ok;
  for (const char* bad : {R"("2024-02-30")", R"("2024-13-01")", R"("2023-04-31")", R"("0000-01-01")", R"("24-01-01")"})
    EXPECT_FALSE(matches(d, bad)) << bad;
  auto dt = schema_grammar(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(matches(dt, R"("2024-01-02T03:04:05Z")"));
  EXPECT_TRUE(matches(dt, R"("2024-01-02T23:59:59+05:30")"));
  EXPECT_FALSE(matches(dt, R"("2024-01-02T23:59:59.123+05:30")"));  // whole seconds only
  EXPECT_FALSE(matches(dt, R"("2024-01-02T24:00:00Z")"));
  auto id = schema_grammar(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(matches(id, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(id, R"("123e4567e89b12d3a456426614174000")"));
  auto em = schema_grammar(R"({"type": "string", "format": "email"})");
  EXPECT_TRUE(matches(em, R"("jane.doe+x@mail.example.com")"));
  EXPECT_FALSE(matches(em, R"("jane")"));
  auto len = schema_grammar(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  for (const char* ok : {R"("ab")", R"("a\nb")", R"("éé")"}) EXPECT_TRUE(matches(len, ok)) << ok;
  for (const char* bad : {R"("a")", R"("abcd")"}) EXPECT_FALSE(matches(len, bad)) << bad;
  auto p = schema_grammar(R"({"type": "string", "pattern": "^[A-Z]{3}-\\d{2,3}$"})");
  for (const char* ok : {R"("ABC-12")", R"("XYZ-123")"}) EXPECT_TRUE(matches(p, ok)) << ok;
  for (const char* bad : {R"("ABC-1")", R"("abc-12")", R"("ABC-1234")", R"(" ABC-12")"}) EXPECT_FALSE(matches(p, bad)) << bad;
  auto un = schema_grammar(R"({"type": "string", "pattern": "(cat|dog)s?"})");
  EXPECT_TRUE(matches(un, R"("my dogs")"));
  EXPECT_FALSE(matches(un, R"("my bird")"));
  auto q = schema_grammar(R"({"type": "string", "pattern": "^a\"b\\\\c$"})");
  EXPECT_TRUE(matches(q, R"("a\"b\\c")"));
}

TEST(JsonSchema, NonStrictDropsWhatItCannotEnforce) {
  // Without strict, a keyword the grammar cannot enforce is dropped and named; with strict it
  // is an error naming it.
  const char* schema = R"({"type": "object", "properties": {
      "a": {"type": "number", "multipleOf": 0.5}, "b": {"type": "string", "format": "hostname"},
      "c": {"type": "string", "pattern": "(x)\\1"}, "d": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
      "e": {"not": {"type": "null"}}, "f": {"type": "string", "pattern": "^a", "maxLength": 3}},
      "minProperties": 1, "required": ["a"]})";
  std::vector<std::string> dropped;
  SchemaOptions o;
  o.dropped = &dropped;
  auto g = gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(schema), o));
  EXPECT_EQ(dropped, (std::vector<std::string>{"minProperties", "multipleOf", "format", "pattern", "uniqueItems", "not",
                                               "maxLength"}));
  for (const char* part : {R"({"a": 1.25})", R"({"a": 1, "b": "x"})", R"({"a": 1, "c": "yy"})", R"({"a": 1, "d": ["q", "q"]})",
                           R"({"a": 1, "e": null})", R"({"a": 1, "f": "abcdef"})"})
    EXPECT_TRUE(matches(g, part)) << part;
  EXPECT_FALSE(matches(g, R"({"a": "1"})"));
  expect_schema_error(schema, "'minProperties'", true);
  expect_schema_error(R"({"type": "number", "multipleOf": 0.5})", "'multipleOf' on a non-integer number", true);
  expect_schema_error(R"({"type": "string", "format": "hostname"})", "hostname", true);
  expect_schema_error(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})", "uniqueItems", true);
  expect_schema_error(R"({"not": {"type": "null"}})", "'not'", true);
}

TEST(JsonSchema, MultipleOfUniqueItemsAndPatternLengths) {
  // multipleOf on integers: listed, powers of ten, remainder digits, with and without bounds.
  struct Case {
    const char* schema;
    int64_t k, lo, hi;
  };
  for (const Case& c : {Case{R"({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 100})", 5, 0, 100},
                        Case{R"({"type": "integer", "multipleOf": 3})", 3, INT64_MIN, INT64_MAX},
                        Case{R"({"type": "integer", "multipleOf": 7, "minimum": -5000, "exclusiveMaximum": 9999})", 7, -5000, 9998},
                        Case{R"({"type": "integer", "multipleOf": 100, "minimum": -30000})", 100, -30000, INT64_MAX},
                        Case{R"({"type": "integer", "multipleOf": 12, "minimum": 10})", 12, 10, INT64_MAX},
                        Case{R"({"type": "integer", "multipleOf": 0.5, "maximum": 3})", 1, INT64_MIN, 3}}) {
    auto g = schema_grammar(c.schema);
    for (int64_t v = -12000; v <= 12000; ++v)
      ASSERT_EQ(matches(g, std::to_string(v)), v % c.k == 0 && v >= c.lo && v <= c.hi) << c.schema << " " << v;
    if (c.hi == INT64_MAX) {
      EXPECT_TRUE(matches(g, std::to_string(c.k * 123456789)));
    }
  }
  expect_schema_error(R"({"type": "integer", "multipleOf": 1000003})", "multipleOf", true);
  // 1/150 is not exact in binary: 3 / d is not a whole number, so it is not "every integer".
  expect_schema_error(R"({"type": "integer", "multipleOf": 0.006666666666666667})", "multipleOf", true);
  // JavaScript's MAX_SAFE_INTEGER as a bound clamps to the admitted 15 digits.
  auto safe = schema_grammar(R"({"type": "integer", "minimum": 0, "maximum": 9007199254740991})");
  EXPECT_TRUE(matches(safe, "999999999999999"));
  EXPECT_FALSE(matches(safe, "-1"));
  // A character class no JSON string character matches drops the pattern unless strict.
  EXPECT_TRUE(matches(schema_grammar(R"({"type": "string", "pattern": "^[\u0000-\u0001]*$"})"), R"("x")"));
  expect_schema_error(R"({"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9})", "no multiple");
  // uniqueItems over enum values: every order of distinct values, none twice, within the counts.
  auto u = schema_grammar(R"({"type": "array", "items": {"enum": ["a", "b", 3]}, "uniqueItems": true, "minItems": 1})");
  for (const char* ok : {R"(["a"])", R"([3, "a"])", R"(["b", 3, "a"])", R"([ "a" , "b" ])"}) EXPECT_TRUE(matches(u, ok)) << ok;
  for (const char* bad : {"[]", R"(["a", "a"])", R"([3, "b", 3])", R"(["c"])"}) EXPECT_FALSE(matches(u, bad)) << bad;
  // Values equal as JSON Schema compares them count once (object keys in any order, 1 == 1.0),
  // and a type next to an enum filters its values.
  auto u3 = schema_grammar(R"({"type": "array", "uniqueItems": true, "items": {"enum": [{"a": 1, "b": 2}, {"b": 2, "a": 1}, 1, 1.0]}})");
  EXPECT_FALSE(matches(u3, R"([{"a":1,"b":2}, {"b":2,"a":1}])"));
  EXPECT_FALSE(matches(u3, "[1, 1.0]"));
  auto typed = schema_grammar(R"({"type": "string", "enum": ["a", 1]})");
  EXPECT_TRUE(matches(typed, R"("a")"));
  EXPECT_FALSE(matches(typed, "1"));
  // Another keyword next to the items' enum takes the general path (uniqueItems dropped unless
  // strict), so the keyword is not silently ignored.
  {
    const char* both = R"({"type": "array", "uniqueItems": true, "items": {"enum": ["a", "bb"], "minLength": 2}})";
    expect_schema_error(both, "uniqueItems", true);
    std::vector<std::string> dropped;
    SchemaOptions o;
    o.dropped = &dropped;
    (void)json_schema_to_gbnf(nlohmann::ordered_json::parse(both), o);
    EXPECT_EQ(dropped, (std::vector<std::string>{"uniqueItems", "minLength"}));
  }
  auto u2 = schema_grammar(R"({"type": "array", "items": {"const": 1}, "uniqueItems": true})");
  EXPECT_TRUE(matches(u2, "[1]"));
  EXPECT_FALSE(matches(u2, "[1, 1]"));
  // pattern with lengths: implied by the pattern, or given to its one repeated character.
  auto p1 = schema_grammar(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 4})");
  for (const char* ok : {R"("a")", R"("abcd")"}) EXPECT_TRUE(matches(p1, ok)) << ok;
  for (const char* bad : {R"("")", R"("abcde")", R"("aB")"}) EXPECT_FALSE(matches(p1, bad)) << bad;
  auto p2 = schema_grammar(R"({"type": "string", "pattern": "^[A-Z]-\\d*!$", "minLength": 5, "maxLength": 6})");
  for (const char* ok : {R"("X-12!")", R"("X-123!")"}) EXPECT_TRUE(matches(p2, ok)) << ok;
  for (const char* bad : {R"("X-1!")", R"("X-1234!")"}) EXPECT_FALSE(matches(p2, bad)) << bad;
  auto p3 = schema_grammar(R"({"type": "string", "pattern": "^\\d{3}-\\d{4}$", "minLength": 8, "maxLength": 8})");
  EXPECT_TRUE(matches(p3, R"("555-1234")"));
  expect_schema_error(R"({"type": "string", "pattern": "^(ab)+$", "maxLength": 5})", "minLength / maxLength", true);
  expect_schema_error(R"({"type": "string", "pattern": "^\\d{3}$", "maxLength": 2})", "admit no string");
}

TEST(JsonSchema, Errors) {
  expect_schema_error(R"({"type": "number", "multipleOf": 3})", "'multipleOf' on a non-integer number", true);
  expect_schema_error(R"({"type": "object", "patternProperties": {}})", "'patternProperties'", true);
  expect_schema_error(R"({"type": "string", "format": "hostname"})", "unsupported string format 'hostname'", true);
  EXPECT_NO_THROW(schema_grammar(R"({"type": "string", "format": "hostname"})"));  // an annotation unless strict
  expect_schema_error(R"({"$ref": "#/$defs/missing"})", "points to nothing");
  expect_schema_error(R"({"$ref": "http://example.com/s.json"})", "not a local reference");
  expect_schema_error(R"(false)", "matches nothing");
  expect_schema_error(R"({"type": "frobnicate"})", "unknown type");
  expect_schema_error(R"({"type": "object", "properties": {}, "required": ["x"]})", "'x' is not in");
  expect_schema_error(R"({"type": "string", "pattern": "(a)\\1"})", "backreferences", true);
  expect_schema_error(R"j({"type": "string", "pattern": "(?=a)"})j", "lookarounds", true);
  expect_schema_error(R"({"type": "string", "pattern": "a{5,2}"})", "n < m", true);
  expect_schema_error(R"({"type": "string", "pattern": "[a-"})", "unterminated", true);
  expect_schema_error(R"({"type": "string", "pattern": "\\uZZZZ"})", "bad \\u escape", true);
  EXPECT_TRUE(matches(schema_grammar(R"({"type": "string", "pattern": "^\\u00e9$"})"), "\"\xc3\xa9\""));
  expect_schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})", "no value");
  expect_schema_error(R"({"$ref": "#"})", "no finite string");
  std::string deep = "{\"type\": \"array\", \"items\": ";
  std::string tail = "}";
  for (int i = 0; i < 100; ++i) {
    deep += "{\"type\": \"array\", \"items\": ";
    tail += "}";
  }
  expect_schema_error((deep + "{}" + tail).c_str(), "nest");
}
