// AVX-512 (VNNI) kernels for weights in the panel layout (panel_layout.h): Q4_0, Q5_0 and Q8_0
// in panels of 16 rows, every token count (one token to a prompt) through one tile, so a row's
// bits never depend on the batch.
//
// A tile is one panel x T <= 8 tokens. Lane r of every vector is row r: for each block b and
// each of its 8 code vectors k (4 bytes of every row), one vpdpbusd per token with the token's
// 4 activation bytes broadcast from memory; the int32 lanes then hold the 16 rows' exact block
// sums (started at -offset * sum(xq), the codes being unsigned: Q8_0's flipped by 128, Q5_0's
// 0..31, Q4_0's 0..15), and one convert, one scale multiply (the block's 16 fp16 d widened,
// times the token's dx broadcast) and one FMA add them to 16 row accumulators. Those are the
// tile's outputs: 16 consecutive floats per token, no horizontal sums.
// Same arithmetic as matmul_ref (matmul_impl.h), summed in block order per row:
//   y = sum_b fl(d_b * dx_b) * isum_b   (one FMA per block, in f32).
// Q8_0 tiles read the codes where they lie. Q4_0 / Q5_0 codes are widened (nibble masks; Q5_0's
// fifth bits one masked add): in registers, block by block, by each tile when a panel has at
// most kInlineWidenTiles token tiles (decode, batched decode); else once per panel into the
// Q8_0 panel's format (units of two blocks: 2 x 512 code bytes, then 2 x 16 fp16 d) in the
// thread's scratch, which every tile then reads (prompts). The codes are the same either way. A token tile's activations are gathered block by block (T x 32 codes, T starts,
// T scales) once per call, so that a tile addresses every token at a constant offset.
// Thread-safety: writes only the outputs of its rows and tokens; scratch is thread-local.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "kernels/matmul_avx512_common.h"
#include "kernels/matmul_impl.h"
#include "kernels/panel_layout.h"

namespace triad::kernels::avx512 {
namespace {

constexpr int kMaxT = 8;          // tokens per tile: 8 int32 sums + 8 float accumulators + operands
constexpr int64_t kUnit = 1088;   // a Q8_0-format unit of two blocks: 2 x 512 codes + 2 x 32 scales
// Token tiles per panel up to which Q4_0 / Q5_0 codes are widened in registers for each tile
// (beyond, the panel is widened once into scratch).
constexpr int64_t kInlineWidenTiles = 2;
// The first pass over a panel (its first token tile, or widen()) prefetches the weights
// kPrefetchAhead bytes ahead into L2: the panels of a row range lie one after another, so the
// distance runs on across them. A batched decode step's tiles otherwise wait on memory
// (matmul_bench --stream-batch 1, 16 tokens: 1.3-2x faster with it; one token: on par with
// the lane kernels only with it, the start of each row range prefetched too).
constexpr int64_t kPrefetchAhead = 8192;

// Prefetches one unit of `bytes` kPrefetchAhead ahead of p.
inline void prefetch_ahead(const uint8_t* p, int64_t bytes) {
  for (int64_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead + l), _MM_HINT_T1);
}

// A token tile's activations for block b, at b * act_block_bytes(T): T x 32 codes, then T
// int32 starts (-offset * sum of the codes), then T float scales dx.
constexpr int64_t act_block_bytes(int t) { return 40 * static_cast<int64_t>(t); }

struct PanelScratch {
  AlignedBuffer<uint8_t> panel;  // a widened Q4_0 / Q5_0 panel in the Q8_0 format
  AlignedBuffer<uint8_t> acts;   // the call's token tiles, gathered
};
PanelScratch& panel_scratch() {
  thread_local PanelScratch s;
  return s;
}

// One block of a tile: codes (8 vectors), d (16 fp16), a: the tile's gathered activations.
template <int T>
__attribute__((always_inline)) inline void block(const uint8_t* codes, const uint8_t* d, const uint8_t* a,
                                                 __m512 (&acc)[T]) {
  const int32_t* start = reinterpret_cast<const int32_t*>(a + 32 * T);
  const float* dx = reinterpret_cast<const float*>(a + 36 * T);
  // Up to 2 tokens, even and odd vectors sum in two chains (the vpdpbusd latency would bound a
  // single one); integer sums, so the split changes no bit.
  constexpr int kChains = T <= 2 ? 2 : 1;
  __m512i is[kChains][T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    is[0][t] = _mm512_set1_epi32(start[t]);
    if constexpr (kChains == 2) is[1][t] = _mm512_setzero_si512();
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i w = _mm512_loadu_si512(codes + 64 * k);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      int32_t x4;
      std::memcpy(&x4, a + 32 * t + 4 * k, 4);
      is[k % kChains][t] = _mm512_dpbusd_epi32(is[k % kChains][t], w, _mm512_set1_epi32(x4));
    }
  }
  if constexpr (kChains == 2)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) is[0][t] = _mm512_add_epi32(is[0][t], is[1][t]);
  const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[0][t]), _mm512_mul_ps(ws, _mm512_set1_ps(dx[t])), acc[t]);
}

// Nibble vector v of a Q4_0 / Q5_0 block (qs, masks: panel_layout.h) widened into its code
// vectors v (low nibbles) and v + 4 (high nibbles), unsigned.
template <bool kQ5>
__attribute__((always_inline)) inline void widen_vector(const uint8_t* qs, const uint8_t* masks, int v, __m512i& lo,
                                                        __m512i& hi) {
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  const __m512i q = _mm512_loadu_si512(qs + 64 * v);
  lo = _mm512_and_si512(q, lo4);
  hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo4);
  if constexpr (kQ5) {
    const __m512i b4 = _mm512_set1_epi8(0x10);
    uint64_t mlo, mhi;
    std::memcpy(&mlo, masks + 8 * v, 8);
    std::memcpy(&mhi, masks + 8 * (v + 4), 8);
    lo = _mm512_mask_add_epi8(lo, _cvtu64_mask64(mlo), lo, b4);  // codes < 16: + 0x10 sets bit 4
    hi = _mm512_mask_add_epi8(hi, _cvtu64_mask64(mhi), hi, b4);
  }
}

// One Q4_0 / Q5_0 block of a tile, widened in registers: qs (4 nibble vectors), masks (Q5_0:
// 8 fifth-bit masks), d, a as above. The same codes as widen()'s (widen_vector), so the same sums.
template <int T, bool kQ5>
__attribute__((always_inline)) inline void block_nibbles(const uint8_t* qs, const uint8_t* masks, const uint8_t* d,
                                                         const uint8_t* a, __m512 (&acc)[T]) {
  const int32_t* start = reinterpret_cast<const int32_t*>(a + 32 * T);
  const float* dx = reinterpret_cast<const float*>(a + 36 * T);
  __m512i is[T], ih[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    is[t] = _mm512_set1_epi32(start[t]);
    ih[t] = _mm512_setzero_si512();
  }
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) {
    __m512i lo, hi;
    widen_vector<kQ5>(qs, masks, v, lo, hi);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      int32_t xl, xh;
      std::memcpy(&xl, a + 32 * t + 4 * v, 4);
      std::memcpy(&xh, a + 32 * t + 16 + 4 * v, 4);
      is[t] = _mm512_dpbusd_epi32(is[t], lo, _mm512_set1_epi32(xl));
      if constexpr (T <= 2) {  // a second chain, as in block()
        ih[t] = _mm512_dpbusd_epi32(ih[t], hi, _mm512_set1_epi32(xh));
      } else {
        is[t] = _mm512_dpbusd_epi32(is[t], hi, _mm512_set1_epi32(xh));
      }
    }
  }
  if constexpr (T <= 2)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) is[t] = _mm512_add_epi32(is[t], ih[t]);
  const __m512 ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d)));
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[t]), _mm512_mul_ps(ws, _mm512_set1_ps(dx[t])), acc[t]);
}

// Rows of one panel x T tokens: y[t * ys + r] for r < 16. The panel is in kType's layout
// (Q4_0 / Q5_0: widened in registers, block by block) or, for kType Q8_0, in the Q8_0 format
// (a Q8_0 panel, or a Q4_0 / Q5_0 one widened into it by widen()); fastest 64-byte aligned.
template <int T, DType kType>
void tile(const uint8_t* panel, int64_t nb, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  constexpr bool kQ8 = kType == DType::kQ8_0, kQ5 = kType == DType::kQ5_0;
  constexpr int64_t kBB = kQ8 ? 34 : kQ5 ? 22 : 18, kCodes = kQ8 ? 512 : 256, kMasks = kQ5 ? 64 : 0;
  constexpr int64_t kAB = act_block_bytes(T);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  auto one = [&](const uint8_t* unit, int64_t n, int64_t i, int64_t b) {
    const uint8_t* d = unit + n * (kCodes + kMasks) + 32 * i;
    if constexpr (kQ8) {
      block<T>(unit + kCodes * i, d, acts + b * kAB, acc);
    } else {
      block_nibbles<T, kQ5>(unit + kCodes * i, unit + n * kCodes + kMasks * i, d, acts + b * kAB, acc);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* unit = panel + (b / 2) * 32 * kBB;
    if (prefetch) prefetch_ahead(unit, 32 * kBB);
    one(unit, 2, 0, b);
    one(unit, 2, 1, b + 1);
  }
  if (b < nb) one(panel + (b / 2) * 32 * kBB, 1, 0, b);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
}

template <DType kType>
void tile_n(int n, const uint8_t* panel, int64_t nb, const uint8_t* acts, float* y, int64_t ys, bool prefetch) {
  switch (n) {
#define TRIAD_PANEL_TILE(N) \
  case N: tile<N, kType>(panel, nb, acts, y, ys, prefetch); return;
    TRIAD_PANEL_TILE(1) TRIAD_PANEL_TILE(2) TRIAD_PANEL_TILE(3) TRIAD_PANEL_TILE(4)
    TRIAD_PANEL_TILE(5) TRIAD_PANEL_TILE(6) TRIAD_PANEL_TILE(7) TRIAD_PANEL_TILE(8)
#undef TRIAD_PANEL_TILE
    default: fail("panel tile of ", n, " tokens");
  }
}

// Tokens [t0, t0 + n) of the job gathered for a tile of n tokens (offset: the type's code offset).
void gather(const MatmulJob& j, int64_t t0, int n, int off, uint8_t* out) {
  const int64_t nb = j.cols / 32, ab = act_block_bytes(n);
  for (int t = 0; t < n; ++t) {
    const int8_t* q = j.aq + (t0 + t) * j.aq_stride;
    const float* d = j.ad + (t0 + t) * j.as_stride;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* o = out + b * ab;
      std::memcpy(o + 32 * t, q + 32 * b, 32);
      int32_t sum = 0;
      for (int e = 0; e < 32; ++e) sum += q[32 * b + e];
      const int32_t start = -off * sum;
      std::memcpy(o + 32 * n + 4 * t, &start, 4);
      std::memcpy(o + 36 * n + 4 * t, d + b, 4);
    }
  }
}

// A Q4_0 / Q5_0 panel widened into the Q8_0 panel format (codes unsigned, 0..15 / 0..31).
template <bool kQ5>
void widen(const uint8_t* panel, int64_t nb, uint8_t* out) {
  constexpr int64_t kBB = kQ5 ? 22 : 18;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t u = b / 2, n = std::min<int64_t>(2, nb - 2 * u), i = b & 1;
    const uint8_t* unit = panel + u * 32 * kBB;
    const uint8_t* codes = unit + i * 256;
    const uint8_t* masks = unit + n * 256 + i * 64;
    const uint8_t* scales = unit + n * 256 + (kQ5 ? n * 64 : 0) + i * 32;
    if (i == 0) prefetch_ahead(unit, 32 * kBB);
    uint8_t* o = out + u * kUnit + i * 512;
    for (int v = 0; v < 4; ++v) {
      __m512i lo, hi;
      widen_vector<kQ5>(codes, masks, v, lo, hi);
      _mm512_store_si512(o + 64 * v, lo);
      _mm512_store_si512(o + 64 * (v + 4), hi);
    }
    std::memcpy(out + u * kUnit + n * 512 + i * 32, scales, 32);
  }
}

template <DType kType>
void run(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  TRIAD_CHECK(r0 % kPanelRows == 0 && r1 % kPanelRows == 0, "panel rows [", r0, ", ", r1, ") are not whole panels");
  constexpr int kOff = kType == DType::kQ8_0 ? 128 : kType == DType::kQ5_0 ? 16 : 8;
  const int64_t nb = j.cols / 32;
  PanelScratch& scr = panel_scratch();
  const int64_t wide = (nb + 1) / 2 * kUnit;
  if (kType != DType::kQ8_0 && static_cast<int64_t>(scr.panel.size()) < wide) scr.panel.resize(static_cast<size_t>(wide));
  // Token chunks whose gathered activations stay in L2 (~256 KiB) while every panel passes.
  const int64_t per_token = act_block_bytes(1) * nb;
  const int64_t chunk = std::max<int64_t>(kMaxT, (int64_t{256} << 10) / per_token / kMaxT * kMaxT);
  const int64_t abytes = std::min(chunk, t1 - t0) * per_token;
  if (static_cast<int64_t>(scr.acts.size()) < abytes) scr.acts.resize(static_cast<size_t>(abytes));
  for (int64_t tc = t0; tc < t1; tc += chunk) {
    const int64_t te = std::min(t1, tc + chunk), n = te - tc;
    const int64_t parts = (n + kMaxT - 1) / kMaxT;  // token tiles of sizes within one of each other
    auto part = [&](int64_t p) { return tc + p * n / parts; };
    for (int64_t p = 0; p < parts; ++p)
      gather(j, part(p), static_cast<int>(part(p + 1) - part(p)), kOff, scr.acts.data() + (part(p) - tc) * per_token);
    // Few token tiles widen Q4_0 / Q5_0 codes in registers for each; more widen each panel once.
    const bool widened = kType != DType::kQ8_0 && parts > kInlineWidenTiles;
    {  // the first passes prefetch kPrefetchAhead bytes ahead: start the stream
      const uint8_t* first = j.w + static_cast<uint64_t>(r0) * j.row_bytes;
      const int64_t len = std::min<int64_t>(kPrefetchAhead, (r1 - r0) * static_cast<int64_t>(j.row_bytes));
      for (int64_t l = 0; l < len; l += 64) _mm_prefetch(reinterpret_cast<const char*>(first + l), _MM_HINT_T1);
    }
    for (int64_t r = r0; r < r1; r += kPanelRows) {
      const uint8_t* panel = j.w + static_cast<uint64_t>(r) * j.row_bytes;
      if (widened) {
        widen<kType == DType::kQ5_0>(panel, nb, scr.panel.data());
        panel = scr.panel.data();
      }
      for (int64_t p = 0; p < parts; ++p) {
        const int nt = static_cast<int>(part(p + 1) - part(p));
        uint8_t* acts = scr.acts.data() + (part(p) - tc) * per_token;
        float* y = j.y + part(p) * j.y_stride + r;
        if (widened) {
          tile_n<DType::kQ8_0>(nt, panel, nb, acts, y, j.y_stride, false);
        } else {
          tile_n<kType>(nt, panel, nb, acts, y, j.y_stride, p == 0);
        }
      }
    }
  }
}

}  // namespace

void matmul_rows_panels(const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  switch (j.type) {
    case DType::kQ4_0: run<DType::kQ4_0>(j, r0, r1, t0, t1); return;
    case DType::kQ5_0: run<DType::kQ5_0>(j, r0, r1, t0, t1); return;
    case DType::kQ8_0: run<DType::kQ8_0>(j, r0, r1, t0, t1); return;
    default: fail("no panel kernels for ", dtype_name(j.type));
  }
}

}  // namespace triad::kernels::avx512
