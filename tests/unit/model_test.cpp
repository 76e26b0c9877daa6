// Model loading and forward-pass self-consistency on tiny in-memory models built with
// GgufWriter: bad metadata or tensors give clear errors at load time; the same tokens give the
// same logits whether run in one forward call, in chunks, or one at a time through the KV cache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/solo_sequence.h"

namespace triad {
namespace {

struct TinySpec {
  std::string arch = "llama";
  int64_t n_embd = 32, n_layers = 2, n_heads = 4, n_kv_heads = 2, n_ff = 48, n_vocab = 40;
  int64_t window = 0;
};

std::vector<float> randn(size_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Builds a tiny model; `edit` may change the writer's content before it is written.
std::string write_tiny(const TinySpec& s, const std::string& tag,
                       const std::function<void(gguf::GgufWriter&)>& extra = {},
                       const std::string& skip_tensor = "", const std::string& bad_shape_tensor = "") {
  std::mt19937 rng(42);
  gguf::GgufWriter w;
  const std::string a = s.arch;
  w.add_string("general.architecture", a);
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.add_u32(a + ".block_count", static_cast<uint32_t>(s.n_layers));
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.add_u32(a + ".context_length", 256);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.window) w.add_u32(a + ".attention.sliding_window", static_cast<uint32_t>(s.window));
  if (extra) extra(w);
  // Tensor shapes stay valid even when the metadata under test is not (e.g. zero heads).
  const int64_t qh = s.n_heads ? s.n_heads : 4;
  const int64_t hd = s.n_embd / qh;
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols) {
    if (name == skip_tensor) return;
    std::vector<float> v = randn(static_cast<size_t>(rows * cols), rng, 0.2f);
    std::vector<int64_t> dims = {cols, rows};
    if (name == bad_shape_tensor) dims = {cols + 1, rows};
    std::vector<float> data(static_cast<size_t>(dims[0] * dims[1]));
    for (size_t i = 0; i < data.size() && i < v.size(); ++i) data[i] = v[i];
    w.add_tensor(name, DType::kF32, dims, data.data(), data.size() * 4);
  };
  auto vec = [&](const std::string& name, int64_t n) {
    if (name == skip_tensor) return;
    std::vector<float> v(static_cast<size_t>(n));
    std::vector<float> r = randn(v.size(), rng, 0.1f);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 1.f + r[i];
    w.add_tensor(name, DType::kF32, {n}, v.data(), v.size() * 4);
  };
  mat("token_embd.weight", s.n_vocab, s.n_embd);
  vec("output_norm.weight", s.n_embd);
  mat("output.weight", s.n_vocab, s.n_embd);
  for (int64_t il = 0; il < s.n_layers; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    vec(b + "attn_norm.weight", s.n_embd);
    mat(b + "attn_q.weight", qh * hd, s.n_embd);
    mat(b + "attn_k.weight", s.n_kv_heads * hd, s.n_embd);
    mat(b + "attn_v.weight", s.n_kv_heads * hd, s.n_embd);
    mat(b + "attn_output.weight", s.n_embd, qh * hd);
    vec(b + "ffn_norm.weight", s.n_embd);
    mat(b + "ffn_gate.weight", s.n_ff, s.n_embd);
    mat(b + "ffn_up.weight", s.n_ff, s.n_embd);
    mat(b + "ffn_down.weight", s.n_embd, s.n_ff);
  }
  std::string path = ::testing::TempDir() + "triad_model_test_" + tag + ".gguf";
  w.write_file(path);
  return path;
}

void expect_load_error(const std::string& path, const std::string& needle) {
  try {
    Model::load(path);
    ADD_FAILURE() << "loading " << path << " should fail with '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' should mention '" << needle << "'";
  }
  std::remove(path.c_str());
}

TEST(ModelLoad, TinyLlamaConfig) {
  TinySpec s;
  std::string p = write_tiny(s, "ok");
  auto m = Model::load(p);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.n_vocab, 40);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_FALSE(c.tied_output);
  std::remove(p.c_str());
}

TEST(ModelLoad, Errors) {
  TinySpec s;
  expect_load_error(write_tiny(s, "missing", {}, "blk.1.ffn_up.weight"), "blk.1.ffn_up.weight");
  expect_load_error(write_tiny(s, "shape", {}, "", "blk.0.attn_k.weight"), "blk.0.attn_k.weight");
  expect_load_error(write_tiny(s, "normmissing", {}, "blk.0.attn_norm.weight"), "attn_norm");
  TinySpec bad_arch = s;
  bad_arch.arch = "mamba9";
  expect_load_error(write_tiny(bad_arch, "arch"), "mamba9");
  TinySpec zero_heads = s;
  zero_heads.n_heads = 0;
  expect_load_error(write_tiny(zero_heads, "zeroheads"), "head_count");
  TinySpec not_multiple = s;
  not_multiple.n_kv_heads = 3;
  expect_load_error(write_tiny(not_multiple, "gqa"), "head_count_kv");
  TinySpec zero_layers = s;
  zero_layers.n_layers = 0;
  expect_load_error(write_tiny(zero_layers, "layers"), "block_count");
  expect_load_error(write_tiny(s, "rope", [](gguf::GgufWriter& w) {
                      w.add_string("llama.rope.scaling.type", "weird");
                    }), "rope.scaling.type");
}

// Logits for `ids` computed with forward calls of `chunk` tokens.
std::vector<float> run_chunked(const Model& m, const std::vector<int32_t>& ids, int chunk, int threads) {
  ThreadPool pool(threads);
  SoloSequence seq(m, 128);
  ForwardScratch scratch;
  const int32_t V = m.config().n_vocab;
  std::vector<float> out(ids.size() * V);
  for (size_t i = 0; i < ids.size(); i += chunk) {
    size_t len = std::min<size_t>(chunk, ids.size() - i);
    seq.forward(std::span<const int32_t>(ids.data() + i, len), scratch, LogitsMode::kAll,
                out.data() + i * V, pool);
  }
  return out;
}

TEST(ModelForward, ChunkingAndThreadsAgree) {
  for (int64_t window : {0, 5}) {
    TinySpec s;
    s.window = window;
    std::string p = write_tiny(s, "fwd" + std::to_string(window));
    auto m = Model::load(p);
    std::vector<int32_t> ids;
    for (int i = 0; i < 23; ++i) ids.push_back((i * 7 + 3) % 40);
    std::vector<float> full = run_chunked(*m, ids, 23, 1);
    for (float x : full) ASSERT_TRUE(std::isfinite(x));
    for (int chunk : {1, 4, 7}) {
      for (int threads : {1, 2}) {
        std::vector<float> got = run_chunked(*m, ids, chunk, threads);
        for (size_t i = 0; i < full.size(); ++i)
          ASSERT_NEAR(got[i], full[i], 1e-4f * (1.f + std::fabs(full[i])))
              << "window " << window << " chunk " << chunk << " threads " << threads << " at " << i;
      }
    }
    std::remove(p.c_str());
  }
}

TEST(ModelForward, RejectsBadTokensAndFullContext) {
  TinySpec s;
  std::string p = write_tiny(s, "bad");
  auto m = Model::load(p);
  ThreadPool pool(1);
  SoloSequence seq(*m, 4);
  ForwardScratch scratch;
  std::vector<float> logits(40 * 8);
  std::vector<int32_t> bad = {1, 40};
  EXPECT_THROW(seq.forward(bad, scratch, LogitsMode::kLast, logits.data(), pool), Error);
  EXPECT_EQ(seq.size(), 0);
  std::vector<int32_t> many = {1, 2, 3, 4, 5};
  EXPECT_THROW(seq.forward(many, scratch, LogitsMode::kLast, logits.data(), pool), Error);
  std::vector<int32_t> four = {1, 2, 3, 4};
  EXPECT_NO_THROW(seq.forward(four, scratch, LogitsMode::kLast, logits.data(), pool));
  EXPECT_EQ(seq.size(), 4);
  EXPECT_THROW(seq.forward(std::vector<int32_t>{1}, scratch, LogitsMode::kLast, logits.data(), pool), Error);
  std::remove(p.c_str());
}

}  // namespace
}  // namespace triad

namespace triad {
namespace {

// DeepSeek-V3's attention shape (61 layers, 128 heads, kv rank 512 + 64 rotary dims): the paged
// cache holds the 576-value latent row per token and layer, once, with V inside it; per-head K
// and V would be 128 x (192 + 128) = 40,960 values.
TEST(KvStorageLatent, OneLatentRowPerTokenAndLayer) {
  ModelConfig c;
  c.arch = Arch::kDeepseek2;
  c.n_layers = 61;
  c.n_heads = 128;
  c.kv_lora_rank = 512;
  c.rope_dim = 64;
  c.qk_nope = 128;
  c.v_head_dim = 128;
  c.n_kv_heads = 1;
  c.head_dim = 576;
  ASSERT_TRUE(c.is_mla());
  const auto groups = kv_layer_groups(c);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(KvStorage::token_bytes(c, groups[0], DType::kF16, DType::kF32), 61u * 576u * 2u);
  EXPECT_EQ(KvStorage::token_bytes(c, groups[0], DType::kQ8_0, DType::kF16), 61u * 18u * 34u);
  KvStorageConfig kc;
  kc.block_size = 16;
  kc.k_type = DType::kF16;
  kc.v_type = DType::kQ8_0;  // ignored: V is the first 512 values of the K row
  kc.blocks_per_group = {4};
  KvStorage kv(c, kc);
  EXPECT_EQ(kv.block_bytes(0), 61u * 16u * 576u * 2u);
  EXPECT_EQ(kv.config().v_type, DType::kF16);
  for (int32_t il : {0, 30, 60}) {
    const kernels::PagedKvLayer& L = kv.layer(il);
    EXPECT_EQ(L.v_base, L.k_base);
    EXPECT_EQ(L.v_row_bytes, L.k_row_bytes);
    EXPECT_EQ(L.v_type, L.k_type);
    EXPECT_EQ(kv.v_row(il, 3, 5), kv.k_row(il, 3, 5));
  }
  EXPECT_LE(kv.total_bytes(), 61u * 4u * 16u * 576u * 2u + 61u * 64u);
}

}  // namespace
}  // namespace triad
