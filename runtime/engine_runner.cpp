#include "runtime/engine_runner.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "engine/sampling/mask_prefetcher.h"
#include "engine/sampling/sampling_pool.h"
#include "runtime/mobile_step.h"
#include "scheduler/step_plans.h"
#include "runtime/step_buckets.h"

namespace spillway::runtime {

using namespace scheduler;  // NOLINT: this layer binds the scheduler's types

int32_t resolve_kv_blocks(const SchedulerConfig& config) {
  if (config.n_kv_blocks > 0) return config.n_kv_blocks;
  const int32_t per_sequence = (config.max_context + config.block_size - 1) / config.block_size;
  return per_sequence * std::clamp(config.max_running, 1, 4);
}

kernels::DType kv_cache_type(const engine::ModelConfig& config) {
  return config.is_diffusion() ? kernels::DType::F32 : kernels::DType::F16;
}

namespace {
// Default caps on the recurrent-state memory (like the KV cache's default 1 GiB): the live
// slots (double-buffered for MoE hybrids: RecurrentState::undo_for) and the prefix cache's
// snapshots.
constexpr int64_t kDefaultStateSlotBytes = int64_t{1} << 30;
constexpr int64_t kDefaultSnapshotBytes = int64_t{256} << 20;
}  // namespace

int32_t resolve_state_slots(const SchedulerConfig& config, const engine::ModelConfig& model) {
  const int64_t slot_bytes = engine::RecurrentState::slot_bytes(model);
  if (slot_bytes == 0) return 0;
  if (config.n_state_slots > 0) return config.n_state_slots;
  const int64_t fit = std::max<int64_t>(1, kDefaultStateSlotBytes / slot_bytes);
  return static_cast<int32_t>(std::min<int64_t>(std::max(config.max_running, 1), fit));
}

int32_t resolve_state_snapshots(const SchedulerConfig& config, const engine::ModelConfig& model) {
  if (resolve_state_slots(config, model) == 0 || !config.prefix_cache || config.n_state_snapshots < 0) return 0;
  if (config.n_state_snapshots > 0) return config.n_state_snapshots;
  const int64_t fit = std::max<int64_t>(1, kDefaultSnapshotBytes / engine::RecurrentState::state_bytes(model));
  return static_cast<int32_t>(std::min<int64_t>(2 * int64_t{std::max(config.max_running, 1)}, fit));
}

namespace {

class EngineRunner final : public ModelRunner {
 public:
  EngineRunner(const engine::Model& model, kernels::ThreadPool& pool, const SchedulerConfig& config,
               EngineRunnerOptions options)
      : cfg_(model.config()),
        between_steps_(std::move(options.between_steps)),
        max_context_(config.max_context),
        kv_(cfg_, config.block_size, resolve_kv_blocks(config), kv_cache_type(cfg_)),
        state_(cfg_, resolve_state_slots(config, cfg_), engine::RecurrentState::undo_for(cfg_)),
        forward_(model, kv_, pool, config.max_batch_tokens, config.max_context, options.weights),
        plans_(config.max_batch_tokens),
        pad_(config.pad_step_buckets && state_.n_layers() == 0),
        sampling_(pool),
        snapshots_(resolve_state_snapshots(config, cfg_)),
        weights_(options.weights),
        mobile_(cfg_, options.mobile) {
    forward_.set_recurrent_state(&state_);
    // Padding rows of a MoE model would be routed through experts (time, routing counters),
    // and MoBiLE plans per token of the unpadded step: MoE models run unpadded.
    if (mobile_.top_k() > 0) pad_ = false;
  }

  Status execute(const StepBatch& batch, StepResult& result) override {
    SPILLWAY_TRY(check(batch));
    for (const StepBatch::StateTransfer& s : batch.end_saves) state_.snapshot_into(s.state_slot, snapshots_[s.snapshot]);
    result.tokens.resize(batch.rows.size());
    if (batch.empty()) return Status::Ok();
    // Shape buckets: the step runs at its bucket's row count (padding rows, step_buckets.h).
    const int bucket = plans_.record(batch.n_tokens(), pad_);
    const engine::ForwardBatch* forward_batch = &batch.forward;
    if (pad_ && plans_.sizes()[bucket] > batch.n_tokens()) {
      pad_forward_batch(batch.forward, plans_.sizes()[bucket], padded_);
      forward_batch = &padded_;
    }
    for (const StepBatch::StateTransfer& r : batch.state_restores) state_.restore(r.state_slot, snapshots_[r.snapshot]);
    // Structured output: the rows' masks are computed while the forward runs.
    for (const RowSampling& row : batch.rows) prefetch_jobs_.push_back(row.sampler ? row.sampler->constraint() : nullptr);
    prefetch_.start(prefetch_jobs_);
    struct WaitMasks {
      engine::MaskPrefetcher& p;
      ~WaitMasks() { p.wait(); }
    } wait_masks{prefetch_};
    // MoE models are never padded (below), so a padded step is a plain forward.
    auto forwarded = forward_batch == &batch.forward
                         ? mobile_.run(forward_, state_, weights_, batch)  // a plain forward unless MoBiLE
                         : forward_.execute(*forward_batch);
    if (!forwarded) return forwarded.error();
    for (const StepBatch::StateTransfer& s : batch.state_saves) state_.snapshot_into(s.state_slot, snapshots_[s.snapshot]);
    const std::span<const float> logits = *forwarded;
    prefetch_.wait();
    sample_rows(batch, logits, result);
    commit_canvases(batch, logits.data(), cfg_.n_vocab);
    return Status::Ok();
  }

  int32_t n_vocab() const override { return cfg_.n_vocab; }
  int32_t block_size() const override { return kv_.block_size(); }
  int32_t n_kv_blocks() const override { return kv_.n_blocks(); }
  int32_t n_state_slots() const override { return state_.n_layers() > 0 ? state_.n_slots() : 0; }
  int32_t n_state_snapshots() const override { return static_cast<int32_t>(snapshots_.size()); }
  StateSnapshotStats state_snapshot_stats() const override {
    const engine::RecurrentState::CopyStats& c = state_.copy_stats();
    StateSnapshotStats s{.saves_total = c.saves, .restores_total = c.restores,
                         .save_seconds_total = c.save_seconds, .restore_seconds_total = c.restore_seconds};
    for (const engine::RecurrentState::Snapshot& snap : snapshots_) s.bytes += snap.bytes();  // saved ones
    return s;
  }
  int32_t live_step_plans() const override { return plans_.live(); }
  MobileStats mobile_stats() const override { return mobile_.stats(); }
  const StepPlans* step_plans() const override { return &plans_; }
  void between_steps() override {
    if (between_steps_) between_steps_();
  }

 private:
  // Samples every row on the kernel pool (engine/sampling_pool.h).
  void sample_rows(const StepBatch& batch, std::span<const float> logits, StepResult& result) {
    const int32_t n_vocab = cfg_.n_vocab;
    sampling_.for_each_row(batch.rows.size(), [&](size_t r, engine::SamplerScratch& scratch) {
      const RowSampling& row = batch.rows[r];
      if (row.sampler == nullptr) return;  // a canvas row (commit_canvases)
      row.sampler->sample(logits.data() + r * n_vocab, n_vocab, row.history,
                          static_cast<size_t>(row.n_prompt), row.banned, scratch,
                          result.tokens[r]);
    });
  }

  // The forward asserts its preconditions; a runner reports them as errors instead.
  Status check(const StepBatch& batch) const {
    const engine::ForwardBatch& fb = batch.forward;
    const auto n_tokens = static_cast<int64_t>(fb.tokens.size());
    if (batch.rows.size() != fb.logit_rows.size()) {
      return Error{fmt::format("step batch has {} sampling rows for {} logit rows",
                               batch.rows.size(), fb.logit_rows.size())};
    }
    for (int32_t id : fb.tokens) {
      if (id < 0 || id >= cfg_.n_vocab) return Error{fmt::format("token id {} is out of range", id)};
    }
    for (const engine::BatchSequence& s : fb.sequences) {
      const int64_t end = s.start_position + s.n_tokens;
      if (s.first_token < 0 || s.n_tokens < 1 || s.first_token + s.n_tokens > n_tokens ||
          s.start_position < 0 || end > max_context_ ||
          static_cast<int64_t>(s.block_table.size()) * kv_.block_size() < end) {
        return Error{fmt::format("malformed batch sequence (tokens {}+{}, position {}, {} blocks)",
                                 s.first_token, s.n_tokens, s.start_position, s.block_table.size())};
      }
      if (state_.n_layers() > 0 && (s.state_slot < 0 || s.state_slot >= state_.n_slots())) {
        return Error{fmt::format("recurrent-state slot {} is out of range", s.state_slot)};
      }
      if (!s.positions.empty()) {  // a compacted canvas step: ascending positions inside the canvas
        bool ok = s.mode == engine::AttentionMode::Canvas && s.positions.size() == size_t(s.n_tokens) &&
                  s.canvas_end <= max_context_ &&
                  static_cast<int64_t>(s.block_table.size()) * kv_.block_size() >= s.canvas_end;
        for (size_t i = 0; ok && i < s.positions.size(); ++i) {
          ok = s.positions[i] >= 0 && s.positions[i] < s.canvas_end && (i == 0 || s.positions[i] > s.positions[i - 1]);
        }
        if (!ok) return Error{fmt::format("malformed compacted canvas sequence ({} positions)", s.positions.size())};
      }
      for (int32_t b : s.block_table) {
        if (b < 0 || b >= kv_.n_blocks()) return Error{fmt::format("KV block {} is out of range", b)};
      }
    }
    for (const auto* transfers : {&batch.state_restores, &batch.state_saves, &batch.end_saves}) {
      for (const StepBatch::StateTransfer& t : *transfers) {
        if (t.state_slot < 0 || t.state_slot >= n_state_slots() || t.snapshot < 0 ||
            t.snapshot >= n_state_snapshots()) {
          return Error{fmt::format("state transfer slot {} <-> snapshot {} is out of range", t.state_slot, t.snapshot)};
        }
      }
    }
    for (const StepBatch::StateTransfer& r : batch.state_restores) {
      const bool saved_first = std::any_of(batch.end_saves.begin(), batch.end_saves.end(),
                                           [&](const StepBatch::StateTransfer& s) { return s.snapshot == r.snapshot; });
      if (!saved_first && static_cast<int64_t>(snapshots_[r.snapshot].values.size()) != state_.state_floats()) {
        return Error{fmt::format("state snapshot {} was never saved", r.snapshot)};
      }
    }
    std::vector<bool> canvas_row(fb.logit_rows.size(), false);
    for (const CanvasRows& c : batch.canvases) {
      if (c.canvas == nullptr || !c.canvas->pending() || c.first_row < 0 ||
          c.first_row + c.n_rows > static_cast<int64_t>(fb.logit_rows.size()) ||
          c.n_rows != static_cast<int32_t>(c.canvas->pending_rows().size())) {
        return Error{"malformed canvas rows in the step batch"};
      }
      for (int32_t r = c.first_row; r < c.first_row + c.n_rows; ++r) canvas_row[r] = true;
    }
    for (size_t r = 0; r < fb.logit_rows.size(); ++r) {
      if (fb.logit_rows[r] < 0 || fb.logit_rows[r] >= n_tokens ||
          (batch.rows[r].sampler == nullptr) != canvas_row[r]) {
        return Error{fmt::format("malformed logit row {}", r)};
      }
    }
    return Status::Ok();
  }

  const engine::ModelConfig& cfg_;
  std::function<void()> between_steps_;
  int64_t max_context_;
  engine::KvCache kv_;
  engine::RecurrentState state_;  // hybrid models' slots (no layers, no memory otherwise)
  engine::ForwardPass forward_;
  StepPlans plans_;
  bool pad_ = false;               // pad steps to their bucket (attention-only models)
  engine::ForwardBatch padded_;    // the padded copy of a step's batch
  engine::SamplingPool sampling_;  // per-thread sampling scratch
  engine::MaskPrefetcher prefetch_;  // structured output: masks during the forward
  std::vector<engine::TokenConstraint*> prefetch_jobs_;
  std::vector<engine::RecurrentState::Snapshot> snapshots_;  // the prefix cache's state snapshots
  engine::LayerWeightSource* weights_;  // null: the model's mapping
  MobileStep mobile_;                   // MoBiLE big-little decode rows
};

}  // namespace

std::unique_ptr<ModelRunner> make_engine_runner(const engine::Model& model,
                                                kernels::ThreadPool& pool,
                                                const SchedulerConfig& config,
                                                EngineRunnerOptions options) {
  return std::make_unique<EngineRunner>(model, pool, config, std::move(options));
}

}  // namespace spillway::runtime
