// The engine thread: owns the scheduler and the model runner, and turns submitted
// generation requests into streams of updates. This is the whole surface server/ sees.
//
// Thread contract:
// - submit(), cancel(), set_output_paused(), snapshot() may be called from any thread (Asio threads).
// - UpdateSink callbacks and MetricsObserver calls run on the engine thread. They must
//   return quickly, must not block on the engine, must not call submit()/cancel()
//   re-entrantly (posting work elsewhere is the expected use), and must not throw.
// - No exception crosses the engine thread: a runner failure finishes the affected
//   requests with RequestUpdate::error set.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/result.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/config.h"
#include "scheduler/request.h"

namespace spillway::scheduler {
class ModelRunner;  // scheduler/runner.h
}  // namespace spillway::scheduler

namespace spillway::runtime {

using scheduler::GenerationParams;
using scheduler::MetricsObserver;
using scheduler::ModelRunner;
using scheduler::RequestId;
using scheduler::SchedulerConfig;
using scheduler::SubmitRejection;
using scheduler::UpdateSink;

// A consistent copy of the scheduler's state, for /metrics and /health.
struct EngineSnapshot {
  int32_t running = 0;             // requests with a sequence in the running set
  int32_t waiting = 0;             // submitted, not yet running (includes preempted)
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;      // referenced by a live sequence
  int32_t kv_blocks_cached = 0;    // unreferenced, kept by the prefix cache (evictable)
  int32_t block_size = 0;
  int64_t preemptions_total = 0;
  int64_t prefix_queried_tokens_total = 0;
  int64_t prefix_hit_tokens_total = 0;
  int32_t live_step_plans = 0;     // distinct padded batch shapes the runner keeps
  // Hybrid models (0 otherwise): recurrent-state slots, those held by running sequences, and
  // the prefix cache's state snapshots.
  int32_t state_slots_total = 0;
  int32_t state_slots_used = 0;
  int32_t state_snapshots = 0;
  scheduler::StateSnapshotStats state_snapshot_stats;  // the runner's snapshot bytes and copies
  scheduler::MobileStats mobile_stats;  // MoE models: MoBiLE little / fallback decode tokens
  // Shape buckets (the runner's StepPlans, issue #17): plans built so far, and per bucket
  // (its row count) the padding rows its steps added (0 unless the runner pads).
  int64_t step_plan_builds = 0;
  std::vector<std::pair<int32_t, int64_t>> padded_rows_by_bucket;
  int32_t canvases_running = 0;    // diffusion models: running requests' canvases
};

class EngineLoop {
 public:
  // tokenizer: for detokenization, end-of-generation ids and stop strings. observer may be
  // null; both must outlive the loop.
  EngineLoop(std::unique_ptr<ModelRunner> runner, const engine::Tokenizer& tokenizer,
             SchedulerConfig config, MetricsObserver* observer = nullptr);
  ~EngineLoop();  // stop() then join
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Starts the engine thread.
  void start();
  // Refuses new requests, cancels the queued and running ones (FinishReason::Cancelled),
  // and joins the engine thread. Idempotent.
  void stop();

  // Queues a request. On success, sink receives its updates (the first one possibly before
  // submit() returns, on the engine thread).
  std::variant<RequestId, SubmitRejection> submit(GenerationParams params, UpdateSink sink);
  // The request finishes with FinishReason::Cancelled at the next step boundary and its
  // KV blocks are released (kept in the prefix cache where full). Unknown ids are ignored.
  void cancel(RequestId id);
  // Output back-pressure: while paused, the request's sequences are not scheduled (they
  // keep their KV); resuming wakes the engine thread. Applied at the next step boundary, in
  // order with cancels. Unknown or finished ids are ignored.
  void set_output_paused(RequestId id, bool paused);

  EngineSnapshot snapshot() const;
  const SchedulerConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::runtime
