// Command-line flags of the serving engine, shared by `run`, `bench` and `bench serve`.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_config.h"
#include "loaded_model.h"

namespace triad::app {

struct EngineOptions {
  std::string kv_memory;           // e.g. "2GiB"; empty = default share of free RAM
  int block_size = 16;
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
  int max_batched_tokens = 256;
  int max_seqs = 16;
  bool no_prefix_caching = false;
  bool batch_invariant = false;    // --batch-invariant (kernels::set_matmul_batch_invariant)
  std::string speculative = "ngram";  // --speculative off|ngram|draft (EngineConfig::speculative)
  std::string draft_model;         // --draft-model FILE (with --speculative draft)
  std::string draft_kv_memory;     // --draft-kv-memory SIZE
  int num_speculative_tokens = 8;
  int spec_ngram_min = 2, spec_ngram_max = 4;
  int spec_max_running = 16;

  // The defaults with speculative decoding off (the benchmarks' default).
  static EngineOptions plain_decoding() {
    EngineOptions e;
    e.speculative = "off";
    return e;
  }

  void add_to(CLI::App& cmd);
  // The engine configuration for `lm` with `threads` threads and a context of `ctx` tokens
  // (0: the default).
  engine::EngineConfig make(const LoadedModel& lm, int threads, int ctx) const;
  // With --speculative draft: loads --draft-model (else returns an empty LoadedModel).
  LoadedModel load_draft(int threads) const;
  // Whether `draft` can draft for `target`: the same vocabulary, token for token.
  static bool same_vocabulary(const LoadedModel& draft, const LoadedModel& target);
};

// Parses a byte size: a number with an optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB,
// or K/M/G/T meaning KiB/MiB/GiB/TiB). Throws triad::Error on anything else.
uint64_t parse_byte_size(const std::string& text);

// The end-of-generation token ids of a tokenizer.
std::vector<int32_t> end_of_generation_ids(const Tokenizer& tok);

}  // namespace triad::app
