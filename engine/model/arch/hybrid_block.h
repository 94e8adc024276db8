// The hybrid decoder stack of qwen35, qwen35moe and qwen3next: most layers are gated delta
// nets (linear-attention recurrence with a fixed-size state), every full_attention_interval-th
// layer is gated attention ([q | gate] per head, q/k RMSNorm, partial NeoX rope, sigmoid gate
// before attn_output). The FFN of each layer is the caller's (dense or MoE); its norm is
// `post_attention_norm`.
//
// GGUF metadata read (`<arch>.` prefix): ssm.conv_kernel, ssm.state_size, ssm.group_count
// (key heads), ssm.time_step_rank (value heads), ssm.inner_size (= value heads * state),
// full_attention_interval (default 4), attention.recurrent_layers (optional bool array: true =
// delta net; overrides the interval), nextn_predict_layers (MTP blocks at the end of
// block_count, not run). Tensors: blk.N.{attn_qkv, attn_gate, ssm_beta + ssm_alpha |
// ssm_ba, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_norm, ssm_out} for delta nets;
// blk.N.{attn_q (2 * q_dim rows), attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm}
// for attention. A legacy fused `ssm_in` (qkvz) layout in a GGUF is rejected naming the
// tensor; from a Hugging Face folder it is qwen3_next's in_proj_qkvz (block_weights.h), run
// fused. spillway.ssm_value_heads_grouped = true (HF folders) selects the grouped value-head
// map whatever the architecture's default.
#pragma once

#include "engine/model/arch/architecture.h"

namespace spillway::engine {

// Fills config.layers: mixers as above with `head_map`, every FFN dense with n_ff (an MoE
// architecture overwrites the FFN fields afterwards). May lower config.n_layers (MTP blocks).
Status describe_hybrid_layers(const ModelSource& source, ModelConfig& config, DeltaNetHeadMap head_map);
// Binds layer `layer`'s norms and mixer (block.mixer_norm, block.ffn_norm, block.mixer);
// the caller binds block.ffn.
Status bind_hybrid_mixer(WeightBinder& binder, const ModelConfig& config, int32_t layer, BlockWeights& block);
// A dense SwiGLU FFN blk.N.{ffn_gate, ffn_up, ffn_down} of spec.n_ff.
Result<DenseFfnWeights> bind_dense_ffn(WeightBinder& binder, const ModelConfig& config, int32_t layer);

}  // namespace spillway::engine
