// llada (LLaDA): a llama-shaped masked-diffusion model: RMSNorm, SwiGLU, no biases, GGUF q/k
// permuted to interleaved (NORM) rope pairs over the whole head as for llama, and
// bidirectional attention over the canvas. Files write diffusion.shift_logits = false.
#include "engine/model/arch/diffusion_layers.h"
#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

const Architecture& llada_architecture() {
  static const Architecture arch{
      .name = "llada",
      .traits = {.name = "llada", .gguf_rope = kernels::RopeStyle::Interleaved, .default_rms_eps = 1e-5f},
      .describe_layers = describe_diffusion_layers,
      .bind_layer = bind_transformer_block,
  };
  return arch;
}

}  // namespace spillway::engine
