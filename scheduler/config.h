// How the scheduler is sized, and what it reports per step (the runtime forwards the
// reports to the server's metrics).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/token_trie.h"

namespace spillway::scheduler {

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;  // token budget of one step (decode tokens + prefill chunks)
  int32_t max_running = 64;        // sequences in the running set
  int32_t max_waiting = 256;       // queued requests before submit() refuses (server: 429)
  int32_t max_context = 2048;      // per sequence, prompt + generated
  int32_t block_size = 16;         // KV block size in tokens
  int32_t n_kv_blocks = 0;         // KV capacity in blocks (shared by all sequences)
  bool prefix_cache = true;
  // Recurrent-state slots (hybrid models: one per running sequence; 0 = the model has no
  // recurrent layers). With slots, admission needs a free slot as well as KV blocks, a
  // sequence starts at position 0 in a fresh slot unless a state snapshot restores its
  // prefix (a KV hit alone cannot restore the recurrent state), and a forked choice
  // recomputes its prompt in a slot of its own.
  int32_t n_state_slots = 0;
  // Recurrent-state snapshots for the prefix cache of hybrid models (0: none, then hybrid
  // models get no prefix hits). A sequence's state is saved after the step whose tokens end
  // at a snapshot boundary: every snapshot_interval_blocks KV blocks, and the last full
  // block of its prompt; prefill chunks are cut to end on boundaries. Past its prompt, a
  // sequence also re-saves its state at every block boundary into a tail snapshot of its own
  // (at most half the snapshots are held so), published when it finishes: a second chat turn
  // resumes at the last full block of the first turn's prompt + answer. A hit resumes from
  // the deepest snapshot within the KV match.
  int32_t n_state_snapshots = 0;
  int32_t snapshot_interval_blocks = 16;
  // A masked-diffusion model (engine ModelConfig::is_diffusion): every request is a canvas
  // of prompt + max_tokens positions denoised with the reference sampler (engine/diffusion).
  bool diffusion_model = false;
  int32_t mask_token_id = -1;      // diffusion models: the mask token
  bool shift_logits = false;       // diffusion models: position p reads logits row p - 1
  // Diffusion models: requests that name no diffusion.cache use the compacted active set
  // (engine::diffusion::DiffusionParams::compact) when true, the full recompute when false.
  bool diffusion_compact = false;
  // Shape buckets (issue #17): the runner pads every step's rows up to the StepPlans ladder
  // (runtime/step_buckets.h; attention-only models). false: steps run unpadded and the
  // buckets are only recorded.
  bool pad_step_buckets = false;
  // Structured output: the tokenizer's vocabulary as a trie (engine::build_token_trie, once
  // at load). Null: requests with a grammar are refused.
  std::shared_ptr<const grammar::TokenTrie> token_trie;
  // MoE models: the largest top-k of its MoE layers (0: no MoE layers); MoBiLE's
  // per-request little_experts may not exceed it.
  int32_t moe_experts_used = 0;
};

// One engine step, for metrics.
struct StepStats {
  int32_t batch_tokens = 0;      // tokens forwarded
  int32_t batch_sequences = 0;   // sequences in the step
  int32_t preemptions = 0;       // sequences preempted while building this step
  double seconds = 0.0;          // wall time of the forward + sampling
  std::vector<int32_t> canvas_rows;  // per diffusion canvas of the step: rows it forwarded
};

// Recurrent-state snapshot traffic of a runner (ModelRunner::state_snapshot_stats) (hybrid models; zeros otherwise), for metrics.
struct StateSnapshotStats {
  int64_t bytes = 0;             // memory the snapshot slots hold now (saved at least once)
  int64_t saves_total = 0;       // state slot -> snapshot copies (StepBatch::state_saves)
  int64_t restores_total = 0;    // snapshot -> state slot copies (StepBatch::state_restores)
  double save_seconds_total = 0.0;
  double restore_seconds_total = 0.0;
};

// MoBiLE big-little decoding (engine/forward/mobile_params.h) of a runner
// (ModelRunner::mobile_stats), totals since start, for metrics.
struct MobileStats {
  int64_t little_tokens_total = 0;    // decode tokens accepted from the little pass
  int64_t fallback_tokens_total = 0;  // decode tokens recomputed with the full top-k
};

class MetricsObserver {
 public:
  virtual ~MetricsObserver() = default;
  virtual void on_step(const StepStats& stats) = 0;
  // A request's prompt was matched against the prefix cache.
  virtual void on_prefix_lookup(int32_t queried_tokens, int32_t hit_tokens) = 0;
  // Hybrid models: KV-cached prefix tokens not reused because no state snapshot covered them.
  virtual void on_prefix_discarded(int32_t /*tokens*/) {}
};

}  // namespace spillway::scheduler
