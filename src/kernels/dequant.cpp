// dequantize_row: run-time dispatch between the SIMD dequantization variants and the scalar
// reference. Every variant gives the same bits as dequantize_row_ref (see dequant_isa.h for the
// one NaN-payload caveat), so callers may mix them freely.
// Thread-safety: pure; concurrent calls on distinct dst are safe.
#include "base/cpu_features.h"
#include "kernels/dequant_isa.h"
#include "kernels/quant.h"

namespace triad::kernels {

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  detail::check_dequant_args(t, src, dst, n);
  if (n == 0) return;
  // The AVX-512 machines also run the AVX2 code: dequantization is bound by memory bandwidth,
  // and wider vectors do not move more bytes.
  if (best_isa() >= IsaLevel::kAvx2 && detail::dequantize_row_avx2(t, src, dst, n)) return;
  dequantize_row_ref(t, src, dst, n);
}

}  // namespace triad::kernels
