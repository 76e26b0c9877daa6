// llama.cpp imatrix GGUF files (see imatrix.h).
#include "quant/imatrix.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace triad::quant {
namespace {

constexpr std::string_view kSum2 = ".in_sum2";
constexpr std::string_view kCounts = ".counts";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<float> read_f32(const gguf::TensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

}  // namespace

Imatrix Imatrix::load(const std::string& path) {
  const auto f = gguf::GgufFile::open(path);
  try {
    return from_gguf(*f);
  } catch (const Error& e) {
    fail("imatrix '", path, "': ", e.what());
  }
}

Imatrix Imatrix::from_gguf(const gguf::GgufFile& f) {
  const std::string type = f.get_string("general.type", "");
  TRIAD_CHECK(type == "imatrix", "not an imatrix GGUF (general.type is '", type,
              "'; llama.cpp's legacy .dat imatrix files are not read: convert them with "
              "llama-imatrix --in-file X.dat -o X.gguf)");
  Imatrix m;
  m.datasets = f.get_string_array("imatrix.datasets");
  m.chunk_count = f.get_int("imatrix.chunk_count", 0);
  m.chunk_size = f.get_int("imatrix.chunk_size", 0);
  size_t n_counts = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (ends_with(t.name, kCounts)) {
      ++n_counts;
      continue;
    }
    TRIAD_CHECK(ends_with(t.name, kSum2), "unexpected tensor '", t.name,
                "' (an imatrix holds NAME.in_sum2 and NAME.counts pairs)");
    const std::string base = t.name.substr(0, t.name.size() - kSum2.size());
    const gguf::TensorInfo* c = f.find_tensor(base + std::string(kCounts));
    TRIAD_CHECK(c != nullptr, "'", t.name, "' has no matching '", base, kCounts, "'");
    TRIAD_CHECK(t.type == DType::kF32 && c->type == DType::kF32, "'", base,
                "': in_sum2 and counts must be F32");
    TRIAD_CHECK(t.n_dims <= 2 && c->n_dims <= 2 && t.ne[0] > 0, "'", base, "': bad shape");
    ImatrixEntry e;
    e.n_per_row = t.ne[0];
    e.n_mat = t.ne[1];
    TRIAD_CHECK(c->ne[0] == 1 && c->ne[1] == e.n_mat, "'", base, "': counts has shape {",
                c->ne[0], ", ", c->ne[1], "}, expected {1, ", e.n_mat, "}");
    e.sum2 = read_f32(t);
    e.counts = read_f32(*c);
    for (float v : e.sum2)
      TRIAD_CHECK(std::isfinite(v) && v >= 0, "'", base, "': in_sum2 holds ", v,
                  " (sums of squares are finite and non-negative)");
    for (float v : e.counts)
      TRIAD_CHECK(std::isfinite(v) && v >= 0 && v == std::floor(v), "'", base, "': counts holds ",
                  v, " (token counts are whole numbers)");
    m.entries_[base] = std::move(e);
  }
  TRIAD_CHECK(n_counts == m.entries_.size(), "counts tensors without matching in_sum2");
  return m;
}

const ImatrixEntry* Imatrix::find(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<float> Imatrix::importance(std::string_view name, int64_t expert) const {
  const ImatrixEntry* e = find(name);
  if (e == nullptr) return {};
  TRIAD_CHECK(expert >= 0 && expert < e->n_mat, "imatrix entry '", name, "' has ", e->n_mat,
              " matrices, asked for ", expert);
  std::vector<float> w(static_cast<size_t>(e->n_per_row), 1.f);
  const float count = e->counts[static_cast<size_t>(expert)];
  if (count <= 0) return w;
  const float* s = e->sum2.data() + expert * e->n_per_row;
  for (int64_t j = 0; j < e->n_per_row; ++j) w[static_cast<size_t>(j)] = s[j] / count;
  return w;
}

void Imatrix::set(std::string name, ImatrixEntry e) {
  TRIAD_CHECK(e.n_per_row > 0 && e.n_mat > 0 &&
                  e.sum2.size() == static_cast<size_t>(e.n_per_row * e.n_mat) &&
                  e.counts.size() == static_cast<size_t>(e.n_mat),
              "imatrix entry '", name, "': inconsistent sizes");
  entries_[std::move(name)] = std::move(e);
}

void Imatrix::save(const std::string& path) const {
  gguf::GgufWriter w;
  w.add_string("general.type", "imatrix");
  w.add_string_array("imatrix.datasets", datasets);
  w.add_u32("imatrix.chunk_count", static_cast<uint32_t>(chunk_count));
  w.add_u32("imatrix.chunk_size", static_cast<uint32_t>(chunk_size));
  for (const auto& [name, e] : entries_) {
    // One matrix: 1-D tensors, as llama-imatrix writes them; stacked experts: 2-D.
    const std::vector<int64_t> sum_dims = e.n_mat == 1 ? std::vector<int64_t>{e.n_per_row}
                                                       : std::vector<int64_t>{e.n_per_row, e.n_mat};
    const std::vector<int64_t> count_dims = e.n_mat == 1 ? std::vector<int64_t>{1}
                                                         : std::vector<int64_t>{1, e.n_mat};
    w.add_tensor_ref(name + std::string(kSum2), DType::kF32, sum_dims, e.sum2.data(),
                     e.sum2.size() * sizeof(float));
    w.add_tensor_ref(name + std::string(kCounts), DType::kF32, count_dims, e.counts.data(),
                     e.counts.size() * sizeof(float));
  }
  w.write_file(path);
}

}  // namespace triad::quant
