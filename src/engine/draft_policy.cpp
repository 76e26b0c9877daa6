// DraftPolicy (draft_policy.h).
#include "engine/draft_policy.h"

#include <algorithm>
#include <cmath>

namespace triad::engine {

bool DraftPolicy::ready(int src) {
  if (pause_[src] == 0) return true;
  --pause_[src];
  return false;
}

int32_t DraftPolicy::length(int src) const {
  return std::clamp(static_cast<int32_t>(std::ceil(static_cast<float>(k_) * share_[src])), 1, k_);
}

void DraftPolicy::verified(int32_t drafted, int32_t accepted) {
  const int src = source_;
  if (src < 0 || drafted <= 0) return;
  float& share = share_[src];
  share = 0.7f * share + 0.3f * static_cast<float>(accepted) / static_cast<float>(drafted);
  if (share < kMinAcceptShare[src]) {
    pause_[src] = kPauseSteps;
    share = 0.3f;
  }
}

}  // namespace triad::engine
