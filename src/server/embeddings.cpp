// POST /v1/embeddings (service.h): the request is checked whole (openai_request.h, then against
// the model: kind, lengths, dimensions), every input becomes one engine embedding request, and
// the answer goes out when the last one finishes. Encoding the answer (truncation to
// `dimensions`, L2 normalization, float or base64) is apart from the request's life:
// encode_embeddings below.
// Thread-safety: embeddings() runs on an HTTP thread; the sinks on the engine thread, the
// disconnect callback on an HTTP thread (a mutex orders them).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>

#include <openssl/evp.h>

#include "base/error.h"
#include "base/log.h"
#include "model/model.h"
#include "server/endpoints.h"
#include "server/openai_request.h"
#include "server/service.h"
#include "tokenizer/tokenizer.h"

namespace triad::server {
namespace {

using Clock = std::chrono::steady_clock;

// The first `dims` values of a pooled vector, scaled to unit length (a zero vector stays zero).
std::vector<float> unit_prefix(const std::vector<float>& v, size_t dims) {
  std::vector<float> out(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(dims, v.size())));
  double ss = 0;
  for (float x : out) ss += static_cast<double>(x) * x;
  const double inv = ss > 0 ? 1.0 / std::sqrt(ss) : 0.0;
  for (float& x : out) x = static_cast<float>(x * inv);
  return out;
}

// Little-endian float32 bytes in base64 (what the OpenAI SDKs decode).
std::string base64_floats(const std::vector<float>& v) {
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<char>((u >> (8 * b)) & 0xFF);
  }
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// The response body: one embedding object per input, in input order. Written as text, without
// a JSON document of every float, and byte for byte what json::dump gave for the same object:
// the keys in the same order, each float as nlohmann writes a double (its to_chars: the shortest
// text that reads back to the same double; a non-finite value as null).
std::string encode_embeddings(const std::vector<std::vector<float>>& pooled, const std::string& model, size_t dims,
                              bool base64, int64_t prompt_tokens) {
  std::string out;
  out.reserve(128 + pooled.size() * (64 + dims * (base64 ? 6 : 14)));
  out += "{\"object\":\"list\",\"data\":[";
  char num[64];
  for (size_t i = 0; i < pooled.size(); ++i) {
    const std::vector<float> v = unit_prefix(pooled[i], dims);
    out += i ? ",{\"object\":\"embedding\",\"index\":" : "{\"object\":\"embedding\",\"index\":";
    out += std::to_string(i);
    out += ",\"embedding\":";
    if (base64) {
      out += '"';
      out += base64_floats(v);
      out += '"';
    } else {
      out += '[';
      for (size_t k = 0; k < v.size(); ++k) {
        if (k) out += ',';
        const double x = v[k];
        if (std::isfinite(x))
          out.append(num, nlohmann::detail::to_chars(num, num + sizeof num, x));
        else
          out += "null";
      }
      out += ']';
    }
    out += '}';
  }
  out += "],\"model\":";
  out += json(model).dump(-1, ' ', false, json::error_handler_t::replace);
  out += ",\"usage\":{\"prompt_tokens\":" + std::to_string(prompt_tokens) + ",\"total_tokens\":" +
         std::to_string(prompt_tokens) + "}}";
  return out;
}

// Counts a request in Service::in_flight_ from construction to destruction, so that graceful
// drain never waits on a count an exception left behind.
class InFlight {
 public:
  explicit InFlight(std::atomic<int64_t>& n) : n_(n) { ++n_; }
  ~InFlight() { --n_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& n_;
};

// One /v1/embeddings request in flight: its inputs' engine requests and their vectors.
struct EmbeddingJob : std::enable_shared_from_this<EmbeddingJob> {
  Service* service = nullptr;
  ServedModel* model = nullptr;
  std::shared_ptr<ResponseWriter> writer;
  size_t dims = 0;
  bool base64 = false;
  int64_t prompt_tokens = 0;
  std::vector<std::vector<float>> pooled;
  std::vector<engine::RequestId> ids;
  size_t remaining = 0;
  bool failed = false, cancelled = false;
  std::string error;
  Clock::time_point t0 = Clock::now();
  std::unique_ptr<InFlight> in_flight;  // released once the answer is out (or the job is dropped)
  std::mutex mu;

  void on_embedding(size_t i, std::vector<float>&& v) {
    std::lock_guard<std::mutex> lk(mu);
    pooled[i] = std::move(v);
  }

  // The last input's finish answers: the vectors are taken under the mutex, the answer encoded
  // and sent without it.
  void on_finish(size_t i, engine::FinishReason reason, const std::string& err) {
    std::unique_ptr<InFlight> done;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (reason == engine::FinishReason::kError) {
        if (!failed) error = err.empty() ? "input[" + std::to_string(i) + "]: the engine failed without a message" : err;
        failed = true;
      } else if (reason == engine::FinishReason::kCancelled || pooled[i].empty()) {
        cancelled = true;
      }
      if (--remaining > 0) return;
      done = std::move(in_flight);
    }
    const double e2e = std::chrono::duration<double>(Clock::now() - t0).count();
    model->metrics->e2e.observe(e2e);
    log_event("request", {log_field("id", "req-" + std::to_string(++service->request_seq_)), log_field("model", model->name),
                          log_field("endpoint", std::string("embeddings")), log_field("inputs", static_cast<int64_t>(pooled.size())),
                          log_field("prompt_tokens", prompt_tokens), log_field("e2e_ms", e2e * 1e3),
                          log_field("outcome", std::string(failed ? "error" : cancelled ? "cancelled" : "ok"))});
    if (failed) {
      ++model->metrics->requests_error;
      send_error(*writer, ApiError{500, "embedding failed: " + error, "server_error", "", "", {}});
    } else if (cancelled) {
      ++model->metrics->requests_cancelled;
      send_error(*writer, ApiError{503, "the request was cancelled (server shutting down)", "server_error", "",
                                   "server_is_overloaded", {}});
    } else {
      ++model->metrics->requests_ok;
      ++model->metrics->embedding_requests;
      writer->send(200, "application/json", encode_embeddings(pooled, model->name, dims, base64, prompt_tokens));
    }
  }
};

class EmbeddingSink : public engine::OutputSink {
 public:
  EmbeddingSink(std::shared_ptr<EmbeddingJob> job, size_t index) : job_(std::move(job)), index_(index) {}
  void on_token(engine::RequestId, const engine::TokenOutput&) override {}
  void on_embedding(engine::RequestId, std::vector<float>&& v) override { job_->on_embedding(index_, std::move(v)); }
  void on_finish(engine::RequestId, engine::FinishReason reason, const engine::RequestTimings& t,
                 const std::string& error) override {
    job_->model->metrics->queue.observe(t.queue_s);
    job_->on_finish(index_, reason, error);
  }

 private:
  std::shared_ptr<EmbeddingJob> job_;
  size_t index_;
};

}  // namespace

void Service::embeddings(const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
  const json body = parse_json_body(req.body);
  ServedModel& m = model_or_404(find_model(model_name_of(body, options_.default_model)), body);
  if (m.pooling == Pooling::kNone)
    throw ApiError{400, "The model `" + m.name + "` is a generative model served without a pooling; start it with "
                        "--pooling mean|cls|last to serve embeddings from it.",
                   "invalid_request_error", "model", "model_not_supported", {}};
  const ModelConfig& c = m.model->config();
  EmbeddingsRequest r = parse_embeddings_request(body, c.n_vocab);
  const size_t n_embd = static_cast<size_t>(c.n_embd);
  if (r.dimensions && static_cast<size_t>(*r.dimensions) > n_embd)
    bad("dimensions", "'dimensions' is " + std::to_string(*r.dimensions) + " but the model `" + m.name + "` gives " +
                          std::to_string(n_embd) + "-dimensional embeddings");
  std::vector<std::vector<int32_t>> inputs = std::move(r.token_inputs);
  for (const std::string& t : r.texts) {
    // Special-token text ("[MASK]") is read as that token, as Hugging Face tokenizers and
    // sentence-transformers (and llama.cpp's server) read it.
    inputs.push_back(m.tokenizer->encode(t, /*add_special=*/true, /*parse_special=*/true));
    if (inputs.back().empty()) bad("input", "input[" + std::to_string(inputs.size() - 1) + "] is empty after tokenization");
  }
  const int32_t max_len = m.engine->max_model_len();
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (static_cast<int64_t>(inputs[i].size()) > max_len)
      bad("input", "input[" + std::to_string(i) + "] has " + std::to_string(inputs[i].size()) + " tokens; the model `" +
                       m.name + "` takes at most " + std::to_string(max_len) + " (its positions)",
          "context_length_exceeded");
    tokens += static_cast<int64_t>(inputs[i].size());
  }
  check_capacity(m, options_.max_queue, inputs.size());  // each input is one engine request

  auto job = std::make_shared<EmbeddingJob>();
  job->service = this;
  job->model = &m;
  job->writer = w;
  job->dims = r.dimensions ? static_cast<size_t>(*r.dimensions) : n_embd;
  job->base64 = r.base64;
  job->prompt_tokens = tokens;
  job->pooled.resize(inputs.size());
  job->ids.assign(inputs.size(), 0);
  job->remaining = inputs.size();
  job->in_flight = std::make_unique<InFlight>(in_flight_);
  std::vector<std::shared_ptr<EmbeddingSink>> sinks;
  for (size_t i = 0; i < inputs.size(); ++i) sinks.push_back(std::make_shared<EmbeddingSink>(job, i));
  for (size_t i = 0; i < inputs.size(); ++i) {
    engine::EmbeddingRequest er;
    er.prompt = std::move(inputs[i]);
    er.pooling = m.pooling;
    try {
      const engine::RequestId id = m.engine->submit_embedding(std::move(er), sinks[i]);
      std::lock_guard<std::mutex> lk(job->mu);
      job->ids[i] = id;
    } catch (const Error& e) {
      // A bad request, answered here as start_job answers it: the inputs already queued are
      // cancelled, and as the ones never queued never count down, the job never answers.
      std::unique_ptr<InFlight> done;
      {
        std::lock_guard<std::mutex> lk(job->mu);
        done = std::move(job->in_flight);
      }
      for (size_t k = 0; k < i; ++k) m.engine->cancel(job->ids[k]);
      throw ApiError{400, "input[" + std::to_string(i) + "]: " + e.what(), "invalid_request_error", "input", "invalid_value", {}};
    }
  }
  std::weak_ptr<EmbeddingJob> weak = job;
  w->on_disconnect([weak] {
    if (auto j = weak.lock()) {
      std::lock_guard<std::mutex> lk(j->mu);
      for (engine::RequestId id : j->ids)
        if (id) j->model->engine->cancel(id);
    }
  });
}

}  // namespace triad::server
