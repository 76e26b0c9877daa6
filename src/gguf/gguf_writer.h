// In-memory GGUF v3 writer: metadata and tensors are collected, then serialized in one pass.
//
// Properties:
// - Produces files that GgufFile (and llama.cpp / gguf-py) read: header, metadata in insertion
//   order, tensor infos in insertion order, padding to the alignment, then each tensor's bytes
//   at an aligned offset, each followed by padding up to the alignment.
// - Validates what it is given (duplicate keys or tensor names, array element types, nesting
//   depth, dims, byte sizes) and throws triad::Error, so it cannot write a file the reader would
//   reject. Tests that need malformed images patch the serialized bytes or build them by hand.
// - The alignment is 32 unless set_alignment() (or adding "general.alignment") changes it.
// - add_tensor() copies the bytes; add_tensor_ref() borrows them (the caller keeps them alive
//   until serialize()/write_file() return), so large tensors can be streamed from a mapping;
//   add_tensor_producer() defers them to a callback that write_file() calls, in tensor order,
//   into one reused buffer (peak memory: the largest tensor), e.g. to quantize while writing.
// - write_file() writes a temporary file beside the target and renames it into place only when
//   everything was written: on any error (a producer throwing included) no file is left.
// Thread-safety: none; use one writer from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "tensor/dtype.h"

namespace triad::gguf {

class GgufWriter {
 public:
  GgufWriter() = default;

  // Sets general.alignment (a nonzero power of two); adds the key if it is not there yet.
  void set_alignment(uint32_t alignment);
  uint64_t alignment() const { return alignment_; }

  void add_string(std::string key, std::string_view value);
  void add_u8(std::string key, uint8_t value);
  void add_u32(std::string key, uint32_t value);
  void add_i32(std::string key, int32_t value);
  void add_u64(std::string key, uint64_t value);
  void add_i64(std::string key, int64_t value);
  void add_f32(std::string key, float value);
  void add_f64(std::string key, double value);
  void add_bool(std::string key, bool value);
  void add_string_array(std::string key, const std::vector<std::string>& values);
  void add_f32_array(std::string key, const std::vector<float>& values);
  void add_i32_array(std::string key, const std::vector<int32_t>& values);
  void add_u8_array(std::string key, const std::vector<uint8_t>& values);
  // Any value, including nested arrays (e.g. copied from a GgufFile's metadata). Arrays are
  // built with Value::make_*array / append (gguf_value.h), nested at most kMaxArrayDepth deep;
  // one whose storage no longer matches its elem_type is refused.
  void add_value(std::string key, Value value);

  // dims are GGML-ordered (dims[0] innermost), 1..kMaxDims of them, each >= 1; dims[0] must be
  // a multiple of the type's block size and `size` must equal the tensor's byte size.
  void add_tensor(std::string name, DType type, const std::vector<int64_t>& dims, const void* data,
                  size_t size);
  void add_tensor(std::string name, DType type, const std::vector<int64_t>& dims,
                  const std::vector<uint8_t>& bytes) {
    add_tensor(std::move(name), type, dims, bytes.data(), bytes.size());
  }
  // Like add_tensor, but does not copy: `data` must stay valid until the file is written.
  void add_tensor_ref(std::string name, DType type, const std::vector<int64_t>& dims, const void* data,
                      size_t size);

  // Like add_tensor, but the bytes come from produce(dst) at write time (dst holds exactly the
  // tensor's byte size). A producer may throw; write_file then removes its temporary file.
  using Producer = std::function<void(uint8_t* dst)>;
  void add_tensor_producer(std::string name, DType type, const std::vector<int64_t>& dims,
                           Producer produce);

  size_t metadata_count() const { return kv_.size(); }
  size_t tensor_count() const { return tensors_.size(); }

  // The complete file image.
  std::vector<uint8_t> serialize() const;
  // Writes the file to `path` (through a temporary file renamed into place); throws on I/O error.
  void write_file(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> owned;      // empty when borrowed
    const uint8_t* data = nullptr;   // owned.data() or the borrowed pointer
    Producer produce;                // set for add_tensor_producer tensors (data is null)
    uint64_t size = 0;
  };
  void add_tensor_impl(std::string name, DType type, const std::vector<int64_t>& dims,
                       const void* data, size_t size, bool copy, Producer produce = {});
  // A tensor's bytes: its data, or its producer's output in `scratch`.
  const uint8_t* tensor_bytes(const Tensor& t, std::vector<uint8_t>& scratch) const;
  // Header, metadata and tensor infos, padded to the alignment (everything before the data).
  std::vector<uint8_t> serialize_head() const;

  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace triad::gguf
