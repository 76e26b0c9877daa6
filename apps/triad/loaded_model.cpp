#include "loaded_model.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "catalog/catalog.h"
#include "convert/hf_convert.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/timer.h"
#include "gguf/gguf_file.h"
#include "quant/online.h"

namespace triad::app {

int32_t LoadedModel::context_for(int requested) const {
  if (requested > 0) return requested;
  return std::min<int32_t>(model->config().n_ctx_train, 4096);
}

LoadedModel load_model(const std::string& path, const std::string& weight_type, int threads) {
  if (threads <= 0) threads = physical_cores();
  Timer t;
  log_info("loading ", path);
  LoadedModel m;
  std::optional<DType> online;
  if (!weight_type.empty()) online = quant::parse_weight_type(weight_type);
  // A catalog name is pulled once (catalog/catalog.h); a Hugging Face folder is converted once
  // and its GGUF cached (convert/hf_convert.h).
  const std::string local = catalog::resolve_model(path, [](const std::string& s) { log_info(s); });
  const std::string file = convert::is_hf_folder(local)
                               ? convert::converted_model_path(local, [](const std::string& s) { log_info(s); })
                               : local;
  // Files are read in ahead of use, so the model starts serving warm; when that takes over a
  // second (a big file, a cold disk) the progress is shown every 10%.
  int last_decile = 0;
  const Timer read_t;
  auto progress = [&](uint64_t done, uint64_t total) {
    const int decile = static_cast<int>(done * 10 / std::max<uint64_t>(total, 1));
    if (decile == last_decile || read_t.seconds() < 1.0) return;
    last_decile = decile;
    log_info("loading: ", decile * 10, "% of ", static_cast<double>(total) / (1 << 20), " MiB (",
             read_t.seconds(), " s)");
  };
  m.model = Model::load(file, quant::online_transform(online, threads), progress, threads);
  m.tokenizer = Tokenizer::from_gguf(m.model->file());
  const ModelConfig& c = m.model->config();
  TRIAD_CHECK(m.tokenizer->n_vocab() <= c.n_vocab, "tokenizer has ", m.tokenizer->n_vocab(),
              " tokens but the model's embedding has only ", c.n_vocab, " rows");
  log_info(c.summary());
  log_info("weights: ", m.model->weights().matrix_bytes / (1024.0 * 1024.0), " MiB of matrices; loaded in ",
           t.seconds(), " s");
  return m;
}

TextChunks chunk_text_file(const Tokenizer& tok, const std::string& path, int requested_ctx,
                           int max_chunks) {
  std::ifstream in(path, std::ios::binary);
  TRIAD_CHECK(in.good(), "cannot read ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  TextChunks c;
  c.tokens = tok.encode(ss.str(), /*add_special=*/true, /*parse_special=*/false);
  c.n_ctx = requested_ctx > 0 ? requested_ctx : 512;
  TRIAD_CHECK(c.n_ctx >= 8, "--ctx must be at least 8");
  c.n_chunks = static_cast<int64_t>(c.tokens.size()) / c.n_ctx;
  TRIAD_CHECK(c.n_chunks > 0, "the text has ", c.tokens.size(), " tokens, fewer than one ", c.n_ctx,
              "-token chunk");
  if (max_chunks > 0) c.n_chunks = std::min<int64_t>(c.n_chunks, max_chunks);
  return c;
}

}  // namespace triad::app
