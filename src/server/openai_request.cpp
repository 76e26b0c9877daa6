// Request parsing and validation for the OpenAI endpoints (see openai_request.h).
#include "server/openai_request.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <random>

#include "base/error.h"

namespace triad::server {

// ---- Errors in OpenAI's shape.

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code, int status) {
  throw ApiError{status, message, "invalid_request_error", param, code, {}};
}

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Rejects JSON nested deeper than `limit` (checked iteratively, before any recursive use).
void check_depth(const json& j, int limit) {
  std::vector<std::pair<const json*, int>> stack{{&j, 1}};
  while (!stack.empty()) {
    auto [v, d] = stack.back();
    stack.pop_back();
    if (d > limit) bad("", "the request JSON is nested deeper than " + std::to_string(limit) + " levels");
    if (v->is_structured())
      for (const auto& c : *v) stack.emplace_back(&c, d + 1);
  }
}

json parse_json_body(const std::string& text) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    bad("", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
            "HTTP library correctly. The OpenAI API expects a JSON payload.)", "invalid_json");
  if (!body.is_object()) bad("", "the request body must be a JSON object", "invalid_json");
  check_depth(body, 64);
  return body;
}

// ---- Typed field access: absent or null -> nullopt; the wrong type or range -> 400 naming it.

const json* field(const json& b, const char* key) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> opt_number(const json& b, const char* key, double lo, double hi) {
  const json* v = field(b, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    bad(key, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                 ", got " + v->dump());
  return d;
}

std::optional<int64_t> opt_int(const json& b, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(b, key);
  if (!v) return std::nullopt;
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      const auto i = static_cast<int64_t>(d);
      if (i < lo || i > hi) bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + v->dump());
      return i;
    }
    bad(key, std::string("'") + key + "' must be an integer, got " + v->dump());
  }
  if (!v->is_number_integer()) bad(key, std::string("'") + key + "' must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(key, std::string("'") + key + "' is out of range: " + v->dump());
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi)
    bad(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(i));
  return i;
}

std::optional<bool> opt_bool(const json& b, const char* key) {
  const json* v = field(b, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, std::string("'") + key + "' must be a boolean");
  return v->get<bool>();
}

std::string text_of_content(const json& content, const char* param) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "message content must be a string or an array of content parts");
  std::string out;
  bool first = true;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(param, "each content part must be an object with a 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      bad(param, "content parts of type '" + type + "' are not supported by this model (text only)", "unsupported_content");
    if (!part.contains("text") || !part["text"].is_string()) bad(param, "a text content part needs a string 'text'");
    if (!first) out += "\n";
    out += part["text"].get<std::string>();
    first = false;
  }
  return out;
}

// ---- The common generation parameters of both endpoints.

GenOptions parse_gen_options(const json& b, int32_t n_vocab, int max_n, bool chat) {
  GenOptions o;
  SamplingParams& sp = o.sampling;
  sp.penalty_last_n = -1;
  sp.temperature = static_cast<float>(opt_number(b, "temperature", 0, 2).value_or(1.0));
  if (auto v = opt_number(b, "top_p", 0, 1)) {
    if (*v == 0) sp.temperature = 0;  // nothing but the most likely token
    else sp.top_p = static_cast<float>(*v);
  }
  if (auto v = opt_int(b, "top_k", -1, 1 << 30)) sp.top_k = *v < 0 ? 0 : static_cast<int32_t>(*v);
  if (auto v = opt_number(b, "min_p", 0, 1)) sp.min_p = static_cast<float>(*v);
  if (auto v = opt_number(b, "presence_penalty", -2, 2)) sp.presence_penalty = static_cast<float>(*v);
  if (auto v = opt_number(b, "frequency_penalty", -2, 2)) sp.frequency_penalty = static_cast<float>(*v);
  std::optional<double> rep = opt_number(b, "repetition_penalty", 0.01, 10);
  if (!rep) rep = opt_number(b, "repeat_penalty", 0.01, 10);
  if (rep) sp.repetition_penalty = static_cast<float>(*rep);
  if (auto v = opt_int(b, "seed", INT64_MIN, INT64_MAX)) sp.seed = static_cast<uint64_t>(*v);
  if (const json* lb = field(b, "logit_bias")) {
    if (!lb->is_object()) bad("logit_bias", "'logit_bias' must be an object mapping token ids to biases");
    if (lb->size() > 1024) bad("logit_bias", "'logit_bias' has more than 1024 entries");
        for (const auto& [k, v] : lb->items()) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(k, &used);
        if (used != k.size()) id = -1;
      } catch (const std::exception&) {
        id = -1;
      }
      if (id < 0 || id >= n_vocab) bad("logit_bias", "logit_bias key '" + k + "' is not a token id of this model (0.." + std::to_string(n_vocab - 1) + ")");
      if (!v.is_number()) bad("logit_bias", "logit_bias values must be numbers");
      const double bias = v.get<double>();
      if (!std::isfinite(bias) || bias < -100 || bias > 100) bad("logit_bias", "logit_bias values must be between -100 and 100, got " + v.dump());
      sp.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
    }
  }
  std::optional<int64_t> mt = opt_int(b, "max_completion_tokens", 1, 1 << 30);
  if (!mt) mt = opt_int(b, "max_tokens", chat ? 1 : 0, 1 << 30);
  o.max_tokens = mt;
  if (const json* s = field(b, "stop")) {
    if (s->is_string()) {
      o.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > 4) bad("stop", "'stop' may hold at most 4 strings");
      for (const json& e : *s) {
        if (!e.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        o.stop.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const std::string& x : o.stop)
      if (x.empty() || x.size() > 1024) bad("stop", "stop strings must be 1 to 1024 bytes long");
  }
  if (const json* s = field(b, "stop_token_ids")) {
    if (!s->is_array() || s->size() > 64) bad("stop_token_ids", "'stop_token_ids' must be an array of at most 64 token ids");
    for (const json& e : *s) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= n_vocab)
        bad("stop_token_ids", "'stop_token_ids' entries must be token ids of this model");
      o.stop_ids.push_back(e.get<int32_t>());
    }
  }
  o.ignore_eos = opt_bool(b, "ignore_eos").value_or(false);
  o.n = static_cast<int>(opt_int(b, "n", 1, max_n).value_or(1));
  o.stream = opt_bool(b, "stream").value_or(false);
  if (const json* so = field(b, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    o.include_usage = opt_bool(*so, "include_usage").value_or(false);
  }
  if (chat) {
    const bool lp = opt_bool(b, "logprobs").value_or(false);
    const auto top = opt_int(b, "top_logprobs", 0, 20);
    if (top && !lp) bad("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    if (lp) o.logprobs = static_cast<int>(top.value_or(0));
  } else {
    if (const json* lp = field(b, "logprobs")) {
      if (lp->is_boolean()) {
        if (lp->get<bool>()) o.logprobs = 0;
      } else {
        o.logprobs = static_cast<int>(opt_int(b, "logprobs", 0, 20).value());
      }
    }
    o.echo = opt_bool(b, "echo").value_or(false);
    if (mt && *mt == 0 && !o.echo) bad("max_tokens", "'max_tokens' must be at least 1 (0 only with 'echo')");
  }
  if (const json* pr = field(b, "prediction")) {
    if (!pr->is_object() || !pr->contains("type") || (*pr)["type"] != "content" || !pr->contains("content"))
      bad("prediction", "'prediction' must be {\"type\": \"content\", \"content\": ...}");
    o.prediction = text_of_content((*pr)["content"], "prediction.content");
  }
  if (auto v = opt_int(b, "num_speculative_tokens", 0, 32)) o.num_speculative_tokens = static_cast<int>(*v);
  if (auto v = opt_int(b, "prompt_logprobs", 0, 20)) {
    if (o.stream) bad("prompt_logprobs", "'prompt_logprobs' is not supported with streaming", "unsupported_parameter");
    o.prompt_logprobs = static_cast<int>(*v);
  }
  if (const json* rf = field(b, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      bad("response_format", "'response_format' must be an object with a 'type'");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      o.constraint_kind = "json_object";
      o.constraint_param = "response_format";
    } else if (type == "json_schema") {
      const json* js = rf->contains("json_schema") ? &(*rf)["json_schema"] : nullptr;
      if (!js || !js->is_object()) bad("response_format", "response_format json_schema needs a 'json_schema' object");
      if (!js->contains("schema") || !((*js)["schema"].is_object() || (*js)["schema"].is_boolean()))
        bad("response_format", "response_format.json_schema needs a 'schema' (a JSON Schema object)");
      if (js->contains("name") && !(*js)["name"].is_string()) bad("response_format", "response_format.json_schema.name must be a string");
      bool strict = false;
      if (js->contains("strict") && !(*js)["strict"].is_null()) {
        if (!(*js)["strict"].is_boolean()) bad("response_format", "response_format.json_schema.strict must be a boolean");
        strict = (*js)["strict"].get<bool>();
      }
      o.constraint_kind = strict ? "json_schema_strict" : "json_schema";
      o.constraint_text = (*js)["schema"].dump();  // ordered_json: keys stay in declared order
      o.constraint_param = "response_format";
    } else if (type != "text") {
      bad("response_format", "unknown response_format type '" + type + "' (expected 'text', 'json_object' or 'json_schema')");
    }
  }
  if (const json* g = field(b, "grammar")) {
    if (!g->is_string()) bad("grammar", "'grammar' must be a string of GBNF rules");
    if (!g->get<std::string>().empty()) {
      if (!o.constraint_kind.empty()) bad("grammar", "use either 'grammar' or a JSON response_format, not both");
      o.constraint_kind = "grammar";
      o.constraint_text = g->get<std::string>();
      o.constraint_param = "grammar";
    }
  }
  try {
    sp.validate();
  } catch (const Error& e) {
    bad("", e.what());
  }
  return o;
}

void send_error(ResponseWriter& w, const ApiError& e) {
  HeaderList h = e.headers;
  if (e.status >= 500 && e.status != 503) h.emplace_back("x-should-retry", "false");
  w.send(e.status, "application/json", error_body(e), h);
}
void send_json(ResponseWriter& w, const json& j, int status) {
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

EmbeddingsRequest parse_embeddings_request(const json& body, int32_t n_vocab) {
  EmbeddingsRequest r;
  const json* input = field(body, "input");
  if (!input) bad("input", "'input' is required", "missing_required_parameter");
  auto ids_of = [&](const json& arr, size_t index) {
    if (arr.empty()) bad("input", "input[" + std::to_string(index) + "] is an empty array of token ids");
    std::vector<int32_t> ids;
    ids.reserve(arr.size());
    for (const json& e : arr) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= n_vocab)
        bad("input", "token ids in input[" + std::to_string(index) + "] must be integers in 0.." +
                         std::to_string(n_vocab - 1) + ", got " + e.dump());
      ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    return ids;
  };
  if (input->is_string()) {
    if (input->get_ref<const std::string&>().empty()) bad("input", "'input' must not be an empty string");
    r.texts.push_back(input->get<std::string>());
  } else if (input->is_array()) {
    if (input->empty()) bad("input", "'input' must not be an empty array");
    // The input count limit is for arrays of inputs; a flat token-id array is one input (its
    // length is checked against the model's context by the caller).
    auto check_count = [&] {
      if (input->size() > kMaxEmbeddingInputs)
        bad("input", "'input' has " + std::to_string(input->size()) + " items; at most " +
                         std::to_string(kMaxEmbeddingInputs) + " are allowed");
    };
    const json& first = (*input)[0];
    if (first.is_string()) {
      check_count();
      for (size_t i = 0; i < input->size(); ++i) {
        const json& e = (*input)[i];
        if (!e.is_string()) bad("input", "input[" + std::to_string(i) + "] is not a string (an array of strings must hold only strings)");
        if (e.get_ref<const std::string&>().empty()) bad("input", "input[" + std::to_string(i) + "] is an empty string");
        r.texts.push_back(e.get<std::string>());
      }
    } else if (first.is_array()) {
      check_count();
      for (size_t i = 0; i < input->size(); ++i) {
        const json& e = (*input)[i];
        if (!e.is_array()) bad("input", "input[" + std::to_string(i) + "] is not an array of token ids");
        r.token_inputs.push_back(ids_of(e, i));
      }
    } else if (first.is_number()) {
      r.token_inputs.push_back(ids_of(*input, 0));
    } else {
      bad("input", "'input' must be a string, an array of strings, an array of token ids, or an array of token-id arrays");
    }
  } else {
    bad("input", "'input' must be a string, an array of strings, an array of token ids, or an array of token-id arrays");
  }
  if (const json* f = field(body, "encoding_format")) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got " + f->dump());
    r.base64 = *f == "base64";
  }
  r.dimensions = opt_int(body, "dimensions", 1, int64_t{1} << 20);
  if (const json* u = field(body, "user"); u && !u->is_string()) bad("user", "'user' must be a string");
  return r;
}

}  // namespace triad::server
