// The engine loop: drain submissions and cancellations, schedule one step, run one batched
// forward pass, sample, deliver. Runs on its own thread; callers only touch the inbox, with requests
// already checked and built by request_intake.h.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <unordered_map>

#include "base/error.h"
#include "base/log.h"
#include "engine/engine_api.h"
#include "grammar/matcher.h"
#include "engine/draft_model.h"
#include "engine/draft_policy.h"
#include "gguf/gguf_file.h"
#include "engine/model_runner.h"
#include "engine/ngram_lookup.h"
#include "engine/request_intake.h"
#include "engine/step_cost.h"
#include "model/model.h"

namespace triad::engine {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

kv::KvManagerConfig kv_manager_config(const EngineConfig& c, const KvMemoryPlan& plan) {
  kv::KvManagerConfig k;
  k.block_size = c.block_size;
  for (size_t g = 0; g < plan.blocks_per_group.size(); ++g)
    k.groups.push_back(kv::KvGroupSpec{plan.group_window[g], plan.blocks_per_group[g]});
  k.enable_prefix_caching = c.enable_prefix_caching;
  // Everything that changes a block's contents besides its tokens.
  k.cache_namespace = "model=" + c.model_id + ";k=" + std::string(dtype_name(c.k_type)) +
                      ";v=" + std::string(dtype_name(c.v_type)) + ";bs=" + std::to_string(c.block_size);
  return k;
}

// Latent attention has no separate values: they are the start of the cached latent row, stored
// in the K dtype, so a V dtype is set equal to it (and said once) rather than silently ignored.
// An encoder's sequences are computed whole, each in one step, and their K/V (which depend on
// the whole sequence) are never shared: the context is at most its positions, a step holds at
// least one full-length input, and there is no prefix cache. Their K/V live only during their
// step, so they are kept exact, in F32, whatever --cache-type-k/v say (the pool stays small: one
// step's tokens).
EngineConfig for_model(const Model& m, EngineConfig c) {
  if (m.config().is_mla() && c.v_type != c.k_type) {
    log_info("--cache-type-v ", dtype_name(c.v_type), " does not apply to ", m.config().arch_name,
             ": its values are part of the cached latent row, stored as ", dtype_name(c.k_type));
    c.v_type = c.k_type;
  }
  if (m.config().encoder) {
    if (c.max_model_len > m.config().n_ctx_train) {
      log_info(m.config().arch_name, ": context ", c.max_model_len, " is cut to the model's ", m.config().n_ctx_train,
               " positions");
      c.max_model_len = m.config().n_ctx_train;
    }
    if (c.max_batched_tokens < c.max_model_len) {
      log_info(m.config().arch_name, ": a step computes at least one whole input: --max-batched-tokens ",
               c.max_batched_tokens, " raised to ", c.max_model_len);
      c.max_batched_tokens = c.max_model_len;
    }
    c.enable_prefix_caching = false;
    if (c.k_type != DType::kF32 || c.v_type != DType::kF32)
      log_info(m.config().arch_name, ": K/V kept in f32 (an encoder's K/V last one step)");
    c.k_type = c.v_type = DType::kF32;
  }
  return c;
}

}  // namespace

struct Engine::Impl {
  // Set at construction, then read-only.
  const Model& model;
  EngineConfig config;
  KvMemoryPlan plan;

  // Owned by the engine thread.
  KvStorage storage;
  sched::Scheduler scheduler;
  std::shared_ptr<ThreadPool> pool;  // own, or shared with other engines
  ModelRunner runner;
  std::unique_ptr<DraftModel> draft;  // draft-model speculation, when configured
  StepCost step_cost;                 // what a decode step's rows cost: the price of a draft token

  using Live = LiveRequest;
  std::unordered_map<RequestId, Live> live;
  std::vector<TokenLogprob> top_scratch;
  std::vector<int32_t> top_ids;
  grammar::TokenMask mask_scratch;
  std::vector<float> masked_logits;
  std::vector<int32_t> draft_scratch;
  std::vector<DraftModel::Job> draft_jobs;
  std::vector<std::vector<int32_t>> draft_out;

  // Shared with callers, under mu.
  struct Pending {
    RequestId id;
    sched::SchedRequestSpec spec;
    Live live;
  };
  mutable std::mutex mu;
  std::condition_variable cv;        // wakes the loop (inbox, cancel, stop)
  std::condition_variable idle_cv;   // signals drain() waiters
  std::deque<Pending> inbox;
  std::vector<RequestId> cancels;
  bool cancel_everything = false;    // cancel_all() was called since the last take_inbox()
  bool stopping = false;
  bool draining = false;
  int64_t n_unfinished = 0;          // submitted and not yet finished
  EngineStats snapshot;
  Clock::time_point last_progress = Clock::now();
  std::atomic<RequestId> next_id{1};
  int64_t generated_total = 0, prompt_total = 0, steps = 0, finished_total = 0;
  int64_t embeddings_total = 0, embedding_tokens_total = 0;
  // Speculative tokens verified and accepted, by source (DraftPolicy::kLookup, kModel).
  int64_t spec_draft_by_source[2] = {0, 0}, spec_accepted_by_source[2] = {0, 0};
  int64_t internal_errors = 0;

  std::thread thread;

  Impl(const Model& m, EngineConfig c, std::shared_ptr<ThreadPool> shared)
      : model(m), config(for_model(m, std::move(c))), plan(plan_kv_memory(m.config(), config)),
        storage(m.config(), KvStorageConfig{config.block_size, config.k_type, config.v_type, plan.blocks_per_group}),
        scheduler(sched::SchedulerConfig{config.max_batched_tokens, config.max_seqs, config.max_model_len},
                  kv_manager_config(config, plan)),
        pool(shared ? std::move(shared) : std::make_shared<ThreadPool>(config.threads)),
        runner(m, storage, *pool) {}

  void finish(RequestId id, FinishReason reason, const std::string& error) {
    auto it = live.find(id);
    if (it == live.end()) return;
    if (draft) draft->release(id);
    Live& l = it->second;
    l.timings.e2e_s = since(l.submitted);
    if (!l.delivered) l.timings.ttft_s = l.timings.e2e_s;
    if (!l.scheduled) l.timings.queue_s = l.timings.e2e_s;
    std::shared_ptr<OutputSink> sink = std::move(l.sink);
    const RequestTimings t = l.timings;
    live.erase(it);
    ++finished_total;
    {  // A client reading stats() right after its answer finds it counted (the rest waits for the step's end).
      std::lock_guard<std::mutex> lk(mu);
      snapshot.requests_finished = finished_total;
      snapshot.prompt_tokens = prompt_total;
      snapshot.generated_tokens = generated_total;
      snapshot.embedding_requests = embeddings_total;
      snapshot.embedding_tokens = embedding_tokens_total;
      copy_spec_counts(snapshot);
    }
    try {
      sink->on_finish(id, reason, t, error);
    } catch (const std::exception& e) {
      log_warn("engine: the output sink of request ", id, " threw from on_finish: ", e.what());
    }
    std::lock_guard<std::mutex> lk(mu);
    --n_unfinished;
    if (n_unfinished == 0) idle_cv.notify_all();
  }

  // Hands an admitted request to the engine thread; its id. Throws once the engine is stopping.
  RequestId enqueue(AdmittedRequest a) {
    const RequestId id = next_id.fetch_add(1);
    a.spec.id = id;
    {
      std::lock_guard<std::mutex> lk(mu);
      TRIAD_CHECK(!stopping && !draining, "the engine is shutting down");
      inbox.push_back(Pending{id, std::move(a.spec), std::move(a.live)});
      ++n_unfinished;
    }
    cv.notify_all();
    return id;
  }

  void take_inbox() {
    std::deque<Pending> in;
    std::vector<RequestId> cx;
    bool all = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      in.swap(inbox);
      cx.swap(cancels);
      all = std::exchange(cancel_everything, false);
    }
    for (Pending& p : in) {
      const RequestId id = p.id;
      try {
        scheduler.add(std::move(p.spec));
        live.emplace(id, std::move(p.live));
      } catch (const std::exception& e) {
        live.emplace(id, std::move(p.live));
        finish(id, FinishReason::kError, e.what());
      }
    }
    if (all) {
      cx.clear();
      for (const auto& [id, l] : live) cx.push_back(id);
    }
    for (RequestId id : cx) {
      if (!live.count(id)) continue;
      scheduler.cancel(id);
      finish(id, FinishReason::kCancelled, "");
    }
  }

  void publish_stats() {
    const sched::SchedulerStats s = scheduler.stats();
    EngineStats e;
    e.running = s.running;
    e.waiting = s.waiting;
    e.kv_blocks_total = s.kv.blocks_total;
    e.kv_blocks_used = s.kv.blocks_used;
    e.kv_blocks_free = s.kv.blocks_free;
    e.kv_blocks_cached = s.kv.blocks_cached;
    e.kv_bytes_total = plan.total_bytes;
    // Used bytes: blocks in use of each group times that group's block size.
    uint64_t used = 0;
    const int32_t n_groups = scheduler.kv().n_groups();
    for (int32_t g = 0; g < n_groups; ++g)
      used += static_cast<uint64_t>(plan.blocks_per_group[g] - scheduler.kv().num_free_blocks(g)) *
              plan.block_bytes[g];
    e.kv_bytes_used = used;
    for (auto& [id, l] : live)
      if (const sched::SchedRequest* r = scheduler.request(id))
        if (r->status == sched::RequestStatus::kRunning) e.kv_tokens_held += r->n_computed;
    e.prefix_queries = s.kv.prefix_queries;
    e.prefix_hits = s.kv.prefix_hits;
    e.prompt_tokens = prompt_total;
    e.generated_tokens = generated_total;
    e.steps = steps;
    e.preemptions = s.preemptions;
    e.requests_finished = finished_total;
    e.embedding_requests = embeddings_total;
    e.embedding_tokens = embedding_tokens_total;
    copy_spec_counts(e);
    e.internal_errors = internal_errors;
    std::lock_guard<std::mutex> lk(mu);
    snapshot = e;
    last_progress = Clock::now();
  }

  void copy_spec_counts(EngineStats& e) const {
    e.spec_draft_tokens = spec_draft_by_source[0] + spec_draft_by_source[1];
    e.spec_accepted_tokens = spec_accepted_by_source[0] + spec_accepted_by_source[1];
    e.spec_lookup_draft_tokens = spec_draft_by_source[DraftPolicy::kLookup];
    e.spec_lookup_accepted_tokens = spec_accepted_by_source[DraftPolicy::kLookup];
    e.spec_model_draft_tokens = spec_draft_by_source[DraftPolicy::kModel];
    e.spec_model_accepted_tokens = spec_accepted_by_source[DraftPolicy::kModel];
    e.spec_row_cost_share = step_cost.row_share(std::max(scheduler.n_running(), 1));
  }

  // Drafts for the decoding requests that speculate, unless too many run: a lookup in the
  // request's prediction and its context (free); where that finds nothing, the draft model's,
  // unless its drafts for this request have been accepted too rarely to pay lately. Each draft
  // is cut to the tokens likely enough to be accepted to pay for their rows in a step of this
  // many requests (DraftPolicy::length, StepCost::row_share).
  void propose_drafts() {
    if (scheduler.n_running() > config.spec_max_running) return;
    const double row_share = config.spec_step_cost ? step_cost.row_share(scheduler.n_running()) : 0.0;
    draft_jobs.clear();
    for (auto& [id, l] : live) {
      l.drafting.set_source(-1);
      if (!l.drafting.enabled()) continue;
      const sched::SchedRequest* r = scheduler.request(id);
      if (r == nullptr || r->status != sched::RequestStatus::kRunning ||
          static_cast<size_t>(r->n_computed) + 1 != r->tokens.size())
        continue;
      // At most what the step could take: one token more than the draft is accepted.
      const int32_t room = std::min(r->spec.max_tokens - r->n_output(),
                                    config.max_model_len - static_cast<int32_t>(r->tokens.size())) - 1;
      if (room <= 0) continue;
      draft_scratch.clear();
      if (l.drafting.ready(DraftPolicy::kLookup)) {
        const int32_t n = std::min(room, l.drafting.length(DraftPolicy::kLookup, row_share));
        if (n > 0) ngram_draft(r->tokens, l.prediction, config.ngram, n, draft_scratch);
      }
      if (!draft_scratch.empty()) {
        scheduler.set_draft(id, draft_scratch);
        l.drafting.set_source(DraftPolicy::kLookup);
      } else if (draft && l.drafting.ready(DraftPolicy::kModel)) {
        const int32_t n = std::min(room, l.drafting.length(DraftPolicy::kModel, row_share));
        if (n > 0) draft_jobs.push_back(DraftModel::Job{id, r->tokens, n});
      }
    }
    if (draft_jobs.empty()) return;
    try {
      draft->propose(draft_jobs, draft_out, *pool);  // inside step()'s lease
    } catch (const std::exception& e) {
      // The draft model failing costs this step its drafts, not the requests.
      log_warn("engine: the draft model failed: ", e.what());
      for (const DraftModel::Job& j : draft_jobs) draft->release(j.id);
      return;
    }
    for (uint64_t id : draft->no_room()) live.at(id).drafting.pause(DraftPolicy::kModel);  // its K/V did not fit
    for (size_t i = 0; i < draft_jobs.size(); ++i) {
      if (draft_out[i].empty()) continue;
      scheduler.set_draft(draft_jobs[i].id, draft_out[i]);
      live.at(draft_jobs[i].id).drafting.set_source(DraftPolicy::kModel);
    }
  }

  // Samples the tokens of scheduled seq i from its logit rows into `accepted` and `outputs`:
  // one token, or with a draft of n tokens, row j's token for j = 0, 1, ... while it equals
  // draft token j (the sampler and grammar then take it, so that row j + 1 is sampled in the
  // state it would have had without speculation), ending with the first token that differs or
  // the one after the whole draft. Each row draws exactly as a plain step would, so the output
  // is the same as without a draft; for a sampled token that equals the draft token with
  // probability p(draft), which is rejection sampling's acceptance rule for a deterministic
  // draft, so the target distribution is kept. Throws on a sampling failure.
  void sample_seq(const sched::ScheduledSeq& s, const sched::SchedRequest& r, Live& l, ModelRunner::Rows rows,
                  std::vector<int32_t>& accepted, std::vector<TokenOutput>& outputs) {
    const std::vector<int32_t>& stops = r.spec.stop_ids;
    // The last 1 + n_draft rows (a prompt-logprobs step has all its rows, and no draft).
    TRIAD_CHECK(rows.count >= 1 + s.n_draft, "engine: request ", s.id, " has ", rows.count, " logit rows for a draft of ",
                s.n_draft);
    const size_t base = rows.first + static_cast<size_t>(rows.count - 1 - s.n_draft);
    for (int32_t j = 0; j <= s.n_draft; ++j) {
      const float* logits = runner.logits(base + static_cast<size_t>(j));
      if (l.matcher) logits = apply_mask(*l.matcher, logits);
      const int32_t tok = l.sampler->sample(logits);
      TokenOutput o;
      o.id = tok;
      if (l.logprobs >= 0) {
        const TokenLogprob lp = l.sampler->logprobs(l.logprobs, top_scratch);
        o.logprob = lp.logprob;
        o.top = top_scratch;
      }
      accepted.push_back(tok);
      outputs.push_back(std::move(o));
      if (j == s.n_draft || tok != r.draft[static_cast<size_t>(j)] ||
          std::find(stops.begin(), stops.end(), tok) != stops.end())
        break;
      // An accepted draft token: the next row's context.
      l.sampler->accept(tok);
      if (l.matcher && !l.matcher->accept_token(tok))
        throw Error("internal error: the sampled token breaks the grammar");
    }
    if (s.n_draft > 0) {
      const auto n_acc = static_cast<int32_t>(accepted.size()) - 1;
      l.timings.draft_tokens += s.n_draft;
      l.timings.accepted_tokens += n_acc;
      const int src = l.drafting.source();
      TRIAD_CHECK(src == DraftPolicy::kLookup || src == DraftPolicy::kModel, "engine: request ", s.id,
                  " has a draft of no source");
      l.drafting.verified(s.n_draft, n_acc);
      spec_draft_by_source[src] += s.n_draft;
      spec_accepted_by_source[src] += n_acc;
    }
  }

  // What one step's phases hand each other, per scheduled sequence.
  struct StepResults {
    std::vector<RowOutput> wants;                  // what the forward pass keeps of its rows
    std::vector<std::vector<int32_t>> accepted;    // tokens taken (sampled; with a draft, verified)
    std::vector<std::vector<TokenOutput>> outputs; // their entries for the sink
  };

  // One iteration with work to do, in five phases. The pool, which may be shared with other
  // models' engines, is held for the whole step: its host work (drafts, sampling, delivery)
  // then never runs beside another engine's forward pass, taking one of its cores, and the
  // pool's fair share (base/fair_share.h) counts the whole step.
  void step() {
    const ThreadPool::Lease lease(*pool);
    propose_drafts();                                   // speculative drafts, for schedule() to fit
    const sched::SchedulerOutput out = schedule();      // which requests compute what
    if (out.seqs.empty()) return;
    StepResults res;
    const Clock::time_point t0 = Clock::now();
    if (!forward(out, res)) return;                     // one batched forward pass
    sample(out, res);                                   // tokens (drafts verified), pooled embeddings
    if (decode_only(out)) step_cost.record(out.n_tokens, since(t0));  // the price of a draft's row
    deliver(res, scheduler.update(out, std::span<const std::vector<int32_t>>(res.accepted)), out);
  }

  // Whether every sequence of the step decodes (its last token and any draft): the steps whose
  // cost StepCost fits.
  static bool decode_only(const sched::SchedulerOutput& out) {
    for (const sched::ScheduledSeq& s : out.seqs)
      if (s.n_new != 1 + s.n_draft) return false;
    return true;
  }

  // Schedules the step (scheduler.schedule()); fails the requests that can never fit and records queue times and the
  // cached-prefix and preemption counts (they change only here, and must be recorded before a
  // request can finish in this very step).
  sched::SchedulerOutput schedule() {
    sched::SchedulerOutput out = scheduler.schedule();
    for (RequestId id : out.failed)
      finish(id, FinishReason::kError,
             "the request needs more KV cache than the whole pool holds (raise --kv-cache-memory)");
    auto note = [&](RequestId id) {
      auto it = live.find(id);
      const sched::SchedRequest* r = scheduler.request(id);
      if (it == live.end() || r == nullptr) return;
      it->second.timings.cached_tokens = r->n_cached_prompt;
      it->second.timings.preemptions = r->n_preemptions;
    };
    for (RequestId id : out.preempted) note(id);
    for (const sched::ScheduledSeq& s : out.seqs) {
      note(s.id);
      auto it = live.find(s.id);
      if (it != live.end() && !it->second.scheduled) {
        it->second.scheduled = true;
        it->second.timings.queue_s = since(it->second.submitted);
      }
    }
    return out;
  }

  // Runs the step's forward pass. Sequences still computing prompt positions whose logprobs
  // were asked for want every row's logits; embedding sequences every row's hidden state. A
  // failure fails the step's requests, not the engine (returns false).
  bool forward(const sched::SchedulerOutput& out, StepResults& res) {
    res.wants.assign(out.seqs.size(), RowOutput::kDefault);
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      const sched::ScheduledSeq& s = out.seqs[i];
      auto it = live.find(s.id);
      const sched::SchedRequest* r = scheduler.request(s.id);
      if (it == live.end() || r == nullptr) continue;
      if (it->second.embedding)
        res.wants[i] = RowOutput::kHidden;
      else if (it->second.prompt_logprobs >= 0 && s.n_computed < r->n_prompt - 1)
        res.wants[i] = RowOutput::kAllLogits;
    }
    try {
      runner.execute(out, scheduler, res.wants);  // inside step()'s lease
    } catch (const std::exception& e) {
      log_warn("engine: step failed: ", e.what());
      for (const sched::ScheduledSeq& s : out.seqs) {
        scheduler.cancel(s.id);
        finish(s.id, FinishReason::kError, e.what());
      }
      return false;
    }
    ++steps;
    return true;
  }

  // Reads the step's rows: prompt logprobs, embeddings' pooled states, and each sampling
  // sequence's tokens (sample_seq). A request whose sink or sampling fails finishes here alone.
  void sample(const sched::SchedulerOutput& out, StepResults& res) {
    res.accepted.assign(out.seqs.size(), {});
    res.outputs.assign(out.seqs.size(), {});
    for (size_t i = 0; i < out.seqs.size(); ++i) {
      const sched::ScheduledSeq& s = out.seqs[i];
      const sched::SchedRequest* r = scheduler.request(s.id);
      if (r && s.n_computed < r->n_prompt) prompt_total += std::min(s.n_new, r->n_prompt - s.n_computed);
      const ModelRunner::Rows rows = runner.rows(i);
      if (res.wants[i] == RowOutput::kAllLogits && r) prompt_logprobs(s, *r, rows);
      if (res.wants[i] == RowOutput::kHidden) {
        pool_hidden(s, runner.hidden_rows(i));
        continue;
      }
      if (!s.needs_logits || r == nullptr) continue;
      Live& l = live.at(s.id);
      if (l.prompt_logprobs >= 0 && !l.prompt_lp_sent) {
        l.prompt_lp_sent = true;
        try {
          l.sink->on_prompt_logprobs(s.id, std::move(l.prompt_lp));
        } catch (const std::exception& e) {
          log_warn("engine: the output sink of request ", s.id, " threw: ", e.what());
          scheduler.cancel(s.id);
          finish(s.id, FinishReason::kCancelled, "");
          continue;
        }
      }
      try {
        sample_seq(s, *r, l, rows, res.accepted[i], res.outputs[i]);
      } catch (const std::exception& e) {
        // E.g. every logit is -inf under the request's logit bias: that request fails alone.
        scheduler.cancel(s.id);
        finish(s.id, FinishReason::kError, e.what());
      }
    }
  }

  // Hands the step's events to the sinks: each token (the sampler and grammar take the last of
  // a sequence's tokens; accepted draft tokens were given to them while verifying), then the
  // finishes. A sink that cannot take tokens (its client is gone) cancels its request.
  void deliver(const StepResults& res, const std::vector<sched::StepEvent>& events,
               const sched::SchedulerOutput& out) {
    std::unordered_map<RequestId, size_t> index;
    for (size_t i = 0; i < out.seqs.size(); ++i) index.emplace(out.seqs[i].id, i);
    std::vector<size_t> cursor(out.seqs.size(), 0);  // a seq's next token among its events
    for (const sched::StepEvent& ev : events) {
      auto it = live.find(ev.id);
      if (it == live.end()) continue;
      Live& l = it->second;
      if (ev.token >= 0) {
        const size_t i = index.at(ev.id);
        const size_t k = cursor[i]++;
        const bool taken = k + 1 < res.accepted[i].size();
        if (!taken) l.sampler->accept(ev.token);
        if (!taken && l.matcher && !l.matcher->accept_token(ev.token)) {  // cannot happen: it was masked
          if (ev.finish == FinishReason::kNone) scheduler.cancel(ev.id);
          finish(ev.id, FinishReason::kError, "internal error: the sampled token breaks the grammar");
          continue;
        }
        ++generated_total;
        if (ev.finish != FinishReason::kStop || l.deliver_stop) {
          if (!l.delivered) {
            l.delivered = true;
            l.timings.ttft_s = since(l.submitted);
          }
          ++l.timings.completion_tokens;
          try {
            l.sink->on_token(ev.id, res.outputs[i][k]);
          } catch (const std::exception& e) {
            log_warn("engine: the output sink of request ", ev.id, " threw: ", e.what());
            if (ev.finish == FinishReason::kNone) scheduler.cancel(ev.id);
            finish(ev.id, FinishReason::kCancelled, "");
            continue;
          }
        }
      }
      if (ev.finish != FinishReason::kNone) finish(ev.id, ev.finish, "");
    }
  }

  // Folds an embedding sequence's rows of this step into its pooled vector; once its prompt is
  // complete, hands the vector to the sink (the scheduler then finishes the request).
  void pool_hidden(const sched::ScheduledSeq& s, ModelRunner::Rows rows) {
    Live& l = live.at(s.id);
    const auto E = static_cast<size_t>(model.config().n_embd);
    if (s.n_computed == 0 || l.pooled.empty()) {  // first chunk (or recomputation after preemption)
      l.pooled.assign(E, 0.0);
      l.pooled_rows = 0;
    }
    for (int32_t j = 0; j < rows.count; ++j) {
      const int32_t pos = s.n_computed + j;
      const bool take = l.pooling == Pooling::kMean || (l.pooling == Pooling::kCls && pos == 0) ||
                        (l.pooling == Pooling::kLast && s.needs_logits && j == rows.count - 1);
      if (!take) continue;
      const float* h = runner.hidden(rows.first + static_cast<size_t>(j));
      if (l.pooling == Pooling::kMean) {
        for (size_t d = 0; d < E; ++d) l.pooled[d] += h[d];
      } else {
        for (size_t d = 0; d < E; ++d) l.pooled[d] = h[d];
      }
      ++l.pooled_rows;
    }
    if (!s.needs_logits) return;
    std::vector<float> v(E);
    const double div = l.pooling == Pooling::kMean ? std::max(1, l.pooled_rows) : 1;
    for (size_t d = 0; d < E; ++d) v[d] = static_cast<float>(l.pooled[d] / div);
    ++embeddings_total;
    embedding_tokens_total += l.timings.prompt_tokens;
    l.delivered = true;
    l.timings.ttft_s = since(l.submitted);
    try {
      l.sink->on_embedding(s.id, std::move(v));
    } catch (const std::exception& e) {
      log_warn("engine: the output sink of request ", s.id, " threw: ", e.what());
    }
  }

  // The prompt logprobs that a step's rows give: row j (position p) predicts prompt token p + 1,
  // read from the model's raw distribution (log-softmax of the logits).
  void prompt_logprobs(const sched::ScheduledSeq& s, const sched::SchedRequest& r, ModelRunner::Rows rows) {
    Live& l = live.at(s.id);
    const int32_t n_vocab = model.config().n_vocab;
    l.prompt_lp.resize(static_cast<size_t>(r.n_prompt - 1));
    const int32_t p0 = s.n_computed + s.n_new - rows.count;
    for (int32_t j = 0; j < rows.count; ++j) {
      const int32_t p = p0 + j;
      if (p + 1 >= r.n_prompt || p < l.prompt_lp_done) continue;
      const float* x = runner.logits(rows.first + static_cast<size_t>(j));
      TokenOutput& e = l.prompt_lp[static_cast<size_t>(p)];
      const int32_t tok = r.tokens[static_cast<size_t>(p) + 1];
      float mx = -std::numeric_limits<float>::infinity();
      for (int32_t v = 0; v < n_vocab; ++v) mx = std::max(mx, x[v]);
      double sum = 0;
      int32_t above = 0;
      for (int32_t v = 0; v < n_vocab; ++v) {
        sum += std::exp(static_cast<double>(x[v] - mx));
        above += x[v] > x[tok];
      }
      const float lse = mx + static_cast<float>(std::log(sum));
      e.id = tok;
      e.logprob = x[tok] - lse;
      e.rank = above + 1;
      e.top.clear();
      if (l.prompt_logprobs > 0) {
        const auto k = static_cast<size_t>(std::min(l.prompt_logprobs, n_vocab));
        top_ids.resize(static_cast<size_t>(n_vocab));
        for (int32_t v = 0; v < n_vocab; ++v) top_ids[static_cast<size_t>(v)] = v;
        std::partial_sort(top_ids.begin(), top_ids.begin() + static_cast<std::ptrdiff_t>(k), top_ids.end(),
                          [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
        for (size_t t = 0; t < k; ++t) e.top.push_back({top_ids[t], x[top_ids[t]] - lse});
      }
      l.prompt_lp_done = p + 1;
    }
  }

  // The row of logits with every token the grammar forbids at -inf (in a scratch copy).
  // Throws grammar::GrammarError when the grammar is too ambiguous to follow.
  const float* apply_mask(grammar::Matcher& m, const float* logits) {
    const int32_t n = model.config().n_vocab;
    m.fill_mask(mask_scratch);
    masked_logits.resize(static_cast<size_t>(n));
    const int32_t nv = static_cast<int32_t>(mask_scratch.bits.size() * 64);
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (int32_t i = 0; i < n; ++i)
      masked_logits[static_cast<size_t>(i)] = i < nv && mask_scratch.test(i) ? logits[i] : kNegInf;
    return masked_logits.data();
  }

  void fail_all(const std::string& error) {
    std::vector<RequestId> ids;
    for (auto& [id, l] : live) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (RequestId id : ids) {
      scheduler.cancel(id);
      finish(id, FinishReason::kError, error);
    }
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        if (!stopping && inbox.empty() && cancels.empty() && !cancel_everything && !scheduler.has_work()) {
          // Idle: wake up now and then so /health sees a live loop.
          cv.wait_for(lk, std::chrono::milliseconds(500));
          last_progress = Clock::now();
        }
        if (stopping) break;
      }
      try {
        take_inbox();
        if (scheduler.has_work()) {
          step();
        }
        if (config.check_invariants) scheduler.check_invariants();
      } catch (const std::exception& e) {
        // A bug, not a bad request (those fail alone inside step()): fail everything in
        // flight, with its blocks released, and keep serving.
        ++internal_errors;
        log_warn("engine: internal error, failing ", live.size(), " request(s): ", e.what());
        fail_all(std::string("internal engine error: ") + e.what());
      }
      publish_stats();
    }
    // Shutdown: everything still live finishes as cancelled.
    take_inbox();
    std::vector<RequestId> ids;
    for (auto& [id, l] : live) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (RequestId id : ids) {
      scheduler.cancel(id);
      finish(id, FinishReason::kCancelled, "");
    }
    publish_stats();
  }
};

Engine::Engine(const Model& model, EngineConfig config, std::shared_ptr<ThreadPool> pool, const Model* draft) {
  if (config.max_model_len == 0) config.max_model_len = std::min(model.config().n_ctx_train > 0 ? model.config().n_ctx_train : 4096, 8192);
  config.validate();
  impl_ = std::make_unique<Impl>(model, std::move(config), std::move(pool));
  log_info(impl_->plan.describe());
  if (draft) {
    const EngineConfig& c = impl_->config;
    DraftModelConfig dc;
    dc.block_size = c.block_size;
    dc.k_type = c.k_type;
    dc.v_type = c.v_type;
    // Default: as many tokens as the main pool holds (no request can have more), at the draft
    // model's bytes per token.
    if (c.draft_kv_memory_bytes) {
      dc.kv_bytes = c.draft_kv_memory_bytes;
    } else {
      uint64_t tokens = 0, per_token = 0;
      const KvMemoryPlan& p = impl_->plan;
      for (size_t g = 0; g < p.blocks_per_group.size(); ++g)
        if (p.group_window[g] == 0) tokens = std::max<uint64_t>(tokens, static_cast<uint64_t>(p.blocks_per_group[g]));
      tokens = (tokens ? tokens : static_cast<uint64_t>(c.max_seqs) * static_cast<uint64_t>(c.max_model_len) / c.block_size) *
               static_cast<uint64_t>(c.block_size);
      for (const KvLayerGroup& g : kv_layer_groups(draft->config())) per_token += KvStorage::token_bytes(draft->config(), g, c.k_type, c.v_type);
      dc.kv_bytes = tokens * per_token;
    }
    impl_->draft = std::make_unique<DraftModel>(*draft, model.config(), dc);
    log_info("draft model ", draft->config().arch_name, " '", draft->file().path(), "': K/V pool ",
             dc.kv_bytes >> 20, " MiB");
  }
  impl_->thread = std::thread([this] { impl_->loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

RequestId Engine::submit_embedding(EmbeddingRequest req, std::shared_ptr<OutputSink> sink) {
  return impl_->enqueue(admit_embedding(std::move(req), std::move(sink), impl_->model.config(), impl_->config));
}

RequestId Engine::submit(GenerationRequest req, std::shared_ptr<OutputSink> sink) {
  return impl_->enqueue(admit_generation(std::move(req), std::move(sink), impl_->model.config(), impl_->config));
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->cv.notify_all();
}

void Engine::cancel_all() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->cancel_everything = true;
  }
  impl_->cv.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  EngineStats s = impl_->snapshot;
  // Requests submitted since the loop last took its inbox wait too: counted now, so that an
  // admission check (the server's queue limit) sees a burst that arrives within one step.
  s.waiting += static_cast<int32_t>(impl_->inbox.size());
  s.last_progress_s = since(impl_->last_progress);
  return s;
}

const EngineConfig& Engine::config() const { return impl_->config; }
const KvMemoryPlan& Engine::kv_plan() const { return impl_->plan; }
int32_t Engine::max_model_len() const { return impl_->config.max_model_len; }

void Engine::drain() {
  std::unique_lock<std::mutex> lk(impl_->mu);
  impl_->draining = true;
  impl_->idle_cv.wait(lk, [&] { return impl_->n_unfinished == 0; });
}

}  // namespace triad::engine
