// Unit tests for src/sched (iteration-level scheduler), with fake requests and no model.
//
// The fake model is a paged K/V simulator: computing position p writes the value
// v(p) = mix(v(p-1), token[p]) into the cell of p in every layer group, through the request's
// block tables, reading v(p-1) back from the cache. When a request needs logits, every cell its
// last token can see is checked against the value computed directly from its tokens, and the
// sampled token is v(last) % 1000. So sampled tokens are deterministic by content, and any
// mistake in chunking, prefix-cache reuse, window release or recomputation after preemption
// changes them (or fails a check).
//
// Covered: config/spec validation; token budget; running before waiting; chunked prefill while
// another request decodes; max_seqs; FCFS without overtaking; priority order; prefix-cache reuse
// (salts, never the last token, caching off); preemption of the most recently admitted request
// with exact recomputation; repeated preemption in a tiny pool; requests too big for the pool
// (kError at once, or once they outgrow it); stop ids, max_tokens and max_model_len; cancel of
// waiting, running and in-flight requests; update() misuse; sliding-window groups (including a
// chunk too big for a small window pool); prefill-only (embedding) requests, chunked or whole;
// and a randomized stress test with fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "sched/scheduler.h"

namespace triad::sched {
namespace {

using kv::KvGroupSpec;
using kv::KvManagerConfig;

constexpr uint64_t kSeed = 0x9e3779b97f4a7c15ull;

uint64_t mix(uint64_t prev, int32_t token) {
  uint64_t z = prev ^ (static_cast<uint64_t>(token) * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Values v(0..n) of a token sequence, computed directly.
std::vector<uint64_t> chain(const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> v(tokens.size());
  uint64_t prev = kSeed;
  for (size_t i = 0; i < tokens.size(); ++i) v[i] = prev = mix(prev, tokens[i]);
  return v;
}

int32_t fake_token(uint64_t v) { return static_cast<int32_t>(v % 1000); }

struct Expected {
  std::vector<int32_t> shown;  // output tokens (a stop token excluded)
  FinishReason finish = FinishReason::kNone;
};

// What an unpreempted, unbatched run of `spec` produces.
Expected expect(const SchedRequestSpec& spec, int32_t max_model_len) {
  Expected e;
  if (spec.prefill_only) {  // finishes once its prompt is computed, with nothing sampled
    e.finish = FinishReason::kStop;
    return e;
  }
  std::vector<int32_t> tokens = spec.prompt;
  uint64_t v = chain(tokens).back();
  for (;;) {
    const int32_t tok = fake_token(v);
    if (std::find(spec.stop_ids.begin(), spec.stop_ids.end(), tok) != spec.stop_ids.end()) {
      e.finish = FinishReason::kStop;
      return e;
    }
    tokens.push_back(tok);
    e.shown.push_back(tok);
    if (static_cast<int32_t>(e.shown.size()) >= spec.max_tokens ||
        static_cast<int32_t>(tokens.size()) >= max_model_len) {
      e.finish = FinishReason::kLength;
      return e;
    }
    v = mix(v, tok);
  }
}

KvManagerConfig kv_config(int32_t bs, std::vector<KvGroupSpec> groups, bool caching = true) {
  KvManagerConfig c;
  c.block_size = bs;
  c.groups = std::move(groups);
  c.enable_prefix_caching = caching;
  c.cache_namespace = "sched-test";
  return c;
}

std::vector<int32_t> iota_tokens(int32_t n, int32_t start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[i] = (start + i) % 1000;
  return t;
}

SchedRequestSpec make_spec(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens,
                           int32_t priority = 0) {
  SchedRequestSpec s;
  s.id = id;
  s.prompt = std::move(prompt);
  s.max_tokens = max_tokens;
  s.priority = priority;
  return s;
}

// Blocks a window group holds while computing the single token at p (independent of the
// scheduler's own computation of it).
int64_t window_hold(int64_t p, int32_t window, int32_t bs) {
  int64_t first = 0;
  while ((first + 1) * bs - 1 <= p - window) ++first;  // block wholly outside (p-window, p]
  return p / bs - first + 1;
}

// Whether a request of n tokens can never compute its last token in the whole pool.
bool exceeds_pool(const KvManagerConfig& c, int64_t n) {
  for (const KvGroupSpec& g : c.groups) {
    int64_t need = 0;
    for (int64_t p = 0; p < n; ++p)
      need = std::max(need, g.window == 0 ? p / c.block_size + 1 : window_hold(p, g.window, c.block_size));
    if (need > g.n_blocks) return true;
  }
  return false;
}

// Drives a Scheduler with the fake model and checks, every step: the budget, max_seqs, that the
// scheduled running requests come first and in admission order, that preemption takes the most
// recently admitted, the K/V contents, and Scheduler::check_invariants().
class Harness {
 public:
  Harness(SchedulerConfig sc, KvManagerConfig kc) : sched(sc, kc), kvc_(kc) {
    for (const KvGroupSpec& g : kc.groups)
      cells_.emplace_back(static_cast<size_t>(g.n_blocks) * static_cast<size_t>(kc.block_size), 0);
  }

  void add(const SchedRequestSpec& spec) {
    sched.add(spec);
    specs[spec.id] = spec;
  }

  // One step. `between` runs after the forward pass and before update() (e.g. a cancel).
  // With a drafter, every running request in decode first gets drafter(its state) as its draft.
  SchedulerOutput step(const std::function<void(const SchedulerOutput&)>& between = {}) {
    const bool had_work = sched.has_work();
    if (drafter) {
      for (const auto& [id, spec] : specs) {
        const SchedRequest* r = sched.request(id);
        if (r && r->status == RequestStatus::kRunning && static_cast<size_t>(r->n_computed) + 1 == r->tokens.size())
          sched.set_draft(id, drafter(*r));
      }
    }
    SchedulerOutput out = sched.schedule();
    ++steps;
    check_plan(out);
    if (had_work) {
      EXPECT_TRUE(!out.seqs.empty() || !out.failed.empty()) << "idle step";
    }
    std::vector<std::vector<int32_t>> sampled(out.seqs.size());
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      sampled[i] = forward(out.seqs[i]);
      drafted += out.seqs[i].n_draft;
      if (!sampled[i].empty()) accepted_drafts += static_cast<int64_t>(sampled[i].size()) - 1;
    }
    if (between) between(out);
    const std::vector<StepEvent> events = sched.update(out, std::span<const std::vector<int32_t>>(sampled));
    size_t e = 0;
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      if (e < events.size() && events[e].id == out.seqs[i].id) {
        const bool samples = out.seqs[i].needs_logits && !specs.at(out.seqs[i].id).prefill_only;
        // One event per accepted token (the last one may finish the request).
        for (size_t k = 0; e < events.size() && events[e].id == out.seqs[i].id; ++k) {
          const StepEvent& ev = events[e++];
          EXPECT_EQ(ev.token, samples && k < sampled[i].size() ? sampled[i][k] : -1);
          if (ev.token >= 0 && ev.finish != FinishReason::kStop) shown[ev.id].push_back(ev.token);
          if (ev.finish != FinishReason::kNone) {
            EXPECT_EQ(sched.request(ev.id), nullptr);
            done[ev.id] = ev.finish;
            std::erase(admitted_, ev.id);
            EXPECT_TRUE(e == events.size() || events[e].id != ev.id) << "events after a finish";
          }
        }
      } else {
        EXPECT_TRUE(cancelled.contains(out.seqs[i].id)) << "no event for " << out.seqs[i].id;
      }
    }
    EXPECT_EQ(e, events.size());
    for (const auto& [id, r] : specs) {
      if (const SchedRequest* q = sched.request(id))
        max_preemptions[id] = std::max(max_preemptions[id], q->n_preemptions);
    }
    EXPECT_NO_THROW(sched.check_invariants());
    return out;
  }

  bool cancel(RequestId id) {
    const bool ok = sched.cancel(id);
    if (ok) {
      cancelled.insert(id);
      std::erase(admitted_, id);
    }
    return ok;
  }

  void run_until_idle(int max_steps = 100000) {
    for (int i = 0; i < max_steps && sched.has_work(); ++i) step();
    ASSERT_FALSE(sched.has_work()) << "still busy after " << max_steps << " steps";
  }

  // Every finished request produced what an unbatched, unpreempted run produces.
  void expect_outputs_match() const {
    for (const auto& [id, reason] : done) {
      const Expected want = expect(specs.at(id), sched.config().max_model_len);
      auto it = shown.find(id);
      const std::vector<int32_t> got = it == shown.end() ? std::vector<int32_t>{} : it->second;
      if (reason == FinishReason::kError) {
        ASSERT_LE(got.size(), want.shown.size()) << "request " << id;
        EXPECT_TRUE(std::equal(got.begin(), got.end(), want.shown.begin())) << "request " << id;
        EXPECT_TRUE(exceeds_pool(kvc_, static_cast<int64_t>(specs.at(id).prompt.size() + got.size())))
            << "request " << id << " failed but fits the pool";
      } else {
        EXPECT_EQ(reason, want.finish) << "request " << id;
        EXPECT_EQ(got, want.shown) << "request " << id;
      }
    }
  }

  void expect_pool_idle() const {
    const kv::KvManagerStats st = sched.kv().stats();
    EXPECT_EQ(st.blocks_used, 0);
    EXPECT_EQ(st.blocks_free, st.blocks_total);
    for (int32_t g = 0; g < sched.kv().n_groups(); ++g)
      EXPECT_EQ(sched.kv().num_free_blocks(g), kvc_.groups[g].n_blocks);
  }

  Scheduler sched;
  std::map<RequestId, SchedRequestSpec> specs;
  std::map<RequestId, std::vector<int32_t>> shown;
  std::map<RequestId, FinishReason> done;
  std::map<RequestId, int32_t> max_preemptions;
  std::set<RequestId> cancelled;
  std::vector<RequestId> admission_log;  // ids in the order they were (re)admitted
  int64_t steps = 0;
  std::function<std::vector<int32_t>(const SchedRequest&)> drafter;
  int64_t drafted = 0, accepted_drafts = 0;  // draft tokens scheduled, and accepted

 private:
  void check_plan(const SchedulerOutput& out) {
    const SchedulerConfig& c = sched.config();
    int32_t sum = 0;
    std::set<RequestId> ids;
    for (const ScheduledSeq& s : out.seqs) {
      EXPECT_GT(s.n_new, 0);
      EXPECT_TRUE(ids.insert(s.id).second) << "scheduled twice: " << s.id;
      const SchedRequest* r = sched.request(s.id);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->status, RequestStatus::kRunning);
      EXPECT_EQ(r->n_computed, s.n_computed);
      EXPECT_EQ(s.needs_logits, static_cast<size_t>(s.n_computed + s.n_new) == r->tokens.size() + s.n_draft);
      if (s.n_draft > 0) {  // the last sampled token and (a prefix of) the draft given
        EXPECT_EQ(static_cast<size_t>(s.n_computed) + 1, r->tokens.size());
        EXPECT_EQ(s.n_new, 1 + s.n_draft);
        EXPECT_EQ(r->draft.size(), static_cast<size_t>(s.n_draft));
        EXPECT_LE(r->n_output() + 1 + s.n_draft, r->spec.max_tokens) << "drafts past max_tokens";
        EXPECT_LE(static_cast<int32_t>(r->tokens.size()) + s.n_draft, c.max_model_len - 1) << "drafts past the context";
      }
      sum += s.n_new;
    }
    EXPECT_EQ(out.n_tokens, sum);
    EXPECT_LE(out.n_tokens, c.max_batched_tokens);
    EXPECT_LE(sched.stats().running, c.max_seqs);
    for (RequestId id : out.failed) {
      EXPECT_EQ(sched.request(id), nullptr);
      done[id] = FinishReason::kError;
    }
    // Victims (preempted, or failed while running) are the most recently admitted, newest first.
    const std::vector<RequestId> before = admitted_;
    size_t n_victims = 0;
    for (RequestId id : before)
      if (std::find(out.preempted.begin(), out.preempted.end(), id) != out.preempted.end() ||
          std::find(out.failed.begin(), out.failed.end(), id) != out.failed.end())
        ++n_victims;
    for (size_t j = 0; j < n_victims; ++j) {
      const RequestId v = before[before.size() - 1 - j];
      const bool is_victim =
          std::find(out.preempted.begin(), out.preempted.end(), v) != out.preempted.end() ||
          std::find(out.failed.begin(), out.failed.end(), v) != out.failed.end();
      EXPECT_TRUE(is_victim) << "preempted a request that is not the most recently admitted";
    }
    for (size_t j = 0; j < out.preempted.size(); ++j)
      EXPECT_EQ(out.preempted[j], before[before.size() - 1 - j]) << "preemption order";
    admitted_.resize(before.size() - n_victims);
    // Running requests first, as a prefix of the admission order; then newly admitted ones.
    size_t k = 0;
    while (k < out.seqs.size() && k < admitted_.size() && out.seqs[k].id == admitted_[k]) ++k;
    for (size_t j = k; j < out.seqs.size(); ++j) {
      EXPECT_EQ(std::find(admitted_.begin(), admitted_.end(), out.seqs[j].id), admitted_.end())
          << "running request " << out.seqs[j].id << " scheduled out of admission order";
    }
    for (size_t j = k; j < out.seqs.size(); ++j) {
      admitted_.push_back(out.seqs[j].id);
      admission_log.push_back(out.seqs[j].id);
    }
  }

  uint64_t& cell(int32_t g, int32_t p, RequestId id) {
    const auto table = sched.kv().block_table(id, g);
    const int32_t bs = kvc_.block_size;
    static uint64_t dummy = 0;
    if (static_cast<size_t>(p / bs) >= table.size() || table[p / bs] == kv::kNoBlock) {
      ADD_FAILURE() << "request " << id << " group " << g << " has no block for position " << p;
      return dummy;
    }
    return cells_[g][static_cast<size_t>(table[p / bs]) * bs + p % bs];
  }

  // Computes s's positions (its draft's too) through the block tables; returns the accepted
  // tokens (empty without logits): with a draft, the token sampled at each draft position while
  // it equals the draft token, then the first that differs (or the one after the draft).
  std::vector<int32_t> forward(const ScheduledSeq& s) {
    const SchedRequest* r = sched.request(s.id);
    const int32_t bs = kvc_.block_size;
    const auto n_tokens = static_cast<int32_t>(r->tokens.size());
    uint64_t prev = s.n_computed == 0 ? kSeed : cell(0, s.n_computed - 1, s.id);
    for (int32_t p = s.n_computed; p < s.n_computed + s.n_new; ++p) {
      prev = mix(prev, p < n_tokens ? r->tokens[p] : r->draft[p - n_tokens]);
      for (int32_t g = 0; g < sched.kv().n_groups(); ++g) {
        const kv::BlockId b = sched.kv().block_table(s.id, g)[p / bs];
        EXPECT_EQ(sched.kv().ref_count(g, b), 1) << "writing into a shared block";
        EXPECT_FALSE(sched.kv().is_cached(g, b)) << "writing into a cached block";
        cell(g, p, s.id) = prev;
      }
    }
    if (!s.needs_logits) return {};
    const std::vector<uint64_t> want = chain(r->tokens);
    const int32_t last = n_tokens - 1;
    for (int32_t g = 0; g < sched.kv().n_groups(); ++g) {
      const int32_t w = kvc_.groups[g].window;
      for (int32_t q = w == 0 ? 0 : std::max(0, last - w + 1); q <= last; ++q)
        EXPECT_EQ(cell(g, q, s.id), want[q]) << "request " << s.id << " group " << g << " pos " << q;
    }
    std::vector<int32_t> out;
    for (int32_t j = 0; j <= s.n_draft; ++j) {
      const int32_t tok = fake_token(cell(0, last + j, s.id));
      out.push_back(tok);
      if (j == s.n_draft || tok != r->draft[j]) break;
    }
    return out;
  }

  KvManagerConfig kvc_;
  std::vector<std::vector<uint64_t>> cells_;  // per group: n_blocks * block_size values
  std::vector<RequestId> admitted_;           // running requests in admission order (model)
};

SchedulerConfig sched_config(int32_t budget, int32_t max_seqs, int32_t max_model_len = 4096) {
  return SchedulerConfig{budget, max_seqs, max_model_len};
}

TEST(SchedulerTest, RejectsBadConfigAndSpecs) {
  const KvManagerConfig kc = kv_config(4, {{0, 16}});
  EXPECT_THROW(Scheduler(sched_config(0, 4), kc), Error);
  EXPECT_THROW(Scheduler(sched_config(8, 0), kc), Error);
  EXPECT_THROW(Scheduler(sched_config(8, 4, 1), kc), Error);
  EXPECT_THROW(Scheduler(sched_config(8, 4), kv_config(0, {{0, 16}})), Error);

  Scheduler s(sched_config(8, 4, 32), kc);
  EXPECT_THROW(s.add(make_spec(1, {}, 4)), Error);
  EXPECT_THROW(s.add(make_spec(1, iota_tokens(32, 0), 4)), Error);  // prompt >= max_model_len
  EXPECT_THROW(s.add(make_spec(1, iota_tokens(4, 0), 0)), Error);
  EXPECT_THROW(s.add(make_spec(1, {1, -5, 2}, 4)), Error);
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.stats().waiting, 0);
  s.add(make_spec(1, iota_tokens(31, 0), 4));
  try {
    s.add(make_spec(1, iota_tokens(3, 0), 4));
    FAIL() << "duplicate id accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.stats().waiting, 1);
  EXPECT_EQ(s.request(1)->tokens.size(), 31u);
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kError), "error");
}

TEST(SchedulerTest, BudgetChunksPromptsAndRunsRunningFirst) {
  Harness h(sched_config(8, 4), kv_config(4, {{0, 64}}));
  h.add(make_spec(1, iota_tokens(20, 100), 5));
  SchedulerOutput o = h.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].n_computed, 0);
  EXPECT_EQ(o.seqs[0].n_new, 8);
  EXPECT_FALSE(o.seqs[0].needs_logits);
  o = h.step();
  EXPECT_EQ(o.seqs[0].n_computed, 8);
  EXPECT_EQ(o.seqs[0].n_new, 8);
  o = h.step();
  EXPECT_EQ(o.seqs[0].n_computed, 16);
  EXPECT_EQ(o.seqs[0].n_new, 4);
  EXPECT_TRUE(o.seqs[0].needs_logits);
  EXPECT_EQ(h.shown[1].size(), 1u);

  h.add(make_spec(2, iota_tokens(10, 300), 3));
  o = h.step();
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[0].id, 1u);  // the running decode first
  EXPECT_EQ(o.seqs[0].n_new, 1);
  EXPECT_TRUE(o.seqs[0].needs_logits);
  EXPECT_EQ(o.seqs[1].id, 2u);
  EXPECT_EQ(o.seqs[1].n_new, 7);  // what is left of the budget
  EXPECT_FALSE(o.seqs[1].needs_logits);
  EXPECT_EQ(o.n_tokens, 8);
  o = h.step();
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[1].n_computed, 7);
  EXPECT_EQ(o.seqs[1].n_new, 3);
  EXPECT_TRUE(o.seqs[1].needs_logits);
  h.run_until_idle();
  h.expect_outputs_match();
  EXPECT_EQ(h.done.at(1), FinishReason::kLength);
  EXPECT_EQ(h.shown.at(1).size(), 5u);
  EXPECT_EQ(h.sched.stats().tokens_computed, 20 + 4 + 10 + 2);  // each output but the last
  h.expect_pool_idle();
}

TEST(SchedulerTest, LongPromptIsChunkedWhileAnotherKeepsDecoding) {
  Harness h(sched_config(16, 4), kv_config(4, {{0, 128}}));
  h.add(make_spec(1, iota_tokens(3, 7), 40));
  h.step();
  ASSERT_EQ(h.shown[1].size(), 1u);
  h.add(make_spec(2, iota_tokens(150, 500), 4));
  int prefill_steps = 0;
  while (!h.shown.contains(2)) {
    const size_t before = h.shown[1].size();
    SchedulerOutput o = h.step();
    ASSERT_EQ(o.seqs.size(), 2u);
    EXPECT_EQ(o.seqs[0].id, 1u);
    EXPECT_EQ(o.seqs[0].n_new, 1);
    EXPECT_EQ(h.shown[1].size(), before + 1) << "the decode stalled";
    EXPECT_EQ(o.seqs[1].id, 2u);
    EXPECT_EQ(o.seqs[1].n_new, std::min(15, 150 - o.seqs[1].n_computed));
    ++prefill_steps;
  }
  EXPECT_EQ(prefill_steps, 10);
  h.run_until_idle();
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, MaxSeqsLimitsRunningRequests) {
  Harness h(sched_config(64, 2), kv_config(4, {{0, 64}}));
  for (RequestId id = 1; id <= 4; ++id) h.add(make_spec(id, iota_tokens(5, 10 * static_cast<int32_t>(id)), 3 + static_cast<int32_t>(id)));
  SchedulerOutput o = h.step();
  EXPECT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(h.sched.stats().running, 2);
  EXPECT_EQ(h.sched.stats().waiting, 2);
  while (h.sched.has_work()) {
    const size_t finished = h.done.size();
    o = h.step();
    EXPECT_LE(h.sched.stats().running, 2);
    for (const ScheduledSeq& s : o.seqs)
      if (s.id >= 3 && s.n_computed == 0) {
        EXPECT_GE(finished, s.id - 2) << "admitted past max_seqs";
      }
  }
  EXPECT_EQ(h.admission_log, (std::vector<RequestId>{1, 2, 3, 4}));
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, AdmitsInArrivalOrderWithoutOvertaking) {
  // 10 blocks of 4: request 1 takes 8 at once, request 2 needs 5 and waits; request 3 would fit
  // in the 2 left but must not overtake request 2.
  Harness h(sched_config(64, 8), kv_config(4, {{0, 10}}, false));
  h.add(make_spec(1, iota_tokens(30, 0), 8));
  h.add(make_spec(2, iota_tokens(20, 100), 2));
  h.add(make_spec(3, iota_tokens(2, 200), 2));
  SchedulerOutput o = h.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(h.sched.request(3)->status, RequestStatus::kWaiting);
  h.run_until_idle();
  EXPECT_EQ(h.admission_log, (std::vector<RequestId>{1, 2, 3}));
  EXPECT_EQ(h.sched.stats().preemptions, 0);
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, AdmitsByPriorityThenArrival) {
  Harness h(sched_config(64, 1), kv_config(4, {{0, 64}}));
  h.add(make_spec(1, iota_tokens(4, 1), 2, 5));
  h.add(make_spec(2, iota_tokens(4, 2), 2, 1));
  h.add(make_spec(3, iota_tokens(4, 3), 2, 3));
  h.add(make_spec(4, iota_tokens(4, 4), 2, 1));
  h.step();
  h.add(make_spec(5, iota_tokens(4, 5), 2, 0));  // arrives later, runs before the rest
  h.run_until_idle();
  EXPECT_EQ(h.admission_log, (std::vector<RequestId>{2, 5, 4, 3, 1}));
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, ReusesCachedPrefixes) {
  Harness h(sched_config(64, 4), kv_config(4, {{0, 64}}));
  const std::vector<int32_t> p = iota_tokens(40, 600);
  h.add(make_spec(1, p, 3));
  h.run_until_idle();
  EXPECT_EQ(h.sched.kv().stats().blocks_used, 0);
  EXPECT_GT(h.sched.kv().stats().blocks_cached, 0);

  h.add(make_spec(2, p, 3));  // same prompt: all but the last block (never the last token)
  SchedulerOutput o = h.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].n_computed, 36);
  EXPECT_EQ(o.seqs[0].n_new, 4);
  EXPECT_EQ(h.sched.request(2)->n_cached_prompt, 36);
  h.run_until_idle();

  std::vector<int32_t> p3(p.begin(), p.begin() + 32);
  for (int32_t t : iota_tokens(8, 50)) p3.push_back(t);
  h.add(make_spec(3, p3, 3));
  h.step();
  EXPECT_EQ(h.sched.request(3)->n_cached_prompt, 32);

  h.add(make_spec(4, std::vector<int32_t>(p.begin(), p.begin() + 36), 3));  // ends on a block
  h.step();
  EXPECT_EQ(h.sched.request(4)->n_cached_prompt, 32);

  SchedRequestSpec salted = make_spec(5, p, 3);
  salted.cache_salt = "tenant-b";
  h.add(salted);
  h.step();
  EXPECT_EQ(h.sched.request(5)->n_cached_prompt, 0);
  h.run_until_idle();
  h.expect_outputs_match();
  EXPECT_EQ(h.shown.at(1), h.shown.at(2));
  EXPECT_GT(h.sched.stats().kv.prefix_hits, 0);
  h.expect_pool_idle();

  Harness off(sched_config(64, 4), kv_config(4, {{0, 64}}, false));
  off.add(make_spec(1, p, 2));
  off.run_until_idle();
  off.add(make_spec(2, p, 2));
  off.step();
  EXPECT_EQ(off.sched.request(2)->n_cached_prompt, 0);
  off.run_until_idle();
  off.expect_outputs_match();
}

TEST(SchedulerTest, FullPromptRequestsSkipTheCacheAndChunk) {
  // read_prefix_cache false (prompt logprobs): nothing is attached, every position is computed,
  // in chunks of at most max_chunk; its blocks still serve later requests.
  Harness h(sched_config(64, 4), kv_config(4, {{0, 64}}));
  const std::vector<int32_t> p = iota_tokens(40, 600);
  h.add(make_spec(1, p, 2));
  h.run_until_idle();
  SchedRequestSpec full = make_spec(2, p, 2);
  full.read_prefix_cache = false;
  full.max_chunk = 16;
  h.add(full);
  std::vector<int32_t> chunks;
  for (int i = 0; i < 3; ++i) {
    SchedulerOutput o = h.step();
    ASSERT_EQ(o.seqs.size(), 1u);
    chunks.push_back(o.seqs[0].n_new);
    if (i == 0) {
      EXPECT_EQ(o.seqs[0].n_computed, 0);
    }
  }
  EXPECT_EQ(chunks, (std::vector<int32_t>{16, 16, 8}));
  EXPECT_EQ(h.sched.request(2)->n_cached_prompt, 0);
  h.run_until_idle();
  h.add(make_spec(3, p, 2));
  h.step();
  EXPECT_EQ(h.sched.request(3)->n_cached_prompt, 36);
  h.run_until_idle();
  h.expect_outputs_match();
  EXPECT_EQ(h.shown.at(1), h.shown.at(2));
  h.expect_pool_idle();
}

TEST(SchedulerTest, PrefillOnlyRequestsFinishWithoutSampling) {
  // Embedding work: finishes (kStop, no token) in the step that computes its last prompt token;
  // may fill the whole context; a whole-prompt one (bidirectional encoders) waits for a step
  // with room for all of it, is not overtaken, and is never chunked.
  Harness h(sched_config(16, 8, 32), kv_config(4, {{0, 64}}));
  SchedRequestSpec too_big = make_spec(9, iota_tokens(17, 0), 1);
  too_big.prefill_only = too_big.whole_prompt = true;
  EXPECT_THROW(h.sched.add(too_big), Error);  // more than one step's budget
  SchedRequestSpec over = make_spec(9, iota_tokens(33, 0), 1);
  over.prefill_only = true;
  EXPECT_THROW(h.sched.add(over), Error);  // more than the context

  h.add(make_spec(1, iota_tokens(6, 10), 5));
  SchedRequestSpec whole = make_spec(2, iota_tokens(12, 50), 1);
  whole.prefill_only = whole.whole_prompt = true;
  h.add(whole);
  h.add(make_spec(3, iota_tokens(3, 90), 2));  // fits beside request 1 but must not overtake 2
  SchedulerOutput o = h.step();
  ASSERT_EQ(o.seqs.size(), 1u);  // 6 + 12 > 16: request 2 waits whole, and 3 behind it
  EXPECT_EQ(o.seqs[0].id, 1u);
  o = h.step();
  ASSERT_EQ(o.seqs.size(), 3u);
  EXPECT_EQ(o.seqs[1].id, 2u);
  EXPECT_EQ(o.seqs[1].n_new, 12);
  EXPECT_TRUE(o.seqs[1].needs_logits);
  EXPECT_EQ(h.done.at(2), FinishReason::kStop);
  EXPECT_TRUE(h.shown[2].empty());

  SchedRequestSpec full = make_spec(4, iota_tokens(32, 200), 1);  // the whole context, chunked
  full.prefill_only = true;
  h.add(full);
  h.run_until_idle();
  EXPECT_EQ(h.done.at(4), FinishReason::kStop);
  EXPECT_TRUE(h.shown[4].empty());
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, PreemptsMostRecentAndRecomputesExactly) {
  // Three requests growing to 7 blocks each in a 12-block pool.
  Harness h(sched_config(32, 4), kv_config(4, {{0, 12}}));
  for (RequestId id = 1; id <= 3; ++id) h.add(make_spec(id, iota_tokens(8, 40 * static_cast<int32_t>(id)), 20));
  std::vector<RequestId> first_preempted;
  while (h.sched.has_work()) {
    SchedulerOutput o = h.step();
    if (first_preempted.empty() && !o.preempted.empty()) first_preempted = o.preempted;
  }
  ASSERT_FALSE(first_preempted.empty());
  EXPECT_EQ(first_preempted[0], 3u);  // admitted last
  EXPECT_GT(h.max_preemptions[3], 0);
  EXPECT_EQ(h.max_preemptions[1], 0);  // the oldest is never preempted
  EXPECT_GT(h.sched.stats().preemptions, 0);
  EXPECT_EQ(h.done.size(), 3u);
  for (const auto& [id, reason] : h.done) EXPECT_EQ(reason, FinishReason::kLength);
  h.expect_outputs_match();  // the same tokens as an unpreempted run
  h.expect_pool_idle();
}

TEST(SchedulerTest, RepeatedPreemptionInTinyPoolCompletesEverything) {
  Harness h(sched_config(16, 8), kv_config(2, {{0, 8}}));
  for (RequestId id = 1; id <= 6; ++id)
    h.add(make_spec(id, iota_tokens(2 + static_cast<int32_t>(id) % 4, 9 * static_cast<int32_t>(id)), 8));
  h.run_until_idle();
  EXPECT_EQ(h.done.size(), 6u);
  for (const auto& [id, reason] : h.done) EXPECT_EQ(reason, FinishReason::kLength) << id;
  EXPECT_GE(h.sched.stats().preemptions, 3);
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, RequestsThatCanNeverFitFail) {
  Harness h(sched_config(64, 4), kv_config(4, {{0, 4}}));  // 16 tokens in all
  h.add(make_spec(1, iota_tokens(5, 0), 2));
  h.add(make_spec(2, iota_tokens(20, 50), 2));  // 5 blocks
  SchedulerOutput o = h.step();
  EXPECT_EQ(o.failed, (std::vector<RequestId>{2}));
  EXPECT_EQ(h.done.at(2), FinishReason::kError);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].id, 1u);

  // Behind a head that waits for room, a request that never fits still fails at once.
  h.add(make_spec(3, iota_tokens(12, 100), 2));  // needs 3 blocks, 2 are free
  h.add(make_spec(4, iota_tokens(17, 150), 2));
  o = h.step();
  EXPECT_EQ(o.failed, (std::vector<RequestId>{4}));
  EXPECT_EQ(h.sched.request(3)->status, RequestStatus::kWaiting);
  h.run_until_idle();

  // A request that outgrows the pool while generating fails once it cannot compute its next
  // token even alone: after 7 outputs it has 17 tokens.
  h.add(make_spec(5, iota_tokens(10, 300), 50));
  h.run_until_idle();
  EXPECT_EQ(h.done.at(5), FinishReason::kError);
  EXPECT_EQ(h.shown.at(5).size(), 7u);
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, FinishReasons) {
  const int32_t mml = 16;
  Harness h(sched_config(64, 8, mml), kv_config(4, {{0, 64}}));
  SchedRequestSpec base = make_spec(1, iota_tokens(6, 800), 10);
  const Expected plain = expect(base, mml);
  ASSERT_EQ(plain.shown.size(), 10u);
  // Stop at the 4th output (the first occurrence of that token).
  const int32_t stop = plain.shown[3];
  const size_t first = std::find(plain.shown.begin(), plain.shown.end(), stop) - plain.shown.begin();
  SchedRequestSpec s1 = base;
  s1.stop_ids = {5000, stop};
  h.add(s1);
  SchedRequestSpec s2 = make_spec(2, base.prompt, 5);  // max_tokens
  s2.stop_ids = {5000};
  h.add(s2);
  h.add(make_spec(3, iota_tokens(10, 900), 100));  // context: 6 outputs to reach 16 tokens
  h.run_until_idle();
  EXPECT_EQ(h.done.at(1), FinishReason::kStop);
  EXPECT_EQ(h.shown.at(1), std::vector<int32_t>(plain.shown.begin(), plain.shown.begin() + first));
  EXPECT_EQ(h.done.at(2), FinishReason::kLength);
  EXPECT_EQ(h.shown.at(2).size(), 5u);
  EXPECT_EQ(h.done.at(3), FinishReason::kLength);
  EXPECT_EQ(h.shown.at(3).size(), 6u);
  h.expect_outputs_match();
  h.expect_pool_idle();
}

TEST(SchedulerTest, StopEventReportsTheStopToken) {
  Harness h(sched_config(64, 8), kv_config(4, {{0, 64}}));
  SchedRequestSpec s = make_spec(1, iota_tokens(6, 800), 10);
  const Expected plain = expect(s, 4096);
  s.stop_ids = {plain.shown[0]};
  h.sched.add(s);
  SchedulerOutput o = h.sched.schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  const std::vector<int32_t> sampled = {plain.shown[0]};
  const std::vector<StepEvent> ev = h.sched.update(o, sampled);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].token, plain.shown[0]);
  EXPECT_EQ(ev[0].finish, FinishReason::kStop);
  EXPECT_EQ(h.sched.request(1), nullptr);
  h.expect_pool_idle();
}

TEST(SchedulerTest, CancelWaitingRunningAndInFlight) {
  Harness h(sched_config(16, 2), kv_config(4, {{0, 32}}));
  for (RequestId id = 1; id <= 4; ++id) h.add(make_spec(id, iota_tokens(12, 20 * static_cast<int32_t>(id)), 30));
  h.step();
  EXPECT_EQ(h.sched.request(1)->status, RequestStatus::kRunning);
  EXPECT_EQ(h.sched.request(4)->status, RequestStatus::kWaiting);
  EXPECT_TRUE(h.cancel(4));   // waiting
  EXPECT_FALSE(h.cancel(4));  // gone
  EXPECT_FALSE(h.cancel(99));
  EXPECT_TRUE(h.cancel(1));   // running
  EXPECT_EQ(h.sched.request(1), nullptr);
  EXPECT_NO_THROW(h.sched.check_invariants());
  // Cancelled after the forward pass, before update(): update() skips it.
  h.step([&](const SchedulerOutput& o) {
    ASSERT_FALSE(o.seqs.empty());
    EXPECT_TRUE(h.cancel(o.seqs[0].id));
  });
  h.run_until_idle();
  EXPECT_EQ(h.done.size() + h.cancelled.size(), 4u);
  h.expect_outputs_match();
  h.expect_pool_idle();
  EXPECT_FALSE(h.sched.has_work());
  EXPECT_EQ(h.sched.stats().running, 0);
  EXPECT_EQ(h.sched.stats().waiting, 0);
}

TEST(SchedulerTest, UpdateRejectsMismatchedInputWithoutChanges) {
  Scheduler s(sched_config(16, 2), kv_config(4, {{0, 32}}));
  s.add(make_spec(1, iota_tokens(5, 0), 4));
  const SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_THROW(s.update(o, std::vector<int32_t>{}), Error);
  EXPECT_THROW(s.update(o, std::vector<int32_t>{-1}), Error);  // needs a token
  EXPECT_EQ(s.request(1)->n_computed, 0);
  const std::vector<int32_t> tok = {7};
  s.update(o, tok);
  EXPECT_EQ(s.request(1)->n_computed, 5);
  EXPECT_THROW(s.update(o, tok), Error);  // stale: applied twice
  EXPECT_EQ(s.request(1)->tokens.size(), 6u);
  // A planned step that is never applied is planned again.
  const SchedulerOutput a = s.schedule();
  const SchedulerOutput b = s.schedule();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(a.seqs[0].n_computed, b.seqs[0].n_computed);
  EXPECT_NO_THROW(s.check_invariants());
}

TEST(SchedulerTest, SlidingWindowGroups) {
  // Full group plus a window of 8 tokens; the window group's tables release old blocks.
  Harness h(sched_config(16, 4), kv_config(4, {{0, 64}, {8, 12}}));
  h.add(make_spec(1, iota_tokens(40, 3), 12));
  h.add(make_spec(2, iota_tokens(23, 3), 12));  // shares 20 prompt tokens with request 1
  h.step();
  h.step();
  h.step();
  const auto table = h.sched.kv().block_table(1, 1);
  EXPECT_EQ(table[0], kv::kNoBlock);
  h.run_until_idle();
  h.expect_outputs_match();
  h.expect_pool_idle();

  // A window pool of 3 blocks holds a one-token step but not a 32-token chunk: a request alone
  // gets a smaller chunk instead of failing.
  Harness small(sched_config(32, 4), kv_config(4, {{0, 64}, {8, 3}}));
  small.add(make_spec(1, iota_tokens(50, 11), 6));
  SchedulerOutput o = small.step();
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_LT(o.seqs[0].n_new, 32);
  small.add(make_spec(2, iota_tokens(30, 77), 6));
  small.run_until_idle();
  EXPECT_EQ(small.done.at(1), FinishReason::kLength);
  EXPECT_EQ(small.done.at(2), FinishReason::kLength);
  small.expect_outputs_match();
  small.expect_pool_idle();
}

struct StressCase {
  SchedulerConfig sc;
  KvManagerConfig kc;
};

struct StressTotals {
  int64_t errors = 0, cancels = 0, preemptions = 0, prefix_hits = 0, drafted = 0, accepted = 0;
};

// A drafter that proposes 0..max_k tokens of the request's true continuation, each replaced by
// a wrong token with probability 1/4 (the rest of such a draft is then rejected).
std::function<std::vector<int32_t>(const SchedRequest&)> noisy_drafter(std::mt19937& rng, int max_k) {
  return [&rng, max_k](const SchedRequest& r) {
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::vector<int32_t> d;
    uint64_t v = chain(r.tokens).back();
    for (int k = uni(0, max_k); k > 0; --k) {
      int32_t t = fake_token(v);
      if (uni(0, 3) == 0) t = (t + 1) % 1000;
      d.push_back(t);
      v = mix(v, t);
    }
    return d;
  };
}

void run_stress(const StressCase& c, uint32_t seed, StressTotals& totals, bool drafts = false) {
  SCOPED_TRACE(testing::Message() << "seed " << seed << (drafts ? " with drafts" : ""));
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Harness h(c.sc, c.kc);
  std::mt19937 draft_rng(seed ^ 0x5eedu);
  if (drafts) h.drafter = noisy_drafter(draft_rng, 6);
  const std::vector<std::vector<int32_t>> bases = {iota_tokens(40, 1), iota_tokens(40, 500),
                                                   iota_tokens(40, 900)};
  const std::string salt = "tenant-s";
  RequestId next_id = 1;
  const int n_requests = 60;
  for (int step = 0; h.sched.has_work() || next_id <= static_cast<RequestId>(n_requests); ++step) {
    ASSERT_LT(step, 20000) << "no progress";
    while (next_id <= static_cast<RequestId>(n_requests) && uni(0, 9) < 4) {
      const int max_prompt = c.sc.max_model_len - 1;
      std::vector<int32_t> prompt;
      if (uni(0, 1)) {
        const auto& b = bases[static_cast<size_t>(uni(0, 2))];
        prompt.assign(b.begin(), b.begin() + uni(0, std::min<int>(40, max_prompt - 1)));
      }
      const int tail = uni(1, std::max(1, std::min(30, max_prompt - static_cast<int>(prompt.size()))));
      for (int i = 0; i < tail; ++i) prompt.push_back(uni(0, 999));
      SchedRequestSpec s = make_spec(next_id++, prompt, uni(1, 20), uni(0, 2));
      if (uni(0, 4) == 0) s.stop_ids = {uni(0, 999)};
      if (uni(0, 3) == 0) s.cache_salt = salt;
      h.add(s);
    }
    if (uni(0, 39) == 0 && next_id > 1) h.cancel(static_cast<RequestId>(uni(1, static_cast<int>(next_id - 1))));
    const bool cancel_in_flight = uni(0, 39) == 0;
    h.step([&](const SchedulerOutput& o) {
      if (cancel_in_flight && !o.seqs.empty())
        h.cancel(o.seqs[static_cast<size_t>(uni(0, static_cast<int>(o.seqs.size()) - 1))].id);
    });
    if (testing::Test::HasFailure()) return;
  }
  for (RequestId id = 1; id < next_id; ++id)
    EXPECT_TRUE(h.done.contains(id) != h.cancelled.contains(id)) << "request " << id << " lost";
  h.expect_outputs_match();
  h.expect_pool_idle();
  for (const auto& [id, reason] : h.done) totals.errors += reason == FinishReason::kError;
  totals.cancels += static_cast<int64_t>(h.cancelled.size());
  totals.preemptions += h.sched.stats().preemptions;
  totals.prefix_hits += h.sched.stats().kv.prefix_hits;
  totals.drafted += h.drafted;
  totals.accepted += h.accepted_drafts;
}

TEST(SchedulerTest, RandomizedStress) {
  const std::vector<StressCase> cases = {
      {sched_config(16, 4, 64), kv_config(4, {{0, 24}})},
      {sched_config(8, 3, 48), kv_config(2, {{0, 30}, {6, 5}})},
      {sched_config(32, 8, 64), kv_config(4, {{0, 16}}, false)},
      {sched_config(5, 5, 40), kv_config(3, {{7, 8}, {0, 20}})},
      {sched_config(64, 16, 80), kv_config(1, {{0, 40}, {4, 6}, {0, 50}})},
  };
  StressTotals t;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "case " << i);
    for (uint32_t seed = 1; seed <= 4; ++seed)
      run_stress(cases[i], seed * 7919 + static_cast<uint32_t>(i), t);
  }
  // The workload reaches every path it is meant to test.
  EXPECT_GT(t.errors, 0);
  EXPECT_GT(t.cancels, 0);
  EXPECT_GT(t.preemptions, 0);
  EXPECT_GT(t.prefix_hits, 0);

  // Speculative decoding: the same workloads with noisy drafts give the same outputs (checked
  // against the unbatched reference), through preemption, windows, cancels and prefix caching.
  StressTotals d;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "case " << i);
    for (uint32_t seed = 1; seed <= 4; ++seed)
      run_stress(cases[i], seed * 7919 + static_cast<uint32_t>(i), d, /*drafts=*/true);
  }
  EXPECT_GT(d.preemptions, 0);
  EXPECT_GT(d.prefix_hits, 0);
  EXPECT_GT(d.accepted, 0);
  EXPECT_GT(d.drafted - d.accepted, 0);  // rejected ones too
}

TEST(SchedulerTest, DraftsAreVerifiedInOneStep) {
  // A perfect drafter: each step accepts the whole draft plus one token.
  Harness h(sched_config(64, 4, 64), kv_config(4, {{0, 64}}));
  h.drafter = [](const SchedRequest& r) {
    std::vector<int32_t> d;
    uint64_t v = chain(r.tokens).back();
    for (int k = 0; k < 3; ++k) {
      d.push_back(fake_token(v));
      v = mix(v, d.back());
    }
    return d;
  };
  h.add(make_spec(1, iota_tokens(10, 5), 13));
  SchedulerOutput o = h.step();  // the prompt: no draft yet
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].n_draft, 0);
  o = h.step();
  EXPECT_EQ(o.seqs[0].n_draft, 3);
  EXPECT_EQ(h.shown.at(1).size(), 5u);  // 1 + (3 + 1)
  o = h.step();
  o = h.step();
  EXPECT_EQ(h.shown.at(1).size(), 13u);  // 5 + 4 + 4
  EXPECT_EQ(h.done.at(1), FinishReason::kLength);
  h.run_until_idle();
  h.expect_outputs_match();
  h.expect_pool_idle();

  // Drafts are cut to max_tokens and to the context, and a wrong draft costs nothing but its
  // positions: the outputs are those without drafts.
  Harness w(sched_config(64, 4, 24), kv_config(4, {{0, 64}}));
  std::mt19937 rng(3);
  w.drafter = noisy_drafter(rng, 8);
  w.add(make_spec(1, iota_tokens(10, 5), 6));
  w.add(make_spec(2, iota_tokens(12, 300), 100));  // runs into the context limit
  w.run_until_idle();
  w.expect_outputs_match();
  w.expect_pool_idle();
  EXPECT_GT(w.accepted_drafts, 0);
}

TEST(SchedulerTest, DraftsNeverPreemptAndExpire) {
  // Two requests fill the pool exactly; drafts that would need a further block are dropped
  // instead of preempting the other request.
  Harness h(sched_config(64, 4, 64), kv_config(4, {{0, 6}}));
  h.add(make_spec(1, iota_tokens(11, 1), 1));  // 11 + 1 tokens: 3 blocks
  h.add(make_spec(2, iota_tokens(11, 50), 1));
  h.drafter = [](const SchedRequest&) { return std::vector<int32_t>{1, 2, 3, 4, 5, 6}; };
  h.run_until_idle();
  EXPECT_EQ(h.sched.stats().preemptions, 0);
  EXPECT_EQ(h.drafted, 0);  // max_tokens 1: no room for a draft at all
  h.expect_outputs_match();

  Harness g(sched_config(64, 4, 64), kv_config(4, {{0, 6}}));
  g.add(make_spec(1, iota_tokens(11, 1), 3));
  g.add(make_spec(2, iota_tokens(11, 50), 3));
  g.step();  // both prompts: 3 blocks each, the pool is full
  g.drafter = [](const SchedRequest&) { return std::vector<int32_t>{1, 2, 3, 4, 5, 6}; };
  // Position 11 is in block 2 (held); a one-token draft (position 12) would need block 3.
  const SchedulerOutput o = g.step();
  for (const ScheduledSeq& s : o.seqs) EXPECT_EQ(s.n_draft, 0);
  EXPECT_EQ(g.sched.stats().preemptions, 0);
  g.run_until_idle();
  g.expect_outputs_match();

  // Drafts come last: a waiting request's prompt gets the budget first, and the draft is cut to
  // what is left (budget 8: one decode token, a 5-token prompt, then 2 draft tokens).
  Harness b(sched_config(8, 4, 64), kv_config(4, {{0, 32}}));
  b.add(make_spec(1, iota_tokens(5, 1), 10));
  b.step();
  b.add(make_spec(2, iota_tokens(5, 20), 4));
  b.drafter = [](const SchedRequest& r) { return r.spec.id == 1 ? std::vector<int32_t>{1, 2, 3, 4, 5, 6} : std::vector<int32_t>{}; };
  const SchedulerOutput ob = b.step();
  ASSERT_EQ(ob.seqs.size(), 2u);
  EXPECT_EQ(ob.seqs[0].id, 1u);
  EXPECT_EQ(ob.seqs[0].n_draft, 2);
  EXPECT_EQ(ob.seqs[1].n_new, 5);
  b.run_until_idle();
  b.expect_outputs_match();

  // A draft set for a waiting request is ignored, and one the next step does not use is gone.
  Harness q(sched_config(64, 1, 64), kv_config(4, {{0, 32}}));
  q.add(make_spec(1, iota_tokens(5, 1), 4));
  q.add(make_spec(2, iota_tokens(5, 9), 4));
  q.sched.set_draft(2, std::vector<int32_t>{7});
  EXPECT_TRUE(q.sched.request(2)->draft.empty());
  q.step();
  q.sched.set_draft(1, std::vector<int32_t>{7, 8});
  EXPECT_EQ(q.sched.request(1)->draft.size(), 2u);
  EXPECT_THROW(q.sched.set_draft(1, std::vector<int32_t>{-1}), Error);
  const SchedulerOutput o2 = q.sched.schedule();
  ASSERT_EQ(o2.seqs.size(), 1u);
  EXPECT_EQ(o2.seqs[0].n_draft, 2);
  // update() refuses accepted tokens that do not match the draft, changing nothing.
  const std::vector<std::vector<int32_t>> bad = {{9, 1}};
  EXPECT_THROW(q.sched.update(o2, std::span<const std::vector<int32_t>>(bad)), Error);
  const std::vector<std::vector<int32_t>> too_many = {{7, 8, 1, 2}};
  EXPECT_THROW(q.sched.update(o2, std::span<const std::vector<int32_t>>(too_many)), Error);
  EXPECT_EQ(q.sched.request(1)->n_computed, 5);
  const std::vector<std::vector<int32_t>> ok = {{7, 3}};
  const std::vector<StepEvent> ev = q.sched.update(o2, std::span<const std::vector<int32_t>>(ok));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].token, 7);
  EXPECT_EQ(ev[1].token, 3);
  EXPECT_EQ(q.sched.request(1)->n_computed, 7);  // the prompt's last token and the accepted draft token
  EXPECT_EQ(q.sched.request(1)->tokens.size(), 8u);
  EXPECT_TRUE(q.sched.request(1)->draft.empty());
  EXPECT_NO_THROW(q.sched.check_invariants());
}

}  // namespace
}  // namespace triad::sched
