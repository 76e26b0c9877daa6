// BlockPool: the blocks of one KV layer group: reference counts, the free queue, and the prefix
// cache's map from block key (chained hash) to block id.
//
// A block is in exactly one of three states:
//   - used:          ref_count > 0; in one or more sequences' block tables; maybe cached;
//   - free, cached:  ref_count == 0; still registered under its key, so a later sequence with
//                    the same prefix can take it back (ref()) without recomputing it;
//   - free, empty:   ref_count == 0; holds nothing anyone can find.
// Every free block is in the free queue. take() hands out the front block and, if it was cached,
// removes its key from the map (eviction). unref() queues a block that drops to 0 references at
// the back when it is cached (so cached blocks are evicted least recently freed first) and at the
// front when it is empty (so empty blocks are always reused before any cached one). ref() on a
// free cached block takes it off the queue in O(1).
//
// At most one block per key: register_block() of a key that is already mapped leaves the block
// unregistered (it stays private to its sequence and is empty once freed).
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/free_block_queue.h"
#include "kv/kv_cache_manager.h"

namespace triad::kv {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);  // PRECONDITION (checked): n_blocks > 0

  int32_t size() const { return static_cast<int32_t>(meta_.size()); }
  int32_t num_free() const { return free_.size(); }  // includes cached free blocks
  int32_t num_cached_free() const { return n_cached_free_; }
  int32_t ref_count(BlockId b) const { return meta(b).ref; }
  bool is_cached(BlockId b) const { return meta(b).cached; }

  // Takes the front free block (evicting its key if it was cached); it returns with one
  // reference. PRECONDITION (checked): num_free() > 0.
  BlockId take();
  // Adds one reference to b; a free (necessarily cached) block leaves the free queue.
  void ref(BlockId b);
  // Drops one reference; at zero b joins the free queue (see the file comment for where).
  // PRECONDITION (checked): ref_count(b) > 0.
  void unref(BlockId b);

  // The block registered under key h, or kNoBlock.
  BlockId lookup(const BlockHash& h) const;
  // Registers used, unregistered block b under h. Returns false (and changes nothing) if h
  // already names a block.
  bool register_block(BlockId b, const BlockHash& h);
  // Unregisters every free cached block (they become free and empty); used ones stay cached.
  void drop_free_cached();

  // Checks the pool's internal consistency (queue membership vs. reference counts, map vs.
  // cached flags, counters); throws triad::Error naming the first violation. O(n_blocks).
  void check_invariants() const;

 private:
  struct Meta {
    int32_t ref = 0;      // sequences' table entries pointing at this block
    bool cached = false;  // registered in map_ under `hash`
    BlockHash hash{};     // meaningful only when cached
  };
  const Meta& meta(BlockId b) const;
  Meta& meta(BlockId b);
  void uncache(BlockId b);

  std::vector<Meta> meta_;
  FreeBlockQueue free_;
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> map_;
  int32_t n_cached_free_ = 0;  // blocks with ref == 0 && cached
};

}  // namespace triad::kv
