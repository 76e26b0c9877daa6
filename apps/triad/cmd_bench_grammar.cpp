// `triad bench grammar`: the cost of constrained decoding's token masks on a model's real
// vocabulary. Random walks through the grammar (each step: compute the mask, pick an allowed
// token uniformly, advance) time fill_mask() per step; the walks share one Constraint, so the
// first walk shows cold caches and the rest the steady state a server reaches.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "commands.h"
#include "loaded_model.h"
#include "base/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace triad::app {
namespace {

struct GrammarBenchOptions {
  CommonOptions common;
  std::string grammar_file;  // empty: JSON object grammar
  std::vector<std::string> schemas;  // JSON Schema files: compile times; one: also its walks
  int walks = 20;
  int steps = 200;
  uint64_t seed = 1;
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

int run(const GrammarBenchOptions& o) {
  using Clock = std::chrono::steady_clock;
  auto us = [](Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  LoadedModel lm = load_model(o.common.model);
  auto t0 = Clock::now();
  std::shared_ptr<const grammar::Vocab> vocab = grammar::Vocab::from_tokenizer(*lm.tokenizer);
  const double vocab_ms = us(Clock::now() - t0) / 1000;
  std::string src(grammar::json_object_gbnf());
  if (!o.grammar_file.empty()) {
    std::ifstream f(o.grammar_file, std::ios::binary);
    TRIAD_CHECK(f, "bench grammar: cannot read ", o.grammar_file);
    std::stringstream ss;
    ss << f.rdbuf();
    src = ss.str();
  }
  if (!o.schemas.empty()) {
    std::vector<double> times;
    for (const std::string& path : o.schemas) {
      std::ifstream f(path, std::ios::binary);
      TRIAD_CHECK(f, "bench grammar: cannot read ", path);
      std::stringstream ss;
      ss << f.rdbuf();
      const auto schema = nlohmann::ordered_json::parse(ss.str());
      const auto a = Clock::now();
      src = grammar::json_schema_to_gbnf(schema);
      (void)grammar::Grammar::from_gbnf(src);
      times.push_back(us(Clock::now() - a));
    }
    std::printf("schema compile (JSON Schema -> grammar, %zu schemas): median %.1f us, max %.1f us\n", times.size(),
                pct(times, 0.5), pct(times, 1.0));
    if (o.schemas.size() > 1) return 0;
  }
  t0 = Clock::now();
  auto g = std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(src));
  const double compile_us = us(Clock::now() - t0);
  auto c = std::make_shared<grammar::Constraint>(g, vocab);
  std::printf("vocabulary: %d tokens (the longest %d characters), trie of %zu nodes, built in %.1f ms; grammar: %zu "
              "rules, compiled in %.1f us\n",
              vocab->n_vocab(), vocab->max_chars(), vocab->nodes().size(), vocab_ms, g->n_rules(), compile_us);
  std::mt19937_64 rng(o.seed);
  grammar::TokenMask mask;
  std::vector<double> first, rest;
  size_t allowed_total = 0, steps_total = 0;
  for (int w = 0; w < o.walks; ++w) {
    grammar::Matcher m(c);
    for (int s = 0; s < o.steps; ++s) {
      const auto a = Clock::now();
      m.fill_mask(mask);
      const double t = us(Clock::now() - a);
      (w == 0 ? first : rest).push_back(t);
      const std::vector<int32_t> allowed = mask.ids();
      allowed_total += allowed.size();
      ++steps_total;
      std::vector<int32_t> nonend;
      for (int32_t id : allowed)
        if (std::find(vocab->eog_ids().begin(), vocab->eog_ids().end(), id) == vocab->eog_ids().end())
          nonend.push_back(id);
      if (nonend.empty()) break;
      TRIAD_CHECK(m.accept_token(nonend[rng() % nonend.size()]), "bench grammar: an allowed token was refused");
    }
  }
  const grammar::Constraint::Stats st = c->stats();
  std::printf("| walks | steps | mask median us | p90 us | p99 us | max us |\n|---|---|---|---|---|---|\n");
  std::printf("| first (cold) | %zu | %.1f | %.1f | %.1f | %.1f |\n", first.size(), pct(first, 0.5), pct(first, 0.9),
              pct(first, 0.99), pct(first, 1.0));
  std::printf("| next %d (warm) | %zu | %.1f | %.1f | %.1f | %.1f |\n", o.walks - 1, rest.size(), pct(rest, 0.5),
              pct(rest, 0.9), pct(rest, 0.99), pct(rest, 1.0));
  std::printf("allowed tokens per step: %.0f on average; state cache %lld hits / %lld misses; %lld positions computed; "
              "%lld uncertain tokens checked\n",
              steps_total ? static_cast<double>(allowed_total) / static_cast<double>(steps_total) : 0.0,
              static_cast<long long>(st.state_hits), static_cast<long long>(st.state_misses),
              static_cast<long long>(st.positions_computed), static_cast<long long>(st.uncertain_checked));
  return 0;
}

}  // namespace

Command add_bench_grammar(CLI::App& bench) {
  auto o = std::make_shared<GrammarBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("grammar", "constrained decoding: token-mask time per step on a model's vocabulary");
  o->common.add_to(*cmd, /*with_ctx=*/false);
  cmd->add_option("--grammar", o->grammar_file, "GBNF file (default: the JSON-object grammar of response_format json_object)");
  cmd->add_option("--schema", o->schemas, "JSON Schema file(s): compile time over all; with one, its walks")->expected(1, -1);
  cmd->add_option("--walks", o->walks, "random walks through the grammar")->check(CLI::Range(1, 100000));
  cmd->add_option("--steps", o->steps, "tokens per walk at most")->check(CLI::Range(1, 1000000));
  cmd->add_option("--seed", o->seed, "seed of the walks");
  return [o] { return run(*o); };
}

}  // namespace triad::app
