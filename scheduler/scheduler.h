// Continuous batching in the style of vLLM v1: no prefill / decode phases; every sequence
// has tokens (prompt + generated) and `computed` tokens with KV, and each step computes
// some of the difference within a token budget.
//
// schedule() builds one step:
// 1. decode tokens of running sequences (one token left to compute), in admission order;
// 2. chunks of the other running sequences (prefills, forked prompt tails, ...), each as
//    much as the remaining budget allows, in admission order — so chunked prefill
//    interleaves with decoding and a long prompt never stalls running decodes;
// (Running sequences whose request's output is paused — set_output_paused, back-pressure
// from a client that stopped reading — are skipped in 1 and 2; they keep their blocks.)
// 3. if nothing was preempted in this step: admission of waiting sequences, first come
//    first served (a head that does not fit blocks the queue; a paused one is passed over), while the budget, KV blocks
//    and max_running allow; each is matched against the prefix cache first.
// When a running sequence needs KV blocks and none are left (after evicting unreferenced
// cached blocks), the latest-admitted running sequence is preempted by recompute: its
// blocks are released (full ones stay in the prefix cache), and it goes back to the front
// of the waiting queue with its tokens and its sampler state; on resume it recomputes its
// tokens, hitting the prefix cache where it can, and continues exactly where it stopped.
//
// update() applies the sampled tokens, registers newly filled blocks in the prefix cache,
// checks stop conditions, frees finished sequences and delivers RequestUpdates through each
// request's sink.
//
// Diffusion canvases (SchedulerConfig::diffusion_model): a request is one sequence holding
// an engine::diffusion::Canvas of prompt + max_tokens positions. Each step it runs in, the
// whole canvas is forwarded (all of it or nothing, scheduled with the prefill chunks, so
// canvases pack into the same engine step as AR decodes and prefills), the runner commits
// its rows, and update() hands the committed left-contiguous tokens to the choice's output
// (EOS, stop strings and max_tokens apply as for AR; the canvas stops as soon as its choice
// has finished). Canvases hold the blocks of their whole length while running, never enter
// the prefix cache, and can be preempted and resumed like AR sequences (the canvas state
// is kept; its K/V are recomputed every step anyway).
//
// Context: a sequence stops with Length when it reaches max_context() tokens, which is
// min(config.max_context, n_kv_blocks * block_size), so a lone sequence always fits.
//
// Thread contract: single-threaded (the engine thread). Sinks are called from
// update() / cancel() / cancel_all() / fail_step().
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "scheduler/config.h"
#include "scheduler/request.h"
#include "scheduler/kv_block_manager.h"
#include "scheduler/prefix_cache.h"
#include "scheduler/runner.h"
#include "scheduler/sequence.h"
#include "scheduler/state_snapshots.h"

namespace spillway::scheduler {

// Totals and gauges for EngineSnapshot / metrics.
struct SchedulerCounters {
  int32_t running_requests = 0;
  int32_t waiting_requests = 0;
  int64_t preemptions_total = 0;
  int64_t prefix_queried_tokens_total = 0;
  int64_t prefix_hit_tokens_total = 0;
  int64_t prefix_discarded_tokens_total = 0;  // hybrid: KV hits without a state snapshot
  int32_t state_snapshots = 0;                // hybrid: snapshots held
  int64_t computed_tokens_total = 0;  // tokens forwarded over all steps
  int32_t running_canvases = 0;       // diffusion: requests whose canvas is running
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // config.block_size and config.n_kv_blocks must be the runner's KV geometry; n_vocab the
  // runner's vocabulary. tokenizer and observer (may be null) must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, const engine::Tokenizer& tokenizer, int32_t n_vocab,
            MetricsObserver* observer = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Whether params fit this engine (prompt ids, lengths, n, limits); a user-facing reason.
  // Any thread: reads only the const members set at construction.
  std::optional<SubmitRejection> validate(const GenerationParams& params) const;
  // Queues a validated request at the back of the waiting queue.
  void add_request(RequestId id, GenerationParams params, UpdateSink sink,
                   Clock::time_point submitted = Clock::now());
  // Finishes the request with Cancelled and releases its blocks. Unknown ids are ignored.
  // Not during a step (between schedule() and update()).
  void cancel(RequestId id);
  void cancel_all();
  // Output back-pressure: while paused, the request's running sequences are skipped by
  // schedule() (paused, not preempted: their KV blocks, state slots and running slots stay)
  // and its waiting ones are not admitted (they keep their place in the queue without
  // blocking the others); resuming makes them schedulable again at the next schedule().
  // Unknown ids are ignored. Not during a step. A step whose only candidates are paused is
  // empty (step_paused() tells).
  void set_output_paused(RequestId id, bool paused);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }

  // Builds the next step; an empty batch when there is nothing to run now. The batch is
  // valid until the next schedule().
  const StepBatch& schedule();
  // Applies the runner's result of the batch schedule() returned.
  void update(StepResult& result);
  // The runner failed on the batch schedule() returned: every request in it finishes with
  // FinishReason::Error and this message.
  void fail_step(const std::string& message);
  // Something failed outside the runner (an exception in the engine thread): every request
  // finishes with FinishReason::Error and this message.
  void fail_all(const std::string& message);

  // About the step schedule() built last.
  int32_t step_sequences() const { return static_cast<int32_t>(scheduled_.size()); }
  int32_t step_preemptions() const { return step_preemptions_; }
  // Sequences (running, or waiting at admission) the last schedule() skipped because their
  // output was paused.
  int32_t step_paused() const { return step_paused_; }

  int32_t max_context() const { return max_context_; }
  const SchedulerConfig& config() const { return config_; }
  const KvBlockManager& blocks() const { return blocks_; }
  SchedulerCounters counters() const;
  int32_t waiting_sequences() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t running_sequences() const { return static_cast<int32_t>(running_.size()); }
  // Recurrent-state slots not held by a running sequence (0 for attention-only models).
  int32_t free_state_slots() const { return static_cast<int32_t>(free_state_slots_.size()); }

 private:
  // Diffusion: the canvas's generation length (max_tokens, or a default that fits), the
  // sampler parameters with defaults filled in, and their checks (errors name the field).
  int32_t canvas_tokens(const GenerationParams& params) const;
  engine::diffusion::DiffusionParams canvas_params(const GenerationParams& params) const;
  std::optional<SubmitRejection> validate_canvas(const GenerationParams& params) const;
  bool try_admit_canvas(Sequence& seq);
  void add_canvas_rows(Sequence& seq, engine::BatchSequence& bs);
  void advance_canvas(Sequence& seq);
  bool ensure_blocks(Sequence& seq, int32_t n_tokens);
  bool try_admit(Sequence& seq);
  void schedule_tokens(Sequence& seq, int32_t n);
  void preempt(Sequence& seq);
  void release_blocks(Sequence& seq);
  void finish_sequence(Sequence& seq);
  void register_full_blocks(Sequence& seq);
  void fork_choice(Sequence& parent, int32_t choice, int32_t first_token);
  void build_batch();
  void deliver(Request& request);
  void remove_from_running(Sequence& seq);
  bool hybrid() const { return config_.n_state_slots > 0; }
  bool snapshots_on() const { return hybrid() && snapshots_.enabled() && prefix_cache_.enabled(); }
  // Whether a snapshot is taken after `blocks` full blocks of seq.
  bool snapshot_boundary(const Sequence& seq, int32_t blocks) const;
  // n tokens of seq to schedule, cut so that a prefill chunk ends on the next snapshot boundary.
  int32_t chunk_for(const Sequence& seq, int32_t computed, int32_t n) const;
  void plan_snapshot_saves();
  void drop_pending_snapshots();
  // Plans the save of seq's tail snapshot after `blocks` full blocks (a step ending there).
  void plan_tail_save(Sequence& seq, int32_t blocks);
  // Ends seq's hold on its tail snapshot: publishes it in the index (its state is the one
  // after tail_snapshot_blocks blocks, which the prefix cache holds) or frees the slot.
  void release_tail_snapshot(Sequence& seq, bool publish);
  void release_state_slot(Sequence& seq);
  // A sequence finishing normally leaves its exact end for a next turn: its partial last
  // block as a prefix-cache end block, its state as a snapshot saved by the next step
  // (StepBatch::end_saves).
  void save_end_state(Sequence& seq);

  // Constants from construction: validate() reads only these (it runs on HTTP threads).
  const SchedulerConfig config_;
  const engine::Tokenizer& tokenizer_;
  const int32_t n_vocab_;
  MetricsObserver* observer_;
  const int32_t max_context_;
  std::vector<int32_t> end_of_generation_ids_;
  std::mt19937_64 seed_source_;

  KvBlockManager blocks_;
  PrefixCache prefix_cache_;
  std::vector<int32_t> free_state_slots_;  // hybrid models: slots no running sequence holds
  StateSnapshotIndex snapshots_;
  std::vector<StepBatch::StateTransfer> restores_;                  // of the step being built
  std::vector<StepBatch::StateTransfer> fork_restores_;             // for the next step (n > 1 forks)
  std::vector<std::pair<uint64_t, int32_t>> pending_snapshots_;     // saved by the step: hash, slot
  std::vector<std::pair<Sequence*, int32_t>> pending_tail_saves_;   // saved by the step: seq, blocks
  // End saves (save_end_state) not run yet: the snapshot's hash and the copy. Indexed
  // already; every step with tokens runs them first; a failed step forgets them.
  std::vector<std::pair<uint64_t, StepBatch::StateTransfer>> end_saves_;
  int32_t tail_holders_ = 0;  // running sequences holding a tail snapshot (at most half the slots)

  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Sequence*> running_;  // admission order: the back is the latest admitted
  std::deque<Sequence*> waiting_;   // front = next to admit
  int32_t reserved_slots_ = 0;      // sum of running sequences' slots()

  // The step being built / executed.
  StepBatch batch_;
  std::vector<Sequence*> scheduled_;
  std::vector<std::pair<Sequence*, int32_t>> row_owner_;  // per logit row: sequence, choice
  std::vector<Sequence*> finishing_;
  std::vector<Request*> touched_;
  int32_t budget_ = 0;
  int32_t step_preemptions_ = 0;
  int32_t step_paused_ = 0;

  int64_t preemptions_total_ = 0;
  int64_t prefix_queried_tokens_total_ = 0;
  int64_t prefix_hit_tokens_total_ = 0;
  int64_t prefix_discarded_tokens_total_ = 0;
  int64_t computed_tokens_total_ = 0;
};

}  // namespace spillway::scheduler
