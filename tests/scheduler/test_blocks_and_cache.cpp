// KvBlockManager, PrefixCache, StopStringMatcher and StepPlans on their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "scheduler/kv_block_manager.h"
#include "scheduler/prefix_cache.h"
#include "scheduler/step_plans.h"
#include "scheduler/stop_strings.h"

namespace spillway::scheduler {
namespace {

TEST(KvBlockManager, AllocationFailureIsAValueAndChangesNothing) {
  KvBlockManager m(4);
  std::vector<int32_t> blocks;
  ASSERT_TRUE(m.allocate(3, blocks));
  EXPECT_EQ(blocks.size(), 3u);
  EXPECT_EQ(std::set<int32_t>(blocks.begin(), blocks.end()).size(), 3u);
  std::vector<int32_t> more;
  EXPECT_FALSE(m.allocate(2, more));
  EXPECT_TRUE(more.empty());
  EXPECT_EQ(m.used_blocks(), 3);
  EXPECT_EQ(m.free_blocks(), 1);
  for (int32_t b : blocks) m.release(b);
  EXPECT_EQ(m.used_blocks(), 0);
  EXPECT_EQ(m.free_blocks(), 4);
}

TEST(KvBlockManager, ReferenceCountsKeepSharedBlocks) {
  KvBlockManager m(2);
  std::vector<int32_t> b;
  ASSERT_TRUE(m.allocate(1, b));
  m.acquire(b[0]);
  EXPECT_EQ(m.ref_count(b[0]), 2);
  m.release(b[0]);
  EXPECT_EQ(m.used_blocks(), 1);
  m.release(b[0]);
  EXPECT_EQ(m.used_blocks(), 0);
  EXPECT_EQ(m.free_blocks(), 2);
}

struct RecordingListener : EvictionListener {
  std::vector<int32_t> evicted;
  void on_evict(int32_t block) override { evicted.push_back(block); }
};

TEST(KvBlockManager, CachedBlocksAreEvictedOnlyWhenNeededOldestFirst) {
  KvBlockManager m(4);
  RecordingListener listener;
  m.set_eviction_listener(&listener);
  std::vector<int32_t> b;
  ASSERT_TRUE(m.allocate(3, b));
  for (int32_t x : b) m.set_cached(x, true);
  m.release(b[1]);
  m.release(b[0]);
  m.release(b[2]);
  EXPECT_EQ(m.cached_blocks(), 3);
  EXPECT_EQ(m.free_blocks(), 1);

  std::vector<int32_t> got;
  ASSERT_TRUE(m.allocate(1, got));  // the free block: no eviction
  EXPECT_TRUE(listener.evicted.empty());
  m.acquire(b[1]);  // a hit takes b[1] out of the LRU
  EXPECT_EQ(m.available_after_acquiring(std::vector<int32_t>{b[0]}), 1);
  ASSERT_TRUE(m.allocate(2, got));
  EXPECT_EQ(listener.evicted, (std::vector<int32_t>{b[0], b[2]}));
  EXPECT_FALSE(m.is_cached(b[0]));
  EXPECT_EQ(m.cached_blocks(), 0);
  EXPECT_EQ(m.used_blocks(), 4);
}

TEST(PrefixCache, MatchesWholeBlocksAndLeavesTheLastToken) {
  KvBlockManager m(8);
  PrefixCache cache(m, 4, true);
  std::vector<int32_t> tokens(13);
  std::iota(tokens.begin(), tokens.end(), 100);
  std::vector<uint64_t> hashes;
  cache.extend_hashes(tokens, hashes);
  ASSERT_EQ(hashes.size(), 3u);
  std::vector<int32_t> table;
  ASSERT_TRUE(m.allocate(4, table));
  for (int i = 0; i < 3; ++i) cache.insert(tokens, hashes, i, table[i]);
  EXPECT_EQ(cache.size(), 3);

  PrefixMatch hit = cache.lookup(tokens, hashes);
  EXPECT_EQ(hit.tokens, 12);
  EXPECT_EQ(hit.blocks, (std::vector<int32_t>{table[0], table[1], table[2]}));

  std::vector<int32_t> exact(tokens.begin(), tokens.begin() + 12);  // 3 full blocks
  std::vector<uint64_t> h2;
  cache.extend_hashes(exact, h2);
  EXPECT_EQ(cache.lookup(exact, h2).tokens, 8);

  std::vector<int32_t> diverging = tokens;
  diverging[5] = 7;  // second block differs: only the first matches
  std::vector<uint64_t> h3;
  cache.extend_hashes(diverging, h3);
  EXPECT_EQ(cache.lookup(diverging, h3).tokens, 4);

  std::vector<int32_t> shifted(tokens.begin() + 4, tokens.end());  // same block, other prefix
  std::vector<uint64_t> h4;
  cache.extend_hashes(shifted, h4);
  EXPECT_EQ(cache.lookup(shifted, h4).tokens, 0);
}

TEST(PrefixCache, EvictionForgetsTheBlock) {
  KvBlockManager m(2);
  PrefixCache cache(m, 2, true);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5};
  std::vector<uint64_t> hashes;
  cache.extend_hashes(tokens, hashes);
  std::vector<int32_t> table;
  ASSERT_TRUE(m.allocate(2, table));
  cache.insert(tokens, hashes, 0, table[0]);
  cache.insert(tokens, hashes, 1, table[1]);
  m.release(table[1]);
  m.release(table[0]);
  EXPECT_EQ(cache.lookup(tokens, hashes).tokens, 4);
  std::vector<int32_t> fresh;
  ASSERT_TRUE(m.allocate(1, fresh));  // evicts table[1] (released first)
  EXPECT_EQ(fresh[0], table[1]);
  EXPECT_EQ(cache.lookup(tokens, hashes).tokens, 2);
  EXPECT_EQ(cache.size(), 1);
}

// End blocks: found under the prefix they end, longest first, only when the prompt goes on
// past them; taken over once; forgotten when the block manager evicts them.
TEST(PrefixCache, EndBlocksMatchTheirPrefixOnceAndAreForgottenOnEviction) {
  KvBlockManager m(6);
  PrefixCache cache(m, 4, true);
  std::vector<int32_t> turn1(10);  // 2 full blocks + an end block of 2
  std::iota(turn1.begin(), turn1.end(), 100);
  std::vector<uint64_t> hashes;
  cache.extend_hashes(turn1, hashes);
  std::vector<int32_t> table;
  ASSERT_TRUE(m.allocate(3, table));
  for (int i = 0; i < 2; ++i) cache.insert(turn1, hashes, i, table[i]);
  const std::optional<uint64_t> end_hash = cache.insert_end_block(turn1, hashes, 2, table[2]);
  ASSERT_TRUE(end_hash.has_value());
  std::vector<int32_t> twin;
  ASSERT_TRUE(m.allocate(1, twin));
  // The same end finished again in another block: the first registration stands.
  EXPECT_FALSE(cache.insert_end_block(turn1, hashes, 2, twin[0]).has_value());
  EXPECT_FALSE(m.is_cached(twin[0]));
  m.release(twin[0]);
  EXPECT_EQ(cache.end_blocks(), 1);
  for (int i = 2; i >= 0; --i) m.release(table[i]);
  EXPECT_EQ(m.cached_blocks(), 3);

  std::vector<int32_t> turn2 = turn1;
  turn2.push_back(7);
  std::vector<uint64_t> h2;
  cache.extend_hashes(turn2, h2);
  EXPECT_FALSE(cache.lookup_end_block(turn2, h2, 1).has_value());  // not the prefix it ends
  EXPECT_FALSE(cache.lookup_end_block(turn1, hashes, 2).has_value());  // nothing left to compute
  std::vector<int32_t> other = turn2;
  other[9] = 5;  // the end block's second token differs
  std::vector<uint64_t> h3;
  cache.extend_hashes(other, h3);
  EXPECT_FALSE(cache.lookup_end_block(other, h3, 2).has_value());
  const std::optional<EndBlockMatch> hit = cache.lookup_end_block(turn2, h2, 2);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->block, table[2]);
  EXPECT_EQ(hit->tokens, 2);
  EXPECT_EQ(hit->hash, *end_hash);

  m.acquire(hit->block);
  cache.take_end_block(hit->block);
  EXPECT_FALSE(cache.lookup_end_block(turn2, h2, 2).has_value());
  EXPECT_FALSE(m.is_cached(hit->block));
  m.release(hit->block);
  EXPECT_EQ(m.cached_blocks(), 2);

  // Registered again, then evicted: forgotten.
  std::vector<int32_t> again;
  ASSERT_TRUE(m.allocate(1, again));
  ASSERT_TRUE(cache.insert_end_block(turn1, hashes, 2, again[0]).has_value());
  m.release(again[0]);
  std::vector<int32_t> fill;
  ASSERT_TRUE(m.allocate(6, fill));  // every block, the cached ones evicted
  EXPECT_EQ(cache.end_blocks(), 0);
  EXPECT_EQ(cache.size(), 0);
  EXPECT_FALSE(cache.lookup_end_block(turn2, h2, 2).has_value());
}

TEST(PrefixCache, DuplicateContentStaysPrivateAndDisabledCacheMisses) {
  KvBlockManager m(4);
  PrefixCache cache(m, 2, true);
  const std::vector<int32_t> tokens = {1, 2, 3};
  std::vector<uint64_t> hashes;
  cache.extend_hashes(tokens, hashes);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(m.allocate(1, a));
  ASSERT_TRUE(m.allocate(1, b));
  cache.insert(tokens, hashes, 0, a[0]);
  cache.insert(tokens, hashes, 0, b[0]);
  EXPECT_TRUE(m.is_cached(a[0]));
  EXPECT_FALSE(m.is_cached(b[0]));
  m.release(b[0]);
  EXPECT_EQ(m.free_blocks(), 3);

  KvBlockManager m2(4);
  PrefixCache off(m2, 2, false);
  std::vector<int32_t> c;
  ASSERT_TRUE(m2.allocate(1, c));
  off.insert(tokens, hashes, 0, c[0]);
  EXPECT_EQ(off.lookup(tokens, hashes).tokens, 0);
  EXPECT_FALSE(m2.is_cached(c[0]));
}

TEST(StopStringMatcher, HoldsBackOnlyWhatCanStillMatch) {
  StopStringMatcher m({"</end>", "xyz"});
  EXPECT_EQ(m.push("hello <"), "hello ");
  EXPECT_EQ(m.held(), 1u);
  EXPECT_EQ(m.push("/e"), "");
  EXPECT_EQ(m.push("x"), "</e");  // "</ex" cannot become "</end>", but "x" may start "xyz"
  EXPECT_EQ(m.held(), 1u);
}

TEST(StopStringMatcher, ReleasesAndStops) {
  StopStringMatcher m({"xyz"});
  EXPECT_EQ(m.push("abx"), "ab");
  EXPECT_EQ(m.push("y"), "");
  EXPECT_EQ(m.push("q"), "xyq");
  EXPECT_EQ(m.push("1xy"), "1");
  EXPECT_EQ(m.push("z tail"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");

  StopStringMatcher none({});
  EXPECT_EQ(none.push("abc"), "abc");
  StopStringMatcher end({"zz"});
  EXPECT_EQ(end.push("az"), "a");
  EXPECT_EQ(end.flush(), "z");
}

TEST(StepPlans, AtMostTwelveBucketsUpToTheBudget) {
  StepPlans p512(512);
  EXPECT_EQ(std::vector<int32_t>(p512.sizes().begin(), p512.sizes().end()),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512}));
  StepPlans p256(256);
  EXPECT_EQ(std::vector<int32_t>(p256.sizes().begin(), p256.sizes().end()),
            (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256}));
  StepPlans p100(100);
  EXPECT_LE(p100.sizes().size(), 12u);
  EXPECT_EQ(p100.sizes().back(), 100);
  EXPECT_TRUE(std::is_sorted(p100.sizes().begin(), p100.sizes().end()));
  StepPlans p4096(4096);
  EXPECT_EQ(p4096.sizes().size(), 12u);
  EXPECT_EQ(p4096.sizes().front(), 8);
  StepPlans p3(3);
  EXPECT_EQ(std::vector<int32_t>(p3.sizes().begin(), p3.sizes().end()), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p512.padded(33), 64);
  EXPECT_EQ(p512.padded(129), 192);
  EXPECT_EQ(p512.padded(1), 1);
  EXPECT_EQ(p512.live(), 0);
  p512.record(3);
  p512.record(4);
  p512.record(500);
  EXPECT_EQ(p512.live(), 2);
  EXPECT_EQ(p512.builds(), 2);
  EXPECT_EQ(p512.steps(p512.bucket_for(4)), 2);
  EXPECT_EQ(p512.padded_rows(p512.bucket_for(4)), 1);  // 3 -> 4
  EXPECT_EQ(p512.padded_rows(p512.bucket_for(500)), 12);
}

}  // namespace
}  // namespace spillway::scheduler
