// Binding a mixture-of-experts FFN (model/block_weights.h MoeFfnWeights) from GGUF names,
// shared by the MoE families: qwen3moe (no shared expert, renormalised), qwen35moe /
// qwen3next (sigmoid-gated shared expert, renormalised) and llada-moe (not renormalised).
//
// Metadata (`<arch>.` prefix): expert_count, expert_used_count, expert_feed_forward_length
// (required); expert_shared_feed_forward_length (optional: else the shape of
// blk.0.ffn_up_shexp.weight when that tensor exists, else no shared expert);
// expert_weights_scale (optional float, default 1); expert_weights_norm (optional bool,
// default: the architecture's).
//
// Tensors (`<prefix>` e.g. "blk.3."; GGUF ne order): ffn_gate_inp.weight {n_embd, n_expert};
// ffn_gate_exps.weight + ffn_up_exps.weight {n_embd, n_ff_expert, n_expert} or the fused
// ffn_gate_up_exps.weight {n_embd, 2*n_ff_expert, n_expert} (gate = first half);
// ffn_down_exps.weight {n_ff_expert, n_embd, n_expert}; with a shared expert
// ffn_{gate,up}_shexp.weight {n_embd, n_ff_shared}, ffn_down_shexp.weight {n_ff_shared,
// n_embd} and ffn_gate_inp_shexp.weight {n_embd} (optional: ungated without it).
// Every error names the file and the key or tensor.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "engine/format/model_source.h"
#include "engine/model/arch/architecture.h"
#include "engine/model/block_weights.h"
#include "engine/model/layer_spec.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_binder.h"

namespace spillway::engine {

struct MoeDims {
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;
  int32_t n_ff_shared = 0;
  bool renormalize = true;
  float weights_scale = 1.0f;
};

// Reads the MoE metadata of `arch` (see above); default_renormalize is the architecture's
// rule when expert_weights_norm is absent. Checks 1 <= expert_used_count <= expert_count.
Result<MoeDims> read_moe_dims(const ModelSource& source, std::string_view arch, bool default_renormalize);
// Makes `spec` a MoE FFN layer of these dims.
void set_moe_ffn(LayerSpec& spec, const MoeDims& dims);

// Binds the MoE FFN of a layer whose spec is a MoE FFN, tensors named `prefix` + the names
// above, n_embd from config.
Result<MoeFfnWeights> bind_moe_ffn(WeightBinder& binder, const ModelConfig& config, const LayerSpec& spec,
                                   const std::string& prefix);

// The qwen3moe / llada-moe block: the attention mixer of model/arch/transformer_block.h
// (attn_norm, attn_{q,k,v,output}, QK norm per traits), ffn_norm, and the MoE FFN.
Result<BlockWeights> bind_attention_moe_block(WeightBinder& binder, const ModelConfig& config, int32_t layer);

}  // namespace spillway::engine
