// Request intake: what a submitted request becomes before the engine thread sees it. Every
// argument is checked here, on the caller's thread, so a bad request fails at submit with a
// clear message (the server's 4xx) and the engine loop only ever holds valid ones.
//
// LiveRequest is the engine thread's state of one request between submission and its end
// (sink, sampler, grammar matcher, logprob and pooling progress, drafting); AdmittedRequest
// pairs it with the scheduler's spec. The id is assigned when the engine enqueues it.
// Thread-safety: admit_* are pure functions of their arguments; a LiveRequest is owned by one
// thread at a time (the caller, then the engine thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/draft_policy.h"
#include "engine/engine_api.h"
#include "grammar/matcher.h"
#include "model/model_config.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"

namespace triad::engine {

struct LiveRequest {
  std::shared_ptr<OutputSink> sink;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<grammar::Matcher> matcher;  // constrained requests
  int32_t logprobs = -1;
  int32_t prompt_logprobs = -1;
  bool deliver_stop = false;
  std::vector<TokenOutput> prompt_lp;  // entry k: prompt token k + 1 (filled as prefill runs)
  int32_t prompt_lp_done = 0;          // entries filled (a recomputation after preemption skips them)
  bool prompt_lp_sent = false;
  std::chrono::steady_clock::time_point submitted;
  bool scheduled = false;
  bool delivered = false;
  RequestTimings timings;
  // Embedding requests: the pooling, and the running sum (mean) or chosen row (cls, last) of
  // the final hidden states, in double so that chunking does not change the sum's rounding.
  bool embedding = false;
  Pooling pooling = Pooling::kMean;
  std::vector<double> pooled;
  int32_t pooled_rows = 0;
  // Speculative decoding: the drafting policy (draft length per step, 0: off) and the
  // predicted output.
  DraftPolicy drafting;
  std::vector<int32_t> prediction;
};

struct AdmittedRequest {
  sched::SchedRequestSpec spec;  // spec.id unset
  LiveRequest live;
};

// Checks a generation request against the model and the engine's configuration and builds its
// spec and live state (sampler primed with the prompt, grammar matcher, drafting policy, stop
// ids). Throws triad::Error (grammar::GrammarError for a bad grammar) naming the bad argument.
AdmittedRequest admit_generation(GenerationRequest req, std::shared_ptr<OutputSink> sink, const ModelConfig& c,
                                 const EngineConfig& config);

// The same for an embedding request (prefill only; the pooling reads the final hidden rows).
AdmittedRequest admit_embedding(EmbeddingRequest req, std::shared_ptr<OutputSink> sink, const ModelConfig& c,
                                const EngineConfig& config);

}  // namespace triad::engine
