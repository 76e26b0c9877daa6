// Scheduler: one code path per step (running requests, then waiting ones, each given what is
// left of the token budget), preemption of the most recently admitted request by
// recomputation, and the bookkeeping of update().
#include "sched/scheduler.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "base/error.h"

namespace triad::sched {
namespace {

int64_t blocks_for(int64_t n_tokens, int32_t block_size) {
  return (n_tokens + block_size - 1) / block_size;
}

// Blocks a sliding-window group holds while computing the single token at position p: from the
// first block a query at p can see through the block of p (the rule of KvCacheManager).
int64_t window_blocks_at(int64_t p, int32_t window, int32_t block_size) {
  const int64_t x = p - window + 1;
  const int64_t first = x <= 0 ? 0 : x / block_size;
  return p / block_size - first + 1;
}

const SchedulerConfig& validated(const SchedulerConfig& c) {
  TRIAD_CHECK(c.max_batched_tokens > 0, "SchedulerConfig: max_batched_tokens must be > 0, got ",
              c.max_batched_tokens);
  TRIAD_CHECK(c.max_seqs > 0, "SchedulerConfig: max_seqs must be > 0, got ", c.max_seqs);
  TRIAD_CHECK(c.max_model_len >= 2,
              "SchedulerConfig: max_model_len must be >= 2 (a one-token prompt and one output "
              "token), got ",
              c.max_model_len);
  return c;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

Scheduler::Scheduler(SchedulerConfig config, kv::KvManagerConfig kv_config)
    : config_(validated(config)),
      kv_(std::make_unique<kv::KvCacheManager>(std::move(kv_config))) {}

SchedRequest* Scheduler::find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

const SchedRequest* Scheduler::request(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

bool Scheduler::has_work() const {
  return !running_.empty() || !waiting_.empty();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.running = static_cast<int32_t>(running_.size());
  s.waiting = static_cast<int32_t>(waiting_.size());
  s.preemptions = preemptions_;
  s.tokens_computed = tokens_computed_;
  s.kv = kv_->stats();
  return s;
}

void Scheduler::add(SchedRequestSpec spec) {
  TRIAD_CHECK(!requests_.contains(spec.id), "scheduler: request id ", spec.id,
              " is already in use by a live request");
  TRIAD_CHECK(!spec.prompt.empty(), "scheduler: request ", spec.id, " has an empty prompt");
  if (spec.prefill_only) {
    TRIAD_CHECK(spec.prompt.size() <= static_cast<size_t>(config_.max_model_len), "scheduler: request ", spec.id,
                " has ", spec.prompt.size(), " tokens; the context holds ", config_.max_model_len);
  } else {
    TRIAD_CHECK(spec.prompt.size() < static_cast<size_t>(config_.max_model_len), "scheduler: request ",
                spec.id, " has a prompt of ", spec.prompt.size(),
                " tokens, which leaves no room for output within the context of ",
                config_.max_model_len, " tokens");
  }
  TRIAD_CHECK(!spec.whole_prompt || spec.prompt.size() <= static_cast<size_t>(config_.max_batched_tokens),
              "scheduler: request ", spec.id, " must be computed in one step, but its ", spec.prompt.size(),
              " tokens exceed the step budget of ", config_.max_batched_tokens);
  TRIAD_CHECK(spec.max_tokens >= 1, "scheduler: request ", spec.id,
              " needs max_tokens >= 1, got ", spec.max_tokens);
  for (size_t i = 0; i < spec.prompt.size(); ++i)
    TRIAD_CHECK(spec.prompt[i] >= 0, "scheduler: request ", spec.id, " has a negative token id ",
                spec.prompt[i], " at prompt position ", i);

  SchedRequest r;
  r.tokens = spec.prompt;
  r.n_prompt = static_cast<int32_t>(spec.prompt.size());
  r.arrival = next_arrival_++;
  r.spec = std::move(spec);
  const RequestId id = r.spec.id;
  const bool doomed = never_fits(r);
  const int32_t priority = r.spec.priority;
  requests_.emplace(id, std::move(r));

  // New requests sit after the preempted ones, by (priority, arrival); arrival only grows, so
  // this goes after every request of the same priority.
  auto pos = std::upper_bound(
      waiting_.begin() + static_cast<std::ptrdiff_t>(n_resumed_), waiting_.end(), priority,
      [this](int32_t p, RequestId other) { return p < requests_.at(other).spec.priority; });
  waiting_.insert(pos, id);
  if (doomed) doomed_.push_back(id);
}

bool Scheduler::never_fits(const SchedRequest& r) const {
  const kv::KvManagerConfig& kc = kv_->config();
  const int32_t bs = kc.block_size;
  const auto n = static_cast<int64_t>(r.tokens.size());
  for (const kv::KvGroupSpec& g : kc.groups) {
    int64_t need = blocks_for(n, bs);
    if (g.window > 0) {
      // One token at a time, the most a window group holds over positions [0, n) is reached
      // within the last block_size positions (the count is non-decreasing before the window
      // fills and periodic with period block_size after).
      need = 0;
      for (int64_t p = std::max<int64_t>(0, n - bs); p < n; ++p)
        need = std::max(need, window_blocks_at(p, g.window, bs));
    }
    if (need > g.n_blocks) return true;
  }
  return false;
}

bool Scheduler::allocate(const SchedRequest& r, int32_t n_computed, int32_t& n_new, bool alone) {
  const RequestId id = r.spec.id;
  if (kv_->allocate_slots(id, n_computed, n_computed + n_new)) return true;
  if (!alone || n_new <= 1) return false;
  // Needed blocks grow with the chunk: binary search the largest chunk that fits.
  int32_t lo = 0, hi = n_new - 1;  // lo fits (0 trivially), hi is the largest candidate
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (kv_->can_allocate(id, n_computed, n_computed + mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo == 0) return false;
  TRIAD_CHECK(kv_->allocate_slots(id, n_computed, n_computed + lo),
              "scheduler: KV manager refused an allocation can_allocate accepted");
  n_new = lo;
  return true;
}

int32_t Scheduler::draft_that_fits(SchedRequest& r, int32_t budget) {
  const auto n_tokens = static_cast<int32_t>(r.tokens.size());
  if (r.draft.empty() || n_tokens - r.n_computed != 1 || r.spec.prefill_only) return 0;
  // One token more than the draft is accepted at most: stay within max_tokens and the context.
  int32_t n = std::min({static_cast<int32_t>(r.draft.size()), budget - 1,
                        r.spec.max_tokens - r.n_output() - 1, config_.max_model_len - n_tokens - 1});
  if (r.spec.max_chunk > 0) n = std::min(n, r.spec.max_chunk - 1);
  if (n <= 0) return 0;
  // Only free blocks: a draft never preempts (the one-token chunk already holds its block).
  return kv_->allocate_slots(r.spec.id, r.n_computed, n_tokens + n) ? n : 0;
}

void Scheduler::set_draft(RequestId id, std::span<const int32_t> draft) {
  SchedRequest* r = find(id);
  if (r == nullptr || r->status != RequestStatus::kRunning) return;
  for (int32_t t : draft) TRIAD_CHECK(t >= 0, "scheduler: request ", id, " has a negative draft token id ", t);
  r->draft.assign(draft.begin(), draft.end());
}

void Scheduler::forget(RequestId id) {
  kv_->free_sequence(id);
  requests_.erase(id);
}

void Scheduler::remove_from_queues(const SchedRequest& r) {
  const RequestId id = r.spec.id;
  if (r.status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), id));
    return;
  }
  auto it = std::find(waiting_.begin(), waiting_.end(), id);
  if (it == waiting_.end()) return;
  if (static_cast<size_t>(it - waiting_.begin()) < n_resumed_) --n_resumed_;
  waiting_.erase(it);
}

void Scheduler::fail(RequestId id, SchedulerOutput& out) {
  SchedRequest& r = requests_.at(id);
  remove_from_queues(r);
  r.status = RequestStatus::kFinished;
  r.finish = FinishReason::kError;
  out.failed.push_back(id);
  forget(id);
}

void Scheduler::preempt(RequestId id, SchedulerOutput& out) {
  SchedRequest& r = requests_.at(id);
  TRIAD_CHECK(!running_.empty() && running_.back() == id, "scheduler: preempting request ", id,
              ", which is not the most recently admitted");
  running_.pop_back();
  kv_->free_sequence(id);
  r.draft.clear();
  r.status = RequestStatus::kWaiting;
  r.n_computed = 0;
  ++r.n_preemptions;
  ++preemptions_;
  if (never_fits(r)) {  // it has grown beyond the pool: waiting would be forever
    r.status = RequestStatus::kFinished;
    r.finish = FinishReason::kError;
    out.failed.push_back(id);
    forget(id);
    return;
  }
  waiting_.push_front(id);
  ++n_resumed_;
  out.preempted.push_back(id);
}

bool Scheduler::cancel(RequestId id) {
  SchedRequest* r = find(id);
  if (r == nullptr) return false;
  remove_from_queues(*r);
  forget(id);  // a doomed_ entry of it is skipped by schedule()
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  for (RequestId id : doomed_) {
    const SchedRequest* r = find(id);
    // The id may have been cancelled (and even reused) since: fail only a still-waiting request
    // that does not fit.
    if (r != nullptr && r->status == RequestStatus::kWaiting && never_fits(*r)) fail(id, out);
  }
  doomed_.clear();

  int32_t budget = config_.max_batched_tokens;
  bool preempted = false;

  // Running requests, in admission order.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const RequestId id = running_[i];
    SchedRequest& r = requests_.at(id);
    const auto n_tokens = static_cast<int32_t>(r.tokens.size());
    int32_t n_new = std::min(n_tokens - r.n_computed, budget);
    if (r.spec.max_chunk > 0) n_new = std::min(n_new, r.spec.max_chunk);
    if (n_new <= 0) {  // nothing to compute (cannot happen after update(); be safe)
      ++i;
      continue;
    }
    bool ok = allocate(r, r.n_computed, n_new, running_.size() == 1);
    while (!ok && running_.back() != id) {
      preempt(running_.back(), out);
      preempted = true;
      ok = allocate(r, r.n_computed, n_new, running_.size() == 1);
    }
    if (!ok) {
      // `id` is the most recently admitted. Alone in the pool it could not compute even one
      // token: it never will.
      if (running_.size() == 1) {
        fail(id, out);
      } else {
        preempt(id, out);
        preempted = true;
      }
      break;
    }
    out.seqs.push_back(ScheduledSeq{id, r.n_computed, n_new, r.n_computed + n_new == n_tokens});
    budget -= n_new;
    ++i;
  }

  // Waiting requests, in order, while they fit. Not after a preemption: the pool is full, and
  // the preempted request must not be overtaken.
  while (!preempted && budget > 0 && !waiting_.empty() &&
         running_.size() < static_cast<size_t>(config_.max_seqs)) {
    const RequestId id = waiting_.front();
    SchedRequest& r = requests_.at(id);
    if (never_fits(r)) {
      fail(id, out);
      continue;
    }
    const auto n_tokens = static_cast<int32_t>(r.tokens.size());
    if (r.spec.whole_prompt && n_tokens > budget) break;  // waits for a step with room, not overtaken
    const int32_t hit =
        kv_->begin_sequence(id, r.tokens, r.spec.cache_salt, r.spec.read_prefix_cache && !r.spec.whole_prompt);
    int32_t n_new = std::min(n_tokens - hit, budget);
    if (r.spec.max_chunk > 0 && !r.spec.whole_prompt) n_new = std::min(n_new, r.spec.max_chunk);
    if (!allocate(r, hit, n_new, running_.empty() && !r.spec.whole_prompt)) {
      kv_->free_sequence(id);
      if (running_.empty()) {  // alone in the pool and still no room: it never fits
        fail(id, out);
        continue;
      }
      break;  // no overtaking
    }
    waiting_.pop_front();
    if (n_resumed_ > 0) --n_resumed_;
    if (r.n_preemptions == 0) r.n_cached_prompt = hit;
    r.n_computed = hit;
    r.status = RequestStatus::kRunning;
    running_.push_back(id);
    out.seqs.push_back(ScheduledSeq{id, hit, n_new, hit + n_new == n_tokens});
    budget -= n_new;
  }

  // Drafts last, from what the budget and the free blocks have left once every running request
  // has its chunk and the waiting ones have been admitted: a draft never takes a token or a
  // block from another request. A decoding request's one-token chunk grows by its draft.
  for (ScheduledSeq& s : out.seqs) {
    SchedRequest& r = requests_.at(s.id);
    if (r.draft.empty()) continue;
    const int32_t n_draft = s.n_new == 1 && s.needs_logits ? draft_that_fits(r, budget + 1) : 0;
    r.draft.resize(static_cast<size_t>(n_draft));
    s.n_new += n_draft;
    s.n_draft = n_draft;
    budget -= n_draft;
  }
  for (RequestId id : running_) {  // drafts the step did not use expire
    SchedRequest& r = requests_.at(id);
    if (!r.draft.empty() && std::none_of(out.seqs.begin(), out.seqs.end(), [&](const ScheduledSeq& s) {
          return s.id == id && s.n_draft > 0;
        }))
      r.draft.clear();
  }

  for (const ScheduledSeq& s : out.seqs) out.n_tokens += s.n_new;
  return out;
}

std::vector<StepEvent> Scheduler::update(const SchedulerOutput& out, std::span<const int32_t> sampled) {
  TRIAD_CHECK(sampled.size() == out.seqs.size(), "scheduler::update: ", sampled.size(),
              " sampled tokens for ", out.seqs.size(), " scheduled sequences");
  std::vector<std::vector<int32_t>> accepted(out.seqs.size());
  for (size_t i = 0; i < out.seqs.size(); ++i)
    if (out.seqs[i].needs_logits && sampled[i] >= 0) accepted[i].push_back(sampled[i]);
  return update(out, std::span<const std::vector<int32_t>>(accepted));
}

std::vector<StepEvent> Scheduler::update(const SchedulerOutput& out,
                                         std::span<const std::vector<int32_t>> accepted) {
  TRIAD_CHECK(accepted.size() == out.seqs.size(), "scheduler::update: ", accepted.size(),
              " token lists for ", out.seqs.size(), " scheduled sequences");
  // Validate everything first so that a bad call changes nothing. Unknown ids (cancelled since
  // schedule()) are skipped.
  std::unordered_set<RequestId> seen;
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    TRIAD_CHECK(seen.insert(s.id).second, "scheduler::update: request ", s.id,
                " is scheduled twice");
    const SchedRequest* r = request(s.id);
    if (r == nullptr) continue;
    const int64_t end = static_cast<int64_t>(s.n_computed) + s.n_new;
    const auto n_tokens = static_cast<int64_t>(r->tokens.size());
    TRIAD_CHECK(r->status == RequestStatus::kRunning && r->n_computed == s.n_computed && s.n_new > 0 &&
                    s.n_draft >= 0 && static_cast<size_t>(s.n_draft) == (s.n_draft > 0 ? r->draft.size() : 0) &&
                    s.n_new > s.n_draft && end <= n_tokens + s.n_draft &&
                    s.needs_logits == (end == n_tokens + s.n_draft),
                "scheduler::update: the step of request ", s.id,
                " does not match its state (a stale or altered SchedulerOutput?)");
    const std::vector<int32_t>& a = accepted[i];
    if (!s.needs_logits || r->spec.prefill_only) continue;
    TRIAD_CHECK(!a.empty() && a.size() <= static_cast<size_t>(s.n_draft) + 1, "scheduler::update: request ", s.id,
                " needs 1 to ", s.n_draft + 1, " accepted tokens, got ", a.size());
    for (size_t k = 0; k < a.size(); ++k) {
      TRIAD_CHECK(a[k] >= 0, "scheduler::update: request ", s.id, " needs a sampled token, got ", a[k]);
      TRIAD_CHECK(k + 1 == a.size() || a[k] == r->draft[k], "scheduler::update: request ", s.id,
                  " accepted token ", a[k], " where its draft has ", r->draft[k]);
    }
  }

  std::vector<StepEvent> events;
  events.reserve(out.seqs.size());
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    SchedRequest* r = find(s.id);
    if (r == nullptr) continue;
    r->n_computed += s.n_new - s.n_draft;
    tokens_computed_ += s.n_new;
    FinishReason finish = FinishReason::kNone;
    if (s.needs_logits && r->spec.prefill_only) {
      finish = FinishReason::kStop;  // its prompt is computed: nothing to sample
      events.push_back(StepEvent{s.id, -1, finish});
    } else if (s.needs_logits) {
      const std::vector<int32_t>& a = accepted[i];
      const std::vector<int32_t>& stops = r->spec.stop_ids;
      for (size_t k = 0; k < a.size() && finish == FinishReason::kNone; ++k) {
        const int32_t tok = a[k];
        if (std::find(stops.begin(), stops.end(), tok) != stops.end()) {
          finish = FinishReason::kStop;
        } else {
          r->tokens.push_back(tok);
          if (k + 1 < a.size()) ++r->n_computed;  // a draft position: its K/V were computed
          if (r->n_output() >= r->spec.max_tokens ||
              r->tokens.size() >= static_cast<size_t>(config_.max_model_len))
            finish = FinishReason::kLength;
        }
        events.push_back(StepEvent{s.id, tok, finish});
      }
    } else {
      events.push_back(StepEvent{s.id, -1, finish});
    }
    r->draft.clear();
    kv_->commit_full_blocks(s.id, r->tokens, r->n_computed);  // before a finish frees them: kept cached
    if (finish != FinishReason::kNone) {
      remove_from_queues(*r);
      r->status = RequestStatus::kFinished;
      r->finish = finish;
      forget(s.id);
    }
  }
  return events;
}

void Scheduler::check_invariants() const {
  TRIAD_CHECK(running_.size() <= static_cast<size_t>(config_.max_seqs), "scheduler: ",
              running_.size(), " running requests exceed max_seqs ", config_.max_seqs);
  TRIAD_CHECK(running_.size() + waiting_.size() == requests_.size(), "scheduler: ",
              running_.size(), " running + ", waiting_.size(), " waiting != ", requests_.size(),
              " live requests");
  TRIAD_CHECK(n_resumed_ <= waiting_.size(), "scheduler: ", n_resumed_,
              " resumed requests in a waiting queue of ", waiting_.size());
  std::unordered_set<RequestId> seen;
  auto check_common = [&](RequestId id, RequestStatus want) -> const SchedRequest& {
    TRIAD_CHECK(seen.insert(id).second, "scheduler: request ", id, " is queued twice");
    const SchedRequest* r = request(id);
    TRIAD_CHECK(r != nullptr, "scheduler: queued request ", id, " is unknown");
    TRIAD_CHECK(r->status == want, "scheduler: request ", id, " has the wrong status");
    TRIAD_CHECK(r->spec.id == id && r->finish == FinishReason::kNone, "scheduler: request ", id,
                " is inconsistent");
    TRIAD_CHECK(r->n_prompt == static_cast<int32_t>(r->spec.prompt.size()) &&
                    r->tokens.size() >= r->spec.prompt.size() &&
                    std::equal(r->spec.prompt.begin(), r->spec.prompt.end(), r->tokens.begin()),
                "scheduler: request ", id, " lost its prompt");
    TRIAD_CHECK((r->tokens.size() < static_cast<size_t>(config_.max_model_len) ||
                 (r->spec.prefill_only && r->tokens.size() == static_cast<size_t>(config_.max_model_len))) &&
                    r->n_output() < r->spec.max_tokens,
                "scheduler: request ", id, " should have finished");
    TRIAD_CHECK(r->n_cached_prompt >= 0 && r->n_cached_prompt < r->n_prompt, "scheduler: request ",
                id, " has n_cached_prompt ", r->n_cached_prompt);
    return *r;
  };
  for (const RequestId id : running_) {
    const SchedRequest& r = check_common(id, RequestStatus::kRunning);
    TRIAD_CHECK(kv_->has_sequence(id), "scheduler: running request ", id, " has no KV sequence");
    TRIAD_CHECK(r.n_computed >= 0 && static_cast<size_t>(r.n_computed) < r.tokens.size(),
                "scheduler: running request ", id, " has n_computed ", r.n_computed, " of ",
                r.tokens.size(), " tokens");
    for (int32_t g = 0; g < kv_->n_groups(); ++g)
      TRIAD_CHECK(static_cast<int64_t>(kv_->block_table(id, g).size()) >=
                      blocks_for(r.n_computed, kv_->block_size()),
                  "scheduler: running request ", id, " has too few blocks for its ",
                  r.n_computed, " computed tokens");
  }
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const RequestId id = waiting_[i];
    const SchedRequest& r = check_common(id, RequestStatus::kWaiting);
    TRIAD_CHECK(!kv_->has_sequence(id) && r.n_computed == 0, "scheduler: waiting request ", id,
                " holds KV state");
    TRIAD_CHECK(i >= n_resumed_ || r.n_preemptions > 0, "scheduler: waiting request ", id,
                " is among the resumed but was never preempted");
    if (i > n_resumed_) {
      const SchedRequest& prev = requests_.at(waiting_[i - 1]);
      TRIAD_CHECK(std::make_pair(prev.spec.priority, prev.arrival) <
                      std::make_pair(r.spec.priority, r.arrival),
                  "scheduler: waiting queue out of (priority, arrival) order at ", id);
    }
  }
  kv_->check_invariants();
}

}  // namespace triad::sched
