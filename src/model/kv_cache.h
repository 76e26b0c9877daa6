// A contiguous per-sequence K/V cache (f32), one slab per layer.
//
// Slot j of every layer holds the key/value of the token at position j. Capacity is fixed at
// construction (n_ctx tokens). This is the single-sequence cache of the engine core; the paged,
// block-table cache shared across requests replaces it in the serving engine.
// Not thread-safe: one forward pass at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/error.h"

namespace triad {

class KvCache {
 public:
  KvCache(int32_t n_layers, int32_t n_ctx, int32_t kv_dim)
      : n_ctx_(n_ctx), kv_dim_(kv_dim), k_(n_layers), v_(n_layers), pos_(n_ctx) {
    TRIAD_CHECK(n_ctx > 0 && kv_dim > 0, "KV cache: bad size");
    for (int32_t l = 0; l < n_layers; ++l) {
      k_[l].resize(static_cast<size_t>(n_ctx) * kv_dim);
      v_[l].resize(static_cast<size_t>(n_ctx) * kv_dim);
    }
    for (int32_t j = 0; j < n_ctx; ++j) pos_[j] = j;
  }
  int32_t capacity() const { return n_ctx_; }
  int32_t kv_dim() const { return kv_dim_; }
  // Tokens currently cached (positions 0..size-1).
  int32_t size() const { return size_; }
  void set_size(int32_t n) {
    TRIAD_CHECK(n >= 0 && n <= n_ctx_, "KV cache: size ", n, " exceeds capacity ", n_ctx_);
    size_ = n;
  }
  void clear() { size_ = 0; }
  float* k(int32_t layer, int32_t slot) { return k_[layer].data() + static_cast<size_t>(slot) * kv_dim_; }
  float* v(int32_t layer, int32_t slot) { return v_[layer].data() + static_cast<size_t>(slot) * kv_dim_; }
  const int32_t* positions() const { return pos_.data(); }
  uint64_t bytes() const { return 2ull * k_.size() * n_ctx_ * kv_dim_ * sizeof(float); }

 private:
  int32_t n_ctx_;
  int32_t kv_dim_;
  int32_t size_ = 0;
  std::vector<AlignedBuffer<float>> k_, v_;  // [layer][slot * kv_dim]
  std::vector<int32_t> pos_;                 // position of each slot (identity here)
};

}  // namespace triad
