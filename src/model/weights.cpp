#include "model/weights.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/memory_info.h"
#include "gguf/gguf_file.h"
#include "base/thread_pool.h"
#include "kernels/lane_layout.h"
#include "kernels/panel_layout.h"
#include "kernels/quant.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"

namespace triad {
namespace {

std::string dims_str(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (int i = 0; i < t.n_dims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "]";
}

}  // namespace

const float* ModelWeights::vector_f32(const gguf::GgufFile& f, const std::string& name, int64_t n,
                                      bool required, int64_t rows) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) {
    TRIAD_CHECK(!required, "model is missing tensor '", name, "'");
    return nullptr;
  }
  const bool shape_ok = rows == 1 ? t->n_elements == static_cast<uint64_t>(n) && t->ne[0] == n
                                  : t->n_dims == 2 && t->ne[1] == rows && t->ne[0] * rows == n;
  TRIAD_CHECK(shape_ok, "tensor '", name, "' has shape ", dims_str(*t), ", expected [",
              rows == 1 ? std::to_string(n) : std::to_string(n / rows) + ", " + std::to_string(rows), "]");
  TRIAD_CHECK(t->type == DType::kF32 || t->type == DType::kF16 || t->type == DType::kBF16,
              "tensor '", name, "' has type ", dtype_name(t->type), ", expected F32, F16 or BF16");
  owned_.emplace_back(static_cast<size_t>(n));
  kernels::dequantize_row_ref(t->type, t->data, owned_.back().data(), n);
  return owned_.back().data();
}

kernels::WeightMatrix ModelWeights::matrix(const gguf::GgufFile& f, const std::string& name,
                                           int64_t rows, int64_t cols) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  TRIAD_CHECK(t, "model is missing tensor '", name, "'");
  TRIAD_CHECK(t->n_dims == 2 && t->ne[0] == cols && t->ne[1] == rows, "tensor '", name,
              "' has shape ", dims_str(*t), ", expected [", cols, ", ", rows, "]");
  TRIAD_CHECK(dtype_supported_for_weights(t->type), "tensor '", name, "' has type ",
              dtype_name(t->type), ", which Triad cannot compute with yet");
  matrix_bytes += t->n_bytes;
  return kernels::WeightMatrix{t->type, t->data, rows, cols};
}

ExpertMatrices ModelWeights::stacked(const gguf::TensorInfo& t, int64_t n, int64_t rows, int64_t cols,
                                     const char* what) {
  TRIAD_CHECK(t.n_dims == 3 && t.ne[0] == cols && t.ne[1] == rows && t.ne[2] == n, "tensor '", t.name,
              "' has shape ", dims_str(t), ", expected [", cols, ", ", rows, ", ", n, "] (", n, " ", what, ")");
  TRIAD_CHECK(dtype_supported_for_weights(t.type), "tensor '", t.name, "' has type ", dtype_name(t.type),
              ", which Triad cannot compute with yet");
  matrix_bytes += t.n_bytes;
  ExpertMatrices e;
  e.first = kernels::WeightMatrix{t.type, t.data, rows, cols};
  const uint64_t stride = row_bytes(t.type, static_cast<uint64_t>(cols)) * static_cast<uint64_t>(rows);
  for (int64_t x = 0; x < n; ++x)
    e.data.push_back(static_cast<const uint8_t*>(t.data) + static_cast<uint64_t>(x) * stride);
  return e;
}

void ModelWeights::bind_mla(const gguf::GgufFile& f, const ModelConfig& c, int32_t il, LayerWeights& L) {
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t E = c.n_embd, H = c.n_heads, R = c.kv_lora_rank, D = c.rope_dim, N = c.qk_nope,
                V = c.v_head_dim, QH = c.q_head_raw();
  if (c.q_lora_rank > 0) {
    L.wq_a = matrix(f, b + "attn_q_a.weight", c.q_lora_rank, E);
    L.q_a_norm = vector_f32(f, b + "attn_q_a_norm.weight", c.q_lora_rank, true);
    L.wq_b = matrix(f, b + "attn_q_b.weight", H * QH, c.q_lora_rank);
  } else {
    L.wq = matrix(f, b + "attn_q.weight", H * QH, E);
  }
  L.wkv_a = matrix(f, b + "attn_kv_a_mqa.weight", R + D, E);
  L.kv_a_norm = vector_f32(f, b + "attn_kv_a_norm.weight", R, true);
  L.wo = matrix(f, b + "attn_output.weight", E, H * V);
  const gguf::TensorInfo* kb = f.find_tensor(b + "attn_k_b.weight");
  if (kb != nullptr) {
    L.wk_b = stacked(*kb, H, R, N, "heads");
    const gguf::TensorInfo* vb = f.find_tensor(b + "attn_v_b.weight");
    TRIAD_CHECK(vb, "model is missing tensor '", b, "attn_v_b.weight' (it has attn_k_b)");
    L.wv_b = stacked(*vb, H, V, R, "heads");
    return;
  }
  // Older files: attn_kv_b [H*(N+V) x R], per head N key rows then V value rows. The value rows
  // are attn_v_b's matrices as they stand; the key rows must be transposed to absorb queries,
  // so they are dequantized into an owned copy of H*R*N values per layer: f32 from an F32 file,
  // else f16 (DeepSeek-V3 in this form: 1 GiB). Re-converting the file avoids the copy.
  TRIAD_CHECK(f.find_tensor(b + "attn_kv_b.weight"), "model is missing tensor '", b, "attn_k_b.weight' (nor has it '",
              b, "attn_kv_b.weight')");
  const kernels::WeightMatrix kv = matrix(f, b + "attn_kv_b.weight", H * (N + V), R);
  const uint64_t rb = row_bytes(kv.type, static_cast<uint64_t>(R));
  const uint8_t* base = static_cast<const uint8_t*>(kv.data);
  const DType kt_type = kv.type == DType::kF32 ? DType::kF32 : DType::kF16;
  const size_t es = kt_type == DType::kF32 ? 4 : 2, per_head = static_cast<size_t>(R * N) * es;
  uint8_t* kt = own_bytes(static_cast<size_t>(H) * per_head);
  matrix_bytes += static_cast<uint64_t>(H) * per_head;
  std::vector<float> row(static_cast<size_t>(R));
  for (int64_t h = 0; h < H; ++h) {
    uint8_t* head = kt + static_cast<size_t>(h) * per_head;
    for (int64_t d = 0; d < N; ++d) {
      kernels::dequantize_row_ref(kv.type, base + static_cast<uint64_t>(h * (N + V) + d) * rb, row.data(), R);
      for (int64_t r = 0; r < R; ++r) {
        const size_t at = static_cast<size_t>(r * N + d);
        if (kt_type == DType::kF32) {
          std::memcpy(head + at * 4, &row[static_cast<size_t>(r)], 4);
        } else {
          const uint16_t v = f32_to_fp16(row[static_cast<size_t>(r)]);
          std::memcpy(head + at * 2, &v, 2);
        }
      }
    }
    L.wk_b.data.push_back(head);
    L.wv_b.data.push_back(base + static_cast<uint64_t>(h * (N + V) + N) * rb);
  }
  L.wk_b.first = kernels::WeightMatrix{kt_type, kt, R, N};
  L.wv_b.first = kernels::WeightMatrix{kv.type, L.wv_b.data[0], V, R};
}

ExpertMatrices ModelWeights::experts(const gguf::GgufFile& f, const std::string& blk, const std::string& kind,
                                     int64_t n, int64_t rows, int64_t cols) {
  ExpertMatrices e;
  e.data.resize(static_cast<size_t>(n));
  const std::string stacked_name = blk + "ffn_" + kind + "_exps.weight";
  if (const gguf::TensorInfo* t = f.find_tensor(stacked_name)) {
    expert_bytes_ += t->n_bytes;
    return stacked(*t, n, rows, cols, "experts");
  }
  const std::string& stacked = stacked_name;
  // One 2-D tensor per expert (Mixtral files converted before the stacked layout).
  const std::string split0 = blk + "ffn_" + kind + ".0.weight";
  TRIAD_CHECK(f.find_tensor(split0) != nullptr, "model is missing tensor '", stacked, "' (nor has it the per-expert '",
              split0, "' ...)");
  for (int64_t x = 0; x < n; ++x) {
    const std::string name = blk + "ffn_" + kind + "." + std::to_string(x) + ".weight";
    const uint64_t before = matrix_bytes;
    const kernels::WeightMatrix m = matrix(f, name, rows, cols);
    expert_bytes_ += matrix_bytes - before;
    if (x == 0) e.first = m;
    TRIAD_CHECK(m.type == e.first.type, "tensor '", name, "' has type ", dtype_name(m.type), ", but expert 0's is ",
                dtype_name(e.first.type), " (the experts of one matrix must share a type)");
    e.data[static_cast<size_t>(x)] = m.data;
  }
  TRIAD_CHECK(f.find_tensor(blk + "ffn_" + kind + "." + std::to_string(n) + ".weight") == nullptr, "tensor '", blk,
              "ffn_", kind, ".", n, ".weight' is one expert more than expert_count (", n, ")");
  return e;
}

std::vector<ModelWeights::NamedMatrix> ModelWeights::block_matrices() {
  std::vector<NamedMatrix> out;
  for (size_t il = 0; il < layers.size(); ++il) {
    LayerWeights& L = layers[il];
    const std::string b = "blk." + std::to_string(il) + ".";
    for (auto [name, m] : {NamedMatrix{"attn_q.weight", &L.wq}, NamedMatrix{"attn_k.weight", &L.wk},
                           NamedMatrix{"attn_v.weight", &L.wv}, NamedMatrix{"attn_q_a.weight", &L.wq_a},
                           NamedMatrix{"attn_q_b.weight", &L.wq_b}, NamedMatrix{"attn_kv_a_mqa.weight", &L.wkv_a},
                           NamedMatrix{"attn_output.weight", &L.wo}})
      if (m->data != nullptr) out.push_back({b + name, m});
    if (L.gate_shexp.data != nullptr) {  // MoE layer's shared expert: a dense SwiGLU
      out.push_back({b + "ffn_gate_shexp.weight", &L.gate_shexp});
      out.push_back({b + "ffn_up_shexp.weight", &L.up_shexp});
      out.push_back({b + "ffn_down_shexp.weight", &L.down_shexp});
    }
    if (L.w_up.data == nullptr) continue;  // MoE layer
    if (L.w_gate.data != nullptr) out.push_back({b + "ffn_gate.weight", &L.w_gate});  // (encoders: no gate)
    out.push_back({b + "ffn_up.weight", &L.w_up});
    out.push_back({b + "ffn_down.weight", &L.w_down});
  }
  return out;
}

uint8_t* ModelWeights::own_bytes(size_t n, bool zeroed) {
  owned_bytes_.emplace_back();
  if (zeroed) {
    owned_bytes_.back().resize(n);
  } else {
    owned_bytes_.back().resize_for_overwrite(n);
    // The last cache line, alignment padding included, is zeroed: whatever a kernel's whole-line
    // load of the final bytes sees is defined.
    const size_t tail = n & ~size_t{63};
    if (n > 0) std::memset(owned_bytes_.back().data() + tail, 0, (n + 63) / 64 * 64 - tail);
  }
  return owned_bytes_.back().data();
}

bool ModelWeights::owns(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  for (const AlignedBuffer<uint8_t>& o : owned_bytes_)
    if (b >= o.data() && b < o.data() + o.size()) return true;
  return false;
}

namespace {

// The file tensor whose bytes hold p (null if none: a matrix made at load time).
const gguf::TensorInfo* tensor_at(const gguf::GgufFile& f, const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (const gguf::TensorInfo& t : f.tensors())
    if (t.data != nullptr && b >= t.data && b < t.data + t.n_bytes) return &t;
  return nullptr;
}

}  // namespace

ModelWeights::Relayout ModelWeights::relayout(const gguf::GgufFile& f, IsaLevel level, int threads, uint64_t budget) {
  std::vector<NamedMatrix> todo = block_matrices();
  const bool tied = output.data != nullptr && output.data == token_embd.data;
  if (tied) {
    todo.push_back({"token_embd.weight", &token_embd});
  } else if (output.data != nullptr) {
    todo.push_back({"output.weight", &output});
  }
  Relayout result;
  if (level == IsaLevel::kScalar) return result;
  // AVX-512 runs every layout; AVX2 only panels (kernels::matmul_prefers_panels).
  const bool lanes_too = level == IsaLevel::kAvx512;
  auto into_panels = [&](const kernels::WeightMatrix& m) {
    return kernels::matmul_prefers_panels(level, m.type) && kernels::panel_layout_fits(m.type, m.rows);
  };
  ThreadPool pool(std::max(1, threads));
  // Copies move weights from file pages (which the kernel may drop and read again) into
  // anonymous memory: they stop where the copies would pass 7/8 of what the OS reports
  // available, so a model larger than memory still runs from its mapping (in GGUF layout).
  if (budget == 0) {
    const uint64_t avail = available_memory_bytes();
    budget = avail ? avail / 8 * 7 : UINT64_MAX;
  }
  uint64_t copied = 0;
  auto affordable = [&](uint64_t bytes) {
    if (copied + bytes > budget) {
      result.kept_bytes += bytes;
      ++result.kept;
      return false;
    }
    copied += bytes;
    return true;
  };
  // The rows of one matrix of `type` and `cols` at src re-laid into dst (src itself: in place,
  // each row or panel through a copy): into panels of 16 rows (kernels/panel_layout.h) with
  // `panels`, else row by row into the lane layout. A copy is made in slices of about 16 MiB,
  // each slice's file pages released once it is done, so that loading peaks at one slice above
  // the model, not one matrix (the 138 MiB output of Qwen2.5-0.5B).
  auto relay = [&](DType type, int64_t rows, int64_t cols, const uint8_t* src, uint8_t* dst, bool panels) {
    const uint64_t rb = row_bytes(type, static_cast<uint64_t>(cols));
    const bool in_place = src == dst;
    const int64_t unit = panels ? kernels::kPanelRows : 1;  // rows re-laid together
    const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>((uint64_t{16} << 20) / rb / unit)) * unit;
    for (int64_t s0 = 0; s0 < rows; s0 += slice) {
      const int64_t s1 = std::min(rows, s0 + slice);
      pool.parallel_for((s1 - s0) / unit, [&](int64_t b, int64_t e) {
        // In place, each row (or panel's 16 rows) is re-laid from a copy of itself.
        std::vector<uint8_t> copy(in_place ? static_cast<size_t>(rb * unit) : 0);
        for (int64_t r = s0 + b * unit; r < s0 + e * unit; r += unit) {
          const uint64_t o = rb * static_cast<uint64_t>(r);
          const uint8_t* from = src + o;
          if (in_place) from = static_cast<const uint8_t*>(std::memcpy(copy.data(), from, static_cast<size_t>(rb * unit)));
          if (panels) {
            kernels::panel_from_rows(type, from, cols, dst + o);
          } else {
            kernels::row_to_lanes(type, from, cols, dst + o);
          }
        }
      });
      if (!in_place) f.release_range(src + rb * static_cast<uint64_t>(s0), rb * static_cast<uint64_t>(s1 - s0));
    }
  };
  // Plan first, then one buffer for every copy (a matrix's copy at a 64-byte aligned offset):
  // one 2 MiB-aligned block is backed by huge pages whole (AlignedBuffer), where a buffer per
  // matrix left each one's last partial 2 MiB on 4 KiB pages (IQ4_XS 1.5B decode: 25.4-25.6
  // tokens/s against 22.8-23.5).
  struct Job {
    kernels::WeightMatrix* m = nullptr;   // a matrix, or
    ExpertMatrices* e = nullptr;          // an expert set (its copies side by side)
    const std::string* name = nullptr;    // the matrix's file tensor
    bool in_place = false;
    uint64_t offset = 0;                  // of the copy in the buffer
  };
  std::vector<Job> jobs;
  uint64_t total = 0;
  auto place = [&](uint64_t bytes) {
    const uint64_t at = total;
    total += (bytes + 63) / 64 * 64;
    return at;
  };
  for (NamedMatrix& nm : todo) {
    kernels::WeightMatrix& m = *nm.matrix;
    if (m.data == nullptr || m.lanes || m.panels || !kernels::lane_layout_supported(m.type)) continue;
    if (!lanes_too && !into_panels(m)) continue;  // AVX2: only panels, where they serve best
    const uint64_t bytes = row_bytes(m.type, static_cast<uint64_t>(m.cols)) * static_cast<uint64_t>(m.rows);
    Job j;
    j.m = &m;
    j.name = &nm.name;
    j.in_place = owns(m.data);
    if (!j.in_place) {
      if (!affordable(bytes)) continue;
      j.offset = place(bytes);
    }
    jobs.push_back(j);
  }
  auto each_bytes = [](const ExpertMatrices& e) {
    return row_bytes(e.first.type, static_cast<uint64_t>(e.first.cols)) * static_cast<uint64_t>(e.first.rows);
  };
  for (LayerWeights& L : layers) {
    if (!lanes_too) break;  // experts go into lanes only
    for (ExpertMatrices* e : {&L.wk_b, &L.wv_b, &L.gate_exps, &L.up_exps, &L.down_exps}) {
      if (e->n() == 0 || e->first.lanes || !kernels::lane_layout_supported(e->first.type)) continue;
      uint64_t copies = 0;
      for (const void* d : e->data) copies += owns(d) ? 0 : 1;
      if (copies > 0 && !affordable(copies * each_bytes(*e))) continue;
      Job j;
      j.e = e;
      if (copies > 0) j.offset = place(copies * each_bytes(*e));
      jobs.push_back(j);
    }
  }
  uint8_t* buf = total > 0 ? own_bytes(static_cast<size_t>(total), /*zeroed=*/false) : nullptr;
  for (const Job& j : jobs) {
    if (j.m != nullptr) {
      kernels::WeightMatrix& m = *j.m;
      auto* src = static_cast<const uint8_t*>(m.data);
      uint8_t* dst = j.in_place ? const_cast<uint8_t*>(src) : buf + j.offset;
      const bool panels = into_panels(m);
      relay(m.type, m.rows, m.cols, src, dst, panels);
      if (!j.in_place)
        if (const gguf::TensorInfo* ti = f.find_tensor(*j.name)) f.release_pages(*ti);
      m.data = dst;
      (panels ? m.panels : m.lanes) = true;
      ++result.matrices;
      continue;
    }
    // Routed experts and latent attention's per-head matrices: then the file tensors that held
    // them (one stacked tensor, or one per expert) are released.
    ExpertMatrices* e = j.e;
    const uint64_t each = each_bytes(*e);
    uint8_t* next = buf + j.offset;
    std::vector<const gguf::TensorInfo*> held;
    for (const void*& d : e->data) {
      auto* src = static_cast<const uint8_t*>(d);
      uint8_t* dst = const_cast<uint8_t*>(src);
      if (!owns(src)) {
        if (const gguf::TensorInfo* ti = tensor_at(f, src); ti && std::find(held.begin(), held.end(), ti) == held.end())
          held.push_back(ti);
        dst = next;
        next += each;
      }
      relay(e->first.type, e->first.rows, e->first.cols, src, dst, /*panels=*/false);
      d = dst;
    }
    for (const gguf::TensorInfo* ti : held) f.release_pages(*ti);
    e->first.data = e->data[0];
    e->first.lanes = true;
    result.matrices += e->n();
  }
  if (tied) output = token_embd;
  return result;
}

bool ModelWeights::has_gguf_layout_quant() const {
  auto gguf = [](const kernels::WeightMatrix& m) {
    return m.data != nullptr && !m.lanes && !m.panels && kernels::lane_layout_supported(m.type);
  };
  auto gguf_e = [](const ExpertMatrices& e) {
    return e.n() > 0 && !e.first.lanes && kernels::lane_layout_supported(e.first.type);
  };
  if (gguf(output)) return true;
  for (const LayerWeights& L : layers) {
    for (const kernels::WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.wq_a, &L.wq_b, &L.wkv_a, &L.w_gate, &L.w_up,
                                           &L.w_down, &L.gate_inp, &L.gate_shexp, &L.up_shexp, &L.down_shexp})
      if (gguf(*m)) return true;
    for (const ExpertMatrices* e : {&L.wk_b, &L.wv_b, &L.gate_exps, &L.up_exps, &L.down_exps})
      if (gguf_e(*e)) return true;
  }
  return false;
}

ModelWeights ModelWeights::bind_encoder(const gguf::GgufFile& f, ModelConfig& c) {
  ModelWeights w;
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  TRIAD_CHECK(emb && emb->n_dims == 2 && emb->ne[0] == c.n_embd && emb->ne[1] > 0 && emb->ne[1] < (1 << 24),
              "tensor 'token_embd.weight' is ", emb ? "misshapen" : "missing", " (expected [", c.n_embd, ", n_vocab])");
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  const gguf::TensorInfo* types = f.find_tensor("token_types.weight");
  TRIAD_CHECK(types && types->n_dims == 2 && types->ne[1] > 0 && types->ne[1] <= 1024,
              "tensor 'token_types.weight' is ", types ? "misshapen" : "missing", " (expected [", c.n_embd,
              ", token types])");
  c.n_token_types = static_cast<int32_t>(types->ne[1]);
  const bool bert = c.arch == Arch::kBert;  // learned positions, biases, GELU (nomic-bert: none, RoPE, SwiGLU)
  w.token_embd = w.matrix(f, "token_embd.weight", c.n_vocab, c.n_embd);
  if (bert) w.pos_embd = w.matrix(f, "position_embd.weight", c.n_ctx_train, c.n_embd);
  w.token_types = w.matrix(f, "token_types.weight", c.n_token_types, c.n_embd);
  const uint64_t lookup_bytes = w.matrix_bytes;  // one row of each per token
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  w.embd_norm = w.vector_f32(f, "token_embd_norm.weight", E, true);
  w.embd_norm_b = w.vector_f32(f, "token_embd_norm.bias", E, true);
  c.tied_output = false;
  w.layers.resize(c.n_layers);
  for (int32_t il = 0; il < c.n_layers; ++il) {
    LayerWeights& L = w.layers[il];
    const std::string b = "blk." + std::to_string(il) + ".";
    if (f.find_tensor(b + "attn_qkv.weight") != nullptr) {
      // One fused [q; k; v] matrix: three row ranges of it, without a copy.
      const kernels::WeightMatrix qkv = w.matrix(f, b + "attn_qkv.weight", Q + 2 * KV, E);
      const uint64_t rb = row_bytes(qkv.type, static_cast<uint64_t>(E));
      const auto* base = static_cast<const uint8_t*>(qkv.data);
      L.wq = kernels::WeightMatrix{qkv.type, base, Q, E};
      L.wk = kernels::WeightMatrix{qkv.type, base + rb * static_cast<uint64_t>(Q), KV, E};
      L.wv = kernels::WeightMatrix{qkv.type, base + rb * static_cast<uint64_t>(Q + KV), KV, E};
    } else {
      L.wq = w.matrix(f, b + "attn_q.weight", Q, E);
      L.wk = w.matrix(f, b + "attn_k.weight", KV, E);
      L.wv = w.matrix(f, b + "attn_v.weight", KV, E);
    }
    L.wo = w.matrix(f, b + "attn_output.weight", E, Q);
    L.bq = w.vector_f32(f, b + "attn_q.bias", Q, bert);
    L.bk = w.vector_f32(f, b + "attn_k.bias", KV, bert);
    L.bv = w.vector_f32(f, b + "attn_v.bias", KV, bert);
    L.bo = w.vector_f32(f, b + "attn_output.bias", E, bert);
    L.attn_out_norm = w.vector_f32(f, b + "attn_output_norm.weight", E, true);
    L.attn_out_norm_b = w.vector_f32(f, b + "attn_output_norm.bias", E, true);
    if (!bert) L.w_gate = w.matrix(f, b + "ffn_gate.weight", F, E);
    L.w_up = w.matrix(f, b + "ffn_up.weight", F, E);
    L.b_up = w.vector_f32(f, b + "ffn_up.bias", F, bert);
    L.w_down = w.matrix(f, b + "ffn_down.weight", E, F);
    L.b_down = w.vector_f32(f, b + "ffn_down.bias", E, bert);
    L.out_norm = w.vector_f32(f, b + "layer_output_norm.weight", E, true);
    L.out_norm_b = w.vector_f32(f, b + "layer_output_norm.bias", E, true);
  }
  w.bytes_per_token = w.matrix_bytes - lookup_bytes;
  return w;
}

ModelWeights ModelWeights::bind(const gguf::GgufFile& f, ModelConfig& c) {
  if (c.encoder) return bind_encoder(f, c);
  ModelWeights w;
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  TRIAD_CHECK(emb, "model is missing tensor 'token_embd.weight'");
  TRIAD_CHECK(emb->n_dims == 2 && emb->ne[0] == c.n_embd && emb->ne[1] > 0 && emb->ne[1] < (1 << 24),
              "tensor 'token_embd.weight' has shape ", dims_str(*emb), ", expected [", c.n_embd,
              ", n_vocab]");
  c.n_vocab = static_cast<int32_t>(emb->ne[1]);
  w.token_embd = w.matrix(f, "token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = w.vector_f32(f, "output_norm.weight", c.n_embd, true);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (c.tied_output) {
    w.output = w.token_embd;
  } else {
    w.output = w.matrix(f, "output.weight", c.n_vocab, c.n_embd);
  }
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, D = c.head_dim;
  w.layers.resize(c.n_layers);
  for (int32_t il = 0; il < c.n_layers; ++il) {
    LayerWeights& L = w.layers[il];
    const std::string b = "blk." + std::to_string(il) + ".";
    L.attn_norm = w.vector_f32(f, b + "attn_norm.weight", E, true);
    if (c.is_mla()) {
      w.bind_mla(f, c, il, L);
    } else {
      L.wq = w.matrix(f, b + "attn_q.weight", Q, E);
      L.wk = w.matrix(f, b + "attn_k.weight", KV, E);
      L.wv = w.matrix(f, b + "attn_v.weight", KV, E);
      L.wo = w.matrix(f, b + "attn_output.weight", E, Q);
      L.bo = w.vector_f32(f, b + "attn_output.bias", E, c.arch == Arch::kGptOss);
      if (c.arch == Arch::kGptOss) L.attn_sinks = w.vector_f32(f, b + "attn_sinks.weight", c.n_heads, true);
      // Biases are optional in every family (qwen2 has them); bind whatever is present.
      L.bq = w.vector_f32(f, b + "attn_q.bias", Q, c.arch == Arch::kQwen2);
      L.bk = w.vector_f32(f, b + "attn_k.bias", KV, c.arch == Arch::kQwen2);
      L.bv = w.vector_f32(f, b + "attn_v.bias", KV, c.arch == Arch::kQwen2);
      if (c.qk_norm) {
        L.q_norm = w.vector_f32(f, b + "attn_q_norm.weight", D, true);
        L.k_norm = w.vector_f32(f, b + "attn_k_norm.weight", D, true);
      }
    }
    if (c.post_norms) {
      L.post_attn_norm = w.vector_f32(f, b + "post_attention_norm.weight", E, true);
      L.post_ffn_norm = w.vector_f32(f, b + "post_ffw_norm.weight", E, true);
    }
    L.ffn_norm = w.vector_f32(f, b + c.ffn_norm_name + ".weight", E, true);
    if (c.layer_is_moe(il)) {
      const int64_t X = c.n_expert, FX = c.n_ff_exp;
      L.gate_inp = w.matrix(f, b + "ffn_gate_inp.weight", X, E);
      // The selection bias: optional in deepseek2 (V3 and later have it), required in glm4moe.
      if (c.arch == Arch::kDeepseek2 || c.arch == Arch::kGlm4Moe)
        L.exp_probs_b = w.vector_f32(f, b + "exp_probs_b.bias", X, c.arch == Arch::kGlm4Moe);
      L.gate_exps = w.experts(f, b, "gate", X, FX, E);
      L.up_exps = w.experts(f, b, "up", X, FX, E);
      L.down_exps = w.experts(f, b, "down", X, E, FX);
      if (c.arch == Arch::kGptOss) {
        L.gate_inp_b = w.vector_f32(f, b + "ffn_gate_inp.bias", X, true);
        L.gate_exps_b = w.vector_f32(f, b + "ffn_gate_exps.bias", X * FX, true, X);
        L.up_exps_b = w.vector_f32(f, b + "ffn_up_exps.bias", X * FX, true, X);
        L.down_exps_b = w.vector_f32(f, b + "ffn_down_exps.bias", X * E, true, X);
      }
      if (c.n_ff_shexp > 0) {
        const int64_t FS = c.n_ff_shexp;
        if (c.shexp_gated) L.gate_inp_shexp = w.vector_f32(f, b + "ffn_gate_inp_shexp.weight", E, true);
        L.gate_shexp = w.matrix(f, b + "ffn_gate_shexp.weight", FS, E);
        L.up_shexp = w.matrix(f, b + "ffn_up_shexp.weight", FS, E);
        L.down_shexp = w.matrix(f, b + "ffn_down_shexp.weight", E, FS);
      }
      continue;
    }
    L.w_gate = w.matrix(f, b + "ffn_gate.weight", F, E);
    L.w_up = w.matrix(f, b + "ffn_up.weight", F, E);
    L.w_down = w.matrix(f, b + "ffn_down.weight", E, F);
  }
  // Per generated token every matrix is streamed once, except an untied embedding table, of which
  // only one row is read, and the experts, of which a token reads n_expert_used of n_expert.
  w.bytes_per_token = w.matrix_bytes - (c.tied_output ? 0 : emb->n_bytes);
  if (c.is_moe())
    w.bytes_per_token -= w.expert_bytes_ - w.expert_bytes_ / static_cast<uint64_t>(c.n_expert) *
                                               static_cast<uint64_t>(c.n_expert_used);
  return w;
}

}  // namespace triad
