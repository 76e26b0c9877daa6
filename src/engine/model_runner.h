// ModelRunner: turns a scheduler step into one ForwardBatch, runs the model over the paged KV
// storage, and returns the logits of the rows that need them: the last row of a sequence that
// samples, and every row of a sequence that asks for all of them (prompt logprobs).
// Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/model.h"
#include "sched/scheduler.h"

namespace triad::engine {

class ModelRunner {
 public:
  ModelRunner(const Model& model, KvStorage& storage, ThreadPool& pool)
      : model_(model), storage_(storage), pool_(pool) {}

  // Runs every scheduled sequence of `out` (token ids and block tables come from `scheduler`).
  // all_rows[i] (when not empty): the i-th sequence wants logits for each row it computes.
  void execute(const sched::SchedulerOutput& out, const sched::Scheduler& scheduler,
               std::span<const uint8_t> all_rows = {});
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

 private:
  const Model& model_;
  KvStorage& storage_;
  ThreadPool& pool_;
  ForwardScratch scratch_;
  std::vector<int32_t> tokens_, positions_;
  std::vector<BatchSeq> seqs_;
  std::vector<int64_t> logit_rows_;
  std::vector<Rows> rows_;
  std::vector<float> logits_;
};

}  // namespace triad::engine
