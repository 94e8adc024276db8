// The EngineLoop with the real engine runner on the golden stories260K model: greedy
// requests give the same tokens concurrently (chunked prefill, shared prefixes,
// preemption) as alone, and those are llama.cpp's golden tokens.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/residency/weight_residency.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_loop.h"
#include "runtime/engine_runner.h"
#include "update_collector.h"
#include "support/paths.h"

namespace spillway::scheduler {
namespace {

using namespace runtime;  // the engine loop and runner under test
using testing::submit_and_wait;
using testing::UpdateCollector;

const std::string kModel = spillway::test_paths::testdata() + "/models/stories260K.gguf";
const std::string kGolden = spillway::test_paths::testdata() + "/golden/stories260K.jsonl";

struct Golden {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;
};

std::vector<Golden> read_golden() {
  std::vector<Golden> out;
  std::ifstream in(kGolden);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("prompt_tokens").get<std::vector<int32_t>>(),
                   j.at("tokens").get<std::vector<int32_t>>()});
  }
  return out;
}

GenerationParams greedy(const std::vector<int32_t>& prompt, int32_t max_tokens) {
  GenerationParams p;
  p.prompt = prompt;
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0.0f;
  return p;
}

class RealModel : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = engine::Model::open(kModel);
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    auto tokenizer = engine::Tokenizer::from_metadata(model_->source().metadata(), kModel);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    tokenizer_ = std::move(*tokenizer);
    golden_ = read_golden();
    ASSERT_EQ(golden_.size(), 5u);
  }

  // Runs the requests through one EngineLoop, all submitted at once (or one after the
  // other when one_at_a_time), and returns their tokens.
  std::vector<std::vector<int32_t>> run(const SchedulerConfig& config,
                                        const std::vector<GenerationParams>& requests,
                                        bool one_at_a_time, EngineSnapshot* snapshot = nullptr,
                                        EngineRunnerOptions runner_options = {}) {
    kernels::ThreadPool pool(2);
    UpdateCollector collector;  // outlives the loop, whose engine thread calls its sink
    EngineLoop loop(make_engine_runner(*model_, pool, config, std::move(runner_options)),
                    *tokenizer_, config);
    loop.start();
    const std::vector<RequestId> ids = submit_and_wait(loop, collector, requests, one_at_a_time);
    if (ids.size() != requests.size()) return {};
    loop.stop();
    if (snapshot) *snapshot = loop.snapshot();
    EXPECT_TRUE(collector.errors().empty());
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) {
      EXPECT_EQ(collector.finish(id), FinishReason::Length);
      out.push_back(collector.tokens(id));
    }
    return out;
  }

  // The five golden prompts and three repeats (the 406-token one twice): 8 requests.
  static constexpr int kPromptOf[8] = {0, 1, 2, 3, 4, 4, 4, 1};
  std::vector<GenerationParams> requests() const {
    std::vector<GenerationParams> out;
    for (int i : kPromptOf) out.push_back(greedy(golden_[i].prompt, 32));
    return out;
  }

  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::vector<Golden> golden_;
};

TEST_F(RealModel, ConcurrentGreedyRequestsEqualAloneAndGolden) {
  SchedulerConfig config;
  config.max_batch_tokens = 64;  // the 406-token prompt is chunked among the decodes
  config.max_running = 8;
  config.max_context = 512;
  config.block_size = 16;
  config.n_kv_blocks = 0;  // default
  const std::vector<GenerationParams> reqs = requests();

  const auto alone = run(config, reqs, /*one_at_a_time=*/true);
  ASSERT_EQ(alone.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(alone[i], golden_[kPromptOf[i]].tokens) << "request " << i;

  EngineSnapshot snap;
  const auto together = run(config, reqs, /*one_at_a_time=*/false, &snap);
  ASSERT_EQ(together.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(together[i], alone[i]) << "request " << i;
  EXPECT_GE(snap.prefix_hit_tokens_total, 2 * 320);  // the repeats of the long prompt
  EXPECT_GE(snap.live_step_plans, 2);
  EXPECT_LE(snap.live_step_plans, 12);  // StepPlans::kMaxPlans
  EXPECT_EQ(snap.kv_blocks_used, 0);
}

// Shape buckets (issue #17): every step padded up to its StepPlans bucket; the padding rows
// change no live row, so concurrent greedy requests still give llama.cpp's golden tokens.
TEST_F(RealModel, StepsPaddedToBucketsGiveTheGoldenTokens) {
  SchedulerConfig config;
  config.max_batch_tokens = 64;
  config.max_running = 8;
  config.max_context = 512;
  config.block_size = 16;
  config.pad_step_buckets = true;
  const std::vector<GenerationParams> reqs = requests();
  EngineSnapshot snap;
  const auto together = run(config, reqs, /*one_at_a_time=*/false, &snap);
  ASSERT_EQ(together.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(together[i], golden_[kPromptOf[i]].tokens) << "request " << i;
  EXPECT_LE(snap.live_step_plans, 12);  // StepPlans::kMaxPlans
  EXPECT_EQ(snap.step_plan_builds, snap.live_step_plans);
  int64_t padded = 0;
  for (const auto& [bucket, rows] : snap.padded_rows_by_bucket) padded += rows;
  EXPECT_GT(padded, 0);
}

TEST_F(RealModel, PreemptionUnderKvPressureKeepsTheTokens) {
  // Without the prefix cache resumption recomputes everything; with it, resumption reads
  // back the KV of blocks it left in the cache.
  for (bool prefix_cache : {false, true}) {
    SchedulerConfig config;
    config.max_batch_tokens = 48;
    config.max_running = 8;
    config.max_context = 448;
    config.block_size = 16;
    config.n_kv_blocks = 30;  // 480 token slots: the long prompt alone takes 28 blocks
    config.prefix_cache = prefix_cache;
    EngineSnapshot snap;
    const auto together = run(config, requests(), /*one_at_a_time=*/false, &snap);
    ASSERT_EQ(together.size(), 8u);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(together[i], golden_[kPromptOf[i]].tokens) << "request " << i << " cache " << prefix_cache;
    }
    EXPECT_GT(snap.preemptions_total, 0);
    if (prefix_cache) {
      EXPECT_GT(snap.prefix_hit_tokens_total, 0);
    }
  }
}

// Streamed weights through the serving path: every layer read from disk each step, and
// layers moved between resident and streamed between steps by the runner's hook, while 8
// requests run concurrently: still exactly llama.cpp's tokens.
TEST_F(RealModel, StreamedAndReshuffledLayersKeepTheTokens) {
  const int32_t n_layers = model_->config().n_layers;
  auto weights = engine::WeightResidency::create(*model_, std::vector<bool>(n_layers, false), {});
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  int steps = 0;
  EngineRunnerOptions options;
  options.weights = weights->get();
  options.between_steps = [&] {
    // Every 3 steps make the next layer resident; every 7, stream the highest resident one.
    ++steps;
    if (steps % 3 == 0) {
      for (int32_t l = 0; l < n_layers; ++l) {
        if (!(*weights)->is_resident(l)) {
          ASSERT_TRUE((*weights)->make_resident(l).ok());
          break;
        }
      }
    }
    if (steps % 7 == 0) {
      for (int32_t l = n_layers - 1; l >= 0; --l) {
        if ((*weights)->is_resident(l)) {
          (*weights)->make_streamed(l);
          break;
        }
      }
    }
  };
  SchedulerConfig config;
  config.max_batch_tokens = 64;
  config.max_running = 8;
  config.max_context = 512;
  const auto together = run(config, requests(), /*one_at_a_time=*/false, nullptr, std::move(options));
  ASSERT_EQ(together.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(together[i], golden_[kPromptOf[i]].tokens) << "request " << i;
  EXPECT_GT(steps, 20);
  EXPECT_GT((*weights)->streamer_stats().bytes_read, 0u);
}

}  // namespace
}  // namespace spillway::scheduler
