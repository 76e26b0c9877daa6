// The `triad` command-line entry point: parses the subcommand and runs it, turning any
// triad::Error into a one-line message and exit status 1.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "model/model.h"
#include "quant/online.h"

namespace triad::app {

void CommonOptions::add_to(CLI::App& cmd, bool with_ctx, bool model_required, const char* ctx_help) {
  CLI::Option* m = cmd.add_option("-m,--model", model,
                                  "GGUF model file, Hugging Face model folder (converted once and cached), or a catalog "
                                  "name (`triad list`; pulled on first use)")
                       ->check(model_ref());
  if (model_required) m->required();
  cmd.add_option("-t,--threads", threads, "worker threads (default: physical cores)")
      ->check(CLI::Range(0, 1024));
  if (with_ctx)
    cmd.add_option("-c,--ctx", ctx, ctx_help ? ctx_help : "context size in tokens (default: min(trained, 4096))")
        ->check(CLI::Range(0, 1 << 24));
}

void CommonOptions::add_weight_type(CLI::App& cmd) {
  cmd.add_option("--weight-type", weight_type,
                 "quantize the F32/F16/BF16 layer matrices at load time (no calibration): " +
                     quant::weight_type_names());
  cmd.add_flag_callback(
      "--no-repack", [] { Model::set_weight_relayout(false); },
      "keep quantized weights in the file's GGUF layout (shared page cache, zero-copy load) instead of re-laying "
      "them once for the AVX-512 and AVX2 kernels (same memory; faster decode, batched decode and prompts)");
}

int CommonOptions::resolved_threads() const { return threads > 0 ? threads : physical_cores(); }

void print_startup(int threads) {
  log_info("CPU kernels: ", cpu_summary(), "; threads: ", threads);
}

}  // namespace triad::app

int main(int argc, char** argv) {
  using namespace triad::app;
  CLI::App app{"Triad: an LLM inference engine for GGUF models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "triad 0.1.0");
  bool verbose = false, quiet = false;
  std::string log_format = "text";
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only");
  app.add_option("--log-format", log_format, "text, or json: one JSON object per log line (serve: one per request)")
      ->check(CLI::IsMember({"text", "json"}));
  Command commands[] = {add_run(app),      add_perplexity(app), add_bench(app),
                        add_gguf(app),     add_tokenize(app),   add_eval_logits(app),
                        add_template(app), add_serve(app),    add_quantize(app),
                        add_imatrix(app),
                        add_tradeoff(app), add_convert(app), add_pull(app),
                        add_list(app),     add_rm(app)};
  // -v, -q and --log-format also work after the subcommand ("triad serve --log-format json").
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  CLI11_PARSE(app, argc, argv);
  if (verbose) triad::set_log_level(triad::LogLevel::kDebug);
  if (quiet) triad::set_log_level(triad::LogLevel::kWarn);
  if (log_format == "json") triad::set_log_format(triad::LogFormat::kJson);
  try {
    size_t i = 0;
    for (CLI::App* sub : app.get_subcommands({})) {
      if (sub->parsed()) return commands[i]();
      ++i;
    }
  } catch (const triad::Error& e) {
    std::fprintf(stderr, "triad: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "triad: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
