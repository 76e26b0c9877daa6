// KvStorage: the bytes of the paged K/V cache, one pool per layer group.
//
// Layers that attend the same way form a group (see kv_layer_groups()): all full-attention
// layers, and all sliding-window layers. Each group has n_blocks blocks; block b of a group holds,
// for every layer of the group, block_size token rows of K and of V in the chosen dtypes. The
// bookkeeping over block ids (which sequence owns which block) lives in kv::KvCacheManager; this
// class only owns memory and maps (layer, block, row) to addresses.
//
// Latent attention (ModelConfig::is_mla) caches one row per token and layer, whose first
// kv_lora_rank values are the V the kernel reads: there the V pool is the K pool (same
// addresses and dtype, cache-type-v ignored) and no V bytes are allocated.
//
// Memory is reserved once at construction with mmap and committed by the OS as blocks are first
// written, so resident memory follows the blocks actually used.
// Thread-safety: rows may be written concurrently when they are distinct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/paged_attention.h"
#include "model/model_config.h"
#include "tensor/dtype.h"

namespace triad {

struct KvLayerGroup {
  int32_t window = 0;             // sliding window in tokens; 0 = full attention
  std::vector<int32_t> layers;    // model layer indices, ascending
};

// Groups of a model: full-attention layers first (if any), then sliding-window layers.
std::vector<KvLayerGroup> kv_layer_groups(const ModelConfig& c);

struct KvStorageConfig {
  int32_t block_size = 16;               // tokens per block
  DType k_type = DType::kF16;            // kF32, kF16, kBF16, kQ8_0, kF8_E4M3 or kF8_E5M2
  DType v_type = DType::kF16;
  std::vector<int32_t> blocks_per_group; // one entry per kv_layer_groups() group
};

// Parses "f16", "bf16", "f32", "q8_0", "fp8_e4m3" (or "fp8"), "fp8_e5m2" (throws triad::Error
// otherwise).
DType parse_kv_dtype(const std::string& name);

class KvStorage {
 public:
  // PRECONDITIONS (checked): one positive block count per group, supported dtypes, and for
  // q8_0 kv_dim % 32 == 0.
  KvStorage(const ModelConfig& c, KvStorageConfig config);
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  const KvStorageConfig& config() const { return config_; }
  const std::vector<KvLayerGroup>& groups() const { return groups_; }
  int32_t group_of_layer(int32_t il) const { return layer_group_[il]; }
  // Bytes one block of group g occupies (all its layers, K and V).
  uint64_t block_bytes(int32_t g) const;
  uint64_t total_bytes() const { return total_bytes_; }

  // The pool of layer il as the attention kernel sees it.
  const kernels::PagedKvLayer& layer(int32_t il) const { return layers_[il]; }
  uint8_t* k_row(int32_t il, int32_t block, int32_t row);
  uint8_t* v_row(int32_t il, int32_t block, int32_t row);

  // Bytes per token per group for the given dtypes (for sizing before construction).
  static uint64_t token_bytes(const ModelConfig& c, const KvLayerGroup& g, DType k, DType v);

 private:
  KvStorageConfig config_;
  std::vector<KvLayerGroup> groups_;
  std::vector<int32_t> layer_group_;
  std::vector<kernels::PagedKvLayer> layers_;
  uint8_t* base_ = nullptr;
  uint64_t total_bytes_ = 0;
};

}  // namespace triad
