// The engine thread: owns the scheduler and the model runner, and turns submitted
// generation requests into streams of updates. This is the whole surface server/ sees.
//
// Thread contract:
// - submit(), cancel(), snapshot() may be called from any thread (Asio threads).
// - UpdateSink callbacks and MetricsObserver calls run on the engine thread. They must
//   return quickly, must not block on the engine, must not call submit()/cancel()
//   re-entrantly (posting work elsewhere is the expected use), and must not throw.
// - No exception crosses the engine thread: a runner failure finishes the affected
//   requests with RequestUpdate::error set.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/result.h"
#include "engine/sampling.h"
#include "engine/tokenizer.h"

namespace spillway::scheduler {

class ModelRunner;  // scheduler/runner.h

using RequestId = uint64_t;

// What the server asks for, already tokenized (server/ renders chat templates).
struct GenerationParams {
  std::vector<int32_t> prompt;          // non-empty; ids < n_vocab
  engine::SamplingParams sampling;      // includes seed, logprobs, top_logprobs
  int32_t max_tokens = -1;              // -1: until the context is full
  int32_t min_tokens = 0;               // end-of-generation ids and stop ids banned before this
  bool ignore_eos = false;              // end-of-generation ids do not stop the stream
  std::vector<std::string> stop;        // stop strings, matched across token boundaries;
                                        // the matched text is not included in the output
  std::vector<int32_t> stop_token_ids;  // extra ids that stop the stream (not in output text)
  int32_t n = 1;                        // choices; they share the prompt's KV blocks
  bool skip_special_tokens = true;      // detokenization of control tokens
};

enum class FinishReason {
  Stop,       // end-of-generation id, stop string or stop id
  Length,     // max_tokens, or the context is full
  Cancelled,  // cancel() or shutdown
  Error,      // the runner failed; RequestUpdate::error says why
};

struct GeneratedToken {
  int32_t id = -1;
  float logprob = 0.0f;                               // when sampling.logprobs
  std::vector<engine::TokenLogprob> top_logprobs;     // sampling.top_logprobs alternatives
};

struct ChoiceUpdate {
  int32_t index = 0;                   // 0 .. n-1
  std::string text;                    // text completed since the previous update: whole
                                       // UTF-8 sequences only, text that may still become a
                                       // stop string held back until it cannot
  std::vector<GeneratedToken> tokens;  // the tokens generated since the previous update
  std::optional<FinishReason> finish;  // set in this choice's last update
};

struct RequestUpdate {
  RequestId id = 0;
  std::vector<ChoiceUpdate> choices;   // only choices with something new
  bool finished = false;               // every choice finished: the last update of the request
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;    // prompt tokens served from the prefix cache
  int32_t completion_tokens = 0;       // over all choices, so far
  double queue_seconds = 0.0;          // from submit() to the first step that computed it
  std::optional<std::string> error;    // with FinishReason::Error
};

// Called once per update, on the engine thread, in order; the last call has finished set.
using UpdateSink = std::function<void(RequestUpdate&&)>;

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;  // token budget of one step (decode tokens + prefill chunks)
  int32_t max_running = 64;        // sequences in the running set
  int32_t max_waiting = 256;       // queued requests before submit() refuses (server: 429)
  int32_t max_context = 2048;      // per sequence, prompt + generated
  int32_t block_size = 16;         // KV block size in tokens
  int32_t n_kv_blocks = 0;         // KV capacity in blocks (shared by all sequences)
  bool prefix_cache = true;
};

// One engine step, for metrics.
struct StepStats {
  int32_t batch_tokens = 0;      // tokens forwarded
  int32_t batch_sequences = 0;   // sequences in the step
  int32_t preemptions = 0;       // sequences preempted while building this step
  double seconds = 0.0;          // wall time of the forward + sampling
};

class MetricsObserver {
 public:
  virtual ~MetricsObserver() = default;
  virtual void on_step(const StepStats& stats) = 0;
  // A request's prompt was matched against the prefix cache.
  virtual void on_prefix_lookup(int32_t queried_tokens, int32_t hit_tokens) = 0;
};

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
};

enum class SubmitError {
  QueueFull,     // max_waiting reached (HTTP 429)
  ShuttingDown,  // stop() was called (HTTP 503)
  Invalid,       // params do not fit this engine, e.g. prompt + min_tokens > max_context (400)
};

struct SubmitRejection {
  SubmitError kind;
  std::string message;  // user-facing
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

  EngineSnapshot snapshot() const;
  const SchedulerConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::scheduler
