// qwen3 (dense Qwen3): the classic block with RMSNorm over each head of q and k before rope
// (attn_q_norm / attn_k_norm, [head_dim]); NeoX (half-split) rope; no biases.
#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

const Architecture& qwen3_architecture() {
  static const Architecture arch{
      .name = "qwen3",
      .traits = {.name = "qwen3", .qk_norm = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_transformer_layers,
      .bind_layer = bind_transformer_block,
  };
  return arch;
}

}  // namespace spillway::engine
