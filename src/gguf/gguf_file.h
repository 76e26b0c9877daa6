// GGUF reader (format versions 2 and 3).
//
// Properties:
// - The file is memory-mapped read-only; tensor data is never copied (TensorInfo::data points
//   into the mapping, which lives as long as the GgufFile).
// - Every count, length, offset, dimension and size product read from the file is checked with
//   overflow-safe arithmetic against the bytes left before it is used. A malformed file throws
//   triad::Error with a message naming the field ("tensor 'blk.0.attn_q.weight': offset past end
//   of file"), never crashes, hangs or allocates more than the file could describe.
// - Memory is proportional to the file: numeric arrays are kept packed (1 byte of memory per
//   byte of file), strings as std::string, and only nested arrays as full Values (at most
//   kMaxNestedArrays per file). The parsed metadata and tensor table take at most ~10x the
//   bytes of the file's header section (the tensor data stays in the mapping).
// - Metadata arrays may nest (arrays of arrays), up to kMaxArrayDepth levels.
// Thread-safety: immutable after open(); concurrent reads are safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace triad {
class MappedFile;
}

namespace triad::gguf {

constexpr int kMaxDims = 4;  // GGML tensors have at most 4 dimensions
// Most arrays-of-arrays elements (nested Values, ~104 bytes each) one file may hold; each
// also needs >= 12 bytes of file, so a file of S bytes holds at most min(S / 12, this).
constexpr uint64_t kMaxNestedArrays = 1u << 16;

struct TensorInfo {
  std::string name;
  int n_dims = 0;
  // ne[0] is the innermost (contiguous) dimension, as GGML orders them; unused dims are 1.
  int64_t ne[kMaxDims] = {1, 1, 1, 1};
  DType type = DType::kF32;
  uint64_t offset = 0;   // relative to the start of the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws triad::Error on any malformed content.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzz target and tests). The bytes are copied.
  static std::unique_ptr<GgufFile> from_bytes(const uint8_t* data, size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return path_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: throw triad::Error naming the key when it is missing or of the wrong type.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  // Defaults when the key is absent (still throw when present with the wrong type).
  std::string get_string(std::string_view key, const std::string& def) const;
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_float(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  // Arrays of scalars; empty vector when the key is absent; throw on a type mismatch.
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // Tells the kernel this process is done reading tensor t for now: the whole pages of its data
  // leave this process's resident set (they stay in the page cache, and a later read faults
  // them back in). Lets a pass over every tensor (triad quantize) keep its resident memory near
  // one tensor instead of the whole file. No effect on in-memory images. Thread-safe.
  void release_pages(const TensorInfo& t) const;
  // The same for the whole pages inside [p, p + n) that belong to the mapping (others are left).
  void release_range(const void* p, uint64_t n) const;

  // Reads the tensor data of a mapped file into memory ahead of use (read-ahead, then one touch
  // per page), in chunks of 64 MiB, calling progress(bytes done, bytes total) after each: a model
  // is then warm when it starts serving, and loading a big file from a cold disk can show how far
  // it is. No effect on in-memory images. Thread-safe.
  void prefetch(const std::function<void(uint64_t done, uint64_t total)>& progress) const;

 private:
  GgufFile() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::unique_ptr<MappedFile> map_;  // base_ is its mapping (else owned_ holds the bytes)
  std::vector<uint8_t> owned_;  // from_bytes copies
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<size_t> kv_sorted_;      // indices into kv_, ordered by key (binary search)
  std::vector<TensorInfo> tensors_;
  std::vector<size_t> tensor_sorted_;  // indices into tensors_, ordered by name
};

}  // namespace triad::gguf
