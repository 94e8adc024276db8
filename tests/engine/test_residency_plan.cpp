// The residency plan's arithmetic against the formula of DESIGN.md §1, worked by hand.
#include <gtest/gtest.h>

#include "engine/residency/residency_plan.h"

namespace spillway::engine {
namespace {

constexpr int64_t kMiB = 1 << 20;

ResidencySizes ten_layers() {
  ResidencySizes s;
  s.non_layer_bytes = 100 * kMiB;
  s.layer_bytes.assign(10, 50 * kMiB);
  s.kv_bytes_per_token = 64 * 1024;  // 1024 tokens = 64 MiB
  s.context_tokens = 4096;
  s.runtime_reserve_bytes = 36 * kMiB;
  // Streaming pieces: 5 slots of the largest matrix (12 MiB).
  s.staging_bytes = 60 * kMiB;
  s.staging_slots = 5;
  return s;
}

TEST(ResidencyPlan, EverythingFitsMeansAllResidentAndNoStaging) {
  auto plan = plan_residency(ten_layers(), {}, 2000 * kMiB);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->budget_is_auto);
  EXPECT_EQ(plan->resident_layers, 10);
  EXPECT_EQ(plan->staging_bytes, 0);
  EXPECT_EQ(plan->streamed_bytes_per_step, 0);
}

TEST(ResidencyPlan, FormulaWithBalancedPriority) {
  ResidencyOptions o;
  o.memory_budget_bytes = 600 * kMiB;
  // fixed = 100 + 36 + 64 (1024 tokens of KV) = 200; staging = 60;
  // room = 600 - 200 - 60 = 340 -> 340 / 50 * 0.9 = 6.12 -> 6 layers.
  auto plan = plan_residency(ten_layers(), o, 0);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_FALSE(plan->budget_is_auto);
  EXPECT_EQ(plan->resident_layers, 6);
  EXPECT_EQ(plan->streamed_layers, 4);
  EXPECT_EQ(plan->kv_reserve_bytes, 64 * kMiB);
  EXPECT_EQ(plan->staging_bytes, 60 * kMiB);
  EXPECT_EQ(plan->streamed_bytes_per_step, 200 * kMiB);
  EXPECT_EQ(plan->resident, (std::vector<bool>{1, 1, 1, 1, 1, 1, 0, 0, 0, 0}));
}

TEST(ResidencyPlan, SmallerStagingGoesToResidentLayers) {
  ResidencyOptions o;
  o.memory_budget_bytes = 600 * kMiB;
  // Whole-layer staging as before pieces (3 layers of 50 MiB): room 250 -> 4.5 -> 4 layers;
  // piece staging (60 MiB): room 340 -> 6.12 -> 6: the 90 MiB saved hold two more layers.
  ResidencySizes whole = ten_layers();
  whole.staging_bytes = 150 * kMiB;
  EXPECT_EQ(plan_residency(whole, o, 0)->resident_layers, 4);
  EXPECT_EQ(plan_residency(ten_layers(), o, 0)->resident_layers, 6);
  EXPECT_EQ(plan_residency(ten_layers(), o, 0)->staging_bytes, 60 * kMiB);
}

TEST(ResidencyPlan, TheReadCacheOfBufferedStreamingIsCountedOnlyWhenSomethingStreams) {
  ResidencyOptions o;
  o.memory_budget_bytes = 600 * kMiB;
  // room = 600 - 200 - 60 staging - 40 read cache = 300 -> 300 / 50 * 0.9 = 5.4 -> 5 layers.
  ResidencySizes s = ten_layers();
  s.read_cache_bytes = 40 * kMiB;
  auto plan = plan_residency(s, o, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resident_layers, 5);
  EXPECT_EQ(plan->staging_bytes, 60 * kMiB);
  EXPECT_EQ(plan->read_cache_bytes, 40 * kMiB);
  // Everything fits: no staging, no read cache.
  o.memory_budget_bytes = 2000 * kMiB;
  EXPECT_EQ(plan_residency(s, o, 0)->read_cache_bytes, 0);
  // Too small: the error names the read cache among the parts.
  o.memory_budget_bytes = 250 * kMiB;
  auto small = plan_residency(s, o, 0);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("read cache 40.0 MiB"), std::string::npos) << small.error().message;
}

TEST(ResidencyPlan, PriorityChangesTheKvReserve) {
  ResidencyOptions o;
  o.memory_budget_bytes = 600 * kMiB;
  o.priority = ResidencyPriority::MaxThroughput;  // 512 tokens: 32 MiB -> room 372 -> 6.7 -> 6
  EXPECT_EQ(plan_residency(ten_layers(), o, 0)->resident_layers, 6);
  o.priority = ResidencyPriority::MaxContext;  // 4096 tokens: 256 MiB -> room 148 -> 2.66 -> 2
  EXPECT_EQ(plan_residency(ten_layers(), o, 0)->resident_layers, 2);
}

TEST(ResidencyPlan, AnExplicitKvSizeReplacesThePriorityReserve) {
  ResidencyOptions o;
  o.memory_budget_bytes = 600 * kMiB;
  o.kv_reserve_bytes = 14 * kMiB;  // fixed = 100 + 36 + 14 = 150 -> room 390 -> 7.02 -> 7
  auto plan = plan_residency(ten_layers(), o, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->kv_reserve_bytes, 14 * kMiB);
  EXPECT_EQ(plan->resident_layers, 7);
}

TEST(ResidencyPlan, BudgetBelowTheMinimumIsAClearError) {
  ResidencyOptions o;
  o.memory_budget_bytes = 250 * kMiB;  // needs 200 fixed + 60 staging
  auto plan = plan_residency(ten_layers(), o, 0);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("too small"), std::string::npos);
  EXPECT_NE(plan.error().message.find("260.0 MiB"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("5 slots"), std::string::npos) << plan.error().message;
}

TEST(ResidencyPlan, ExplicitCountOverridesTheBudget) {
  ResidencyOptions o;
  o.resident_layers = 7;
  o.placement = ResidencyPlacement::Last;
  auto plan = plan_residency(ten_layers(), o, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->resident, (std::vector<bool>{0, 0, 0, 1, 1, 1, 1, 1, 1, 1}));
  o.resident_layers = 0;
  EXPECT_EQ(plan_residency(ten_layers(), o, 1)->streamed_layers, 10);
  o.resident_layers = 99;
  EXPECT_EQ(plan_residency(ten_layers(), o, 1)->resident_layers, 10);
}

TEST(ResidencyPlan, InterleavedPlacementSpreadsResidentLayers) {
  EXPECT_EQ(place_resident_layers(8, 4, ResidencyPlacement::Interleaved),
            (std::vector<bool>{1, 0, 1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(place_resident_layers(10, 3, ResidencyPlacement::Interleaved),
            (std::vector<bool>{1, 0, 0, 1, 0, 0, 1, 0, 0, 0}));
  for (int n = 0; n <= 10; ++n) {
    auto r = place_resident_layers(10, n, ResidencyPlacement::Interleaved);
    EXPECT_EQ(std::count(r.begin(), r.end(), true), n);
  }
}

TEST(ResidencyPlan, FlagSpellings) {
  EXPECT_EQ(parse_residency_priority("max-context"), ResidencyPriority::MaxContext);
  EXPECT_EQ(parse_residency_priority("fast"), std::nullopt);
  EXPECT_EQ(parse_residency_placement("interleaved"), ResidencyPlacement::Interleaved);
  EXPECT_EQ(parse_residency_placement("middle"), std::nullopt);
}

}  // namespace
}  // namespace spillway::engine
