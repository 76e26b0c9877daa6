// Tests of the weight quantizers (quant/quantize.h), the mix rules (quant/mix.h), imatrix files
// (quant/imatrix.h) and whole-file quantization (quant/quantize_model.h).
//
// Bit-exactness against PyPI gguf.quants is checked by tests/quant/test_quantize_cli.py; here:
// round-trip error bounds per type, importance weights never raising a block's weighted error
// and lowering it overall, edge-case rows, llama.cpp's per-tensor rules, and the file-level
// contract (types, copies, no output left after an error).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant.h"
#include "quant/imatrix.h"
#include "quant/mix.h"
#include "quant/quantize.h"
#include "quant/quantize_model.h"

namespace triad::quant {
namespace {

namespace fs = std::filesystem;

std::vector<float> gaussian(size_t n, std::mt19937& rng, float sigma = 1.f) {
  std::normal_distribution<float> g(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

std::vector<float> roundtrip(DType t, const std::vector<float>& x, const float* imp) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(t, static_cast<uint64_t>(n)));
  quantize_row(t, x.data(), n, q.data(), imp);
  std::vector<float> y(x.size());
  kernels::dequantize_row_ref(t, q.data(), y.data(), n);
  return y;
}

double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, r = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    r += double(x[i]) * x[i];
  }
  return std::sqrt(e / r);
}

struct Bound {
  DType type;
  double max_rel_rmse;  // on Gaussian rows
};

// Measured on this test's Gaussian rows (seed 7: Q8_0 0.0048, Q6_K 0.0177, Q5_K 0.0360, Q5_1
// 0.0377, Q5_0 0.0423, Q4_K 0.0711, Q4_1 0.0780, Q4_0 0.0856, Q3_K 0.151, Q2_K 0.296, IQ4_NL
// 0.0748, IQ4_XS 0.0754, MXFP4 0.114) with about
// 15% headroom: a change that makes any type less accurate fails here.
const Bound kBounds[] = {
    {DType::kF32, 0.0},      {DType::kF16, 5e-4},     {DType::kBF16, 3e-3},
    {DType::kQ8_0, 0.0056},  {DType::kQ6_K, 0.0205},  {DType::kQ5_1, 0.0435},
    {DType::kQ5_0, 0.0487},  {DType::kQ5_K, 0.0415},  {DType::kQ4_1, 0.0897},
    {DType::kQ4_0, 0.0985},  {DType::kQ4_K, 0.0818},  {DType::kQ3_K, 0.174},
    {DType::kQ2_K, 0.341},   {DType::kIQ4_NL, 0.086}, {DType::kIQ4_XS, 0.087},
    {DType::kMXFP4, 0.131},
};

TEST(Quantize, RoundTripErrorWithinEachTypesBound) {
  std::mt19937 rng(7);
  const auto x = gaussian(256 * 64, rng);
  for (const Bound& b : kBounds) {
    ASSERT_TRUE(can_quantize(b.type)) << dtype_name(b.type);
    const double e = rel_rmse(x, roundtrip(b.type, x, nullptr));
    EXPECT_LE(e, b.max_rel_rmse) << dtype_name(b.type);
    if (b.type != DType::kF32) {
      EXPECT_GT(e, 0.0) << dtype_name(b.type);
    }
  }
}

TEST(Quantize, ZeroAndConstantRowsAreExactOrClose) {
  for (const Bound& b : kBounds) {
    std::vector<float> zero(512, 0.f);
    for (float v : roundtrip(b.type, zero, nullptr)) ASSERT_EQ(v, 0.f) << dtype_name(b.type);
    std::vector<float> c(512, 0.75f);
    for (float v : roundtrip(b.type, c, nullptr))
      ASSERT_NEAR(v, 0.75f, 0.75f * 0.02f) << dtype_name(b.type);
  }
}

TEST(Quantize, ExtremeMagnitudesStayFinite) {
  std::mt19937 rng(3);
  for (const Bound& b : kBounds) {
    // Within what the formats' fp16 scales can express (|x| below 65504, block scales above
    // fp16's smallest subnormal).
    for (float scale : {1e-3f, 1e4f}) {
      auto x = gaussian(512, rng, scale);
      const auto y = roundtrip(b.type, x, nullptr);
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << dtype_name(b.type) << " scale " << scale;
      {
        EXPECT_LE(rel_rmse(x, y), std::max(0.05, b.max_rel_rmse * 2))
            << dtype_name(b.type) << " scale " << scale;
      }
    }
  }
}

// Importance weights from a heavy-tailed distribution, as real activations have (a few
// channels carry most of the energy).
std::vector<float> importance(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.f, 1.5f);
  std::vector<float> w(n);
  for (float& v : w) v = std::exp(g(rng));
  return w;
}

TEST(Quantize, ImportanceNeverRaisesABlocksWeightedErrorAndLowersTheTotal) {
  std::mt19937 rng(11);
  const size_t n = 256 * 32;
  const auto x = gaussian(n, rng);
  const auto imp = importance(n, rng);
  for (const Bound& b : kBounds) {
    if (traits(b.type).block_size == 1) continue;
    const auto plain = roundtrip(b.type, x, nullptr);
    const auto guided = roundtrip(b.type, x, imp.data());
    const size_t bs = traits(b.type).block_size;
    for (size_t blk = 0; blk < n / bs; ++blk) {
      const double ep = weighted_sq_error(x.data() + blk * bs, plain.data() + blk * bs,
                                          static_cast<int64_t>(bs), imp.data() + blk * bs);
      const double eg = weighted_sq_error(x.data() + blk * bs, guided.data() + blk * bs,
                                          static_cast<int64_t>(bs), imp.data() + blk * bs);
      ASSERT_LE(eg, ep) << dtype_name(b.type) << " block " << blk;
    }
    const double tp = weighted_sq_error(x.data(), plain.data(), static_cast<int64_t>(n), imp.data());
    const double tg = weighted_sq_error(x.data(), guided.data(), static_cast<int64_t>(n), imp.data());
    // 8-bit codes leave little to gain; every coarser type gains at least 3%.
    EXPECT_LT(tg, tp * (b.type == DType::kQ8_0 ? 1.0 : 0.97))
        << dtype_name(b.type) << ": weighted error " << tg << " vs " << tp;
  }
}

TEST(Quantize, RejectsBadArguments) {
  std::vector<float> x(100, 1.f);
  std::vector<uint8_t> out(1024);
  EXPECT_THROW(quantize_row(DType::kQ4_K, x.data(), 100, out.data(), nullptr), Error);
  EXPECT_THROW(quantize_row(DType::kQ8_0, x.data(), 33, out.data(), nullptr), Error);
  EXPECT_THROW(quantize_row(DType::kQ8_K, x.data(), 0, out.data(), nullptr), Error);
  EXPECT_THROW(quantize_row(DType::kI32, x.data(), 4, out.data(), nullptr), Error);
}

// ---- mix rules ----

ModelShape llama_like(int n_layer) {
  ModelShape s;
  s.arch = "llama";
  s.n_layer = n_layer;
  s.n_head = 32;
  s.n_head_kv = 8;
  return s;
}

// The types a mix gives the tensors of a model of n_layer layers, in file (layer) order.
std::vector<std::pair<std::string, DType>> plan(const Mix& mix, const MixOptions& opt, int n_layer,
                                                int64_t ne0 = 4096) {
  std::vector<std::string> names = {"token_embd.weight", "output.weight"};
  for (int i = 0; i < n_layer; ++i)
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      names.push_back("blk." + std::to_string(i) + "." + t + ".weight");
  MixCounters c;
  for (const auto& n : names) c.count(n);
  std::vector<std::pair<std::string, DType>> out;
  for (const auto& n : names) out.emplace_back(n, choose_type(mix, opt, llama_like(n_layer), n, ne0, c).type);
  return out;
}

DType type_of(const std::vector<std::pair<std::string, DType>>& p, const std::string& name) {
  for (const auto& [n, t] : p)
    if (n == name) return t;
  ADD_FAILURE() << "no tensor " << name;
  return DType::kF32;
}

TEST(Mix, Q4_K_MFollowsLlamaCppRules) {
  const auto p = plan(*find_mix("q4_k_m"), {}, 32);
  EXPECT_EQ(type_of(p, "output.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of(p, "token_embd.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of(p, "blk.5.attn_q.weight"), DType::kQ4_K);
  // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
  for (int i = 0; i < 32; ++i) {
    const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
    const DType want = more ? DType::kQ6_K : DType::kQ4_K;
    EXPECT_EQ(type_of(p, "blk." + std::to_string(i) + ".attn_v.weight"), want) << i;
    EXPECT_EQ(type_of(p, "blk." + std::to_string(i) + ".ffn_down.weight"), want) << i;
  }
}

TEST(Mix, SmallAndLowBitMixes) {
  const auto s = plan(*find_mix("Q4_K_S"), {}, 32);
  EXPECT_EQ(type_of(s, "blk.3.attn_v.weight"), DType::kQ5_K);
  EXPECT_EQ(type_of(s, "blk.4.attn_v.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of(s, "blk.3.ffn_down.weight"), DType::kQ5_K);
  EXPECT_EQ(type_of(s, "blk.4.ffn_down.weight"), DType::kQ4_K);
  const auto q2 = plan(*find_mix("Q2_K"), {}, 32);
  EXPECT_EQ(type_of(q2, "blk.0.attn_v.weight"), DType::kQ4_K);  // n_gqa = 4
  EXPECT_EQ(type_of(q2, "blk.0.ffn_down.weight"), DType::kQ3_K);
  EXPECT_EQ(type_of(q2, "blk.0.attn_output.weight"), DType::kQ3_K);
  EXPECT_EQ(type_of(q2, "blk.0.ffn_up.weight"), DType::kQ2_K);
  const auto q3m = plan(*find_mix("Q3_K_M"), {}, 32);
  EXPECT_EQ(type_of(q3m, "blk.1.attn_v.weight"), DType::kQ5_K);
  EXPECT_EQ(type_of(q3m, "blk.2.attn_v.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of(q3m, "blk.1.ffn_down.weight"), DType::kQ5_K);
  EXPECT_EQ(type_of(q3m, "blk.2.ffn_down.weight"), DType::kQ4_K);
  EXPECT_EQ(type_of(q3m, "blk.9.attn_output.weight"), DType::kQ4_K);
  const auto q8 = plan(*find_mix("Q8_0"), {}, 4);
  EXPECT_EQ(type_of(q8, "output.weight"), DType::kQ8_0);
  EXPECT_EQ(type_of(q8, "blk.0.attn_v.weight"), DType::kQ8_0);
}

TEST(Mix, FallbacksForRowsTheTypeCannotHold) {
  const Mix m = *find_mix("Q4_K_M");
  MixCounters c;
  const auto s = llama_like(4);
  TypeChoice t = choose_type(m, {}, s, "blk.0.ffn_up.weight", 896, c);
  EXPECT_TRUE(t.fallback);
  EXPECT_EQ(t.type, DType::kQ5_0);
  EXPECT_EQ(choose_type(m, {}, s, "output.weight", 896, c).type, DType::kQ8_0);
  EXPECT_EQ(choose_type(m, {}, s, "blk.0.ffn_up.weight", 172, c).type, DType::kF16);
  EXPECT_EQ(choose_type(*find_mix("Q6_K"), {}, s, "blk.0.ffn_up.weight", 96, c).type, DType::kQ8_0);
  EXPECT_EQ(choose_type(*find_mix("Q5_K_S"), {}, s, "blk.0.ffn_up.weight", 96, c).type, DType::kQ5_1);
}

TEST(Mix, UserChoicesWinEvenWhenEqualToTheBaseType) {
  MixOptions o;
  o.overrides.push_back(parse_override("ffn_down=q4_k"));  // the mix's own base type
  o.overrides.push_back(parse_override("blk\\.1\\..*=Q8_0"));
  o.output_type = DType::kQ8_0;
  o.token_embedding_type = DType::kQ6_K;
  const auto p = plan(*find_mix("Q4_K_M"), o, 8);
  EXPECT_EQ(type_of(p, "blk.0.ffn_down.weight"), DType::kQ4_K);  // the mix alone says Q6_K
  EXPECT_EQ(type_of(p, "blk.1.ffn_down.weight"), DType::kQ4_K);  // first match wins
  EXPECT_EQ(type_of(p, "blk.1.attn_q.weight"), DType::kQ8_0);
  EXPECT_EQ(type_of(p, "blk.0.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(type_of(p, "output.weight"), DType::kQ8_0);
  EXPECT_EQ(type_of(p, "token_embd.weight"), DType::kQ6_K);
  MixOptions pure;
  pure.pure = true;
  const auto q = plan(*find_mix("Q4_K_M"), pure, 8);
  for (const auto& [n, t] : q) EXPECT_EQ(t, DType::kQ4_K) << n;
}

TEST(Mix, ParsesNamesAndRejectsBadOnes) {
  EXPECT_TRUE(find_mix("q5_k_m"));
  EXPECT_FALSE(find_mix("Q4_K_XL"));
  EXPECT_EQ(parse_type_name("bf16"), DType::kBF16);
  EXPECT_FALSE(parse_type_name("q9_0"));
  EXPECT_THROW(parse_override("ffn_down"), Error);
  EXPECT_THROW(parse_override("ffn_down=q9"), Error);
  EXPECT_THROW(parse_override("ffn_(down=q4_k"), Error);
  EXPECT_THROW(parse_override("=q4_k"), Error);
  EXPECT_TRUE(should_quantize("blk.0.attn_q.weight", 2));
  EXPECT_FALSE(should_quantize("blk.0.attn_norm.weight", 1));
  EXPECT_FALSE(should_quantize("blk.0.ffn_gate_inp.weight", 2));
  EXPECT_FALSE(should_quantize("blk.0.attn_q.bias", 2));
}

// ---- files ----

class QuantFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("triad_quant_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::mt19937 rng(5);
    gguf::GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 2);
    w.add_u32("llama.attention.head_count", 4);
    w.add_u32("llama.attention.head_count_kv", 4);
    w.add_u32("general.file_type", 0);
    auto add = [&](const std::string& name, std::vector<int64_t> dims) {
      size_t n = 1;
      for (int64_t d : dims) n *= static_cast<size_t>(d);
      data_.push_back(gaussian(n, rng));
      w.add_tensor(name, DType::kF32, dims, data_.back().data(), n * 4);
    };
    add("token_embd.weight", {256, 64});
    add("output.weight", {256, 64});
    for (int i = 0; i < 2; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      add(b + "attn_norm.weight", {256});
      add(b + "attn_v.weight", {256, 64});
      add(b + "ffn_down.weight", {512, 256});
      add(b + "ffn_up.weight", {256, 512});
    }
    in_ = (dir_ / "in.gguf").string();
    w.write_file(in_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  QuantizeOptions opts(const char* mix) {
    QuantizeOptions o{*find_mix(mix), {}, false, nullptr, "", true};
    return o;
  }

  fs::path dir_;
  std::string in_;
  std::vector<std::vector<float>> data_;
};

TEST_F(QuantFiles, WritesTheMixesTypesAndCopiesTheRest) {
  ThreadPool pool(2);
  const std::string out = (dir_ / "q.gguf").string();
  const QuantizeSummary s = quantize_model(in_, out, opts("Q4_K_M"), pool);
  const auto f = gguf::GgufFile::open(out);
  EXPECT_EQ(f->get_int("general.file_type"), 15);
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->find_tensor("output.weight")->type, DType::kQ6_K);
  // use_more_bits(i, 2) holds for the last layer only.
  EXPECT_EQ(f->find_tensor("blk.0.attn_v.weight")->type, DType::kQ4_K);
  EXPECT_EQ(f->find_tensor("blk.1.attn_v.weight")->type, DType::kQ6_K);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up.weight")->type, DType::kQ4_K);
  EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, DType::kF32);
  EXPECT_EQ(s.tensors.size(), f->tensors().size());
  // Each tensor's data is what quantize_row makes of the input, and norms are copied.
  const auto* t = f->find_tensor("blk.1.ffn_up.weight");
  std::vector<uint8_t> want(t->n_bytes);
  const auto in = gguf::GgufFile::open(in_);
  const auto* ti = in->find_tensor("blk.1.ffn_up.weight");
  const uint64_t rb = row_bytes(DType::kQ4_K, 256);
  for (int64_t r = 0; r < 512; ++r)
    quantize_row(DType::kQ4_K, reinterpret_cast<const float*>(ti->data) + r * 256, 256,
                 want.data() + r * rb, nullptr);
  EXPECT_EQ(0, std::memcmp(want.data(), t->data, want.size()));
  const auto* norm = f->find_tensor("blk.1.attn_norm.weight");
  EXPECT_EQ(0, std::memcmp(norm->data, in->find_tensor("blk.1.attn_norm.weight")->data, 1024));
  for (const TensorReport& r : s.tensors)
    if (r.quantized) {
      EXPECT_GT(r.rel_rmse, 0) << r.name;
    }
}

TEST_F(QuantFiles, ErrorsLeaveNoOutput) {
  ThreadPool pool(2);
  const std::string out = (dir_ / "bad.gguf").string();
  // Requantizing an already-quantized file needs the explicit flag.
  {
    QuantizeOptions o = opts("Q8_0");
    const std::string q8 = (dir_ / "q8.gguf").string();
    quantize_model(in_, q8, o, pool);
    QuantizeOptions r = opts("Q4_K_M");
    EXPECT_THROW(quantize_model(q8, out, r, pool), Error);  // needs --allow-requantize
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".tmp"));
    r.allow_requantize = true;
    EXPECT_NO_THROW(quantize_model(q8, out, r, pool));
    EXPECT_TRUE(fs::exists(out));
    fs::remove(out);
  }
  {
    // Truncated input: the reader refuses it before anything is written.
    const std::string cut = (dir_ / "cut.gguf").string();
    fs::copy_file(in_, cut);
    fs::resize_file(cut, fs::file_size(cut) - 1000);
    EXPECT_THROW(quantize_model(cut, out, opts("Q4_0"), pool), Error);
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".tmp"));
  }
  {
    // An imatrix made for another model.
    Imatrix im;
    im.set("blk.0.ffn_up.weight", {100, 1, std::vector<float>(100, 1.f), {1.f}});
    QuantizeOptions o = opts("Q4_K_M");
    o.imatrix = &im;
    EXPECT_THROW(quantize_model(in_, out, o, pool), Error);
    EXPECT_FALSE(fs::exists(out));
  }
  {
    // The output is the input.
    EXPECT_THROW(quantize_model(in_, in_, opts("Q4_0"), pool), Error);
    EXPECT_TRUE(fs::exists(in_));
  }
}

TEST_F(QuantFiles, UserTypeThatCannotHoldTheRowsIsAnError) {
  // Rows of 96 values: Q4_K (256) cannot hold them; the mix falls back, an override fails.
  gguf::GgufWriter w;
  w.add_string("general.architecture", "llama");
  std::vector<float> x(96 * 8, 0.5f);
  w.add_tensor("blk.0.ffn_up.weight", DType::kF32, {96, 8}, x.data(), x.size() * 4);
  const std::string in = (dir_ / "odd.gguf").string(), out = (dir_ / "odd_q.gguf").string();
  w.write_file(in);
  ThreadPool pool(1);
  QuantizeOptions o = opts("Q4_K_M");
  const QuantizeSummary s = quantize_model(in, out, o, pool);
  EXPECT_TRUE(s.tensors[0].fallback);
  EXPECT_EQ(s.tensors[0].to, DType::kQ5_0);
  fs::remove(out);
  o.mix_options.overrides.push_back(parse_override("ffn_up=q4_k"));
  try {
    quantize_model(in, out, o, pool);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(QuantFiles, ImatrixRoundTripsAndGuidesTheQuantizer) {
  std::mt19937 rng(9);
  Imatrix im;
  im.datasets = {"calib.txt"};
  im.chunk_count = 3;
  im.chunk_size = 512;
  ImatrixEntry e{256, 1, importance(256, rng), {1536.f}};
  for (float& v : e.sum2) v *= 1536.f;
  im.set("blk.0.ffn_up.weight", e);
  const std::string path = (dir_ / "im.gguf").string();
  im.save(path);
  const Imatrix back = Imatrix::load(path);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back.datasets, im.datasets);
  EXPECT_EQ(back.chunk_count, 3);
  const auto w = back.importance("blk.0.ffn_up.weight");
  ASSERT_EQ(w.size(), 256u);
  for (size_t j = 0; j < 256; ++j) EXPECT_FLOAT_EQ(w[j], e.sum2[j] / 1536.f);
  EXPECT_TRUE(back.importance("blk.1.ffn_up.weight").empty());

  ThreadPool pool(2);
  QuantizeOptions o = opts("Q4_K_M");
  o.imatrix = &back;
  o.imatrix_path = path;
  const std::string out = (dir_ / "qi.gguf").string();
  const QuantizeSummary s = quantize_model(in_, out, o, pool);
  bool used = false;
  for (const TensorReport& r : s.tensors) used |= r.used_imatrix && r.name == "blk.0.ffn_up.weight";
  EXPECT_TRUE(used);
  const auto f = gguf::GgufFile::open(out);
  EXPECT_EQ(f->get_string("quantize.imatrix.file"), path);
  EXPECT_EQ(f->get_int("quantize.imatrix.entries_count"), 1);
}

TEST(Imatrix, RejectsMalformedFiles) {
  const fs::path dir = fs::temp_directory_path() / "triad_imatrix_bad";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, auto&& fill) {
    gguf::GgufWriter w;
    fill(w);
    const std::string p = (dir / name).string();
    w.write_file(p);
    return p;
  };
  std::vector<float> sums(8, 1.f), one(1, 1.f), neg(8, -1.f), two(2, 1.f);
  const std::string not_im = write("a.gguf", [&](gguf::GgufWriter& w) { w.add_string("general.type", "model"); });
  EXPECT_THROW(Imatrix::load(not_im), Error);
  const std::string no_counts = write("b.gguf", [&](gguf::GgufWriter& w) {
    w.add_string("general.type", "imatrix");
    w.add_tensor("x.in_sum2", DType::kF32, {8, 1}, sums.data(), 32);
  });
  EXPECT_THROW(Imatrix::load(no_counts), Error);
  const std::string negative = write("c.gguf", [&](gguf::GgufWriter& w) {
    w.add_string("general.type", "imatrix");
    w.add_tensor("x.in_sum2", DType::kF32, {8, 1}, neg.data(), 32);
    w.add_tensor("x.counts", DType::kF32, {1, 1}, one.data(), 4);
  });
  EXPECT_THROW(Imatrix::load(negative), Error);
  const std::string mismatch = write("d.gguf", [&](gguf::GgufWriter& w) {
    w.add_string("general.type", "imatrix");
    w.add_tensor("x.in_sum2", DType::kF32, {8, 1}, sums.data(), 32);
    w.add_tensor("x.counts", DType::kF32, {1, 2}, two.data(), 8);
  });
  EXPECT_THROW(Imatrix::load(mismatch), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace triad::quant
