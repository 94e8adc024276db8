#include "engine/model/arch/transformer_block.h"

#include <fmt/format.h>

namespace spillway::engine {

Status describe_transformer_layers(const ModelSource&, ModelConfig& c) {
  c.layers.assign(c.n_layers, LayerSpec{});
  for (int32_t i = 0; i < c.n_layers; ++i) {
    LayerSpec& s = c.layers[i];
    s.mixer = MixerKind::Attention;
    s.attention = AttentionKind::Causal;
    s.ffn = FfnKind::Dense;
    s.n_heads = c.n_heads;
    s.n_kv_heads = c.n_kv_heads;
    s.head_dim = c.head_dim;
    s.attention_ordinal = i;
    s.n_ff = c.n_ff;
  }
  return {};
}

Status bind_attention_mixer(WeightBinder& b, const ModelConfig& c, int32_t layer, BlockWeights& block) {
  const LayerSpec& s = c.layers[layer];
  const std::string p = fmt::format("blk.{}.", layer);
  ASSIGN_OR_RETURN(block.mixer_norm, b.vector_f32(p + "attn_norm.weight", c.n_embd, true));
  AttentionWeights a;
  ASSIGN_OR_RETURN(a.wq, b.matrix(p + "attn_q.weight", s.q_dim(), c.n_embd));
  ASSIGN_OR_RETURN(a.wk, b.matrix(p + "attn_k.weight", s.kv_dim(), c.n_embd));
  ASSIGN_OR_RETURN(a.wv, b.matrix(p + "attn_v.weight", s.kv_dim(), c.n_embd));
  ASSIGN_OR_RETURN(a.wo, b.matrix(p + "attn_output.weight", c.n_embd, s.q_dim()));
  const bool bias = c.traits.qkv_bias;
  ASSIGN_OR_RETURN(a.bq, b.vector_f32(p + "attn_q.bias", s.q_dim(), bias));
  ASSIGN_OR_RETURN(a.bk, b.vector_f32(p + "attn_k.bias", s.kv_dim(), bias));
  ASSIGN_OR_RETURN(a.bv, b.vector_f32(p + "attn_v.bias", s.kv_dim(), bias));
  if (c.traits.qk_norm) {
    ASSIGN_OR_RETURN(a.q_norm, b.vector_f32(p + "attn_q_norm.weight", s.head_dim, true));
    ASSIGN_OR_RETURN(a.k_norm, b.vector_f32(p + "attn_k_norm.weight", s.head_dim, true));
  }
  block.mixer = a;
  return {};
}

Result<BlockWeights> bind_transformer_block(WeightBinder& b, const ModelConfig& c, int32_t layer) {
  const LayerSpec& s = c.layers[layer];
  const std::string p = fmt::format("blk.{}.", layer);
  BlockWeights block;
  SPILLWAY_TRY(bind_attention_mixer(b, c, layer, block));
  ASSIGN_OR_RETURN(block.ffn_norm, b.vector_f32(p + "ffn_norm.weight", c.n_embd, true));
  DenseFfnWeights f;
  ASSIGN_OR_RETURN(f.w_gate, b.matrix(p + "ffn_gate.weight", s.n_ff, c.n_embd));
  ASSIGN_OR_RETURN(f.w_up, b.matrix(p + "ffn_up.weight", s.n_ff, c.n_embd));
  ASSIGN_OR_RETURN(f.w_down, b.matrix(p + "ffn_down.weight", c.n_embd, s.n_ff));
  block.ffn = f;
  return block;
}

}  // namespace spillway::engine
