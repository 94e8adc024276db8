// llama (and the many families converted as llama: TinyLlama, Mistral, ...): the classic
// block, GGUF q/k permuted to interleaved rope pairs, optional llama3 rope scaling
// (read by read_model_config).
#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

const Architecture& llama_architecture() {
  static const Architecture arch{
      .name = "llama",
      .traits = {.name = "llama", .gguf_rope = kernels::RopeStyle::Interleaved, .default_rms_eps = 1e-5f},
      .describe_layers = describe_transformer_layers,
      .bind_layer = bind_transformer_block,
  };
  return arch;
}

}  // namespace spillway::engine
