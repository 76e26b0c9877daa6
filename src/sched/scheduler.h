// Iteration-level scheduler: continuous batching under a per-step token budget, chunked
// prefill, automatic prefix caching and preemption by recomputation.
//
// There is no prefill phase and no decode phase. Every step, each running request (in admission
// order) and then each waiting request (by priority, then arrival) is given
// min(tokens it still has to compute, tokens left in the step budget); a long prompt is thus
// split into chunks over several steps and never stalls running decodes. A request computes
// positions [n_computed, n_computed + n_new); when that reaches its last token, the step
// produces logits for it and the engine samples its next token (update()). Prefill-only
// requests (embeddings) finish there instead, and whole-prompt ones (bidirectional encoders) are
// never split into chunks.
//
// When the KV pool cannot hold a running request's next tokens, the most recently admitted
// running request is preempted: its blocks are freed, it goes back to the head of the waiting
// queue with its generated tokens kept, and it is recomputed later (reusing whatever of its
// prefix is still cached). Waiting requests are admitted only while blocks and --max-seqs allow;
// admission stops at the first that does not fit (no overtaking), except that a request that
// could never fit in the whole pool finishes at once with kError instead of waiting forever.
//
// Speculative decoding: set_draft() gives a request in decode (its only uncomputed token is the
// last sampled one) up to k proposed next tokens. schedule() then computes that token and the
// draft in one chunk, with logits for each of them, when the budget, the context, max_tokens and
// free blocks allow. Drafts are fitted last, from the budget and free blocks that every running
// request's chunk and every admission left (a draft is cut to fit, and never takes a token or a
// block another request would have had: without room the step computes the one token alone). update() takes the tokens the engine accepted (the draft's
// leading tokens that verification confirmed, then one more token, sampled): their K/V are
// already in the cache, so n_computed advances past them; the K/V of rejected draft positions
// stay in blocks the request holds and are overwritten later, and never reach the prefix cache
// (only blocks below n_computed are committed). A draft lasts one schedule().
//
// Knows nothing of models or kernels: unit-tested with fake requests and no model.
// Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace triad::sched {

using RequestId = uint64_t;

enum class FinishReason {
  kNone = 0,
  kStop,       // a stop token id was sampled (the token is not part of the output)
  kLength,     // max_tokens reached, or the context (max_model_len) is full
  kCancelled,  // cancel()
  kError,      // cannot ever be served (e.g. needs more KV blocks than the pool has)
};
const char* finish_reason_name(FinishReason r);

enum class RequestStatus { kWaiting, kRunning, kFinished };

struct SchedulerConfig {
  int32_t max_batched_tokens = 512;  // tokens computed per step over all requests (> 0)
  int32_t max_seqs = 16;             // running requests at once (> 0)
  int32_t max_model_len = 4096;      // positions per sequence (prompt + output)
};

// What a caller submits (plain data).
struct SchedRequestSpec {
  RequestId id = 0;                  // unique among live requests
  std::vector<int32_t> prompt;       // non-empty; prompt.size() < max_model_len
  int32_t max_tokens = 16;           // >= 1 generated tokens at most
  std::vector<int32_t> stop_ids;     // sampling one of these finishes with kStop
  int32_t priority = 0;              // lower runs first; ties by arrival
  std::string cache_salt;            // isolates prefix-cache sharing
  bool read_prefix_cache = true;     // false: compute every prompt position (prompt logprobs)
  int32_t max_chunk = 0;             // > 0: at most this many tokens in one step
  // Embedding work: the request finishes (kStop, no token) in the step that computes its last
  // prompt token and never samples; its prompt may fill the whole context (<= max_model_len).
  bool prefill_only = false;
  // The prompt is computed in one step or not at all (bidirectional models, whose tokens all
  // see each other): admitted only when the step's remaining budget holds all of it (else it
  // waits, and nothing overtakes it), never read from the prefix cache, never shrunk to fit the
  // pool. Needs prompt.size() <= max_batched_tokens.
  bool whole_prompt = false;
};

// A request's state, owned by the scheduler.
struct SchedRequest {
  SchedRequestSpec spec;
  std::vector<int32_t> tokens;       // prompt followed by generated tokens
  int32_t n_prompt = 0;              // spec.prompt.size()
  int32_t n_computed = 0;            // leading tokens whose K/V are in the cache
  int32_t n_cached_prompt = 0;       // prompt tokens served by the prefix cache at first admission
  int32_t n_preemptions = 0;
  std::vector<int32_t> draft;        // proposed next tokens (set_draft), consumed by schedule()
  int64_t arrival = 0;               // submission order
  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish = FinishReason::kNone;
  int32_t n_output() const { return static_cast<int32_t>(tokens.size()) - n_prompt; }
};

// One request's share of a step (plain data).
struct ScheduledSeq {
  RequestId id = 0;
  int32_t n_computed = 0;   // first position computed this step
  int32_t n_new = 0;        // tokens computed this step (> 0)
  bool needs_logits = false;  // n_computed + n_new == tokens.size() + n_draft: sample after the step
  // Draft tokens computed after the request's tokens (the last n_draft of the n_new, read from
  // SchedRequest::draft): the step then needs the logits of its last 1 + n_draft positions.
  int32_t n_draft = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;        // running requests first, then newly admitted ones
  std::vector<RequestId> preempted;      // preempted during this schedule() call
  std::vector<RequestId> failed;         // finished with kError during this call
  int32_t n_tokens = 0;                  // sum of n_new
};

// What update() reports per request touched by the step.
// A step that accepted several tokens for one request (speculative decoding) reports one event
// per token, in order; only the last may carry a finish reason.
struct StepEvent {
  RequestId id = 0;
  int32_t token = -1;                    // the token sampled for this request, or -1
  FinishReason finish = FinishReason::kNone;
};

struct SchedulerStats {
  int32_t running = 0;
  int32_t waiting = 0;
  int64_t preemptions = 0;               // total so far
  int64_t tokens_computed = 0;           // total tokens computed (prompt + output) so far
  kv::KvManagerStats kv;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, kv::KvManagerConfig kv_config);  // throws on bad config

  // Queues a request. Throws triad::Error (nothing queued) on a bad spec or duplicate id.
  void add(SchedRequestSpec spec);
  // Removes a waiting or running request and frees its blocks. Returns false if unknown.
  bool cancel(RequestId id);

  // Plans one step. May preempt running requests and admit waiting ones.
  SchedulerOutput schedule();
  // Applies a step: every scheduled seq advanced n_computed by n_new; sampled[i] is the token
  // sampled for out.seqs[i] if it needs_logits (ignored otherwise). Full blocks are committed to
  // the prefix cache; requests that finish are freed and forgotten after this call returns.
  std::vector<StepEvent> update(const SchedulerOutput& out, std::span<const int32_t> sampled);
  // The same with every scheduled seq's accepted tokens: accepted[i] is empty when out.seqs[i]
  // does not need logits; else its first m - 1 tokens (m = its size, 1 <= m <= n_draft + 1)
  // equal the first m - 1 draft tokens, and the last is the token sampled after them. Tokens
  // are appended in order until one is a stop token or the request reaches its length limit
  // (the rest are then dropped); n_computed advances by n_new - n_draft + m - 1.
  std::vector<StepEvent> update(const SchedulerOutput& out, std::span<const std::vector<int32_t>> accepted);

  // Proposes draft tokens for the next schedule() (replacing any earlier draft). Only a running
  // request in decode uses one; the draft is dropped by the next schedule() in any case.
  // Unknown ids are ignored; negative token ids throw.
  void set_draft(RequestId id, std::span<const int32_t> draft);

  // Live request (waiting or running); nullptr if unknown or finished.
  const SchedRequest* request(RequestId id) const;
  const kv::KvCacheManager& kv() const { return *kv_; }
  const SchedulerConfig& config() const { return config_; }
  bool has_work() const;  // any waiting or running request
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  SchedulerStats stats() const;
  // Checks every internal invariant (each live request is in exactly one queue matching its
  // status; running ones hold a KV sequence covering n_computed, waiting ones hold none; queue
  // order; limits) and then the KV manager's; throws triad::Error naming the first violation.
  // O(requests + blocks): for tests and debugging.
  void check_invariants() const;

 private:
  SchedRequest* find(RequestId id);
  // Whether `r` needs more blocks than some group's whole pool to compute its next token (its
  // current tokens), so that it could never run even alone in an empty pool.
  bool never_fits(const SchedRequest& r) const;
  // Tries to make the KV sequence of `r` cover [0, n_computed + n_new). When `alone` (no other
  // request holds blocks) and the chunk does not fit, shrinks n_new to the largest chunk that
  // fits (a sliding-window group may hold a short chunk but not a long one). Returns false,
  // changing nothing, when nothing fits.
  bool allocate(const SchedRequest& r, int32_t n_computed, int32_t& n_new, bool alone);
  // How many of `r`'s draft tokens this step computes (0: none) when its one-token chunk and
  // the draft share `budget` tokens, with their blocks allocated (free blocks only) when > 0.
  int32_t draft_that_fits(SchedRequest& r, int32_t budget);
  // The most recently admitted running request `id` goes back to the head of the waiting queue
  // (or fails with kError if it could never fit again).
  void preempt(RequestId id, SchedulerOutput& out);
  // Finishes `id` with kError, releasing its blocks and forgetting it.
  void fail(RequestId id, SchedulerOutput& out);
  void remove_from_queues(const SchedRequest& r);
  void forget(RequestId id);  // frees the KV sequence and erases the request (queues untouched)

  SchedulerConfig config_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unordered_map<RequestId, SchedRequest> requests_;  // every live request
  std::vector<RequestId> running_;  // admission order; each holds a KV sequence
  // Waiting requests in admission order: [0, n_resumed_) are preempted ones (the next to resume
  // first), the rest are new ones sorted by (priority, arrival).
  std::deque<RequestId> waiting_;
  size_t n_resumed_ = 0;
  std::vector<RequestId> doomed_;   // added requests that never fit: failed by the next schedule()
  int64_t next_arrival_ = 0;
  int64_t preemptions_ = 0;
  int64_t tokens_computed_ = 0;
};

}  // namespace triad::sched
