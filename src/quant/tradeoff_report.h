// The report of `triad tradeoff`: one base model quantized to several weight types x KV-cache
// types, each variant measured (memory, accuracy against the base, speed). This file turns the
// measurements into the Pareto frontiers, a plain-words recommendation, and three renderings:
// JSON (every field), Markdown (a table), and one self-contained HTML page with two inline SVG
// charts drawn here (no network, scripts, fonts or images).
//
// Contract:
// - The base point (is_base) is the reference: its KLD counts as 0 and its top-1 agreement as
//   100% wherever they are compared or plotted, whatever its kld_mean/top1 fields hold.
// - Missing measurements are tolerated everywhere: a zero or non-finite tok/s means "not
//   measured", a non-finite KLD or top-1 means "unknown". Rendered text never contains NaN or
//   infinity (such values print as "n/a" or "-" and are placed on a labelled edge of a chart);
//   JSON writes non-finite numbers as null.
// - pareto_frontier_memory compares memory_for_one_sequence and KLD; points with an unknown KLD
//   or zero memory (not measured) are left out. pareto_frontier_speed compares tg_tps and KLD;
//   points with an unknown KLD or no measured tg_tps are left out. Equal points do not dominate
//   each other: both stay on the frontier.
// - Strings that reach HTML/SVG are escaped (&, <, >, ", ' and control characters); strings in
//   Markdown table cells have |, \, `, *, [, ], <, > backslash-escaped and newlines flattened.
// - write_report creates `dir` if needed and writes each file through FILE.tmp, renamed into
//   place when complete; any failure throws triad::Error naming the file and leaves no .tmp file.
// Thread-safety: every function is pure over its arguments (no shared state); concurrent calls
// are safe, except write_report calls that target the same directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace triad::quant {

struct TradeoffPoint {
  std::string label;        // e.g. "Q4_K_M+imatrix / kv q8_0"
  std::string weight_type;  // "F32" (the base), "Q4_K_M", "fp8_e4m3", ...
  std::string kv_type;      // "f16", "q8_0", "fp8_e4m3", ...
  bool imatrix = false;
  bool is_base = false;  // the unquantized reference point (KLD 0, top-1 100%)
  double bits_per_weight = 0;
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;  // resident weight bytes after load
  uint64_t kv_bytes_per_token = 0;
  int64_t seqs_in_budget = 0;  // full-length sequences (seq_len tokens) that fit in the budget
  double ppl = 0, ppl_err = 0;
  double kld_mean = 0, kld_mean_err = 0, kld_p99 = 0;
  // top1: the fraction 0..1 of positions where the top token agrees with the base
  double top1 = 0, top1_err = 0;
  double pp_tps = 0, tg_tps = 0;  // prompt processing and generation tokens/s (one stream)
  double serve_tps = 0;           // generated tokens/s over 16 concurrent streams
};

struct TradeoffReport {
  std::string model;  // model name / file name
  std::string base_path, text_path, cpu, date;
  int threads = 0;
  uint64_t budget_bytes = 0;  // memory budget for weights + KV
  int64_t seq_len = 4096;
  std::vector<TradeoffPoint> points;
  double min_top1 = 0.99;  // the top-1 agreement the recommendation in to_json / render_* asks for
};

// Memory a variant needs to serve one full-length sequence: weight_bytes + seq_len *
// kv_bytes_per_token (a negative seq_len counts as 0; saturates at UINT64_MAX instead of wrapping).
uint64_t memory_for_one_sequence(const TradeoffReport& r, const TradeoffPoint& p);

// The KLD and top-1 agreement used for comparisons: 0 and 1 for the base point, else the fields.
double effective_kld(const TradeoffPoint& p);
double effective_top1(const TradeoffPoint& p);

// Indices of the points on the accuracy/memory Pareto frontier (no other point has both
// lower-or-equal memory_for_one_sequence and lower-or-equal kld_mean with one strictly better),
// ordered by memory (ascending; ties by KLD, then index).
std::vector<size_t> pareto_frontier_memory(const TradeoffReport& r);
// Same against throughput (higher tg_tps better, lower kld_mean better), ordered by tg_tps
// (ascending; ties by KLD, then index).
std::vector<size_t> pareto_frontier_speed(const TradeoffReport& r);

// Which point recommendation() talks about, and why.
struct Recommendation {
  enum class Kind {
    kMeetsThreshold,  // index: the least-memory point that fits with top-1 >= min_top1
    kMostAccurate,    // none that fits reaches min_top1; index: the most accurate one that fits
    kNothingFits,     // no point fits the budget; index: the point needing the least memory
    kNoPoints,        // the report has no points; no index
  };
  Kind kind = Kind::kNoPoints;
  std::optional<size_t> index;
};
// "Fits" means seqs_in_budget >= 1. Ties on memory go to the lower KLD, then the lower index; "most
// accurate" is the highest top-1 agreement, ties to the lower KLD, then the lower memory. A
// non-finite min_top1 counts as 0.99.
Recommendation recommend(const TradeoffReport& r, double min_top1 = 0.99);
const char* to_string(Recommendation::Kind k);  // "meets_threshold", "most_accurate", ...

// A plain-words recommendation, e.g. "For <model> and a 8 GiB budget, Q4_K_M+imatrix / kv f16
// keeps 99.1% top-1 agreement with the base at 31% of its memory and serves 212 tokens/s over 16
// streams." Rule: among the points that fit the budget (seqs_in_budget >= 1), the one with the
// least memory whose top-1 agreement is >= min_top1 (default 0.99; if none reaches it, the most
// accurate point that fits, said so plainly; if nothing fits, say so).
std::string recommendation(const TradeoffReport& r, double min_top1 = 0.99);

// Every field of the report and of each point (plus each point's "memory_for_one_sequence"), and
// "pareto_memory", "pareto_speed" (index arrays), "recommendation" (the text), "recommended" (an
// index or null) and "recommendation_kind". The renderings all recommend with r.min_top1.
nlohmann::json to_json(const TradeoffReport& r);
// A title, the run's facts, a table (one row per point, Pareto points marked), then the
// recommendation.
std::string render_markdown(const TradeoffReport& r);
// One self-contained HTML page: the run's facts, <svg id="chart-memory"> (mean KLD on a log10
// scale, with the base on a "0" band below it, against memory for one sequence on a log2 scale
// labelled in KiB/MiB/GiB) and <svg id="chart-speed"> (mean KLD against generation tok/s, linear),
// each point a <circle> (and no other circles) with a <title> tooltip and a text label, coloured
// by KV type; each frontier joined by a <polyline class="pareto"> with its points' circles in
// class "pareto"; unmeasured values on "n/a" bands; then the full table and the recommendation
// in a highlighted box.
std::string render_html(const TradeoffReport& r);

// Human-readable formatting used by the renderings (exposed for the command's console output).
std::string format_bytes(uint64_t bytes);      // "812 B", "18.0 KiB", "245.3 MiB", "1.52 GiB"
std::string format_sig(double v, int digits);  // "%.<digits>g", "n/a" when not finite
std::string html_escape(const std::string& s);

// Writes dir/report.json, dir/report.md, dir/report.html (each via a .tmp file + rename); throws
// triad::Error on I/O failure.
void write_report(const TradeoffReport& r, const std::string& dir);

}  // namespace triad::quant
