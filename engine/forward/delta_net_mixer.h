// The gated delta net mixer of hybrid models (qwen35, qwen35moe, qwen3next), as llama.cpp
// 3f545be computes it:
//   RMSNorm -> qkv, z (output gate), beta, alpha projections (one fused matmul pass)
//   -> causal depthwise conv over [conv state | this step's qkv rows] (no bias), SiLU
//   -> q, k L2-normalised per key head; beta = sigmoid(b); g = softplus(a + dt_bias) * ssm_a
//   -> the delta-rule recurrence per (sequence, value head) over the sequence's tokens
//      (kernels::gated_delta_net; value head h reads key head LayerSpec::ssm_key_head(h))
//   -> per head RMSNorm(o; ssm_norm) * silu(z), fused into the output projection's prologue.
//
// State: a RecurrentState slot per sequence (BatchSequence::state_slot). plan_step begins a
// step on every slot of the batch (in place, or into the slot's other buffer when the pool
// keeps steps for undo); a sequence whose start_position is 0 starts from the zero state
// whatever its slot holds.
//
// Thread contract: engine thread (inside ForwardPass::execute); work fans out on the pool.
// Workspaces only grow (ensure_capacity).
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "engine/forward/step_context.h"
#include "engine/model/block_weights.h"
#include "engine/model/model_config.h"
#include "engine/state/recurrent_state.h"

namespace spillway::engine {

class DeltaNetMixer {
 public:
  explicit DeltaNetMixer(const ModelConfig& config);

  bool active() const { return max_conv_dim_ > 0; }  // the model has delta-net layers
  void ensure_capacity(int32_t n_tokens);
  // The pool the slots index (must outlive its use; null: none).
  void set_state(RecurrentState* state) { state_ = state; }
  // Checks every sequence has a valid, distinct slot and begins its step. An Error (and no
  // slot touched) otherwise. No-op for models without delta-net layers.
  Status plan_step(const StepContext& ctx);
  // out = the delta-net block of layer `spec` on RMSNorm(x; norm).
  Status run(const StepContext& ctx, const LayerSpec& spec, const DeltaNetWeights& w, const float* norm,
           const float* x, float* out);

 private:
  void split_qkvz(const StepContext& ctx, const LayerSpec& spec);
  const float* conv_taps(const LayerSpec& spec, const DeltaNetWeights& w);
  // The conv, gates and recurrence of every sequence of the step, one pool task per (sequence,
  // key head); the helpers below are one task's parts (pool threads, disjoint channels and heads).
  void mix(const StepContext& ctx, const LayerSpec& spec, const DeltaNetWeights& w);
  void conv(const LayerSpec& spec, const BatchSequence& seq, const float* taps, int64_t begin, int64_t end);
  void normalise_qk(const LayerSpec& spec, const BatchSequence& seq, int32_t key_head);
  void gates(const LayerSpec& spec, const DeltaNetWeights& w, const BatchSequence& seq, int32_t value_head);
  void recurrence(const LayerSpec& spec, const BatchSequence& seq, int32_t value_head);

  // The longest conv kernel run (the GGUF loader's limit, hybrid_block.cpp): a token's window
  // rows are an array on the stack.
  static constexpr int32_t kMaxConvKernel = 64;

  const ModelConfig& cfg_;
  RecurrentState* state_ = nullptr;
  int32_t max_conv_dim_ = 0, max_value_dim_ = 0, max_value_heads_ = 0, max_conv_kernel_ = 0;  // over the delta-net layers
  int32_t token_capacity_ = 0;
  // [tokens, n_embd | conv_dim | conv_dim | value_dim | 2 nv | nv | nv | nv | value_dim]
  AlignedBuffer h_, qkv_, conv_, z_, ba_, alpha_, g_, beta_, o_;
  AlignedBuffer qkvz_;        // [tokens, conv_dim + value_dim]: a fused in_proj_qkvz's output (HF qwen3_next)
  // Per delta-net layer (recurrent ordinal): its conv taps as [K][conv_dim], transposed on the
  // layer's first step (a layer's taps never change, resident or streamed; K x conv_dim floats
  // a layer, 96 KiB at Qwen3.5-0.8B's shape). Transposing on every step cost a single-threaded
  // pass per layer and token.
  std::vector<std::vector<float>> conv_taps_;
  AlignedBuffer conv_zeros_;  // [conv_dim] zeros: the conv window before position 0
};

}  // namespace spillway::engine
