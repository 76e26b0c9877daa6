// The forward pass's shared steps, internal to src/model (model.cpp, encoder.cpp): every weight
// product (seen by an observer first) and bias rows.
// Thread-safety: each runs on the given pool; they write only their outputs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace triad {

// Every weight product of the forward pass goes through here, so an observer (imatrix
// collection) sees each matrix's input exactly once per call.
inline void mm(const ForwardScratch& s, const kernels::WeightMatrix& w, const float* x, int64_t n,
               int64_t x_stride, float* y, int64_t y_stride, ThreadPool& pool) {
  if (s.observer != nullptr) s.observer->observe(w, x, n, x_stride);
  kernels::matmul(w, x, n, x_stride, y, y_stride, pool);
}

// Products of one input in one pool job (kernels::matmul_group): a layer's q / k / v, its gate /
// up. The observer sees each matrix's input, as with mm().
inline void mm_group(const ForwardScratch& s, std::initializer_list<kernels::GroupProduct> products, const float* x,
                     int64_t n, int64_t x_stride, ThreadPool& pool) {
  if (s.observer != nullptr)
    for (const kernels::GroupProduct& p : products) s.observer->observe(p.w, x, n, x_stride);
  kernels::matmul_group(std::span<const kernels::GroupProduct>(products.begin(), products.size()), x, n, x_stride, pool);
}

// y[t] += b for n rows of `width` (stride width); nothing when b is null.
inline void add_rows(float* y, const float* b, int64_t n, int64_t width, ThreadPool& pool) {
  if (b == nullptr) return;
  pool.parallel_for(n, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) kernels::add_inplace(y + t * width, b, width);
  });
}

}  // namespace triad
