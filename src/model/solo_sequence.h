// SoloSequence: one sequence run through Model::forward_batch over a private paged K/V storage,
// for the tools that evaluate a text without the serving engine (perplexity, KL divergence,
// imatrix, eval-logits) and for tests. Its block table is the identity (block i holds positions
// [i * block_size, (i + 1) * block_size) of every layer group), so these tools and the serving
// engine share one forward pass and one attention kernel: a model is written once.
//
// K/V are stored in f32 unless asked otherwise: the evaluation tools measure weights, and an f32
// cache adds no rounding of its own (--cache-type-k/-v of the server choose the serving dtype).
// Thread-safety: not thread-safe (one forward at a time); the Model may be shared.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "tensor/dtype.h"

namespace triad {

class SoloSequence {
 public:
  // n_ctx: the most tokens the sequence may hold (> 0). Storage is reserved for all of them and
  // committed by the OS as it is written. Throws triad::Error on an unsupported dtype.
  SoloSequence(const Model& m, int32_t n_ctx, DType k_type = DType::kF32, DType v_type = DType::kF32);

  int32_t capacity() const { return capacity_; }
  int32_t size() const { return size_; }  // tokens held (positions 0 .. size-1)
  void clear() { size_ = 0; }
  uint64_t bytes() const { return storage_.total_bytes(); }

  // Runs `tokens` at positions size() .. size()+n-1, appends their K/V, and writes logits:
  // [n_vocab] for kLast, [n x n_vocab] for kAll. PRECONDITIONS (checked, triad::Error): every
  // id < n_vocab and the tokens fit in the capacity; on error nothing is appended.
  void forward(std::span<const int32_t> tokens, ForwardScratch& scratch, LogitsMode mode,
               float* logits, ThreadPool& pool);

 private:
  const Model& model_;
  int32_t capacity_;
  int32_t size_ = 0;
  KvStorage storage_;
  std::vector<int32_t> table_;  // identity block table, shared by every layer group
  std::vector<int32_t> positions_;
  std::vector<int64_t> logit_rows_;
};

}  // namespace triad
