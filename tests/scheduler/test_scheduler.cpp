// Scheduler behaviour with the FakeRunner: every output is compared with the naive
// reference run of the same fake model (no blocks, no cache, no batching).
#include <gtest/gtest.h>

#include <set>

#include "harness.h"

namespace spillway::scheduler::testing {
namespace {

TEST(Scheduler, TokenBudgetIsRespectedEveryStep) {
  SchedulerConfig cfg = small_config();
  cfg.max_batch_tokens = 10;
  Harness h(cfg);
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(h.add(greedy(random_prompt(3 + 5 * i, i), 12)));
  h.run_all();
  ASSERT_FALSE(h.runner.steps.empty());
  int full_steps = 0;
  for (const SeenStep& s : h.runner.steps) {
    EXPECT_LE(s.n_tokens, 10);
    EXPECT_GT(s.n_tokens, 0);
    full_steps += s.n_tokens == 10;
  }
  EXPECT_GT(full_steps, 0);  // the budget was actually the limit
  for (RequestId id : ids) h.expect_matches_reference(id);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, ChunkedPrefillInterleavesWithDecode) {
  SchedulerConfig cfg = small_config();
  cfg.max_batch_tokens = 8;
  Harness h(cfg);
  const RequestId a = h.add(greedy(random_prompt(3, 1), 60));
  while (h.results[a].choices.empty() || h.results[a].choices[0].tokens.size() < 2) h.step();

  const RequestId b = h.add(greedy(random_prompt(70, 2), 5));
  int interleaved_steps = 0;
  while (h.results[b].choices.empty()) {
    const size_t a_before = h.results[a].choices[0].tokens.size();
    ASSERT_TRUE(h.step());
    const SeenStep& s = h.runner.steps.back();
    EXPECT_LE(s.n_tokens, 8);
    // The running decode got its token in every step of b's prefill.
    EXPECT_EQ(h.results[a].choices[0].tokens.size(), a_before + 1);
    interleaved_steps += s.sequences.size() == 2 && s.n_tokens == 8;
  }
  // 70 prompt tokens at 7 per step (1 of the 8 goes to the decode).
  EXPECT_GE(interleaved_steps, 9);
  h.run_all();
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, PreemptionAndResumeGiveTheUnpreemptedTokens) {
  for (bool prefix_cache : {true, false}) {
    SchedulerConfig cfg = small_config();
    cfg.n_kv_blocks = 16;  // 64 token slots; the four requests need 4 x 32
    cfg.prefix_cache = prefix_cache;
    Harness h(cfg);
    std::vector<RequestId> ids;
    for (int i = 0; i < 4; ++i) {
      ids.push_back(h.add(seeded(random_prompt(8, 10 + i), 24, 100 + i, 0.8f)));
    }
    h.run_all();
    EXPECT_GT(h.scheduler.counters().preemptions_total, 0) << "prefix_cache " << prefix_cache;
    for (RequestId id : ids) h.expect_matches_reference(id);
    EXPECT_EQ(h.runner.corrupt_reads, 0);
    EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  }
}

TEST(Scheduler, PreemptedSequenceResumesFromThePrefixCache) {
  SchedulerConfig cfg = small_config();
  cfg.n_kv_blocks = 12;
  cfg.max_batch_tokens = 64;
  Harness h(cfg);
  const RequestId a = h.add(greedy(random_prompt(12, 1), 30));
  const RequestId b = h.add(greedy(random_prompt(12, 2), 30));
  h.run_all();
  const SchedulerCounters c = h.scheduler.counters();
  EXPECT_GT(c.preemptions_total, 0);
  EXPECT_GT(c.prefix_hit_tokens_total, 0);  // resumption found its own blocks
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, SharedPrefixIsComputedOnceAndReported) {
  Harness h(small_config());
  const std::vector<int32_t> shared = random_prompt(16, 5);
  std::vector<int32_t> p1 = shared, p2 = shared;
  p1.push_back(FakeTokenizer::letter('a'));
  p1.push_back(FakeTokenizer::letter('b'));
  p2.insert(p2.end(), {FakeTokenizer::letter('x'), FakeTokenizer::letter('y'), FakeTokenizer::letter('z')});

  const RequestId first = h.add(greedy(p1, 4));
  h.run_all();
  EXPECT_EQ(h.results[first].last.cached_prompt_tokens, 0);
  const int64_t before = h.runner.total_tokens;

  const RequestId second = h.add(greedy(p2, 4));
  h.run_all();
  // 3 uncached prompt tokens + 3 decode steps (the 4th token is never forwarded).
  EXPECT_EQ(h.runner.total_tokens - before, 3 + 3);
  EXPECT_EQ(h.results[second].last.cached_prompt_tokens, 16);
  EXPECT_EQ(h.results[second].last.prompt_tokens, 19);
  h.expect_matches_reference(first);
  h.expect_matches_reference(second);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, PrefixHitLeavesTheLastPromptTokenToCompute) {
  Harness h(small_config());
  const std::vector<int32_t> prompt = random_prompt(16, 6);  // exactly 4 blocks
  const RequestId first = h.add(greedy(prompt, 3));
  h.run_all();
  const RequestId again = h.add(greedy(prompt, 3));
  h.run_all();
  EXPECT_EQ(h.results[again].last.cached_prompt_tokens, 12);
  EXPECT_EQ(h.results[first].choices[0].tokens, h.results[again].choices[0].tokens);
  h.expect_matches_reference(again);
}

TEST(Scheduler, PrefixHitOnBlocksOfARunningSequence) {
  Harness h(small_config());
  const std::vector<int32_t> shared = random_prompt(20, 7);
  const RequestId a = h.add(greedy(shared, 40));
  for (int i = 0; i < 5; ++i) h.step();
  std::vector<int32_t> p2 = shared;
  p2.push_back(FakeTokenizer::letter('q'));
  const RequestId b = h.add(greedy(p2, 10));
  h.step();
  EXPECT_EQ(h.results[b].choices.size(), 1u);
  h.run_all();
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 20);
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, UnreferencedCachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  SchedulerConfig cfg = small_config();
  cfg.n_kv_blocks = 12;
  Harness h(cfg);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_prompt(16, 20 + i));

  for (int i = 0; i < 3; ++i) {  // A, B, C fill the pool with cached blocks
    h.add(greedy(prompts[i], 1));
    h.run_all();
  }
  EXPECT_EQ(h.scheduler.blocks().cached_blocks(), 12);  // nothing evicted before needed
  EXPECT_EQ(h.scheduler.blocks().free_blocks(), 0);

  h.add(greedy(prompts[3], 1));  // D needs 4 blocks: A's go
  h.run_all();
  EXPECT_EQ(h.scheduler.blocks().cached_blocks(), 12);

  // One generated token each, so no decode step needs a further block.
  const RequestId c_again = h.add(greedy(prompts[2], 1));
  h.run_all();
  EXPECT_EQ(h.results[c_again].last.cached_prompt_tokens, 12);
  const RequestId b_again = h.add(greedy(prompts[1], 1));
  h.run_all();
  EXPECT_EQ(h.results[b_again].last.cached_prompt_tokens, 12);
  const RequestId a_again = h.add(greedy(prompts[0], 1));
  h.run_all();
  EXPECT_EQ(h.results[a_again].last.cached_prompt_tokens, 0);
  for (RequestId id : {c_again, b_again, a_again}) h.expect_matches_reference(id);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, CancellationReleasesBlocks) {
  Harness h(small_config());
  const RequestId running = h.add(greedy(random_prompt(10, 30), 100));
  for (int i = 0; i < 6; ++i) h.step();
  EXPECT_GT(h.scheduler.blocks().used_blocks(), 0);
  h.scheduler.cancel(running);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_GT(h.scheduler.blocks().cached_blocks(), 0);  // full blocks stay in the prefix cache
  EXPECT_FALSE(h.scheduler.has_work());
  const RequestResult& r = h.results[running];
  EXPECT_EQ(r.finished_updates, 1);
  ASSERT_EQ(r.choices.size(), 1u);
  EXPECT_EQ(r.choices[0].finish, FinishReason::Cancelled);
  EXPECT_EQ(r.choices[0].tokens.size(), 6u);  // the prefill step and 5 decode steps each sampled one
  h.scheduler.cancel(running);  // unknown now: ignored
  EXPECT_EQ(h.results[running].finished_updates, 1);
}

TEST(Scheduler, CancellingAWaitingRequest) {
  SchedulerConfig cfg = small_config();
  cfg.max_running = 1;
  Harness h(cfg);
  const RequestId a = h.add(greedy(random_prompt(5, 31), 10));
  const RequestId b = h.add(greedy(random_prompt(5, 32), 10));
  h.step();
  EXPECT_EQ(h.scheduler.counters().waiting_requests, 1);
  h.scheduler.cancel(b);
  EXPECT_EQ(h.results[b].finished_updates, 1);
  EXPECT_TRUE(h.results[b].choices.at(0).tokens.empty());
  EXPECT_EQ(h.results[b].choices.at(0).finish, FinishReason::Cancelled);
  h.run_all();
  h.expect_matches_reference(a);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, ChoicesShareThePromptAndSampleWithTheirOwnSeeds) {
  Harness h(small_config());
  GenerationParams p = seeded(random_prompt(10, 40), 12, 77, 1.0f);
  p.n = 4;
  const RequestId id = h.add(p);
  h.run_all();
  const RequestResult& r = h.results[id];
  ASSERT_EQ(r.choices.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (int c = 0; c < 4; ++c) {
    h.expect_matches_reference(id, c);
    distinct.insert(r.choices[c].tokens);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(r.finished_updates, 1);
  EXPECT_EQ(r.last.completion_tokens, 48);
  // The prompt's full blocks (positions 0..7) were computed once; the partial block's two
  // tokens once per choice.
  for (const auto& [pos, count] : h.runner.computed_at()) {
    if (pos < 8) {
      EXPECT_EQ(count, 1) << "position " << pos;
    } else if (pos == 8 || pos == 9) {
      EXPECT_EQ(count, 4) << "position " << pos;
    }
  }
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(Scheduler, GreedyChoicesEqualSeparateRequests) {
  Harness h(small_config());
  GenerationParams p = greedy(random_prompt(8, 41), 10);  // block-aligned prompt
  p.n = 3;
  const RequestId together = h.add(p);
  const RequestId alone = h.add(greedy(random_prompt(8, 41), 10));
  h.run_all();
  const RequestResult& r = h.results[together];
  ASSERT_EQ(r.choices.size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(r.choices[c].tokens, h.results[alone].choices[0].tokens);
    h.expect_matches_reference(together, c);
  }
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, SeededChoiceZeroReproducesASingleRequest) {
  Harness h(small_config());
  GenerationParams p = seeded(random_prompt(9, 42), 10, 5);
  const RequestId single = h.add(p);
  p.n = 3;
  const RequestId multi = h.add(p);
  h.run_all();
  EXPECT_EQ(h.results[single].choices[0].tokens, h.results[multi].choices[0].tokens);
}

TEST(Scheduler, ChoicesSurvivePreemption) {
  SchedulerConfig cfg = small_config();
  cfg.n_kv_blocks = 14;
  Harness h(cfg);
  GenerationParams p = seeded(random_prompt(6, 43), 20, 9, 0.9f);
  p.n = 3;
  const RequestId multi = h.add(p);
  const RequestId other = h.add(seeded(random_prompt(6, 44), 20, 10, 0.9f));
  h.run_all();
  EXPECT_GT(h.scheduler.counters().preemptions_total, 0);
  for (int c = 0; c < 3; ++c) h.expect_matches_reference(multi, c);
  h.expect_matches_reference(other);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(Scheduler, MaxRunningBoundsTheRunningSet) {
  SchedulerConfig cfg = small_config();
  cfg.max_running = 3;
  Harness h(cfg);
  std::vector<RequestId> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(h.add(greedy(random_prompt(4, 50 + i), 6)));
  int steps = 0;
  while (h.scheduler.has_work() && steps++ < 1000) {
    h.step();
    EXPECT_LE(h.scheduler.running_sequences(), 3);
    EXPECT_LE(h.runner.steps.back().sequences.size(), 3u);
  }
  for (RequestId id : ids) h.expect_matches_reference(id);
}

TEST(Scheduler, ContextFullFinishesWithLength) {
  SchedulerConfig cfg = small_config();
  cfg.max_context = 20;
  Harness h(cfg);
  const RequestId id = h.add(greedy(random_prompt(15, 60), -1));
  h.run_all();
  EXPECT_EQ(h.results[id].choices[0].tokens.size(), 5u);
  EXPECT_EQ(h.results[id].choices[0].finish, FinishReason::Length);
  h.expect_matches_reference(id);
}

TEST(Scheduler, KvCapacityBoundsTheContext) {
  SchedulerConfig cfg = small_config();
  cfg.n_kv_blocks = 5;  // 20 token slots < max_context
  Harness h(cfg);
  EXPECT_EQ(h.scheduler.max_context(), 20);
  const RequestId id = h.add(greedy(random_prompt(10, 61), -1));
  h.run_all();
  EXPECT_EQ(h.results[id].choices[0].tokens.size(), 10u);
  EXPECT_EQ(h.results[id].choices[0].finish, FinishReason::Length);
}

TEST(Scheduler, RunnerFailureFinishesTheStepsRequestsWithError) {
  Harness h(small_config());
  const RequestId a = h.add(greedy(random_prompt(5, 70), 10));
  const RequestId b = h.add(greedy(random_prompt(5, 71), 10));
  h.step();
  h.runner.fail_next_step();
  h.step();
  for (RequestId id : {a, b}) {
    EXPECT_EQ(h.results[id].finished_updates, 1);
    EXPECT_EQ(h.results[id].choices[0].finish, FinishReason::Error);
    EXPECT_EQ(h.results[id].last.error, std::optional<std::string>("injected runner failure"));
  }
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_FALSE(h.scheduler.has_work());
  const RequestId c = h.add(greedy(random_prompt(5, 72), 10));
  h.run_all();
  h.expect_matches_reference(c);
}

TEST(Scheduler, ValidationRejectsWhatCannotRun) {
  Harness h(small_config());
  auto rejected = [&](GenerationParams p) {
    const auto r = h.scheduler.validate(p);
    return r.has_value() && r->kind == SubmitError::Invalid && !r->message.empty();
  };
  EXPECT_TRUE(rejected(greedy({}, 5)));
  EXPECT_TRUE(rejected(greedy({FakeTokenizer::kVocab}, 5)));
  EXPECT_TRUE(rejected(greedy({-1}, 5)));
  EXPECT_TRUE(rejected(greedy(random_prompt(128, 1), 5)));  // no room for one token
  EXPECT_FALSE(rejected(greedy(random_prompt(127, 1), 5)));
  GenerationParams p = greedy(random_prompt(100, 1), -1);
  p.min_tokens = 29;
  EXPECT_TRUE(rejected(p));
  p.min_tokens = 28;
  EXPECT_FALSE(rejected(p));
  EXPECT_TRUE(rejected(greedy(random_prompt(4, 1), 0)));
  p = greedy(random_prompt(4, 1), 5);
  p.n = 9;  // max_running is 8
  EXPECT_TRUE(rejected(p));
  p.n = 0;
  EXPECT_TRUE(rejected(p));
}

TEST(Scheduler, QueueTimeAndUsageAreReported) {
  Harness h(small_config());
  const RequestId id = h.add(greedy(random_prompt(7, 80), 5));
  h.run_all();
  const RequestUpdate& last = h.results[id].last;
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.prompt_tokens, 7);
  EXPECT_EQ(last.completion_tokens, 5);
  EXPECT_GE(last.queue_seconds, 0.0);
}

}  // namespace
}  // namespace spillway::scheduler::testing
