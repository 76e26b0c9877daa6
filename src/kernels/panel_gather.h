// Internal to the panel kernels (matmul_panels_avx2.cpp, matmul_panels_avx512.cpp; include
// only from files compiled with AVX2 or more): a token tile's Q8 activations gathered block by
// block, so that a tile addresses every token of block b at a constant offset; and the weight
// prefetch both ISAs' tiles share (prefetch_step).
//
// Format, block b at b * act_block_bytes(T): T x 32 codes (token t's at 32t), then T int32
// starts (-off * the sum of the block's codes: the code offset the tile removes), T float
// scales dx and T float block sums xs (only where the type has minimums). The starts, by
// `Starts`: kBlock as above; kHalves (Q6_K: sub-blocks of 16) per 16 codes, the second half's
// in the block sums' place; kPairs16 (Q2_K, Q3_K) both halves' as an int16 pair (first half
// low) in one int32, for a vpmaddwd with a pair of sub-block scales or minimums, and the codes
// interleaved in pairs as those types' panels hold their weights (panel_layout.h): bytes 4u,
// 4u + 1 are codes 2u, 2u + 1 and bytes 4u + 2, 4u + 3 codes 16 + 2u, 17 + 2u.
//
// Internal linkage (an unnamed namespace): each ISA's file compiles its own copy with its flags.
// Thread-safety: writes only `out`.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_impl.h"

namespace triad::kernels {
namespace {

constexpr int64_t act_block_bytes(int t) { return 44 * static_cast<int64_t>(t); }

// The first pass over a panel (its first token tile, or a widening) prefetches the weights
// kPrefetchAhead bytes ahead into L2: the panels of a row range lie one after another, so the
// distance runs on across them (the start of a row range is prefetched before its first tile).
// A batched decode step's tiles otherwise wait on memory (matmul_bench --stream-batch 1, 16
// tokens: 1.3-2x faster with it; one token: on par with the lane kernels only with it).
constexpr int64_t kPrefetchAhead = 8192;

// Step i of kSteps of the prefetch of the kBytes at p: that step's share of the lines,
// kPrefetchAhead ahead. A block spreads its bytes' prefetch over its own steps (a code vector
// or two each). Issued all at once, a block's 21-53 lines held every line fill buffer of an
// Intel core, and the tile's own loads (L2 hits, prefetched earlier) queued behind them:
// matmul_bench, 2 threads from DRAM, one token, Xeon (session 28): Q4_K / Q5_K / Q6_K /
// IQ4_XS 21-25 -> 27-29 GB/s, Q2_K 23 -> 25-26.
template <int64_t kBytes, int kSteps>
__attribute__((always_inline)) inline void prefetch_step(const uint8_t* p, int i) {
  constexpr int64_t kLines = (kBytes + 63) / 64;
  for (int64_t l = i * kLines / kSteps; l < (i + 1) * kLines / kSteps; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead + 64 * l), _MM_HINT_T1);
}

enum class Starts { kBlock, kHalves, kPairs16 };

// Tokens [t0, t0 + n) of the job gathered for a tile of n tokens (format above).
[[maybe_unused]] void gather(const MatmulJob& j, int64_t t0, int n, int off, bool mins, Starts starts, uint8_t* out) {
  const bool halves = starts == Starts::kHalves;
  const int64_t nb = j.cols / 32, ab = act_block_bytes(n);
  for (int t = 0; t < n; ++t) {
    const int8_t* q = j.aq + (t0 + t) * j.aq_stride;
    const float* d = j.ad + (t0 + t) * j.as_stride;
    const float* xs = j.axs + (t0 + t) * j.as_stride;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* o = out + b * ab;
      // The two halves' code sums: byte sums of the codes plus 128 (vpsadbw), less 16 * 128 each.
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b));
      if (starts == Starts::kPairs16) {
        const __m128i lo = _mm256_castsi256_si128(codes), hi = _mm256_extracti128_si256(codes, 1);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * t),
                            _mm256_setr_m128i(_mm_unpacklo_epi16(lo, hi), _mm_unpackhi_epi16(lo, hi)));
      } else {
        std::memcpy(o + 32 * t, q + 32 * b, 32);
      }
      const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(codes, _mm256_set1_epi8(static_cast<char>(0x80))),
                                          _mm256_setzero_si256());
      alignas(32) uint64_t part[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(part), sad);
      const int32_t first = static_cast<int32_t>(part[0] + part[1]) - 16 * 128;
      const int32_t sum = first + static_cast<int32_t>(part[2] + part[3]) - 16 * 128;
      int32_t start = -off * (halves ? first : sum);
      const int32_t second = -off * (sum - first);
      // |off| <= 4, |sum of 16 codes| <= 2032: each half fits an int16.
      if (starts == Starts::kPairs16) start = static_cast<int32_t>(static_cast<uint16_t>(-off * first) | static_cast<uint32_t>(second) << 16);
      std::memcpy(o + 32 * n + 4 * t, &start, 4);
      if (halves) std::memcpy(o + 40 * n + 4 * t, &second, 4);
      std::memcpy(o + 36 * n + 4 * t, d + b, 4);
      if (mins) std::memcpy(o + 40 * n + 4 * t, xs + b, 4);
    }
  }
}

}  // namespace
}  // namespace triad::kernels
