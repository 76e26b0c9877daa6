// Attention through block tables over a paged K/V pool, and the row stores that write K/V into
// it in the cache's dtype (f32, f16, bf16, q8_0, fp8_e4m3 or fp8_e5m2).
//
// Layout of one layer's pool (K and V separately, each with its own dtype): block b holds
// block_size token rows; token row r of block b starts at base + b*block_bytes + r*row_bytes and
// holds kv_dim = n_kv_heads*head_dim elements (kv head g at element g*head_dim). For q8_0 a row is
// kv_dim/32 GGML Q8_0 blocks (f16 scale + 32 int8), so kv_dim % 32 == 0 is required. FP8 rows
// are one byte per element with no scale (as vLLM's fp8 KV cache with its default scale 1.0):
// E4M3 holds magnitudes up to 448 with 3 mantissa bits, E5M2 up to 57344 with 2.
//
// V may alias K (v_base == k_base with the same dtype and strides: latent attention, where a
// head's value is the start of its key row); each tile is then converted once for both.
//
// Positions: slot i of a sequence (block table entry i/bs, row i%bs) holds the token at position
// i. A query at position p sees keys at positions j <= p, and j > p - window when window > 0.
//
// Algorithm (paged_attention_generic.h): flash-style. Keys are visited in tiles of whole blocks
// (several small blocks per tile, or a large block cut into sub-tiles; tile edges are fixed
// multiples of positions), each tile of one kv head converted to f32 once and shared by every
// query row and by the n_heads / n_kv_heads query heads of that kv head; a per-query online
// softmax (running max, sum, f32 accumulator) runs over the tiles in position order. Tiles with
// no key visible to any query of a work item are never read (kNoBlock entries included).
// Long contexts are cut into fixed segments of tiles whose partial softmax states are combined
// in segment order, so one long decode can also be spread over threads.
//
// Determinism: each query row's result is bitwise independent of which other queries or
// sequences share the call, of thread count, and of whether blocks it cannot see are present:
// the arithmetic of a query depends only on its own position, its q row and the keys it sees
// (fixed tile and segment edges, fixed lane order in every reduction). Results may differ
// between ISA levels (scalar, AVX2, AVX-512).
//
// Thread-safety: paged_attention runs on the given pool (one call per pool at a time; calls on
// different pools may run concurrently). kv_store_row / kv_load_row are pure.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace triad::kernels {

// Block table entry of a released block (see PagedSeq::block_table).
inline constexpr int32_t kNoBlock = -1;

struct PagedKvLayer {
  DType k_type = DType::kF16;  // kF32, kF16, kBF16, kQ8_0, kF8_E4M3 or kF8_E5M2
  DType v_type = DType::kF16;
  const uint8_t* k_base = nullptr;
  const uint8_t* v_base = nullptr;
  uint64_t k_block_bytes = 0;  // bytes per block, >= block_size * k_row_bytes
  uint64_t v_block_bytes = 0;
  uint64_t k_row_bytes = 0;  // >= row_bytes(k_type, kv_dim)
  uint64_t v_row_bytes = 0;
  int32_t block_size = 16;  // token rows per block (> 0)
  int32_t n_blocks = 0;     // blocks in the pool; when > 0 every block id a query can see is
                            // checked to be < n_blocks (0: ids are trusted)
};

// The attention of one layer: heads, scale, mask shape.
struct AttentionParams {
  int n_heads = 0;         // query heads
  int n_kv_heads = 0;      // key/value heads; n_heads % n_kv_heads == 0 (GQA/MQA)
  int head_dim = 0;        // elements per head (same for K and V)
  float scale = 1.f;       // multiplies q.k before softmax
  int32_t window = 0;      // sliding window in tokens: a query at position p sees keys at
                           // positions (p - window, p]; 0 means no window (full causal)
  float softcap = 0.f;     // when > 0, scores become softcap * tanh(score / softcap)
  const float* sinks = nullptr;  // per query head: a logit that joins the softmax's sum but has
                                 // no value (gpt-oss's attention sinks); null: none
};

// One sequence's share of a paged attention call.
struct PagedSeq {
  int64_t q_begin = 0;                   // first query row (in q, q_pos and out)
  int64_t n_q = 0;                       // query rows of this sequence
  const int32_t* block_table = nullptr;  // ceil(n_kv / block_size) entries; kNoBlock (-1) for
                                         // released blocks, which must all lie outside every
                                         // query's window
  int32_t n_kv = 0;  // keys at positions [0, n_kv) are in the cache (already written)
};

// out[t][h*head_dim + d] = attention of query row t (head h, position q_pos[t]) over its
// sequence's cached keys, with p.n_heads / p.n_kv_heads query heads sharing each K/V load.
// p.window and p.softcap as AttentionParams says. q and out rows have strides q_stride / out_stride.
// Only the rows of `seqs` are read and written; out must not overlap q or the pool.
// PRECONDITIONS (checked, triad::Error): n_heads a positive multiple of n_kv_heads, head_dim in
// (0, 65536], finite scale, softcap >= 0, window >= 0; supported dtypes, kv_dim % 32 == 0
// for q8_0, row/block sizes consistent with kv_dim and block_size; every sequence has
// q_begin >= 0, n_q >= 0, 0 <= q_pos[t] < n_kv for its rows, and its rows come after those of
// the sequences before it (ranges in ascending order, not overlapping); every block a query can
// see is an id >= 0 (and < n_blocks when set). NOT checkable: the table length (it must cover
// n_kv) and that the keys were written.
void paged_attention(const AttentionParams& p, const float* q, int64_t q_stride,
                     const int32_t* q_pos, const PagedKvLayer& kv, std::span<const PagedSeq> seqs,
                     float* out, int64_t out_stride, ThreadPool& pool);

// Writes one K or V row (n = kv_dim f32 values) to dst in `type` (kF32, kF16, kBF16, kQ8_0,
// kF8_E4M3 or kF8_E5M2; FP8 rounds to nearest even and saturates at the largest finite value,
// tensor/fp8.h):
// f16 / bf16 round to nearest even (tensor/fp16.h); q8_0 (n % 32 == 0) is quantized exactly as
// GGML's quantize_row_q8_0_ref: per 32 values d = amax / 127, id = d ? 1/d : 0, stored scale
// fp16(d), q = roundf(x * id). dst holds row_bytes(type, n) bytes (no alignment needed).
// PRECONDITIONS (checked): supported type, n >= 0 (n % 32 == 0 for q8_0), non-null pointers.
void kv_store_row(DType type, const float* src, int64_t n, void* dst);
// Reads one stored row back to f32: exact for f32 / f16 / bf16 (the stored values), and
// fp16(d) * q for q8_0, the exact FP8 values; the same values paged_attention computes with.
void kv_load_row(DType type, const void* src, int64_t n, float* dst);

}  // namespace triad::kernels
