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

#include "quant/tradeoff_chart.h"
#include "quant/tradeoff_format.h"

namespace triad::quant {
namespace {

using json = nlohmann::json;
using namespace detail;

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
