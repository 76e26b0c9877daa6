#include "engine_options.h"

#include <cctype>
#include <cmath>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "model/kv_storage.h"

namespace triad::app {

void EngineOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--kv-cache-memory", kv_memory,
                 "KV cache budget, e.g. 2GiB (default: a quarter of available RAM, capped at what "
                 "--max-seqs full-length requests can use)");
  cmd.add_option("--kv-block-size", block_size, "tokens per KV cache block")->check(CLI::Range(1, 1024));
  const std::vector<std::string> kv_types = {"f16", "bf16", "f32", "q8_0", "fp8_e4m3", "fp8_e5m2"};
  cmd.add_option("--cache-type-k", cache_type_k,
                 "K cache type: f16, bf16, f32, q8_0 (8.5 bits), fp8_e4m3 or fp8_e5m2 (8 bits, unscaled)")
      ->check(CLI::IsMember(kv_types));
  cmd.add_option("--cache-type-v", cache_type_v, "V cache type: as --cache-type-k")
      ->check(CLI::IsMember(kv_types));
  cmd.add_option("-b,--max-batched-tokens", max_batched_tokens,
                 "tokens computed per engine step over all requests (prefill chunk budget)")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--max-seqs", max_seqs, "requests running at once")->check(CLI::Range(1, 4096));
  cmd.add_flag("--no-prefix-caching", no_prefix_caching, "turn automatic prefix caching off");
  cmd.add_flag("--batch-invariant", batch_invariant,
               "make every token's result bitwise independent of what shares its step (batch size, prefix-cache "
               "hits) with --no-repack on AVX-512 CPUs too, whose Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ4_NL/IQ4_XS/MXFP4 "
               "kernels on the file's GGUF layout otherwise depend on it; they then run their AVX2 kernels (slower prompts). "
               "Without --no-repack (the default: weights re-laid at load), and on scalar and AVX2 CPUs, results always are");
  cmd.add_option("--speculative", speculative,
                 "speculative decoding: ngram (prompt lookup: each step drafts the next tokens from the request's "
                 "own context and verifies them in one pass, so outputs are those without it; 1.1-3x faster "
                 "decode where answers repeat their context), draft (a --draft-model drafts them) or off. Default: ngram (off for `bench`, whose "
                 "figures measure plain decoding). A request may override it (num_speculative_tokens: 0..32, or "
                 "a `prediction`)")
      ->check(CLI::IsMember({"off", "ngram", "draft"}));
  cmd.add_option("--draft-model", draft_model,
                 "with --speculative draft: a small GGUF model of the same vocabulary (e.g. Qwen2.5-Coder-0.5B for "
                 "the 1.5B) that drafts each step's tokens greedily; a request's `prediction` is still looked up "
                 "first");
  cmd.add_option("--draft-kv-memory", draft_kv_memory,
                 "K/V budget of the draft model, e.g. 512MiB (default: room for as many tokens as the main K/V pool "
                 "holds)");
  cmd.add_option("--num-speculative-tokens", num_speculative_tokens,
                 "draft tokens per step when speculating (default 8; a request may ask for up to 32)")
      ->check(CLI::Range(1, engine::kMaxSpeculativeTokens));
  cmd.add_option("--spec-ngram-min", spec_ngram_min, "shortest context suffix a prompt-lookup draft matches (default 2)")
      ->check(CLI::Range(1, 64));
  cmd.add_option("--spec-ngram-max", spec_ngram_max, "longest context suffix a prompt-lookup draft tries first (default 4)")
      ->check(CLI::Range(1, 64));
  cmd.add_option("--spec-max-running", spec_max_running,
                 "no drafts in a step while more requests than this run (default 16: on two cores drafting "
                 "still paid at 16 streams, BENCHMARKS.md)")
      ->check(CLI::Range(0, 4096));
}

uint64_t parse_byte_size(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  TRIAD_CHECK(i > 0, "bad size '", text, "' (expected e.g. 512MiB or 2GiB)");
  double v = 0;
  try {
    v = std::stod(text.substr(0, i));
  } catch (const std::exception&) {
    fail("bad size '", text, "'");
  }
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double mul = 0;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kib") mul = 1024.0;
  else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") mul = 1e3;
  else if (unit == "mb") mul = 1e6;
  else if (unit == "gb") mul = 1e9;
  else if (unit == "tb") mul = 1e12;
  else fail("bad size unit '", text.substr(i), "' in '", text, "'");
  const double bytes = v * mul;
  TRIAD_CHECK(std::isfinite(bytes) && bytes >= 1 && bytes < 1e18, "size '", text, "' is out of range");
  return static_cast<uint64_t>(bytes);
}

std::vector<int32_t> end_of_generation_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_end_of_generation(id)) ids.push_back(id);
  return ids;
}

engine::EngineConfig EngineOptions::make(const LoadedModel& lm, int threads, int ctx) const {
  engine::EngineConfig c;
  c.threads = threads;
  c.block_size = block_size;
  c.k_type = parse_kv_dtype(cache_type_k);
  c.v_type = parse_kv_dtype(cache_type_v);
  c.kv_memory_bytes = kv_memory.empty() ? 0 : parse_byte_size(kv_memory);
  c.max_batched_tokens = max_batched_tokens;
  c.max_seqs = max_seqs;
  c.max_model_len = lm.context_for(ctx);
  c.enable_prefix_caching = !no_prefix_caching;
  c.model_id = lm.model->file().path();
  c.eog_ids = end_of_generation_ids(*lm.tokenizer);
  c.speculative = speculative != "off";
  c.draft_kv_memory_bytes = draft_kv_memory.empty() ? 0 : parse_byte_size(draft_kv_memory);
  c.num_speculative_tokens = num_speculative_tokens;
  c.ngram = engine::NgramLookup{spec_ngram_min, spec_ngram_max};
  c.spec_max_running = spec_max_running;
  // Process-wide: every engine of the process computes with the same kernels.
  if (batch_invariant) kernels::set_matmul_batch_invariant(true);
  c.validate();
  return c;
}

LoadedModel EngineOptions::load_draft(int threads) const {
  if (speculative != "draft") {
    TRIAD_CHECK(draft_model.empty(), "--draft-model needs --speculative draft");
    return {};
  }
  TRIAD_CHECK(!draft_model.empty(), "--speculative draft needs --draft-model FILE");
  return load_model(draft_model, {}, threads);
}

bool EngineOptions::same_vocabulary(const LoadedModel& draft, const LoadedModel& target) {
  const Tokenizer& a = *draft.tokenizer;
  const Tokenizer& b = *target.tokenizer;
  if (draft.model->config().n_vocab != target.model->config().n_vocab || a.n_vocab() != b.n_vocab()) return false;
  for (int32_t id = 0; id < a.n_vocab(); ++id)
    if (a.token_text(id) != b.token_text(id)) return false;
  return true;
}

}  // namespace triad::app
