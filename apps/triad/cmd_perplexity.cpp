// `triad perplexity`: perplexity of a model over a text file, computed as llama.cpp's
// perplexity tool does (so figures are comparable): the text is cut into chunks of --ctx
// tokens, each chunk starts with BOS (when the vocab adds one), and only the second half of each
// chunk is scored, so every scored token has at least ctx/2 tokens of context. The text is
// tokenized with BOS in front, as llama.cpp does, so chunk boundaries match its tool.
//
// KL divergence (quant/kld.h, llama.cpp's definitions and file format): with
// --kl-divergence-base FILE alone, the run also stores the base model's log-probabilities of
// every scored position in FILE; with --kl-divergence too, the run reads FILE instead of a text
// (its tokens and chunking) and compares this model against the stored base: KLD (mean, median,
// p99), top-1 agreement, token probability differences and the perplexity ratio, each with its
// standard error. --json FILE writes those figures for scripts (triad tradeoff).
#include <cmath>
#include <memory>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "loaded_model.h"
#include "model/solo_sequence.h"
#include "quant/kld.h"

namespace triad::app {
namespace {

struct PplOptions {
  CommonOptions common;
  std::string file;
  int chunks = 0;  // 0: all
  int batch = 512;
  std::string kld_base;  // --kl-divergence-base
  bool kld = false;      // --kl-divergence
  std::string json;
};

void write_json(const std::string& path, const std::string& body) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << body << "\n";
  TRIAD_CHECK(out.good(), "cannot write ", path);
}

// Runs one chunk (its first token replaced by BOS when the vocabulary adds one) and leaves the
// logits of every position in `logits`.
void eval_chunk(const Model& m, const Tokenizer& tok, std::vector<int32_t> chunk, SoloSequence& seq,
                ForwardScratch& scratch, int batch, std::vector<float>& logits, ThreadPool& pool) {
  if (tok.add_bos() && tok.bos_id() >= 0) chunk[0] = tok.bos_id();
  seq.clear();
  const int32_t n = static_cast<int32_t>(chunk.size()), n_vocab = m.config().n_vocab;
  for (int32_t i = 0; i < n; i += batch) {
    const int32_t len = std::min(batch, n - i);
    seq.forward(std::span<const int32_t>(chunk.data() + i, len), scratch, LogitsMode::kAll,
                logits.data() + static_cast<size_t>(i) * n_vocab, pool);
  }
}

int run_kld(const PplOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model, o.common.weight_type, o.common.resolved_threads());
  const Model& m = *lm.model;
  std::ifstream in(o.kld_base, std::ios::binary);
  TRIAD_CHECK(in.good(), "cannot read ", o.kld_base);
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  quant::KldBaseReader base(in, size);
  const int32_t n_vocab = m.config().n_vocab;
  TRIAD_CHECK(base.n_vocab() == n_vocab, o.kld_base, " holds a vocabulary of ", base.n_vocab(),
              " tokens, this model has ", n_vocab, ": not the same model family");
  const int32_t n_ctx = static_cast<int32_t>(base.n_ctx());
  TRIAD_CHECK(o.common.ctx == 0 || o.common.ctx == n_ctx, "--ctx ", o.common.ctx,
              " differs from the base file's ", n_ctx, " (leave --ctx out)");
  int64_t n_chunks = base.n_chunk();
  if (o.chunks > 0) n_chunks = std::min<int64_t>(n_chunks, o.chunks);
  log_info("KL divergence against ", o.kld_base, " over ", n_chunks, " chunks of ", n_ctx, " tokens");
  ThreadPool pool(threads);
  SoloSequence seq(m, n_ctx);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(n_ctx) * n_vocab);
  std::vector<uint16_t> records;
  quant::KldStats stats(n_vocab);
  Timer timer;
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const auto b = base.tokens().begin() + ch * n_ctx;
    std::vector<int32_t> chunk(b, b + n_ctx);
    eval_chunk(m, *lm.tokenizer, chunk, seq, scratch, o.batch, logits, pool);
    base.read_chunk(records);
    stats.add_chunk(logits.data(), records.data(), chunk.data(), n_ctx);
    const quant::KldSummary s = stats.summary();
    std::fprintf(stderr, "[%lld/%lld] PPL %.4f, ln(PPL/base) %.5f, KLD %.5f +/- %.5f, top-1 %.2f%% (%.1f s)\n",
                 static_cast<long long>(ch + 1), static_cast<long long>(n_chunks), s.ppl,
                 std::log(s.ppl_ratio), s.kld_mean, s.kld_err, 100 * s.top1, timer.seconds());
  }
  const quant::KldSummary s = stats.summary();
  std::printf("scored tokens: %lld\n", static_cast<long long>(s.count));
  std::printf("Mean PPL(Q)           : %10.6f +/- %10.6f\n", s.ppl, s.ppl_err);
  std::printf("Mean PPL(base)        : %10.6f +/- %10.6f\n", s.ppl_base, s.ppl_base_err);
  std::printf("Mean PPL(Q)/PPL(base) : %10.6f +/- %10.6f\n", s.ppl_ratio, s.ppl_ratio_err);
  std::printf("Mean KLD              : %10.6f +/- %10.6f\n", s.kld_mean, s.kld_err);
  std::printf("Median KLD            : %10.6f\n", s.kld_median);
  std::printf("99.0%% KLD             : %10.6f\n", s.kld_p99);
  std::printf("99.9%% KLD             : %10.6f\n", s.kld_p999);
  std::printf("Maximum KLD           : %10.6f\n", s.kld_max);
  std::printf("Same top p            : %7.3f +/- %5.3f %%\n", 100 * s.top1, 100 * s.top1_err);
  std::printf("Mean dp (next token)  : %7.3f +/- %5.3f %%\n", 100 * s.dp_mean, 100 * s.dp_err);
  std::printf("RMS dp                : %7.3f %%\n", 100 * s.dp_rms);
  std::printf("99.0%% |dp|            : %7.3f %%\n", 100 * s.dp_p99);
  std::printf("Mean |dp| (base top)  : %7.3f +/- %5.3f %%\n", 100 * s.dtop_mean, 100 * s.dtop_err);
  std::printf("99.0%% |dp| (base top) : %7.3f %%\n", 100 * s.dtop_p99);
  write_json(o.json, s.to_json());
  return 0;
}

int run(const PplOptions& o) {
  if (o.kld) return run_kld(o);
  TRIAD_CHECK(!o.file.empty(), "-f/--file is required (except with --kl-divergence, which reads the base file's tokens)");
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model, o.common.weight_type, o.common.resolved_threads());
  const Model& m = *lm.model;
  const Tokenizer& tok = *lm.tokenizer;
  const TextChunks text = chunk_text_file(tok, o.file, o.common.ctx, o.chunks);
  const std::vector<int32_t>& tokens = text.tokens;
  const int32_t n_ctx = text.n_ctx;
  const int64_t n_chunks = text.n_chunks;
  log_info("perplexity over ", n_chunks, " chunks of ", n_ctx, " tokens (", tokens.size(),
           " tokens in the file)");

  const int32_t n_vocab = m.config().n_vocab;
  ThreadPool pool(threads);
  SoloSequence seq(m, n_ctx);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(n_ctx) * n_vocab);
  const int32_t first = n_ctx / 2;
  double nll_sum = 0, nll_sq = 0;
  int64_t count = 0;
  std::unique_ptr<quant::KldBaseWriter> base;
  if (!o.kld_base.empty())
    base = std::make_unique<quant::KldBaseWriter>(o.kld_base, static_cast<uint32_t>(n_ctx), n_vocab,
                                                  static_cast<int32_t>(n_chunks), tokens);
  Timer timer;
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    std::vector<int32_t> chunk(tokens.begin() + ch * n_ctx, tokens.begin() + (ch + 1) * n_ctx);
    eval_chunk(m, tok, chunk, seq, scratch, o.batch, logits, pool);
    if (base) base->add_chunk(logits.data(), chunk.data());
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * n_vocab;
      double mx = row[0];
      for (int32_t v = 1; v < n_vocab; ++v) mx = std::max<double>(mx, row[v]);
      double sum = 0;
      for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      const double nll = -(row[chunk[j + 1]] - mx - std::log(sum));
      nll_sum += nll;
      nll_sq += nll * nll;
      ++count;
    }
    std::fprintf(stderr, "[%lld/%lld] running perplexity %.4f (%.1f s)\n",
                 static_cast<long long>(ch + 1), static_cast<long long>(n_chunks),
                 std::exp(nll_sum / count), timer.seconds());
  }
  const double mean = nll_sum / count;
  const double var = std::max(0.0, nll_sq / count - mean * mean);
  const double ppl = std::exp(mean);
  const double err = ppl * std::sqrt(var / std::max<int64_t>(1, count - 1));
  std::printf("scored tokens: %lld, mean NLL %.6f\n", static_cast<long long>(count), mean);
  std::printf("perplexity: %.4f +/- %.4f\n", ppl, err);
  if (base) {
    base->finish();
    std::printf("wrote the base log-probabilities to %s\n", o.kld_base.c_str());
  }
  char json[256];
  std::snprintf(json, sizeof json, "{\"count\": %lld, \"ppl\": %.9g, \"ppl_err\": %.9g}",
                static_cast<long long>(count), ppl, err);
  write_json(o.json, json);
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) {
  auto o = std::make_shared<PplOptions>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of the model over a text file");
  o->common.add_to(*cmd, true, true, "tokens per chunk (default: 512, as llama-perplexity)");
  o->common.add_weight_type(*cmd);
  cmd->add_option("-f,--file", o->file, "text file")->check(CLI::ExistingFile);
  cmd->add_option("--chunks", o->chunks, "score at most this many chunks (0: all)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-b,--batch", o->batch, "tokens per forward call")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--kl-divergence-base", o->kld_base,
                  "store the base model's log-probabilities here (with --kl-divergence: read them)");
  cmd->add_flag("--kl-divergence", o->kld,
                "compare this model against --kl-divergence-base (KLD, top-1 agreement, PPL ratio)")
      ->needs(cmd->get_option("--kl-divergence-base"));
  cmd->add_option("--json", o->json, "also write the figures as JSON to this file");
  return [o] { return run(*o); };
}

}  // namespace triad::app
