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
#pragma once

#include <string>
#include <string_view>

namespace spillway::engine {

// The GGUF name, or "" for a tensor the engine does not use (e.g. rotary_emb.inv_freq).
std::string gguf_tensor_name(std::string_view hf_name);

}  // namespace spillway::engine
