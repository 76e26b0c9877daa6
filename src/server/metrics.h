// Prometheus metrics of the server, per served model: latency histograms (time to first token,
// inter-token latency, end-to-end latency, queue time) and request counters. Engine gauges
// (running / waiting requests, KV usage, prefix-cache hits, token counters) are read from
// Engine::stats() when /metrics is scraped. Each histogram also keeps its recent observations
// (the last kRecentSeconds, at most kRecentMax) for the percentiles of /stats.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace triad::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  static constexpr double kRecentSeconds = 300;
  static constexpr size_t kRecentMax = 100000;
  static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void observe(double v) {
    std::lock_guard<std::mutex> lk(mu_);
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++n_;
    const double t = now_s();
    recent_.emplace_back(t, v);
    while (!recent_.empty() && (recent_.size() > kRecentMax || recent_.front().first < t - kRecentSeconds))
      recent_.pop_front();
  }
  // Percentiles (0..100, nearest rank) of the observations of the last window_s seconds, and
  // their count; nullopt values when there are none.
  struct Recent {
    size_t count = 0;
    std::vector<std::optional<double>> values;
  };
  Recent recent(double window_s, const std::vector<double>& percentiles) const {
    std::vector<double> v;
    {
      std::lock_guard<std::mutex> lk(mu_);
      const double from = now_s() - window_s;
      for (auto it = recent_.rbegin(); it != recent_.rend() && it->first >= from; ++it) v.push_back(it->second);
    }
    Recent r;
    r.count = v.size();
    // Each rank by selection (linear time; /stats asks every second for up to kRecentMax
    // values), in ascending rank order so each search starts where the last one ended.
    std::vector<std::pair<size_t, size_t>> ranks;  // (rank, index into percentiles)
    for (size_t i = 0; i < percentiles.size(); ++i) {
      r.values.emplace_back();
      if (v.empty()) continue;
      const auto k = static_cast<size_t>(std::ceil(percentiles[i] / 100.0 * static_cast<double>(v.size())));
      ranks.emplace_back(std::min(v.size() - 1, k == 0 ? 0 : k - 1), i);
    }
    std::sort(ranks.begin(), ranks.end());
    size_t lo = 0;
    for (const auto& [rank, i] : ranks) {
      std::nth_element(v.begin() + static_cast<std::ptrdiff_t>(lo), v.begin() + static_cast<std::ptrdiff_t>(rank), v.end());
      r.values[i] = v[rank];
      lo = rank;
    }
    return r;
  }
  // Appends the _bucket / _sum / _count lines of `name` with label set `labels` ("k=\"v\"").
  void render(std::ostringstream& o, const std::string& name, const std::string& labels) const {
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
      cum += counts_[i];
      o << name << "_bucket{" << labels << ",le=\"" << bounds_[i] << "\"} " << cum << "\n";
    }
    cum += counts_.back();
    o << name << "_bucket{" << labels << ",le=\"+Inf\"} " << cum << "\n";
    o << name << "_sum{" << labels << "} " << sum_ << "\n";
    o << name << "_count{" << labels << "} " << n_ << "\n";
  }

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t n_ = 0;
  std::deque<std::pair<double, double>> recent_;  // (steady seconds, value), oldest first
};

struct ModelMetrics {
  static std::vector<double> latency_bounds() {
    return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120};
  }
  Histogram ttft{latency_bounds()};
  Histogram itl{latency_bounds()};
  Histogram e2e{latency_bounds()};
  Histogram queue{latency_bounds()};
  std::atomic<uint64_t> requests_ok{0}, requests_error{0}, requests_cancelled{0}, requests_rejected{0};
  std::atomic<uint64_t> embedding_requests{0};  // /v1/embeddings requests answered
};

}  // namespace triad::server
