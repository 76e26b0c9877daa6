// Importance-matrix collection (see imatrix_collector.h).
#include "quant/imatrix_collector.h"

#include "base/error.h"
#include "gguf/gguf_file.h"

namespace triad::quant {

ImatrixCollector::ImatrixCollector(const Model& model, bool process_output) {
  for (const gguf::TensorInfo& t : model.file().tensors()) {
    if (t.n_dims < 2) continue;
    const bool block = t.name.rfind("blk.", 0) == 0;
    if (block || (process_output && t.name == "output.weight")) names_[t.data] = t.name;
  }
}

void ImatrixCollector::observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tokens,
                               int64_t x_stride) {
  const auto it = names_.find(w.data);
  if (it == names_.end() || n_tokens <= 0) return;
  Acc& a = acc_[it->second];
  if (a.sum2.empty()) a.sum2.assign(static_cast<size_t>(w.cols), 0.0);
  TRIAD_CHECK(a.sum2.size() == static_cast<size_t>(w.cols), "imatrix: '", it->second,
              "' seen with ", w.cols, " inputs, earlier with ", a.sum2.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = x + t * x_stride;
    for (int64_t j = 0; j < w.cols; ++j) a.sum2[static_cast<size_t>(j)] += static_cast<double>(row[j]) * row[j];
  }
  a.count += n_tokens;
}

Imatrix ImatrixCollector::result() const {
  Imatrix m;
  for (const auto& [name, a] : acc_) {
    ImatrixEntry e;
    e.n_per_row = static_cast<int64_t>(a.sum2.size());
    e.n_mat = 1;
    e.sum2.assign(a.sum2.begin(), a.sum2.end());
    e.counts = {static_cast<float>(a.count)};
    m.set(name, std::move(e));
  }
  return m;
}

}  // namespace triad::quant
