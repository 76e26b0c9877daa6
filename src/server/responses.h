// The Responses API: POST /v1/responses, GET and DELETE /v1/responses/{id}, GET
// /v1/responses/{id}/input_items. A request's `input` items (messages, function calls and their
// outputs), `instructions`, flat function tools and `text.format` are translated into the chat
// form that the rest of the server runs (the same prompt rendering, tool grammar and schema
// constraints); the answer is written as a Response object or its event stream
// (`response.created` ... `response.completed`, with sequence numbers) by the encoder here; and
// answered responses are kept in a bounded in-memory store that `previous_response_id`
// continues and GET reads.
// Thread-safety: ResponseStore is internally locked; the rest runs on one request's threads.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/encoder.h"
#include "server/openai_request.h"

namespace triad::server {

// Responses answered with `store` (OpenAI's default), newest kept: at most `max_entries` and
// about `max_bytes` of JSON; the oldest are dropped first (a dropped id is then a 404, as an
// unknown one), and one entry larger than `max_bytes` is not kept at all. Requests bound the
// conversation an entry holds (16 MiB of items).
class ResponseStore {
 public:
  struct Entry {
    json response;  // the Response object as answered
    json input;     // the items the model saw, with ids: the continued conversation, then this input
    json output;    // the output items
  };
  ResponseStore(size_t max_entries, size_t max_bytes);
  void put(const std::string& id, std::shared_ptr<const Entry> entry);
  std::shared_ptr<const Entry> get(const std::string& id) const;  // null: unknown
  bool erase(const std::string& id);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::list<std::string> order_;  // oldest first
  struct Slot {
    std::shared_ptr<const Entry> entry;
    size_t bytes = 0;
    std::list<std::string>::iterator pos;
  };
  std::unordered_map<std::string, Slot> map_;
  size_t bytes_ = 0;
  size_t max_entries_, max_bytes_;
};

// A Responses request in the chat form.
struct ResponsesRequest {
  json messages = json::array();   // chat messages for the prompt
  json chat_body = json::object(); // the sampling, tool and format fields, as chat names them
  json input = json::array();      // the conversation the model sees, as items with ids (stored)
  json echo = json::object();      // the request fields a Response object repeats
  bool store = true;
};

// Checks and translates a request body (every problem a 400 naming the field; an unknown
// previous_response_id a 404).
ResponsesRequest parse_responses_request(const json& body, const ResponseStore& store);

// Writes the Response object (or its events) for `req`, and stores it when asked.
std::unique_ptr<Encoder> make_responses_encoder(std::shared_ptr<ResponseWriter> w, std::string model, const GenOptions& opt,
                                                const ResponsesRequest& req, std::shared_ptr<ResponseStore> store);

// GET /v1/responses/{id}/input_items: `query` is the URL's query string.
json list_input_items(const ResponseStore::Entry& e, const std::string& query);

}  // namespace triad::server
