// The serving engine on real models: greedy outputs do not depend on how requests are batched,
// chunked, prefix-cached or preempted; a shared 1,000-token prefix is served from the cache;
// cancel and finish return the pool to its starting state; a randomized stress run (random
// arrivals, lengths, cancels, a tiny pool) loses no request.
//
// Models: stories260K (../shared/testdata, F32 weights) and the synthetic gemma3 of
// tests/reference/make_synthetic.py (F32, 5 local layers with a sliding window of 10 and 2
// global ones), written by the `synthetic_models` ctest fixture into TRIAD_SYNTHETIC_DIR.
// Both are F32 models, whose kernels are bitwise independent of the batch (matmul rows, paged
// attention per query row), so "identical" means identical token ids.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "engine/engine_api.h"
#include "engine/draft_model.h"
#include "engine/draft_policy.h"
#include "engine/step_cost.h"
#include "engine/ngram_lookup.h"
#include "gguf/gguf_file.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "kernels/matmul.h"
#include "kernels/panel_layout.h"
#include "tokenizer/tokenizer.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace triad::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Records one request's output; the test thread waits for its finish.
class TestSink : public OutputSink {
 public:
  void on_token(RequestId id, const TokenOutput& t) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_) ++calls_after_finish_;
    tokens_.push_back(t.id);
    outputs_.push_back(t);
    if (cancel_after_ > 0 && static_cast<int>(tokens_.size()) == cancel_after_ && engine_) engine_->cancel(id);
  }
  void on_finish(RequestId, FinishReason r, const RequestTimings& t, const std::string& e) override {
    std::lock_guard<std::mutex> lk(mu_);
    ++n_finish_;
    finished_ = true;
    reason_ = r;
    timings_ = t;
    error_ = e;
    cv_.notify_all();
  }
  bool wait_for(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, limit, [&] { return finished_; });
  }
  // Cancels its own request from the sink (on the engine thread) after n tokens.
  void cancel_after(Engine* e, int n) {
    engine_ = e;
    cancel_after_ = n;
  }
  std::vector<int32_t> tokens() {
    std::lock_guard<std::mutex> lk(mu_);
    return tokens_;
  }
  std::vector<TokenOutput> outputs() {
    std::lock_guard<std::mutex> lk(mu_);
    return outputs_;
  }
  FinishReason reason() {
    std::lock_guard<std::mutex> lk(mu_);
    return reason_;
  }
  RequestTimings timings() {
    std::lock_guard<std::mutex> lk(mu_);
    return timings_;
  }
  std::string error() {
    std::lock_guard<std::mutex> lk(mu_);
    return error_;
  }
  int n_finish() {
    std::lock_guard<std::mutex> lk(mu_);
    return n_finish_;
  }
  int calls_after_finish() {
    std::lock_guard<std::mutex> lk(mu_);
    return calls_after_finish_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  int n_finish_ = 0, calls_after_finish_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<TokenOutput> outputs_;
  FinishReason reason_ = FinishReason::kNone;
  RequestTimings timings_;
  std::string error_;
  Engine* engine_ = nullptr;
  int cancel_after_ = 0;
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string stories_path() {
  return env_or("TRIAD_TESTDATA", std::string(TRIAD_SOURCE_DIR) + "/../shared/testdata") +
         "/models/stories260K.gguf";
}
std::string synthetic_path(const std::string& name) {
  return env_or("TRIAD_SYNTHETIC_DIR", "") + "/" + name;
}

// Loaded models are shared by every test of the process.
const Model* model_or_skip_reason(const std::string& path, std::string& why) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Model>> cache;
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  if (!std::filesystem::exists(path)) {
    why = "model file " + path + " is missing";
    return nullptr;
  }
  auto m = Model::load(path);
  return (cache[path] = std::move(m)).get();
}

#define LOAD_OR_SKIP(var, path)                      \
  std::string why_##var;                             \
  const Model* var = model_or_skip_reason(path, why_##var); \
  if (var == nullptr) {                              \
    GTEST_SKIP() << why_##var;                       \
  }

EngineConfig base_config(const Model& m) {
  EngineConfig c;
  c.threads = 2;
  c.block_size = 16;
  c.max_model_len = 512;
  c.max_batched_tokens = 512;
  c.max_seqs = 16;
  c.kv_memory_bytes = 64ull << 20;
  c.model_id = m.file().path();
  c.check_invariants = true;
  return c;
}

// Bytes of one block over every layer group: the smallest KV budget there is.
uint64_t bytes_per_block_all_groups(const Model& m, const EngineConfig& c) {
  uint64_t b = 0;
  for (const KvLayerGroup& g : kv_layer_groups(m.config()))
    b += KvStorage::token_bytes(m.config(), g, c.k_type, c.v_type) * static_cast<uint64_t>(c.block_size);
  return b;
}

// 16 prompts in 4 families; each family shares a prefix of 20 to 50 tokens, then each prompt
// has its own suffix, for lengths from 21 to about 130 tokens.
std::vector<std::vector<int32_t>> sixteen_prompts(int32_t n_vocab) {
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int32_t> tok(3, n_vocab - 1);
  std::vector<std::vector<int32_t>> out;
  for (int f = 0; f < 4; ++f) {
    std::vector<int32_t> prefix(20 + 10 * f);
    for (int32_t& t : prefix) t = tok(rng);
    for (int i = 0; i < 4; ++i) {
      std::vector<int32_t> p = prefix;
      const int suffix = 1 + (f * 4 + i) * 5;
      for (int k = 0; k < suffix; ++k) p.push_back(tok(rng));
      out.push_back(std::move(p));
    }
  }
  return out;
}

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  RequestTimings timings;
};

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

// Submits every prompt at once (or one after another when `sequential`) and waits for all.
// `tweak` may change each greedy request before it is submitted.
std::vector<Outcome> run_prompts(Engine& eng, const std::vector<std::vector<int32_t>>& prompts,
                                 int32_t max_tokens, bool sequential,
                                 const std::function<void(size_t, GenerationRequest&)>& tweak = {}) {
  std::vector<std::shared_ptr<TestSink>> sinks;
  std::vector<Outcome> out(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = std::make_shared<TestSink>();
    GenerationRequest r = greedy(prompts[i], max_tokens);
    if (tweak) tweak(i, r);
    eng.submit(std::move(r), s);
    sinks.push_back(s);
    if (sequential) {
      EXPECT_TRUE(s->wait_for(std::chrono::seconds(120)));
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(sinks[i]->wait_for(std::chrono::seconds(300))) << "request " << i << " never finished";
    out[i].tokens = sinks[i]->tokens();
    out[i].reason = sinks[i]->reason();
    out[i].timings = sinks[i]->timings();
    EXPECT_EQ(sinks[i]->n_finish(), 1);
    EXPECT_EQ(sinks[i]->error(), "") << "request " << i;
  }
  return out;
}

// Waits until the engine has published a snapshot with no request in flight.
EngineStats settled_stats(const Engine& eng) {
  const auto until = Clock::now() + std::chrono::seconds(30);
  EngineStats s = eng.stats();
  while ((s.running != 0 || s.waiting != 0 || s.kv_blocks_used != 0) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s = eng.stats();
  }
  return s;
}

void expect_pool_at_rest(const Engine& eng) {
  const EngineStats s = settled_stats(eng);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_free, s.kv_blocks_total);
  EXPECT_EQ(s.kv_tokens_held, 0);
  EXPECT_EQ(s.internal_errors, 0);
}

void expect_same_outputs(const std::vector<Outcome>& want, const std::vector<Outcome>& got,
                         const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].tokens, got[i].tokens) << what << ": prompt " << i;
    EXPECT_EQ(want[i].reason, got[i].reason) << what << ": prompt " << i;
  }
}

// The equivalence suite for one model: alone (one request at a time, no prefix cache) is the
// reference; batched, prefix-cached (twice, the second round all hits), tiny token budget and
// tiny KV budget must all produce the same tokens.
void check_equivalence(const Model& m) {
  const auto prompts = sixteen_prompts(m.config().n_vocab);
  const int32_t kMaxTokens = 24;

  EngineConfig alone_cfg = base_config(m);
  alone_cfg.max_seqs = 1;
  alone_cfg.enable_prefix_caching = false;
  std::vector<Outcome> alone;
  int64_t alone_steps = 0;
  {
    Engine eng(m, alone_cfg);
    alone = run_prompts(eng, prompts, kMaxTokens, /*sequential=*/true);
    alone_steps = settled_stats(eng).steps;
    expect_pool_at_rest(eng);
  }
  for (const Outcome& o : alone) {
    ASSERT_EQ(o.tokens.size(), static_cast<size_t>(kMaxTokens));
    EXPECT_EQ(o.reason, FinishReason::kLength);
  }
  // The prompts do not all continue the same way (a sanity check of the test itself).
  EXPECT_NE(alone[0].tokens, alone[15].tokens);

  {  // All 16 batched together, no prefix cache.
    EngineConfig c = base_config(m);
    c.enable_prefix_caching = false;
    Engine eng(m, c);
    expect_same_outputs(alone, run_prompts(eng, prompts, kMaxTokens, false), "batched");
    const EngineStats s = settled_stats(eng);
    EXPECT_LT(s.steps * 4, alone_steps) << "batching should need far fewer steps";
    EXPECT_EQ(s.prefix_hits, 0);
    expect_pool_at_rest(eng);
  }
  {  // Prefix caching on: the families share prefixes, and the second round hits every prompt.
    EngineConfig c = base_config(m);
    Engine eng(m, c);
    expect_same_outputs(alone, run_prompts(eng, prompts, kMaxTokens, false), "prefix cache, round 1");
    const int64_t hits1 = settled_stats(eng).prefix_hits;
    const auto round2 = run_prompts(eng, prompts, kMaxTokens, false);
    expect_same_outputs(alone, round2, "prefix cache, round 2");
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(round2[i].timings.cached_tokens, static_cast<int32_t>((prompts[i].size() - 1) / 16 * 16))
          << "prompt " << i;
    const EngineStats s = settled_stats(eng);
    EXPECT_GT(s.prefix_hits, hits1);
    EXPECT_GT(s.kv_blocks_cached, 0);
    expect_pool_at_rest(eng);
  }
  {  // A token budget of 7: every prompt is prefilled in chunks, mixed with running decodes.
    EngineConfig c = base_config(m);
    c.max_batched_tokens = 7;
    Engine eng(m, c);
    expect_same_outputs(alone, run_prompts(eng, prompts, kMaxTokens, false), "chunked prefill");
    expect_pool_at_rest(eng);
  }
  {  // A KV pool of 14 blocks per group: requests are preempted and recomputed, repeatedly.
    EngineConfig c = base_config(m);
    c.kv_memory_bytes = 14 * bytes_per_block_all_groups(m, c);
    Engine eng(m, c);
    for (int32_t n : eng.kv_plan().blocks_per_group) EXPECT_EQ(n, 14);
    expect_same_outputs(alone, run_prompts(eng, prompts, kMaxTokens, false), "tiny KV pool");
    const EngineStats s = settled_stats(eng);
    EXPECT_GE(s.preemptions, 4) << "the tiny pool should force repeated preemption";
    expect_pool_at_rest(eng);
  }
  {  // Speculative decoding by prompt lookup, on for every request and batched: the same tokens.
    EngineConfig c = base_config(m);
    c.speculative = true;
    c.num_speculative_tokens = 5;
    c.ngram = NgramLookup{1, 3};
    c.spec_max_running = 16;
    Engine eng(m, c);
    expect_same_outputs(alone, run_prompts(eng, prompts, kMaxTokens, false), "speculative (prompt lookup)");
    const EngineStats s = settled_stats(eng);
    EXPECT_GT(s.spec_draft_tokens, 0);
    std::printf("prompt lookup: %lld of %lld draft tokens accepted\n", static_cast<long long>(s.spec_accepted_tokens),
                static_cast<long long>(s.spec_draft_tokens));
    // Every draft was a lookup's.
    EXPECT_EQ(s.spec_lookup_draft_tokens, s.spec_draft_tokens);
    EXPECT_EQ(s.spec_lookup_accepted_tokens, s.spec_accepted_tokens);
    EXPECT_EQ(s.spec_model_draft_tokens, 0);
    EXPECT_EQ(s.spec_model_accepted_tokens, 0);
    expect_pool_at_rest(eng);
  }
  {  // Predicted outputs, right except every 5th token, under a tiny pool and budget: drafts are
     // accepted and rejected, requests are preempted, and the tokens stay the same.
    EngineConfig c = base_config(m);
    c.block_size = 4;
    c.max_batched_tokens = 13;
    c.spec_max_running = 16;
    c.kv_memory_bytes = 48 * bytes_per_block_all_groups(m, c);
    c.spec_step_cost = false;  // the counts below must not depend on step timings
    Engine eng(m, c);
    const auto got = run_prompts(eng, prompts, kMaxTokens, false, [&](size_t i, GenerationRequest& r) {
      r.prediction = alone[i].tokens;
      for (size_t k = 4; k < r.prediction.size(); k += 5) r.prediction[k] = (r.prediction[k] + 1) % m.config().n_vocab;
      r.num_speculative_tokens = 6;
    });
    expect_same_outputs(alone, got, "speculative (predictions), tiny pool and budget");
    int64_t drafted = 0, accepted = 0;
    for (const Outcome& o : got) {
      drafted += o.timings.draft_tokens;
      accepted += o.timings.accepted_tokens;
      EXPECT_LE(o.timings.accepted_tokens, o.timings.draft_tokens);
    }
    const EngineStats s = settled_stats(eng);
    EXPECT_EQ(s.spec_draft_tokens, drafted);
    EXPECT_EQ(s.spec_accepted_tokens, accepted);
    // Drafts get only what the budget and blocks leave here, yet runs of the prediction were
    // taken and the wrong tokens were not.
    std::printf("predictions, tiny pool and budget: %lld of %lld draft tokens accepted\n",
                static_cast<long long>(accepted), static_cast<long long>(drafted));
    EXPECT_GE(accepted, 8);
    EXPECT_GE(drafted - accepted, 8);
    EXPECT_GT(s.preemptions, 0);
    expect_pool_at_rest(eng);
  }
  {  // Tiny pool, tiny budget and prefix caching together, with a 4-token block.
    EngineConfig c = base_config(m);
    c.block_size = 4;
    c.max_batched_tokens = 13;
    c.kv_memory_bytes = 48 * bytes_per_block_all_groups(m, c);
    Engine eng(m, c);
    expect_same_outputs(alone, run_prompts(eng, prompts, kMaxTokens, false), "everything at once");
    const EngineStats s = settled_stats(eng);
    EXPECT_GT(s.preemptions, 0);
    EXPECT_GT(s.prefix_hits, 0);
    expect_pool_at_rest(eng);
  }
}

TEST(EngineTest, EquivalenceStories260K) {
  LOAD_OR_SKIP(m, stories_path());
  check_equivalence(*m);
}

// The drafting policy: lengths follow each source's share accepted; a source that falls below
// its floor sits out kPauseSteps steps and comes back with short drafts; sources are independent.
TEST(DraftPolicyTest, LengthsShrinkAndRefusedSourcesPause) {
  DraftPolicy off;
  EXPECT_FALSE(off.enabled());
  DraftPolicy p(8);
  ASSERT_TRUE(p.enabled());
  EXPECT_TRUE(p.ready(DraftPolicy::kLookup));
  EXPECT_EQ(8, p.length(DraftPolicy::kLookup));
  p.set_source(DraftPolicy::kLookup);
  p.verified(8, 4);  // share 0.7 + 0.15 = 0.85
  EXPECT_EQ(7, p.length(DraftPolicy::kLookup));  // ceil(6.8)
  EXPECT_EQ(8, p.length(DraftPolicy::kModel));    // untouched
  p.verified(8, 0);  // 0.595
  p.verified(8, 0);  // 0.4165
  EXPECT_EQ(4, p.length(DraftPolicy::kLookup));
  p.verified(8, 0);  // 0.29
  EXPECT_TRUE(p.ready(DraftPolicy::kLookup));
  p.verified(8, 0);  // 0.20 < 0.25: paused
  for (int i = 0; i < DraftPolicy::kPauseSteps; ++i) EXPECT_FALSE(p.ready(DraftPolicy::kLookup)) << i;
  EXPECT_TRUE(p.ready(DraftPolicy::kLookup));
  EXPECT_EQ(3, p.length(DraftPolicy::kLookup));  // back at share 0.3: ceil(2.4)
  EXPECT_TRUE(p.ready(DraftPolicy::kModel));
  // The draft model's floor is higher (0.6); no source this step: nothing changes.
  p.set_source(DraftPolicy::kModel);
  p.verified(8, 2);  // 0.775
  EXPECT_TRUE(p.ready(DraftPolicy::kModel));
  p.verified(8, 2);  // 0.6175
  p.verified(8, 2);  // 0.507: paused
  EXPECT_FALSE(p.ready(DraftPolicy::kModel));
  p.set_source(-1);
  p.verified(8, 0);
  EXPECT_EQ(3, p.length(DraftPolicy::kLookup));
  // Lengths stay in [1, k].
  DraftPolicy one(1);
  one.set_source(DraftPolicy::kLookup);
  one.verified(1, 0);
  EXPECT_EQ(1, one.length(DraftPolicy::kLookup));
  p.pause(DraftPolicy::kLookup);
  EXPECT_FALSE(p.ready(DraftPolicy::kLookup));
}

// Draft lengths cut to the tokens that pay for their row: token j is worth verifying while
// p^j > row_share, p the running per-token acceptance (accepted / (accepted + refusals)).
TEST(DraftPolicyTest, DraftsAreCutToTokensThatPayForTheirRow) {
  DraftPolicy p(8);
  EXPECT_FLOAT_EQ(1.f, p.acceptance(DraftPolicy::kLookup));
  EXPECT_EQ(8, p.length(DraftPolicy::kLookup, 0.0));   // not measured: no cut
  EXPECT_EQ(8, p.length(DraftPolicy::kLookup, 0.95));  // no draft refused yet
  p.set_source(DraftPolicy::kLookup);
  p.verified(8, 2);  // taken 2.1 + 2 = 4.1, tried 2.1 + 3 = 5.1: p = 0.8039; share 0.775
  EXPECT_NEAR(4.1 / 5.1, p.acceptance(DraftPolicy::kLookup), 1e-6);
  EXPECT_EQ(7, p.length(DraftPolicy::kLookup));
  EXPECT_EQ(7, p.length(DraftPolicy::kLookup, 0.0));
  EXPECT_EQ(7, p.length(DraftPolicy::kLookup, 0.2));   // p^7 = 0.217
  EXPECT_EQ(3, p.length(DraftPolicy::kLookup, 0.5));   // p^3 = 0.520, p^4 = 0.418
  EXPECT_EQ(8, p.length(DraftPolicy::kModel, 0.85));   // the other source is untouched
  // Cut to nothing: kPauseSteps - 1 steps without a draft, then a one-token probe.
  for (int i = 0; i + 1 < DraftPolicy::kPauseSteps; ++i) EXPECT_EQ(0, p.length(DraftPolicy::kLookup, 0.85)) << i;
  EXPECT_EQ(1, p.length(DraftPolicy::kLookup, 0.85));
  EXPECT_EQ(0, p.length(DraftPolicy::kLookup, 0.85));
  EXPECT_EQ(3, p.length(DraftPolicy::kLookup, 0.5));  // a draft again: the count starts over
  for (int i = 0; i + 1 < DraftPolicy::kPauseSteps; ++i) EXPECT_EQ(0, p.length(DraftPolicy::kLookup, 0.85)) << i;
  EXPECT_EQ(1, p.length(DraftPolicy::kLookup, 0.85));
  p.verified(1, 1);  // the probe taken: (0.7 * 4.1 + 1) / (0.7 * 5.1 + 1) = 0.8486
  EXPECT_NEAR(3.87 / 4.57, p.acceptance(DraftPolicy::kLookup), 1e-6);
  EXPECT_EQ(1, p.length(DraftPolicy::kLookup, 0.8));  // p^2 = 0.720
  // One early refusal does not silence a source: p = 2.1 / 3.1 = 0.68.
  DraftPolicy q(8);
  q.set_source(DraftPolicy::kLookup);
  q.verified(8, 0);
  EXPECT_NEAR(2.1 / 3.1, q.acceptance(DraftPolicy::kLookup), 1e-6);
  EXPECT_EQ(1, q.length(DraftPolicy::kLookup, 0.6));
}

// The step-cost fit: seconds = a + b * rows over decode steps, once rows have varied.
TEST(StepCostTest, FitsFixedAndPerRowCostsOnceRowsVary) {
  StepCost c;
  EXPECT_FALSE(c.fitted());
  EXPECT_EQ(0.0, c.row_share(16));
  // Rows that never vary say nothing about what a row costs.
  for (int i = 0; i < 40; ++i) c.record(16, 0.052);
  EXPECT_FALSE(c.fitted());
  EXPECT_EQ(0.0, c.row_share(16));
  // a = 20 ms, b = 2 ms: 16 rows are 32 / 52 of their step, one row 2 / 22 of its own.
  const int rows[] = {16, 24, 17, 40, 16, 20, 33, 16, 18, 26};
  for (int i = 0; i < 60; ++i) c.record(rows[i % 10], 0.020 + 0.002 * rows[i % 10]);
  ASSERT_TRUE(c.fitted());
  EXPECT_NEAR(0.020, c.fixed_s(), 1e-9);
  EXPECT_NEAR(0.002, c.per_row_s(), 1e-9);
  EXPECT_NEAR(32.0 / 52.0, c.row_share(16), 1e-9);
  EXPECT_NEAR(2.0 / 22.0, c.row_share(1), 1e-9);
  EXPECT_EQ(0.0, c.row_share(0));
  // A batch that stops varying (it stopped drafting) keeps the estimate that stopped it.
  for (int i = 0; i < 400; ++i) c.record(16, 0.052);
  EXPECT_NEAR(32.0 / 52.0, c.row_share(16), 1e-6);
  // A hiccup (a 40-row step 20x its time: a thread descheduled) counts as 1.25 times its
  // prediction, so the share barely moves; unclipped, this one step took it to the 0.9 cap.
  StepCost h;
  for (int i = 0; i < 60; ++i) h.record(rows[i % 10], 0.020 + 0.002 * rows[i % 10]);
  h.record(40, 20 * (0.020 + 0.002 * 40));
  EXPECT_NEAR(2.0 / 22.0, h.row_share(1), 0.03);
  // Steps that cost nothing per row: no row share; bad samples are ignored.
  StepCost flat;
  for (int i = 0; i < 60; ++i) flat.record(rows[i % 10], 0.03);
  flat.record(0, 1.0);
  flat.record(16, -1.0);
  flat.record(16, std::numeric_limits<double>::quiet_NaN());
  ASSERT_TRUE(flat.fitted());
  EXPECT_NEAR(0.0, flat.row_share(16), 1e-9);
  // Steps costlier per row than linear: read as no fixed part, every second the rows', and the
  // share capped so that drafts that are always taken are still made.
  StepCost steep;
  for (int i = 0; i < 60; ++i) steep.record(rows[i % 10], 0.0001 * rows[i % 10] * rows[i % 10]);
  ASSERT_TRUE(steep.fitted());
  EXPECT_EQ(0.0, steep.fixed_s());
  EXPECT_EQ(StepCost::kMaxRowShare, steep.row_share(16));
  DraftPolicy sure(8);
  EXPECT_EQ(8, sure.length(DraftPolicy::kLookup, steep.row_share(16)));
}

TEST(NgramLookupTest, DraftsFollowTheLatestLongestMatch) {
  std::vector<int32_t> d;
  const NgramLookup cfg{2, 4};
  // The suffix [7 8 9] occurs at 1 and at 6; the latest occurrence wins: 10 11 follow it.
  ngram_draft(std::vector<int32_t>{5, 7, 8, 9, 1, 2, 7, 8, 9, 10, 11, 3, 7, 8, 9}, {}, cfg, 3, d);
  EXPECT_EQ(d, (std::vector<int32_t>{10, 11, 3}));
  // A longer match beats a later shorter one: [1 2 3] at 0 over [2 3] at 5.
  ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 9, 2, 3, 6, 1, 2, 3}, {}, cfg, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{4, 9}));
  // k cuts the draft; the context's end cuts it too.
  ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2}, {}, cfg, 1, d);
  EXPECT_EQ(d, (std::vector<int32_t>{3}));
  ngram_draft(std::vector<int32_t>{4, 1, 2, 3, 1, 2}, {}, cfg, 8, d);
  EXPECT_EQ(d, (std::vector<int32_t>{3, 1, 2}));
  // A repeated token: the occurrence may overlap the suffix.
  ngram_draft(std::vector<int32_t>{6, 6, 6}, {}, cfg, 4, d);
  EXPECT_EQ(d, (std::vector<int32_t>{6}));
  // No match of at least min_n tokens: no draft; a one-token match counts with min_n 1.
  ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 3}, {}, cfg, 4, d);
  EXPECT_TRUE(d.empty());
  ngram_draft(std::vector<int32_t>{1, 2, 3, 4, 5, 3}, {}, NgramLookup{1, 4}, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{4, 5}));
  // A prediction is searched first, at every n (a shorter match in it beats a longer one in
  // the context); then the context.
  const std::vector<int32_t> ctx = {1, 2, 3, 50, 51, 1, 2, 3};
  ngram_draft(ctx, std::vector<int32_t>{9, 2, 3, 60, 61}, cfg, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{60, 61}));
  ngram_draft(ctx, std::vector<int32_t>{9, 9, 9}, cfg, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{50, 51}));
  // A match at the prediction's very end has nothing to propose: skipped.
  ngram_draft(ctx, std::vector<int32_t>{0, 2, 3}, cfg, 2, d);
  EXPECT_EQ(d, (std::vector<int32_t>{50, 51}));
  // Degenerate inputs.
  ngram_draft(std::vector<int32_t>{}, {}, cfg, 4, d);
  EXPECT_TRUE(d.empty());
  ngram_draft(std::vector<int32_t>{1, 2, 1, 2}, {}, cfg, 0, d);
  EXPECT_TRUE(d.empty());
}

// Sampling with speculative decoding: each row is sampled exactly as without a draft (the same
// random numbers), so seeded requests repeat their tokens with and without speculation.
TEST(EngineTest, SpeculativeSamplingRepeatsSeededOutputs) {
  LOAD_OR_SKIP(m, stories_path());
  const auto prompts = sixteen_prompts(m->config().n_vocab);
  auto sampled = [&](size_t i, GenerationRequest& r) {
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1000 + i;
    r.sampling.repetition_penalty = 1.1f;  // penalties see the accepted draft tokens in order
  };
  EngineConfig c = base_config(*m);
  std::vector<Outcome> plain;
  {
    Engine eng(*m, c);
    plain = run_prompts(eng, prompts, 32, false, sampled);
  }
  c.speculative = true;
  c.ngram = NgramLookup{1, 3};
  c.spec_max_running = 16;
  c.spec_step_cost = false;  // the counts below must not depend on step timings
  Engine eng(*m, c);
  const auto spec = run_prompts(eng, prompts, 32, false, [&](size_t i, GenerationRequest& r) {
    sampled(i, r);
    r.prediction = plain[i].tokens;  // mostly right: long accepted runs
    if (i % 2) r.prediction.clear();  // prompt lookup alone
  });
  expect_same_outputs(plain, spec, "seeded sampling with speculation");
  const EngineStats s = settled_stats(eng);
  EXPECT_GT(s.spec_accepted_tokens, 100);
  EXPECT_GT(s.spec_draft_tokens, s.spec_accepted_tokens);
}

// The distribution of tokens sampled from verification rows is the model's: a chi-square test on
// stories260K (512 tokens). Prompt P; a = greedy first token, b = greedy second after a. Every
// request (top-k 6, temperature 1, its own seed) predicts [a, b, ...], so after a first token
// of a the step verifies b: the second token is sampled from row 0 and, when it is b, the third
// from row 1 (given a, b). Both conditional distributions are compared with the exact ones
// (top-6 logprobs of requests that end with a, or a b, renormalized as top-k sampling does).
double chi_square_critical(int df, double z) {  // Wilson-Hilferty upper quantile
  const double k = df, t = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - t + z * std::sqrt(t), 3.0);
}

TEST(EngineTest, SpeculativeSamplingKeepsTheDistribution) {
  LOAD_OR_SKIP(m, stories_path());
  const std::vector<int32_t> prompt = sixteen_prompts(m->config().n_vocab)[5];
  EngineConfig c = base_config(*m);
  c.ngram = NgramLookup{1, 1};
  c.spec_max_running = 16;
  Engine eng(*m, c);
  auto run_one = [&](GenerationRequest r) {
    auto sink = std::make_shared<TestSink>();
    eng.submit(std::move(r), sink);
    EXPECT_TRUE(sink->wait_for(std::chrono::seconds(60)));
    return sink->outputs();
  };
  // The exact top-6 distribution after `ctx` (logprobs are before truncation: renormalize).
  auto exact = [&](std::vector<int32_t> ctx) {
    GenerationRequest r = greedy(std::move(ctx), 1);
    r.logprobs = 6;
    const std::vector<TokenOutput> o = run_one(r);
    std::map<int32_t, double> p;
    double sum = 0;
    for (const TokenLogprob& t : o.at(0).top) sum += std::exp(static_cast<double>(t.logprob));
    for (const TokenLogprob& t : o.at(0).top) p[t.id] = std::exp(static_cast<double>(t.logprob)) / sum;
    return p;
  };
  const int32_t a = run_one(greedy(prompt, 1)).at(0).id;
  std::vector<int32_t> pa = prompt;
  pa.push_back(a);
  const int32_t b = run_one(greedy(pa, 1)).at(0).id;
  std::vector<int32_t> pab = pa;
  pab.push_back(b);
  const std::map<int32_t, double> want2 = exact(pa), want3 = exact(pab);

  const int kN = 3000;
  std::vector<std::shared_ptr<TestSink>> sinks;
  for (int i = 0; i < kN; ++i) {
    GenerationRequest r = greedy(prompt, 3);
    r.sampling.temperature = 1.0f;
    r.sampling.top_k = 6;
    r.sampling.seed = 77 + static_cast<uint64_t>(i);
    r.prediction = {a, b, a, b};
    r.num_speculative_tokens = 2;
    sinks.push_back(std::make_shared<TestSink>());
    eng.submit(std::move(r), sinks.back());
  }
  std::map<int32_t, int> got2, got3;
  int n2 = 0, n3 = 0;
  for (auto& sk : sinks) {
    ASSERT_TRUE(sk->wait_for(std::chrono::seconds(300)));
    const std::vector<int32_t> t = sk->tokens();
    ASSERT_EQ(t.size(), 3u);
    if (t[0] != a) continue;
    ++got2[t[1]];
    ++n2;
    if (t[1] != b) continue;
    ++got3[t[2]];
    ++n3;
  }
  const EngineStats st = settled_stats(eng);
  EXPECT_GT(st.spec_accepted_tokens, 0);
  auto check = [&](const char* what, const std::map<int32_t, double>& want, const std::map<int32_t, int>& got, int n) {
    ASSERT_GT(n, 200) << what << ": too few samples for the test";
    double chi = 0;
    int df = -1;
    for (const auto& [tok, p] : want) {
      const double e = p * n;
      const auto it = got.find(tok);
      const double o = it == got.end() ? 0 : it->second;
      chi += (o - e) * (o - e) / e;
      ++df;
    }
    for (const auto& [tok, cnt] : got) EXPECT_TRUE(want.contains(tok)) << what << ": token " << tok << " is outside the top 6";
    const double crit = chi_square_critical(df, 3.09);  // p = 0.001
    std::printf("%s: %d samples, chi-square %.2f with %d degrees of freedom (critical %.2f at p = 0.001)\n", what, n,
                chi, df, crit);
    EXPECT_LT(chi, crit) << what;
  };
  check("second token (verification row 0)", want2, got2, n2);
  check("third token (verification row 1, after an accepted draft)", want3, got3, n3);
}

// Draft-model proposals: a prompt is caught up in chunks over several calls (no draft until it
// is), the draft is the draft model's greedy continuation, and after a partly rejected draft the
// next call keeps the K/V of the tokens that still match and recomputes the rest.
TEST(DraftModelTest, DraftsAreTheDraftModelsGreedyContinuation) {
  LOAD_OR_SKIP(m, stories_path());
  // The reference: the same model's greedy continuation through the engine (F32: batch-invariant).
  EngineConfig ec = base_config(*m);
  Engine eng(*m, ec);
  auto greedy_next = [&](std::vector<int32_t> ctx, int n) {
    return run_prompts(eng, {std::move(ctx)}, n, false)[0].tokens;
  };
  ThreadPool pool(2);
  DraftModelConfig dc;
  dc.kv_bytes = 8ull << 20;
  dc.catch_up_chunk = 16;
  DraftModel dm(*m, m->config(), dc);
  const std::vector<int32_t> prompt = sixteen_prompts(m->config().n_vocab)[3];  // 36 tokens
  ASSERT_EQ(prompt.size(), 36u);
  std::vector<std::vector<int32_t>> out;
  std::vector<DraftModel::Job> jobs = {{7, prompt, 5}};
  dm.propose(jobs, out, pool);
  EXPECT_TRUE(out[0].empty());  // 16 of 36 computed
  dm.propose(jobs, out, pool);
  EXPECT_TRUE(out[0].empty());  // 32
  dm.propose(jobs, out, pool);
  const std::vector<int32_t> g = greedy_next(prompt, 5);
  EXPECT_EQ(out[0], g);  // caught up: 36, then 4 one-token steps
  // Two draft tokens accepted, then a token the draft did not predict.
  std::vector<int32_t> t = prompt;
  t.insert(t.end(), {g[0], g[1], static_cast<int32_t>((g[2] + 1) % m->config().n_vocab)});
  const int64_t rows_before = dm.draft_tokens_computed();
  jobs = {{7, t, 3}};
  dm.propose(jobs, out, pool);
  EXPECT_EQ(out[0], greedy_next(t, 3));
  // Kept: the prompt and the two accepted tokens; computed: the new token, then 2 draft steps.
  EXPECT_EQ(dm.draft_tokens_computed() - rows_before, 1 + 2);
  dm.release(7);
  dm.propose(jobs, out, pool);  // a released request starts over
  EXPECT_TRUE(out[0].empty());
  // A pool too small for a request: no draft, and no error.
  DraftModelConfig tiny = dc;
  tiny.kv_bytes = 2 * 16 * KvStorage::token_bytes(m->config(), kv_layer_groups(m->config())[0], DType::kF16, DType::kF16);
  DraftModel small(*m, m->config(), tiny);
  jobs = {{1, prompt, 4}};
  for (int i = 0; i < 4; ++i) small.propose(jobs, out, pool);
  EXPECT_TRUE(out[0].empty());
  // Models it cannot draft for.
  LOAD_OR_SKIP(gem, synthetic_path("gemma3.gguf"));
  EXPECT_THROW(DraftModel(*gem, gem->config(), dc), Error);  // sliding-window layers
  ModelConfig other = m->config();
  other.n_vocab += 1;
  EXPECT_THROW(DraftModel(*m, other, dc), Error);
}

// The engine with a draft model: greedy outputs equal the target's alone, with a draft model
// that mostly agrees (the model itself) and with one that mostly does not (another model of
// the same vocabulary), batched, in a pool small enough to preempt.
TEST(EngineTest, DraftModelSpeculationKeepsTheOutputs) {
  LOAD_OR_SKIP(m, stories_path());
  LOAD_OR_SKIP(other, synthetic_path("llama.gguf"));
  const auto prompts = sixteen_prompts(m->config().n_vocab);
  EngineConfig c = base_config(*m);
  std::vector<Outcome> plain;
  {
    Engine eng(*m, c);
    plain = run_prompts(eng, prompts, 24, false);
  }
  c.speculative = true;
  c.spec_max_running = 16;
  c.num_speculative_tokens = 4;
  c.draft_kv_memory_bytes = 16ull << 20;
  c.spec_step_cost = false;  // the counts below must not depend on step timings
  for (const Model* d : {m, other}) {
    Engine eng(*m, c, nullptr, d);
    expect_same_outputs(plain, run_prompts(eng, prompts, 24, false), d == m ? "drafted by itself" : "drafted by another model");
    const EngineStats s = settled_stats(eng);
    EXPECT_GT(s.spec_draft_tokens, 0);
    std::printf("%s: %lld of %lld draft tokens accepted (the draft model's: %lld of %lld)\n",
                d == m ? "draft = the model" : "draft = another model", static_cast<long long>(s.spec_accepted_tokens),
                static_cast<long long>(s.spec_draft_tokens), static_cast<long long>(s.spec_model_accepted_tokens),
                static_cast<long long>(s.spec_model_draft_tokens));
    // The two sources add up to the totals, and the draft model drafted.
    EXPECT_EQ(s.spec_lookup_draft_tokens + s.spec_model_draft_tokens, s.spec_draft_tokens);
    EXPECT_EQ(s.spec_lookup_accepted_tokens + s.spec_model_accepted_tokens, s.spec_accepted_tokens);
    EXPECT_GT(s.spec_model_draft_tokens, 0);
    EXPECT_LE(s.spec_model_accepted_tokens, s.spec_model_draft_tokens);
    if (d == m) {
      EXPECT_GT(s.spec_accepted_tokens * 10, s.spec_draft_tokens * 9);  // greedy agrees with itself
    }
    expect_pool_at_rest(eng);
  }
  {  // A tiny main pool: requests are preempted and resume with their draft state.
    c.kv_memory_bytes = 14 * bytes_per_block_all_groups(*m, c);
    Engine eng(*m, c, nullptr, m);
    expect_same_outputs(plain, run_prompts(eng, prompts, 24, false), "drafted, tiny pool");
    EXPECT_GT(settled_stats(eng).preemptions, 0);
  }
  EngineConfig bad = base_config(*m);
  LOAD_OR_SKIP(gem, synthetic_path("gemma3.gguf"));
  EXPECT_THROW(Engine(*m, bad, nullptr, gem), Error);
}

TEST(EngineTest, EquivalenceSyntheticGemma3WithShortWindow) {
  LOAD_OR_SKIP(m, synthetic_path("gemma3.gguf"));
  ASSERT_EQ(m->config().sliding_window, 10);  // shorter than every prompt (21+ tokens)
  check_equivalence(*m);
}

// A quantized model (Q4_K_M mix: Q4_K, Q5_0, Q6_K, Q8_0 matrices) without --batch-invariant: on
// AVX-512 its matrices are re-laid at load (kernels/lane_layout.h; Q5_0 and Q8_0 with whole
// panels of rows into kernels/panel_layout.h, the tied output among them, so the embedding
// lookup reads its rows from panels), and those kernels give a token the same bits alone,
// batched, chunked or with its prefix cached. On AVX2 the matrices with whole panels of rows go
// into panels (its panel kernels), nothing into lanes. (The GGUF-block kernels
// are invariant below AVX-512 anyway.)
TEST(EngineTest, EquivalenceQuantizedWithoutBatchInvariantMode) {
  LOAD_OR_SKIP(m, synthetic_path("gemma3_q4_k_m.gguf"));
  ASSERT_FALSE(kernels::matmul_batch_invariant_requested());
  if (best_isa() == IsaLevel::kAvx2) {
    int panels = 0, lanes = 0;
    for (const auto& L : m->weights().layers)
      for (const kernels::WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
        panels += w->panels;
        lanes += w->lanes;
        EXPECT_EQ(w->panels, kernels::matmul_prefers_panels(IsaLevel::kAvx2, w->type) &&
                                 kernels::panel_layout_fits(w->type, w->rows));
      }
    EXPECT_EQ(0, lanes) << "AVX2 has no lane kernels";
    EXPECT_GT(panels + m->weights().output.panels, 0) << "no matrix in panels: the AVX2 panel kernels go untested here";
  }
  if (best_isa() == IsaLevel::kAvx512) {
    EXPECT_FALSE(m->weights().has_gguf_layout_quant()) << "quantized matrices should be re-laid on AVX-512";
    const kernels::WeightMatrix& out = m->weights().output;
    EXPECT_TRUE(kernels::matmul_prefers_panels(IsaLevel::kAvx512, out.type) && kernels::panel_layout_fits(out.type, out.rows)
                    ? out.panels
                    : out.lanes);
    int panels = 0;
    for (const auto& L : m->weights().layers)
      for (const kernels::WeightMatrix* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
        panels += w->panels;
    EXPECT_GT(panels + out.panels, 0) << "no matrix in panels: the panel kernels go untested here";
  }
  check_equivalence(*m);
}

// The same for a mixture of experts whose stacked experts are Q5_0: re-laid at load too, so an
// expert's product gives a token the same bits whatever else was routed to it in the step.
TEST(EngineTest, EquivalenceQuantizedExpertsWithoutBatchInvariantMode) {
  LOAD_OR_SKIP(m, synthetic_path("qwen3moe_q5_0.gguf"));
  ASSERT_FALSE(kernels::matmul_batch_invariant_requested());
  if (best_isa() == IsaLevel::kAvx512) {
    EXPECT_FALSE(m->weights().has_gguf_layout_quant()) << "quantized experts should be re-laid on AVX-512";
    EXPECT_TRUE(m->weights().layers[0].gate_exps.first.lanes);
    EXPECT_TRUE(m->weights().layers[0].down_exps.first.lanes);
  }
  check_equivalence(*m);
}

// Re-laying copies weights out of the file's pages into memory of its own: it stops at its
// budget (by default 7/8 of the memory available), and what is left stays in GGUF layout.
TEST(EngineTest, RelayoutStopsAtItsMemoryBudget) {
  const std::string path = synthetic_path("qwen3moe_q5_0.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing";
  for (const uint64_t budget : {uint64_t{1}, uint64_t{1} << 40}) {
    SCOPED_TRACE("budget " + std::to_string(budget));
    std::unique_ptr<gguf::GgufFile> f = gguf::GgufFile::open(path);
    ModelConfig c = ModelConfig::from_gguf(*f);
    ModelWeights w = ModelWeights::bind(*f, c);
    ASSERT_TRUE(w.has_gguf_layout_quant());
    const ModelWeights::Relayout r = w.relayout(*f, IsaLevel::kAvx512, 2, budget);
    if (budget == 1) {
      EXPECT_EQ(0, r.matrices);
      EXPECT_GT(r.kept, 0);
      EXPECT_GT(r.kept_bytes, uint64_t{0});
      EXPECT_TRUE(w.has_gguf_layout_quant());
      EXPECT_FALSE(w.layers[0].gate_exps.first.lanes);
    } else {
      EXPECT_GT(r.matrices, 0);
      EXPECT_EQ(0, r.kept);
      EXPECT_FALSE(w.has_gguf_layout_quant());
      EXPECT_TRUE(w.layers[0].down_exps.first.lanes);
    }
  }
}

// Every KV cache dtype (K and V chosen separately) is batch-invariant too: alone == batched
// with chunked prefill, prefix caching and a tight pool.
void check_kv_dtypes(const Model& m) {
  auto prompts = sixteen_prompts(m.config().n_vocab);
  prompts.resize(8);
  const std::pair<DType, DType> kinds[] = {
      {DType::kF32, DType::kF32}, {DType::kBF16, DType::kBF16}, {DType::kQ8_0, DType::kQ8_0},
      {DType::kQ8_0, DType::kF16}, {DType::kF16, DType::kBF16}};
  for (const auto& [k, v] : kinds) {
    SCOPED_TRACE(std::string("K ") + std::string(dtype_name(k)) + ", V " + std::string(dtype_name(v)));
    EngineConfig c = base_config(m);
    c.k_type = k;
    c.v_type = v;
    EngineConfig alone_cfg = c;
    alone_cfg.max_seqs = 1;
    alone_cfg.enable_prefix_caching = false;
    std::vector<Outcome> alone;
    {
      Engine eng(m, alone_cfg);
      alone = run_prompts(eng, prompts, 16, true);
    }
    c.max_batched_tokens = 11;
    c.kv_memory_bytes = 14 * bytes_per_block_all_groups(m, c);
    Engine eng(m, c);
    expect_same_outputs(alone, run_prompts(eng, prompts, 16, false), "batched");
    expect_pool_at_rest(eng);
  }
}

TEST(EngineTest, KvDtypesStories260K) {
  LOAD_OR_SKIP(m, stories_path());
  check_kv_dtypes(*m);
}

TEST(EngineTest, KvDtypesSyntheticGemma3) {
  LOAD_OR_SKIP(m, synthetic_path("gemma3.gguf"));
  check_kv_dtypes(*m);
}

// A second request sharing a 1,000-token prefix is served from the cache and says so.
void check_long_shared_prefix(const Model& m) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(3, m.config().n_vocab - 1);
  std::vector<int32_t> prefix(1000);
  for (int32_t& t : prefix) t = tok(rng);
  std::vector<int32_t> a = prefix, b = prefix;
  for (int i = 0; i < 9; ++i) a.push_back(tok(rng));
  for (int i = 0; i < 11; ++i) b.push_back(tok(rng));

  EngineConfig c = base_config(m);
  c.max_model_len = 1100;
  c.kv_memory_bytes = 256ull << 20;
  std::vector<Outcome> cold;
  {
    EngineConfig off = c;
    off.enable_prefix_caching = false;
    Engine eng(m, off);
    cold = run_prompts(eng, {b}, 16, true);
    EXPECT_EQ(cold[0].timings.cached_tokens, 0);
  }
  Engine eng(m, c);
  const auto first = run_prompts(eng, {a}, 16, true);
  EXPECT_EQ(first[0].timings.cached_tokens, 0);
  const auto second = run_prompts(eng, {b}, 16, true);
  EXPECT_GE(second[0].timings.cached_tokens, 992);
  EXPECT_EQ(second[0].tokens, cold[0].tokens);
  EXPECT_EQ(second[0].timings.prompt_tokens, 1011);
  expect_pool_at_rest(eng);
}

TEST(EngineTest, SharedThousandTokenPrefixStories260K) {
  LOAD_OR_SKIP(m, stories_path());
  check_long_shared_prefix(*m);
}

TEST(EngineTest, SharedThousandTokenPrefixSyntheticGemma3) {
  LOAD_OR_SKIP(m, synthetic_path("gemma3.gguf"));
  check_long_shared_prefix(*m);
}

TEST(EngineTest, CacheSaltIsolatesPrefixes) {
  LOAD_OR_SKIP(m, stories_path());
  Engine eng(*m, base_config(*m));
  std::vector<int32_t> p(100, 42);
  for (int i = 0; i < 100; ++i) p[i] = 3 + (i * 37) % 500;
  auto run = [&](const std::string& salt) {
    GenerationRequest r = greedy(p, 1);  // finishes in its first step: still reports hits
    r.cache_salt = salt;
    auto s = std::make_shared<TestSink>();
    eng.submit(std::move(r), s);
    EXPECT_TRUE(s->wait_for(std::chrono::seconds(60)));
    return s->timings().cached_tokens;
  };
  EXPECT_EQ(run("alice"), 0);
  EXPECT_EQ(run("bob"), 0);
  EXPECT_EQ(run("alice"), 96);
  EXPECT_EQ(run(""), 0);
  expect_pool_at_rest(eng);
}

TEST(EngineTest, SlidingWindowMemoryStaysBounded) {
  LOAD_OR_SKIP(m, synthetic_path("gemma3.gguf"));
  // Only the window group's pool is tight: a long request must still run through it.
  EngineConfig c = base_config(*m);
  c.max_model_len = 2048;
  c.max_batched_tokens = 64;
  c.max_seqs = 1;
  c.enable_prefix_caching = false;
  Engine eng(*m, c);
  // Window 10 with 64-token steps: at most ceil((10 + 64 - 1) / 16) + 1 = 6 blocks at a time.
  ASSERT_EQ(eng.kv_plan().group_window.size(), 2u);
  EXPECT_EQ(eng.kv_plan().group_window[1], 10);
  EXPECT_LE(eng.kv_plan().blocks_per_group[1], 6);
  const auto out = run_prompts(eng, {std::vector<int32_t>(1500, 7)}, 300, true);
  EXPECT_EQ(out[0].tokens.size(), 300u);
  EXPECT_EQ(out[0].reason, FinishReason::kLength);
  expect_pool_at_rest(eng);
}

TEST(EngineTest, FinishReasonsAndStopTokens) {
  LOAD_OR_SKIP(m, stories_path());
  Engine eng(*m, base_config(*m));
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const auto free_run = run_prompts(eng, {prompt}, 12, true)[0];
  ASSERT_EQ(free_run.tokens.size(), 12u);
  // Stopping at the 5th generated token: it is not delivered.
  GenerationRequest r = greedy(prompt, 12);
  r.stop_ids = {free_run.tokens[4]};
  auto s = std::make_shared<TestSink>();
  eng.submit(std::move(r), s);
  ASSERT_TRUE(s->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(s->reason(), FinishReason::kStop);
  const auto got = s->tokens();
  // The stop token may occur earlier in the run; the output ends right before its first use.
  size_t first = 0;
  while (free_run.tokens[first] != free_run.tokens[4]) ++first;
  EXPECT_EQ(got, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + first));
  EXPECT_EQ(s->timings().completion_tokens, static_cast<int32_t>(first));

  // The context bounds the output: finish_reason length at max_model_len.
  EngineConfig c = base_config(*m);
  c.max_model_len = 20;
  Engine small(*m, c);
  const auto capped = run_prompts(small, {std::vector<int32_t>(15, 9)}, 100, true)[0];
  EXPECT_EQ(capped.tokens.size(), 5u);
  EXPECT_EQ(capped.reason, FinishReason::kLength);
  expect_pool_at_rest(eng);
  expect_pool_at_rest(small);
}

TEST(EngineTest, RejectsBadRequestsAtSubmit) {
  LOAD_OR_SKIP(m, stories_path());
  Engine eng(*m, base_config(*m));
  auto sink = std::make_shared<TestSink>();
  EXPECT_THROW(eng.submit(greedy({}, 4), sink), Error);
  EXPECT_THROW(eng.submit(greedy(std::vector<int32_t>(512, 5), 4), sink), Error);  // = context
  EXPECT_THROW(eng.submit(greedy({1, 99999}, 4), sink), Error);
  EXPECT_THROW(eng.submit(greedy({1, -1}, 4), sink), Error);
  EXPECT_THROW(eng.submit(greedy({1, 2}, 0), sink), Error);
  GenerationRequest bad = greedy({1, 2}, 4);
  bad.sampling.top_p = 0;  // must lie in (0, 1]
  EXPECT_THROW(eng.submit(std::move(bad), sink), Error);
  EXPECT_THROW(eng.submit(greedy({1, 2}, 4), nullptr), Error);
  EXPECT_EQ(sink->n_finish(), 0);
  expect_pool_at_rest(eng);
}

TEST(EngineTest, RequestLargerThanThePoolFailsAlone) {
  LOAD_OR_SKIP(m, stories_path());
  EngineConfig c = base_config(*m);
  c.kv_memory_bytes = 4 * bytes_per_block_all_groups(*m, c);  // 64 tokens in all
  Engine eng(*m, c);
  auto big = std::make_shared<TestSink>(), small = std::make_shared<TestSink>();
  eng.submit(greedy(std::vector<int32_t>(100, 5), 4), big);
  eng.submit(greedy(std::vector<int32_t>(10, 5), 4), small);
  ASSERT_TRUE(big->wait_for(std::chrono::seconds(60)));
  ASSERT_TRUE(small->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(big->reason(), FinishReason::kError);
  EXPECT_NE(big->error().find("KV"), std::string::npos) << big->error();
  EXPECT_EQ(small->reason(), FinishReason::kLength);
  EXPECT_EQ(small->tokens().size(), 4u);
  expect_pool_at_rest(eng);
}

// JSON mode through the engine: every output replays through an independent matcher (so the
// mask was applied to every token, and an end-of-generation only where the object was
// complete), and the grammar state survives preemption: a pool so tight that requests are
// preempted and recomputed gives the same tokens as a roomy one.
TEST(EngineTest, ConstrainedDecodingIsEnforcedAndSurvivesPreemption) {
  LOAD_OR_SKIP(m, stories_path());
  auto tok = Tokenizer::from_gguf(m->file());
  auto vocab = grammar::Vocab::from_tokenizer(*tok);
  auto g = std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(grammar::json_object_gbnf()));
  auto constraint = std::make_shared<grammar::Constraint>(g, vocab);
  // A short grammar, so that some requests end (with end-of-generation despite ignore_eos).
  auto short_constraint = std::make_shared<grammar::Constraint>(
      std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf("root ::= \"{\" [a-z ]{1,12} \"}\"")), vocab);
  const auto prompts = sixteen_prompts(m->config().n_vocab);
  auto run = [&](uint64_t kv_bytes, int* preemptions) {
    EngineConfig c = base_config(*m);
    if (kv_bytes) c.kv_memory_bytes = kv_bytes;
    c.eog_ids = {tok->eos_id()};
    Engine eng(*m, c);
    std::vector<std::shared_ptr<TestSink>> sinks;
    for (size_t i = 0; i < 10; ++i) {
      GenerationRequest r = greedy(prompts[i], 60);
      r.constraint = i < 8 ? constraint : short_constraint;
      r.ignore_eos = true;  // a constrained request stops at the end of its grammar regardless
      sinks.push_back(std::make_shared<TestSink>());
      eng.submit(std::move(r), sinks.back());
    }
    std::vector<Outcome> out;
    for (auto& s : sinks) {
      EXPECT_TRUE(s->wait_for(std::chrono::seconds(120)));
      out.push_back({s->tokens(), s->reason(), s->timings()});
      *preemptions += s->timings().preemptions;
    }
    expect_pool_at_rest(eng);
    return out;
  };
  int pre_roomy = 0, pre_tight = 0;
  const std::vector<Outcome> roomy = run(0, &pre_roomy);
  EngineConfig c = base_config(*m);
  const std::vector<Outcome> tight = run(14 * bytes_per_block_all_groups(*m, c), &pre_tight);
  EXPECT_GT(pre_tight, 0) << "the tight pool should preempt";
  int stopped = 0;
  for (size_t i = 0; i < roomy.size(); ++i) {
    EXPECT_EQ(roomy[i].tokens, tight[i].tokens) << "request " << i;
    EXPECT_EQ(roomy[i].reason, tight[i].reason) << "request " << i;
    grammar::Matcher replay(i < 8 ? constraint : short_constraint);
    std::string text;
    for (int32_t t : roomy[i].tokens) {
      ASSERT_TRUE(replay.accept_token(t)) << "request " << i << " token " << t << " after '" << text << "'";
      text += vocab->piece(t);
    }
    if (i >= 8) {
      EXPECT_EQ(roomy[i].reason, FinishReason::kStop) << text;
    }
    if (roomy[i].reason == FinishReason::kStop) {
      ++stopped;
      EXPECT_TRUE(replay.accepting()) << text;
    } else {
      EXPECT_EQ(roomy[i].reason, FinishReason::kLength);
    }
  }
  std::printf("constrained: %d of 10 greedy completions ended; %d preemptions in the tight pool\n", stopped,
              pre_tight);
}

TEST(EngineTest, CancelFreesBlocksAtTheNextStep) {
  LOAD_OR_SKIP(m, stories_path());
  EngineConfig c = base_config(*m);
  c.max_model_len = 2048;
  Engine eng(*m, c);
  // One cancelled from its own sink after 5 tokens, one cancelled from outside while running,
  // one cancelled before it could be scheduled, and one left alone.
  auto a = std::make_shared<TestSink>(), b = std::make_shared<TestSink>(),
       d = std::make_shared<TestSink>(), e = std::make_shared<TestSink>();
  a->cancel_after(&eng, 5);
  eng.submit(greedy(std::vector<int32_t>(40, 11), 1000), a);
  const RequestId idb = eng.submit(greedy(std::vector<int32_t>(40, 12), 2000), b);
  const RequestId idd = eng.submit(greedy(std::vector<int32_t>(40, 13), 1000), d);
  eng.cancel(idd);
  eng.submit(greedy(std::vector<int32_t>(40, 14), 20), e);
  while (b->tokens().size() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  eng.cancel(idb);
  for (auto* s : {&a, &b, &d, &e}) ASSERT_TRUE((*s)->wait_for(std::chrono::seconds(60)));
  EXPECT_EQ(a->reason(), FinishReason::kCancelled);
  EXPECT_EQ(a->tokens().size(), 5u);
  EXPECT_EQ(b->reason(), FinishReason::kCancelled);
  EXPECT_LT(b->tokens().size(), 2000u);
  EXPECT_EQ(d->reason(), FinishReason::kCancelled);
  EXPECT_EQ(e->reason(), FinishReason::kLength);
  EXPECT_EQ(e->tokens().size(), 20u);
  for (auto* s : {&a, &b, &d, &e}) {
    EXPECT_EQ((*s)->n_finish(), 1);
    EXPECT_EQ((*s)->calls_after_finish(), 0);
  }
  eng.cancel(idb);      // already finished: a no-op
  eng.cancel(123456);   // unknown: a no-op
  expect_pool_at_rest(eng);
}

TEST(EngineTest, DrainFinishesEverythingAndRefusesNewWork) {
  LOAD_OR_SKIP(m, stories_path());
  Engine eng(*m, base_config(*m));
  std::vector<std::shared_ptr<TestSink>> sinks;
  for (int i = 0; i < 8; ++i) {
    sinks.push_back(std::make_shared<TestSink>());
    eng.submit(greedy(std::vector<int32_t>(10 + i, 20 + i), 30), sinks.back());
  }
  eng.drain();
  for (auto& s : sinks) {
    EXPECT_EQ(s->n_finish(), 1);
    EXPECT_EQ(s->reason(), FinishReason::kLength);
  }
  EXPECT_THROW(eng.submit(greedy({1, 2}, 4), std::make_shared<TestSink>()), Error);
}

TEST(EngineTest, DestructionCancelsWhatIsInFlight) {
  LOAD_OR_SKIP(m, stories_path());
  std::vector<std::shared_ptr<TestSink>> sinks;
  {
    EngineConfig c = base_config(*m);
    c.max_model_len = 2048;
    Engine eng(*m, c);
    for (int i = 0; i < 4; ++i) {
      sinks.push_back(std::make_shared<TestSink>());
      eng.submit(greedy(std::vector<int32_t>(10, 20 + i), 2000), sinks.back());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& s : sinks) {
    EXPECT_EQ(s->n_finish(), 1);
    EXPECT_EQ(s->reason(), FinishReason::kCancelled);
  }
}

TEST(EngineTest, TimingsAndStats) {
  LOAD_OR_SKIP(m, stories_path());
  Engine eng(*m, base_config(*m));
  const auto out = run_prompts(eng, {std::vector<int32_t>(33, 8)}, 10, true)[0];
  EXPECT_EQ(out.timings.prompt_tokens, 33);
  EXPECT_EQ(out.timings.completion_tokens, 10);
  EXPECT_GE(out.timings.queue_s, 0);
  EXPECT_GE(out.timings.ttft_s, out.timings.queue_s);
  EXPECT_GE(out.timings.e2e_s, out.timings.ttft_s);
  const EngineStats s = settled_stats(eng);
  EXPECT_EQ(s.prompt_tokens, 33);
  EXPECT_EQ(s.generated_tokens, 10);
  EXPECT_EQ(s.requests_finished, 1);
  EXPECT_EQ(s.prefix_queries, 33);
  EXPECT_EQ(s.kv_blocks_cached, 2);  // the 32 prompt tokens of two full blocks, plus outputs
  EXPECT_LT(s.last_progress_s, 5.0);
}

// Random arrivals from several threads, random lengths and output limits, stop tokens, cancels
// from outside and from sinks, a few requests that can never fit, and a pool small enough to
// preempt constantly. Every request finishes exactly once; nothing is left in the pool.
TEST(EngineTest, RandomizedStress) {
  LOAD_OR_SKIP(m, stories_path());
  EngineConfig c = base_config(*m);
  c.block_size = 8;
  c.max_batched_tokens = 48;
  c.max_seqs = 6;
  c.max_model_len = 512;
  c.kv_memory_bytes = 40 * bytes_per_block_all_groups(*m, c);  // 320 tokens
  Engine eng(*m, c);

  constexpr int kThreads = 3, kPerThread = 40;
  std::vector<std::vector<std::shared_ptr<TestSink>>> sinks(kThreads);
  std::vector<std::vector<int32_t>> max_tokens(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      for (int i = 0; i < kPerThread; ++i) {
        const int kind = uni(0, 19);
        int len = uni(1, 120);
        if (kind == 0) len = uni(330, 400);  // can never fit in the pool: fails alone
        std::vector<int32_t> prompt(len);
        const int family = uni(0, 3);  // shared prefixes so the cache is exercised
        for (int k = 0; k < len; ++k) prompt[k] = k < 24 ? 3 + family * 50 + k : uni(3, 511);
        GenerationRequest r = greedy(std::move(prompt), uni(1, 40));
        if (uni(0, 3) == 0) {
          r.sampling.temperature = 0.8f;
          r.sampling.seed = static_cast<uint64_t>(uni(1, 1000));
        }
        if (uni(0, 4) == 0) r.stop_ids = {uni(3, 511)};
        if (uni(0, 5) == 0) r.priority = uni(-2, 2);
        auto s = std::make_shared<TestSink>();
        if (kind == 1) s->cancel_after(&eng, uni(1, 5));
        max_tokens[t].push_back(r.max_tokens);
        const RequestId id = eng.submit(std::move(r), s);
        sinks[t].push_back(s);
        if (kind == 2) eng.cancel(id);
        if (kind == 3) {
          std::this_thread::sleep_for(std::chrono::microseconds(uni(0, 3000)));
          eng.cancel(id);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(uni(0, 2000)));
      }
    });
  }
  for (auto& th : threads) th.join();
  int n_error = 0, n_cancelled = 0, n_done = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (size_t i = 0; i < sinks[t].size(); ++i) {
      auto& s = sinks[t][i];
      ASSERT_TRUE(s->wait_for(std::chrono::seconds(120))) << "lost request " << t << "/" << i;
      EXPECT_EQ(s->n_finish(), 1);
      EXPECT_EQ(s->calls_after_finish(), 0);
      EXPECT_LE(s->tokens().size(), static_cast<size_t>(max_tokens[t][i]));
      switch (s->reason()) {
        case FinishReason::kError: ++n_error; break;
        case FinishReason::kCancelled: ++n_cancelled; break;
        case FinishReason::kLength:
        case FinishReason::kStop: ++n_done; break;
        default: {
          ADD_FAILURE() << "bad finish reason";
        }
      }
      if (s->reason() == FinishReason::kLength) {
        EXPECT_EQ(s->tokens().size(), static_cast<size_t>(max_tokens[t][i]));
      }
    }
  }
  EXPECT_GT(n_done, kThreads * kPerThread / 2);
  EXPECT_GT(n_error, 0);
  EXPECT_GT(n_cancelled, 0);
  const EngineStats s = settled_stats(eng);
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.prefix_hits, 0);
  EXPECT_EQ(s.requests_finished, kThreads * kPerThread);
  expect_pool_at_rest(eng);
}

}  // namespace
}  // namespace triad::engine
