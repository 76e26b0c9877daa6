#include "base/fair_share.h"

#include <algorithm>

namespace triad {

void FairShare::arrive(Id id) {
  const double low = floor_ - slack_;
  if (clock_.size() >= kPrune) std::erase_if(clock_, [&](const auto& e) { return e.second <= low; });
  auto [it, added] = clock_.try_emplace(id, low);
  it->second = std::max(it->second, low);
}

void FairShare::serve(Id id) { floor_ = std::max(floor_, clock(id)); }

void FairShare::charge(Id id, double seconds) { clock_[id] += std::max(0.0, seconds); }

double FairShare::clock(Id id) const {
  const auto it = clock_.find(id);
  return it == clock_.end() ? floor_ - slack_ : it->second;
}

}  // namespace triad
