// qwen35moe (Qwen3.5-MoE) and qwen3next (Qwen3-Next): the hybrid stack of hybrid_block.h
// with the MoE FFN of moe_block.h (softmax router over all experts, top-k renormalised, plus
// a sigmoid-gated shared expert). They differ in the delta net only: qwen35moe stores value
// heads tiled over the key heads (h % nk) with separate ssm_beta / ssm_alpha; qwen3next keeps
// them grouped (h / (nv / nk)) with one fused ssm_ba. qwen3next has plain NeoX rope (no
// rope.dimension_sections); for text both are NeoX over rope.dimension_count dims.
#include "engine/model/arch/hybrid_block.h"
#include "engine/model/arch/moe_block.h"

namespace spillway::engine {

namespace {

template <DeltaNetHeadMap kMap>
Status describe_hybrid_moe(const ModelSource& source, ModelConfig& config) {
  SPILLWAY_TRY(describe_hybrid_layers(source, config, kMap));
  ASSIGN_OR_RETURN(MoeDims dims, read_moe_dims(source, config.architecture, /*default_renormalize=*/true));
  for (LayerSpec& s : config.layers) set_moe_ffn(s, dims);
  return {};
}

Result<BlockWeights> bind_hybrid_moe(WeightBinder& binder, const ModelConfig& config, int32_t layer) {
  BlockWeights block;
  SPILLWAY_TRY(bind_hybrid_mixer(binder, config, layer, block));
  ASSIGN_OR_RETURN(MoeFfnWeights ffn,
                   bind_moe_ffn(binder, config, config.layers[layer], "blk." + std::to_string(layer) + "."));
  block.ffn = std::move(ffn);
  return block;
}

}  // namespace

const Architecture& qwen35moe_architecture() {
  static const Architecture arch{
      .name = "qwen35moe",
      .traits = {.name = "qwen35moe", .qk_norm = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_hybrid_moe<DeltaNetHeadMap::Tiled>,
      .bind_layer = bind_hybrid_moe,
  };
  return arch;
}

const Architecture& qwen3next_architecture() {
  static const Architecture arch{
      .name = "qwen3next",
      .traits = {.name = "qwen3next", .qk_norm = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_hybrid_moe<DeltaNetHeadMap::Grouped>,
      .bind_layer = bind_hybrid_moe,
  };
  return arch;
}

}  // namespace spillway::engine
