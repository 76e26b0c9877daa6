// Internal to the bandwidth probe (membw.h): the per-ISA read loops it dispatches to.
//
// Each reads every byte of [p, p + bytes) once, in order, with the widest loads of its ISA and
// returns a sum of the data (so the compiler cannot drop the loads). PRECONDITION: p is 64-byte
// aligned and bytes is a multiple of 256. Pure; safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>

namespace triad::kernels::detail {

uint64_t read_sum_scalar(const void* p, size_t bytes);
uint64_t read_sum_avx2(const void* p, size_t bytes);    // needs best_isa() >= kAvx2
uint64_t read_sum_avx512(const void* p, size_t bytes);  // needs best_isa() >= kAvx512

}  // namespace triad::kernels::detail
