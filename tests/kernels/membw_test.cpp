// Sanity tests of the memory-bandwidth probe (kernels/membw.h): the per-ISA read loops sum the
// data correctly, the probe returns a finite positive figure, and bad arguments throw. No timing
// assertion (the figure depends on the machine and its load); the measured value is printed.
#include "kernels/membw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/aligned_buffer.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/membw_isa.h"

namespace triad::kernels {
namespace {

TEST(MemBw, ReadLoopsSumTheData) {
  constexpr size_t kBytes = 64 * 1024 + 256;
  AlignedBuffer<uint64_t> buf(kBytes / 8);
  uint64_t want = 0;
  for (size_t i = 0; i < kBytes / 8; ++i) {
    buf[i] = i * 0x9E3779B97F4A7C15ull;
    want += buf[i];
  }
  EXPECT_EQ(detail::read_sum_scalar(buf.data(), kBytes), want);
  if (cpu_supports(IsaLevel::kAvx2)) {
    EXPECT_EQ(detail::read_sum_avx2(buf.data(), kBytes), want);
  }
  if (cpu_supports(IsaLevel::kAvx512)) {
    EXPECT_EQ(detail::read_sum_avx512(buf.data(), kBytes), want);
  }
}

TEST(MemBw, ReturnsAFinitePositiveFigure) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double gbs = measure_read_bandwidth_gbs(pool, size_t{48} << 20, 2);
    EXPECT_TRUE(std::isfinite(gbs)) << gbs;
    EXPECT_GT(gbs, 0.1) << threads << " threads";
    std::printf("read bandwidth, %d thread(s), 48 MiB (%s): %.1f GB/s\n", threads,
                isa_name(best_isa()), gbs);
  }
}

TEST(MemBw, RejectsBadArguments) {
  ThreadPool pool(2);
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, 1000, 1), Error);
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, size_t{64} << 10, 1), Error);  // < 64 KiB/thread
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, size_t{8} << 20, 0), Error);
}

}  // namespace
}  // namespace triad::kernels
