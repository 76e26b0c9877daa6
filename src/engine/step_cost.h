// What one more row of a decode step costs, learned from the engine's own steps: the price a
// speculative draft token pays to be verified (draft_policy.h).
//
// A step of `rows` rows takes about a + b * rows seconds: a is what every step pays whatever its
// rows (the weights streamed from memory once, the barriers), b what each row adds (its share of
// the arithmetic, its logits). With n requests decoding, a step yields n tokens at c(n) / n
// seconds each; a draft token adds a row (b seconds) and yields a token only if it is accepted.
// So it pays when its chance of acceptance exceeds
//   row_share(n) = b * n / (a + b * n),
// the share of an n-row step that its rows cost. On two cores a one-stream decode step is
// memory-bound (a dominates: a 5-token step costs 1.2-1.7 one-token steps, so row_share(1) is
// about 0.05-0.17), a 16-stream step mostly arithmetic (fits of 0.57-0.87 on an Intel Xeon whose
// 16 rows fill the vector units; BENCHMARKS.md): a draft that pays for one stream may not pay
// for 16.
//
// The fit: weighted least squares of seconds against rows over decode steps (prompt rows cost
// differently: long attention, a compute-bound regime), each step's weight decaying by kDecay per
// step (about the last 50 steps). Rows must have varied (weighted variance >= kMinVariance: drafts
// come and go, requests arrive and finish) for a new estimate; otherwise the last one stands, so
// a batch that stops drafting keeps the price that stopped it. Once fitted, a step counts as at
// most kMaxOverFit times its predicted time (noise only adds time; a load that lasts still moves
// the fit, by up to that factor per step). Until a first estimate exists
// row_share() is 0 (drafts are not cut). It is at most kMaxRowShare: every step streams the
// weights once, so a fixed part of nothing is a fit's noise (e.g. a tiny model under a
// sanitizer), and a source whose drafts are (nearly) always taken keeps drafting.
// Thread-safety: a plain value, owned by the engine loop.
#pragma once

#include <cstdint>

namespace triad::engine {

class StepCost {
 public:
  static constexpr double kDecay = 0.98;
  static constexpr double kMinVariance = 2.0;  // rows^2
  static constexpr int64_t kMinSteps = 8;
  static constexpr double kMaxRowShare = 0.9;
  static constexpr double kMaxOverFit = 1.25;

  // One decode step of `rows` rows took `seconds`.
  void record(int32_t rows, double seconds);
  // b * n / (a + b * n) of the latest estimate, in [0, kMaxRowShare]; 0 before one exists.
  double row_share(int32_t n) const;
  bool fitted() const { return fitted_; }
  double fixed_s() const { return a_; }
  double per_row_s() const { return b_; }

 private:
  double w_ = 0, wx_ = 0, wxx_ = 0, wy_ = 0, wxy_ = 0;  // decayed sums
  int64_t steps_ = 0;
  bool fitted_ = false;
  double a_ = 0, b_ = 0;
};

}  // namespace triad::engine
