// Internal to the SIMD matmul kernels: the loop nest that walks a row range x token range in
// register tiles of R rows x T tokens (ISA-agnostic; included by matmul_avx2.cpp and
// matmul_avx512.cpp, which supply the tile functions).
//
// Loop order, chosen for cache reuse when there are many tokens (prompt processing):
//   for each chunk of tokens whose prepared activations fit in about half of L2
//     for each tile of R rows               (the R weight rows stay in L1/L2 ...)
//       for each tile of T tokens           (... while every token tile of the chunk uses them)
//         tile<R, T>: all `cols` in registers, then one store of R x T outputs.
// Each weight byte is therefore read from memory once per token chunk (once per call when
// n_tokens <= chunk) and once per token tile from cache. Leftover rows use R = 1 tiles and
// leftover tokens a tile with fewer tokens, so any shape is covered.
//
// Thread-safety: writes only the outputs of its own rows and tokens.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/matmul_impl.h"

namespace triad::kernels::tiles {

// Kern must provide:
//   static constexpr int kR, kT;                 main tile shape
//   (optionally) static constexpr int kRDecode;  rows per tile for one token (decode_rows)
//   static constexpr int kActBytes;              prepared activation bytes per element
//   template <int R, int T> static void tile(const MatmulJob&, int64_t r, int64_t t);
// and instantiate tile<R, T> for R in {kR, 1} and T in [1, kT].
template <class Kern, int R, int T>
inline void tile_rem(const MatmulJob& j, int64_t r, int64_t t, int64_t rem) {
  if constexpr (T > 0) {
    if (rem == T) {
      Kern::template tile<R, T>(j, r, t);
    } else {
      tile_rem<Kern, R, T - 1>(j, r, t, rem);
    }
  }
}

template <class Kern, int R>
inline void token_loop(const MatmulJob& j, int64_t r, int64_t t0, int64_t t1) {
  int64_t t = t0;
  for (; t + Kern::kT <= t1; t += Kern::kT) Kern::template tile<R, Kern::kT>(j, r, t);
  if (t < t1) tile_rem<Kern, R, Kern::kT - 1>(j, r, t, t1 - t);
}

// Software prefetch for weight streaming. A tile reads its R rows side by side; with short
// rows (896 columns) every tile starts R new streams too short for the hardware prefetchers to
// lock onto, which left token generation latency-bound at a third of the DRAM bandwidth.
// Rows are contiguous, so the tile k tiles on is the byte range [tile start + k * R * row_bytes,
// + R * row_bytes); tiles prefetch it piecewise, in step with their own progress: the part of
// it matching [begin, end) of their R * row_bytes. k = kTilesAhead, or more for small tiles so
// that the prefetch runs at least kPrefetchMinBytes ahead (about a microsecond of streaming).
// Measured with interleaved A/B runs on the dev machine (Zen 4, shared VM): up to 2.5x the
// no-prefetch GB/s for 896-column rows and still +20..40% for 4864-column ones; into L2
// (prefetcht1) beat into L1 (prefetcht0). Only tiles over kPrefetchMaxTileBytes (whose
// distance would approach the L2 size) are left to the hardware.
inline constexpr int64_t kTilesAhead = 2;
inline constexpr int64_t kPrefetchMaxTileBytes = int64_t{256} << 10;
inline constexpr int64_t kPrefetchMinBytes = int64_t{16} << 10;
// (An asm statement, not __builtin_prefetch: GCC 12 deleted the builtin's loop from the
// inlined kernels, silently.)
// The address may lie past the weights (the last tiles prefetch beyond them): it is formed as
// an integer, and a prefetch never faults.
inline void prefetch_line(uintptr_t a) {
#if defined(__x86_64__)
  __asm__ volatile("prefetcht1 (%0)" : : "r"(a));
#else
  __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 2);
#endif
}
// Bytes from a tile's start to the start of the tile it prefetches.
__attribute__((always_inline)) inline int64_t prefetch_distance(int64_t tile_bytes) {
  return std::max(kTilesAhead, (kPrefetchMinBytes + tile_bytes - 1) / tile_bytes) * tile_bytes;
}
// Always inlined: a call inside a tile's loop clobbers every vector register, so GCC kept the
// accumulators in memory, storing all of them on every step even when the call was not taken
// (24 stores per 24 FMAs of the AVX-512 F32 tile: half its speed on the Xeon VM of session 25).
__attribute__((always_inline)) inline void prefetch_ahead(const uint8_t* tile_start, int64_t tile_bytes, int64_t begin,
                                                          int64_t end) {
  if (tile_bytes > kPrefetchMaxTileBytes) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(tile_start) + static_cast<uintptr_t>(prefetch_distance(tile_bytes));
  for (int64_t o = begin & ~int64_t{63}; o < end; o += 64) prefetch_line(p + static_cast<uintptr_t>(o));
}

// Bytes of prepared activations per token chunk: about half of a 1-2 MiB L2.
inline constexpr int64_t kChunkBytes = int64_t{512} << 10;

// Rows per tile when the range holds one token: Kern::kRDecode if the kernel names one (a
// taller tile amortizes the activation loads of decode over more rows), else kR. The tile
// shape does not change any output's arithmetic, so results stay independent of the batch.
template <class Kern>
constexpr int decode_rows() {
  if constexpr (requires { Kern::kRDecode; }) {
    return Kern::kRDecode;
  } else {
    return Kern::kR;
  }
}

template <class Kern>
void run(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr int kRD = decode_rows<Kern>();
  if (kRD != Kern::kR && t1 - t0 == 1) {
    int64_t r = r0;
    for (; r + kRD <= r1; r += kRD) Kern::template tile<kRD, 1>(j, r, t0);
    for (; r < r1; ++r) Kern::template tile<1, 1>(j, r, t0);
    return;
  }
  const int64_t per_token = std::max<int64_t>(1, j.cols * Kern::kActBytes);
  int64_t chunk = kChunkBytes / per_token / Kern::kT * Kern::kT;
  chunk = std::max<int64_t>(chunk, Kern::kT);
  for (int64_t tc = t0; tc < t1; tc += chunk) {
    const int64_t te = std::min(t1, tc + chunk);
    int64_t r = r0;
    for (; r + Kern::kR <= r1; r += Kern::kR) token_loop<Kern, Kern::kR>(j, r, tc, te);
    for (; r < r1; ++r) token_loop<Kern, 1>(j, r, tc, te);
  }
}

// Column blocks, for the float kernels (F32 / F16 / BF16 weights; Kern::kKStep columns per
// step, Kern::tile_part<R, T>(job, r, t, Part)). A row's dot product is summed in blocks of
// block_cols(K) columns: a vector of partial sums (16 lanes; AVX2: 8) within a block, reduced
// at its end and added to the output (y = block 0, y += block 1, ...). The block size depends
// only on K, so one
// token and many compute every output alike (bitwise), whichever loop order runs.
//
// The K-blocked prompt order. The order above keeps a tile's R weight rows in L1 while its T
// token rows stream from L2: T loads per step from L2, which on the Intel Xeon VM's two FMA
// ports held F32 to half the FMA peak. Here a token tile's activations of one block stay in L1
// while the row tiles of a panel stream their weights from L2 (R loads per step):
//   for each panel of rows               (the panel's weights of one block stay in L2)
//     for each column block              (kKBlockBytes of a token tile's activations)
//       [Pack: widen the panel's block of weights once, for every token tile]
//       for each tile of T tokens        (its activations of the block stay in L1 ...)
//         for each tile of R rows        (... while the panel's row tiles use them)
//           tile_part: the block's columns, reduced into y.
// Widening (F16 -> f32) is exact, so a packed block gives the same products.
struct Part {
  int64_t c0 = 0, c1 = 0;   // the column block
  bool first = true;        // y = the block's sums (else y += them)
  bool prefetch = true;     // software prefetch of the weights (prefetch_ahead)
  // Where the weights are: row r's column c at w + (r - w_r0) * w_rs + (c - w_c0) * element
  // bytes (the job's rows, or a packed block).
  const uint8_t* w = nullptr;
  uint64_t w_rs = 0;
  int64_t w_r0 = 0, w_c0 = 0;
};

inline constexpr int64_t kKBlockBytes = int64_t{24} << 10;   // a token tile's block of activations
inline constexpr int64_t kL2PanelBytes = int64_t{768} << 10;  // a panel's weights of one block

// Columns per block for rows of K: equal blocks (a multiple of the step, the last one shorter)
// of at most kKBlockBytes of a kT-token tile's activations.
template <class Kern>
constexpr int64_t block_cols(int64_t K) {
  constexpr int64_t S = Kern::kKStep;
  constexpr int64_t max_cols = std::max<int64_t>(S, kKBlockBytes / (Kern::kT * Kern::kActBytes) / S * S);
  const int64_t nkb = std::max<int64_t>(1, (K + max_cols - 1) / max_cols);
  return ((K + nkb - 1) / nkb + S - 1) / S * S;
}

// Block [c0, c1) of the job's own rows.
inline Part job_part(const MatmulJob& j, int64_t c0, int64_t c1, bool prefetch) {
  Part p;
  p.c0 = c0;
  p.c1 = c1;
  p.first = c0 == 0;
  p.prefetch = prefetch;
  p.w = j.w;
  p.w_rs = j.row_bytes;
  return p;
}

// tile<R, T> of a block kernel: every block of the row in turn (row tiles outer: tiles::run).
template <class Kern, int R, int T>
inline void tile_blocks(const MatmulJob& j, int64_t r, int64_t t) {
  const int64_t kc = block_cols<Kern>(j.cols);
  for (int64_t c0 = 0; c0 < j.cols; c0 += kc)
    Kern::template tile_part<R, T>(j, r, t, job_part(j, c0, std::min(j.cols, c0 + kc), true));
}

// No packing: the kernel reads the job's weights.
struct NoPack {
  static constexpr int64_t kBytes = 0;
};

// tile_part<R, rem> for a run-time rem in [1, T].
template <class Kern, int R, int T>
inline void part_rem(const MatmulJob& j, int64_t r, int64_t t, int64_t rem, const Part& p) {
  if constexpr (T > 0) {
    if (rem == T) {
      Kern::template tile_part<R, T>(j, r, t, p);
    } else {
      part_rem<Kern, R, T - 1>(j, r, t, rem, p);
    }
  }
}

// Pack (optional): kBytes per packed element (0: none) and
//   static void pack(const MatmulJob&, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* dst,
//                    uint64_t dst_rs)
// which writes rows [r0, r1) x columns [c0, c1) in the element type Kern reads.
template <class Kern, class Pack = NoPack>
void run_kblocked(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  constexpr int64_t R = Kern::kR, T = Kern::kT;
  const int64_t K = j.cols;
  const int64_t kc = block_cols<Kern>(K);
  // Bytes of one row's block as the tiles read it (the float types' rows hold K whole elements).
  const int64_t block_bytes = kc * (Pack::kBytes > 0 ? Pack::kBytes : static_cast<int64_t>(j.row_bytes) / K);
  int64_t panel = std::max<int64_t>(R, kL2PanelBytes / block_bytes / R * R);
  panel = std::min(panel, (r1 - r0 + R - 1) / R * R);
  const uint64_t pack_rs = static_cast<uint64_t>((kc * Pack::kBytes + 63) / 64 * 64);
  uint8_t* packed = nullptr;
  if constexpr (Pack::kBytes > 0) packed = reinterpret_cast<uint8_t*>(kernel_scratch(static_cast<int64_t>(pack_rs) * panel / 4));
  for (int64_t rp = r0; rp < r1; rp += panel) {
    const int64_t re = std::min(r1, rp + panel);
    for (int64_t c0 = 0; c0 < K; c0 += kc) {
      Part p = job_part(j, c0, std::min(K, c0 + kc), false);
      if constexpr (Pack::kBytes > 0) {
        Pack::pack(j, rp, re, p.c0, p.c1, packed, pack_rs);
        p.w = packed;
        p.w_rs = pack_rs;
        p.w_r0 = rp;
        p.w_c0 = p.c0;
      }
      for (int64_t t = t0; t < t1; t += T) {
        const int64_t nt = std::min(T, t1 - t);
        int64_t r = rp;
        for (; r + R <= re; r += R) part_rem<Kern, R, T>(j, r, t, nt, p);
        for (; r < re; ++r) part_rem<Kern, 1, T>(j, r, t, nt, p);
      }
    }
  }
}

}  // namespace triad::kernels::tiles
