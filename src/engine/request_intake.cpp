#include "engine/request_intake.h"

#include <utility>

#include "base/error.h"

namespace triad::engine {

AdmittedRequest admit_embedding(EmbeddingRequest req, std::shared_ptr<OutputSink> sink, const ModelConfig& c,
                                const EngineConfig& config) {
  const int32_t max_len = config.max_model_len;
  TRIAD_CHECK(sink != nullptr, "submit: no output sink");
  TRIAD_CHECK(!req.prompt.empty(), "the input is empty");
  TRIAD_CHECK(static_cast<int64_t>(req.prompt.size()) <= max_len, "the input has ", req.prompt.size(),
              " tokens; the model takes at most ", max_len);
  for (int32_t id : req.prompt)
    TRIAD_CHECK(id >= 0 && id < c.n_vocab, "token id ", id, " is outside the vocabulary (", c.n_vocab, ")");
  TRIAD_CHECK(req.pooling != Pooling::kNone, "an embedding request needs a pooling (mean, cls or last)");
  AdmittedRequest a;
  LiveRequest& l = a.live;
  l.sink = std::move(sink);
  l.embedding = true;
  l.pooling = req.pooling;
  l.submitted = std::chrono::steady_clock::now();
  l.timings.prompt_tokens = static_cast<int32_t>(req.prompt.size());
  sched::SchedRequestSpec& spec = a.spec;
  spec.prompt = std::move(req.prompt);
  spec.max_tokens = 1;
  spec.priority = req.priority;
  spec.prefill_only = true;
  spec.whole_prompt = !c.causal;
  // Mean and cls pooling read rows the prefix cache would skip.
  spec.read_prefix_cache = req.pooling == Pooling::kLast;
  return a;
}

AdmittedRequest admit_generation(GenerationRequest req, std::shared_ptr<OutputSink> sink, const ModelConfig& c,
                                 const EngineConfig& config) {
  const int32_t max_len = config.max_model_len;
  TRIAD_CHECK(sink != nullptr, "submit: no output sink");
  TRIAD_CHECK(c.has_logits(), "the model is an embedding model (", c.arch_name, "): it cannot generate text");
  TRIAD_CHECK(!req.prompt.empty(), "the prompt is empty");
  TRIAD_CHECK(static_cast<int64_t>(req.prompt.size()) < max_len, "the prompt has ", req.prompt.size(),
              " tokens; the context holds ", max_len, " (prompt and completion together)");
  for (int32_t id : req.prompt)
    TRIAD_CHECK(id >= 0 && id < c.n_vocab, "prompt token id ", id, " is outside the vocabulary (", c.n_vocab, ")");
  TRIAD_CHECK(req.max_tokens >= 1, "max_tokens must be at least 1, got ", req.max_tokens);
  TRIAD_CHECK(req.logprobs >= -1 && req.logprobs <= 20, "top_logprobs must be in 0..20, got ", req.logprobs);
  TRIAD_CHECK(req.prompt_logprobs >= -1 && req.prompt_logprobs <= 20, "prompt_logprobs must be in 0..20, got ",
              req.prompt_logprobs);
  AdmittedRequest a;
  LiveRequest& l = a.live;
  l.sampler = std::make_unique<Sampler>(req.sampling, c.n_vocab);  // validates the parameters
  for (int32_t id : req.prompt) l.sampler->accept(id, /*from_prompt=*/true);
  if (req.constraint) {
    TRIAD_CHECK(req.constraint->vocab().n_vocab() <= c.n_vocab, "the grammar's vocabulary has ",
                req.constraint->vocab().n_vocab(), " tokens; the model has ", c.n_vocab);
    TRIAD_CHECK(!req.constraint->vocab().eog_ids().empty(),
                "the model has no end-of-generation token, so a grammar could never end");
    l.matcher = std::make_unique<grammar::Matcher>(req.constraint);  // may throw GrammarError
    // A constrained request always stops at end-of-generation: that is where the grammar ends.
    req.stop_ids.insert(req.stop_ids.end(), req.constraint->vocab().eog_ids().begin(),
                        req.constraint->vocab().eog_ids().end());
  }
  TRIAD_CHECK(req.num_speculative_tokens >= -1 && req.num_speculative_tokens <= kMaxSpeculativeTokens,
              "num_speculative_tokens must be in 0..", kMaxSpeculativeTokens, ", got ", req.num_speculative_tokens);
  for (int32_t id : req.prediction)
    TRIAD_CHECK(id >= 0 && id < c.n_vocab, "prediction token id ", id, " is outside the vocabulary (", c.n_vocab, ")");
  const bool speculate = req.num_speculative_tokens > 0 ||
                         (req.num_speculative_tokens < 0 && (config.speculative || !req.prediction.empty()));
  l.drafting = DraftPolicy(!speculate                        ? 0
                           : req.num_speculative_tokens > 0 ? req.num_speculative_tokens
                                                            : config.num_speculative_tokens);
  l.prediction = std::move(req.prediction);
  l.sink = std::move(sink);
  l.logprobs = req.logprobs;
  l.prompt_logprobs = req.prompt_logprobs;
  l.deliver_stop = req.deliver_stop_token;
  l.submitted = std::chrono::steady_clock::now();
  l.timings.prompt_tokens = static_cast<int32_t>(req.prompt.size());

  sched::SchedRequestSpec& spec = a.spec;
  spec.prompt = std::move(req.prompt);
  spec.max_tokens = req.max_tokens;
  spec.stop_ids = std::move(req.stop_ids);
  if (!req.ignore_eos) spec.stop_ids.insert(spec.stop_ids.end(), config.eog_ids.begin(), config.eog_ids.end());
  spec.priority = req.priority;
  spec.cache_salt = std::move(req.cache_salt);
  if (req.prompt_logprobs >= 0) {
    spec.read_prefix_cache = false;  // every prompt position's logits are needed
    spec.max_chunk = 64;             // 64 rows of logits per step at most
  }
  return a;
}

}  // namespace triad::engine
