// Read-only file mappings (mapped_file.h).
#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace triad {

MappedFile::MappedFile(const std::string& path, const char* what, const std::string& shown) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(what, ": cannot open ", shown, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(what, ": cannot stat ", shown, ": ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(what, ": ", shown, " is not a regular file");
  }
  if (st.st_size <= 0) {
    ::close(fd);
    fail(what, ": ", shown, " is empty");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  void* p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (p == MAP_FAILED) fail(what, ": cannot map ", shown, ": ", std::strerror(err));
  (void)::madvise(p, static_cast<size_t>(size_), MADV_HUGEPAGE);  // a hint: failure changes nothing
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() { ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_)); }

}  // namespace triad
