// The dashboard's data, internal to src/server: a sampler that records, once a second, each
// model's output tokens/s, running and waiting requests, KV blocks in use and recent latency
// medians (the last kHistory seconds), read by GET /stats (Service::stats, stats.cpp).
// Thread-safety: the sampler runs on its own thread; history() may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "server/service.h"

namespace triad::server {

struct StatsSample {
  double t = 0;                  // unix seconds
  double output_tokens_per_s = 0;
  int32_t running = 0, waiting = 0;
  int64_t kv_used_blocks = 0;
  std::optional<double> ttft_p50_s, itl_p50_s;  // over the last 10 s
};

class StatsSampler {
 public:
  static constexpr size_t kHistory = 300;
  // The models' engines must stay alive until stop() (or the destructor) returns.
  explicit StatsSampler(std::vector<ServedModel*> models);
  ~StatsSampler();  // stop()
  // Stops and joins the thread: no engine is read after it returns; history stays readable.
  // Idempotent (not to be called from two threads at once).
  void stop();
  StatsSampler(const StatsSampler&) = delete;
  StatsSampler& operator=(const StatsSampler&) = delete;
  std::vector<StatsSample> history(size_t model) const;
  // Output tokens/s over the last 10 s of samples (0 before two samples exist).
  double recent_tokens_per_s(size_t model) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<StatsSampler> make_stats_sampler(const std::vector<ServedModel*>& models);

}  // namespace triad::server
