// CollectSink: an engine OutputSink that records a request's tokens with their arrival times
// and lets another thread wait for the finish.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_api.h"

namespace triad::app {

class CollectSink : public engine::OutputSink {
 public:
  using Clock = std::chrono::steady_clock;

  void on_token(engine::RequestId, const engine::TokenOutput& t) override {
    std::lock_guard<std::mutex> lk(mu_);
    tokens_.push_back(t.id);
    times_.push_back(Clock::now());
  }
  void on_finish(engine::RequestId, engine::FinishReason r, const engine::RequestTimings& t,
                 const std::string& e) override {
    std::lock_guard<std::mutex> lk(mu_);
    reason_ = r;
    timings_ = t;
    error_ = e;
    done_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return done_; });
  }
  bool done() {
    std::lock_guard<std::mutex> lk(mu_);
    return done_;
  }
  // Valid after wait().
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<Clock::time_point>& times() const { return times_; }
  engine::FinishReason reason() const { return reason_; }
  const engine::RequestTimings& timings() const { return timings_; }
  const std::string& error() const { return error_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<int32_t> tokens_;
  std::vector<Clock::time_point> times_;
  engine::FinishReason reason_ = engine::FinishReason::kNone;
  engine::RequestTimings timings_;
  std::string error_;
};

}  // namespace triad::app
