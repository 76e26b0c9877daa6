// `triad serve`: the OpenAI-compatible HTTP server. Loads and warms every model given with -m
// (or the default model), splits one KV budget between them, and serves until SIGINT/SIGTERM,
// then drains: stops accepting, lets in-flight requests finish within --shutdown-timeout (then
// cancels them) and exits 0.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include <openssl/evp.h>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/memory_info.h"
#include "kernels/matmul.h"
#include "catalog/catalog.h"
#include "quant/mix.h"
#include <map>
#include "collect_sink.h"
#include "commands.h"
#include "engine/engine_api.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "loaded_model.h"
#include "model/kv_storage.h"
#include "server/http_server.h"
#include "grammar/matcher.h"
#include "server/constraint_cache.h"
#include "server/service.h"
#include "template/template.h"
#include "tokenizer/chat_format.h"

namespace triad::app {
namespace {

// system_fingerprint: "fp_" and 12 hex digits of a SHA-256 over what decides a request's
// arithmetic: this executable's bytes (the build), the model's tensors (names, types, shapes,
// and 4 KiB at the start, middle and end of each: a changed or fine-tuned weight file changes
// them; hashing whole multi-GiB files at every start would not pay), the kernels' ISA level and
// whether they are batch-invariant, the weights' layout (--no-repack), and the online weight
// conversion (--weight-type).
std::string system_fingerprint(const Model& model, const std::string& weight_type) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  auto add = [&](const void* p, size_t n) { EVP_DigestUpdate(ctx, p, n); };
  auto add_str = [&](const std::string& v) { add(v.data(), v.size() + 1); };
  {
    std::ifstream exe("/proc/self/exe", std::ios::binary);
    std::vector<char> buf(1 << 16);
    while (exe) {
      exe.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      add(buf.data(), static_cast<size_t>(exe.gcount()));
    }
  }
  add_str(cpu_summary());  // the level and its optional features (BF16 native or emulated)
  add_str(kernels::matmul_is_batch_invariant() ? "invariant" : "batch-dependent");
  add_str(model.weights().has_gguf_layout_quant() ? "gguf layout" : "re-laid layout");  // (--no-repack)
  add_str(weight_type);
  // Tensor bytes are read from the file, not the mapping: the pages of re-laid matrices were
  // released (ModelWeights::relayout), and touching them would map back ~64 KiB per read.
  std::ifstream file(model.file().path(), std::ios::binary);
  std::vector<char> piece;
  auto add_file = [&](const gguf::TensorInfo& t, uint64_t at, uint64_t n) {
    piece.resize(static_cast<size_t>(n));
    file.clear();
    file.seekg(static_cast<std::streamoff>(model.file().data_offset() + t.offset + at));
    file.read(piece.data(), static_cast<std::streamsize>(n));
    add(piece.data(), static_cast<size_t>(file.gcount()));
  };
  for (const gguf::TensorInfo& t : model.file().tensors()) {
    add_str(t.name);
    add(&t.type, sizeof t.type);
    add(t.ne, sizeof t.ne);
    add(&t.n_bytes, sizeof t.n_bytes);
    const uint64_t k = 4096;
    if (t.data == nullptr) continue;
    if (t.n_bytes <= 3 * k) {
      add_file(t, 0, t.n_bytes);
    } else {
      add_file(t, 0, k);
      add_file(t, t.n_bytes / 2 - k / 2, k);
      add_file(t, t.n_bytes - k, k);
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char* hex = "0123456789abcdef";
  std::string out = "fp_";
  for (int i = 0; i < 6; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

// What /stats calls the model's weights: the online type (--weight-type), else the file's mix
// (general.file_type, as llama.cpp names it), else the type most matrix bytes are in.
std::string weight_type_label(const Model& m, const std::string& online) {
  if (!online.empty()) {
    std::string u = online;
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u;
  }
  const int64_t ft = m.file().get_int("general.file_type", -1);
  for (const quant::Mix& mix : quant::mixes())
    if (static_cast<int64_t>(mix.file_type) == ft) return mix.name;
  std::map<DType, uint64_t> bytes;
  for (const gguf::TensorInfo& t : m.file().tensors())
    if (t.n_dims >= 2) bytes[t.type] += t.n_bytes;
  DType best = DType::kF32;
  uint64_t most = 0;
  for (const auto& [t, n] : bytes)
    if (n > most) most = n, best = t;
  std::string s(dtype_name(best));
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

namespace {

struct ServeOptions {
  CommonOptions common;  // its --model is unused: serve takes repeatable -m below
  EngineOptions engine;
  std::vector<std::string> models;
  std::vector<std::string> aliases;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key, api_key_file;
  std::string chat_template_file;
  int io_threads = 1;
  int max_queue = 256;
  std::string reasoning_format = "auto";
  int max_n = 16;
  std::string default_model;
  std::vector<std::string> cors_origins;
  double shutdown_timeout = 30;
  std::string max_body = "8MiB";
  std::string pooling;  // --pooling: empty = embedding models pool as their file says, others not at all
  std::string memory_budget;  // --memory-budget: weights and KV caches of every model together
};

// The default model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), an instruction-tuned model that
// chats, served as kDefaultModelName: the repository's copy (scripts/fetch_models.sh puts it in
// models/) when there is one, else the catalog's (pulled into $TRIAD_HOME on first use).
constexpr const char* kDefaultModelName = "qwen2.5-coder-0.5b-instruct";
std::string default_model_path() {
  const char* dir = std::getenv("TRIAD_MODELS_DIR");
  const std::string repo = std::string(dir && *dir ? dir : "models") + "/qwen2.5-0.5b-q4_k_m.gguf";
  return std::filesystem::exists(repo) ? repo : kDefaultModelName;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TRIAD_CHECK(f.good(), "cannot read ", path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t b = 0;
  while (b < s.size() && s[b] == ' ') ++b;
  return s.substr(b);
}

struct Served {
  LoadedModel lm;
  std::unique_ptr<engine::Engine> engine;
  server::ServedModel sm;
};

int run(const ServeOptions& o) {
  const int threads = o.common.resolved_threads();
  print_startup(threads);
  std::vector<std::string> paths = o.models;
  std::vector<std::string> aliases = o.aliases;
  if (paths.empty()) {
    paths.push_back(default_model_path());
    if (aliases.empty()) aliases.push_back(kDefaultModelName);
  }
  TRIAD_CHECK(aliases.size() <= paths.size(), "more --alias than -m");
  std::string api_key = o.api_key;
  if (!o.api_key_file.empty()) api_key = trim(read_file(o.api_key_file));
  TRIAD_CHECK(o.api_key_file.empty() || !api_key.empty(), "--api-key-file ", o.api_key_file, " is empty");

  // --speculative draft: one draft model, for every served model of its vocabulary (declared
  // before the engines, which use it, so that it outlives them).
  const LoadedModel draft = o.engine.load_draft(threads);
  // Load every model first, so the KV budget can be split by what each needs per token.
  std::vector<std::unique_ptr<Served>> served;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto s = std::make_unique<Served>();
    s->lm = load_model(paths[i], o.common.weight_type, threads);
    // The default name: a catalog name as given, else the file's stem, or a folder's whole
    // name ("Qwen2.5-0.5B").
    std::filesystem::path p(paths[i]);
    if (p.filename().empty()) p = p.parent_path();
    const bool catalog_name = !std::filesystem::exists(paths[i]) && catalog::find(paths[i]) != nullptr;
    std::string name = i < aliases.size() ? aliases[i]
                       : catalog_name ? paths[i]
                       : std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
    for (const auto& other : served) TRIAD_CHECK(other->sm.name != name, "two models are named '", name, "': use --alias");
    s->sm.name = name;
    s->sm.path = paths[i];
    served.push_back(std::move(s));
  }
  if (!o.default_model.empty()) {
    bool known = false;
    for (const auto& s : served) known = known || s->sm.name == o.default_model;
    TRIAD_CHECK(known, "--default-model ", o.default_model, " is not one of the served models (their names: the --alias, or the file name without .gguf)");
  }
  // One memory plan for every model. --memory-budget covers weights and KV caches together (the
  // KV share is what the weights leave); --kv-cache-memory the KV caches alone; neither: a quarter
  // of the available memory for the KV caches. An embedding model's cache holds only one step's
  // inputs (its K/V live one step), so it gets exactly that (max(step budget, context) tokens
  // plus a block per sequence, in f32); the generative models share the rest in proportion to
  // their KV bytes per token, so that each can hold the same number of tokens. With a single
  // generative model and no budget the engine's own default (capped at what --max-seqs
  // full-length requests can use) applies.
  uint64_t weights_all = 0;
  for (const auto& s : served) weights_all += s->lm.model->weights().matrix_bytes;
  uint64_t total_budget = o.engine.kv_memory.empty() ? 0 : parse_byte_size(o.engine.kv_memory);
  if (!o.memory_budget.empty()) {
    TRIAD_CHECK(o.engine.kv_memory.empty(), "give --memory-budget or --kv-cache-memory, not both");
    const uint64_t budget = parse_byte_size(o.memory_budget);
    TRIAD_CHECK(budget > weights_all + (64ull << 20), "--memory-budget ", o.memory_budget, " leaves no room for KV caches: the ",
                served.size(), " model(s)' weights take ", weights_all >> 20, " MiB");
    total_budget = budget - weights_all;
  }
  uint64_t budget_all = total_budget;
  if (budget_all == 0) {
    const uint64_t avail = available_memory_bytes();
    budget_all = avail ? avail / 4 : (1ull << 30);
  }
  std::vector<uint64_t> per_token(served.size()), fixed(served.size(), 0);
  uint64_t sum_per_token = 0, fixed_all = 0;
  size_t n_generative = 0;
  for (size_t i = 0; i < served.size(); ++i) {
    const engine::EngineConfig c = o.engine.make(served[i]->lm, threads, o.common.ctx);
    const ModelConfig& mc = served[i]->lm.model->config();
    const DType kt = mc.encoder ? DType::kF32 : c.k_type, vt = mc.encoder ? DType::kF32 : c.v_type;
    uint64_t b = 0;
    for (const KvLayerGroup& g : kv_layer_groups(mc)) b += KvStorage::token_bytes(mc, g, kt, vt);
    per_token[i] = std::max<uint64_t>(b, 1);
    if (mc.encoder) {
      const int64_t ctx = std::min<int64_t>(c.max_model_len > 0 ? c.max_model_len : mc.n_ctx_train, mc.n_ctx_train);
      const int64_t tokens = std::max<int64_t>(c.max_batched_tokens, ctx) + int64_t{c.max_seqs} * c.block_size * 2;
      fixed[i] = per_token[i] * static_cast<uint64_t>(tokens);
      fixed_all += fixed[i];
    } else {
      sum_per_token += per_token[i];
      ++n_generative;
    }
  }
  // A budget given (--memory-budget, --kv-cache-memory) must cover the embedding models' step
  // caches whatever the models' kinds; generative models need room beyond them.
  const bool fits = n_generative > 0 ? fixed_all < budget_all : total_budget == 0 || fixed_all <= budget_all;
  TRIAD_CHECK(fits || o.memory_budget.empty(), "--memory-budget ", o.memory_budget, " does not cover the models: their weights take ",
              weights_all >> 20, " MiB and the embedding models' step caches ", fixed_all >> 20, " MiB",
              n_generative > 0 ? ", which leaves nothing for the generative models' KV caches" : "");
  TRIAD_CHECK(fits, "the KV budget (", budget_all >> 20, " MiB) does not cover the embedding models' step caches (",
              fixed_all >> 20, " MiB)");
  const uint64_t shared_kv = budget_all > fixed_all ? budget_all - fixed_all : 0;
  const std::string tmpl_override = o.chat_template_file.empty() ? std::string() : read_file(o.chat_template_file);
  std::vector<server::ServedModel*> models;
  // One pool of --threads for all the models' engines: their steps take turns on the cores
  // instead of oversubscribing them (and each engine's serial work overlaps the others').
  const auto pool = std::make_shared<ThreadPool>(threads);
  int n_drafted = 0;
  for (size_t i = 0; i < served.size(); ++i) {
    Served& s = *served[i];
    engine::EngineConfig ec = o.engine.make(s.lm, threads, o.common.ctx);
    if (fixed[i] > 0)
      ec.kv_memory_bytes = fixed[i];
    else if (served.size() > 1 || total_budget > 0)
      ec.kv_memory_bytes = static_cast<uint64_t>(static_cast<long double>(shared_kv) * per_token[i] / sum_per_token);
    const bool generates = s.lm.model->config().has_logits() && s.lm.model->config().causal;
    const bool drafted = draft.model && generates && EngineOptions::same_vocabulary(draft, s.lm);
    if (draft.model && generates && !drafted)
      log_warn(s.sm.name, ": the draft model's vocabulary is not this model's; it speculates by prompt lookup");
    n_drafted += drafted;
    s.engine = std::make_unique<engine::Engine>(*s.lm.model, ec, pool, drafted ? draft.model.get() : nullptr);
    s.sm.model = s.lm.model.get();
    const ModelConfig& mc = s.lm.model->config();
    if (mc.encoder) {
      s.sm.kind = server::ModelKind::kEmbedding;
      s.sm.pooling = !o.pooling.empty() ? parse_pooling(o.pooling) : mc.pooling;
      if (s.sm.pooling == Pooling::kNone) {
        s.sm.pooling = Pooling::kMean;
        log_info(s.sm.name, ": the file names no pooling; embeddings use mean pooling (--pooling chooses)");
      }
    } else {
      s.sm.kind = s.lm.model->file().find("tokenizer.chat_template") || !tmpl_override.empty() ? server::ModelKind::kChat
                                                                                              : server::ModelKind::kBase;
      if (!o.pooling.empty()) s.sm.pooling = parse_pooling(o.pooling);
    }
    s.sm.tokenizer = s.lm.tokenizer.get();
    s.sm.engine = s.engine.get();
    s.sm.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    s.sm.fingerprint = system_fingerprint(*s.lm.model, o.common.weight_type);
    s.sm.weight_type = weight_type_label(*s.lm.model, o.common.weight_type);
    s.sm.weights_bytes = s.lm.model->weights().matrix_bytes;
    {
      const engine::EngineConfig& ecfg = s.engine->config();
      s.sm.kv_dtype = std::string(dtype_name(ecfg.k_type)) + "/" + std::string(dtype_name(ecfg.v_type));
      for (const KvLayerGroup& g : kv_layer_groups(s.lm.model->config()))
        s.sm.kv_bytes_per_token += KvStorage::token_bytes(s.lm.model->config(), g, ecfg.k_type, ecfg.v_type);
    }
    const Tokenizer& tok = *s.lm.tokenizer;
    if (s.sm.kind == server::ModelKind::kEmbedding) {
      log_info(s.sm.name, ": embedding model, ", mc.n_embd, " dimensions, ", pooling_name(s.sm.pooling), " pooling; ",
               s.engine->kv_plan().describe(), "; up to ", s.engine->max_model_len(), " tokens per input");
      models.push_back(&s.sm);
      continue;
    }
    if (tok.bos_id() >= 0) s.sm.bos_text = tok.token_text(tok.bos_id());
    if (tok.eos_id() >= 0) s.sm.eos_text = tok.token_text(tok.eos_id());
    std::string source = tmpl_override;
    if (source.empty()) {
      const gguf::Value* v = s.lm.model->file().find("tokenizer.chat_template");
      if (v && v->type == gguf::ValueType::kString) source = v->str;
    }
    if (!source.empty()) {
      s.sm.chat_template = std::make_shared<const tmpl::Template>(source);
      s.sm.chat_template_source = source;
      s.sm.template_knows_tools = source.find("tools") != std::string::npos;
      s.sm.tool_format = server::detect_tool_format(source);
      for (std::string_view marker : server::tool_format_markers(s.sm.tool_format)) {
        const std::optional<int32_t> id = s.lm.tokenizer->find_token(marker);
        if (id && s.lm.tokenizer->token_attr(*id) == TokenAttr::kControl && !s.lm.tokenizer->is_end_of_generation(*id))
          s.sm.rendered_tokens.push_back(*id);
      }
      log_info(s.sm.name, ": chat template ", tmpl_override.empty() ? "from the GGUF file" : "from " + o.chat_template_file,
               "; tool calls in the ", server::tool_format_name(s.sm.tool_format), " format");
    } else {
      const ChatFormat f = detect_chat_format(tok, "", s.lm.model->config().arch_name);
      s.sm.builtin_chat_format = static_cast<int>(f);
      log_info(s.sm.name, ": no chat template in the file; using the built-in '", chat_format_name(f), "' chat format");
    }
    log_info(s.sm.name, ": ", s.engine->kv_plan().describe(), "; context ", s.engine->max_model_len(), " tokens");
    log_info(s.sm.name, ": ", isa_name(best_isa()), " kernels, ",
             kernels::matmul_is_batch_invariant() || !s.lm.model->weights().has_gguf_layout_quant()
                 ? "batch-invariant (a token's result does not depend on what shares its step)"
                 : "batch-dependent for the Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ4_NL/IQ4_XS/MXFP4 matrices kept in "
                   "GGUF layout (--batch-invariant makes them invariant)",
             "; system_fingerprint ", s.sm.fingerprint);
    {
      // Constrained decoding: the vocabulary's byte trie, and the JSON-mode grammar's masks near
      // its start computed now rather than on the engine thread by the first JSON request.
      const auto t0 = std::chrono::steady_clock::now();
      s.sm.constraints = std::make_shared<server::ConstraintCache>(grammar::Vocab::from_tokenizer(tok, s.sm.rendered_tokens));
      grammar::warm_up(s.sm.constraints->get("json_object", ""), 4, 64, 1);
      log_info(s.sm.name, ": structured output ready (vocabulary trie and JSON mode) in ",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), " s");
    }
    models.push_back(&s.sm);
  }
  TRIAD_CHECK(!draft.model || n_drafted > 0, "the draft model '", o.engine.draft_model,
              "' has the vocabulary of none of the served models");
  // Warm-up: one short request per model pages the weights in and sizes the scratch buffers,
  // so the first client pays no cold start.
  for (auto& s : served) {
    if (s->sm.pooling != Pooling::kNone) {
      engine::EmbeddingRequest e;
      e.prompt = {std::max(0, s->lm.tokenizer->bos_id())};
      e.pooling = s->sm.pooling;
      auto sink = std::make_shared<CollectSink>();
      s->engine->submit_embedding(std::move(e), sink);
      sink->wait();
      if (s->sm.kind == server::ModelKind::kEmbedding) continue;
    }
    engine::GenerationRequest r;
    r.prompt = {std::max(0, s->lm.tokenizer->bos_id())};
    r.max_tokens = 2;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    auto sink = std::make_shared<CollectSink>();
    s->engine->submit(std::move(r), sink);
    sink->wait();
  }

  server::ServiceOptions so;
  so.api_key = api_key;
  so.max_queue = o.max_queue;
  so.reasoning = o.reasoning_format == "auto";
  so.max_n = o.max_n;
  so.default_model = o.default_model;
  so.cors_origins = o.cors_origins;
  server::Service service(models, so);
  server::HttpServerOptions ho;
  ho.host = o.host;
  ho.port = static_cast<uint16_t>(o.port);
  ho.io_threads = o.io_threads;
  ho.max_body_bytes = parse_byte_size(o.max_body);
  server::HttpServer http(ho, [&service](server::HttpRequest req, std::shared_ptr<server::ResponseWriter> w) {
    service.handle(std::move(req), std::move(w));
  });

  std::thread drainer;
  std::atomic<bool> draining{false};
  http.on_signal([&](int sig) {
    if (draining.exchange(true)) return;
    log_info("signal ", sig, ": draining (no new connections; ", service.in_flight(),
             " requests in flight; up to ", o.shutdown_timeout, " s)");
    http.stop_accepting();
    drainer = std::thread([&] {
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_timeout * 1000));
      while (service.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (service.in_flight() > 0) {
        // Cancel while the connections are still open, so that each client gets an error
        // (an `error` event on a stream, a 503 otherwise) rather than a cut connection.
        log_warn("shutdown timeout: cancelling ", service.in_flight(), " requests");
        for (auto& s : served) s->engine->cancel_all();
        const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (service.in_flight() > 0 && std::chrono::steady_clock::now() < grace)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the last bytes go out
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the last bytes go out
      }
      http.stop();  // the engines (and whatever they still run) are stopped after run() returns
    });
  });
  std::printf("triad: serving %zu model(s) on http://%s:%u/v1 :", served.size(), o.host.c_str(), http.port());
  for (auto& s : served) std::printf(" %s", s->sm.name.c_str());
  std::printf("\n");
  std::printf("triad: chat page http://%s:%u/  dashboard http://%s:%u/dashboard  stats http://%s:%u/stats\n",
              o.host.c_str(), http.port(), o.host.c_str(), http.port(), o.host.c_str(), http.port());
  for (auto& s : served)
    std::printf("triad:   %-32s %-9s %s weights %.0f MiB, KV %.0f MiB (%s, %llu bytes/token), context %d\n",
                s->sm.name.c_str(), server::model_kind_name(s->sm.kind), s->sm.weight_type.c_str(),
                static_cast<double>(s->sm.weights_bytes) / (1 << 20),
                static_cast<double>(s->engine->kv_plan().total_bytes) / (1 << 20), s->sm.kv_dtype.c_str(),
                static_cast<unsigned long long>(s->sm.kv_bytes_per_token), s->engine->max_model_len());
  std::fflush(stdout);
  {
    // While serving, log lines go through the asynchronous writer (base/log.h): a stderr that is
    // slow or not read never stalls an engine or HTTP thread.
    // TRIAD_LOG_QUEUE_LINES sizes its queue (default 8,192 lines).
    struct LogWriterScope {
      LogWriterScope() {
        const char* q = std::getenv("TRIAD_LOG_QUEUE_LINES");
        const long n = q && *q ? std::strtol(q, nullptr, 10) : 0;
        start_log_writer(n > 0 ? static_cast<size_t>(std::min<long>(n, 1L << 24)) : 8192);
      }
      ~LogWriterScope() { stop_log_writer(); }
    } log_writer;
    http.run();
    if (drainer.joinable()) drainer.join();
    // The /stats sampler reads the engines: stopped before any of them is freed.
    service.stop_sampler();
    // Stop the engines while the HTTP objects still exist: requests still running are cancelled
    // and their sinks may still post to the (stopped) connections.
    for (auto& s : served) s->engine.reset();
  }
  if (log_lines_dropped() > 0) log_warn(log_lines_dropped(), " log lines were dropped in all");
  log_info("stopped");
  return 0;
}

}  // namespace

Command add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();  // owned by the returned command
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, ...)");
  cmd->add_option("-m,--model", o->models, "GGUF model, Hugging Face model folder (converted once and cached) or catalog name (`triad list`; pulled on first use) to serve (repeatable; default: qwen2.5-coder-0.5b-instruct, from models/ or the catalog)")
      ->check(model_ref());
  cmd->add_option("--alias", o->aliases, "name clients use for the -m at the same position (repeatable; default: file stem)");
  cmd->add_option("--host", o->host, "address to listen on");
  cmd->add_option("--port", o->port, "port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' (health and metrics stay public)");
  cmd->add_option("--api-key-file", o->api_key_file, "read the API key from a file")->check(CLI::ExistingFile);
  cmd->add_option("--chat-template-file", o->chat_template_file, "Jinja chat template overriding the models' own")
      ->check(CLI::ExistingFile);
  cmd->add_option("--io-threads", o->io_threads, "HTTP I/O threads")->check(CLI::Range(1, 64));
  cmd->add_option("--cors-allow-origin", o->cors_origins,
                  "let browser pages from this origin call the API (repeatable; '*' for any): CORS headers on every response, preflight OPTIONS answered before authentication");
  cmd->add_option("--default-model", o->default_model,
                  "serve requests that name no model with this one (by its served name); without it they are a 400, and unknown names stay a 404");
  cmd->add_option("--max-queue", o->max_queue, "waiting requests per model before answering 503")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--reasoning-format", o->reasoning_format,
                  "auto: a thinking model's <think> part is returned as message.reasoning_content (chat); "
                  "none: the output as generated")
      ->check(CLI::IsMember({"auto", "none"}));
  cmd->add_option("--max-n", o->max_n, "largest n (choices per request)")->check(CLI::Range(1, 128));
  cmd->add_option("--memory-budget", o->memory_budget,
                  "memory for all models together, weights and KV caches (e.g. 8GiB): the KV caches get what the "
                  "weights leave, split as --kv-cache-memory would be");
  cmd->add_option("--pooling", o->pooling,
                  "how /v1/embeddings pools final hidden states: mean, cls or last. Embedding models (bert) default "
                  "to their file's pooling; generative models serve embeddings only when this is given")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  cmd->add_option("--max-body", o->max_body, "largest request body (413 beyond)");
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout, "seconds in-flight requests get to finish on SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("-t,--threads", o->common.threads, "worker threads, shared by all the served models (default: physical cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx", o->common.ctx, "context length per request (default: min(trained, 4096))")
      ->check(CLI::Range(0, 1 << 24));
  o->common.add_weight_type(*cmd);
  o->engine.add_to(*cmd);
  return [o] { return run(*o); };
}

}  // namespace triad::app
