// Test helper: RawImage, a byte-by-byte builder of GGUF images (valid or malformed) for the
// gguf tests. Values are appended little-endian, as the format stores them.
// Thread-safety: a RawImage is a plain value; use each from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace triad::gguf {

struct RawImage {
  std::vector<uint8_t> b;
  RawImage& u8(uint8_t v) { return raw(&v, 1); }
  RawImage& u32(uint32_t v) { return raw(&v, 4); }
  RawImage& u64(uint64_t v) { return raw(&v, 8); }
  template <typename T>  // any trivially copyable scalar (int16_t, double, ...), as stored
  RawImage& pod(T v) {
    return raw(&v, sizeof(T));
  }
  // Key, value type 9 (array), element type and count; the elements follow.
  RawImage& array_kv(std::string_view key, uint32_t elem_type, uint64_t count) {
    return str(key).u32(9).u32(elem_type).u64(count);
  }
  RawImage& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  RawImage& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  RawImage& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  RawImage& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  RawImage& tensor(std::string_view name, std::initializer_list<uint64_t> dims, uint32_t type,
                   uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  RawImage& pad(size_t alignment = 32) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
  RawImage& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

}  // namespace triad::gguf
