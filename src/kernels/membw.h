// Memory read-bandwidth probe: the roofline for token generation, where every weight byte is
// streamed from DRAM once per token (tokens/s <= bandwidth / model bytes).
//
// Properties: allocates `bytes` (rounded down to a whole number of 4 KiB pages per thread) for
// the duration of the call, touches it from the threads that will read it, then times several
// passes in which every pool thread sums its own disjoint, contiguous slice with the widest
// loads the CPU has (AVX-512, AVX2 or scalar per best_isa()); returns the best pass. Use a
// buffer well above the last-level cache (the default is) or the figure is cache bandwidth.
// Thread-safety: runs one ThreadPool::run job (every thread at once) on the pool; other jobs on
// the pool wait for it; otherwise stateless.
#pragma once

#include <cstddef>

#include "base/thread_pool.h"

namespace triad::kernels {

inline constexpr size_t kDefaultBandwidthProbeBytes = size_t{512} << 20;  // 512 MiB

// Sustained read bandwidth in GB/s (1e9 bytes per second) with all threads of `pool` reading,
// the best of `passes` timed passes (after one untimed warm-up pass).
// PRECONDITIONS (checked, triad::Error): bytes >= 64 KiB * pool.size(), passes >= 1; throws
// std::bad_alloc when the buffer cannot be allocated.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = kDefaultBandwidthProbeBytes,
                                  int passes = 5);

}  // namespace triad::kernels
