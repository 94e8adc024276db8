// Diffusion canvases through the EngineLoop with the real engine runner (llada-tiny, the
// golden-wave2 records): all 20 records' canvases submitted at once pack into shared engine
// steps and each gives exactly the tokens of its canvas run alone (engine/diffusion's
// single-canvas loop), and at least as many of them equal llama.cpp's canvas as the golden
// README's independent reference got (18/20).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
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
#include "update_collector.h"
#include "support/paths.h"

namespace spillway::scheduler {
namespace {

using namespace runtime;  // the engine loop and runner under test
namespace dd = engine::diffusion;

const std::string kModel = spillway::test_paths::testdata() + "/models/llada-tiny-peaked-f16.gguf";
const std::string kGolden = spillway::test_paths::testdata() + "/golden-wave2/diffusion/llada-tiny-peaked-f16.jsonl";

struct Record {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;  // the golden canvas after the prompt
  dd::DiffusionParams params;
};

std::vector<Record> read_records() {
  std::vector<Record> out;
  std::ifstream in(kGolden);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    Record r;
    r.prompt = j.at("prompt_tokens").get<std::vector<int32_t>>();
    r.tokens = j.at("tokens").get<std::vector<int32_t>>();
    const auto& p = j.at("params");
    r.params.algorithm = static_cast<dd::Algorithm>(p.at("algorithm").get<int>());
    r.params.schedule = static_cast<dd::Schedule>(p.at("schedule").get<int>());
    r.params.steps = p.at("steps_param");
    r.params.block_length = p.at("block_length");
    r.params.eps = p.at("eps");
    r.params.seed = p.at("seed");
    r.params.temperature = 0.0f;
    r.params.top_k = p.at("top_k");
    out.push_back(std::move(r));
  }
  return out;
}

// Records the largest number of sequences in one engine step.
class StepObserver final : public MetricsObserver {
 public:
  void on_step(const StepStats& stats) override {
    max_sequences = std::max(max_sequences.load(), stats.batch_sequences);
  }
  void on_prefix_lookup(int32_t, int32_t) override {}
  std::atomic<int32_t> max_sequences{0};
};

TEST(DiffusionServing, CanvasesBatchedThroughTheEngineLoopEqualAloneAndGolden) {
  auto model = engine::Model::open(kModel);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto tokenizer = engine::Tokenizer::from_metadata((*model)->source().metadata(), kModel);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  const engine::ModelConfig& cfg = (*model)->config();
  const std::vector<Record> records = read_records();
  ASSERT_EQ(records.size(), 20u);
  kernels::ThreadPool pool(2);

  // Alone: the single-canvas loop, F32 K/V as the runner uses for diffusion models.
  std::vector<std::vector<int32_t>> alone;
  for (const Record& r : records) {
    const auto length = static_cast<int32_t>(r.prompt.size() + r.tokens.size());
    const int32_t n_blocks = (length + 15) / 16;
    engine::KvCache kv(cfg, 16, n_blocks, kv_cache_type(cfg));
    engine::ForwardPass forward(**model, kv, pool, length, length);
    std::vector<int32_t> table(n_blocks);
    for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;
    dd::Canvas canvas(r.prompt, length, cfg.mask_token_id, cfg.shift_logits, r.params);
    ASSERT_TRUE(dd::run_canvas(forward, canvas, table).ok());
    alone.emplace_back(canvas.tokens().begin() + r.prompt.size(), canvas.tokens().end());
  }

  SchedulerConfig config;
  config.max_batch_tokens = 512;  // several canvases per step (40..232 positions each)
  config.max_running = 20;
  config.max_context = 256;
  config.block_size = 16;
  config.n_kv_blocks = 20 * 16;
  config.diffusion_model = true;
  config.mask_token_id = cfg.mask_token_id;
  config.shift_logits = cfg.shift_logits;
  std::vector<GenerationParams> requests;
  for (const Record& r : records) {
    GenerationParams p;
    p.prompt = r.prompt;
    p.max_tokens = static_cast<int32_t>(r.tokens.size());
    p.ignore_eos = true;  // the whole canvas, as llama-diffusion-cli prints it
    p.skip_special_tokens = false;
    p.diffusion = r.params;
    requests.push_back(std::move(p));
  }
  StepObserver observer;
  testing::UpdateCollector collector;  // outlives the loop, whose engine thread calls its sink
  EngineLoop loop(make_engine_runner(**model, pool, config), **tokenizer, config, &observer);
  loop.start();
  const std::vector<RequestId> ids = testing::submit_and_wait(loop, collector, requests, /*one_at_a_time=*/false);
  ASSERT_EQ(ids.size(), records.size());
  loop.stop();
  const EngineSnapshot snap = loop.snapshot();
  int golden_equal = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<int32_t> got = collector.tokens(ids[i]);
    EXPECT_EQ(got, alone[i]) << "record " << i;
    EXPECT_EQ(collector.finish(ids[i]), FinishReason::Length) << "record " << i;
    EXPECT_GT(collector.diffusion(ids[i]).value_or(DiffusionUsage{}).forwards, 0) << "record " << i;
    golden_equal += got == records[i].tokens ? 1 : 0;
  }
  EXPECT_GE(golden_equal, 18);
  EXPECT_GE(observer.max_sequences.load(), 3) << "canvases should share engine steps";
  EXPECT_EQ(snap.kv_blocks_used, 0);
}

}  // namespace
}  // namespace spillway::scheduler
