// StopMatcher: finds stop strings in generated text that arrives in pieces (one token's text at
// a time) and releases only text that can no longer turn into a stop string, so a stop string
// split across tokens never leaks, not even partly.
// Thread-safety: none (one per generated sequence).
#pragma once

#include <string>
#include <vector>

namespace triad::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds `piece`; returns the text that is now safe to emit. After a stop string was found,
  // stopped() is true, the returned text ends right before it, and later calls return "".
  std::string feed(const std::string& piece) {
    if (stopped_) return {};
    held_ += piece;
    // The earliest complete stop string wins.
    size_t best = std::string::npos;
    for (const std::string& s : stops_) {
      if (s.empty()) continue;
      const size_t at = held_.find(s);
      if (at < best) best = at;
    }
    if (best != std::string::npos) {
      stopped_ = true;
      std::string out = held_.substr(0, best);
      held_.clear();
      return out;
    }
    // Hold back the longest suffix that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const std::string& s : stops_) {
      const size_t max_len = std::min(s.size() - (s.empty() ? 0 : 1), held_.size());
      for (size_t len = max_len; len > keep; --len)
        if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  // End of generation without a stop string: the held-back text is final.
  std::string flush() {
    if (stopped_) return {};
    std::string out = std::move(held_);
    held_.clear();
    return out;
  }
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace triad::server
