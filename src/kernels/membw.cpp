// Memory read-bandwidth probe (see membw.h) and its portable scalar read loop.
// Thread-safety: see membw.h.
#include "kernels/membw.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/timer.h"
#include "kernels/membw_isa.h"

namespace triad::kernels {
namespace detail {

uint64_t read_sum_scalar(const void* p, size_t bytes) {
  const auto* w = static_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i < bytes / 8; i += 4) {
    a += w[i];
    b += w[i + 1];
    c += w[i + 2];
    d += w[i + 3];
  }
  return a + b + c + d;
}

}  // namespace detail

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kMinBytesPerThread = size_t{64} << 10;

// Where the sums go, so the reads have an observable effect.
std::atomic<uint64_t> g_sink{0};

struct alignas(64) PaddedSum {
  uint64_t value = 0;
};

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int passes) {
  const int nth = pool.size();
  TRIAD_CHECK(passes >= 1, "bandwidth probe: passes must be >= 1, got ", passes);
  TRIAD_CHECK(bytes / static_cast<size_t>(nth) >= kMinBytesPerThread, "bandwidth probe: ", bytes,
              " bytes is too small for ", nth, " threads (need >= ", kMinBytesPerThread,
              " per thread)");
  const size_t slice = bytes / static_cast<size_t>(nth) / kPage * kPage;
  const size_t total = slice * static_cast<size_t>(nth);

  // Allocated without initialisation: each thread first touches the pages it will read.
  std::unique_ptr<uint8_t, FreeDeleter> buf(
      static_cast<uint8_t*>(std::aligned_alloc(kPage, total)));
  if (!buf) throw std::bad_alloc();
  uint8_t* base = buf.get();
  pool.run([&](int tid, int) {
    std::memset(base + slice * static_cast<size_t>(tid), 0x5a + tid, slice);
  });

  uint64_t (*read)(const void*, size_t) = detail::read_sum_scalar;
  if (best_isa() >= IsaLevel::kAvx512) {
    read = detail::read_sum_avx512;
  } else if (best_isa() >= IsaLevel::kAvx2) {
    read = detail::read_sum_avx2;
  }

  std::vector<PaddedSum> sums(static_cast<size_t>(nth));
  double best_gbs = 0.0;
  for (int pass = 0; pass <= passes; ++pass) {  // pass 0 is a warm-up
    Timer timer;
    pool.run([&](int tid, int) {
      sums[static_cast<size_t>(tid)].value = read(base + slice * static_cast<size_t>(tid), slice);
    });
    const double seconds = timer.seconds();
    uint64_t total_sum = 0;
    for (const PaddedSum& s : sums) total_sum += s.value;
    g_sink.fetch_add(total_sum, std::memory_order_relaxed);
    if (pass > 0 && seconds > 0.0)
      best_gbs = std::max(best_gbs, static_cast<double>(total) / seconds / 1e9);
  }
  return best_gbs;
}

}  // namespace triad::kernels
