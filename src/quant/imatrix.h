// Importance matrices in llama.cpp's imatrix GGUF format, so imatrix files work in both tools:
//   general.type = "imatrix"; imatrix.datasets (string array), imatrix.chunk_count,
//   imatrix.chunk_size; for each weight matrix NAME two F32 tensors:
//     NAME.in_sum2  ne = {n_per_row, n_mat}  sum over calibration tokens of x_j^2 per input
//                                            channel j (per expert e for stacked experts)
//     NAME.counts   ne = {1, n_mat}          how many tokens were summed, per expert
// (with n_mat = 1 both are written 1-D, as llama-imatrix writes them; either shape is read).
// The importance of channel j of expert e is in_sum2[e][j] / counts[e] (mean squared
// activation). An expert that saw no tokens gets uniform importance.
//
// Loading checks every entry against the file (both tensors present, F32, matching n_mat,
// finite non-negative sums and counts) and throws triad::Error naming the problem.
// Thread-safety: immutable after load; concurrent reads are safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace triad::gguf {
class GgufFile;
}

namespace triad::quant {

struct ImatrixEntry {
  int64_t n_per_row = 0;
  int64_t n_mat = 1;
  std::vector<float> sum2;    // n_mat * n_per_row
  std::vector<float> counts;  // n_mat
};

class Imatrix {
 public:
  static Imatrix load(const std::string& path);
  static Imatrix from_gguf(const gguf::GgufFile& f);

  // Importance weights of matrix `name` ("blk.0.attn_q.weight"), expert e: n_per_row values;
  // empty when the file has no entry for it.
  std::vector<float> importance(std::string_view name, int64_t expert = 0) const;
  const ImatrixEntry* find(std::string_view name) const;
  size_t size() const { return entries_.size(); }
  const std::map<std::string, ImatrixEntry, std::less<>>& entries() const { return entries_; }

  std::vector<std::string> datasets;
  int64_t chunk_count = 0;
  int64_t chunk_size = 0;

  // Adds or replaces an entry (used by `triad imatrix` and tests).
  void set(std::string name, ImatrixEntry e);
  // Writes the GGUF file (through a temporary file renamed into place).
  void save(const std::string& path) const;

 private:
  std::map<std::string, ImatrixEntry, std::less<>> entries_;
};

}  // namespace triad::quant
