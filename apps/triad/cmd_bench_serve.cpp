// `triad bench serve`: a serving benchmark through the engine API. N requests with a fixed-seed
// mix of prompt and output lengths (optionally sharing a prefix) arrive all at once or at a
// Poisson rate, with at most --concurrency in flight; reports throughput, time to first token
// and time per output token percentiles, and the KV memory in use.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <memory>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "collect_sink.h"
#include "commands.h"
#include "engine/engine_api.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "engine_options.h"
#include "loaded_model.h"

namespace triad::app {
namespace {

struct ServeBenchOptions {
  CommonOptions common;
  // Speculative decoding off unless asked for: random prompts that greedy decoding turns into
  // loops would be drafted well and flatter the figures.
  EngineOptions engine = EngineOptions::plain_decoding();
  int requests = 16;
  int concurrency = 0;            // 0: no limit
  double rate = 0;                // requests/s (Poisson); 0: all at once
  std::string prompt_len = "76";  // N or A:B (uniform)
  std::string gen_len = "128";
  int shared_prefix = 0;          // tokens every prompt starts with
  uint64_t seed = 1;
  float temperature = 0.f;
  std::string constraint;         // "", "json", "schema:FILE" or "gbnf:FILE": constrained decoding
};

struct Range {
  int lo = 0, hi = 0;
};
Range parse_range(const std::string& s, const char* what) {
  Range r;
  try {
    const size_t colon = s.find(':');
    r.lo = std::stoi(s.substr(0, colon));
    r.hi = colon == std::string::npos ? r.lo : std::stoi(s.substr(colon + 1));
  } catch (const std::exception&) {
    fail("bad ", what, " '", s, "' (expected N or A:B)");
  }
  TRIAD_CHECK(r.lo >= 1 && r.hi >= r.lo && r.hi <= (1 << 20), "bad ", what, " '", s, "'");
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p / 100.0 * (v.size() - 1);
  const size_t i = static_cast<size_t>(idx);
  const double f = idx - i;
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

int run(const ServeBenchOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model, o.common.weight_type, o.common.resolved_threads());
  const ModelConfig& c = lm.model->config();
  const Range pl = parse_range(o.prompt_len, "--prompt-len");
  const Range gl = parse_range(o.gen_len, "--gen-len");
  const int ctx = o.common.ctx > 0 ? o.common.ctx : o.shared_prefix + pl.hi + gl.hi + 1;
  engine::EngineConfig ec = o.engine.make(lm, threads, ctx);
  engine::Engine eng(*lm.model, ec);

  std::mt19937_64 rng(o.seed);
  // Constrained decoding: every request shares one compiled constraint, as a server's do.
  std::shared_ptr<grammar::Constraint> constraint;
  if (!o.constraint.empty()) {
    auto read = [](const std::string& path) {
      std::ifstream f(path, std::ios::binary);
      TRIAD_CHECK(f, "bench serve: cannot read ", path);
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    };
    std::string gbnf;
    if (o.constraint == "json") {
      gbnf = grammar::json_object_gbnf();
    } else if (o.constraint.rfind("schema:", 0) == 0) {
      gbnf = grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(read(o.constraint.substr(7))));
    } else if (o.constraint.rfind("gbnf:", 0) == 0) {
      gbnf = read(o.constraint.substr(5));
    } else {
      TRIAD_CHECK(false, "bench serve: --constraint takes json, schema:FILE or gbnf:FILE");
    }
    constraint = std::make_shared<grammar::Constraint>(std::make_shared<const grammar::Grammar>(grammar::Grammar::from_gbnf(gbnf)),
                                                       grammar::Vocab::from_tokenizer(*lm.tokenizer));
    const auto t = std::chrono::steady_clock::now();
    grammar::warm_up(constraint, 4, 64, 1);
    std::printf("constraint: %s (warm-up %.2f s)\n", o.constraint.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  // Uniformly random token ids: the benchmark measures speed, not text.
  auto random_token = [&] {
    std::uniform_int_distribution<int32_t> d(0, c.n_vocab - 1);
    return d(rng);
  };
  std::vector<int32_t> prefix(o.shared_prefix);
  for (int32_t& t : prefix) t = random_token();
  auto make_request = [&](int n_prompt, int n_gen) {
    engine::GenerationRequest r;
    r.prompt = prefix;
    for (int i = 0; i < n_prompt; ++i) r.prompt.push_back(random_token());
    r.max_tokens = n_gen;
    r.ignore_eos = true;
    r.sampling.temperature = o.temperature;
    r.sampling.seed = rng();
    r.constraint = constraint;
    return r;
  };
  std::printf("model: %s\nthreads: %d; %s\n", c.summary().c_str(), threads, eng.kv_plan().describe().c_str());
  std::printf("engine: max-batched-tokens %d, max-seqs %d, block %d, K %s, V %s, prefix caching %s\n",
              ec.max_batched_tokens, ec.max_seqs, ec.block_size, std::string(dtype_name(ec.k_type)).c_str(),
              std::string(dtype_name(ec.v_type)).c_str(), ec.enable_prefix_caching ? "on" : "off");

  if (o.shared_prefix > 0) {
    // Cold, then warm, each alone: the prefix cache's effect on time to first token.
    auto one = [&](const char* label) {
      auto sink = std::make_shared<CollectSink>();
      eng.submit(make_request(pl.lo, 1), sink);
      sink->wait();
      std::printf("%s request alone (%d-token shared prefix + %d): TTFT %.3f s, %d cached tokens\n", label,
                  o.shared_prefix, pl.lo, sink->timings().ttft_s, sink->timings().cached_tokens);
      return sink->timings().ttft_s;
    };
    const double cold = one("cold");
    const double warm = one("warm");
    std::printf("warm/cold TTFT: %.3f\n", warm / cold);
  }

  // The timed run.
  std::uniform_int_distribution<int> dp(pl.lo, pl.hi), dg(gl.lo, gl.hi);
  std::exponential_distribution<double> gap(o.rate > 0 ? o.rate : 1.0);
  std::vector<engine::GenerationRequest> reqs;
  std::vector<double> arrival(o.requests, 0.0);
  double t_arr = 0;
  for (int i = 0; i < o.requests; ++i) {
    reqs.push_back(make_request(dp(rng), dg(rng)));
    if (o.rate > 0) {
      arrival[i] = t_arr;
      t_arr += gap(rng);
    }
  }
  std::vector<std::shared_ptr<CollectSink>> sinks(o.requests);
  const auto t0 = CollectSink::Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(CollectSink::Clock::now() - t0).count(); };
  int next = 0, in_flight_done = 0;
  uint64_t peak_kv = 0;
  int64_t peak_kv_tokens = 0, peak_running = 0;
  engine::EngineStats at_peak;
  const int limit = o.concurrency > 0 ? o.concurrency : o.requests;
  while (in_flight_done < o.requests) {
    int live = 0;
    in_flight_done = 0;
    for (int i = 0; i < next; ++i) (sinks[i]->done() ? in_flight_done : live) += 1;
    while (next < o.requests && live < limit && arrival[next] <= elapsed()) {
      sinks[next] = std::make_shared<CollectSink>();
      eng.submit(std::move(reqs[next]), sinks[next]);
      ++next;
      ++live;
    }
    const engine::EngineStats s = eng.stats();
    if (s.kv_bytes_used > peak_kv) {
      peak_kv = s.kv_bytes_used;
      peak_kv_tokens = s.kv_tokens_held;
      peak_running = s.running;
      at_peak = s;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const double wall = elapsed();

  std::vector<double> ttft, tpot, itl, e2e, queue;
  int64_t n_prompt = 0, n_out = 0, n_cached = 0, n_preempt = 0;
  for (int i = 0; i < o.requests; ++i) {
    const CollectSink& s = *sinks[i];
    TRIAD_CHECK(s.reason() != engine::FinishReason::kError, "request ", i, " failed: ", s.error());
    const auto& t = s.timings();
    ttft.push_back(t.ttft_s);
    e2e.push_back(t.e2e_s);
    queue.push_back(t.queue_s);
    n_prompt += t.prompt_tokens;
    n_out += t.completion_tokens;
    n_cached += t.cached_tokens;
    n_preempt += t.preemptions;
    const auto& ts = s.times();
    if (ts.size() >= 2) {
      tpot.push_back(std::chrono::duration<double>(ts.back() - ts.front()).count() / (ts.size() - 1));
      for (size_t j = 1; j < ts.size(); ++j)
        itl.push_back(std::chrono::duration<double>(ts[j] - ts[j - 1]).count());
    }
  }
  std::printf("requests: %d (prompt %s + shared prefix %d tokens, output %s tokens), concurrency %s, rate %s\n",
              o.requests, o.prompt_len.c_str(), o.shared_prefix, o.gen_len.c_str(),
              o.concurrency > 0 ? std::to_string(o.concurrency).c_str() : "unlimited",
              o.rate > 0 ? (std::to_string(o.rate) + " req/s").c_str() : "all at once");
  std::printf("wall time: %.2f s; prompt tokens %lld (cached %lld), output tokens %lld, preemptions %lld\n", wall,
              static_cast<long long>(n_prompt), static_cast<long long>(n_cached), static_cast<long long>(n_out),
              static_cast<long long>(n_preempt));
  std::printf("throughput: total %.1f tokens/s, output %.1f tokens/s, %.2f requests/s\n",
              (n_prompt + n_out) / wall, n_out / wall, o.requests / wall);
  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("| %s | %.3f | %.3f | %.3f | %.3f |\n", name, mean(v), percentile(v, 50), percentile(v, 90),
                percentile(v, 99));
  };
  std::printf("| seconds | mean | p50 | p90 | p99 |\n|---|---|---|---|---|\n");
  row("time to first token", ttft);
  row("time per output token", tpot);
  row("inter-token latency", itl);
  row("end-to-end latency", e2e);
  row("queue time", queue);
  const uint64_t token_bytes = at_peak.kv_blocks_used > 0 && peak_kv_tokens > 0 ? peak_kv / peak_kv_tokens : 0;
  std::printf("KV in use at peak: %.2f MiB for %lld tokens held by %lld running requests (%llu bytes/token "
              "incl. partly filled blocks); pool %.1f MiB\n",
              peak_kv / 1048576.0, static_cast<long long>(peak_kv_tokens), static_cast<long long>(peak_running),
              static_cast<unsigned long long>(token_bytes), eng.kv_plan().total_bytes / 1048576.0);
  const engine::EngineStats fin = eng.stats();
  std::printf("prefix cache: %lld of %lld looked-up prompt tokens hit; engine steps %lld\n",
              static_cast<long long>(fin.prefix_hits), static_cast<long long>(fin.prefix_queries),
              static_cast<long long>(fin.steps));
  return 0;
}

}  // namespace

Command add_bench_serve(CLI::App& bench) {
  auto o = std::make_shared<ServeBenchOptions>();  // owned by the returned command
  CLI::App* cmd = bench.add_subcommand("serve", "serving benchmark: many concurrent requests through the engine");
  o->common.add_to(*cmd);
  o->common.add_weight_type(*cmd);
  o->engine.add_to(*cmd);
  cmd->add_option("-N,--requests", o->requests, "number of requests")->check(CLI::Range(1, 100000));
  cmd->add_option("--concurrency", o->concurrency, "requests in flight at most (0: all)")->check(CLI::Range(0, 100000));
  cmd->add_option("--rate", o->rate, "Poisson arrival rate in requests/s (0: all at once)")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--prompt-len", o->prompt_len, "prompt tokens per request: N or A:B (uniform)");
  cmd->add_option("--gen-len", o->gen_len, "output tokens per request: N or A:B (uniform)");
  cmd->add_option("--shared-prefix", o->shared_prefix, "tokens of a prefix every prompt shares (also measures cold vs warm TTFT)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--seed", o->seed, "seed of the request mix");
  cmd->add_option("--temp", o->temperature, "sampling temperature (0: greedy)");
  cmd->add_option("--constraint", o->constraint, "constrained decoding for every request: json, schema:FILE.json or gbnf:FILE");
  return [o] { return run(*o); };
}

}  // namespace triad::app
