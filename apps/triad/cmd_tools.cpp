// Developer tools: `triad tokenize`, `triad eval-logits` (used by the golden tests), and
// `triad gguf inspect`.
#include <cstdio>
#include <memory>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "commands.h"
#include "gguf/gguf_file.h"
#include "gguf/inspect.h"
#include "loaded_model.h"
#include "model/solo_sequence.h"

namespace triad::app {
namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, ',')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      fail("--tokens: '", item, "' is not an integer");
    }
    TRIAD_CHECK(v >= 0 && v < (1L << 31), "--tokens: id ", v, " out of range");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace

Command add_tokenize(CLI::App& app) {
  struct Opt {
    std::string model, prompt;
    bool no_bos = false, no_special = false;
  };
  auto o = std::make_shared<Opt>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  cmd->add_option("-m,--model", o->model, "GGUF model or vocabulary file")->required()->check(CLI::ExistingFile);
  cmd->add_option("-p,--prompt", o->prompt, "text")->required();
  cmd->add_flag("--no-bos", o->no_bos, "do not add BOS/EOS");
  cmd->add_flag("--no-parse-special", o->no_special, "treat special-token texts as plain text");
  return [o] {
    auto f = gguf::GgufFile::open(o->model);
    auto tok = Tokenizer::from_gguf(*f);
    std::vector<int32_t> ids = tok->encode(o->prompt, !o->no_bos, !o->no_special);
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
    return 0;
  };
}

Command add_eval_logits(CLI::App& app) {
  struct Opt {
    CommonOptions common;
    std::string tokens, out;
    int chunk = 0;
  };
  auto o = std::make_shared<Opt>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("eval-logits",
                                     "run token ids through the model and write all logits (f32) to a file");
  o->common.add_to(*cmd);
  o->common.add_weight_type(*cmd);
  cmd->add_option("--tokens", o->tokens, "comma-separated token ids")->required();
  cmd->add_option("--out", o->out, "output file: n_tokens x n_vocab little-endian float32")->required();
  cmd->add_option("--chunk", o->chunk, "tokens per forward call (default: all at once)")
      ->check(CLI::Range(0, 1 << 20));
  return [o] {
    const int threads = o->common.resolved_threads();
    LoadedModel lm = load_model(o->common.model, o->common.weight_type, threads);
    const Model& m = *lm.model;
    std::vector<int32_t> ids = parse_ids(o->tokens);
    TRIAD_CHECK(!ids.empty(), "--tokens is empty");
    const int32_t n = static_cast<int32_t>(ids.size());
    const int32_t n_vocab = m.config().n_vocab;
    ThreadPool pool(threads);
    SoloSequence seq(m, std::max(n, lm.context_for(o->common.ctx)));
    ForwardScratch scratch;
    std::vector<float> logits(static_cast<size_t>(n) * n_vocab);
    const int32_t step = o->chunk > 0 ? o->chunk : n;
    for (int32_t i = 0; i < n; i += step) {
      const int32_t len = std::min(step, n - i);
      seq.forward(std::span<const int32_t>(ids.data() + i, len), scratch, LogitsMode::kAll,
                  logits.data() + static_cast<size_t>(i) * n_vocab, pool);
    }
    std::ofstream f(o->out, std::ios::binary);
    TRIAD_CHECK(f.good(), "cannot write ", o->out);
    f.write(reinterpret_cast<const char*>(logits.data()),
            static_cast<std::streamsize>(logits.size() * sizeof(float)));
    TRIAD_CHECK(f.good(), "write to ", o->out, " failed");
    return 0;
  };
}

Command add_gguf(CLI::App& app) {
  struct Opt {
    std::string file;
    bool full = false;
  };
  auto o = std::make_shared<Opt>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("gguf", "GGUF file tools");
  cmd->require_subcommand(1);
  CLI::App* inspect = cmd->add_subcommand("inspect", "print a GGUF file's metadata and tensor table");
  inspect->add_option("file", o->file, "GGUF file")->required()->check(CLI::ExistingFile);
  inspect->add_flag("--full", o->full, "print long arrays in full");
  return [o] {
    auto f = gguf::GgufFile::open(o->file);
    std::string report = gguf::describe_gguf(*f, o->full);
    std::fwrite(report.data(), 1, report.size(), stdout);
    return 0;
  };
}

}  // namespace triad::app
