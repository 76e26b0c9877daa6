// matmul() / matmul_group() driver: checks arguments, prepares the activations once per call
// and kind (Q8 blocks for quantized weights, with sums per 16 for Q2_K, bf16 for BF16 weights;
// act_quant.h), then splits the output rows of every product over the pool's threads in one job
// and runs the row-range kernel of the chosen ISA level (matmul_impl.h; kernels in
// matmul_avx2.cpp / matmul_avx512.cpp / ref/matmul_ref.cpp).
//
// Properties:
// - Scratch for prepared activations is a grow-only buffer per calling thread and slot (one
//   slot per kind in a group): no allocation per call in the steady state.
// - Rows are split in multiples of 16 into chunks that the pool's threads claim, so that every
//   chunk is whole register tiles; with fewer than 16 rows per thread (tiny matrices, many
//   tokens) tokens are split instead.
// Thread-safety: calls from several threads may share a pool (the pool runs one job at a time)
// or use their own; the activation scratch is per calling thread.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/aligned_buffer.h"
#include "base/checked_math.h"
#include "base/error.h"
#include "kernels/act_quant.h"
#include "kernels/lane_layout.h"
#include "kernels/matmul.h"
#include "kernels/matmul_impl.h"
#include "kernels/panel_layout.h"

namespace triad::kernels {
namespace {

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Grow-only, 64-byte aligned scratch of the calling thread: one buffer per slot, so that the
// products of one matmul_group() keep the activations of each kind they need side by side.
constexpr int kActSlots = kMaxGroupProducts;
uint8_t* scratch(int slot, size_t bytes) {
  thread_local AlignedBuffer<uint8_t> bufs[kActSlots];
  AlignedBuffer<uint8_t>& buf = bufs[slot];
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

std::atomic<bool> g_batch_invariant{false};

}  // namespace

float* kernel_scratch(int64_t floats) {
  thread_local AlignedBuffer<float> buf;
  if (buf.size() < static_cast<size_t>(floats)) buf.resize(static_cast<size_t>(floats));
  return buf.data();
}

uint8_t* kernel_scratch_bytes(ScratchSlot slot, int64_t bytes) {
  thread_local AlignedBuffer<uint8_t> bufs[2];
  AlignedBuffer<uint8_t>& buf = bufs[slot == ScratchSlot::kPanel ? 0 : 1];
  if (buf.size() < static_cast<size_t>(bytes)) buf.resize(static_cast<size_t>(bytes));
  return buf.data();
}

namespace {

// The AVX-512 kernels whose rows depend on the batch (see set_matmul_batch_invariant): the
// types with packed prompt kernels (matmul_packed_avx512.cpp), whose float accumulation order
// differs from the direct kernels'. F32 / F16 / BF16 and the row-scaled online types run one
// arithmetic for every token count.
bool avx512_batch_dependent(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kMXFP4: return true;
    default: return false;
  }
}

// The row kernels for weights of type t in the lane layout, in panels, or (neither) in GGUF blocks.
MatmulRowsFn rows_fn(IsaLevel level, DType t, bool lanes, bool panels) {
  switch (level) {
    case IsaLevel::kAvx512:
      // Panels of a type only the AVX2 panel kernels run (none today): those, which are
      // invariant (laid back, the AVX-512 GGUF kernels would not be).
      if (panels && !matmul_runs_panels(IsaLevel::kAvx512, t)) return matmul_rows_avx2;
      // The lane and panel layouts run one kernel for every token count: invariant as they are.
      if (!lanes && !panels && avx512_batch_dependent(t) && g_batch_invariant.load(std::memory_order_relaxed))
        return matmul_rows_avx2;
      return matmul_rows_avx512;
    case IsaLevel::kAvx2: return matmul_rows_avx2;
    case IsaLevel::kScalar: break;
  }
  return matmul_rows_ref;
}

// Rows [r0, r1) of a lane- or panel-layout job on a level without their kernels (AVX2,
// scalar): laid back into GGUF blocks 16 rows at a time (panels: r0 is a whole panel's first
// row, as every row split makes it), in a scratch of the calling thread, and run there.
void rows_from_lanes(MatmulRowsFn fn, const MatmulJob& j, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  thread_local AlignedBuffer<uint8_t> buf;
  constexpr int64_t kRows = 16;
  static_assert(kRows == kPanelRows);
  TRIAD_CHECK(!j.panels || r0 % kPanelRows == 0, "matmul: panel rows split at ", r0);
  if (buf.size() < kRows * j.row_bytes) buf.resize(static_cast<size_t>(kRows * j.row_bytes));
  for (int64_t r = r0; r < r1; r += kRows) {
    const int64_t n = std::min(kRows, r1 - r);
    const uint8_t* from = j.w + static_cast<uint64_t>(r) * j.row_bytes;
    if (j.panels) {
      panel_to_rows(j.type, from, j.cols, buf.data());
    } else {
      for (int64_t i = 0; i < n; ++i)
        row_from_lanes(j.type, from + static_cast<uint64_t>(i) * j.row_bytes, j.cols,
                       buf.data() + static_cast<uint64_t>(i) * j.row_bytes);
    }
    MatmulJob b = j;
    b.lanes = false;
    b.panels = false;
    b.w = buf.data();
    b.rows = n;
    b.y = j.y + r;
    fn(b, 0, n, t0, t1);
  }
}

// Prepares the activations that `job.type` pairs with, in scratch slot `slot`; tokens are split
// over the pool when there are enough of them to be worth a second parallel region.
void prepare_activations(IsaLevel level, MatmulJob& j, int slot, ThreadPool& pool) {
  const ActKind kind = act_kind(j.type);
  if (kind == ActKind::kF32) return;
  const int64_t n = j.n_tokens, cols = j.cols;
  auto for_tokens = [&](auto&& fn) {
    if (pool.size() > 1 && n >= 4 && n * cols >= 16384) {
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) fn(t);
      });
    } else {
      for (int64_t t = 0; t < n; ++t) fn(t);
    }
  };
  if (kind == ActKind::kQ8Row) {
    j.aq_stride = round_up(cols, 64);
    j.as_stride = 1;
    uint8_t* base = scratch(slot, static_cast<size_t>(n) * static_cast<size_t>(j.aq_stride + 8));
    int8_t* aq = reinterpret_cast<int8_t*>(base);
    float* ad = reinterpret_cast<float*>(base + static_cast<size_t>(n) * static_cast<size_t>(j.aq_stride));
    int32_t* asum = reinterpret_cast<int32_t*>(ad + n);
    j.aq = aq;
    j.ad = ad;
    j.asum = asum;
    for_tokens([&](int64_t t) {
      int8_t* q = aq + t * j.aq_stride;
      quantize_act_q8_row(level, j.x + t * j.x_stride, cols, q, ad + t);
      std::fill(q + cols, q + j.aq_stride, int8_t{0});
      if (level == IsaLevel::kAvx512) {  // only the AVX-512 kernel reads it (flipped weights)
        int32_t sum = 0;  // |sum| <= 127 * cols: the driver limits cols to 131072
        for (int64_t c = 0; c < cols; ++c) sum += q[c];
        asum[t] = sum;
      }
    });
    return;
  }
  if (kind == ActKind::kBf16) {
    j.xb_stride = round_up(cols, 32);
    uint16_t* xb = reinterpret_cast<uint16_t*>(
        scratch(slot, static_cast<size_t>(n) * static_cast<size_t>(j.xb_stride) * sizeof(uint16_t)));
    j.xb = xb;
    for_tokens([&](int64_t t) {
      uint16_t* dst = xb + t * j.xb_stride;
      round_act_bf16(level, j.x + t * j.x_stride, cols, dst);
      std::fill(dst + cols, dst + j.xb_stride, uint16_t{0});
    });
    return;
  }
  // Q8: codes rows padded to 64 bytes, scale / sum rows to an even count of blocks; Q2_K also
  // the sums per 16 (rows of twice as many floats).
  const bool sums16 = kind == ActKind::kQ8Sums16;
  j.aq_stride = round_up(cols, 64);
  j.as_stride = j.aq_stride / kActBlock;
  j.xs16_stride = sums16 ? 2 * j.as_stride : 0;
  const size_t code_bytes = static_cast<size_t>(n) * static_cast<size_t>(j.aq_stride);
  const size_t scale_bytes = static_cast<size_t>(n) * static_cast<size_t>(j.as_stride) * 4;
  uint8_t* base = scratch(slot, code_bytes + (sums16 ? 4 : 2) * scale_bytes);
  int8_t* aq = reinterpret_cast<int8_t*>(base);
  float* ad = reinterpret_cast<float*>(base + code_bytes);
  float* axs = reinterpret_cast<float*>(base + code_bytes + scale_bytes);
  float* axs16 = sums16 ? reinterpret_cast<float*>(base + code_bytes + 2 * scale_bytes) : nullptr;
  j.aq = aq;
  j.ad = ad;
  j.axs = axs;
  j.axs16 = axs16;
  for_tokens([&](int64_t t) {
    int8_t* q = aq + t * j.aq_stride;
    float* d = ad + t * j.as_stride;
    float* s = axs + t * j.as_stride;
    quantize_act_q8(level, j.x + t * j.x_stride, cols, q, d, s);
    std::fill(q + cols, q + j.aq_stride, int8_t{0});
    std::fill(d + cols / kActBlock, d + j.as_stride, 0.f);
    std::fill(s + cols / kActBlock, s + j.as_stride, 0.f);
    if (sums16) {
      float* s16 = axs16 + t * j.xs16_stride;
      act_sums16(q, d, cols, s16);
      std::fill(s16 + cols / 16, s16 + j.xs16_stride, 0.f);
    }
  });
}

}  // namespace

bool matmul_runs_panels(IsaLevel level, DType t) {
  switch (level) {
    case IsaLevel::kAvx512: return panel_layout_supported(t);
    case IsaLevel::kAvx2: return panel_layout_supported(t);
    case IsaLevel::kScalar: break;
  }
  return false;
}

bool matmul_prefers_panels(IsaLevel level, DType t) {
  // Every type a level's panel kernels run. (AVX-512's Q3_K ran its lane kernels while its panel
  // tiles lost to them; with the panels' 3-bit fields and scaled codes (session 28) they win at
  // one token: 2 threads from DRAM on an Intel Xeon 26-28 against 23-24.5 GB/s. AVX2's Q5_K
  // panels were left out while their one-token tiles ran below its GGUF kernels; since the fifth
  // bits are broadcast from memory they beat them on Zen 3: 17.6-20.1 against 11.3-17.5 GB/s,
  // and 2x at 16 tokens.)
  return matmul_runs_panels(level, t);
}

void set_matmul_batch_invariant(bool on) { g_batch_invariant.store(on); }
bool matmul_batch_invariant_requested() { return g_batch_invariant.load(); }
bool matmul_is_batch_invariant() { return best_isa() != IsaLevel::kAvx512 || g_batch_invariant.load(); }

bool matmul_isa_supported(IsaLevel level) { return cpu_supports(level); }

void check_matmul_args(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride,
                       const float* y, int64_t y_stride) {
  TRIAD_CHECK(dtype_supported_for_matmul(w.type), "matmul: unsupported weight type ",
              static_cast<uint32_t>(w.type));
  TRIAD_CHECK(dtype_has_row_scale(w.type) == (w.row_scale != nullptr), "matmul: ",
              dtype_name(w.type), dtype_has_row_scale(w.type) ? " weights need" : " weights take no",
              " row scales");
  // I8 rows are dotted in int32: 127 * 127 * cols must stay below 2^31.
  TRIAD_CHECK(w.type != DType::kI8 || w.cols <= 131072, "matmul: I8 rows of ", w.cols,
              " columns exceed 131072");
  TRIAD_CHECK(!w.panels || (!w.lanes && panel_layout_fits(w.type, w.rows)), "matmul: ", dtype_name(w.type),
              " x ", w.rows, " rows has no panel layout");
  TRIAD_CHECK(!w.lanes || lane_layout_supported(w.type), "matmul: ", dtype_name(w.type),
              " has no lane layout");
  TRIAD_CHECK(w.rows >= 0 && w.cols >= 0 && n_tokens >= 0, "matmul: negative size (rows ",
              w.rows, ", cols ", w.cols, ", n_tokens ", n_tokens, ")");
  const int64_t bs = traits(w.type).block_size;
  TRIAD_CHECK(w.cols % bs == 0, "matmul: cols ", w.cols, " is not a multiple of the ",
              dtype_name(w.type), " block size ", bs);
  TRIAD_CHECK(x_stride >= w.cols, "matmul: x_stride ", x_stride, " < cols ", w.cols);
  TRIAD_CHECK(y_stride >= w.rows, "matmul: y_stride ", y_stride, " < rows ", w.rows);
  const auto wbytes = checked_mul(static_cast<uint64_t>(w.rows),
                                  row_bytes(w.type, static_cast<uint64_t>(w.cols)));
  const auto xelems = checked_mul(static_cast<uint64_t>(n_tokens), static_cast<uint64_t>(x_stride));
  const auto yelems = checked_mul(static_cast<uint64_t>(n_tokens), static_cast<uint64_t>(y_stride));
  TRIAD_CHECK(wbytes && xelems && yelems && *xelems <= (uint64_t{1} << 60) &&
                  *yelems <= (uint64_t{1} << 60),
              "matmul: sizes overflow (rows ", w.rows, ", cols ", w.cols, ", n_tokens ", n_tokens,
              ")");
  if (w.rows > 0 && n_tokens > 0) {
    TRIAD_CHECK(y != nullptr, "matmul: null output");
    if (w.cols > 0) TRIAD_CHECK(w.data != nullptr && x != nullptr, "matmul: null weights or input");
  }
}

namespace {

// A checked product ready to run: its job (activations prepared by the caller) and the rows
// kernel of its ISA level.
struct Product {
  MatmulJob j;
  MatmulRowsFn rows = nullptr;
  bool lay_back = false;  // lane-layout rows on a level without lane kernels
  void operator()(int64_t r0, int64_t r1, int64_t t0, int64_t t1) const {
    if (lay_back) {
      rows_from_lanes(rows, j, r0, r1, t0, t1);
    } else {
      rows(j, r0, r1, t0, t1);
    }
  }
};

// The job of y = W x, arguments already checked, with rows and tokens > 0 and cols > 0.
Product make_product(IsaLevel level, const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride,
                     float* y, int64_t y_stride) {
  Product p;
  MatmulJob& j = p.j;
  j.type = w.type;
  j.w = static_cast<const uint8_t*>(w.data);
  j.row_bytes = row_bytes(w.type, static_cast<uint64_t>(w.cols));
  j.rows = w.rows;
  j.cols = w.cols;
  j.n_tokens = n_tokens;
  j.x = x;
  j.x_stride = x_stride;
  j.y = y;
  j.y_stride = y_stride;
  j.row_scale = w.row_scale;
  j.lanes = w.lanes;
  j.panels = w.panels;
  p.rows = rows_fn(level, w.type, w.lanes, w.panels);
  const IsaLevel runs = p.rows == matmul_rows_avx512 ? IsaLevel::kAvx512
                        : p.rows == matmul_rows_avx2 ? IsaLevel::kAvx2
                                                     : IsaLevel::kScalar;
  p.lay_back = (w.lanes && runs != IsaLevel::kAvx512) || (w.panels && !matmul_runs_panels(runs, w.type));
  return p;
}

// Copies the prepared activations of `from` (same input, kind and columns) into `to`.
void share_activations(const MatmulJob& from, MatmulJob& to) {
  to.xb = from.xb;
  to.xb_stride = from.xb_stride;
  to.aq = from.aq;
  to.aq_stride = from.aq_stride;
  to.ad = from.ad;
  to.axs = from.axs;
  to.asum = from.asum;
  to.as_stride = from.as_stride;
  to.axs16 = from.axs16;
  to.xs16_stride = from.xs16_stride;
}

// How one product is cut into chunks for a pool of nth > 1 threads. Rows are split in units of
// 16 into chunks that the pool's threads claim as they run (a descheduled thread delays the
// product by one chunk, not its share). A few tokens: several chunks per thread. Many: the
// prompt kernels re-lay every token's activations per call, so fewer, larger chunks. With
// fewer row units than threads (tiny matrices, many tokens) tokens are split instead. Every row
// and token is computed alike whatever the split.
class ChunkPlan {
 public:
  ChunkPlan() = default;
  ChunkPlan(int64_t rows, int64_t n_tokens, int nth) : rows_(rows), n_tokens_(n_tokens), nth_(nth) {
    units_ = (rows + kUnit - 1) / kUnit;
    by_rows_ = units_ >= nth || n_tokens < nth;
    if (by_rows_) {
      const int64_t per_thread = n_tokens >= 8 ? 2 : ThreadPool::kChunksPerThread;
      k_ = std::min(units_, per_thread * nth);
      // Many tokens: the first nth chunks take 70% of the rows, the last nth the rest, so the
      // threads finish within a small chunk of each other (equal quarters left one thread idle
      // for up to a quarter of the product): 16-stream decode 1.5-2.7% faster end to end. The
      // price: a thread descheduled inside a first chunk holds 35% of the product, not 25%.
      guided_ = n_tokens >= 8 && k_ == 2 * nth && units_ >= 8 * nth;
    } else {
      // At least 8 tokens per chunk where there are 8 (the prompt kernels' threshold on AVX-512).
      k_ = n_tokens >= 8 ? std::clamp<int64_t>(n_tokens / 8, 1, 2 * nth)
                         : std::min<int64_t>(n_tokens, ThreadPool::kChunksPerThread * nth);
    }
  }
  int64_t chunks() const { return k_; }
  // Runs chunk c of `p`.
  void run(const Product& p, int64_t c) const {
    if (!by_rows_) {
      p(0, rows_, n_tokens_ * c / k_, n_tokens_ * (c + 1) / k_);
      return;
    }
    const int64_t r0 = std::min(rows_, bound(c) * kUnit);
    const int64_t r1 = std::min(rows_, bound(c + 1) * kUnit);
    if (r0 < r1) p(r0, r1, 0, n_tokens_);
  }

 private:
  static constexpr int64_t kUnit = 16;
  int64_t bound(int64_t c) const {
    if (!guided_) return units_ * c / k_;
    const int64_t big = units_ * 7 / (10 * nth_);
    return c <= nth_ ? big * c : big * nth_ + (units_ - big * nth_) * (c - nth_) / nth_;
  }
  int64_t rows_ = 0, n_tokens_ = 0;
  int64_t nth_ = 1;
  int64_t units_ = 0, k_ = 0;
  bool by_rows_ = true, guided_ = false;
};

}  // namespace

void matmul_isa(IsaLevel level, const WeightMatrix& w, const float* x, int64_t n_tokens,
                int64_t x_stride, float* y, int64_t y_stride, ThreadPool& pool) {
  const GroupProduct p{w, y, y_stride};
  matmul_group_isa(level, std::span<const GroupProduct>(&p, 1), x, n_tokens, x_stride, pool);
}

void matmul_group_isa(IsaLevel level, std::span<const GroupProduct> products, const float* x, int64_t n_tokens,
                      int64_t x_stride, ThreadPool& pool) {
  TRIAD_CHECK(products.size() <= static_cast<size_t>(kMaxGroupProducts), "matmul_group: ", products.size(),
              " products (at most ", kMaxGroupProducts, ")");
  for (const GroupProduct& gp : products) check_matmul_args(gp.w, x, n_tokens, x_stride, gp.y, gp.y_stride);
  TRIAD_CHECK(matmul_isa_supported(level), "matmul: this CPU does not support ", isa_name(level));
  if (n_tokens == 0) return;
  Product run[kMaxGroupProducts];
  int n = 0, slots = 0;
  for (const GroupProduct& gp : products) {
    const WeightMatrix& w = gp.w;
    if (w.rows == 0) continue;
    if (w.cols == 0) {
      for (int64_t t = 0; t < n_tokens; ++t) std::fill(gp.y + t * gp.y_stride, gp.y + t * gp.y_stride + w.rows, 0.f);
      continue;
    }
    Product& p = run[n];
    p = make_product(level, w, x, n_tokens, x_stride, gp.y, gp.y_stride);
    // Activations of one kind and width are prepared once for the group (in its own slot).
    int same = -1;
    for (int i = 0; i < n && same < 0; ++i)
      if (act_kind(run[i].j.type) == act_kind(w.type) && run[i].j.cols == w.cols) same = i;
    if (same >= 0) {
      share_activations(run[same].j, p.j);
    } else {
      prepare_activations(level, p.j, slots++, pool);
    }
    ++n;
  }
  const int nth = pool.size();
  if (nth == 1) {
    for (int i = 0; i < n; ++i) run[i](0, run[i].j.rows, 0, n_tokens);
    return;
  }
  // One job for all products: their chunks in product order, claimed together.
  ChunkPlan plans[kMaxGroupProducts];
  int64_t first[kMaxGroupProducts + 1] = {0};
  for (int i = 0; i < n; ++i) {
    plans[i] = ChunkPlan(run[i].j.rows, n_tokens, nth);
    first[i + 1] = first[i] + plans[i].chunks();
  }
  pool.for_each_chunk(first[n], [&](int64_t c, int) {
    int i = 0;
    while (c >= first[i + 1]) ++i;
    plans[i].run(run[i], c - first[i]);
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t x_stride, float* y,
            int64_t y_stride, ThreadPool& pool) {
  matmul_isa(best_isa(), w, x, n_tokens, x_stride, y, y_stride, pool);
}

void matmul_group(std::span<const GroupProduct> products, const float* x, int64_t n_tokens, int64_t x_stride,
                  ThreadPool& pool) {
  matmul_group_isa(best_isa(), products, x, n_tokens, x_stride, pool);
}

void matmul_experts_isa(IsaLevel level, const ExpertProducts& e, const float* x, int64_t x_stride, float* y,
                        int64_t y_stride, float* gather, ThreadPool& pool, const void* const* data2, float* y2) {
  TRIAD_CHECK((data2 == nullptr) == (y2 == nullptr), "matmul_experts: a second product set needs its output");
  const int32_t sets = data2 ? 2 : 1;
  TRIAD_CHECK(e.n >= 0 && e.begin != nullptr && e.begin[0] == 0, "matmul_experts: bad expert table");
  TRIAD_CHECK(!dtype_has_row_scale(e.shape.type), "matmul_experts: row-scaled weights are not supported");
  TRIAD_CHECK(!e.shape.panels, "matmul_experts: experts are not laid out in panels");
  TRIAD_CHECK(matmul_isa_supported(level), "matmul_experts: this CPU does not support ", isa_name(level));
  const int64_t cols = e.shape.cols, total = e.begin[e.n];
  int64_t most = 0;
  for (int32_t k = 0; k < e.n; ++k) {
    const int64_t cnt = e.begin[k + 1] - e.begin[k];
    TRIAD_CHECK(cnt >= 0, "matmul_experts: expert ", k, " has a negative row count");
    most = std::max(most, cnt);
    if (cnt == 0) continue;
    // Every product is checked here, before any runs on a worker (which must not throw).
    for (int32_t set = 0; set < sets; ++set) {
      WeightMatrix w = e.shape;
      w.data = (set ? data2 : e.data)[k];
      check_matmul_args(w, x, cnt, e.src ? cols : x_stride, set ? y2 : y, y_stride);
    }
  }
  if (total == 0) return;
  const float* in = x;
  int64_t in_stride = x_stride;
  if (e.src != nullptr) {
    TRIAD_CHECK(gather != nullptr && x_stride >= cols, "matmul_experts: gathering needs a buffer");
    pool.parallel_for(total, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        std::memcpy(gather + r * cols, x + static_cast<int64_t>(e.src[r]) * x_stride,
                    static_cast<size_t>(cols) * sizeof(float));
    });
    in = gather;
    in_stride = cols;
  }
  // Product j: expert j % n of set j / n.
  auto product = [&](int32_t j, ThreadPool& p) {
    const int32_t k = j % e.n, set = j / e.n;
    const int64_t r0 = e.begin[k], cnt = e.begin[k + 1] - r0;
    if (cnt == 0) return;
    WeightMatrix w = e.shape;
    w.data = (set ? data2 : e.data)[k];
    matmul_isa(level, w, in + r0 * in_stride, cnt, in_stride, (set ? y2 : y) + r0 * y_stride, y_stride, p);
  };
  const int32_t n_products = e.n * sets;
  constexpr int64_t kSpreadRows = 8;  // decode-sized groups: a whole product per thread
  if (pool.size() > 1 && most <= kSpreadRows) {
    pool.for_each_chunk(n_products, [&](int64_t j, int) {
      thread_local ThreadPool solo(1);
      product(static_cast<int32_t>(j), solo);
    });
    return;
  }
  for (int32_t j = 0; j < n_products; ++j) product(j, pool);
}

void matmul_experts(const ExpertProducts& e, const float* x, int64_t x_stride, float* y, int64_t y_stride,
                    float* gather, ThreadPool& pool) {
  matmul_experts_isa(best_isa(), e, x, x_stride, y, y_stride, gather, pool);
}

void matmul_experts_pair(const ExpertProducts& e, const void* const* data2, const float* x, int64_t x_stride, float* y,
                         float* y2, int64_t y_stride, float* gather, ThreadPool& pool) {
  TRIAD_CHECK(data2 != nullptr && y2 != nullptr, "matmul_experts_pair: the second product set is missing");
  matmul_experts_isa(best_isa(), e, x, x_stride, y, y_stride, gather, pool, data2, y2);
}

}  // namespace triad::kernels
