// A model and its tokenizer loaded together, with progress logging.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace triad::app {

struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  // Context size to use: `requested` when > 0, else min(the model's trained context, 4096).
  int32_t context_for(int requested) const;
};

// Loads a model on `threads` threads (0: one per physical core): a non-empty weight_type
// quantizes its layer matrices at load time (quant/online.h), and the AVX-512 kernels' re-layout
// (Model::load) runs on as many.
LoadedModel load_model(const std::string& path, const std::string& weight_type = {}, int threads = 0);

// A text file cut into chunks the way llama.cpp's perplexity tool cuts it: tokenized with BOS in
// front (when the vocabulary adds one), then whole chunks of n_ctx tokens, at most max_chunks
// of them (0: all). Throws triad::Error when the file cannot be read or holds less than one
// chunk.
struct TextChunks {
  std::vector<int32_t> tokens;  // the whole file's tokens
  int32_t n_ctx = 0;
  int64_t n_chunks = 0;
};
TextChunks chunk_text_file(const Tokenizer& tok, const std::string& path, int requested_ctx,
                           int max_chunks);

}  // namespace triad::app
