// libFuzzer target for the JSON Schema compiler (src/grammar/json_schema.h): the input is a JSON
// document (rejected when it is not JSON or nests deeper than 64 levels, as request bodies are);
// when it compiles, the grammar must parse, and a matcher over a small vocabulary must produce
// masks that agree with feeding each token. A GrammarError is the expected outcome for bad
// input; a crash, sanitizer report, other exception, hang or huge allocation is a finding.
// Also linked into schema_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace triad::grammar;
  using ojson = nlohmann::ordered_json;
  const std::string text(reinterpret_cast<const char*>(data), size);
  bool too_deep = false;
  const ojson::parser_callback_t cb = [&](int depth, ojson::parse_event_t, ojson&) {
    if (depth > 64) too_deep = true;
    return !too_deep;
  };
  // The callback stops building past the bound; bracket counting first keeps the recursive
  // parser itself shallow.
  int d = 0;
  for (char ch : text) {
    d += (ch == '{' || ch == '[') - (ch == '}' || ch == ']');
    if (d > 64) return 0;
  }
  const ojson schema = ojson::parse(text, cb, /*allow_exceptions=*/false);
  if (schema.is_discarded() || too_deep) return 0;
  for (const bool strict : {false, true}) {
    std::string g;
    try {
      SchemaOptions o;
      o.strict = strict;
      o.max_rules = 2000;
      o.max_bytes = 1 << 18;
      g = json_schema_to_gbnf(schema, o);
    } catch (const GrammarError&) {
      continue;
    }
    std::shared_ptr<const Grammar> gr;
    try {
      Limits lim;
      lim.max_elements = 50000;
      lim.max_rules = 20000;
      gr = std::make_shared<const Grammar>(Grammar::from_gbnf(g, lim));
    } catch (const GrammarError&) {
      continue;  // e.g. a schema whose only value is itself
    }
    static const std::vector<std::string> pieces = {"</s>", "{", "}", "[", "]", "\"", ",", ":", " ", "1", "0", "-",
                                                    "true", "null", "a", "\"a\"", "2024-01-01", "@", ".", "T"};
    static const auto vocab = [] {
      std::vector<char> gen(pieces.size(), 1);
      gen[0] = 0;
      return std::make_shared<const Vocab>(pieces, gen, std::vector<int32_t>{0});
    }();
    auto c = std::make_shared<Constraint>(gr, vocab, MatcherLimits{256, 512, 8});
    try {
      Matcher m(c);
      TokenMask mask;
      for (int step = 0; step < 6; ++step) {
        m.fill_mask(mask);
        int32_t pick = -1;
        for (int32_t id = 1; id < vocab->n_vocab(); ++id) {
          Matcher probe = m;
          bool ok;
          try {
            ok = probe.accept_token(id);
          } catch (const GrammarError&) {
            ok = mask.test(id);
          }
          if (ok != mask.test(id)) std::abort();
          if (ok && pick < 0) pick = id;
        }
        if (pick < 0 || !m.accept_token(pick)) break;
      }
    } catch (const GrammarError&) {
    }
  }
  return 0;
}
