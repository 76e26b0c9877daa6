// StepCost (step_cost.h).
#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

namespace triad::engine {

void StepCost::record(int32_t rows, double seconds) {
  if (rows <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  const double x = rows;
  // Noise only ever adds time (a thread descheduled, a page fault): a step slower than
  // kMaxOverFit times the fit's prediction counts as that much. Unclipped, one hiccup at the
  // widest step (least squares weighs it most) took a tiny model's share to the cap and priced
  // every draft out (a flaky server test on a loaded VM).
  const double y = fitted_ ? std::min(seconds, kMaxOverFit * (a_ + b_ * x)) : seconds;
  w_ = kDecay * w_ + 1;
  wx_ = kDecay * wx_ + x;
  wxx_ = kDecay * wxx_ + x * x;
  wy_ = kDecay * wy_ + y;
  wxy_ = kDecay * wxy_ + x * y;
  ++steps_;
  if (steps_ < kMinSteps) return;
  const double mx = wx_ / w_, my = wy_ / w_;
  const double var = wxx_ / w_ - mx * mx;
  if (var < kMinVariance) return;
  const double b = (wxy_ / w_ - mx * my) / var;
  // A fixed part below zero (noise, or steps whose cost grows faster than their rows) is read as
  // none: every second of the step is then the rows' (row_share() caps it).
  b_ = std::max(b, 0.0);
  a_ = std::max(my - b_ * mx, 0.0);
  fitted_ = true;
}

double StepCost::row_share(int32_t n) const {
  if (!fitted_ || n <= 0) return 0;
  const double rows = b_ * n, total = a_ + rows;
  return total > 0 ? std::clamp(rows / total, 0.0, kMaxRowShare) : 0.0;
}

}  // namespace triad::engine
