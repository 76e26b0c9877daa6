// `triad bench`: prompt processing (pp) and token generation (tg) speed, as llama-bench
// measures them, with peak resident memory and the memory-bandwidth roofline of tg.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "kernels/membw.h"
#include "loaded_model.h"

namespace triad::app {
namespace {

struct BenchOptions {
  CommonOptions common;
  int n_prompt = 512;
  int n_gen = 128;
  int reps = 3;
  int batch = 512;
  bool no_roofline = false;
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

int run(const BenchOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model);
  const Model& m = *lm.model;
  const ModelConfig& c = m.config();
  ThreadPool pool(threads);
  const int32_t n_ctx = std::max(o.n_prompt, o.n_gen) + 1;
  KvCache kv = m.make_kv_cache(n_ctx);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> dist(0, c.n_vocab - 1);
  std::vector<int32_t> prompt(o.n_prompt);
  for (int32_t& t : prompt) t = dist(rng);

  auto run_pp = [&] {
    kv.clear();
    for (int32_t i = 0; i < o.n_prompt; i += o.batch) {
      const int32_t len = std::min(o.batch, o.n_prompt - i);
      m.forward(std::span<const int32_t>(prompt.data() + i, len), kv, scratch, LogitsMode::kLast,
                logits.data(), pool);
    }
  };
  auto run_tg = [&] {
    kv.clear();
    int32_t tok[1] = {prompt.empty() ? 1 : prompt[0]};
    for (int32_t i = 0; i < o.n_gen; ++i) {
      m.forward(tok, kv, scratch, LogitsMode::kLast, logits.data(), pool);
      tok[0] = dist(rng);
    }
  };

  std::printf("model: %s\n", c.summary().c_str());
  std::printf("weights: %.1f MiB streamed per token; threads: %d; CPU kernels: %s\n",
              m.weights().bytes_per_token / (1024.0 * 1024.0), threads, cpu_summary().c_str());
  std::printf("| test | tokens/s | ms/token |\n|---|---|---|\n");
  Stat pp, tg;
  if (o.n_prompt > 0) {
    run_pp();  // warm-up
    std::vector<double> rates;
    for (int r = 0; r < o.reps; ++r) {
      Timer t;
      run_pp();
      rates.push_back(o.n_prompt / t.seconds());
    }
    pp = stats(rates);
    std::printf("| pp%d | %.2f ± %.2f | %.3f |\n", o.n_prompt, pp.mean, pp.sd, 1000.0 / pp.mean);
  }
  if (o.n_gen > 0) {
    run_tg();  // warm-up
    std::vector<double> rates;
    for (int r = 0; r < o.reps; ++r) {
      Timer t;
      run_tg();
      rates.push_back(o.n_gen / t.seconds());
    }
    tg = stats(rates);
    std::printf("| tg%d | %.2f ± %.2f | %.3f |\n", o.n_gen, tg.mean, tg.sd, 1000.0 / tg.mean);
  }
  std::printf("peak resident memory: %.1f MiB\n", peak_rss_mib());
  if (o.n_gen > 0 && !o.no_roofline) {
    const double bw = kernels::measure_read_bandwidth_gbs(pool);
    const double roof = bw * 1e9 / static_cast<double>(m.weights().bytes_per_token);
    std::printf("memory read bandwidth: %.1f GB/s -> tg roofline %.1f tokens/s; tg at %.0f%% of roofline\n",
                bw, roof, 100.0 * tg.mean / roof);
  }
  return 0;
}

}  // namespace

Command add_bench(CLI::App& app) {
  auto* o = new BenchOptions();
  CLI::App* cmd = app.add_subcommand("bench", "measure prompt processing and generation speed");
  o->common.add_to(*cmd, /*with_ctx=*/false);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens (pp test)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-n,--n-gen", o->n_gen, "generated tokens (tg test)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-r,--reps", o->reps, "repetitions")->check(CLI::Range(1, 1000));
  cmd->add_option("-b,--batch", o->batch, "tokens per forward call in pp")->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--no-roofline", o->no_roofline, "skip the memory bandwidth measurement");
  return [o] { return run(*o); };
}

}  // namespace triad::app
