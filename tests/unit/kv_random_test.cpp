// Randomized test of src/kv (part of kv_test): per config, a fixed-seed workload of many
// sequences (shared random prefixes, salts, chunked prefill, decode growth, preemption on
// exhaustion, frees, cache resets) that simulates the K/V contents of every block and checks
// after every operation that
//  - a cache hit attaches only blocks whose contents are exactly the requested prefix, and is
//    the longest hit the cached blocks allow (valid in every group);
//  - a step writes only blocks it owns alone; newly full blocks get registered (or a duplicate
//    with the same contents is);
//  - a failed allocate_slots changes nothing, and can_allocate predicts it;
//  - reference counts equal table entries, free + used == total, no block twice in a table,
//    shared blocks sit at the same position and are cached, window entries are released
//    exactly when invisible, and stats agree with a recount.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace triad::kv {
namespace {

KvManagerConfig make_config(int32_t bs, std::vector<KvGroupSpec> groups, bool caching) {
  KvManagerConfig c;
  c.block_size = bs;
  c.groups = std::move(groups);
  c.enable_prefix_caching = caching;
  c.cache_namespace = "random-test";
  return c;
}

std::vector<BlockId> table(const KvCacheManager& m, SeqId id, int32_t g) {
  auto t = m.block_table(id, g);
  return {t.begin(), t.end()};
}

bool same_stats(const KvManagerStats& a, const KvManagerStats& b) {
  return a.blocks_total == b.blocks_total && a.blocks_used == b.blocks_used &&
         a.blocks_free == b.blocks_free && a.blocks_cached == b.blocks_cached &&
         a.prefix_queries == b.prefix_queries && a.prefix_hits == b.prefix_hits;
}

struct RandomCase {
  const char* name;
  int32_t block_size;
  std::vector<KvGroupSpec> groups;
  bool caching;
  uint64_t seed;
};
void PrintTo(const RandomCase& c, std::ostream* os) {
  *os << c.name;
}

// Drives a manager with random sequences and simulates the K/V contents of every block: a block
// written by a step holds, once full, the "prefix key" {salt, tokens[0, end of block)}, and
// nothing valid from the moment it is handed out until then.
class Workload {
 public:
  explicit Workload(const RandomCase& c)
      : c_(c), m_(make_config(c.block_size, c.groups, c.caching)), rng_(c.seed) {
    for (const KvGroupSpec& g : c.groups) content_.emplace_back(static_cast<size_t>(g.n_blocks));
    for (auto& base : bases_)
      for (int i = 0; i < 48; ++i) base.push_back(pick(4));
  }

  void run(int ops) {
    for (int op = 0; op < ops; ++op) {
      const int r = pick(100);
      if (r < 2 && c_.caching) {
        m_.reset_prefix_cache();
      } else if (r < 25 && live_.size() < 8) {
        ASSERT_NO_FATAL_FAILURE(begin());
      } else if (r < 85 && !live_.empty()) {
        ASSERT_NO_FATAL_FAILURE(step(random_live()));
      } else if (!live_.empty()) {
        free_seq(random_live());
      }
      ASSERT_NO_FATAL_FAILURE(check_invariants()) << "after op " << op;
    }
    while (!live_.empty()) free_seq(live_.begin()->first);
    const KvManagerStats st = m_.stats();
    EXPECT_EQ(st.blocks_used, 0);
    EXPECT_EQ(st.blocks_free, st.blocks_total);
    m_.reset_prefix_cache();
    EXPECT_EQ(m_.stats().blocks_cached, 0);
    ASSERT_NO_FATAL_FAILURE(check_invariants());
    // The workload must have exercised what it checks.
    EXPECT_GT(steps_, 500);
    EXPECT_GT(failures_, 0);
    EXPECT_GT(frees_, 50);
    if (c_.caching) {
      EXPECT_GT(st.prefix_hits, 0);
      EXPECT_GT(evictions_, 0);
    }
  }

 private:
  struct Live {
    std::vector<int32_t> tokens;
    int32_t n_computed = 0;
    int32_t salt = 0;
    size_t max_len = 0;
  };
  using Key = std::vector<int32_t>;  // {salt, prefix tokens...}

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  SeqId random_live() {
    auto it = live_.begin();
    std::advance(it, pick(static_cast<int>(live_.size())));
    return it->first;
  }
  int32_t bs() const { return c_.block_size; }
  int32_t n_groups() const { return static_cast<int32_t>(c_.groups.size()); }
  // Leading blocks a query at position n cannot see: block i is invisible iff its last
  // position (i+1)*bs - 1 <= n - window (straight from the rule, not the implementation's
  // closed form).
  int32_t first_visible(int32_t g, int64_t n) const {
    const int64_t w = c_.groups[g].window;
    int32_t i = 0;
    while (w > 0 && int64_t{i + 1} * bs() - 1 <= n - w) ++i;
    return i;
  }
  Key key(const Live& s, int32_t block) const {
    Key k{s.salt};
    k.insert(k.end(), s.tokens.begin(), s.tokens.begin() + (block + 1) * bs());
    return k;
  }

  void begin() {
    Live s;
    const auto& base = bases_[pick(4)];
    s.tokens.assign(base.begin(), base.begin() + pick(49));
    for (int i = 0, n = 1 + pick(6); i < n; ++i) s.tokens.push_back(pick(4));
    s.salt = pick(3) == 0 ? 1 : 0;
    s.max_len = s.tokens.size() + static_cast<size_t>(pick(31));
    // The longest hit the cache can serve, from the blocks the manager says are cached (whose
    // simulated contents must be valid).
    std::vector<std::set<Key>> cached(static_cast<size_t>(n_groups()));
    for (int32_t g = 0; g < n_groups(); ++g)
      for (BlockId b = 0; b < c_.groups[g].n_blocks; ++b)
        if (m_.is_cached(g, b)) {
          ASSERT_FALSE(content_[g][b].empty()) << "cached block " << b << " holds no data";
          cached[g].insert(content_[g][b]);
        }
    int32_t expect = 0;
    for (int32_t k = (static_cast<int32_t>(s.tokens.size()) - 1) / bs(); k > 0 && c_.caching; --k) {
      bool ok = true;
      for (int32_t g = 0; g < n_groups() && ok; ++g)
        for (int32_t i = std::min(first_visible(g, int64_t{k} * bs()), k); i < k && ok; ++i)
          ok = cached[g].contains(key(s, i));
      if (ok) {
        expect = k;
        break;
      }
    }
    const SeqId id = next_id_++;
    const int32_t hit = m_.begin_sequence(id, s.tokens, s.salt ? "salt" : "");
    ASSERT_EQ(hit, expect * bs());
    for (int32_t g = 0; g < n_groups(); ++g) {
      const auto t = table(m_, id, g);
      ASSERT_EQ(static_cast<int32_t>(t.size()), expect);
      for (int32_t i = 0; i < expect; ++i) {
        ASSERT_EQ(t[i] == kNoBlock, i < first_visible(g, hit));
        if (t[i] != kNoBlock) {
          ASSERT_EQ(content_[g][t[i]], key(s, i)) << "wrong block served";
        }
      }
    }
    s.n_computed = hit;
    live_.emplace(id, std::move(s));
  }

  void step(SeqId id) {
    Live& s = live_.at(id);
    if (static_cast<size_t>(s.n_computed) == s.tokens.size()) {  // "sample" more tokens
      if (s.tokens.size() >= s.max_len) return free_seq(id);
      for (int i = 0, n = 1 + pick(3); i < n; ++i) s.tokens.push_back(pick(4));
    }
    const int32_t remaining = static_cast<int32_t>(s.tokens.size()) - s.n_computed;
    const int32_t n_tokens = s.n_computed + 1 + pick(std::min(remaining, 12));
    const Snapshot before = snapshot();
    const bool can = m_.can_allocate(id, s.n_computed, n_tokens);
    const bool ok = m_.allocate_slots(id, s.n_computed, n_tokens);
    ASSERT_EQ(can, ok);
    if (!ok) {
      ASSERT_TRUE(before == snapshot()) << "a failed allocate_slots changed the state";
      ++failures_;
      return free_seq(random_live());  // preempt someone (maybe this one)
    }
    ++steps_;
    for (int32_t g = 0; g < n_groups(); ++g) {
      const auto t = table(m_, id, g);
      ASSERT_EQ(static_cast<int64_t>(t.size()), (n_tokens + bs() - 1) / bs());
      for (size_t i = 0; i < t.size(); ++i) {
        ASSERT_EQ(t[i] == kNoBlock, static_cast<int32_t>(i) < first_visible(g, s.n_computed));
        if (i >= before.tables.at(id)[g].size()) {  // newly handed out
          if (before.cached[g][t[i]]) ++evictions_;
          content_[g][t[i]].clear();
        }
      }
      // The step writes the blocks covering [n_computed, n_tokens): never shared, never cached.
      for (int32_t i = s.n_computed / bs(); i <= (n_tokens - 1) / bs(); ++i) {
        ASSERT_EQ(m_.ref_count(g, t[i]), 1);
        ASSERT_FALSE(m_.is_cached(g, t[i]));
        if ((i + 1) * bs() <= n_tokens) content_[g][t[i]] = key(s, i);
      }
    }
    m_.commit_full_blocks(id, s.tokens, n_tokens);
    // Every newly full block is registered, or another cached block holds the same data.
    for (int32_t g = 0; g < n_groups(); ++g) {
      const auto t = table(m_, id, g);
      for (int32_t i = s.n_computed / bs(); i < n_tokens / bs(); ++i) {
        if (!c_.caching) {
          ASSERT_FALSE(m_.is_cached(g, t[i]));
        } else if (!m_.is_cached(g, t[i])) {
          bool dup = false;
          for (BlockId b = 0; b < c_.groups[g].n_blocks && !dup; ++b)
            dup = b != t[i] && m_.is_cached(g, b) && content_[g][b] == content_[g][t[i]];
          ASSERT_TRUE(dup) << "full block " << i << " was not registered";
        }
      }
    }
    s.n_computed = n_tokens;
  }

  void free_seq(SeqId id) {
    m_.free_sequence(id);
    live_.erase(id);
    ++frees_;
  }

  struct Snapshot {
    std::map<SeqId, std::vector<std::vector<BlockId>>> tables;
    std::vector<std::vector<int32_t>> refs;
    std::vector<std::vector<bool>> cached;
    KvManagerStats stats;
    bool operator==(const Snapshot& o) const {
      return tables == o.tables && refs == o.refs && cached == o.cached &&
             same_stats(stats, o.stats);
    }
  };
  Snapshot snapshot() const {
    Snapshot sn;
    for (const auto& [id, s] : live_)
      for (int32_t g = 0; g < n_groups(); ++g) sn.tables[id].push_back(table(m_, id, g));
    for (int32_t g = 0; g < n_groups(); ++g) {
      sn.refs.emplace_back();
      sn.cached.emplace_back();
      for (BlockId b = 0; b < c_.groups[g].n_blocks; ++b) {
        sn.refs.back().push_back(m_.ref_count(g, b));
        sn.cached.back().push_back(m_.is_cached(g, b));
      }
    }
    sn.stats = m_.stats();
    return sn;
  }

  void check_invariants() const {
    ASSERT_NO_THROW(m_.check_invariants());
    int64_t total = 0, used = 0, cached_free = 0;
    for (int32_t g = 0; g < n_groups(); ++g) {
      const int32_t n = c_.groups[g].n_blocks;
      std::vector<int32_t> count(static_cast<size_t>(n), 0), index(static_cast<size_t>(n), -1);
      for (const auto& [id, s] : live_) {
        std::set<BlockId> in_this;
        const auto t = table(m_, id, g);
        for (size_t i = 0; i < t.size(); ++i) {
          if (t[i] == kNoBlock) continue;
          ASSERT_TRUE(in_this.insert(t[i]).second) << "block twice in one table";
          ++count[t[i]];
          // A shared block sits at the same position of every table holding it.
          ASSERT_TRUE(index[t[i]] < 0 || index[t[i]] == static_cast<int32_t>(i));
          index[t[i]] = static_cast<int32_t>(i);
        }
      }
      int32_t free_blocks = 0;
      for (BlockId b = 0; b < n; ++b) {
        ASSERT_EQ(m_.ref_count(g, b), count[b]) << "group " << g << " block " << b;
        ASSERT_TRUE(count[b] <= 1 || m_.is_cached(g, b)) << "shared block not cached";
        free_blocks += count[b] == 0;
        cached_free += count[b] == 0 && m_.is_cached(g, b);
        used += count[b] > 0;
      }
      ASSERT_EQ(m_.num_free_blocks(g), free_blocks);
      total += n;
    }
    const KvManagerStats st = m_.stats();
    ASSERT_EQ(st.blocks_total, total);
    ASSERT_EQ(st.blocks_used, used);
    ASSERT_EQ(st.blocks_used + st.blocks_free, st.blocks_total);
    ASSERT_EQ(st.blocks_cached, cached_free);
    ASSERT_LE(st.prefix_hits, st.prefix_queries);
    ASSERT_EQ(st.prefix_hits % bs(), 0);
  }

  RandomCase c_;
  KvCacheManager m_;
  std::mt19937_64 rng_;
  std::vector<int32_t> bases_[4];
  std::vector<std::vector<Key>> content_;  // [group][block]
  std::map<SeqId, Live> live_;
  SeqId next_id_ = 1;
  int64_t steps_ = 0, failures_ = 0, frees_ = 0, evictions_ = 0;
};

class KvRandomized : public ::testing::TestWithParam<RandomCase> {};

TEST_P(KvRandomized, InvariantsHoldUnderARandomWorkload) {
  Workload w(GetParam());
  ASSERT_NO_FATAL_FAILURE(w.run(4000));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, KvRandomized,
    ::testing::Values(RandomCase{"mixed", 4, {{0, 48}, {6, 20}, {13, 28}}, true, 1},
                      RandomCase{"block1", 1, {{0, 60}, {3, 24}}, true, 2},
                      RandomCase{"window_only", 8, {{16, 14}}, true, 3},
                      RandomCase{"full_only", 4, {{0, 24}}, true, 4},
                      RandomCase{"caching_off", 4, {{0, 48}, {6, 20}, {13, 28}}, false, 5}),
    [](const ::testing::TestParamInfo<RandomCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace triad::kv
