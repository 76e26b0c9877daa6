// Internal to paged attention (paged_attention.h): the tile geometry, the work item and scratch
// layout shared by the driver (paged_attention.cpp) and the per-ISA kernels
// (paged_attention_generic.h instantiated in paged_attention.cpp / _avx2.cpp / _avx512.cpp), the
// scalar element conversions, and paged_attention_at() so tests can run every ISA level.
//
// Tiles: tile_keys(head_dim) = attention_tile_for(head_dim) key slots is the target (one f32 K
// tile plus one V tile ~32 KiB, L1-sized). With block_size <= target a tile is the largest whole
// number of blocks that fits (tile t = positions [t*tile_keys, (t+1)*tile_keys)); with a larger
// block each block is cut into sub-tiles of the target size from its start. A segment is
// tiles_per_seg consecutive tiles (~512 keys, whole blocks). All edges are fixed functions of
// (block_size, head_dim) and positions, never of the call.
//
// Thread-safety: plain data; the kernels write only their item's output rows / partial states
// and their thread's scratch.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "kernels/paged_attention.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/fp8.h"

namespace triad::kernels {

struct PagedGeom {
  int32_t block_size = 0;
  int32_t tile_keys = 0;      // block_size <= target: keys per tile (a multiple of block_size)
  int32_t sub_keys = 0;       // block_size > target: keys per sub-tile of a block
  int32_t subs = 1;           // block_size > target: sub-tiles per block (else 1)
  int32_t tiles_per_seg = 1;  // tiles per segment
  int32_t max_keys = 0;       // most keys in one tile

  int64_t tile_of(int64_t j) const {
    if (tile_keys > 0) return j / tile_keys;
    return j / block_size * subs + j % block_size / sub_keys;
  }
  int64_t begin(int64_t t) const {
    if (tile_keys > 0) return t * tile_keys;
    return t / subs * block_size + t % subs * sub_keys;
  }
  // End of tile t (not clipped to a sequence's n_kv).
  int64_t end(int64_t t) const {
    if (tile_keys > 0) return (t + 1) * tile_keys;
    const int64_t e = begin(t) + sub_keys, block_end = (t / subs + 1) * block_size;
    return e < block_end ? e : block_end;
  }
};
// Geometry for a block size (> 0) and head size (> 0).
PagedGeom paged_geom(int32_t block_size, int head_dim);

// One work item: rows [row0, row0 + n_rows) of sequence `seq` (relative to its q_begin) x kv head
// kv_head (its n_rep query heads), over segment `seg` only (>= 0: leaves partial states) or over
// every segment its rows see (-1: folds the segments and writes the output rows).
struct PagedItem {
  int32_t seq = 0;
  int32_t kv_head = 0;
  int64_t row0 = 0;
  int32_t n_rows = 0;
  int32_t seg = -1;
  int64_t cost = 0;  // estimated (query vector, key) pairs, for scheduling only
};

// Partial state of one (row, head, segment) in split mode: kPartHeader floats [m, l, has, 0]
// then the un-normalized accumulator (acc_stride floats).
inline constexpr int kPartHeader = 4;

struct PagedCtx {
  int head_dim = 0;
  int n_rep = 0;
  int n_heads = 0;
  float scale = 1.f;
  float softcap = 0.f;
  int32_t window = 0;
  const float* q = nullptr;
  int64_t q_stride = 0;
  const int32_t* q_pos = nullptr;
  float* out = nullptr;
  int64_t out_stride = 0;
  PagedKvLayer kv;
  const PagedSeq* seqs = nullptr;
  PagedGeom geom;
  int64_t acc_stride = 0;             // floats per accumulator (head_dim rounded up to 16)
  const float* sinks = nullptr;       // AttentionParams::sinks
  bool v_is_k = false;                // V rows are the K rows (latent attention): one tile serves both
  float* part = nullptr;              // split mode: partial states
  const int64_t* part_off = nullptr;  // per sequence: index of its first entry in part
  const int32_t* n_seg = nullptr;     // per sequence: segments it spans
};

// Index of the partial entry of (local row, head, segment) of sequence s.
inline int64_t paged_part_index(const PagedCtx& c, int32_t s, int64_t row, int head, int64_t seg) {
  return c.part_off[s] + (row * c.n_heads + head) * c.n_seg[s] + seg;
}
inline int64_t paged_part_stride(const PagedCtx& c) {
  return c.acc_stride + kPartHeader;
}

// Per-thread scratch of the kernels (sizes set by the driver for max_rows rows per item).
struct PagedScratch {
  float* kt = nullptr;      // K tile: round4(max_keys) rows x head_dim
  float* vt = nullptr;      // V tile: same
  float* scores = nullptr;  // kPagedMaxNq rows of score_stride floats
  int64_t score_stride = 0;
  float* seg_m = nullptr;  // segment state, per query vector (row * n_rep + rep)
  float* seg_l = nullptr;
  float* seg_acc = nullptr;  // n_vec x acc_stride
  float* run_m = nullptr;    // folded state (items with seg == -1)
  float* run_l = nullptr;
  float* run_acc = nullptr;
  int64_t* row_lo = nullptr;  // per row: first visible position
  int64_t* row_hi = nullptr;  // per row: last visible position + 1
  int64_t* row_a = nullptr;   // per row: visible key range [a, e) in the current tile
  int64_t* row_e = nullptr;
  int64_t* seg_has = nullptr;  // per row: saw a key in the current segment
  int64_t* run_has = nullptr;  // per row: state folded into run_*
};
inline constexpr int kPagedMaxNq = 4;  // most query vectors one kernel pass serves

struct PagedKernels {
  IsaLevel level;
  void (*item)(const PagedCtx& c, const PagedItem& it, const PagedScratch& w);
  // Folds the n_seg partial entries (stride paged_part_stride) of one (row, head) in segment
  // order and writes the normalized head_dim outputs (the head's sink, if any, joining the
  // sum); may overwrite the entries.
  void (*merge)(const PagedCtx& c, float* entries, int64_t n_seg, int head, float* out);
};
// The kernels of one ISA level; throws triad::Error when !isa_supported(level).
const PagedKernels& paged_kernels_for(IsaLevel level);
const PagedKernels& paged_kernels_avx2();
const PagedKernels& paged_kernels_avx512();

// Key slots per tile for a head size: clamp(4096 / head_dim, 16, 256) rounded down to a
// multiple of 4, so one f32 K tile plus one V tile is about 32 KiB (the L1d of the Zen 4 /
// recent Intel cores we target) and a work item's tiles stay in the 1-2 MiB L2.
int attention_tile_for(int head_dim);
// Throws triad::Error unless the attention parameters, shapes and strides are consistent:
// n_heads a positive multiple of n_kv_heads, 0 < head_dim <= 65536, finite scale, softcap >= 0,
// window >= 0; q / q_pos / out non-null with strides >= n_heads * head_dim when n_q > 0, and
// k / v / kv_pos likewise when n_kv > 0 (the scalar reference's contiguous layout).
void check_attention_args(const AttentionParams& p, const float* q, int64_t n_q, int64_t q_stride,
                          const int32_t* q_pos, const float* k, const float* v, int64_t n_kv,
                          int64_t kv_stride, const int32_t* kv_pos, const float* out,
                          int64_t out_stride);

// paged_attention() with the kernels of one ISA level (same checks).
void paged_attention_at(IsaLevel level, const AttentionParams& p, const float* q, int64_t q_stride,
                        const int32_t* q_pos, const PagedKvLayer& kv,
                        std::span<const PagedSeq> seqs, float* out, int64_t out_stride,
                        ThreadPool& pool);

namespace {  // internal linkage: each ISA file gets its own copy (no merged SIMD symbol)

inline float paged_fp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

// dst[i] = element e0 + i of a stored row, i < n (scalar; exact conversions).
inline void paged_convert_row_scalar(DType t, const uint8_t* row, int64_t e0, int64_t n,
                                     float* dst) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, row + e0 * 4, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = paged_fp16(row + (e0 + i) * 2);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, row + (e0 + i) * 2, 2);
        dst[i] = bf16_to_f32(b);
      }
      return;
    case DType::kQ8_0:
      for (int64_t i = 0; i < n; ++i) {
        const int64_t e = e0 + i;
        const uint8_t* blk = row + e / 32 * 34;
        dst[i] = paged_fp16(blk) * static_cast<float>(static_cast<int8_t>(blk[2 + e % 32]));
      }
      return;
    case DType::kF8_E4M3:
      for (int64_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(row[e0 + i]);
      return;
    case DType::kF8_E5M2:
      for (int64_t i = 0; i < n; ++i) dst[i] = e5m2_to_f32(row[e0 + i]);
      return;
    default:
      return;  // unreachable: dtypes are checked by the callers
  }
}

}  // namespace
}  // namespace triad::kernels
