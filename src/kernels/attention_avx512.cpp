// The AVX-512 flash-attention work unit: attention_generic.h instantiated with VecAvx512
// (16 lanes; head sizes that are not a multiple of 16 use masked tails). Compiled with the
// AVX-512 flags; reached only through ops_for(kAvx512).attn_unit.
// Thread-safety: see attention_generic.h (a unit touches only its own buffers).
#include "kernels/attention_generic.h"
#include "kernels/ops_vec_avx512.h"

namespace triad::kernels {

void attn_unit_avx512(const AttnUnit& u) { g_attn_unit<VecAvx512>(u); }

}  // namespace triad::kernels
