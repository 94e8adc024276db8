#include "runtime/mobile_step.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace spillway::runtime {

MobileStep::MobileStep(const engine::ModelConfig& config, engine::MobileSettings settings)
    : n_vocab_(config.n_vocab), top_k_(engine::moe_top_k(config)), settings_(settings) {}

bool MobileStep::plan(const scheduler::StepBatch& batch) {
  const engine::ForwardBatch& fb = batch.forward;
  const auto n_tokens = static_cast<size_t>(fb.tokens.size());
  const size_t n_rows = batch.rows.size();
  token_k_.assign(n_tokens, 0);
  row_little_.assign(n_rows, 0);
  row_gamma_.assign(n_rows, 0.0);
  rows_of_token_.assign(n_tokens, 0);
  single_seq_.assign(n_tokens, -1);
  for (int32_t t : fb.logit_rows) ++rows_of_token_[t];
  for (size_t s = 0; s < fb.sequences.size(); ++s) {
    const engine::BatchSequence& seq = fb.sequences[s];
    if (seq.n_tokens == 1 && seq.mode == engine::AttentionMode::Causal) single_seq_[seq.first_token] = int32_t(s);
  }
  bool any = false;
  for (size_t r = 0; r < n_rows; ++r) {
    const scheduler::RowSampling& row = batch.rows[r];
    const int32_t t = fb.logit_rows[r];
    if (row.sampler == nullptr || rows_of_token_[t] != 1 || single_seq_[t] < 0) continue;
    // A decode row: the sequence forwards its newest generated token alone.
    const engine::BatchSequence& seq = fb.sequences[single_seq_[t]];
    const auto n_history = static_cast<int64_t>(row.history.size());
    if (n_history <= row.n_prompt || seq.start_position != n_history - 1) continue;
    const engine::MobileSettings s = engine::merge_mobile(settings_, row.moe);
    const int32_t little = engine::resolve_little_experts(s.little_experts, top_k_);
    if (little == 0) continue;
    token_k_[t] = little;
    row_little_[r] = little;
    row_gamma_[r] = s.fallback_confidence;
    any = true;
  }
  return any;
}

Result<std::span<const float>> MobileStep::run(engine::ForwardPass& forward, engine::RecurrentState& state,
                                               engine::LayerWeightSource* weights, const scheduler::StepBatch& batch) {
  if (top_k_ == 0 || !plan(batch)) return forward.execute(batch.forward);

  // 1. The little pass: little rows with their k, everything else with the full k.
  engine::MoeFfn& moe = forward.moe_ffn();
  moe.set_token_experts_used(token_k_);
  moe.record_full_routing(weights != nullptr);
  state.set_keep_undo(true);  // a row that falls back recomputes its token from the state before it
  auto little = forward.execute(batch.forward);
  state.set_keep_undo(false);
  moe.set_token_experts_used({});
  if (!little) {
    moe.record_full_routing(false);
    return little.error();
  }
  logits_.assign(little->begin(), little->end());

  // 2. Each little row decides alone.
  const engine::ForwardBatch& fb = batch.forward;
  fallback_.clear();
  fallback_rows_.clear();
  fallback_token_.clear();
  for (size_t r = 0; r < batch.rows.size(); ++r) {
    if (row_little_[r] == 0) continue;
    const std::span<const float> row(logits_.data() + r * n_vocab_, size_t(n_vocab_));
    if (!engine::mobile_falls_back(row, row_gamma_[r])) {
      ++stats_.little_tokens_total;
      continue;
    }
    const int32_t t = fb.logit_rows[r];
    const engine::BatchSequence& seq = fb.sequences[single_seq_[t]];
    const int s = fallback_.add_sequence(&fb.tokens[t], 1, seq.start_position, seq.block_table);
    fallback_.sequences[s].state_slot = seq.state_slot;
    fallback_.logit_rows.push_back(static_cast<int32_t>(fallback_.tokens.size()) - 1);
    fallback_rows_.push_back(static_cast<int32_t>(r));
    fallback_token_.push_back(t);
  }
  if (fallback_rows_.empty()) {
    moe.record_full_routing(false);
    return std::span<const float>(logits_);
  }

  // 3. The big pass over the rows that fall back: recurrent state back one step, the
  //    experts their router scores name requested ahead, then the full top-k.
  if (state.n_layers() > 0) {
    for (const engine::BatchSequence& seq : fallback_.sequences) {
      if (!state.rollback(seq.state_slot)) {
        moe.record_full_routing(false);
        return Error{fmt::format("MoBiLE fallback: recurrent-state slot {} cannot roll back", seq.state_slot)};
      }
    }
  }
  if (weights != nullptr) {
    const Status prefetched = prefetch(forward, *weights);
    moe.record_full_routing(false);
    SPILLWAY_TRY(prefetched);
  }
  auto big = forward.execute(fallback_);
  if (!big) return big.error();
  for (size_t i = 0; i < fallback_rows_.size(); ++i) {
    std::memcpy(logits_.data() + size_t(fallback_rows_[i]) * n_vocab_, big->data() + i * n_vocab_,
                sizeof(float) * n_vocab_);
  }
  stats_.fallback_tokens_total += static_cast<int64_t>(fallback_rows_.size());
  return std::span<const float>(logits_);
}

Status MobileStep::prefetch(engine::ForwardPass& forward, engine::LayerWeightSource& weights) {
  const auto& routing = forward.moe_ffn().full_routing();
  token_falls_back_.assign(token_k_.size(), 0);
  for (int32_t t : fallback_token_) token_falls_back_[t] = 1;
  // As many as the cache holds at once, earliest layers first (later prefetches must not
  // evict earlier ones before the recompute reaches them).
  int64_t room = weights.max_experts_per_acquire();
  for (size_t layer = 0; layer < routing.size() && room > 0; ++layer) {
    if (routing[layer].empty()) continue;
    prefetch_ids_.clear();
    for (const engine::MoeFfn::RoutedPair& p : routing[layer]) {
      if (token_falls_back_[p.token]) prefetch_ids_.push_back(p.expert);
    }
    std::sort(prefetch_ids_.begin(), prefetch_ids_.end());
    prefetch_ids_.erase(std::unique(prefetch_ids_.begin(), prefetch_ids_.end()), prefetch_ids_.end());
    if (prefetch_ids_.empty()) continue;
    if (static_cast<int64_t>(prefetch_ids_.size()) > room) break;
    room -= static_cast<int64_t>(prefetch_ids_.size());
    SPILLWAY_TRY(weights.prefetch_experts(static_cast<int32_t>(layer), prefetch_ids_));
  }
  return {};
}

}  // namespace spillway::runtime
