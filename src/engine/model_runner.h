// ModelRunner: turns a scheduler step into one ForwardBatch, runs the model over the paged KV
// storage, and returns what each sequence needs: the logits of the last row of a sequence that
// samples (with a draft: of its last 1 + n_draft rows, which verify the draft), of every row of one that asks for all of them (prompt logprobs), or the final hidden
// states of every row of an embedding sequence (pooled by the engine).
// Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "sched/scheduler.h"

namespace triad::engine {

// What a scheduled sequence wants from the step.
enum class RowOutput : uint8_t {
  kDefault,    // the last row's logits when it samples (needs_logits), else nothing
  kAllLogits,  // every row's logits (prompt logprobs)
  kHidden,     // every row's final hidden state (embeddings); never logits
};

class ModelRunner {
 public:
  ModelRunner(const Model& model, KvStorage& storage, ThreadPool& pool)
      : model_(model), storage_(storage), pool_(pool) {}

  // Runs every scheduled sequence of `out` (token ids and block tables come from `scheduler`).
  // wants[i] (kDefault when absent): what the i-th sequence needs.
  void execute(const sched::SchedulerOutput& out, const sched::Scheduler& scheduler,
               std::span<const RowOutput> wants = {});
  // The logit rows of the i-th scheduled sequence: `count` rows from `first` (0 when it needs
  // none), for positions n_computed + n_new - count ... n_computed + n_new - 1.
  struct Rows {
    size_t first = 0;
    int32_t count = 0;
  };
  Rows rows(size_t i) const { return rows_[i]; }
  const float* logits(size_t row) const {
    return logits_.data() + row * static_cast<size_t>(model_.config().n_vocab);
  }
  // The hidden rows of the i-th scheduled sequence (kHidden: all it computed, in order).
  Rows hidden_rows(size_t i) const { return hidden_rows_[i]; }
  const float* hidden(size_t row) const {
    return hidden_.data() + row * static_cast<size_t>(model_.config().n_embd);
  }

 private:
  const Model& model_;
  KvStorage& storage_;
  ThreadPool& pool_;
  ForwardScratch scratch_;
  std::vector<int32_t> tokens_, positions_;
  std::vector<BatchSeq> seqs_;
  std::vector<int64_t> logit_rows_, hidden_row_ids_;
  std::vector<Rows> rows_, hidden_rows_;
  std::vector<float> logits_, hidden_;
};

}  // namespace triad::engine
