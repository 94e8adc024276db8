// Drives a Scheduler with a FakeRunner on the test's thread, one step at a time.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "fake_model.h"
#include "scheduler/scheduler.h"

namespace spillway::scheduler::testing {

inline SchedulerConfig small_config() {
  SchedulerConfig c;
  c.max_batch_tokens = 32;
  c.max_running = 8;
  c.max_waiting = 64;
  c.max_context = 128;
  c.block_size = 4;
  c.n_kv_blocks = 64;
  c.prefix_cache = true;
  return c;
}

inline std::vector<int32_t> letters(std::string_view s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(c == ' ' ? FakeTokenizer::kSpace : FakeTokenizer::letter(c));
  return ids;
}

// A prompt of n letters drawn from seed.
inline std::vector<int32_t> random_prompt(int n, uint64_t seed) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(FakeTokenizer::letter('a' + mix(seed * 1000 + i) % 26));
  return ids;
}

inline GenerationParams greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0.0f;
  return p;
}

inline GenerationParams seeded(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t seed,
                               float temperature = 1.0f) {
  GenerationParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.sampling.temperature = temperature;
  p.sampling.seed = seed;
  return p;
}

class Harness {
 public:
  explicit Harness(SchedulerConfig config, NextToken next = hashed_letter)
      : config(config),
        next_token(next),
        runner(config.block_size, config.n_kv_blocks, next, config.max_batch_tokens),
        scheduler(config, tokenizer, runner.n_vocab()) {}

  RequestId add(const GenerationParams& params) {
    EXPECT_FALSE(scheduler.validate(params).has_value());
    const RequestId id = next_id++;
    scheduler.add_request(id, params, [this, id](RequestUpdate&& u) {
      results[id].apply(std::move(u));
    });
    params_[id] = params;
    return id;
  }

  // One schedule/execute/update round; false when the batch was empty.
  bool step() {
    const StepBatch& batch = scheduler.schedule();
    if (batch.empty()) return false;
    StepResult result;
    const Status status = runner.execute(batch, result);
    if (status.ok()) {
      scheduler.update(result);
    } else {
      scheduler.fail_step(status.error().message);
    }
    return true;
  }

  void run_all(int max_steps = 100000) {
    int steps = 0;
    while (scheduler.has_work() && steps++ < max_steps) step();
    ASSERT_FALSE(scheduler.has_work()) << "did not finish in " << max_steps << " steps";
  }

  // The request's choice equals the naive reference run of the same model.
  void expect_matches_reference(RequestId id, int32_t choice = 0) {
    const GenerationParams& p = params_.at(id);
    const Reference ref = reference_generate(p, choice, scheduler.max_context(), next_token);
    const ChoiceResult& got = results.at(id).choices.at(choice);
    EXPECT_EQ(got.tokens, ref.tokens) << "request " << id << " choice " << choice;
    ASSERT_TRUE(got.finish.has_value());
    EXPECT_EQ(*got.finish, ref.finish) << "request " << id << " choice " << choice;
    EXPECT_EQ(got.finish_updates, 1);
  }

  SchedulerConfig config;
  NextToken next_token;
  FakeTokenizer tokenizer;
  FakeRunner runner;
  Scheduler scheduler;
  std::map<RequestId, RequestResult> results;
  RequestId next_id = 1;

 private:
  std::map<RequestId, GenerationParams> params_;
};

}  // namespace spillway::scheduler::testing
