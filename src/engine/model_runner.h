// ModelRunner: turns a scheduler step into one ForwardBatch, runs the model over the paged KV
// storage, and returns the logits of the rows that need them.
// Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
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
  // Afterwards logits(i) is the row for the i-th scheduled seq that needs logits.
  void execute(const sched::SchedulerOutput& out, const sched::Scheduler& scheduler);
  const float* logits(size_t i) const {
    return logits_.data() + i * static_cast<size_t>(model_.config().n_vocab);
  }

 private:
  const Model& model_;
  KvStorage& storage_;
  ThreadPool& pool_;
  ForwardScratch scratch_;
  std::vector<int32_t> tokens_, positions_;
  std::vector<BatchSeq> seqs_;
  std::vector<int64_t> logit_rows_;
  std::vector<float> logits_;
};

}  // namespace triad::engine
