// Sampling parameters for one sequence: plain data plus a range check.
//
// The fields mirror the knobs of llama.cpp and the OpenAI API; the order in which the Sampler
// applies them is documented in sampling/sampler.h. A default-constructed SamplingParams is
// "pure sampling at temperature 1" (every transformation disabled). validate() checks each
// field on its own; the token ids in logit_bias are checked against the vocabulary size by the
// Sampler constructor, which is the first place that knows it. Plain value type: copying and
// reading from several threads is safe, mutation is not.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace triad {

struct SamplingParams {
  // Divides the logits (after top-k). <= 0: greedy (argmax, ties -> lowest id). Must be finite.
  float temperature = 1.0f;
  // Keep only the k most likely tokens. 0 or >= n_vocab: disabled. Must be >= 0.
  int32_t top_k = 0;
  // Nucleus: keep the smallest most-likely prefix whose probability mass is >= top_p.
  // Must lie in (0, 1]; 1: disabled.
  float top_p = 1.0f;
  // Keep tokens with p >= min_p * p_max. Must lie in [0, 1]; 0: disabled.
  float min_p = 0.0f;
  // CTRL-style, for every token in the penalty window: logit > 0 ? logit / pen : logit * pen.
  // Must be finite and > 0; 1: disabled.
  float repetition_penalty = 1.0f;
  // OpenAI-style: logit -= presence_penalty * (count > 0). Must be finite; 0: disabled.
  float presence_penalty = 0.0f;
  // OpenAI-style: logit -= frequency_penalty * count. Must be finite; 0: disabled.
  float frequency_penalty = 0.0f;
  // How many of the most recently accepted tokens the three penalties look at.
  // -1: all of them, 0: none (penalties disabled). Must be >= -1.
  int32_t penalty_last_n = 64;
  // (token id, bias) added to the logits before everything else. A bias of -inf bans a token,
  // a large positive bias (or +inf) forces it. Ids must be >= 0 (and < n_vocab, checked by the
  // Sampler); biases must not be NaN. Repeated ids add up.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Seed for reproducible runs; absent: seeded from std::random_device.
  std::optional<uint64_t> seed;

  // Throws triad::Error naming the first field that is out of range.
  void validate() const;

  // True when at least one of the three penalties would change a logit.
  bool penalties_enabled() const {
    return penalty_last_n != 0 &&
           (repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
  bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace triad
