// `triad run`: generate text from a prompt, streaming it to stdout.
#include <cstdio>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "gguf/gguf_file.h"
#include "loaded_model.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_format.h"

namespace triad::app {
namespace {

struct RunOptions {
  CommonOptions common;
  std::string prompt;
  std::string system;
  int n_predict = 128;
  SamplingParams sampling;
  uint64_t seed = 0;
  bool chat = false;
  bool ignore_eos = false;
  std::string ids_out;
};

int run(const RunOptions& o, bool seed_given) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  LoadedModel lm = load_model(o.common.model);
  const Model& model = *lm.model;
  const Tokenizer& tok = *lm.tokenizer;
  const ModelConfig& c = model.config();

  std::string text = o.prompt;
  if (o.chat) {
    ChatFormat fmt = detect_chat_format(tok, model.file().get_string("tokenizer.chat_template", ""),
                                        c.arch_name);
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", o.prompt});
    text = render_chat(fmt, msgs);
    log_info("chat format: ", chat_format_name(fmt));
  }
  std::vector<int32_t> prompt = tok.encode(text, /*add_special=*/true, /*parse_special=*/o.chat);
  TRIAD_CHECK(!prompt.empty(), "the prompt is empty after tokenization");
  const int32_t n_ctx = lm.context_for(o.common.ctx);
  TRIAD_CHECK(static_cast<int64_t>(prompt.size()) < n_ctx, "the prompt (", prompt.size(),
              " tokens) does not fit the ", n_ctx, "-token context");

  SamplingParams sp = o.sampling;
  if (seed_given) sp.seed = o.seed;
  sp.validate();
  Sampler sampler(sp, c.n_vocab);
  for (int32_t id : prompt) sampler.accept(id);

  ThreadPool pool(threads);
  KvCache kv = model.make_kv_cache(n_ctx);
  ForwardScratch scratch;
  std::vector<float> logits(c.n_vocab);
  IncrementalDecoder decoder(tok);

  Timer t_prompt;
  model.forward(prompt, kv, scratch, LogitsMode::kLast, logits.data(), pool);
  const double prompt_s = t_prompt.seconds();

  std::vector<int32_t> generated;
  Timer t_gen;
  for (int i = 0; i < o.n_predict && kv.size() < n_ctx; ++i) {
    int32_t id = sampler.sample(logits.data());
    if (!o.ignore_eos && tok.is_end_of_generation(id)) break;
    sampler.accept(id);
    generated.push_back(id);
    std::string piece = decoder.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    if (i + 1 == o.n_predict || kv.size() >= n_ctx) break;
    int32_t one[1] = {id};
    model.forward(one, kv, scratch, LogitsMode::kLast, logits.data(), pool);
  }
  std::string rest = decoder.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  const double gen_s = t_gen.seconds();

  if (!o.ids_out.empty()) {
    std::ofstream f(o.ids_out);
    TRIAD_CHECK(f.good(), "cannot write ", o.ids_out);
    for (int32_t id : generated) f << id << "\n";
  }
  std::fprintf(stderr, "\nprompt: %zu tokens in %.3f s (%.2f tokens/s); generation: %zu tokens in %.3f s (%.2f tokens/s)\n",
               prompt.size(), prompt_s, prompt.size() / std::max(prompt_s, 1e-9), generated.size(),
               gen_s, generated.size() / std::max(gen_s, 1e-9));
  return 0;
}

}  // namespace

Command add_run(CLI::App& app) {
  auto* o = new RunOptions();  // lives for the process
  // Defaults as llama.cpp's CLI uses them.
  o->sampling.temperature = 0.8f;
  o->sampling.top_k = 40;
  o->sampling.top_p = 0.95f;
  o->sampling.min_p = 0.05f;
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt, streamed to stdout");
  o->common.add_to(*cmd);
  cmd->add_option("-p,--prompt", o->prompt, "prompt text")->required();
  cmd->add_option("--system", o->system, "system message (with --chat)");
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--temp", o->sampling.temperature, "temperature (0: greedy)");
  cmd->add_option("--top-k", o->sampling.top_k, "top-k (0: off)");
  cmd->add_option("--top-p", o->sampling.top_p, "top-p / nucleus (1: off)");
  cmd->add_option("--min-p", o->sampling.min_p, "min-p (0: off)");
  cmd->add_option("--repeat-penalty", o->sampling.repetition_penalty, "repetition penalty (1: off)");
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "presence penalty");
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "frequency penalty");
  CLI::Option* seed = cmd->add_option("--seed", o->seed, "random seed (reproducible runs)");
  cmd->add_flag("--chat", o->chat, "wrap the prompt in the model's chat format");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-generation tokens");
  cmd->add_option("--ids-out", o->ids_out, "write generated token ids to this file, one per line");
  return [o, seed] { return run(*o, seed->count() > 0); };
}

}  // namespace triad::app
