// A model and its tokenizer loaded together, with progress logging.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace triad::app {

struct LoadedModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  // Context size to use: `requested` when > 0, else min(the model's trained context, 4096).
  int32_t context_for(int requested) const;
};

LoadedModel load_model(const std::string& path);

}  // namespace triad::app
