// `triad run`: generate text from a prompt, streaming it to stdout.
#include <condition_variable>
#include <memory>
#include <cstdio>
#include <mutex>
#include <fstream>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "collect_sink.h"
#include "commands.h"
#include "engine/engine_api.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "loaded_model.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_format.h"

namespace triad::app {
namespace {

struct RunOptions {
  CommonOptions common;
  EngineOptions engine;
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
  LoadedModel lm = load_model(o.common.model, o.common.weight_type, o.common.resolved_threads());
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

  SamplingParams sp = o.sampling;
  if (seed_given) sp.seed = o.seed;
  sp.validate();

  const LoadedModel draft = o.engine.load_draft(threads);
  TRIAD_CHECK(!draft.model || EngineOptions::same_vocabulary(draft, lm), "the draft model '", o.engine.draft_model,
              "' does not have the model's vocabulary");
  engine::Engine eng(model, o.engine.make(lm, threads, o.common.ctx), nullptr, draft.model.get());
  // The sink runs on the engine thread: it streams text as it comes and records the run.
  struct StdoutSink : CollectSink {
    explicit StdoutSink(const Tokenizer& t) : decoder(t) {}
    IncrementalDecoder decoder;
    void on_token(engine::RequestId id, const engine::TokenOutput& t) override {
      std::string piece = decoder.push(t.id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      CollectSink::on_token(id, t);
    }
    void on_finish(engine::RequestId id, engine::FinishReason r, const engine::RequestTimings& t,
                   const std::string& e) override {
      std::string rest = decoder.flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
      std::fputc('\n', stdout);
      std::fflush(stdout);
      CollectSink::on_finish(id, r, t, e);
    }
  };
  auto sink = std::make_shared<StdoutSink>(tok);
  if (o.n_predict > 0) {
    engine::GenerationRequest req;
    req.prompt = prompt;
    req.sampling = sp;
    req.max_tokens = o.n_predict;
    req.ignore_eos = o.ignore_eos;
    eng.submit(std::move(req), sink);
    sink->wait();
  }
  TRIAD_CHECK(sink->reason() != engine::FinishReason::kError, sink->error());
  const std::vector<int32_t>& generated = sink->tokens();
  const double prompt_s = sink->timings().ttft_s;
  const double gen_s = sink->timings().e2e_s - sink->timings().ttft_s;
  const size_t n_after_first = generated.empty() ? 0 : generated.size() - 1;

  if (!o.ids_out.empty()) {
    std::ofstream f(o.ids_out);
    TRIAD_CHECK(f.good(), "cannot write ", o.ids_out);
    for (int32_t id : generated) f << id << "\n";
  }
  std::fprintf(stderr,
               "\nprompt: %zu tokens, first token after %.3f s (%.2f tokens/s); generation: %zu "
               "tokens, %.2f tokens/s after the first; finish: %s\n",
               prompt.size(), prompt_s, prompt.size() / std::max(prompt_s, 1e-9), generated.size(),
               n_after_first / std::max(gen_s, 1e-9), sched::finish_reason_name(sink->reason()));
  if (sink->timings().draft_tokens > 0)
    std::fprintf(stderr, "speculative decoding: %d of %d draft tokens accepted\n", sink->timings().accepted_tokens,
                 sink->timings().draft_tokens);
  return 0;
}

}  // namespace

Command add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();  // owned by the returned command
  // Defaults as llama.cpp's CLI uses them.
  o->sampling.temperature = 0.8f;
  o->sampling.top_k = 40;
  o->sampling.top_p = 0.95f;
  o->sampling.min_p = 0.05f;
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt, streamed to stdout");
  o->common.add_to(*cmd);
  o->common.add_weight_type(*cmd);
  o->engine.add_to(*cmd);
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
