// qwen35 (Qwen3.5, dense): the hybrid stack of hybrid_block.h (gated delta nets with value
// heads tiled over the key heads, gated attention every full_attention_interval-th layer) and
// a SwiGLU FFN. The file declares IMROPE sections; for text they reduce to NeoX rope over
// rope.dimension_count dims (GGUF norm weights already include the +1, ssm_norm aside).
#include "engine/model/arch/hybrid_block.h"

namespace spillway::engine {

namespace {

Status describe_qwen35(const ModelSource& source, ModelConfig& config) {
  return describe_hybrid_layers(source, config, DeltaNetHeadMap::Tiled);
}

Result<BlockWeights> bind_qwen35(WeightBinder& binder, const ModelConfig& config, int32_t layer) {
  BlockWeights block;
  SPILLWAY_TRY(bind_hybrid_mixer(binder, config, layer, block));
  ASSIGN_OR_RETURN(DenseFfnWeights ffn, bind_dense_ffn(binder, config, layer));
  block.ffn = ffn;
  return block;
}

}  // namespace

const Architecture& qwen35_architecture() {
  static const Architecture arch{
      .name = "qwen35",
      .traits = {.name = "qwen35", .qk_norm = true, .gguf_rope = kernels::RopeStyle::HalfSplit,
                 .default_rms_eps = 1e-6f},
      .describe_layers = describe_qwen35,
      .bind_layer = bind_qwen35,
  };
  return arch;
}

}  // namespace spillway::engine
