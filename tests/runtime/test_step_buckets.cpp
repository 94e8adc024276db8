// Shape buckets (runtime/step_buckets.h, issue #17): a step padded to its StepPlans bucket
// gives every live row the bits of the unpadded step:
// - the forward alone: AR prefill + decode rows (llama-tiny) and a canvas with a causal
//   sequence (llada-tiny), padded to every larger bucket of the ladder, logits equal bit for bit
//   and the padding rows write no K/V;
// - through the EngineLoop and the real runner (pad_step_buckets): llada canvases, several per
//   step, with compact_all_live (the compacted path, every row live), give exactly the tokens of
//   each canvas run alone with the reference loop; the plans used stay within the ladder and the
//   padding rows are counted per bucket.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/diffusion/generate.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/kv_cache.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_loop.h"
#include "runtime/engine_runner.h"
#include "runtime/step_buckets.h"
#include "scheduler/step_plans.h"
#include "update_collector.h"
#include "support/paths.h"

namespace spillway::scheduler {
namespace {

using namespace runtime;  // the runner and buckets under test
namespace dd = engine::diffusion;

std::string model_path(const char* name) { return spillway::test_paths::testdata() + "/models/" + name; }

// The K bytes of every layer and block of the cache (K is the first half of bytes()).
std::vector<uint8_t> all_keys(const engine::KvCache& kv) {
  const std::vector<int32_t> table = {0};
  const kernels::KvView k = kv.k_view(0, table);
  const auto* bytes = static_cast<const uint8_t*>(k.data);
  return std::vector<uint8_t>(bytes, bytes + size_t(kv.bytes()) / 2);
}

// Executes `batch` unpadded on one forward and padded to every larger bucket on fresh ones
// (each with its own KV cache, primed by `prime` when given); all logits must be equal.
void expect_padding_changes_nothing(const char* model_name, const engine::ForwardBatch& batch,
                                    const engine::ForwardBatch* prime) {
  auto m = engine::Model::open(model_path(model_name));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const engine::ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  const StepPlans plans(256);
  const auto n = static_cast<int32_t>(batch.tokens.size());
  std::vector<float> reference;
  std::vector<uint8_t> kv_reference;
  int checked = 0;
  for (int32_t rows : plans.sizes()) {
    if (rows < n) continue;
    engine::KvCache kv(cfg, 16, 12, kv_cache_type(cfg));
    engine::ForwardPass forward(**m, kv, pool, 256, 128);
    if (prime) {
      ASSERT_TRUE(forward.execute(*prime).ok());
    }
    engine::ForwardBatch padded;
    pad_forward_batch(batch, rows, padded);
    ASSERT_EQ(padded.tokens.size(), size_t(rows));
    ASSERT_EQ(padded.logit_rows, batch.logit_rows);
    auto logits = forward.execute(padded);
    ASSERT_TRUE(logits.ok()) << logits.error().message;
    // The K of every layer and block: padding rows write none.
    const std::vector<uint8_t> kv_now = all_keys(kv);
    if (reference.empty()) {
      ASSERT_EQ(rows, plans.padded(n));  // the first: the step's own bucket (maybe unpadded)
      engine::KvCache kv0(cfg, 16, 12, kv_cache_type(cfg));
      engine::ForwardPass f0(**m, kv0, pool, 256, 128);
      if (prime) {
        ASSERT_TRUE(f0.execute(*prime).ok());
      }
      auto unpadded = f0.execute(batch);
      ASSERT_TRUE(unpadded.ok());
      reference.assign(unpadded->begin(), unpadded->end());
      kv_reference = all_keys(kv0);
    }
    ASSERT_EQ(logits->size(), reference.size());
    EXPECT_EQ(std::memcmp(logits->data(), reference.data(), reference.size() * sizeof(float)), 0) << "rows " << rows;
    EXPECT_EQ(kv_now, kv_reference) << "rows " << rows;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(StepBuckets, PaddedArStepEqualsUnpaddedBitForBit) {
  // A prefill chunk of 9 tokens and a decode row at position 6 after a primed prompt.
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701, 29916, 263};
  engine::ForwardBatch prime;
  prime.add_sequence(prompt.data(), 6, 0, {4});
  engine::ForwardBatch step;
  const std::vector<int32_t> chunk = {1, 9038, 2501, 263, 931, 29892, 727, 471, 3};
  step.add_sequence(chunk.data(), 9, 0, {0, 1});
  step.logit_rows.push_back(8);
  step.add_sequence(prompt.data() + 6, 1, 6, {4});
  step.logit_rows.push_back(9);
  expect_padding_changes_nothing("llama-tiny-peaked-f16.gguf", step, &prime);
}

TEST(StepBuckets, PaddedCanvasAndCausalStepEqualsUnpaddedBitForBit) {
  auto m = engine::Model::open(model_path("llada-tiny-peaked-f16.gguf"));
  ASSERT_TRUE(m.ok());
  const int32_t mask = (*m)->config().mask_token_id;
  std::vector<int32_t> canvas = {1, 9038, 2501, 263, 931};
  canvas.resize(21, mask);
  const std::vector<int32_t> causal = {1, 450, 4996, 17354, 1701, 29916};
  engine::ForwardBatch step;
  step.add_sequence(causal.data(), 6, 0, {0});
  step.logit_rows.push_back(5);
  const int s = step.add_sequence(canvas.data(), 21, 0, {2, 3});
  step.sequences[s].mode = engine::AttentionMode::Canvas;
  step.sequences[s].canvas_end = 21;
  for (int32_t r : {6, 10, 26}) step.logit_rows.push_back(r);
  expect_padding_changes_nothing("llada-tiny-peaked-f16.gguf", step, nullptr);
}

TEST(StepBuckets, CanvasesPaddedAndCompactedAllLiveThroughTheEngineLoopEqualAlone) {
  const std::string path = model_path("llada-tiny-peaked-f16.gguf");
  auto model = engine::Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tokenizer = engine::Tokenizer::from_metadata((*model)->source().metadata(), path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const engine::ModelConfig& cfg = (*model)->config();
  kernels::ThreadPool pool(2);
  struct Case {
    std::vector<int32_t> prompt;
    int32_t gen;
    dd::DiffusionParams params;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 6; ++i) {
    Case c;
    c.prompt = {1, 9038 + i, 2501, 263, 931 + 7 * i};
    c.prompt.resize(5 + i, 450 + i);
    c.gen = 16 + 8 * (i % 3);
    c.params.schedule = i % 2 ? dd::Schedule::Timestep : dd::Schedule::Block;
    c.params.block_length = 8;
    c.params.blocks_over_canvas = false;
    c.params.steps = c.gen / 2;
    c.params.algorithm = i % 3 == 2 ? dd::Algorithm::Margin : dd::Algorithm::Confidence;
    cases.push_back(c);
  }
  std::vector<std::vector<int32_t>> alone;
  for (const Case& c : cases) {
    const auto length = static_cast<int32_t>(c.prompt.size()) + c.gen;
    const int32_t n_blocks = (length + 15) / 16;
    engine::KvCache kv(cfg, 16, n_blocks, kv_cache_type(cfg));
    engine::ForwardPass forward(**model, kv, pool, length, length);
    std::vector<int32_t> table(n_blocks);
    for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;
    dd::Canvas canvas(c.prompt, length, cfg.mask_token_id, cfg.shift_logits, c.params);
    ASSERT_TRUE(dd::run_canvas(forward, canvas, table).ok());
    alone.emplace_back(canvas.tokens().begin() + c.prompt.size(), canvas.tokens().end());
  }

  SchedulerConfig config;
  config.max_batch_tokens = 256;
  config.max_running = 6;
  config.max_context = 128;
  config.block_size = 16;
  config.n_kv_blocks = 6 * 8;
  config.diffusion_model = true;
  config.mask_token_id = cfg.mask_token_id;
  config.shift_logits = cfg.shift_logits;
  config.pad_step_buckets = true;
  std::vector<GenerationParams> requests;
  for (const Case& c : cases) {
    GenerationParams p;
    p.prompt = c.prompt;
    p.max_tokens = c.gen;
    p.ignore_eos = true;
    p.skip_special_tokens = false;
    p.diffusion = c.params;
    p.diffusion->compact = true;
    p.diffusion->compact_all_live = true;
    requests.push_back(std::move(p));
  }
  testing::UpdateCollector collector;  // outlives the loop, whose engine thread calls its sink
  auto runner = make_engine_runner(**model, pool, config);
  const ModelRunner* runner_view = runner.get();
  EngineLoop loop(std::move(runner), **tokenizer, config);
  loop.start();
  const std::vector<RequestId> ids = testing::submit_and_wait(loop, collector, requests, /*one_at_a_time=*/false);
  ASSERT_EQ(ids.size(), cases.size());
  loop.stop();
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(collector.tokens(ids[i]), alone[i]) << "case " << i;
  const EngineSnapshot snap = loop.snapshot();
  EXPECT_GE(snap.live_step_plans, 2);
  EXPECT_LE(snap.live_step_plans, StepPlans::kMaxPlans);
  const StepPlans* plans = runner_view->step_plans();
  ASSERT_NE(plans, nullptr);
  EXPECT_EQ(plans->builds(), snap.live_step_plans);
  int64_t padded = 0;
  for (size_t b = 0; b < plans->sizes().size(); ++b) padded += plans->padded_rows(static_cast<int>(b));
  EXPECT_GT(padded, 0);
}

}  // namespace
}  // namespace spillway::scheduler
