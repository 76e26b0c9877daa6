// libFuzzer target for grammars (src/grammar): the input is GBNF source, optionally followed by
// a NUL byte and text. The grammar is compiled under tight limits; when it compiles, a matcher
// over a small fixed vocabulary (ASCII pieces, JSON-ish pieces, UTF-8 lead and continuation
// bytes, two tokens longer than Vocab::kLongChars) follows the text byte by byte, and at every
// step the token mask must equal what feeding each token says (a mismatch aborts: a finding). A GrammarError is the expected outcome
// for bad input; a crash, sanitizer report, other exception, hang or huge allocation is a finding.
// Also linked into grammar_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace {

std::shared_ptr<const triad::grammar::Vocab> fuzz_vocab() {
  static const std::shared_ptr<const triad::grammar::Vocab> v = [] {
    std::vector<std::string> pieces = {"</s>", "a", "b", "ab", "ba", "x", "{", "}", "[", "]", "\"", ",", ":", " ",
                                       "\n", "0", "1", "12", "-", ".", "e", "true", "null", "\\", "\\n", "\"a\"",
                                       "{\"", "\":", "é", "\xc3", "\xa9", "\xe2\x82", "\xac", "\xf0\x9f", "\x98\x80",
                                       "\xed", "\xa0", "\x80", "\xff", "\x01", "aaaa", "yes", "no",
                                       // long tokens (Vocab::kLongChars): checked apart from the walks
                                       std::string(40, 'a'), std::string(34, ' ') + "\""};
    std::vector<char> gen(pieces.size(), 1);
    gen[0] = 0;
    return std::make_shared<const triad::grammar::Vocab>(pieces, gen, std::vector<int32_t>{0});
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace triad::grammar;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string src = input.substr(0, nul);
  const std::string text = nul == std::string::npos ? std::string() : input.substr(nul + 1, 64);
  Limits lim;
  lim.max_elements = 20000;
  lim.max_rules = 5000;
  lim.max_repeat = 1000;
  lim.max_nesting = 64;
  std::shared_ptr<const Grammar> g;
  try {
    g = std::make_shared<const Grammar>(Grammar::from_gbnf(src, lim));
  } catch (const GrammarError&) {
    return 0;
  }
  auto v = fuzz_vocab();
  auto c = std::make_shared<Constraint>(g, v, MatcherLimits{256, 512, 8});
  try {
    Matcher m(c);
    TokenMask mask;
    for (size_t i = 0; i <= text.size(); ++i) {
      m.fill_mask(mask);
      for (int32_t id = 0; id < v->n_vocab(); ++id) {
        Matcher probe = m;
        bool ok;
        try {
          ok = probe.accept_token(id);
        } catch (const GrammarError&) {
          ok = mask.test(id);  // too ambiguous to follow: no verdict
        }
        if (ok != mask.test(id)) std::abort();
      }
      if (i == text.size() || !m.accept_bytes(text.substr(i, 1))) break;
    }
  } catch (const GrammarError&) {
  }
  return 0;
}
