// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's attention (per-head QK RMSNorm, NeoX
// rope, no biases) with a MoE FFN in every layer: softmax router over expert_count experts,
// top expert_used_count, weights renormalised, no shared expert (model/arch/moe_block.h).
#include <fmt/format.h>

#include "engine/model/arch/moe_block.h"
#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

namespace {

Status describe_qwen3moe_layers(const ModelSource& source, ModelConfig& c) {
  SPILLWAY_TRY(describe_transformer_layers(source, c));
  ASSIGN_OR_RETURN(const MoeDims dims, read_moe_dims(source, c.architecture, /*default_renormalize=*/true));
  for (LayerSpec& s : c.layers) set_moe_ffn(s, dims);
  return {};
}

}  // namespace

const Architecture& qwen3moe_architecture() {
  static const Architecture arch{
      .name = "qwen3moe",
      .traits = {.name = "qwen3moe", .qk_norm = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_qwen3moe_layers,
      .bind_layer = bind_attention_moe_block,
  };
  return arch;
}

}  // namespace spillway::engine
