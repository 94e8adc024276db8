// The layer description masked-diffusion families (llada, dream) share: the classic
// transformer block with bidirectional attention, plus the diffusion keys of the file
// (tokenizer.ggml.mask_token_id, required; diffusion.shift_logits, absent => true as
// llama-diffusion-cli assumes) read into ModelConfig.
#pragma once

#include "engine/model/arch/architecture.h"

namespace spillway::engine {

// describe_transformer_layers with AttentionKind::Bidirectional on every layer, and
// config.mask_token_id / config.shift_logits from the metadata. Errors name file and key.
Status describe_diffusion_layers(const ModelSource& source, ModelConfig& config);

}  // namespace spillway::engine
