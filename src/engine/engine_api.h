// The engine API: the only interface the HTTP server (and `triad run` / `triad bench`) uses.
//
// submit() queues a request of prompt token ids and returns at once; one engine thread runs
// the loop (schedule, one batched forward pass, sample, deliver) and calls the request's sink
// with each new token and finally with its finish reason and timings. cancel() frees the
// request's blocks at the next step. The engine never sees JSON or text; the server never sees
// blocks.
//
// Thread-safety: every public method may be called from any thread. Sinks are called on the
// engine thread, one request's calls in order; a sink must return quickly and never call back
// into the engine synchronously except cancel() (which only queues).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"

namespace triad {
class Model;
namespace grammar {
class Constraint;
}
}

namespace triad::engine {

using RequestId = sched::RequestId;
using FinishReason = sched::FinishReason;

struct GenerationRequest {
  std::vector<int32_t> prompt;        // token ids (non-empty, < max_model_len)
  SamplingParams sampling;
  int32_t max_tokens = 16;            // generated tokens at most (>= 1); clipped to the context
  std::vector<int32_t> stop_ids;      // extra stop token ids
  bool ignore_eos = false;            // do not stop at the model's end-of-generation tokens
  bool deliver_stop_token = false;    // deliver the stop token that ends the request too (with
                                      // its logprobs), as OpenAI's legacy completions list it
  int32_t logprobs = -1;              // -1: none; 0..20: the sampled token's logprob plus this
                                      // many top alternatives per token
  int32_t prompt_logprobs = -1;       // -1: none; 0..20: each prompt token's logprob (the model's
                                      // raw distribution: no sampling parameters) and rank, plus
                                      // this many top alternatives. The prompt is then computed
                                      // in full (no prefix-cache hit), in chunks of at most 64.
  int32_t priority = 0;               // lower runs first
  std::string cache_salt;             // requests with different salts never share cache blocks
  // Constrained decoding: only tokens the grammar allows are sampled, and an end-of-generation
  // token (which then always stops, whatever ignore_eos says) only where the grammar may end.
  // Null: unconstrained. Its vocabulary must be the model's tokenizer's.
  std::shared_ptr<grammar::Constraint> constraint;
  // Speculative decoding (EngineConfig::speculative): -1 follows the engine's default; 0 turns it
  // off for this request; 1..kMaxSpeculativeTokens drafts up to that many tokens per step.
  // Outputs are the same either way: greedy picks the same tokens, and sampling draws each
  // token from the same distribution with the same random numbers (a seeded request repeats),
  // bitwise where the kernels are batch-invariant (kernels::matmul_is_batch_invariant(); else a
  // verifying step may round a row as a batch would).
  int32_t num_speculative_tokens = -1;
  // A predicted output (OpenAI's `prediction`): drafts are looked up here first. Non-empty
  // turns speculation on for the request unless num_speculative_tokens is 0.
  std::vector<int32_t> prediction;
};

// An embedding request: the final hidden states of the prompt's tokens pooled into one vector
// of n_embd floats (not normalized). Prefill-only work: it shares each step's token budget
// with generation and ends once its prompt is computed. An encoder (bert) computes the prompt
// whole in one step; a decoder in chunks, like any prompt (pooling mean / cls then computes
// every position: no prefix-cache hit).
struct EmbeddingRequest {
  std::vector<int32_t> prompt;        // token ids (non-empty, <= max_model_len)
  Pooling pooling = Pooling::kMean;   // kMean, kCls or kLast
  int32_t priority = 0;               // lower runs first
};

struct TokenOutput {
  int32_t id = -1;
  float logprob = 0.f;                    // when requested
  std::vector<TokenLogprob> top;          // when logprobs > 0
  int32_t rank = 0;                       // prompt logprobs: 1 + the number of more likely tokens
};

struct RequestTimings {
  double queue_s = 0;          // submit -> first scheduled
  double ttft_s = 0;           // submit -> first token delivered
  double e2e_s = 0;            // submit -> finish
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;   // prompt tokens served by the prefix cache (first admission)
  int32_t completion_tokens = 0;
  int32_t preemptions = 0;
  int32_t draft_tokens = 0;    // speculative tokens proposed and verified
  int32_t accepted_tokens = 0; // of which accepted (each saved a step)
};

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // A new generated token (a stop token only with deliver_stop_token).
  virtual void on_token(RequestId id, const TokenOutput& token) = 0;
  // With prompt_logprobs: the entries of prompt tokens 1..n-1 (the first has no context), once,
  // before any on_token.
  virtual void on_prompt_logprobs(RequestId /*id*/, std::vector<TokenOutput>&& /*entries*/) {}
  // An embedding request's pooled vector, once, just before on_finish (kStop).
  virtual void on_embedding(RequestId /*id*/, std::vector<float>&& /*embedding*/) {}
  // Called exactly once per submitted request, last. `error` is set for kError.
  virtual void on_finish(RequestId id, FinishReason reason, const RequestTimings& timings,
                         const std::string& error) = 0;
};

struct EngineStats {
  int32_t running = 0;
  int32_t waiting = 0;                // queued, including those submitted since the last step
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_blocks_cached = 0;
  uint64_t kv_bytes_used = 0;         // bytes of the blocks in use
  uint64_t kv_bytes_total = 0;
  int64_t kv_tokens_held = 0;         // positions cached by running requests (sum of lengths)
  int64_t prefix_queries = 0;         // prompt tokens looked up in the prefix cache
  int64_t prefix_hits = 0;            // of which served from it
  int64_t prompt_tokens = 0;          // prompt tokens computed (prefill, incl. recomputation)
  int64_t generated_tokens = 0;       // tokens sampled
  int64_t steps = 0;                  // engine loop iterations that ran a forward pass
  int64_t preemptions = 0;
  int64_t requests_finished = 0;
  int64_t embedding_requests = 0;     // embedding requests finished with their vector
  int64_t embedding_tokens = 0;       // of their prompt tokens
  int64_t spec_draft_tokens = 0;      // speculative tokens verified
  int64_t spec_accepted_tokens = 0;   // of which accepted
  // The same by source (draft_policy.h): prompt lookup (the request's context and its
  // `prediction`), then the draft model; lookup + model = the totals above.
  int64_t spec_lookup_draft_tokens = 0, spec_lookup_accepted_tokens = 0;
  int64_t spec_model_draft_tokens = 0, spec_model_accepted_tokens = 0;
  // What the running batch's rows cost of its decode step (step_cost.h; one request's when none
  // runs): a draft token is verified only where its chance of acceptance exceeds this. 0 until
  // the engine has measured it.
  double spec_row_cost_share = 0;
  int64_t internal_errors = 0;        // loop iterations that failed unexpectedly (their
                                      // requests finished with kError); 0 in a healthy engine
  double last_progress_s = 0;         // seconds since the loop last completed an iteration
};

class Engine {
 public:
  // The model must outlive the engine. Plans the KV memory, allocates it and starts the loop.
  // The forward pass runs on `pool` when given (engines of several models share one pool, so
  // the cores are not oversubscribed: their steps' parallel regions take turns, and each
  // engine's serial work overlaps the others'); else on a pool of config.threads of its own.
  // `draft`, when given, is a small model of the same vocabulary that drafts tokens for
  // speculative decoding (draft_model.h); it must outlive the engine too. Throws when it cannot
  // draft for `model`.
  Engine(const Model& model, EngineConfig config, std::shared_ptr<ThreadPool> pool = nullptr,
         const Model* draft = nullptr);
  ~Engine();  // stops the loop; unfinished requests finish with kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request; throws triad::Error (nothing queued) on a bad request (an
  // embedding model cannot generate).
  RequestId submit(GenerationRequest request, std::shared_ptr<OutputSink> sink);
  // Queues an embedding request (any model: an encoder's or a decoder's hidden states); throws
  // triad::Error (nothing queued) on a bad one.
  RequestId submit_embedding(EmbeddingRequest request, std::shared_ptr<OutputSink> sink);
  // Cancels a queued or running request (no-op if unknown or already finished).
  void cancel(RequestId id);
  // Cancels every request submitted so far (queued or running); each finishes with kCancelled
  // within one loop iteration.
  void cancel_all();
  // A snapshot, refreshed after every step; its request and token counters already count every
  // request whose on_finish has been called.
  EngineStats stats() const;
  const EngineConfig& config() const;
  const KvMemoryPlan& kv_plan() const;
  int32_t max_model_len() const;
  // Stops accepting requests and returns once every submitted request has finished.
  void drain();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace triad::engine
