// Collects an importance matrix while a model runs: for every weight matrix of the transformer
// blocks (and output.weight on request), the sum over tokens of each input channel's squared
// activation and the number of tokens, as llama.cpp's llama-imatrix does; for the experts of a
// mixture-of-experts layer (3-D tensors) per expert, over the tokens routed to it.
//
// Attach it to a ForwardScratch (scratch.observer = &collector) and run forward passes over
// calibration text; result() gives the Imatrix to save. Sums are kept in double.
// Thread-safety: observe() is called from the forward's calling thread; one collector per
// forward at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "quant/imatrix.h"

namespace triad::quant {

class ImatrixCollector : public MatmulObserver {
 public:
  // Names the model's weight matrices by their data pointers in `model`'s file.
  ImatrixCollector(const Model& model, bool process_output = false);

  void observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tokens,
               int64_t x_stride) override;

  // The statistics so far as an Imatrix (in_sum2 and counts per matrix).
  Imatrix result() const;
  size_t matrices() const { return acc_.size(); }

 private:
  struct Acc {
    std::vector<double> sum2;    // n_mat x cols
    std::vector<int64_t> count;  // n_mat
  };
  struct Slot {
    std::string name;
    int64_t expert = 0, n_mat = 1;
  };
  std::unordered_map<const void*, Slot> names_;  // by matrix (expert) data pointer
  std::map<std::string, Acc> acc_;
};

}  // namespace triad::quant
