// Unit tests for src/sampling: parameter validation, the seeded RNG, each step of the sampler
// pipeline on small hand-made distributions (expected values computed by hand / from the
// formulas right here), reproducibility, a frequency check over 20000 draws, logprobs, and
// the no-allocation-per-token property (counted with a replaced global operator new).
// Single-threaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

// ---- Allocation counter (global replacement; counts every operator new in this binary). ----
// GCC's -Wmismatched-new-delete misreads the inlined malloc/free pair of a replacement.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
static std::atomic<long> g_allocs{0};
void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace triad {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<TokenProb> dist(const SamplingParams& p, const std::vector<float>& logits,
                            const std::vector<int32_t>& history = {}) {
  Sampler s(p, static_cast<int32_t>(logits.size()));
  for (int32_t t : history) s.accept(t);
  std::vector<TokenProb> out;
  s.distribution(logits.data(), out);
  return out;
}

void expect_dist(const std::vector<TokenProb>& got, const std::vector<TokenProb>& want,
                 double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << "entry " << i;
    EXPECT_NEAR(got[i].prob, want[i].prob, tol) << "entry " << i << " (id " << want[i].id << ")";
  }
}

// Probabilities -> logits (natural log).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

SamplingParams seeded(uint64_t seed = 1) {
  SamplingParams p;
  p.seed = seed;
  return p;
}

void expect_error(const SamplingParams& p, const std::string& needle) {
  try {
    p.validate();
    ADD_FAILURE() << "expected triad::Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- validation

TEST(SamplingParams, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate());
  EXPECT_FALSE(p.greedy());
  EXPECT_FALSE(p.penalties_enabled());
  p.temperature = -1.0f;  // negative temperature is greedy, not an error
  EXPECT_NO_THROW(p.validate());
  EXPECT_TRUE(p.greedy());
}

TEST(SamplingParams, RejectsOutOfRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams p;
  p.temperature = nan;
  expect_error(p, "temperature");
  p = {};
  p.temperature = kInf;
  expect_error(p, "temperature");
  p = {};
  p.top_k = -1;
  expect_error(p, "top_k");
  for (float v : {0.0f, -0.1f, 1.01f, nan}) {
    p = {};
    p.top_p = v;
    expect_error(p, "top_p");
  }
  for (float v : {-0.01f, 1.5f, nan}) {
    p = {};
    p.min_p = v;
    expect_error(p, "min_p");
  }
  for (float v : {0.0f, -1.0f, kInf, nan}) {
    p = {};
    p.repetition_penalty = v;
    expect_error(p, "repetition_penalty");
  }
  p = {};
  p.presence_penalty = nan;
  expect_error(p, "presence_penalty");
  p = {};
  p.frequency_penalty = -kInf;
  expect_error(p, "frequency_penalty");
  p = {};
  p.penalty_last_n = -2;
  expect_error(p, "penalty_last_n");
  p = {};
  p.logit_bias = {{-1, 1.0f}};
  expect_error(p, "logit_bias");
  p = {};
  p.logit_bias = {{3, nan}};
  expect_error(p, "NaN");
}

TEST(SamplingParams, SamplerChecksVocabAndIds) {
  SamplingParams p;
  EXPECT_THROW(Sampler(p, 0), Error);
  p.logit_bias = {{4, 1.0f}};
  EXPECT_THROW(Sampler(p, 4), Error);
  EXPECT_NO_THROW(Sampler(p, 5));
  p.top_p = 2.0f;
  EXPECT_THROW(Sampler(p, 5), Error);  // the constructor validates

  Sampler s(seeded(), 5);
  EXPECT_THROW(s.accept(5), Error);
  EXPECT_THROW(s.accept(-1), Error);
  EXPECT_NO_THROW(s.accept(4));
  EXPECT_THROW(s.sample(nullptr), Error);
  std::vector<TokenLogprob> top;
  EXPECT_THROW(s.logprobs(1, top), Error);  // no sample() yet
}

// ---------------------------------------------------------------- rng

TEST(Rng, MatchesStandardMt19937_64) {
  // [rand.predef]: the 10000th consecutive output of mt19937_64 seeded with its default seed
  // 5489 is 9981545732273789042.
  Rng r(5489);
  uint64_t x = 0;
  for (int i = 0; i < 10000; ++i) x = r.next_u64();
  EXPECT_EQ(x, 9981545732273789042ULL);
}

TEST(Rng, Uniform01IsTop53BitsTimes2PowMinus53) {
  Rng a(77), b(77);
  double sum = 0.0;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t raw = a.next_u64();
    const double u = b.uniform01();
    EXPECT_EQ(u, std::ldexp(static_cast<double>(raw >> 11), -53));
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);  // SE of the mean is 0.0029
}

// ---------------------------------------------------------------- greedy / top-k

TEST(Sampler, GreedyTakesArgmaxLowestIdOnTies) {
  const std::vector<float> l = {1.0f, 3.0f, -kInf, 3.0f, 2.0f};
  for (float t : {0.0f, -0.5f}) {
    SamplingParams p = seeded();
    p.temperature = t;
    p.top_k = 2;  // ignored when greedy
    Sampler s(p, 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(s.sample(l.data()), 1);
    expect_dist(dist(p, l), {{1, 1.0f}});
  }
}

TEST(Sampler, GreedyDoesNotDependOnSeed) {
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> l(1000);
  SamplingParams p1 = seeded(1), p2 = seeded(2);
  p1.temperature = p2.temperature = 0.0f;
  Sampler a(p1, 1000), b(p2, 1000);
  for (int i = 0; i < 50; ++i) {
    for (auto& v : l) v = nd(gen);
    const int32_t want = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(a.sample(l.data()), want);
    EXPECT_EQ(b.sample(l.data()), want);
  }
}

// The blocked two-pass argmax against a one-pass strict scan: ties across and within blocks of
// 16, NaN (never wins), -inf, vocabularies that are not a multiple of 16, the maximum in the
// tail, and nothing but -inf / NaN.
TEST(Sampler, GreedyArgmaxMatchesOnePassScan) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> ud(0, 5);
  const float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (const int n : {1, 15, 16, 17, 47, 100, 1003}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> l(static_cast<size_t>(n));
      for (auto& v : l) {
        const int c = ud(gen);
        v = c == 0 ? kNaN : c == 1 ? -kInf : static_cast<float>(c);
      }
      if (trial % 5 == 0) l.back() = 9.0f;  // the maximum in the tail
      int32_t want = -1;
      float best = -kInf;
      for (int i = 0; i < n; ++i)
        if (l[static_cast<size_t>(i)] > best) best = l[static_cast<size_t>(want = i)];
      SamplingParams p = seeded();
      p.temperature = 0.0f;
      Sampler s(p, n);
      if (want < 0) {
        EXPECT_THROW(s.sample(l.data()), std::exception) << n;
      } else {
        EXPECT_EQ(s.sample(l.data()), want) << "n=" << n << " trial " << trial;
      }
    }
  }
}

TEST(Sampler, TopK1EqualsGreedy) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> ud(0, 7);  // few values: many ties
  std::vector<float> l(300);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    SamplingParams p = seeded(seed);
    p.top_k = 1;
    p.temperature = 1.5f;
    Sampler s(p, 300);
    for (auto& v : l) v = static_cast<float>(ud(gen));
    const int32_t want = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(s.sample(l.data()), want);
  }
}

TEST(Sampler, TopKKeepsKLargestTiesByLowerId) {
  SamplingParams p = seeded();
  p.top_k = 3;
  const std::vector<float> l = {1.0f, 4.0f, 2.0f, 4.0f, 3.0f};
  const double e1 = std::exp(-1.0), z = 2.0 + e1;
  // kept: ids 1 and 3 (logit 4), id 4 (logit 3); walk order descending logit
  expect_dist(dist(p, l), {{1, float(1 / z)}, {3, float(1 / z)}, {4, float(e1 / z)}});

  p.top_k = 2;
  const std::vector<float> ties = {2.0f, 1.0f, 1.0f, 1.0f};
  const double e = std::exp(-1.0);
  expect_dist(dist(p, ties), {{0, float(1 / (1 + e))}, {1, float(e / (1 + e))}});

  p.top_k = 4;  // == n_vocab: disabled, id order
  expect_dist(dist(p, ties), {{0, float(1 / (1 + 3 * e))},
                              {1, float(e / (1 + 3 * e))},
                              {2, float(e / (1 + 3 * e))},
                              {3, float(e / (1 + 3 * e))}});
}

// ---------------------------------------------------------------- temperature

TEST(Sampler, TemperatureScalesLogits) {
  const std::vector<float> l = logits_of({1.0 / 7, 2.0 / 7, 4.0 / 7});
  SamplingParams p = seeded();
  expect_dist(dist(p, l), {{0, 1.0f / 7}, {1, 2.0f / 7}, {2, 4.0f / 7}});
  p.temperature = 0.5f;  // p^2: 1, 4, 16
  expect_dist(dist(p, l), {{0, 1.0f / 21}, {1, 4.0f / 21}, {2, 16.0f / 21}});
  p.temperature = 2.0f;  // sqrt(p): 1, sqrt2, 2
  const double z = 3.0 + std::sqrt(2.0);
  expect_dist(dist(p, l), {{0, float(1 / z)}, {1, float(std::sqrt(2.0) / z)}, {2, float(2 / z)}});
  p.temperature = 1e-30f;  // (l - max) / T underflows to -inf for the others: no NaN, no inf
  expect_dist(dist(p, l), {{0, 0.0f}, {1, 0.0f}, {2, 1.0f}});
}

// ---------------------------------------------------------------- top-p / min-p

TEST(Sampler, TopPKeepsSmallestPrefixReachingMass) {
  const std::vector<float> l = logits_of({0.1, 0.2, 0.3, 0.4});
  SamplingParams p = seeded();
  p.top_p = 0.35f;  // 0.4 >= 0.35
  expect_dist(dist(p, l), {{3, 1.0f}});
  p.top_p = 0.65f;  // 0.4 + 0.3 = 0.7 >= 0.65
  expect_dist(dist(p, l), {{3, 4.0f / 7}, {2, 3.0f / 7}});
  p.top_p = 0.85f;  // 0.9
  expect_dist(dist(p, l), {{3, 4.0f / 9}, {2, 3.0f / 9}, {1, 2.0f / 9}});
  p.top_p = 0.95f;  // needs all four; walk order still descending
  expect_dist(dist(p, l), {{3, 0.4f}, {2, 0.3f}, {1, 0.2f}, {0, 0.1f}});
}

TEST(Sampler, TopPWithTemperatureUsesTemperedMass) {
  // T = 0.5 turns {1,2,4}/7 into {1,4,16}/21: the top token alone holds 16/21 = 0.762.
  const std::vector<float> l = logits_of({1.0 / 7, 2.0 / 7, 4.0 / 7});
  SamplingParams p = seeded();
  p.temperature = 0.5f;
  p.top_p = 0.75f;
  expect_dist(dist(p, l), {{2, 1.0f}});
  p.temperature = 1.0f;  // at T = 1 the top token holds 0.571 < 0.75
  expect_dist(dist(p, l), {{2, 4.0f / 6}, {1, 2.0f / 6}});
}

TEST(Sampler, TopPOnLargeVocabWidensSortedPrefix) {
  // 100000 tokens: 3000 scattered ones at logit 0, the rest at -20 (weight e^-20 each).
  // Target mass 0.9 * (3000 + 97000 e^-20) = 2700.00018 (in units of the top weight), so the
  // nucleus is the 2701 lowest ids among the 3000 high ones. That crosses several widening
  // rounds of the sorted prefix (64, 256, 1024, 4096).
  const int32_t n = 100000;
  std::vector<float> l(n, -20.0f);
  std::vector<int32_t> high;
  for (int32_t i = 0; i < 3000; ++i)
    high.push_back(static_cast<int32_t>((int64_t(i) * 7919 + 13) % n));
  for (int32_t id : high) l[static_cast<size_t>(id)] = 0.0f;
  std::sort(high.begin(), high.end());
  SamplingParams p = seeded();
  p.top_p = 0.9f;
  std::vector<TokenProb> want;
  for (int32_t i = 0; i < 2701; ++i) want.push_back({high[static_cast<size_t>(i)], 1.0f / 2701});
  expect_dist(dist(p, l), want, 1e-9);

  // Equal logits, top_p 0.5 over 5000 tokens: exactly ids 0..2499 (cum 2500 >= 2500).
  std::vector<float> flat(5000, 0.25f);
  p.top_p = 0.5f;
  want.clear();
  for (int32_t i = 0; i < 2500; ++i) want.push_back({i, 1.0f / 2500});
  expect_dist(dist(p, flat), want, 1e-9);
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfMax) {
  const std::vector<float> l = logits_of({0.05, 0.1, 0.25, 0.6});
  SamplingParams p = seeded();
  p.min_p = 0.3f;  // threshold 0.18: keeps 0.25 and 0.6, in id order
  expect_dist(dist(p, l), {{2, 0.25f / 0.85f}, {3, 0.6f / 0.85f}});
  p.min_p = 0.5f;  // threshold 0.3
  expect_dist(dist(p, l), {{3, 1.0f}});
  p.min_p = 0.05f;  // threshold 0.03: all
  expect_dist(dist(p, l), {{0, 0.05f}, {1, 0.1f}, {2, 0.25f}, {3, 0.6f}});
  p.min_p = 1.0f;  // only the max (ties: all maxima)
  expect_dist(dist(p, {1.0f, 2.0f, 2.0f}), {{1, 0.5f}, {2, 0.5f}});
}

TEST(Sampler, TopKTopPMinPCombined) {
  // probs 0.02, 0.08, 0.1, 0.15, 0.25, 0.4; top_k 5 drops id 0; the 5 kept renormalize by
  // 0.98: 0.4/.98 = .408, .25/.98 = .255 (cum .663), .15/.98 = .153 (cum .816) >= top_p 0.8.
  // min_p 0.4 of 0.408: threshold .163 drops id 3 (.153). Left: ids 5, 4 -> 0.4/0.65, 0.25/0.65.
  const std::vector<float> l = logits_of({0.02, 0.08, 0.1, 0.15, 0.25, 0.4});
  SamplingParams p = seeded();
  p.top_k = 5;
  p.top_p = 0.8f;
  p.min_p = 0.4f;
  expect_dist(dist(p, l), {{5, 0.4f / 0.65f}, {4, 0.25f / 0.65f}});
}

// ---------------------------------------------------------------- penalties / bias / inf

TEST(Sampler, PenaltiesUseCountsInWindow) {
  const std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  SamplingParams p = seeded();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  // history 0, 1, 0, 4: counts {2, 1, 0, 0, 1}
  //   id 0: 2 / 2 = 1,     1 - 0.5*2 - 0.25 = -0.25
  //   id 1: -1 * 2 = -2,  -2 - 0.5   - 0.25 = -2.75
  //   id 4:  0 * 2 = 0,    0 - 0.5   - 0.25 = -0.75
  const std::vector<double> pen = {-0.25, -2.75, 0.5, 3.0, -0.75};
  double z = 0.0;
  for (double v : pen) z += std::exp(v);
  std::vector<TokenProb> want;
  for (int32_t i = 0; i < 5; ++i) want.push_back({i, float(std::exp(pen[size_t(i)]) / z)});
  expect_dist(dist(p, l, {0, 1, 0, 4}), want);

  // Window of 2 over history 0, 1, 0, 4: only {0, 4} with count 1 each.
  p.penalty_last_n = 2;
  const std::vector<double> pen2 = {1.0 - 0.75, -1.0, 0.5, 3.0, -0.75};
  z = 0.0;
  for (double v : pen2) z += std::exp(v);
  want.clear();
  for (int32_t i = 0; i < 5; ++i) want.push_back({i, float(std::exp(pen2[size_t(i)]) / z)});
  expect_dist(dist(p, l, {0, 1, 0, 4}), want);

  // Window 0: penalties off; window -1 behaves like an unlimited window.
  SamplingParams plain = seeded();
  p.penalty_last_n = 0;
  expect_dist(dist(p, l, {0, 1, 0, 4}), dist(plain, l));
  p.penalty_last_n = -1;
  SamplingParams big = p;
  big.penalty_last_n = 1000;
  expect_dist(dist(p, l, {0, 1, 0, 4, 4, 3}), dist(big, l, {0, 1, 0, 4, 4, 3}));
}

TEST(Sampler, PenaltyRingEvictsOldestAndResetClears) {
  SamplingParams p = seeded();
  p.temperature = 0.0f;
  p.frequency_penalty = 10.0f;
  p.penalty_last_n = 3;
  const std::vector<float> l = {5.0f, 4.0f, 3.0f, 2.0f};
  Sampler s(p, 4);
  EXPECT_EQ(s.sample(l.data()), 0);
  s.accept(0);  // window {0}
  EXPECT_EQ(s.sample(l.data()), 1);
  s.accept(1);  // {0, 1}
  EXPECT_EQ(s.sample(l.data()), 2);
  s.accept(2);  // {0, 1, 2}
  EXPECT_EQ(s.sample(l.data()), 3);
  s.accept(3);  // {1, 2, 3}: 0 left the window
  EXPECT_EQ(s.sample(l.data()), 0);
  s.accept(0);  // {2, 3, 0}
  EXPECT_EQ(s.sample(l.data()), 1);
  s.reset();
  EXPECT_EQ(s.sample(l.data()), 0);
}

// Prompt tokens count for the repetition penalty only; presence and frequency look at what was
// generated (OpenAI / vLLM semantics), including after a prompt token leaves the ring.
TEST(Sampler, PromptTokensOnlyFeedTheRepetitionPenalty) {
  SamplingParams p = seeded();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.penalty_last_n = 3;
  const std::vector<float> l = {2.0f, -1.0f, 0.5f, 3.0f};
  Sampler s(p, 4);
  s.accept(0, /*from_prompt=*/true);
  s.accept(1, /*from_prompt=*/true);
  s.accept(0);  // window {0p, 1p, 0}: id 0 counts 2 (1 generated), id 1 counts 1 (0 generated)
  std::vector<TokenProb> got;
  s.distribution(l.data(), got);
  //   id 0: 2 / 2 = 1, 1 - 0.5*1 - 0.25 = 0.25;  id 1: -1 * 2 = -2 (no presence / frequency)
  std::vector<double> pen = {0.25, -2.0, 0.5, 3.0};
  auto want_of = [](const std::vector<double>& v) {
    double z = 0.0;
    for (double x : v) z += std::exp(x);
    std::vector<TokenProb> w;
    for (int32_t i = 0; i < int32_t(v.size()); ++i) w.push_back({i, float(std::exp(v[size_t(i)]) / z)});
    return w;
  };
  expect_dist(got, want_of(pen));
  s.accept(3, /*from_prompt=*/true);  // evicts 0p: window {1p, 0, 3p}
  s.accept(2);                        // evicts 1p: window {0, 3p, 2}
  s.distribution(l.data(), got);
  //   id 0: 1 - 0.75 = 0.25;  id 3: 3 / 2 = 1.5;  id 2: 0.5 / 2 - 0.75 = -0.5;  id 1: -1
  pen = {0.25, -1.0, -0.5, 1.5};
  expect_dist(got, want_of(pen));
}

TEST(Sampler, RepetitionPenaltyAloneSignDependent) {
  SamplingParams p = seeded();
  p.repetition_penalty = 1.5f;
  // id 0: 3 / 1.5 = 2;  id 1: -2 * 1.5 = -3;  id 2 untouched at 1.
  const std::vector<float> l = {3.0f, -2.0f, 1.0f};
  const double z = std::exp(2.0) + std::exp(-3.0) + std::exp(1.0);
  expect_dist(dist(p, l, {0, 1, 1}), {{0, float(std::exp(2.0) / z)},
                                      {1, float(std::exp(-3.0) / z)},
                                      {2, float(std::exp(1.0) / z)}});
}

TEST(Sampler, LogitBiasForcesAndBans) {
  const std::vector<float> l = {1.0f, 5.0f, 2.0f, 0.0f};
  SamplingParams p = seeded();
  p.temperature = 0.0f;
  p.logit_bias = {{1, -kInf}};
  expect_dist(dist(p, l), {{2, 1.0f}});
  p.temperature = 1.0f;  // banned token disappears from the distribution
  const double z = std::exp(1.0) + std::exp(2.0) + 1.0;
  expect_dist(dist(p, l),
              {{0, float(std::exp(1.0) / z)}, {2, float(std::exp(2.0) / z)}, {3, float(1 / z)}});

  p.logit_bias = {{3, 100.0f}};  // forced by a large bias
  Sampler s(p, 4);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(l.data()), 3);

  p.logit_bias = {{3, 1.0f}, {3, 1.0f}, {0, kInf}};  // repeated ids add; +inf forces
  expect_dist(dist(p, l), {{0, 1.0f}});
  p.logit_bias = {{3, 2.5f}, {3, 2.5f}};  // id 3: 0 + 5 = 5, ties with id 1
  const double z2 = 2 * std::exp(0.0) + std::exp(-4.0) + std::exp(-3.0);
  expect_dist(dist(p, l), {{0, float(std::exp(-4.0) / z2)},
                           {1, float(1 / z2)},
                           {2, float(std::exp(-3.0) / z2)},
                           {3, float(1 / z2)}});
  // Bias comes before penalties: the penalty acts on the biased logit (5 + 1 = 6, / 2 = 3).
  p.logit_bias = {{1, 1.0f}};
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  Sampler r(p, 4);
  r.accept(1);
  std::vector<float> l2 = {2.9f, 5.0f, 0.0f, 0.0f};
  EXPECT_EQ(r.sample(l2.data()), 1);  // 3 > 2.9
  l2[0] = 3.1f;
  EXPECT_EQ(r.sample(l2.data()), 0);
}

TEST(Sampler, InfiniteAndNaNLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams p = seeded(9);
  const std::vector<float> l = {-kInf, 0.0f, nan, 0.0f, -kInf};
  expect_dist(dist(p, l), {{1, 0.5f}, {3, 0.5f}});
  Sampler s(p, 5);
  for (int i = 0; i < 500; ++i) {
    const int32_t t = s.sample(l.data());
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  // +inf tokens share the mass.
  expect_dist(dist(p, {kInf, 3.0f, kInf, nan}), {{0, 0.5f}, {2, 0.5f}});
  p.top_p = 0.4f;
  expect_dist(dist(p, {kInf, 3.0f, kInf}), {{0, 1.0f}});
  // Nothing left: a clear error, greedy or not.
  const std::vector<float> dead = {-kInf, nan, -kInf};
  Sampler a(seeded(), 3);
  EXPECT_THROW(a.sample(dead.data()), Error);
  SamplingParams g = seeded();
  g.temperature = 0.0f;
  Sampler b(g, 3);
  EXPECT_THROW(b.sample(dead.data()), Error);
  SamplingParams ban = seeded();
  ban.logit_bias = {{0, -kInf}};
  Sampler c(ban, 1);
  const float one = 1.0f;
  EXPECT_THROW(c.sample(&one), Error);
}

// ---------------------------------------------------------------- draw / reproducibility

std::vector<float> random_logits(int32_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& v : l) v = nd(gen);
  return l;
}

TEST(Sampler, DrawFollowsDocumentedRule) {
  // First kept token (in walk order) whose cumulative probability exceeds u, u = uniform01().
  const auto l = random_logits(500, 11, 2.0f);
  for (int variant = 0; variant < 3; ++variant) {
    SamplingParams p = seeded(1234);
    if (variant == 1) p.top_k = 40;
    if (variant == 2) p.top_p = 0.9f, p.min_p = 0.01f, p.temperature = 0.7f;
    Sampler s(p, 500);
    std::vector<TokenProb> d;
    s.distribution(l.data(), d);
    Rng rng(1234);
    for (int i = 0; i < 300; ++i) {
      const double target = rng.uniform01();
      double cum = 0.0;
      int32_t want = -1;
      for (const auto& tp : d) {
        cum += tp.prob;
        if (target < cum) {
          want = tp.id;
          break;
        }
      }
      if (want < 0) want = d.back().id;
      ASSERT_EQ(s.sample(l.data()), want) << "variant " << variant << " draw " << i;
    }
  }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  const auto l = random_logits(1000, 17, 1.5f);
  SamplingParams p = seeded(42);
  p.top_p = 0.95f;
  p.repetition_penalty = 1.1f;
  auto run = [&](const SamplingParams& q) {
    Sampler s(q, 1000);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) {
      out.push_back(s.sample(l.data()));
      s.accept(out.back());
    }
    return out;
  };
  const auto a = run(p), b = run(p);
  EXPECT_EQ(a, b);
  SamplingParams q = p;
  q.seed = 43;
  EXPECT_NE(a, run(q));

  // reset() with a seed replays the first run.
  Sampler s(p, 1000);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 50; ++i) first.push_back(s.sample(l.data())), s.accept(first.back());
  s.reset();
  for (int i = 0; i < 50; ++i) second.push_back(s.sample(l.data())), s.accept(second.back());
  EXPECT_EQ(first, second);
  EXPECT_EQ(s.seed(), 42u);

  // Unseeded samplers draw their own seed (two equal 64-bit seeds would be a 2^-64 event).
  SamplingParams u;
  EXPECT_NE(Sampler(u, 10).seed(), Sampler(u, 10).seed());
}

// Each empirical frequency within 4.5 standard errors of its target probability.
void check_frequencies(Sampler& s, const std::vector<float>& l, const std::vector<double>& want,
                       int draws) {
  std::vector<int> hits(l.size(), 0);
  for (int i = 0; i < draws; ++i) ++hits[static_cast<size_t>(s.sample(l.data()))];
  for (size_t i = 0; i < l.size(); ++i) {
    const double f = double(hits[i]) / draws;
    const double se = std::sqrt(std::max(want[i] * (1 - want[i]), 1e-12) / draws);
    if (want[i] == 0.0) {
      EXPECT_EQ(hits[i], 0) << "token " << i;
    } else {
      EXPECT_NEAR(f, want[i], 4.5 * se) << "token " << i;
    }
  }
}

TEST(Sampler, EmpiricalFrequenciesMatchTargets) {
  const int kDraws = 20000;
  {
    Sampler s(seeded(2024), 4);
    check_frequencies(s, logits_of({0.1, 0.2, 0.3, 0.4}), {0.1, 0.2, 0.3, 0.4}, kDraws);
  }
  {
    // T = 0.5 squares the probabilities: {1, 4, 9, 16, 25} / 55; top_k 4 drops the 1/55 one,
    // leaving {4, 9, 16, 25} / 54.
    SamplingParams p = seeded(7);
    p.temperature = 0.5f;
    p.top_k = 4;
    Sampler s(p, 5);
    const std::vector<double> base = {1 / 15.0, 2 / 15.0, 3 / 15.0, 4 / 15.0, 5 / 15.0};
    check_frequencies(s, logits_of(base), {0, 4 / 54.0, 9 / 54.0, 16 / 54.0, 25 / 54.0}, kDraws);
  }
  {
    // top_p 0.55 over {0.05, 0.15, 0.3, 0.5}: 0.5 + 0.3 = 0.8 -> {0, 0, 3/8, 5/8}.
    SamplingParams p = seeded(99);
    p.top_p = 0.55f;
    Sampler s(p, 4);
    check_frequencies(s, logits_of({0.05, 0.15, 0.3, 0.5}), {0, 0, 0.375, 0.625}, kDraws);
  }
}

// Reference for the truncation pipeline on larger inputs, written out plainly: full sort,
// double-precision weights. Checks the heap / nth_element top-k paths and the bucketed top-p.
std::vector<TokenProb> reference_dist(const std::vector<float>& l, const SamplingParams& p) {
  const int32_t n = static_cast<int32_t>(l.size());
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  const bool top_k_on = p.top_k > 0 && p.top_k < n;
  const bool ordered = top_k_on || p.top_p < 1.0f;
  if (ordered) {
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b);
    });
  }
  if (top_k_on) ids.resize(size_t(p.top_k));
  float lmax = -kInf;
  for (int32_t id : ids) lmax = std::max(lmax, l[size_t(id)]);
  std::vector<double> w;
  double total = 0.0;
  for (int32_t id : ids) {
    w.push_back(std::exp(double(l[size_t(id)] - lmax) / p.temperature));
    total += w.back();
  }
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cum += w[i];
      if (cum >= double(p.top_p) * total) {
        ids.resize(i + 1);
        w.resize(i + 1);
        break;
      }
    }
  }
  std::vector<TokenProb> out;
  double kept = 0.0;
  const float min_logit = lmax + p.temperature * std::log(p.min_p);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (p.min_p > 0.0f && l[size_t(ids[i])] < min_logit) continue;
    out.push_back({ids[i], float(w[i])});
    kept += w[i];
  }
  for (auto& tp : out) tp.prob = float(tp.prob / kept);
  return out;
}

TEST(Sampler, LargeInputsMatchReferencePipeline) {
  const int32_t n = 20000;
  auto l = random_logits(n, 31, 2.0f);
  for (size_t i = 0; i < l.size(); i += 3) l[i] = std::round(l[i] * 4.0f) / 4.0f;  // ties
  int cases = 0;
  for (float temp : {0.3f, 1.0f, 2.5f}) {
    for (int32_t top_k : {0, 10, 700, 5000}) {  // 700: heap (k*16 <= n); 5000: nth_element
      for (float top_p : {1.0f, 0.5f, 0.9f, 0.99f}) {
        for (float min_p : {0.0f, 0.02f}) {
          SamplingParams p = seeded();
          p.temperature = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p;
          SCOPED_TRACE(::testing::Message() << "T=" << temp << " top_k=" << top_k
                                            << " top_p=" << top_p << " min_p=" << min_p);
          expect_dist(dist(p, l), reference_dist(l, p), 1e-5);
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 96);
}

// ---------------------------------------------------------------- logprobs

TEST(Sampler, LogprobsReportPenalizedTemperedDistribution) {
  const std::vector<float> l = logits_of({0.1, 0.2, 0.3, 0.4});
  SamplingParams p = seeded(5);
  p.top_k = 1;  // truncation does not change the reported distribution
  Sampler s(p, 4);
  const int32_t t = s.sample(l.data());
  EXPECT_EQ(t, 3);
  std::vector<TokenLogprob> top;
  const TokenLogprob chosen = s.logprobs(2, top);
  EXPECT_EQ(chosen.id, 3);
  EXPECT_NEAR(chosen.logprob, std::log(0.4), 1e-5);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 3);
  EXPECT_NEAR(top[0].logprob, std::log(0.4), 1e-5);
  EXPECT_EQ(top[1].id, 2);
  EXPECT_NEAR(top[1].logprob, std::log(0.3), 1e-5);
  s.logprobs(100, top);  // clamped to n_vocab
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[3].id, 0);
  EXPECT_NEAR(top[3].logprob, std::log(0.1), 1e-5);
  EXPECT_THROW(s.logprobs(-1, top), Error);

  // Temperature 0.5 and a ban: {0.1, 0.2, 0.3, 0.4} -> squares {1, 4, 9, 16}, id 2 banned:
  // {1, 4, 0, 16} / 21.
  SamplingParams q = seeded(5);
  q.temperature = 0.5f;
  q.logit_bias = {{2, -kInf}};
  Sampler r(q, 4);
  const int32_t u = r.sample(l.data());
  const TokenLogprob c = r.logprobs(4, top);
  const double want[] = {1 / 21.0, 4 / 21.0, 0.0, 16 / 21.0};
  EXPECT_EQ(c.id, u);
  EXPECT_NEAR(c.logprob, std::log(want[u]), 1e-5);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].id, 3);
  EXPECT_EQ(top[1].id, 1);
  EXPECT_EQ(top[2].id, 0);
  EXPECT_EQ(top[3].id, 2);
  EXPECT_NEAR(top[2].logprob, std::log(1 / 21.0), 1e-5);
  EXPECT_EQ(top[3].logprob, -kInf);

  // Greedy reports at temperature 1.
  SamplingParams g = seeded();
  g.temperature = 0.0f;
  Sampler gs(g, 4);
  EXPECT_EQ(gs.sample(l.data()), 3);
  EXPECT_NEAR(gs.logprobs(0, top).logprob, std::log(0.4), 1e-5);
  EXPECT_TRUE(top.empty());
}

// ---------------------------------------------------------------- large vocab / allocation

TEST(Sampler, LargeVocabNoAllocationInSteadyState) {
  const int32_t n = 262144;
  const auto l = random_logits(n, 23, 3.0f);
  struct Case {
    const char* name;
    SamplingParams p;
  };
  std::vector<Case> cases(5);
  cases[0].name = "greedy";
  cases[0].p.temperature = 0.0f;
  cases[1].name = "top_k=40 T=0.8";
  cases[1].p.top_k = 40, cases[1].p.temperature = 0.8f;
  cases[2].name = "top_p=0.95 (no top_k)";
  cases[2].p.top_p = 0.95f;
  cases[3].name = "min_p=0.05 (no top_k)";
  cases[3].p.min_p = 0.05f;
  cases[4].name = "top_k=40 top_p=0.9 min_p=0.05 penalties";
  cases[4].p.top_k = 40, cases[4].p.top_p = 0.9f, cases[4].p.min_p = 0.05f;
  cases[4].p.repetition_penalty = 1.1f, cases[4].p.frequency_penalty = 0.2f;
  {
    const long a0 = g_allocs.load();
    Sampler probe(cases[1].p, n);
    EXPECT_GT(g_allocs.load() - a0, 0) << "the allocation counter is not live";
  }
  for (auto& c : cases) {
    c.p.seed = 3;
    Sampler s(c.p, n);
    std::vector<TokenProb> d;
    s.distribution(l.data(), d);  // the set every draw must come from (no history yet)
    std::vector<char> allowed(static_cast<size_t>(n), 0);
    for (const auto& tp : d) allowed[static_cast<size_t>(tp.id)] = 1;
    // Warm-up: lets the penalty window reach its steady size.
    for (int i = 0; i < 70; ++i) s.accept(s.sample(l.data()));
    const long before = g_allocs.load();
    const auto t0 = std::chrono::steady_clock::now();
    const int kIters = 40;
    int outside = 0;
    for (int i = 0; i < kIters; ++i) {
      const int32_t t = s.sample(l.data());
      if (!allowed[static_cast<size_t>(t)]) ++outside;
      s.accept(t);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(g_allocs.load() - before, 0) << c.name;
    if (!c.p.penalties_enabled()) {
      EXPECT_EQ(outside, 0) << c.name;
    }
    std::printf("  [%s] kept %zu, %.3f ms per token\n", c.name, d.size(), ms / kIters);
  }
}

}  // namespace
}  // namespace triad
