// The AVX2 + FMA flash-attention work unit: attention_generic.h instantiated with VecAvx2.
// Compiled with -mavx2 -mfma -mf16c; reached only through ops_for(kAvx2).attn_unit.
// Thread-safety: see attention_generic.h (a unit touches only its own buffers).
#include "kernels/attention_generic.h"
#include "kernels/ops_vec_avx2.h"

namespace triad::kernels {

void attn_unit_avx2(const AttnUnit& u) { g_attn_unit<VecAvx2>(u); }

}  // namespace triad::kernels
