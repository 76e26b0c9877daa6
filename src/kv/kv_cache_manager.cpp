// KvCacheManager: per-sequence block tables over per-group BlockPools, prefix-cache lookups with
// multi-group hit validation, sliding-window release, and all-or-nothing allocation.
#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <limits>

#include "base/error.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace triad::kv {
namespace {

const KvManagerConfig& validated(const KvManagerConfig& c) {
  TRIAD_CHECK(c.block_size > 0, "KvManagerConfig: block_size must be > 0, got ", c.block_size);
  TRIAD_CHECK(!c.groups.empty(), "KvManagerConfig: at least one layer group is required");
  for (size_t g = 0; g < c.groups.size(); ++g) {
    TRIAD_CHECK(c.groups[g].window >= 0, "KvManagerConfig: group ", g,
                " has a negative sliding window ", c.groups[g].window);
    TRIAD_CHECK(c.groups[g].n_blocks > 0, "KvManagerConfig: group ", g, " needs n_blocks > 0, got ",
                c.groups[g].n_blocks);
  }
  return c;
}

// Blocks covering positions [0, n_tokens).
int64_t blocks_for(int64_t n_tokens, int32_t block_size) {
  return (n_tokens + block_size - 1) / block_size;
}

}  // namespace

KvCacheManager::KvCacheManager(KvManagerConfig config) : config_(std::move(config)) {
  validated(config_);
  pools_.reserve(config_.groups.size());
  for (const KvGroupSpec& g : config_.groups) pools_.emplace_back(g.n_blocks);
}

KvCacheManager::KvCacheManager(KvCacheManager&&) noexcept = default;
KvCacheManager& KvCacheManager::operator=(KvCacheManager&&) noexcept = default;
KvCacheManager::~KvCacheManager() = default;

int32_t KvCacheManager::n_groups() const {
  return static_cast<int32_t>(config_.groups.size());
}

void KvCacheManager::check_group(int32_t group, const char* caller) const {
  TRIAD_CHECK(group >= 0 && group < n_groups(), "KvCacheManager::", caller, ": group ", group,
              " is outside [0, ", n_groups(), ")");
}

const KvCacheManager::Sequence& KvCacheManager::sequence(SeqId id, const char* caller) const {
  auto it = seqs_.find(id);
  TRIAD_CHECK(it != seqs_.end(), "KvCacheManager::", caller, ": unknown sequence ", id);
  return it->second;
}

KvCacheManager::Sequence& KvCacheManager::sequence(SeqId id, const char* caller) {
  return const_cast<Sequence&>(static_cast<const KvCacheManager*>(this)->sequence(id, caller));
}

int32_t KvCacheManager::first_visible_block(int32_t group, int64_t n) const {
  const int64_t window = config_.groups[static_cast<size_t>(group)].window;
  if (window == 0) return 0;
  // Block i is invisible to a query at n iff its last position (i+1)*bs - 1 <= n - window.
  const int64_t x = n - window + 1;
  return x <= 0 ? 0 : static_cast<int32_t>(x / config_.block_size);
}

int32_t KvCacheManager::begin_sequence(SeqId id, std::span<const int32_t> tokens,
                                       const std::string& cache_salt, bool read_cache) {
  TRIAD_CHECK(!seqs_.contains(id), "KvCacheManager::begin_sequence: sequence ", id,
              " already exists");
  TRIAD_CHECK(tokens.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "KvCacheManager::begin_sequence: ", tokens.size(), " tokens is too many");
  const int32_t G = n_groups();
  const int32_t bs = config_.block_size;
  Sequence s;
  s.tables.resize(static_cast<size_t>(G));
  s.n_released.assign(static_cast<size_t>(G), 0);
  if (!config_.enable_prefix_caching) {
    seqs_.emplace(id, std::move(s));
    return 0;
  }
  s.last_key = root_hash(config_.cache_namespace, cache_salt);
  if (read_cache) prefix_queries_ += static_cast<int64_t>(tokens.size());

  // Keys and cached blocks of the candidate blocks 0..limit-1. The last token is never covered,
  // and a miss in a full group caps the hit there (it needs every block before k).
  const int32_t n = static_cast<int32_t>(tokens.size());
  int32_t limit = n == 0 || !read_cache ? 0 : (n - 1) / bs;
  std::vector<BlockHash> keys;
  std::vector<std::vector<BlockId>> found(static_cast<size_t>(G));
  for (int32_t i = 0; i < limit; ++i) {
    keys.push_back(
        block_hash(i == 0 ? s.last_key : keys.back(),
                   tokens.subspan(static_cast<size_t>(i) * bs, static_cast<size_t>(bs))));
    for (int32_t g = 0; g < G; ++g) {
      const BlockId b = pools_[g].lookup(keys.back());
      found[g].push_back(b);
      if (b == kNoBlock && config_.groups[g].window == 0) limit = i;
    }
  }

  // Largest k <= limit valid in every window group: blocks [first_visible(k*bs), k) cached.
  // run[g][i] = cached blocks in a row ending at i.
  std::vector<std::vector<int32_t>> run(static_cast<size_t>(G));
  for (int32_t g = 0; g < G; ++g) {
    run[g].resize(static_cast<size_t>(limit));
    for (int32_t i = 0; i < limit; ++i)
      run[g][i] = found[g][i] == kNoBlock ? 0 : (i > 0 ? run[g][i - 1] : 0) + 1;
  }
  int32_t k = limit;
  for (; k > 0; --k) {
    bool ok = true;
    for (int32_t g = 0; g < G && ok; ++g) {
      const int32_t first = std::min(first_visible_block(g, static_cast<int64_t>(k) * bs), k);
      ok = run[g][k - 1] >= k - first;
    }
    if (ok) break;
  }

  for (int32_t g = 0; g < G; ++g) {
    const int32_t first = std::min(first_visible_block(g, static_cast<int64_t>(k) * bs), k);
    s.tables[g].assign(static_cast<size_t>(k), kNoBlock);
    s.n_released[g] = first;
    for (int32_t i = first; i < k; ++i) {
      pools_[g].ref(found[g][i]);
      s.tables[g][i] = found[g][i];
    }
  }
  s.n_tokens = k * bs;
  s.n_hashed = k;
  if (k > 0) s.last_key = keys[static_cast<size_t>(k) - 1];
  prefix_hits_ += static_cast<int64_t>(k) * bs;
  seqs_.emplace(id, std::move(s));
  return k * bs;
}

bool KvCacheManager::plan_allocation(const Sequence& s, int32_t n_computed, int32_t n_tokens,
                                     std::vector<GroupPlan>& plan) const {
  TRIAD_CHECK(n_computed >= 0 && n_tokens >= n_computed, "KvCacheManager: need 0 <= n_computed (",
              n_computed, ") <= n_tokens (", n_tokens, ")");
  TRIAD_CHECK(n_computed <= s.n_tokens, "KvCacheManager: n_computed ", n_computed,
              " is beyond the ", s.n_tokens, " positions the sequence has blocks for");
  const int32_t G = n_groups();
  plan.assign(static_cast<size_t>(G), GroupPlan{});
  bool fits = true;
  for (int32_t g = 0; g < G; ++g) {
    const std::vector<BlockId>& table = s.tables[g];
    const auto cur = static_cast<int32_t>(table.size());
    GroupPlan& p = plan[g];
    p.add =
        static_cast<int32_t>(std::max<int64_t>(0, blocks_for(n_tokens, config_.block_size) - cur));
    const int32_t first = first_visible_block(g, n_computed);
    TRIAD_CHECK(first >= s.n_released[g], "KvCacheManager: n_computed ", n_computed,
                " needs window blocks of group ", g, " that were already released");
    p.release_end = std::min(first, cur);
    int32_t freed = 0;
    for (int32_t i = s.n_released[g]; i < p.release_end; ++i)
      if (pools_[g].ref_count(table[i]) == 1) ++freed;
    if (p.add > pools_[g].num_free() + freed) fits = false;
  }
  return fits;
}

bool KvCacheManager::allocate_slots(SeqId id, int32_t n_computed, int32_t n_tokens) {
  Sequence& s = sequence(id, "allocate_slots");
  std::vector<GroupPlan> plan;
  if (!plan_allocation(s, n_computed, n_tokens, plan)) return false;
  for (int32_t g = 0; g < n_groups(); ++g) {
    std::vector<BlockId>& table = s.tables[g];
    for (int32_t i = s.n_released[g]; i < plan[g].release_end; ++i) {
      pools_[g].unref(table[i]);
      table[i] = kNoBlock;
    }
    s.n_released[g] = plan[g].release_end;
    for (int32_t j = 0; j < plan[g].add; ++j) table.push_back(pools_[g].take());
  }
  s.n_tokens = std::max(s.n_tokens, n_tokens);
  return true;
}

bool KvCacheManager::can_allocate(SeqId id, int32_t n_computed, int32_t n_tokens) const {
  std::vector<GroupPlan> plan;
  return plan_allocation(sequence(id, "can_allocate"), n_computed, n_tokens, plan);
}

int32_t KvCacheManager::blocks_needed(SeqId id, int32_t n_computed, int32_t n_tokens) const {
  TRIAD_CHECK(n_computed >= 0 && n_tokens >= n_computed,
              "KvCacheManager::blocks_needed: need 0 <= n_computed (", n_computed,
              ") <= n_tokens (", n_tokens, ")");
  const int64_t want = blocks_for(n_tokens, config_.block_size);
  auto it = seqs_.find(id);
  int64_t total = 0;
  for (int32_t g = 0; g < n_groups(); ++g) {
    const int64_t cur = it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.tables[g].size());
    total += std::max<int64_t>(0, want - cur);
  }
  return static_cast<int32_t>(std::min<int64_t>(total, std::numeric_limits<int32_t>::max()));
}

void KvCacheManager::commit_full_blocks(SeqId id, std::span<const int32_t> tokens,
                                        int32_t n_computed) {
  Sequence& s = sequence(id, "commit_full_blocks");
  TRIAD_CHECK(n_computed >= 0 && static_cast<size_t>(n_computed) <= tokens.size(),
              "KvCacheManager::commit_full_blocks: n_computed ", n_computed, " with ",
              tokens.size(), " tokens");
  TRIAD_CHECK(n_computed <= s.n_tokens, "KvCacheManager::commit_full_blocks: n_computed ",
              n_computed, " is beyond the ", s.n_tokens, " positions sequence ", id,
              " has blocks for");
  if (!config_.enable_prefix_caching) return;
  const int32_t bs = config_.block_size;
  const int32_t n_full = n_computed / bs;
  for (int32_t i = s.n_hashed; i < n_full; ++i) {
    const BlockHash key = block_hash(
        s.last_key, tokens.subspan(static_cast<size_t>(i) * bs, static_cast<size_t>(bs)));
    for (int32_t g = 0; g < n_groups(); ++g) {
      const BlockId b = s.tables[g][i];
      if (b != kNoBlock && !pools_[g].is_cached(b)) pools_[g].register_block(b, key);
    }
    s.last_key = key;
    s.n_hashed = i + 1;
  }
}

void KvCacheManager::free_sequence(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  for (int32_t g = 0; g < n_groups(); ++g) {
    const std::vector<BlockId>& table = it->second.tables[g];
    for (auto b = table.rbegin(); b != table.rend(); ++b)
      if (*b != kNoBlock) pools_[g].unref(*b);
  }
  seqs_.erase(it);
}

std::span<const BlockId> KvCacheManager::block_table(SeqId id, int32_t group) const {
  check_group(group, "block_table");
  return sequence(id, "block_table").tables[group];
}

bool KvCacheManager::has_sequence(SeqId id) const {
  return seqs_.contains(id);
}

int32_t KvCacheManager::num_free_blocks(int32_t group) const {
  check_group(group, "num_free_blocks");
  return pools_[group].num_free();
}

KvManagerStats KvCacheManager::stats() const {
  KvManagerStats st;
  for (const BlockPool& p : pools_) {
    st.blocks_total += p.size();
    st.blocks_free += p.num_free();
    st.blocks_cached += p.num_cached_free();
  }
  st.blocks_used = st.blocks_total - st.blocks_free;
  st.prefix_queries = prefix_queries_;
  st.prefix_hits = prefix_hits_;
  return st;
}

void KvCacheManager::reset_prefix_cache() {
  for (BlockPool& p : pools_) p.drop_free_cached();
}

int32_t KvCacheManager::ref_count(int32_t group, BlockId block) const {
  check_group(group, "ref_count");
  return pools_[group].ref_count(block);
}

bool KvCacheManager::is_cached(int32_t group, BlockId block) const {
  check_group(group, "is_cached");
  return pools_[group].is_cached(block);
}

void KvCacheManager::check_invariants() const {
  const int32_t bs = config_.block_size;
  for (int32_t g = 0; g < n_groups(); ++g) {
    const BlockPool& pool = pools_[g];
    pool.check_invariants();
    std::vector<int32_t> refs(static_cast<size_t>(pool.size()), 0);
    std::vector<SeqId> last_seen(static_cast<size_t>(pool.size()), 0);
    std::vector<bool> seen(static_cast<size_t>(pool.size()), false);
    for (const auto& [id, s] : seqs_) {
      const std::vector<BlockId>& table = s.tables[g];
      TRIAD_CHECK(static_cast<int64_t>(table.size()) == blocks_for(s.n_tokens, bs),
                  "KvCacheManager: sequence ", id, " group ", g, " has ", table.size(),
                  " entries for ", s.n_tokens, " tokens");
      TRIAD_CHECK(s.n_hashed * static_cast<int64_t>(bs) <= s.n_tokens, "KvCacheManager: sequence ",
                  id, " hashed ", s.n_hashed, " blocks of ", s.n_tokens, " tokens");
      for (size_t i = 0; i < table.size(); ++i) {
        const BlockId b = table[i];
        const bool released = static_cast<int32_t>(i) < s.n_released[g];
        TRIAD_CHECK(
            released == (b == kNoBlock), "KvCacheManager: sequence ", id, " group ", g, " entry ",
            i, (released ? " is released but holds a block" : " is kNoBlock but not released"));
        if (b == kNoBlock) continue;
        TRIAD_CHECK(b >= 0 && b < pool.size(), "KvCacheManager: bad block id ", b);
        TRIAD_CHECK(!(seen[b] && last_seen[b] == id), "KvCacheManager: block ", b, " of group ", g,
                    " appears twice in sequence ", id);
        seen[b] = true;
        last_seen[b] = id;
        ++refs[b];
      }
    }
    for (BlockId b = 0; b < pool.size(); ++b)
      TRIAD_CHECK(refs[b] == pool.ref_count(b), "KvCacheManager: block ", b, " of group ", g,
                  " has ref count ", pool.ref_count(b), " but ", refs[b], " table entries");
  }
}

}  // namespace triad::kv
