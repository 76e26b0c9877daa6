// A heap buffer aligned for 64-byte (AVX-512 / cache line) access. Move-only, owns its bytes.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace triad {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { resize(count); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Reallocates to hold `count` elements (contents are not preserved, new memory is zeroed).
  void resize(size_t count) {
    if (size_t bytes = reallocate(count)) std::memset(static_cast<void*>(data_), 0, bytes);
  }
  // The same without zeroing, for storage the caller overwrites whole: a large block's pages
  // then become resident only as they are written.
  void resize_for_overwrite(size_t count) { reallocate(count); }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  size_t reallocate(size_t count) {  // the bytes allocated
    std::free(data_);
    data_ = nullptr;
    size_ = count;
    if (count == 0) return 0;
    const size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes));
    if (!data_) throw std::bad_alloc();
    return bytes;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace triad
