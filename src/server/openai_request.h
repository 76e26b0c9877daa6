// Parsing and validation of OpenAI request bodies, independent of any model (so that it can be
// fuzzed on its own): JSON with a nesting bound, typed optional fields with ranges, message
// content (a string or text parts), and the generation options shared by /v1/chat/completions
// and /v1/completions. Every problem throws ApiError with the HTTP status, OpenAI error type,
// the offending parameter and a code.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampling_params.h"
#include "server/http_server.h"

namespace triad::server {

using json = nlohmann::ordered_json;

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
  HeaderList headers;
};

// Throws ApiError{status, message, invalid_request_error, param, code}.
[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = "invalid_value",
                      int status = 400);
// {"error": {"message", "type", "param", "code"}}
std::string error_body(const ApiError& e);
// Answers with an error in OpenAI's shape (5xx other than 503 say x-should-retry: false).
void send_error(ResponseWriter& w, const ApiError& e);
void send_json(ResponseWriter& w, const json& j, int status = 200);
// prefix + 24 random alphanumerics (completion and tool-call ids).
std::string random_id(const char* prefix);
int64_t unix_now();  // seconds

// Parses a request body: a JSON object nested at most 64 levels deep.
json parse_json_body(const std::string& text);
void check_depth(const json& j, int limit);

// Field access: absent or null -> nullopt; the wrong type or an out-of-range value -> 400.
const json* field(const json& b, const char* key);
std::optional<double> opt_number(const json& b, const char* key, double lo, double hi);
std::optional<int64_t> opt_int(const json& b, const char* key, int64_t lo, int64_t hi);
std::optional<bool> opt_bool(const json& b, const char* key);
// A message's content: a string, null, or an array of {"type": "text", "text": ...} parts.
std::string text_of_content(const json& content, const char* param);

struct GenOptions {
  SamplingParams sampling;
  std::optional<int64_t> max_tokens;   // max_completion_tokens, else max_tokens
  std::vector<std::string> stop;       // at most 4, each 1..1024 bytes
  std::vector<int32_t> stop_ids;
  bool ignore_eos = false;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  int logprobs = -1;                   // -1: none; else the number of top alternatives
  bool echo = false;                   // completions only
  int prompt_logprobs = -1;            // vLLM's prompt_logprobs: -1 none, else top alternatives
  // max_tokens (max_completion_tokens) may be 0 only with echo: the prompt is scored, nothing
  // is generated.
  // Constrained decoding: "" (none), "json_object" (response_format), "json_schema" or
  // "json_schema_strict" (the schema's JSON in constraint_text), "grammar" (GBNF text in
  // constraint_text); constraint_param names the request field, for errors.
  std::string constraint_kind;
  std::string constraint_text;
  std::string constraint_param;
  // Chat with a thinking model (server/reasoning.h): the output's <think> part is returned as
  // reasoning_content; reasoning_starts_inside when the rendered prompt already opened it.
  bool reasoning = false;
  bool reasoning_starts_inside = false;
  // gpt-oss: the output is harmony messages (reasoning.h: HarmonySplitter), split into the
  // analysis (reasoning), the answer and tool calls.
  bool reasoning_harmony = false;
  // Speculative decoding: OpenAI's `prediction` ({"type": "content", "content": text or text
  // parts}: drafts are looked up in it) and the extension num_speculative_tokens (0..32; 0 off).
  std::optional<std::string> prediction;
  std::optional<int> num_speculative_tokens;
};

// The generation options of a request for a model with `n_vocab` tokens.
GenOptions parse_gen_options(const json& body, int32_t n_vocab, int max_n, bool chat);

// POST /v1/embeddings: `input` as a string, an array of strings, an array of token ids or an
// array of token-id arrays (1..2048 inputs; a flat token-id array is one input, its length
// checked by the caller against the model's context; no empty string or array; ids in
// 0..n_vocab-1); encoding_format "float" (default) or "base64"; dimensions >= 1 (the model's
// size is checked by the caller); `user` is accepted and ignored.
struct EmbeddingsRequest {
  std::vector<std::string> texts;                 // string inputs, in order ...
  std::vector<std::vector<int32_t>> token_inputs; // ... or token-id inputs (one kind per request)
  bool base64 = false;
  std::optional<int64_t> dimensions;
  size_t size() const { return texts.empty() ? token_inputs.size() : texts.size(); }
};
inline constexpr size_t kMaxEmbeddingInputs = 2048;
EmbeddingsRequest parse_embeddings_request(const json& body, int32_t n_vocab);

}  // namespace triad::server
