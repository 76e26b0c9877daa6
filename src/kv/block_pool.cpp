// BlockPool: reference counts, free queue and key map of one layer group (see block_pool.h).
#include "kv/block_pool.h"

#include "base/error.h"

namespace triad::kv {
namespace {

int32_t checked_pool_size(int32_t n_blocks) {
  TRIAD_CHECK(n_blocks > 0, "BlockPool: n_blocks must be > 0, got ", n_blocks);
  return n_blocks;
}

}  // namespace

BlockPool::BlockPool(int32_t n_blocks)
    : meta_(static_cast<size_t>(checked_pool_size(n_blocks))), free_(n_blocks) {
  map_.reserve(static_cast<size_t>(n_blocks));
}

const BlockPool::Meta& BlockPool::meta(BlockId b) const {
  TRIAD_CHECK(b >= 0 && b < size(), "BlockPool: block id ", b, " is outside [0, ", size(), ")");
  return meta_[static_cast<size_t>(b)];
}

BlockPool::Meta& BlockPool::meta(BlockId b) {
  return const_cast<Meta&>(static_cast<const BlockPool*>(this)->meta(b));
}

void BlockPool::uncache(BlockId b) {
  Meta& m = meta(b);
  if (!m.cached) return;
  map_.erase(m.hash);
  m.cached = false;
  if (m.ref == 0) --n_cached_free_;
}

BlockId BlockPool::take() {
  TRIAD_CHECK(!free_.empty(), "BlockPool: take() with no free block");
  const BlockId b = free_.pop_front();
  uncache(b);
  meta(b).ref = 1;
  return b;
}

void BlockPool::ref(BlockId b) {
  Meta& m = meta(b);
  if (m.ref == 0) {
    TRIAD_CHECK(m.cached, "BlockPool: ref() of free block ", b, " that holds no cached data");
    free_.remove(b);
    --n_cached_free_;
  }
  ++m.ref;
}

void BlockPool::unref(BlockId b) {
  Meta& m = meta(b);
  TRIAD_CHECK(m.ref > 0, "BlockPool: unref() of free block ", b);
  if (--m.ref > 0) return;
  if (m.cached) {
    free_.push_back(b);
    ++n_cached_free_;
  } else {
    free_.push_front(b);
  }
}

BlockId BlockPool::lookup(const BlockHash& h) const {
  auto it = map_.find(h);
  return it == map_.end() ? kNoBlock : it->second;
}

bool BlockPool::register_block(BlockId b, const BlockHash& h) {
  Meta& m = meta(b);
  TRIAD_CHECK(m.ref > 0 && !m.cached, "BlockPool: register_block() of block ", b,
              " that is free or already cached");
  if (!map_.emplace(h, b).second) return false;
  m.cached = true;
  m.hash = h;
  return true;
}

void BlockPool::drop_free_cached() {
  for (BlockId b = free_.front(); b != kNoBlock; b = free_.next(b)) uncache(b);
}

void BlockPool::check_invariants() const {
  int32_t n_free = 0, n_cached_free = 0, n_cached = 0;
  for (BlockId b = 0; b < size(); ++b) {
    const Meta& m = meta_[static_cast<size_t>(b)];
    TRIAD_CHECK(m.ref >= 0, "BlockPool: block ", b, " has negative ref count ", m.ref);
    TRIAD_CHECK(free_.contains(b) == (m.ref == 0), "BlockPool: block ", b, " with ref count ",
                m.ref, (free_.contains(b) ? " is" : " is not"), " in the free queue");
    if (m.ref == 0) ++n_free;
    if (m.cached) {
      ++n_cached;
      if (m.ref == 0) ++n_cached_free;
      auto it = map_.find(m.hash);
      TRIAD_CHECK(it != map_.end() && it->second == b, "BlockPool: cached block ", b,
                  " is not the map's block for its key");
    }
    TRIAD_CHECK(m.ref <= 1 || m.cached, "BlockPool: block ", b, " is shared (ref count ", m.ref,
                ") but not cached");
  }
  TRIAD_CHECK(n_free == free_.size(), "BlockPool: ", n_free, " free blocks but the queue holds ",
              free_.size());
  TRIAD_CHECK(n_cached_free == n_cached_free_, "BlockPool: ", n_cached_free,
              " free cached blocks but the counter says ", n_cached_free_);
  TRIAD_CHECK(static_cast<size_t>(n_cached) == map_.size(), "BlockPool: ", n_cached,
              " cached blocks but the map holds ", map_.size(), " keys");
  int32_t walked = 0;
  bool seen_cached = false;
  for (BlockId b = free_.front(); b != kNoBlock; b = free_.next(b)) {
    TRIAD_CHECK(++walked <= free_.size(), "BlockPool: the free queue has a cycle");
    const bool cached = meta_[static_cast<size_t>(b)].cached;
    TRIAD_CHECK(cached || !seen_cached, "BlockPool: empty free block ", b,
                " is queued behind a cached one");
    seen_cached = seen_cached || cached;
  }
  TRIAD_CHECK(walked == free_.size(), "BlockPool: walked ", walked, " free blocks of ",
              free_.size());
}

}  // namespace triad::kv
