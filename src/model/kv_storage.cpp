#include "model/kv_storage.h"

#include <sys/mman.h>

#include <optional>

#include "base/checked_math.h"
#include "base/error.h"

namespace triad {
namespace {
uint64_t add_or_fail(std::optional<uint64_t> v) {
  TRIAD_CHECK(v.has_value(), "KV storage size overflows");
  return *v;
}
uint64_t mul(uint64_t a, uint64_t b) { return add_or_fail(checked_mul(a, b)); }
uint64_t add(uint64_t a, uint64_t b) { return add_or_fail(checked_add(a, b)); }
}  // namespace

std::vector<KvLayerGroup> kv_layer_groups(const ModelConfig& c) {
  KvLayerGroup full, local;
  local.window = c.sliding_window;
  for (int32_t il = 0; il < c.n_layers; ++il)
    (c.layer_is_local(il) ? local : full).layers.push_back(il);
  std::vector<KvLayerGroup> out;
  if (!full.layers.empty()) out.push_back(std::move(full));
  if (!local.layers.empty()) out.push_back(std::move(local));
  return out;
}

DType parse_kv_dtype(const std::string& name) {
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  if (name == "f32") return DType::kF32;
  if (name == "q8_0") return DType::kQ8_0;
  if (name == "fp8_e4m3" || name == "fp8") return DType::kF8_E4M3;
  if (name == "fp8_e5m2") return DType::kF8_E5M2;
  fail("unknown KV cache type '", name, "' (expected f16, bf16, f32, q8_0, fp8_e4m3 or fp8_e5m2)");
}

uint64_t KvStorage::token_bytes(const ModelConfig& c, const KvLayerGroup& g, DType k, DType v) {
  const uint64_t kv = static_cast<uint64_t>(c.kv_dim());
  if (c.is_mla()) return g.layers.size() * row_bytes(k, kv);  // V is part of the latent K row
  return g.layers.size() * (row_bytes(k, kv) + row_bytes(v, kv));
}

KvStorage::KvStorage(const ModelConfig& c, KvStorageConfig config)
    : config_(std::move(config)), groups_(kv_layer_groups(c)), layer_group_(c.n_layers, -1),
      layers_(c.n_layers) {
  TRIAD_CHECK(config_.block_size > 0 && config_.block_size <= 4096, "KV block size ",
              config_.block_size, " is outside 1..4096");
  TRIAD_CHECK(config_.blocks_per_group.size() == groups_.size(), "KV storage: ",
              config_.blocks_per_group.size(), " block counts for ", groups_.size(), " layer groups");
  // Latent attention (is_mla): V is part of the K row; its dtype is K's whatever was asked.
  if (c.is_mla()) config_.v_type = config_.k_type;
  for (DType t : {config_.k_type, config_.v_type}) {
    TRIAD_CHECK(t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 ||
                    t == DType::kF8_E4M3 || t == DType::kF8_E5M2,
                "KV cache type ", dtype_name(t), " is not supported (f16, bf16, f32, q8_0, fp8_e4m3, fp8_e5m2)");
    TRIAD_CHECK(t != DType::kQ8_0 || c.kv_dim() % 32 == 0, "a q8_0 KV cache needs K/V rows of a multiple of 32 elements; this model has ",
                c.kv_dim());
  }
  const uint64_t kv = static_cast<uint64_t>(c.kv_dim());
  // Latent attention caches one row per token whose first kv_lora_rank values are its V: the
  // V pool is the K pool (and has K's dtype).
  const bool v_in_k = c.is_mla();
  const uint64_t krow = row_bytes(config_.k_type, kv), vrow = v_in_k ? 0 : row_bytes(config_.v_type, kv);
  const uint64_t bs = static_cast<uint64_t>(config_.block_size);
  // Offsets: per group, per layer of the group, a K pool then a V pool.
  uint64_t offset = 0;
  std::vector<uint64_t> k_off(c.n_layers), v_off(c.n_layers);
  for (size_t g = 0; g < groups_.size(); ++g) {
    TRIAD_CHECK(config_.blocks_per_group[g] > 0, "KV storage: group ", g, " has no blocks");
    const uint64_t nb = static_cast<uint64_t>(config_.blocks_per_group[g]);
    for (int32_t il : groups_[g].layers) {
      layer_group_[il] = static_cast<int32_t>(g);
      k_off[il] = offset;
      offset = add(offset, mul(nb, mul(bs, krow)));
      offset = (offset + 63) / 64 * 64;
      v_off[il] = offset;
      offset = add(offset, mul(nb, mul(bs, vrow)));
      offset = (offset + 63) / 64 * 64;
    }
  }
  total_bytes_ = offset;
  void* p = mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TRIAD_CHECK(p != MAP_FAILED, "cannot reserve ", total_bytes_ / (1 << 20), " MiB for the KV cache");
  base_ = static_cast<uint8_t*>(p);
  for (int32_t il = 0; il < c.n_layers; ++il) {
    kernels::PagedKvLayer& L = layers_[il];
    L.k_type = config_.k_type;
    L.v_type = config_.v_type;
    L.k_base = base_ + k_off[il];
    L.v_base = v_in_k ? L.k_base : base_ + v_off[il];
    L.k_row_bytes = krow;
    L.v_row_bytes = v_in_k ? krow : vrow;
    L.k_block_bytes = bs * krow;
    L.v_block_bytes = v_in_k ? bs * krow : bs * vrow;
    L.block_size = config_.block_size;
    L.n_blocks = config_.blocks_per_group[layer_group_[il]];  // the kernel range-checks ids
  }
}

KvStorage::~KvStorage() {
  if (base_) munmap(base_, total_bytes_);
}

uint64_t KvStorage::block_bytes(int32_t g) const {
  const auto& L = layers_[groups_[g].layers.front()];
  return groups_[g].layers.size() * (L.k_block_bytes + (L.v_base == L.k_base ? 0 : L.v_block_bytes));
}

uint8_t* KvStorage::k_row(int32_t il, int32_t block, int32_t row) {
  const auto& L = layers_[il];
  return const_cast<uint8_t*>(L.k_base) + static_cast<uint64_t>(block) * L.k_block_bytes +
         static_cast<uint64_t>(row) * L.k_row_bytes;
}

uint8_t* KvStorage::v_row(int32_t il, int32_t block, int32_t row) {
  const auto& L = layers_[il];
  return const_cast<uint8_t*>(L.v_base) + static_cast<uint64_t>(block) * L.v_block_bytes +
         static_cast<uint64_t>(row) * L.v_row_bytes;
}

}  // namespace triad
