// The Responses API (responses.h): request translation, the Response object and its events,
// and the store of answered responses.
#include "server/responses.h"

#include <algorithm>

namespace triad::server {

// ---- The store.

ResponseStore::ResponseStore(size_t max_entries, size_t max_bytes)
    : max_entries_(std::max<size_t>(1, max_entries)), max_bytes_(max_bytes) {}

void ResponseStore::put(const std::string& id, std::shared_ptr<const Entry> entry) {
  const size_t bytes = entry->response.dump().size() + entry->input.dump().size() + entry->output.dump().size();
  if (bytes > max_bytes_) return;  // larger than the whole store: not kept (a later GET is a 404)
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = map_.find(id); it != map_.end()) {
    bytes_ -= it->second.bytes;
    order_.erase(it->second.pos);
    map_.erase(it);
  }
  order_.push_back(id);
  map_[id] = Slot{std::move(entry), bytes, std::prev(order_.end())};
  bytes_ += bytes;
  while (!order_.empty() && (map_.size() > max_entries_ || bytes_ > max_bytes_) && order_.front() != id) {
    auto it = map_.find(order_.front());
    bytes_ -= it->second.bytes;
    map_.erase(it);
    order_.pop_front();
  }
}

std::shared_ptr<const ResponseStore::Entry> ResponseStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(id);
  return it == map_.end() ? nullptr : it->second.entry;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return false;
  bytes_ -= it->second.bytes;
  order_.erase(it->second.pos);
  map_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return map_.size();
}

// ---- Request translation.

namespace {

constexpr size_t kMaxConversationBytes = size_t{16} << 20;

const std::string* opt_string(const json& b, const char* key, const std::string& param) {
  const json* v = field(b, key);
  if (!v) return nullptr;
  if (!v->is_string()) bad(param, "'" + param + "' must be a string");
  return v->get_ptr<const std::string*>();
}

// The text of an item's content: a string or parts of text (input_text, output_text, text);
// refusals are kept as text; images and files are refused (these models read text only).
std::string content_text(const json& content, const std::string& p) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array()) bad(p, p + " must be a string or an array of content parts");
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pp = p + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(pp, "each content part must be an object with a 'type'");
    const std::string type = part["type"].get<std::string>();
    const char* key = type == "refusal" ? "refusal" : "text";
    if (type == "input_text" || type == "output_text" || type == "text" || type == "refusal") {
      if (!part.contains(key) || !part[key].is_string()) bad(pp, "a " + type + " part needs a string '" + key + "'");
      if (!out.empty()) out += "\n";
      out += part[key].get<std::string>();
    } else if (type == "input_image" || type == "input_file" || type == "input_audio") {
      bad(pp, "content parts of type '" + type + "' are not supported by this model (text only)", "unsupported_content");
    } else {
      bad(pp, "unknown content part type '" + type + "'");
    }
  }
  return out;
}

// Appends input items (already checked) as chat messages: a function call joins the assistant
// message before it (as a chat assistant turn holds text and calls), its output becomes a tool
// message; reasoning items are left out of the prompt.
void items_to_messages(const json& items, json& msgs) {
  for (const json& it : items) {
    const std::string type = it.value("type", "message");
    if (type == "message") {
      std::string role = it["role"].get<std::string>();
      msgs.push_back({{"role", role}, {"content", content_text(it.contains("content") ? it["content"] : json(""), "input")}});
    } else if (type == "function_call") {
      // A call the output limit cut off (status "incomplete") has no arguments to replay.
      const json args = json::parse(it["arguments"].get<std::string>(), nullptr, false);
      if (args.is_discarded() || !args.is_object()) continue;
      json call = {{"id", it["call_id"]}, {"type", "function"},
                   {"function", {{"name", it["name"]}, {"arguments", it["arguments"]}}}};
      if (!msgs.empty() && msgs.back()["role"] == "assistant") {
        json& last = msgs.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = json::array();
        last["tool_calls"].push_back(call);
      } else {
        msgs.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
      }
    } else if (type == "function_call_output") {
      const json& out = it["output"];
      msgs.push_back({{"role", "tool"}, {"tool_call_id", it["call_id"]}, {"content", content_text(out, "input")}});
    }
  }
}

// Checks one input item and returns it with a type and an id (as the store lists it).
json normalize_item(const json& it, size_t i) {
  const std::string p = "input[" + std::to_string(i) + "]";
  if (!it.is_object()) bad(p, p + " must be an object");
  std::string type = "message";
  if (const json* t = field(it, "type")) {
    if (!t->is_string()) bad(p + ".type", p + ".type must be a string");
    type = t->get<std::string>();
  } else if (!it.contains("role")) {
    if (it.contains("id") && it.size() <= 2) type = "item_reference";
  }
  json out = it;
  out["type"] = type;
  auto need_string = [&](const char* key) {
    if (!it.contains(key) || !it[key].is_string()) bad(p + "." + key, p + " (" + type + ") needs a string '" + key + "'");
  };
  if (type == "message") {
    need_string("role");
    const std::string role = it["role"].get<std::string>();
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      bad(p + ".role", "unknown role '" + role + "' (expected user, assistant, system or developer)");
    if (!it.contains("content")) bad(p + ".content", p + " needs 'content'");
    (void)content_text(it["content"], p + ".content");
    if (!out.contains("id") || !out["id"].is_string()) out["id"] = random_id("msg_");
  } else if (type == "function_call") {
    need_string("call_id");
    need_string("name");
    need_string("arguments");
    const json args = json::parse(it["arguments"].get<std::string>(), nullptr, false);
    if ((args.is_discarded() || !args.is_object()) && it.value("status", "") != "incomplete")
      bad(p + ".arguments", p + ".arguments must be a JSON object as text (or the item's status \"incomplete\")");
    if (!out.contains("id") || !out["id"].is_string()) out["id"] = random_id("fc_");
    if (!out.contains("status")) out["status"] = "completed";
  } else if (type == "function_call_output") {
    need_string("call_id");
    if (!it.contains("output")) bad(p + ".output", p + " needs 'output'");
    (void)content_text(it["output"], p + ".output");
    if (!out.contains("id") || !out["id"].is_string()) out["id"] = random_id("fco_");
  } else if (type == "reasoning") {
    if (!out.contains("id") || !out["id"].is_string()) out["id"] = random_id("rs_");
  } else if (type == "item_reference") {
    bad(p, "item references are not supported: send the items themselves, or continue with previous_response_id",
        "unsupported_parameter");
  } else {
    bad(p + ".type", "input items of type '" + type + "' are not supported (messages, function_call, "
                     "function_call_output and reasoning are)", "unsupported_parameter");
  }
  return out;
}

// Flat function tools -> the chat shape that parse_tools reads.
json chat_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string()) bad(p, p + " must be an object with a 'type'");
    const std::string type = t["type"].get<std::string>();
    if (type != "function")
      bad(p + ".type", "tools of type '" + type + "' are not supported here (function tools are)", "unsupported_parameter");
    json fn = json::object();
    for (const char* k : {"name", "description", "parameters", "strict"})
      if (t.contains(k)) fn[k] = t[k];
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

json chat_tool_choice(const json& c) {
  if (c.is_string()) return c;
  if (c.is_object() && c.value("type", "") == "function" && c.contains("name") && c["name"].is_string())
    return json{{"type", "function"}, {"function", {{"name", c["name"]}}}};
  bad("tool_choice", "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}");
}

// text.format -> response_format.
json chat_response_format(const json& text) {
  if (!text.is_object()) bad("text", "'text' must be an object");
  const json* f = field(text, "format");
  if (!f) return nullptr;
  if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
    bad("text.format", "'text.format' must be an object with a 'type'");
  const std::string type = (*f)["type"].get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return json{{"type", "json_object"}};
  if (type != "json_schema")
    bad("text.format", "unknown text.format type '" + type + "' (expected 'text', 'json_object' or 'json_schema')");
  json js = json::object();
  if (!f->contains("schema")) bad("text.format.schema", "text.format json_schema needs a 'schema'");
  for (const char* k : {"name", "schema", "strict", "description"})
    if (f->contains(k)) js[k] = (*f)[k];
  return json{{"type", "json_schema"}, {"json_schema", js}};
}

}  // namespace

ResponsesRequest parse_responses_request(const json& b, const ResponseStore& store) {
  ResponsesRequest r;
  if (auto bg = opt_bool(b, "background"); bg && *bg)
    bad("background", "background responses are not supported", "unsupported_parameter");
  if (field(b, "conversation")) bad("conversation", "conversations are not supported; use previous_response_id", "unsupported_parameter");
  if (field(b, "prompt")) bad("prompt", "stored prompt templates are not supported", "unsupported_parameter");
  r.store = opt_bool(b, "store").value_or(true);
  // The continued conversation.
  std::string prev_id;
  if (const std::string* prev = opt_string(b, "previous_response_id", "previous_response_id")) {
    prev_id = *prev;
    auto e = store.get(prev_id);
    if (!e)
      throw ApiError{404, "Previous response with id '" + prev_id + "' not found.", "invalid_request_error",
                     "previous_response_id", "previous_response_not_found", {}};
    for (const json& it : e->input) r.input.push_back(it);
    for (const json& it : e->output) r.input.push_back(it);
  }
  const json* input = field(b, "input");
  if (!input) bad("input", "'input' is required", "missing_required_parameter");
  if (input->is_string()) {
    r.input.push_back({{"type", "message"}, {"id", random_id("msg_")}, {"role", "user"},
                       {"content", json::array({{{"type", "input_text"}, {"text", *input}}})}});
  } else if (input->is_array()) {
    if (input->size() > 4096) bad("input", "too many input items (at most 4096)");
    for (size_t i = 0; i < input->size(); ++i) r.input.push_back(normalize_item((*input)[i], i));
  } else {
    bad("input", "'input' must be a string or an array of input items");
  }
  if (r.input.size() > 8192) bad("previous_response_id", "the conversation is too long (more than 8192 items)");
  // Items the prompt leaves out (reasoning) or fields it ignores still go into the store: bound
  // the conversation's size, so a chain of responses cannot grow it without limit.
  if (r.input.dump().size() > kMaxConversationBytes)
    bad(prev_id.empty() ? "input" : "previous_response_id",
        "the conversation is larger than " + std::to_string(kMaxConversationBytes >> 20) + " MiB");
  const std::string* instructions = opt_string(b, "instructions", "instructions");
  if (instructions) r.messages.push_back({{"role", "system"}, {"content", *instructions}});  // not inherited
  items_to_messages(r.input, r.messages);
  if (r.messages.empty()) bad("input", "'input' has no message for the model");

  // Generation options, as chat names them.
  json& cb = r.chat_body;
  for (const char* k : {"temperature", "top_p", "seed", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                        "repetition_penalty", "logit_bias", "stop", "stop_token_ids", "ignore_eos", "stream"})
    if (const json* v = field(b, k)) cb[k] = *v;
  const std::optional<int64_t> max_out = opt_int(b, "max_output_tokens", 1, 1 << 30);
  if (max_out) cb["max_tokens"] = *max_out;
  if (const json* t = field(b, "tools")) cb["tools"] = chat_tools(*t);
  if (const json* c = field(b, "tool_choice")) cb["tool_choice"] = chat_tool_choice(*c);
  if (auto p = opt_bool(b, "parallel_tool_calls")) cb["parallel_tool_calls"] = *p;
  json text = json{{"format", {{"type", "text"}}}};
  if (const json* t = field(b, "text")) {
    if (json rf = chat_response_format(*t); !rf.is_null()) cb["response_format"] = rf;
    text = *t;
    if (!text.contains("format")) text["format"] = {{"type", "text"}};
  }
  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const json* re = field(b, "reasoning")) {
    if (!re->is_object()) bad("reasoning", "'reasoning' must be an object");
    for (const char* k : {"effort", "summary"})
      if (re->contains(k)) reasoning[k] = (*re)[k];
  }
  json metadata = json::object();
  if (const json* md = field(b, "metadata")) {
    if (!md->is_object() || md->size() > 16) bad("metadata", "'metadata' must be an object of at most 16 string values");
    for (const auto& [k, v] : md->items())
      if (k.size() > 64 || !v.is_string() || v.get<std::string>().size() > 512)
        bad("metadata", "metadata keys are at most 64 characters and values strings of at most 512");
    metadata = *md;
  }
  std::string truncation = "disabled";
  if (const std::string* t = opt_string(b, "truncation", "truncation")) {
    if (*t != "auto" && *t != "disabled") bad("truncation", "truncation must be 'auto' or 'disabled'");
    truncation = *t;
  }
  auto num = [&](const char* k) { return field(b, k) ? b[k] : json(1.0); };
  r.echo = {{"instructions", instructions ? json(*instructions) : json(nullptr)},
            {"max_output_tokens", max_out ? json(*max_out) : json(nullptr)},
            {"parallel_tool_calls", opt_bool(b, "parallel_tool_calls").value_or(true)},
            {"previous_response_id", prev_id.empty() ? json(nullptr) : json(prev_id)},
            {"reasoning", reasoning},
            {"store", r.store},
            {"temperature", num("temperature")},
            {"text", text},
            {"tool_choice", field(b, "tool_choice") ? b["tool_choice"] : json("auto")},
            {"tools", field(b, "tools") ? b["tools"] : json::array()},
            {"top_p", num("top_p")},
            {"truncation", truncation},
            {"metadata", metadata},
            {"user", field(b, "user") ? b["user"] : json(nullptr)}};
  return r;
}

// ---- The Response object and its events.

namespace {

class ResponsesEncoder : public Encoder {
 public:
  ResponsesEncoder(std::shared_ptr<ResponseWriter> w, std::string model, const GenOptions& opt, const ResponsesRequest& req,
                   std::shared_ptr<ResponseStore> store)
      : w_(std::move(w)), model_(std::move(model)), stream_(opt.stream), echo_(req.echo), input_(req.input),
        store_(req.store ? std::move(store) : nullptr), id_(random_id("resp_")), created_(unix_now()) {}

  void start() override {
    const json snap = response("in_progress", json::array(), nullptr, nullptr);
    event("response.created", {{"response", snap}});
    event("response.in_progress", {{"response", snap}});
  }

  // Reasoning (thinking models): a reasoning item before the answer, its text streamed as
  // response.reasoning_text.delta events.
  void reasoning(size_t choice, const std::string& piece, bool) override {
    if (choice != 0 || piece.empty()) return;
    if (rs_ < 0) {
      rs_ = static_cast<int64_t>(items_.size());
      json item = {{"type", "reasoning"}, {"id", random_id("rs_")}, {"summary", json::array()},
                   {"content", json::array({{{"type", "reasoning_text"}, {"text", ""}}})}, {"status", "in_progress"}};
      items_.push_back(item);
      event("response.output_item.added", {{"output_index", rs_}, {"item", item}});
    }
    json& part = items_[static_cast<size_t>(rs_)]["content"][0];
    part["text"] = part["text"].get<std::string>() + piece;
    event("response.reasoning_text.delta", {{"item_id", items_[static_cast<size_t>(rs_)]["id"]}, {"output_index", rs_},
                                            {"content_index", 0}, {"delta", piece}});
  }

  void text(size_t choice, const std::string& piece, const json*, bool) override {
    if (choice != 0 || piece.empty()) return;
    close_reasoning();
    if (msg_ < 0) open_message();
    json& part = items_[static_cast<size_t>(msg_)]["content"][0];
    part["text"] = part["text"].get<std::string>() + piece;
    event("response.output_text.delta", {{"item_id", items_[static_cast<size_t>(msg_)]["id"]}, {"output_index", msg_},
                                         {"content_index", 0}, {"delta", piece}, {"logprobs", json::array()}});
  }

  void call_begin(size_t choice, size_t k, const CallOut& call) override {
    if (choice != 0) return;
    close_reasoning();
    close_message("completed");
    json item = {{"type", "function_call"}, {"id", random_id("fc_")}, {"call_id", call.id}, {"name", call.name},
                 {"arguments", ""}, {"status", "in_progress"}};
    call_item_[k] = items_.size();
    items_.push_back(item);
    event("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", item}});
  }

  void call_args(size_t choice, size_t k, const std::string& fragment) override {
    if (choice != 0) return;
    const size_t oi = call_item_.at(k);
    items_[oi]["arguments"] = items_[oi]["arguments"].get<std::string>() + fragment;
    event("response.function_call_arguments.delta", {{"item_id", items_[oi]["id"]}, {"output_index", oi}, {"delta", fragment}});
  }

  void call_end(size_t choice, size_t k, const CallOut& call) override {
    if (choice != 0) return;
    const size_t oi = call_item_.at(k);
    json& item = items_[oi];
    item["status"] = call.complete ? "completed" : "incomplete";
    event("response.function_call_arguments.done",
          {{"item_id", item["id"]}, {"output_index", oi}, {"name", item["name"]}, {"arguments", item["arguments"]}});
    event("response.output_item.done", {{"output_index", oi}, {"item", item}});
  }

  void choice_end(size_t choice, const ChoiceOut& c) override {
    if (choice != 0) return;
    const bool cut = c.finish == "length";
    close_reasoning();
    const bool answered = std::any_of(items_.begin(), items_.end(), [](const json& it) { return it["type"] != "reasoning"; });
    if (!answered) open_message();  // an empty answer is still a message
    close_message(cut ? "incomplete" : "completed");
  }

  void done(const std::vector<ChoiceOut>& choices, const UsageOut& u) override {
    const ChoiceOut& c = choices.at(0);
    const bool cut = c.finish == "length";
    if (!stream_) {  // build the output items from the finished choice
      const bool any_call = std::any_of(c.calls.begin(), c.calls.end(), [](const CallOut& x) { return x.complete; });
      if (!c.reasoning.empty())
        items_.push_back({{"type", "reasoning"}, {"id", random_id("rs_")}, {"summary", json::array()},
                          {"content", json::array({{{"type", "reasoning_text"}, {"text", c.reasoning}}})}, {"status", "completed"}});
      if (!c.content.empty() || !any_call) items_.push_back(message_item(c.content, cut ? "incomplete" : "completed"));
      for (const CallOut& call : c.calls)
        items_.push_back({{"type", "function_call"}, {"id", random_id("fc_")}, {"call_id", call.id}, {"name", call.name},
                          {"arguments", call.arguments}, {"status", call.complete ? "completed" : "incomplete"}});
    }
    const json usage = {{"input_tokens", u.prompt_tokens},
                        {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                        {"output_tokens", u.completion_tokens},
                        {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
                        {"total_tokens", u.prompt_tokens + u.completion_tokens}};
    json details = cut ? json{{"reason", "max_output_tokens"}} : json(nullptr);
    json final = response(cut ? "incomplete" : "completed", items_, usage, details);
    final["completed_at"] = cut ? json(nullptr) : json(unix_now());
    std::string text;
    for (const json& it : items_)
      if (it["type"] == "message")
        for (const json& part : it["content"]) text += part.value("text", "");
    final["output_text"] = text;  // the SDK computes the same property; plain HTTP clients read it here
    if (store_) store_->put(id_, std::make_shared<ResponseStore::Entry>(ResponseStore::Entry{final, input_, items_}));
    if (stream_) {
      event(cut ? "response.incomplete" : "response.completed", {{"response", final}});
      w_->end();
    } else {
      send_json(*w_, final);
    }
  }

  void failed(const ApiError& e) override {
    if (!stream_) return send_error(*w_, e);
    json r = response("failed", items_, nullptr, nullptr);
    r["error"] = {{"code", e.status >= 500 ? "server_error" : (e.code.empty() ? "invalid_request" : e.code)}, {"message", e.message}};
    event("response.failed", {{"response", r}});
    w_->end();
  }

 private:
  json response(const char* status, const json& output, json usage, json incomplete) const {
    json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"background", false},
              {"error", nullptr}, {"incomplete_details", std::move(incomplete)}};
    r["instructions"] = echo_["instructions"];
    r["max_output_tokens"] = echo_["max_output_tokens"];
    r["max_tool_calls"] = nullptr;
    r["model"] = model_;
    r["output"] = output;
    for (const char* k : {"parallel_tool_calls", "previous_response_id", "reasoning"}) r[k] = echo_[k];
    r["service_tier"] = "default";
    for (const char* k : {"store", "temperature", "text", "tool_choice", "tools"}) r[k] = echo_[k];
    r["top_logprobs"] = 0;
    for (const char* k : {"top_p", "truncation"}) r[k] = echo_[k];
    r["usage"] = std::move(usage);
    for (const char* k : {"user", "metadata"}) r[k] = echo_[k];
    return r;
  }
  static json message_item(const std::string& text, const char* status) {
    return {{"type", "message"}, {"id", random_id("msg_")}, {"status", status}, {"role", "assistant"},
            {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}}})}};
  }
  void open_message() {
    json item = message_item("", "in_progress");
    msg_ = static_cast<int64_t>(items_.size());
    json added = item;
    added["content"] = json::array();
    items_.push_back(std::move(item));
    event("response.output_item.added", {{"output_index", msg_}, {"item", added}});
    event("response.content_part.added", {{"item_id", items_.back()["id"]}, {"output_index", msg_}, {"content_index", 0},
                                          {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}}}});
  }
  void close_reasoning() {
    if (rs_ < 0) return;
    json& item = items_[static_cast<size_t>(rs_)];
    event("response.reasoning_text.done", {{"item_id", item["id"]}, {"output_index", rs_}, {"content_index", 0},
                                           {"text", item["content"][0]["text"]}});
    item["status"] = "completed";
    event("response.output_item.done", {{"output_index", rs_}, {"item", item}});
    rs_ = -1;
  }
  void close_message(const char* status) {
    if (msg_ < 0) return;
    json& item = items_[static_cast<size_t>(msg_)];
    const json part = item["content"][0];
    event("response.output_text.done", {{"item_id", item["id"]}, {"output_index", msg_}, {"content_index", 0},
                                        {"text", part["text"]}, {"logprobs", json::array()}});
    event("response.content_part.done", {{"item_id", item["id"]}, {"output_index", msg_}, {"content_index", 0}, {"part", part}});
    item["status"] = status;
    event("response.output_item.done", {{"output_index", msg_}, {"item", item}});
    msg_ = -1;
  }
  void event(const char* type, json fields) {
    json e = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : fields.items()) e[k] = std::move(v);
    write_event(*w_, e, type);
  }

  std::shared_ptr<ResponseWriter> w_;
  std::string model_;
  bool stream_;
  json echo_, input_;
  std::shared_ptr<ResponseStore> store_;
  std::string id_;
  int64_t created_;
  json items_ = json::array();
  int64_t msg_ = -1;                 // the open message item's output index
  int64_t rs_ = -1;                  // the open reasoning item's output index
  std::unordered_map<size_t, size_t> call_item_;  // call k -> output index
  int64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Encoder> make_responses_encoder(std::shared_ptr<ResponseWriter> w, std::string model, const GenOptions& opt,
                                                const ResponsesRequest& req, std::shared_ptr<ResponseStore> store) {
  return std::make_unique<ResponsesEncoder>(std::move(w), std::move(model), opt, req, std::move(store));
}

json list_input_items(const ResponseStore::Entry& e, const std::string& query) {
  // Query parameters: limit (1..100, default 20), order (asc | desc, default desc), after (an item id).
  int64_t limit = 20;
  bool asc = false;
  std::string after;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    const std::string kv = query.substr(pos, amp - pos);
    pos = amp + 1;
    const size_t eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (k == "limit") {
      try {
        limit = std::stoll(v);
      } catch (const std::exception&) {
        limit = -1;
      }
      if (limit < 1 || limit > 100) bad("limit", "limit must be between 1 and 100");
    } else if (k == "order") {
      if (v != "asc" && v != "desc") bad("order", "order must be 'asc' or 'desc'");
      asc = v == "asc";
    } else if (k == "after") {
      after = v;
    }
  }
  std::vector<const json*> items;
  for (const json& it : e.input) items.push_back(&it);
  if (!asc) std::reverse(items.begin(), items.end());
  size_t start = 0;
  if (!after.empty()) {
    while (start < items.size() && (*items[start]).value("id", "") != after) ++start;
    start = start < items.size() ? start + 1 : items.size();
  }
  json data = json::array();
  for (size_t i = start; i < items.size() && data.size() < static_cast<size_t>(limit); ++i) data.push_back(*items[i]);
  const bool more = start + data.size() < items.size();
  return json{{"object", "list"}, {"data", data},
              {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
              {"last_id", data.empty() ? json(nullptr) : data.back()["id"]}, {"has_more", more}};
}

}  // namespace triad::server
