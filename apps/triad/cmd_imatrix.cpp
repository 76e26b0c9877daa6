// `triad imatrix -m MODEL -f CALIB.txt -o imatrix.gguf`: runs the model over calibration text
// and writes, for every weight matrix, the mean squared activation of each input channel in
// llama.cpp's imatrix GGUF format (quant/imatrix.h), for `triad quantize --imatrix` or
// llama-quantize. The text is cut into --ctx token chunks as `triad perplexity` cuts it (each
// chunk starts with BOS when the vocabulary adds one); the running perplexity is printed per
// chunk as a sanity check of the calibration run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "loaded_model.h"
#include "model/solo_sequence.h"
#include "quant/imatrix_collector.h"

namespace triad::app {
namespace {

struct ImatrixOptions {
  CommonOptions common;
  std::string file, out = "imatrix.gguf";
  int chunks = 0;
  bool process_output = false;
};

int run(const ImatrixOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  // The collector finds a matrix by its address in the file's mapping: keep the GGUF layout.
  Model::set_weight_relayout(false);
  LoadedModel lm = load_model(o.common.model);
  const Model& m = *lm.model;
  const Tokenizer& tok = *lm.tokenizer;
  const TextChunks text = chunk_text_file(tok, o.file, o.common.ctx, o.chunks);
  const std::vector<int32_t>& tokens = text.tokens;
  const int32_t n_ctx = text.n_ctx;
  const int64_t n_chunks = text.n_chunks;
  TRIAD_CHECK(n_ctx <= m.config().n_ctx_train || m.config().n_ctx_train <= 0, "--ctx ", n_ctx,
              " is past the model's trained context ", m.config().n_ctx_train);
  log_info("imatrix over ", n_chunks, " chunks of ", n_ctx, " tokens (", tokens.size(),
           " tokens in the file)");

  const int32_t n_vocab = m.config().n_vocab;
  ThreadPool pool(threads);
  SoloSequence seq(m, n_ctx);
  ForwardScratch scratch;
  quant::ImatrixCollector collector(m, o.process_output);
  scratch.observer = &collector;
  std::vector<float> logits(static_cast<size_t>(n_ctx) * n_vocab);
  double nll_sum = 0;
  int64_t count = 0;
  Timer timer;
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    std::vector<int32_t> chunk(tokens.begin() + ch * n_ctx, tokens.begin() + (ch + 1) * n_ctx);
    if (tok.add_bos() && tok.bos_id() >= 0) chunk[0] = tok.bos_id();
    seq.clear();
    seq.forward(std::span<const int32_t>(chunk.data(), chunk.size()), scratch, LogitsMode::kAll,
                logits.data(), pool);
    for (int32_t j = n_ctx / 2; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + static_cast<size_t>(j) * n_vocab;
      const double mx = *std::max_element(row, row + n_vocab);
      double sum = 0;
      for (int32_t v = 0; v < n_vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - mx);
      nll_sum += -(row[chunk[j + 1]] - mx - std::log(sum));
      ++count;
    }
    const double eta = timer.seconds() / static_cast<double>(ch + 1) * static_cast<double>(n_chunks - ch - 1);
    std::fprintf(stderr, "[%lld/%lld] %zu matrices, perplexity %.4f, %.1f s (%.0f s left)\n",
                 static_cast<long long>(ch + 1), static_cast<long long>(n_chunks),
                 collector.matrices(), std::exp(nll_sum / static_cast<double>(count)),
                 timer.seconds(), eta);
  }
  quant::Imatrix im = collector.result();
  im.datasets = {o.file};
  im.chunk_count = n_chunks;
  im.chunk_size = n_ctx;
  im.save(o.out);
  std::printf("wrote %s: %zu matrices, %lld chunks of %d tokens\n", o.out.c_str(), im.size(),
              static_cast<long long>(n_chunks), n_ctx);
  return 0;
}

}  // namespace

Command add_imatrix(CLI::App& app) {
  auto o = std::make_shared<ImatrixOptions>();
  CLI::App* cmd = app.add_subcommand(
      "imatrix", "collect an importance matrix over calibration text (llama.cpp's imatrix GGUF)");
  o->common.add_to(*cmd, true, true, "tokens per chunk (default: 512, as llama-imatrix)");
  cmd->add_option("-f,--file", o->file, "calibration text")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", o->out, "output imatrix GGUF (default imatrix.gguf)");
  cmd->add_option("--chunks", o->chunks, "use at most this many chunks (0: all)")->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("--process-output", o->process_output, "also collect output.weight");
  return [o] { return run(*o); };
}

}  // namespace triad::app
