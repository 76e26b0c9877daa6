#include "loaded_model.h"

#include <algorithm>

#include "base/log.h"
#include "base/timer.h"
#include "gguf/gguf_file.h"

namespace triad::app {

int32_t LoadedModel::context_for(int requested) const {
  if (requested > 0) return requested;
  return std::min<int32_t>(model->config().n_ctx_train, 4096);
}

LoadedModel load_model(const std::string& path) {
  Timer t;
  log_info("loading ", path);
  LoadedModel m;
  m.model = Model::load(path);
  m.tokenizer = Tokenizer::from_gguf(m.model->file());
  const ModelConfig& c = m.model->config();
  TRIAD_CHECK(m.tokenizer->n_vocab() <= c.n_vocab, "tokenizer has ", m.tokenizer->n_vocab(),
              " tokens but the model's embedding has only ", c.n_vocab, " rows");
  log_info(c.summary());
  log_info("weights: ", m.model->weights().matrix_bytes / (1024.0 * 1024.0), " MiB of matrices; loaded in ",
           t.seconds(), " s");
  return m;
}

}  // namespace triad::app
