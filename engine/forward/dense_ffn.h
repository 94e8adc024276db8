// The dense FFN: RMSNorm -> gate and up projections -> SwiGLU (silu(gate) * up, fused into
// the down projection's row prologue) -> down projection.
//
// Thread contract: engine thread (inside ForwardPass::execute); kernels fan out on the pool.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "engine/forward/step_context.h"
#include "engine/model/block_weights.h"
#include "engine/model/model_config.h"

namespace spillway::engine {

class DenseFfn {
 public:
  explicit DenseFfn(const ModelConfig& config);

  void ensure_capacity(int32_t n_tokens);
  // out = down(silu(gate(h)) * up(h)) with h = RMSNorm(x; norm), for layer `spec`.
  Status run(const StepContext& ctx, const LayerSpec& spec, const DenseFfnWeights& w, const float* norm,
           const float* x, float* out);

 private:
  const ModelConfig& cfg_;
  int32_t max_ff_ = 0;  // over the dense layers
  int32_t token_capacity_ = 0;
  AlignedBuffer h_, gate_, up_;  // [tokens, n_embd | n_ff | n_ff]
};

}  // namespace spillway::engine
