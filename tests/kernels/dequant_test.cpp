// Tests of weight dequantization (kernels/quant.h): every variant (reference, dispatching
// dequantize_row, and each SIMD variant the CPU has) against vectors produced by PyPI
// gguf.quants (gen_dequant_vectors.py, run by the ctest fixture into $TRIAD_DEQUANT_VECTORS),
// compared bit for bit; plus format checks written from the GGML layout description, block
// sizes, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/dequant_isa.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"

namespace triad::kernels {
namespace {

using DequantFn = std::function<void(DType, const void*, float*, int64_t)>;

struct Variant {
  std::string name;
  DequantFn fn;
};

// The variants this machine can run. SIMD variants are called directly (after the same checks
// dequantize_row makes), so each is tested whatever TRIAD_ISA says.
std::vector<Variant> variants() {
  std::vector<Variant> v;
  v.push_back({"ref", dequantize_row_ref});
  v.push_back({"dispatch", dequantize_row});
  if (cpu_supports(IsaLevel::kAvx2)) {
    v.push_back({"avx2", [](DType t, const void* s, float* d, int64_t n) {
                   detail::check_dequant_args(t, s, d, n);
                   if (!detail::dequantize_row_avx2(t, s, d, n)) dequantize_row_ref(t, s, d, n);
                 }});
  }
  return v;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Bit equality, except that any NaN equals any NaN (NaN payloads may be quieted).
bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return f32_to_bits(a) == f32_to_bits(b);
}

// Index of the first element where got and want differ, or -1.
int64_t first_mismatch(const float* got, const float* want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!same_float(got[i], want[i])) return i;
  return -1;
}

struct VectorSet {
  std::string name;
  DType type;
  int64_t n;
  std::vector<uint8_t> raw;
  std::vector<float> expected;
};

// Loads the generated vectors, or returns nullopt with `why` set when they are unavailable.
std::optional<std::vector<VectorSet>> load_vectors(std::string* why) {
  const char* dir_env = std::getenv("TRIAD_DEQUANT_VECTORS");
  if (!dir_env || !*dir_env) {
    *why =
        "TRIAD_DEQUANT_VECTORS is not set (run through ctest, whose fixture runs "
        "tests/kernels/gen_dequant_vectors.py)";
    return std::nullopt;
  }
  const std::string dir = dir_env;
  const std::vector<uint8_t> skipped = read_file(dir + "/SKIPPED");
  if (!skipped.empty()) {
    *why = "test vectors not generated: " + std::string(skipped.begin(), skipped.end());
    return std::nullopt;
  }
  std::ifstream manifest(dir + "/MANIFEST");
  if (!manifest) {
    *why = "no MANIFEST in " + dir;
    return std::vector<VectorSet>{};  // an empty set fails the test below
  }
  std::vector<VectorSet> sets;
  std::string line;
  while (std::getline(manifest, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    VectorSet s;
    uint32_t id = 0;
    ls >> s.name >> id >> s.n;
    EXPECT_TRUE(ls && dtype_traits(id).has_value()) << "bad MANIFEST line: " << line;
    if (!ls || !dtype_traits(id)) continue;
    s.type = static_cast<DType>(id);
    s.raw = read_file(dir + "/" + s.name + ".raw");
    const std::vector<uint8_t> f = read_file(dir + "/" + s.name + ".f32");
    EXPECT_EQ(s.raw.size(), row_bytes(s.type, static_cast<uint64_t>(s.n))) << s.name;
    EXPECT_EQ(f.size(), static_cast<size_t>(s.n) * 4) << s.name;
    if (s.raw.size() != row_bytes(s.type, static_cast<uint64_t>(s.n)) ||
        f.size() != static_cast<size_t>(s.n) * 4)
      continue;
    s.expected.resize(static_cast<size_t>(s.n));
    std::memcpy(s.expected.data(), f.data(), f.size());
    sets.push_back(std::move(s));
  }
  return sets;
}

class DequantVectors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto sets = load_vectors(&why);
    if (!sets) GTEST_SKIP() << why;
    ASSERT_FALSE(sets->empty()) << "no test vectors loaded: " << why;
    sets_ = std::move(*sets);
  }
  std::vector<VectorSet> sets_;
};

TEST_F(DequantVectors, CoversEveryWeightType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
                  DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL,
                  DType::kIQ4_XS, DType::kMXFP4, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    bool found = false;
    for (const VectorSet& s : sets_) found |= (s.type == t);
    EXPECT_TRUE(found) << "no vectors for " << dtype_name(t);
  }
}

TEST_F(DequantVectors, WholeRowsBitExact) {
  for (const Variant& v : variants()) {
    for (const VectorSet& s : sets_) {
      std::vector<float> out(static_cast<size_t>(s.n), -12345.0f);
      v.fn(s.type, s.raw.data(), out.data(), s.n);
      const int64_t bad = first_mismatch(out.data(), s.expected.data(), s.n);
      EXPECT_EQ(bad, -1) << v.name << " " << s.name << ": element " << bad << " got "
                         << (bad >= 0 ? out[bad] : 0) << " (0x" << std::hex
                         << (bad >= 0 ? f32_to_bits(out[bad]) : 0) << ") want 0x"
                         << (bad >= 0 ? f32_to_bits(s.expected[bad]) : 0);
    }
  }
}

// Pieces of random block counts, with src and dst deliberately misaligned.
TEST_F(DequantVectors, MisalignedPiecesBitExact) {
  std::mt19937 rng(7);
  for (const Variant& v : variants()) {
    for (const VectorSet& s : sets_) {
      const DTypeTraits& tr = traits(s.type);
      const int64_t n_blocks = s.n / tr.block_size;
      std::vector<uint8_t> src(s.raw.size() + 1);
      std::memcpy(src.data() + 1, s.raw.data(), s.raw.size());
      std::vector<float> out(static_cast<size_t>(s.n) + 1, -12345.0f);
      int64_t b = 0;
      while (b < n_blocks) {
        const int64_t take = std::min<int64_t>(n_blocks - b, 1 + static_cast<int64_t>(rng() % 13));
        v.fn(s.type, src.data() + 1 + b * tr.block_bytes, out.data() + 1 + b * tr.block_size,
             take * tr.block_size);
        b += take;
      }
      const int64_t bad = first_mismatch(out.data() + 1, s.expected.data(), s.n);
      EXPECT_EQ(bad, -1) << v.name << " " << s.name << ": element " << bad;
    }
  }
}

// Plain types take any n, including ones that leave a SIMD tail.
TEST_F(DequantVectors, PlainTypesOddLengths) {
  for (const Variant& v : variants()) {
    for (const VectorSet& s : sets_) {
      if (traits(s.type).block_size != 1) continue;
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{9}, int64_t{15}, s.n - 3}) {
        std::vector<float> out(static_cast<size_t>(n));
        v.fn(s.type, s.raw.data(), out.data(), n);
        EXPECT_EQ(first_mismatch(out.data(), s.expected.data(), n), -1)
            << v.name << " " << s.name << " n=" << n;
      }
    }
  }
}

// The vectors must exercise rounding: in Q4_1 the final add rounds, so computing it exactly
// (in double) must differ from gguf's float32 result somewhere; a test set without such
// elements could not tell a float32 implementation from a wider one.
TEST_F(DequantVectors, VectorsExerciseRounding) {
  for (const VectorSet& s : sets_) {
    if (s.type != DType::kQ4_1) continue;
    int64_t inexact = 0;
    for (int64_t b = 0; b < s.n / kQK4_1; ++b) {
      BlockQ4_1 blk;
      std::memcpy(&blk, s.raw.data() + b * sizeof(BlockQ4_1), sizeof blk);
      for (int i = 0; i < kQK4_1; ++i) {
        const int q = i < 16 ? (blk.qs[i] & 0x0F) : (blk.qs[i - 16] >> 4);
        const double exact = static_cast<double>(fp16_to_f32(blk.d)) * q + fp16_to_f32(blk.m);
        inexact += exact != static_cast<double>(s.expected[static_cast<size_t>(b * kQK4_1 + i)]);
      }
    }
    EXPECT_GT(inexact, 0) << "Q4_1 vectors never round";
    return;
  }
  FAIL() << "no Q4_1 vectors";
}

// ---- Checks written from the format description (need no generated vectors). ----

std::vector<float> run(const Variant& v, DType t, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  v.fn(t, src, out.data(), n);
  return out;
}

TEST(DequantFormat, BlockSizesMatchDtypeTraits) {
  EXPECT_EQ(sizeof(BlockQ4_0), traits(DType::kQ4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_1), traits(DType::kQ4_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_0), traits(DType::kQ5_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_1), traits(DType::kQ5_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_0), traits(DType::kQ8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_K), traits(DType::kQ4_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_K), traits(DType::kQ5_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ6_K), traits(DType::kQ6_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_K), traits(DType::kQ8_K).block_bytes);
  EXPECT_EQ(kQK4_0, static_cast<int>(traits(DType::kQ4_0).block_size));
  EXPECT_EQ(kQK_K, static_cast<int>(traits(DType::kQ6_K).block_size));
  EXPECT_EQ(kQK_K, static_cast<int>(traits(DType::kQ8_K).block_size));
}

TEST(DequantFormat, Q8_0Simple) {
  BlockQ8_0 blk;
  blk.d = f32_to_fp16(0.5f);
  for (int i = 0; i < 32; ++i) blk.qs[i] = static_cast<int8_t>(i * 7 - 120);
  for (const Variant& v : variants()) {
    const auto y = run(v, DType::kQ8_0, &blk, 32);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], (i * 7 - 120) * 0.5f) << v.name << " i=" << i;
  }
}

TEST(DequantFormat, Q4_0NibbleOrder) {
  BlockQ4_0 blk;
  blk.d = f32_to_fp16(-2.0f);
  for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  for (const Variant& v : variants()) {
    const auto y = run(v, DType::kQ4_0, &blk, 32);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], -2.0f * (j - 8)) << v.name << " j=" << j;
      EXPECT_EQ(y[j + 16], -2.0f * (15 - j - 8)) << v.name << " j=" << j;
    }
  }
}

TEST(DequantFormat, Q5_1HighBits) {
  BlockQ5_1 blk;
  blk.d = f32_to_fp16(0.25f);
  blk.m = f32_to_fp16(-1.0f);
  const uint32_t qh = 0xA5C3F00Fu;
  std::memcpy(blk.qh, &qh, 4);
  for (int j = 0; j < 16; ++j)
    blk.qs[j] = static_cast<uint8_t>(((j * 5) & 15) | ((j * 3) & 15) << 4);
  for (const Variant& v : variants()) {
    const auto y = run(v, DType::kQ5_1, &blk, 32);
    for (int i = 0; i < 32; ++i) {
      const int lo = i < 16 ? (i * 5) & 15 : ((i - 16) * 3) & 15;
      const int q = lo | static_cast<int>((qh >> i) & 1) << 4;
      EXPECT_EQ(y[i], 0.25f * q - 1.0f) << v.name << " i=" << i;
    }
  }
}

// Packs 6-bit scales/mins the way get_scale_min_k4 documents, and checks the round trip.
void pack_scale_min_k4(const uint8_t sc[8], const uint8_t mn[8], uint8_t q[12]) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<uint8_t>((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
  }
}

TEST(DequantFormat, ScaleMinK4RoundTrip) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t sc[8], mn[8], q[12];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(trial < 2 ? 63 * trial : rng() % 64);
      mn[j] = static_cast<uint8_t>(trial < 2 ? 63 - 63 * trial : rng() % 64);
    }
    pack_scale_min_k4(sc, mn, q);
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      get_scale_min_k4(j, q, &s, &m);
      EXPECT_EQ(s, sc[j]) << "j=" << j;
      EXPECT_EQ(m, mn[j]) << "j=" << j;
    }
  }
}

TEST(DequantFormat, Q5_KLayout) {
  std::mt19937 rng(11);
  BlockQ5_K blk;
  blk.d = f32_to_fp16(0.125f);
  blk.dmin = f32_to_fp16(0.0625f);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(rng() % 64);
    mn[j] = static_cast<uint8_t>(rng() % 64);
  }
  pack_scale_min_k4(sc, mn, blk.scales);
  for (auto& b : blk.qh) b = static_cast<uint8_t>(rng());
  for (auto& b : blk.qs) b = static_cast<uint8_t>(rng());
  for (const Variant& v : variants()) {
    const auto y = run(v, DType::kQ5_K, &blk, 256);
    for (int i = 0; i < 256; ++i) {
      const int j = i / 32, l = i % 32;
      const int q = ((blk.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | ((blk.qh[l] >> j) & 1)
                                                                             << 4;
      // Every term is exact in float32 here (small integers times powers of two).
      const float want = 0.125f * sc[j] * q - 0.0625f * mn[j];
      EXPECT_EQ(y[i], want) << v.name << " i=" << i;
    }
  }
}

TEST(DequantFormat, Q6_KLayout) {
  std::mt19937 rng(5);
  BlockQ6_K blk;
  blk.d = f32_to_fp16(0.5f);
  for (auto& b : blk.ql) b = static_cast<uint8_t>(rng());
  for (auto& b : blk.qh) b = static_cast<uint8_t>(rng());
  for (int s = 0; s < 16; ++s) blk.scales[s] = static_cast<int8_t>(s * 9 - 70);
  for (const Variant& v : variants()) {
    const auto y = run(v, DType::kQ6_K, &blk, 256);
    for (int i = 0; i < 256; ++i) {
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      const int lo = (blk.ql[64 * h + 32 * (k % 2) + l] >> (k < 2 ? 0 : 4)) & 15;
      const int hi = (blk.qh[32 * h + l] >> (2 * k)) & 3;
      const float want = 0.5f * blk.scales[i / 16] * ((lo | hi << 4) - 32);
      EXPECT_EQ(y[i], want) << v.name << " i=" << i;
    }
  }
}

TEST(DequantFormat, PlainTypesKeepBits) {
  const uint16_t halves[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x3c00, 0xfbff, 0x7c00, 0xfc00};
  const float want_f16[] = {
      0.0f,     -0.0f,    5.9604644775390625e-8f, -6.0975551605224609e-5f, 1.0f, -65504.0f,
      INFINITY, -INFINITY};
  for (const Variant& v : variants()) {
    const auto y = run(v, DType::kF16, halves, 8);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(f32_to_bits(y[i]), f32_to_bits(want_f16[i])) << v.name << " i=" << i;
    const auto z = run(v, DType::kBF16, halves, 8);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(f32_to_bits(z[i]), static_cast<uint32_t>(halves[i]) << 16) << v.name;
    const uint32_t words[] = {0x7fc12345u, 0x00000001u, 0x80000000u, 0x3f800000u};
    const auto w = run(v, DType::kF32, words, 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(f32_to_bits(w[i]), words[i]) << v.name;
  }
}

TEST(DequantErrors, RejectsBadLengths) {
  std::vector<uint8_t> src(4096);
  std::vector<float> dst(1024);
  for (const Variant& v : variants()) {
    EXPECT_THROW(v.fn(DType::kQ4_0, src.data(), dst.data(), 33), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kQ8_0, src.data(), dst.data(), 16), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kQ4_K, src.data(), dst.data(), 32), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kQ6_K, src.data(), dst.data(), 300), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kQ4_0, src.data(), dst.data(), -32), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kF32, src.data(), dst.data(), -1), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kQ4_0, nullptr, dst.data(), 32), Error) << v.name;
    EXPECT_THROW(v.fn(DType::kQ4_0, src.data(), nullptr, 32), Error) << v.name;
    EXPECT_NO_THROW(v.fn(DType::kQ4_0, nullptr, nullptr, 0)) << v.name;
  }
}

TEST(DequantErrors, RejectsUnsupportedTypes) {
  std::vector<uint8_t> src(4096);
  std::vector<float> dst(1024);
  for (const Variant& v : variants()) {
    for (DType t : {DType::kQ8_1, DType::kQ8_K, DType::kI8, DType::kI16,
                    DType::kI32, DType::kI64, DType::kF64, static_cast<DType>(99),
                    static_cast<DType>(0xffffffffu)}) {
      EXPECT_THROW(v.fn(t, src.data(), dst.data(), 256), Error)
          << v.name << " type " << static_cast<uint32_t>(t);
    }
  }
  try {
    dequantize_row_ref(DType::kQ8_K, src.data(), dst.data(), 256);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace triad::kernels
