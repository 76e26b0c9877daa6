// FreeBlockQueue: the free blocks of one pool as an intrusive doubly linked list over block ids.
//
// Blocks are integers in [0, n), so the links live in two arrays indexed by block id, with one
// extra sentinel node (id n) closing the ring: push/pop at either end and removal of any block
// from the middle are O(1) and allocation-free after construction. The front is the next block
// to hand out.
//
// PRECONDITIONS (checked; a violation is a bookkeeping bug and throws triad::Error): a block is
// pushed only when not in the queue and removed only when in it; pop_front on a non-empty queue.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include "base/error.h"
#include "kv/kv_cache_manager.h"

namespace triad::kv {

class FreeBlockQueue {
 public:
  // Starts with every block of [0, n) queued in increasing order.
  explicit FreeBlockQueue(int32_t n) : prev_(slots(n)), next_(slots(n)), size_(n) {
    const int32_t s = n;  // sentinel
    for (int32_t b = 0; b < n; ++b) {
      prev_[b] = b == 0 ? s : b - 1;
      next_[b] = b == n - 1 ? s : b + 1;
    }
    prev_[s] = n == 0 ? s : n - 1;
    next_[s] = n == 0 ? s : 0;
  }

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(BlockId b) const { return in_range(b) && prev_[b] != kNoBlock; }

  // Front block (next to hand out) or kNoBlock when empty.
  BlockId front() const { return empty() ? kNoBlock : next_[sentinel()]; }
  // The block after b in queue order, or kNoBlock at the back.
  BlockId next(BlockId b) const {
    TRIAD_CHECK(contains(b), "FreeBlockQueue: block ", b, " is not queued");
    return next_[b] == sentinel() ? kNoBlock : next_[b];
  }

  void push_back(BlockId b) { link_after(prev_[sentinel()], b); }
  void push_front(BlockId b) { link_after(sentinel(), b); }

  void remove(BlockId b) {
    TRIAD_CHECK(contains(b), "FreeBlockQueue: removing block ", b, " that is not queued");
    next_[prev_[b]] = next_[b];
    prev_[next_[b]] = prev_[b];
    prev_[b] = next_[b] = kNoBlock;
    --size_;
  }

  BlockId pop_front() {
    TRIAD_CHECK(!empty(), "FreeBlockQueue: pop_front on an empty queue");
    const BlockId b = next_[sentinel()];
    remove(b);
    return b;
  }

 private:
  static size_t slots(int32_t n) {
    TRIAD_CHECK(n >= 0, "FreeBlockQueue: negative size ", n);
    return static_cast<size_t>(n) + 1;
  }
  int32_t sentinel() const { return static_cast<int32_t>(prev_.size()) - 1; }
  bool in_range(BlockId b) const { return b >= 0 && b < sentinel(); }

  void link_after(BlockId at, BlockId b) {
    TRIAD_CHECK(in_range(b) && !contains(b), "FreeBlockQueue: pushing block ", b,
                " that is out of range or already queued");
    prev_[b] = at;
    next_[b] = next_[at];
    prev_[next_[at]] = b;
    next_[at] = b;
    ++size_;
  }

  // prev_[b] == kNoBlock marks a block that is not queued (the sentinel is always linked).
  std::vector<BlockId> prev_, next_;
  int32_t size_ = 0;
};

}  // namespace triad::kv
