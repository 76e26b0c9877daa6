// Internal to the tradeoff report (tradeoff_report.cpp, tradeoff_chart.cpp): number and text
// formatting shared by the JSON / Markdown / HTML renderers and the SVG charts. Nothing here
// prints NaN or infinity: unknown values read "n/a", unmeasured speeds an en dash.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "quant/tradeoff_report.h"

namespace triad::quant::detail {

// printf into a std::string (any length).
__attribute__((format(printf, 1, 2))) std::string fmt(const char* f, ...);
// Whether a tokens/s figure was measured (finite and > 0).
bool measured(double tps);
// "8.00" -> "8", "7.50" -> "7.5" (only after a decimal point).
std::string trim_zeros(std::string s);
// Top-1 agreement as a percentage, rounded down to 2 decimals (never overstates agreement).
std::string format_top1(double frac);
std::string format_tps(double v);
std::string format_pct(double v);  // a share already in percent
std::string format_kld(const TradeoffPoint& p);
// The point's label, or one made from its types, or "point i".
std::string display_label(const TradeoffPoint& p, size_t i);
// Whether a label already says "base" (any case), so " (base)" need not be added.
bool mentions_base(const std::string& label);
// Index of the first base point, if any.
std::optional<size_t> base_index(const TradeoffReport& r);
// The share of the base's memory a point needs, in percent (NaN when there is no usable base).
double memory_share(const TradeoffReport& r, const TradeoffPoint& p);
// UTF-8 code points (for estimating label widths), and a cut to at most `max` of them ending
// in an ellipsis.
size_t utf8_length(const std::string& s);
std::string utf8_truncate(const std::string& s, size_t max);

}  // namespace triad::quant::detail
