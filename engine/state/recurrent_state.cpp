#include "engine/state/recurrent_state.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace spillway::engine {

namespace {
// Floats of layer `s`'s conv window and of its ssm state, each rounded up to a multiple of
// 16 floats (64 bytes) so that every layer's conv window and ssm state (and so, when a head's
// S x S floats are a multiple of 16, every head) starts on a cache line. The usual shapes need no
// padding (K - 1 = 3 rows of a conv dim that is a multiple of 16).
constexpr int64_t kAlignFloats = 16;
int64_t align_floats(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }
int64_t layer_conv_floats(const LayerSpec& s) { return align_floats(int64_t{s.ssm_conv_kernel - 1} * s.ssm_conv_dim()); }
int64_t layer_ssm_floats(const LayerSpec& s) {
  return align_floats(int64_t{s.ssm_value_heads} * s.ssm_state * s.ssm_state);
}
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int64_t RecurrentState::state_bytes(const ModelConfig& config) {
  int64_t floats = 0;
  for (const LayerSpec& s : config.layers) {
    if (s.mixer == MixerKind::GatedDeltaNet) floats += layer_conv_floats(s) + layer_ssm_floats(s);
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

RecurrentState::Undo RecurrentState::undo_for(const ModelConfig& config) {
  const bool moe = std::any_of(config.layers.begin(), config.layers.end(),
                               [](const LayerSpec& s) { return s.ffn == FfnKind::Moe; });
  return moe ? Undo::kOneStep : Undo::kNone;
}

RecurrentState::RecurrentState(const ModelConfig& config, int32_t n_slots, Undo undo)
    : n_slots_(n_slots), buffers_(undo == Undo::kOneStep ? 2 : 1) {
  for (const LayerSpec& s : config.layers) {
    if (s.mixer != MixerKind::GatedDeltaNet) continue;
    assert(s.recurrent_ordinal == static_cast<int32_t>(layers_.size()));
    layers_.push_back({state_floats_, layer_conv_floats(s)});
    state_floats_ += layer_conv_floats(s) + layer_ssm_floats(s);
  }
  const size_t total = static_cast<size_t>(state_floats_) * buffers_ * static_cast<size_t>(n_slots);
  // Zero pages from the kernel, page-aligned (so 64-byte aligned: glibc's large blocks sat 16
  // bytes into a page, which split every vector load and store of the recurrence across two
  // cache lines; a 64-token prefill recurrence of one 128 x 128 head took ~33 us longer, of
  // ~100 us, on the Qwen3.5-0.8B shape).
  allocation_ = ZeroedPages(total * sizeof(float));
  data_ = static_cast<float*>(allocation_.data());
  current_.assign(n_slots, 0);
  can_rollback_.assign(n_slots, 0);
}

void RecurrentState::reset(int32_t slot) {
  assert(slot >= 0 && slot < n_slots_);
  std::memset(buffer(slot, current_[slot]), 0, size_t(state_floats_) * sizeof(float));
  can_rollback_[slot] = 0;
}

void RecurrentState::prefault(int32_t slot) {
  assert(slot >= 0 && slot < n_slots_);
  std::memset(buffer(slot, 0), 0, size_t(state_floats_) * buffers_ * sizeof(float));  // a slot's buffers are adjacent
  can_rollback_[slot] = 0;
}

void RecurrentState::set_keep_undo(bool keep) {
  assert(!keep || buffers_ == 2);
  keep_undo_ = keep && buffers_ == 2;
}

void RecurrentState::begin_step(int32_t slot) {
  assert(slot >= 0 && slot < n_slots_);
  if (keep_undo_) current_[slot] ^= 1;
  can_rollback_[slot] = keep_undo_ ? 1 : 0;
}

bool RecurrentState::rollback(int32_t slot) {
  assert(slot >= 0 && slot < n_slots_);
  if (!can_rollback_[slot]) return false;
  current_[slot] ^= 1;
  can_rollback_[slot] = 0;
  return true;
}

void RecurrentState::copy(int32_t src, int32_t dst) {
  assert(src >= 0 && src < n_slots_ && dst >= 0 && dst < n_slots_);
  if (src == dst) return;
  if (state_floats_ > 0) {
    std::memcpy(buffer(dst, current_[dst]), buffer(src, current_[src]), size_t(state_floats_) * sizeof(float));
  }
  can_rollback_[dst] = 0;
}

RecurrentState::Snapshot RecurrentState::snapshot(int32_t slot) const {
  assert(slot >= 0 && slot < n_slots_);
  const float* b = buffer(slot, current_[slot]);
  Snapshot out;
  out.values.assign(b, b + state_floats_);
  return out;
}

void RecurrentState::snapshot_into(int32_t slot, Snapshot& out) const {
  assert(slot >= 0 && slot < n_slots_);
  const auto start = std::chrono::steady_clock::now();
  const float* b = buffer(slot, current_[slot]);
  out.values.assign(b, b + state_floats_);
  copy_stats_.save_seconds += seconds_since(start);
  ++copy_stats_.saves;
}

void RecurrentState::restore(int32_t slot, const Snapshot& snapshot) {
  assert(slot >= 0 && slot < n_slots_);
  assert(static_cast<int64_t>(snapshot.values.size()) == state_floats_);
  const auto start = std::chrono::steady_clock::now();
  if (state_floats_ > 0) {  // a model without recurrent layers has empty snapshots (data() null)
    std::memcpy(buffer(slot, current_[slot]), snapshot.values.data(), size_t(state_floats_) * sizeof(float));
  }
  can_rollback_[slot] = 0;
  copy_stats_.restore_seconds += seconds_since(start);
  ++copy_stats_.restores;
}

const float* RecurrentState::step_input(int32_t slot, int32_t ordinal) const {
  return buffer(slot, current_[slot] ^ can_rollback_[slot]) + layers_[ordinal].offset;
}

float* RecurrentState::step_output(int32_t slot, int32_t ordinal) {
  return buffer(slot, current_[slot]) + layers_[ordinal].offset;
}

const float* RecurrentState::current(int32_t slot, int32_t ordinal) const {
  return buffer(slot, current_[slot]) + layers_[ordinal].offset;
}

}  // namespace spillway::engine
