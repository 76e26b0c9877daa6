// GET /stats (the live dashboard's JSON, documented in README.md) and the sampler behind its
// history (stats.h), and the embedded pages GET / and GET /dashboard (web/*.html, compiled in by
// src/server/CMakeLists.txt).
#include "server/stats.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>

#include "model/model.h"
#include "server/openai_request.h"

namespace triad::server {

// web/*.html, embedded (web_assets.cpp, generated at build time).
struct WebAsset {
  const char* name;
  const char* data;
  size_t size;
};
extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
const double kProcessStart = unix_seconds();  // uptime's origin (static initialization)

json percentiles(const Histogram::Recent& r) {
  json o = json::object();
  const char* names[] = {"p50", "p90", "p99"};
  for (size_t i = 0; i < 3 && i < r.values.size(); ++i)
    o[names[i]] = r.values[i] ? json(*r.values[i]) : json(nullptr);
  return o;
}

}  // namespace

struct StatsSampler::Impl {
  std::vector<ServedModel*> models;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<std::deque<StatsSample>> history;
  std::vector<int64_t> last_generated;
  std::thread thread;

  // One sample of every model; `record` false only sets the token counters' baseline.
  void sample_all(double dt, bool record) {
    std::vector<StatsSample> now(models.size());
    const double t = unix_seconds();
    for (size_t i = 0; i < models.size(); ++i) {
      const engine::EngineStats s = models[i]->engine->stats();
      StatsSample& x = now[i];
      x.t = t;
      x.running = s.running;
      x.waiting = s.waiting;
      x.kv_used_blocks = s.kv_blocks_used;
      x.output_tokens_per_s =
          last_generated[i] >= 0 && dt > 0 ? static_cast<double>(s.generated_tokens - last_generated[i]) / dt : 0.0;
      last_generated[i] = s.generated_tokens;
      x.ttft_p50_s = models[i]->metrics->ttft.recent(10, {50}).values[0];
      x.itl_p50_s = models[i]->metrics->itl.recent(10, {50}).values[0];
    }
    if (!record) return;
    std::lock_guard<std::mutex> lk(mu);
    for (size_t i = 0; i < models.size(); ++i) {
      history[i].push_back(now[i]);
      while (history[i].size() > kHistory) history[i].pop_front();
    }
  }

  void loop() {
    auto last = std::chrono::steady_clock::now();
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        if (cv.wait_for(lk, std::chrono::seconds(1), [&] { return stop; })) return;
      }
      const auto t = std::chrono::steady_clock::now();
      sample_all(std::chrono::duration<double>(t - last).count(), true);
      last = t;
    }
  }
};

StatsSampler::StatsSampler(std::vector<ServedModel*> models) : impl_(std::make_unique<Impl>()) {
  impl_->models = std::move(models);
  impl_->history.resize(impl_->models.size());
  impl_->last_generated.assign(impl_->models.size(), -1);
  impl_->sample_all(0, false);  // the baseline of the token counters
  impl_->thread = std::thread([this] { impl_->loop(); });
}

StatsSampler::~StatsSampler() { stop(); }

void StatsSampler::stop() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::vector<StatsSample> StatsSampler::history(size_t model) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  const auto& h = impl_->history[model];
  return {h.begin(), h.end()};
}

double StatsSampler::recent_tokens_per_s(size_t model) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  const auto& h = impl_->history[model];
  double sum = 0;
  size_t n = 0;
  for (auto it = h.rbegin(); it != h.rend() && n < 10; ++it, ++n) sum += it->output_tokens_per_s;
  return n ? sum / static_cast<double>(n) : 0.0;
}

std::unique_ptr<StatsSampler> make_stats_sampler(const std::vector<ServedModel*>& models) {
  return std::make_unique<StatsSampler>(models);
}

void Service::stats(std::shared_ptr<ResponseWriter> w) const {
  constexpr double kWindow = 300;
  json models = json::array();
  for (size_t i = 0; i < models_.size(); ++i) {
    const ServedModel& m = *models_[i];
    const engine::EngineStats s = m.engine->stats();
    const ModelMetrics& mm = *m.metrics;
    const Histogram::Recent ttft = mm.ttft.recent(kWindow, {50, 90, 99}), itl = mm.itl.recent(kWindow, {50, 90, 99}),
                            e2e = mm.e2e.recent(kWindow, {50, 90, 99});
    json hist = json::array();
    for (const StatsSample& x : sampler_->history(i))
      hist.push_back({{"t", x.t},
                      {"output_tokens_per_s", x.output_tokens_per_s},
                      {"running", x.running},
                      {"waiting", x.waiting},
                      {"kv_used_blocks", x.kv_used_blocks},
                      {"ttft_p50_s", x.ttft_p50_s ? json(*x.ttft_p50_s) : json(nullptr)},
                      {"itl_p50_s", x.itl_p50_s ? json(*x.itl_p50_s) : json(nullptr)}});
    const double queries = static_cast<double>(s.prefix_queries);
    models.push_back(
        {{"id", m.name},
         {"kind", model_kind_name(m.kind)},
         {"architecture", m.model->config().arch_name},
         {"weight_type", m.weight_type},
         {"weights_bytes", m.weights_bytes},
         {"kv_dtype", m.kv_dtype},
         {"kv_bytes_per_token", m.kv_bytes_per_token},
         {"max_model_len", m.engine->max_model_len()},
         {"running", s.running},
         {"waiting", s.waiting},
         {"kv_blocks",
          {{"total", s.kv_blocks_total},
           {"used", s.kv_blocks_used},
           {"cached", s.kv_blocks_cached},
           {"free", s.kv_blocks_free - s.kv_blocks_cached},
           {"block_tokens", m.engine->config().block_size}}},
         {"kv_bytes", {{"used", s.kv_bytes_used}, {"total", s.kv_bytes_total}}},
         {"prefix_cache",
          {{"queries", s.prefix_queries},
           {"hits", s.prefix_hits},
           {"hit_rate", queries > 0 ? static_cast<double>(s.prefix_hits) / queries : 0.0}}},
         {"preemptions", s.preemptions},
         {"tokens", {{"prompt", s.prompt_tokens}, {"generated", s.generated_tokens}}},
         {"speculative",
          {{"draft_tokens", s.spec_draft_tokens},
           {"accepted_tokens", s.spec_accepted_tokens},
           {"acceptance_rate", s.spec_draft_tokens > 0
                                   ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_draft_tokens)
                                   : 0.0},
           {"row_cost_share", s.spec_row_cost_share},
           {"by_source",
            {{"lookup", {{"draft_tokens", s.spec_lookup_draft_tokens}, {"accepted_tokens", s.spec_lookup_accepted_tokens}}},
             {"draft_model",
              {{"draft_tokens", s.spec_model_draft_tokens}, {"accepted_tokens", s.spec_model_accepted_tokens}}}}}}},
         {"requests",
          {{"ok", mm.requests_ok.load()},
           {"error", mm.requests_error.load()},
           {"cancelled", mm.requests_cancelled.load()},
           {"rejected", mm.requests_rejected.load()},
           {"embedding", mm.embedding_requests.load()}}},
         {"output_tokens_per_s", sampler_->recent_tokens_per_s(i)},
         {"latency",
          {{"window_s", kWindow},
           {"count", e2e.count},
           {"ttft_s", percentiles(ttft)},
           {"itl_s", percentiles(itl)},
           {"e2e_s", percentiles(e2e)}}},
         {"history", std::move(hist)}});
  }
  const double now = unix_seconds();
  const json body{{"time", now}, {"uptime_s", now - kProcessStart}, {"version", "triad 0.1.0"}, {"models", std::move(models)}};
  // Names may come from file stems, not UTF-8: replaced, as send_json does, rather than thrown on.
  w->send(200, "application/json", body.dump(-1, ' ', false, json::error_handler_t::replace), {{"Cache-Control", "no-store"}});
}

bool Service::page(const std::string& path, ResponseWriter& w) const {
  std::string_view name;
  if (path == "/" || path == "/index.html")
    name = "chat.html";
  else if (path == "/dashboard" || path == "/dashboard/")
    name = "dashboard.html";
  else
    return false;
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    if (name != kWebAssets[i].name) continue;
    w.send(200, "text/html; charset=utf-8", std::string(kWebAssets[i].data, kWebAssets[i].size),
           {{"Cache-Control", "no-cache"}, {"X-Content-Type-Options", "nosniff"}});
    return true;
  }
  return false;
}

}  // namespace triad::server
