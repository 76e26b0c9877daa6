// Importance-matrix collection (see imatrix_collector.h).
#include "quant/imatrix_collector.h"

#include "base/error.h"
#include "gguf/gguf_file.h"

namespace triad::quant {

ImatrixCollector::ImatrixCollector(const Model& model, bool process_output) {
  for (const gguf::TensorInfo& t : model.file().tensors()) {
    if (t.n_dims < 2) continue;
    const bool block = t.name.rfind("blk.", 0) == 0;
    if (!block && !(process_output && t.name == "output.weight")) continue;
    const int64_t n_mat = t.n_dims == 3 ? static_cast<int64_t>(t.ne[2]) : 1;
    if (n_mat <= 0) continue;
    const uint64_t stride = t.n_bytes / static_cast<uint64_t>(n_mat);  // one expert's matrix
    for (int64_t e = 0; e < n_mat; ++e)
      names_[static_cast<const uint8_t*>(t.data) + static_cast<uint64_t>(e) * stride] = {t.name, e, n_mat};
  }
}

void ImatrixCollector::observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tokens,
                               int64_t x_stride) {
  const auto it = names_.find(w.data);
  if (it == names_.end() || n_tokens <= 0) return;
  const Slot& slot = it->second;
  Acc& a = acc_[slot.name];
  const size_t cols = static_cast<size_t>(w.cols);
  if (a.sum2.empty()) {
    a.sum2.assign(cols * static_cast<size_t>(slot.n_mat), 0.0);
    a.count.assign(static_cast<size_t>(slot.n_mat), 0);
  }
  TRIAD_CHECK(a.sum2.size() == cols * static_cast<size_t>(slot.n_mat), "imatrix: '", slot.name,
              "' seen with ", w.cols, " inputs, earlier with ", a.sum2.size() / static_cast<size_t>(slot.n_mat));
  double* sum2 = a.sum2.data() + static_cast<size_t>(slot.expert) * cols;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* row = x + t * x_stride;
    for (size_t j = 0; j < cols; ++j) sum2[j] += static_cast<double>(row[j]) * row[j];
  }
  a.count[static_cast<size_t>(slot.expert)] += n_tokens;
}

Imatrix ImatrixCollector::result() const {
  Imatrix m;
  for (const auto& [name, a] : acc_) {
    ImatrixEntry e;
    e.n_mat = static_cast<int64_t>(a.count.size());
    e.n_per_row = static_cast<int64_t>(a.sum2.size()) / e.n_mat;
    e.sum2.assign(a.sum2.begin(), a.sum2.end());
    e.counts.assign(a.count.begin(), a.count.end());
    m.set(name, std::move(e));
  }
  return m;
}

}  // namespace triad::quant
