// The reference sampler's parts without a model: schedules (against the counts the golden
// README states), the RNG draw (against libstdc++'s distribution), the commit rule on
// synthetic logits (top count by confidence, ties to the lower position, never remask,
// empty-block steps, shift_logits rows), validation naming fields; and the canvas forward:
// a canvas batched with a causal sequence gives both the same bits as alone.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/diffusion/canvas.h"
#include "engine/diffusion/generate.h"
#include "engine/diffusion/schedule.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/kv_cache.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine::diffusion {
namespace {

TEST(DiffusionSchedule, TimestepCountsOfTheGoldenReadme) {
  // README: 36 masks over 8 steps with eps 1e-3 commit 4, 4, 4, 4, 4, 5, 5, 6.
  std::vector<int32_t> got;
  int32_t remaining = 36;
  for (int32_t s = 0; s < 8; ++s) {
    const int32_t n = timestep_commit_count(s, 8, remaining, 0.001f);
    got.push_back(n);
    remaining -= n;
  }
  EXPECT_EQ(got, (std::vector<int32_t>{4, 4, 4, 4, 4, 5, 5, 6}));
}

TEST(DiffusionSchedule, BlockCountsSplitEvenlyWithRemainderFirst) {
  EXPECT_EQ(block_commit_counts(7, 3), (std::vector<int32_t>{3, 2, 2}));
  EXPECT_EQ(block_commit_counts(2, 4), (std::vector<int32_t>{1, 1, 0, 0}));
  const BlockRange r = block_range(2, 5, 8, 24);  // blocks start after the prompt
  EXPECT_EQ(r.begin, 21);
  EXPECT_EQ(r.end, 24);
}

TEST(DiffusionRng, UniformFloatIsLibstdcxxDistribution) {
  std::mt19937 a(42), b(42);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(uniform_float(a), dist(b)) << "draw " << i;
}

// Logits where position p's row prefers token (p % 5) + 1 with margin `margin[p]`.
std::vector<float> rows_for(const std::vector<int32_t>& positions, int32_t n_vocab, const std::vector<float>& margin) {
  std::vector<float> out(positions.size() * n_vocab, 0.0f);
  for (size_t i = 0; i < positions.size(); ++i) out[i * n_vocab + (positions[i] % 5) + 1] = margin[positions[i]];
  return out;
}

TEST(DiffusionCanvas, ConfidenceCommitsTopCountTiesToLowerPositionNeverRemasks) {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 8;
  p.steps = 4;  // 2 blocks (canvas 16), 2 steps each
  p.algorithm = Algorithm::Confidence;
  const int32_t n_vocab = 8, mask = 7;
  const std::vector<int32_t> prompt = {1, 2};
  std::vector<float> margin(16, 1.0f);
  margin[5] = 3.0f;  // most confident in block 0 (positions 2..9)
  margin[8] = 3.0f;  // a tie with 5: 5 (lower) first
  ASSERT_TRUE(validate(p, 2, 16).ok());
  Canvas c(prompt, 16, mask, false, p);
  auto rows = c.begin_step();
  EXPECT_EQ(std::vector<int32_t>(rows.begin(), rows.end()), (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 9}));
  auto logits = rows_for({rows.begin(), rows.end()}, n_vocab, margin);
  c.commit(logits.data(), n_vocab);
  // 8 masks over 2 steps: 4 now: 5 and 8 (most confident), then 2, 3 (ties to lower).
  EXPECT_EQ(c.last_positions(), (std::vector<int32_t>{2, 3, 5, 8}));
  EXPECT_EQ(c.last_tokens(), (std::vector<int32_t>{3, 4, 1, 4}));
  EXPECT_EQ(c.committed_prefix_end(), 4);
  rows = c.begin_step();
  EXPECT_EQ(std::vector<int32_t>(rows.begin(), rows.end()), (std::vector<int32_t>{4, 6, 7, 9}));
  logits = rows_for({rows.begin(), rows.end()}, n_vocab, margin);
  c.commit(logits.data(), n_vocab);
  EXPECT_EQ(c.committed_prefix_end(), 10);
  // Block 1 = positions 10..15 (short: the canvas ends at 16): 6 masks, 3 per step.
  rows = c.begin_step();
  EXPECT_EQ(rows.size(), 6u);
  logits = rows_for({rows.begin(), rows.end()}, n_vocab, margin);
  c.commit(logits.data(), n_vocab);
  rows = c.begin_step();
  logits = rows_for({rows.begin(), rows.end()}, n_vocab, margin);
  c.commit(logits.data(), n_vocab);
  EXPECT_TRUE(c.begin_step().empty());
  EXPECT_TRUE(c.done());
  for (int32_t i = 2; i < 16; ++i) EXPECT_EQ(c.tokens()[i], (i % 5) + 1) << i;
  EXPECT_EQ(c.stats().forwards, 4);
  EXPECT_EQ(c.stats().empty_steps, 0);
  EXPECT_EQ(c.stats().rows_sampled, 8 + 4 + 6 + 3);
}

TEST(DiffusionCanvas, EmptyBlockStepsRunNoForward) {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 4;
  p.steps = 6;  // 2 blocks of 3 steps; prompt 3 => block 0 = [3, 7) has 4 masks, block 1 = [7, 8) 1 mask
  const int32_t n_vocab = 8, mask = 7;
  const std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<float> margin(8, 1.0f);
  Canvas c(prompt, 8, mask, true, p);
  EXPECT_EQ(c.logit_row(0), 0);
  EXPECT_EQ(c.logit_row(5), 4);
  int forwards = 0;
  for (;;) {
    auto rows = c.begin_step();
    if (c.done()) break;
    auto logits = rows_for({rows.begin(), rows.end()}, n_vocab, margin);
    c.commit(logits.data(), n_vocab);
    ++forwards;
  }
  // Block 0: counts 2,1,1 (3 forwards); block 1: 1 mask => 1,0,0: one forward, then an empty step.
  EXPECT_EQ(forwards, 4);
  EXPECT_EQ(c.stats().empty_steps, 1);
  EXPECT_EQ(c.stats().steps_run, 5);
}

TEST(DiffusionCanvas, RandomAlgorithmDrawsOncePerMaskedPositionPerStep) {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 8;
  p.steps = 16;  // one block: canvas 8 after a 1-token prompt = 7 masks over 16 steps
  p.algorithm = Algorithm::Random;
  p.seed = 7;
  const int32_t n_vocab = 8, mask = 7;
  const std::vector<int32_t> prompt = {1};
  Canvas c(prompt, 8, mask, false, p);
  std::mt19937 rng(7);
  std::vector<float> margin(8, 1.0f);
  while (true) {
    auto rows = c.begin_step();
    if (c.done()) break;
    std::vector<float> conf;
    for (size_t i = 0; i < rows.size(); ++i) conf.push_back(uniform_float(rng));
    int32_t best = 0;
    for (size_t i = 1; i < conf.size(); ++i) if (conf[i] > conf[best]) best = static_cast<int32_t>(i);
    const int32_t expect = rows[best];
    auto logits = rows_for({rows.begin(), rows.end()}, n_vocab, margin);
    c.commit(logits.data(), n_vocab);
    ASSERT_EQ(c.last_positions(), std::vector<int32_t>{expect});  // 7 masks over 16 steps: 1 each
  }
  EXPECT_EQ(c.stats().committed, 7);
}

// Rows whose probability of their best token is about `p[pos]` (two candidates).
std::vector<float> rows_with_p(const std::vector<int32_t>& positions, int32_t n_vocab, const std::vector<float>& p) {
  std::vector<float> out(positions.size() * n_vocab, -1e9f);
  for (size_t i = 0; i < positions.size(); ++i) {
    const float q = p[positions[i]];
    out[i * n_vocab + (positions[i] % 5) + 1] = std::log(q);
    out[i * n_vocab + 6] = std::log(1.0f - q);
  }
  return out;
}

TEST(DiffusionTurbo, ThresholdCommitsEveryConfidentRowElseTheTopOneAndSwitchesStage) {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 8;
  p.steps = 2;  // the reference would run 2 steps per block; turbo runs until the block is full
  p.threshold = 0.9f;
  p.threshold_low = 0.6f;
  p.threshold_switch = 2;
  const int32_t n_vocab = 8, mask = 7;
  const std::vector<int32_t> prompt = {1, 2};
  // Block 0 = positions 2..7 (canvas 8 = one block of 8 over the canvas, 6 masks).
  std::vector<float> prob = {0, 0, 0.95f, 0.5f, 0.97f, 0.7f, 0.65f, 0.55f};
  Canvas c(prompt, 8, mask, false, p);
  auto step = [&] {
    auto rows = c.begin_step();
    EXPECT_FALSE(c.done());
    auto logits = rows_with_p({rows.begin(), rows.end()}, n_vocab, prob);
    c.commit(logits.data(), n_vocab);
    return c.last_positions();
  };
  EXPECT_EQ(step(), (std::vector<int32_t>{2, 4}));  // >= 0.9
  EXPECT_EQ(step(), (std::vector<int32_t>{5}));     // none >= 0.9: the most confident alone
  EXPECT_EQ(step(), (std::vector<int32_t>{6}));     // from step 2 of the block: >= 0.6 (0.5, 0.55 below)
  EXPECT_EQ(step(), (std::vector<int32_t>{7}));     // top-1 fallback: 0.55 beats 0.5
  EXPECT_EQ(step(), (std::vector<int32_t>{3}));
  EXPECT_TRUE(c.begin_step().empty());
  EXPECT_TRUE(c.done());
  EXPECT_EQ(c.stats().forwards, 5);
  EXPECT_EQ(c.stats().forced_top1, 3);
  EXPECT_EQ(c.stats().empty_steps, 0);
  EXPECT_EQ(c.stats().committed, 6);
}

TEST(DiffusionTurbo, RepeatGuardEndsTheOutputWhereTheRunReachesItsLength) {
  DiffusionParams p;
  p.schedule = Schedule::Timestep;
  p.steps = 20;  // one token per step (timestep counts 0 or 1 here), leftmost first
  p.top_k = 1;
  p.repeat_guard = 4;
  const int32_t n_vocab = 8, mask = 7;
  const std::vector<int32_t> prompt = {1, 2};
  Canvas c(prompt, 22, mask, false, p);
  std::vector<float> same(n_vocab, 0.0f);
  same[5] = 3.0f;  // every row predicts 5
  int forwards = 0;
  for (;;) {
    auto rows = c.begin_step();
    if (c.done()) break;
    std::vector<float> logits;
    for (size_t i = 0; i < rows.size(); ++i) logits.insert(logits.end(), same.begin(), same.end());
    c.commit(logits.data(), n_vocab);
    ++forwards;
    ASSERT_LT(forwards, 30);
  }
  EXPECT_EQ(c.repeat_stop(), 2 + 4);
  EXPECT_EQ(c.stats().repeat_guard_trips, 1);
  EXPECT_LT(c.stats().committed, 20);
}

TEST(DiffusionParamsValidation, ErrorsNameTheField) {
  DiffusionParams p;
  p.block_length = 5;
  auto st = validate(p, 4, 32);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message.rfind("block_length:", 0), 0u) << st.error().message;
  p.block_length = 8;
  p.steps = 6;  // 4 blocks
  st = validate(p, 4, 32);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message.rfind("steps:", 0), 0u) << st.error().message;
  p.steps = 8;
  EXPECT_TRUE(validate(p, 4, 32).ok());
  // LLaDA's rule: blocks tile the generation (32 - 4 = 28), not the canvas.
  p.blocks_over_canvas = false;
  p.block_length = 7;
  p.steps = 8;
  EXPECT_TRUE(validate(p, 4, 32).ok());
  EXPECT_EQ(block_count(p, 4, 32), 4);
  p.block_length = 8;
  st = validate(p, 4, 32);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message.rfind("block_length:", 0), 0u) << st.error().message;
  EXPECT_FALSE(parse_algorithm("nope").ok());
  EXPECT_EQ(*parse_algorithm("low_confidence"), Algorithm::Confidence);
}

// The canvas forward: every canvas row attends the whole canvas (K/V of all of it written
// before any query reads), and a canvas and a causal sequence in one batch give exactly the
// bits each gives alone.
TEST(DiffusionForward, CanvasAndCausalSequencesBatchedEqualAlone) {
  auto m = Model::open(spillway::test_paths::testdata() + "/models/llada-tiny-peaked-f16.gguf");
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  KvCache kv(cfg, 16, 8, kernels::DType::F32);
  ForwardPass forward(**m, kv, pool, 64, 64);
  const std::vector<int32_t> causal = {1, 450, 4996, 17354, 1701, 29916};
  std::vector<int32_t> canvas = {1, 9038, 2501, 263, 931};
  canvas.resize(24, cfg.mask_token_id);
  const std::vector<int32_t> causal_blocks = {0, 1, 2}, canvas_blocks = {4, 5, 6};
  auto add_canvas = [&](ForwardBatch& b) {
    const int32_t first = static_cast<int32_t>(b.tokens.size());
    const int s = b.add_sequence(canvas.data(), 24, 0, canvas_blocks);
    b.sequences[s].mode = AttentionMode::Canvas;
    b.sequences[s].canvas_begin = 0;
    b.sequences[s].canvas_end = 24;
    for (int32_t r : {0, 5, 23}) b.logit_rows.push_back(first + r);
  };
  auto add_causal = [&](ForwardBatch& b) {
    const int32_t first = static_cast<int32_t>(b.tokens.size());
    b.add_sequence(causal.data(), 6, 0, causal_blocks);
    for (int32_t r : {2, 5}) b.logit_rows.push_back(first + r);
  };
  const size_t V = cfg.n_vocab;
  ForwardBatch alone_canvas, alone_causal, both;
  add_canvas(alone_canvas);
  add_causal(alone_causal);
  add_causal(both);
  add_canvas(both);
  auto r1 = forward.execute(alone_canvas);
  ASSERT_TRUE(r1.ok());
  const std::vector<float> canvas_logits(r1->begin(), r1->end());
  auto r2 = forward.execute(alone_causal);
  ASSERT_TRUE(r2.ok());
  const std::vector<float> causal_logits(r2->begin(), r2->end());
  auto r3 = forward.execute(both);
  ASSERT_TRUE(r3.ok());
  const std::vector<float> both_logits(r3->begin(), r3->end());
  ASSERT_EQ(both_logits.size(), 5 * V);
  for (size_t i = 0; i < 2 * V; ++i) ASSERT_EQ(both_logits[i], causal_logits[i]) << i;
  for (size_t i = 0; i < 3 * V; ++i) ASSERT_EQ(both_logits[2 * V + i], canvas_logits[i]) << i;

  // Bidirectional really: changing the last canvas token changes the first row's logits,
  // and a causal run of the same tokens differs from the canvas run at row 0.
  canvas[23] = 1000;
  ForwardBatch changed;
  add_canvas(changed);
  auto r4 = forward.execute(changed);
  ASSERT_TRUE(r4.ok());
  bool differs = false;
  for (size_t i = 0; i < V; ++i) differs |= (*r4)[i] != canvas_logits[i];
  EXPECT_TRUE(differs) << "row 0 of a canvas must see the last canvas position";
}

// The block cache's partial forward: right after a full forward of a canvas, forwarding only
// a block of its rows (the other positions' K/V read from the KV blocks) gives those rows
// exactly the full forward's logits, because the cached K/V are what the full forward wrote.
TEST(DiffusionForward, PartialCanvasForwardAfterAFullOneGivesTheSameLogits) {
  auto m = Model::open(spillway::test_paths::testdata() + "/models/llada-tiny-peaked-f16.gguf");
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  KvCache kv(cfg, 16, 4, kernels::DType::F32);
  ForwardPass forward(**m, kv, pool, 64, 64);
  std::vector<int32_t> canvas = {1, 9038, 2501, 263, 931, 29892, 727};
  canvas.resize(40, cfg.mask_token_id);
  canvas[20] = 1000;
  const std::vector<int32_t> table = {0, 1, 2};
  const size_t V = cfg.n_vocab;
  ForwardBatch full;
  int s = full.add_sequence(canvas.data(), 40, 0, table);
  full.sequences[s].mode = AttentionMode::Canvas;
  full.sequences[s].canvas_begin = 0;
  full.sequences[s].canvas_end = 40;
  for (int32_t r = 15; r < 31; ++r) full.logit_rows.push_back(r);
  auto a = forward.execute(full);
  ASSERT_TRUE(a.ok());
  const std::vector<float> full_logits(a->begin(), a->end());
  ForwardBatch part;
  s = part.add_sequence(canvas.data() + 15, 16, 15, table);
  part.sequences[s].mode = AttentionMode::Canvas;
  part.sequences[s].canvas_begin = 15;
  part.sequences[s].canvas_end = 40;
  for (int32_t r = 0; r < 16; ++r) part.logit_rows.push_back(r);
  auto b = forward.execute(part);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 16 * V);
  for (size_t i = 0; i < 16 * V; ++i) ASSERT_EQ((*b)[i], full_logits[i]) << i;
}

}  // namespace
}  // namespace spillway::engine::diffusion
