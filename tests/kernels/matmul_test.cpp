// Tests of the matmul kernels (kernels/matmul.h, matmul_impl.h, act_quant.h).
//
// MatmulTest.TableOfShapesOnEveryIsa is the table-driven test: every {type, rows, cols,
// n_tokens, strides, threads} case runs on every ISA level this CPU supports and checks
//  (a) level vs matmul_ref:  |y - y_ref| <= 2e-6 * S            S = sum_c |w_c| * |x_c|
//      (w dequantized, x the f32 input). Both evaluate the same algorithm; only the f32
//      accumulation order differs, whose error is a small multiple of eps * S per output.
//  (b) matmul_ref vs the exact product (double dot of dequantize_row_ref(w) with x):
//      |y_ref - y_exact| <= E + 1e-5 * S, where E bounds the activation rounding:
//        quantized weights: E = 1.01 * sum_c |w_c| * d_b(c) / 2   (d_b = amax of x's 32-block
//                           / 127: a Q8 code is off by at most half a step)
//        BF16 weights:      E = 1.01 * 2^-8 * S       (bf16 has 8 significant bits: round-
//                           to-nearest is off by at most 2^-8 relative)
//        F32 / F16:         E = 0.
// Weights are random raw blocks (every code pattern, incl. Q8_0 -128) with finite random fp16
// scales; activations are N(0,1) with outliers and an all-zero block.
// The other tests check bit-exactness of the activation quantizers on every level and the
// argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/act_quant.h"
#include "kernels/lane_layout.h"
#include "kernels/panel_layout.h"
#include "kernels/matmul.h"
#include "kernels/matmul_impl.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/fp8.h"

namespace triad::kernels {
namespace {

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512})
    if (matmul_isa_supported(l)) out.push_back(l);
  return out;
}

// Offsets of the fp16 scale fields within one block of t (set to finite values in tests).
std::vector<int> fp16_fields(DType t) {
  switch (t) {
    case DType::kQ4_0: case DType::kQ5_0: case DType::kQ8_0: return {0};
    case DType::kQ4_1: case DType::kQ5_1: case DType::kQ4_K: case DType::kQ5_K: return {0, 2};
    case DType::kQ6_K: return {208};
    case DType::kQ2_K: return {80, 82};
    case DType::kQ3_K: return {108};
    case DType::kIQ4_NL: case DType::kIQ4_XS: return {0};
    default: return {};
  }
}

std::vector<uint8_t> random_weights(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  std::vector<uint8_t> w(rb * static_cast<uint64_t>(rows));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255);
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = nd(rng) * 0.05f;
      if (t == DType::kF32) {
        std::memcpy(w.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = t == DType::kF16 ? f32_to_fp16(v) : f32_to_bf16(v);
        std::memcpy(w.data() + 2 * i, &h, 2);
      }
    }
    return w;
  }
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  const DTypeTraits& tr = traits(t);
  std::uniform_real_distribution<float> mag(0.002f, 0.03f);
  for (uint64_t blk = 0; blk < w.size() / tr.block_bytes; ++blk) {
    for (int off : fp16_fields(t)) {
      float v = mag(rng);
      if (byte(rng) & 1) v = -v;
      const uint16_t h = f32_to_fp16(v);
      std::memcpy(w.data() + blk * tr.block_bytes + off, &h, 2);
    }
    // MXFP4's exponent byte: scales 2^-13 .. 2^-5 (like the fp16 scales above).
    if (t == DType::kMXFP4) w[blk * tr.block_bytes] = static_cast<uint8_t>(115 + byte(rng) % 9);
  }
  return w;
}

// The rows of w (rows x cols of type t, GGUF blocks) re-laid into the lane layout.
std::vector<uint8_t> lanes_of(DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  std::vector<uint8_t> l(w.size());
  for (int64_t r = 0; r < rows; ++r) row_to_lanes(t, w.data() + r * rb, cols, l.data() + r * rb);
  return l;
}

// The rows of w (rows x cols of type t, GGUF blocks; rows a multiple of 16) re-laid into panels.
std::vector<uint8_t> panels_of(DType t, const std::vector<uint8_t>& w, int64_t rows, int64_t cols) {
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  std::vector<uint8_t> p(w.size());
  for (int64_t r = 0; r < rows; r += kPanelRows) panel_from_rows(t, w.data() + r * rb, cols, p.data() + r * rb);
  return p;
}

// Each of the first n_max tokens of x (rows of w.cols) alone, then batches of every n in ns on
// one and two threads: a batched row must equal the token's row alone, bitwise or (bitwise
// false) within 1e-5 of the token's largest output.
void expect_rows_alone_as_batched(IsaLevel level, const WeightMatrix& w, const std::vector<float>& x,
                                  int64_t n_max, std::initializer_list<int64_t> ns, bool bitwise,
                                  const std::string& what) {
  ThreadPool pool1(1), pool2(2);
  const int64_t rows = w.rows, cols = w.cols;
  std::vector<float> alone(static_cast<size_t>(n_max * rows));
  for (int64_t i = 0; i < n_max; ++i)
    matmul_isa(level, w, x.data() + i * cols, 1, cols, alone.data() + i * rows, rows, pool1);
  for (const int64_t n : ns) {
    for (ThreadPool* pool : {&pool1, &pool2}) {
      std::vector<float> y(static_cast<size_t>(n * rows));
      matmul_isa(level, w, x.data(), n, cols, y.data(), rows, *pool);
      const std::string where = what + " level " + std::to_string(static_cast<int>(level)) + " n=" +
                                std::to_string(n) + " threads=" + std::to_string(pool->size());
      if (bitwise) {
        ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), y.size() * sizeof(float))) << where;
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        float amax = 0;
        for (int64_t r = 0; r < rows; ++r) amax = std::max(amax, std::fabs(alone[i * rows + r]));
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_NEAR(y[i * rows + r], alone[i * rows + r], 1e-5f * amax) << where << " row " << i;
      }
    }
  }
}

struct Case {
  DType type;
  int64_t rows, cols, n_tokens;
  int64_t x_pad = 0, y_pad = 0;  // stride - cols, stride - rows
  int threads = 1;
};

std::string describe(const Case& c) {
  return std::string(dtype_name(c.type)) + " rows=" + std::to_string(c.rows) +
         " cols=" + std::to_string(c.cols) + " n=" + std::to_string(c.n_tokens) +
         " xpad=" + std::to_string(c.x_pad) + " ypad=" + std::to_string(c.y_pad) +
         " threads=" + std::to_string(c.threads);
}

std::vector<Case> table() {
  std::vector<Case> cases;
  const DType quant[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                         DType::kQ8_0, DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL,
                         DType::kIQ4_XS, DType::kMXFP4, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (DType t : quant) {
    const int64_t bs = traits(t).block_size;
    // cols = one block; odd block counts (a lone 32-block tail for the 32-block types).
    cases.push_back({t, 1, bs, 1, 0, 0, 1});
    cases.push_back({t, 7, bs, 5, 3, 1, 2});
    cases.push_back({t, 13, 3 * bs, 17, 0, 0, 2});
    cases.push_back({t, 37, 2 * bs, 64, 32, 7, 2});
    cases.push_back({t, 64, bs == 32 ? 896 : 1024, 2, 0, 0, 1});
    cases.push_back({t, 21, bs == 32 ? 4864 : 4864 / 256 * 256, 3, 5, 0, 2});
    // Many tokens (the packed prompt kernels): realistic widths, fewer rows than a tile.
    cases.push_back({t, 6, bs == 32 ? 896 : 4864 / 256 * 256, 9, 0, 1, 2});
    cases.push_back({t, 3, bs == 32 ? 4864 : 1280, 8, 0, 0, 1});
    if (panel_layout_supported(t)) {  // whole panels: one block, odd block counts, 16 tokens, a prompt
      cases.push_back({t, 16, bs, 9, 0, 0, 1});
      cases.push_back({t, 32, 3 * bs, 17, 0, 0, 2});
      cases.push_back({t, 48, bs == 32 ? 896 : 1792, 16, 3, 5, 2});
      cases.push_back({t, 16, 4864 / bs * bs, 70, 0, 0, 2});
      for (int n = 1; n <= 8; ++n) cases.push_back({t, 32, 2 * bs, n, 0, 0, 1});  // every tile size
    }
  }
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    cases.push_back({t, 1, 1, 1, 0, 0, 1});
    cases.push_back({t, 5, 7, 2, 1, 3, 2});
    cases.push_back({t, 9, 33, 5, 0, 0, 1});
    cases.push_back({t, 13, 100, 17, 4, 0, 2});
    cases.push_back({t, 30, 896, 64, 0, 2, 2});
    cases.push_back({t, 11, 4864, 3, 16, 0, 1});
    // The K-blocked prompt order (matmul_tiles.h run_kblocked, from 32 tokens on): several
    // column blocks with a masked tail, row panels with a leftover row, padded strides.
    cases.push_back({t, 41, 2090, 37, 6, 3, 2});
    cases.push_back({t, 9, 4864, 70, 0, 0, 1});
  }
  return cases;
}

TEST(MatmulTest, TableOfShapesOnEveryIsa) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> pct(0, 99);
  const std::vector<IsaLevel> isas = levels();
  ThreadPool pool1(1), pool2(2);
  for (const Case& c : table()) {
    SCOPED_TRACE(describe(c));
    const std::vector<uint8_t> w = random_weights(c.type, c.rows, c.cols, rng);
    const int64_t xs = c.cols + c.x_pad, ys = c.rows + c.y_pad;
    std::vector<float> x(static_cast<size_t>(c.n_tokens * xs), 0.f);
    for (int64_t t = 0; t < c.n_tokens; ++t)
      for (int64_t i = 0; i < c.cols; ++i) {
        float v = nd(rng);
        if (pct(rng) == 0) v *= 20.f;  // outliers
        x[t * xs + i] = v;
      }
    if (c.cols >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.f);  // an all-zero block
    const WeightMatrix wm{c.type, w.data(), c.rows, c.cols};

    // Exact product and bounds from the dequantized weights.
    std::vector<float> deq(static_cast<size_t>(c.cols));
    std::vector<double> exact(static_cast<size_t>(c.rows * c.n_tokens)),
        mag(exact.size()), act_err(exact.size());
    const uint64_t rb = row_bytes(c.type, static_cast<uint64_t>(c.cols));
    const bool quantized = act_kind(c.type) == ActKind::kQ8 || act_kind(c.type) == ActKind::kQ8Sums16;
    const int64_t ablock = 32;  // activation block
    for (int64_t r = 0; r < c.rows; ++r) {
      dequantize_row_ref(c.type, w.data() + r * rb, deq.data(), c.cols);
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        const float* xt = x.data() + t * xs;
        double e = 0, s = 0, q = 0;
        for (int64_t b = 0; b < c.cols; b += ablock) {
          float amax = 0;
          for (int64_t i = b; i < std::min(c.cols, b + ablock); ++i) amax = std::max(amax, std::fabs(xt[i]));
          for (int64_t i = b; i < std::min(c.cols, b + ablock); ++i) {
            e += double(deq[i]) * xt[i];
            s += std::fabs(double(deq[i]) * xt[i]);
            q += std::fabs(double(deq[i])) * amax / 127.0 / 2.0;
          }
        }
        const size_t o = static_cast<size_t>(r * c.n_tokens + t);
        exact[o] = e;
        mag[o] = s;
        act_err[o] = quantized ? 1.01 * q : (c.type == DType::kBF16 ? 1.01 * s / 256.0 : 0.0);
      }
    }

    const float kSentinel = -12345.f;
    std::vector<float> yref(static_cast<size_t>(c.n_tokens * ys), kSentinel);
    matmul_ref(wm, x.data(), c.n_tokens, xs, yref.data(), ys);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        const size_t o = static_cast<size_t>(r * c.n_tokens + t);
        const double bound = act_err[o] + 1e-5 * mag[o];
        ASSERT_LE(std::fabs(yref[t * ys + r] - exact[o]), bound)
            << "ref vs exact at row " << r << " token " << t << " (exact " << exact[o] << ")";
      }
    for (int64_t t = 0; t < c.n_tokens; ++t)
      for (int64_t r = c.rows; r < ys; ++r) ASSERT_EQ(yref[t * ys + r], kSentinel);

    // The same weights in the lane layout (lane_layout.h) and in panels (panel_layout.h), where
    // the type has them: every level must give what it gives on the GGUF blocks within the same
    // bound (AVX-512 runs their kernels, AVX2 their panels too; where a
    // level has no kernel for a layout it lays the rows back: bitwise its block results). The
    // AVX2 and AVX-512 panel kernels do the same arithmetic: bitwise equal.
    const std::vector<uint8_t> wl = lane_layout_supported(c.type) ? lanes_of(c.type, w, c.rows, c.cols)
                                                                   : std::vector<uint8_t>();
    const std::vector<uint8_t> wp = panel_layout_fits(c.type, c.rows) ? panels_of(c.type, w, c.rows, c.cols)
                                                                       : std::vector<uint8_t>();
    enum Layout { kBlocks, kLanes, kPanels };
    std::vector<float> y_panels_avx2;
    for (IsaLevel level : isas) {
      SCOPED_TRACE(isa_name(level));
      std::vector<float> yb;
      for (const Layout layout : {kBlocks, kLanes, kPanels}) {
        const bool lanes = layout == kLanes;
        if ((lanes && wl.empty()) || (layout == kPanels && wp.empty())) continue;
        SCOPED_TRACE(layout == kBlocks ? "GGUF blocks" : lanes ? "lane layout" : "panels");
        WeightMatrix wx = wm;
        if (lanes) {
          wx.data = wl.data();
          wx.lanes = true;
        } else if (layout == kPanels) {
          wx.data = wp.data();
          wx.panels = true;
        }
        std::vector<float> y(static_cast<size_t>(c.n_tokens * ys), kSentinel);
        matmul_isa(level, wx, x.data(), c.n_tokens, xs, y.data(), ys, c.threads == 1 ? pool1 : pool2);
        for (int64_t t = 0; t < c.n_tokens; ++t) {
          for (int64_t r = 0; r < c.rows; ++r) {
            const size_t o = static_cast<size_t>(r * c.n_tokens + t);
            ASSERT_LE(std::fabs(y[t * ys + r] - yref[t * ys + r]), 2e-6 * mag[o] + 1e-30)
                << "row " << r << " token " << t << ": " << y[t * ys + r] << " vs ref "
                << yref[t * ys + r];
          }
          for (int64_t r = c.rows; r < ys; ++r) ASSERT_EQ(y[t * ys + r], kSentinel) << "stride gap";
        }
        // (A type whose panels only AVX2 runs would run them on AVX-512 with the AVX2 kernels.)
        const bool panel_kernels = layout == kPanels && (matmul_runs_panels(level, c.type) ||
                                                         (level == IsaLevel::kAvx512 && matmul_runs_panels(IsaLevel::kAvx2, c.type)));
        if (layout == kBlocks) {
          yb = y;
        } else if ((lanes && level != IsaLevel::kAvx512) || (layout == kPanels && !panel_kernels) ||
                   (lanes && c.n_tokens >= 8)) {
          // Laid back where the level has no kernels for the layout; on AVX-512 from 8 tokens the
          // blocks and lanes run the packed tiles, whose widened groups must hold the same values.
          ASSERT_EQ(0, std::memcmp(y.data(), yb.data(), y.size() * sizeof(float))) << "the layouts differ";
        }
        if (panel_kernels && level == IsaLevel::kAvx2) y_panels_avx2 = y;
        if (panel_kernels && level == IsaLevel::kAvx512 && !y_panels_avx2.empty()) {
          ASSERT_EQ(0, std::memcmp(y.data(), y_panels_avx2.data(), y.size() * sizeof(float)))
              << "the AVX2 and AVX-512 panel kernels differ";
        }
      }
    }
    // matmul_ref on the lane layout or panels lays the rows back: its block result.
    for (const std::vector<uint8_t>* re : {&wl, &wp}) {
      if (re->empty()) continue;
      std::vector<float> yl(static_cast<size_t>(c.n_tokens * ys), kSentinel);
      WeightMatrix wr{c.type, re->data(), c.rows, c.cols};
      (re == &wl ? wr.lanes : wr.panels) = true;
      matmul_ref(wr, x.data(), c.n_tokens, xs, yl.data(), ys);
      ASSERT_EQ(0, std::memcmp(yl.data(), yref.data(), yl.size() * sizeof(float)));
    }
  }
}

// MXFP4's block scale e8m0_half(e) = 2^(e - 128) for every exponent byte, the subnormal e = 0, 1
// and the largest, e = 255, included: the lane-layout kernels form it arithmetically, the GGUF
// layout's from the kE8m0Half table. From 8 tokens both layouts run the same packed tiles, so
// their outputs must agree bitwise; each is also checked against matmul_ref. Block b of row r has
// e = 16b + r, and column block b of the activations is scaled by 2^(120 - 16b), so every block's
// products are of order one (none underflows to zero or overflows).
TEST(MatmulTest, Mxfp4EveryExponentByte) {
  if (!matmul_isa_supported(IsaLevel::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(31);
  const int64_t rows = 16, cols = 512, n = 9, nb = cols / 32;
  std::vector<uint8_t> w = random_weights(DType::kMXFP4, rows, cols, rng);
  const uint64_t rb = row_bytes(DType::kMXFP4, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < nb; ++b) w[r * rb + b * 17] = static_cast<uint8_t>(16 * b + r);
  const std::vector<uint8_t> wl = lanes_of(DType::kMXFP4, w, rows, cols);
  std::vector<float> x(static_cast<size_t>(n * cols));
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < n * cols; ++i) x[i] = std::ldexp(nd(rng), 120 - 16 * static_cast<int>(i % cols / 32));
  ThreadPool pool(1);
  std::vector<float> yg(static_cast<size_t>(n * rows)), yl(yg.size()), yref(yg.size());
  matmul_isa(IsaLevel::kAvx512, WeightMatrix{DType::kMXFP4, w.data(), rows, cols}, x.data(), n, cols, yg.data(), rows, pool);
  matmul_isa(IsaLevel::kAvx512, WeightMatrix{DType::kMXFP4, wl.data(), rows, cols, nullptr, true}, x.data(), n, cols,
             yl.data(), rows, pool);
  EXPECT_EQ(0, std::memcmp(yg.data(), yl.data(), yg.size() * sizeof(float)));
  matmul_ref(WeightMatrix{DType::kMXFP4, w.data(), rows, cols}, x.data(), n, cols, yref.data(), rows);
  std::vector<float> deq(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_ref(DType::kMXFP4, w.data() + r * rb, deq.data(), cols);
    for (int64_t t = 0; t < n; ++t) {
      double mag = 0;
      for (int64_t c = 0; c < cols; ++c) mag += std::fabs(double(deq[c]) * x[t * cols + c]);
      ASSERT_TRUE(std::isfinite(yl[t * rows + r]));
      ASSERT_LE(std::fabs(yl[t * rows + r] - yref[t * rows + r]), 2e-6 * mag + 1e-30) << "row " << r << " token " << t;
    }
  }
}

// One panel p of the 16 rows w: not the rows' bytes in place, back to them by panel_to_rows,
// and each row by row_from_panel.
void expect_panel_round_trip(DType t, const std::vector<uint8_t>& w, const std::vector<uint8_t>& p, int64_t cols) {
  ASSERT_NE(p, w);
  std::vector<uint8_t> back(w.size());
  panel_to_rows(t, p.data(), cols, back.data());
  ASSERT_EQ(back, w);
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
  std::vector<uint8_t> row(rb);
  for (int i = 0; i < kPanelRows; ++i) {
    row_from_panel(t, p.data(), i, cols, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), w.data() + i * rb, rb)) << "row " << i;
  }
}

// The panel layout is a bijection on 16 rows' bytes: from_rows then to_rows gives the blocks
// back (one block, odd and even block counts: a lone last block), row_from_panel gives each row,
// and a few bytes are where panel_layout.h says they are: a Q8_0 code flipped by 128 in its code
// vector, a nibble byte, a fifth bit in its mask, the scales after a unit's codes (and masks),
// the minimums after the scales, and the second unit after 32 block sizes.
TEST(MatmulTest, PanelLayoutRoundTripsAndMatchesItsSpecification) {
  std::mt19937 rng(6);
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL}) {
    ASSERT_TRUE(panel_layout_supported(t));
    EXPECT_TRUE(panel_layout_fits(t, 32));
    EXPECT_FALSE(panel_layout_fits(t, 24));
    for (int64_t cols : {int64_t{32}, int64_t{96}, int64_t{896}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " cols=" + std::to_string(cols));
      const std::vector<uint8_t> w = random_weights(t, kPanelRows, cols, rng);
      const std::vector<uint8_t> p = panels_of(t, w, kPanelRows, cols);
      expect_panel_round_trip(t, w, p, cols);
      if (HasFatalFailure()) return;
      const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
      if (cols < 896) continue;  // block 3 below: the second of unit 1 (two whole units)
      const int bb = static_cast<int>(traits(t).block_bytes);
      const int64_t r = 5, b = 3;  // row 5, block 3: the second block of unit 1
      const uint8_t* blk = w.data() + r * rb + b * bb;
      const uint8_t* unit = p.data() + 32 * bb;
      const int code_part = t == DType::kQ8_0 ? 512 : 256;
      const bool fifth = t == DType::kQ5_0 || t == DType::kQ5_1, mins = t == DType::kQ4_1 || t == DType::kQ5_1;
      const int qh = mins ? 4 : 2, qs = qh + (fifth ? 4 : 0);  // GGUF: d, (m), (qh), qs
      if (t == DType::kQ8_0) {  // element 13: code vector 3, byte 4 * 5 + 1
        EXPECT_EQ(unit[code_part + 64 * 3 + 4 * r + 1], blk[2 + 13] ^ 0x80);
      } else {  // qs[6]: vector 1, byte 4 * 5 + 2
        EXPECT_EQ(unit[code_part + 64 * 1 + 4 * r + 2], blk[qs + 6]);
      }
      if (fifth) {  // element 22's fifth bit: mask 5, bit 4 * 5 + 2
        const uint8_t* masks = unit + 2 * code_part + 64;
        EXPECT_EQ((masks[8 * 5 + 22 / 8] >> (22 % 8)) & 1, (blk[qh + 22 / 8] >> (22 % 8)) & 1);
      }
      const uint8_t* scales = unit + 2 * code_part + (fifth ? 128 : 0) + 32;
      EXPECT_EQ(scales[2 * r], blk[0]);
      EXPECT_EQ(scales[2 * r + 1], blk[1]);
      if (mins) {  // m after both blocks' scales
        EXPECT_EQ(scales[64 + 2 * r], blk[2]);
        EXPECT_EQ(scales[64 + 2 * r + 1], blk[3]);
      }
    }
  }
  EXPECT_FALSE(panel_layout_supported(DType::kMXFP4));
  EXPECT_THROW(row_from_panel(DType::kQ8_0, nullptr, 16, 32, nullptr), Error);
}

// The K-quant panels (Q4_K, Q5_K, Q6_K, IQ4_XS, Q2_K, Q3_K) are a bijection too (one super-block, odd and even
// counts: a lone last Q6_K block), and a few bytes are where panel_layout.h says they are: a nibble byte,
// a sub-block's 6-bit scale and minimum split into lows and highs, a Q5_K fifth bit, a Q6_K qh byte and int8
// scale, Q2_K / Q3_K code bytes, scale pairs and Q3_K's split 6-bit scales, the fp16 scales, the units.
TEST(MatmulTest, KQuantPanelLayoutRoundTripsAndMatchesItsSpecification) {
  std::mt19937 rng(7);
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS, DType::kQ2_K, DType::kQ3_K}) {
    ASSERT_TRUE(panel_layout_supported(t));
    EXPECT_TRUE(panel_layout_fits(t, 16));
    for (int64_t cols : {int64_t{256}, int64_t{768}, int64_t{1792}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " cols=" + std::to_string(cols));
      const std::vector<uint8_t> w = random_weights(t, kPanelRows, cols, rng);
      const std::vector<uint8_t> p = panels_of(t, w, kPanelRows, cols);
      expect_panel_round_trip(t, w, p, cols);
      if (HasFatalFailure()) return;
      const uint64_t rb = row_bytes(t, static_cast<uint64_t>(cols));
      if (cols < 1792) continue;
      const int64_t r = 5;
      if (t == DType::kQ2_K) {  // row 5, block 2: vector 11 (qs[32 + p(3, j)]), scales[9] (32-block 4, i = 1), d, dmin
        const uint8_t* blk = w.data() + r * rb + 2 * 84;
        const uint8_t* pb = p.data() + 2 * kQ2kPanelBlock;
        EXPECT_EQ(pb[64 * 11 + 4 * r + 1], blk[16 + 32 + 7]);
        EXPECT_EQ(pb[64 * 11 + 4 * r + 3], blk[16 + 32 + 16 + 7]);
        EXPECT_EQ(pb[1024 + 32 * 4 + 2 * r + 1], blk[9]);
        const uint8_t* blk13 = w.data() + 13 * rb + 2 * 84;  // row 13: half 1, q = 5
        EXPECT_EQ(pb[1024 + 32 * 4 + 16 + 2 * 5 + 1], blk13[9]);
        EXPECT_EQ(pb[1280 + 2 * r + 1], blk[81]);
        EXPECT_EQ(pb[1312 + 2 * r], blk[82]);
        continue;
      }
      if (t == DType::kQ3_K) {  // row 5, block 4: every element's 3-bit code, every scale, d
        const uint8_t* blk = w.data() + r * rb + 4 * 110;
        const uint8_t* pb = p.data() + 4 * kQ3kPanelBlock;
        for (int e = 0; e < 256; ++e) {
          const int n = e / 128, k = e / 32 % 4, l = e % 32;
          const int code = ((blk[32 + 32 * n + l] >> (2 * k)) & 3) | ((blk[l] >> (4 * n + k)) & 1) << 2;
          // element 32s + p(v, j), p(v, j) = 16 (j / 2) + 2v + j % 2, is c_v at byte 4r + j
          const int s = e / 32, v = l % 16 / 2, j = 2 * (l / 16) + l % 2;
          const uint8_t a = pb[192 * s + 4 * r + j], b = pb[192 * s + 64 + 4 * r + j], c = pb[192 * s + 128 + 4 * r + j];
          const int c_v[8] = {a & 7, a >> 3 & 7, b & 7, b >> 3 & 7, c & 7, c >> 3 & 7,
                              (a >> 6) | (c >> 6 & 1) << 2, (b >> 6) | (c >> 7) << 2};
          EXPECT_EQ(c_v[v], code) << "element " << e;
        }
        uint8_t sc[16];
        get_scales_q3k(blk + 96, sc);
        for (int g = 0; g < 16; ++g) {  // sub-block g = 2s + i
          const int s = g / 2, i = g % 2;
          const int lo = (pb[1536 + 32 * (s % 4) + 2 * r + i] >> (4 * (s / 4))) & 15;
          const int hi = (pb[1664 + 32 * (s % 2) + 2 * r + i] >> (2 * (s / 2))) & 3;
          EXPECT_EQ(sc[g], lo | hi << 4) << "sub-block " << g;
        }
        EXPECT_EQ(pb[1728 + 2 * r], blk[108]);
        continue;
      }
      if (t == DType::kIQ4_XS) {  // row 5, block 1: qs[16 * 6 + 9], sub-block 5's scale, d
        const uint8_t* blk = w.data() + r * rb + 136;
        const uint8_t* pb = p.data() + kIq4xsPanelBlock;
        EXPECT_EQ(pb[256 * 6 + 64 * 2 + 4 * r + 1], blk[8 + 16 * 6 + 9]);
        uint16_t sh;
        std::memcpy(&sh, blk + 2, 2);
        for (int g = 0; g < 8; ++g) {  // nibble g % 2 of scales_l[g / 2], bits 2g, 2g + 1 of scales_h
          const int ls = ((blk[4 + g / 2] >> (4 * (g % 2))) & 15) | ((sh >> (2 * g)) & 3) << 4;
          EXPECT_EQ(ls, ((pb[2048 + 16 * (g % 4) + r] >> (4 * (g / 4))) & 15) |
                            ((pb[2112 + 16 * (g % 2) + r] >> (2 * (g / 2))) & 3) << 4)
              << "sub-block " << g;
        }
        EXPECT_EQ(pb[2144 + 2 * r], blk[0]);
      } else if (t != DType::kQ6_K) {  // row 5, block 1
        const bool five = t == DType::kQ5_K;
        const int at = five ? 512 : 0, qs = five ? 48 : 16;
        const uint8_t* blk = w.data() + r * rb + (five ? 176 : 144);
        const uint8_t* pb = p.data() + (five ? kQ5kPanelBlock : kQ4kPanelBlock);
        EXPECT_EQ(pb[512 * 2 + 64 * 3 + 4 * r + 1], blk[qs + 32 * 2 + 4 * 3 + 1]);  // qs[77]
        for (int g = 0; g < 8; ++g) {
          if (five) {  // sub-block g's element 13: bit g of qh[13] is bit 4 * 5 + 1 of its mask 3
            EXPECT_EQ((pb[2048 + 64 * g + 8 * 3 + (4 * r + 1) / 8] >> ((4 * r + 1) % 8)) & 1, (blk[16 + 13] >> g) & 1);
          }
          uint8_t sc, mn;
          get_scale_min_k4(g, blk + 4, &sc, &mn);
          const uint8_t lo = pb[at + 2048 + 16 * g + r];
          const uint8_t hi = static_cast<uint8_t>(pb[at + 2176 + 16 * (g % 4) + r] >> (4 * (g / 4)));
          EXPECT_EQ(sc, (lo & 15) | (hi & 3) << 4) << "sub-block " << g;
          EXPECT_EQ(mn, (lo >> 4) | ((hi >> 2) & 3) << 4) << "sub-block " << g;
        }
        EXPECT_EQ(pb[at + 2240 + 2 * r + 1], blk[1]);  // d
        EXPECT_EQ(pb[at + 2272 + 2 * r], blk[2]);      // dmin
      } else {  // row 5, block 3 (the second of unit 1) and block 6 (the lone last one)
        const uint8_t* blk = w.data() + r * rb + 3 * 210;
        const uint8_t* unit = p.data() + 2 * kQ6kPanelBlock;
        EXPECT_EQ(unit[3072 + 1024 + 64 * 9 + 4 * r + 2], blk[64 + 4 * 9 + 2]);                 // ql[102]
        EXPECT_EQ(unit[3072 + 2048 + 512 + 64 * 3 + 4 * r + 1], blk[128 + 32 + 4 * 3 + 1]);  // qh[45]
        EXPECT_EQ(unit[6144 + 256 + 16 * 11 + r], blk[192 + 11]);                            // scale 11
        EXPECT_EQ(unit[6656 + 32 + 2 * r], blk[208]);                                        // d
        const uint8_t* last = w.data() + r * rb + 6 * 210;  // a unit of one: codes, scales, d
        const uint8_t* lone = p.data() + 6 * kQ6kPanelBlock;
        EXPECT_EQ(lone[64 * 1 + 4 * r + 3], last[4 + 3]);                  // ql[7]
        EXPECT_EQ(lone[2048 + 512 + 64 * 7 + 4 * r], last[128 + 32 + 28]);  // qh[60]
        EXPECT_EQ(lone[3072 + 16 * 15 + r], last[192 + 15]);                // scale 15
        EXPECT_EQ(lone[3072 + 256 + 2 * r + 1], last[209]);                 // d
      }
    }
  }
}

// The lane layout is a bijection on a type's row bytes: to_lanes then from_lanes gives the
// blocks back for random rows of every supported type, with whole and partial groups; and a
// few bytes are where lane_layout.h says they are (Q8_0 codes, Q4_0 nibbles, a Q5_0 fifth bit,
// Q4_K and IQ4_XS headers and nibbles, a Q6_K high pair, Q3_K and Q2_K code bits, scales and
// headers),
// so the kernels and the documentation
// read the same layout.
TEST(MatmulTest, LaneLayoutRoundTripsAndMatchesItsSpecification) {
  std::mt19937 rng(5);
  const DType types[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                         DType::kIQ4_NL, DType::kMXFP4, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                         DType::kIQ4_XS, DType::kQ3_K, DType::kQ2_K};
  for (DType t : types) {
    ASSERT_TRUE(lane_layout_supported(t));
    const int64_t bs = traits(t).block_size;
    for (int64_t cols : {bs, 3 * bs, bs == 32 ? int64_t{896} : int64_t{768}, bs == 32 ? int64_t{1024} : int64_t{4864 / 256 * 256}}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " cols=" + std::to_string(cols));
      const std::vector<uint8_t> w = random_weights(t, 1, cols, rng);
      const std::vector<uint8_t> lanes = lanes_of(t, w, 1, cols);
      std::vector<uint8_t> back(w.size());
      row_from_lanes(t, lanes.data(), cols, back.data());
      ASSERT_EQ(back, w);
      ASSERT_NE(lanes, w) << "the layout should move bytes";
    }
  }
  EXPECT_FALSE(lane_layout_supported(DType::kF16));
  // Spot checks against the specification, on a row of 896 (a full group of 16 and one of 12).
  auto relay = [&](DType t, int64_t cols) {
    std::vector<uint8_t> w = random_weights(t, 1, cols, rng);
    return std::make_pair(w, lanes_of(t, w, 1, cols));
  };
  {
    const auto [w, l] = relay(DType::kQ8_0, 896);
    // Group 1 (blocks 16..27, nl = 12) starts at byte 16 * 34; plane k has 48 bytes.
    const uint8_t* g1 = l.data() + 16 * 34;
    EXPECT_EQ(g1[3 * 48 + 4 * 5 + 2], w[(16 + 5) * 34 + 2 + 4 * 3 + 2]);  // block 21, element 14
    EXPECT_EQ(g1[8 * 48 + 2 * 7 + 1], w[(16 + 7) * 34 + 1]);              // block 23's d, high byte
    EXPECT_EQ(l[2 * 64 + 4 * 15 + 3], w[15 * 34 + 2 + 11]);               // group 0, block 15, element 11
  }
  {
    const auto [w, l] = relay(DType::kQ4_0, 896);
    EXPECT_EQ(l[1 * 64 + 4 * 9 + 2], w[9 * 18 + 2 + 6]);  // plane 1 = qs[4..7] of each block
    EXPECT_EQ(l[4 * 64 + 2 * 3], w[3 * 18]);              // block 3's d after the 4 planes
  }
  {
    const auto [w, l] = relay(DType::kQ5_0, 32 * 16);
    uint32_t qh;
    std::memcpy(&qh, w.data() + 6 * 22 + 2, 4);
    // High-bit plane after the 4 nibble planes: bit k of byte 4l + b is bit 4k + b of qh.
    EXPECT_EQ((l[4 * 64 + 4 * 6 + 3] >> 5) & 1, (qh >> (4 * 5 + 3)) & 1);
  }
  {
    const auto [w, l] = relay(DType::kQ4_K, 512);
    // Headers after the 4 nibble planes: super-block 1's 16 bytes as stored.
    EXPECT_EQ(0, std::memcmp(l.data() + 4 * 64 + 16, w.data() + 144, 16));
    // Plane 2, lane 3 (sub-block 3: the high nibbles of qs[32 .. 63]), byte 1 -> element 9 low,
    // element 25 high.
    const uint8_t* qs = w.data() + 16;
    EXPECT_EQ(l[2 * 64 + 4 * 3 + 1], (qs[32 + 9] >> 4) | (qs[32 + 25] & 0xF0));
  }
  {
    // IQ4_XS, 768 columns: a full group (two super-blocks) and a half one (nl = 8, planes of 32).
    // After the planes, per super-block: its 8 scales ls_j - 32 as 6-bit fields at bit 6j of 6
    // bytes (GGUF: nibble j of scales_l (bytes 4..7), bits 2j.. of scales_h (bytes 2..3)), then d.
    const auto [w, l] = relay(DType::kIQ4_XS, 768);
    const auto field = [&](size_t at, int j) { return ((l[at + 6 * j / 8] | l[at + 6 * j / 8 + 1] << 8) >> (6 * j % 8)) & 63; };
    const auto ls = [&](size_t at, int j) {
      return ((w[at + 4 + j / 2] >> (4 * (j % 2))) & 15) | (((w[at + 2] | w[at + 3] << 8) >> (2 * j)) & 3) << 4;
    };
    EXPECT_EQ(field(4 * 64 + 8, 5), (ls(136, 5) - 32) & 63);  // super-block 1, scale 5
    EXPECT_EQ(field(4 * 64, 2), (ls(0, 2) - 32) & 63);        // super-block 0, scale 2
    EXPECT_EQ(0, std::memcmp(l.data() + 4 * 64 + 8 + 6, w.data() + 136, 2));  // super-block 1's d
    // Plane 1, lane 11 (super-block 1, sub-block 3: qs + 48), byte 2 -> qs[48 + 4 + 2] as is.
    EXPECT_EQ(l[1 * 64 + 4 * 11 + 2], w[136 + 8 + 48 + 6]);
    // The half group at byte 272: plane 3 lane 5 byte 0 = super-block 2's qs[16 * 5 + 12].
    EXPECT_EQ(l[272 + 3 * 32 + 4 * 5], w[272 + 8 + 80 + 12]);
    EXPECT_EQ(field(272 + 4 * 32, 7), (ls(272, 7) - 32) & 63);
    EXPECT_EQ(0, std::memcmp(l.data() + 272 + 4 * 32 + 6, w.data() + 272, 2));
  }
  {
    // Q3_K (GGUF: element 128h + 32k + l has the low bits (qs[32h + l] >> 2k) & 3 and the third
    // bit (hmask[l] >> (4h + k)) & 1; qs at +32, hmask at +0). After the 14-byte scale block,
    // plane A (64 bytes) then the nibble plane H (32):
    // - lane 9, element 13 (157 = 128 + 29: h = 1, k = 0, l = 29): its code at bits 4..6 of H's
    //   byte 4 * (9 - 8) + 1 (the high nibble: lane 9 >= 8);
    // - lane 9, element 9 (153 = 128 + 25): low bits at bits 6..7 of A's byte 4 * 9 + 1, third
    //   bit at bit 7 of the same H byte;
    // - lane 2, element 3 (35 = 32 + 3: h = 0, k = 1, l = 3): its code at bits 0..2 of A's byte
    //   4 * 2 + 3.
    // The scale block: sc_9 - 32 in 6 bits at bit 6 of its bytes 8.., sc_5 - 32 at bit 30 of
    // bytes 0.. (GGUF: scale j's low nibble in scales[j % 8] (high nibble from j = 8), its high
    // bits at bit 2 (j / 4) of scales[8 + j % 4]), d in bytes 6..7.
    const auto [w, l] = relay(DType::kQ3_K, 256);
    const auto code = [&](int h, int k, int i) { return ((w[32 + 32 * h + i] >> (2 * k)) & 3) | ((w[i] >> (4 * h + k)) & 1) << 2; };
    EXPECT_EQ((l[14 + 64 + 4 * 1 + 1] >> 4) & 7, code(1, 0, 29));
    EXPECT_EQ((l[14 + 4 * 9 + 1] >> 6) | ((l[14 + 64 + 4 * 1 + 1] >> 7) << 2), code(1, 0, 25));
    EXPECT_EQ(l[14 + 4 * 2 + 3] & 7, code(0, 1, 3));
    const int sc9 = (w[96 + 1] >> 4) | ((w[96 + 8 + 1] >> 4) & 3) << 4;
    const int sc5 = (w[96 + 5] & 15) | ((w[96 + 8 + 1] >> 2) & 3) << 4;
    EXPECT_EQ(((l[8] | l[9] << 8) >> 6) & 63, (sc9 - 32) & 63);
    EXPECT_EQ(((l[3] | l[4] << 8) >> 6) & 63, (sc5 - 32) & 63);
    EXPECT_EQ(0, std::memcmp(l.data() + 6, w.data() + 108, 2));
  }
  {
    // Q2_K, two super-blocks: in the second, lane 9 (sub-block 9), k = 3, b = 1 is element 157 =
    // 128 + 29 (h = 1, quarter 0, l = 29): qs[32 + 29] & 3 at bits 6..7 of plane byte 4 * 9 + 1;
    // the plane follows d, -dmin (sign bit flipped) and the 16 scale bytes.
    const auto [w, l] = relay(DType::kQ2_K, 512);
    EXPECT_EQ((l[84 + 20 + 4 * 9 + 1] >> 6) & 3, w[84 + 16 + 32 + 29] & 3);
    EXPECT_EQ((l[84 + 20 + 4 * 2 + 3] >> 2) & 3, (w[84 + 16 + 7] >> 2) & 3);  // sub-block 2, k = 1, b = 3: element 39 (qs[7] bits 2..3)
    EXPECT_EQ(0, std::memcmp(l.data() + 84 + 4, w.data() + 84, 16));
    EXPECT_EQ(0, std::memcmp(l.data() + 84, w.data() + 84 + 80, 3));
    EXPECT_EQ(l[84 + 3], w[84 + 83] ^ 0x80);
  }
  {
    const auto [w, l] = relay(DType::kQ6_K, 256);
    // Element 4k + b of sub-block s is element 16s + 4k + b of the block; its high pair is at bits
    // 2k of high-plane byte 4s + b. Sub-block 9, k = 3, b = 1: element 157 = 128 + 29 (h = 1, l = 29,
    // quarter 0): qh[32 + 29] bits 0..1.
    EXPECT_EQ((l[128 + 4 * 9 + 1] >> 6) & 3, w[128 + 32 + 29] & 3);
  }
}

// The expert-grouped product (matmul_experts) against a per-token scalar reference, for every
// weight type on every ISA level, in GGUF blocks and (where the type has one) in the lane layout
// that models load experts into on AVX-512: each routed row must equal matmul_ref of its expert on its one
// input token (within the table's 2e-6 * S), and bitwise the matmul of its expert alone over the
// same gathered rows. Two routings: decode-sized (no expert above 8 rows: experts spread over the
// threads) and prompt-sized (one expert with 21 rows: the packed kernels, one expert at a time);
// both have an expert with no rows and one with a single row.
TEST(MatmulTest, ExpertGroupedAgainstPerTokenReference) {
  std::mt19937 rng(77);
  std::normal_distribution<float> nd(0.f, 1.f);
  ThreadPool pool2(2);
  const DType types[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                         DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4,
                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kF32, DType::kF16, DType::kBF16};
  constexpr int32_t kExperts = 5;
  constexpr int64_t kTokens = 24, kRows = 40;
  for (DType t : types) {
    const int64_t cols = traits(t).block_size == 256 ? 512 : 96;
    std::vector<std::vector<uint8_t>> w;
    std::vector<const void*> data;
    for (int32_t k = 0; k < kExperts; ++k) w.push_back(random_weights(t, kRows, cols, rng));
    for (const auto& m : w) data.push_back(m.data());
    // The same experts in the lane layout (what a model loads into on AVX-512), where the type has one.
    std::vector<std::vector<uint8_t>> wl;
    std::vector<const void*> ldata;
    if (lane_layout_supported(t))
      for (const auto& m : w) wl.push_back(lanes_of(t, m, kRows, cols));
    for (const auto& m : wl) ldata.push_back(m.data());
    const int64_t xs = cols + 3;
    std::vector<float> x(static_cast<size_t>(kTokens * xs));
    for (float& v : x) v = nd(rng);
    // Routings: per expert, which tokens (each at most once per expert).
    const std::vector<std::vector<int32_t>> small = {{3, 7, 9}, {}, {0, 1, 2, 3, 4, 5, 6, 7}, {11}, {20, 5}};
    std::vector<int32_t> many(21);
    for (int32_t i = 0; i < 21; ++i) many[i] = i;
    const std::vector<std::vector<int32_t>> big = {{4}, {}, many, {2, 23, 17}, {9, 10}};
    for (const auto* routing : {&small, &big}) {
      std::vector<int32_t> begin{0}, src;
      for (const auto& toks : *routing) {
        src.insert(src.end(), toks.begin(), toks.end());
        begin.push_back(static_cast<int32_t>(src.size()));
      }
      const int64_t total = static_cast<int64_t>(src.size()), ys = kRows + 2;
      for (const bool lanes : {false, true}) {
        if (lanes && ldata.empty()) continue;
        ExpertProducts e;
        e.shape = WeightMatrix{t, nullptr, kRows, cols, nullptr, lanes};
        e.data = lanes ? ldata.data() : data.data();
        e.n = kExperts;
        e.begin = begin.data();
        e.src = src.data();
        for (IsaLevel level : levels()) {
          SCOPED_TRACE(std::string(dtype_name(t)) + " " + isa_name(level) + (routing == &small ? " decode" : " prompt") +
                       (lanes ? " lanes" : ""));
          std::vector<float> y(static_cast<size_t>(total * ys), -7.f), gather(static_cast<size_t>(total * cols));
          matmul_experts_isa(level, e, x.data(), xs, y.data(), ys, gather.data(), pool2);
          std::vector<float> deq(static_cast<size_t>(cols)), yref(static_cast<size_t>(kRows));
          for (int32_t k = 0; k < kExperts; ++k) {
            const int64_t r0 = begin[k], cnt = begin[k + 1] - r0;
            const WeightMatrix wk{t, e.data[k], kRows, cols, nullptr, lanes};
            // Bitwise: the expert alone over its gathered rows, on the same level.
            std::vector<float> alone(static_cast<size_t>(std::max<int64_t>(cnt, 1) * ys), -7.f);
            if (cnt > 0) matmul_isa(level, wk, gather.data() + r0 * cols, cnt, cols, alone.data(), ys, pool2);
            for (int64_t i = 0; i < cnt; ++i) {
              const float* xt = x.data() + static_cast<int64_t>(src[r0 + i]) * xs;
              matmul_ref(wk, xt, 1, xs, yref.data(), kRows);  // the per-token reference
              for (int64_t r = 0; r < kRows; ++r) {
                dequantize_row_ref(t, static_cast<const uint8_t*>(data[k]) + r * row_bytes(t, cols), deq.data(), cols);
                double mag = 0;
                for (int64_t c = 0; c < cols; ++c) mag += std::fabs(double(deq[c]) * xt[c]);
                const float got = y[(r0 + i) * ys + r];
                ASSERT_LE(std::fabs(got - yref[r]), 2e-6 * mag + 1e-30) << "expert " << k << " row " << r;
                ASSERT_EQ(got, alone[i * ys + r]) << "expert " << k << " routed row " << i << " row " << r;
              }
              ASSERT_EQ(y[(r0 + i) * ys + kRows], -7.f) << "stride gap";
            }
          }
        }
      }
    }
  }
}

// The paired form (an expert's gate and up in one dispatch) gives bitwise the two single calls,
// decode-sized and prompt-sized, on every level.
TEST(MatmulTest, ExpertPairEqualsTwoCalls) {
  std::mt19937 rng(78);
  std::normal_distribution<float> nd(0.f, 1.f);
  ThreadPool pool2(2);
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kF16}) {
    const int64_t cols = traits(t).block_size == 256 ? 512 : 128, rows = 24;
    std::vector<std::vector<uint8_t>> wa, wb;
    std::vector<const void*> da, db;
    for (int k = 0; k < 4; ++k) {
      wa.push_back(random_weights(t, rows, cols, rng));
      wb.push_back(random_weights(t, rows, cols, rng));
    }
    for (int k = 0; k < 4; ++k) {
      da.push_back(wa[k].data());
      db.push_back(wb[k].data());
    }
    for (const std::vector<int32_t>& begin : {std::vector<int32_t>{0, 2, 2, 3, 5}, std::vector<int32_t>{0, 1, 12, 12, 14}}) {
      const int64_t total = begin.back();
      std::vector<float> x(static_cast<size_t>(total * cols));
      for (float& v : x) v = nd(rng);
      ExpertProducts e;
      e.shape = WeightMatrix{t, nullptr, rows, cols};
      e.data = da.data();
      e.n = 4;
      e.begin = begin.data();
      for (IsaLevel level : levels()) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " " + isa_name(level));
        std::vector<float> y1(static_cast<size_t>(total * rows)), y2(y1.size()), p1(y1.size()), p2(y1.size());
        matmul_experts_isa(level, e, x.data(), cols, y1.data(), rows, nullptr, pool2);
        ExpertProducts eb = e;
        eb.data = db.data();
        matmul_experts_isa(level, eb, x.data(), cols, y2.data(), rows, nullptr, pool2);
        matmul_experts_isa(level, e, x.data(), cols, p1.data(), rows, nullptr, pool2, db.data(), p2.data());
        ASSERT_EQ(y1, p1);
        ASSERT_EQ(y2, p2);
      }
    }
  }
}

// Products of one input in one dispatch (matmul_group, a layer's q / k / v and gate / up): each
// output bitwise equal to its product alone, whether the group's weights share one activation
// kind (prepared once), need several (one scratch slot each), sit in GGUF blocks or the lane
// layout, are split by rows or by tokens; outputs written at their own strides into one buffer.
TEST(MatmulTest, GroupedProductsEqualEachAlone) {
  std::mt19937 rng(91);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> mag(0.0005f, 0.02f);
  ThreadPool pool1(1), pool2(2);
  struct Spec { DType type; int64_t rows; bool lanes; };
  const int64_t cols = 512;
  const std::vector<std::vector<Spec>> groups = {
      {{DType::kQ5_0, 96, true}, {DType::kQ8_0, 32, true}, {DType::kQ5_0, 32, false}, {DType::kF16, 24, false}},
      // Q2_K's sums per 16, bf16 activations and I8's code sums shared; an empty product.
      {{DType::kQ4_K, 80, true}, {DType::kQ2_K, 48, true}, {DType::kQ6_K, 20, false}, {DType::kQ2_K, 32, false}},
      {{DType::kBF16, 40, false}, {DType::kBF16, 24, false}, {DType::kI8, 16, false}, {DType::kIQ4_XS, 300, true}},
      {{DType::kF8_E4M3, 8, false}, {DType::kQ3_K, 0, true}, {DType::kI8, 24, false}, {DType::kI8, 16, false}},
  };
  for (const std::vector<Spec>& g : groups) {
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::vector<float>> scales;
    std::vector<WeightMatrix> ws;
    int64_t width = 0;  // the shared output row: the products side by side
    for (const Spec& sp : g) {
      std::vector<uint8_t> w;
      if (dtype_has_row_scale(sp.type)) {
        w.resize(static_cast<size_t>(sp.rows * cols));
        for (auto& b : w) b = static_cast<uint8_t>(rng() & 0x3f);  // small codes: no NaN FP8
        scales.emplace_back(static_cast<size_t>(sp.rows));
        for (float& v : scales.back()) v = mag(rng);
      } else {
        w = random_weights(sp.type, sp.rows, cols, rng);
        if (sp.lanes && lane_layout_supported(sp.type)) w = lanes_of(sp.type, w, sp.rows, cols);
        scales.emplace_back();
      }
      data.push_back(std::move(w));
      width += sp.rows;
    }
    for (size_t i = 0; i < g.size(); ++i)
      ws.push_back(WeightMatrix{g[i].type, data[i].data(), g[i].rows, cols,
                                scales[i].empty() ? nullptr : scales[i].data(),
                                g[i].lanes && lane_layout_supported(g[i].type)});
    for (const int64_t n : {1, 3, 16, 40}) {
      std::vector<float> x(static_cast<size_t>(n * cols));
      for (float& v : x) v = nd(rng);
      for (IsaLevel level : levels()) {
        for (ThreadPool* pool : {&pool1, &pool2}) {
          SCOPED_TRACE(std::string(dtype_name(g[0].type)) + " group, " + isa_name(level) + " n=" +
                       std::to_string(n) + " threads=" + std::to_string(pool->size()));
          std::vector<float> alone(static_cast<size_t>(n * width), -1.f), grouped(alone.size(), -2.f);
          std::vector<GroupProduct> ps;
          int64_t at = 0;
          for (const WeightMatrix& w : ws) {
            matmul_isa(level, w, x.data(), n, cols, alone.data() + at, width, *pool);
            ps.push_back(GroupProduct{w, grouped.data() + at, width});
            at += w.rows;
          }
          matmul_group_isa(level, ps, x.data(), n, cols, *pool);
          ASSERT_EQ(0, std::memcmp(alone.data(), grouped.data(), alone.size() * sizeof(float)));
        }
      }
    }
  }
  // Too many products, and one bad product, are refused before anything runs.
  std::vector<float> x(cols), y(64);
  std::vector<uint8_t> w(static_cast<size_t>(row_bytes(DType::kF32, cols)) * 8);
  const WeightMatrix ok{DType::kF32, w.data(), 8, cols};
  std::vector<GroupProduct> many(kMaxGroupProducts + 1, GroupProduct{ok, y.data(), 8});
  EXPECT_THROW(matmul_group(many, x.data(), 1, cols, pool2), Error);
  const GroupProduct bad[2] = {{ok, y.data(), 8}, {ok, y.data(), 4}};  // y_stride < rows
  EXPECT_THROW(matmul_group(bad, x.data(), 1, cols, pool2), Error);
}

TEST(MatmulTest, ExpertGroupedRejectsBadTables) {
  ThreadPool pool(1);
  std::vector<float> x(64), y(64);
  const std::vector<uint8_t> w(static_cast<size_t>(row_bytes(DType::kF32, 8)) * 4);
  const void* data[1] = {w.data()};
  const int32_t bad_begin[2] = {0, -1};
  ExpertProducts e;
  e.shape = WeightMatrix{DType::kF32, nullptr, 4, 8};
  e.data = data;
  e.n = 1;
  e.begin = bad_begin;
  EXPECT_THROW(matmul_experts(e, x.data(), 8, y.data(), 4, nullptr, pool), Error);
  const int32_t begin[2] = {0, 2};
  const int32_t src[2] = {0, 1};
  e.begin = begin;
  e.src = src;
  EXPECT_THROW(matmul_experts(e, x.data(), 8, y.data(), 4, nullptr, pool), Error);  // no gather buffer
  e.shape.type = DType::kF8_E4M3;
  std::vector<float> g(16);
  EXPECT_THROW(matmul_experts(e, x.data(), 8, y.data(), 4, g.data(), pool), Error);  // row-scaled
}

TEST(MatmulTest, ActivationQuantizersAreBitExactOnEveryIsa) {
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t n = 32 * 37;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * 3.f;
  std::fill(x.begin() + 64, x.begin() + 96, 0.f);                   // amax == 0
  for (int i = 96; i < 128; ++i) x[i] = (i % 3 - 1) * 0.5f * 127.f;  // exact .5 ties
  x[200] = 1e-40f;                                                   // f32 subnormal
  x[201] = -1e-41f;
  x[202] = 3.4e38f;                                                  // rounds to bf16 inf
  x[203] = std::nanf("");
  std::vector<int8_t> q_ref(n);
  std::vector<float> d_ref(n / 32), s_ref(n / 32);
  std::vector<float> xq(x);
  xq[202] = 1.f;  // keep the Q8 input finite
  xq[203] = 2.f;
  quantize_act_q8_ref(xq.data(), n, q_ref.data(), d_ref.data(), s_ref.data());
  std::vector<uint16_t> b_ref(n);
  round_act_bf16_ref(x.data(), n - 3, b_ref.data());  // n - 3: exercise the scalar tails
  EXPECT_EQ(b_ref[200], 0);
  EXPECT_EQ(b_ref[201], 0x8000);
  EXPECT_EQ(b_ref[202], 0x7f80);
  EXPECT_EQ(b_ref[203] & 0x7fc0, 0x7fc0);
  for (int i = 0; i < 32; ++i) {
    // Codes reproduce the block within half a step.
    EXPECT_LE(std::fabs(q_ref[i] * d_ref[0] - xq[i]), d_ref[0] * 0.5f * 1.0001f);
  }
  // Q2_K's sums per 16: exactly d * (integer code sum), and each pair is its 32-block's sum.
  std::vector<float> s16(n / 16);
  act_sums16(q_ref.data(), d_ref.data(), n, s16.data());
  for (int64_t j = 0; j < n / 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += q_ref[16 * j + i];
    EXPECT_EQ(s16[j], d_ref[j / 2] * static_cast<float>(sum)) << "sum per 16 " << j;
  }
  for (int64_t b = 0; b < n / 32; ++b)
    EXPECT_NEAR(s16[2 * b] + s16[2 * b + 1], s_ref[b], 1e-6f * (std::fabs(s16[2 * b]) + std::fabs(s16[2 * b + 1])));
  for (IsaLevel level : levels()) {
    SCOPED_TRACE(isa_name(level));
    std::vector<int8_t> q(n);
    std::vector<float> d(n / 32), s(n / 32);
    quantize_act_q8(level, xq.data(), n, q.data(), d.data(), s.data());
    EXPECT_EQ(q, q_ref);
    EXPECT_EQ(0, std::memcmp(d.data(), d_ref.data(), d.size() * 4));
    EXPECT_EQ(0, std::memcmp(s.data(), s_ref.data(), s.size() * 4));
    std::vector<uint16_t> b(n);
    round_act_bf16(level, x.data(), n - 3, b.data());
    EXPECT_EQ(b, b_ref);
  }
}

TEST(MatmulTest, RejectsBadArguments) {
  ThreadPool pool(1);
  std::vector<uint8_t> w(4096);
  std::vector<float> x(1024), y(1024);
  auto run = [&](DType t, int64_t rows, int64_t cols, int64_t n, int64_t xs, int64_t ys) {
    matmul(WeightMatrix{t, w.data(), rows, cols}, x.data(), n, xs, y.data(), ys, pool);
  };
  EXPECT_THROW(run(DType::kQ4_0, 2, 48, 1, 48, 2), Error);     // cols not a block multiple
  EXPECT_THROW(run(DType::kQ8_1, 2, 32, 1, 32, 2), Error);     // not a weight type
  EXPECT_THROW(run(DType::kF32, 2, 32, 1, 31, 2), Error);      // x_stride < cols
  EXPECT_THROW(run(DType::kF32, 4, 32, 1, 32, 3), Error);      // y_stride < rows
  EXPECT_THROW(run(DType::kF32, -1, 32, 1, 32, 3), Error);     // negative size
  EXPECT_THROW(run(DType::kF32, int64_t{1} << 62, 64, 1, 64, int64_t{1} << 62), Error);  // overflow
  EXPECT_THROW(matmul(WeightMatrix{DType::kF32, nullptr, 2, 32}, x.data(), 1, 32, y.data(), 2, pool),
               Error);
  // Empty products are fine; cols == 0 gives zeros.
  EXPECT_NO_THROW(run(DType::kF32, 0, 32, 1, 32, 0));
  y[0] = 5.f;
  run(DType::kF32, 2, 0, 1, 0, 2);
  EXPECT_EQ(y[0], 0.f);
}


// The serving engine batches requests: ideally a token's output row does not depend on how
// many other tokens share the call (nor on the thread count), so that a request's greedy output
// is the same alone or batched. That holds bitwise for the float weight types on every level and
// for every type on the scalar and AVX2 levels. The AVX-512
// quantized kernels use a different f32 summation order from kPackedMinTokens tokens on (the
// packed prompt kernels), and the K-quants also for one token (decode), so there rows agree
// only to rounding: checked here within 1e-5 of the row's largest magnitude. With
// set_matmul_batch_invariant(true) every type is bitwise on every level.
TEST(MatmulTest, RowsDoNotDependOnTheBatch) {
  for (const bool invariant : {false, true}) {
    SCOPED_TRACE(invariant ? "batch-invariant mode" : "default mode");
    set_matmul_batch_invariant(invariant);
    if (invariant) {
      EXPECT_TRUE(matmul_is_batch_invariant());
    }
    std::mt19937 rng(99);
    const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                           DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                           DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4, DType::kQ4_K, DType::kQ5_K,
                           DType::kQ6_K};
    for (IsaLevel level : levels()) {
      for (DType t : types)
      for (const int layout : {0, 1, 2}) {  // GGUF blocks, lanes, panels
        const bool lanes = layout == 1, panels = layout == 2;
        if ((lanes && !lane_layout_supported(t)) || (panels && !panel_layout_supported(t))) continue;
        // The lane and panel layouts run one kernel for every token count: bitwise in both modes.
        const bool bitwise = invariant || lanes || panels || level != IsaLevel::kAvx512 || t == DType::kF32 ||
                             t == DType::kF16 || t == DType::kBF16;
        // Random rows x cols weights in t (in the lane layout if `lanes`, in panels if `panels`:
        // rows rounded up to whole panels), and n_max tokens of activations: each token alone
        // against batches of every n in ns.
        auto check = [&](int64_t rows, int64_t cols, int64_t n_max, std::initializer_list<int64_t> ns,
                         const std::string& what) {
          if (panels) rows = (rows + kPanelRows - 1) / kPanelRows * kPanelRows;
          std::vector<uint8_t> wbytes = random_weights(t, rows, cols, rng);
          if (lanes) wbytes = lanes_of(t, wbytes, rows, cols);
          if (panels) wbytes = panels_of(t, wbytes, rows, cols);
          const WeightMatrix w{t, wbytes.data(), rows, cols, nullptr, lanes, panels};
          std::vector<float> x(static_cast<size_t>(n_max * cols));
          std::normal_distribution<float> nd(0.f, 1.f);
          for (float& v : x) v = nd(rng);
          expect_rows_alone_as_batched(level, w, x, n_max, ns, bitwise,
                                       std::string(dtype_name(t)) + (lanes ? " lanes" : panels ? " panels" : "") + what);
        };
        // Rows with a partial last lane group (896 columns: 1.75 groups of 32-element lane
        // blocks; 768: 1.5 groups of the K-quants' 32-element sub-blocks, 3 whole ones of Q6_K's
        // 16) and 67 rows (partial row tiles of every shape). Up to 48 tokens the packed kernels
        // tile 3 rows x 4 tokens, beyond 4 x 3 (and 1-3 tokens fuse the packing into 4-row
        // tiles; from the lane layout 1-4, 1-8 for Q6_K / Q3_K / Q2_K as one or two fused token
        // tiles: 5 = 2 + 3, 7 = 3 + 4), with every remainder (9, 17: 1 token left): every shape
        // must give a lone token's bits.
        ASSERT_NO_FATAL_FAILURE(check(67, traits(t).block_size == 256 ? 768 : 896, 56,
                                      {2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33, 40, 49, 56}, ""));
        // Long rows (8960 columns): the packed tiles run them in K blocks, keeping their lane
        // sums between blocks: 3 x 4 tiles (up to 48 tokens) in 3 blocks, 4 x 3 tiles in 4-5
        // (middle blocks, a shorter last one, Q4_K's half group).
        ASSERT_NO_FATAL_FAILURE(check(7, 8960, 56, {5, 8, 9, 16, 17, 49, 56}, " long rows"));
      }
    }
  }
  set_matmul_batch_invariant(false);
}

// The float kernels sum a row in column blocks whose size depends only on cols (matmul_tiles.h
// block_cols): a one-token call (row tiles outer, software prefetch) and a prompt (the
// K-blocked order, F16 widened into packed f32 blocks) give the same bits, for widths of one,
// two and three blocks with masked tails, token counts around the prompt threshold and past a
// token tile, and a row panel boundary (900 rows of F32 at 2090 columns span two panels).
TEST(MatmulTest, FloatColumnBlocksDoNotDependOnTheBatch) {
  std::mt19937 rng(7);
  for (IsaLevel level : levels()) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (const int64_t cols : {int64_t{1000}, int64_t{2090}, int64_t{4101}}) {
        const int64_t rows = cols == 2090 ? 900 : 45, n_max = 75;
        std::vector<uint8_t> wbytes = random_weights(t, rows, cols, rng);
        const WeightMatrix w{t, wbytes.data(), rows, cols};
        std::vector<float> x(static_cast<size_t>(n_max * cols));
        std::normal_distribution<float> nd(0.f, 1.f);
        for (float& v : x) v = nd(rng);
        ASSERT_NO_FATAL_FAILURE(expect_rows_alone_as_batched(level, w, x, n_max, {31, 32, 33, 75}, /*bitwise=*/true,
                                                             std::string(dtype_name(t)) + " cols=" + std::to_string(cols)));
      }
    }
  }
}

// I8 sums beyond 2^24, where float(isum) rounds: every level (the reference included) computes
// y = float(isum) * fl(s_r * dx) and gives the same bits. Weights 127 but one 126, activations
// all 1 (codes 127): isum = 127 * (127 * 2048 - 1) = 33,032,065.
TEST(MatmulTest, I8LargeSumsAreBitwiseEqualOnEveryIsa) {
  const int64_t rows = 5, cols = 2048, n = 3;
  std::vector<uint8_t> w(static_cast<size_t>(rows * cols), 127);
  for (int64_t r = 0; r < rows; ++r) w[static_cast<size_t>(r * cols + 7 * r)] = 126;
  std::vector<float> scale(rows, 1.f), x(static_cast<size_t>(n * cols), 1.f);
  const WeightMatrix wm{DType::kI8, w.data(), rows, cols, scale.data()};
  std::vector<float> yref(static_cast<size_t>(n * rows));
  matmul_ref(wm, x.data(), n, cols, yref.data(), rows);
  const float want = static_cast<float>(int32_t{127} * (127 * 2048 - 1)) * (1.f * (1.f / 127.f));
  EXPECT_EQ(yref[0], want);
  ThreadPool pool(2);
  for (IsaLevel level : levels()) {
    std::vector<float> y(yref.size());
    matmul_isa(level, wm, x.data(), n, cols, y.data(), rows, pool);
    EXPECT_EQ(0, std::memcmp(y.data(), yref.data(), y.size() * 4)) << isa_name(level);
  }
}

// The row-scaled online types (FP8 E4M3 weights with f32 activations, I8 W8A8 with per-token
// Q8 activations) on every level against matmul_ref (2e-6 * S, as the table above), and
// matmul_ref against the exact product of the dequantized weights s_r * code: exact up to 1e-5 * S
// for FP8; for I8 within the per-token activation rounding 1.01 * sum |w_c| * (amax_t / 127) / 2.
// Rows must not depend on the batch (bitwise on every level: their kernels run one arithmetic
// for every tile shape). Codes cover every finite E4M3 pattern (NaN codes excluded) and every int8
// value including -128.
TEST(MatmulTest, RowScaledTypesOnEveryIsa) {
  std::mt19937 rng(4321);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255), pct(0, 99);
  std::uniform_real_distribution<float> mag(0.0005f, 0.02f);
  ThreadPool pool1(1), pool2(2);
  struct RCase { DType type; int64_t rows, cols, n; int threads; };
  std::vector<RCase> cases;
  for (DType t : {DType::kF8_E4M3, DType::kI8})
    for (RCase c : std::vector<RCase>{{t, 1, 1, 1, 1}, {t, 5, 7, 2, 2}, {t, 9, 33, 5, 1},
                                      {t, 13, 100, 17, 2}, {t, 30, 896, 64, 2}, {t, 11, 4864, 3, 1},
                                      {t, 67, 512, 40, 2}, {t, 512, 64, 77, 2}, {t, 64, 172, 77, 2}})
      cases.push_back(c);
  for (const RCase& c : cases) {
    const std::string where = std::string(dtype_name(c.type)) + " rows=" + std::to_string(c.rows) +
                              " cols=" + std::to_string(c.cols) + " n=" + std::to_string(c.n);
    SCOPED_TRACE(where);
    std::vector<uint8_t> w(static_cast<size_t>(c.rows * c.cols));
    for (auto& b : w) {
      b = static_cast<uint8_t>(byte(rng));
      if (c.type == DType::kF8_E4M3 && (b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
    }
    std::vector<float> scale(static_cast<size_t>(c.rows));
    for (float& v : scale) v = mag(rng);
    std::vector<float> x(static_cast<size_t>(c.n * c.cols));
    for (float& v : x) v = nd(rng) * (pct(rng) == 0 ? 20.f : 1.f);
    WeightMatrix wm{c.type, w.data(), c.rows, c.cols, scale.data()};
    auto wval = [&](int64_t r, int64_t i) {
      const uint8_t b = w[static_cast<size_t>(r * c.cols + i)];
      const double code = c.type == DType::kI8 ? double(static_cast<int8_t>(b)) : double(e4m3_to_f32(b));
      return double(scale[static_cast<size_t>(r)]) * code;
    };
    std::vector<float> yref(static_cast<size_t>(c.n * c.rows));
    matmul_ref(wm, x.data(), c.n, c.cols, yref.data(), c.rows);
    std::vector<double> S(yref.size());
    for (int64_t t = 0; t < c.n; ++t) {
      const float* xt = x.data() + t * c.cols;
      float amax = 0;
      for (int64_t i = 0; i < c.cols; ++i) amax = std::max(amax, std::fabs(xt[i]));
      for (int64_t r = 0; r < c.rows; ++r) {
        double e = 0, s = 0, q = 0;
        for (int64_t i = 0; i < c.cols; ++i) {
          e += wval(r, i) * xt[i];
          s += std::fabs(wval(r, i) * xt[i]);
          q += std::fabs(wval(r, i)) * amax / 127.0 / 2.0;
        }
        const size_t o = static_cast<size_t>(t * c.rows + r);
        S[o] = s;
        const double bound = (c.type == DType::kI8 ? 1.01 * q : 0.0) + 1e-5 * s;
        ASSERT_LE(std::fabs(yref[o] - e), bound) << "ref vs exact at row " << r << " token " << t;
      }
    }
    for (IsaLevel level : levels()) {
      SCOPED_TRACE(isa_name(level));
      std::vector<float> y(yref.size());
      matmul_isa(level, wm, x.data(), c.n, c.cols, y.data(), c.rows, c.threads == 1 ? pool1 : pool2);
      for (size_t o = 0; o < y.size(); ++o)
        ASSERT_LE(std::fabs(y[o] - yref[o]), 2e-6 * S[o] + 1e-30) << "output " << o;
      // I8 sums are exact integers and every level scales them the same way: bitwise equal.
      if (c.type == DType::kI8) {
        ASSERT_EQ(0, std::memcmp(y.data(), yref.data(), y.size() * 4));
      }
      // Each token alone gives the same bits.
      for (int64_t t = 0; t < c.n; ++t) {
        std::vector<float> alone(static_cast<size_t>(c.rows));
        matmul_isa(level, wm, x.data() + t * c.cols, 1, c.cols, alone.data(), c.rows, pool1);
        ASSERT_EQ(0, std::memcmp(alone.data(), y.data() + t * c.rows, alone.size() * 4)) << "token " << t;
      }
    }
  }
  // Row scales are required for these types and refused for the others.
  std::vector<uint8_t> w(64, 1);
  std::vector<float> x(32, 1.f), y(2);
  EXPECT_THROW(matmul(WeightMatrix{DType::kI8, w.data(), 2, 32}, x.data(), 1, 32, y.data(), 2, pool1), Error);
  const float sc[2] = {1.f, 1.f};
  EXPECT_THROW(matmul(WeightMatrix{DType::kF32, w.data(), 2, 8, sc}, x.data(), 1, 8, y.data(), 2, pool1), Error);
  EXPECT_NO_THROW(matmul(WeightMatrix{DType::kF8_E4M3, w.data(), 2, 32, sc}, x.data(), 1, 32, y.data(), 2, pool1));
}

TEST(MatmulTest, RowActivationQuantizerIsBitExactOnEveryIsa) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t n : {1, 7, 32, 100, 896, 4867}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng) * 3.f;
    if (n > 10) x[5] = 0.5f * 127.f / 127.f;  // ties appear when amax is a power of two
    std::vector<int8_t> q_ref(static_cast<size_t>(n));
    float d_ref = 0;
    quantize_act_q8_row_ref(x.data(), n, q_ref.data(), &d_ref);
    for (int64_t i = 0; i < n; ++i) EXPECT_LE(std::fabs(q_ref[i] * d_ref - x[i]), d_ref * 0.5f * 1.0001f);
    for (IsaLevel level : levels()) {
      std::vector<int8_t> q(static_cast<size_t>(n));
      float d = 0;
      quantize_act_q8_row(level, x.data(), n, q.data(), &d);
      EXPECT_EQ(q, q_ref) << isa_name(level) << " n=" << n;
      EXPECT_EQ(d, d_ref);
    }
  }
  std::vector<float> z(40, 0.f);
  std::vector<int8_t> q(40, 5);
  float d = 1;
  quantize_act_q8_row_ref(z.data(), 40, q.data(), &d);
  EXPECT_EQ(d, 0.f);
  EXPECT_EQ(q, std::vector<int8_t>(40, 0));
}

}  // namespace
}  // namespace triad::kernels
