// KL divergence against stored base log-probabilities (see kld.h).
#include "quant/kld.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <tuple>

#include "base/error.h"

namespace triad::quant {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr float kDropLogP = -16.f;

// (mean, standard error) from a sum and a sum of squares, as llama-perplexity reports them.
std::pair<double, double> mean_err(double sum, double sum2, int64_t n) {
  if (n < 1) return {0, 0};
  const double f = sum / static_cast<double>(n);
  const double v = sum2 / static_cast<double>(n) - f * f;
  return {f, v > 0 && n > 10 ? std::sqrt(v / static_cast<double>(n - 1)) : 0.0};
}

double percentile(const std::vector<float>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  double p = fraction * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(p);
  p -= static_cast<double>(i);
  return (1 - p) * sorted[i] + p * sorted[std::min(i + 1, sorted.size() - 1)];
}

int64_t scored_per_chunk(uint32_t n_ctx) { return static_cast<int64_t>(n_ctx) - 1 - n_ctx / 2; }

}  // namespace

double encode_log_probs(const float* logits, int32_t n_vocab, int32_t next, uint16_t* record) {
  float max = logits[0], min = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) {
    max = std::max(max, logits[i]);
    min = std::min(min, logits[i]);
  }
  min = std::max(min, max + kDropLogP);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const float lse = static_cast<float>(std::log(sum));
  const float min_log_prob = min - max - lse;
  const float scale = (max - min) / 65535.f;
  std::memcpy(record, &scale, 4);
  std::memcpy(record + 2, &min_log_prob, 4);
  uint16_t* codes = record + 4;
  std::fill(codes, codes + (kld_record_u16(n_vocab) - 4), uint16_t{0});
  if (scale > 0) {
    const float inv = 1 / scale;
    for (int32_t i = 0; i < n_vocab; ++i)
      codes[i] = logits[i] > min
                     ? static_cast<uint16_t>(std::clamp(std::lrint(inv * (logits[i] - min)), 0L, 65535L))
                     : uint16_t{0};
  }
  return static_cast<double>(max) + lse - logits[next];
}

// ---- writer ----

KldBaseWriter::KldBaseWriter(const std::string& path, uint32_t n_ctx, int32_t n_vocab,
                             int32_t n_chunk, const std::vector<int32_t>& tokens)
    : path_(path), tmp_(path + ".tmp"), n_ctx_(n_ctx), n_vocab_(n_vocab), n_chunk_(n_chunk) {
  TRIAD_CHECK(tokens.size() >= static_cast<size_t>(n_ctx) * static_cast<size_t>(n_chunk),
              "kl-divergence base: fewer tokens than chunks");
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  TRIAD_CHECK(out_.good(), "cannot create ", tmp_);
  out_.write(kMagic, 8);
  out_.write(reinterpret_cast<const char*>(&n_ctx), 4);
  out_.write(reinterpret_cast<const char*>(&n_vocab), 4);
  out_.write(reinterpret_cast<const char*>(&n_chunk), 4);
  out_.write(reinterpret_cast<const char*>(tokens.data()),
             static_cast<std::streamsize>(static_cast<size_t>(n_ctx) * static_cast<size_t>(n_chunk) * 4));
  rec_.resize(static_cast<size_t>(scored_per_chunk(n_ctx) * kld_record_u16(n_vocab)));
}

KldBaseWriter::~KldBaseWriter() {
  if (!done_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

double KldBaseWriter::add_chunk(const float* logits, const int32_t* chunk_tokens) {
  TRIAD_CHECK(written_ < n_chunk_, "kl-divergence base: more chunks than announced");
  const int64_t nv = kld_record_u16(n_vocab_);
  double nll = 0;
  const int64_t first = n_ctx_ / 2;
  for (int64_t j = first; j < static_cast<int64_t>(n_ctx_) - 1; ++j)
    nll += encode_log_probs(logits + j * n_vocab_, n_vocab_, chunk_tokens[j + 1],
                            rec_.data() + (j - first) * nv);
  out_.write(reinterpret_cast<const char*>(rec_.data()), static_cast<std::streamsize>(rec_.size() * 2));
  ++written_;
  return nll;
}

void KldBaseWriter::finish() {
  TRIAD_CHECK(written_ == n_chunk_, "kl-divergence base: ", written_, " of ", n_chunk_, " chunks written");
  out_.close();
  TRIAD_CHECK(!out_.fail(), "writing ", tmp_, " failed");
  TRIAD_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename ", tmp_, " to ", path_);
  done_ = true;
}

// ---- reader ----

KldBaseReader::KldBaseReader(std::istream& in, uint64_t expected_size) : in_(in) {
  char magic[8];
  TRIAD_CHECK(in_.read(magic, 8) && std::memcmp(magic, kMagic, 8) == 0,
              "not a logits file (llama-perplexity / triad perplexity --kl-divergence-base)");
  int32_t v[3];
  TRIAD_CHECK(in_.read(reinterpret_cast<char*>(v), 12).good(), "logits file: truncated header");
  n_ctx_ = static_cast<uint32_t>(v[0]);
  n_vocab_ = v[1];
  n_chunk_ = v[2];
  TRIAD_CHECK(n_ctx_ >= 8 && n_ctx_ <= (1u << 20), "logits file: n_ctx ", n_ctx_, " out of range");
  TRIAD_CHECK(n_vocab_ >= 1 && n_vocab_ <= (1 << 24), "logits file: n_vocab ", n_vocab_, " out of range");
  TRIAD_CHECK(n_chunk_ >= 1, "logits file: n_chunk ", n_chunk_, " out of range");
  const uint64_t n_tokens = uint64_t{n_ctx_} * static_cast<uint64_t>(n_chunk_);
  const uint64_t rec = static_cast<uint64_t>(scored_per_chunk(n_ctx_)) *
                       static_cast<uint64_t>(kld_record_u16(n_vocab_)) * 2;
  // n_chunk (< 2^31) times a chunk's bytes (< 2^45) can pass 2^64: check before multiplying.
  TRIAD_CHECK(static_cast<uint64_t>(n_chunk_) <= (uint64_t{1} << 62) / (rec + 4 * uint64_t{n_ctx_}),
              "logits file: sizes overflow");
  const uint64_t want = 20 + 4 * n_tokens + static_cast<uint64_t>(n_chunk_) * rec;
  TRIAD_CHECK(want == expected_size, "logits file: ", expected_size, " bytes, but its header (n_ctx ",
              n_ctx_, ", n_vocab ", n_vocab_, ", ", n_chunk_, " chunks) needs ", want);
  tokens_.resize(n_tokens);
  TRIAD_CHECK(in_.read(reinterpret_cast<char*>(tokens_.data()), static_cast<std::streamsize>(n_tokens * 4)).good(),
              "logits file: truncated tokens");
  for (int32_t t : tokens_)
    TRIAD_CHECK(t >= 0 && t < n_vocab_, "logits file: token id ", t, " outside the vocabulary of ", n_vocab_);
}

void KldBaseReader::read_chunk(std::vector<uint16_t>& records) {
  TRIAD_CHECK(read_ < n_chunk_, "logits file: no chunk ", read_ + 1);
  records.resize(static_cast<size_t>(scored_per_chunk(n_ctx_) * kld_record_u16(n_vocab_)));
  TRIAD_CHECK(in_.read(reinterpret_cast<char*>(records.data()), static_cast<std::streamsize>(records.size() * 2)).good(),
              "logits file: truncated at chunk ", read_ + 1);
  ++read_;
}

// ---- statistics ----

void KldStats::add_chunk(const float* logits, const uint16_t* records, const int32_t* chunk_tokens,
                         int32_t n_ctx) {
  const int64_t nv = kld_record_u16(n_vocab_);
  const int32_t first = n_ctx / 2;
  for (int32_t j = first; j < n_ctx - 1; ++j)
    add(logits + static_cast<size_t>(j) * static_cast<size_t>(n_vocab_), records + (j - first) * nv,
        chunk_tokens[j + 1]);
}

void KldStats::add(const float* logits, const uint16_t* record, int32_t next) {
  const int32_t n = n_vocab_;
  int32_t imax = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[imax]) imax = i;
  const double max = logits[imax];
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = max + std::log(sum);  // log q_i = logits_i - lse
  float scale, min_lp;
  std::memcpy(&scale, record, 4);
  std::memcpy(&min_lp, record + 2, 4);
  const uint16_t* codes = record + 4;
  double kld = 0;
  int32_t ibase = 0;
  double best = 0;
  for (int32_t i = 0; i < n; ++i) {
    const double lp = static_cast<double>(scale) * codes[i] + min_lp;
    if (i == 0 || lp > best) {
      best = lp;
      ibase = i;
    }
    if (lp > kDropLogP) kld += std::exp(lp) * (lp - (logits[i] - lse));
  }
  const double nll = lse - logits[next];
  const double nll_base = -(static_cast<double>(scale) * codes[next] + min_lp);
  const double dp = std::exp(-nll) - std::exp(-nll_base);
  const double dtop = std::fabs(std::exp(logits[ibase] - lse) - std::exp(best));
  sum_nll_ += nll;
  sum_nll2_ += nll * nll;
  sum_nllb_ += nll_base;
  sum_nllb2_ += nll_base * nll_base;
  sum_cross_ += nll * nll_base;
  sum_kld_ += kld;
  sum_kld2_ += kld * kld;
  sum_dp_ += dp;
  sum_dp2_ += dp * dp;
  sum_dtop_ += dtop;
  sum_dtop2_ += dtop * dtop;
  same_top_ += imax == ibase;
  kld_.push_back(static_cast<float>(kld));
  dp_.push_back(static_cast<float>(std::fabs(dp)));
  dtop_.push_back(static_cast<float>(dtop));
}

KldSummary KldStats::summary() const {
  KldSummary s;
  const int64_t n = count();
  s.count = n;
  if (n == 0) return s;
  const auto [lq, lq_err] = mean_err(sum_nll_, sum_nll2_, n);
  const auto [lb, lb_err] = mean_err(sum_nllb_, sum_nllb2_, n);
  s.ppl = std::exp(lq);
  s.ppl_err = s.ppl * lq_err;
  s.ppl_base = std::exp(lb);
  s.ppl_base_err = s.ppl_base * lb_err;
  const double cov = n < 10 ? 0.0
                            : (sum_cross_ / static_cast<double>(n) - lq * lb) / static_cast<double>(n - 1);
  s.ppl_ratio = std::exp(lq - lb);
  s.ppl_ratio_err = s.ppl_ratio * std::sqrt(std::max(0.0, lq_err * lq_err + lb_err * lb_err - 2 * cov));
  std::tie(s.kld_mean, s.kld_err) = mean_err(sum_kld_, sum_kld2_, n);
  std::tie(s.dp_mean, s.dp_err) = mean_err(sum_dp_, sum_dp2_, n);
  s.dp_rms = std::sqrt(sum_dp2_ / static_cast<double>(n));
  std::tie(s.dtop_mean, s.dtop_err) = mean_err(sum_dtop_, sum_dtop2_, n);
  s.top1 = static_cast<double>(same_top_) / static_cast<double>(n);
  s.top1_err = n > 1 ? std::sqrt(s.top1 * (1 - s.top1) / static_cast<double>(n - 1)) : 0;
  auto sorted = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto k = sorted(kld_), d = sorted(dp_), t = sorted(dtop_);
  s.kld_median = percentile(k, 0.5);
  s.kld_p99 = percentile(k, 0.99);
  s.kld_p999 = percentile(k, 0.999);
  s.kld_max = k.back();
  s.dp_p99 = percentile(d, 0.99);
  s.dtop_p99 = percentile(t, 0.99);
  return s;
}

std::string KldSummary::to_json() const {
  std::ostringstream o;
  o.precision(9);
  o << "{\"count\": " << count << ", \"ppl\": " << ppl << ", \"ppl_err\": " << ppl_err
    << ", \"ppl_base\": " << ppl_base << ", \"ppl_base_err\": " << ppl_base_err
    << ", \"ppl_ratio\": " << ppl_ratio << ", \"ppl_ratio_err\": " << ppl_ratio_err
    << ", \"kld_mean\": " << kld_mean << ", \"kld_err\": " << kld_err
    << ", \"kld_median\": " << kld_median << ", \"kld_p99\": " << kld_p99
    << ", \"kld_p999\": " << kld_p999 << ", \"kld_max\": " << kld_max << ", \"top1\": " << top1
    << ", \"top1_err\": " << top1_err << ", \"dp_mean\": " << dp_mean << ", \"dp_err\": " << dp_err
    << ", \"dp_rms\": " << dp_rms << ", \"dp_p99\": " << dp_p99 << ", \"dtop_mean\": " << dtop_mean
    << ", \"dtop_err\": " << dtop_err << ", \"dtop_p99\": " << dtop_p99 << "}";
  return o.str();
}

}  // namespace triad::quant
