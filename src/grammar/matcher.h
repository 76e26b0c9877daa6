// Constrained decoding: which tokens may come next under a grammar (grammar.h), per sequence.
//
// A Matcher runs a pushdown automaton over the bytes the model emits. Its state is a set of
// stacks (llama.cpp's formulation): each stack says where matching continues (a character set in
// some rule) and what follows once that rule ends; stacks share their tails in an arena. Bytes
// are matched one at a time: a multi-byte UTF-8 character keeps only the stacks whose set can
// still hold a character with that prefix until it completes.
//
// The allowed-token mask: tokens are looked up in a byte trie of the vocabulary (vocab.h, laid
// out in pre-order so that a rejected prefix skips its whole subtree). Two caches, shared by every
// sequence of one Constraint (a grammar bound to a vocabulary):
//   - per stack top (the positions of a stack's top kTopLevels entries: the character set
//     being matched and the few rules around it), the tokens it accepts without returning
//     below those entries ("context-independent", computed once by a trie walk from that top
//     alone) and the few tokens that return below them part-way and so depend on the rest of
//     the stack ("uncertain": each sequence checks them against its real stack once per
//     (top, rest of the stack) and keeps the answer). A position deep inside a long bounded
//     repetition counts as the same position nearer the bound (Grammar::equivalent_position:
//     no token is long enough to tell them apart), so maxLength strings share their walks;
//     tokens of Vocab::kLongChars characters or more are then checked on the real stack.
//     The trie walk memoizes its (state, byte) steps, so a trie node costs a table lookup, and
//     gives one state to the partial UTF-8 characters every stack takes whole;
//   - per whole state (the stacks' contents, not their arena ids), the finished mask (LRU).
// End-of-generation tokens are allowed exactly when some stack is empty (the grammar accepts).
//
// Untrusted grammars: the number of stacks in a state and the expansion depth are bounded; a
// grammar that exceeds them fails with GrammarError (the request fails, the engine goes on).
//
// Thread-safety: Vocab and Grammar are immutable. A Constraint's caches are behind a mutex, so
// Matchers of one Constraint may run on different threads; one Matcher is one thread's.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/vocab.h"

namespace triad::grammar {

struct MatcherLimits {
  size_t max_stacks = 2048;      // stacks in one state
  int max_expand_depth = 4096;   // nested rule expansions without consuming a character
  size_t state_cache = 64;       // whole-state masks kept per Constraint
  size_t walk_states = 4096;     // states one trie walk memoizes (1 KiB each; beyond: unmemoized)
};

// A grammar bound to a vocabulary, with the caches every sequence under it shares.
class Constraint {
 public:
  Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const Vocab> v, MatcherLimits lim = {});
  const Grammar& grammar() const { return *grammar_; }
  const Vocab& vocab() const { return *vocab_; }
  const MatcherLimits& limits() const { return limits_; }

  // Statistics (for tests and benchmarks).
  struct Stats {
    int64_t state_hits = 0, state_misses = 0, positions_computed = 0, uncertain_checked = 0;
  };
  Stats stats() const;

 private:
  friend class Matcher;
  struct PositionInfo {
    bool dense = false;
    std::vector<uint64_t> bits;       // dense: accepted tokens as a bitset
    std::vector<int32_t> ids;         // sparse: accepted tokens
    std::vector<int32_t> uncertain;   // tokens that leave the rule part-way
    uint32_t id = 0;                  // distinct per position of one Constraint
    bool long_tokens = false;         // Vocab::long_ids are left out: check them on the real stack
  };
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocab> vocab_;
  MatcherLimits limits_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const PositionInfo>> positions_;
  std::list<std::pair<std::string, std::shared_ptr<const std::vector<uint64_t>>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> lru_index_;
  Stats stats_;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<Constraint> c);

  // The tokens allowed next (end-of-generation ids when the grammar may end here).
  void fill_mask(TokenMask& mask);
  // Advances past token id; false (state unchanged) when the grammar does not allow it.
  // End-of-generation ids are accepted when the grammar may end (and change nothing).
  bool accept_token(int32_t id);
  // Advances past raw bytes (tests, forced text); false and unchanged if not allowed.
  bool accept_bytes(std::string_view bytes);
  // The grammar may end here.
  bool accepting() const;
  // The grammar can take more characters here (false: only ending is possible).
  bool can_continue() const;

 private:
  static constexpr uint32_t kAccept = 0;        // the empty stack
  static constexpr uint32_t kBottom = 1;        // "the rule ended": position precomputation
  static constexpr uint32_t kScratch = 1u << 31;
  static constexpr int kTopLevels = 3;

  struct Node {
    uint32_t pos, parent;
  };
  struct State {
    std::vector<uint32_t> leaves;  // node ids whose pos is a kChars element, or kAccept/kBottom
    uint32_t partial = 0;          // code point bits of an incomplete UTF-8 character
    int need = 0;                  // its missing continuation bytes
    uint8_t next_lo = 0x80, next_hi = 0xBF;  // the range the next continuation byte must be in
                                             // (RFC 3629: no overlong forms, no surrogates)
  };

  const Node& node(uint32_t id) const { return id & kScratch ? scratch_[id & ~kScratch] : nodes_[id]; }
  uint32_t make_node(uint32_t pos, uint32_t parent, bool scratch);
  void truncate_scratch(size_t n);
  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, bool scratch, int depth);
  void dedupe(std::vector<uint32_t>& leaves) const;
  bool advance(const State& in, uint8_t byte, State& out, bool scratch);
  bool advance_cp(const State& in, uint32_t cp, State& out, bool scratch);
  std::string state_key(const State& s) const;
  // A partial character whose every completion each stack takes behaves the same whichever
  // character it is: gives it a representative's bits.
  void canonicalize_partial(State& s) const;
  // The tokens of `leaf`'s stack top (computed once per Constraint); `rest` gets the stack
  // below the entries the top covers (kAccept or kBottom when it covers the whole stack).
  // `far`: no long token (Vocab::long_ids) could reach the bound of a repetition the top is in.
  std::shared_ptr<const Constraint::PositionInfo> position(uint32_t leaf, uint32_t& rest, bool& far);
  // The tokens of the stack top whose entries are at positions top[0..n_top), above `below`
  // (kAccept: the stack ends there; kBottom: it goes on).
  std::shared_ptr<const Constraint::PositionInfo> position_info(const uint32_t* top, int n_top, uint32_t below);
  // Tokens accepted from `start` (set in `accepted`, empty on entry), by a pre-order trie walk;
  // with `uncertain`, tokens that reach kBottom with bytes left go there. Only tokens of more
  // than `min_chars` characters are looked at.
  void walk(const Vocab::Trie& trie, const State& start, TokenMask& accepted, std::vector<int32_t>* uncertain,
            int min_chars = -1);
  // The walk with its transitions memoized: the states it meets are interned and each
  // (state, byte) step is computed once, so a trie node costs a table lookup. False (and
  // `accepted` emptied, `uncertain` as it was) when the walk meets more states than allowed.
  bool walk_memo(const Vocab::Trie& trie, const State& start, TokenMask& accepted, std::vector<int32_t>* uncertain,
                 int min_chars);
  // The same walk computing every step (the reference, and the fallback).
  void walk_plain(const Vocab::Trie& trie, const State& start, TokenMask& accepted, std::vector<int32_t>* uncertain,
                  int min_chars);
  int32_t intern_walk_state(const State& s, bool split_bottom);
  bool token_ok_from(const State& start, int32_t id);

  std::shared_ptr<Constraint> c_;
  const Grammar& g_;
  const Vocab& v_;
  std::vector<Node> nodes_;    // persistent: the states the sequence has been in
  std::vector<Node> scratch_;  // cleared after each mask computation
  std::unordered_map<uint64_t, uint32_t> intern_, scratch_intern_;  // (pos, parent) -> id
  State state_;
  // (rest of the stack, position id) -> the position's uncertain tokens that stack accepts
  std::unordered_map<uint64_t, std::vector<int32_t>> uncertain_ok_;
  // (rest of the stack, position id, the stack's leaf or UINT32_MAX when far from bounds) ->
  // the long tokens the stack accepts
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<int32_t>> long_ok_;
  std::vector<State> walk_stack_;
  State tmp_a_, tmp_b_;
  // walk_memo's tables, reused between walks: interned states, their index, and transitions
  // (state * 256 + byte -> state, kDeadState, or kUnknownStep).
  struct WalkState {
    State st;
    bool bottom = false;  // holds kBottom (the rule below can end here)
    int32_t rest = -1;    // with `bottom`: the state without kBottom (kDeadState if empty)
  };
  static constexpr int32_t kDeadState = -1, kUnknownStep = -2;
  std::vector<WalkState> walk_states_;
  std::unordered_map<std::string, int32_t> walk_index_;
  std::vector<int32_t> walk_trans_;
  std::vector<int32_t> walk_sid_;
  std::string walk_key_;
};

// Walks the grammar at random (uniformly among allowed tokens, end-of-generation excluded) so
// that the masks of the states near the start, and the stack tops they use, are computed
// before the first request needs them. Returns the number of steps taken.
int64_t warm_up(const std::shared_ptr<Constraint>& c, int walks, int steps, uint64_t seed);

}  // namespace triad::grammar
