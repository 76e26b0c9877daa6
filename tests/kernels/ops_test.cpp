// Table-driven test of the element-wise ops (ops.h): every case of
// kCases runs at every ISA level this CPU supports (up to best_isa(), so TRIAD_ISA caps it) on
// random inputs, against the scalar references in kernels/ref (double precision). Each case
// states its tolerance: pass iff |got - ref| <= atol + rtol * |ref| for every element. The
// public (dispatching) functions are also checked to match their table entry bit for bit.
//
// Separately, the reference attention (ref::attention, the ground truth of the paged attention
// kernels: paged_attention_test) is checked against a hand-made case whose scores are written
// out by hand, and argument checks are exercised.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/paged_attention.h"
#include "kernels/ops.h"
#include "kernels/ops_impl.h"
#include "kernels/ref/ops_ref.h"

namespace triad::kernels {
namespace {

enum class Op { kRmsnorm, kLayernorm, kSoftmax, kSilu, kGelu, kGeluErf, kAdd, kScale, kRope };

struct Case {
  const char* name;
  Op op;
  int64_t n = 0;             // elements (element-wise ops); sequence length (attention)
  bool second = true;        // w / up / b present (norms, glu ops)
  float lo = -2.f, hi = 2.f;  // input range
  // rope
  RopeLayout layout = RopeLayout::kNormal;
  int n_heads = 1, head_dim = 0, rot_dim = 0;
  float freq_scale = 1.f, freq_base = 10000.f;
  int32_t pos = 0;           // rope position
  double rtol = 1e-5, atol = 1e-6;
  float ext_factor = 0.f, corr_lo = 0.f, corr_hi = 0.f, mscale = 1.f;  // YaRN
};

const Case kCases[] = {
    {.name = "rmsnorm_1", .op = Op::kRmsnorm, .n = 1},
    {.name = "rmsnorm_100", .op = Op::kRmsnorm, .n = 100},
    {.name = "rmsnorm_4099", .op = Op::kRmsnorm, .n = 4099},
    {.name = "rmsnorm_noweight_37", .op = Op::kRmsnorm, .n = 37, .second = false},
    // Outputs are O(1) and the f32 mean of inputs offset by 3 carries ~1e-6 absolute error.
    {.name = "layernorm_7", .op = Op::kLayernorm, .n = 7, .lo = 2.f, .hi = 4.f, .atol = 1e-5},
    {.name = "layernorm_1000", .op = Op::kLayernorm, .n = 1000, .lo = 2.f, .hi = 4.f,
     .atol = 1e-5},
    {.name = "layernorm_noweight_65", .op = Op::kLayernorm, .n = 65, .second = false,
     .atol = 1e-5},
    {.name = "softmax_1", .op = Op::kSoftmax, .n = 1, .rtol = 1e-5, .atol = 1e-9},
    {.name = "softmax_33", .op = Op::kSoftmax, .n = 33, .lo = -10, .hi = 10, .atol = 1e-9},
    {.name = "softmax_1000", .op = Op::kSoftmax, .n = 1000, .lo = -10, .hi = 10, .atol = 1e-9},
    {.name = "softmax_large_logits", .op = Op::kSoftmax, .n = 70, .lo = 1000, .hi = 1010,
     .atol = 1e-9},
    {.name = "silu_19", .op = Op::kSilu, .n = 19, .lo = -20, .hi = 20},
    {.name = "silu_1000", .op = Op::kSilu, .n = 1000, .lo = -20, .hi = 20},
    {.name = "silu_noup_40", .op = Op::kSilu, .n = 40, .second = false, .lo = -90, .hi = 90},
    {.name = "gelu_23", .op = Op::kGelu, .n = 23, .lo = -8, .hi = 8},
    {.name = "gelu_1000", .op = Op::kGelu, .n = 1000, .lo = -8, .hi = 8},
    {.name = "gelu_noup_33", .op = Op::kGelu, .n = 33, .second = false, .lo = -3, .hi = 3},
    {.name = "gelu_erf_23", .op = Op::kGeluErf, .n = 23, .lo = -8, .hi = 8},
    {.name = "gelu_erf_1000", .op = Op::kGeluErf, .n = 1000, .lo = -8, .hi = 8},
    {.name = "gelu_erf_noup_33", .op = Op::kGeluErf, .n = 33, .second = false, .lo = -3, .hi = 3},
    // The negative tail keeps its relative accuracy (no 1 + erf cancellation).
    {.name = "gelu_erf_tail_relative", .op = Op::kGeluErf, .n = 257, .second = false, .lo = -6, .hi = -1,
     .rtol = 5e-6, .atol = 0},
    {.name = "add_13", .op = Op::kAdd, .n = 13, .rtol = 0, .atol = 0},
    {.name = "add_1000", .op = Op::kAdd, .n = 1000, .rtol = 0, .atol = 0},
    {.name = "scale_1001", .op = Op::kScale, .n = 1001, .rtol = 0, .atol = 0},
    {.name = "rope_normal_hd64_rot64", .op = Op::kRope, .n_heads = 4, .head_dim = 64,
     .rot_dim = 64, .pos = 17},
    {.name = "rope_normal_hd128_rot32_scaled", .op = Op::kRope, .layout = RopeLayout::kNormal,
     .n_heads = 3, .head_dim = 128, .rot_dim = 32, .freq_scale = 0.25f, .pos = 5000},
    {.name = "rope_normal_hd20_rot12", .op = Op::kRope, .n_heads = 2, .head_dim = 20,
     .rot_dim = 12, .freq_base = 500000.f, .pos = 123},
    {.name = "rope_neox_hd64_rot64", .op = Op::kRope, .layout = RopeLayout::kNeox, .n_heads = 4,
     .head_dim = 64, .rot_dim = 64, .pos = 9},
    {.name = "rope_neox_hd256_rot64_scaled", .op = Op::kRope, .layout = RopeLayout::kNeox,
     .n_heads = 2, .head_dim = 256, .rot_dim = 64, .freq_scale = 0.125f, .freq_base = 1e6f,
     .pos = 31999},
    {.name = "rope_neox_hd8_rot6", .op = Op::kRope, .layout = RopeLayout::kNeox, .n_heads = 8,
     .head_dim = 8, .rot_dim = 6, .freq_scale = 2.f, .pos = 77},
    {.name = "rope_neox_hd48_rot40_pos0", .op = Op::kRope, .layout = RopeLayout::kNeox,
     .n_heads = 2, .head_dim = 48, .rot_dim = 40, .pos = 0},
    // YaRN: DeepSeek's decoupled 64 rotary dims (normal pairs), and a neox case with cos/sin
    // scaled; corr dims as yarn_corr_dims gives for (rot 64, orig 4096, base 10000 / 1e6).
    {.name = "rope_yarn_normal_hd64_rot64", .op = Op::kRope, .n_heads = 4, .head_dim = 64, .rot_dim = 64,
     .freq_scale = 0.025f, .pos = 120000, .ext_factor = 1.f, .corr_lo = 10.f, .corr_hi = 23.f},
    {.name = "rope_yarn_neox_hd128_rot64_mscale", .op = Op::kRope, .layout = RopeLayout::kNeox, .n_heads = 3,
     .head_dim = 128, .rot_dim = 64, .freq_scale = 0.25f, .freq_base = 1e6f, .pos = 30001, .ext_factor = 1.f,
     .corr_lo = 6.f, .corr_hi = 16.f, .mscale = 1.1386f},
    {.name = "rope_yarn_equal_corr_dims", .op = Op::kRope, .n_heads = 2, .head_dim = 16, .rot_dim = 16,
     .freq_scale = 0.5f, .pos = 999, .ext_factor = 1.f, .corr_lo = 3.f, .corr_hi = 3.f},
};

std::vector<IsaLevel> levels_to_test() {
  std::vector<IsaLevel> v;
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512})
    if (static_cast<int>(l) <= static_cast<int>(best_isa()) && isa_supported(l)) v.push_back(l);
  return v;
}

std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Fails with the worst element unless |got - want| <= atol + rtol |want| everywhere.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double excess = err - (atol + rtol * std::fabs(want[i]));
    if (std::isnan(got[i]) != std::isnan(want[i]) || excess > worst_excess) {
      worst_excess = std::isnan(got[i]) != std::isnan(want[i]) ? INFINITY : excess;
      worst = i;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " got " << got[worst]
                               << " want " << want[worst] << " (rtol " << rtol << ", atol "
                               << atol << ")";
}

using Param = std::tuple<Case, IsaLevel>;
class OpsTest : public ::testing::TestWithParam<Param> {};

// Runs one element-wise op through `t` (or through the public function when t is null).
void run_op(const OpsTable* t, const Case& c, std::vector<float>& x, const std::vector<float>& y,
            const std::vector<float>& z, std::vector<float>& out) {
  const float* w = c.second ? y.data() : nullptr;
  const float* b = c.second ? z.data() : nullptr;
  RopeParams rp{c.layout, c.rot_dim, c.freq_base, c.freq_scale, c.ext_factor, c.corr_lo, c.corr_hi, c.mscale};
  switch (c.op) {
    case Op::kRmsnorm: t ? t->rmsnorm(x.data(), w, 1e-5f, out.data(), c.n)
                         : rmsnorm(x.data(), w, 1e-5f, out.data(), c.n); break;
    case Op::kLayernorm: t ? t->layernorm(x.data(), w, b, 1e-5f, out.data(), c.n)
                           : layernorm(x.data(), w, b, 1e-5f, out.data(), c.n); break;
    case Op::kSoftmax: out = x; t ? t->softmax(out.data(), c.n) : softmax(out.data(), c.n); break;
    case Op::kSilu: t ? t->silu_mul(x.data(), w, out.data(), c.n)
                      : silu_mul(x.data(), w, out.data(), c.n); break;
    case Op::kGelu: t ? t->gelu_mul(x.data(), w, out.data(), c.n)
                      : gelu_mul(x.data(), w, out.data(), c.n); break;
    case Op::kGeluErf: t ? t->gelu_erf_mul(x.data(), w, out.data(), c.n)
                         : gelu_erf_mul(x.data(), w, out.data(), c.n); break;
    case Op::kAdd: out = x; t ? t->add_inplace(out.data(), y.data(), c.n)
                              : add_inplace(out.data(), y.data(), c.n); break;
    case Op::kScale: out = x; t ? t->scale_inplace(out.data(), -0.37f, c.n)
                                : scale_inplace(out.data(), -0.37f, c.n); break;
    case Op::kRope: out = x; t ? t->rope(out.data(), c.n_heads, c.head_dim, c.pos, rp)
                               : rope(out.data(), c.n_heads, c.head_dim, c.pos, rp); break;
  }
}

void ref_op(const Case& c, std::vector<float>& x, const std::vector<float>& y,
            const std::vector<float>& z, std::vector<float>& out) {
  const float* w = c.second ? y.data() : nullptr;
  const float* b = c.second ? z.data() : nullptr;
  RopeParams rp{c.layout, c.rot_dim, c.freq_base, c.freq_scale, c.ext_factor, c.corr_lo, c.corr_hi, c.mscale};
  switch (c.op) {
    case Op::kRmsnorm: ref::rmsnorm(x.data(), w, 1e-5f, out.data(), c.n); break;
    case Op::kLayernorm: ref::layernorm(x.data(), w, b, 1e-5f, out.data(), c.n); break;
    case Op::kSoftmax: out = x; ref::softmax(out.data(), c.n); break;
    case Op::kSilu: ref::silu_mul(x.data(), w, out.data(), c.n); break;
    case Op::kGelu: ref::gelu_mul(x.data(), w, out.data(), c.n); break;
    case Op::kGeluErf: ref::gelu_erf_mul(x.data(), w, out.data(), c.n); break;
    case Op::kAdd: out = x; ref::add_inplace(out.data(), y.data(), c.n); break;
    case Op::kScale: out = x; ref::scale_inplace(out.data(), -0.37f, c.n); break;
    case Op::kRope: out = x; ref::rope(out.data(), c.n_heads, c.head_dim, c.pos, rp); break;
  }
}

void check_elementwise(const Case& c, IsaLevel level) {
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(c.name)));
  const size_t n = c.op == Op::kRope ? static_cast<size_t>(c.n_heads) * c.head_dim
                                     : static_cast<size_t>(c.n);
  std::vector<float> x = random_vec(rng, n, c.lo, c.hi);
  std::vector<float> y = random_vec(rng, n, 0.5f, 1.5f);  // weights / up
  std::vector<float> z = random_vec(rng, n, -1.f, 1.f);   // biases
  std::vector<float> want(n), got(n, NAN);
  ref_op(c, x, y, z, want);
  const OpsTable& t = ops_for(level);
  run_op(&t, c, x, y, z, got);
  expect_close(got, want, c.rtol, c.atol, std::string(c.name) + " @ " + isa_name(level));
  if (level == best_isa()) {  // the public function dispatches to this very table
    std::vector<float> pub(n, NAN);
    run_op(nullptr, c, x, y, z, pub);
    EXPECT_EQ(0, std::memcmp(pub.data(), got.data(), n * sizeof(float))) << c.name;
  }
}

TEST_P(OpsTest, MatchesReference) {
  const auto& [c, level] = GetParam();
  check_elementwise(c, level);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const IsaLevel l = std::get<1>(info.param);
  const char* isa = l == IsaLevel::kScalar ? "scalar" : l == IsaLevel::kAvx2 ? "avx2" : "avx512";
  return std::string(std::get<0>(info.param).name) + "_" + isa;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpsTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::ValuesIn(levels_to_test())),
                         param_name);

// The reference attention against scores worked out by hand. 3 query rows (positions 1, 2, 5)
// x 4 heads over 2 kv heads (heads 0,1 -> kv 0; 2,3 -> kv 1), head_dim 2, 3 slots at positions
// 0, 1, 2, scale 0.5, window 2: row 0 sees slots {0,1}, row 1 sees {1,2}, row 2 sees none.
struct HandCase {
  std::vector<float> q = {1, 0, 0, 2, 1, 2, 0, -1,     // row 0: heads 0..3
                          1, 1, -1, 0, 1, 0, 2, 2,     // row 1
                          1, 1, 1, 1, 1, 1, 1, 1};     // row 2
  // slot j: kv head 0 (k or v) then kv head 1.
  std::vector<float> k = {1, 0, 0, 1, /**/ 0, 1, 1, 0, /**/ 1, 1, 2, 0};
  std::vector<float> v = {1, 2, 1, 1, /**/ 3, -1, 2, 2, /**/ 0, 4, -1, 0};
  std::vector<int32_t> q_pos = {1, 2, 5}, kv_pos = {0, 1, 2};
  AttentionParams p{.n_heads = 4, .n_kv_heads = 2, .head_dim = 2, .scale = 0.5f, .window = 2};
};

// Softmax-weighted average of two 2-vectors with the given (scaled) scores.
std::vector<double> avg2(double s0, const double* v0, double s1, const double* v1) {
  const double w0 = std::exp(s0), w1 = std::exp(s1);
  return {(w0 * v0[0] + w1 * v1[0]) / (w0 + w1), (w0 * v0[1] + w1 * v1[1]) / (w0 + w1)};
}

TEST(AttentionReference, HandMadeCase) {
  HandCase h;
  const double v0[] = {1, 2}, v1[] = {3, -1}, v2[] = {0, 4};     // kv head 0
  const double w0[] = {1, 1}, w1[] = {2, 2}, w2[] = {-1, 0};     // kv head 1
  // Raw dots by hand, times 0.5:
  // row 0 h0 q(1,0): k0 1, k1 0 | h1 q(0,2): 0, 2 | h2 q(1,2): k'0(0,1) 2, k'1(1,0) 1 |
  //   h3 q(0,-1): -1, 0.  row 1 h0 q(1,1): k1 1, k2 2 | h1 q(-1,0): 0, -1 |
  //   h2 q(1,0): k'1 1, k'2(2,0) 2 | h3 q(2,2): 2, 4.
  const std::vector<std::vector<double>> expect = {
      avg2(0.5, v0, 0.0, v1), avg2(0.0, v0, 1.0, v1), avg2(1.0, w0, 0.5, w1),
      avg2(-0.5, w0, 0.0, w1), avg2(0.5, v1, 1.0, v2), avg2(0.0, v1, -0.5, v2),
      avg2(0.5, w1, 1.0, w2), avg2(1.0, w1, 2.0, w2), {0, 0}, {0, 0}, {0, 0}, {0, 0}};
  std::vector<float> want;
  for (const auto& e : expect) want.insert(want.end(), e.begin(), e.end());

  std::vector<float> out(24, NAN);
  ref::attention(h.p, h.q.data(), 3, 8, h.q_pos.data(), h.k.data(), h.v.data(), 3, 4,
                 h.kv_pos.data(), out.data(), 8);
  expect_close(out, want, 1e-6, 1e-7, "reference");
  // Softcap 0.4 on row 1, head 3: scores 1, 2 become 0.4 tanh(2.5), 0.4 tanh(5).
  h.p.softcap = 0.4f;
  ref::attention(h.p, h.q.data(), 3, 8, h.q_pos.data(), h.k.data(), h.v.data(), 3, 4,
                 h.kv_pos.data(), out.data(), 8);
  std::vector<double> e = avg2(0.4 * std::tanh(2.5), w1, 0.4 * std::tanh(5.0), w2);
  EXPECT_NEAR(out[14], e[0], 1e-6);
  EXPECT_NEAR(out[15], e[1], 1e-6);
}

TEST(OpsArguments, BadShapesThrow) {
  ThreadPool pool(1);
  std::vector<float> buf(64);
  std::vector<int32_t> pos(4);
  {
    // yarn_corr_dims: rot 16, original context 4096, base 10000, betas 32 / 1 -> [2, 6] (by
    // hand: 16 ln(4096 / 64 pi) / 2 ln 1e4 = 2.62, 16 ln(4096 / 2 pi) / 2 ln 1e4 = 5.63); clamped
    // to [0, rot - 1].
    float lo = 0.f, hi = 0.f;
    yarn_corr_dims(16, 4096, 10000.f, 32.f, 1.f, &lo, &hi);
    EXPECT_EQ(lo, 2.f);
    EXPECT_EQ(hi, 6.f);
    yarn_corr_dims(64, 4096, 10000.f, 32.f, 1.f, &lo, &hi);
    EXPECT_EQ(lo, 10.f);
    EXPECT_EQ(hi, 23.f);
    yarn_corr_dims(16, 8, 10000.f, 32.f, 1.f, &lo, &hi);
    EXPECT_EQ(lo, 0.f);
    yarn_corr_dims(8, 1 << 24, 10.f, 32.f, 1.f, &lo, &hi);
    EXPECT_EQ(hi, 7.f);
  }
  RopeParams rp{RopeLayout::kNeox, 7, 10000.f, 1.f};
  EXPECT_THROW(rope(buf.data(), 1, 8, 0, rp), Error);  // odd rot_dim
  rp.rot_dim = 10;
  EXPECT_THROW(rope(buf.data(), 1, 8, 0, rp), Error);  // rot_dim > head_dim
  rp.rot_dim = 0;
  EXPECT_THROW(rope(buf.data(), 1, 8, 0, rp), Error);
  EXPECT_THROW(rmsnorm(buf.data(), nullptr, 1e-5f, buf.data(), 0), Error);
  EXPECT_THROW(softmax(buf.data(), -1), Error);
}

}  // namespace
}  // namespace triad::kernels

namespace triad::kernels {
namespace {

// gpt-oss's clamped SwiGLU against its definition in double precision, across the clamps.
TEST(SwigluOai, MatchesDefinition) {
  std::vector<float> g, u;
  for (float x = -12.f; x <= 12.f; x += 0.37f) {
    g.push_back(x);
    u.push_back(-x * 0.9f);
  }
  g.push_back(7.f);
  u.push_back(7.f);
  std::vector<float> out(g.size());
  swiglu_oai(g.data(), u.data(), out.data(), static_cast<int64_t>(g.size()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = std::min<double>(g[i], 7.0), y = std::clamp<double>(u[i], -7.0, 7.0);
    const double want = x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
    EXPECT_NEAR(out[i], want, 1e-5 * std::max(1.0, std::fabs(want))) << "gate " << g[i] << " up " << u[i];
  }
}

}  // namespace
}  // namespace triad::kernels
