// A chat or completions request in flight (job.h): one engine request per choice, and the
// answer assembled as tokens arrive: SSE chunks (content, logprobs, tool-call fragments, the
// finish chunk, usage, [DONE]) or one JSON object at the end; stop strings, incremental UTF-8
// decoding, tool-call parsing, cancellation on disconnect and metrics.
#include "server/job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "base/error.h"
#include "engine/engine_api.h"
#include "grammar/grammar.h"
#include "server/constraint_cache.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace triad::server {
namespace {

using Clock = std::chrono::steady_clock;

// ---- One request (all its choices) in flight.

struct ChoiceState {
  engine::RequestId engine_id = 0;
  std::unique_ptr<IncrementalDecoder> decoder;
  std::unique_ptr<StopMatcher> stop;
  std::unique_ptr<ToolStreamSplitter> tools;  // streaming with tools: text vs calls
  int n_calls = 0;                  // tool calls sent so far (streaming)
  std::string text;                 // non-stream: the whole text
  std::string finish;               // "stop" / "length" once finished
  bool done = false;
  bool stopped_by_string = false;
  int32_t completion_tokens = 0;
  json logprobs = json::array();     // chat: content entries; completions: built at the end
  std::vector<json> tokens_lp;       // completions: per token {token, logprob, top}
  Clock::time_point last_token;
};

}  // namespace


struct Service::Job : std::enable_shared_from_this<Service::Job> {
  Service* service = nullptr;
  ServedModel* model = nullptr;
  std::shared_ptr<ResponseWriter> writer;
  bool chat = true;
  std::string id;
  int64_t created = 0;
  GenOptions opt;
  ToolRequest tools;                // chat with tools: outputs are parsed into tool_calls
  std::shared_ptr<grammar::Constraint> constraint;  // constrained decoding, shared by the choices
  std::vector<std::vector<int32_t>> prompts;   // one per prompt (completions may have several)
  std::vector<std::string> echo_text;          // completions with echo: the prompt text
  std::vector<ChoiceState> choices;            // index = prompt_i * n + j
  int32_t prompt_tokens = 0, cached_tokens = 0;
  int remaining = 0;
  bool failed = false;
  bool failed_cancelled = false;  // a choice was cancelled by the client leaving or shutdown
  std::string error_message;
  Clock::time_point t0 = Clock::now();
  std::mutex mu;  // sinks of one engine run on one thread, but cancel/disconnect come from others

  // Streaming: every event is `data: {json}\n\n`.
  void event(const json& j) {
    writer->write("data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
  }
  json chunk_base() const {
    return json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                {"model", model->name}, {"system_fingerprint", "fp_triad"}};
  }
  json usage() const {
    int64_t completion = 0;
    for (const auto& c : choices) completion += c.completion_tokens;
    return json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion},
                {"total_tokens", prompt_tokens + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}},
                {"completion_tokens_details", {{"reasoning_tokens", 0}}}};
  }

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

  // A piece of text (possibly empty) for choice i, after one token.
  void emit(size_t i, const std::string& text, const json* lp, bool first) {
    ChoiceState& c = choices[i];
    if (!opt.stream) {
      c.text += text;
      if (lp) c.logprobs.push_back(*lp);
      return;
    }
    if (chat && first) {
      // As OpenAI: the first chunk of each choice carries the role and empty content; the
      // text follows in its own chunks.
      json ch = chunk_base();
      ch["choices"] = json::array({json{{"index", i},
                                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}});
      if (opt.include_usage) ch["usage"] = nullptr;
      event(ch);
      if (text.empty() && !lp) return;
    }
    json ch = chunk_base();
    json choice = {{"index", i}};
    if (chat) {
      json delta = json::object();
      delta["content"] = text;
      choice["delta"] = delta;
      choice["logprobs"] = lp ? json{{"content", json::array({*lp})}, {"refusal", nullptr}} : json(nullptr);
    } else {
      choice["text"] = text;
      choice["logprobs"] = nullptr;
      if (lp) {
        choice["logprobs"] = json{{"tokens", {(*lp)["token"]}}, {"token_logprobs", {(*lp)["logprob"]}},
                                  {"top_logprobs", {top_map(*lp)}}, {"text_offset", {0}}};
      }
    }
    choice["finish_reason"] = nullptr;
    ch["choices"] = json::array({choice});
    if (opt.include_usage) ch["usage"] = nullptr;
    event(ch);
  }

  // Streaming: each completed tool call as two delta.tool_calls fragments (id, type and name;
  // then the arguments), the way the SDK accumulates them.
  void emit_calls(size_t i) {
    ChoiceState& c = choices[i];
    for (const ToolCall& call : c.tools->take_calls()) {
      const int k = c.n_calls++;
      json head = {{"index", k}, {"id", random_id("call_")}, {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", ""}}}};
      json args = {{"index", k}, {"function", {{"arguments", call.arguments}}}};
      for (json* tc : {&head, &args}) {
        json ch = chunk_base();
        json choice = {{"index", i}, {"delta", {{"tool_calls", json::array({*tc})}}}, {"logprobs", nullptr},
                       {"finish_reason", nullptr}};
        ch["choices"] = json::array({choice});
        if (opt.include_usage) ch["usage"] = nullptr;
        event(ch);
      }
    }
  }

  static json top_map(const json& entry) {
    json m = json::object();
    for (const json& t : entry["top_logprobs"]) m[t["token"].get<std::string>()] = t["logprob"];
    return m;
  }

  void on_token(size_t i, const engine::TokenOutput& t) {
    std::lock_guard<std::mutex> lk(mu);
    ChoiceState& c = choices[i];
    if (c.done || c.stopped_by_string) return;
    const auto now = Clock::now();
    if (c.completion_tokens == 0) {
      model->metrics->ttft.observe(std::chrono::duration<double>(now - t0).count());
    } else {
      model->metrics->itl.observe(std::chrono::duration<double>(now - c.last_token).count());
    }
    c.last_token = now;
    const bool first = c.completion_tokens == 0;
    ++c.completion_tokens;
    std::string piece = c.decoder->push(t.id);
    std::string out = c.stop->feed(piece);
    if (c.tools) out = c.tools->feed(out);
    json lp;
    if (opt.logprobs >= 0) lp = token_logprob_entry(t);
    emit(i, out, opt.logprobs >= 0 ? &lp : nullptr, first);
    if (c.tools) emit_calls(i);
    if (c.stop->stopped()) {
      c.stopped_by_string = true;
      model->engine->cancel(c.engine_id);  // the engine finishes it with kCancelled next step
    }
  }

  void on_finish(size_t i, engine::FinishReason reason, const engine::RequestTimings& t, const std::string& error) {
    std::unique_lock<std::mutex> lk(mu);
    ChoiceState& c = choices[i];
    if (c.done) return;
    c.done = true;
    if (i % static_cast<size_t>(opt.n) == 0) {
      cached_tokens += t.cached_tokens;
    }
    model->metrics->queue.observe(t.queue_s);
    if (reason == engine::FinishReason::kError) {
      failed = true;
      error_message = error;
    }
    if (c.stopped_by_string) {
      c.finish = "stop";
    } else {
      // The rest of the text: incomplete UTF-8 at the end and text held back for stop strings.
      std::string rest = c.stop->feed(c.decoder->flush());
      if (c.stop->stopped()) {
        c.finish = "stop";
      } else {
        rest += c.stop->flush();
        c.finish = reason == engine::FinishReason::kLength ? "length" : "stop";
      }
      if (c.tools) rest = c.tools->feed(rest);
      if (!rest.empty() && reason != engine::FinishReason::kError) emit(i, rest, nullptr, c.completion_tokens == 0);
      if (c.tools && reason != engine::FinishReason::kError) {
        emit_calls(i);
        const std::string tail = c.tools->flush();  // an unfinished call is text; a bare call ends here
        if (!tail.empty()) emit(i, tail, nullptr, false);
        emit_calls(i);
      }
    }
    if (c.finish == "stop" && ((c.tools && c.n_calls > 0) || (!opt.stream && tools.active() && !parse_tool_output(c.text).calls.empty())))
      c.finish = "tool_calls";
    if (opt.stream && reason != engine::FinishReason::kError && reason != engine::FinishReason::kCancelled) {
      json ch = chunk_base();
      json choice = {{"index", i}};
      if (chat) {
        choice["delta"] = json::object();
        choice["logprobs"] = nullptr;
      } else {
        choice["text"] = "";
        choice["logprobs"] = nullptr;
      }
      choice["finish_reason"] = c.finish;
      ch["choices"] = json::array({choice});
      if (opt.include_usage) ch["usage"] = nullptr;
      event(ch);
    } else if (opt.stream && reason == engine::FinishReason::kCancelled && c.stopped_by_string) {
      json ch = chunk_base();
      json choice = {{"index", i}, {"finish_reason", "stop"}};
      if (chat) {
        choice["delta"] = json::object();
      } else {
        choice["text"] = "";
      }
      choice["logprobs"] = nullptr;
      ch["choices"] = json::array({choice});
      if (opt.include_usage) ch["usage"] = nullptr;
      event(ch);
    }
    if (reason == engine::FinishReason::kCancelled && !c.stopped_by_string) failed_cancelled = true;
    if (--remaining > 0) return;
    finish_all();
  }

  // Ends the answer with an error: an `error` event closing the stream, or an error response.
  void answer_error(const ApiError& e) {
    if (opt.stream) {
      event(json::parse(error_body(e)));
      writer->end();
    } else {
      send_error(*writer, e);
    }
  }

  void finish_all() {
    model->metrics->e2e.observe(std::chrono::duration<double>(Clock::now() - t0).count());
    --service->in_flight_;
    if (failed) {
      ++model->metrics->requests_error;
      answer_error({500, "generation failed: " + error_message, "server_error", "", "", {}});
      return;
    }
    if (failed_cancelled) {  // the client went away (or the server is shutting down)
      ++model->metrics->requests_cancelled;
      // A client that left reads nothing; one cut off by shutdown gets an error it can see
      // (the SDK raises on an `error` event) instead of a stream that just stops without [DONE].
      answer_error({503, "the request was cancelled (server shutting down)", "server_error", "", "server_is_overloaded", {}});
      return;
    }
    ++model->metrics->requests_ok;
    if (opt.stream) {
      if (opt.include_usage) {
        json ch = chunk_base();
        ch["choices"] = json::array();
        ch["usage"] = usage();
        event(ch);
      }
      writer->write("data: [DONE]\n\n");
      writer->end();
      return;
    }
    json out = {{"id", id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created},
                {"model", model->name}, {"system_fingerprint", "fp_triad"}};
    json arr = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      ChoiceState& c = choices[i];
      json choice = {{"index", i}};
      if (chat && tools.active()) {
        const ParsedOutput po = parse_tool_output(c.text);
        json msg = {{"role", "assistant"}, {"content", po.calls.empty() ? json(c.text) : (po.content.empty() ? json(nullptr) : json(po.content))},
                    {"refusal", nullptr}};
        if (!po.calls.empty()) {
          json calls = json::array();
          for (const ToolCall& tc : po.calls)
            calls.push_back({{"id", random_id("call_")}, {"type", "function"}, {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
          msg["tool_calls"] = calls;
        }
        choice["message"] = msg;
        choice["logprobs"] = opt.logprobs >= 0 ? json{{"content", c.logprobs}, {"refusal", nullptr}} : json(nullptr);
      } else if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
        choice["logprobs"] = opt.logprobs >= 0 ? json{{"content", c.logprobs}, {"refusal", nullptr}} : json(nullptr);
      } else {
        const std::string prefix = opt.echo ? echo_text[i / static_cast<size_t>(opt.n)] : std::string();
        choice["text"] = prefix + c.text;
        if (opt.logprobs >= 0) {
          json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
          size_t off = prefix.size();
          for (const json& e : c.logprobs) {
            tokens.push_back(e["token"]);
            lps.push_back(e["logprob"]);
            tops.push_back(top_map(e));
            offs.push_back(off);
            off += e["token"].get<std::string>().size();
          }
          choice["logprobs"] = {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
        } else {
          choice["logprobs"] = nullptr;
        }
      }
      choice["finish_reason"] = c.finish;
      arr.push_back(choice);
    }
    out["choices"] = arr;
    out["usage"] = usage();
    send_json(*writer, out);
  }
};

namespace {

class ChoiceSink : public engine::OutputSink {
 public:
  ChoiceSink(std::shared_ptr<Service::Job> job, size_t index) : job_(std::move(job)), index_(index) {}
  void on_token(engine::RequestId, const engine::TokenOutput& t) override { job_->on_token(index_, t); }
  void on_finish(engine::RequestId, engine::FinishReason r, const engine::RequestTimings& t,
                 const std::string& e) override {
    job_->on_finish(index_, r, t, e);
  }

 private:
  std::shared_ptr<Service::Job> job_;
  size_t index_;
};

}  // namespace

namespace {

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
    job->choices[i].decoder = std::make_unique<IncrementalDecoder>(*m.tokenizer);
    job->choices[i].stop = std::make_unique<StopMatcher>(o.stop);
    if (job->tools.active() && o.stream) job->choices[i].tools = std::make_unique<ToolStreamSplitter>();
  }
  std::vector<engine::RequestId> submitted;
  try {
    for (size_t p = 0; p < job->prompts.size(); ++p) {
      for (int j = 0; j < o.n; ++j) {
        const size_t i = p * static_cast<size_t>(o.n) + static_cast<size_t>(j);
        engine::GenerationRequest r;
        r.prompt = job->prompts[p];
        r.sampling = o.sampling;
        if (r.sampling.seed && j > 0) *r.sampling.seed += static_cast<uint64_t>(j);  // distinct choices
        r.max_tokens = static_cast<int32_t>(o.max_tokens.value_or(ctx - static_cast<int64_t>(r.prompt.size())));
        if (!job->chat && !o.max_tokens) r.max_tokens = std::min<int32_t>(16, r.max_tokens);
        r.stop_ids = o.stop_ids;
        r.ignore_eos = o.ignore_eos;
        r.logprobs = o.logprobs;
        r.constraint = job->constraint;
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

// The compiled constraint of a request that asks for one (throws ApiError 400 on a bad grammar).
std::shared_ptr<grammar::Constraint> compile_constraint(ServedModel& m, const GenOptions& o) {
  if (!m.constraints) bad(o.constraint_param, "constrained decoding is not available for model '" + m.name + "'");
  try {
    return m.constraints->get(o.constraint_kind, o.constraint_text);
  } catch (const grammar::GrammarError& e) {
    bad(o.constraint_param, e.what(), o.constraint_kind == "grammar" ? "invalid_grammar" : "invalid_json_schema");
  }
}

}  // namespace

void start_job(Service& svc, JobSpec spec) {
  auto job = std::make_shared<Service::Job>();
  job->service = &svc;
  job->model = spec.model;
  job->writer = std::move(spec.writer);
  job->chat = spec.chat;
  job->id = random_id(spec.chat ? "chatcmpl-" : "cmpl-");
  job->created = unix_now();
  job->opt = std::move(spec.opt);
  job->tools = std::move(spec.tools);
  job->prompts = std::move(spec.prompts);
  job->echo_text = std::move(spec.echo_text);
  validate_prompts(*job);
  if (!job->opt.constraint_kind.empty()) job->constraint = compile_constraint(*job->model, job->opt);
  // The stream's headers go out before any token can: both are posted to the connection.
  if (job->opt.stream) job->writer->start_stream(200, "text/event-stream", {{"x-accel-buffering", "no"}});
  ++svc.in_flight_;
  std::string error;
  if (!submit_all(job, error)) {
    --svc.in_flight_;
    const ApiError e{400, error, "invalid_request_error", "", "invalid_value", {}};
    if (!job->opt.stream) throw e;
    job->answer_error(e);
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
