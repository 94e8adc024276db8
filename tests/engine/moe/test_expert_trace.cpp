// The routing-trace replay (tools/expert_trace.h): hand-made traces with hit counts worked
// out by hand per policy; and on the trained qwen3moe model, the replay of the expert
// cache's policies (LRU + floor, LFU) predicts exactly the hits the real ExpertCache counted
// on the same run.
#include <gtest/gtest.h>

#include <string>

#include "engine/model/model.h"
#include "engine/residency/weight_residency.h"
#include "kernels/thread_pool.h"
#include "tools/expert_trace.h"
#include "support/paths.h"

namespace spillway::tools {
namespace {

// One MoE layer of 4 experts, top-1; one request per step.
ExpertTrace single_layer(const std::vector<int32_t>& requests) {
  ExpertTrace t;
  t.experts_per_layer = {4};
  t.experts_used = 1;
  for (int32_t e : requests) t.steps.push_back({{e}});
  return t;
}

TEST(ExpertTraceReplay, LruAndLfuOnAHandTrace) {
  // Slots 2. LRU: 0 miss, 0 hit, 1 miss, 2 miss (evicts 0, used longest ago), 0 miss.
  // LFU: ... 2 miss evicts 1 (asked once; 0 twice), 0 hit.
  const ExpertTrace t = single_layer({0, 0, 1, 2, 0});
  const ReplayResult lru = replay_expert_trace(t, CachePolicy::Lru, 2);
  EXPECT_EQ(lru.hits, 1u);
  EXPECT_EQ(lru.misses, 4u);
  const ReplayResult lfu = replay_expert_trace(t, CachePolicy::Lfu, 2);
  EXPECT_EQ(lfu.hits, 2u);
  EXPECT_EQ(lfu.misses, 3u);
  // A cache holding everything misses each expert once.
  EXPECT_EQ(replay_expert_trace(t, CachePolicy::Lru, 4).misses, 3u);
}

TEST(ExpertTraceReplay, PerLayerSharesAndWaves) {
  // Two layers of 4 experts; layer 0 asks for 3 experts in one step (waves of 2 with a
  // 2-slot share).
  ExpertTrace t;
  t.experts_per_layer = {4, 4};
  t.experts_used = 1;
  t.steps = {{{0, 1, 2}, {3}}, {{2}, {3}}};
  // Per layer (2 slots each): layer 0 wave {0,1} misses, wave {2} evicts 0 (LRU), step 2
  // hits 2; layer 1 misses 3 then hits it.
  const ReplayResult r = replay_expert_trace(t, CachePolicy::LruPerLayer, 4);
  EXPECT_EQ(r.misses, 4u);
  EXPECT_EQ(r.hits, 2u);
}

TEST(ExpertTraceReplay, PredictsTheExpertCacheHitsExactly) {
  auto model = engine::Model::open(spillway::test_paths::source() + "/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf");
  ASSERT_TRUE(model.ok()) << model.error().message;
  // Character-level vocabulary: <unk> <s> </s> ( ) + , 0-9 : = ? [ ] a-z { }.
  const std::vector<std::vector<int32_t>> prompts = {{1, 13, 14, 12, 9, 5, 15, 16, 17, 11, 18},
                                                     {1, 40, 33, 31, 45, 18, 10, 12, 14, 13, 18}};
  kernels::ThreadPool pool(2);
  for (auto [slots, policy] : {std::pair{6, CachePolicy::LruFloor}, std::pair{20, CachePolicy::LruFloor},
                                std::pair{40, CachePolicy::LruFloor}, std::pair{20, CachePolicy::Lfu},
                                std::pair{40, CachePolicy::Lfu}}) {
    engine::WeightResidencyOptions o;
    o.expert_cache_policy = policy == CachePolicy::Lfu ? engine::ExpertCachePolicy::Lfu : engine::ExpertCachePolicy::LruFloor;
    auto sizes = engine::ExpertCache::measure(**model);
    ASSERT_TRUE(sizes.ok());
    o.expert_cache_bytes = int64_t(slots) * sizes->slot_bytes;
    auto weights = engine::WeightResidency::create(**model, std::vector<bool>(4, true), o);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    auto trace = record_expert_trace(**model, pool, prompts, 10, 2, weights->get());
    ASSERT_TRUE(trace.ok()) << trace.error().message;
    const engine::ExpertCacheStats real = (*weights)->expert_cache_stats();
    const ReplayResult replay = replay_expert_trace(*trace, policy, slots);
    EXPECT_EQ(replay.hits, real.hits) << slots;
    EXPECT_EQ(replay.misses, real.misses) << slots;
    if (slots >= 20) {
      EXPECT_GT(real.hits, 0u);  // 6 slots < one step of 4 layers x top-4: LRU thrashes
    }
  }
}

}  // namespace
}  // namespace spillway::tools
