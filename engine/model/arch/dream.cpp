// dream (Dream): a qwen2-shaped masked-diffusion model: q/k/v biases, GQA, NeoX (half-split)
// rope, bidirectional attention over the canvas. diffusion.shift_logits is absent in its
// files, which means true: the prediction for canvas position p is logits row p - 1.
#include "engine/model/arch/diffusion_layers.h"
#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

const Architecture& dream_architecture() {
  static const Architecture arch{
      .name = "dream",
      .traits = {.name = "dream", .qkv_bias = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_diffusion_layers,
      .bind_layer = bind_transformer_block,
  };
  return arch;
}

}  // namespace spillway::engine
