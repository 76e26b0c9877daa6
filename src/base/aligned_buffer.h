// A heap buffer aligned for 64-byte (AVX-512 / cache line) access. Move-only, owns its bytes.
// Large buffers (kHugeBytes and up: re-laid weights, KV pools) are aligned to 2 MiB and asked for
// transparent huge pages (MADV_HUGEPAGE, before their first touch): with 4 KiB pages, streaming
// re-laid weights through decode was bound by page walks (an IQ4_XS 1.5B decoded 15% slower
// from re-laid copies than from the file's mapping, which gets 2 MiB page-cache folios).
// Thread-safety: none (a plain owning value).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include <stdlib.h>  // posix_memalign

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace triad {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kHugeBytes = size_t{4} << 20, kHugeAlignment = size_t{2} << 20;
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
    const bool huge = bytes >= kHugeBytes;
    void* p = nullptr;
    if (::posix_memalign(&p, huge ? kHugeAlignment : kAlignment, bytes) != 0) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    // Only whole 2 MiB pages: the tail keeps 4 KiB pages, so no huge page is resident past the
    // buffer's end. A hint: failure changes nothing.
    if (huge) (void)::madvise(p, bytes / kHugeAlignment * kHugeAlignment, MADV_HUGEPAGE);
#endif
    return bytes;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace triad
