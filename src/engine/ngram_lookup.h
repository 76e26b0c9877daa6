// Prompt-lookup drafting (speculative decoding without a second model): the next tokens are
// guessed by finding the sequence's latest n tokens earlier in its own context (the prompt and
// the output so far) or in a caller's predicted output, and proposing what followed there.
// Outputs that copy from their prompt (code edits, quoting, extraction, summaries with names and
// numbers) are drafted well; elsewhere a lookup simply finds nothing and no draft is made.
//
// Rule: the suffix of `tokens` of length n, for n from max_n down to min_n, is searched in
// `prediction` (any occurrence); if none matches, the same in `tokens` itself (any occurrence but
// the suffix itself, overlapping it or not). The latest occurrence of the longest matching
// suffix wins; the draft is up to `k` tokens that follow it. An occurrence with nothing after it
// is skipped.
// Cost: O((|tokens| + |prediction|) * max_n) per call, no allocation beyond `out`.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace triad::engine {

struct NgramLookup {
  int32_t min_n = 2;   // shortest suffix searched (>= 1)
  int32_t max_n = 4;   // longest (>= min_n)
  bool context = true; // false: the prediction only
};

// Fills `out` with the draft (cleared first; empty when nothing matches or k <= 0).
void ngram_draft(std::span<const int32_t> tokens, std::span<const int32_t> prediction, const NgramLookup& cfg,
                 int32_t k, std::vector<int32_t>& out);

}  // namespace triad::engine
