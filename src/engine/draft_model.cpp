#include "engine/draft_model.h"

#include <algorithm>

#include "base/error.h"

namespace triad::engine {

DraftModel::DraftModel(const Model& draft, const ModelConfig& target, DraftModelConfig config)
    : draft_(draft), config_(config) {
  const ModelConfig& c = draft.config();
  TRIAD_CHECK(c.has_logits() && c.causal, "the draft model (", c.arch_name, ") cannot generate text");
  TRIAD_CHECK(c.n_vocab == target.n_vocab, "the draft model has ", c.n_vocab, " tokens and the model ",
              target.n_vocab, ": a draft model needs the same vocabulary");
  TRIAD_CHECK(config_.catch_up_chunk >= 1, "draft model: catch_up_chunk must be >= 1");
  const std::vector<KvLayerGroup> groups = kv_layer_groups(c);
  uint64_t block_bytes = 0;
  for (const KvLayerGroup& g : groups) {
    TRIAD_CHECK(g.window == 0, "the draft model (", c.arch_name,
                ") has sliding-window layers, which a draft model cannot have here (a rejected draft rolls its "
                "K/V back over blocks such a layer releases)");
    block_bytes += KvStorage::token_bytes(c, g, config_.k_type, config_.v_type) * static_cast<uint64_t>(config_.block_size);
  }
  const uint64_t n_blocks = std::min<uint64_t>(config_.kv_bytes / std::max<uint64_t>(block_bytes, 1), 1u << 30);
  TRIAD_CHECK(n_blocks >= 2, "the draft model's K/V pool of ", config_.kv_bytes, " bytes holds fewer than 2 blocks of ",
              block_bytes, " bytes");
  KvStorageConfig sc;
  sc.block_size = config_.block_size;
  sc.k_type = config_.k_type;
  sc.v_type = config_.v_type;
  sc.blocks_per_group.assign(groups.size(), static_cast<int32_t>(n_blocks));
  storage_ = std::make_unique<KvStorage>(c, sc);
  kv::KvManagerConfig kc;
  kc.block_size = config_.block_size;
  for (size_t g = 0; g < groups.size(); ++g) kc.groups.push_back(kv::KvGroupSpec{0, static_cast<int32_t>(n_blocks)});
  kc.enable_prefix_caching = false;
  kc.cache_namespace = "draft";
  kv_ = std::make_unique<kv::KvCacheManager>(std::move(kc));
}

DraftModel::~DraftModel() = default;

void DraftModel::release(uint64_t id) {
  if (seqs_.erase(id) > 0) kv_->free_sequence(id);
}

int32_t DraftModel::argmax(size_t row) const {
  const auto n = static_cast<size_t>(draft_.config().n_vocab);
  const float* x = logits_.data() + row * n;
  return static_cast<int32_t>(std::max_element(x, x + n) - x);  // the first of equal maxima
}

void DraftModel::forward(std::span<const Chunk> chunks, ThreadPool& pool) {
  tokens_.clear();
  positions_.clear();
  batch_seqs_.clear();
  logit_rows_.clear();
  const int32_t n_groups = kv_->n_groups();
  for (const Chunk& c : chunks) {
    BatchSeq b;
    b.row_begin = static_cast<int64_t>(tokens_.size());
    b.n_rows = static_cast<int64_t>(c.tokens.size());
    b.pos0 = c.pos0;
    for (int32_t g = 0; g < n_groups; ++g) b.block_tables.push_back(kv_->block_table(c.id, g));
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      tokens_.push_back(c.tokens[i]);
      positions_.push_back(c.pos0 + static_cast<int32_t>(i));
    }
    logit_rows_.push_back(b.row_begin + b.n_rows - 1);
    batch_seqs_.push_back(std::move(b));
  }
  logits_.resize(chunks.size() * static_cast<size_t>(draft_.config().n_vocab));
  ForwardBatch fb;
  fb.tokens = tokens_;
  fb.positions = positions_;
  fb.seqs = batch_seqs_;
  fb.logit_rows = logit_rows_;
  draft_.forward_batch(fb, *storage_, scratch_, logits_.data(), pool);
  rows_computed_ += static_cast<int64_t>(tokens_.size());
}

void DraftModel::propose(std::span<const Job> jobs, std::vector<std::vector<int32_t>>& drafts, ThreadPool& pool) {
  drafts.assign(jobs.size(), {});
  no_room_.clear();
  // 1. Bring each draft sequence up to its request's tokens (keeping the K/V of the positions
  //    whose tokens still match), and the first draft token from its last row.
  std::vector<Chunk> chunks;
  std::vector<size_t> job_of;  // chunk -> job
  std::vector<bool> caught_up;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const auto n = static_cast<int32_t>(j.tokens.size());
    if (j.k <= 0 || n == 0) continue;
    auto it = seqs_.find(j.id);
    if (it == seqs_.end()) {
      kv_->begin_sequence(j.id, {}, "", false);
      it = seqs_.emplace(j.id, Seq{}).first;
    }
    Seq& s = it->second;
    const auto mismatch = std::mismatch(s.seen.begin(), s.seen.end(), j.tokens.begin(), j.tokens.end());
    int32_t common = static_cast<int32_t>(mismatch.first - s.seen.begin());
    common = std::min(common, n - 1);  // the last token is computed again for its logits
    const int32_t chunk = std::min(n - common, config_.catch_up_chunk);
    const bool whole = common + chunk == n;
    // Room for all its tokens and the k - 1 positions of the draft tokens computed, checked
    // before any chunk is computed (a prompt that can never fit is not recomputed every step).
    if (!kv_->can_allocate(j.id, common, n + j.k - 1)) {
      release(j.id);  // no room: no draft for it, and its blocks go back to the others
      no_room_.push_back(j.id);
      continue;
    }
    TRIAD_CHECK(kv_->allocate_slots(j.id, common, common + chunk + (whole ? j.k - 1 : 0)),
                "draft model: the K/V manager refused an allocation can_allocate accepted");
    s.seen.resize(static_cast<size_t>(common));
    chunks.push_back(Chunk{j.id, common, std::vector<int32_t>(j.tokens.begin() + common, j.tokens.begin() + common + chunk)});
    job_of.push_back(i);
    caught_up.push_back(whole);
  }
  if (chunks.empty()) return;
  forward(chunks, pool);
  std::vector<size_t> active;  // jobs drafting further
  for (size_t c = 0; c < chunks.size(); ++c) {
    Seq& s = seqs_.at(chunks[c].id);
    s.seen.insert(s.seen.end(), chunks[c].tokens.begin(), chunks[c].tokens.end());
    if (!caught_up[c]) continue;
    drafts[job_of[c]].push_back(argmax(c));
    if (jobs[job_of[c]].k > 1) active.push_back(job_of[c]);
  }
  // 2. One-token steps: draft token t from the row that computed draft token t - 1.
  for (int32_t t = 1; !active.empty(); ++t) {
    chunks.clear();
    for (size_t i : active) {
      const Job& j = jobs[i];
      chunks.push_back(Chunk{j.id, static_cast<int32_t>(j.tokens.size()) + t - 1, {drafts[i].back()}});
    }
    forward(chunks, pool);
    std::vector<size_t> next;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const size_t i = active[c];
      seqs_.at(jobs[i].id).seen.push_back(drafts[i].back());
      drafts[i].push_back(argmax(c));
      if (static_cast<int32_t>(drafts[i].size()) < jobs[i].k) next.push_back(i);
    }
    active.swap(next);
  }
}

}  // namespace triad::engine
