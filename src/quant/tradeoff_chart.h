// Internal to the tradeoff report (tradeoff_report.cpp): one inline SVG chart of mean KLD (log
// scale, the base on a "0" band) against memory for one sequence (log scale) or against
// generation tokens/s, every point a <circle> with a tooltip and a label, the given frontier
// joined by a polyline. Never writes NaN or infinity; escapes every string.
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "quant/tradeoff_report.h"

namespace triad::quant::detail {

enum class ChartKind { kMemory, kSpeed };

std::string render_chart(const TradeoffReport& r, ChartKind kind, const std::vector<size_t>& frontier);

}  // namespace triad::quant::detail
