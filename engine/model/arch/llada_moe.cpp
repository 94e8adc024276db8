// llada-moe (LLaDA-MoE-7B-A1B): a masked-diffusion model with qwen3moe's shape: per-head QK
// RMSNorm, NeoX (half-split) rope, no biases, bidirectional attention over the canvas, and
// a MoE FFN in every layer: softmax router over all experts, top expert_used_count, weights
// NOT renormalised (llama.cpp's norm_w = false), no shared expert (model/arch/moe_block.h).
// Files write diffusion.shift_logits = false.
#include "engine/model/arch/diffusion_layers.h"
#include "engine/model/arch/moe_block.h"

namespace spillway::engine {

namespace {

Status describe_llada_moe_layers(const ModelSource& source, ModelConfig& c) {
  SPILLWAY_TRY(describe_diffusion_layers(source, c));
  ASSIGN_OR_RETURN(const MoeDims dims, read_moe_dims(source, c.architecture, /*default_renormalize=*/false));
  for (LayerSpec& s : c.layers) set_moe_ffn(s, dims);
  return {};
}

}  // namespace

const Architecture& llada_moe_architecture() {
  static const Architecture arch{
      .name = "llada-moe",
      .traits = {.name = "llada-moe", .qk_norm = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-5f},
      .describe_layers = describe_llada_moe_layers,
      .bind_layer = bind_attention_moe_block,
  };
  return arch;
}

}  // namespace spillway::engine
