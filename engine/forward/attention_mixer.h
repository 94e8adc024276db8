// The attention mixer: RMSNorm -> Q/K/V (optional bias, optional per-head QK RMSNorm) ->
// rope -> K/V written into the paged cache -> attention per sequence over each query's key
// range (StepContext::token_key_count: causal, or a whole canvas) -> output projection.
// Gated layers (LayerSpec::attention_gate): the Q projection is [q_h | gate_h] per head and
// the attention output is multiplied by sigmoid(gate) in the output projection's prologue.
//
// Thread contract: engine thread (inside ForwardPass::execute); kernels fan out on the pool.
// Workspaces only grow (ensure_capacity), never inside a step of a size seen before.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "engine/forward/step_context.h"
#include "engine/model/block_weights.h"
#include "engine/model/model_config.h"
#include "engine/state/kv_cache.h"

namespace spillway::engine {

class AttentionMixer {
 public:
  AttentionMixer(const ModelConfig& config, KvCache& kv, kernels::ThreadPool& pool);

  // Room for n_tokens rows whose queries see at most max_keys keys.
  void ensure_capacity(int32_t n_tokens, int64_t max_keys);
  // Splits this step's tokens into attention tasks (the same for every layer).
  void plan_step(const StepContext& ctx);
  // out = the attention block of layer `spec` on RMSNorm(x; norm). An Error only when a
  // streamed matrix could not be read.
  Status run(const StepContext& ctx, const LayerSpec& spec, const AttentionWeights& w,
           const float* norm, const float* x, float* out);

 private:
  size_t scratch_stride() const;  // floats per thread
  void attend(const StepContext& ctx, const LayerSpec& spec);

  const ModelConfig& cfg_;
  KvCache& kv_;
  kernels::ThreadPool& pool_;
  int32_t max_q_dim_ = 0, max_kv_dim_ = 0, max_group_ = 1;  // over the attention layers
  int32_t max_gated_q_dim_ = 0;  // over the gated attention layers (LayerSpec::attention_gate)
  int32_t token_capacity_ = 0;
  int64_t key_capacity_ = 0;
  // Up to kernels::kAttentionMaxTokens consecutive tokens of one sequence; a task is one
  // chunk and one kv head.
  struct Chunk {
    int32_t first_token;
    int32_t n_tokens;
  };
  std::vector<Chunk> chunks_;
  int64_t token_keys_ = 0;  // sum over tokens of the keys they attend (for the serial cutoff)
  AlignedBuffer h_, q_, k_, v_, attn_;  // [tokens, n_embd | q_dim | kv_dim | kv_dim | q_dim]
  AlignedBuffer scratch_;              // [threads, scratch_stride()]
  AlignedBuffer qg_, gate_;            // gated layers: [tokens, 2 q_dim | q_dim]
};

}  // namespace spillway::engine
