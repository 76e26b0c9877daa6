// EngineConfig: the run's properties (from the command line), fixed after validation, and the
// KV memory plan derived from it once at start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/ngram_lookup.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace triad::engine {

inline constexpr int32_t kMaxSpeculativeTokens = 32;

struct EngineConfig {
  int32_t threads = 1;                // forward-pass threads (including the engine thread)
  int32_t block_size = 16;            // KV tokens per block
  DType k_type = DType::kF16;         // KV cache dtypes (f16, bf16, f32, q8_0)
  DType v_type = DType::kF16;
  uint64_t kv_memory_bytes = 0;       // KV budget; 0 = default (see plan_kv_memory)
  int32_t max_batched_tokens = 256;   // tokens computed per step over all requests (CPU default
                                      // by measurement: BENCHMARKS.md)
  int32_t max_seqs = 16;              // requests running at once
  int32_t max_model_len = 0;          // positions per request; 0 = min(trained context, 8192)
  bool enable_prefix_caching = true;
  std::string model_id;               // names the model in the prefix-cache namespace
  std::vector<int32_t> eog_ids;       // the model's end-of-generation token ids (stop tokens
                                      // of every request that does not set ignore_eos)
  // Speculative decoding by prompt lookup (ngram_lookup.h): each decoding request drafts up to
  // num_speculative_tokens next tokens from its own context, and one step verifies them all.
  // `speculative` is the server default; a request may turn it on or off for itself
  // (GenerationRequest::num_speculative_tokens, a prediction). No drafts are made in a step
  // while more than spec_max_running requests run (verification then costs more than it saves).
  // With a draft model (the Engine constructor's `draft`), a request whose lookup finds nothing
  // takes the draft model's draft (paused for a while where those are mostly rejected); its
  // K/V pool gets draft_kv_memory_bytes (0: the same default as the main pool's), in the K dtype.
  bool speculative = false;            // (the command line's default is on: --speculative ngram)
  uint64_t draft_kv_memory_bytes = 0;
  int32_t num_speculative_tokens = 8;  // 1..kMaxSpeculativeTokens
  NgramLookup ngram;
  int32_t spec_max_running = 16;
  // Whether drafts are cut to the tokens that pay for their rows at the measured step cost
  // (StepCost, DraftPolicy::length). Off: every draft is verified whole whatever a row costs,
  // so draft counts do not depend on timing (tests that count accepted drafts).
  bool spec_step_cost = true;
  bool check_invariants = false;      // debug: verify scheduler and KV bookkeeping every step
                                      // (O(requests + blocks) per step; a violation counts as
                                      // an internal error)

  // Throws triad::Error naming the bad field.
  void validate() const;
};

// How the KV budget is split across the model's layer groups.
struct KvMemoryPlan {
  uint64_t budget_bytes = 0;               // what was asked for (or the default)
  std::vector<int32_t> blocks_per_group;   // kv_layer_groups() order
  std::vector<int32_t> group_window;       // 0 = full attention
  std::vector<uint64_t> block_bytes;       // bytes per block of each group
  uint64_t total_bytes = 0;                // sum of blocks * block_bytes
  std::string describe() const;            // one line for the start-up log
};

// Default budget: a quarter of the memory the OS reports available, capped at what
// max_seqs full-length sequences could ever use (twice over, for the prefix cache), and at
// least enough for one full-length sequence. Sliding-window groups get only what their
// windows can ever hold (per sequence: window + one step's tokens, in blocks, plus one);
// the rest goes to full-attention layers. Throws if the budget cannot hold one block per group.
KvMemoryPlan plan_kv_memory(const ModelConfig& model, const EngineConfig& config);


}  // namespace triad::engine
