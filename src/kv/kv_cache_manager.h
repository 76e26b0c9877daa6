// KV-cache block bookkeeping: a pool of fixed-size blocks per layer group, per-sequence block
// tables, reference counts, automatic prefix caching with chained SHA-256 block hashes, and
// LRU eviction of unreferenced cached blocks.
//
// Pure bookkeeping over integer block ids: this module owns no K/V bytes (KvStorage does) and
// knows nothing of models or kernels, so it is unit-tested with fake sequences.
//
// Layer groups: layers that attend the same way share a group (full attention, or one sliding
// window size). Each group has its own pool of `groups[g].n_blocks` blocks and each sequence
// has one block table per group. In a sliding-window group, blocks that fall wholly outside the
// window of every future query are released as the sequence grows (their table entry becomes
// kNoBlock), so such a group holds at most ceil(window / block_size) + 1 blocks per sequence
// after a one-token step (a step computing c tokens needs up to ceil((window + c - 1) /
// block_size) + 1 while it runs). Block i (last position (i+1)*bs - 1) is released once the
// step's first computed position n_computed satisfies (i+1)*bs - 1 <= n_computed - window.
//
// Properties:
//  - Allocation is O(1) per block; all-or-nothing per call (a failed allocate_slots changes
//    nothing).
//  - A block is "cached" when it is full and its hash is registered; a cached block whose
//    reference count drops to 0 stays in the prefix cache, in the free queue, until it is
//    evicted (reused for new data). Cached free blocks are evicted in LRU order: least recently
//    freed first; free blocks that hold no cached data are always reused before any cached one.
//    free_sequence() releases a sequence's blocks tail first, so its last block is evicted
//    first. A block whose key is already registered (two sequences computed the same prefix at
//    once) stays unregistered and private to its sequence.
//  - Block hash = SHA-256(parent hash || salt-free token ids of the block); the root parent is
//    SHA-256(config.cache_namespace || request cache salt), so different models, KV dtypes or
//    salts never share blocks. Exact length-prefixed encodings: kv/block_hash.h.
//  - Multi-group prefix hits: a hit of k blocks needs, in a full group, blocks 0..k-1 cached;
//    in a window group only the blocks a query at position k*bs can see (the others stay
//    kNoBlock). The largest k valid in every group wins.
//  - The last prompt token is never served from the cache (it must be computed for logits).
//
// Thread-safety: none; the scheduler owns it and calls it from the engine thread only.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace triad::kv {

class BlockPool;

using BlockId = int32_t;
constexpr BlockId kNoBlock = -1;
using SeqId = uint64_t;
using BlockHash = std::array<uint8_t, 32>;  // SHA-256 digest

struct KvGroupSpec {
  int32_t window = 0;      // sliding window in tokens (query at p sees keys in (p-window, p]);
                           // 0 = full causal attention
  int32_t n_blocks = 0;    // blocks in this group's pool (> 0)
};

struct KvManagerConfig {
  int32_t block_size = 16;             // tokens per block (> 0)
  std::vector<KvGroupSpec> groups;     // at least one
  bool enable_prefix_caching = true;
  std::string cache_namespace;         // model identity + KV dtypes (hashed into every key)
};

struct KvManagerStats {
  int64_t blocks_total = 0;        // over all groups
  int64_t blocks_used = 0;         // referenced by at least one sequence
  int64_t blocks_free = 0;         // not referenced (includes cached ones)
  int64_t blocks_cached = 0;       // free but still holding a registered prefix block
  int64_t prefix_queries = 0;      // tokens looked up in begin_sequence (prompt lengths)
  int64_t prefix_hits = 0;         // tokens served from the cache
};

class KvCacheManager {
 public:
  explicit KvCacheManager(KvManagerConfig config);  // throws triad::Error on a bad config

  const KvManagerConfig& config() const { return config_; }
  int32_t block_size() const { return config_.block_size; }
  int32_t n_groups() const;

  // Starts tracking sequence `id` (must be new: a duplicate throws) and attaches the longest run of cached full
  // blocks matching a prefix of `tokens`, never covering the last token: returns the number of
  // cached tokens (a multiple of block_size, < tokens.size()). With caching off returns 0.
  // For a sliding-window group only the blocks inside the window of the first uncached token
  // need to be cached. Counts the query and hits in stats (with caching on). The caller then
  // computes from the returned position: allocate_slots(id, hit, ...). With read_cache false
  // nothing is attached (the sequence computes every position, e.g. for prompt logprobs), but
  // its blocks are still registered for others as they fill.
  int32_t begin_sequence(SeqId id, std::span<const int32_t> tokens, const std::string& cache_salt,
                         bool read_cache = true);

  // Makes the block tables of `id` cover positions [0, n_tokens). First releases window-group
  // blocks outside the window of position `n_computed` (the first token this step computes;
  // positions < n_computed are already in the cache). Evicts unreferenced cached blocks (LRU) as
  // needed. Returns false and changes nothing if any group lacks free blocks (blocks the call
  // would release count as free). Tables never shrink: n_tokens below the covered length only
  // releases. PRECONDITIONS (checked, triad::Error): id is known; 0 <= n_computed <= n_tokens;
  // n_computed <= the positions the tables already cover; no window block the query at
  // n_computed can see was released by an earlier call (n_computed never moves back over them).
  bool allocate_slots(SeqId id, int32_t n_computed, int32_t n_tokens);

  // After a step computed K/V up to n_computed tokens, registers every newly full block of `id`
  // in the prefix cache. `tokens` holds the sequence's token ids, at least n_computed of them.
  // No-op with caching off. PRECONDITIONS (checked): id is known; 0 <= n_computed <=
  // tokens.size(); n_computed <= the positions the tables cover.
  void commit_full_blocks(SeqId id, std::span<const int32_t> tokens, int32_t n_computed);

  // Releases every block of `id` (tail first) and forgets the sequence. Unknown id: no-op.
  void free_sequence(SeqId id);

  // Block table of `id` for group g: entry i covers positions [i*bs, (i+1)*bs); released
  // window blocks are kNoBlock. Valid until the next mutating call. Unknown id or group throws.
  std::span<const BlockId> block_table(SeqId id, int32_t group) const;

  bool has_sequence(SeqId id) const;
  int32_t num_free_blocks(int32_t group) const;  // allocatable now (free incl. cached)
  // Blocks that allocate_slots(id, n_computed, n_tokens) would need to take from the pool,
  // summed over groups (new table entries; window blocks it would release are not subtracted).
  // An unknown id counts as a new sequence with no cached prefix.
  int32_t blocks_needed(SeqId id, int32_t n_computed, int32_t n_tokens) const;
  // Whether allocate_slots(id, n_computed, n_tokens) would succeed now (same checks and throws).
  bool can_allocate(SeqId id, int32_t n_computed, int32_t n_tokens) const;
  KvManagerStats stats() const;
  // Drops every cached-but-unreferenced block from the prefix cache (e.g. on model reload).
  void reset_prefix_cache();

  // Introspection for tests and debugging.
  int32_t ref_count(int32_t group, BlockId block) const;  // sequences' entries pointing at it
  bool is_cached(int32_t group, BlockId block) const;     // registered in the prefix cache
  // Checks every internal invariant (reference counts equal block-table entries, free queue
  // holds exactly the unreferenced blocks, no block twice in one table, cache map consistent);
  // throws triad::Error naming the first violation. O(blocks + table entries).
  void check_invariants() const;

  KvCacheManager(KvCacheManager&&) noexcept;
  KvCacheManager& operator=(KvCacheManager&&) noexcept;
  ~KvCacheManager();

 private:
  struct Sequence {
    std::vector<std::vector<BlockId>> tables;  // per group; entry i covers [i*bs, (i+1)*bs)
    std::vector<int32_t> n_released;  // per group: leading entries released (all kNoBlock)
    int32_t n_tokens = 0;             // positions [0, n_tokens) have blocks
    int32_t n_hashed = 0;             // leading full blocks whose key chain is known
    BlockHash last_key{};             // key of block n_hashed-1, or the root key
  };
  struct GroupPlan {
    int32_t release_end = 0;  // release entries [n_released, release_end)
    int32_t add = 0;          // blocks to take from the pool
  };

  // The sequence `id`; throws naming `caller` when unknown.
  const Sequence& sequence(SeqId id, const char* caller) const;
  Sequence& sequence(SeqId id, const char* caller);
  // First block index a query at position n can see in group g (0 for full groups).
  int32_t first_visible_block(int32_t group, int64_t n) const;
  // Validates arguments (throws on misuse) and fills plan[g]; returns whether every group has
  // enough free blocks.
  bool plan_allocation(const Sequence& s, int32_t n_computed, int32_t n_tokens,
                       std::vector<GroupPlan>& plan) const;
  void check_group(int32_t group, const char* caller) const;

  KvManagerConfig config_;
  std::vector<BlockPool> pools_;  // one per group
  std::unordered_map<SeqId, Sequence> seqs_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
};

}  // namespace triad::kv
