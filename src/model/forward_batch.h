// ForwardBatch: one engine step as plain data - the flattened tokens of every scheduled
// sequence (prefill chunks and decodes mixed), their positions, each sequence's block tables,
// and which rows need logits. Non-owning: every span points into the runner's buffers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace triad {

struct BatchSeq {
  int64_t row_begin = 0;   // first row of this sequence in the flattened batch
  int64_t n_rows = 0;      // tokens computed this step (positions pos0 .. pos0+n_rows-1)
  int32_t pos0 = 0;        // position of the first of them (tokens already in the cache)
  // Block table per KV layer group (KvStorage::groups() order); entry i covers positions
  // [i*block_size, (i+1)*block_size), and covers at least pos0 + n_rows positions.
  std::vector<std::span<const int32_t>> block_tables;
};

struct ForwardBatch {
  std::span<const int32_t> tokens;      // [n_rows] token ids
  std::span<const int32_t> positions;   // [n_rows] position of each row in its sequence
  std::span<const BatchSeq> seqs;       // rows grouped by sequence, in row order
  std::span<const int64_t> logit_rows;  // rows whose logits are wanted, in output order
  std::span<const int64_t> hidden_rows; // rows whose final hidden states are wanted (embeddings)
};

}  // namespace triad
