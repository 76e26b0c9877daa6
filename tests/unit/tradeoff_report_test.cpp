// The `triad tradeoff` report writer (src/quant/tradeoff_report.h): Pareto frontiers with ties
// and dominated points, each recommendation branch, the HTML charts (ids, one circle per point,
// escaping), degenerate inputs that must not print NaN/inf, the JSON fields, and write_report.
// With TRIAD_TRADEOFF_SAMPLE_DIR set, SampleReport also writes a realistic report there (for
// tests/quant/render_check.py and for looking at the page).
#include "quant/tradeoff_report.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/error.h"

namespace triad::quant {
namespace {

namespace fs = std::filesystem;

TradeoffPoint make_point(const std::string& label, uint64_t weight_bytes, uint64_t kv_per_token,
                         double kld, double top1, double tg) {
  TradeoffPoint p;
  p.label = label;
  p.weight_type = label;
  p.kv_type = "f16";
  p.weight_bytes = weight_bytes;
  p.file_bytes = weight_bytes + 1000;
  p.kv_bytes_per_token = kv_per_token;
  p.kld_mean = kld;
  p.top1 = top1;
  p.tg_tps = tg;
  p.serve_tps = tg * 5;
  p.seqs_in_budget = 1;
  return p;
}

// seq_len 100, kv 1 byte/token: memory_for_one_sequence = weight_bytes + 100.
TradeoffReport hand_made() {
  TradeoffReport r;
  r.model = "toy";
  r.seq_len = 100;
  r.budget_bytes = 10000;
  auto base = make_point("base", 1900, 1, 0, 1, 10);  // 0: mem 2000, kld 0, tg 10
  base.is_base = true;
  base.kld_mean = 0.7;  // ignored: the base counts as KLD 0
  base.top1 = 0;        // ignored: the base counts as top-1 100%
  r.points.push_back(base);
  r.points.push_back(make_point("A", 500, 1, 0.01, 0.99, 30));  // 1: mem 600
  r.points.push_back(make_point("B", 500, 1, 0.01, 0.99, 30));  // 2: equal to A
  r.points.push_back(make_point("C", 700, 1, 0.02, 0.98, 20));  // 3: dominated by A on both
  r.points.push_back(make_point("D", 300, 1, 0.05, 0.95, 50));  // 4: mem 400
  r.points.push_back(make_point("E", 300, 1, 0.08, 0.93, 50));  // 5: dominated by D (same mem / tg)
  r.points.push_back(make_point("F", 900, 1, 0.005, 0.995, 25));  // 6: mem 1000
  r.points.push_back(
      make_point("G", 100, 1, std::numeric_limits<double>::quiet_NaN(), 0.5, 0));  // 7: unknown
  return r;
}

std::string chart(const std::string& html, const std::string& id) {
  const size_t a = html.find("<svg id=\"" + id + "\"");
  if (a == std::string::npos) return {};
  const size_t b = html.find("</svg>", a);
  return b == std::string::npos ? std::string() : html.substr(a, b - a);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// "nan" / "inf" as words (not inside "information" and the like), any case. (No std::regex: GCC 12
// warns inside it under the sanitizer build, and warnings are errors.)
bool has_non_finite_word(const std::string& s) {
  std::string l = s;
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto letter = [&](size_t i) {
    return i < l.size() && std::isalpha(static_cast<unsigned char>(l[i]));
  };
  for (const std::string w : {"nan", "inf"})
    for (size_t p = l.find(w); p != std::string::npos; p = l.find(w, p + 1)) {
      const bool before = p > 0 && letter(p - 1);
      size_t end = p + w.size();
      if (w == "inf" && l.compare(p, 8, "infinity") == 0) end = p + 8;
      if (!before && !letter(end)) return true;
    }
  return false;
}

// Every numeric SVG attribute parses as a finite number.
void expect_finite_attributes(const std::string& html) {
  for (const std::string name :
       {"cx", "cy", "r", "x", "y", "x1", "x2", "y1", "y2", "width", "height"}) {
    const std::string key = " " + name + "=\"";
    for (size_t p = html.find(key); p != std::string::npos; p = html.find(key, p + 1)) {
      const size_t start = p + key.size(), end = html.find('"', start);
      ASSERT_NE(end, std::string::npos);
      const std::string v = html.substr(start, end - start);
      char* stop = nullptr;
      const double d = std::strtod(v.c_str(), &stop);
      EXPECT_TRUE(!v.empty() && stop && *stop == '\0' && std::isfinite(d))
          << name << "=\"" << v << "\"";
    }
  }
  const std::string key = " points=\"";
  for (size_t p = html.find(key); p != std::string::npos; p = html.find(key, p + 1)) {
    const size_t start = p + key.size(), end = html.find('"', start);
    ASSERT_NE(end, std::string::npos);
    const std::string v = html.substr(start, end - start);
    EXPECT_EQ(v.find_first_not_of("-0123456789., "), std::string::npos) << v;
  }
}

TEST(TradeoffReport, MemoryForOneSequence) {
  TradeoffReport r;
  r.seq_len = 4096;
  TradeoffPoint p;
  p.weight_bytes = 1000;
  p.kv_bytes_per_token = 18432;
  EXPECT_EQ(memory_for_one_sequence(r, p), 1000u + 4096u * 18432u);
  r.seq_len = -5;
  EXPECT_EQ(memory_for_one_sequence(r, p), 1000u);
  r.seq_len = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(memory_for_one_sequence(r, p), std::numeric_limits<uint64_t>::max());
  r.seq_len = 1;
  p.weight_bytes = std::numeric_limits<uint64_t>::max() - 10;
  EXPECT_EQ(memory_for_one_sequence(r, p), std::numeric_limits<uint64_t>::max());
}

TEST(TradeoffReport, ParetoMemoryWithTiesAndDominatedPoints) {
  const TradeoffReport r = hand_made();
  // D (400), A and B (600, equal: neither dominates the other), F (1000), base (2000, KLD 0).
  // C is dominated by A, E by D; G has no KLD.
  EXPECT_EQ(pareto_frontier_memory(r), (std::vector<size_t>{4, 1, 2, 6, 0}));
}

TEST(TradeoffReport, ParetoSpeedWithTiesAndDominatedPoints) {
  const TradeoffReport r = hand_made();
  // Ascending tg: base (10, KLD 0), F (25), A and B (30, equal), D (50). C is dominated by A,
  // E by D (same speed, worse KLD); G was not measured.
  EXPECT_EQ(pareto_frontier_speed(r), (std::vector<size_t>{0, 6, 1, 2, 4}));
}

TEST(TradeoffReport, ParetoEmptyAndSingle) {
  TradeoffReport r;
  EXPECT_TRUE(pareto_frontier_memory(r).empty());
  EXPECT_TRUE(pareto_frontier_speed(r).empty());
  r.points.push_back(make_point("only", 10, 1, 0.1, 0.9, 5));
  EXPECT_EQ(pareto_frontier_memory(r), (std::vector<size_t>{0}));
  EXPECT_EQ(pareto_frontier_speed(r), (std::vector<size_t>{0}));
  r.points[0].tg_tps = 0;  // speed not measured
  EXPECT_TRUE(pareto_frontier_speed(r).empty());
}

TEST(TradeoffReport, RecommendLeastMemoryAboveThreshold) {
  const TradeoffReport r = hand_made();
  // Fitting points with top-1 >= 0.99: base (2000), A and B (600, tie -> lower index), F (1000).
  const Recommendation rec = recommend(r);
  EXPECT_EQ(rec.kind, Recommendation::Kind::kMeetsThreshold);
  EXPECT_EQ(rec.index, std::optional<size_t>(1));
  const std::string text = recommendation(r);
  EXPECT_NE(text.find("For toy and a budget of 9.8 KiB, A keeps 99.00% top-1 agreement"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mean KLD 0.01"), std::string::npos) << text;
  EXPECT_NE(text.find("at 30% of its memory"), std::string::npos) << text;
  EXPECT_NE(text.find("serves 150 tokens/s over 16 streams"), std::string::npos) << text;

  // A stricter threshold: F (0.995) is the smallest that reaches it.
  EXPECT_EQ(recommend(r, 0.995).index, std::optional<size_t>(6));
  // Ties on memory go to the lower KLD.
  TradeoffReport t = hand_made();
  t.points[2].kld_mean = 0.009;
  EXPECT_EQ(recommend(t).index, std::optional<size_t>(2));
}

TEST(TradeoffReport, RecommendTheBaseWhenOnlyItReachesTheThreshold) {
  TradeoffReport r = hand_made();
  for (auto& p : r.points)
    if (!p.is_base) p.top1 = 0.9;
  const Recommendation rec = recommend(r);
  EXPECT_EQ(rec.kind, Recommendation::Kind::kMeetsThreshold);
  EXPECT_EQ(rec.index, std::optional<size_t>(0));
  const std::string text = recommendation(r);
  EXPECT_NE(text.find("the pick is the base itself, base, needing 2.0 KiB for one 100-token "
                      "sequence, and it serves 50.0 "
                      "tokens/s over 16 streams."),
            std::string::npos)
      << text;
}

TEST(TradeoffReport, RecommendMostAccurateWhenNoneReachesTheThreshold) {
  TradeoffReport r = hand_made();
  r.points[0].seqs_in_budget = 0;  // the base does not fit
  r.points[6].seqs_in_budget = 0;  // nor does F
  for (auto& p : r.points)
    if (!p.is_base) p.top1 = std::min(p.top1, 0.98);
  r.points[3].top1 = 0.985;  // C: the most accurate that fits
  const Recommendation rec = recommend(r);
  EXPECT_EQ(rec.kind, Recommendation::Kind::kMostAccurate);
  EXPECT_EQ(rec.index, std::optional<size_t>(3));
  const std::string text = recommendation(r);
  EXPECT_NE(text.find("no variant that fits keeps 99% top-1 agreement with the base"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the most accurate one that fits is C, with 98.50% top-1 agreement"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "at 40% of its memory (800 B for one 100-token sequence), and it serves 100 tokens/s"),
      std::string::npos)
      << text;
  // Without a base there is no share of its memory to quote; parentheses stay balanced.
  r.points[0].is_base = false;
  r.points[3].seqs_in_budget = 3;
  r.points[3].serve_tps = 0;
  const std::string no_base = recommendation(r);
  EXPECT_NE(
      no_base.find(
          "(mean KLD 0.02), needing 800 B for one 100-token sequence (3 such sequences fit in the "
          "budget), and it generates 20.0 tokens/s on one stream."),
      std::string::npos)
      << no_base;
}

TEST(TradeoffReport, RecommendNothingFits) {
  TradeoffReport r = hand_made();
  for (auto& p : r.points) p.seqs_in_budget = 0;
  const Recommendation rec = recommend(r);
  EXPECT_EQ(rec.kind, Recommendation::Kind::kNothingFits);
  EXPECT_EQ(rec.index, std::optional<size_t>(7));  // G: the smallest
  const std::string text = recommendation(r);
  EXPECT_NE(text.find("no variant fits even one 100-token sequence: the smallest, G, needs 200 B"),
            std::string::npos)
      << text;
  EXPECT_TRUE(to_json(r)["recommended"].is_null());
}

TEST(TradeoffReport, RecommendWithoutPoints) {
  TradeoffReport r;
  r.model = "m";
  EXPECT_EQ(recommend(r).kind, Recommendation::Kind::kNoPoints);
  EXPECT_EQ(recommendation(r),
            "For m, no variants were measured, so there is nothing to recommend.");
}

TEST(TradeoffReport, HtmlHasBothChartsWithOneCirclePerPoint) {
  const TradeoffReport r = hand_made();
  const std::string html = render_html(r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  const std::string mem = chart(html, "chart-memory"), speed = chart(html, "chart-speed");
  ASSERT_FALSE(mem.empty());
  ASSERT_FALSE(speed.empty());
  EXPECT_EQ(count(html, "<circle"), 2 * r.points.size());
  EXPECT_EQ(count(mem, "<circle"), r.points.size());
  EXPECT_EQ(count(speed, "<circle"), r.points.size());
  // Every point has a tooltip and a label.
  EXPECT_EQ(count(mem, "</title></circle>"), r.points.size());
  EXPECT_EQ(count(mem, "<text class=\"lbl"), r.points.size());
  // Frontier points are marked and joined.
  EXPECT_EQ(count(mem, "<circle class=\"pareto"), pareto_frontier_memory(r).size());
  EXPECT_EQ(count(speed, "<circle class=\"pareto"), pareto_frontier_speed(r).size());
  EXPECT_EQ(count(mem, "<polyline class=\"pareto\""), 1u);
  EXPECT_EQ(count(speed, "<polyline class=\"pareto\""), 1u);
  // The base is labelled as such, at the "0" band of the log axis.
  EXPECT_NE(mem.find(">base</text>"), std::string::npos);  // already says "base"
  EXPECT_NE(mem.find(">0 (base)</text>"), std::string::npos);
  // Self-contained: no scripts or external resources.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  // The table and the recommendation box.
  EXPECT_EQ(count(html, "<tr"), r.points.size() + 1);
  EXPECT_NE(html.find("class=\"recommendation\""), std::string::npos);
  EXPECT_NE(html.find(html_escape(recommendation(r))), std::string::npos);
  EXPECT_FALSE(has_non_finite_word(html));
  expect_finite_attributes(html);
}

TEST(TradeoffReport, StringsAreEscaped) {
  TradeoffReport r = hand_made();
  r.model = "m<&\">'";
  r.cpu = "<script>alert(1)</script>";
  r.points[1].label = "Q4<&\">/kv";
  r.points[1].kv_type = "q8_0<b>&\"";
  r.points[2].weight_type = "x|y*z";
  r.points[2].label = "pipe|label`";
  const std::string html = render_html(r);
  EXPECT_EQ(html.find("<&\">"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("Q4&lt;&amp;&quot;&gt;/kv"), std::string::npos);
  EXPECT_NE(html.find("m&lt;&amp;&quot;&gt;&#39;"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  // Both charts still have one circle per point.
  EXPECT_EQ(count(chart(html, "chart-memory"), "<circle"), r.points.size());
  EXPECT_EQ(count(chart(html, "chart-speed"), "<circle"), r.points.size());
  EXPECT_EQ(html_escape("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&#39;");

  const std::string md = render_markdown(r);
  EXPECT_NE(md.find("pipe\\|label\\`"), std::string::npos);
  EXPECT_NE(md.find("Q4\\<&\"\\>/kv"), std::string::npos);
  EXPECT_NE(md.find("\\<script\\>alert(1)\\</script\\>"), std::string::npos);
  for (size_t i = md.find('<'); i != std::string::npos; i = md.find('<', i + 1))
    EXPECT_TRUE(i > 0 && md[i - 1] == '\\') << "unescaped '<' at " << i;
  // Every table row has the header's cell count (no cell was split by a '|').
  std::istringstream in(md);
  std::string line;
  size_t rows = 0, cells = 0;
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) continue;
    size_t n = 0;
    for (size_t i = 0; i < line.size(); ++i)
      if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++n;
    if (rows++ == 0) cells = n;
    EXPECT_EQ(n, cells) << line;
  }
  EXPECT_EQ(rows, r.points.size() + 2);
}

TradeoffReport all_equal() {
  TradeoffReport r;
  for (int i = 0; i < 3; ++i) r.points.push_back(make_point("same", 1000, 10, 0.02, 0.97, 42));
  return r;
}

TradeoffReport non_finite() {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  TradeoffReport r;
  r.model = "broken";
  r.budget_bytes = 1 << 30;
  auto p = make_point("bad1", 1000, 10, nan, nan, nan);
  p.bits_per_weight = inf;
  p.ppl = nan;
  p.ppl_err = inf;
  p.kld_mean_err = nan;
  p.kld_p99 = -inf;
  p.top1_err = nan;
  p.pp_tps = -inf;
  p.serve_tps = inf;
  r.points.push_back(p);
  auto q = make_point("bad2", 2000, 10, inf, -inf, inf);
  q.kld_p99 = nan;
  r.points.push_back(q);
  auto s = make_point("negative", 500, 0, -1e-9, 1.5, -3);
  r.points.push_back(s);
  return r;
}

TEST(TradeoffReport, DegenerateInputsRenderWithoutNanOrInf) {
  std::vector<std::pair<std::string, TradeoffReport>> cases;
  cases.push_back({"empty", TradeoffReport{}});
  {
    TradeoffReport r;
    auto base = make_point("F32", 4000, 100, 0, 1, 12);
    base.is_base = true;
    r.points.push_back(base);
    cases.push_back({"base only", r});
  }
  cases.push_back({"one point", TradeoffReport{}});
  cases.back().second.points.push_back(make_point("one", 100, 1, 0.3, 0.9, 7));
  cases.push_back({"all equal", all_equal()});
  {
    TradeoffReport r = hand_made();
    for (auto& p : r.points) {
      p.tg_tps = 0;  // speed not measured
      p.serve_tps = 0;
      p.pp_tps = 0;
    }
    cases.push_back({"no speed", r});
  }
  {
    TradeoffReport r;
    r.seq_len = 0;
    r.points.push_back(TradeoffPoint{});  // every field zero
    r.points.push_back(TradeoffPoint{});
    cases.push_back({"zeros", r});
  }
  cases.push_back({"non-finite", non_finite()});
  {
    TradeoffReport r = hand_made();
    r.points[3].kld_mean = 1e-300;  // a huge span of decades
    r.points[4].kld_mean = 1e300;
    r.points[5].tg_tps = 1e300;
    cases.push_back({"extremes", r});
  }
  {
    TradeoffReport r = hand_made();  // more KV types than colours, with long names
    for (size_t i = 0; i < r.points.size(); ++i)
      r.points[i].kv_type = "kv-type-with-a-long-name-" + std::to_string(i);
    cases.push_back({"many kv types", r});
  }
  for (const auto& [name, r] : cases) {
    SCOPED_TRACE(name);
    const std::string html = render_html(r), md = render_markdown(r), text = recommendation(r);
    EXPECT_FALSE(has_non_finite_word(html)) << html;
    EXPECT_FALSE(has_non_finite_word(md)) << md;
    EXPECT_FALSE(has_non_finite_word(text)) << text;
    expect_finite_attributes(html);
    EXPECT_EQ(count(chart(html, "chart-memory"), "<circle"), r.points.size());
    EXPECT_EQ(count(chart(html, "chart-speed"), "<circle"), r.points.size());
    const std::string js = to_json(r).dump();
    EXPECT_FALSE(has_non_finite_word(js)) << js;
    EXPECT_TRUE(nlohmann::json::accept(js));
  }
}

TEST(TradeoffReport, JsonHasEveryPointAndField) {
  TradeoffReport r = hand_made();
  r.base_path = "base.gguf";
  r.text_path = "text.txt";
  r.cpu = "Test CPU";
  r.date = "2025-01-01";
  r.threads = 8;
  r.points[1].imatrix = true;
  r.points[1].bits_per_weight = 4.85;
  r.points[1].ppl = 12.5;
  r.points[1].ppl_err = 0.25;
  r.points[1].kld_mean_err = 0.001;
  r.points[1].kld_p99 = 0.2;
  r.points[1].top1_err = 0.002;
  r.points[1].pp_tps = 900;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["model"], "toy");
  EXPECT_EQ(j["base_path"], "base.gguf");
  EXPECT_EQ(j["text_path"], "text.txt");
  EXPECT_EQ(j["cpu"], "Test CPU");
  EXPECT_EQ(j["date"], "2025-01-01");
  EXPECT_EQ(j["threads"], 8);
  EXPECT_EQ(j["budget_bytes"], 10000u);
  EXPECT_EQ(j["seq_len"], 100);
  EXPECT_TRUE(j.contains("min_top1"));
  ASSERT_EQ(j["points"].size(), r.points.size());
  const char* fields[] = {"label",
                          "weight_type",
                          "kv_type",
                          "imatrix",
                          "is_base",
                          "bits_per_weight",
                          "file_bytes",
                          "weight_bytes",
                          "kv_bytes_per_token",
                          "memory_for_one_sequence",
                          "seqs_in_budget",
                          "ppl",
                          "ppl_err",
                          "kld_mean",
                          "kld_mean_err",
                          "kld_p99",
                          "top1",
                          "top1_err",
                          "pp_tps",
                          "tg_tps",
                          "serve_tps"};
  for (size_t i = 0; i < r.points.size(); ++i)
    for (const char* f : fields)
      EXPECT_TRUE(j["points"][i].contains(f)) << "point " << i << " lacks " << f;
  const auto& a = j["points"][1];
  const TradeoffPoint& p = r.points[1];
  EXPECT_EQ(a["label"], p.label);
  EXPECT_EQ(a["weight_type"], p.weight_type);
  EXPECT_EQ(a["kv_type"], p.kv_type);
  EXPECT_EQ(a["imatrix"], true);
  EXPECT_EQ(a["is_base"], false);
  EXPECT_EQ(j["points"][0]["is_base"], true);
  EXPECT_DOUBLE_EQ(a["bits_per_weight"].get<double>(), 4.85);
  EXPECT_EQ(a["file_bytes"], p.file_bytes);
  EXPECT_EQ(a["weight_bytes"], p.weight_bytes);
  EXPECT_EQ(a["kv_bytes_per_token"], p.kv_bytes_per_token);
  EXPECT_EQ(a["memory_for_one_sequence"], 600u);
  EXPECT_EQ(a["seqs_in_budget"], 1);
  EXPECT_DOUBLE_EQ(a["ppl"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(a["ppl_err"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(a["kld_mean"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(a["kld_mean_err"].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(a["kld_p99"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(a["top1"].get<double>(), 0.99);
  EXPECT_DOUBLE_EQ(a["top1_err"].get<double>(), 0.002);
  EXPECT_DOUBLE_EQ(a["pp_tps"].get<double>(), 900);
  EXPECT_DOUBLE_EQ(a["tg_tps"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(a["serve_tps"].get<double>(), 150);
  EXPECT_TRUE(j["points"][7]["kld_mean"].is_null());  // NaN -> null
  EXPECT_EQ(j["pareto_memory"].get<std::vector<size_t>>(), pareto_frontier_memory(r));
  EXPECT_EQ(j["pareto_speed"].get<std::vector<size_t>>(), pareto_frontier_speed(r));
  EXPECT_EQ(j["recommendation"], recommendation(r));
  EXPECT_EQ(j["recommended"], 1);
  EXPECT_EQ(j["recommendation_kind"], "meets_threshold");
  EXPECT_DOUBLE_EQ(j["min_top1"].get<double>(), 0.99);

  // The renderings recommend with the report's own threshold.
  r.min_top1 = 0.995;
  const nlohmann::json strict = to_json(r);
  EXPECT_EQ(strict["recommended"], 6);
  EXPECT_EQ(strict["recommendation"], recommendation(r, 0.995));
  EXPECT_NE(render_markdown(r).find(recommendation(r, 0.995)), std::string::npos);
  EXPECT_NE(render_html(r).find(html_escape(recommendation(r, 0.995))), std::string::npos);
}

TEST(TradeoffReport, MarkdownHasTableAndRecommendation) {
  const TradeoffReport r = hand_made();
  const std::string md = render_markdown(r);
  EXPECT_EQ(md.rfind("# Quantization trade-off: toy", 0), 0u);
  EXPECT_NE(md.find("| variant |"), std::string::npos);
  EXPECT_NE(md.find("| **A** |"), std::string::npos);  // the recommended row
  EXPECT_NE(md.find("| M S |"), std::string::npos);    // on both frontiers
  EXPECT_NE(md.find("**Recommendation:** " + recommendation(r)), std::string::npos);
}

TEST(TradeoffReport, Formatting) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(18432), "18.0 KiB");
  EXPECT_EQ(format_bytes(uint64_t{300} << 20), "300.0 MiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(format_sig(0.0123456, 4), "0.01235");
  EXPECT_EQ(format_sig(0, 4), "0");
  EXPECT_EQ(format_sig(std::numeric_limits<double>::quiet_NaN(), 4), "n/a");
  // The checker used above.
  EXPECT_TRUE(has_non_finite_word("cx=\"-nan\""));
  EXPECT_TRUE(has_non_finite_word("1 INF"));
  EXPECT_TRUE(has_non_finite_word("Infinity"));
  EXPECT_FALSE(has_non_finite_word("information, infinite, banana, n/a"));
}

TEST(TradeoffReport, WriteReportWritesThreeFiles) {
  const fs::path dir = fs::path(testing::TempDir()) / "tradeoff_report_test" / "nested";
  fs::remove_all(dir.parent_path());
  const TradeoffReport r = hand_made();
  write_report(r, dir.string());
  for (const char* f : {"report.json", "report.md", "report.html"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
    EXPECT_GT(fs::file_size(dir / f), 100u) << f;
  }
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_NE(e.path().extension(), ".tmp");
  }
  EXPECT_EQ(entries, 3u);
  std::ifstream in(dir / "report.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["points"].size(), r.points.size());
  std::ifstream h(dir / "report.html");
  std::stringstream ss;
  ss << h.rdbuf();
  EXPECT_EQ(ss.str(), render_html(r));
  // Invalid UTF-8 in a name does not stop the JSON from being written.
  TradeoffReport bad = r;
  bad.model = "bad\xff\xfe";
  EXPECT_NO_THROW(write_report(bad, dir.string()));

  // A directory that cannot be created: triad::Error, nothing written.
  const fs::path file = dir / "report.md";
  EXPECT_THROW(write_report(r, (file / "sub").string()), triad::Error);
  fs::remove_all(dir.parent_path());
}

// A realistic report (a 270M model, weight types x KV-cache types) for looking at the page.
TradeoffReport sample() {
  TradeoffReport r;
  r.model = "gemma-3-270m";
  r.base_path = "models/gemma-3-270m-f32.gguf";
  r.text_path = "shared/testdata/wiki.test.raw";
  r.cpu = "AMD EPYC 9654 96-Core Processor (AVX-512 VNNI/BF16)";
  r.date = "2025-06-01 12:00 UTC";
  r.threads = 16;
  r.budget_bytes = uint64_t{3} << 29;  // 1.5 GiB
  r.seq_len = 4096;
  struct W {
    const char* type;
    bool imatrix;
    double bpw, weights_mb, kld, top1, tg;
  };
  const W ws[] = {
      {"F32", false, 32, 1072, 0, 1, 38},
      {"BF16", false, 16, 536, 0.00021, 0.9985, 61},
      {"Q8_0", false, 8.5, 291, 0.00093, 0.9952, 96},
      {"Q6_K", false, 6.56, 233, 0.0041, 0.9868, 86},
      {"Q5_K_M", false, 5.7, 205, 0.0093, 0.9791, 92},
      {"Q4_K_M", false, 4.85, 178, 0.0352, 0.9512, 108},
      {"Q4_K_M", true, 4.85, 178, 0.0247, 0.9604, 108},
      {"Q3_K_M", false, 3.9, 147, 0.112, 0.9007, 71},
      {"Q2_K", false, 3.0, 121, 0.452, 0.8012, 64},
      {"fp8_e4m3", false, 8, 276, 0.0121, 0.9744, 83},
  };
  struct K {
    const char* type;
    double bytes_per_token, kld_add, top1_mul, speed_mul;
  };
  const K ks[] = {{"f16", 18432, 0, 1, 1},
                  {"q8_0", 9792, 0.0011, 0.9985, 0.98},
                  {"fp8_e4m3", 9216, 0.0093, 0.989, 0.96}};
  for (const W& w : ws) {
    for (const K& k : ks) {
      const bool base = std::string(w.type) == "F32" && std::string(k.type) == "f16";
      if (std::string(w.type) == "F32" && !base) continue;
      if (std::string(k.type) == "fp8_e4m3" && std::string(w.type) != "Q4_K_M" &&
          std::string(w.type) != "fp8_e4m3" && std::string(w.type) != "Q8_0")
        continue;
      TradeoffPoint p;
      p.weight_type = w.type;
      p.kv_type = k.type;
      p.imatrix = w.imatrix;
      p.is_base = base;
      p.label = std::string(w.type) + (w.imatrix ? "+imatrix" : "") + " / kv " + k.type;
      p.bits_per_weight = w.bpw;
      p.weight_bytes = static_cast<uint64_t>(w.weights_mb * 1024 * 1024);
      p.file_bytes = p.weight_bytes + 4 * 1024 * 1024;
      p.kv_bytes_per_token = static_cast<uint64_t>(k.bytes_per_token);
      const uint64_t per_seq = p.kv_bytes_per_token * static_cast<uint64_t>(r.seq_len);
      p.seqs_in_budget = p.weight_bytes >= r.budget_bytes
                             ? 0
                             : static_cast<int64_t>((r.budget_bytes - p.weight_bytes) / per_seq);
      p.kld_mean = base ? 0 : w.kld + k.kld_add;
      p.kld_mean_err = p.kld_mean * 0.02;
      p.kld_p99 = p.kld_mean * 9.5;
      p.top1 = base ? 1 : w.top1 * k.top1_mul;
      p.top1_err = base ? 0 : 0.0007;
      p.ppl = 21.37 * std::exp(p.kld_mean);
      p.ppl_err = 0.31;
      p.tg_tps = w.tg * k.speed_mul;
      p.pp_tps = w.tg * 11.3;
      p.serve_tps = p.tg_tps * 5.6;
      r.points.push_back(p);
    }
  }
  return r;
}

TEST(TradeoffReport, SampleReport) {
  const TradeoffReport r = sample();
  const std::string html = render_html(r);
  EXPECT_EQ(count(chart(html, "chart-memory"), "<circle"), r.points.size());
  EXPECT_EQ(count(chart(html, "chart-speed"), "<circle"), r.points.size());
  EXPECT_FALSE(has_non_finite_word(html));
  expect_finite_attributes(html);
  EXPECT_NE(chart(html, "chart-memory").find(">F32 / kv f16 (base)</text>"), std::string::npos);
  const Recommendation rec = recommend(r);
  EXPECT_EQ(rec.kind, Recommendation::Kind::kMeetsThreshold);
  ASSERT_TRUE(rec.index);
  EXPECT_EQ(r.points[*rec.index].label, "Q8_0 / kv q8_0");
  if (const char* d = std::getenv("TRIAD_TRADEOFF_SAMPLE_DIR")) {
    write_report(r, d);
    // The degenerate pages too, for looking at them.
    write_report(non_finite(), std::string(d) + "/non_finite");
    write_report(hand_made(), std::string(d) + "/hand_made");
    TradeoffReport one;
    one.model = "one point";
    one.points.push_back(make_point("only <one>", 100 << 20, 1024, 0.3, 0.9, 0));
    write_report(one, std::string(d) + "/one_point");
    TradeoffReport many = hand_made();
    for (size_t i = 0; i < many.points.size(); ++i)
      many.points[i].kv_type = "kv-type-long-name-" + std::to_string(i);
    many.points[3].tg_tps = 0;
    write_report(many, std::string(d) + "/many_kv");
  }
}

}  // namespace
}  // namespace triad::quant
