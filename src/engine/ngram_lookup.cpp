#include "engine/ngram_lookup.h"

#include <algorithm>

namespace triad::engine {
namespace {

// Start of the latest occurrence of `needle` in hay[0, end) that has at least one token after
// it within hay, or -1.
int64_t latest(std::span<const int32_t> hay, int64_t end, std::span<const int32_t> needle) {
  const auto n = static_cast<int64_t>(needle.size());
  const auto size = static_cast<int64_t>(hay.size());
  for (int64_t s = std::min(end, size - 1) - n; s >= 0; --s)
    if (hay[static_cast<size_t>(s)] == needle[0] && std::equal(needle.begin(), needle.end(), hay.begin() + s))
      return s;
  return -1;
}

}  // namespace

void ngram_draft(std::span<const int32_t> tokens, std::span<const int32_t> prediction, const NgramLookup& cfg,
                 int32_t k, std::vector<int32_t>& out) {
  out.clear();
  if (k <= 0 || cfg.min_n < 1) return;
  const auto t = static_cast<int64_t>(tokens.size());
  // The prediction first (at every n), then the context itself.
  for (const bool in_prediction : {true, false}) {
    if (!in_prediction && !cfg.context) break;
    const std::span<const int32_t> src = in_prediction ? prediction : tokens;
    // In the context, an occurrence ends at or before token t - 2: not the suffix itself.
    const int64_t end = in_prediction ? static_cast<int64_t>(prediction.size()) : t - 1;
    for (int64_t n = std::min<int64_t>(cfg.max_n, t); n >= cfg.min_n; --n) {
      const int64_t at = latest(src, end, tokens.subspan(static_cast<size_t>(t - n)));
      if (at < 0) continue;
      const int64_t from = at + n;
      const int64_t to = std::min<int64_t>(from + k, static_cast<int64_t>(src.size()));
      out.assign(src.begin() + from, src.begin() + to);
      return;
    }
  }
}

}  // namespace triad::engine
