// The OpenAI-compatible service: routes HTTP requests to the served models' engines.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (and GET /
// DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items), POST /v1/embeddings
// (embeddings.cpp), GET /v1/models, GET
// /v1/models/{id}, GET /health, GET /ready, GET /metrics, POST /tokenize, POST /detokenize, GET
// /tokenizer_info (as vLLM: lm-evaluation-harness tokenizes through these three), GET /stats
// (the dashboard's JSON: stats.cpp), and the pages GET / (chat) and GET /dashboard (web/,
// embedded at build time; public, like /health: they hold no data and ask for the key).
// Requests are validated into engine requests (every bad field is a 4xx in OpenAI's error
// shape naming it); the engine's tokens come back through a sink that detokenizes them
// incrementally, applies stop strings, and answers as one JSON object or as server-sent events.
// A client that disconnects cancels its requests.
// Thread-safety: handle() runs on I/O threads; sinks run on the engines' threads.
#pragma once

#include "server/tool_formats.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "model/model_config.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace triad {
class Model;
class Tokenizer;
namespace tmpl {
class Template;
}
}  // namespace triad

namespace triad::server {

class ConstraintCache;
class ResponseStore;
class StatsSampler;

// What a served model is for (GET /v1/models says it as "kind"): an embedding model answers only
// /v1/embeddings; a generative one answers the text endpoints, and /v1/embeddings too when it
// is served with a pooling (--pooling). "chat" when the file carries a chat template.
enum class ModelKind { kChat, kBase, kEmbedding };
const char* model_kind_name(ModelKind k);

struct ServedModel {
  std::string name;                       // the `model` string clients send
  ModelKind kind = ModelKind::kChat;
  Pooling pooling = Pooling::kNone;       // how /v1/embeddings pools it (kNone: it does not)
  std::string path;
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  engine::Engine* engine = nullptr;
  std::shared_ptr<const tmpl::Template> chat_template;  // null: the built-in chat format
  std::string chat_template_source;       // its Jinja text (GET /tokenizer_info)
  int builtin_chat_format = 0;            // triad::ChatFormat when chat_template is null
  bool template_knows_tools = false;      // the template renders `tools` itself
  ToolFormat tool_format = ToolFormat::kHermes;  // the call syntax its template teaches
  // Control tokens the output renders (and grammars allow): its format's markers
  // (tool_format_markers) where the vocabulary holds them as control tokens.
  std::vector<int32_t> rendered_tokens;
  std::string bos_text, eos_text;         // for templates
  int64_t created = 0;                    // unix seconds (load time)
  // system_fingerprint: changes with the build, the model's weights and the kernel settings
  // that decide its arithmetic (ISA level, batch invariance).
  std::string fingerprint = "fp_triad";
  // What /stats reports about the model (set at load).
  std::string weight_type;                // "Q4_K_M", "F32", "FP8_E4M3" (online) ...
  uint64_t weights_bytes = 0;
  std::string kv_dtype;                   // "f16/f16" (K/V)
  uint64_t kv_bytes_per_token = 0;
  std::unique_ptr<ModelMetrics> metrics = std::make_unique<ModelMetrics>();
  std::shared_ptr<ConstraintCache> constraints;  // compiled grammars over this model's vocabulary
};

struct ServiceOptions {
  std::string api_key;                    // empty: no authentication
  std::string default_model;              // requests without "model" go here (empty: a 400)
  // Origins browsers may call from (--cors-allow-origin; "*" for any). Empty: no CORS headers,
  // and OPTIONS is not answered.
  std::vector<std::string> cors_origins;
  int max_n = 16;                         // largest `n`
  int max_queue = 256;                    // waiting requests per model before 503
  double health_stall_s = 30;             // /health fails when an engine made no progress for this long
  size_t responses_max = 1024;            // stored Responses API responses (oldest dropped first) ...
  size_t responses_max_bytes = 64u << 20; // ... and their approximate JSON size
  // Split <think> reasoning from content for models whose template teaches it (--reasoning-format
  // auto, the default); false: return the output as it is (--reasoning-format none).
  bool reasoning = true;
};

class Service {
 public:
  Service(std::vector<ServedModel*> models, ServiceOptions options);
  ~Service();  // stops the stats sampler
  // Stops the stats sampler, which reads every model's engine once a second: call it before any
  // engine is destroyed (idempotent; the destructor calls it too).
  void stop_sampler();
  void handle(HttpRequest req, std::shared_ptr<ResponseWriter> w);
  // Number of requests in flight (accepted and not finished).
  int64_t in_flight() const { return in_flight_.load(); }

  // Implementation details used by the request objects in job.cpp.
  struct Job;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<uint64_t> request_seq_{0};  // numbers the request log lines

 private:
  ServedModel* find_model(const std::string& name) const;
  void chat_completions(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void completions(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void responses(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void embeddings(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void set_reasoning(GenOptions& opt, const ServedModel& m, const std::vector<int32_t>& prompt) const;
  void stored_response(const HttpRequest& req, const std::string& rest, std::shared_ptr<ResponseWriter> w);
  void list_models(std::shared_ptr<ResponseWriter> w) const;
  void get_model(const std::string& id, std::shared_ptr<ResponseWriter> w) const;
  void metrics(std::shared_ptr<ResponseWriter> w) const;
  void health(std::shared_ptr<ResponseWriter> w) const;
  void stats(std::shared_ptr<ResponseWriter> w) const;
  // GET / and /dashboard: true when `path` is one of the embedded pages (then answered).
  bool page(const std::string& path, ResponseWriter& w) const;
  void tokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void detokenize(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  void tokenizer_info(const HttpRequest& req, std::shared_ptr<ResponseWriter> w);
  // The tokenizer endpoints' model: `named` (null when the request names none), else
  // --default-model, else the only one served.
  ServedModel& tokenizer_model(const std::string* named) const;

  std::vector<ServedModel*> models_;
  ServiceOptions options_;
  std::shared_ptr<ResponseStore> responses_;
  std::unique_ptr<StatsSampler> sampler_;  // once a second: each model's history for /stats
};

}  // namespace triad::server
