// `triad perplexity`: perplexity of a model over a text file, computed as llama.cpp's
// perplexity tool does (so figures are comparable): the text is cut into chunks of --ctx
// tokens, each chunk starts with BOS (when the vocab adds one), and only the second half of each
// chunk is scored, so every scored token has at least ctx/2 tokens of context. The text is
// tokenized with BOS in front, as llama.cpp does, so chunk boundaries match its tool.
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

namespace triad::app {
namespace {

struct PplOptions {
  CommonOptions common;
  std::string file;
  int chunks = 0;  // 0: all
  int batch = 512;
};

int run(const PplOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model);
  const Model& m = *lm.model;
  const Tokenizer& tok = *lm.tokenizer;
  std::ifstream in(o.file, std::ios::binary);
  TRIAD_CHECK(in.good(), "cannot read ", o.file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<int32_t> tokens = tok.encode(ss.str(), /*add_special=*/true, /*parse_special=*/false);
  const int32_t n_ctx = o.common.ctx > 0 ? o.common.ctx : 512;
  TRIAD_CHECK(n_ctx >= 8, "--ctx must be at least 8");
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  TRIAD_CHECK(n_chunks > 0, "the text has ", tokens.size(), " tokens, fewer than one ", n_ctx,
              "-token chunk");
  if (o.chunks > 0) n_chunks = std::min<int64_t>(n_chunks, o.chunks);
  log_info("perplexity over ", n_chunks, " chunks of ", n_ctx, " tokens (", tokens.size(),
           " tokens in the file)");

  const int32_t n_vocab = m.config().n_vocab;
  ThreadPool pool(threads);
  KvCache kv = m.make_kv_cache(n_ctx);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(n_ctx) * n_vocab);
  const int32_t first = n_ctx / 2;
  double nll_sum = 0, nll_sq = 0;
  int64_t count = 0;
  Timer timer;
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    std::vector<int32_t> chunk(tokens.begin() + ch * n_ctx, tokens.begin() + (ch + 1) * n_ctx);
    if (tok.add_bos() && tok.bos_id() >= 0) chunk[0] = tok.bos_id();
    kv.clear();
    for (int32_t i = 0; i < n_ctx; i += o.batch) {
      const int32_t len = std::min(o.batch, n_ctx - i);
      m.forward(std::span<const int32_t>(chunk.data() + i, len), kv, scratch, LogitsMode::kAll,
                logits.data() + static_cast<size_t>(i) * n_vocab, pool);
    }
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
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& app) {
  auto o = std::make_shared<PplOptions>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of the model over a text file");
  o->common.add_to(*cmd);
  cmd->add_option("-f,--file", o->file, "text file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--chunks", o->chunks, "score at most this many chunks (0: all)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-b,--batch", o->batch, "tokens per forward call")->check(CLI::Range(1, 1 << 16));
  return [o] { return run(*o); };
}

}  // namespace triad::app
