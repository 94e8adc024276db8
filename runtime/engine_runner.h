// The real ModelRunner: engine::ForwardPass over an engine::KvCache, then sampling of each
// logit row with its sequence's Sampler, the rows in parallel on the kernel pool.
//
// KV: n_kv_blocks blocks of block_size tokens, of kv_cache_type(model) (resolve_kv_blocks()
// when the config leaves n_kv_blocks at 0). Hybrid models: resolve_state_slots()
// recurrent-state slots.
// Diffusion canvases (StepBatch::canvases): their rows are committed by the canvas's own
// rule (scheduler::commit_canvases) after the forward, on the engine thread.
// Step plans: token counts are bucketed by StepPlans (at most 12 sizes up to
// max_batch_tokens) and live_step_plans() reports the buckets used. With
// SchedulerConfig::pad_step_buckets (attention-only models) a step runs padded to its bucket
// (runtime/step_buckets.h: padding rows write no K/V, attend to nothing, get no logits, and
// change no live row's bits), so the forward only sees the ladder's shapes; off (default), it
// runs unpadded: every row is computed independently, so padding only costs time on this CPU
// forward (bench/README.md "Rows-vs-time sweep"). The ForwardPass workspaces are allocated
// once, at construction, for the largest bucket (max_batch_tokens) and max_context, so they
// serve every bucket and a step allocates nothing (the logits of more than 64 rows grow once,
// amortized); the kernels' thread split is a function of the (padded) row count.
//
// Thread contract: engine thread only; kernels fan out on the ThreadPool.
#pragma once

#include <functional>
#include <memory>

#include "engine/forward/mobile_params.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/model/model.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_loop.h"
#include "scheduler/runner.h"

namespace spillway::runtime {

// KV blocks to create for config: config.n_kv_blocks when positive, else enough for
// max_context tokens of min(max_running, 4) sequences.
int32_t resolve_kv_blocks(const SchedulerConfig& config);
// Recurrent-state slots for a model (engine::RecurrentState): none without gated delta net
// layers; else config.n_state_slots when positive, else one per running sequence
// (max_running) as far as 1 GiB of slots allows (at least one; admission waits for a free
// slot when there are fewer slots than max_running).
int32_t resolve_state_slots(const SchedulerConfig& config, const engine::ModelConfig& model);
// Recurrent-state snapshots for the prefix cache (hybrid models with the prefix cache on):
// config.n_state_snapshots when positive, none when negative, else two per running sequence
// (half of them may be running sequences' tail snapshots, scheduler/config.h) as far as
// 256 MiB of snapshots allows (at least one).
int32_t resolve_state_snapshots(const SchedulerConfig& config, const engine::ModelConfig& model);

// The KV cache element type for a model: F16, but F32 for diffusion models (a canvas's K/V
// live for one step only, and llama.cpp's no-cache diffusion graph keeps them in F32).
kernels::DType kv_cache_type(const engine::ModelConfig& config);

struct EngineRunnerOptions {
  // Where the forward reads weights: null for the model's file mapping, else a
  // WeightResidency (streaming under a memory budget); must outlive the runner.
  engine::LayerWeightSource* weights = nullptr;
  // Run by ModelRunner::between_steps (e.g. ResidencyController::on_step).
  std::function<void()> between_steps;
  // MoBiLE (MoE models; runtime/mobile_step.h): the decode rows' little experts and
  // fallback confidence, unless a request overrides them. Default off.
  engine::MobileSettings mobile;
};

std::unique_ptr<ModelRunner> make_engine_runner(const engine::Model& model,
                                                kernels::ThreadPool& pool,
                                                const SchedulerConfig& config,
                                                EngineRunnerOptions options = {});

}  // namespace spillway::runtime
