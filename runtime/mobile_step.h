// MoBiLE big-little decoding of one engine step (issue #16; engine/forward/mobile_params.h):
// what the EngineRunner's forward becomes on a MoE model.
//
// The step's decode rows (a sequence forwarding exactly its newest generated token, with
// one sampling row) whose settings (the runner's, overridden by RowSampling::moe) turn
// MoBiLE on run with their little expert count; every other token (prefill chunks, forked
// prompts, canvases) runs the full top-k, in the same forward. Each little row's raw
// logits then decide for that row alone: max softmax > gamma keeps them; otherwise the
// rows that fall back are recomputed together, at the same positions with the full top-k
// (their KV overwritten; hybrid models first roll their recurrent-state slot back one
// step), before anything is sampled. So the sampler (penalties, seeded RNG, grammar
// matchers) only ever sees accepted logits, and a row's result does not depend on its
// batch-mates: gamma = 0 equals a little-k run, gamma = 1 a full-k run, bit for bit.
//
// Fallback prefetch: with an expert cache (weights != null), the little pass records the
// full top-k each fallback row's router scores ask for at every MoE layer; those experts
// are requested from the cache (LayerWeightSource::prefetch_experts, layer order, as many
// as its slots hold) before the recompute.
//
// Thread contract: the engine thread (inside ModelRunner::execute).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/forward/forward.h"
#include "engine/forward/mobile_params.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/state/recurrent_state.h"
#include "scheduler/runner.h"

namespace spillway::runtime {

class MobileStep {
 public:
  // settings: the server's (--moe-little-experts, --moe-fallback-confidence).
  MobileStep(const engine::ModelConfig& config, engine::MobileSettings settings);

  // Forwards batch.forward as described above; returns the accepted logits
  // [batch.rows.size(), n_vocab], valid until the next call or the next forward. Errors as
  // ForwardPass::execute (or a recurrent-state slot that cannot roll back).
  Result<std::span<const float>> run(engine::ForwardPass& forward, engine::RecurrentState& state,
                                     engine::LayerWeightSource* weights, const scheduler::StepBatch& batch);

  scheduler::MobileStats stats() const { return stats_; }
  // The model's largest top-k (0: no MoE layers: run() is a plain forward).
  int32_t top_k() const { return top_k_; }

 private:
  // Marks the little rows; false when the step has none.
  bool plan(const scheduler::StepBatch& batch);
  Status prefetch(engine::ForwardPass& forward, engine::LayerWeightSource& weights);

  const int32_t n_vocab_;
  int32_t top_k_ = 0;
  engine::MobileSettings settings_;
  scheduler::MobileStats stats_;

  std::vector<int32_t> token_k_;       // per token of the step: little k, or 0 (full)
  std::vector<int32_t> row_little_;    // per logit row: its little k, or 0
  std::vector<double> row_gamma_;      // per logit row: gamma of a little row
  std::vector<int32_t> rows_of_token_; // per token: logit rows naming it
  std::vector<int32_t> single_seq_;    // per token: its sequence when that forwards it alone, else -1
  std::vector<float> logits_;          // [rows, n_vocab] the accepted logits
  engine::ForwardBatch fallback_;      // the recompute: one sequence per fallback row
  std::vector<int32_t> fallback_rows_; // logit rows of fallback_'s sequences, in order
  std::vector<int32_t> fallback_token_;// their token index in the little pass
  std::vector<uint8_t> token_falls_back_;
  std::vector<int32_t> prefetch_ids_;
};

}  // namespace spillway::runtime
