// Whole-file quantization (see quantize_model.h).
#include "quant/quantize_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/aligned_buffer.h"
#include "base/error.h"
#include "base/timer.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant.h"
#include "quant/quantize.h"

namespace triad::quant {
namespace {

struct Plan {
  const gguf::TensorInfo* in;
  std::vector<int64_t> dims;
  DType to;
  bool quantize;
  bool fallback;
};

ModelShape shape_of(const gguf::GgufFile& f) {
  ModelShape s;
  s.arch = f.get_string("general.architecture", "");
  const std::string a = s.arch + ".";
  s.n_layer = static_cast<int>(f.get_int(a + "block_count", 0));
  s.n_head = static_cast<int>(f.get_int(a + "attention.head_count", 1));
  s.n_head_kv = static_cast<int>(f.get_int(a + "attention.head_count_kv", s.n_head));
  s.n_expert = static_cast<int>(f.get_int(a + "expert_count", 0));
  s.has_output = f.find_tensor("output.weight") != nullptr;
  return s;
}

bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

}  // namespace

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path,
                               const QuantizeOptions& opt, ThreadPool& pool,
                               const QuantizeProgress& progress) {
  namespace fs = std::filesystem;
  std::error_code ec;
  TRIAD_CHECK(!fs::exists(out_path, ec) || !fs::equivalent(in_path, out_path, ec),
              "the output '", out_path, "' is the input file");
  const auto f = gguf::GgufFile::open(in_path);
  const ModelShape shape = shape_of(*f);

  // Decide every tensor's type first (the header lists them all before any data), in
  // llama.cpp's order (by block, then name), which is also the order they are written in.
  std::vector<const gguf::TensorInfo*> order;
  for (const gguf::TensorInfo& t : f->tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
    return tensor_order(a->name, b->name);
  });
  std::vector<Plan> plans;
  MixCounters counters;
  for (const gguf::TensorInfo* t : order)
    if (should_quantize(t->name, t->n_dims)) counters.count(t->name);
  for (const gguf::TensorInfo* tp : order) {
    const gguf::TensorInfo& t = *tp;
    Plan p{&t, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.type, false, false};
    if (should_quantize(t.name, t.n_dims)) {
      const TypeChoice c = choose_type(opt.mix, opt.mix_options, shape, t.name, t.ne[0], counters,
                                       t.n_dims >= 3 ? t.ne[2] : 1);
      if (c.fallback && c.user)
        fail("tensor '", t.name, "' has rows of ", t.ne[0], " values, which ", dtype_name(c.wanted),
             " (blocks of ", traits(c.wanted).block_size, ") cannot hold; choose another type for it");
      p.to = c.type;
      p.fallback = c.fallback;
    }
    if (p.to != t.type) {
      TRIAD_CHECK(dtype_supported_for_weights(t.type), "tensor '", t.name, "' has type ",
                  dtype_name(t.type), ", which Triad cannot convert");
      TRIAD_CHECK(is_float(t.type) || opt.allow_requantize, "tensor '", t.name, "' is already ",
                  dtype_name(t.type), "; requantizing to ", dtype_name(p.to),
                  " compounds two roundings (pass --allow-requantize to do it anyway)");
      p.quantize = true;
    }
    plans.push_back(std::move(p));
  }
  if (opt.imatrix) {
    for (const Plan& p : plans) {
      const ImatrixEntry* e = p.quantize ? opt.imatrix->find(p.in->name) : nullptr;
      if (e == nullptr) continue;
      const int64_t n_mat = p.in->n_dims >= 3 ? p.in->ne[2] : 1;
      TRIAD_CHECK(e->n_per_row == p.in->ne[0] && e->n_mat == n_mat, "imatrix entry '", p.in->name,
                  "' has {", e->n_per_row, " x ", e->n_mat, "} values, the tensor needs {",
                  p.in->ne[0], " x ", n_mat, "}: the imatrix was made for another model");
    }
  }

  gguf::GgufWriter w;
  w.set_alignment(static_cast<uint32_t>(f->alignment()));
  for (const auto& [key, value] : f->metadata()) {
    if (key == "general.alignment" || key == "general.file_type" ||
        key == "general.quantization_version" || key.rfind("quantize.imatrix.", 0) == 0)
      continue;
    w.add_value(key, value);
  }
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.file_type", opt.mix.file_type);
  if (opt.imatrix) {
    w.add_string("quantize.imatrix.file", opt.imatrix_path);
    if (!opt.imatrix->datasets.empty())
      w.add_string("quantize.imatrix.dataset", opt.imatrix->datasets.front());
    w.add_i32("quantize.imatrix.entries_count", static_cast<int32_t>(opt.imatrix->size()));
    w.add_i32("quantize.imatrix.chunks_count", static_cast<int32_t>(opt.imatrix->chunk_count));
  }

  QuantizeSummary sum;
  sum.tensors.resize(plans.size());
  Timer timer;
  const size_t count = plans.size();
  for (size_t i = 0; i < count; ++i) {
    const Plan& p = plans[i];
    TensorReport& rep = sum.tensors[i];
    rep.name = p.in->name;
    rep.shape = p.dims;
    rep.from = p.in->type;
    rep.to = p.to;
    rep.quantized = p.quantize;
    rep.fallback = p.fallback;
    rep.bytes_in = p.in->n_bytes;
    rep.bytes_out = p.in->n_elements / traits(p.to).block_size * traits(p.to).block_bytes;
    sum.bytes_in += rep.bytes_in;
    sum.bytes_out += rep.bytes_out;
    sum.params += p.in->n_elements;
    if (!p.quantize) {
      const gguf::TensorInfo* in = p.in;
      w.add_tensor_producer(p.in->name, p.to, p.dims, [&, i, in](uint8_t* dst) {
        std::copy(in->data, in->data + in->n_bytes, dst);
        f->release_pages(*in);
        if (progress) progress(i, count, sum.tensors[i]);
      });
      continue;
    }
    w.add_tensor_producer(p.in->name, p.to, p.dims, [&, i](uint8_t* dst) {
      const Plan& p = plans[i];
      const gguf::TensorInfo& t = *p.in;
      TensorReport& r = sum.tensors[i];
      const int64_t cols = t.ne[0];
      const int64_t rows = static_cast<int64_t>(t.n_elements) / cols;
      const int64_t rows_per_mat = t.n_dims >= 2 ? t.ne[1] : 1;
      const uint64_t in_row = row_bytes(t.type, static_cast<uint64_t>(cols));
      const uint64_t out_row = row_bytes(p.to, static_cast<uint64_t>(cols));
      std::vector<std::vector<float>> imp;
      if (opt.imatrix && opt.imatrix->find(t.name)) {
        const int64_t n_mat = t.n_dims >= 3 ? t.ne[2] : 1;
        for (int64_t e = 0; e < n_mat; ++e) imp.push_back(opt.imatrix->importance(t.name, e));
        r.used_imatrix = true;
      }
      const int nth = pool.size();
      std::vector<double> err(static_cast<size_t>(nth), 0.0), ref(static_cast<size_t>(nth), 0.0);
      pool.run([&](int tid, int n) {
        const int64_t r0 = rows * tid / n, r1 = rows * (tid + 1) / n;
        std::vector<float> x(static_cast<size_t>(cols)), y;
        if (opt.measure_error) y.resize(static_cast<size_t>(cols));
        double e2 = 0, x2 = 0;
        for (int64_t row = r0; row < r1; ++row) {
          kernels::dequantize_row(t.type, t.data + static_cast<uint64_t>(row) * in_row, x.data(), cols);
          const float* w8 = imp.empty() ? nullptr : imp[static_cast<size_t>(row / rows_per_mat)].data();
          uint8_t* out = dst + static_cast<uint64_t>(row) * out_row;
          quantize_row(p.to, x.data(), cols, out, w8);
          if (opt.measure_error) {
            kernels::dequantize_row(p.to, out, y.data(), cols);
            e2 += weighted_sq_error(x.data(), y.data(), cols, nullptr);
            for (float v : x) x2 += static_cast<double>(v) * v;
          }
        }
        err[static_cast<size_t>(tid)] = e2;
        ref[static_cast<size_t>(tid)] = x2;
      });
      double e2 = 0, x2 = 0;
      for (int k = 0; k < nth; ++k) {
        e2 += err[static_cast<size_t>(k)];
        x2 += ref[static_cast<size_t>(k)];
      }
      r.rel_rmse = x2 > 0 ? std::sqrt(e2 / x2) : 0.0;
      f->release_pages(t);
      if (progress) progress(i, count, r);
    });
  }
  w.write_file(out_path);
  sum.seconds = timer.seconds();
  return sum;
}

}  // namespace triad::quant
