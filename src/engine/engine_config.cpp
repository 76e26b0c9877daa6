#include "engine/engine_config.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "base/memory_info.h"
#include "model/kv_storage.h"

namespace triad::engine {

void EngineConfig::validate() const {
  TRIAD_CHECK(threads >= 1 && threads <= 1024, "threads must be in 1..1024, got ", threads);
  TRIAD_CHECK(block_size >= 1 && block_size <= 1024, "--kv-block-size must be in 1..1024, got ", block_size);
  TRIAD_CHECK(max_batched_tokens >= 1 && max_batched_tokens <= (1 << 20),
              "--max-batched-tokens must be in 1..1048576, got ", max_batched_tokens);
  TRIAD_CHECK(max_seqs >= 1 && max_seqs <= 4096, "--max-seqs must be in 1..4096, got ", max_seqs);
  TRIAD_CHECK(max_model_len >= 0 && max_model_len <= (1 << 24), "context length must be in 0..16777216, got ",
              max_model_len);
  TRIAD_CHECK(num_speculative_tokens >= 1 && num_speculative_tokens <= kMaxSpeculativeTokens,
              "--num-speculative-tokens must be in 1..", kMaxSpeculativeTokens, ", got ", num_speculative_tokens);
  TRIAD_CHECK(ngram.min_n >= 1 && ngram.max_n >= ngram.min_n && ngram.max_n <= 64,
              "--spec-ngram-min/-max must satisfy 1 <= min <= max <= 64, got ", ngram.min_n, " and ", ngram.max_n);
  TRIAD_CHECK(spec_max_running >= 0, "--spec-max-running must be >= 0, got ", spec_max_running);
}

std::string KvMemoryPlan::describe() const {
  std::ostringstream o;
  o << "KV cache " << total_bytes / (1 << 20) << " MiB:";
  for (size_t g = 0; g < blocks_per_group.size(); ++g) {
    o << (g ? "," : "") << " " << blocks_per_group[g] << " blocks of "
      << block_bytes[g] / 1024 << " KiB for "
      << (group_window[g] ? "sliding-window (" + std::to_string(group_window[g]) + ")" : std::string("full-attention"))
      << " layers";
  }
  return o.str();
}

KvMemoryPlan plan_kv_memory(const ModelConfig& model, const EngineConfig& cfg) {
  const std::vector<KvLayerGroup> groups = kv_layer_groups(model);
  KvMemoryPlan plan;
  const uint64_t bs = static_cast<uint64_t>(cfg.block_size);
  const uint64_t max_len = static_cast<uint64_t>(cfg.max_model_len);
  const uint64_t blocks_per_seq_full = (max_len + bs - 1) / bs + 1;
  std::vector<uint64_t> cap(groups.size());  // most blocks a group could ever use
  uint64_t per_block_all = 0, need_one_seq = 0, need_all = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const uint64_t bb = KvStorage::token_bytes(model, groups[g], cfg.k_type, cfg.v_type) * bs;
    plan.block_bytes.push_back(bb);
    plan.group_window.push_back(groups[g].window);
    uint64_t per_seq = blocks_per_seq_full;
    if (groups[g].window > 0) {
      const uint64_t w = static_cast<uint64_t>(groups[g].window) + static_cast<uint64_t>(cfg.max_batched_tokens);
      per_seq = std::min(per_seq, (w + bs - 1) / bs + 1);
    }
    cap[g] = per_seq * static_cast<uint64_t>(cfg.max_seqs);
    per_block_all += bb;
    need_one_seq += per_seq * bb;
    need_all += cap[g] * bb;
  }
  uint64_t budget = cfg.kv_memory_bytes;
  if (budget == 0) {
    const uint64_t avail = available_memory_bytes();
    budget = avail ? avail / 4 : (1ull << 30);
    budget = std::min(budget, 2 * need_all);
    budget = std::max(budget, need_one_seq);
  }
  plan.budget_bytes = budget;
  TRIAD_CHECK(budget >= per_block_all, "the KV budget of ", budget, " bytes cannot hold one block (",
              per_block_all, " bytes over all layers)");
  // Window groups first get what they can ever use (or their equal share, if smaller); the
  // full-attention groups split the rest equally in blocks.
  const uint64_t equal = budget / per_block_all;
  std::vector<uint64_t> nb(groups.size(), 0);
  uint64_t left = budget, full_bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].window > 0) {
      nb[g] = std::min(equal, cap[g]);
      left -= nb[g] * plan.block_bytes[g];
    } else {
      full_bytes += plan.block_bytes[g];
    }
  }
  for (size_t g = 0; g < groups.size(); ++g)
    if (groups[g].window == 0) nb[g] = left / full_bytes;
  // Windows-only models (Mistral-style) may spend the rest on their window groups: more cached
  // prefix blocks.
  if (full_bytes == 0)
    for (size_t g = 0; g < groups.size(); ++g) nb[g] = equal;
  for (size_t g = 0; g < groups.size(); ++g) {
    nb[g] = std::min<uint64_t>(nb[g], 1u << 30);
    TRIAD_CHECK(nb[g] >= 1, "the KV budget leaves no block for layer group ", g);
    plan.blocks_per_group.push_back(static_cast<int32_t>(nb[g]));
    plan.total_bytes += nb[g] * plan.block_bytes[g];
  }
  return plan;
}

}  // namespace triad::engine
