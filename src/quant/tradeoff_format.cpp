// Formatting helpers shared by the tradeoff report's renderers (tradeoff_format.h).
#include "quant/tradeoff_format.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cctype>
#include <limits>

namespace triad::quant::detail {

std::string fmt(const char* f, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, f);
  const int n = std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string s(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, f);
  std::vsnprintf(s.data(), s.size(), f, ap);
  va_end(ap);
  s.resize(static_cast<size_t>(n));
  return s;
}

bool measured(double tps) {
  return std::isfinite(tps) && tps > 0;
}

// "8.00" -> "8", "7.50" -> "7.5" (only after a decimal point).
std::string trim_zeros(std::string s) {
  const size_t dot = s.find('.');
  if (dot == std::string::npos) return s;
  size_t end = s.find_first_not_of("0123456789", dot + 1);
  if (end == std::string::npos) end = s.size();
  size_t last = end;
  while (last > dot + 1 && s[last - 1] == '0') --last;
  if (last == dot + 1) last = dot;
  return s.substr(0, last) + s.substr(end);
}

// Top-1 agreement as a percentage, rounded down to 2 decimals so it never overstates agreement.
std::string format_top1(double frac) {
  if (!std::isfinite(frac)) return "n/a";
  const double v = std::floor(frac * 10000.0 + 1e-6) / 100.0;
  return fmt("%.2f%%", v);
}

std::string format_tps(double v) {
  if (!measured(v)) return "\xe2\x80\x93";  // an en dash: not measured
  if (v >= 100) return fmt("%.0f", v);
  if (v >= 10) return fmt("%.1f", v);
  return fmt("%.2f", v);
}

std::string format_pct(double v) {  // a share already in percent
  if (!std::isfinite(v)) return "n/a";
  return v >= 10 ? fmt("%.0f%%", v) : fmt("%.1f%%", v);
}

std::string format_kld(const TradeoffPoint& p) {
  if (p.is_base) return "0";
  const double k = effective_kld(p);
  return std::isfinite(k) ? format_sig(k, 4) : "n/a";
}

std::string display_label(const TradeoffPoint& p, size_t i) {
  if (!p.label.empty()) return p.label;
  if (!p.weight_type.empty() || !p.kv_type.empty())
    return p.weight_type + (p.imatrix ? "+imatrix" : "") + " / kv " + p.kv_type;
  return "point " + std::to_string(i);
}

// Whether a label already says "base" (any case), so " (base)" need not be added.
bool mentions_base(const std::string& label) {
  std::string l = label;
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l.find("base") != std::string::npos;
}

// Index of the first base point, if any.
std::optional<size_t> base_index(const TradeoffReport& r) {
  for (size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].is_base) return i;
  return std::nullopt;
}

// The share of the base's memory a point needs, in percent (NaN when there is no usable base).
double memory_share(const TradeoffReport& r, const TradeoffPoint& p) {
  const auto b = base_index(r);
  if (!b) return std::numeric_limits<double>::quiet_NaN();
  const uint64_t base_mem = memory_for_one_sequence(r, r.points[*b]);
  if (base_mem == 0) return std::numeric_limits<double>::quiet_NaN();
  return 100.0 * static_cast<double>(memory_for_one_sequence(r, p)) / static_cast<double>(base_mem);
}

// Counts UTF-8 code points (for estimating label widths).
size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

// Cuts a string to at most `max` code points, ending it with an ellipsis when cut.
std::string utf8_truncate(const std::string& s, size_t max) {
  if (utf8_length(s) <= max) return s;
  size_t n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == max - 1) break;
      ++n;
    }
  }
  return s.substr(0, i) + "\xe2\x80\xa6";
}

}  // namespace triad::quant::detail
