// The vocabulary's byte tries and token masks (vocab.h).
#include "grammar/vocab.h"

#include <algorithm>
#include <bit>
#include <cstddef>

namespace triad::grammar {

Vocab::Vocab(std::vector<std::string> pieces, const std::vector<char>& generable, std::vector<int32_t> eog_ids)
    : pieces_(std::move(pieces)), eog_(std::move(eog_ids)) {
  std::vector<int32_t> ids;
  ids.reserve(pieces_.size());
  chars_.assign(pieces_.size(), 0);
  up_to_.assign(kLongChars, std::vector<uint64_t>((pieces_.size() + 63) / 64, 0));
  for (size_t i = 0; i < pieces_.size(); ++i) {
    std::string& p = pieces_[i];
    if (i >= generable.size() || !generable[i] || p.size() >= 4096) p.clear();
    if (p.empty()) continue;
    ids.push_back(static_cast<int32_t>(i));
    const auto chars = static_cast<int>(
        std::count_if(p.begin(), p.end(), [](char ch) { return (static_cast<uint8_t>(ch) & 0xC0) != 0x80; }));
    chars_[i] = static_cast<uint8_t>(std::min(chars, 255));
    max_chars_ = std::max(max_chars_, chars);
    if (chars >= kLongChars) long_ids_.push_back(static_cast<int32_t>(i));
    for (int n = chars; n < kLongChars; ++n) up_to_[static_cast<size_t>(n)][i >> 6] |= uint64_t{1} << (i & 63);
  }
  trie_ = build_trie(pieces_, std::move(ids));
  long_trie_ = build_trie(pieces_, long_ids_);
}

Vocab::Trie Vocab::build_trie(const std::vector<std::string>& pieces, std::vector<int32_t> order) {
  Trie t;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int c = pieces[static_cast<size_t>(a)].compare(pieces[static_cast<size_t>(b)]);
    return c != 0 ? c < 0 : a < b;
  });
  auto clamp8 = [](size_t v) { return static_cast<uint8_t>(std::min<size_t>(v, 255)); };
  t.nodes.push_back(Node{0, 0, 0, 0, 0, 0, 0, 0});
  std::vector<uint32_t> path{0};
  std::vector<size_t> path_chars{0};
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = pieces[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev) {
      const size_t lim = std::min({prev->size(), s.size(), path.size() - 1});
      while (common < lim && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() - 1 > common) {
      t.nodes[path.back()].end = static_cast<uint32_t>(t.nodes.size());
      path.pop_back();
      path_chars.pop_back();
    }
    if (path.size() - 1 == s.size() && t.nodes[path.back()].n_tok == UINT16_MAX) continue;  // absurd duplicates
    for (size_t k = common; k < s.size(); ++k) {
      const size_t chars = path_chars.back() + ((static_cast<uint8_t>(s[k]) & 0xC0) != 0x80 ? 1 : 0);
      t.nodes.push_back(Node{static_cast<uint8_t>(s[k]), 0, clamp8(chars), 0, static_cast<uint16_t>(k + 1), 0, 0,
                             static_cast<uint32_t>(t.tokens.size())});
      path.push_back(static_cast<uint32_t>(t.nodes.size() - 1));
      path_chars.push_back(chars);
    }
    t.tokens.push_back(id);
    ++t.nodes[path.back()].n_tok;
    const uint8_t chars = clamp8(path_chars.back());
    for (uint32_t n : path) t.nodes[n].sub_chars = std::max(t.nodes[n].sub_chars, chars);
    t.max_depth = std::max(t.max_depth, static_cast<int>(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    t.nodes[path.back()].end = static_cast<uint32_t>(t.nodes.size());
    path.pop_back();
  }
  return t;
}

std::vector<int32_t> TokenMask::ids() const {
  std::vector<int32_t> out;
  for (size_t w = 0; w < bits.size(); ++w)
    for (uint64_t b = bits[w]; b; b &= b - 1) out.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(b))));
  return out;
}

size_t TokenMask::count() const {
  size_t n = 0;
  for (uint64_t w : bits) n += static_cast<size_t>(std::popcount(w));
  return n;
}

}  // namespace triad::grammar
