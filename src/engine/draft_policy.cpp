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

int32_t DraftPolicy::length(int src, double row_share) {
  const int32_t n = length(src);
  const double p = acceptance(src);
  int32_t cut = n;
  double pj = 1;
  for (int32_t j = 0; j < n && row_share > 0; ++j) {
    pj *= p;
    if (!(pj > row_share)) {
      cut = j;
      break;
    }
  }
  if (cut > 0) {
    cut_[src] = 0;
    return cut;
  }
  if (++cut_[src] < kPauseSteps) return 0;
  cut_[src] = 0;
  return 1;  // the probe
}

void DraftPolicy::verified(int32_t drafted, int32_t accepted) {
  const int src = source_;
  if (src < 0 || drafted <= 0) return;
  taken_[src] = 0.7f * taken_[src] + static_cast<float>(accepted);
  tried_[src] = 0.7f * tried_[src] + static_cast<float>(accepted + (accepted < drafted ? 1 : 0));
  float& share = share_[src];
  share = 0.7f * share + 0.3f * static_cast<float>(accepted) / static_cast<float>(drafted);
  if (share < kMinAcceptShare[src]) {
    pause_[src] = kPauseSteps;
    share = 0.3f;
  }
}

}  // namespace triad::engine
