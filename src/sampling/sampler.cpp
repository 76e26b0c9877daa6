// Sampler implementation: the pipeline documented in sampling/sampler.h.
//
// Ordering of candidates uses one strict total order (logit descending, then id ascending), so
// nth_element / sort results do not depend on the standard library's algorithms. Probabilities
// are accumulated in double. No allocation happens in sample() (buffers are sized in the
// constructor). Not thread-safe: one Sampler per sequence.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace triad {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab)
    : params_(p), n_vocab_(n_vocab), seed_(p.seed ? *p.seed : Rng::random_seed()), rng_(seed_) {
  params_.validate();
  TRIAD_CHECK(n_vocab > 0, "sampling: vocabulary size must be > 0, got ", n_vocab);
  for (const auto& [id, bias] : params_.logit_bias) {
    TRIAD_CHECK(id < n_vocab, "sampling: logit_bias token id ", id,
                " is outside the vocabulary (size ", n_vocab, ")");
  }
  logits_.resize(static_cast<size_t>(n_vocab));
  cand_.resize(static_cast<size_t>(n_vocab));
  if (params_.penalties_enabled()) {
    counts_.assign(static_cast<size_t>(n_vocab), 0);
    gen_counts_.assign(static_cast<size_t>(n_vocab), 0);
    const size_t cap =
        params_.penalty_last_n < 0 ? 4096 : static_cast<size_t>(params_.penalty_last_n);
    window_.reserve(std::min<size_t>(cap, 4096));
  }
}

void Sampler::accept(int32_t token, bool from_prompt) {
  TRIAD_CHECK(token >= 0 && token < n_vocab_, "sampling: accepted token id ", token,
              " is outside the vocabulary (size ", n_vocab_, ")");
  if (!params_.penalties_enabled()) return;
  // Window entries carry the prompt flag in bit 31 (ids are < 2^31).
  const int32_t entry = from_prompt ? static_cast<int32_t>(static_cast<uint32_t>(token) | kPromptBit) : token;
  const int32_t last_n = params_.penalty_last_n;
  if (last_n < 0 || window_.size() < static_cast<size_t>(last_n)) {
    window_.push_back(entry);
  } else {
    // Ring is full: overwrite the oldest entry.
    int32_t& slot = window_[window_head_];
    const size_t old = static_cast<size_t>(static_cast<uint32_t>(slot) & ~kPromptBit);
    --counts_[old];
    if (!(static_cast<uint32_t>(slot) & kPromptBit)) --gen_counts_[old];
    slot = entry;
    window_head_ = (window_head_ + 1) % window_.size();
  }
  ++counts_[static_cast<size_t>(token)];
  if (!from_prompt) ++gen_counts_[static_cast<size_t>(token)];
}

void Sampler::reset() {
  window_.clear();
  window_head_ = 0;
  std::fill(counts_.begin(), counts_.end(), 0);
  std::fill(gen_counts_.begin(), gen_counts_.end(), 0);
  seed_ = params_.seed ? *params_.seed : Rng::random_seed();
  rng_.reseed(seed_);
  last_token_ = -1;
}

void Sampler::apply_penalties() {
  const float rep = params_.repetition_penalty;
  const float freq = params_.frequency_penalty;
  const float pres = params_.presence_penalty;
  // Each distinct token is penalized once: its count is negated when visited, and restored
  // in a second pass. O(window) per call, no extra memory.
  for (int32_t e : window_) {
    const size_t t = static_cast<size_t>(static_cast<uint32_t>(e) & ~kPromptBit);
    int32_t& c = counts_[t];
    if (c <= 0) continue;
    float& l = logits_[t];
    if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
    const int32_t g = gen_counts_[t];
    if (g > 0) l -= freq * static_cast<float>(g) + pres;
    c = -c;
  }
  for (int32_t e : window_) {
    int32_t& c = counts_[static_cast<size_t>(static_cast<uint32_t>(e) & ~kPromptBit)];
    if (c < 0) c = -c;
  }
}

int32_t Sampler::argmax() const {
  // Two passes in blocks of 16 that the compiler vectorizes (greedy decoding scans the whole
  // vocabulary per token; the one-pass loop's data-dependent branch cost 2% of a 16-stream
  // step): the largest value, then its first id. Same result as one strict pass: ties keep the
  // lower id; NaN never wins (v > m is false); all -inf or NaN gives -1.
  constexpr size_t kB = 16;
  const float* l = logits_.data();
  const size_t n = static_cast<size_t>(n_vocab_), nb = n / kB * kB;
  float part[kB];
  for (size_t k = 0; k < kB; ++k) part[k] = -kInf;
  for (size_t i = 0; i < nb; i += kB)
    for (size_t k = 0; k < kB; ++k) part[k] = l[i + k] > part[k] ? l[i + k] : part[k];
  float m = -kInf;
  for (size_t k = 0; k < kB; ++k) m = part[k] > m ? part[k] : m;
  for (size_t i = nb; i < n; ++i) m = l[i] > m ? l[i] : m;
  if (!(m > -kInf)) return -1;
  for (size_t i = 0; i < nb; i += kB) {
    bool hit = false;
    for (size_t k = 0; k < kB; ++k) hit |= l[i + k] == m;
    if (!hit) continue;
    for (size_t k = 0;; ++k)
      if (l[i + k] == m) return static_cast<int32_t>(i + k);
  }
  for (size_t i = nb; i < n; ++i)
    if (l[i] == m) return static_cast<int32_t>(i);
  return -1;  // unreachable: m is one of the values
}

namespace {

struct ByLogitDesc {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};

}  // namespace

size_t Sampler::gather_candidates(float min_logit, float* lmax) {
  size_t n = 0;
  float m = -kInf;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float v = logits_[static_cast<size_t>(i)];
    if (v > -kInf && v >= min_logit) {  // drops -inf and NaN
      cand_[n++] = Candidate{i, v, 0.0f};
      m = std::max(m, v);
    }
  }
  *lmax = m;
  return n;
}

size_t Sampler::select_top_k(size_t k) {
  auto first = cand_.begin();
  if (k * 16 > static_cast<size_t>(n_vocab_)) {  // large k: select with nth_element
    float unused;
    const size_t n = gather_candidates(-kInf, &unused);
    const size_t m = std::min(k, n);
    extend_sorted_prefix(0, m, n);
    return m;
  }
  // Small k: one pass with a heap of the k best so far; its front is the worst of them.
  // Ids arrive in increasing order, so a later token only ranks better with a larger logit.
  size_t h = 0;
  int32_t i = 0;
  for (; i < n_vocab_ && h < k; ++i) {
    const float v = logits_[static_cast<size_t>(i)];
    if (v > -kInf) cand_[h++] = Candidate{i, v, 0.0f};
  }
  std::make_heap(first, first + static_cast<ptrdiff_t>(h), ByLogitDesc{});
  if (h == k) {
    const auto last = first + static_cast<ptrdiff_t>(k);
    float worst = cand_[0].logit;
    for (; i < n_vocab_; ++i) {
      const float v = logits_[static_cast<size_t>(i)];
      if (v > worst) {  // NaN and -inf never pass
        std::pop_heap(first, last, ByLogitDesc{});
        cand_[k - 1] = Candidate{i, v, 0.0f};
        std::push_heap(first, last, ByLogitDesc{});
        worst = cand_[0].logit;
      }
    }
  }
  std::sort_heap(first, first + static_cast<ptrdiff_t>(h), ByLogitDesc{});
  return h;
}

size_t Sampler::bucket_prefix(size_t n, float lmax, double target) {
  // Buckets of width 1/8 in units of (lmax - logit) / T, i.e. of -ln(weight); the last one
  // collects everything below e^-32. Bucket index never decreases as the logit decreases, so
  // the buckets up to the one where the cumulative mass reaches `target` hold an upper set of
  // the candidates, which contains the nucleus.
  constexpr int kBuckets = 256;
  constexpr float kPerUnit = 8.0f;
  const float scale = kPerUnit / params_.temperature;  // may be +inf for a tiny temperature
  auto bucket_of = [&](float logit) {
    const float d = lmax - logit;                 // >= 0 (no NaN: lmax is finite)
    const float x = d > 0.0f ? d * scale : 0.0f;  // never 0 * inf
    return x < static_cast<float>(kBuckets - 1) ? static_cast<int>(x) : kBuckets - 1;
  };
  double mass[kBuckets] = {};
  size_t count[kBuckets] = {};
  for (size_t i = 0; i < n; ++i) {
    const int b = bucket_of(cand_[i].logit);
    mass[b] += cand_[i].weight;
    ++count[b];
  }
  double cum = 0.0;
  size_t m = 0;
  int last = 0;
  for (; last < kBuckets; ++last) {
    cum += mass[last];
    m += count[last];
    if (cum >= target) break;
  }
  if (last >= kBuckets - 1) return 0;  // no useful cut: let the caller widen from scratch
  std::partition(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(n),
                 [&](const Candidate& c) { return bucket_of(c.logit) <= last; });
  std::sort(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(m), ByLogitDesc{});
  return m;
}

void Sampler::extend_sorted_prefix(size_t from, size_t k, size_t n) {
  auto first = cand_.begin();
  if (k < n) {
    std::nth_element(first + static_cast<ptrdiff_t>(from), first + static_cast<ptrdiff_t>(k),
                     first + static_cast<ptrdiff_t>(n), ByLogitDesc{});
  }
  std::sort(first + static_cast<ptrdiff_t>(from), first + static_cast<ptrdiff_t>(k), ByLogitDesc{});
}

int32_t Sampler::draw(size_t n) {
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += cand_[i].weight;
  const double target = rng_.uniform01() * total;
  double cum = 0.0;
  int32_t last_positive = cand_[0].id;
  for (size_t i = 0; i < n; ++i) {
    const float w = cand_[i].weight;
    if (w <= 0.0f) continue;
    cum += w;
    last_positive = cand_[i].id;
    if (target < cum) return cand_[i].id;
  }
  return last_positive;  // only reached when rounding put target at the very top
}

size_t Sampler::prepare(const float* logits) {
  TRIAD_CHECK(logits != nullptr, "sampling: logits pointer is null");
  std::copy(logits, logits + n_vocab_, logits_.begin());

  // 1. Logit bias.
  for (const auto& [id, bias] : params_.logit_bias) logits_[static_cast<size_t>(id)] += bias;
  // 2. Penalties.
  if (params_.penalties_enabled()) apply_penalties();

  // 3. Greedy.
  if (params_.greedy()) {
    const int32_t t = argmax();
    TRIAD_CHECK(t >= 0, "sampling: every token has logit -inf or NaN; nothing to sample");
    cand_[0] = Candidate{t, logits_[static_cast<size_t>(t)], 1.0f};
    return 1;
  }

  const float temp = params_.temperature;
  const bool top_k_on = params_.top_k > 0 && params_.top_k < n_vocab_;
  const bool top_p_on = params_.top_p < 1.0f;
  const bool min_p_on = params_.min_p > 0.0f;
  const float log_min_p = min_p_on ? std::log(params_.min_p) : 0.0f;
  // Min-p threshold in logit space: logit >= logit_max + T ln(min_p)  <=>  p >= min_p * p_max.
  auto min_p_logit = [&](float max_logit) {
    return max_logit == kInf ? kInf : max_logit + temp * log_min_p;  // avoids inf - inf
  };
  size_t n = 0;
  size_t sorted = 0;  // cand_[0, sorted) holds the `sorted` largest candidates, in order
  float lmax = -kInf;

  // 4. Top-k (or just gather every candidate above -inf, in id order).
  if (top_k_on) {
    n = select_top_k(static_cast<size_t>(params_.top_k));
    sorted = n;
    if (n > 0) lmax = cand_[0].logit;
  } else if (min_p_on && !top_p_on) {
    // Min-p alone does not depend on the total mass, so it can be applied while gathering
    // (step 8 below is then a no-op): this skips exp() for the tokens it would drop.
    for (float v : logits_) lmax = std::max(lmax, v);  // NaN never wins
    n = gather_candidates(min_p_logit(lmax), &lmax);
  } else {
    n = gather_candidates(-kInf, &lmax);
  }
  TRIAD_CHECK(n > 0, "sampling: every token has logit -inf or NaN; nothing to sample");

  // 5 + 6. Temperature inside the softmax; weights are exp((l - max) / T), so the max is 1.
  double total = 0.0;
  if (lmax == kInf) {
    // Only the +inf tokens remain, with equal weight; compaction keeps their order (and so a
    // sorted prefix stays sorted: the +inf tokens come first in it).
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (cand_[i].logit == kInf) cand_[kept++] = Candidate{cand_[i].id, kInf, 1.0f};
    }
    n = kept;
    sorted = std::min(sorted, n);
    total = static_cast<double>(n);
  } else {
    for (size_t i = 0; i < n; ++i) {
      cand_[i].weight = std::exp((cand_[i].logit - lmax) / temp);
      total += cand_[i].weight;
    }
  }

  // 7. Top-p: the nucleus lies in a sorted prefix, found by mass buckets on large inputs,
  // then widened geometrically (nth_element on the rest) if rounding left it short.
  if (top_p_on) {
    const double target = static_cast<double>(params_.top_p) * total;
    if (sorted < n && n > 4096 && lmax != kInf) sorted = bucket_prefix(n, lmax, target);
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      if (i == sorted) {
        const size_t k = std::min(n, std::max<size_t>(64, sorted * 4));
        extend_sorted_prefix(sorted, k, n);
        sorted = k;
      }
      cum += cand_[i].weight;
      if (cum >= target) {
        n = i + 1;
        break;
      }
    }
  }

  // 8. Min-p. Keeps the order; the max always survives. (+inf max: the threshold is +inf and
  // every kept token is at +inf.)
  if (min_p_on) {
    const float min_logit = min_p_logit(lmax);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (cand_[i].logit >= min_logit) cand_[kept++] = cand_[i];
    }
    n = kept;
  }

  return n;  // 9 (renormalization) happens in draw() / distribution()
}

int32_t Sampler::sample(const float* logits) {
  last_token_ = -1;
  const size_t n = prepare(logits);
  // 10. Greedy uses no RNG output; everything else exactly one.
  last_token_ = params_.greedy() ? cand_[0].id : draw(n);
  return last_token_;
}

void Sampler::distribution(const float* logits, std::vector<TokenProb>& out) {
  last_token_ = -1;  // logits_ is about to hold other logits than the last sample()'s
  const size_t n = prepare(logits);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += cand_[i].weight;
  out.clear();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back({cand_[i].id, static_cast<float>(cand_[i].weight / total)});
  }
}

TokenLogprob Sampler::logprobs(int32_t n_top, std::vector<TokenLogprob>& top) {
  TRIAD_CHECK(last_token_ >= 0, "sampling: logprobs() needs a successful sample() first");
  TRIAD_CHECK(n_top >= 0, "sampling: logprobs() n_top must be >= 0, got ", n_top);
  const float temp = params_.greedy() ? 1.0f : params_.temperature;

  float lmax = -kInf;
  for (float v : logits_) {
    if (v > lmax) lmax = v;
  }
  // lmax > -inf: the last sample() found a token above -inf.
  double log_z = 0.0;
  size_t n_inf = 0;
  if (lmax == kInf) {
    for (float v : logits_) n_inf += v == kInf ? 1 : 0;
    log_z = std::log(static_cast<double>(n_inf));
  } else {
    double z = 0.0;
    for (float v : logits_) {
      if (v > -kInf) z += std::exp(static_cast<double>((v - lmax) / temp));
    }
    log_z = std::log(z);
  }
  auto logprob_of = [&](float v) -> float {
    if (!(v > -kInf)) return -kInf;
    if (lmax == kInf) return v == kInf ? static_cast<float>(-log_z) : -kInf;
    return static_cast<float>(static_cast<double>((v - lmax) / temp) - log_z);
  };

  top.clear();
  const size_t k = std::min(static_cast<size_t>(n_top), static_cast<size_t>(n_vocab_));
  if (k > 0) {
    const size_t n = static_cast<size_t>(n_vocab_);
    for (size_t i = 0; i < n; ++i) {
      const float v = logits_[i];
      cand_[i] = Candidate{static_cast<int32_t>(i), std::isnan(v) ? -kInf : v, 0.0f};
    }
    extend_sorted_prefix(0, k, n);
    top.reserve(k);
    for (size_t i = 0; i < k; ++i) top.push_back({cand_[i].id, logprob_of(cand_[i].logit)});
  }
  return {last_token_, logprob_of(logits_[static_cast<size_t>(last_token_)])};
}

}  // namespace triad
