// The expert tier (engine/residency/expert_cache.h) never changes outputs: the trained
// qwen3moe evaluation model run with its routed experts in a RAM cache of any size (down to
// the fewest slots, where prefill chunks run their experts in waves), its layers resident or
// streamed, gives logits bit-identical to the plain engine reading the file mapping; and the
// cache's counters add up (every expert request is a hit or a miss, each miss reads one
// expert's bytes, a cache holding every expert misses each expert at most once).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <string>

#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/residency/expert_cache.h"
#include "engine/residency/residency_controller.h"
#include "engine/residency/residency_setup.h"
#include "engine/residency/weight_residency.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

std::string eval_model_path() {
  return spillway::test_paths::source() + "/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf";
}

struct StepsRun {
  std::vector<std::vector<float>> logits;  // per step, the last row
};

// A prefill in chunks of 12 and 7, then 8 decode steps, with the last row's logits.
StepsRun run_steps(const Model& model, LayerWeightSource* weights) {
  kernels::ThreadPool pool(2);
  const ModelConfig& c = model.config();
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 4);
  ForwardPass forward(model, kv, pool, 16, 64, weights);
  std::vector<int32_t> tokens = {1};
  for (int i = 1; i < 27; ++i) tokens.push_back(3 + (i * 11) % 40);
  StepsRun run;
  size_t pos = 0;
  for (size_t chunk : {12, 7, 1, 1, 1, 1, 1, 1, 1, 1}) {
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + pos, static_cast<int32_t>(chunk), static_cast<int64_t>(pos), {2, 0, 3, 1});
    batch.logit_rows.push_back(static_cast<int32_t>(chunk) - 1);
    auto logits = forward.execute(batch);
    EXPECT_TRUE(logits.ok()) << logits.error().message;
    if (!logits.ok()) return run;
    run.logits.emplace_back(logits->begin(), logits->end());
    pos += chunk;
  }
  return run;
}

bool same_bits(const StepsRun& a, const StepsRun& b) {
  if (a.logits.size() != b.logits.size() || a.logits.empty()) return false;
  for (size_t i = 0; i < a.logits.size(); ++i) {
    if (a.logits[i].size() != b.logits[i].size() ||
        std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

class ExpertCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = Model::open(eval_model_path());
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    plain_ = run_steps(*model_, nullptr);
    ASSERT_FALSE(plain_.logits.empty());
    auto sizes = ExpertCache::measure(*model_);
    ASSERT_TRUE(sizes.ok()) << sizes.error().message;
    sizes_ = *sizes;
  }

  std::unique_ptr<Model> model_;
  StepsRun plain_;
  ExpertCache::Sizes sizes_;
};

TEST_F(ExpertCacheTest, AnyCacheSizeAndLayerResidencyGivesTheSameBits) {
  const ModelConfig& c = model_->config();
  const int32_t n_layers = c.n_layers;
  const int32_t n_experts_total = n_layers * c.layers[0].n_expert;  // 64
  EXPECT_EQ(sizes_.min_slots, c.layers[0].n_expert_used);
  // F16 experts of 3 matrices of 128 x 64: 48 KiB of file bytes in 3 ranges, each landing
  // in 4 KiB-aligned staging (at most one extra block before and after each).
  const int64_t expert_bytes = 3 * 128 * 64 * 2;
  EXPECT_GE(sizes_.slot_bytes, expert_bytes);
  EXPECT_LE(sizes_.slot_bytes, expert_bytes + 3 * 2 * 4096);
  EXPECT_EQ(sizes_.routed_expert_bytes, sizes_.slot_bytes * n_experts_total);

  for (int32_t slots : {0, 5, 16, 40, n_experts_total}) {
    for (bool resident_layers : {true, false}) {
      WeightResidencyOptions o;
      o.expert_cache_bytes = int64_t(slots) * sizes_.slot_bytes;
      auto weights = WeightResidency::create(*model_, std::vector<bool>(n_layers, resident_layers), o);
      ASSERT_TRUE(weights.ok()) << weights.error().message;
      ASSERT_TRUE((*weights)->expert_tier());
      const StepsRun run = run_steps(*model_, weights->get());
      EXPECT_TRUE(same_bits(plain_, run)) << slots << " slots, layers resident " << resident_layers;

      const ExpertCacheStats s = (*weights)->expert_cache_stats();
      const int32_t want_slots = std::max(slots, sizes_.min_slots);
      EXPECT_EQ(s.slots, want_slots);
      EXPECT_EQ(s.cache_bytes, int64_t(want_slots) * sizes_.slot_bytes);
      EXPECT_GT(s.misses, 0u);
      EXPECT_EQ(s.bytes_read, s.misses * uint64_t(expert_bytes));  // file bytes, not the alignment
      EXPECT_LE(s.resident_experts, want_slots);
      if (slots >= n_experts_total) {
        EXPECT_LE(s.misses, uint64_t(n_experts_total));  // each expert read at most once
        EXPECT_EQ(s.evictions, 0u);
        EXPECT_GT(s.hits, 0u);
      }
      if (slots <= 5) {
        EXPECT_GT(s.evictions, 0u);
      }
    }
  }
}

TEST_F(ExpertCacheTest, TheLfuPolicyGivesTheSameBitsToo) {
  for (int32_t slots : {5, 16, 40}) {
    WeightResidencyOptions o;
    o.expert_cache_bytes = int64_t(slots) * sizes_.slot_bytes;
    o.expert_cache_policy = ExpertCachePolicy::Lfu;
    auto weights = WeightResidency::create(*model_, std::vector<bool>(model_->config().n_layers, true), o);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    EXPECT_TRUE(same_bits(plain_, run_steps(*model_, weights->get()))) << slots;
  }
}

TEST_F(ExpertCacheTest, TheSameRequestsWhateverTheCacheSize) {
  // hits + misses counts the distinct experts each layer of each step asked for, which the
  // routing alone decides (waves only split them).
  uint64_t requests = 0;
  for (int32_t slots : {4, 64}) {
    WeightResidencyOptions o;
    o.expert_cache_bytes = int64_t(slots) * sizes_.slot_bytes;
    auto weights = WeightResidency::create(*model_, std::vector<bool>(model_->config().n_layers, true), o);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    run_steps(*model_, weights->get());
    const ExpertCacheStats s = (*weights)->expert_cache_stats();
    if (requests == 0) requests = s.hits + s.misses;
    EXPECT_EQ(s.hits + s.misses, requests) << slots << " slots";
  }
  // 10 steps x 4 layers, between 4 (top-4 of one token) and 16 experts each.
  EXPECT_GE(requests, 10u * 4 * 4);
  EXPECT_LE(requests, 10u * 4 * 16);
}

TEST_F(ExpertCacheTest, TheLayerUnitsNoLongerHoldTheRoutedExperts) {
  WeightResidencyOptions off, on;
  on.expert_cache_bytes = 0;
  auto whole = WeightResidency::measure(*model_, off);
  auto apart = WeightResidency::measure(*model_, on);
  ASSERT_TRUE(whole.ok() && apart.ok());
  for (size_t l = 0; l < whole->layer_bytes.size(); ++l) {
    // Attention (~100 KiB) and the router stay; the 16 routed experts (768 KiB) leave.
    EXPECT_GT(apart->layer_bytes[l], 0);
    EXPECT_LT(apart->layer_bytes[l] + 12 * 48 * 1024, whole->layer_bytes[l]) << l;
  }
}

class FixedMemory final : public MemorySource {
 public:
  explicit FixedMemory(int64_t available) { r_.available_bytes = r_.limit_bytes = available; }
  MemoryReading read() const override { return r_; }

 private:
  MemoryReading r_;
};

// Under a budget the whole model does not fit (auto), or with an explicit cache size, the
// setup turns the expert tier on, keeps every layer's attention and router resident, and
// the output is still the mapping's, bit for bit; --expert-cache off keeps experts in layers.
TEST_F(ExpertCacheTest, TheResidencySetupChoosesTheExpertTier) {
  const ResidencyDemand demand{.context_tokens = 64, .max_batch_tokens = 16, .threads = 1};
  const int64_t runtime = runtime_reserve_bytes(model_->config(), demand);
  struct Case {
    std::optional<int64_t> cache;  // the option
    int64_t budget;                // above the runtime reserve and KV
    bool tier;
    int32_t slots;                 // expected, 0: don't check
  };
  const int64_t slot = sizes_.slot_bytes;
  const Case cases[] = {
      {std::nullopt, runtime + (64 << 20), false, 0},   // everything fits
      {std::nullopt, runtime + (2 << 20), true, 0},     // it does not: the room left is cache
      {int64_t{10} * slot, runtime + (64 << 20), true, 10},
      {int64_t{-1}, runtime + (3 << 20), false, 0},     // off: whole layers are streamed instead
  };
  for (const Case& k : cases) {
    ResidencyOptions o;
    o.memory_budget_bytes = k.budget;
    o.expert_cache_bytes = k.cache;
    o.priority = ResidencyPriority::MaxThroughput;
    // O_DIRECT: the plan then holds no page cache for buffered reads (read_mode_probe.h),
    // which at this model's size (3.4 MiB) would be the whole file.
    o.direct_io = true;
    auto setup = set_up_residency(*model_, o, demand, FixedMemory(k.budget));
    ASSERT_TRUE(setup.ok()) << setup.error().message;
    EXPECT_EQ(setup->plan.expert_tier, k.tier) << k.budget;
    EXPECT_EQ(setup->weights->expert_tier(), k.tier);
    if (k.cache == -1) {
      EXPECT_GT(setup->plan.streamed_layers, 0);
    }
    if (k.tier) {
      EXPECT_EQ(setup->plan.streamed_layers, 0);
      const ExpertCacheStats s = setup->weights->expert_cache_stats();
      if (k.slots > 0) {
        EXPECT_EQ(s.slots, k.slots);
      }
      EXPECT_GE(s.slots, sizes_.min_slots);
      EXPECT_LE(setup->plan.expert_cache_bytes, k.budget - runtime);
    }
    EXPECT_TRUE(same_bits(plain_, run_steps(*model_, setup->weights.get())));
  }
}

// A memory source whose available bytes a test sets between steps.
class SettableMemory final : public MemorySource {
 public:
  MemoryReading read() const override { return r; }
  MemoryReading r;
};

// Pressure sheds expert-cache slots first (layers stay resident) and calm brings them back,
// with every step's logits still the mapping's, bit for bit; only a cache at its fewest
// slots lets pressure shed layers.
TEST_F(ExpertCacheTest, PressureShedsCacheSlotsBeforeLayersAndCalmReadmitsThem) {
  const int32_t n_layers = model_->config().n_layers;
  WeightResidencyOptions o;
  o.expert_cache_bytes = 40 * sizes_.slot_bytes;
  auto weights = WeightResidency::create(*model_, std::vector<bool>(n_layers, true), o);
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  WeightResidency& w = **weights;
  SettableMemory memory;
  memory.r.limit_bytes = 1ll << 30;
  memory.r.available_bytes = 1ll << 30;
  PressurePolicy policy;
  policy.check_every_steps = 1;
  policy.readmit_after_seconds = 0;
  policy.readmit_margin_bytes = 0;
  ResidencyController controller(w, memory, policy);

  kernels::ThreadPool pool(2);
  const ModelConfig& c = model_->config();
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 4);
  ForwardPass forward(*model_, kv, pool, 16, 64, &w);
  std::vector<int32_t> tokens = {1};
  for (int i = 1; i < 27; ++i) tokens.push_back(3 + (i * 11) % 40);
  StepsRun run;
  std::vector<int32_t> slots_seen;
  size_t pos = 0;
  int step = 0;
  for (size_t chunk : {12, 7, 1, 1, 1, 1, 1, 1, 1, 1}) {
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + pos, static_cast<int32_t>(chunk), static_cast<int64_t>(pos), {2, 0, 3, 1});
    batch.logit_rows.push_back(static_cast<int32_t>(chunk) - 1);
    auto logits = forward.execute(batch);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    run.logits.emplace_back(logits->begin(), logits->end());
    pos += chunk;
    // Just under the floor after steps 1 and 2: 25% of the sheddable slots each time.
    memory.r.available_bytes = (step == 1 || step == 2) ? policy.floor_bytes - 1 : (1ll << 30);
    controller.on_step();
    slots_seen.push_back(w.expert_cache_stats().slots);
    EXPECT_EQ(w.resident_layers(), n_layers) << "step " << step;
    ++step;
  }
  EXPECT_TRUE(same_bits(plain_, run));
  const int32_t sheddable = 40 - sizes_.min_slots;  // 36
  const int32_t first = (sheddable + 3) / 4, second = (sheddable - first + 3) / 4;
  EXPECT_EQ(slots_seen[1], 40 - first);
  EXPECT_EQ(slots_seen[2], 40 - first - second);
  for (size_t i = 3; i < slots_seen.size(); ++i) EXPECT_GT(slots_seen[i], slots_seen[i - 1]) << i;  // calm
  EXPECT_LE(slots_seen.back(), 40);
  EXPECT_EQ(controller.shed_total(), 0);
  EXPECT_EQ(controller.expert_slots_shed_total(), first + second);

  // Far below the floor: the cache goes down to its fewest slots first, then layers go.
  memory.r.available_bytes = 10ll << 20;
  controller.on_step();
  EXPECT_EQ(w.expert_cache_stats().slots, sizes_.min_slots);
  EXPECT_EQ(w.resident_layers(), n_layers);
  controller.on_step();
  EXPECT_LT(w.resident_layers(), n_layers);
  EXPECT_TRUE(same_bits(plain_, run_steps(*model_, &w)));
}

// A read that fails mid-run (the file shrank under the cache) is an Error naming the file,
// not a crash; the failed experts are forgotten, and once the file is whole again the same
// residency gives the mapping's logits.
TEST_F(ExpertCacheTest, AFailedExpertReadIsAnErrorNamingTheFile) {
  namespace fs = std::filesystem;
  const fs::path copy = fs::path(spillway::test_paths::binary()) / ("spillway-expert-read-" + std::to_string(getpid()) + ".gguf");
  fs::copy_file(eval_model_path(), copy, fs::copy_options::overwrite_existing);
  {
    auto model = Model::open(copy.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    WeightResidencyOptions o;
    o.expert_cache_bytes = 8 * sizes_.slot_bytes;
    auto weights = WeightResidency::create(**model, std::vector<bool>(4, true), o);
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    const auto size = fs::file_size(copy);
    fs::resize_file(copy, size / 2);  // the experts of the later layers are gone
    kernels::ThreadPool pool(2);
    const ModelConfig& c = (*model)->config();
    KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 4);
    ForwardPass forward(**model, kv, pool, 16, 64, weights->get());
    std::vector<int32_t> tokens = {1, 5, 9, 13, 17, 21, 25, 29};
    ForwardBatch batch;
    batch.add_sequence(tokens.data(), 8, 0, {0, 1, 2, 3});
    batch.logit_rows.push_back(7);
    auto logits = forward.execute(batch);
    ASSERT_FALSE(logits.ok());
    EXPECT_NE(logits.error().message.find(copy.string()), std::string::npos) << logits.error().message;
    // Whole again: the residency still works and gives the mapping's bits.
    fs::copy_file(eval_model_path(), copy, fs::copy_options::overwrite_existing);
    EXPECT_TRUE(same_bits(plain_, run_steps(**model, weights->get())));
  }
  fs::remove(copy);
}

}  // namespace
}  // namespace spillway::engine
