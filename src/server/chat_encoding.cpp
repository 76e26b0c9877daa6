// The chat.completion and text_completion wire formats (encoder.h): SSE chunks while streaming
// (the role chunk, content, logprobs, tool-call fragments, the finish chunk, usage, [DONE]) or
// one JSON object at the end.
#include "server/encoder.h"

#include "server/service.h"

namespace triad::server {

void write_event(ResponseWriter& w, const json& j, const std::string& event) {
  std::string s;
  if (!event.empty()) s = "event: " + event + "\n";
  s += "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
  w.write(std::move(s));
}

namespace {

json usage_json(const UsageOut& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens},
                                             {"accepted_prediction_tokens", u.accepted_prediction_tokens},
                                             {"rejected_prediction_tokens", u.rejected_prediction_tokens}}}};
}

// {token: logprob} of an entry's alternatives (the completions format).
json top_map(const json& entry) {
  json m = json::object();
  for (const json& t : entry["top_logprobs"]) m[t["token"].get<std::string>()] = t["logprob"];
  return m;
}

// vLLM's prompt_logprobs: null for the first token, then per token a map from token id (as
// text) to {"logprob", "rank", "decoded_token"}: the prompt's own token and the top alternatives.
json vllm_prompt_logprobs(const json& entries) {
  json out = json::array();
  for (const json& e : entries) {
    if (e["logprob"].is_null()) {
      out.push_back(nullptr);
      continue;
    }
    json m = json::object();
    int rank = 1;
    for (const json& t : e["top"])
      m[std::to_string(t["id"].get<int32_t>())] = {{"logprob", t["logprob"]}, {"rank", rank++}, {"decoded_token", t["token"]}};
    m[std::to_string(e["id"].get<int32_t>())] = {{"logprob", e["logprob"]}, {"rank", e["rank"]}, {"decoded_token", e["token"]}};
    out.push_back(std::move(m));
  }
  return out;
}

// What the chat and completion encoders share: ids, the chunk frame, errors and the stream's end.
class OpenAiEncoder : public Encoder {
 public:
  OpenAiEncoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model, const GenOptions& opt, bool chat)
      : w_(std::move(w)), model_(model.name), fingerprint_(model.fingerprint), opt_(opt), chat_(chat),
        id_(random_id(chat ? "chatcmpl-" : "cmpl-")), created_(unix_now()) {}

  void failed(const ApiError& e) override {
    if (opt_.stream) {
      write_event(*w_, json::parse(error_body(e)));  // the SDK raises on an `error` event
      w_->end();
    } else {
      send_error(*w_, e);
    }
  }

 protected:
  json chunk(json choice) const {
    json ch = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
               {"model", model_}, {"system_fingerprint", fingerprint_}};
    ch["choices"] = choice.is_null() ? json::array() : json::array({std::move(choice)});
    if (opt_.include_usage) ch["usage"] = nullptr;
    return ch;
  }
  void send_chunk(json choice) { write_event(*w_, chunk(std::move(choice))); }
  void end_stream(const UsageOut& u) {
    if (opt_.include_usage) {
      json ch = chunk(nullptr);
      ch["usage"] = usage_json(u);
      write_event(*w_, ch);
    }
    w_->write("data: [DONE]\n\n");
    w_->end();
  }
  json body(json choices, const UsageOut& u) const {
    return json{{"id", id_}, {"object", chat_ ? "chat.completion" : "text_completion"}, {"created", created_},
                {"model", model_}, {"system_fingerprint", fingerprint_}, {"choices", std::move(choices)},
                {"usage", usage_json(u)}};
  }

  std::shared_ptr<ResponseWriter> w_;
  std::string model_, fingerprint_;
  GenOptions opt_;
  bool chat_;
  std::string id_;
  int64_t created_;
};

class ChatEncoder : public OpenAiEncoder {
 public:
  ChatEncoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model, const GenOptions& opt, bool legacy)
      : OpenAiEncoder(std::move(w), model, opt, true), legacy_(legacy) {}

  void text(size_t i, const std::string& piece, const json* lp, bool first) override {
    if (first) role(i);
    if (piece.empty() && !lp) return;  // nothing to say (e.g. a token inside a tool call)
    send_chunk({{"index", i},
                {"delta", {{"content", piece}}},
                {"logprobs", lp ? json{{"content", json::array({*lp})}, {"refusal", nullptr}} : json(nullptr)},
                {"finish_reason", nullptr}});
  }
  void reasoning(size_t i, const std::string& piece, bool first) override {
    if (first) role(i);
    if (!piece.empty()) send_delta(i, {{"reasoning_content", piece}});
  }
  void call_begin(size_t i, size_t k, const CallOut& call) override {
    if (legacy_) {
      if (k == 0) send_delta(i, {{"function_call", {{"name", call.name}, {"arguments", ""}}}});
      return;
    }
    send_delta(i, {{"tool_calls", json::array({{{"index", k}, {"id", call.id}, {"type", "function"},
                                                {"function", {{"name", call.name}, {"arguments", ""}}}}})}});
  }
  void call_args(size_t i, size_t k, const std::string& fragment) override {
    if (legacy_) {
      if (k == 0) send_delta(i, {{"function_call", {{"arguments", fragment}}}});
      return;
    }
    send_delta(i, {{"tool_calls", json::array({{{"index", k}, {"function", {{"arguments", fragment}}}}})}});
  }
  void choice_end(size_t i, const ChoiceOut& c) override {
    send_chunk({{"index", i}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish(c)}});
  }
  void done(const std::vector<ChoiceOut>& choices, const UsageOut& u) override {
    if (opt_.stream) return end_stream(u);
    json arr = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      const ChoiceOut& c = choices[i];
      json msg = {{"role", "assistant"},
                  {"content", c.calls.empty() || !c.content.empty() ? json(c.content) : json(nullptr)},
                  {"refusal", nullptr}};
      if (!c.reasoning.empty()) msg["reasoning_content"] = c.reasoning;
      if (!c.calls.empty()) {
        if (legacy_) {
          msg["function_call"] = {{"name", c.calls[0].name}, {"arguments", c.calls[0].arguments}};
        } else {
          json calls = json::array();
          for (const CallOut& tc : c.calls)
            calls.push_back({{"id", tc.id}, {"type", "function"}, {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
          msg["tool_calls"] = calls;
        }
      }
      arr.push_back({{"index", i},
                     {"message", msg},
                     {"logprobs", opt_.logprobs >= 0 ? json{{"content", c.logprobs}, {"refusal", nullptr}} : json(nullptr)},
                     {"finish_reason", finish(c)}});
    }
    json b = body(arr, u);
    if (opt_.prompt_logprobs >= 0 && !choices.empty() && !choices[0].prompt_logprobs.is_null())
      b["prompt_logprobs"] = vllm_prompt_logprobs(choices[0].prompt_logprobs);
    send_json(*w_, b);
  }

 private:
  std::string finish(const ChoiceOut& c) const {
    return legacy_ && c.finish == "tool_calls" ? "function_call" : c.finish;
  }
  // As OpenAI: the first chunk of each choice carries the role and empty content (once, whether
  // the choice starts with reasoning or content).
  void role(size_t i) {
    if (role_sent_.size() <= i) role_sent_.resize(i + 1, false);
    if (role_sent_[i]) return;
    role_sent_[i] = true;
    send_chunk({{"index", i}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                {"finish_reason", nullptr}});
  }
  void send_delta(size_t i, json delta) {
    send_chunk({{"index", i}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}});
  }
  bool legacy_;
  std::vector<bool> role_sent_;
};

class CompletionEncoder : public OpenAiEncoder {
 public:
  CompletionEncoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model, const GenOptions& opt, std::vector<std::string> echo)
      : OpenAiEncoder(std::move(w), model, opt, false), echo_(std::move(echo)) {}

  void text(size_t i, const std::string& piece, const json* lp, bool) override {
    if (piece.empty() && !lp) return;
    json logprobs = nullptr;
    if (lp)
      logprobs = json{{"tokens", {(*lp)["token"]}}, {"token_logprobs", {(*lp)["logprob"]}}, {"top_logprobs", {top_map(*lp)}},
                      {"text_offset", {0}}};
    send_chunk({{"index", i}, {"text", piece}, {"logprobs", logprobs}, {"finish_reason", nullptr}});
  }
  void choice_end(size_t i, const ChoiceOut& c) override {
    send_chunk({{"index", i}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", c.finish}});
  }
  void done(const std::vector<ChoiceOut>& choices, const UsageOut& u) override {
    if (opt_.stream) return end_stream(u);
    json arr = json::array();
    const size_t n = static_cast<size_t>(std::max(1, opt_.n));
    for (size_t i = 0; i < choices.size(); ++i) {
      const ChoiceOut& c = choices[i];
      const std::string prefix = opt_.echo && i / n < echo_.size() ? echo_[i / n] : std::string();
      json choice = {{"index", i}, {"text", prefix + c.text}, {"logprobs", nullptr}};
      if (opt_.logprobs >= 0) {
        json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
        if (opt_.echo && c.prompt_logprobs.is_array()) {
          // The prompt's tokens first, as OpenAI's echo gives them (the first has no logprob).
          for (const json& e : c.prompt_logprobs) {
            tokens.push_back(e["token"]);
            lps.push_back(e["logprob"]);
            if (e["top"].is_null()) {
              tops.push_back(nullptr);
            } else {
              json m = json::object();
              for (const json& t : e["top"]) m[t["token"].get<std::string>()] = t["logprob"];
              tops.push_back(std::move(m));
            }
            offs.push_back(e["offset"]);
          }
        }
        size_t off = prefix.size();
        for (const json& e : c.logprobs) {
          tokens.push_back(e["token"]);
          lps.push_back(e["logprob"]);
          tops.push_back(top_map(e));
          offs.push_back(off);
          off += e["token"].get<std::string>().size();
        }
        choice["logprobs"] = {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
      }
      if (opt_.prompt_logprobs >= 0 && c.prompt_logprobs.is_array())
        choice["prompt_logprobs"] = vllm_prompt_logprobs(c.prompt_logprobs);
      choice["finish_reason"] = c.finish;
      arr.push_back(choice);
    }
    send_json(*w_, body(arr, u));
  }

 private:
  std::vector<std::string> echo_;
};

}  // namespace

std::unique_ptr<Encoder> make_chat_encoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model, const GenOptions& opt,
                                           bool legacy_functions) {
  return std::make_unique<ChatEncoder>(std::move(w), model, opt, legacy_functions);
}

std::unique_ptr<Encoder> make_completion_encoder(std::shared_ptr<ResponseWriter> w, const ServedModel& model,
                                                 const GenOptions& opt, std::vector<std::string> echo_text) {
  return std::make_unique<CompletionEncoder>(std::move(w), model, opt, std::move(echo_text));
}

}  // namespace triad::server
