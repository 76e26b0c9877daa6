// The two SVG charts of the tradeoff report page (tradeoff_chart.h): axes, points coloured by KV
// type, the Pareto frontier, labels placed to avoid each other.
#include "quant/tradeoff_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "quant/tradeoff_format.h"

namespace triad::quant::detail {
namespace {

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

}  // namespace

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

}  // namespace triad::quant::detail
