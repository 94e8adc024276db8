// What the runtime tests that drive a real EngineLoop share: a sink that collects every
// request's updates (tokens, logprobs, finish reason, diffusion usage), and a helper that
// submits a list of requests and waits for them.
//
// Thread contract: the sink runs on the engine thread; every other method on the test
// thread; the collector locks its own state.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/engine_loop.h"

namespace spillway::scheduler::testing {

class UpdateCollector {
 public:
  UpdateSink sink() {
    return [this](RequestUpdate&& u) {
      std::lock_guard lock(mu_);
      Collected& r = requests_[u.id];
      for (const ChoiceUpdate& c : u.choices) {
        for (const GeneratedToken& t : c.tokens) {
          r.tokens.push_back(t.id);
          r.logprobs.push_back(t.logprob);
          r.by_choice[c.index].push_back(t.id);
        }
        if (c.finish) r.finish = *c.finish;
      }
      if (u.diffusion) r.diffusion = *u.diffusion;
      if (u.error) errors_.push_back(*u.error);
      if (u.finished) {
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  void wait_finished(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_ >= n; });
  }
  // Every choice's tokens (and their logprobs) in the order they arrived.
  std::vector<int32_t> tokens(RequestId id) { return collected(id).tokens; }
  std::vector<float> logprobs(RequestId id) { return collected(id).logprobs; }
  std::vector<int32_t> choice_tokens(RequestId id, int32_t index) { return collected(id).by_choice[index]; }
  // The last finish reason any of its choices reported (nullopt: none yet).
  std::optional<FinishReason> finish(RequestId id) { return collected(id).finish; }
  // The last usage.diffusion it reported (nullopt: none yet, or not a diffusion request).
  std::optional<DiffusionUsage> diffusion(RequestId id) { return collected(id).diffusion; }
  std::vector<std::string> errors() {
    std::lock_guard lock(mu_);
    return errors_;
  }

 private:
  struct Collected {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::map<int32_t, std::vector<int32_t>> by_choice;
    std::optional<FinishReason> finish;
    std::optional<DiffusionUsage> diffusion;
  };
  Collected collected(RequestId id) {
    std::lock_guard lock(mu_);
    return requests_[id];
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<RequestId, Collected> requests_;
  std::vector<std::string> errors_;
  int finished_ = 0;
};

// Submits `requests` to a started loop in order (each waits for the one before it to finish
// when one_at_a_time) and waits for all of them. Returns their ids; a rejected submit is a
// test failure and returns the ids so far.
inline std::vector<RequestId> submit_and_wait(runtime::EngineLoop& loop, UpdateCollector& collector,
                                              const std::vector<GenerationParams>& requests, bool one_at_a_time) {
  std::vector<RequestId> ids;
  for (const GenerationParams& p : requests) {
    const auto r = loop.submit(p, collector.sink());
    EXPECT_TRUE(std::holds_alternative<RequestId>(r));
    if (!std::holds_alternative<RequestId>(r)) return ids;
    ids.push_back(std::get<RequestId>(r));
    if (one_at_a_time) collector.wait_finished(static_cast<int>(ids.size()));
  }
  collector.wait_finished(static_cast<int>(ids.size()));
  return ids;
}

}  // namespace spillway::scheduler::testing
