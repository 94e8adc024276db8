// Output back-pressure (Scheduler::set_output_paused): a paused request's sequences are
// skipped by schedule() but keep their KV blocks; resumed, they continue exactly where they
// stopped (the naive reference run), and cancel still frees everything.
#include <gtest/gtest.h>

#include "harness.h"

namespace spillway::scheduler::testing {
namespace {

TEST(SchedulerOutputPause, PausedSequenceIsSkippedKeepsItsKvAndResumes) {
  Harness h(small_config());
  const RequestId paused = h.add(greedy(random_prompt(10, 70), 40));
  const RequestId other = h.add(greedy(random_prompt(7, 71), 30));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.step());
  const size_t before = h.results[paused].choices.at(0).tokens.size();
  ASSERT_GT(before, 0u);
  const int32_t used = h.scheduler.blocks().used_blocks();

  h.scheduler.set_output_paused(paused, true);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(h.step());  // the other request still runs
    EXPECT_EQ(h.scheduler.step_paused(), 1);
    EXPECT_EQ(h.runner.steps.back().sequences.size(), 1u);
  }
  EXPECT_EQ(h.results[paused].choices.at(0).tokens.size(), before);  // no new token
  EXPECT_EQ(h.scheduler.counters().running_requests, 2);              // not preempted
  EXPECT_EQ(h.scheduler.step_preemptions(), 0);
  EXPECT_GE(h.scheduler.blocks().used_blocks(), used);                // its blocks stay held

  // Once the other request is done, a step with only the paused one is empty.
  int guard = 0;
  while (!h.results[other].choices.at(0).finish && guard++ < 1000) h.step();
  h.expect_matches_reference(other);
  EXPECT_FALSE(h.step());
  EXPECT_EQ(h.scheduler.step_paused(), 1);
  EXPECT_TRUE(h.scheduler.has_work());
  EXPECT_GT(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.results[paused].choices.at(0).tokens.size(), before);

  h.scheduler.set_output_paused(paused, false);
  h.run_all();
  h.expect_matches_reference(paused);  // continues exactly where it stopped
  EXPECT_EQ(h.scheduler.counters().preemptions_total, 0);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

TEST(SchedulerOutputPause, CancellingAPausedRequestFreesItsBlocks) {
  Harness h(small_config());
  GenerationParams p = seeded(random_prompt(9, 72), 50, 5);
  p.n = 3;
  const RequestId id = h.add(p);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.step());
  h.scheduler.set_output_paused(id, true);
  EXPECT_FALSE(h.step());
  EXPECT_EQ(h.scheduler.step_paused(), 3);  // every choice's sequence
  EXPECT_GT(h.scheduler.blocks().used_blocks(), 0);
  h.scheduler.cancel(id);
  EXPECT_FALSE(h.scheduler.has_work());
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  EXPECT_EQ(h.results[id].finished_updates, 1);
  for (const ChoiceResult& c : h.results[id].choices) EXPECT_EQ(c.finish, FinishReason::Cancelled);
  h.scheduler.set_output_paused(id, false);  // unknown now: ignored
}

TEST(SchedulerOutputPause, PausingTwiceAndUnknownIdsAreHarmless) {
  Harness h(small_config());
  const RequestId id = h.add(greedy(random_prompt(6, 73), 12));
  h.scheduler.set_output_paused(999, true);
  h.scheduler.set_output_paused(id, true);
  h.scheduler.set_output_paused(id, true);
  EXPECT_FALSE(h.step());  // a paused waiting request is not admitted
  EXPECT_EQ(h.scheduler.step_paused(), 1);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  h.scheduler.set_output_paused(id, false);
  h.run_all();
  h.expect_matches_reference(id);
}

// A paused waiting request keeps its place without blocking the queue behind it, and is
// admitted once resumed.
TEST(SchedulerOutputPause, PausedWaitingRequestDoesNotBlockTheQueue) {
  Harness h(small_config());
  const RequestId paused = h.add(greedy(random_prompt(6, 74), 10));
  const RequestId next = h.add(greedy(random_prompt(6, 75), 10));
  h.scheduler.set_output_paused(paused, true);
  ASSERT_TRUE(h.step());
  EXPECT_EQ(h.scheduler.counters().waiting_requests, 1);
  EXPECT_EQ(h.scheduler.counters().running_requests, 1);
  int guard = 0;
  while (!h.results[next].choices.at(0).finish && guard++ < 1000) h.step();
  h.expect_matches_reference(next);
  EXPECT_TRUE(h.results[paused].choices.empty() || h.results[paused].choices.at(0).tokens.empty());
  h.scheduler.set_output_paused(paused, false);
  h.run_all();
  h.expect_matches_reference(paused);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

}  // namespace
}  // namespace spillway::scheduler::testing
