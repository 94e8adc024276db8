// The expert tier's counters and histograms (engine/residency/expert_cache.h,
// expert_tier_histogram.h) move together, checked against what the forward itself routed
// (MoeFfn::on_route, independent of the cache) on the trained qwen3moe evaluation model:
// - experts_per_layer_step: one observation per MoE layer and step, its value the distinct
//   experts the router picked there, also when the cache is too small and the layer runs
//   its experts in waves;
// - hits + misses = those experts summed; requested bytes = that x one expert's file bytes;
// - bytes read = misses x one expert's file bytes; one read-time observation per miss;
// - evictions = misses - experts left resident (no shrinking);
// - the decode report: (1 - hit rate) x requested bytes per token = bytes read per token.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/residency/expert_cache.h"
#include "engine/residency/weight_residency.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

std::string eval_model_path() {
  return spillway::test_paths::source() + "/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf";
}

// A prefill in chunks of 12 and 7, then `decode` steps of one token; per (step, MoE layer)
// the distinct experts the router picked.
std::vector<int32_t> routed_per_layer_step(const Model& model, LayerWeightSource* weights, int decode,
                                           ExpertCacheStats* before_decode = nullptr,
                                           WeightResidency* residency = nullptr) {
  kernels::ThreadPool pool(2);
  const ModelConfig& c = model.config();
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 4);
  ForwardPass forward(model, kv, pool, 16, 64, weights);
  std::vector<int32_t> routed;
  forward.moe_ffn().on_route = [&](int32_t, std::span<const int32_t> ids) {
    routed.push_back(static_cast<int32_t>(ids.size()));
  };
  std::vector<int32_t> tokens = {1};
  for (int i = 1; i < 19 + decode; ++i) tokens.push_back(3 + (i * 11) % 40);
  std::vector<size_t> chunks = {12, 7};
  chunks.insert(chunks.end(), static_cast<size_t>(decode), 1);
  size_t pos = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i == 2 && before_decode && residency) *before_decode = residency->expert_cache_stats();
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + pos, static_cast<int32_t>(chunks[i]), static_cast<int64_t>(pos), {2, 0, 3, 1});
    batch.logit_rows.push_back(static_cast<int32_t>(chunks[i]) - 1);
    auto logits = forward.execute(batch);
    EXPECT_TRUE(logits.ok()) << logits.error().message;
    pos += chunks[i];
  }
  return routed;
}

class ExpertTierMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = Model::open(eval_model_path());
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    auto sizes = ExpertCache::measure(*model_);
    ASSERT_TRUE(sizes.ok()) << sizes.error().message;
    sizes_ = *sizes;
  }
  std::unique_ptr<WeightResidency> residency(int32_t slots) {
    WeightResidencyOptions o;
    o.expert_cache_bytes = int64_t(slots) * sizes_.slot_bytes;
    auto w = WeightResidency::create(*model_, std::vector<bool>(model_->config().n_layers, true), o);
    EXPECT_TRUE(w.ok()) << w.error().message;
    return w.ok() ? std::move(*w) : nullptr;
  }

  std::unique_ptr<Model> model_;
  ExpertCache::Sizes sizes_;
};

// F16 experts of 3 matrices of 128 x 64 (test_expert_cache.cpp).
constexpr uint64_t kExpertFileBytes = 3 * 128 * 64 * 2;

TEST_F(ExpertTierMetricsTest, CountersAndHistogramsAgreeWithTheRouting) {
  const int32_t n_experts_total = model_->config().n_layers * model_->config().layers[0].n_expert;
  // 4 slots: the prefill chunks need more experts than that (waves); 16: LRU turns over;
  // every expert: nothing is evicted.
  for (int32_t slots : {4, 16, n_experts_total}) {
    auto w = residency(slots);
    ASSERT_NE(w, nullptr);
    const std::vector<int32_t> routed = routed_per_layer_step(*model_, w.get(), 8);
    ASSERT_EQ(routed.size(), 10u * model_->config().n_layers);  // 10 steps x 4 MoE layers
    const uint64_t requests = std::accumulate(routed.begin(), routed.end(), uint64_t{0});
    const ExpertCacheStats s = w->expert_cache_stats();

    EXPECT_EQ(s.experts_per_layer_step.count, routed.size()) << slots;
    EXPECT_EQ(s.experts_per_layer_step.sum, static_cast<double>(requests)) << slots;
    // Each routed count lands in its bucket: rebuild the histogram from the routing.
    ExpertsPerLayerStepHistogram want;
    for (int32_t n : routed) want.observe(n, kExpertsPerLayerStepBounds);
    EXPECT_EQ(s.experts_per_layer_step.counts, want.counts) << slots;

    EXPECT_EQ(s.hits + s.misses, requests) << slots;
    EXPECT_EQ(s.requested_bytes, requests * kExpertFileBytes) << slots;
    EXPECT_EQ(s.bytes_read, s.misses * kExpertFileBytes) << slots;
    EXPECT_EQ(s.read_time.count, s.misses) << slots;
    EXPECT_EQ(std::accumulate(s.read_time.counts.begin(), s.read_time.counts.end(), uint64_t{0}), s.misses);
    EXPECT_NEAR(s.read_time.sum, s.read_seconds, 1e-9 + 1e-9 * s.read_seconds) << slots;
    EXPECT_EQ(s.evictions, s.misses - static_cast<uint64_t>(s.resident_experts)) << slots;
    EXPECT_EQ(s.slot_bytes, sizes_.slot_bytes);
    if (slots == n_experts_total) {
      EXPECT_EQ(s.evictions, 0u);
    }
  }
}

TEST_F(ExpertTierMetricsTest, TheDecodeReportReadsWhatTheMissesCost) {
  auto w = residency(16);
  ASSERT_NE(w, nullptr);
  ExpertCacheStats before;
  const std::vector<int32_t> routed = routed_per_layer_step(*model_, w.get(), 12, &before, w.get());
  const ExpertCacheStats now = w->expert_cache_stats();
  // The decode steps' routing: the last 12 x 4 layer-steps.
  const uint64_t decode_requests = std::accumulate(routed.end() - 12 * 4, routed.end(), uint64_t{0});
  const ExpertDecodeReport d = expert_decode_report(now, before, 12, 2.0, 1e9);
  EXPECT_DOUBLE_EQ(d.tokens, 12);
  EXPECT_DOUBLE_EQ(d.requested_bytes_per_token, static_cast<double>(decode_requests * kExpertFileBytes) / 12);
  const uint64_t misses = now.misses - before.misses, hits = now.hits - before.hits;
  EXPECT_EQ(hits + misses, decode_requests);
  EXPECT_DOUBLE_EQ(d.hit_rate, static_cast<double>(hits) / static_cast<double>(decode_requests));
  EXPECT_DOUBLE_EQ(d.bytes_read_per_token, static_cast<double>(misses * kExpertFileBytes) / 12);
  // Equal-sized experts: reads are exactly the bound (1 - hit rate) x requested.
  EXPECT_NEAR(d.bytes_read_per_token, d.miss_bytes_bound_per_token, 1e-9 * d.requested_bytes_per_token);
  EXPECT_DOUBLE_EQ(d.stall_fraction, (now.stall_seconds - before.stall_seconds) / 2.0);
  EXPECT_DOUBLE_EQ(d.experts_per_layer_step, static_cast<double>(decode_requests) / (12 * 4));
  if (misses > 0) {
    EXPECT_DOUBLE_EQ(d.disk_bound_tokens_per_second, 1e9 / d.bytes_read_per_token);
  }

  // Two spans summed equal the span they make up.
  ExpertCacheStats sum;
  accumulate_expert_stats(sum, before, ExpertCacheStats{});
  accumulate_expert_stats(sum, now, before);
  EXPECT_EQ(sum.hits, now.hits);
  EXPECT_EQ(sum.misses, now.misses);
  EXPECT_EQ(sum.bytes_read, now.bytes_read);
  EXPECT_EQ(sum.requested_bytes, now.requested_bytes);
  EXPECT_EQ(sum.experts_per_layer_step.counts, now.experts_per_layer_step.counts);
  EXPECT_EQ(sum.read_time.count, now.read_time.count);
}

TEST(ExpertTierHistogram, BucketsAreUpperBoundsInclusive) {
  ExpertsPerLayerStepHistogram h;
  for (double v : {1.0, 2.0, 3.0, 8.0, 9.0, 1000.0}) h.observe(v, kExpertsPerLayerStepBounds);
  EXPECT_EQ(h.counts[0], 1u);  // le 1
  EXPECT_EQ(h.counts[1], 1u);  // le 2
  EXPECT_EQ(h.counts[2], 1u);  // le 4: 3
  EXPECT_EQ(h.counts[3], 1u);  // le 8
  EXPECT_EQ(h.counts[4], 1u);  // le 16: 9
  EXPECT_EQ(h.counts[ExpertsPerLayerStepHistogram::kBuckets - 1], 1u);  // +Inf
  EXPECT_EQ(h.count, 6u);
  EXPECT_DOUBLE_EQ(h.sum, 1023.0);
  const ExpertsPerLayerStepHistogram d = h.since(ExpertsPerLayerStepHistogram{});
  EXPECT_EQ(d.counts, h.counts);
}

}  // namespace
}  // namespace spillway::engine
