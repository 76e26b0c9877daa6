// The AVX-512 level of the element-wise ops: ops_generic.h instantiated with VecAvx512
// (16 lanes, masked tails). Compiled with the AVX-512 flags; reached only through
// ops_for(kAvx512).
// Thread-safety: the table is immutable; the ops are pure.
#include "kernels/ops_generic.h"
#include "kernels/ops_vec_avx512.h"

namespace triad::kernels {

const OpsTable& ops_table_avx512() {
  static constexpr OpsTable table =
      make_ops_table<VecAvx512>(IsaLevel::kAvx512);
  return table;
}

}  // namespace triad::kernels
