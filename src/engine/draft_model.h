// Draft-model speculation: a small model of the same vocabulary (e.g. Qwen2.5-Coder-0.5B for
// Qwen2.5-Coder-1.5B) proposes each request's next k tokens greedily; the engine verifies them
// with the target model in one step (engine.cpp), so outputs are the target's own.
//
// The draft model keeps its own paged K/V cache (a KvCacheManager and KvStorage of its own, no
// prefix caching) with one sequence per request. Each propose() first brings every request's
// draft sequence up to its current tokens (a prompt, the first time, in chunks of at most
// `catch_up_chunk` tokens per call: until it is caught up the request gets no draft), then runs
// k - 1 one-token steps, batched over the requests: every draft position costs one row of the
// small model. Verification accepts a prefix of the draft, so the next call keeps the draft
// K/V of the positions whose tokens still match and recomputes from the first that differs.
// A request whose draft K/V (its tokens and the draft) does not fit the pool's free blocks gets
// no draft: its draft sequence is dropped before anything is computed for it, and it is listed
// in no_room() until the next call. Others are never evicted for it.
// Thread-safety: none; the engine thread owns it. propose() runs on the caller's pool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace triad::engine {

struct DraftModelConfig {
  int32_t block_size = 16;
  DType k_type = DType::kF16, v_type = DType::kF16;
  uint64_t kv_bytes = 0;         // the draft's K/V pool (> 0)
  int32_t catch_up_chunk = 256;  // prompt tokens computed per request per call at most
};

class DraftModel {
 public:
  // Throws triad::Error when the draft cannot serve `target` (another vocabulary size, an
  // encoder, sliding-window layers, whose released blocks a rollback could need).
  DraftModel(const Model& draft, const ModelConfig& target, DraftModelConfig config);
  ~DraftModel();

  struct Job {
    uint64_t id = 0;                   // the request
    std::span<const int32_t> tokens;   // its tokens so far (prompt and output)
    int32_t k = 0;                     // draft tokens wanted (>= 1)
  };
  // drafts[i] receives job i's draft (empty: none this time).
  void propose(std::span<const Job> jobs, std::vector<std::vector<int32_t>>& drafts, ThreadPool& pool);
  // Forgets a request's draft sequence (finished or cancelled); unknown ids are ignored.
  void release(uint64_t id);
  // The requests of the last propose() whose draft K/V did not fit.
  const std::vector<uint64_t>& no_room() const { return no_room_; }

  int64_t draft_tokens_computed() const { return rows_computed_; }  // rows the draft model ran
  const Model& model() const { return draft_; }

 private:
  struct Seq {
    std::vector<int32_t> seen;  // tokens whose K/V are in the draft cache, in order
  };
  // One forward over `rows` (sequence, first position, tokens), with the logits of each
  // sequence's last row into logits_ (row i for sequence i).
  struct Chunk {
    uint64_t id;
    int32_t pos0;
    std::vector<int32_t> tokens;
  };
  void forward(std::span<const Chunk> chunks, ThreadPool& pool);
  int32_t argmax(size_t row) const;

  const Model& draft_;
  DraftModelConfig config_;
  std::unique_ptr<KvStorage> storage_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unordered_map<uint64_t, Seq> seqs_;
  ForwardScratch scratch_;
  std::vector<int32_t> tokens_, positions_;
  std::vector<BatchSeq> batch_seqs_;
  std::vector<int64_t> logit_rows_;
  std::vector<float> logits_;
  std::vector<uint64_t> no_room_;
  int64_t rows_computed_ = 0;
};

}  // namespace triad::engine
