// A Hugging Face tokenizer as llama.cpp's GGUF tokenizer keys, for triad convert (hf_convert.h).
// tokenizer.json's model picks the GGUF tokenizer: WordPiece -> "bert" (phantom-space pieces,
// [CLS]/[SEP], normalizer flags), byte-level BPE -> "gpt2" (the split pattern named by
// tokenizer.ggml.pre), BPE with byte fallback (SentencePiece: Llama 2, Mistral, Gemma) ->
// "llama" with scores rebuilt from the merge order,
// Unigram (SentencePiece unigram: T5, XLM-R) -> "t5" with the precompiled charsmap; the chat
// template from tokenizer_config.json or chat_template.jinja. Anything else (unknown models,
// normalizers or split patterns) is a triad::Error naming it. Pure function of its inputs;
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"

namespace triad::convert {

// tok: tokenizer.json; tcfg: tokenizer_config.json (null when absent); dir: the folder (for
// chat_template.jinja); cfg: config.json (special ids when tokenizer_config.json names none);
// n_vocab: config.json's vocab_size (ids beyond the tokenizer's are padded, as llama.cpp pads).
void write_gguf_tokenizer(gguf::GgufWriter& w, const nlohmann::json& tok, const nlohmann::json& tcfg,
                          const std::filesystem::path& dir, const nlohmann::json& cfg, int64_t n_vocab);

}  // namespace triad::convert
