#include "model/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "gguf/gguf_file.h"
#include "kernels/lane_layout.h"
#include "kernels/panel_layout.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "kernels/quant.h"
#include "model/layer_ops.h"

namespace triad {
namespace {

// The per-head products of latent attention: y_h = W_h x_h for every matrix of `w` (head h's
// input at x + h * x_head, its output at y + h * y_head, tokens x_stride / y_stride apart). A
// decode's head product is small (DeepSeek's absorb is 512 x 128), so for a few tokens the heads
// are spread over the threads, each product whole on one thread: one dispatch instead of one
// per head. (Each product's arithmetic is the same either way: rows are computed alike whatever
// the row or token split.) With an observer, or many tokens, one matmul per head.
void mm_heads(const ForwardScratch& s, const ExpertMatrices& w, const float* x, int64_t x_head, int64_t x_stride,
              int64_t n, float* y, int64_t y_head, int64_t y_stride, ThreadPool& pool) {
  const int32_t H = w.n();
  if (s.observer != nullptr || n > 8 || pool.size() == 1) {
    for (int32_t h = 0; h < H; ++h) mm(s, w.at(h), x + h * x_head, n, x_stride, y + h * y_head, y_stride, pool);
    return;
  }
  pool.for_each_chunk(H, [&](int64_t h, int) {
    thread_local ThreadPool solo(1);
    kernels::matmul(w.at(static_cast<int32_t>(h)), x + h * x_head, n, x_stride, y + h * y_head, y_stride, solo);
  });
}

// gate = act(gate) * up over n elements, split across threads.
void glu(FfnActivation act, float* gate, const float* up, int64_t n, ThreadPool& pool) {
  pool.parallel_for(n / 256 + 1, [&](int64_t b, int64_t e) {
    const int64_t lo = b * 256, hi = std::min<int64_t>(e * 256, n);
    if (lo >= hi) return;
    if (act == FfnActivation::kSilu)
      kernels::silu_mul(gate + lo, up + lo, gate + lo, hi - lo);
    else if (act == FfnActivation::kGeluTanh)
      kernels::gelu_mul(gate + lo, up + lo, gate + lo, hi - lo);
    else
      kernels::swiglu_oai(gate + lo, up + lo, gate + lo, hi - lo);
  });
}

// A gated FFN over n rows of x (stride E): out = down(act(gate x) * up x), with gate / up
// results [n x F] in gbuf / ubuf. The dense FFN and the shared expert (routed experts run as
// grouped products in moe_ffn).
void gated_ffn(const ForwardScratch& s, FfnActivation act, const kernels::WeightMatrix& gate,
               const kernels::WeightMatrix& up, const kernels::WeightMatrix& down, const float* x,
               int64_t n, int64_t E, int64_t F, float* gbuf, float* ubuf, float* out, ThreadPool& pool) {
  mm_group(s, {{gate, gbuf, F}, {up, ubuf, F}}, x, n, E, pool);
  glu(act, gbuf, ubuf, n * F, pool);
  mm(s, down, gbuf, n, F, out, E, pool);
}

}  // namespace

void ForwardScratch::reserve(const ModelConfig& c, int64_t n) {
  if (n <= capacity) return;
  const size_t N = static_cast<size_t>(n);
  x.resize(N * c.n_embd);
  xn.resize(N * c.n_embd);
  q.resize(N * c.q_dim());
  k.resize(N * c.kv_dim());
  v.resize(N * c.kv_dim());
  attn.resize(N * c.q_dim());
  proj.resize(N * c.n_embd);
  gate.resize(N * c.n_ff);
  up.resize(N * c.n_ff);
  if (c.is_mla()) {
    qa.resize(N * static_cast<size_t>(std::max(c.q_lora_rank, 1)));
    q_raw.resize(N * static_cast<size_t>(c.n_heads) * static_cast<size_t>(c.q_head_raw()));
    mla_v.resize(N * static_cast<size_t>(c.n_heads) * static_cast<size_t>(c.v_head_dim));
  }
  if (c.is_moe()) {
    const size_t K = static_cast<size_t>(c.n_expert_used), FX = static_cast<size_t>(c.n_ff_exp);
    router.resize(N * c.n_expert);
    // Every routed (token, expert) row at once, or the shared expert's n rows.
    const size_t E = static_cast<size_t>(c.n_embd), FS = static_cast<size_t>(c.n_ff_shexp);
    moe_x.resize(N * K * E);
    moe_gate.resize(N * std::max(K * FX, FS));
    moe_up.resize(N * std::max(K * FX, FS));
    moe_out.resize(N * K * E);
    sel_expert.resize(N * K);
    sel_weight.resize(N * K);
    routed_token.resize(N * K);
    routed_weight.resize(N * K);
  }
  capacity = n;
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const WeightTransform& transform,
                                   const std::function<void(uint64_t, uint64_t)>& progress, int threads) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = gguf::GgufFile::open(path);
  if (progress) m->file_->prefetch(progress);
  m->config_ = ModelConfig::from_gguf(*m->file_);
  m->weights_ = ModelWeights::bind(*m->file_, m->config_);
  if (transform) transform(m->weights_, *m->file_, m->config_);
  if (weight_relayout() && best_isa() != IsaLevel::kScalar) {
    const Timer t;
    const ModelWeights::Relayout r =
        m->weights_.relayout(*m->file_, best_isa(), threads > 0 ? threads : physical_cores());
    if (r.matrices > 0)
      log_info("weights: ", r.matrices, " quantized matrices re-laid for the ", isa_name(best_isa()), " kernels in ",
               t.seconds(), " s");
    if (r.kept > 0)
      log_warn("weights: ", r.kept, " quantized matrices (", r.kept_bytes >> 20,
               " MiB) stay in the file's GGUF layout: copying them would pass the memory available. They run "
               "slower when batched",
               best_isa() == IsaLevel::kAvx512 ? ", and their results depend on the batch (use --batch-invariant for that)"
                                               : "");
  }
  return m;
}

namespace {
std::atomic<bool> g_relayout{true};
}  // namespace

void Model::set_weight_relayout(bool on) { g_relayout.store(on); }
bool Model::weight_relayout() { return g_relayout.load(); }

void Model::embed(std::span<const int32_t> tokens, std::span<const int32_t> positions, float* x,
                  ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t E = c.n_embd;
  auto row_of = [E](const kernels::WeightMatrix& m, int64_t r) {
    return static_cast<const uint8_t*>(m.data) + row_bytes(m.type, static_cast<uint64_t>(E)) * static_cast<uint64_t>(r);
  };
  pool.parallel_for(static_cast<int64_t>(tokens.size()), [&](int64_t b, int64_t end) {
    std::vector<float> extra(c.encoder ? static_cast<size_t>(E) : 0);
    const kernels::WeightMatrix& emb = weights_.token_embd;
    std::vector<uint8_t> blocks(emb.lanes || emb.panels ? row_bytes(emb.type, static_cast<uint64_t>(E)) : 0);
    for (int64_t t = b; t < end; ++t) {
      float* dst = x + t * E;
      const uint8_t* row = row_of(emb, tokens[t]);
      if (emb.lanes) {  // the tied output, re-laid for the kernels
        kernels::row_from_lanes(emb.type, row, E, blocks.data());
        row = blocks.data();
      } else if (emb.panels) {  // the same, in panels: row i of the panel that holds it
        const int i = static_cast<int>(tokens[t] % kernels::kPanelRows);
        kernels::row_from_panel(emb.type, row_of(emb, tokens[t] - i), i, E, blocks.data());
        row = blocks.data();
      }
      kernels::dequantize_row(weights_.token_embd.type, row, dst, E);
      if (c.embd_scale != 1.f) kernels::scale_inplace(dst, c.embd_scale, E);
      if (!c.encoder) continue;
      if (weights_.pos_embd.data != nullptr) {
        kernels::dequantize_row(weights_.pos_embd.type, row_of(weights_.pos_embd, positions[t]), extra.data(), E);
        kernels::add_inplace(dst, extra.data(), E);
      }
      kernels::dequantize_row(weights_.token_types.type, row_of(weights_.token_types, 0), extra.data(), E);
      kernels::add_inplace(dst, extra.data(), E);
      kernels::layernorm(dst, weights_.embd_norm, weights_.embd_norm_b, c.norm_eps, dst, E);
    }
  });
}

void Model::store_kv(int32_t il, int64_t n, KvStorage& kv, const ForwardScratch& s, ThreadPool& pool) const {
  const int64_t KV = config_.kv_dim();
  const int32_t g = kv.group_of_layer(il);
  const int32_t* blk = s.slot_block.data() + static_cast<size_t>(g) * n;
  const int32_t* row = s.slot_row.data() + static_cast<size_t>(g) * n;
  const DType kt = kv.config().k_type, vt = kv.config().v_type;
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      kernels::kv_store_row(kt, s.k.data() + t * KV, KV, kv.k_row(il, blk[t], row[t]));
      kernels::kv_store_row(vt, s.v.data() + t * KV, KV, kv.v_row(il, blk[t], row[t]));
    }
  });
}

void Model::qkv_rope(int32_t il, int64_t n, const int32_t* positions, ForwardScratch& s,
                     float* k_out, float* v_out, int64_t kv_stride, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim();

  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      kernels::rmsnorm(s.x.data() + t * E, L.attn_norm, c.norm_eps, s.xn.data() + t * E, E);
  });
  mm_group(s, {{L.wq, s.q.data(), Q}, {L.wk, k_out, kv_stride}, {L.wv, v_out, kv_stride}}, s.xn.data(), n, E, pool);

  const kernels::RopeParams rope = c.rope_params(il);
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      float* q = s.q.data() + t * Q;
      float* k = k_out + t * kv_stride;
      float* v = v_out + t * kv_stride;
      if (L.bq) kernels::add_inplace(q, L.bq, Q);
      if (L.bk) kernels::add_inplace(k, L.bk, KV);
      if (L.bv) kernels::add_inplace(v, L.bv, KV);
      if (c.qk_norm) {
        for (int32_t h = 0; h < c.n_heads; ++h)
          kernels::rmsnorm(q + h * c.head_dim, L.q_norm, c.norm_eps, q + h * c.head_dim, c.head_dim);
        for (int32_t h = 0; h < c.n_kv_heads; ++h)
          kernels::rmsnorm(k + h * c.head_dim, L.k_norm, c.norm_eps, k + h * c.head_dim, c.head_dim);
      }
      kernels::rope(q, c.n_heads, c.head_dim, positions[t], rope);
      kernels::rope(k, c.n_kv_heads, c.head_dim, positions[t], rope);
    }
  });
}

void Model::output_residual(int32_t il, int64_t n, const float* in, int64_t cols, ForwardScratch& s,
                            ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t E = c.n_embd;
  mm(s, L.wo, in, n, cols, s.proj.data(), E, pool);
  add_rows(s.proj.data(), L.bo, n, E, pool);
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      float* o = s.proj.data() + t * E;
      if (L.post_attn_norm) kernels::rmsnorm(o, L.post_attn_norm, c.norm_eps, o, E);
      kernels::add_inplace(s.x.data() + t * E, o, E);
    }
  });
}

kernels::AttentionParams Model::attention_params(int32_t il) const {
  const ModelConfig& c = config_;
  kernels::AttentionParams ap;
  ap.n_heads = c.n_heads;
  ap.n_kv_heads = c.n_kv_heads;
  ap.head_dim = c.head_dim;
  ap.scale = c.attn_scale;
  ap.window = c.layer_is_local(il) ? c.sliding_window : 0;
  ap.sinks = weights_.layers[il].attn_sinks;
  return ap;
}

void Model::attention_block(int32_t il, const ForwardBatch& b, KvStorage& kv,
                                  ForwardScratch& s, ThreadPool& pool) const {
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t Q = config_.q_dim(), KV = config_.kv_dim();
  qkv_rope(il, n, b.positions.data(), s, s.k.data(), s.v.data(), KV, pool);
  store_kv(il, n, kv, s, pool);
  const int32_t g = kv.group_of_layer(il);
  const size_t n_seqs = b.seqs.size();
  std::span<const kernels::PagedSeq> seqs(s.paged_seqs.data() + g * n_seqs, n_seqs);
  kernels::paged_attention(attention_params(il), s.q.data(), Q, b.positions.data(), kv.layer(il),
                           seqs, s.attn.data(), Q, pool);
  output_residual(il, n, s.attn.data(), Q, s, pool);
}

void Model::mla_attention_block(int32_t il, const ForwardBatch& b, KvStorage& kv, ForwardScratch& s,
                                ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  const int64_t E = c.n_embd, H = c.n_heads, R = c.kv_lora_rank, D = c.rope_dim, N = c.qk_nope,
                V = c.v_head_dim, QH = c.q_head_raw(), KD = c.kv_dim(), Q = c.q_dim();
  const int32_t* pos = b.positions.data();
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      kernels::rmsnorm(s.x.data() + t * E, L.attn_norm, c.norm_eps, s.xn.data() + t * E, E);
  });
  // Raw queries [n x H*(N+D)], through the q LoRA (with its norm) when the model has one; in
  // the same job, the latent K row [normalized latent (R) | rotated key dims (D)], into s.k.
  if (c.q_lora_rank > 0) {
    const int64_t QL = c.q_lora_rank;
    mm_group(s, {{L.wq_a, s.qa.data(), QL}, {L.wkv_a, s.k.data(), KD}}, s.xn.data(), n, E, pool);
    pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t)
        kernels::rmsnorm(s.qa.data() + t * QL, L.q_a_norm, c.norm_eps, s.qa.data() + t * QL, QL);
    });
    mm(s, L.wq_b, s.qa.data(), n, QL, s.q_raw.data(), H * QH, pool);
  } else {
    mm_group(s, {{L.wq, s.q_raw.data(), H * QH}, {L.wkv_a, s.k.data(), KD}}, s.xn.data(), n, E, pool);
  }
  const kernels::RopeParams rope = c.rope_params(il);
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      float* k = s.k.data() + t * KD;
      kernels::rmsnorm(k, L.kv_a_norm, c.norm_eps, k, R);
      kernels::rope(k + R, 1, static_cast<int>(D), pos[t], rope);
      // Each head's rotary query part rotates in place (heads QH apart), then moves behind the
      // absorbed part in the attention query [absorbed (R) | rotated (D)] per head.
      float* qr = s.q_raw.data() + t * H * QH;
      kernels::rope(qr + N, static_cast<int>(H), static_cast<int>(QH), pos[t], rope);
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(s.q.data() + t * Q + h * KD + R, qr + h * QH + N, static_cast<size_t>(D) * sizeof(float));
    }
  });
  // Absorb: head h's no-rope query part through attn_k_b[h] into latent space.
  mm_heads(s, L.wk_b, s.q_raw.data(), QH, H * QH, n, s.q.data(), KD, Q, pool);
  // Store the latent rows; V is the first R values of each (the pool's V aliases its K).
  const int32_t g = kv.group_of_layer(il);
  const int32_t* blk = s.slot_block.data() + static_cast<size_t>(g) * n;
  const int32_t* row = s.slot_row.data() + static_cast<size_t>(g) * n;
  const DType kt = kv.config().k_type;
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) kernels::kv_store_row(kt, s.k.data() + t * KD, KD, kv.k_row(il, blk[t], row[t]));
  });
  const size_t n_seqs = b.seqs.size();
  std::span<const kernels::PagedSeq> seqs(s.paged_seqs.data() + g * n_seqs, n_seqs);
  // MQA over the latent rows; each head's output is [latent (R) | weighted rotated keys (D),
  // unused]: attending with V = the whole row costs D / (R + D) more multiply-adds than V's R
  // values, and needs no V pool at all.
  kernels::paged_attention(attention_params(il), s.q.data(), Q, pos, kv.layer(il), seqs, s.attn.data(), Q, pool);
  // Expand: head h's latent output through attn_v_b[h] into its V values.
  mm_heads(s, L.wv_b, s.attn.data(), KD, Q, n, s.mla_v.data(), V, H * V, pool);
  output_residual(il, n, s.mla_v.data(), H * V, s, pool);
}

void Model::route(int32_t il, int64_t n, ForwardScratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t E = c.n_embd, X = c.n_expert, K = c.n_expert_used;
  // Scores: softmax over the router logits (or a sigmoid of each). The K best are chosen by
  // score + selection bias (deepseek2's exp_probs_b; zero otherwise), within the best groups
  // when the experts are grouped; ties go to the lower id. Their unbiased scores, renormalized
  // (clamped as llama.cpp does) when expert_weights_norm and scaled, weigh their outputs.
  mm(s, L.gate_inp, s.xn.data(), n, E, s.router.data(), X, pool);
  add_rows(s.router.data(), L.gate_inp_b, n, X, pool);
  const int64_t G = c.n_expert_groups > 1 ? c.n_expert_groups : 1, per_group = X / G;
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    std::vector<int32_t> ids(static_cast<size_t>(X)), gids(static_cast<size_t>(G));
    std::vector<float> sel(static_cast<size_t>(X)), gscore(static_cast<size_t>(G));
    for (int64_t t = b; t < e; ++t) {
      float* p = s.router.data() + t * X;
      if (c.expert_gating_sigmoid) {
        for (int64_t x = 0; x < X; ++x) p[x] = 1.f / (1.f + std::exp(-p[x]));
      } else {
        kernels::softmax(p, X);
      }
      for (int64_t x = 0; x < X; ++x) sel[x] = L.exp_probs_b ? p[x] + L.exp_probs_b[x] : p[x];
      if (G > 1) {
        // A group's score: the sum of its two best selection scores; groups outside the best
        // n_group_used are not eligible.
        for (int64_t g = 0; g < G; ++g) {
          float b1 = -INFINITY, b2 = -INFINITY;
          for (int64_t x = g * per_group; x < (g + 1) * per_group; ++x) {
            if (sel[x] > b1) {
              b2 = b1;
              b1 = sel[x];
            } else if (sel[x] > b2) {
              b2 = sel[x];
            }
          }
          gscore[g] = b1 + b2;
        }
        std::iota(gids.begin(), gids.end(), 0);
        std::partial_sort(gids.begin(), gids.begin() + c.n_group_used, gids.end(), [&](int32_t a, int32_t bb) {
          return gscore[a] > gscore[bb] || (gscore[a] == gscore[bb] && a < bb);
        });
        for (int64_t j = c.n_group_used; j < G; ++j)
          for (int64_t x = gids[j] * per_group; x < (gids[j] + 1) * per_group; ++x) sel[x] = -INFINITY;
      }
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + K, ids.end(), [&](int32_t a, int32_t bb) {
        return sel[a] > sel[bb] || (sel[a] == sel[bb] && a < bb);
      });
      float sum = 0.f;
      for (int64_t j = 0; j < K; ++j) sum += p[ids[j]];
      const float norm = c.expert_weights_norm ? 1.f / std::max(sum, 6.103515625e-5f) : 1.f;
      for (int64_t j = 0; j < K; ++j) {
        s.sel_expert[t * K + j] = ids[j];
        s.sel_weight[t * K + j] = p[ids[j]] * norm * c.expert_weights_scale;
      }
    }
  });
}

void Model::moe_ffn(int32_t il, int64_t n, ForwardScratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t E = c.n_embd, X = c.n_expert, K = c.n_expert_used, FX = c.n_ff_exp;
  route(il, n, s, pool);
  // Group the (token, weight) pairs by expert, tokens ascending within an expert.
  s.expert_begin.assign(static_cast<size_t>(X + 1), 0);
  for (int64_t i = 0; i < n * K; ++i) ++s.expert_begin[s.sel_expert[i] + 1];
  for (int64_t x = 0; x < X; ++x) s.expert_begin[x + 1] += s.expert_begin[x];
  std::vector<int32_t>& fill = s.expert_fill;
  fill.assign(s.expert_begin.begin(), s.expert_begin.end() - 1);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < K; ++j) {
      const int32_t x = s.sel_expert[t * K + j];
      s.routed_token[fill[x]] = static_cast<int32_t>(t);
      s.routed_weight[fill[x]++] = s.sel_weight[t * K + j];
    }
  // Every routed row at once: gathered inputs, then one grouped product per matrix (each active
  // expert's rows on its weights; experts without rows cost nothing), the activation, the
  // expert biases (gpt-oss), and the scatter-add with the routing weights in expert order, so a
  // token's sum has the same order whatever else is batched.
  const int64_t total = n * K;
  pool.parallel_for(total, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r)
      std::memcpy(s.moe_x.data() + r * E, s.xn.data() + s.routed_token[r] * E, static_cast<size_t>(E) * sizeof(float));
  });
  auto products = [&](const ExpertMatrices& m) {
    kernels::ExpertProducts e;
    e.shape = m.first;
    e.data = m.data.data();
    e.n = m.n();
    e.begin = s.expert_begin.data();
    return e;
  };
  auto observe = [&](const ExpertMatrices& m, const float* in, int64_t width) {
    if (s.observer == nullptr) return;
    for (int32_t x = 0; x < X; ++x) {
      const int32_t r0 = s.expert_begin[x], cnt = s.expert_begin[x + 1] - r0;
      if (cnt > 0) s.observer->observe(m.at(x), in + r0 * width, cnt, width);
    }
  };
  auto add_expert_bias = [&](float* y, const float* b, int64_t width) {
    if (b == nullptr) return;
    for (int32_t x = 0; x < X; ++x) {
      const int32_t r0 = s.expert_begin[x], cnt = s.expert_begin[x + 1] - r0;
      add_rows(y + r0 * width, b + x * width, cnt, width, pool);
    }
  };
  observe(L.gate_exps, s.moe_x.data(), E);
  observe(L.up_exps, s.moe_x.data(), E);
  const kernels::WeightMatrix& g0 = L.gate_exps.first;
  const kernels::WeightMatrix& u0 = L.up_exps.first;
  if (g0.type == u0.type && g0.lanes == u0.lanes && g0.rows == u0.rows && g0.cols == u0.cols) {
    // One dispatch for both (decode: the 2k products spread over the threads together).
    kernels::matmul_experts_pair(products(L.gate_exps), L.up_exps.data.data(), s.moe_x.data(), E, s.moe_gate.data(),
                                 s.moe_up.data(), FX, nullptr, pool);
  } else {
    kernels::matmul_experts(products(L.gate_exps), s.moe_x.data(), E, s.moe_gate.data(), FX, nullptr, pool);
    kernels::matmul_experts(products(L.up_exps), s.moe_x.data(), E, s.moe_up.data(), FX, nullptr, pool);
  }
  add_expert_bias(s.moe_gate.data(), L.gate_exps_b, FX);
  add_expert_bias(s.moe_up.data(), L.up_exps_b, FX);
  glu(c.ffn_act, s.moe_gate.data(), s.moe_up.data(), total * FX, pool);
  observe(L.down_exps, s.moe_gate.data(), FX);
  kernels::matmul_experts(products(L.down_exps), s.moe_gate.data(), FX, s.moe_out.data(), E, nullptr, pool);
  add_expert_bias(s.moe_out.data(), L.down_exps_b, E);
  std::fill(s.proj.data(), s.proj.data() + n * E, 0.f);
  for (int64_t r = 0; r < total; ++r) {
    float* dst = s.proj.data() + s.routed_token[r] * E;
    const float* src = s.moe_out.data() + r * E;
    const float wgt = s.routed_weight[r];
    for (int64_t d = 0; d < E; ++d) dst[d] += wgt * src[d];
  }
  // The shared expert(s): every token; qwen2moe's scaled by sigmoid(gate_inp_shexp . x).
  if (c.n_ff_shexp > 0) {
    gated_ffn(s, c.ffn_act, L.gate_shexp, L.up_shexp, L.down_shexp, s.xn.data(), n, E, c.n_ff_shexp,
              s.moe_gate.data(), s.moe_up.data(), s.moe_out.data(), pool);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const float* x = s.xn.data() + t * E;
        float g = 1.f;
        if (L.gate_inp_shexp != nullptr) {
          double dot = 0;
          for (int64_t d = 0; d < E; ++d) dot += static_cast<double>(x[d]) * L.gate_inp_shexp[d];
          g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
        }
        float* dst = s.proj.data() + t * E;
        const float* src = s.moe_out.data() + t * E;
        for (int64_t d = 0; d < E; ++d) dst[d] += g * src[d];
      }
    });
  }
}

void Model::ffn_block(int32_t il, int64_t n, ForwardScratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_.layers[il];
  const int64_t E = c.n_embd, F = c.n_ff;
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      kernels::rmsnorm(s.x.data() + t * E, L.ffn_norm, c.norm_eps, s.xn.data() + t * E, E);
  });
  if (c.layer_is_moe(il)) {
    moe_ffn(il, n, s, pool);
  } else {
    gated_ffn(s, c.ffn_act, L.w_gate, L.w_up, L.w_down, s.xn.data(), n, E, F, s.gate.data(), s.up.data(),
              s.proj.data(), pool);
  }
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      float* o = s.proj.data() + t * E;
      if (L.post_ffn_norm) kernels::rmsnorm(o, L.post_ffn_norm, c.norm_eps, o, E);
      kernels::add_inplace(s.x.data() + t * E, o, E);
    }
  });
}

void Model::forward_batch(const ForwardBatch& b, KvStorage& kv, ForwardScratch& s,
                          float* logits, ThreadPool& pool, float* hidden) const {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(b.tokens.size());
  if (n == 0) return;
  TRIAD_CHECK(b.positions.size() == b.tokens.size(), "forward_batch: ", b.positions.size(),
              " positions for ", n, " tokens");
  for (int32_t id : b.tokens)
    TRIAD_CHECK(id >= 0 && id < c.n_vocab, "token id ", id, " is outside the vocabulary (", c.n_vocab, ")");
  const size_t n_groups = kv.groups().size();
  const int32_t bs = kv.config().block_size;
  s.reserve(c, n);
  s.paged_seqs.assign(n_groups * b.seqs.size(), kernels::PagedSeq{});
  s.slot_block.assign(n_groups * static_cast<size_t>(n), 0);
  s.slot_row.assign(n_groups * static_cast<size_t>(n), 0);
  int64_t next_row = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const BatchSeq& q = b.seqs[i];
    TRIAD_CHECK(q.row_begin == next_row && q.n_rows > 0 && q.row_begin + q.n_rows <= n && q.pos0 >= 0,
                "forward_batch: sequence ", i, " rows are not contiguous and in order");
    TRIAD_CHECK(q.block_tables.size() == n_groups, "forward_batch: sequence ", i, " has ",
                q.block_tables.size(), " block tables for ", n_groups, " KV groups");
    next_row = q.row_begin + q.n_rows;
    const int64_t n_kv = q.pos0 + q.n_rows;
    TRIAD_CHECK(c.causal || q.pos0 == 0, "forward_batch: sequence ", i, " of a bidirectional model starts at position ",
                q.pos0, " (it must be computed whole in one step)");
    TRIAD_CHECK(weights_.pos_embd.data == nullptr || n_kv <= c.n_ctx_train, "forward_batch: sequence ", i, " has ", n_kv,
                " tokens; the model has ", c.n_ctx_train, " positions");
    for (size_t g = 0; g < n_groups; ++g) {
      const auto& table = q.block_tables[g];
      TRIAD_CHECK(static_cast<int64_t>(table.size()) * bs >= n_kv, "forward_batch: sequence ", i,
                  " block table covers ", table.size() * bs, " of ", n_kv, " positions");
      kernels::PagedSeq& ps = s.paged_seqs[g * b.seqs.size() + i];
      ps.q_begin = q.row_begin;
      ps.n_q = q.n_rows;
      ps.block_table = table.data();
      ps.n_kv = static_cast<int32_t>(n_kv);
      for (int64_t r = 0; r < q.n_rows; ++r) {
        const int64_t t = q.row_begin + r;
        const int32_t pos = b.positions[t];
        TRIAD_CHECK(pos == q.pos0 + r, "forward_batch: row ", t, " has position ", pos,
                    ", expected ", q.pos0 + r);
        const int32_t block = table[pos / bs];
        TRIAD_CHECK(block >= 0 && block < kv.config().blocks_per_group[g], "forward_batch: bad block ",
                    block, " for position ", pos);
        s.slot_block[g * n + t] = block;
        s.slot_row[g * n + t] = pos % bs;
      }
    }
  }
  TRIAD_CHECK(next_row == n, "forward_batch: sequences cover ", next_row, " of ", n, " rows");
  for (int64_t r : b.logit_rows)
    TRIAD_CHECK(r >= 0 && r < n, "forward_batch: logits row ", r, " is outside the batch");
  for (int64_t r : b.hidden_rows)
    TRIAD_CHECK(r >= 0 && r < n, "forward_batch: hidden row ", r, " is outside the batch");
  TRIAD_CHECK(b.hidden_rows.empty() || hidden != nullptr, "forward_batch: hidden rows but no output for them");
  TRIAD_CHECK(c.has_logits() || b.logit_rows.empty(), "forward_batch: ", c.arch_name,
              " is an embedding model: it has no logits");
  if (!c.causal) {
    // Bidirectional attention through the causal kernel: every query of a sequence sits at its
    // last position, so it sees all of the sequence's keys.
    s.attn_pos.resize(static_cast<size_t>(n));
    for (const BatchSeq& q : b.seqs)
      for (int64_t r = 0; r < q.n_rows; ++r) s.attn_pos[static_cast<size_t>(q.row_begin + r)] = q.pos0 + static_cast<int32_t>(q.n_rows) - 1;
  }

  embed(b.tokens, b.positions, s.x.data(), pool);
  for (int32_t il = 0; il < c.n_layers; ++il) {
    if (c.encoder) {
      encoder_block(il, b, kv, s, pool);
      continue;
    }
    if (c.is_mla())
      mla_attention_block(il, b, kv, s, pool);
    else
      attention_block(il, b, kv, s, pool);
    ffn_block(il, n, s, pool);
  }

  const int64_t E = c.n_embd;
  // Final hidden states: an encoder's last block ends in its LayerNorm; a decoder's pass through
  // output_norm (what the logits are computed from).
  pool.parallel_for(static_cast<int64_t>(b.hidden_rows.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const float* src = s.x.data() + b.hidden_rows[static_cast<size_t>(t)] * E;
      if (c.encoder)
        std::memcpy(hidden + t * E, src, static_cast<size_t>(E) * sizeof(float));
      else
        kernels::rmsnorm(src, weights_.output_norm, c.norm_eps, hidden + t * E, E);
    }
  });
  const int64_t rows = static_cast<int64_t>(b.logit_rows.size());
  if (rows == 0) return;
  pool.parallel_for(rows, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      kernels::rmsnorm(s.x.data() + b.logit_rows[t] * E, weights_.output_norm, c.norm_eps,
                       s.xn.data() + t * E, E);
  });
  mm(s, weights_.output, s.xn.data(), rows, E, logits, c.n_vocab, pool);
}

}  // namespace triad
