// One request's drafting policy for speculative decoding (engine.cpp): whether each draft source
// may draft this step, how far, and what verification's results do to that.
//
// Sources: kLookup (prompt lookup, ngram_lookup.h: free to ask) and kModel (the draft model,
// draft_model.h). Per source, a running share of its drafts accepted (a running average over
// about the last 3 drafts, starting at 1):
//   - draft length: ceil(k * share), in [1, k], so a source whose drafts are half refused drafts
//     half as far;
//   - below the source's floor (kMinAcceptShare), it sits out the request's next kPauseSteps
//     steps, then starts again at a share of 0.3 (short drafts; one more refusal pauses again).
// A rejected draft token is not free: it is a row of the verifying step (on two cores a 5-token
// step costs about 1.2-1.7 one-token steps), and from the draft model also a draft-model step,
// about half a target step when the draft has a third of the target's bytes. The floors are where
// drafting stops paying by those costs.
// The verifying rows' price depends on the batch (step_cost.h): a draft's token j is verified
// only when the j - 1 before it were accepted, so it yields a token with probability p^j (p: the
// source's running per-token acceptance, accepted / (accepted + refusals) over about the last 3
// drafts, starting at 1 with the weight of 3 tokens so that one early refusal does not silence
// a source), and it is worth its row when p^j exceeds the step's row share. length(src,
// row_share) cuts the draft there, to none when even its first token does not pay; a source cut
// to none for kPauseSteps steps in a row drafts one token (a probe: its acceptance is measured
// again). Measured on an Intel Xeon (BENCHMARKS.md): the share was 0.57-0.87 at 16 streams, and
// the cut refused 60-70% fewer draft rows there; one stream kept its 2-4x.
// Thread-safety: a plain value, owned by the engine loop's state of one request.
#pragma once

#include <cstdint>

namespace triad::engine {

class DraftPolicy {
 public:
  static constexpr int kLookup = 0, kModel = 1;
  static constexpr float kMinAcceptShare[2] = {0.25f, 0.6f};
  static constexpr int32_t kPauseSteps = 32;

  // k: the request's draft length per step (0: no speculation).
  explicit DraftPolicy(int32_t k = 0) : k_(k) {}

  bool enabled() const { return k_ > 0; }
  // Whether `src` may draft this step; a paused source spends one step of its pause instead.
  bool ready(int src);
  // How far `src` drafts now.
  int32_t length(int src) const;
  // The same, cut to the tokens whose chance of acceptance (p^j) exceeds row_share (a step's
  // row share, StepCost::row_share): may be 0 (no draft this step), except for the probe after
  // kPauseSteps such steps in a row. Call once per step that could draft.
  int32_t length(int src, double row_share);
  // The running per-token acceptance of `src` (1 before its first draft).
  float acceptance(int src) const { return taken_[src] / tried_[src]; }
  // Pauses `src` for kPauseSteps steps (e.g. the draft model's cache had no room).
  void pause(int src) { pause_[src] = kPauseSteps; }
  // The source of this step's draft (-1: none), set when the draft is handed to the scheduler.
  void set_source(int src) { source_ = src; }
  int source() const { return source_; }
  // After verification: `accepted` of `drafted` tokens of this step's draft were taken.
  void verified(int32_t drafted, int32_t accepted);

 private:
  int32_t k_;
  float share_[2] = {1.f, 1.f};
  float taken_[2] = {3.f, 3.f}, tried_[2] = {3.f, 3.f};  // decayed accepted / (accepted + refusals)
  int32_t cut_[2] = {0, 0};  // consecutive steps cut to no draft
  int32_t pause_[2] = {0, 0};
  int source_ = -1;
};

}  // namespace triad::engine
