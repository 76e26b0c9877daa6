// Vocab::from_tokenizer, apart so that the grammar core (and its fuzz target) needs no tokenizer.
#include <algorithm>

#include "grammar/vocab.h"
#include "tokenizer/tokenizer.h"

namespace triad::grammar {

std::shared_ptr<const Vocab> Vocab::from_tokenizer(const Tokenizer& tok, const std::vector<int32_t>& also_render) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> pieces(static_cast<size_t>(n));
  std::vector<char> gen(static_cast<size_t>(n), 0);
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < n; ++id) {
    const TokenAttr a = tok.token_attr(id);
    if (tok.is_end_of_generation(id)) eog.push_back(id);
    const bool rendered = std::find(also_render.begin(), also_render.end(), id) != also_render.end();
    if (a == TokenAttr::kNormal || a == TokenAttr::kUserDefined || a == TokenAttr::kByte || rendered) {
      pieces[static_cast<size_t>(id)] = tok.token_piece(id, rendered);
      gen[static_cast<size_t>(id)] = 1;
    }
  }
  return std::make_shared<Vocab>(std::move(pieces), gen, std::move(eog));
}

}  // namespace triad::grammar
