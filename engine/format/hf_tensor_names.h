// Hugging Face tensor names -> GGUF tensor names, for the llama-family layout
// (llama, qwen2, qwen3):
//   model.embed_tokens.weight                     -> token_embd.weight
//   model.norm.weight                             -> output_norm.weight
//   lm_head.weight                                -> output.weight
//   model.layers.N.input_layernorm.weight         -> blk.N.attn_norm.weight
//   model.layers.N.post_attention_layernorm.weight -> blk.N.ffn_norm.weight
//   model.layers.N.self_attn.{q,k,v}_proj.{weight,bias} -> blk.N.attn_{q,k,v}.{weight,bias}
//   model.layers.N.self_attn.o_proj.{weight,bias} -> blk.N.attn_output.{weight,bias}
//   model.layers.N.self_attn.{q,k}_norm.weight    -> blk.N.attn_{q,k}_norm.weight
//   model.layers.N.mlp.{gate,up,down}_proj.weight -> blk.N.ffn_{gate,up,down}.weight
//   model.layers.N.mlp.gate.weight / experts.E.* / shared_expert.* / shared_expert_gate.weight
//                                                 -> blk.N.ffn_gate_inp / *_exps.E / *_shexp / ffn_gate_inp_shexp
//   model.layers.N.linear_attn.{in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, in_proj_qkvz,
//     in_proj_ba, conv1d, dt_bias, A_log, norm, out_proj} -> blk.N.{attn_qkv, attn_gate,
//     ssm_beta, ssm_alpha, ssm_in, ssm_ba, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_norm, ssm_out}
//   model.language_model.X is read as model.X (image-text checkpoints; the vision tower and
//   the MTP head "mtp.*" map to nothing).
#pragma once

#include <string>
#include <string_view>

namespace spillway::engine {

// The GGUF name, or "" for a tensor the engine does not use (e.g. rotary_emb.inv_freq).
std::string gguf_tensor_name(std::string_view hf_name);

// The other way, for error messages: the HF name ("model.layers.N. ..." form) a GGUF name
// comes from, or "" when none does. blk.N.post_attention_norm.weight (the hybrids' pre-FFN
// norm) is post_attention_layernorm; experts are "mlp.experts.E.*".
std::string hf_tensor_name(std::string_view gguf_name);

}  // namespace spillway::engine
