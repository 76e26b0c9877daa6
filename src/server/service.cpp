// The OpenAI-compatible service (see service.h): routing, authentication, the endpoints' request
// checks and prompt rendering; a generation request is then handed to job.h.
#include "server/service.h"
#include "server/reasoning.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "model/model.h"
#include "grammar/grammar.h"
#include "server/constraint_cache.h"
#include "server/encoder.h"
#include "server/job.h"
#include "server/endpoints.h"
#include "server/openai_request.h"
#include "server/responses.h"
#include "server/stats.h"
#include "server/tool_calls.h"
#include "template/template.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace triad::server {

Service::Service(std::vector<ServedModel*> models, ServiceOptions options)
    : models_(std::move(models)), options_(std::move(options)),
      responses_(std::make_shared<ResponseStore>(options_.responses_max, options_.responses_max_bytes)),
      sampler_(make_stats_sampler(models_)) {}

Service::~Service() { stop_sampler(); }

void Service::stop_sampler() { sampler_->stop(); }

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


// Adds fixed headers to every response: the client's x-request-id (vLLM's benchmark sends one)
// and the CORS headers of an allowed origin, on answers, errors and streams alike.
class HeaderWriter : public ResponseWriter {
 public:
  HeaderWriter(std::shared_ptr<ResponseWriter> inner, HeaderList headers)
      : inner_(std::move(inner)), headers_(std::move(headers)) {}
  void send(int status, const std::string& content_type, std::string body, const HeaderList& extra) override {
    inner_->send(status, content_type, std::move(body), with(extra));
  }
  void start_stream(int status, const std::string& content_type, const HeaderList& extra) override {
    inner_->start_stream(status, content_type, with(extra));
  }
  void write(std::string data) override { inner_->write(std::move(data)); }
  void end() override { inner_->end(); }
  void on_disconnect(std::function<void()> fn) override { inner_->on_disconnect(std::move(fn)); }
  bool disconnected() const override { return inner_->disconnected(); }

 private:
  HeaderList with(HeaderList h) const {
    h.insert(h.end(), headers_.begin(), headers_.end());
    return h;
  }
  std::shared_ptr<ResponseWriter> inner_;
  HeaderList headers_;
};

// A header value safe to echo: printable ASCII, at most max_bytes.
bool safe_header_value(const std::string& v, size_t max_bytes = 128) {
  if (v.empty() || v.size() > max_bytes) return false;
  for (unsigned char c : v)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

// The Access-Control-Allow-Origin value for a request from `origin`: "*" when any origin is
// allowed, the origin itself when it is listed, empty when it is not allowed (or absent).
std::string allowed_origin(const std::vector<std::string>& allowed, const std::string& origin) {
  if (origin.empty() || !safe_header_value(origin)) return "";
  for (const std::string& a : allowed) {
    if (a == "*") return "*";
    if (a == origin) return origin;
  }
  return "";
}

}  // namespace

void Service::handle(HttpRequest req, std::shared_ptr<ResponseWriter> w) {
  const std::string path = path_of(req.target);
  HeaderList always;
  if (const std::string rid = req.header("x-request-id"); safe_header_value(rid))
    always.emplace_back("x-request-id", rid);
  const std::string origin = allowed_origin(options_.cors_origins, req.header("origin"));
  if (!origin.empty()) {
    always.emplace_back("Access-Control-Allow-Origin", origin);
    if (origin != "*") always.emplace_back("Vary", "Origin");
    always.emplace_back("Access-Control-Expose-Headers", "x-request-id, retry-after, x-triad-schema-dropped");
  }
  if (!always.empty()) w = std::make_shared<HeaderWriter>(std::move(w), std::move(always));
  // CORS preflight: answered before authentication (browsers send no credentials with it).
  if (req.method == "OPTIONS" && !options_.cors_origins.empty()) {
    if (origin.empty()) {
      send_error(*w, ApiError{403, "origin not allowed (see --cors-allow-origin)", "invalid_request_error", "", "cors_origin_not_allowed", {}});
      return;
    }
    std::string want = req.header("access-control-request-headers");
    if (!safe_header_value(want, 2048)) want = "authorization, content-type";
    w->send(204, "text/plain", "",
            {{"Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"},
             {"Access-Control-Allow-Headers", want},
             {"Access-Control-Max-Age", "600"}});
    return;
  }
  try {
    if (path == "/health") return health(w);
    if (req.method == "GET" && page(path, *w)) return;
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
    if (path == "/stats" || path == "/v1/stats") {
      if (req.method != "GET") throw ApiError{405, "use GET for " + path, "invalid_request_error", "", "method_not_allowed", {}};
      return stats(w);
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
    if (path == "/v1/responses" || path == "/responses") {
      need_post();
      return responses(req, w);
    }
    if (path == "/v1/embeddings" || path == "/embeddings") {
      need_post();
      return embeddings(req, w);
    }
    if (path.rfind("/v1/responses/", 0) == 0) return stored_response(req, path.substr(14), w);
    if (path == "/tokenize" || path == "/v1/tokenize") {
      need_post();
      return tokenize(req, w);
    }
    if (path == "/tokenizer_info" || path == "/v1/tokenizer_info") {
      if (req.method != "GET") throw ApiError{405, "use GET for " + path, "invalid_request_error", "", "method_not_allowed", {}};
      return tokenizer_info(req, w);
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

const char* model_kind_name(ModelKind k) {
  switch (k) {
    case ModelKind::kChat: return "chat";
    case ModelKind::kBase: return "base";
    case ModelKind::kEmbedding: return "embedding";
  }
  return "?";
}

ServedModel& generative_model_or_4xx(ServedModel* m, const json& body, const char* endpoint) {
  ServedModel& s = model_or_404(m, body);
  if (s.kind == ModelKind::kEmbedding)
    throw ApiError{400, "The model `" + s.name + "` is an embedding model and cannot be used with " + endpoint +
                            "; use /v1/embeddings.",
                   "invalid_request_error", "model", "model_not_supported", {}};
  return s;
}

ServedModel& model_or_404(ServedModel* m, const json& body) {
  if (m == nullptr) {
    const std::string name = body.contains("model") && body["model"].is_string() ? body["model"].get<std::string>() : "";
    throw ApiError{404, "The model `" + name + "` does not exist or you do not have access to it.",
                   "invalid_request_error", "model", "model_not_found", {}};
  }
  return *m;
}

std::string model_name_of(const json& body, const std::string& fallback) {
  const json* m = field(body, "model");
  if (!m && !fallback.empty()) return fallback;
  if (!m) bad("model", "you must provide a model parameter", "missing_required_parameter");
  if (!m->is_string()) bad("model", "'model' must be a string");
  return m->get<std::string>();
}

void check_capacity(const ServedModel& m, int max_queue, size_t n) {
  const engine::EngineStats st = m.engine->stats();
  if (st.waiting > 0 && static_cast<uint64_t>(st.waiting) + n > static_cast<uint64_t>(max_queue)) {
    ++m.metrics->requests_rejected;
    throw ApiError{503, "The server is overloaded (" + std::to_string(st.waiting) + " requests waiting); please retry shortly.",
                   "server_error", "", "server_is_overloaded", {{"Retry-After", "1"}}};
  }
}

namespace {

std::vector<int32_t> encode_prompt(const ServedModel& m, const std::string& text, bool parse_special) {
  const Tokenizer& tok = *m.tokenizer;
  // A template that writes the BOS token itself must not get a second one.
  const bool has_bos = !m.bos_text.empty() && text.rfind(m.bos_text, 0) == 0;
  return tok.encode(text, !has_bos, parse_special);
}

}  // namespace

std::vector<int32_t> chat_prompt(const ServedModel& m, const json& msgs_in, const ToolRequest& tools,
                                 const json* template_kwargs, const char* param) {
  const json* msgs = &msgs_in;
  const std::string P = param;
  if (!msgs->is_array() || msgs->empty()) bad(P, "'" + P + "' must be a non-empty array");
  if (msgs->size() > 4096) bad(P, "too many messages (at most 4096)");
  json messages = json::array();
  std::vector<ChatMessage> simple;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& msg = (*msgs)[i];
    const std::string p = P + "[" + std::to_string(i) + "]";
    if (!msg.is_object()) bad(p, p + " must be an object");
    if (!msg.contains("role") || !msg["role"].is_string()) bad(p + ".role", p + " needs a string 'role'");
    std::string role = msg["role"].get<std::string>();
    static const char* roles[] = {"system", "developer", "user", "assistant", "tool", "function"};
    if (std::find(std::begin(roles), std::end(roles), role) == std::end(roles))
      bad(p + ".role", "unknown role '" + role + "'");
    if (role == "developer") role = "system";
    json out = msg;
    out["role"] = role;
    if (role == "function") {  // the deprecated form of a tool result: {"role": "function", "name", "content"}
      out["role"] = "tool";
      if (msg.contains("name") && msg["name"].is_string()) out["name"] = msg["name"];
    }
    const json content = msg.contains("content") ? msg["content"] : json(nullptr);
    if (content.is_null() && role != "assistant") bad(p + ".content", p + " needs 'content'");
    out["content"] = text_of_content(content, (p + ".content").c_str());
    std::string flat = out["content"].get<std::string>();  // for the built-in formats
    json tcs = msg.contains("tool_calls") ? msg["tool_calls"] : json(nullptr);
    if (role == "assistant" && tcs.is_null() && msg.contains("function_call") && msg["function_call"].is_object()) {
      // The deprecated single call: {"function_call": {"name", "arguments"}}.
      tcs = json::array({{{"id", "call_legacy_" + std::to_string(i)}, {"type", "function"}, {"function", msg["function_call"]}}});
      out.erase("function_call");
    }
    if (role == "assistant" && !tcs.is_null()) {
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
    // An earlier answer's reasoning, as the client got it (reasoning_content): gpt-oss's template
    // renders it from `thinking` (Qwen3's reads reasoning_content itself).
    if (role == "assistant" && m.tool_format == ToolFormat::kHarmony && msg.contains("reasoning_content") &&
        msg["reasoning_content"].is_string() && !msg.contains("thinking"))
      out["thinking"] = msg["reasoning_content"];
    if (role == "tool" || role == "function") flat = "<tool_response>\n" + flat + "\n</tool_response>";
    messages.push_back(out);
    simple.push_back(ChatMessage{role == "tool" || role == "function" ? "user" : role, flat});
  }
  // Listed tools are shown to the model even under tool_choice "none" (which only forbids
  // calls): the prompt, and so the prefix cache, does not depend on tool_choice. Models whose
  // template does not render tools learn them (and the call format) from a system message.
  const bool show_tools = !tools.tools.empty();
  if (show_tools && (!m.chat_template || !m.template_knows_tools)) {
    const std::string ins = tool_instructions(tools, m.chat_template ? m.tool_format : ToolFormat::kHermes);
    if (!messages.empty() && messages[0]["role"] == "system") {
      messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + ins;
      simple[0].content += "\n\n" + ins;
    } else {
      messages.insert(messages.begin(), json{{"role", "system"}, {"content", ins}});
      simple.insert(simple.begin(), ChatMessage{"system", ins});
    }
  }
  std::string text;
  if (m.chat_template) {
    json ctx = {{"messages", messages}, {"add_generation_prompt", true}, {"bos_token", m.bos_text}, {"eos_token", m.eos_text}};
    if (show_tools && m.template_knows_tools) {
      json list = json::array();
      for (const ToolSpec& t : tools.tools) {
        list.push_back({{"type", "function"}, {"function", {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
      }
      ctx["tools"] = list;
    }
    if (template_kwargs) {
      if (!template_kwargs->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
      for (const auto& [k, v] : template_kwargs->items()) ctx[k] = v;
    }
    text = m.chat_template->render(ctx);
  } else {
    text = render_chat(static_cast<ChatFormat>(m.builtin_chat_format), simple);
  }
  return encode_prompt(m, text, /*parse_special=*/true);
}

// Thinking models (server/reasoning.h): how their reasoning is split from the answer, unless
// --reasoning-format none.
void Service::set_reasoning(GenOptions& opt, const ServedModel& m, const std::vector<int32_t>& prompt) const {
  if (!m.chat_template) return;
  if (m.tool_format == ToolFormat::kHarmony) {
    // Harmony is how gpt-oss writes its answer and its calls: always read; `none` only keeps
    // the analysis in the content.
    opt.reasoning_harmony = true;
    opt.reasoning = options_.reasoning;
  } else if (options_.reasoning && ReasoningSplitter::template_thinks(m.chat_template_source)) {
    opt.reasoning = true;
    const size_t tail = std::min<size_t>(prompt.size(), 8);
    opt.reasoning_starts_inside = ReasoningSplitter::prompt_opens_thinking(
        m.tokenizer->decode(std::vector<int32_t>(prompt.end() - static_cast<std::ptrdiff_t>(tail), prompt.end())));
  }
}

void constrain_for_tools(GenOptions& opt, const ToolRequest& tools, ToolFormat format, std::vector<std::string>* dropped) {
  const char* param = tools.legacy ? "functions" : "tools";
  if (tools.active()) {
    if (!opt.constraint_kind.empty()) bad(param, std::string("use either ") + param + " or a response_format / grammar, not both");
    opt.constraint_kind = "grammar";
    opt.constraint_param = param;
    try {
      opt.constraint_text = tool_grammar(tools, format, dropped);
    } catch (const grammar::GrammarError& e) {
      bad(param, e.what(), "invalid_json_schema");
    }
  }
  // tool_choice "none": the tools stay in the prompt and nothing is read as a call (as vLLM).
}

std::shared_ptr<grammar::Constraint> compile_constraint(ServedModel& m, const GenOptions& o, std::vector<std::string> dropped,
                                                        std::shared_ptr<ResponseWriter>& w) {
  if (o.constraint_kind.empty()) return nullptr;
  if (!m.constraints) bad(o.constraint_param, "constrained decoding is not available for model '" + m.name + "'");
  std::shared_ptr<grammar::Constraint> c;
  try {
    std::vector<std::string> more;
    c = m.constraints->get(o.constraint_kind, o.constraint_text, &more);
    for (std::string& k : more)
      if (std::find(dropped.begin(), dropped.end(), k) == dropped.end()) dropped.push_back(std::move(k));
  } catch (const grammar::GrammarError& e) {
    bad(o.constraint_param, e.what(), o.constraint_kind == "grammar" ? "invalid_grammar" : "invalid_json_schema");
  }
  if (!dropped.empty()) {
    // Not strict: what the grammar could not enforce is named instead of failing the request.
    std::string v;
    for (const std::string& k : dropped) v += (v.empty() ? "" : ", ") + k;
    if (safe_header_value(v, 1024)) w = std::make_shared<HeaderWriter>(std::move(w), HeaderList{{"x-triad-schema-dropped", v}});
  }
  return c;
}

void Service::chat_completions(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = generative_model_or_4xx(find_model(model_name_of(body, options_.default_model)), body, "/v1/chat/completions");
  const json* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required", "missing_required_parameter");
  GenOptions opt = parse_gen_options(body, m.model->config().n_vocab, options_.max_n, /*chat=*/true);
  ToolRequest tools = parse_tools(body);
  std::vector<std::string> dropped;
  constrain_for_tools(opt, tools, m.tool_format, &dropped);
  std::vector<int32_t> prompt = chat_prompt(m, *msgs, tools, field(body, "chat_template_kwargs"));
  set_reasoning(opt, m, prompt);
  check_capacity(m, options_.max_queue);
  JobSpec spec;
  spec.model = &m;
  spec.constraint = compile_constraint(m, opt, std::move(dropped), w);
  spec.writer = w;
  spec.encoder = make_chat_encoder(w, m, opt, tools.legacy);
  spec.opt = std::move(opt);
  spec.tools = std::move(tools);
  spec.prompts.push_back(std::move(prompt));
  start_job(*this, std::move(spec));
}

void Service::completions(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = generative_model_or_4xx(find_model(model_name_of(body, options_.default_model)), body, "/v1/completions");
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
  JobSpec spec;
  spec.model = &m;
  spec.constraint = compile_constraint(m, opt, {}, w);
  spec.writer = w;
  spec.encoder = make_completion_encoder(w, m, opt, std::move(echo));
  spec.opt = std::move(opt);
  spec.prompts = std::move(prompts);
  spec.completion_defaults = true;
  start_job(*this, std::move(spec));
}

void Service::responses(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = generative_model_or_4xx(find_model(model_name_of(body, options_.default_model)), body, "/v1/responses");
  const ResponsesRequest rr = parse_responses_request(body, *responses_);
  GenOptions opt = parse_gen_options(rr.chat_body, m.model->config().n_vocab, 1, /*chat=*/true);
  ToolRequest tools = parse_tools(rr.chat_body);
  std::vector<std::string> dropped;
  constrain_for_tools(opt, tools, m.tool_format, &dropped);
  if (opt.constraint_param == "response_format") opt.constraint_param = "text.format";
  std::vector<int32_t> prompt = chat_prompt(m, rr.messages, tools, field(body, "chat_template_kwargs"), "input");
  set_reasoning(opt, m, prompt);
  check_capacity(m, options_.max_queue);
  JobSpec spec;
  spec.model = &m;
  spec.constraint = compile_constraint(m, opt, std::move(dropped), w);
  spec.writer = w;
  spec.encoder = make_responses_encoder(w, m.name, opt, rr, responses_);
  spec.opt = std::move(opt);
  spec.tools = std::move(tools);
  spec.prompts.push_back(std::move(prompt));
  start_job(*this, std::move(spec));
}

void Service::stored_response(const HttpRequest& req, const std::string& rest, std::shared_ptr<ResponseWriter> w) {
  const size_t slash = rest.find('/');
  const std::string id = rest.substr(0, slash);
  const std::string sub = slash == std::string::npos ? "" : rest.substr(slash + 1);
  auto not_found = [&] {
    return ApiError{404, "Response with id '" + id + "' not found.", "invalid_request_error", "response_id", "not_found", {}};
  };
  if (sub == "cancel") {
    if (req.method != "POST") throw ApiError{405, "use POST to cancel", "invalid_request_error", "", "method_not_allowed", {}};
    if (!responses_->get(id)) throw not_found();
    bad("response_id", "only background responses can be cancelled, and this server runs none in the background");
  }
  if (!sub.empty() && sub != "input_items") throw ApiError{404, "no route for " + req.method + " " + req.target, "invalid_request_error", "", "not_found", {}};
  auto entry = responses_->get(id);
  if (req.method == "DELETE" && sub.empty()) {
    if (!responses_->erase(id)) throw not_found();
    return send_json(*w, json{{"id", id}, {"object", "response"}, {"deleted", true}});
  }
  if (req.method != "GET") throw ApiError{405, "use GET or DELETE for /v1/responses/{id}", "invalid_request_error", "", "method_not_allowed", {}};
  if (!entry) throw not_found();
  if (sub == "input_items") {
    const size_t q = req.target.find('?');
    return send_json(*w, list_input_items(*entry, q == std::string::npos ? "" : req.target.substr(q + 1)));
  }
  send_json(*w, entry->response);
}

namespace {
// A /v1/models entry: OpenAI's fields, then what the model is for, its context, its weights' and
// KV cache's shares of the memory plan, and (when it serves embeddings) their size and pooling.
json model_entry(const ServedModel& m) {
  json e{{"id", m.name}, {"object", "model"}, {"created", m.created}, {"owned_by", "triad"},
         {"kind", model_kind_name(m.kind)}, {"max_model_len", m.engine->max_model_len()},
         {"weights_bytes", m.weights_bytes}, {"kv_cache_bytes", m.engine->kv_plan().total_bytes}};
  if (m.pooling != Pooling::kNone) {
    e["embedding_dimensions"] = m.model->config().n_embd;
    e["pooling"] = pooling_name(m.pooling);
  }
  return e;
}
}  // namespace

void Service::list_models(std::shared_ptr<ResponseWriter> w) const {
  json data = json::array();
  for (const ServedModel* m : models_) data.push_back(model_entry(*m));
  send_json(*w, json{{"object", "list"}, {"data", data}});
}

void Service::get_model(const std::string& id, std::shared_ptr<ResponseWriter> w) const {
  const ServedModel* m = find_model(id);
  if (!m)
    throw ApiError{404, "The model `" + id + "` does not exist or you do not have access to it.", "invalid_request_error",
                   "model", "model_not_found", {}};
  send_json(*w, model_entry(*m));
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
  gauge("triad_spec_decode_draft_tokens_total", "counter", "Speculative draft tokens verified.",
        [](const Row& r) { return r.s.spec_draft_tokens; });
  gauge("triad_spec_decode_accepted_tokens_total", "counter", "Speculative draft tokens accepted (each saved a step).",
        [](const Row& r) { return r.s.spec_accepted_tokens; });
  // By source: the totals' parts, so that each source's acceptance rate can be tuned (prompt
  // lookup runs first; the draft model drafts where lookup finds nothing).
  auto by_source = [&](const char* name, const char* text, auto lookup, auto model) {
    help(name, "counter", text);
    for (const Row& r : rows) {
      o << name << "{" << label(r.m) << ",source=\"lookup\"} " << lookup(r.s) << "\n";
      o << name << "{" << label(r.m) << ",source=\"draft_model\"} " << model(r.s) << "\n";
    }
  };
  by_source("triad_spec_decode_source_draft_tokens_total",
            "Speculative draft tokens verified, by source: prompt lookup (context and prediction) or the draft model.",
            [](const engine::EngineStats& s) { return s.spec_lookup_draft_tokens; },
            [](const engine::EngineStats& s) { return s.spec_model_draft_tokens; });
  by_source("triad_spec_decode_source_accepted_tokens_total", "Speculative draft tokens accepted, by source.",
            [](const engine::EngineStats& s) { return s.spec_lookup_accepted_tokens; },
            [](const engine::EngineStats& s) { return s.spec_model_accepted_tokens; });
  gauge("triad_spec_decode_row_cost_share", "gauge",
        "Share of a decode step of the running batch that its rows cost: drafts are cut to tokens "
        "likelier than this to be accepted (0: not measured yet).",
        [](const Row& r) { return r.s.spec_row_cost_share; });
  gauge("triad_preemptions_total", "counter", "Requests preempted for KV space.", [](const Row& r) { return r.s.preemptions; });
  gauge("triad_engine_steps_total", "counter", "Engine steps that ran a forward pass.", [](const Row& r) { return r.s.steps; });
  gauge("triad_embedding_requests_total", "counter", "/v1/embeddings requests answered.",
        [](const Row& r) { return r.m->metrics->embedding_requests.load(); });
  gauge("triad_embedding_inputs_total", "counter", "Embedding inputs computed (one request may hold many).",
        [](const Row& r) { return r.s.embedding_requests; });
  gauge("triad_embedding_input_tokens_total", "counter", "Tokens of the embedding inputs computed.",
        [](const Row& r) { return r.s.embedding_tokens; });
  help("triad_log_lines_dropped_total", "counter", "Log lines dropped because stderr was not read fast enough.");
  o << "triad_log_lines_dropped_total " << log_lines_dropped() << "\n";
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

ServedModel& Service::tokenizer_model(const std::string* named) const {
  if (!named && options_.default_model.empty() && models_.size() == 1) return *models_[0];
  if (!named && options_.default_model.empty()) bad("model", "you must provide a model parameter", "missing_required_parameter");
  const std::string name = named ? *named : options_.default_model;
  if (ServedModel* m = find_model(name)) return *m;
  throw ApiError{404, "The model `" + name + "` does not exist or you do not have access to it.", "invalid_request_error",
                 "model", "model_not_found", {}};
}

namespace {
// The `model` a tokenizer request names (a 400 when it is not a string).
const std::string* named_model(const json& body) {
  const json* m = field(body, "model");
  if (m && !m->is_string()) bad("model", "'model' must be a string");
  return m ? m->get_ptr<const std::string*>() : nullptr;
}
}  // namespace

void Service::tokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = tokenizer_model(named_model(body));
  const bool add_special = opt_bool(body, "add_special_tokens").value_or(true);
  std::vector<int32_t> ids;
  if (const json* msgs = field(body, "messages")) {
    // vLLM's chat form: the messages (and tools) rendered by the model's chat template, as a chat
    // request would send them to the model.
    ids = chat_prompt(m, *msgs, parse_tools(body), field(body, "chat_template_kwargs"));
  } else if (const json* p = field(body, "prompt")) {
    if (!p->is_string()) bad("prompt", "'prompt' must be a string");
    // Special tokens written in the text are read as themselves, as vLLM's /tokenize does.
    ids = m.tokenizer->encode(p->get<std::string>(), add_special, /*parse_special=*/true);
  } else {
    bad("prompt", "'prompt' or 'messages' is required", "missing_required_parameter");
  }
  send_json(*w, json{{"count", ids.size()}, {"max_model_len", m.engine->max_model_len()}, {"tokens", ids}});
}

void Service::detokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = tokenizer_model(named_model(body));
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

void Service::tokenizer_info(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  std::string name;
  if (const size_t p = req.target.find("?model="); p != std::string::npos) name = req.target.substr(p + 7);
  ServedModel& m = tokenizer_model(name.empty() ? nullptr : &name);
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  send_json(*w, json{{"model", m.name},
                     {"bos_token", or_null(m.bos_text)},
                     {"eos_token", or_null(m.eos_text)},
                     {"pad_token", nullptr},
                     {"add_bos_token", m.tokenizer->add_bos()},
                     {"chat_template", or_null(m.chat_template_source)},
                     {"model_max_length", m.engine->max_model_len()},
                     {"vocab_size", m.tokenizer->n_vocab()},
                     {"tokenizer_class", "triad"}});
}

}  // namespace triad::server
