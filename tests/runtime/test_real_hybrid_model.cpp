// The EngineLoop with the real engine runner on the hybrid golden model qwen35-tiny-peaked
// (gated delta net + gated attention, recurrent-state slots): 8 concurrent greedy streams
// (chunked prefill among decodes, preemption under KV pressure, fewer state slots than
// requests) give each stream's solo tokens, and those are llama.cpp's golden tokens up to
// its first near-tie; a second turn and n > 1 forks resume from recurrent-state snapshots
// with the tokens of runs that recompute everything.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/residency/weight_residency.h"
#include "engine/state/recurrent_state.h"
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

const std::string kModel = spillway::test_paths::testdata() + "/models/qwen35-tiny-peaked-f16.gguf";
const std::string kGolden = spillway::test_paths::testdata() + "/golden-wave2/qwen35-tiny-peaked-f16.jsonl";

struct Golden {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;
  size_t comparable = 0;  // steps before llama.cpp's first top1-top2 logprob gap < 0.3
};

std::vector<Golden> read_golden() {
  std::vector<Golden> out;
  std::ifstream in(kGolden);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    Golden g{j.at("prompt_tokens").get<std::vector<int32_t>>(), j.at("tokens").get<std::vector<int32_t>>()};
    for (const auto& step : j.at("top5")) {
      if (double(step[0]["logprob"]) - double(step[1]["logprob"]) < 0.3) break;
      ++g.comparable;
    }
    out.push_back(std::move(g));
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

class RealHybridModel : public ::testing::Test {
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

  std::vector<std::vector<int32_t>> run(const SchedulerConfig& config, const std::vector<GenerationParams>& requests,
                                        bool one_at_a_time, EngineSnapshot* snapshot = nullptr) {
    kernels::ThreadPool pool(2);
    UpdateCollector collector;  // outlives the loop, whose engine thread calls its sink
    EngineLoop loop(make_engine_runner(*model_, pool, config), *tokenizer_, config);
    loop.start();
    const std::vector<RequestId> ids = submit_and_wait(loop, collector, requests, one_at_a_time);
    if (ids.size() != requests.size()) return {};
    loop.stop();
    if (snapshot) *snapshot = loop.snapshot();
    EXPECT_TRUE(collector.errors().empty()) << collector.errors().front();
    std::vector<std::vector<int32_t>> out;
    for (RequestId id : ids) {
      EXPECT_EQ(collector.finish(id), FinishReason::Length);
      out.push_back(collector.tokens(id));
    }
    return out;
  }

  static constexpr int kPromptOf[8] = {0, 1, 2, 3, 4, 4, 4, 1};
  std::vector<GenerationParams> requests() const {
    std::vector<GenerationParams> out;
    for (int i : kPromptOf) out.push_back(greedy(golden_[i].prompt, 32));
    return out;
  }
  void expect_golden(const std::vector<int32_t>& got, int i) const {
    const Golden& g = golden_[kPromptOf[i]];
    ASSERT_EQ(got.size(), g.tokens.size()) << "request " << i;
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + g.comparable),
              std::vector<int32_t>(g.tokens.begin(), g.tokens.begin() + g.comparable))
        << "request " << i << " (compared up to step " << g.comparable << ")";
  }

  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::vector<Golden> golden_;
};

TEST_F(RealHybridModel, EightConcurrentGreedyStreamsEqualAloneAndGolden) {
  SchedulerConfig config;
  config.max_batch_tokens = 64;  // the 182-token prompt is chunked among the decodes
  config.max_running = 8;
  config.max_context = 512;
  config.block_size = 16;
  const std::vector<GenerationParams> reqs = requests();

  // One at a time: the repeats of the 182-token prompt resume from the state snapshot at its
  // last full block (176 tokens) and recompute 6 tokens.
  EngineSnapshot alone_snap;
  const auto alone = run(config, reqs, /*one_at_a_time=*/true, &alone_snap);
  ASSERT_EQ(alone.size(), 8u);
  for (int i = 0; i < 8; ++i) expect_golden(alone[i], i);
  EXPECT_EQ(alone_snap.prefix_hit_tokens_total, 2 * 176);

  EngineSnapshot snap;
  const auto together = run(config, reqs, /*one_at_a_time=*/false, &snap);
  ASSERT_EQ(together.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(together[i], alone[i]) << "request " << i;
  EXPECT_EQ(snap.kv_blocks_used, 0);

  config.prefix_cache = false;
  EngineSnapshot no_cache;
  const auto uncached = run(config, reqs, /*one_at_a_time=*/true, &no_cache);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(uncached[i], alone[i]) << "request " << i;
  EXPECT_EQ(no_cache.prefix_hit_tokens_total, 0);
}

TEST_F(RealHybridModel, FewerStateSlotsAndKvPressureKeepTheTokens) {
  SchedulerConfig config;
  config.max_batch_tokens = 48;
  config.max_running = 8;
  config.max_context = 256;
  config.block_size = 16;
  config.n_kv_blocks = 20;   // 320 token slots: preemption
  config.n_state_slots = 3;  // at most 3 sequences run at once
  EngineSnapshot snap;
  const auto together = run(config, requests(), /*one_at_a_time=*/false, &snap);
  ASSERT_EQ(together.size(), 8u);
  for (int i = 0; i < 8; ++i) expect_golden(together[i], i);
  EXPECT_GT(snap.preemptions_total, 0);
}

// A second chat turn (the first turn's prompt + its answer + new tokens) resumes at the exact
// end of what turn 1 computed (its prompt and answer but the last answer token: the end
// block's KV and the state saved when turn 1 finished), with the tokens of an uncached run.
TEST_F(RealHybridModel, SecondTurnResumesFromAStateSnapshot) {
  SchedulerConfig config;
  config.max_batch_tokens = 64;
  config.max_running = 4;
  config.max_context = 512;
  config.block_size = 16;
  const GenerationParams first = greedy(golden_[4].prompt, 16);
  const auto turn1 = run(config, {first}, true);
  ASSERT_EQ(turn1.size(), 1u);
  std::vector<int32_t> prompt2 = golden_[4].prompt;
  prompt2.insert(prompt2.end(), turn1[0].begin(), turn1[0].end());
  prompt2.insert(prompt2.end(), golden_[0].prompt.begin(), golden_[0].prompt.end());
  EngineSnapshot snap;
  const auto both = run(config, {first, greedy(prompt2, 16)}, /*one_at_a_time=*/true, &snap);
  ASSERT_EQ(both.size(), 2u);
  // Turn 1 computed 182 + 15 = 197 tokens (12 full blocks and 5 in its end block): turn 2
  // computes only what turn 1 never computed.
  EXPECT_EQ(snap.prefix_hit_tokens_total, 197);
  // The runner's snapshot traffic (metrics): one restore; snapshots of whole states.
  const int64_t state_bytes = engine::RecurrentState::state_bytes(model_->config());
  EXPECT_EQ(snap.state_snapshot_stats.restores_total, 1);
  EXPECT_GE(snap.state_snapshot_stats.saves_total, 2);
  EXPECT_GT(snap.state_snapshot_stats.bytes, 0);
  EXPECT_EQ(snap.state_snapshot_stats.bytes % state_bytes, 0);
  EXPECT_GT(snap.state_snapshot_stats.save_seconds_total, 0.0);
  config.prefix_cache = false;
  const auto uncached = run(config, {greedy(prompt2, 16)}, true);
  ASSERT_EQ(uncached.size(), 1u);
  EXPECT_EQ(both[1], uncached[0]);
}

// n > 1: the other choices copy the state snapshot of the prompt's last full block into their
// slots and recompute only the prompt's partial block (6 of 182 tokens); their sampled tokens
// equal those of a run where every choice recomputes its whole prompt (no prefix cache).
TEST_F(RealHybridModel, ForkedChoicesFromTheStateSnapshotEqualRecomputedOnes) {
  SchedulerConfig config;
  config.max_batch_tokens = 64;
  config.max_running = 4;
  config.max_context = 512;
  config.block_size = 16;
  GenerationParams p = greedy(golden_[4].prompt, 12);
  p.n = 3;
  p.sampling.temperature = 0.9f;
  p.sampling.seed = 11;
  auto run_choices = [&](const SchedulerConfig& c, EngineSnapshot& snap) {
    kernels::ThreadPool pool(2);
    UpdateCollector collector;  // outlives the loop, whose engine thread calls its sink
    EngineLoop loop(make_engine_runner(*model_, pool, c), *tokenizer_, c);
    loop.start();
    const auto r = loop.submit(p, collector.sink());
    EXPECT_TRUE(std::holds_alternative<RequestId>(r));
    if (!std::holds_alternative<RequestId>(r)) return std::vector<std::vector<int32_t>>{};
    collector.wait_finished(1);
    loop.stop();
    snap = loop.snapshot();
    EXPECT_TRUE(collector.errors().empty());
    std::vector<std::vector<int32_t>> out;
    for (int32_t i = 0; i < p.n; ++i) out.push_back(collector.choice_tokens(std::get<RequestId>(r), i));
    return out;
  };
  EngineSnapshot forked, recomputed;
  const auto from_snapshot = run_choices(config, forked);
  config.prefix_cache = false;
  const auto from_scratch = run_choices(config, recomputed);
  ASSERT_EQ(from_snapshot.size(), 3u);
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(from_snapshot[i].size(), 12u) << i;
    EXPECT_EQ(from_snapshot[i], from_scratch[i]) << "choice " << i;
  }
  EXPECT_NE(from_snapshot[0], from_snapshot[1]);  // sampled, so the forks are really separate
  EXPECT_EQ(forked.state_snapshot_stats.restores_total, 2);  // one per fork
  EXPECT_EQ(recomputed.state_snapshot_stats.restores_total, 0);
}

}  // namespace
}  // namespace spillway::scheduler
