// libFuzzer target for the OpenAI request parsing of the server (server/openai_request.h): the
// input is a request body; it is parsed as JSON with the nesting bound, then validated as a
// chat request (messages and their content parts) and as a completions request (generation
// options, both variants) for a 512-token vocabulary, with its tools (or legacy functions); and as
// a Responses API request (input items, flat tools, text.format; a stored response "resp_seed"
// to continue), translated to the chat form and validated the same way. An ApiError (a 4xx for the client) is the
// expected outcome for bad input; a crash, a sanitizer report, another exception type, a hang
// or a huge allocation is a finding.
// Also linked into request_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
// Thread-safety: stateless; libFuzzer calls it from one thread.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/openai_request.h"
#include "server/responses.h"
#include "server/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using triad::server::ApiError;
  using triad::server::json;
  const std::string text(reinterpret_cast<const char*>(data), size);
  json body;
  try {
    body = triad::server::parse_json_body(text);
  } catch (const ApiError&) {
    return 0;
  }
  for (const bool chat : {true, false}) {
    try {
      if (chat) {
        if (const json* msgs = triad::server::field(body, "messages"); msgs && msgs->is_array()) {
          for (const json& m : *msgs) {
            if (!m.is_object() || !m.contains("content")) continue;
            (void)triad::server::text_of_content(m["content"], "messages.content");
          }
        }
      }
      const triad::server::GenOptions o = triad::server::parse_gen_options(body, 512, 16, chat);
      (void)o;
      if (chat) (void)triad::server::parse_tools(body);
    } catch (const ApiError&) {
    }
  }
  static triad::server::ResponseStore& store = *[] {
    auto* s = new triad::server::ResponseStore(4, 1 << 20);
    json item = {{"type", "message"}, {"id", "msg_seed"}, {"role", "user"}, {"content", "hi"}};
    s->put("resp_seed", std::make_shared<triad::server::ResponseStore::Entry>(
                            triad::server::ResponseStore::Entry{json::object(), json::array({item}), json::array()}));
    return s;
  }();
  try {
    (void)triad::server::parse_embeddings_request(body, 512);
  } catch (const ApiError&) {
  }
  try {
    const triad::server::ResponsesRequest r = triad::server::parse_responses_request(body, store);
    (void)triad::server::parse_gen_options(r.chat_body, 512, 1, true);
    (void)triad::server::parse_tools(r.chat_body);
  } catch (const ApiError&) {
  }
  return 0;
}
