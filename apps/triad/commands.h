// Subcommands of the `triad` binary. Each registers its options on a CLI11 subcommand and
// returns the function to run when it is chosen.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace triad::app {

using Command = std::function<int()>;

Command add_run(CLI::App& app);
Command add_perplexity(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_bench_serve(CLI::App& bench);  // `triad bench serve`
Command add_bench_grammar(CLI::App& bench);  // `triad bench grammar`
Command add_gguf(CLI::App& app);
Command add_tokenize(CLI::App& app);
Command add_eval_logits(CLI::App& app);
Command add_template(CLI::App& app);  // `triad template render`
Command add_serve(CLI::App& app);     // `triad serve`
Command add_quantize(CLI::App& app);  // `triad quantize`
Command add_imatrix(CLI::App& app);   // `triad imatrix`
Command add_tradeoff(CLI::App& app);  // `triad tradeoff`
Command add_convert(CLI::App& app);   // `triad convert`
Command add_pull(CLI::App& app);      // `triad pull NAME...` (cmd_models.cpp)
Command add_list(CLI::App& app);      // `triad list`
Command add_rm(CLI::App& app);        // `triad rm NAME...`

// -m's check: an existing file or folder, or a model of the catalog (catalog/catalog.h), which
// is pulled when first used.
CLI::Validator model_ref();
// Options every model-running command shares.
struct CommonOptions {
  std::string model;
  int threads = 0;  // 0: physical cores
  int ctx = 0;      // 0: min(model's trained context, 4096)
  std::string weight_type;  // --weight-type: online quantization at load (empty: as stored)
  // ctx_help: the -c/--ctx help text (default: the serving commands' context rule).
  void add_to(CLI::App& cmd, bool with_ctx = true, bool model_required = true, const char* ctx_help = nullptr);
  void add_weight_type(CLI::App& cmd);
  int resolved_threads() const;
};

// Prints the CPU kernel level and thread count once, at start-up.
void print_startup(int threads);

}  // namespace triad::app
