// EngineLoop end to end with the FakeRunner on the engine thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/engine_loop.h"
#include "scheduler/harness.h"

namespace spillway::scheduler::testing {
namespace {

using namespace std::chrono_literals;
using runtime::EngineLoop;
using runtime::EngineSnapshot;

// Collects updates from the engine thread, keyed by RequestUpdate::id.
class Collector {
 public:
  UpdateSink sink() {
    return [this](RequestUpdate&& u) {
      std::lock_guard lock(mu_);
      const RequestId id = u.id;
      const bool finished = u.finished;
      results_[id].apply(std::move(u));
      if (finished) {
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  bool wait_finished(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 120s, [&] { return finished_ >= n; });
  }
  RequestResult get(RequestId id) {
    std::lock_guard lock(mu_);
    return results_[id];
  }
  int finished() {
    std::lock_guard lock(mu_);
    return finished_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, RequestResult> results_;
  int finished_ = 0;
};

struct CountingObserver : MetricsObserver {
  void on_step(const StepStats& s) override {
    ++steps;
    max_batch_tokens = std::max(max_batch_tokens, s.batch_tokens);
    preemptions += s.preemptions;
  }
  void on_prefix_lookup(int32_t queried, int32_t hit) override {
    ++lookups;
    EXPECT_LE(hit, queried);
    hit_tokens += hit;
  }
  int steps = 0, lookups = 0, max_batch_tokens = 0, preemptions = 0;
  int64_t hit_tokens = 0;
};

RequestId accepted(const std::variant<RequestId, SubmitRejection>& r) {
  EXPECT_TRUE(std::holds_alternative<RequestId>(r))
      << (std::holds_alternative<SubmitRejection>(r) ? std::get<SubmitRejection>(r).message : "");
  return std::holds_alternative<RequestId>(r) ? std::get<RequestId>(r) : 0;
}

TEST(EngineLoop, ConcurrentSubmittersGetTheReferenceOutputs) {
  SchedulerConfig cfg = small_config();
  cfg.max_batch_tokens = 16;
  cfg.n_kv_blocks = 40;
  FakeTokenizer tokenizer;
  auto runner = std::make_unique<FakeRunner>(cfg.block_size, cfg.n_kv_blocks, hashed_letter, 16);
  FakeRunner* fake = runner.get();
  CountingObserver observer;
  Collector collector;
  EngineLoop loop(std::move(runner), tokenizer, cfg, &observer);
  loop.start();

  constexpr int kThreads = 4, kPerThread = 6;
  std::vector<std::vector<std::pair<RequestId, GenerationParams>>> submitted(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int k = t * kPerThread + i;
        // A shared 8-token head for half of them, so the prefix cache is exercised.
        std::vector<int32_t> prompt = k % 2 ? random_prompt(8, 999) : std::vector<int32_t>{};
        const std::vector<int32_t> tail = random_prompt(3 + k % 11, 1000 + k);
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        GenerationParams p = k % 3 ? greedy(prompt, 5 + k % 13) : seeded(prompt, 9, 500 + k, 0.7f);
        p.n = k % 5 == 0 ? 2 : 1;
        const RequestId id = accepted(loop.submit(p, collector.sink()));
        submitted[t].emplace_back(id, p);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_TRUE(collector.wait_finished(kThreads * kPerThread));
  loop.stop();

  for (const auto& list : submitted) {
    for (const auto& [id, p] : list) {
      const RequestResult r = collector.get(id);
      EXPECT_EQ(r.finished_updates, 1);
      ASSERT_EQ(r.choices.size(), size_t(p.n));
      for (int c = 0; c < p.n; ++c) {
        const Reference ref = reference_generate(p, c, 128);
        EXPECT_EQ(r.choices[c].tokens, ref.tokens) << "request " << id << " choice " << c;
        EXPECT_EQ(r.choices[c].finish, ref.finish);
      }
    }
  }
  EXPECT_EQ(fake->corrupt_reads, 0);
  EXPECT_GT(observer.steps, 0);
  EXPECT_LE(observer.max_batch_tokens, 16);
  EXPECT_GT(observer.lookups, 0);
  EXPECT_GT(observer.hit_tokens, 0);
  const EngineSnapshot s = loop.snapshot();
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.kv_blocks_total, 40);
  EXPECT_GT(s.kv_blocks_cached, 0);
  EXPECT_EQ(s.block_size, 4);
  EXPECT_GT(s.prefix_hit_tokens_total, 0);
  EXPECT_EQ(s.prefix_hit_tokens_total, observer.hit_tokens);
  EXPECT_EQ(s.preemptions_total, observer.preemptions);
  EXPECT_GE(s.live_step_plans, 1);
  EXPECT_LE(s.live_step_plans, 12);  // StepPlans::kMaxPlans
}

TEST(EngineLoop, QueueFullThenStopBeforeStartCancels) {
  SchedulerConfig cfg = small_config();
  cfg.max_waiting = 2;
  FakeTokenizer tokenizer;
  Collector collector;
  EngineLoop loop(std::make_unique<FakeRunner>(4, 64), tokenizer, cfg);
  const RequestId a = accepted(loop.submit(greedy(letters("ab"), 5), collector.sink()));
  const RequestId b = accepted(loop.submit(greedy(letters("cd"), 5), collector.sink()));
  const auto third = loop.submit(greedy(letters("ef"), 5), collector.sink());
  ASSERT_TRUE(std::holds_alternative<SubmitRejection>(third));
  EXPECT_EQ(std::get<SubmitRejection>(third).kind, SubmitError::QueueFull);
  EXPECT_FALSE(std::get<SubmitRejection>(third).message.empty());

  loop.stop();
  for (RequestId id : {a, b}) {
    const RequestResult r = collector.get(id);
    EXPECT_EQ(r.finished_updates, 1);
    EXPECT_EQ(r.choices.at(0).finish, FinishReason::Cancelled);
  }
  const auto late = loop.submit(greedy(letters("gh"), 5), collector.sink());
  ASSERT_TRUE(std::holds_alternative<SubmitRejection>(late));
  EXPECT_EQ(std::get<SubmitRejection>(late).kind, SubmitError::ShuttingDown);
  loop.stop();  // idempotent
  loop.start();  // no effect after stop
  EXPECT_EQ(collector.finished(), 2);
}

TEST(EngineLoop, InvalidRequestsAreRejectedAtSubmit) {
  FakeTokenizer tokenizer;
  Collector collector;
  EngineLoop loop(std::make_unique<FakeRunner>(4, 64), tokenizer, small_config());
  loop.start();
  for (const GenerationParams& p : {greedy({}, 5), greedy(random_prompt(200, 1), 5),
                                    greedy({FakeTokenizer::kVocab + 3}, 5)}) {
    const auto r = loop.submit(p, collector.sink());
    ASSERT_TRUE(std::holds_alternative<SubmitRejection>(r));
    EXPECT_EQ(std::get<SubmitRejection>(r).kind, SubmitError::Invalid);
  }
  loop.stop();
  EXPECT_EQ(collector.finished(), 0);
}

TEST(EngineLoop, StopCancelsRequestsInFlight) {
  SchedulerConfig cfg = small_config();
  cfg.max_batch_tokens = 8;
  FakeTokenizer tokenizer;
  auto runner = std::make_unique<FakeRunner>(cfg.block_size, cfg.n_kv_blocks);
  // The engine thread parks in its 4th step until the test has seen stop() take effect.
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool parked = false, release = false;
  int executed = 0;
  runner->before_execute = [&] {
    if (++executed != 4) return;
    std::unique_lock lock(gate_mu);
    parked = true;
    gate_cv.notify_all();
    gate_cv.wait(lock, [&] { return release; });
  };
  Collector collector;
  EngineLoop loop(std::move(runner), tokenizer, cfg);
  std::vector<RequestId> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(accepted(loop.submit(greedy(random_prompt(6, i), -1), collector.sink())));
  }
  loop.start();
  {
    std::unique_lock lock(gate_mu);
    gate_cv.wait(lock, [&] { return parked; });
  }
  std::thread stopper([&] { loop.stop(); });
  // stop() has taken effect once submit() refuses with ShuttingDown.
  int extra = 0;
  for (;;) {
    const auto r = loop.submit(greedy(letters("zz"), 3), collector.sink());
    if (std::holds_alternative<SubmitRejection>(r)) {
      if (std::get<SubmitRejection>(r).kind == SubmitError::QueueFull) {
        std::this_thread::yield();
        continue;
      }
      ASSERT_EQ(std::get<SubmitRejection>(r).kind, SubmitError::ShuttingDown);
      break;
    }
    ids.push_back(std::get<RequestId>(r));
    ++extra;
    std::this_thread::yield();
  }
  {
    std::lock_guard lock(gate_mu);
    release = true;
  }
  gate_cv.notify_all();
  stopper.join();

  EXPECT_EQ(collector.finished(), static_cast<int>(ids.size()));
  for (RequestId id : ids) {
    const RequestResult r = collector.get(id);
    EXPECT_EQ(r.finished_updates, 1) << id;
    ASSERT_FALSE(r.choices.empty());
    EXPECT_EQ(r.choices[0].finish, FinishReason::Cancelled) << id;
  }
  const EngineSnapshot s = loop.snapshot();
  EXPECT_EQ(s.running + s.waiting, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
}

TEST(EngineLoop, CancelFinishesARunningRequest) {
  FakeTokenizer tokenizer;
  Collector collector;
  SchedulerConfig cfg = small_config();
  auto runner = std::make_unique<FakeRunner>(cfg.block_size, cfg.n_kv_blocks);
  // The engine thread parks in its 3rd step until the cancel is posted.
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool parked = false, release = false;
  int executed = 0;
  runner->before_execute = [&] {
    if (++executed != 3) return;
    std::unique_lock lock(gate_mu);
    parked = true;
    gate_cv.notify_all();
    gate_cv.wait(lock, [&] { return release; });
  };
  EngineLoop loop(std::move(runner), tokenizer, cfg);
  loop.start();
  const RequestId id = accepted(loop.submit(greedy(random_prompt(5, 3), -1), collector.sink()));
  {
    std::unique_lock lock(gate_mu);
    gate_cv.wait(lock, [&] { return parked; });
  }
  loop.cancel(id);
  loop.cancel(id + 100);  // unknown: ignored
  {
    std::lock_guard lock(gate_mu);
    release = true;
  }
  gate_cv.notify_all();
  ASSERT_TRUE(collector.wait_finished(1));
  const RequestResult r = collector.get(id);
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Cancelled);
  EXPECT_EQ(r.choices.at(0).tokens.size(), 3u);  // the cancel took effect at the next step
  EXPECT_EQ(r.finished_updates, 1);
  loop.stop();
  EXPECT_EQ(loop.snapshot().kv_blocks_used, 0);
}

// Output back-pressure: a paused request is not stepped, the engine thread sleeps instead
// of spinning on empty steps, and a resume wakes it to finish the request.
TEST(EngineLoop, PausedOutputIdlesTheEngineUntilResumed) {
  FakeTokenizer tokenizer;
  Collector collector;
  SchedulerConfig cfg = small_config();
  auto runner = std::make_unique<FakeRunner>(cfg.block_size, cfg.n_kv_blocks);
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool parked = false, release = false;
  std::atomic<int> executed{0}, iterations{0};
  runner->before_execute = [&] {
    if (++executed != 3) return;
    std::unique_lock lock(gate_mu);
    parked = true;
    gate_cv.notify_all();
    gate_cv.wait(lock, [&] { return release; });
  };
  runner->on_between_steps = [&] { ++iterations; };
  EngineLoop loop(std::move(runner), tokenizer, cfg);
  loop.start();
  const GenerationParams params = greedy(random_prompt(5, 4), -1);
  const RequestId id = accepted(loop.submit(params, collector.sink()));
  {
    std::unique_lock lock(gate_mu);
    gate_cv.wait(lock, [&] { return parked; });
  }
  loop.set_output_paused(id, true);
  loop.set_output_paused(id + 100, true);  // unknown: ignored
  {
    std::lock_guard lock(gate_mu);
    release = true;
  }
  gate_cv.notify_all();
  std::this_thread::sleep_for(100ms);
  const int iterations_paused = iterations.load();
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(executed.load(), 3);  // no step after the pause was taken
  EXPECT_LE(iterations.load() - iterations_paused, 2) << "the engine thread spins while paused";
  EXPECT_EQ(collector.finished(), 0);
  EXPECT_EQ(collector.get(id).choices.at(0).tokens.size(), 3u);
  EXPECT_EQ(loop.snapshot().running, 1);
  EXPECT_GT(loop.snapshot().kv_blocks_used, 0);  // paused, not preempted

  loop.set_output_paused(id, false);
  ASSERT_TRUE(collector.wait_finished(1));
  const RequestResult r = collector.get(id);
  const Reference ref = reference_generate(params, 0, cfg.max_context, hashed_letter);
  EXPECT_EQ(r.choices.at(0).tokens, ref.tokens);
  EXPECT_EQ(r.choices.at(0).finish, ref.finish);
  loop.stop();
  EXPECT_EQ(loop.snapshot().kv_blocks_used, 0);
}

TEST(EngineLoop, RunnerFailureFinishesWithErrorAndTheLoopGoesOn) {
  FakeTokenizer tokenizer;
  Collector collector;
  SchedulerConfig cfg = small_config();
  auto runner = std::make_unique<FakeRunner>(cfg.block_size, cfg.n_kv_blocks);
  runner->fail_next_step();
  EngineLoop loop(std::move(runner), tokenizer, cfg);
  loop.start();
  const RequestId bad = accepted(loop.submit(greedy(letters("abc"), 4), collector.sink()));
  ASSERT_TRUE(collector.wait_finished(1));
  const RequestId good = accepted(loop.submit(greedy(letters("abc"), 4), collector.sink()));
  ASSERT_TRUE(collector.wait_finished(2));
  loop.stop();
  const RequestResult r = collector.get(bad);
  EXPECT_EQ(r.choices.at(0).finish, FinishReason::Error);
  EXPECT_EQ(r.last.error, std::optional<std::string>("injected runner failure"));
  const RequestResult ok = collector.get(good);
  EXPECT_EQ(ok.choices.at(0).tokens, reference_generate(greedy(letters("abc"), 4), 0, 128).tokens);
  EXPECT_FALSE(ok.last.error.has_value());
}

}  // namespace
}  // namespace spillway::scheduler::testing
