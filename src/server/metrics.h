// Prometheus metrics of the server, per served model: latency histograms (time to first token,
// inter-token latency, end-to-end latency, queue time) and request counters. Engine gauges
// (running / waiting requests, KV usage, prefix-cache hits, token counters) are read from
// Engine::stats() when /metrics is scraped.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace triad::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v) {
    std::lock_guard<std::mutex> lk(mu_);
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += v;
    ++n_;
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
