// The OpenAI-compatible service (see service.h).
#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "model/model.h"
#include "grammar/grammar.h"
#include "server/constraint_cache.h"
#include "server/openai_request.h"
#include "server/stop_matcher.h"
#include "server/tool_calls.h"
#include "template/template.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace triad::server {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

void send_error(ResponseWriter& w, const ApiError& e) {
  HeaderList h = e.headers;
  if (e.status >= 500 && e.status != 503) h.emplace_back("x-should-retry", "false");
  w.send(e.status, "application/json", error_body(e), h);
}
void send_json(ResponseWriter& w, const json& j, int status = 200) {
  w.send(status, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace));
}
std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  static const char* chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::lock_guard<std::mutex> lk(mu);
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += chars[rng() % 62];
  return s;
}
int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

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
    json ch = chunk_base();
    json choice = {{"index", i}};
    if (chat) {
      json delta = json::object();
      if (first) delta["role"] = "assistant";
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

  void finish_all() {
    model->metrics->e2e.observe(std::chrono::duration<double>(Clock::now() - t0).count());
    --service->in_flight_;
    if (failed) {
      ++model->metrics->requests_error;
      ApiError e{500, "generation failed: " + error_message, "server_error", "", "", {}};
      if (opt.stream) {
        event(json::parse(error_body(e)));
        writer->end();
      } else {
        send_error(*writer, e);
      }
      return;
    }
    if (failed_cancelled) {  // the client went away (or the server is shutting down)
      ++model->metrics->requests_cancelled;
      // A client that left reads nothing; one cut off by shutdown gets an error it can see
      // (the SDK raises on an `error` event) instead of a stream that just stops without [DONE].
      const ApiError e{503, "the request was cancelled (server shutting down)", "server_error", "", "server_is_overloaded", {}};
      if (opt.stream) {
        event(json::parse(error_body(e)));
        writer->end();
      } else {
        send_error(*writer, e);
      }
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

Service::Service(std::vector<ServedModel*> models, ServiceOptions options)
    : models_(std::move(models)), options_(std::move(options)) {}

ServedModel* Service::find_model(const std::string& name) const {
  for (ServedModel* m : models_)
    if (m->name == name) return m;
  return nullptr;
}

namespace {

// Constant-time comparison of the presented key with the configured one.
bool key_matches(const std::string& presented, const std::string& key) {
  unsigned char diff = presented.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i] ^ (i < presented.size() ? presented[i] : 0));
  return diff == 0;
}

std::string path_of(const std::string& target) {
  const size_t q = target.find('?');
  return q == std::string::npos ? target : target.substr(0, q);
}

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

void start_job(Service& svc, const std::shared_ptr<Service::Job>& job) {
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
    job->event(json::parse(error_body(e)));
    job->writer->end();
    return;
  }
  std::weak_ptr<Service::Job> weak = job;
  job->writer->on_disconnect([weak] {
    if (auto j = weak.lock())
      for (const ChoiceState& c : j->choices)
        if (c.engine_id) j->model->engine->cancel(c.engine_id);
  });
}

}  // namespace

namespace {

// Adds the client's x-request-id (vLLM's benchmark sends one) to every response header.
class RequestIdWriter : public ResponseWriter {
 public:
  RequestIdWriter(std::shared_ptr<ResponseWriter> inner, std::string id) : inner_(std::move(inner)), id_(std::move(id)) {}
  void send(int status, const std::string& content_type, std::string body, const HeaderList& extra) override {
    inner_->send(status, content_type, std::move(body), with_id(extra));
  }
  void start_stream(int status, const std::string& content_type, const HeaderList& extra) override {
    inner_->start_stream(status, content_type, with_id(extra));
  }
  void write(std::string data) override { inner_->write(std::move(data)); }
  void end() override { inner_->end(); }
  void on_disconnect(std::function<void()> fn) override { inner_->on_disconnect(std::move(fn)); }
  bool disconnected() const override { return inner_->disconnected(); }

 private:
  HeaderList with_id(HeaderList h) const {
    h.emplace_back("x-request-id", id_);
    return h;
  }
  std::shared_ptr<ResponseWriter> inner_;
  std::string id_;
};

// A header value safe to echo: printable ASCII, at most 128 bytes.
bool safe_header_value(const std::string& v) {
  if (v.empty() || v.size() > 128) return false;
  for (unsigned char c : v)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

}  // namespace

void Service::handle(HttpRequest req, std::shared_ptr<ResponseWriter> w) {
  const std::string path = path_of(req.target);
  if (const std::string rid = req.header("x-request-id"); safe_header_value(rid))
    w = std::make_shared<RequestIdWriter>(std::move(w), rid);
  try {
    if (path == "/health") return health(w);
    if (path == "/ready") return send_json(*w, json{{"status", "ready"}});
    if (path == "/metrics") return metrics(w);
    if (!options_.api_key.empty()) {
      std::string auth = req.header("authorization");
      const std::string prefix = "Bearer ";
      const std::string presented = auth.rfind(prefix, 0) == 0 ? auth.substr(prefix.size()) : std::string();
      if (!key_matches(presented, options_.api_key))
        throw ApiError{401, auth.empty() ? "You didn't provide an API key. Provide it in an Authorization header: Bearer YOUR_KEY."
                                         : "Incorrect API key provided.",
                       "invalid_request_error", "", "invalid_api_key", {}};
    }
    if (path == "/v1/models" || path == "/models") {
      if (req.method != "GET") throw ApiError{405, "use GET for " + path, "invalid_request_error", "", "method_not_allowed", {}};
      return list_models(w);
    }
    if (path.rfind("/v1/models/", 0) == 0) return get_model(path.substr(11), w);
    const bool post = req.method == "POST";
    auto need_post = [&] {
      if (!post) throw ApiError{405, "use POST for " + path, "invalid_request_error", "", "method_not_allowed", {}};
    };
    if (path == "/v1/chat/completions" || path == "/chat/completions") {
      need_post();
      return chat_completions(req, w);
    }
    if (path == "/v1/completions" || path == "/completions") {
      need_post();
      return completions(req, w);
    }
    if (path == "/tokenize" || path == "/v1/tokenize") {
      need_post();
      return tokenize(req, w);
    }
    if (path == "/detokenize" || path == "/v1/detokenize") {
      need_post();
      return detokenize(req, w);
    }
    throw ApiError{404, "no route for " + req.method + " " + path, "invalid_request_error", "", "not_found", {}};
  } catch (const ApiError& e) {
    send_error(*w, e);
  } catch (const tmpl::TemplateError& e) {
    send_error(*w, ApiError{400, std::string("chat template error: ") + e.what(), "invalid_request_error", "messages", "template_error", {}});
  } catch (const Error& e) {
    send_error(*w, ApiError{400, e.what(), "invalid_request_error", "", "invalid_value", {}});
  } catch (const std::exception& e) {
    log_warn("server: internal error: ", e.what());
    send_error(*w, ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", "", {}});
  }
}

namespace {

ServedModel& model_or_404(ServedModel* m, const json& body) {
  if (m == nullptr) {
    const std::string name = body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
    throw ApiError{404, "The model `" + name + "` does not exist or you do not have access to it.",
                   "invalid_request_error", "model", "model_not_found", {}};
  }
  return *m;
}

std::string model_name_of(const json& body) {
  const json* m = field(body, "model");
  if (!m) bad("model", "you must provide a model parameter", "missing_required_parameter");
  if (!m->is_string()) bad("model", "'model' must be a string");
  return m->get<std::string>();
}

void check_capacity(const ServedModel& m, int max_queue) {
  const engine::EngineStats st = m.engine->stats();
  if (st.waiting >= max_queue) {
    ++m.metrics->requests_rejected;
    throw ApiError{503, "The server is overloaded (" + std::to_string(st.waiting) + " requests waiting); please retry shortly.",
                   "server_error", "", "server_is_overloaded", {{"Retry-After", "1"}}};
  }
}

std::vector<int32_t> encode_prompt(const ServedModel& m, const std::string& text, bool parse_special) {
  const Tokenizer& tok = *m.tokenizer;
  // A template that writes the BOS token itself must not get a second one.
  const bool has_bos = !m.bos_text.empty() && text.rfind(m.bos_text, 0) == 0;
  return tok.encode(text, !has_bos, parse_special);
}

}  // namespace

void Service::chat_completions(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = model_or_404(find_model(model_name_of(body)), body);
  const json* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required", "missing_required_parameter");
  if (!msgs->is_array() || msgs->empty()) bad("messages", "'messages' must be a non-empty array");
  if (msgs->size() > 4096) bad("messages", "too many messages (at most 4096)");
  json messages = json::array();
  std::vector<ChatMessage> simple;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& msg = (*msgs)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) bad(p, p + " must be an object");
    if (!msg.contains("role") || !msg["role"].is_string()) bad(p + ".role", p + " needs a string 'role'");
    std::string role = msg["role"].get<std::string>();
    static const char* roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    if (std::find(std::begin(roles), std::end(roles), role) == std::end(roles))
      bad(p + ".role", "unknown role '" + role + "'");
    if (role == "developer") role = "system";
    json out = msg;
    out["role"] = role;
    const json content = msg.contains("content") ? msg["content"] : json(nullptr);
    if (content.is_null() && role != "assistant") bad(p + ".content", p + " needs 'content'");
    out["content"] = text_of_content(content, (p + ".content").c_str());
    std::string flat = out["content"].get<std::string>();  // for the built-in formats
    if (role == "assistant" && msg.contains("tool_calls") && !msg["tool_calls"].is_null()) {
      const json& tcs = msg["tool_calls"];
      if (!tcs.is_array()) bad(p + ".tool_calls", "'tool_calls' must be an array");
      json calls = json::array();
      for (const json& tc : tcs) {
        if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object() ||
            !tc["function"].contains("name") || !tc["function"]["name"].is_string())
          bad(p + ".tool_calls", "each tool call needs a 'function' with a 'name'");
        json fn = tc["function"];
        // Templates expect the arguments as an object; the API carries them as JSON text.
        json args = json::object();
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
          args = json::parse(fn["arguments"].get<std::string>(), nullptr, false);
          if (args.is_discarded() || !args.is_object()) bad(p + ".tool_calls", "tool call arguments must be a JSON object");
          check_depth(args, 32);
        } else if (fn.contains("arguments") && fn["arguments"].is_object()) {
          args = fn["arguments"];
        }
        fn["arguments"] = args;
        json c2 = tc;
        c2["function"] = fn;
        calls.push_back(c2);
        flat += (flat.empty() ? "" : "\n") + std::string("<tool_call>\n") +
                json{{"name", fn["name"]}, {"arguments", args}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n</tool_call>";
      }
      out["tool_calls"] = calls;
    }
    if (role == "tool") flat = "<tool_response>\n" + flat + "\n</tool_response>";
    messages.push_back(out);
    simple.push_back(ChatMessage{role == "tool" || role == "function" ? "user" : role, flat});
  }
  GenOptions opt = parse_gen_options(body, m.model->config().n_vocab, options_.max_n, /*chat=*/true);
  ToolRequest tools = parse_tools(body);
  if (tools.active()) {
    if (!opt.constraint_kind.empty()) bad("tools", "use either tools or a response_format / grammar, not both");
    opt.constraint_kind = "grammar";
    opt.constraint_param = "tools";
    try {
      opt.constraint_text = tool_grammar(tools);
    } catch (const grammar::GrammarError& e) {
      bad("tools", e.what(), "invalid_json_schema");
    }
    // Models whose template does not render tools learn them (and the call format) from a system
    // message.
    if (!m.chat_template || !m.template_knows_tools) {
      const std::string ins = tool_instructions(tools);
      if (!messages.empty() && messages[0]["role"] == "system") {
        messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + ins;
        simple[0].content += "\n\n" + ins;
      } else {
        messages.insert(messages.begin(), json{{"role", "system"}, {"content", ins}});
        simple.insert(simple.begin(), ChatMessage{"system", ins});
      }
    }
  }
  std::string text;
  if (m.chat_template) {
    json ctx = {{"messages", messages}, {"add_generation_prompt", true}, {"bos_token", m.bos_text}, {"eos_token", m.eos_text}};
    if (tools.active() && m.template_knows_tools) {
      json list = json::array();
      for (const ToolSpec& t : tools.tools) {
        json params = t.parameters;
        params.erase("$triad_strict");
        list.push_back({{"type", "function"}, {"function", {{"name", t.name}, {"description", t.description}, {"parameters", params}}}});
      }
      ctx["tools"] = list;
    }
    if (const json* kw = field(body, "chat_template_kwargs")) {
      if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      for (const auto& [k, v] : kw->items()) ctx[k] = v;
    }
    text = m.chat_template->render(ctx);
  } else {
    text = render_chat(static_cast<ChatFormat>(m.builtin_chat_format), simple);
  }
  check_capacity(m, options_.max_queue);
  auto job = std::make_shared<Job>();
  job->service = this;
  job->model = &m;
  job->writer = std::move(w);
  job->chat = true;
  job->id = random_id("chatcmpl-");
  job->created = unix_now();
  job->opt = std::move(opt);
  job->tools = std::move(tools);
  job->prompts.push_back(encode_prompt(m, text, /*parse_special=*/true));
  start_job(*this, job);
}

void Service::completions(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = model_or_404(find_model(model_name_of(body)), body);
  const json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "'prompt' is required", "missing_required_parameter");
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> texts;
  const int32_t n_vocab = m.model->config().n_vocab;
  auto ids_of = [&](const json& arr) {
    std::vector<int32_t> ids;
    for (const json& e : arr) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= n_vocab)
        bad("prompt", "token ids in 'prompt' must be integers in 0.." + std::to_string(n_vocab - 1));
      ids.push_back(e.get<int32_t>());
    }
    if (ids.empty()) bad("prompt", "a token-id prompt must not be empty");
    return ids;
  };
  if (prompt->is_string()) {
    texts.push_back(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string()) {
    for (const json& e : *prompt) {
      if (!e.is_string()) bad("prompt", "'prompt' must be a string, an array of strings, or token ids");
      texts.push_back(e.get<std::string>());
    }
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_array()) {
    for (const json& e : *prompt) {
      if (!e.is_array()) bad("prompt", "'prompt' must be a string, an array of strings, or token ids");
      prompts.push_back(ids_of(e));
    }
  } else if (prompt->is_array() && !prompt->empty()) {
    prompts.push_back(ids_of(*prompt));
  } else {
    bad("prompt", "'prompt' must be a non-empty string, array of strings, or token ids");
  }
  if (texts.size() + prompts.size() > 64) bad("prompt", "at most 64 prompts per request");
  std::vector<std::string> echo;
  for (const std::string& t : texts) {
    std::vector<int32_t> ids = m.tokenizer->encode(t, /*add_special=*/true, /*parse_special=*/false);
    if (ids.empty()) bad("prompt", "the prompt is empty after tokenization");
    prompts.push_back(std::move(ids));
    echo.push_back(t);
  }
  if (echo.empty())
    for (const auto& p : prompts) echo.push_back(m.tokenizer->decode(p));
  if (field(body, "suffix")) bad("suffix", "'suffix' is not supported", "unsupported_parameter");
  GenOptions opt = parse_gen_options(body, m.model->config().n_vocab, options_.max_n, /*chat=*/false);
  if (opt.stream && opt.echo) bad("echo", "'echo' is not supported with streaming", "unsupported_parameter");
  if (opt.n * static_cast<int>(prompts.size()) > 64) bad("n", "n times the number of prompts must be at most 64");
  check_capacity(m, options_.max_queue);
  auto job = std::make_shared<Job>();
  job->service = this;
  job->model = &m;
  job->writer = std::move(w);
  job->chat = false;
  job->id = random_id("cmpl-");
  job->created = unix_now();
  job->opt = std::move(opt);
  job->prompts = std::move(prompts);
  job->echo_text = std::move(echo);
  start_job(*this, job);
}

void Service::list_models(std::shared_ptr<ResponseWriter> w) const {
  json data = json::array();
  for (const ServedModel* m : models_)
    data.push_back({{"id", m->name}, {"object", "model"}, {"created", m->created}, {"owned_by", "triad"},
                    {"max_model_len", m->engine->max_model_len()}});
  send_json(*w, json{{"object", "list"}, {"data", data}});
}

void Service::get_model(const std::string& id, std::shared_ptr<ResponseWriter> w) const {
  const ServedModel* m = find_model(id);
  if (!m)
    throw ApiError{404, "The model `" + id + "` does not exist or you do not have access to it.", "invalid_request_error",
                   "model", "model_not_found", {}};
  send_json(*w, json{{"id", m->name}, {"object", "model"}, {"created", m->created}, {"owned_by", "triad"},
                     {"max_model_len", m->engine->max_model_len()}});
}

void Service::health(std::shared_ptr<ResponseWriter> w) const {
  json engines = json::object();
  bool ok = true;
  for (const ServedModel* m : models_) {
    const engine::EngineStats s = m->engine->stats();
    const bool alive = s.last_progress_s < options_.health_stall_s;
    ok = ok && alive;
    engines[m->name] = {{"alive", alive}, {"seconds_since_progress", s.last_progress_s}, {"running", s.running},
                        {"waiting", s.waiting}};
  }
  send_json(*w, json{{"status", ok ? "ok" : "stalled"}, {"models", engines}}, ok ? 200 : 503);
}

void Service::metrics(std::shared_ptr<ResponseWriter> w) const {
  std::ostringstream o;
  auto help = [&](const char* name, const char* type, const char* text) {
    o << "# HELP " << name << " " << text << "\n# TYPE " << name << " " << type << "\n";
  };
  struct Row {
    const ServedModel* m;
    engine::EngineStats s;
  };
  std::vector<Row> rows;
  for (const ServedModel* m : models_) rows.push_back({m, m->engine->stats()});
  auto label = [](const ServedModel* m) { return "model=\"" + m->name + "\""; };
  auto gauge = [&](const char* name, const char* type, const char* text, auto get) {
    help(name, type, text);
    for (const Row& r : rows) o << name << "{" << label(r.m) << "} " << get(r) << "\n";
  };
  gauge("triad_requests_running", "gauge", "Requests being computed.", [](const Row& r) { return r.s.running; });
  gauge("triad_requests_waiting", "gauge", "Requests waiting to be scheduled.", [](const Row& r) { return r.s.waiting; });
  gauge("triad_kv_cache_usage_ratio", "gauge", "Share of KV cache blocks in use.", [](const Row& r) {
    return r.s.kv_blocks_total ? static_cast<double>(r.s.kv_blocks_used) / static_cast<double>(r.s.kv_blocks_total) : 0.0;
  });
  gauge("triad_kv_cache_blocks_used", "gauge", "KV cache blocks in use.", [](const Row& r) { return r.s.kv_blocks_used; });
  gauge("triad_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool.", [](const Row& r) { return r.s.kv_blocks_total; });
  gauge("triad_kv_cache_blocks_cached", "gauge", "Free KV blocks still holding a cached prefix.", [](const Row& r) { return r.s.kv_blocks_cached; });
  gauge("triad_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", [](const Row& r) { return r.s.prefix_queries; });
  gauge("triad_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.", [](const Row& r) { return r.s.prefix_hits; });
  gauge("triad_prompt_tokens_total", "counter", "Prompt tokens computed.", [](const Row& r) { return r.s.prompt_tokens; });
  gauge("triad_generation_tokens_total", "counter", "Tokens generated.", [](const Row& r) { return r.s.generated_tokens; });
  gauge("triad_preemptions_total", "counter", "Requests preempted for KV space.", [](const Row& r) { return r.s.preemptions; });
  gauge("triad_engine_steps_total", "counter", "Engine steps that ran a forward pass.", [](const Row& r) { return r.s.steps; });
  help("triad_requests_total", "counter", "Finished requests by outcome.");
  for (const Row& r : rows) {
    const ModelMetrics& mm = *r.m->metrics;
    o << "triad_requests_total{" << label(r.m) << ",outcome=\"ok\"} " << mm.requests_ok.load() << "\n";
    o << "triad_requests_total{" << label(r.m) << ",outcome=\"error\"} " << mm.requests_error.load() << "\n";
    o << "triad_requests_total{" << label(r.m) << ",outcome=\"cancelled\"} " << mm.requests_cancelled.load() << "\n";
    o << "triad_requests_total{" << label(r.m) << ",outcome=\"rejected\"} " << mm.requests_rejected.load() << "\n";
  }
  struct H {
    const char* name;
    const char* text;
    const Histogram ModelMetrics::*h;
  };
  const H hs[] = {{"triad_time_to_first_token_seconds", "Time from request to first token.", &ModelMetrics::ttft},
                  {"triad_inter_token_latency_seconds", "Time between consecutive tokens of a request.", &ModelMetrics::itl},
                  {"triad_e2e_request_latency_seconds", "Time from request to its last token.", &ModelMetrics::e2e},
                  {"triad_request_queue_time_seconds", "Time a request waited before its first step.", &ModelMetrics::queue}};
  for (const H& h : hs) {
    help(h.name, "histogram", h.text);
    for (const Row& r : rows) ((*r.m->metrics).*(h.h)).render(o, h.name, label(r.m));
  }
  w->send(200, "text/plain; version=0.0.4; charset=utf-8", o.str());
}

void Service::tokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = model_or_404(find_model(model_name_of(body)), body);
  const bool add_special = opt_bool(body, "add_special_tokens").value_or(true);
  std::vector<int32_t> ids;
  if (const json* p = field(body, "prompt")) {
    if (!p->is_string()) bad("prompt", "'prompt' must be a string");
    ids = m.tokenizer->encode(p->get<std::string>(), add_special, false);
  } else {
    bad("prompt", "'prompt' is required", "missing_required_parameter");
  }
  send_json(*w, json{{"count", ids.size()}, {"max_model_len", m.engine->max_model_len()}, {"tokens", ids}});
}

void Service::detokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = model_or_404(find_model(model_name_of(body)), body);
  const json* t = field(body, "tokens");
  if (!t || !t->is_array()) bad("tokens", "'tokens' must be an array of token ids", "missing_required_parameter");
  std::vector<int32_t> ids;
  for (const json& e : *t) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= m.tokenizer->n_vocab())
      bad("tokens", "'tokens' entries must be token ids of this model");
    ids.push_back(e.get<int32_t>());
  }
  send_json(*w, json{{"prompt", m.tokenizer->decode(ids)}});
}

}  // namespace triad::server
