// Diffusion canvases in the scheduler, with the fake runner (no weights): a canvas request
// produces exactly what the reference sampler gives on the same fake model run alone; the
// stream carries only committed, left-contiguous tokens and never retracts; canvases that
// arrive while others denoise pack into the same steps and each still equals its solo
// run; usage.diffusion is reported; cancellation frees the canvas's blocks; invalid
// diffusion requests are refused naming the field.
#include <gtest/gtest.h>

#include "engine/diffusion/canvas.h"
#include "harness.h"

namespace spillway::scheduler::testing {
namespace {

using engine::diffusion::Algorithm;
using engine::diffusion::Canvas;
using engine::diffusion::DiffusionParams;
using engine::diffusion::Schedule;

constexpr int32_t kMask = 0;  // <unk>: the fake model never predicts specials

SchedulerConfig diffusion_config() {
  SchedulerConfig c = small_config();
  c.max_batch_tokens = 64;
  c.diffusion_model = true;
  c.mask_token_id = kMask;
  c.shift_logits = false;
  return c;
}

struct ReferenceCanvas {
  std::vector<int32_t> tokens;           // generated (canvas after the prompt)
  std::vector<int32_t> prefix_lengths;   // committed left-contiguous length after each forward
  int32_t forwards = 0;
};

// The reference sampler on the fake model alone: every masked row's logits are
// fake_logits(whole canvas + its row), as the FakeRunner computes them.
ReferenceCanvas reference_canvas(const GenerationParams& p, bool shift_logits = false) {
  DiffusionParams dp = *p.diffusion;
  if (dp.steps <= 0) dp.steps = p.max_tokens;
  const auto n_prompt = static_cast<int32_t>(p.prompt.size());
  Canvas c(p.prompt, n_prompt + p.max_tokens, kMask, shift_logits, dp);
  ReferenceCanvas out;
  for (;;) {
    auto rows = c.begin_step();
    if (c.done()) break;
    std::vector<float> logits(rows.size() * FakeTokenizer::kVocab);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<int32_t> ctx = c.tokens();
      ctx.push_back(1000 + c.logit_row(rows[i]));
      fake_logits(ctx, hashed_letter, logits.data() + i * FakeTokenizer::kVocab);
    }
    c.commit(logits.data(), FakeTokenizer::kVocab);
    ++out.forwards;
    out.prefix_lengths.push_back(c.committed_prefix_end() - n_prompt);
  }
  out.tokens.assign(c.tokens().begin() + n_prompt, c.tokens().end());
  return out;
}

GenerationParams canvas_request(std::vector<int32_t> prompt, int32_t max_tokens, DiffusionParams dp) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.diffusion = dp;
  return p;
}

DiffusionParams blocks(int32_t block_length, int32_t steps, Algorithm a = Algorithm::Confidence) {
  DiffusionParams dp;
  dp.schedule = Schedule::Block;
  dp.block_length = block_length;
  dp.steps = steps;
  dp.algorithm = a;
  return dp;
}

DiffusionParams timestep(int32_t steps, Algorithm a = Algorithm::Confidence) {
  DiffusionParams dp;
  dp.schedule = Schedule::Timestep;
  dp.steps = steps;
  dp.algorithm = a;
  return dp;
}

TEST(DiffusionCanvases, AloneEqualsTheReferenceSamplerAndStreamsOnlyTheCommittedPrefix) {
  Harness h(diffusion_config());
  const GenerationParams p = canvas_request(letters("hello"), 11, blocks(8, 4));  // canvas 16, 2 blocks
  const ReferenceCanvas ref = reference_canvas(p);
  ASSERT_FALSE(h.scheduler.validate(p).has_value());
  std::vector<int32_t> delivered_counts;
  std::vector<int32_t> tokens;
  std::optional<DiffusionUsage> usage;
  std::optional<FinishReason> finish;
  h.scheduler.add_request(1, p, [&](RequestUpdate&& u) {
    for (const ChoiceUpdate& c : u.choices) {
      for (const GeneratedToken& t : c.tokens) tokens.push_back(t.id);
      if (c.finish) finish = c.finish;
    }
    delivered_counts.push_back(static_cast<int32_t>(tokens.size()));
    usage = u.diffusion;
  });
  h.run_all();
  EXPECT_EQ(tokens, ref.tokens);
  ASSERT_TRUE(finish.has_value());
  EXPECT_EQ(*finish, FinishReason::Length);
  // Every update carried exactly the newly committed left-contiguous run.
  std::vector<int32_t> want;
  for (int32_t n : ref.prefix_lengths) {
    if (n > 0 && (want.empty() || n > want.back())) want.push_back(n);
  }
  EXPECT_EQ(delivered_counts, want);
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ(usage->forwards, ref.forwards);
  EXPECT_EQ(usage->committed, 11);
  EXPECT_EQ(usage->rows_evaluated, int64_t{ref.forwards} * 16);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(DiffusionCanvases, CanvasesArrivingWhileOthersDenoiseShareStepsAndEqualTheirSoloRuns) {
  Harness h(diffusion_config());
  std::vector<GenerationParams> ps = {
      canvas_request(letters("abc"), 13, blocks(8, 4)),                       // canvas 16
      canvas_request(letters("quick"), 11, timestep(5, Algorithm::Margin)),   // canvas 16
      canvas_request(letters("fox"), 9, timestep(4, Algorithm::Entropy)),     // canvas 12
      canvas_request(letters("lazy"), 12, blocks(4, 8, Algorithm::Random)),   // canvas 16
  };
  ps[3].diffusion->seed = 9;
  std::vector<RequestId> ids;
  ids.push_back(h.add(ps[0]));
  ids.push_back(h.add(ps[1]));
  ASSERT_TRUE(h.step());
  ASSERT_TRUE(h.step());
  ids.push_back(h.add(ps[2]));
  ids.push_back(h.add(ps[3]));
  h.run_all();
  for (size_t i = 0; i < ps.size(); ++i) {
    const ReferenceCanvas ref = reference_canvas(ps[i]);
    EXPECT_EQ(h.results[ids[i]].choices.at(0).tokens, ref.tokens) << "request " << i;
    ASSERT_TRUE(h.results[ids[i]].last.diffusion.has_value());
    EXPECT_EQ(h.results[ids[i]].last.diffusion->forwards, ref.forwards) << "request " << i;
  }
  size_t most = 0;
  for (const SeenStep& s : h.runner.steps) {
    most = std::max(most, s.sequences.size());
    EXPECT_LE(s.n_tokens, 64);
  }
  EXPECT_GE(most, 3u) << "canvases should pack into shared steps";
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(DiffusionCanvases, ShiftedLogitsReadTheRowBefore) {
  SchedulerConfig c = diffusion_config();
  c.shift_logits = true;
  Harness h(c);
  const GenerationParams p = canvas_request(letters("dream"), 11, timestep(6));
  const RequestId id = h.add(p);
  h.run_all();
  EXPECT_EQ(h.results[id].choices.at(0).tokens, reference_canvas(p, true).tokens);
  EXPECT_NE(reference_canvas(p, true).tokens, reference_canvas(p, false).tokens);
}

TEST(DiffusionCanvases, RepeatGuardStopsTheStreamAtTheRun) {
  // A model that always predicts 'a': with a guard of 5 the output is 5 'a's, finish Stop.
  Harness h(diffusion_config(), [](std::span<const int32_t>) { return FakeTokenizer::letter('a'); });
  DiffusionParams dp = timestep(20);
  dp.repeat_guard = 5;
  const RequestId id = h.add(canvas_request(letters("hello"), 20, dp));
  h.run_all();
  EXPECT_EQ(h.results[id].choices.at(0).tokens, std::vector<int32_t>(5, FakeTokenizer::letter('a')));
  EXPECT_EQ(h.results[id].choices.at(0).text, "aaaaa");
  EXPECT_EQ(*h.results[id].choices.at(0).finish, FinishReason::Stop);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(DiffusionCanvases, CancelFreesTheCanvasBlocks) {
  Harness h(diffusion_config());
  const RequestId id = h.add(canvas_request(letters("hello"), 11, blocks(16, 11)));
  ASSERT_TRUE(h.step());
  EXPECT_GT(h.scheduler.blocks().used_blocks(), 0);
  h.scheduler.cancel(id);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  ASSERT_TRUE(h.results[id].choices.at(0).finish.has_value());
  EXPECT_EQ(*h.results[id].choices.at(0).finish, FinishReason::Cancelled);
  EXPECT_FALSE(h.scheduler.has_work());
}

TEST(DiffusionCanvases, InvalidRequestsNameTheField) {
  Harness ar(small_config());
  GenerationParams p = canvas_request(letters("hello"), 11, blocks(8, 4));
  auto rejected = ar.scheduler.validate(p);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->message.rfind("diffusion:", 0), 0u) << rejected->message;

  Harness h(diffusion_config());
  p.diffusion->block_length = 5;  // does not divide 16
  rejected = h.scheduler.validate(p);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->message.rfind("diffusion.block_length:", 0), 0u) << rejected->message;
  p.diffusion->block_length = 8;
  p.diffusion->steps = 3;  // not a multiple of 2 blocks
  rejected = h.scheduler.validate(p);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->message.rfind("diffusion.steps:", 0), 0u) << rejected->message;
  p = canvas_request(letters("hello"), 80, timestep(8));  // 85 > the step budget of 64
  rejected = h.scheduler.validate(p);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->message.rfind("max_tokens:", 0), 0u) << rejected->message;
  p = canvas_request(letters("hello"), 11, timestep(8));
  p.n = 2;
  rejected = h.scheduler.validate(p);
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->message.rfind("n:", 0), 0u) << rejected->message;
  // No diffusion object on a diffusion model: the defaults (timestep, one token per step).
  GenerationParams plain = greedy(letters("hello"), 11);
  EXPECT_FALSE(h.scheduler.validate(plain).has_value());
  const RequestId id = h.add(plain);
  h.run_all();
  EXPECT_EQ(h.results[id].choices.at(0).tokens.size(), 11u);
  EXPECT_EQ(h.results[id].last.diffusion->forwards, 11);
}

}  // namespace
}  // namespace spillway::scheduler::testing
