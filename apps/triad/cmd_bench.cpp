// `triad bench`: prompt processing (pp) and token generation (tg) speed, as llama-bench
// measures them, with peak resident memory and the memory-bandwidth roofline of tg.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "commands.h"
#include "kernels/membw.h"
#include "collect_sink.h"
#include "engine/engine_api.h"
#include "engine_options.h"
#include "loaded_model.h"

namespace triad::app {
namespace {

struct BenchOptions {
  CommonOptions common;
  // Speculative decoding off unless asked for: tg measures plain decode (as llama-bench does),
  // and greedy loops over random prompts would be drafted well.
  EngineOptions engine = EngineOptions::plain_decoding();
  int n_prompt = 512;
  int n_gen = 128;
  std::vector<int> depths;  // contexts already in the KV cache before the pp / tg tests (llama-bench's -d)
  int reps = 3;
  bool no_roofline = false;
  bool batch_given = false;  // -b/--max-batched-tokens on the command line
};

struct Stat {
  double mean = 0, sd = 0;
};
Stat stats(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= v.size();
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / (v.size() - 1)) : 0;
  return s;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// Resident memory now (/proc/self/statm), or 0 where it cannot be read.
double rss_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages = 0, resident = 0;
  const bool ok = std::fscanf(f, "%ld %ld", &pages, &resident) == 2;
  std::fclose(f);
  return ok ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0) : 0;
}

// The model's and engine's peak resident memory, without the bandwidth probes' buffer (512 MiB,
// freed after each probe, but the kernel's high-water mark keeps it): the peak before the first
// probe, raised by whatever set a new high-water mark after the last one, or by what is resident
// at the end.
struct PeakMemory {
  double before_probes = 0;  // high-water mark before the first probe (0: none ran yet)
  double after_probes = 0;   // high-water mark right after the last probe
  template <class Fn>
  double probe(Fn&& fn) {
    if (after_probes == 0) before_probes = peak_rss_mib();
    const double r = fn();
    after_probes = peak_rss_mib();
    return r;
  }
  double mib() const {
    const double end = peak_rss_mib();
    if (after_probes == 0 || end > after_probes) return end;
    return std::max(before_probes, rss_mib());
  }
};

int run(const BenchOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model, o.common.weight_type, o.common.resolved_threads());
  const Model& m = *lm.model;
  const ModelConfig& c = m.config();
  // Every run goes through the engine, as requests: pp is the time to the first token of an
  // n_prompt-token request (one forward pass, or chunks of -b tokens when given), tg the decode rate of a
  // 1-token request generating n_gen tokens. Each pp repetition uses a new random prompt, so
  // the prefix cache never helps. With --depth D, every request starts with the same D-token
  // context, computed before the tests at that depth and then served by the prefix cache, so pp
  // and tg run with D positions already in the KV cache (llama-bench's -d). Several depths run
  // in increasing order, each context extending the last (only the new part is computed).
  std::vector<int> depths = o.depths.empty() ? std::vector<int>{0} : o.depths;
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  const int max_depth = depths.back();
  const int64_t ctx = int64_t{max_depth} + std::max(o.n_prompt, o.n_gen) + 2;
  TRIAD_CHECK(ctx <= (int64_t{1} << 22), "bench: --depth plus the test's tokens is too long");
  engine::EngineConfig ec = o.engine.make(lm, threads, static_cast<int>(ctx));
  ec.eog_ids.clear();
  // Like llama-bench's pp: the whole prompt in one forward pass unless -b says otherwise.
  // (With a context, a step also holds its partial last block, and the context itself is
  // computed in chunks of at least 512.)
  if (!o.batch_given)
    ec.max_batched_tokens = max_depth > 0 ? std::max(o.n_prompt + ec.block_size, 512) : std::max(o.n_prompt, 1);
  TRIAD_CHECK(max_depth == 0 || ec.enable_prefix_caching, "bench: --depth needs the prefix cache (drop --no-prefix-caching)");
  engine::Engine eng(m, ec);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> dist(0, c.n_vocab - 1);
  std::vector<int32_t> context(static_cast<size_t>(max_depth));
  for (int32_t& t : context) t = dist(rng);
  int depth = 0;  // the tests' current depth: their prompts start with context[0, depth)

  auto run_request = [&](int32_t n_prompt, int32_t n_gen) {
    engine::GenerationRequest r;
    r.prompt.assign(context.begin(), context.begin() + depth);
    r.prompt.resize(static_cast<size_t>(depth) + static_cast<size_t>(std::max(n_prompt, 1)));
    for (size_t i = static_cast<size_t>(depth); i < r.prompt.size(); ++i) r.prompt[i] = dist(rng);
    r.max_tokens = std::max(n_gen, 1);
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    auto sink = std::make_shared<CollectSink>();
    eng.submit(std::move(r), sink);
    sink->wait();
    TRIAD_CHECK(sink->reason() != engine::FinishReason::kError, "bench request failed: ", sink->error());
    return sink;
  };
  // The context's whole KV blocks come from the cache; a partial last block is computed with
  // the test's tokens (and counted: the rate is of the tokens computed).
  int32_t cached_depth = 0;
  auto computed = [&](const CollectSink& s, int32_t n_prompt) {
    cached_depth = s.timings().cached_tokens;
    return depth + std::max(n_prompt, 1) - s.timings().cached_tokens;
  };
  auto pp_rate = [&] {
    auto s = run_request(o.n_prompt, 1);
    return computed(*s, o.n_prompt) / s->timings().ttft_s;
  };
  auto tg_rate = [&] {
    auto s = run_request(1, o.n_gen);
    computed(*s, 1);
    const auto& t = s->times();
    TRIAD_CHECK(t.size() >= 2, "tg: too few tokens");
    const double secs = std::chrono::duration<double>(t.back() - t.front()).count();
    return (t.size() - 1) / secs;
  };
  ThreadPool pool(threads);  // for the bandwidth probes only (run while the engine is idle)

  std::printf("model: %s\n", c.summary().c_str());
  std::printf("weights: %.1f MiB streamed per token; threads: %d; CPU kernels: %s\n",
              m.weights().bytes_per_token / (1024.0 * 1024.0), threads, cpu_summary().c_str());
  // llama-bench's label: "pp512 @ d8192"; the depth served from the cache, if not all of it.
  auto depth_label = [&]() -> std::string {
    if (depth == 0) return "";
    std::string l = " @ d" + std::to_string(depth);
    if (cached_depth != depth) l += " (" + std::to_string(cached_depth) + " cached)";
    return l;
  };
  std::printf("| test | tokens/s | ms/token |\n|---|---|---|\n");
  std::fflush(stdout);
  std::vector<std::string> notes;
  std::vector<double> tg0;     // tg's runs without a context, for the roofline
  std::vector<double> probes;  // GB/s before the first of them and after each
  PeakMemory peak;
  bool have_tg0 = false;
  for (int d : depths) {
    if (d > 0) {  // extend the cached context to d tokens
      const int from = depth;
      depth = d;
      auto s = run_request(0, 1);
      const double secs = s->timings().ttft_s;
      const int32_t done = d + 1 - s->timings().cached_tokens;
      char buf[160];
      std::snprintf(buf, sizeof buf, "context %d -> %d: %d tokens computed in %.2f s (%.1f tokens/s)", from, d, done,
                    secs, done / secs);
      notes.emplace_back(buf);
    }
    // One warm-up, then o.reps measured runs, printed as a table row; `between` runs before the
    // first measured run and after each.
    auto measure = [&](const char* test, int n, auto&& rate, auto&& between) {
      rate();
      std::vector<double> rates;
      between();
      for (int r = 0; r < o.reps; ++r) {
        rates.push_back(rate());
        between();
      }
      const Stat st = stats(rates);
      std::printf("| %s%d%s | %.2f ± %.2f | %.3f |\n", test, n, depth_label().c_str(), st.mean, st.sd, 1000.0 / st.mean);
      return rates;
    };
    if (o.n_prompt > 0) measure("pp", o.n_prompt, pp_rate, [] {});
    if (o.n_gen > 0) {
      // Without a context, tg's runs are bracketed by bandwidth probes (the engine is idle then),
      // so each run is compared with the bandwidth measured beside it: on shared machines the
      // bandwidth can swing by 2x from one minute to the next, and a single probe after all the
      // runs measured another moment than theirs.
      const bool probe = d == 0 && !o.no_roofline;
      const std::vector<double> rates = measure("tg", o.n_gen, tg_rate, [&] {
        if (probe) probes.push_back(peak.probe([&] { return kernels::measure_read_bandwidth_gbs(pool); }));
      });
      if (d == 0) {
        tg0 = rates;
        have_tg0 = true;
      }
    }
    std::fflush(stdout);
  }
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  std::printf("peak resident memory: %.1f MiB\n", peak.mib());
  if (have_tg0 && !o.no_roofline) {
    // Run r against the mean of the probes on either side of it.
    const double bytes = static_cast<double>(m.weights().bytes_per_token);
    std::vector<double> shares;
    for (size_t r = 0; r < tg0.size(); ++r) shares.push_back(tg0[r] * bytes / ((probes[r] + probes[r + 1]) / 2 * 1e9));
    const Stat bw = stats(probes), share = stats(shares);
    const auto [lo, hi] = std::minmax_element(probes.begin(), probes.end());
    std::printf("memory read bandwidth: %.1f GB/s -> tg roofline %.1f tokens/s; tg at %.0f%% of roofline "
                "(each run against the probes beside it, %zu probes of %.1f-%.1f GB/s; ± %.0f%%)\n",
                bw.mean, bw.mean * 1e9 / bytes, 100.0 * share.mean, probes.size(), *lo, *hi, 100.0 * share.sd);
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("bench", "measure prompt processing and generation speed");
  o->common.add_to(*cmd, /*with_ctx=*/false, /*model_required=*/false);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens (pp test)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", o->n_gen, "generated tokens (tg test)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--reps", o->reps, "repetitions")->check(CLI::Range(1, 1000));
  cmd->add_option("-d,--depth", o->depths,
                  "context tokens already in the KV cache before the tests, one depth or a list (0,8192,32768): each "
                  "context is computed once, then served by the prefix cache, as llama-bench's -d")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 22));
  cmd->add_flag("--no-roofline", o->no_roofline, "skip the memory bandwidth measurement");
  o->common.add_weight_type(*cmd);
  o->engine.add_to(*cmd);
  Command serve = add_bench_serve(*cmd);
  Command grammar = add_bench_grammar(*cmd);
  return [o, cmd, serve, grammar] {
    if (cmd->got_subcommand("serve")) return serve();
    if (cmd->got_subcommand("grammar")) return grammar();
    TRIAD_CHECK(!o->common.model.empty(), "bench: --model is required");
    o->batch_given = cmd->count("--max-batched-tokens") > 0;
    return run(*o);
  };
}

}  // namespace triad::app
