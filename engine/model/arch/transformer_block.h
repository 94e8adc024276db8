// The classic pre-norm decoder block that llama, qwen2 and qwen3 share: causal softmax
// attention (optional QKV bias, optional per-head QK RMSNorm) and a SwiGLU MLP, with the
// GGUF tensor names blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
// ffn_gate, ffn_up, ffn_down}.
#pragma once

#include "engine/model/arch/architecture.h"

namespace spillway::engine {

// Every layer: causal attention with the model-wide heads, dense FFN of n_ff.
Status describe_transformer_layers(const ModelSource& source, ModelConfig& config);
// Binds layer `layer`'s mixer half of the block above into `block`: attn_norm and the
// attention weights, with bias and QK norm as config.traits says (qwen3moe and llada-moe
// share it with a MoE FFN, model/arch/moe_block.h).
Status bind_attention_mixer(WeightBinder& binder, const ModelConfig& config, int32_t layer,
                            BlockWeights& block);
// Binds layer `layer` as the block above, with bias and QK norm as config.traits says.
Result<BlockWeights> bind_transformer_block(WeightBinder& binder, const ModelConfig& config,
                                            int32_t layer);

}  // namespace spillway::engine
