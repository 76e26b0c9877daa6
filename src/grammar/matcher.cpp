// Grammar matcher and token masks (matcher.h).
#include "grammar/matcher.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <tuple>


namespace triad::grammar {

// ---- Constraint

Constraint::Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const Vocab> v, MatcherLimits lim)
    : grammar_(std::move(g)), vocab_(std::move(v)), limits_(lim) {}

Constraint::Stats Constraint::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

// ---- Matcher

Matcher::Matcher(std::shared_ptr<Constraint> c) : c_(std::move(c)), g_(c_->grammar()), v_(c_->vocab()) {
  nodes_.push_back(Node{UINT32_MAX, kAccept});  // kAccept
  nodes_.push_back(Node{UINT32_MAX, kBottom});  // kBottom
  for (uint32_t a : g_.alt_starts(g_.root())) expand(a, kAccept, state_.leaves, false, 0);
  dedupe(state_.leaves);
}

// Nodes are hash-consed: equal stacks get equal ids, so a state's stacks can be deduplicated by
// id. Without that, an ambiguous grammar such as (a+)+ would multiply equal stacks every step.
uint32_t Matcher::make_node(uint32_t pos, uint32_t parent, bool scratch) {
  const uint64_t key = static_cast<uint64_t>(pos) << 32 | parent;
  if (auto it = intern_.find(key); it != intern_.end()) return it->second;
  if (scratch) {
    if (auto it = scratch_intern_.find(key); it != scratch_intern_.end()) return it->second;
    scratch_.push_back(Node{pos, parent});
    const uint32_t id = kScratch | static_cast<uint32_t>(scratch_.size() - 1);
    scratch_intern_.emplace(key, id);
    return id;
  }
  if (nodes_.size() >= (kScratch >> 1)) throw GrammarError("grammar: the match state grew too large");
  nodes_.push_back(Node{pos, parent});
  const auto id = static_cast<uint32_t>(nodes_.size() - 1);
  intern_.emplace(key, id);
  return id;
}

void Matcher::truncate_scratch(size_t n) {
  for (size_t i = n; i < scratch_.size(); ++i)
    scratch_intern_.erase(static_cast<uint64_t>(scratch_[i].pos) << 32 | scratch_[i].parent);
  scratch_.resize(std::min(n, scratch_.size()));
}

void Matcher::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, bool scratch, int depth) {
  if (depth > c_->limits().max_expand_depth)
    throw GrammarError("grammar: rules nest more than " + std::to_string(c_->limits().max_expand_depth) +
                       " deep without matching a character");
  const std::vector<Elem>& el = g_.elems();
  while (true) {
    const Elem& e = el[pos];
    if (e.kind == ElemKind::kEndAlt || e.kind == ElemKind::kEndRule) {
      if (parent == kAccept || parent == kBottom) {
        out.push_back(parent);
        return;
      }
      const Node& p = node(parent);
      pos = p.pos;
      parent = p.parent;
      continue;
    }
    if (e.kind == ElemKind::kChars) {
      if (out.size() >= c_->limits().max_stacks)
        throw GrammarError("grammar: more than " + std::to_string(c_->limits().max_stacks) +
                           " ways to continue at once (the grammar is too ambiguous)");
      out.push_back(make_node(pos, parent, scratch));
      return;
    }
    // A rule reference: continue after it once the rule ends (directly with the parent when
    // the reference ends its alternative, so right recursion keeps the stack flat).
    const uint32_t cont = g_.is_end(pos + 1) ? parent : make_node(pos + 1, parent, scratch);
    for (uint32_t a : g_.alt_starts(e.value)) expand(a, cont, out, scratch, depth + 1);
    return;
  }
}

void Matcher::dedupe(std::vector<uint32_t>& leaves) const {
  if (leaves.size() < 2) return;
  auto key = [&](uint32_t id) -> uint64_t {
    if (id == kAccept || id == kBottom) return (uint64_t{UINT32_MAX} << 32) | id;
    const Node& n = node(id);
    return (static_cast<uint64_t>(n.pos) << 32) | n.parent;
  };
  std::sort(leaves.begin(), leaves.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  leaves.erase(std::unique(leaves.begin(), leaves.end(), [&](uint32_t a, uint32_t b) { return key(a) == key(b); }),
               leaves.end());
}

bool Matcher::advance_cp(const State& in, uint32_t cp, State& out, bool scratch) {
  out.leaves.clear();
  out.partial = 0;
  out.need = 0;
  for (uint32_t leaf : in.leaves) {
    if (leaf == kAccept || leaf == kBottom) continue;
    const Node n = node(leaf);
    if (g_.set_contains(g_.elems()[n.pos].value, cp)) expand(n.pos + 1, n.parent, out.leaves, scratch, 0);
  }
  dedupe(out.leaves);
  return !out.leaves.empty();
}

namespace {

// The code points a partial UTF-8 character can still become: `partial` holds its bits so far,
// `need` continuation bytes are missing and the next one lies in [next_lo, next_hi].
std::pair<uint32_t, uint32_t> partial_range(uint32_t partial, int need, uint8_t next_lo, uint8_t next_hi) {
  const int rest = 6 * (need - 1);
  const uint32_t lo = (partial << 6 | (next_lo & 0x3Fu)) << rest;
  const uint32_t hi = std::min<uint32_t>(((partial << 6 | (next_hi & 0x3Fu)) << rest) | ((1u << rest) - 1), 0x10FFFF);
  return {lo, hi};
}

}  // namespace

void Matcher::canonicalize_partial(State& s) const {
  // Representatives of the partial characters whose continuation bytes range over 80..BF:
  // C2 (need 1), E1 (need 2), F1 (need 3). Other lead bytes restrict the next byte and keep
  // their own states.
  if (s.need == 0 || s.next_lo != 0x80 || s.next_hi != 0xBF) return;
  const uint32_t rep = s.need == 1 ? 0x02u : 0x01u;
  if (s.partial == rep) return;
  const auto [lo, hi] = partial_range(s.partial, s.need, s.next_lo, s.next_hi);
  const auto [rlo, rhi] = partial_range(rep, s.need, s.next_lo, s.next_hi);
  for (uint32_t leaf : s.leaves) {
    const uint32_t set = g_.elems()[node(leaf).pos].value;
    if (!g_.set_covers(set, lo, hi) || !g_.set_covers(set, rlo, rhi)) return;
  }
  s.partial = rep;
}

bool Matcher::advance(const State& in, uint8_t b, State& out, bool scratch) {
  uint32_t partial;
  int need;
  uint8_t next_lo = 0x80, next_hi = 0xBF;
  if (in.need == 0) {
    if (b < 0x80) return advance_cp(in, b, out, scratch);
    if ((b & 0xE0) == 0xC0 && b >= 0xC2) {
      partial = b & 0x1Fu, need = 1;
    } else if ((b & 0xF0) == 0xE0) {
      partial = b & 0x0Fu, need = 2;
      if (b == 0xE0) next_lo = 0xA0;  // shorter forms are overlong
      if (b == 0xED) next_hi = 0x9F;  // U+D800..DFFF are surrogates
    } else if ((b & 0xF8) == 0xF0 && b <= 0xF4) {
      partial = b & 0x07u, need = 3;
      if (b == 0xF0) next_lo = 0x90;
      if (b == 0xF4) next_hi = 0x8F;  // beyond U+10FFFF
    } else {
      return false;  // a continuation byte or an invalid lead byte
    }
  } else {
    if (b < in.next_lo || b > in.next_hi) return false;
    partial = in.partial << 6 | (b & 0x3Fu);
    need = in.need - 1;
    if (need == 0) return advance_cp(in, partial, out, scratch);
  }
  // Keep the stacks whose set can still hold a character with this prefix (the next byte's
  // allowed range included, so that no kept stack waits for a character that cannot come).
  const auto [lo, hi] = partial_range(partial, need, next_lo, next_hi);
  out.leaves.clear();
  out.partial = partial;
  out.need = need;
  out.next_lo = next_lo;
  out.next_hi = next_hi;
  if (lo > 0x10FFFF) return false;
  for (uint32_t leaf : in.leaves) {
    if (leaf == kAccept || leaf == kBottom) continue;
    if (g_.set_intersects(g_.elems()[node(leaf).pos].value, lo, hi)) out.leaves.push_back(leaf);
  }
  return !out.leaves.empty();
}

std::string Matcher::state_key(const State& s) const {
  std::vector<std::string> parts;
  parts.reserve(s.leaves.size());
  for (uint32_t leaf : s.leaves) {
    std::string k;
    uint32_t id = leaf;
    while (id != kAccept && id != kBottom) {
      const Node& n = node(id);
      k.append(reinterpret_cast<const char*>(&n.pos), 4);
      id = n.parent;
    }
    k.push_back(id == kAccept ? 'A' : 'B');
    parts.push_back(std::move(k));
  }
  std::sort(parts.begin(), parts.end());
  std::string key;
  key.append(reinterpret_cast<const char*>(&s.partial), 4);
  key.push_back(static_cast<char>(s.need));
  for (const std::string& p : parts) {
    const auto len = static_cast<uint32_t>(p.size());
    key.append(reinterpret_cast<const char*>(&len), 4);
    key += p;
  }
  return key;
}

void Matcher::walk(const Vocab::Trie& trie, const State& start, TokenMask& accepted, std::vector<int32_t>* uncertain,
                   int min_chars) {
  if (!walk_memo(trie, start, accepted, uncertain, min_chars)) walk_plain(trie, start, accepted, uncertain, min_chars);
}

int32_t Matcher::intern_walk_state(const State& s, bool split_bottom) {
  walk_key_.clear();
  walk_key_.append(reinterpret_cast<const char*>(s.leaves.data()), s.leaves.size() * sizeof(uint32_t));
  walk_key_.append(reinterpret_cast<const char*>(&s.partial), sizeof s.partial);
  walk_key_.push_back(static_cast<char>(s.need));
  walk_key_.push_back(static_cast<char>(s.next_lo));
  walk_key_.push_back(static_cast<char>(s.next_hi));
  if (auto it = walk_index_.find(walk_key_); it != walk_index_.end()) return it->second;
  const auto id = static_cast<int32_t>(walk_states_.size());
  walk_index_.emplace(walk_key_, id);
  walk_states_.push_back(WalkState{s, false, kDeadState});
  walk_trans_.resize(walk_states_.size() * 256, kUnknownStep);
  if (split_bottom) {
    auto it = std::find(s.leaves.begin(), s.leaves.end(), kBottom);
    if (it != s.leaves.end()) {
      State rest = s;
      rest.leaves.erase(rest.leaves.begin() + (it - s.leaves.begin()));
      const int32_t r = rest.leaves.empty() ? kDeadState : intern_walk_state(rest, false);
      walk_states_[static_cast<size_t>(id)].bottom = true;
      walk_states_[static_cast<size_t>(id)].rest = r;
    }
  }
  return id;
}

bool Matcher::walk_memo(const Vocab::Trie& trie, const State& start, TokenMask& accepted,
                        std::vector<int32_t>* uncertain, int min_chars) {
  const std::vector<Vocab::Node>& tn = trie.nodes;
  const std::vector<int32_t>& toks = trie.tokens;
  const size_t depth = static_cast<size_t>(trie.max_depth) + 2;
  const size_t mark = scratch_.size();
  const size_t unc_mark = uncertain ? uncertain->size() : 0;
  const size_t max_states = c_->limits().walk_states;
  // Scratch nodes live until the walk ends (interned states refer to them); they are bounded
  // with the states.
  const size_t max_nodes = mark + 8 * max_states + 4096;
  walk_states_.clear();
  walk_index_.clear();
  walk_trans_.clear();
  walk_sid_.assign(depth, 0);
  walk_sid_[0] = intern_walk_state(start, false);
  bool ok = true;
  uint32_t i = 1;
  while (i < tn.size()) {
    const Vocab::Node& nd = tn[i];
    if (nd.end < tn.size()) __builtin_prefetch(&tn[nd.end]);  // where a dead or skipped subtree resumes
    if (nd.sub_chars <= min_chars) {  // the caller knows these tokens already
      i = nd.end;
      continue;
    }
    const size_t d = nd.depth;
    const size_t slot = static_cast<size_t>(walk_sid_[d - 1]) * 256 + nd.byte;
    int32_t t = walk_trans_[slot];
    if (t == kUnknownStep) {
      if (walk_states_.size() >= max_states || scratch_.size() >= max_nodes) {
        ok = false;
        break;
      }
      if (advance(walk_states_[static_cast<size_t>(walk_sid_[d - 1])].st, nd.byte, tmp_a_, true)) {
        // Inside a character every stack takes whole (string contents, say), which character
        // it becomes does not matter: one state stands for all of them.
        canonicalize_partial(tmp_a_);
        t = intern_walk_state(tmp_a_, uncertain != nullptr);
      } else {
        t = kDeadState;
      }
      walk_trans_[slot] = t;
    }
    if (t == kDeadState) {
      i = nd.end;
      continue;
    }
    if (nd.chars > min_chars)
      for (uint32_t k = nd.tok_begin; k < nd.tok_begin + nd.n_tok; ++k) accepted.set(toks[k]);
    if (uncertain) {
      const WalkState& w = walk_states_[static_cast<size_t>(t)];
      if (w.bottom) {
        // The rule can end here: longer tokens depend on what follows the rule.
        for (uint32_t j = i + 1; j < nd.end; ++j)
          if (tn[j].chars > min_chars)
            for (uint32_t k = tn[j].tok_begin; k < tn[j].tok_begin + tn[j].n_tok; ++k) uncertain->push_back(toks[k]);
        t = w.rest;
        if (t == kDeadState) {
          i = nd.end;
          continue;
        }
      }
    }
    if (d < depth) walk_sid_[d] = t;
    ++i;
  }
  walk_states_.clear();
  walk_index_.clear();
  if (walk_trans_.capacity() > 256 * 256) std::vector<int32_t>().swap(walk_trans_);  // a rare big walk
  truncate_scratch(mark);
  if (!ok) {
    std::fill(accepted.bits.begin(), accepted.bits.end(), 0);
    if (uncertain) uncertain->resize(unc_mark);
  }
  return ok;
}

void Matcher::walk_plain(const Vocab::Trie& trie, const State& start, TokenMask& accepted,
                         std::vector<int32_t>* uncertain, int min_chars) {
  const std::vector<Vocab::Node>& tn = trie.nodes;
  const std::vector<int32_t>& toks = trie.tokens;
  const size_t depth = static_cast<size_t>(trie.max_depth) + 2;
  if (walk_stack_.size() < depth) walk_stack_.resize(depth);
  std::vector<size_t> mark(depth, 0);
  walk_stack_[0] = start;
  mark[1] = scratch_.size();
  uint32_t i = 1;
  while (i < tn.size()) {
    const Vocab::Node& nd = tn[i];
    if (nd.sub_chars <= min_chars) {
      i = nd.end;
      continue;
    }
    const size_t d = nd.depth;
    truncate_scratch(mark[d]);  // nodes made for the previous sibling's subtree are dead
    State& cur = walk_stack_[d];
    if (!advance(walk_stack_[d - 1], nd.byte, cur, true)) {
      i = nd.end;
      continue;
    }
    if (nd.chars > min_chars)
      for (uint32_t t = nd.tok_begin; t < nd.tok_begin + nd.n_tok; ++t) accepted.set(toks[t]);
    if (uncertain) {
      auto it = std::find(cur.leaves.begin(), cur.leaves.end(), kBottom);
      if (it != cur.leaves.end()) {
        // The rule can end here: longer tokens depend on what follows the rule.
        cur.leaves.erase(it);
        for (uint32_t j = i + 1; j < nd.end; ++j)
          if (tn[j].chars > min_chars)
            for (uint32_t t = tn[j].tok_begin; t < tn[j].tok_begin + tn[j].n_tok; ++t) uncertain->push_back(toks[t]);
        if (cur.leaves.empty()) {
          i = nd.end;
          continue;
        }
      }
    }
    if (d + 1 < depth) mark[d + 1] = scratch_.size();
    ++i;
  }
}

std::shared_ptr<const Constraint::PositionInfo> Matcher::position(uint32_t leaf, uint32_t& rest, bool& far) {
  // The key: the positions of the stack's top entries, and whether the stack ends within them.
  // A token repeats anything at most as many times as it has characters, so a position deep
  // inside a long bounded repetition (maxLength, {m,n}) accepts the same tokens as the same
  // position `horizon` repetitions from the bound (Grammar::equivalent_position): one trie walk
  // serves them all. Tokens too long for that (Vocab::long_ids, only in vocabularies whose
  // longest tokens reach kLongChars characters) are then left out of the walk's answer and
  // checked against the real stack (fill_mask).
  uint32_t top[kTopLevels];
  int n_top = 0;
  uint32_t id = leaf;
  const auto max_chars = static_cast<uint32_t>(v_.max_chars());
  const uint32_t horizon = v_.repeat_horizon();
  far = true;
  while (n_top < kTopLevels && id != kAccept && id != kBottom) {
    const uint32_t exact = node(id).pos;
    top[n_top++] = g_.equivalent_position(exact, horizon);
    const uint32_t r = g_.chain_remaining(exact);
    if (r != 0 && r < max_chars + 2) far = false;  // a long token could reach this bound
    id = node(id).parent;
  }
  rest = id;
  return position_info(top, n_top, id == kAccept ? kAccept : kBottom);  // a short stack keeps its real end
}

std::shared_ptr<const Constraint::PositionInfo> Matcher::position_info(const uint32_t* top, int n_top, uint32_t below) {
  std::string key(reinterpret_cast<const char*>(top), static_cast<size_t>(n_top) * 4);
  key.push_back(below == kAccept ? 'A' : 'B');
  {
    std::lock_guard<std::mutex> lk(c_->mu_);
    auto it = c_->positions_.find(key);
    if (it != c_->positions_.end()) return it->second;
  }
  const uint32_t horizon = v_.repeat_horizon();
  bool shared = false;          // some entry stands for every position `horizon` or more from its bound
  uint32_t near = UINT32_MAX;   // the fewest repetitions left at an entry nearer its bound than that
  uint32_t far_top[kTopLevels];  // the same top with those entries as far from their bounds as can be
  bool derivable = false;
  for (int k = 0; k < n_top; ++k) {
    const uint32_t r = g_.chain_remaining(top[k]);
    far_top[k] = top[k];
    if (r == horizon) shared = true;
    if (r != 0 && r < horizon) {
      near = std::min(near, r);
      far_top[k] = g_.chain_position(top[k], std::min(horizon, g_.chain_length(top[k])));
      derivable |= far_top[k] != top[k];
    }
  }
  // Near a bound, a token of fewer characters than the repetitions left cannot reach it (a
  // repetition in progress counted too): it fares as at the far position, whose answer is
  // shared. Only the longer tokens need this walk, which skips the trie's other subtrees.
  std::shared_ptr<const Constraint::PositionInfo> base;
  int min_chars = -1;
  if (derivable && near >= 2) {
    base = position_info(far_top, n_top, below);
    min_chars = static_cast<int>(near) - 1;
  }
  const size_t mark = scratch_.size();
  State start;
  uint32_t parent = below;
  for (int k = n_top - 1; k >= 0; --k) parent = make_node(top[k], parent, true);
  start.leaves.push_back(parent);
  TokenMask acc;
  acc.reset(v_.n_vocab());
  std::vector<int32_t> unc;
  walk(v_.trie(), start, acc, &unc, min_chars);
  truncate_scratch(mark);
  if (base) {
    const std::vector<uint64_t>& up_to = v_.tokens_up_to(min_chars);
    if (base->dense) {
      for (size_t w = 0; w < acc.bits.size(); ++w) acc.bits[w] |= base->bits[w] & up_to[w];
    } else {
      for (int32_t t : base->ids)
        if (v_.chars(t) <= min_chars) acc.set(t);
    }
    for (int32_t t : base->uncertain)
      if (v_.chars(t) <= min_chars) unc.push_back(t);
  }
  auto info = std::make_shared<Constraint::PositionInfo>();
  std::sort(unc.begin(), unc.end());
  unc.erase(std::unique(unc.begin(), unc.end()), unc.end());
  for (int32_t t : unc)
    if (!acc.test(t)) info->uncertain.push_back(t);
  if (shared && !v_.long_ids().empty()) {
    info->long_tokens = true;
    for (int32_t t : v_.long_ids()) acc.bits[static_cast<size_t>(t) >> 6] &= ~(uint64_t{1} << (t & 63));
    std::vector<int32_t> kept;
    std::set_difference(info->uncertain.begin(), info->uncertain.end(), v_.long_ids().begin(), v_.long_ids().end(),
                        std::back_inserter(kept));
    info->uncertain = std::move(kept);
  }
  const size_t n = acc.count();
  if (n * 32 > static_cast<size_t>(v_.n_vocab())) {
    info->dense = true;
    info->bits = std::move(acc.bits);
  } else {
    info->ids = acc.ids();
  }
  std::lock_guard<std::mutex> lk(c_->mu_);
  ++c_->stats_.positions_computed;
  info->id = static_cast<uint32_t>(c_->positions_.size());
  return c_->positions_.emplace(std::move(key), std::move(info)).first->second;
}

bool Matcher::token_ok_from(const State& start, int32_t id) {
  const std::string& p = v_.piece(id);
  const State* cur = &start;
  State* bufs[2] = {&tmp_a_, &tmp_b_};
  int k = 0;
  for (char ch : p) {
    State* next = bufs[k];
    if (!advance(*cur, static_cast<uint8_t>(ch), *next, true)) return false;
    cur = next;
    k ^= 1;
  }
  return true;
}

void Matcher::fill_mask(TokenMask& mask) {
  const std::string key = state_key(state_);
  {
    std::lock_guard<std::mutex> lk(c_->mu_);
    auto it = c_->lru_index_.find(key);
    if (it != c_->lru_index_.end()) {
      c_->lru_.splice(c_->lru_.begin(), c_->lru_, it->second);
      mask.bits = *it->second->second;
      ++c_->stats_.state_hits;
      return;
    }
    ++c_->stats_.state_misses;
  }
  mask.reset(v_.n_vocab());
  int64_t checked = 0;
  try {
    if (state_.need > 0) {
      walk(v_.trie(), state_, mask, nullptr);
    } else {
      State one;
      for (uint32_t leaf : state_.leaves) {
        if (leaf == kAccept) continue;
        uint32_t rest;
        bool far;
        std::shared_ptr<const Constraint::PositionInfo> info = position(leaf, rest, far);
        if (info->dense) {
          for (size_t w = 0; w < mask.bits.size(); ++w) mask.bits[w] |= info->bits[w];
        } else {
          for (int32_t t : info->ids) mask.set(t);
        }
        if (info->long_tokens) {
          // The long tokens, from the real stack. Far from every bound they are accepted
          // alike wherever the stack top sits, so the answer is kept per (top, rest); near a
          // bound, per stack.
          const std::tuple<uint32_t, uint32_t, uint32_t> lkey{rest, info->id, far ? UINT32_MAX : leaf};
          auto it = long_ok_.find(lkey);
          if (it == long_ok_.end()) {
            if (long_ok_.size() >= 256) long_ok_.clear();
            TokenMask acc;
            acc.reset(v_.n_vocab());
            one.leaves.assign(1, leaf);
            walk(v_.long_trie(), one, acc, nullptr);
            checked += static_cast<int64_t>(v_.long_ids().size());
            it = long_ok_.emplace(lkey, acc.ids()).first;
          }
          for (int32_t t : it->second) mask.set(t);
        }
        if (info->uncertain.empty()) continue;
        // Which of the context-dependent tokens the rest of the stack takes: it stays the same
        // node while the sequence moves within the top entries (a string's characters, say),
        // so the answer is kept per (stack top, rest of the stack) for this sequence.
        const uint64_t key = static_cast<uint64_t>(rest) << 32 | info->id;
        auto it = uncertain_ok_.find(key);
        if (it == uncertain_ok_.end()) {
          if (uncertain_ok_.size() >= 256) uncertain_ok_.clear();
          std::vector<int32_t> ok;
          one.leaves.assign(1, leaf);
          for (int32_t t : info->uncertain) {
            ++checked;
            if (token_ok_from(one, t)) ok.push_back(t);
          }
          it = uncertain_ok_.emplace(key, std::move(ok)).first;
        }
        for (int32_t t : it->second) mask.set(t);
      }
    }
  } catch (...) {
    truncate_scratch(0);
    throw;
  }
  truncate_scratch(0);
  if (accepting())
    for (int32_t e : v_.eog_ids()) mask.set(e);
  auto shared = std::make_shared<const std::vector<uint64_t>>(mask.bits);
  std::lock_guard<std::mutex> lk(c_->mu_);
  c_->stats_.uncertain_checked += checked;
  if (c_->lru_index_.count(key)) return;
  c_->lru_.emplace_front(key, std::move(shared));
  c_->lru_index_[key] = c_->lru_.begin();
  while (c_->lru_.size() > c_->limits().state_cache) {
    c_->lru_index_.erase(c_->lru_.back().first);
    c_->lru_.pop_back();
  }
}

bool Matcher::accept_bytes(std::string_view bytes) {
  State cur = state_, next;
  for (char ch : bytes) {
    if (!advance(cur, static_cast<uint8_t>(ch), next, false)) return false;
    std::swap(cur, next);
  }
  state_ = std::move(cur);
  return true;
}

bool Matcher::accept_token(int32_t id) {
  if (id < 0 || id >= v_.n_vocab()) return false;
  const std::vector<int32_t>& eog = v_.eog_ids();
  if (std::find(eog.begin(), eog.end(), id) != eog.end()) return accepting();
  const std::string& p = v_.piece(id);
  if (p.empty()) return false;
  return accept_bytes(p);
}

bool Matcher::accepting() const {
  return state_.need == 0 && std::find(state_.leaves.begin(), state_.leaves.end(), kAccept) != state_.leaves.end();
}

bool Matcher::can_continue() const {
  if (state_.need > 0) return true;
  for (uint32_t leaf : state_.leaves)
    if (leaf != kAccept) return true;
  return false;
}

int64_t warm_up(const std::shared_ptr<Constraint>& c, int walks, int steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TokenMask mask;
  std::vector<int32_t> allowed;
  const std::vector<int32_t>& eog = c->vocab().eog_ids();
  int64_t taken = 0;
  for (int w = 0; w < walks; ++w) {
    Matcher m(c);
    for (int s = 0; s < steps; ++s) {
      m.fill_mask(mask);
      allowed.clear();
      for (int32_t id : mask.ids())
        if (std::find(eog.begin(), eog.end(), id) == eog.end()) allowed.push_back(id);
      if (allowed.empty()) break;
      if (!m.accept_token(allowed[rng() % allowed.size()])) break;
      ++taken;
    }
  }
  return taken;
}

}  // namespace triad::grammar
