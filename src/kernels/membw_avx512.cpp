// AVX-512 read loop of the bandwidth probe (membw_isa.h): 256 bytes per iteration as four
// 64-byte loads summed as 64-bit integers into four independent accumulators.
// Thread-safety: pure.
#include <immintrin.h>

#include "kernels/membw_isa.h"

namespace triad::kernels::detail {

uint64_t read_sum_avx512(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m512i*>(p);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < bytes / 64; i += 4) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(v + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(v + i + 1));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(v + i + 2));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(v + i + 3));
  }
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  // Not _mm512_reduce_add_epi64: GCC 12 flags its internal _mm256_undefined_si256 as
  // uninitialised (-Werror=uninitialized).
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, s);
  uint64_t sum = 0;
  for (uint64_t lane : lanes) sum += lane;
  return sum;
}

}  // namespace triad::kernels::detail
