// IncrementalDecoder (see tokenizer.h): streams token pieces as valid UTF-8.
// Properties: holds back at most one incomplete trailing character (< 4 bytes); a sequence that
// can no longer complete is replaced by one U+FFFD per maximal ill-formed subpart.
// Thread-safety: one decoder per stream; the Tokenizer it reads is immutable.
#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace triad {

namespace {

// Moves the decodable prefix of `pending` to the result; at the end of the stream an
// incomplete tail becomes U+FFFD too.
std::string drain(std::string& pending, bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    size_t len = 0;
    const tok::Utf8Seq st = tok::utf8_classify(pending, pos, len);
    if (st == tok::Utf8Seq::kValid) {
      out.append(pending, pos, len);
    } else if (st == tok::Utf8Seq::kInvalid || final) {
      tok::utf8_append(out, tok::kReplacementChar);
    } else {
      break;  // incomplete: wait for the next piece
    }
    pos += len;
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tok, bool render_special, std::vector<int32_t> also_render)
    : tok_(tok), render_special_(render_special), also_render_(std::move(also_render)) {
  std::sort(also_render_.begin(), also_render_.end());
}

std::string IncrementalDecoder::push(int32_t id) {
  pending_ += tok_.token_piece(id, render_special_ || std::binary_search(also_render_.begin(), also_render_.end(), id));
  return drain(pending_, false);
}

std::string IncrementalDecoder::flush() { return drain(pending_, true); }

}  // namespace triad
