#include "model/solo_sequence.h"

#include <numeric>

#include "base/error.h"

namespace triad {
namespace {

constexpr int32_t kBlockSize = 16;

KvStorageConfig solo_config(const Model& m, int32_t n_ctx, DType k_type, DType v_type) {
  TRIAD_CHECK(n_ctx > 0, "sequence context must be positive, got ", n_ctx);
  KvStorageConfig kc;
  kc.block_size = kBlockSize;
  kc.k_type = k_type;
  kc.v_type = v_type;
  const int32_t blocks = (n_ctx + kBlockSize - 1) / kBlockSize;
  kc.blocks_per_group.assign(kv_layer_groups(m.config()).size(), blocks);
  return kc;
}

}  // namespace

SoloSequence::SoloSequence(const Model& m, int32_t n_ctx, DType k_type, DType v_type)
    : model_(m), capacity_(n_ctx), storage_(m.config(), solo_config(m, n_ctx, k_type, v_type)) {
  table_.resize(static_cast<size_t>((n_ctx + kBlockSize - 1) / kBlockSize));
  std::iota(table_.begin(), table_.end(), 0);
}

void SoloSequence::forward(std::span<const int32_t> tokens, ForwardScratch& scratch,
                           LogitsMode mode, float* logits, ThreadPool& pool) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (n == 0) return;
  TRIAD_CHECK(static_cast<int64_t>(tokens.size()) <= capacity_ - size_, "context full: ", size_, " + ",
              tokens.size(), " tokens exceed the ", capacity_, "-token context");
  positions_.resize(static_cast<size_t>(n));
  std::iota(positions_.begin(), positions_.end(), size_);
  if (mode == LogitsMode::kAll) {
    logit_rows_.resize(static_cast<size_t>(n));
    std::iota(logit_rows_.begin(), logit_rows_.end(), int64_t{0});
  } else {
    logit_rows_.assign(1, n - 1);
  }
  // Only the blocks that cover the sequence so far: forward_batch checks the table covers it.
  const size_t used = static_cast<size_t>((size_ + n + kBlockSize - 1) / kBlockSize);
  BatchSeq seq;
  seq.row_begin = 0;
  seq.n_rows = n;
  seq.pos0 = size_;
  seq.block_tables.assign(storage_.groups().size(), std::span<const int32_t>(table_.data(), used));
  ForwardBatch batch;
  batch.tokens = tokens;
  batch.positions = positions_;
  batch.seqs = std::span<const BatchSeq>(&seq, 1);
  batch.logit_rows = logit_rows_;
  model_.forward_batch(batch, storage_, scratch, logits, pool);  // throws before writing on bad ids
  size_ += n;
}

}  // namespace triad
