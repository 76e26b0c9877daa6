// A generation request in flight (job.h): one engine request per choice; each token is decoded
// incrementally, passed through the stop strings and, with tools, split into content and calls;
// the encoder writes the answer. Also cancellation on disconnect, errors and metrics.
#include "server/job.h"

#include "base/log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "base/error.h"
#include "engine/engine_api.h"
#include "grammar/grammar.h"
#include "server/constraint_cache.h"
#include "server/reasoning.h"
#include "server/tool_formats.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace triad::server {
namespace {

using Clock = std::chrono::steady_clock;

struct ChoiceState {
  engine::RequestId engine_id = 0;
  std::unique_ptr<IncrementalDecoder> decoder;
  std::unique_ptr<StopMatcher> stop;
  std::unique_ptr<ToolStreamSplitter> tools;  // streaming with tools: text vs calls
  std::unique_ptr<ChannelSplitter> reasoning;  // thinking models: <think> (or harmony analysis) vs the rest
  std::unique_ptr<CallNormalizer> calls;      // with tools: the model family's calls in the canonical form
  ChoiceOut out;
  bool discard = false;             // max_tokens 0 with echo: the one generated token is dropped
  bool done = false;
  bool stopped_by_string = false;
  Clock::time_point last_token;
};

}  // namespace

struct Service::Job : std::enable_shared_from_this<Service::Job> {
  Service* service = nullptr;
  ServedModel* model = nullptr;
  std::shared_ptr<ResponseWriter> writer;
  std::unique_ptr<Encoder> enc;
  GenOptions opt;
  ToolRequest tools;
  bool completion_defaults = false;
  std::shared_ptr<grammar::Constraint> constraint;  // constrained decoding, shared by the choices
  std::vector<std::vector<int32_t>> prompts;
  std::vector<ChoiceState> choices;                 // index = prompt_i * n + j
  int32_t prompt_tokens = 0, cached_tokens = 0;
  int32_t draft_tokens = 0, accepted_drafts = 0;  // speculative decoding, over the choices
  int remaining = 0;
  bool failed = false;
  bool failed_cancelled = false;  // a choice was cancelled by the client leaving or shutdown
  std::string error_message;
  Clock::time_point t0 = Clock::now();
  double ttft_s = -1;       // the first token of any choice (the request log line)
  std::string log_id;       // "req-N", the request log line's id
  std::mutex mu;  // sinks of one engine run on one thread, but cancel/disconnect come from others

  json token_logprob_entry(const engine::TokenOutput& t) const {
    const Tokenizer& tok = *model->tokenizer;
    auto entry = [&](int32_t token_id, float lp) {
      const std::string piece = tok.token_piece(token_id);
      json bytes = json::array();
      for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
      return json{{"token", piece}, {"logprob", std::isfinite(lp) ? lp : -9999.0f}, {"bytes", bytes}};
    };
    json e = entry(t.id, t.logprob);
    json top = json::array();
    for (const TokenLogprob& a : t.top) top.push_back(entry(a.id, a.logprob));
    e["top_logprobs"] = top;
    return e;
  }

  // Content text of choice i after one token (possibly empty).
  void content(size_t i, const std::string& text, const json* lp, bool first) {
    ChoiceState& c = choices[i];
    c.out.content += text;
    if (opt.stream) enc->text(i, text, lp, first);
  }

  // Reasoning text of choice i (possibly empty).
  void think(size_t i, const std::string& text, bool first) {
    choices[i].out.reasoning += text;
    if (opt.stream) enc->reasoning(i, text, first);
  }

  // Streaming with tools: what the splitter reports about calls, passed to the encoder.
  void call_events(size_t i) {
    ChoiceState& c = choices[i];
    for (CallEvent& e : c.tools->take_events()) {
      std::vector<CallOut>& calls = c.out.calls;
      switch (e.kind) {
        case CallEvent::kBegin:
          calls.push_back({random_id("call_"), e.text, "", false});
          enc->call_begin(i, calls.size() - 1, calls.back());
          break;
        case CallEvent::kArgs:
          calls.back().arguments += e.text;
          enc->call_args(i, calls.size() - 1, e.text);
          break;
        case CallEvent::kEnd:
          calls.back().complete = true;
          enc->call_end(i, calls.size() - 1, calls.back());
          break;
        case CallEvent::kAbandon:
          enc->call_end(i, calls.size() - 1, calls.back());
          break;
      }
    }
  }

  void on_prompt_logprobs(size_t i, std::vector<engine::TokenOutput>&& entries) {
    std::lock_guard<std::mutex> lk(mu);
    const Tokenizer& tok = *model->tokenizer;
    const std::vector<int32_t>& prompt = prompts[i / static_cast<size_t>(opt.n)];
    auto entry = [&](int32_t id, float lp) {
      return json{{"id", id}, {"token", tok.token_piece(id)}, {"logprob", std::isfinite(lp) ? lp : -9999.0f}};
    };
    // Each token's offset in the prompt's decoded text (a SentencePiece token's leading space
    // is not in the text at its start).
    IncrementalDecoder dec(tok);
    size_t offset = 0;
    json arr = json::array();
    arr.push_back({{"id", prompt[0]}, {"token", tok.token_piece(prompt[0])}, {"logprob", nullptr}, {"rank", nullptr},
                   {"top", nullptr}, {"offset", 0}});
    offset += dec.push(prompt[0]).size();
    for (const engine::TokenOutput& e : entries) {
      json x = entry(e.id, e.logprob);
      x["offset"] = offset;
      offset += dec.push(e.id).size();
      x["rank"] = e.rank;
      json top = json::array();
      for (const TokenLogprob& a : e.top) top.push_back(entry(a.id, a.logprob));
      x["top"] = top;
      arr.push_back(std::move(x));
    }
    offset += dec.flush().size();
    // The incremental decoder keeps a first token's leading space, which decoding the whole
    // prompt (the echoed text) drops: shift the offsets by the difference.
    const size_t whole = tok.decode(prompt).size();
    const size_t shift = offset > whole ? offset - whole : 0;
    for (json& x : arr) {
      const size_t o = x["offset"].get<size_t>();
      x["offset"] = o > shift ? o - shift : 0;
    }
    choices[i].out.prompt_logprobs = std::move(arr);
  }

  void on_token(size_t i, const engine::TokenOutput& t) {
    std::lock_guard<std::mutex> lk(mu);
    ChoiceState& c = choices[i];
    if (c.done || c.stopped_by_string || c.discard) return;
    const auto now = Clock::now();
    if (c.out.completion_tokens == 0) {
      model->metrics->ttft.observe(std::chrono::duration<double>(now - t0).count());
      if (ttft_s < 0) ttft_s = std::chrono::duration<double>(now - t0).count();
    } else {
      model->metrics->itl.observe(std::chrono::duration<double>(now - c.last_token).count());
    }
    c.last_token = now;
    const bool first = c.out.completion_tokens == 0;
    ++c.out.completion_tokens;
    std::string out = c.stop->feed(c.decoder->push(t.id));
    c.out.text += out;
    if (c.reasoning) {
      ChannelSplitter::Out r = c.reasoning->feed(out);
      if (r.thinking) ++c.out.reasoning_tokens;
      think(i, r.reasoning, first);
      out = std::move(r.content);
    }
    if (c.calls) out = c.calls->feed(out);
    if (c.tools) out = c.tools->feed(out);
    json lp;
    if (opt.logprobs >= 0) {
      lp = token_logprob_entry(t);
      c.out.logprobs.push_back(lp);
    }
    content(i, out, opt.logprobs >= 0 ? &lp : nullptr, first);
    if (c.tools) call_events(i);
    if (c.stop->stopped()) {
      c.stopped_by_string = true;
      model->engine->cancel(c.engine_id);  // the engine finishes it with kCancelled next step
    }
  }

  void on_finish(size_t i, engine::FinishReason reason, const engine::RequestTimings& t, const std::string& error) {
    std::lock_guard<std::mutex> lk(mu);
    ChoiceState& c = choices[i];
    if (c.done) return;
    c.done = true;
    if (i % static_cast<size_t>(opt.n) == 0) cached_tokens += t.cached_tokens;
    draft_tokens += t.draft_tokens;
    accepted_drafts += t.accepted_tokens;
    model->metrics->queue.observe(t.queue_s);
    const bool ok = reason != engine::FinishReason::kError &&
                    (reason != engine::FinishReason::kCancelled || c.stopped_by_string);
    if (reason == engine::FinishReason::kError) {
      failed = true;
      error_message = error;
    }
    if (!ok && reason == engine::FinishReason::kCancelled) failed_cancelled = true;
    if (c.discard) {
      c.out.finish = "length";  // max_tokens 0: nothing generated
    } else {
      // The rest of the text: incomplete UTF-8 at the end and text held back for stop strings
      // (none after a stop string matched; the tool splitter still gives back what it holds).
      std::string rest;
      if (c.stopped_by_string) {
        c.out.finish = "stop";
      } else {
        rest = c.stop->feed(c.decoder->flush());
        if (c.stop->stopped()) {
          c.out.finish = "stop";
        } else {
          rest += c.stop->flush();
          c.out.finish = reason == engine::FinishReason::kLength ? "length" : "stop";
        }
      }
      c.out.text += rest;
      if (ok && c.reasoning) {  // the held-back end of the reasoning, or of the content
        const bool first = c.out.completion_tokens == 0;
        ChannelSplitter::Out r = c.reasoning->feed(rest);
        ChannelSplitter::Out tail = c.reasoning->flush();
        think(i, r.reasoning + tail.reasoning, first);
        rest = r.content + tail.content;
      }
      if (ok && c.calls) {
        rest = c.calls->feed(rest);
        rest += c.calls->flush();
      }
      if (ok) {
        const bool first = c.out.completion_tokens == 0;
        if (c.tools) {
          rest = c.tools->feed(rest);
          if (!rest.empty()) content(i, rest, nullptr, first);
          call_events(i);
          const std::string tail = c.tools->flush();  // an unfinished call is text; a bare call ends here
          if (!tail.empty()) content(i, tail, nullptr, false);
          call_events(i);
        } else if (!rest.empty()) {
          content(i, rest, nullptr, first);
        }
      }
    }
    if (tools.active() && !c.tools) {  // not streamed: the calls are read from the whole text
      // Without the reasoning, and with the calls in the canonical form.
      const std::string answer = c.reasoning || c.calls ? c.out.content : c.out.text;
      const bool hermes = model->tool_format == ToolFormat::kHermes;
      const ParsedOutput po = parse_tool_output(answer, /*bare=*/hermes, /*sealed=*/!hermes);
      c.out.content = po.calls.empty() ? answer : po.content;
      for (const ToolCall& tc : po.calls) c.out.calls.push_back({random_id("call_"), tc.name, tc.arguments, true});
    }
    if (c.tools) {  // streamed: calls cut off stay visible as they were sent, finish says why
      if (c.out.finish == "stop")
        std::erase_if(c.out.calls, [](const CallOut& x) { return !x.complete; });
    }
    const bool any_call = std::any_of(c.out.calls.begin(), c.out.calls.end(), [](const CallOut& x) { return x.complete; });
    if (c.out.finish == "stop" && any_call) c.out.finish = "tool_calls";
    if (opt.stream && ok) enc->choice_end(i, c.out);
    if (--remaining > 0) return;
    finish_all();
  }

  // One line per request (--log-format json makes it an object): what operators grep for.
  void log_request(const char* outcome) const {
    int64_t completion = 0;
    for (const ChoiceState& c : choices) completion += c.out.completion_tokens;
    const double e2e = std::chrono::duration<double>(Clock::now() - t0).count();
    log_event("request", {log_field("id", log_id), log_field("model", model->name),
                          log_field("prompt_tokens", static_cast<int64_t>(prompt_tokens)),
                          log_field("cached_tokens", static_cast<int64_t>(cached_tokens)),
                          log_field("completion_tokens", completion), log_field("choices", static_cast<int64_t>(choices.size())),
                          log_field("draft_tokens", static_cast<int64_t>(draft_tokens)),
                          log_field("accepted_draft_tokens", static_cast<int64_t>(accepted_drafts)),
                          log_field("ttft_ms", ttft_s < 0 ? -1.0 : ttft_s * 1e3), log_field("e2e_ms", e2e * 1e3),
                          log_field("finish", choices.empty() || choices[0].out.finish.empty() ? std::string(outcome)
                                                                                                 : choices[0].out.finish),
                          log_field("outcome", outcome)});
  }

  void finish_all() {
    model->metrics->e2e.observe(std::chrono::duration<double>(Clock::now() - t0).count());
    --service->in_flight_;
    log_request(failed ? "error" : failed_cancelled ? "cancelled" : "ok");
    if (failed) {
      ++model->metrics->requests_error;
      enc->failed({500, "generation failed: " + error_message, "server_error", "", "", {}});
      return;
    }
    if (failed_cancelled) {  // the client went away (or the server is shutting down)
      ++model->metrics->requests_cancelled;
      // A client that left reads nothing; one cut off by shutdown gets an error it can see
      // (the SDK raises on an `error` event) instead of a stream that just stops.
      enc->failed({503, "the request was cancelled (server shutting down)", "server_error", "", "server_is_overloaded", {}});
      return;
    }
    ++model->metrics->requests_ok;
    UsageOut u{prompt_tokens, cached_tokens, 0};
    u.accepted_prediction_tokens = accepted_drafts;
    u.rejected_prediction_tokens = draft_tokens - accepted_drafts;
    std::vector<ChoiceOut> outs;
    outs.reserve(choices.size());
    // The prompt's logprobs were computed by its first choice.
    for (size_t i = 0; i < choices.size(); ++i)
      if (choices[i].out.prompt_logprobs.is_null())
        choices[i].out.prompt_logprobs = choices[i - i % static_cast<size_t>(opt.n)].out.prompt_logprobs;
    for (ChoiceState& c : choices) {
      u.completion_tokens += c.out.completion_tokens;
      u.reasoning_tokens += c.out.reasoning_tokens;
      outs.push_back(std::move(c.out));
    }
    enc->done(outs, u);
  }
};

namespace {

class ChoiceSink : public engine::OutputSink {
 public:
  ChoiceSink(std::shared_ptr<Service::Job> job, size_t index) : job_(std::move(job)), index_(index) {}
  void on_token(engine::RequestId, const engine::TokenOutput& t) override { job_->on_token(index_, t); }
  void on_prompt_logprobs(engine::RequestId, std::vector<engine::TokenOutput>&& entries) override {
    job_->on_prompt_logprobs(index_, std::move(entries));
  }
  void on_finish(engine::RequestId, engine::FinishReason r, const engine::RequestTimings& t,
                 const std::string& e) override {
    job_->on_finish(index_, r, t, e);
  }

 private:
  std::shared_ptr<Service::Job> job_;
  size_t index_;
};

// Checks every prompt against the context before anything is submitted (throws ApiError).
void validate_prompts(const Service::Job& job) {
  const int32_t ctx = job.model->engine->max_model_len();
  const GenOptions& o = job.opt;
  for (const auto& prompt : job.prompts) {
    const auto n = static_cast<int64_t>(prompt.size());
    const int64_t want = o.max_tokens.value_or(1);
    if (n >= ctx || (o.max_tokens && n + *o.max_tokens > ctx)) {
      // Like OpenAI: a completion that cannot fit is an error, not a silent cut.
      throw ApiError{400, "This model's maximum context length is " + std::to_string(ctx) + " tokens. However, you requested " +
                              std::to_string(n + want) + " tokens (" + std::to_string(n) + " in the messages, " +
                              std::to_string(want) + " in the completion). Please reduce the length of the messages or completion.",
                     "invalid_request_error", n >= ctx ? "messages" : "max_tokens", "context_length_exceeded", {}};
    }
  }
}

// Submits one engine request per choice. Returns false (after cancelling what was submitted)
// with `error` set when the engine refuses one.
bool submit_all(const std::shared_ptr<Service::Job>& job, std::string& error) {
  ServedModel& m = *job->model;
  const int32_t ctx = m.engine->max_model_len();
  const GenOptions& o = job->opt;
  job->choices.resize(job->prompts.size() * static_cast<size_t>(o.n));
  job->remaining = static_cast<int>(job->choices.size());
  for (const auto& p : job->prompts) job->prompt_tokens += static_cast<int32_t>(p.size());
  for (size_t i = 0; i < job->choices.size(); ++i) {
    job->choices[i].decoder = std::make_unique<IncrementalDecoder>(*m.tokenizer, false, m.rendered_tokens);
    job->choices[i].stop = std::make_unique<StopMatcher>(o.stop);
    const bool hermes = m.tool_format == ToolFormat::kHermes;
    if (job->tools.active() && o.stream)
      job->choices[i].tools = std::make_unique<ToolStreamSplitter>(/*bare_calls=*/hermes, /*sealed=*/!hermes);
    if (job->tools.active()) job->choices[i].calls = std::make_unique<CallNormalizer>(m.tool_format, &job->tools);
    if (o.reasoning_harmony) {
      job->choices[i].reasoning = std::make_unique<HarmonySplitter>(/*split_reasoning=*/o.reasoning);
    } else if (o.reasoning) {
      job->choices[i].reasoning = std::make_unique<ReasoningSplitter>(o.reasoning_starts_inside);
    }
    job->choices[i].discard = o.max_tokens && *o.max_tokens == 0;
  }
  // Prompt logprobs: vLLM's prompt_logprobs, or echo with logprobs (how lm-evaluation-harness
  // scores a continuation); computed by the first choice of each prompt.
  const int want_prompt = std::max(o.prompt_logprobs, o.echo && o.logprobs >= 0 ? o.logprobs : -1);
  std::vector<engine::RequestId> submitted;
  const std::vector<int32_t> prediction =
      o.prediction ? m.tokenizer->encode(*o.prediction, /*add_special=*/false, /*parse_special=*/false)
                   : std::vector<int32_t>{};
  try {
    for (size_t p = 0; p < job->prompts.size(); ++p) {
      for (int j = 0; j < o.n; ++j) {
        const size_t i = p * static_cast<size_t>(o.n) + static_cast<size_t>(j);
        engine::GenerationRequest r;
        r.prompt = job->prompts[p];
        r.sampling = o.sampling;
        if (r.sampling.seed && j > 0) *r.sampling.seed += static_cast<uint64_t>(j);  // distinct choices
        r.max_tokens = static_cast<int32_t>(o.max_tokens.value_or(ctx - static_cast<int64_t>(r.prompt.size())));
        if (r.max_tokens == 0) r.max_tokens = 1;  // echo only: the token is dropped
        if (j == 0) r.prompt_logprobs = want_prompt;
        if (job->completion_defaults && !o.max_tokens) r.max_tokens = std::min<int32_t>(16, r.max_tokens);
        r.stop_ids = o.stop_ids;
        r.ignore_eos = o.ignore_eos;
        r.logprobs = o.logprobs;
        // Legacy completions list the token that ended the answer (an end-of-generation token
        // too) among the logprobs; lm-evaluation-harness relies on exactly one generated entry.
        r.deliver_stop_token = job->completion_defaults && o.logprobs >= 0;
        r.constraint = job->constraint;
        r.prediction = prediction;
        r.num_speculative_tokens = o.num_speculative_tokens.value_or(-1);
        std::lock_guard<std::mutex> lk(job->mu);  // a fast sink must see engine_id set
        job->choices[i].engine_id = m.engine->submit(std::move(r), std::make_shared<ChoiceSink>(job, i));
        submitted.push_back(job->choices[i].engine_id);
      }
    }
  } catch (const Error& e) {
    for (engine::RequestId id : submitted) m.engine->cancel(id);
    error = e.what();
    return false;
  }
  return true;
}

}  // namespace

void start_job(Service& svc, JobSpec spec) {
  auto job = std::make_shared<Service::Job>();
  job->service = &svc;
  job->model = spec.model;
  job->writer = std::move(spec.writer);
  job->enc = std::move(spec.encoder);
  job->opt = std::move(spec.opt);
  job->tools = std::move(spec.tools);
  job->prompts = std::move(spec.prompts);
  job->completion_defaults = spec.completion_defaults;
  job->constraint = std::move(spec.constraint);
  job->log_id = "req-" + std::to_string(++svc.request_seq_);
  validate_prompts(*job);
  // The stream's headers and first events go out before any token can: all are posted to the
  // connection in order.
  if (job->opt.stream) {
    job->writer->start_stream(200, "text/event-stream", {{"x-accel-buffering", "no"}});
    std::lock_guard<std::mutex> lk(job->mu);
    job->enc->start();
  }
  ++svc.in_flight_;
  std::string error;
  if (!submit_all(job, error)) {
    --svc.in_flight_;
    const ApiError e{400, error, "invalid_request_error", "", "invalid_value", {}};
    if (!job->opt.stream) throw e;
    std::lock_guard<std::mutex> lk(job->mu);
    job->enc->failed(e);
    return;
  }
  std::weak_ptr<Service::Job> weak = job;
  job->writer->on_disconnect([weak] {
    if (auto j = weak.lock())
      for (const ChoiceState& c : j->choices)
        if (c.engine_id) j->model->engine->cancel(c.engine_id);
  });
}

}  // namespace triad::server
