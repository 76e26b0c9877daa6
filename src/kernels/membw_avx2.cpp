// AVX2 read loop of the bandwidth probe (membw_isa.h): 256 bytes per iteration as eight 32-byte
// loads summed as 64-bit integers into four independent accumulators.
// Thread-safety: pure.
#include <immintrin.h>

#include "kernels/membw_isa.h"

namespace triad::kernels::detail {

uint64_t read_sum_avx2(const void* p, size_t bytes) {
  const auto* v = static_cast<const __m256i*>(p);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < bytes / 32; i += 8) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 3));
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i + 4));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 5));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 6));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 7));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace triad::kernels::detail
