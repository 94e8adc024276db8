// qwen2 (Qwen2, Qwen2.5): the classic block with a bias on q, k and v; NeoX (half-split) rope.
#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

const Architecture& qwen2_architecture() {
  static const Architecture arch{
      .name = "qwen2",
      .traits = {.name = "qwen2", .qkv_bias = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_transformer_layers,
      .bind_layer = bind_transformer_block,
  };
  return arch;
}

}  // namespace spillway::engine
