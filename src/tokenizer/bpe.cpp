// Byte-pair encoding over pre-tokenized words (llama.cpp's llm_tokenizer_bpe_session).
// Properties: each word is merged independently; pairs are ranked by their position in
// tokenizer.ggml.merges (lower first, ties leftmost); O(m log m) per word of m characters.
// Thread-safety: all state is local.
#include <queue>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace triad::tok {

namespace {

struct Symbol {
  int prev;
  int next;
  const char* text;
  size_t n;
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t size;
};

struct BigramOrder {  // priority: lower rank, then the leftmost pair
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class Merger {
 public:
  explicit Merger(const Vocab& v) : v_(v) {}

  void word(std::string_view w, std::vector<int32_t>& out) {
    if (v_.ignore_merges || (v_.pre == "gemma4" && w.find_first_not_of('\n') == std::string_view::npos)) {
      const int32_t id = v_.find(w);  // the whole word is a token: no merging
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    sym_.clear();
    for (size_t off = 0; off < w.size();) {
      const size_t n = std::min(utf8_len_from_lead(static_cast<unsigned char>(w[off])), w.size() - off);
      const int idx = static_cast<int>(sym_.size());
      sym_.push_back({idx - 1, off + n == w.size() ? -1 : idx + 1, w.data() + off, n});
      off += n;
    }
    queue_ = {};
    for (int i = 1; i < static_cast<int>(sym_.size()); ++i) try_add(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& l = sym_[b.left];
      Symbol& r = sym_[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) sym_[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    for (int i = sym_.empty() ? -1 : 0; i != -1; i = sym_[i].next) emit(std::string_view(sym_[i].text, sym_[i].n), out);
  }

 private:
  void try_add(int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t rank = v_.merge_rank(key_, std::string_view(sym_[left].text, sym_[left].n),
                                       std::string_view(sym_[right].text, sym_[right].n));
    if (rank < 0) return;
    queue_.push({left, right, rank, sym_[left].n + sym_[right].n});
  }

  void emit(std::string_view piece, std::vector<int32_t>& out) const {
    const int32_t id = v_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    // No token for the merged piece: fall back byte by byte (single-byte texts for byte-level
    // vocabularies, <0xNN> tokens otherwise); bytes without a token are dropped, as in llama.cpp.
    static const char kHex[] = "0123456789ABCDEF";
    for (char c : piece) {
      int32_t bid;
      if (v_.byte_encode) {
        bid = v_.find(std::string_view(&c, 1));
      } else {
        const auto b = static_cast<unsigned char>(c);
        const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
        bid = v_.find(std::string_view(name, 6));
      }
      if (bid >= 0) out.push_back(bid);
    }
  }

  const Vocab& v_;
  std::vector<Symbol> sym_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  std::string key_;
};

}  // namespace

void bpe_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<std::string_view> words;
  v.pretokenizer.split(text, words);
  Merger merger(v);
  std::string encoded;
  for (std::string_view w : words) {
    if (v.byte_encode) {
      encoded.clear();
      byte_encode_append(encoded, w);
      merger.word(encoded, out);
    } else {
      merger.word(w, out);
    }
  }
}

}  // namespace triad::tok
