// The AVX2 + FMA level of the element-wise ops: ops_generic.h instantiated with VecAvx2
// (8 lanes). Compiled with -mavx2 -mfma -mf16c; reached only through ops_for(kAvx2).
// Thread-safety: the table is immutable; the ops are pure.
#include "kernels/ops_generic.h"
#include "kernels/ops_vec_avx2.h"

namespace triad::kernels {

const OpsTable& ops_table_avx2() {
  static constexpr OpsTable table = make_ops_table<VecAvx2>(IsaLevel::kAvx2);
  return table;
}

}  // namespace triad::kernels
