// Read-only memory mapping of a whole file, for the model-file readers (GGUF, safetensors).
// The file must be a non-empty regular file (a FIFO or device is refused without blocking: it is
// opened with O_NONBLOCK). Huge pages are requested for the mapping (MADV_HUGEPAGE): decode
// streams every weight once per token, and pages faulted in through this mapping then come as
// 2 MiB page-cache folios where the file system allows (BENCHMARKS.md, 2026-12-05); pages already
// cached keep their size. Failures throw triad::Error "<what>: <shown> ...".
// Thread-safety: a MappedFile is immutable; share it freely.
#pragma once

#include <cstdint>
#include <string>

namespace triad {

class MappedFile {
 public:
  // shown: how messages name the file (the caller's quoting of `path`).
  MappedFile(const std::string& path, const char* what, const std::string& shown);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace triad
