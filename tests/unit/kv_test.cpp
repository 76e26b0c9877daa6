// Unit tests for src/kv (KV-cache block bookkeeping), with fake sequences and no model:
//  - block keys: golden SHA-256 values of the documented encodings, unambiguous encodings;
//  - config validation and misuse (each throws triad::Error and leaves the state unchanged);
//  - allocation only as needed, all-or-nothing failure, reference counts and sharing;
//  - prefix caching: hash chaining, salts, never the last token, LRU eviction order, evicted
//    keys missing, identical prompts computed concurrently, caching off;
//  - sliding windows: release rule, memory bound over a long sequence, window-group hits
//    needing only visible blocks, multi-group hits valid in every group; lifecycle.
// The randomized workload is in kv_random_test.cpp (same binary).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "kv/block_hash.h"
#include "kv/kv_cache_manager.h"

namespace triad::kv {
namespace {

KvManagerConfig make_config(int32_t bs, std::vector<KvGroupSpec> groups, bool caching = true) {
  KvManagerConfig c;
  c.block_size = bs;
  c.groups = std::move(groups);
  c.enable_prefix_caching = caching;
  c.cache_namespace = "test-model|f16|f16";
  return c;
}

std::vector<int32_t> seq_tokens(int32_t n, int32_t start) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockId> table(const KvCacheManager& m, SeqId id, int32_t g) {
  auto t = m.block_table(id, g);
  return {t.begin(), t.end()};
}

// Begins `id` with `tokens`, computes the whole prompt in one step and commits it.
int32_t run_prompt(KvCacheManager& m, SeqId id, const std::vector<int32_t>& tokens,
                   const std::string& salt = "") {
  const int32_t hit = m.begin_sequence(id, tokens, salt);
  const auto n = static_cast<int32_t>(tokens.size());
  EXPECT_TRUE(m.allocate_slots(id, hit, n));
  m.commit_full_blocks(id, tokens, n);
  return hit;
}

std::string hex(const BlockHash& h) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : h) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected triad::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

bool same_stats(const KvManagerStats& a, const KvManagerStats& b) {
  return a.blocks_total == b.blocks_total && a.blocks_used == b.blocks_used &&
         a.blocks_free == b.blocks_free && a.blocks_cached == b.blocks_cached &&
         a.prefix_queries == b.prefix_queries && a.prefix_hits == b.prefix_hits;
}

// ---- Block keys ----

TEST(KvHash, GoldenValuesOfTheDocumentedEncoding) {
  // Computed independently with Python hashlib over the byte layout in block_hash.h.
  const BlockHash root = root_hash("m", "s");
  EXPECT_EQ(hex(root), "bd3412b88dcc86d61ac9d64957caab2fb1475902dde69981c1ca59fe6fa06f86");
  const std::vector<int32_t> toks = {1, 2, -1};
  EXPECT_EQ(hex(block_hash(root, toks)),
            "39e40df4832c567859287d9361cbf57a5b23ff21f5a0e8449c14139ae200df2b");
}

TEST(KvHash, EncodingsAreUnambiguous) {
  EXPECT_NE(root_hash("ab", ""), root_hash("a", "b"));
  EXPECT_NE(root_hash("a", "b"), root_hash("", "ab"));
  EXPECT_EQ(root_hash("a", "b"), root_hash("a", "b"));
  const BlockHash p1 = root_hash("m", ""), p2 = root_hash("m", "salt");
  const std::vector<int32_t> t = {5, 6}, t0 = {5, 6, 0};
  EXPECT_NE(block_hash(p1, t), block_hash(p2, t));
  EXPECT_NE(block_hash(p1, t), block_hash(p1, t0));
  EXPECT_EQ(block_hash(p1, t), block_hash(p1, t));
  // Namespaces (model, KV dtypes) separate keys like salts do.
  EXPECT_NE(root_hash("model-a|f16|f16", ""), root_hash("model-a|q8_0|q8_0", ""));
}

// ---- Config and misuse ----

TEST(KvConfig, BadConfigsThrow) {
  expect_error([] { KvCacheManager m(make_config(0, {{0, 4}})); }, "block_size");
  expect_error([] { KvCacheManager m(make_config(-16, {{0, 4}})); }, "block_size");
  expect_error([] { KvCacheManager m(make_config(16, {})); }, "at least one");
  expect_error([] { KvCacheManager m(make_config(16, {{0, 4}, {0, 0}})); }, "group 1");
  expect_error([] { KvCacheManager m(make_config(16, {{0, -3}})); }, "n_blocks");
  expect_error([] { KvCacheManager m(make_config(16, {{-1, 4}})); }, "window");
  KvCacheManager m(make_config(16, {{0, 4}, {512, 7}}));
  EXPECT_EQ(m.n_groups(), 2);
  EXPECT_EQ(m.block_size(), 16);
  EXPECT_EQ(m.stats().blocks_total, 11);
  EXPECT_EQ(m.stats().blocks_free, 11);
}

TEST(KvMisuse, ThrowsAndChangesNothing) {
  KvCacheManager m(make_config(4, {{0, 8}, {4, 8}}));
  const auto p = seq_tokens(10, 0);
  run_prompt(m, 1, p);
  ASSERT_TRUE(m.allocate_slots(1, 10, 12));  // window group releases block 0 (3 <= 10 - 4)
  m.commit_full_blocks(1, seq_tokens(12, 0), 12);
  const KvManagerStats before = m.stats();
  const auto t0 = table(m, 1, 0), t1 = table(m, 1, 1);

  expect_error([&] { m.allocate_slots(7, 0, 4); }, "unknown sequence 7");
  expect_error([&] { m.can_allocate(7, 0, 4); }, "unknown sequence 7");
  expect_error([&] { m.commit_full_blocks(7, p, 4); }, "unknown sequence 7");
  expect_error([&] { m.block_table(7, 0); }, "unknown sequence 7");
  expect_error([&] { m.begin_sequence(1, p, ""); }, "already exists");
  expect_error([&] { m.allocate_slots(1, 12, 11); }, "n_tokens");
  expect_error([&] { m.allocate_slots(1, -1, 11); }, "n_computed");
  expect_error([&] { m.blocks_needed(1, -1, 3); }, "n_computed");
  expect_error([&] { m.blocks_needed(1, 5, 3); }, "n_tokens");
  expect_error([&] { m.allocate_slots(1, 13, 14); }, "beyond");
  expect_error([&] { m.allocate_slots(1, 4, 14); }, "already released");
  expect_error([&] { m.commit_full_blocks(1, p, 11); }, "tokens");
  expect_error([&] { m.commit_full_blocks(1, seq_tokens(20, 0), 13); }, "beyond");
  expect_error([&] { m.commit_full_blocks(1, p, -1); }, "n_computed");
  expect_error([&] { m.block_table(1, 2); }, "group 2");
  expect_error([&] { m.num_free_blocks(-1); }, "group -1");
  expect_error([&] { m.ref_count(0, 8); }, "block id 8");
  m.free_sequence(99);  // unknown: no-op

  EXPECT_TRUE(same_stats(before, m.stats()));
  EXPECT_EQ(table(m, 1, 0), t0);
  EXPECT_EQ(table(m, 1, 1), t1);
  EXPECT_NO_THROW(m.check_invariants());
}

// ---- Allocation ----

TEST(KvAlloc, TakesBlocksOnlyAsTheSequenceGrows) {
  KvCacheManager m(make_config(4, {{0, 8}}));
  EXPECT_EQ(m.begin_sequence(1, seq_tokens(10, 0), ""), 0);
  EXPECT_TRUE(m.has_sequence(1));
  EXPECT_TRUE(m.block_table(1, 0).empty());
  EXPECT_EQ(m.num_free_blocks(0), 8);
  EXPECT_EQ(m.blocks_needed(1, 0, 1), 1);
  ASSERT_TRUE(m.allocate_slots(1, 0, 1));
  EXPECT_EQ(m.block_table(1, 0).size(), 1u);
  EXPECT_EQ(m.num_free_blocks(0), 7);
  EXPECT_EQ(m.blocks_needed(1, 1, 4), 0);
  ASSERT_TRUE(m.allocate_slots(1, 1, 4));
  EXPECT_EQ(m.block_table(1, 0).size(), 1u);
  ASSERT_TRUE(m.allocate_slots(1, 4, 5));
  EXPECT_EQ(m.block_table(1, 0).size(), 2u);
  EXPECT_EQ(m.blocks_needed(1, 5, 13), 2);
  ASSERT_TRUE(m.allocate_slots(1, 5, 13));
  ASSERT_TRUE(m.allocate_slots(1, 13, 13));  // nothing new to compute: no-op
  ASSERT_TRUE(m.allocate_slots(1, 5, 9));    // shorter than covered: no shrink, no-op
  const auto t = table(m, 1, 0);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(std::set<BlockId>(t.begin(), t.end()).size(), 4u);
  EXPECT_EQ(m.num_free_blocks(0), 4);
  const KvManagerStats st = m.stats();
  EXPECT_EQ(st.blocks_total, 8);
  EXPECT_EQ(st.blocks_used, 4);
  EXPECT_EQ(st.blocks_free, 4);
  EXPECT_EQ(st.blocks_cached, 0);
  EXPECT_EQ(m.blocks_needed(99, 0, 9), 3);  // unknown id: a new sequence
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvAlloc, BlocksNeededSumsGroups) {
  KvCacheManager m(make_config(4, {{0, 8}, {4, 8}}));
  m.begin_sequence(1, seq_tokens(9, 0), "");
  EXPECT_EQ(m.blocks_needed(1, 0, 9), 6);
  ASSERT_TRUE(m.allocate_slots(1, 0, 9));
  EXPECT_EQ(m.blocks_needed(1, 9, 13), 2);
}

TEST(KvAlloc, ExhaustionIsAllOrNothing) {
  // Full group with 3 blocks, window group (window 4) with plenty.
  KvCacheManager m(make_config(4, {{0, 3}, {4, 8}}));
  const auto p = seq_tokens(8, 0);
  run_prompt(m, 1, p);
  const auto t0 = table(m, 1, 0), t1 = table(m, 1, 1);
  const KvManagerStats before = m.stats();
  // 16 tokens need 2 more full-group blocks; 1 is free. The window group could release block 0
  // (last position 3 <= 8 - 4) and take 2 blocks, but must not since the call fails.
  EXPECT_FALSE(m.can_allocate(1, 8, 16));
  EXPECT_FALSE(m.allocate_slots(1, 8, 16));
  EXPECT_TRUE(same_stats(before, m.stats()));
  EXPECT_EQ(table(m, 1, 0), t0);
  EXPECT_EQ(table(m, 1, 1), t1);
  EXPECT_EQ(m.num_free_blocks(0), 1);
  EXPECT_EQ(m.num_free_blocks(1), 6);
  // Another sequence that needs 2 full-group blocks fails as a whole too.
  m.begin_sequence(2, seq_tokens(8, 100), "");
  EXPECT_FALSE(m.allocate_slots(2, 0, 8));
  EXPECT_TRUE(m.block_table(2, 0).empty());
  EXPECT_TRUE(m.block_table(2, 1).empty());
  EXPECT_EQ(m.num_free_blocks(0), 1);
  EXPECT_EQ(m.num_free_blocks(1), 6);
  // One more block fits: it releases window block 0 and takes one block per group.
  EXPECT_TRUE(m.can_allocate(1, 8, 12));
  ASSERT_TRUE(m.allocate_slots(1, 8, 12));
  EXPECT_EQ(m.block_table(1, 0).size(), 3u);
  EXPECT_EQ(table(m, 1, 1)[0], kNoBlock);
  EXPECT_EQ(table(m, 1, 1)[1], t1[1]);
  EXPECT_EQ(m.num_free_blocks(0), 0);
  EXPECT_EQ(m.num_free_blocks(1), 6);  // one released, one taken
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvAlloc, ReleasedWindowBlocksCountTowardsTheFit) {
  // Window group (window 8) with exactly 3 blocks: a decode step at 12 releases block 0 (last
  // position 3 <= 12 - 8) and can reuse it for block 3 although no block was free.
  KvCacheManager m(make_config(4, {{8, 3}}));
  run_prompt(m, 1, seq_tokens(12, 0));
  EXPECT_EQ(m.num_free_blocks(0), 0);
  const auto before = table(m, 1, 0);
  EXPECT_TRUE(m.can_allocate(1, 12, 13));
  ASSERT_TRUE(m.allocate_slots(1, 12, 13));
  const auto after = table(m, 1, 0);
  ASSERT_EQ(after.size(), 4u);
  EXPECT_EQ(after[0], kNoBlock);
  EXPECT_EQ(after[3], before[0]);  // the released block, evicted and reused
  EXPECT_FALSE(m.is_cached(0, after[3]));
  EXPECT_NO_THROW(m.check_invariants());
}

// ---- Prefix caching ----

TEST(KvPrefix, SharingAndReferenceCounts) {
  KvCacheManager m(make_config(4, {{0, 16}}));
  const auto p = seq_tokens(13, 0);  // 3 full blocks + 1 token
  EXPECT_EQ(run_prompt(m, 1, p), 0);
  const auto a = table(m, 1, 0);
  EXPECT_EQ(m.begin_sequence(2, p, ""), 12);
  auto b = table(m, 2, 0);
  ASSERT_EQ(b.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b[i], a[i]);
    EXPECT_EQ(m.ref_count(0, a[i]), 2);
    EXPECT_TRUE(m.is_cached(0, a[i]));
  }
  EXPECT_EQ(m.ref_count(0, a[3]), 1);
  EXPECT_FALSE(m.is_cached(0, a[3]));  // partial block
  ASSERT_TRUE(m.allocate_slots(2, 12, 13));
  m.commit_full_blocks(2, p, 13);
  b = table(m, 2, 0);
  EXPECT_NE(b[3], a[3]);
  KvManagerStats st = m.stats();
  EXPECT_EQ(st.blocks_used, 5);
  EXPECT_EQ(st.prefix_queries, 26);
  EXPECT_EQ(st.prefix_hits, 12);

  m.free_sequence(1);
  EXPECT_FALSE(m.has_sequence(1));
  EXPECT_EQ(table(m, 2, 0), b);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.ref_count(0, b[i]), 1);
  EXPECT_EQ(m.ref_count(0, a[3]), 0);
  st = m.stats();
  EXPECT_EQ(st.blocks_used, 4);
  EXPECT_EQ(st.blocks_cached, 0);  // the shared blocks are still in use
  m.free_sequence(2);
  st = m.stats();
  EXPECT_EQ(st.blocks_used, 0);
  EXPECT_EQ(st.blocks_cached, 3);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvPrefix, KeysChainParentsAndSalts) {
  // Window 4 = block size: a hit of k blocks needs only block k-1 cached, so a match of a
  // block's own tokens would suffice if its key did not chain its parent's.
  KvCacheManager m(make_config(4, {{4, 32}}));
  const auto x = seq_tokens(4, 0), y = seq_tokens(4, 10), w = seq_tokens(4, 20);
  const auto a = concat(concat(x, y), {7});
  run_prompt(m, 1, a);
  const auto ta = table(m, 1, 0);
  EXPECT_EQ(m.begin_sequence(2, concat(concat(w, y), {7}), ""), 0);  // same block 1, other parent
  EXPECT_EQ(m.begin_sequence(3, a, "other salt"), 0);                // same tokens, other salt
  EXPECT_EQ(m.begin_sequence(4, concat(concat(x, y), {9}), ""), 8);  // same prefix
  const auto t4 = table(m, 4, 0);
  ASSERT_EQ(t4.size(), 2u);
  EXPECT_EQ(t4[0], kNoBlock);  // invisible to the query at position 8
  EXPECT_EQ(t4[1], ta[1]);
  // A salted prefix matches itself.
  m.free_sequence(3);
  run_prompt(m, 5, a, "s");
  EXPECT_EQ(m.begin_sequence(6, a, "s"), 8);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvPrefix, NeverServesTheLastToken) {
  KvCacheManager m(make_config(4, {{0, 32}}));
  const auto p = seq_tokens(12, 0);  // exactly 3 full blocks
  run_prompt(m, 1, p);
  EXPECT_EQ(m.begin_sequence(2, p, ""), 8);
  EXPECT_EQ(m.begin_sequence(3, concat(p, {99}), ""), 12);
  EXPECT_EQ(m.begin_sequence(4, seq_tokens(4, 0), ""), 0);
  EXPECT_EQ(m.begin_sequence(5, seq_tokens(5, 0), ""), 4);
  EXPECT_EQ(m.begin_sequence(6, seq_tokens(1, 0), ""), 0);
  EXPECT_EQ(m.begin_sequence(7, std::vector<int32_t>{}, ""), 0);
  EXPECT_EQ(m.stats().prefix_queries, 12 + 12 + 13 + 4 + 5 + 1);
  EXPECT_EQ(m.stats().prefix_hits, 8 + 12 + 4);
  // The sequence with a hit computes from there.
  ASSERT_TRUE(m.allocate_slots(2, 8, 12));
  EXPECT_EQ(m.block_table(2, 0).size(), 3u);
  EXPECT_NE(m.block_table(2, 0)[2], m.block_table(1, 0)[2]);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvEviction, LeastRecentlyFreedFirstAndTailFirst) {
  KvCacheManager m(make_config(4, {{0, 6}}));
  const auto pa = seq_tokens(8, 0), pb = seq_tokens(8, 100);
  run_prompt(m, 1, pa);  // both blocks registered (a hit of this exact prompt gets only one)
  run_prompt(m, 2, pb);
  const auto a = table(m, 1, 0), b = table(m, 2, 0);
  m.free_sequence(1);  // queue: [2 empty, a1, a0]
  m.free_sequence(2);  // queue: [2 empty, a1, a0, b1, b0]
  EXPECT_EQ(m.stats().blocks_cached, 4);
  // An unrelated sequence takes the empty blocks, then a1: A's last block before its first,
  // and A's blocks before B's.
  run_prompt(m, 3, seq_tokens(12, 200));
  const auto c = table(m, 3, 0);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(std::count(a.begin(), a.end(), c[0]) + std::count(b.begin(), b.end(), c[0]), 0);
  EXPECT_EQ(std::count(a.begin(), a.end(), c[1]) + std::count(b.begin(), b.end(), c[1]), 0);
  EXPECT_EQ(c[2], a[1]);
  EXPECT_TRUE(m.is_cached(0, a[0]));
  EXPECT_EQ(m.stats().blocks_cached, 3);
  // The evicted key no longer hits: A's prompt + 1 gets only block a0.
  EXPECT_EQ(m.begin_sequence(4, concat(pa, {1}), ""), 4);
  EXPECT_EQ(table(m, 4, 0), std::vector<BlockId>{a[0]});
  EXPECT_EQ(m.ref_count(0, a[0]), 1);  // taken off the free queue
  EXPECT_EQ(m.num_free_blocks(0), 2);  // b1, b0
  // Growing it evicts b1 then b0.
  ASSERT_TRUE(m.allocate_slots(4, 4, 9));
  EXPECT_EQ(table(m, 4, 0), (std::vector<BlockId>{a[0], b[1], b[0]}));
  EXPECT_EQ(m.stats().blocks_cached, 0);
  EXPECT_EQ(m.begin_sequence(5, concat(pb, {1}), ""), 0);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvEviction, EmptyBlocksAreReusedBeforeCachedOnes) {
  KvCacheManager m(make_config(4, {{0, 2}}));
  const auto p = seq_tokens(6, 0);  // one full block (cached) + a partial one
  run_prompt(m, 1, p);
  const auto a = table(m, 1, 0);
  m.free_sequence(1);
  EXPECT_EQ(m.stats().blocks_cached, 1);
  m.begin_sequence(2, seq_tokens(3, 50), "");
  ASSERT_TRUE(m.allocate_slots(2, 0, 3));
  EXPECT_EQ(table(m, 2, 0), std::vector<BlockId>{a[1]});
  EXPECT_TRUE(m.is_cached(0, a[0]));
  EXPECT_EQ(m.begin_sequence(3, p, ""), 4);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvEviction, ResetDropsOnlyUnreferencedCachedBlocks) {
  KvCacheManager m(make_config(4, {{0, 16}}));
  const auto p = seq_tokens(9, 0), q = seq_tokens(9, 50);
  run_prompt(m, 1, p);
  run_prompt(m, 2, q);
  m.free_sequence(2);
  EXPECT_EQ(m.stats().blocks_cached, 2);
  m.reset_prefix_cache();
  EXPECT_EQ(m.stats().blocks_cached, 0);
  EXPECT_EQ(m.begin_sequence(3, q, ""), 0);
  EXPECT_EQ(m.begin_sequence(4, p, ""), 8);  // sequence 1 still holds (and caches) its blocks
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvPrefix, IdenticalPromptsComputedConcurrently) {
  KvCacheManager m(make_config(4, {{0, 16}}));
  const auto p = seq_tokens(9, 0);
  EXPECT_EQ(m.begin_sequence(1, p, ""), 0);
  EXPECT_EQ(m.begin_sequence(2, p, ""), 0);  // nothing committed yet
  ASSERT_TRUE(m.allocate_slots(1, 0, 9));
  ASSERT_TRUE(m.allocate_slots(2, 0, 9));
  m.commit_full_blocks(1, p, 9);
  m.commit_full_blocks(2, p, 9);  // same keys: the first blocks stay registered
  const auto a = table(m, 1, 0), b = table(m, 2, 0);
  EXPECT_TRUE(m.is_cached(0, a[0]) && m.is_cached(0, a[1]));
  EXPECT_FALSE(m.is_cached(0, b[0]) || m.is_cached(0, b[1]));
  EXPECT_NO_THROW(m.check_invariants());
  // B keeps growing past the shared prompt: its next full block chains from the same key and
  // is registered.
  const auto pb = concat(p, seq_tokens(7, 40));  // 16 tokens
  ASSERT_TRUE(m.allocate_slots(2, 9, 16));
  m.commit_full_blocks(2, pb, 16);
  const auto b2 = table(m, 2, 0);
  EXPECT_TRUE(m.is_cached(0, b2[2]));
  EXPECT_EQ(m.begin_sequence(3, concat(pb, {1}), ""), 16);
  EXPECT_EQ(table(m, 3, 0), (std::vector<BlockId>{a[0], a[1], b2[2], b2[3]}));
  m.free_sequence(1);
  m.free_sequence(2);
  m.free_sequence(3);
  // B's unregistered duplicates are empty once freed.
  EXPECT_FALSE(m.is_cached(0, b[0]));
  EXPECT_EQ(m.stats().blocks_cached, 4);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvPrefix, CachingOffDoesNoLookupsAndNoRegistration) {
  KvCacheManager m(make_config(4, {{0, 16}, {8, 16}}, /*caching=*/false));
  const auto p = seq_tokens(13, 0);
  EXPECT_EQ(run_prompt(m, 1, p), 0);
  EXPECT_EQ(run_prompt(m, 2, p), 0);
  for (int32_t g = 0; g < 2; ++g)
    for (BlockId b : m.block_table(1, g)) EXPECT_FALSE(b != kNoBlock && m.is_cached(g, b));
  m.free_sequence(1);
  m.free_sequence(2);
  const KvManagerStats st = m.stats();
  EXPECT_EQ(st.prefix_queries, 0);
  EXPECT_EQ(st.prefix_hits, 0);
  EXPECT_EQ(st.blocks_cached, 0);
  EXPECT_EQ(m.begin_sequence(3, p, ""), 0);
  EXPECT_NO_THROW(m.check_invariants());
}

// ---- Sliding windows ----

TEST(KvWindow, ReleasesInvisibleBlocksAndStaysBounded) {
  constexpr int32_t bs = 4, window = 10;
  KvCacheManager m(make_config(bs, {{window, 64}}));
  std::vector<int32_t> toks = seq_tokens(7, 0);
  m.begin_sequence(1, toks, "");
  ASSERT_TRUE(m.allocate_slots(1, 0, 7));
  m.commit_full_blocks(1, toks, 7);
  const int32_t bound = (window + bs - 1) / bs + 1;
  int32_t released = 0;
  for (int32_t n = 7; n < 300; ++n) {
    toks.push_back(1000 + n);
    ASSERT_TRUE(m.allocate_slots(1, n, n + 1));
    const auto t = table(m, 1, 0);
    ASSERT_EQ(static_cast<int32_t>(t.size()), n / bs + 1);
    int32_t live = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(t.size()); ++i) {
      const bool invisible = (i + 1) * bs - 1 <= n - window;
      ASSERT_EQ(t[i] == kNoBlock, invisible) << "n " << n << " block " << i;
      live += t[i] != kNoBlock;
    }
    ASSERT_LE(live, bound);
    ASSERT_LE(m.stats().blocks_used, bound);
    released = static_cast<int32_t>(t.size()) - live;
    m.commit_full_blocks(1, toks, n + 1);
  }
  EXPECT_EQ(released, (300 - window) / bs);
  // Released full blocks went back cached; every initially empty block has been used by now.
  const KvManagerStats st = m.stats();
  EXPECT_EQ(st.blocks_cached, st.blocks_free);
  // A chunk of c tokens needs up to ceil((window + c - 1) / bs) + 1 blocks while it runs.
  toks.resize(309, 5);
  ASSERT_TRUE(m.allocate_slots(1, 300, 309));
  int32_t live = 0;
  for (BlockId b : m.block_table(1, 0)) live += b != kNoBlock;
  EXPECT_LE(live, (window + 9 - 1 + bs - 1) / bs + 1);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvWindow, PrefixHitNeedsOnlyTheVisibleBlocks) {
  constexpr int32_t bs = 4;
  KvCacheManager m(make_config(bs, {{8, 64}}));
  const auto p = seq_tokens(40, 0);  // 10 full blocks
  run_prompt(m, 1, p);
  const auto a = table(m, 1, 0);
  m.free_sequence(1);
  // Block 9 differs: k = 10 is invalid, k = 9 needs blocks 7 and 8 (a query at 36 sees 29..36).
  std::vector<int32_t> d(p.begin(), p.begin() + 36);
  d = concat(concat(d, seq_tokens(4, 500)), {1});
  EXPECT_EQ(m.begin_sequence(2, d, ""), 36);
  EXPECT_EQ(table(m, 2, 0), (std::vector<BlockId>{kNoBlock, kNoBlock, kNoBlock, kNoBlock, kNoBlock,
                                                  kNoBlock, kNoBlock, a[7], a[8]}));
  // The full prompt: a query at 40 sees 33..40, so only blocks 8 and 9 are attached.
  EXPECT_EQ(m.begin_sequence(3, concat(p, {2}), ""), 40);
  const auto t3 = table(m, 3, 0);
  ASSERT_EQ(t3.size(), 10u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t3[i], kNoBlock);
  EXPECT_EQ(t3[8], a[8]);
  EXPECT_EQ(t3[9], a[9]);
  EXPECT_EQ(m.ref_count(0, a[8]), 2);
  // Drop blocks 0..7 from the cache: the full prompt still hits (8 and 9 are in use), but a
  // prompt needing block 6 or 7 does not.
  m.free_sequence(2);
  m.reset_prefix_cache();
  EXPECT_EQ(m.begin_sequence(4, concat(p, {3}), ""), 40);
  EXPECT_EQ(m.begin_sequence(5, concat(std::vector<int32_t>(p.begin(), p.begin() + 32), {3}), ""),
            0);
  // Growing from the hit releases nothing more (already released) and adds block 10.
  ASSERT_TRUE(m.allocate_slots(4, 40, 41));
  EXPECT_EQ(table(m, 4, 0).size(), 11u);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvMultiGroup, FullGroupCapsTheHit) {
  constexpr int32_t bs = 4;
  KvCacheManager m(make_config(bs, {{0, 12}, {8, 64}}));
  const auto p = seq_tokens(40, 0);
  run_prompt(m, 1, p);
  EXPECT_EQ(m.block_table(1, 0).size(), 10u);
  EXPECT_EQ(m.block_table(1, 1).size(), 10u);
  m.free_sequence(1);
  EXPECT_EQ(m.begin_sequence(2, concat(p, {1}), ""), 40);
  EXPECT_EQ(m.block_table(2, 0).size(), 10u);
  for (BlockId b : m.block_table(2, 0)) EXPECT_NE(b, kNoBlock);
  EXPECT_EQ(table(m, 2, 1)[7], kNoBlock);
  EXPECT_NE(table(m, 2, 1)[8], kNoBlock);
  m.free_sequence(2);
  // Evict block 9 from the full group only (2 empty blocks, then the LRU cached one: block 9,
  // freed first since free_sequence releases tail first).
  run_prompt(m, 3, seq_tokens(12, 500));
  EXPECT_EQ(m.stats().blocks_cached, 9 + 10);
  EXPECT_EQ(m.begin_sequence(4, concat(p, {1}), ""), 36);
  EXPECT_EQ(m.block_table(4, 0).size(), 9u);
  EXPECT_EQ(table(m, 4, 1)[6], kNoBlock);
  EXPECT_NE(table(m, 4, 1)[7], kNoBlock);
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvMultiGroup, WindowGroupCapsTheHit) {
  constexpr int32_t bs = 4;
  KvCacheManager m(make_config(bs, {{0, 64}, {8, 12}}));
  const auto p = seq_tokens(40, 0);
  run_prompt(m, 1, p);
  m.free_sequence(1);
  // Evict window-group blocks 9, 8, 7 (after the 2 empty ones): k = 10, 9, 8 all need one of
  // them; k = 7 needs blocks 5 and 6.
  run_prompt(m, 2, seq_tokens(20, 500));
  EXPECT_EQ(m.begin_sequence(3, concat(p, {1}), ""), 28);
  EXPECT_EQ(m.block_table(3, 0).size(), 7u);
  const auto w = table(m, 3, 1);
  ASSERT_EQ(w.size(), 7u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(w[i], kNoBlock);
  EXPECT_NE(w[5], kNoBlock);
  EXPECT_NE(w[6], kNoBlock);
  EXPECT_NO_THROW(m.check_invariants());
}

// ---- Lifecycle ----

TEST(KvLifecycle, FreeingEverythingRestoresTheStartingState) {
  constexpr int32_t bs = 4;
  KvCacheManager m(make_config(bs, {{0, 40}, {8, 40}}));
  const KvManagerStats start = m.stats();
  const auto p = seq_tokens(30, 0);
  run_prompt(m, 1, p);  // finished prompt, decoding below
  for (int32_t n = 30; n < 45; ++n) ASSERT_TRUE(m.allocate_slots(1, n, n + 1));
  m.begin_sequence(2, concat(p, {7}), "");  // hit, never allocated
  const int32_t hit = m.begin_sequence(3, concat(p, {8, 9}), "");
  ASSERT_TRUE(m.allocate_slots(3, hit, 32));   // mid-prefill, not committed
  m.begin_sequence(4, seq_tokens(3, 90), "");  // begun only
  ASSERT_GT(m.stats().blocks_used, 0);
  for (SeqId id : {3, 1, 4, 2}) m.free_sequence(id);
  for (SeqId id : {1, 2, 3, 4}) EXPECT_FALSE(m.has_sequence(id));
  KvManagerStats st = m.stats();
  EXPECT_EQ(st.blocks_used, 0);
  EXPECT_EQ(st.blocks_free, start.blocks_total);
  EXPECT_EQ(m.num_free_blocks(0), 40);
  EXPECT_EQ(m.num_free_blocks(1), 40);
  EXPECT_GT(st.blocks_cached, 0);
  m.reset_prefix_cache();
  st = m.stats();
  st.prefix_queries = st.prefix_hits = 0;
  EXPECT_TRUE(same_stats(st, start));
  EXPECT_NO_THROW(m.check_invariants());
}

TEST(KvLifecycle, MovedManagerKeepsItsState) {
  KvCacheManager a(make_config(4, {{0, 8}}));
  run_prompt(a, 1, seq_tokens(9, 0));
  KvCacheManager b(std::move(a));
  EXPECT_TRUE(b.has_sequence(1));
  EXPECT_EQ(b.begin_sequence(2, seq_tokens(9, 0), ""), 8);
  EXPECT_NO_THROW(b.check_invariants());
}

}  // namespace
}  // namespace triad::kv
