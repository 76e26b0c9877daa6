// SentencePiece-style tokenization (llama.cpp's llm_tokenizer_spm_session): bigram merging
// driven by token scores over UTF-8 characters, then byte fallback.
// Properties: O(n log n) in the text length; symbols stay contiguous in `text`, so every
// candidate pair is a view, never a copy. Thread-safety: all state is local.
#include <queue>

#include "tokenizer/algorithms.h"
#include "tokenizer/unicode.h"

namespace triad::tok {

namespace {

struct Symbol {
  int prev;
  int next;
  const char* text;
  size_t n;  // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

struct BigramOrder {  // priority: higher score, then the leftmost pair
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void spm_tokenize(const Vocab& v, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len_from_lead(static_cast<unsigned char>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, text.data() + off, n});
    off += n;
  }
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view pair(sym[left].text, sym[left].n + sym[right].n);
    const int32_t id = v.find(pair);
    if (id < 0) return;
    queue.push({left, right, v.score[id], pair.size()});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[i].next) {
    const std::string_view piece(sym[i].text, sym[i].n);
    const int32_t id = v.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback; a character whose bytes are not all in the vocabulary is one unknown token.
    bool all_bytes = true;
    for (char c : piece) all_bytes = all_bytes && v.byte_token[static_cast<unsigned char>(c)] >= 0;
    if (all_bytes) {
      for (char c : piece) out.push_back(v.byte_token[static_cast<unsigned char>(c)]);
    } else if (v.unk >= 0) {
      out.push_back(v.unk);
    }
  }
}

}  // namespace triad::tok
