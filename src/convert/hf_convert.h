// Hugging Face model folder -> GGUF (`triad convert`, issue 15): config.json, the safetensors
// weights (one file or shards) and tokenizer.json / tokenizer_config.json become one GGUF file
// with llama.cpp's metadata keys, tensor names and layouts, so that Triad and llama.cpp load it.
//
// Supported so far (anything else is a clear error naming what is missing):
// - architectures: Qwen2ForCausalLM (qwen2), Qwen3ForCausalLM (qwen3), LlamaForCausalLM and
//   MistralForCausalLM (llama: q/k rows permuted from Hugging Face's rotate-half layout to
//   GGML's interleaved one, as llama.cpp's converter does);
// - tokenizers: byte-level BPE in tokenizer.json (the pre-tokenizer recognised by its split
//   pattern: Qwen2's, Llama 3's, or GPT-2's plain byte-level one), with added tokens (special
//   ones as control tokens), BOS/EOS from tokenizer_config.json or config.json, and the chat
//   template from tokenizer_config.json or chat_template.jinja.
// - output types: f32, f16, bf16, q8_0 (1-D tensors, norms and biases, stay f32, as llama.cpp
//   keeps them).
// Tensors are streamed: each is read from the mapped safetensors, converted and written in turn,
// so memory stays near the largest tensor. Inputs are untrusted: the safetensors reader checks
// the files, every tensor's shape is checked against config.json, and the output is written to
// a temporary file renamed into place only when complete.
// Thread-safety: a conversion touches only its own objects.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tensor/dtype.h"

namespace triad::convert {

struct ConvertOptions {
  DType out_type = DType::kF16;  // kF32, kF16, kBF16 or kQ8_0
};

struct ConvertProgress {
  size_t index = 0, count = 0;  // tensor index (0-based) of count
  std::string hf_name, gguf_name;
  DType type = DType::kF32;
};

struct ConvertSummary {
  std::string architecture;
  size_t tensors = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
};

// Converts the folder `dir` into `out_path`. Throws triad::Error on anything it cannot convert.
ConvertSummary convert_hf(const std::string& dir, const std::string& out_path, const ConvertOptions& opt,
                          const std::function<void(const ConvertProgress&)>& progress = {});

// "f32" | "f16" | "bf16" | "q8_0" -> the type; throws triad::Error otherwise.
DType parse_out_type(const std::string& s);

// Whether `path` is a Hugging Face model folder (a directory with a config.json).
bool is_hf_folder(const std::string& path);

// `triad serve -m HF_DIR` (and run, bench ...): the folder converted once, cached as
// $TRIAD_HOME/converted/<folder name>-<key>.gguf (TRIAD_HOME defaults to ~/.cache/triad). The key
// is a SHA-256 of the converter's version and each input file's name, size and modification
// time, so an edited or replaced input converts again and an unchanged folder starts from the
// cache. Weights keep their precision (F32 -> f32, BF16 -> bf16, otherwise f16). Returns the
// GGUF path; `log` (when given) hears what happens.
std::string converted_model_path(const std::string& dir, const std::function<void(const std::string&)>& log = {});

}  // namespace triad::convert
