// SamplingParams::validate(): per-field range checks with messages that name the field and
// the value received. Stateless; safe to call from any thread.
#include "sampling/sampling_params.h"

#include <cmath>

#include "base/error.h"

namespace triad {

void SamplingParams::validate() const {
  TRIAD_CHECK(std::isfinite(temperature), "sampling: temperature must be a finite number, got ",
              temperature);
  TRIAD_CHECK(top_k >= 0, "sampling: top_k must be >= 0 (0 disables it), got ", top_k);
  TRIAD_CHECK(top_p > 0.0f && top_p <= 1.0f,  // also rejects NaN
              "sampling: top_p must lie in (0, 1] (1 disables it), got ", top_p);
  TRIAD_CHECK(min_p >= 0.0f && min_p <= 1.0f,
              "sampling: min_p must lie in [0, 1] (0 disables it), got ", min_p);
  TRIAD_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f,
              "sampling: repetition_penalty must be a finite number > 0 (1 disables it), got ",
              repetition_penalty);
  TRIAD_CHECK(std::isfinite(presence_penalty),
              "sampling: presence_penalty must be a finite number, got ", presence_penalty);
  TRIAD_CHECK(std::isfinite(frequency_penalty),
              "sampling: frequency_penalty must be a finite number, got ", frequency_penalty);
  TRIAD_CHECK(penalty_last_n >= -1,
              "sampling: penalty_last_n must be >= -1 (-1: all tokens, 0: none), got ",
              penalty_last_n);
  for (const auto& [id, bias] : logit_bias) {
    TRIAD_CHECK(id >= 0, "sampling: logit_bias token id must be >= 0, got ", id);
    TRIAD_CHECK(!std::isnan(bias), "sampling: logit_bias for token ", id, " is NaN");
  }
}

}  // namespace triad
