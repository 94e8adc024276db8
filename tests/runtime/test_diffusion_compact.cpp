// The compacted active set of a canvas (engine/diffusion/active_set.h, issue #17):
// - a forward of explicit, scattered canvas positions right after a full forward of the
//   canvas gives those rows exactly the full forward's logits (the positions path: rope and
//   K/V writes at the named positions, keys from the KV blocks);
// - compact_all_live (every position live, through the compacted path) equals the reference
//   full recompute bit for bit at every step, on llada (no shift) and dream (shift_logits);
// - a compacted step forwards exactly the live rows: the block's masked positions, the rows
//   their logits come from, the previous step's commits; the first step of a block forwards
//   the whole canvas.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine/diffusion/active_set.h"
#include "engine/diffusion/canvas.h"
#include "engine/diffusion/generate.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/kv_cache.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine::diffusion {
namespace {

std::string model_path(const char* name) { return spillway::test_paths::testdata() + "/models/" + name; }

TEST(DiffusionCompactForward, ScatteredPositionsAfterAFullForwardGiveTheFullLogits) {
  auto m = Model::open(model_path("llada-tiny-peaked-f16.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  KvCache kv(cfg, 16, 4, kernels::DType::F32);
  ForwardPass forward(**m, kv, pool, 64, 64);
  std::vector<int32_t> canvas = {1, 9038, 2501, 263, 931, 29892, 727};
  canvas.resize(40, cfg.mask_token_id);
  canvas[20] = 1000;
  const std::vector<int32_t> table = {0, 1, 2};
  const std::vector<int32_t> live = {3, 8, 9, 10, 20, 31, 39};
  const size_t V = cfg.n_vocab;
  ForwardBatch full;
  int s = full.add_sequence(canvas.data(), 40, 0, table);
  full.sequences[s].mode = AttentionMode::Canvas;
  full.sequences[s].canvas_end = 40;
  for (int32_t r : live) full.logit_rows.push_back(r);
  auto a = forward.execute(full);
  ASSERT_TRUE(a.ok());
  const std::vector<float> full_logits(a->begin(), a->end());

  ForwardBatch part;
  std::vector<int32_t> toks;
  for (int32_t p : live) toks.push_back(canvas[p]);
  s = part.add_sequence(toks.data(), static_cast<int32_t>(toks.size()), live.front(), table);
  part.sequences[s].mode = AttentionMode::Canvas;
  part.sequences[s].canvas_end = 40;
  part.sequences[s].positions = live;
  for (int32_t r = 0; r < static_cast<int32_t>(live.size()); ++r) part.logit_rows.push_back(r);
  auto b = forward.execute(part);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), live.size() * V);
  for (size_t i = 0; i < live.size() * V; ++i) ASSERT_EQ((*b)[i], full_logits[i]) << i;

  // The positions really are used: the same tokens at contiguous positions differ.
  ForwardBatch shifted;
  s = shifted.add_sequence(toks.data(), static_cast<int32_t>(toks.size()), 0, table);
  shifted.sequences[s].mode = AttentionMode::Canvas;
  shifted.sequences[s].canvas_end = 40;
  shifted.logit_rows.push_back(6);
  auto c = forward.execute(shifted);
  ASSERT_TRUE(c.ok());
  bool differs = false;
  for (size_t i = 0; i < V; ++i) differs |= (*c)[i] != full_logits[6 * V + i];
  EXPECT_TRUE(differs);
}

// Runs the reference canvas and a compact_all_live one side by side (separate KV caches) and
// compares every step's logits bit for bit and the final canvases.
void expect_all_live_equals_full(const char* model_name, DiffusionParams params) {
  auto m = Model::open(model_path(model_name));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 9038, 2501, 263, 931, 29892, 727, 471};
  const int32_t length = 8 + 32;
  KvCache kv_a(cfg, 16, 3, kernels::DType::F32), kv_b(cfg, 16, 3, kernels::DType::F32);
  ForwardPass fa(**m, kv_a, pool, length, length), fb(**m, kv_b, pool, length, length);
  const std::vector<int32_t> table = {0, 1, 2};
  DiffusionParams live_params = params;
  live_params.compact = true;
  live_params.compact_all_live = true;
  Canvas a(prompt, length, cfg.mask_token_id, cfg.shift_logits, params);
  Canvas b(prompt, length, cfg.mask_token_id, cfg.shift_logits, live_params);
  int steps = 0;
  ForwardBatch ba, bb;
  for (;;) {
    const std::span<const int32_t> step_a = a.begin_step();
    const std::vector<int32_t> rows_a(step_a.begin(), step_a.end());
    const std::span<const int32_t> rows_b = b.begin_step();
    ASSERT_EQ(a.done(), b.done());
    if (a.done()) break;
    ASSERT_EQ(rows_a, std::vector<int32_t>(rows_b.begin(), rows_b.end()));
    ASSERT_EQ(b.forward_positions().size(), size_t(length));  // the compacted path, all rows live
    ba.clear();
    bb.clear();
    add_canvas_step(a, rows_a, table, ba);
    add_canvas_step(b, rows_b, table, bb);
    ASSERT_TRUE(ba.sequences[0].positions.empty());
    ASSERT_EQ(bb.sequences[0].positions.size(), size_t(length));
    auto la = fa.execute(ba);
    ASSERT_TRUE(la.ok());
    const std::vector<float> logits_a(la->begin(), la->end());
    auto lb = fb.execute(bb);
    ASSERT_TRUE(lb.ok());
    ASSERT_EQ(lb->size(), logits_a.size());
    for (size_t i = 0; i < logits_a.size(); ++i) ASSERT_EQ((*lb)[i], logits_a[i]) << "step " << steps << " value " << i;
    a.commit(logits_a.data(), cfg.n_vocab);
    b.commit(lb->data(), cfg.n_vocab);
    ASSERT_EQ(a.last_positions(), b.last_positions());
    ++steps;
  }
  EXPECT_GT(steps, 3);
  EXPECT_EQ(a.tokens(), b.tokens());
  EXPECT_EQ(a.stats().rows_evaluated, b.stats().rows_evaluated);
}

TEST(DiffusionCompact, AllLiveEqualsFullRecomputeBitForBitLlada) {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 8;
  p.blocks_over_canvas = false;
  p.steps = 16;  // 4 blocks, 4 steps each
  expect_all_live_equals_full("llada-tiny-peaked-f16.gguf", p);
}

TEST(DiffusionCompact, AllLiveEqualsFullRecomputeBitForBitDreamShiftedLogits) {
  DiffusionParams p;
  p.schedule = Schedule::Timestep;
  p.steps = 8;
  p.algorithm = Algorithm::Entropy;
  expect_all_live_equals_full("dream-tiny-peaked-f16.gguf", p);
}

// The live set of each compacted step, checked against its definition, on both models.
void expect_live_rows(const char* model_name, DiffusionParams params) {
  auto m = Model::open(model_path(model_name));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 9038, 2501, 263, 931, 29892, 727, 471};
  const int32_t length = 8 + 32;
  KvCache kv(cfg, 16, 3, kernels::DType::F32);
  ForwardPass forward(**m, kv, pool, length, length);
  const std::vector<int32_t> table = {0, 1, 2};
  params.compact = true;
  Canvas c(prompt, length, cfg.mask_token_id, cfg.shift_logits, params);
  std::vector<int32_t> previous_commits;
  int32_t full_steps = 0, compacted_steps = 0;
  ForwardBatch batch;
  for (;;) {
    const std::span<const int32_t> step = c.begin_step();
    const std::vector<int32_t> rows(step.begin(), step.end());
    if (c.done()) break;
    const bool refresh = c.needs_refresh();  // a block's first step (begin_step may start one)
    const std::span<const int32_t> live = c.forward_positions();
    if (refresh) {
      EXPECT_TRUE(live.empty());
      EXPECT_EQ(c.forward_count(), length);
      ++full_steps;
    } else {
      std::set<int32_t> want(previous_commits.begin(), previous_commits.end());
      for (int32_t p : rows) {
        want.insert(p);
        want.insert(c.logit_row(p));
      }
      EXPECT_EQ(std::vector<int32_t>(live.begin(), live.end()), std::vector<int32_t>(want.begin(), want.end()));
      EXPECT_LT(c.forward_count(), length);
      ++compacted_steps;
    }
    batch.clear();
    add_canvas_step(c, rows, table, batch);
    auto logits = forward.execute(batch);
    ASSERT_TRUE(logits.ok());
    c.commit(logits->data(), cfg.n_vocab);
    previous_commits = c.last_positions();
  }
  EXPECT_GT(full_steps, 0);
  EXPECT_GT(compacted_steps, 0);
  for (int32_t p = 8; p < length; ++p) EXPECT_FALSE(c.is_masked(p)) << p;  // the canvas filled up
  EXPECT_LT(c.stats().rows_evaluated, int64_t{c.stats().forwards} * length);
  EXPECT_EQ(c.stats().cached_forwards, compacted_steps);
}

TEST(DiffusionCompact, CompactedStepsForwardExactlyTheLiveRows) {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 8;
  p.blocks_over_canvas = false;
  p.steps = 16;
  expect_live_rows("llada-tiny-peaked-f16.gguf", p);
  DiffusionParams d;
  d.schedule = Schedule::Timestep;
  d.steps = 8;
  expect_live_rows("dream-tiny-peaked-f16.gguf", d);
}

// compact_refresh N: a full forward every N steps of a block. N = 1 is the reference (every
// step full, same tokens and rows); N = 2 alternates full and compacted steps.
TEST(DiffusionCompact, RefreshEveryStepIsTheReferenceAndEveryOtherStepAlternates) {
  auto m = Model::open(model_path("llada-tiny-peaked-f16.gguf"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  kernels::ThreadPool pool(2);
  const std::vector<int32_t> prompt = {1, 9038, 2501, 263, 931, 29892, 727, 471};
  const int32_t length = 8 + 32;
  const std::vector<int32_t> table = {0, 1, 2};
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 8;
  p.blocks_over_canvas = false;
  p.steps = 16;  // 4 blocks of 4 steps
  auto run = [&](const DiffusionParams& params, std::vector<bool>* full_steps) {
    KvCache kv(cfg, 16, 3, kernels::DType::F32);
    ForwardPass forward(**m, kv, pool, length, length);
    Canvas c(prompt, length, cfg.mask_token_id, cfg.shift_logits, params);
    ForwardBatch batch;
    for (;;) {
      const std::span<const int32_t> rows = c.begin_step();
      if (c.done()) break;
      if (full_steps) full_steps->push_back(c.forward_count() == length);
      batch.clear();
      add_canvas_step(c, rows, table, batch);
      auto logits = forward.execute(batch);
      EXPECT_TRUE(logits.ok());
      c.commit(logits->data(), cfg.n_vocab);
    }
    return c;
  };
  const Canvas ref = run(p, nullptr);
  DiffusionParams every = p;
  every.compact = true;
  every.compact_refresh = 1;
  const Canvas c1 = run(every, nullptr);
  EXPECT_EQ(c1.tokens(), ref.tokens());
  EXPECT_EQ(c1.stats().rows_evaluated, ref.stats().rows_evaluated);
  DiffusionParams other = p;
  other.compact = true;
  other.compact_refresh = 2;
  std::vector<bool> full;
  run(other, &full);
  ASSERT_EQ(full.size(), 16u);
  for (size_t i = 0; i < full.size(); ++i) EXPECT_EQ(full[i], i % 2 == 0) << "step " << i;
}

}  // namespace
}  // namespace spillway::engine::diffusion
