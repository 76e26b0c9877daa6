// The `triad tradeoff` report: frontiers, recommendation, JSON / Markdown / HTML (see
// tradeoff_report.h).
#include "quant/tradeoff_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#include "base/error.h"

namespace triad::quant {
namespace {

using json = nlohmann::json;

__attribute__((format(printf, 1, 2))) std::string fmt(const char* f, ...) {
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

// KLD for ordering: unknown sorts last.
double kld_key(const TradeoffPoint& p) {
  const double k = effective_kld(p);
  return std::isfinite(k) ? k : std::numeric_limits<double>::infinity();
}

template <class Dominates>
std::vector<size_t> non_dominated(const std::vector<size_t>& cand, Dominates dominates) {
  std::vector<size_t> out;
  for (size_t i : cand) {
    bool dominated = false;
    for (size_t j : cand)
      if (j != i && dominates(j, i)) {
        dominated = true;
        break;
      }
    if (!dominated) out.push_back(i);
  }
  return out;
}

std::string md_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '|':
      case '\\':
      case '`':
      case '*':
      case '[':
      case ']':
      case '<':
      case '>':
        out += '\\';
        out += c;
        break;
      case '\n':
      case '\r':
      case '\t':
        out += ' ';
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
    }
  }
  return out;
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

// ---- the charts ----

constexpr double kW = 1000, kH = 540;                   // viewBox
constexpr double kL = 96, kR = 968, kT = 58, kB = 470;  // plot area
constexpr double kCharW = 6.9, kLabelH = 15;  // estimated 12px label glyph width, label box height

const char* const kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                "#E69F00", "#56B4E9", "#8C6D31", "#666666"};

// A coordinate for an SVG attribute: finite, bounded, one decimal.
std::string coord(double v) {
  if (!std::isfinite(v)) v = 0;
  v = std::clamp(v, -1e5, 1e5);
  std::string s = fmt("%.1f", v);
  if (s == "-0.0") s = "0.0";
  return s;
}

struct Box {
  double x0, y0, x1, y1;
  double overlap(const Box& o) const {
    const double w = std::min(x1, o.x1) - std::max(x0, o.x0);
    const double h = std::min(y1, o.y1) - std::max(y0, o.y0);
    return w > 0 && h > 0 ? w * h : 0;
  }
  double area() const { return (x1 - x0) * (y1 - y0); }
};

struct ChartPoint {
  size_t index = 0;
  double px = 0, py = 0;  // pixel position
  bool x_missing = false, y_missing = false;
  bool pareto = false;
  std::string color, label, tooltip;
};

// Nice step (1, 2, 2.5, 5 x 10^k) for about `target` intervals over [0, max].
double nice_step(double max, int target) {
  const double raw = max / target;
  const double e = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / e;
  const double nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  return nf * e;
}

int decimals_for(double step) {
  for (int d = 0; d < 8; ++d) {
    const double s = step * std::pow(10.0, d);
    if (std::fabs(s - std::round(s)) < 1e-6 * std::max(1.0, s)) return d;
  }
  return 8;
}

// The x axis: memory on a log2 scale (ticks at powers of two, labelled in KiB/MiB/GiB) or tok/s on
// a linear one; points without a value sit in an "n/a" band at the left.
struct XAxis {
  bool log = false;
  double lo = 0, hi = 1;  // data range (log2 of bytes on a log axis)
  bool na_band = false;
  double x0 = kL + 16, x1 = kR - 16, x_na = kL + 18;
  struct Tick {
    double value;  // in data units (bytes or tok/s)
    std::string label;
    bool grid;
  };
  std::vector<Tick> ticks;

  XAxis(bool log_scale, const std::vector<double>& values, bool has_missing)
      : log(log_scale), na_band(has_missing) {
    if (na_band) x0 = kL + 48;
    double mn = std::numeric_limits<double>::infinity(), mx = -mn;
    for (double v : values) {
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    if (log) {
      if (values.empty()) mn = mx = 1 << 20;
      lo = std::log2(mn);
      hi = std::log2(mx);
      const double pad = std::max(0.12, (hi - lo) * 0.04);
      if (hi - lo < 1) {  // at least an octave, centred on the data
        const double mid = (lo + hi) / 2;
        lo = mid - 0.5;
        hi = mid + 0.5;
      } else {
        lo -= pad;
        hi += pad;
      }
      const double w = hi - lo;
      std::vector<double> mantissas = w <= 1.6   ? std::vector<double>{1, 1.25, 1.5, 1.75}
                                      : w <= 4.5 ? std::vector<double>{1, 1.5}
                                                 : std::vector<double>{1};
      const int every = std::max(1, static_cast<int>(std::ceil(w / 10)));
      for (int e = static_cast<int>(std::floor(lo)); e <= static_cast<int>(std::ceil(hi)); ++e) {
        if (e % every != 0) continue;
        for (double m : mantissas) {
          const double v = m * std::pow(2.0, e);
          const double l2 = std::log2(v);
          if (l2 < lo - 1e-9 || l2 > hi + 1e-9) continue;
          const std::string label =
              v >= 1.8e19 ? fmt("%.3g B", v) : trim_zeros(format_bytes(static_cast<uint64_t>(v)));
          ticks.push_back({v, label, true});
        }
      }
    } else {
      if (values.empty()) mn = 0, mx = 1;
      double span = mx - mn;
      if (span <= 0) span = std::max(std::fabs(mx) * 0.4, 1.0);
      double lo_raw = mn - 0.06 * span, hi_raw = mx + 0.06 * span;
      if (mn < 0.35 * mx || lo_raw < 0) lo_raw = 0;
      const double step = nice_step(hi_raw - lo_raw, 6);
      lo = std::floor(lo_raw / step) * step;
      hi = std::ceil(hi_raw / step) * step;
      if (!(hi > lo)) hi = lo + step;
      const int decimals = decimals_for(step);
      for (int k = 0; k <= 40; ++k) {
        const double v = lo + k * step;
        if (v > hi + step * 1e-6) break;
        const std::string label = std::fabs(v) < step * 1e-6 ? std::string("0")
                                  : v >= 1e6                 ? fmt("%.3g", v)
                                                             : fmt("%.*f", decimals, v);
        ticks.push_back({v, label, true});
      }
    }
  }
  double px(double v) const {
    double t = 0;
    if (log)
      t = v > 0 && std::isfinite(v) ? (std::log2(v) - lo) / (hi - lo) : 0;
    else
      t = std::isfinite(v) ? (v - lo) / (hi - lo) : 0;
    if (!std::isfinite(t)) t = 0;
    return x0 + std::clamp(t, 0.0, 1.0) * (x1 - x0);
  }
};

// The KLD axis: log scale over whole decades, with a "0" band below (the base) and an "n/a"
// band above (unknown KLD) when needed.
struct KldAxis {
  int lo = -4, hi = -1;
  bool zero_band = false, na_band = false;
  double top = kT + 12, bottom = kB - 12, y_zero = kB - 14, y_na = kT + 14;
  KldAxis(const std::vector<double>& values, bool has_zero, bool has_na)
      : zero_band(has_zero), na_band(has_na) {
    double mn = std::numeric_limits<double>::infinity(), mx = 0;
    for (double v : values) {
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    if (!values.empty()) {
      hi = static_cast<int>(std::ceil(std::log10(mx) - 1e-9));
      lo = static_cast<int>(std::floor(std::log10(mn) + 1e-9));
      hi = std::clamp(hi, -30, 30);
      lo = std::clamp(lo, hi - 8, hi);
      if (hi == lo) {
        // One decade or a single value: show the decade around it with some air.
        if (std::fabs(std::log10(mn) - lo) < 0.15) --lo;
        ++hi;
      }
    }
    if (na_band) top = kT + 36;
    if (zero_band) bottom = kB - 44;
  }
  double py(double v) const {
    if (!std::isfinite(v)) return y_na;
    if (v <= 0) return y_zero;
    const double t = std::clamp((std::log10(v) - lo) / (hi - lo), 0.0, 1.0);
    return bottom - t * (bottom - top);
  }
};

std::string decade_label(int d, int mantissa) {
  if (d >= -5 && d <= 5) {
    const double v = mantissa * std::pow(10.0, d);
    return d < 0 ? fmt("%.*f", -d, v) : fmt("%.0f", v);
  }
  return mantissa == 1 ? fmt("1e%d", d) : fmt("%de%d", mantissa, d);
}

// Places each label next to its point, avoiding the circles, the labels already placed and the
// plot's edges; falls back to the least-overlapping spot (with a leader line when away from it).
struct Placed {
  double x, y;  // text anchor (start, baseline)
  bool leader;
  double lx0, ly0, lx1, ly1;
};

std::vector<Placed> place_labels(const std::vector<ChartPoint>& pts,
                                 const std::vector<size_t>& order,
                                 const std::vector<double>& radius) {
  const Box area{kL + 2, kT + 2, kW - 6, kB - 2};
  std::vector<Box> taken;
  for (size_t i = 0; i < pts.size(); ++i)
    taken.push_back({pts[i].px - radius[i] - 1, pts[i].py - radius[i] - 1,
                     pts[i].px + radius[i] + 1, pts[i].py + radius[i] + 1});
  std::vector<Placed> out(pts.size());
  for (size_t i : order) {
    const ChartPoint& p = pts[i];
    const double w = static_cast<double>(utf8_length(p.label)) * kCharW + 2, h = kLabelH;
    const double g = radius[i] + 4;
    struct Cand {
      double x0, y0;
      bool leader;
    };
    std::vector<Cand> cands = {
        {p.px + g, p.py - h / 2, false},
        {p.px - g - w, p.py - h / 2, false},
        {p.px - w / 2, p.py - g - h, false},
        {p.px - w / 2, p.py + g, false},
        {p.px + g - 2, p.py - g - h + 4, false},
        {p.px + g - 2, p.py + g - 4, false},
        {p.px - g - w + 2, p.py - g - h + 4, false},
        {p.px - g - w + 2, p.py + g - 4, false},
    };
    for (int k = 1; k <= 5; ++k) {
      const double d = 16.0 * k;
      cands.push_back({p.px + g + 6, p.py - h / 2 - d, true});
      cands.push_back({p.px + g + 6, p.py - h / 2 + d, true});
      cands.push_back({p.px - g - 6 - w, p.py - h / 2 - d, true});
      cands.push_back({p.px - g - 6 - w, p.py - h / 2 + d, true});
      cands.push_back({p.px - w / 2, p.py - g - h - d, true});
      cands.push_back({p.px - w / 2, p.py + g + d, true});
    }
    double best_score = std::numeric_limits<double>::infinity();
    Cand best = cands[0];
    for (const Cand& c : cands) {
      const Box b{c.x0, c.y0, c.x0 + w, c.y0 + h};
      double score = 0;
      for (const Box& t : taken) score += t.overlap(b);
      score += 3 * (b.area() - area.overlap(b));  // outside the plot area
      if (c.leader) score += 1;                   // prefer labels right next to the point
      if (score < best_score - 1e-9) {
        best_score = score;
        best = c;
      }
      if (score <= 0) break;
    }
    const Box b{best.x0, best.y0, best.x0 + w, best.y0 + h};
    taken.push_back(b);
    Placed pl{best.x0 + 1, best.y0 + h - 4, best.leader, 0, 0, 0, 0};
    if (best.leader) {
      // From the circle's edge towards the nearest point of the label's box.
      const double nx = std::clamp(p.px, b.x0, b.x1), ny = std::clamp(p.py, b.y0, b.y1);
      const double dx = nx - p.px, dy = ny - p.py, len = std::hypot(dx, dy);
      if (len > radius[i] + 2) {
        pl.lx0 = p.px + dx / len * (radius[i] + 1);
        pl.ly0 = p.py + dy / len * (radius[i] + 1);
        pl.lx1 = nx;
        pl.ly1 = ny;
      } else {
        pl.leader = false;
      }
    }
    out[i] = pl;
  }
  return out;
}

std::string point_tooltip(const TradeoffReport& r, const TradeoffPoint& p, size_t i) {
  const std::string label = display_label(p, i);
  std::string t = label + (p.is_base && !mentions_base(label) ? " (base)" : "") + "\n";
  t += "weights " + (p.weight_type.empty() ? std::string("?") : p.weight_type) +
       (p.imatrix ? " + imatrix" : "") + ", KV cache " +
       (p.kv_type.empty() ? std::string("?") : p.kv_type) + "\n";
  t += "memory for one " + std::to_string(std::max<int64_t>(r.seq_len, 0)) +
       "-token sequence: " + format_bytes(memory_for_one_sequence(r, p));
  const double share = memory_share(r, p);
  if (std::isfinite(share) && !p.is_base) t += " (" + format_pct(share) + " of the base)";
  t += "\nweights " + format_bytes(p.weight_bytes) + " resident, file " +
       format_bytes(p.file_bytes) + ", KV " + format_bytes(p.kv_bytes_per_token) + " per token\n";
  t += "mean KLD: " + format_kld(p);
  if (!p.is_base && std::isfinite(p.kld_mean_err) && p.kld_mean_err > 0)
    t += " \xc2\xb1 " + format_sig(p.kld_mean_err, 2);
  if (!p.is_base) t += ", p99 " + format_sig(p.kld_p99, 4);
  t += "\ntop-1 agreement: " + format_top1(effective_top1(p));
  if (!p.is_base && std::isfinite(p.top1_err) && p.top1_err > 0)
    t += fmt(" \xc2\xb1 %.2f%%", p.top1_err * 100);
  if (std::isfinite(p.ppl) && p.ppl > 0) t += "\nPPL: " + format_sig(p.ppl, 5);
  t += "\ngeneration: " +
       (measured(p.tg_tps) ? format_tps(p.tg_tps) + " tok/s" : std::string("not measured"));
  t += "; 16 streams: " +
       (measured(p.serve_tps) ? format_tps(p.serve_tps) + " tok/s" : std::string("not measured"));
  return t;
}

enum class ChartKind { kMemory, kSpeed };

std::string render_chart(const TradeoffReport& r, ChartKind kind,
                         const std::vector<size_t>& frontier) {
  const size_t n = r.points.size();
  const bool memory = kind == ChartKind::kMemory;
  const char* id = memory ? "chart-memory" : "chart-speed";

  // x values (bytes, or tok/s) and KLD values.
  std::vector<double> xs(n), ys(n);
  std::vector<bool> x_missing(n), y_zero(n), y_missing(n);
  std::vector<double> positive, x_values;
  for (size_t i = 0; i < n; ++i) {
    const TradeoffPoint& p = r.points[i];
    if (memory) {
      const uint64_t m = memory_for_one_sequence(r, p);
      xs[i] = static_cast<double>(m);
      x_missing[i] = m == 0;
    } else {
      xs[i] = measured(p.tg_tps) ? p.tg_tps : 0;
      x_missing[i] = !measured(p.tg_tps);
    }
    if (!x_missing[i]) x_values.push_back(xs[i]);
    const double k = effective_kld(p);
    ys[i] = k;
    y_missing[i] = !std::isfinite(k);
    y_zero[i] = std::isfinite(k) && k <= 0;
    if (std::isfinite(k) && k > 0) positive.push_back(k);
  }
  const bool any_x = !x_values.empty();
  XAxis xa(memory, x_values,
           std::find(x_missing.begin(), x_missing.end(), true) != x_missing.end());
  if (!any_x) xa.ticks.clear();  // no scale to show
  const KldAxis ya(positive, std::find(y_zero.begin(), y_zero.end(), true) != y_zero.end(),
                   std::find(y_missing.begin(), y_missing.end(), true) != y_missing.end());

  // KV types -> colours, in order of appearance.
  std::vector<std::string> kv_types;
  for (const auto& p : r.points)
    if (std::find(kv_types.begin(), kv_types.end(), p.kv_type) == kv_types.end())
      kv_types.push_back(p.kv_type);
  auto colour = [&](const std::string& kv) {
    const size_t k =
        static_cast<size_t>(std::find(kv_types.begin(), kv_types.end(), kv) - kv_types.begin());
    return std::string(kPalette[k % (sizeof kPalette / sizeof kPalette[0])]);
  };

  std::vector<bool> on_frontier(n, false);
  for (size_t i : frontier)
    if (i < n) on_frontier[i] = true;

  std::vector<ChartPoint> pts(n);
  std::vector<double> radius(n);
  for (size_t i = 0; i < n; ++i) {
    const TradeoffPoint& p = r.points[i];
    ChartPoint& c = pts[i];
    c.index = i;
    c.px = x_missing[i] ? xa.x_na : xa.px(xs[i]);
    c.py = ya.py(ys[i]);
    c.x_missing = x_missing[i];
    c.y_missing = y_missing[i];
    c.pareto = on_frontier[i];
    c.color = colour(p.kv_type);
    c.label = utf8_truncate(display_label(p, i), 40);
    if (p.is_base && !mentions_base(c.label)) c.label += " (base)";
    c.tooltip = point_tooltip(r, p, i);
    radius[i] = c.pareto ? 7 : 5.5;
  }

  std::ostringstream s;
  const std::string x_title = memory ? "memory for one " +
                                           std::to_string(std::max<int64_t>(r.seq_len, 0)) +
                                           "-token sequence: weights + KV cache (log scale)"
                                     : std::string("generation speed, one stream (tokens/s)");
  std::vector<size_t> fr;  // the frontier's points, in the order they are joined
  for (size_t i : frontier)
    if (i < n) fr.push_back(i);
  bool any_missing = false;
  for (size_t i = 0; i < n; ++i) any_missing = any_missing || x_missing[i] || y_missing[i];

  // Legend (rects and lines only: every <circle> in a chart is a point). Items flow left to right
  // and wrap onto a second row.
  std::ostringstream lg;
  double legend_bottom = 22;
  {
    double lx = kL, ly = 22;
    auto room = [&](double w) {
      if (lx + w > kR && lx > kL + 1) {
        lx = kL + 70;
        ly += 18;
      }
    };
    lg << "<g class=\"legend\">";
    if (!kv_types.empty()) {
      lg << "<text class=\"legend-head\" x=\"" << coord(lx) << "\" y=\"" << coord(ly + 4)
         << "\">KV cache:</text>";
      lx += 70;
    }
    for (const auto& kv : kv_types) {
      const std::string name = kv.empty() ? std::string("?") : utf8_truncate(kv, 20);
      const double w = 17 + static_cast<double>(utf8_length(name)) * kCharW;
      room(w);
      lg << "<rect x=\"" << coord(lx) << "\" y=\"" << coord(ly - 6)
         << "\" width=\"12\" height=\"12\" rx=\"6\" fill=\"" << colour(kv) << "\"/>";
      lg << "<text class=\"legend-item\" x=\"" << coord(lx + 17) << "\" y=\"" << coord(ly + 4)
         << "\">" << html_escape(name) << "</text>";
      lx += w + 18;
    }
    // The frontier and "not measured" keys, right-aligned.
    const double w_frontier = 34 + 15 * kCharW, w_missing = 17 + 12 * kCharW;
    const double w_keys = (fr.empty() ? 0 : w_frontier) + (any_missing ? w_missing : 0) +
                          (!fr.empty() && any_missing ? 18 : 0);
    if (w_keys > 0) {
      if (lx + 10 + w_keys > kR) {
        ly += 18;
      }
      lx = kR - w_keys;
      if (!fr.empty()) {
        lg << "<line class=\"legend-frontier\" x1=\"" << coord(lx) << "\" y1=\"" << coord(ly)
           << "\" x2=\"" << coord(lx + 28) << "\" y2=\"" << coord(ly) << "\"/>";
        lg << "<rect x=\"" << coord(lx + 8) << "\" y=\"" << coord(ly - 6)
           << "\" width=\"12\" height=\"12\" rx=\"6\" class=\"legend-pareto\"/>";
        lg << "<text class=\"legend-item\" x=\"" << coord(lx + 34) << "\" y=\"" << coord(ly + 4)
           << "\">Pareto frontier</text>";
        lx += w_frontier + 18;
      }
      if (any_missing) {
        lg << "<rect x=\"" << coord(lx) << "\" y=\"" << coord(ly - 6)
           << "\" width=\"12\" height=\"12\" rx=\"6\" class=\"legend-missing\"/>";
        lg << "<text class=\"legend-item\" x=\"" << coord(lx + 17) << "\" y=\"" << coord(ly + 4)
           << "\">not measured</text>";
      }
    }
    lg << "</g>\n";
    legend_bottom = ly;
  }
  // Legends longer than two rows push the plot down.
  const double shift = std::max(0.0, legend_bottom - 40);

  s << "<svg id=\"" << id
    << "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << kW << ' '
    << coord(kH + shift) << "\" role=\"img\" aria-labelledby=\"" << id << "-title\">\n";
  s << "<title id=\"" << id << "-title\">"
    << (memory ? "Mean KL divergence against the base vs memory"
               : "Mean KL divergence against the base vs generation speed")
    << "</title>\n";

  s << lg.str();
  s << "<g transform=\"translate(0 " << coord(shift) << ")\">\n";

  // Grid and ticks.
  s << "<g class=\"grid\">";
  for (const auto& t : xa.ticks) {
    const double x = xa.px(t.value);
    s << "<line x1=\"" << coord(x) << "\" y1=\"" << coord(kT) << "\" x2=\"" << coord(x)
      << "\" y2=\"" << coord(kB) << "\"/>";
  }
  for (int d = ya.lo; d <= ya.hi; ++d) {
    const double y = ya.py(std::pow(10.0, d));
    s << "<line x1=\"" << coord(kL) << "\" y1=\"" << coord(y) << "\" x2=\"" << coord(kR)
      << "\" y2=\"" << coord(y) << "\"/>";
  }
  s << "</g>\n";
  s << "<g class=\"ticks\">";
  for (const auto& t : xa.ticks) {
    const double x = xa.px(t.value);
    s << "<line class=\"axis\" x1=\"" << coord(x) << "\" y1=\"" << coord(kB) << "\" x2=\""
      << coord(x) << "\" y2=\"" << coord(kB + 5) << "\"/>";
    s << "<text class=\"tick\" x=\"" << coord(x) << "\" y=\"" << coord(kB + 20)
      << "\" text-anchor=\"middle\">" << html_escape(t.label) << "</text>";
  }
  if (xa.na_band) {
    s << "<line class=\"zero-line\" x1=\"" << coord(xa.x_na) << "\" y1=\"" << coord(kT)
      << "\" x2=\"" << coord(xa.x_na) << "\" y2=\"" << coord(kB) << "\"/>";
    s << "<text class=\"tick\" x=\"" << coord(xa.x_na) << "\" y=\"" << coord(kB + 20)
      << "\" text-anchor=\"middle\">n/a</text>";
    const double xb = (xa.x_na + xa.x0) / 2;
    s << "<path class=\"axis-break\" d=\"M" << coord(xb - 5) << ' ' << coord(kB + 6) << " L"
      << coord(xb + 1) << ' ' << coord(kB - 6) << " M" << coord(xb) << ' ' << coord(kB + 6) << " L"
      << coord(xb + 6) << ' ' << coord(kB - 6) << "\"/>";
  }
  const bool label_minor = ya.hi - ya.lo <= 2;
  for (int d = ya.lo; d <= ya.hi; ++d) {
    for (int m : {1, 2, 5}) {
      if (d == ya.hi && m > 1) break;
      const double y = ya.py(m * std::pow(10.0, d));
      const bool major = m == 1;
      s << "<line class=\"axis\" x1=\"" << coord(kL - (major ? 5 : 3)) << "\" y1=\"" << coord(y)
        << "\" x2=\"" << coord(kL) << "\" y2=\"" << coord(y) << "\"/>";
      if (major || label_minor)
        s << "<text class=\"tick" << (major ? "" : " minor") << "\" x=\"" << coord(kL - 8)
          << "\" y=\"" << coord(y + 4) << "\" text-anchor=\"end\">" << decade_label(d, m)
          << "</text>";
    }
  }
  if (ya.zero_band) {
    s << "<line class=\"zero-line\" x1=\"" << coord(kL) << "\" y1=\"" << coord(ya.y_zero)
      << "\" x2=\"" << coord(kR) << "\" y2=\"" << coord(ya.y_zero) << "\"/>";
    s << "<text class=\"tick\" x=\"" << coord(kL - 8) << "\" y=\"" << coord(ya.y_zero + 4)
      << "\" text-anchor=\"end\">0 (base)</text>";
    // An axis break between the log scale and the 0 band.
    const double yb = (ya.bottom + ya.y_zero) / 2;
    s << "<path class=\"axis-break\" d=\"M" << coord(kL - 6) << ' ' << coord(yb + 2) << " L"
      << coord(kL + 6) << ' ' << coord(yb - 4) << " M" << coord(kL - 6) << ' ' << coord(yb + 7)
      << " L" << coord(kL + 6) << ' ' << coord(yb + 1) << "\"/>";
  }
  if (ya.na_band) {
    s << "<line class=\"zero-line\" x1=\"" << coord(kL) << "\" y1=\"" << coord(ya.y_na)
      << "\" x2=\"" << coord(kR) << "\" y2=\"" << coord(ya.y_na) << "\"/>";
    s << "<text class=\"tick\" x=\"" << coord(kL - 8) << "\" y=\"" << coord(ya.y_na + 4)
      << "\" text-anchor=\"end\">n/a</text>";
  }
  s << "</g>\n";

  // Axes and titles.
  s << "<line class=\"axis\" x1=\"" << coord(kL) << "\" y1=\"" << coord(kB) << "\" x2=\""
    << coord(kR) << "\" y2=\"" << coord(kB) << "\"/>";
  s << "<line class=\"axis\" x1=\"" << coord(kL) << "\" y1=\"" << coord(kT) << "\" x2=\""
    << coord(kL) << "\" y2=\"" << coord(kB) << "\"/>\n";
  s << "<text class=\"axis-title\" x=\"" << coord((kL + kR) / 2) << "\" y=\"" << coord(kH - 22)
    << "\" text-anchor=\"middle\">" << html_escape(x_title) << "</text>\n";
  s << "<text class=\"axis-title\" transform=\"translate(22 " << coord((kT + kB) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">mean KL divergence vs base (log scale, lower is "
       "better)</text>\n";
  if (n == 0 || !any_x) {
    const std::string note =
        n == 0 ? "no variants were measured"
               : (memory ? "memory was not measured" : "generation speed was not measured");
    s << "<text class=\"note\" x=\"" << coord((kL + kR) / 2) << "\" y=\"" << coord((kT + kB) / 2)
      << "\" text-anchor=\"middle\">" << note << "</text>\n";
  }

  // The frontier, then the points, then their labels (on top).
  if (fr.size() >= 2) {
    s << "<polyline class=\"pareto\" points=\"";
    for (size_t k = 0; k < fr.size(); ++k)
      s << (k ? " " : "") << coord(pts[fr[k]].px) << ',' << coord(pts[fr[k]].py);
    s << "\"/>\n";
  }
  // Non-frontier points first so frontier points are drawn over them.
  std::vector<size_t> draw;
  for (size_t i = 0; i < n; ++i)
    if (!pts[i].pareto) draw.push_back(i);
  for (size_t i : fr) draw.push_back(i);
  s << "<g class=\"points\">\n";
  for (size_t i : draw) {
    const ChartPoint& c = pts[i];
    const bool missing = c.x_missing || c.y_missing;
    std::string cls = c.pareto ? "pareto" : "pt";
    if (missing) cls += " missing";
    s << "<circle class=\"" << cls << "\" cx=\"" << coord(c.px) << "\" cy=\"" << coord(c.py)
      << "\" r=\"" << coord(radius[i]) << "\" fill=\"" << c.color << "\"><title>"
      << html_escape(c.tooltip) << "</title></circle>\n";
  }
  s << "</g>\n";
  std::vector<size_t> order = fr;
  for (size_t i = 0; i < n; ++i)
    if (!pts[i].pareto) order.push_back(i);
  const std::vector<Placed> placed = place_labels(pts, order, radius);
  s << "<g class=\"labels\">\n";
  for (size_t i = 0; i < n; ++i) {
    const Placed& pl = placed[i];
    if (pl.leader)
      s << "<line class=\"leader\" x1=\"" << coord(pl.lx0) << "\" y1=\"" << coord(pl.ly0)
        << "\" x2=\"" << coord(pl.lx1) << "\" y2=\"" << coord(pl.ly1) << "\"/>";
    s << "<text class=\"lbl" << (pts[i].pareto ? " lbl-pareto" : "") << "\" x=\"" << coord(pl.x)
      << "\" y=\"" << coord(pl.y) << "\">" << html_escape(pts[i].label) << "</text>\n";
  }
  s << "</g>\n</g>\n</svg>\n";
  return s.str();
}

// ---- the table ----

std::vector<std::string> table_header() {
  return {"variant",          "weights",      "KV cache", "bits/ weight",   "weights resident",
          "KV / token",       "memory / seq", "vs base",  "seqs in budget", "PPL",
          "mean KLD",         "KLD p99",      "top-1",    "pp tok/s",       "tg tok/s",
          "serve tok/s (16)", "frontier"};
}

// A table cell: a value and, when measured, its standard error.
struct Cell {
  std::string text, err;
};

std::vector<Cell> table_row(const TradeoffReport& r, size_t i, bool on_mem, bool on_speed) {
  const TradeoffPoint& p = r.points[i];
  const double share = memory_share(r, p);
  const bool has_ppl = std::isfinite(p.ppl) && p.ppl > 0;
  Cell ppl{has_ppl ? format_sig(p.ppl, 5) : "\xe2\x80\x93", ""};
  if (has_ppl && std::isfinite(p.ppl_err) && p.ppl_err > 0) ppl.err = format_sig(p.ppl_err, 2);
  Cell kld{format_kld(p), ""};
  if (!p.is_base && std::isfinite(p.kld_mean_err) && p.kld_mean_err > 0 &&
      std::isfinite(p.kld_mean))
    kld.err = format_sig(p.kld_mean_err, 2);
  Cell top1{format_top1(effective_top1(p)), ""};
  if (!p.is_base && std::isfinite(p.top1_err) && p.top1_err > 0 && std::isfinite(p.top1))
    top1.err = fmt("%.2f%%", p.top1_err * 100);
  std::string frontier;
  if (on_mem) frontier += "M";
  if (on_speed) frontier += frontier.empty() ? "S" : " S";
  const std::string label = display_label(p, i);
  return {
      {label + (p.is_base && !mentions_base(label) ? " (base)" : ""), ""},
      {p.weight_type + (p.imatrix ? " + imatrix" : ""), ""},
      {p.kv_type, ""},
      {std::isfinite(p.bits_per_weight) && p.bits_per_weight > 0 ? fmt("%.2f", p.bits_per_weight)
                                                                 : "\xe2\x80\x93",
       ""},
      {format_bytes(p.weight_bytes), ""},
      {format_bytes(p.kv_bytes_per_token), ""},
      {format_bytes(memory_for_one_sequence(r, p)), ""},
      {format_pct(share), ""},
      {std::to_string(p.seqs_in_budget), ""},
      ppl,
      kld,
      {p.is_base ? "0" : format_sig(p.kld_p99, 4), ""},
      top1,
      {format_tps(p.pp_tps), ""},
      {format_tps(p.tg_tps), ""},
      {format_tps(p.serve_tps), ""},
      {frontier, ""}};
}

bool contains(const std::vector<size_t>& v, size_t i) {
  return std::find(v.begin(), v.end(), i) != v.end();
}

std::string budget_text(uint64_t b) {
  if (b == 0) return "none";
  return trim_zeros(format_bytes(b));
}

std::string css() {
  return R"(:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1c2230;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1360px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 26px; margin: 6px 0 2px; }
h2 { font-size: 18px; margin: 0 0 4px; }
.sub { color: #555e6e; margin: 0 0 14px; }
.card { background: #fff; border: 1px solid #dde1e8; border-radius: 10px; padding: 14px 18px; margin: 16px 0; }
.facts { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: 5px 18px; margin: 0; }
.facts dt { color: #596273; font-weight: 600; }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.explain { color: #555e6e; font-size: 14px; margin: 0 0 6px; }
svg.chart { display: block; width: 100%; max-width: 1120px; height: auto; margin: 0 auto; }
svg.chart text { font-family: inherit; }
svg .grid line { stroke: #e8ebf0; stroke-width: 1; }
svg .axis { stroke: #59606c; stroke-width: 1.2; }
svg .axis-break { stroke: #59606c; stroke-width: 1.5; fill: none; }
svg .zero-line { stroke: #b9c0cc; stroke-width: 1; stroke-dasharray: 4 4; }
svg .tick { font-size: 12px; fill: #4a5262; }
svg .tick.minor { fill: #8a92a0; font-size: 11px; }
svg .axis-title { font-size: 13px; fill: #1c2230; font-weight: 600; }
svg .note { font-size: 15px; fill: #8a92a0; }
svg .legend-head { font-size: 12px; font-weight: 600; fill: #1c2230; }
svg .legend-item { font-size: 12px; fill: #1c2230; }
svg .legend-frontier { stroke: #1c2230; stroke-width: 2; stroke-opacity: 0.55; }
svg .legend-pareto { fill: #fff; stroke: #111; stroke-width: 2.2; }
svg .legend-missing { fill: #fff; stroke: #888; stroke-width: 1.5; stroke-dasharray: 2 2; }
svg circle { stroke: #fff; stroke-width: 1.5; }
svg circle.pareto { stroke: #111; stroke-width: 2.2; }
svg circle.missing { fill: #fff; stroke: #888; stroke-dasharray: 2 2; }
svg polyline.pareto { fill: none; stroke: #1c2230; stroke-width: 2; stroke-opacity: 0.55; stroke-linejoin: round; }
svg .lbl { font-size: 12px; fill: #2a3140; paint-order: stroke; stroke: #fff; stroke-width: 3.5px; stroke-linejoin: round; }
svg .lbl-pareto { font-weight: 600; fill: #111; }
svg .leader { stroke: #9aa1ad; stroke-width: 1; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 12.5px; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 6px; border-bottom: 1px solid #e4e7ec; text-align: right; white-space: nowrap; }
th { background: #f0f2f5; font-weight: 600; white-space: normal; vertical-align: bottom; }
th.txt, td.txt { text-align: left; }
td:first-child { white-space: normal; min-width: 150px; }
td .err { display: block; font-size: 11px; color: #7a8290; font-weight: 400; }
tr.frontier td { background: #f2f6ff; }
tr.recommended td { background: #fff3cc; font-weight: 600; }
.table-note { color: #555e6e; font-size: 13px; margin: 8px 0 0; }
.recommendation { background: #fff8e0; border: 2px solid #e8b400; border-left-width: 8px; border-radius: 10px;
  padding: 14px 18px; margin: 18px 0; font-size: 16px; line-height: 1.5; }
.recommendation h2 { margin-bottom: 6px; }
.recommendation p { margin: 0; }
footer { color: #8a92a0; font-size: 12px; margin-top: 24px; }
)";
}

void write_file(const std::filesystem::path& path, const std::string& data) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create ", tmp.string());
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    const bool ok = out.good();
    out.close();
    if (!ok || out.fail()) {
      std::filesystem::remove(tmp, ec);
      fail("writing ", tmp.string(), " failed");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ec2;
    std::filesystem::remove(tmp, ec2);
    fail("cannot rename ", tmp.string(), " to ", path.string(), ": ", ec.message());
  }
}

}  // namespace

// ---- public ----

uint64_t memory_for_one_sequence(const TradeoffReport& r, const TradeoffPoint& p) {
  const uint64_t len = r.seq_len > 0 ? static_cast<uint64_t>(r.seq_len) : 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  if (len != 0 && p.kv_bytes_per_token > kMax / len) return kMax;
  const uint64_t kv = len * p.kv_bytes_per_token;
  return p.weight_bytes > kMax - kv ? kMax : p.weight_bytes + kv;
}

double effective_kld(const TradeoffPoint& p) {
  if (p.is_base) return 0;
  if (!std::isfinite(p.kld_mean)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(0.0, p.kld_mean);
}

double effective_top1(const TradeoffPoint& p) {
  if (p.is_base) return 1;
  return std::isfinite(p.top1) ? p.top1 : std::numeric_limits<double>::quiet_NaN();
}

std::vector<size_t> pareto_frontier_memory(const TradeoffReport& r) {
  const size_t n = r.points.size();
  std::vector<uint64_t> mem(n);
  std::vector<double> kld(n);
  std::vector<size_t> cand;
  for (size_t i = 0; i < n; ++i) {
    mem[i] = memory_for_one_sequence(r, r.points[i]);
    kld[i] = effective_kld(r.points[i]);
    if (mem[i] > 0 && std::isfinite(kld[i])) cand.push_back(i);
  }
  std::vector<size_t> out = non_dominated(cand, [&](size_t j, size_t i) {
    return mem[j] <= mem[i] && kld[j] <= kld[i] && (mem[j] < mem[i] || kld[j] < kld[i]);
  });
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    if (mem[a] != mem[b]) return mem[a] < mem[b];
    if (kld[a] != kld[b]) return kld[a] < kld[b];
    return a < b;
  });
  return out;
}

std::vector<size_t> pareto_frontier_speed(const TradeoffReport& r) {
  const size_t n = r.points.size();
  std::vector<double> tg(n), kld(n);
  std::vector<size_t> cand;
  for (size_t i = 0; i < n; ++i) {
    tg[i] = r.points[i].tg_tps;
    kld[i] = effective_kld(r.points[i]);
    if (measured(tg[i]) && std::isfinite(kld[i])) cand.push_back(i);
  }
  std::vector<size_t> out = non_dominated(cand, [&](size_t j, size_t i) {
    return tg[j] >= tg[i] && kld[j] <= kld[i] && (tg[j] > tg[i] || kld[j] < kld[i]);
  });
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    if (tg[a] != tg[b]) return tg[a] < tg[b];
    if (kld[a] != kld[b]) return kld[a] < kld[b];
    return a < b;
  });
  return out;
}

Recommendation recommend(const TradeoffReport& r, double min_top1) {
  if (!std::isfinite(min_top1)) min_top1 = 0.99;
  Recommendation rec;
  const size_t n = r.points.size();
  if (n == 0) return rec;
  std::vector<uint64_t> mem(n);
  for (size_t i = 0; i < n; ++i) mem[i] = memory_for_one_sequence(r, r.points[i]);
  auto less_memory = [&](size_t a, size_t b) {
    if (mem[a] != mem[b]) return mem[a] < mem[b];
    const double ka = kld_key(r.points[a]), kb = kld_key(r.points[b]);
    if (ka != kb) return ka < kb;
    return a < b;
  };
  auto top1_key = [&](size_t i) {
    const double t = effective_top1(r.points[i]);
    return std::isfinite(t) ? t : -std::numeric_limits<double>::infinity();
  };
  auto more_accurate = [&](size_t a, size_t b) {
    const double ta = top1_key(a), tb = top1_key(b);
    if (ta != tb) return ta > tb;
    return less_memory(a, b);
  };
  std::optional<size_t> meets, accurate, smallest;
  for (size_t i = 0; i < n; ++i) {
    if (!smallest || less_memory(i, *smallest)) smallest = i;
    if (r.points[i].seqs_in_budget < 1) continue;
    if (!accurate || more_accurate(i, *accurate)) accurate = i;
    const double t = effective_top1(r.points[i]);
    if (std::isfinite(t) && t >= min_top1 - 1e-12 && (!meets || less_memory(i, *meets))) meets = i;
  }
  if (meets) {
    rec.kind = Recommendation::Kind::kMeetsThreshold;
    rec.index = meets;
  } else if (accurate) {
    rec.kind = Recommendation::Kind::kMostAccurate;
    rec.index = accurate;
  } else {
    rec.kind = Recommendation::Kind::kNothingFits;
    rec.index = smallest;
  }
  return rec;
}

const char* to_string(Recommendation::Kind k) {
  switch (k) {
    case Recommendation::Kind::kMeetsThreshold:
      return "meets_threshold";
    case Recommendation::Kind::kMostAccurate:
      return "most_accurate";
    case Recommendation::Kind::kNothingFits:
      return "nothing_fits";
    case Recommendation::Kind::kNoPoints:
      return "no_points";
  }
  return "unknown";
}

std::string recommendation(const TradeoffReport& r, double min_top1) {
  if (!std::isfinite(min_top1)) min_top1 = 0.99;
  const Recommendation rec = recommend(r, min_top1);
  const std::string model = r.model.empty() ? std::string("this model") : r.model;
  const std::string budget =
      r.budget_bytes > 0 ? "For " + model + " and a budget of " + budget_text(r.budget_bytes)
                         : "For " + model + " (no memory budget given)";
  if (rec.kind == Recommendation::Kind::kNoPoints || !rec.index)
    return "For " + model + ", no variants were measured, so there is nothing to recommend.";
  const size_t i = *rec.index;
  const TradeoffPoint& p = r.points[i];
  const std::string name = display_label(p, i);
  const std::string seq = std::to_string(std::max<int64_t>(r.seq_len, 0)) + "-token sequence";
  const std::string mem = format_bytes(memory_for_one_sequence(r, p));
  const std::string threshold = trim_zeros(fmt("%.2f", min_top1 * 100)) + "%";

  if (rec.kind == Recommendation::Kind::kNothingFits)
    return budget + ", no variant fits even one " + seq + ": the smallest, " + name + ", needs " +
           mem + ".";

  // What the point keeps, what it costs, how fast it is.
  const double t = effective_top1(p);
  std::string accuracy = std::isfinite(t)
                             ? format_top1(t) + " top-1 agreement with the base"
                             : std::string("an unmeasured top-1 agreement with the base");
  if (!p.is_base) accuracy += " (mean KLD " + format_kld(p) + ")";
  const double share = memory_share(r, p);
  // The cost phrase begins with its own separator.
  const std::string fit =
      p.seqs_in_budget > 1 ? std::to_string(p.seqs_in_budget) + " such sequences fit in the budget"
                           : "";
  const bool with_share = !p.is_base && std::isfinite(share);
  std::string cost;
  if (with_share)
    cost = " at " + format_pct(share) + " of its memory (" + mem + " for one " + seq +
           (fit.empty() ? "" : "; " + fit) + ")";
  else
    cost = ", needing " + mem + " for one " + seq + (fit.empty() ? "" : " (" + fit + ")");
  std::string speed;
  if (measured(p.serve_tps))
    speed = "serves " + format_tps(p.serve_tps) + " tokens/s over 16 streams";
  else if (measured(p.tg_tps))
    speed = "generates " + format_tps(p.tg_tps) + " tokens/s on one stream";

  std::string out;
  if (rec.kind == Recommendation::Kind::kMeetsThreshold && p.is_base) {
    out = budget + ", no quantized variant that needs less memory keeps " + threshold +
          " top-1 agreement with the base, so the pick is the base itself, " + name + cost;
    if (!speed.empty()) out += ", and it " + speed;
  } else if (rec.kind == Recommendation::Kind::kMeetsThreshold) {
    out = budget + ", " + name + " keeps " + accuracy + cost;
    if (!speed.empty()) out += (with_share ? " and " : ", and ") + speed;
  } else {  // kMostAccurate
    out = budget + ", no variant that fits keeps " + threshold +
          " top-1 agreement with the base; the most accurate one that fits is " + name + ", with " +
          accuracy + cost;
    if (!speed.empty()) out += ", and it " + speed;
  }
  return out + ".";
}

std::string format_bytes(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b < 1024) return fmt("%llu B", static_cast<unsigned long long>(b));
  if (b < (uint64_t{1} << 20)) return fmt("%.1f KiB", v / 1024);
  if (b < (uint64_t{1} << 30)) return fmt("%.1f MiB", v / (1024.0 * 1024));
  if (b < (uint64_t{1} << 40)) return fmt("%.2f GiB", v / (1024.0 * 1024 * 1024));
  return fmt("%.2f TiB", v / (1024.0 * 1024 * 1024 * 1024));
}

std::string format_sig(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  return fmt("%.*g", std::clamp(digits, 1, 17), v);
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default: {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u != 0x7f)
          out += c;
        else if (c == '\n' || c == '\t')
          out += c;
        else if (c == '\r')
          out += ' ';
        // other control characters are dropped: they are not allowed in HTML/XML text
      }
    }
  }
  return out;
}

json to_json(const TradeoffReport& r) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json j;
  j["model"] = r.model;
  j["base_path"] = r.base_path;
  j["text_path"] = r.text_path;
  j["cpu"] = r.cpu;
  j["date"] = r.date;
  j["threads"] = r.threads;
  j["budget_bytes"] = r.budget_bytes;
  j["seq_len"] = r.seq_len;
  json pts = json::array();
  for (const auto& p : r.points) {
    json q;
    q["label"] = p.label;
    q["weight_type"] = p.weight_type;
    q["kv_type"] = p.kv_type;
    q["imatrix"] = p.imatrix;
    q["is_base"] = p.is_base;
    q["bits_per_weight"] = num(p.bits_per_weight);
    q["file_bytes"] = p.file_bytes;
    q["weight_bytes"] = p.weight_bytes;
    q["kv_bytes_per_token"] = p.kv_bytes_per_token;
    q["memory_for_one_sequence"] = memory_for_one_sequence(r, p);
    q["seqs_in_budget"] = p.seqs_in_budget;
    q["ppl"] = num(p.ppl);
    q["ppl_err"] = num(p.ppl_err);
    q["kld_mean"] = num(p.kld_mean);
    q["kld_mean_err"] = num(p.kld_mean_err);
    q["kld_p99"] = num(p.kld_p99);
    q["top1"] = num(p.top1);
    q["top1_err"] = num(p.top1_err);
    q["pp_tps"] = num(p.pp_tps);
    q["tg_tps"] = num(p.tg_tps);
    q["serve_tps"] = num(p.serve_tps);
    pts.push_back(std::move(q));
  }
  j["points"] = std::move(pts);
  j["pareto_memory"] = pareto_frontier_memory(r);
  j["pareto_speed"] = pareto_frontier_speed(r);
  const Recommendation rec = recommend(r, r.min_top1);
  j["min_top1"] = num(r.min_top1);
  j["recommendation_kind"] = to_string(rec.kind);
  j["recommended"] = rec.index && rec.kind != Recommendation::Kind::kNothingFits ? json(*rec.index)
                                                                                 : json(nullptr);
  j["recommendation"] = recommendation(r, r.min_top1);
  return j;
}

std::string render_markdown(const TradeoffReport& r) {
  const auto pm = pareto_frontier_memory(r), ps = pareto_frontier_speed(r);
  const Recommendation rec = recommend(r, r.min_top1);
  std::ostringstream s;
  s << "# Quantization trade-off: "
    << md_escape(r.model.empty() ? std::string("(unnamed model)") : r.model) << "\n\n";
  auto fact = [&](const char* k, const std::string& v) {
    if (!v.empty()) s << "- **" << k << ":** " << md_escape(v) << "\n";
  };
  fact("Base model", r.base_path);
  fact("Text", r.text_path);
  fact("CPU", r.cpu);
  if (r.threads > 0) fact("Threads", std::to_string(r.threads));
  fact("Date", r.date);
  fact("Memory budget (weights + KV cache)", budget_text(r.budget_bytes));
  fact("Sequence length", std::to_string(r.seq_len) + " tokens");
  s << "\n";
  const auto header = table_header();
  s << "|";
  for (const auto& h : header) s << ' ' << h << " |";
  s << "\n|";
  for (size_t k = 0; k < header.size(); ++k) s << (k < 3 ? ":---|" : "---:|");
  s << "\n";
  for (size_t i = 0; i < r.points.size(); ++i) {
    const auto cells = table_row(r, i, contains(pm, i), contains(ps, i));
    const bool picked = rec.index == i && rec.kind != Recommendation::Kind::kNothingFits;
    s << "|";
    for (size_t k = 0; k < cells.size(); ++k) {
      const std::string c = md_escape(
          cells[k].text + (cells[k].err.empty() ? std::string() : " \xc2\xb1 " + cells[k].err));
      s << ' ' << (picked && k == 0 ? "**" + c + "**" : c) << " |";
    }
    s << "\n";
  }
  s << "\nMemory / seq: weights plus the KV cache of one " << r.seq_len
    << "-token sequence. Frontier: **M** on the accuracy/memory Pareto frontier, **S** on the "
       "accuracy/throughput frontier (mean KLD against the base vs tg tok/s). Top-1: how often the "
       "variant's most likely next token is the base's. A dash: not measured.\n\n";
  s << "**Recommendation:** " << md_escape(recommendation(r, r.min_top1)) << "\n";
  return s.str();
}

std::string render_html(const TradeoffReport& r) {
  const auto pm = pareto_frontier_memory(r), ps = pareto_frontier_speed(r);
  const Recommendation rec = recommend(r, r.min_top1);
  const std::string model = r.model.empty() ? std::string("(unnamed model)") : r.model;
  std::ostringstream s;
  s << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>Quantization trade-off: " << html_escape(model) << "</title>\n<style>\n"
    << css() << "</style>\n</head>\n<body>\n<main>\n";
  s << "<h1>Quantization trade-off: " << html_escape(model) << "</h1>\n";
  s << "<p class=\"sub\">" << r.points.size() << " variant" << (r.points.size() == 1 ? "" : "s")
    << " (weight types \xc3\x97 KV-cache types), each measured against the base model.</p>\n";

  s << "<section class=\"card\"><dl class=\"facts\">\n";
  auto fact = [&](const char* k, const std::string& v) {
    s << "<dt>" << k << "</dt><dd>" << (v.empty() ? std::string("\xe2\x80\x93") : html_escape(v))
      << "</dd>\n";
  };
  fact("Model", r.model);
  fact("CPU", r.cpu);
  fact("Base file", r.base_path);
  fact("Threads", r.threads > 0 ? std::to_string(r.threads) : std::string());
  fact("Text", r.text_path);
  fact("Date", r.date);
  fact("Memory budget",
       r.budget_bytes > 0 ? budget_text(r.budget_bytes) + " (weights + KV cache)" : "none");
  fact("Sequence length", std::to_string(r.seq_len) + " tokens");
  s << "</dl></section>\n";

  s << "<section class=\"card\"><h2>Accuracy vs memory</h2>\n<p class=\"explain\">Lower and "
       "further left is "
       "better. Memory is what serving one "
    << std::max<int64_t>(r.seq_len, 0)
    << "-token sequence takes: the resident weights plus its KV cache. The line joins the Pareto "
       "frontier: "
       "no other variant is both smaller and closer to the base.</p>\n";
  s << render_chart(r, ChartKind::kMemory, pm) << "</section>\n";
  s << "<section class=\"card\"><h2>Accuracy vs throughput</h2>\n<p class=\"explain\">Lower and "
       "further right is "
       "better. Throughput is generation tokens/s on one stream. The line joins the Pareto "
       "frontier: no other "
       "variant is both faster and closer to the base.</p>\n";
  s << render_chart(r, ChartKind::kSpeed, ps) << "</section>\n";

  s << "<section class=\"card\"><h2>All variants</h2>\n<div "
       "class=\"table-wrap\"><table>\n<thead><tr>";
  const auto header = table_header();
  for (size_t k = 0; k < header.size(); ++k)
    s << "<th" << (k < 3 ? " class=\"txt\"" : "") << ">" << html_escape(header[k]) << "</th>";
  s << "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < r.points.size(); ++i) {
    const bool on_m = contains(pm, i), on_s = contains(ps, i);
    const bool picked = rec.index == i && rec.kind != Recommendation::Kind::kNothingFits;
    std::string cls = picked ? "recommended" : (on_m || on_s ? "frontier" : "");
    s << "<tr" << (cls.empty() ? "" : " class=\"" + cls + "\"") << ">";
    const auto cells = table_row(r, i, on_m, on_s);
    for (size_t k = 0; k < cells.size(); ++k)
      s << "<td" << (k < 3 ? " class=\"txt\"" : "") << ">" << html_escape(cells[k].text)
        << (cells[k].err.empty()
                ? std::string()
                : "<span class=\"err\">\xc2\xb1 " + html_escape(cells[k].err) + "</span>")
        << "</td>";
    s << "</tr>\n";
  }
  s << "</tbody></table></div>\n<p class=\"table-note\">Memory / seq: weights plus the KV cache of "
       "one "
    << r.seq_len
    << "-token sequence; vs base: its share of the base's. Frontier: M on the accuracy/memory "
       "Pareto frontier, S on "
       "the accuracy/throughput one. Top-1: how often the variant's most likely next token is the "
       "base's. "
       "A dash: not measured. The recommended row is highlighted.</p></section>\n";

  s << "<section class=\"recommendation\" id=\"recommendation\"><h2>Recommendation</h2>\n<p>"
    << html_escape(recommendation(r, r.min_top1)) << "</p></section>\n";
  s << "<footer>Written by triad tradeoff.</footer>\n</main>\n</body>\n</html>\n";
  return s.str();
}

void write_report(const TradeoffReport& r, const std::string& dir) {
  // Render everything first: a failure here leaves no files behind.
  const std::string js = to_json(r).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  const std::string md = render_markdown(r);
  const std::string html = render_html(r);
  const std::filesystem::path d =
      dir.empty() ? std::filesystem::path(".") : std::filesystem::path(dir);
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  if (ec) fail("cannot create report directory ", d.string(), ": ", ec.message());
  if (!std::filesystem::is_directory(d, ec))
    fail("report directory ", d.string(), " is not a directory");
  write_file(d / "report.json", js);
  write_file(d / "report.md", md);
  write_file(d / "report.html", html);
}

}  // namespace triad::quant
