// Safetensors reader (Hugging Face's checkpoint format), for converting models from their
// original weights (issue 15). A file is
//   [8 bytes: N, little-endian u64][N bytes: a JSON object][the data section]
// where the JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets into the data section) and an optional "__metadata__" to a string -> string map.
// Sharded checkpoints list their tensors' files in model.safetensors.index.json
// ({"weight_map": {name: file}}).
//
// Properties (the bytes are untrusted):
// - The file is memory-mapped read-only; tensor data is never copied (Tensor::data points into
//   the mapping, which lives as long as the SafetensorsFile).
// - Before any use, every field is checked against the file, as the format's reference
//   implementation does: the header length against the file size and a 100 MB bound, the
//   header as a JSON object of bounded nesting, each dtype known, each shape non-negative with an
//   overflow-safe element count, each tensor's byte range exactly its shape times its element
//   size, inside the data section, and the ranges together covering the data section with no
//   overlap and no hole. Anything else throws triad::Error naming the file, the tensor and the
//   field; nothing crashes, hangs, or allocates more than the header's size implies.
// - A shard index's file names must be plain names in the checkpoint's folder (no '/' or "..");
//   every tensor it lists must be in the shard it names, and no tensor may be in two shards.
// Thread-safety: immutable after open(); concurrent reads are safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace triad {
class MappedFile;
}

namespace triad::safetensors {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool, kF8E4M3, kF8E5M2 };

const char* dtype_name(DType t);  // as the format spells it: "F32", "BF16", "F8_E4M3" ...
size_t dtype_size(DType t);       // bytes per element

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's bound
constexpr int kMaxDims = 8;

struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first (row-major, as PyTorch)
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Throws triad::Error on any malformed content.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (tests, the fuzz target). The bytes are copied.
  static std::unique_ptr<SafetensorsFile> from_bytes(const uint8_t* data, size_t size);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::vector<Tensor>& tensors() const { return tensors_; }  // in data-offset order
  const Tensor* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  void parse();
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::unique_ptr<MappedFile> map_;  // base_ is its mapping (else owned_ holds the bytes)
  std::vector<uint8_t> owned_;
  std::string path_ = "<memory>";
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t, std::less<>> by_name_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json: tensor name -> shard file name. Throws triad::Error when the text
// is not such an index (or a file name is not a plain name).
std::map<std::string, std::string> parse_shard_index(std::string_view json_text);

// A checkpoint folder: model.safetensors, or the shards its index names (each opened once).
class Checkpoint {
 public:
  static std::unique_ptr<Checkpoint> open_dir(const std::string& dir);
  const Tensor* find(std::string_view name) const;
  std::vector<const Tensor*> tensors() const;  // every tensor, shard by shard
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const Tensor*, std::less<>> by_name_;
};

// The deepest bracket nesting of a JSON text, outside strings: checked before parsing an
// untrusted JSON file, so the recursive parser's depth stays bounded.
int json_nesting(std::string_view text);

// The values of a floating-point tensor as f32 (out: n_elements floats): F32, F16, BF16, F64,
// and FP8 (E4M3 / E5M2). FP8 weights may come with block scales, as DeepSeek-V3/R1 and the
// Qwen3 FP8 checkpoints ship them: `scale_inv` (F32 or BF16) holds one factor per block of
// block_rows x block_cols elements of the 2-D weight, shape [ceil(rows / block_rows),
// ceil(cols / block_cols)], and each value is multiplied by its block's factor. Throws
// triad::Error for another dtype or mismatched scale shapes.
void to_f32(const Tensor& t, float* out, const Tensor* scale_inv = nullptr, int64_t block_rows = 128,
            int64_t block_cols = 128);

}  // namespace triad::safetensors
