// What the operating system reports about memory. Thread-safe (reads /proc on every call).
#pragma once

#include <cstdint>

namespace triad {

// Bytes the OS reports available (Linux MemAvailable: free memory plus reclaimable caches), or
// 0 when unknown.
uint64_t available_memory_bytes();

}  // namespace triad
