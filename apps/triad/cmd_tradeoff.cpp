// `triad tradeoff`: the precision lever measured on the user's own model. For every weight type
// (a `triad quantize` mix written into DIR and reused on later runs, or an online type applied at
// load time) and every KV-cache type, it measures what the variant costs and what it gives:
//   memory     bits per weight, file size, resident weight bytes, KV bytes per token, how many
//              full-length sequences fit in the budget;
//   accuracy   perplexity, and KL divergence / top-1 agreement against the base model (the
//              unquantized file with an f32 KV cache) with llama-perplexity's definitions and
//              windowing (quant/kld.h), every chunk run through the paged KV cache of that type;
//   speed      prompt tokens/s (one prefill of half the context), generation tokens/s (one
//              sequence decoding greedily after that prompt) and batched generation tokens/s (`--streams`
//              sequences decoding together in each forward step, the engine's continuous-batching
//              step without the HTTP server).
// Then writes report.json / report.md / report.html (quant/tradeoff_report.h) into DIR.
// Progress: one line per variant step on stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "commands.h"
#include "engine_options.h"
#include "gguf/gguf_file.h"
#include "loaded_model.h"
#include "model/kv_storage.h"
#include "quant/imatrix.h"
#include "quant/kld.h"
#include "quant/mix.h"
#include "quant/online.h"
#include "quant/quantize_model.h"
#include "quant/tradeoff_report.h"

namespace triad::app {
namespace {

struct TradeoffCli {
  std::string model, text, dir, imatrix, budget = "8GiB";
  std::string types = "Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q3_K_M,Q2_K,IQ4_XS,fp8_e4m3,int8";
  std::string kv_types = "f16";
  int threads = 0, ctx = 512, chunks = 8, tg_tokens = 32, streams = 16;
  int64_t seq_len = 4096;
  double min_top1 = 0.99;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// One weight variant: a quantized file, or the base file with an online type (or neither: base).
struct WeightVariant {
  std::string name;           // as the user wrote it ("Q4_K_M", "fp8_e4m3"), "base" for the base
  std::string path;           // the file to load
  std::optional<DType> online;
  bool imatrix = false;
  bool is_base = false;
};

// Forward passes through a private paged KV cache of the given types (one sequence per chunk,
// identity block tables; `streams` sequences for the batched decode).
class PagedRunner {
 public:
  PagedRunner(const Model& m, DType k, DType v, int32_t n_seq, int32_t len, ThreadPool& pool)
      : m_(m), pool_(pool), bs_(16) {
    KvStorageConfig kc;
    kc.block_size = bs_;
    kc.k_type = k;
    kc.v_type = v;
    blocks_per_seq_ = (len + bs_ - 1) / bs_;
    kc.blocks_per_group.assign(kv_layer_groups(m.config()).size(), blocks_per_seq_ * n_seq);
    kv_ = std::make_unique<KvStorage>(m.config(), kc);
    tables_.resize(static_cast<size_t>(n_seq));
    for (int32_t s = 0; s < n_seq; ++s)
      for (int32_t b = 0; b < blocks_per_seq_; ++b) tables_[s].push_back(s * blocks_per_seq_ + b);
  }

  // Runs rows of sequences: seq s gets tokens[s] at positions pos0[s].. ; logits of every row
  // (all_logits) or of each sequence's last row into `logits`.
  void step(const std::vector<std::vector<int32_t>>& toks, const std::vector<int32_t>& pos0,
            bool all_logits, std::vector<float>& logits) {
    std::vector<int32_t> ids, pos;
    std::vector<BatchSeq> seqs;
    std::vector<int64_t> rows;
    const size_t groups = kv_->groups().size();
    for (size_t s = 0; s < toks.size(); ++s) {
      BatchSeq bsq;
      bsq.row_begin = static_cast<int64_t>(ids.size());
      bsq.n_rows = static_cast<int64_t>(toks[s].size());
      bsq.pos0 = pos0[s];
      for (size_t g = 0; g < groups; ++g) bsq.block_tables.emplace_back(tables_[s]);
      for (size_t i = 0; i < toks[s].size(); ++i) {
        if (all_logits || i + 1 == toks[s].size()) rows.push_back(static_cast<int64_t>(ids.size()));
        ids.push_back(toks[s][i]);
        pos.push_back(pos0[s] + static_cast<int32_t>(i));
      }
      seqs.push_back(std::move(bsq));
    }
    ForwardBatch fb;
    fb.tokens = ids;
    fb.positions = pos;
    fb.seqs = seqs;
    fb.logit_rows = rows;
    logits.resize(rows.size() * static_cast<size_t>(m_.config().n_vocab));
    m_.forward_batch(fb, *kv_, scratch_, logits.data(), pool_);
  }

 private:
  const Model& m_;
  ThreadPool& pool_;
  int32_t bs_;
  int32_t blocks_per_seq_ = 0;
  std::unique_ptr<KvStorage> kv_;
  std::vector<std::vector<int32_t>> tables_;
  ForwardScratch scratch_;
};

// Logits of every position of one chunk (first token BOS when the vocabulary adds one), computed
// in prefill steps of at most 512 rows.
void chunk_logits(const Model& m, const Tokenizer& tok, std::vector<int32_t> chunk, PagedRunner& r,
                  std::vector<float>& all) {
  if (tok.add_bos() && tok.bos_id() >= 0) chunk[0] = tok.bos_id();
  const int32_t n = static_cast<int32_t>(chunk.size()), nv = m.config().n_vocab;
  all.resize(static_cast<size_t>(n) * nv);
  std::vector<float> part;
  for (int32_t i = 0; i < n; i += 512) {
    const int32_t len = std::min(512, n - i);
    r.step({std::vector<int32_t>(chunk.begin() + i, chunk.begin() + i + len)}, {i}, true, part);
    std::copy(part.begin(), part.end(), all.begin() + static_cast<size_t>(i) * nv);
  }
}

int32_t argmax(const float* x, int32_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

uint64_t kv_bytes_per_token(const ModelConfig& c, DType k, DType v) {
  uint64_t b = 0;
  for (const KvLayerGroup& g : kv_layer_groups(c)) b += KvStorage::token_bytes(c, g, k, v);
  return b;
}

uint64_t matrix_elements(const Model& m) {
  const ModelWeights& w = m.weights();
  auto n = [](const kernels::WeightMatrix& x) { return static_cast<uint64_t>(x.rows) * static_cast<uint64_t>(x.cols); };
  uint64_t total = n(w.token_embd) + (m.config().tied_output ? 0 : n(w.output));
  for (const LayerWeights& L : w.layers)
    total += n(L.wq) + n(L.wk) + n(L.wv) + n(L.wo) + n(L.w_gate) + n(L.w_up) + n(L.w_down);
  return total;
}

// "AMD EPYC (family 25, model 1), AVX2 (FMA, F16C)": /proc/cpuinfo's model name (and family /
// model, since VMs often hide the product name) with the kernel level Triad runs.
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  auto value = [](const std::string& l) {
    std::string v = l.substr(l.find(':') + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  };
  while (std::getline(in, line) && (name.empty() || family.empty() || model.empty())) {
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model\t", 0) == 0 || line.rfind("model ", 0) == 0) model = value(line);
  }
  std::string out = name.empty() ? "unknown CPU" : name;
  if (!family.empty()) out += " (family " + family + (model.empty() ? "" : ", model " + model) + ")";
  return out + ", " + cpu_summary();
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

int run(const TradeoffCli& c) {
  const int threads = c.threads > 0 ? c.threads : physical_cores();
  print_startup(threads);
  namespace fs = std::filesystem;
  fs::create_directories(c.dir);
  const std::string stem = fs::path(c.model).stem().string();
  const uint64_t budget = parse_byte_size(c.budget);
  std::vector<DType> kv_types;
  std::vector<std::string> kv_names = split_list(c.kv_types);
  TRIAD_CHECK(!kv_names.empty(), "--kv-types is empty");
  for (const std::string& k : kv_names) kv_types.push_back(parse_kv_dtype(k));

  // The variants: base first, then each type in the order given.
  std::vector<WeightVariant> variants{{"base", c.model, std::nullopt, false, true}};
  for (const std::string& t : split_list(c.types)) {
    WeightVariant v;
    v.name = t;
    if (auto mix = quant::find_mix(t)) {
      v.imatrix = !c.imatrix.empty();
      v.name = mix->name;
      v.path = (fs::path(c.dir) / (stem + "-" + mix->name + (v.imatrix ? "-imatrix" : "") + ".gguf")).string();
    } else {
      v.online = quant::parse_weight_type(t);  // throws with the list of accepted names
      v.path = c.model;
    }
    variants.push_back(std::move(v));
  }

  // Quantize what is not cached yet (a cached file is newer than both the base and the imatrix).
  std::unique_ptr<quant::Imatrix> im;
  if (!c.imatrix.empty()) im = std::make_unique<quant::Imatrix>(quant::Imatrix::load(c.imatrix));
  ThreadPool pool(threads);
  for (const WeightVariant& v : variants) {
    if (v.is_base || v.online) continue;
    const bool fresh = fs::exists(v.path) && fs::last_write_time(v.path) >= fs::last_write_time(c.model) &&
                       (c.imatrix.empty() || fs::last_write_time(v.path) >= fs::last_write_time(c.imatrix));
    if (fresh) {
      log_info("tradeoff: reusing ", v.path);
      continue;
    }
    quant::QuantizeOptions qo;
    qo.mix = *quant::find_mix(v.name);
    qo.measure_error = false;
    if (im) {
      qo.imatrix = im.get();
      qo.imatrix_path = c.imatrix;
      qo.mix_options.has_imatrix = true;
    }
    log_info("tradeoff: quantizing ", v.name, " -> ", v.path);
    const quant::QuantizeSummary s = quant::quantize_model(c.model, v.path, qo, pool);
    log_info("tradeoff: ", v.name, ": ", s.bits_per_weight(), " bits per weight in ", s.seconds, " s");
  }

  // The base: its log-probabilities over the text with an f32 KV cache, stored as llama.cpp's
  // KLD base file (the candidates are scored against it one chunk at a time).
  const std::string base_file = (fs::path(c.dir) / "base.kld").string();
  LoadedModel base = load_model(c.model);
  const TextChunks text = chunk_text_file(*base.tokenizer, c.text, c.ctx, c.chunks);
  const int32_t n_ctx = text.n_ctx, n_vocab = base.model->config().n_vocab;
  {
    log_info("tradeoff: base log-probabilities over ", text.n_chunks, " chunks of ", n_ctx, " tokens");
    quant::KldBaseWriter w(base_file, static_cast<uint32_t>(n_ctx), n_vocab, static_cast<int32_t>(text.n_chunks),
                           std::vector<int32_t>(text.tokens.begin(), text.tokens.begin() + text.n_chunks * n_ctx));
    PagedRunner r(*base.model, DType::kF32, DType::kF32, 1, n_ctx, pool);
    std::vector<float> logits;
    for (int64_t ch = 0; ch < text.n_chunks; ++ch) {
      std::vector<int32_t> chunk(text.tokens.begin() + ch * n_ctx, text.tokens.begin() + (ch + 1) * n_ctx);
      chunk_logits(*base.model, *base.tokenizer, chunk, r, logits);
      w.add_chunk(logits.data(), chunk.data());
    }
    w.finish();
  }
  base = LoadedModel{};

  quant::TradeoffReport rep;
  rep.model = stem;
  rep.base_path = c.model;
  rep.text_path = c.text;
  rep.cpu = cpu_description();
  rep.date = today();
  rep.threads = threads;
  rep.budget_bytes = budget;
  rep.seq_len = c.seq_len;
  rep.min_top1 = c.min_top1;
  const size_t total = variants.size() * kv_types.size();
  size_t done = 0;
  Timer all;
  for (const WeightVariant& v : variants) {
    LoadedModel lm = load_model(v.path, v.online ? std::string(dtype_name(*v.online)) : std::string(), threads);
    const Model& m = *lm.model;
    TRIAD_CHECK(m.config().n_vocab == n_vocab, v.path, " has a different vocabulary from the base");
    const uint64_t elements = matrix_elements(m);
    const uint64_t file_bytes = fs::file_size(v.path);
    for (size_t ki = 0; ki < kv_types.size(); ++ki) {
      const DType kt = kv_types[ki];
      ++done;
      quant::TradeoffPoint p;
      p.weight_type = v.is_base ? std::string(dtype_name(m.weights().layers.empty() ? DType::kF32
                                                                                  : m.weights().layers[0].wq.type))
                                : v.name;
      p.kv_type = kv_names[ki];
      p.imatrix = v.imatrix;
      p.is_base = v.is_base && kt == DType::kF32;
      p.label = (v.is_base ? "base " + p.weight_type : v.name) + (v.imatrix ? "+imatrix" : "") + " / kv " + p.kv_type;
      p.weight_bytes = m.weights().matrix_bytes;
      p.file_bytes = v.online ? 0 : file_bytes;
      p.bits_per_weight = elements ? 8.0 * static_cast<double>(p.weight_bytes) / static_cast<double>(elements) : 0;
      p.kv_bytes_per_token = kv_bytes_per_token(m.config(), kt, kt);
      const uint64_t seq_bytes = p.kv_bytes_per_token * static_cast<uint64_t>(c.seq_len);
      p.seqs_in_budget = budget > p.weight_bytes && seq_bytes > 0
                             ? static_cast<int64_t>((budget - p.weight_bytes) / seq_bytes)
                             : 0;

      // Accuracy (and prefill speed) over the text.
      std::ifstream in(base_file, std::ios::binary);
      in.seekg(0, std::ios::end);
      const uint64_t size = static_cast<uint64_t>(in.tellg());
      in.seekg(0);
      quant::KldBaseReader br(in, size);
      quant::KldStats stats(n_vocab);
      std::vector<uint16_t> records;
      std::vector<float> logits;
      PagedRunner r(m, kt, kt, 1, n_ctx, pool);
      for (int64_t ch = 0; ch < text.n_chunks; ++ch) {
        std::vector<int32_t> chunk(br.tokens().begin() + ch * n_ctx, br.tokens().begin() + (ch + 1) * n_ctx);
        chunk_logits(m, *lm.tokenizer, chunk, r, logits);
        br.read_chunk(records);
        stats.add_chunk(logits.data(), records.data(), chunk.data(), n_ctx);
      }
      const quant::KldSummary s = stats.summary();
      p.ppl = s.ppl;
      p.ppl_err = s.ppl_err;
      p.kld_mean = s.kld_mean;
      p.kld_mean_err = s.kld_err;
      p.kld_p99 = s.kld_p99;
      p.top1 = s.top1;
      p.top1_err = s.top1_err;
      if (p.is_base) {  // the reference itself (its stored log-probabilities are 16-bit rounded)
        p.kld_mean = p.kld_mean_err = p.kld_p99 = p.top1_err = 0;
        p.top1 = 1;
      }

      // Prompt processing (one prefill of half the context, logits of its last row only) and
      // generation: one sequence decoding greedily after it.
      if (c.tg_tokens > 0) {
        const int32_t prompt = std::max(1, std::min(n_ctx / 2, n_ctx - c.tg_tokens));
        const int32_t n_gen = std::min(c.tg_tokens, n_ctx - prompt);
        PagedRunner g(m, kt, kt, 1, prompt + n_gen, pool);
        std::vector<int32_t> ptoks(text.tokens.begin(), text.tokens.begin() + prompt);
        Timer tp;
        g.step({ptoks}, {0}, false, logits);
        p.pp_tps = prompt / std::max(1e-9, tp.seconds());
        int32_t next = argmax(logits.data(), n_vocab);
        Timer t;
        for (int32_t i = 0; i < n_gen; ++i) {
          g.step({{next}}, {prompt + i}, false, logits);
          next = argmax(logits.data(), n_vocab);
        }
        p.tg_tps = n_gen / std::max(1e-9, t.seconds());
      }
      // Batched generation: `streams` sequences with short distinct prompts decoding together.
      if (c.streams > 1 && c.tg_tokens > 0) {
        const int32_t prompt = std::min(32, n_ctx / 2), n_gen = std::min(c.tg_tokens, 32);
        PagedRunner g(m, kt, kt, c.streams, prompt + n_gen, pool);
        std::vector<std::vector<int32_t>> toks;
        std::vector<int32_t> pos0(static_cast<size_t>(c.streams), 0);
        for (int s = 0; s < c.streams; ++s) {
          const size_t off = static_cast<size_t>(s * 7) % (text.tokens.size() - prompt);
          toks.emplace_back(text.tokens.begin() + off, text.tokens.begin() + off + prompt);
        }
        g.step(toks, pos0, false, logits);
        Timer t;
        for (int32_t i = 0; i < n_gen; ++i) {
          for (int s = 0; s < c.streams; ++s) {
            toks[s] = {argmax(logits.data() + static_cast<size_t>(s) * n_vocab, n_vocab)};
            pos0[s] = prompt + i;
          }
          g.step(toks, pos0, false, logits);
        }
        p.serve_tps = static_cast<double>(n_gen) * c.streams / std::max(1e-9, t.seconds());
      }
      std::fprintf(stderr,
                   "[%zu/%zu] %-28s %5.2f bpw  KLD %.5f  top-1 %6.2f%%  PPL %.3f  pp %.0f t/s  tg %.1f t/s  "
                   "x%d %.1f t/s  (%.0f s)\n",
                   done, total, p.label.c_str(), p.bits_per_weight, p.kld_mean, 100 * p.top1, p.ppl, p.pp_tps,
                   p.tg_tps, c.streams, p.serve_tps, all.seconds());
      rep.points.push_back(std::move(p));
    }
  }
  // The base with an f32 KV cache is the reference; without f32 among the KV types no point is
  // marked as the base, and the base weights' points show their KLD against it like the rest.
  quant::write_report(rep, c.dir);
  std::printf("%s\n", quant::recommendation(rep, c.min_top1).c_str());
  std::printf("wrote %s/report.html, report.md, report.json\n", c.dir.c_str());
  return 0;
}

}  // namespace

Command add_tradeoff(CLI::App& app) {
  auto c = std::make_shared<TradeoffCli>();
  CLI::App* cmd = app.add_subcommand(
      "tradeoff", "quantize a model to several weight and KV-cache types and report what each costs "
                  "(memory, accuracy against the base, speed) as JSON, Markdown and an HTML page");
  cmd->add_option("-m,--model", c->model, "base GGUF (F32/F16/BF16 weights)")->required()->check(CLI::ExistingFile);
  cmd->add_option("-f,--file", c->text, "text to measure perplexity and KL divergence on")->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--out", c->dir, "directory for the quantized files (reused on later runs) and the report")->required();
  cmd->add_option("--types", c->types,
                  "comma-separated weight types: triad quantize mixes (Q4_K_M, ...) and online types (" +
                      quant::weight_type_names() + ")")->capture_default_str();
  cmd->add_option("--kv-types", c->kv_types, "comma-separated KV cache types: f16, bf16, f32, q8_0, fp8_e4m3, fp8_e5m2")
      ->capture_default_str();
  cmd->add_option("--imatrix", c->imatrix, "importance matrix for the quantized files (triad imatrix)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--budget", c->budget, "memory budget for weights + KV cache")->capture_default_str();
  cmd->add_option("--seq-len", c->seq_len, "tokens per sequence when counting how many fit in the budget")
      ->check(CLI::Range(1, 1 << 24))->capture_default_str();
  cmd->add_option("-c,--ctx", c->ctx, "tokens per perplexity chunk")->check(CLI::Range(16, 1 << 16))->capture_default_str();
  cmd->add_option("--chunks", c->chunks, "chunks of text to score (0: all)")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  cmd->add_option("--tg-tokens", c->tg_tokens, "tokens generated per speed measurement (0: skip speed)")
      ->check(CLI::Range(0, 4096))->capture_default_str();
  cmd->add_option("--streams", c->streams, "sequences decoding together for the batched throughput")
      ->check(CLI::Range(1, 256))->capture_default_str();
  cmd->add_option("--min-top1", c->min_top1, "top-1 agreement the recommendation asks for")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  cmd->add_option("-t,--threads", c->threads, "worker threads (default: physical cores)")->check(CLI::Range(0, 1024));
  return [c] { return run(*c); };
}

}  // namespace triad::app
