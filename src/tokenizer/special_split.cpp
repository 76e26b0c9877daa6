// Special-token splitting (see special_split.h).
// Thread-safety: build() writes the matcher; split() only reads it.
#include "tokenizer/special_split.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <utility>

namespace triad::tok {

namespace {

bool is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

void SpecialMatcher::build(const Vocab& v) {
  n_specials_ = v.specials.size();
  // Build with a hash map of edges, then flatten it.
  std::unordered_map<uint64_t, int32_t> edges;  // (node << 8 | byte) -> child
  terminal_.assign(1, -1);
  for (size_t rank = 0; rank < v.specials.size(); ++rank) {
    int32_t node = 0;
    for (unsigned char c : v.text[v.specials[rank]]) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = edges.find(key);
      if (it == edges.end()) {
        const auto child = static_cast<int32_t>(terminal_.size());
        terminal_.push_back(-1);
        it = edges.emplace(key, child).first;
      }
      node = it->second;
    }
    terminal_[node] = static_cast<int32_t>(rank);  // texts are unique, so one rank per node
  }
  std::vector<std::pair<uint64_t, int32_t>> sorted(edges.begin(), edges.end());
  std::sort(sorted.begin(), sorted.end());
  first_.assign(terminal_.size(), 0);
  count_.assign(terminal_.size(), 0);
  edge_byte_.resize(sorted.size());
  edge_child_.resize(sorted.size());
  std::fill(std::begin(root_), std::end(root_), -1);
  for (size_t e = 0; e < sorted.size(); ++e) {
    const auto node = static_cast<size_t>(sorted[e].first >> 8);
    const auto byte = static_cast<unsigned char>(sorted[e].first & 0xFF);
    if (count_[node]++ == 0) first_[node] = static_cast<uint32_t>(e);
    edge_byte_[e] = byte;
    edge_child_[e] = sorted[e].second;
    if (node == 0) root_[byte] = sorted[e].second;
  }
}

int32_t SpecialMatcher::child(int32_t node, unsigned char c) const {
  if (node == 0) return root_[c];
  const size_t lo = first_[node], hi = lo + count_[node];
  const auto* b = edge_byte_.data();
  const auto* it = std::lower_bound(b + lo, b + hi, c);
  return (it != b + hi && *it == c) ? edge_child_[it - b] : -1;
}

std::vector<int32_t> SpecialMatcher::occurring(std::string_view text) const {
  std::vector<int32_t> ranks;
  if (n_specials_ == 0) return ranks;
  std::vector<uint8_t> seen(n_specials_, 0);
  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      const int32_t r = terminal_[node];
      if (r >= 0 && !seen[r]) {
        seen[r] = 1;
        ranks.push_back(r);
      }
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<Fragment> SpecialMatcher::split(const Vocab& v, std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t rank : occurring(text)) {
    const int32_t id = v.specials[rank];
    const uint16_t attr = v.attr[id];
    if (!parse_special && (attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view tok = v.text[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t off = f.off, len = f.len;
      while (true) {
        const size_t p = text.substr(off, len).find(tok);
        if (p == std::string_view::npos) {
          if (len > 0) next.push_back({-1, off, len});
          break;
        }
        size_t left = p;
        if (attr & kAttrLstrip)
          while (left > 0 && is_ascii_space(text[off + left - 1])) --left;
        if (left > 0) next.push_back({-1, off, left});
        next.push_back({id, off + p, tok.size()});
        size_t roff = off + p + tok.size();
        size_t rlen = off + len - roff;
        if (attr & kAttrRstrip) {
          while (rlen > 0 && is_ascii_space(text[roff])) {
            ++roff;
            --rlen;
          }
        }
        off = roff;
        len = rlen;
      }
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace triad::tok
