// Unigram tokenization (SentencePiece "unigram" models: T5, XLM-R, multilingual E5 / MiniLM;
// llama.cpp's "t5" vocabulary, its llm_tokenizer_ugm): the text is normalized (the model's
// precompiled character map, spaces as "▁", an optional space prefix, optionally merged
// whitespace), then split by Viterbi into the pieces whose scores sum highest; a character no
// piece starts with becomes the unknown token (score: the lowest piece score - 10), and
// consecutive unknowns collapse into one.
//
// The precompiled charsmap (tokenizer.ggml.precompiled_charsmap, SentencePiece's format): a
// little-endian uint32 byte size of a darts-clone double array of uint32 units, the array, then
// NUL-terminated replacement strings. Its bytes are untrusted: every unit index and replacement
// offset is checked, and a lookup that leaves the array (or a replacement without its NUL) counts
// as no match, so a malformed map changes tokens but can never read out of bounds.
// Properties: O(n * L * log V) for n text bytes and pieces of at most L bytes (a binary search
// per piece byte over the pieces sorted by text). Thread-safety: all state is local.
#include <algorithm>
#include <cfloat>
#include <cstring>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace triad::tok {

namespace {

// Read-only view of the charsmap's double array and replacement strings.
class Charsmap {
 public:
  explicit Charsmap(const std::string& blob) {
    if (blob.size() < 4) return;
    uint32_t bytes = 0;
    std::memcpy(&bytes, blob.data(), 4);
    if (bytes % 4 != 0 || bytes > blob.size() - 4) return;
    units_ = reinterpret_cast<const unsigned char*>(blob.data()) + 4;
    n_units_ = bytes / 4;
    repl_ = blob.data() + 4 + bytes;
    n_repl_ = blob.size() - 4 - bytes;
  }

  // Longest key that prefixes s[off..]: its replacement and length, or false.
  bool longest_prefix(std::string_view s, size_t off, std::string_view& repl, size_t& len) const {
    if (n_units_ == 0) return false;
    uint32_t node = 0, u = 0;
    if (!unit(node, u)) return false;
    node = base(u);
    size_t best_len = 0;
    uint32_t best_value = 0;
    for (size_t p = off; p < s.size(); ++p) {
      const auto c = static_cast<unsigned char>(s[p]);
      if (c == 0) break;
      node ^= c;
      if (!unit(node, u) || (u & ((1u << 31) | 0xFFu)) != c) break;
      const bool leaf = (u >> 8) & 1;
      node ^= base(u);
      if (leaf) {
        uint32_t v = 0;
        if (!unit(node, v)) break;
        best_len = p - off + 1;
        best_value = v & ((1u << 31) - 1);
      }
    }
    if (best_len == 0 || best_value >= n_repl_) return false;
    const void* end = std::memchr(repl_ + best_value, 0, n_repl_ - best_value);
    if (end == nullptr) return false;
    repl = std::string_view(repl_ + best_value, static_cast<size_t>(static_cast<const char*>(end) - (repl_ + best_value)));
    len = best_len;
    return true;
  }

 private:
  bool unit(uint32_t i, uint32_t& u) const {
    if (i >= n_units_) return false;
    std::memcpy(&u, units_ + 4 * static_cast<size_t>(i), 4);
    return true;
  }
  static uint32_t base(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

  const unsigned char* units_ = nullptr;
  size_t n_units_ = 0;
  const char* repl_ = nullptr;
  size_t n_repl_ = 0;
};

// llama.cpp's normalization: each charsmap match (else one UTF-8 character, else U+FFFD for
// one invalid byte) is emitted byte by byte, with spaces as "▁"; remove_extra_whitespaces drops
// runs of spaces and puts one "▁" before every word, add_space_prefix one before the first.
std::string normalize(const Vocab& v, std::string_view text) {
  const Charsmap map(v.charsmap);
  const std::string_view space = v.escape_whitespaces ? kSpaceMark : std::string_view(" ");
  const bool prepend = v.add_space_prefix, merge = v.remove_extra_whitespaces;
  std::string out;
  out.reserve(text.size() + text.size() / 2 + 3);
  bool prepended = false, in_word = false;
  size_t off = 0;
  while (off < text.size()) {
    std::string_view piece;
    size_t consumed = 0;
    if (!map.longest_prefix(text, off, piece, consumed)) {
      size_t pos = off;
      const uint32_t cp = utf8_decode(text, pos);
      consumed = pos - off;
      // An invalid byte (or a real U+FFFD) is U+FFFD.
      piece = cp == 0xFFFD ? std::string_view("\xEF\xBF\xBD") : text.substr(off, consumed);
    }
    for (const char c : piece) {
      if (c != ' ') {
        if (!in_word) {
          in_word = true;
          if ((prepend && !prepended) || merge) {
            out.append(space);
            prepended = true;
          }
        }
        out.push_back(c);
      } else {
        in_word = false;
        if (!merge) out.append(space);
      }
    }
    off += consumed;
  }
  return out;
}

struct Best {
  int32_t id;
  size_t from;
  double score;
};

}  // namespace

void ugm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  const std::string s = normalize(v, text);
  const size_t n = s.size();
  if (n == 0) return;
  std::vector<Best> best(n + 1, Best{v.unk, 0, -DBL_MAX});
  best[0] = Best{v.unk, 0, 0.0};
  const std::vector<int32_t>& sorted = v.ugm_sorted;
  for (size_t i = 0; i < n;) {
    const size_t cp_len = std::min(utf8_len_from_lead(static_cast<unsigned char>(s[i])), n - i);
    const double here = best[i].score;
    bool single_char_piece = false;
    // Pieces that prefix s[i..]: narrow the sorted range one byte at a time.
    size_t lo = 0, hi = sorted.size();
    for (size_t k = 0; i + k < n && lo < hi; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      // Within [lo, hi) every piece shares s[i, i + k); those of length k sort first.
      auto key = [&](int32_t id) -> int {
        const std::string& t = v.text[static_cast<size_t>(id)];
        return t.size() > k ? static_cast<unsigned char>(t[k]) : -1;
      };
      const auto first = sorted.begin() + static_cast<std::ptrdiff_t>(lo), last = sorted.begin() + static_cast<std::ptrdiff_t>(hi);
      const auto b = std::partition_point(first, last, [&](int32_t id) { return key(id) < c; });
      const auto e = std::partition_point(b, last, [&](int32_t id) { return key(id) <= c; });
      lo = static_cast<size_t>(b - sorted.begin());
      hi = static_cast<size_t>(e - sorted.begin());
      if (lo < hi && v.text[static_cast<size_t>(sorted[lo])].size() == k + 1) {
        const int32_t id = sorted[lo];
        if (k + 1 == cp_len) single_char_piece = true;
        const double sc = here + ((v.attr[static_cast<size_t>(id)] & kAttrUserDefined) ? 0.0 : v.score[static_cast<size_t>(id)]);
        Best& b2 = best[i + k + 1];
        if (sc > b2.score) b2 = Best{id, i, sc};
      }
    }
    if (!single_char_piece) {
      const double sc = here + v.ugm_unk_score;
      Best& b2 = best[i + cp_len];
      if (sc > b2.score) b2 = Best{v.unk, i, sc};
    }
    i += cp_len;
  }
  // Back from the end; consecutive unknowns become one.
  std::vector<int32_t> rev;
  bool prev_unknown = false;
  for (size_t at = n;;) {
    const Best& b = best[at];
    const bool unknown = b.id == v.unk;
    if (!(prev_unknown && unknown)) rev.push_back(b.id);
    if (b.from == 0) break;
    prev_unknown = unknown;
    at = b.from;
  }
  out.insert(out.end(), rev.rbegin(), rev.rend());
}

}  // namespace triad::tok
