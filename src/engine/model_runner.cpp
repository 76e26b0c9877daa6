#include "engine/model_runner.h"

#include "base/error.h"

namespace triad::engine {

void ModelRunner::execute(const sched::SchedulerOutput& out, const sched::Scheduler& scheduler,
                          std::span<const RowOutput> wants) {
  tokens_.clear();
  positions_.clear();
  seqs_.clear();
  logit_rows_.clear();
  hidden_row_ids_.clear();
  rows_.clear();
  hidden_rows_.clear();
  const int32_t n_groups = scheduler.kv().n_groups();
  for (size_t k = 0; k < out.seqs.size(); ++k) {
    const sched::ScheduledSeq& s = out.seqs[k];
    const sched::SchedRequest* r = scheduler.request(s.id);
    TRIAD_CHECK(r != nullptr, "runner: scheduled request ", s.id, " is unknown");
    TRIAD_CHECK(s.n_computed >= 0 && s.n_new > 0 && s.n_draft >= 0 && s.n_draft < s.n_new &&
                    static_cast<size_t>(s.n_draft) <= r->draft.size() &&
                    static_cast<size_t>(s.n_computed + s.n_new) <= r->tokens.size() + s.n_draft,
                "runner: bad step for request ", s.id);
    BatchSeq b;
    b.row_begin = static_cast<int64_t>(tokens_.size());
    b.n_rows = s.n_new;
    b.pos0 = s.n_computed;
    for (int32_t g = 0; g < n_groups; ++g) b.block_tables.push_back(scheduler.kv().block_table(s.id, g));
    const auto n_tokens = static_cast<int32_t>(r->tokens.size());
    for (int32_t i = 0; i < s.n_new; ++i) {
      const int32_t p = s.n_computed + i;
      tokens_.push_back(p < n_tokens ? r->tokens[p] : r->draft[p - n_tokens]);
      positions_.push_back(p);
    }
    const RowOutput want = k < wants.size() ? wants[k] : RowOutput::kDefault;
    Rows rows{logit_rows_.size(), 0}, hidden{hidden_row_ids_.size(), 0};
    if (want == RowOutput::kHidden) {
      for (int32_t i = 0; i < s.n_new; ++i) hidden_row_ids_.push_back(b.row_begin + i);
      hidden.count = s.n_new;
    } else if (want == RowOutput::kAllLogits) {
      for (int32_t i = 0; i < s.n_new; ++i) logit_rows_.push_back(b.row_begin + i);
      rows.count = s.n_new;
    } else if (s.needs_logits) {  // the last row, or with a draft the rows that verify it
      for (int32_t i = s.n_new - 1 - s.n_draft; i < s.n_new; ++i) logit_rows_.push_back(b.row_begin + i);
      rows.count = 1 + s.n_draft;
    }
    rows_.push_back(rows);
    hidden_rows_.push_back(hidden);
    seqs_.push_back(std::move(b));
  }
  logits_.resize(logit_rows_.size() * static_cast<size_t>(model_.config().n_vocab));
  hidden_.resize(hidden_row_ids_.size() * static_cast<size_t>(model_.config().n_embd));
  ForwardBatch fb;
  fb.tokens = tokens_;
  fb.positions = positions_;
  fb.seqs = seqs_;
  fb.logit_rows = logit_rows_;
  fb.hidden_rows = hidden_row_ids_;
  model_.forward_batch(fb, storage_, scratch_, logits_.data(), pool_, hidden_.data());
}

}  // namespace triad::engine
