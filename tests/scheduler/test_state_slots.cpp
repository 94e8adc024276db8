// Recurrent-state slots (hybrid models): admission needs a free slot as well as KV blocks;
// a sequence's slot holds exactly its computed tokens at every step (FakeRunner checks it:
// state_errors); preemption and finishing free the slot; forked choices get their own; no
// prefix-cache hit skips tokens whose state the slot does not hold. Outputs equal the naive
// reference, as for attention-only models.
#include <gtest/gtest.h>

#include <set>

#include "harness.h"

namespace spillway::scheduler::testing {
namespace {

SchedulerConfig hybrid_config(int32_t slots) {
  SchedulerConfig c = small_config();
  c.n_state_slots = slots;
  return c;
}

Harness& hybrid(Harness& h) {
  h.runner.n_state_slots = h.config.n_state_slots;
  return h;
}

TEST(StateSlots, FreeSlotsBoundTheRunningSetAndEverySlotIsConsistent) {
  Harness h(hybrid_config(2));
  hybrid(h);
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(h.add(greedy(random_prompt(6, 70 + i), 9)));
  int steps = 0;
  while (h.scheduler.has_work() && steps++ < 1000) {
    h.step();
    EXPECT_LE(h.scheduler.running_sequences(), 2);
    EXPECT_EQ(h.scheduler.running_sequences() + h.scheduler.free_state_slots(), 2);
  }
  for (RequestId id : ids) h.expect_matches_reference(id);
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.scheduler.free_state_slots(), 2);
}

TEST(StateSlots, PreemptionFreesTheSlotAndTheResumedSequenceRecomputesFromZero) {
  SchedulerConfig cfg = hybrid_config(4);
  cfg.n_kv_blocks = 16;  // the four requests need 4 x 32 tokens of 64: preemption
  Harness h(cfg);
  hybrid(h);
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(h.add(seeded(random_prompt(8, 10 + i), 24, 100 + i, 0.8f)));
  h.run_all();
  EXPECT_GT(h.scheduler.counters().preemptions_total, 0);
  for (RequestId id : ids) h.expect_matches_reference(id);
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_EQ(h.scheduler.free_state_slots(), 4);
  EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
}

TEST(StateSlots, ASharedPrefixIsNotAHitWithoutAStateSnapshot) {
  Harness h(hybrid_config(4));
  hybrid(h);
  const std::vector<int32_t> prefix = random_prompt(12, 5);
  const RequestId a = h.add(greedy(prefix, 4));
  h.run_all();
  std::vector<int32_t> longer = prefix;
  longer.push_back(FakeTokenizer::letter('q'));
  const RequestId b = h.add(greedy(longer, 4));
  h.run_all();
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 0);
  EXPECT_EQ(h.runner.state_errors, 0);
}

TEST(StateSlots, ForkedChoicesGetTheirOwnSlots) {
  Harness h(hybrid_config(4));
  hybrid(h);
  GenerationParams p = seeded(random_prompt(10, 40), 12, 77, 1.0f);
  p.n = 3;
  const RequestId id = h.add(p);
  const RequestId other = h.add(greedy(random_prompt(5, 41), 6));
  h.run_all();
  for (int c = 0; c < 3; ++c) h.expect_matches_reference(id, c);
  h.expect_matches_reference(other);
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.scheduler.free_state_slots(), 4);
  // More choices than slots can never run: rejected up front.
  GenerationParams too_many = greedy(random_prompt(4, 1), 2);
  too_many.n = 5;
  EXPECT_TRUE(h.scheduler.validate(too_many).has_value());
}

}  // namespace
}  // namespace spillway::scheduler::testing

namespace spillway::scheduler::testing {
namespace {

SchedulerConfig snapshot_config(int32_t snapshots, int32_t interval_blocks) {
  SchedulerConfig c = hybrid_config(4);
  c.n_state_snapshots = snapshots;
  c.snapshot_interval_blocks = interval_blocks;
  return c;
}

std::vector<int32_t> with_words(std::vector<int32_t> tokens, const std::string& words) {
  for (char ch : words) tokens.push_back(ch == ' ' ? FakeTokenizer::kSpace : FakeTokenizer::letter(ch));
  return tokens;
}

// Turn 2 = turn 1's prompt + its whole answer + new tokens: it resumes at turn 1's exact end
// (the end block holding the 3 tokens after its last full block, and the state saved when it
// finished), so it computes only what turn 1 never computed: the last sampled token and the
// new words.
TEST(StateSnapshots, ASecondTurnResumesAtTheExactEndOfTheFirstTurn) {
  Harness h(snapshot_config(8, 16));
  hybrid(h);
  const std::vector<int32_t> first = random_prompt(42, 9);  // 10 full blocks of 4
  const RequestId a = h.add(greedy(first, 30));
  h.run_all();
  h.expect_matches_reference(a);
  std::vector<int32_t> second = first;
  const auto& answer = h.results[a].choices[0].tokens;
  ASSERT_EQ(answer.size(), 30u);
  second.insert(second.end(), answer.begin(), answer.end());
  second = with_words(second, "next turn");
  const int64_t computed_before = h.scheduler.counters().computed_tokens_total;
  const RequestId b = h.add(greedy(second, 6));
  h.run_all();
  h.expect_matches_reference(b);
  // Turn 1 computed 42 + 29 = 71 tokens: 17 full blocks and 3 in its end block.
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 71);
  const int64_t recomputed = h.scheduler.counters().computed_tokens_total - computed_before - (6 - 1);
  EXPECT_EQ(recomputed, static_cast<int64_t>(second.size()) - 71);  // the last answer token + "next turn"
  EXPECT_EQ(h.runner.end_saves, 1);  // turn 1's (turn 2's waits for a next step)
  EXPECT_GE(h.runner.restores, 1);
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_EQ(h.scheduler.counters().prefix_discarded_tokens_total, 0);
}

// An end block serves one next turn (the taker writes into it): a second continuation of
// the same turn 1 resumes at the tail snapshot of turn 1's last full block instead.
TEST(StateSnapshots, AnEndBlockServesOneNextTurnAndTheNextResumesAtTheLastFullBlock) {
  Harness h(snapshot_config(8, 16));
  hybrid(h);
  const std::vector<int32_t> first = random_prompt(42, 9);
  const RequestId a = h.add(greedy(first, 30));
  h.run_all();
  std::vector<int32_t> turn1 = first;
  const auto& answer = h.results[a].choices[0].tokens;
  turn1.insert(turn1.end(), answer.begin(), answer.end());
  const RequestId b = h.add(greedy(with_words(turn1, "next turn"), 6));
  h.run_all();
  const RequestId c = h.add(greedy(with_words(turn1, "other words"), 6));
  h.run_all();
  h.expect_matches_reference(b);
  h.expect_matches_reference(c);
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 71);
  EXPECT_EQ(h.results[c].last.cached_prompt_tokens, 68);
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

// The step that would save turn 1's end fails: the end is forgotten (not restored from a
// slot never written), and turn 2 resumes at the last full block.
TEST(StateSnapshots, AFailedStepForgetsTheEndItWasToSave) {
  Harness h(snapshot_config(8, 16));
  hybrid(h);
  const std::vector<int32_t> first = random_prompt(42, 9);
  const RequestId a = h.add(greedy(first, 30));
  h.run_all();
  h.runner.fail_next_step();
  const RequestId failed = h.add(greedy(random_prompt(5, 11), 3));
  h.run_all();
  EXPECT_EQ(h.results[failed].choices[0].finish, FinishReason::Error);
  std::vector<int32_t> second = first;
  const auto& answer = h.results[a].choices[0].tokens;
  second.insert(second.end(), answer.begin(), answer.end());
  const RequestId b = h.add(greedy(with_words(second, "next turn"), 6));
  h.run_all();
  h.expect_matches_reference(b);
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 68);
  EXPECT_EQ(h.runner.end_saves, 0);  // turn 1's was never run (turn 2's waits for a next step)
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
}

// When turn 2 diverges inside turn 1's answer (a chat template that drops the reasoning),
// it still resumes at the snapshot of turn 1's prompt's last full block.
TEST(StateSnapshots, ASecondTurnThatDropsTheAnswerResumesAtThePromptsLastFullBlock) {
  Harness h(snapshot_config(8, 16));
  hybrid(h);
  const std::vector<int32_t> first = random_prompt(42, 9);
  const RequestId a = h.add(greedy(first, 30));
  h.run_all();
  const RequestId b = h.add(greedy(with_words(first, "another answer"), 6));
  h.run_all();
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 40);
  EXPECT_EQ(h.runner.state_errors, 0);
}

// Tail snapshots take at most half the snapshot slots, so the indexed ones survive many
// concurrent streams; preemption (which publishes the tail) keeps every token and state.
TEST(StateSnapshots, TailSnapshotsHoldAtMostHalfTheSlotsAndKeepTheTokensUnderPreemption) {
  SchedulerConfig cfg = snapshot_config(4, 16);
  cfg.n_kv_blocks = 40;  // 160 token slots for 4 x 63 tokens: preemption
  Harness h(cfg);
  hybrid(h);
  std::vector<RequestId> ids;
  // Prompts shorter than a block: every save is a tail save (no prompt boundary; the
  // 16-block interval is past the 3 + 59 computed tokens).
  for (int i = 0; i < 4; ++i) ids.push_back(h.add(seeded(random_prompt(3, 60 + i), 60, 300 + i, 0.9f)));
  int steps = 0;
  int max_saves_per_step = 0;
  while (h.scheduler.has_work() && steps++ < 10000) {
    const int saves_before = h.runner.saves;
    h.step();
    max_saves_per_step = std::max(max_saves_per_step, h.runner.saves - saves_before);
  }
  ASSERT_FALSE(h.scheduler.has_work());
  for (RequestId id : ids) h.expect_matches_reference(id);
  EXPECT_GT(h.scheduler.counters().preemptions_total, 0);
  EXPECT_LE(max_saves_per_step, 2);  // only 2 of the 4 streams hold a tail snapshot
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_GT(h.scheduler.counters().state_snapshots, 0);  // finished streams published their tails
  EXPECT_LE(h.scheduler.counters().state_snapshots, 4);
}

TEST(StateSnapshots, ASharedPrefixHitsAtTheDeepestSnapshotWithinTheKvMatch) {
  Harness h(snapshot_config(8, 4));  // boundaries every 16 tokens and at each prompt's end
  hybrid(h);
  const std::vector<int32_t> shared = random_prompt(32, 3);
  std::vector<int32_t> pa = shared, pb = shared;
  for (int32_t t : random_prompt(21, 4)) pa.push_back(t);
  for (int32_t t : random_prompt(21, 5)) pb.push_back(t);
  const RequestId a = h.add(greedy(pa, 3));
  h.run_all();
  const RequestId b = h.add(greedy(pb, 3));
  h.run_all();
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 32);
  EXPECT_EQ(h.scheduler.counters().prefix_discarded_tokens_total, 0);
  EXPECT_EQ(h.runner.state_errors, 0);
}

TEST(StateSnapshots, WithoutASnapshotTheKvHitIsDiscardedAndCounted) {
  Harness h(snapshot_config(1, 4));  // one snapshot: only the latest boundary survives
  hybrid(h);
  const std::vector<int32_t> shared = random_prompt(32, 3);
  std::vector<int32_t> pa = shared, pb = shared;
  for (int32_t t : random_prompt(21, 4)) pa.push_back(t);
  for (int32_t t : random_prompt(21, 5)) pb.push_back(t);
  const RequestId a = h.add(greedy(pa, 3));
  h.run_all();
  const RequestId b = h.add(greedy(pb, 3));
  h.run_all();
  h.expect_matches_reference(a);
  h.expect_matches_reference(b);
  EXPECT_EQ(h.results[b].last.cached_prompt_tokens, 0);
  EXPECT_EQ(h.scheduler.counters().prefix_discarded_tokens_total, 32);
  EXPECT_EQ(h.scheduler.counters().state_snapshots, 1);
  EXPECT_EQ(h.runner.state_errors, 0);
}

// n > 1: the other choices copy the state snapshot of the prompt's last full block instead
// of recomputing the prompt: each recomputes only the partial last block and its first token.
TEST(StateSnapshots, ForkedChoicesResumeFromThePromptSnapshot) {
  for (const int prompt_len : {10, 12}) {  // a partial last block of 2 tokens; none
    Harness h(snapshot_config(8, 16));
    hybrid(h);
    GenerationParams p = seeded(random_prompt(prompt_len, 40), 12, 77, 1.0f);
    p.n = 3;
    const RequestId id = h.add(p);
    h.run_all();
    for (int c = 0; c < 3; ++c) h.expect_matches_reference(id, c);
    EXPECT_EQ(h.runner.restores, 2) << prompt_len;
    EXPECT_EQ(h.runner.state_errors, 0);
    EXPECT_EQ(h.runner.corrupt_reads, 0);
    // The prompt once, then per choice its 11 decoded tokens; each fork adds its partial block.
    const int64_t partial = prompt_len % 4;
    EXPECT_EQ(h.scheduler.counters().computed_tokens_total, prompt_len + 3 * 11 + 2 * partial) << prompt_len;
    EXPECT_EQ(h.scheduler.free_state_slots(), 4);
    EXPECT_EQ(h.scheduler.blocks().used_blocks(), 0);
  }
}

TEST(StateSnapshots, ConcurrentRequestsWithPreemptionKeepTheirTokens) {
  SchedulerConfig cfg = snapshot_config(6, 2);
  cfg.n_kv_blocks = 24;
  Harness h(cfg);
  hybrid(h);
  const std::vector<int32_t> shared = random_prompt(12, 21);
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> p = shared;
    for (int32_t t : random_prompt(3 + 5 * i, 30 + i)) p.push_back(t);
    ids.push_back(h.add(seeded(p, 20, 200 + i, 0.7f)));
  }
  h.run_all();
  for (RequestId id : ids) h.expect_matches_reference(id);
  EXPECT_EQ(h.runner.state_errors, 0);
  EXPECT_EQ(h.runner.corrupt_reads, 0);
  EXPECT_GT(h.runner.saves, 0);
  EXPECT_GT(h.runner.restores, 0);
  EXPECT_GT(h.scheduler.counters().preemptions_total, 0);
}

}  // namespace
}  // namespace spillway::scheduler::testing
