// The model runner: how the scheduler sees the engine (DESIGN.md "One step, end to end").
//
// The scheduler builds one StepBatch per step; the runner forwards it, samples every logit
// row with that row's Sampler and returns one SampledToken per row in the StepResult.
//
// Thread contract: a runner belongs to the engine thread; execute() is called by one thread
// at a time. Everything a StepBatch points to (Samplers, histories, banned ids) is owned by
// the scheduler and stays valid and unchanged until execute() returns. The rows of a step
// may be sampled concurrently on kernel pool threads, so no two rows may name one Sampler.
//
// Diffusion canvases: a canvas is a BatchSequence in AttentionMode::Canvas (the whole
// canvas, bidirectional); its logit rows do not go through a Sampler but through the
// canvas's own commit rule (StepBatch::canvases, commit_canvases()). Canvas rows count
// against the same token budget and use the same KV block pool as AR sequences.
//
// MoE models: a runner may decode rows with MoBiLE (runtime/mobile_step.h; RowSampling::moe
// overrides its settings per request); the rows' samplers still see exactly one set of
// logits per row, the accepted one. Its little / fallback counts: mobile_stats().
// Room for the next wave (not implemented yet): per-layer expert hit counts in StepResult.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/diffusion/canvas.h"
#include "engine/forward/batch.h"
#include "engine/forward/mobile_params.h"
#include "engine/sampling/sampling.h"
#include "scheduler/config.h"
#include "scheduler/step_plans.h"

namespace spillway::scheduler {

// What sampling one logit row needs. Pointers and spans are owned by the scheduler.
struct RowSampling {
  engine::Sampler* sampler = nullptr;    // the choice's sampler (its RNG advances)
  std::span<const int32_t> history;      // prompt + generated tokens of the choice
  int32_t n_prompt = 0;                  // how many of history are prompt
  std::span<const int32_t> banned;       // ids that must not be chosen (min_tokens)
  // The request's MoBiLE override (GenerationParams::moe); null: the runner's settings.
  const engine::MobileRequest* moe = nullptr;
};

// A diffusion canvas's rows in a step: logit rows [first_row, first_row + n_rows) of the
// batch are its pending_rows(), in order; their RowSampling entries have no sampler. The
// runner commits them with commit_canvases() after the forward (the canvas is owned by the
// scheduler and advanced only there and in update()).
struct CanvasRows {
  engine::diffusion::Canvas* canvas = nullptr;
  int32_t first_row = 0;
  int32_t n_rows = 0;
};

struct StepBatch {
  // Tokens of every sequence in the step, their KV block tables and start positions.
  engine::ForwardBatch forward;
  // One entry per forward.logit_rows entry, same order. Several rows may name the same
  // token index (the n choices of a request all sample from the prompt's last token).
  std::vector<RowSampling> rows;
  // Diffusion canvases of the step (their rows have RowSampling::sampler == nullptr).
  std::vector<CanvasRows> canvases;

  // Hybrid models with state snapshots (scheduler/state_snapshots.h): before the forward the
  // runner copies each restore's snapshot slot into its state slot (a prefix-cache hit);
  // after it, each save's state slot into its snapshot slot (state after the step).
  struct StateTransfer {
    int32_t state_slot = -1;
    int32_t snapshot = -1;
  };
  std::vector<StateTransfer> state_restores;
  std::vector<StateTransfer> state_saves;
  // Sequences that finished in an earlier step leave their exact end for a next chat turn
  // (PrefixCache end blocks): their states are copied from the slots they held into
  // snapshot slots FIRST, before the restores and the forward, because those slots are free
  // again and may belong to a sequence of this very step.
  std::vector<StateTransfer> end_saves;

  bool empty() const { return forward.tokens.empty(); }
  int32_t n_tokens() const { return static_cast<int32_t>(forward.tokens.size()); }
};

struct StepResult {
  // One per StepBatch::rows entry, same order.
  std::vector<engine::SampledToken> tokens;
};

// Commits every canvas of the step from logits [rows, n_vocab] (the step's logit rows, in
// order). Engine thread.
inline void commit_canvases(const StepBatch& batch, const float* logits, int32_t n_vocab) {
  for (const CanvasRows& c : batch.canvases) {
    c.canvas->commit(logits + size_t(c.first_row) * n_vocab, n_vocab);
  }
}

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Forwards the batch and samples its rows into result (result.tokens is resized; its
  // storage is reused between steps). An error (a malformed batch, a failed weight read)
  // leaves the KV written for this step's positions undefined; the scheduler then finishes
  // the step's requests with FinishReason::Error.
  virtual Status execute(const StepBatch& batch, StepResult& result) = 0;

  virtual int32_t n_vocab() const = 0;
  // KV geometry the runner was built with; the scheduler's block ids index this pool.
  virtual int32_t block_size() const = 0;
  virtual int32_t n_kv_blocks() const = 0;
  // Recurrent-state slots the runner holds (hybrid models; 0 otherwise): the scheduler's
  // BatchSequence::state_slot values index them.
  virtual int32_t n_state_slots() const { return 0; }
  // Recurrent-state snapshot slots (StepBatch::state_saves / state_restores); 0: none.
  virtual int32_t n_state_snapshots() const { return 0; }
  // Totals since construction; engine thread, between steps.
  virtual StateSnapshotStats state_snapshot_stats() const { return {}; }
  // MoBiLE little / fallback decode tokens since construction (MoE models); engine thread.
  virtual MobileStats mobile_stats() const { return {}; }
  // Distinct padded batch shapes (step plans) the runner keeps; bounded by a fixed set.
  virtual int32_t live_step_plans() const = 0;
  // The step-plan buckets and their counters (plan builds, padded rows); null when the runner
  // keeps none.
  virtual const StepPlans* step_plans() const { return nullptr; }
  // Called on the engine thread after every step, and about once a second while idle: the
  // real runner adapts its resident weights to memory pressure here.
  virtual void between_steps() {}
};

}  // namespace spillway::scheduler
