#include "engine/model/arch/hybrid_block.h"

#include <fmt/format.h>

namespace spillway::engine {

namespace {

Result<int32_t> read_positive(const ModelSource& src, const std::string& key, int64_t def) {
  auto v = src.metadata().get_int(key);
  if (!v) return v.error();
  if (!v->has_value()) {
    if (def < 0) return Error{fmt::format("{}: missing metadata key '{}'", src.path(), key)};
    return static_cast<int32_t>(def);
  }
  if (**v <= 0 || **v > (int64_t{1} << 24)) {
    return Error{fmt::format("{}: metadata '{}' = {} is out of range", src.path(), key, **v)};
  }
  return static_cast<int32_t>(**v);
}

}  // namespace

Status describe_hybrid_layers(const ModelSource& src, ModelConfig& c, DeltaNetHeadMap head_map) {
  const std::string a = c.architecture + ".";
  int32_t conv_kernel = 0, state = 0, key_heads = 0, value_heads = 0, inner = 0, interval = 0;
  ASSIGN_OR_RETURN(conv_kernel, read_positive(src, a + "ssm.conv_kernel", -1));
  ASSIGN_OR_RETURN(state, read_positive(src, a + "ssm.state_size", -1));
  ASSIGN_OR_RETURN(key_heads, read_positive(src, a + "ssm.group_count", -1));
  ASSIGN_OR_RETURN(value_heads, read_positive(src, a + "ssm.time_step_rank", -1));
  ASSIGN_OR_RETURN(inner, read_positive(src, a + "ssm.inner_size", int64_t{value_heads} * state));
  ASSIGN_OR_RETURN(interval, read_positive(src, a + "full_attention_interval", 4));
  // A Hugging Face folder keeps each key head's value heads together (format/hf_config.h).
  auto grouped = src.metadata().get_bool("spillway.ssm_value_heads_grouped");
  if (!grouped) return grouped.error();
  if (grouped->value_or(false)) head_map = DeltaNetHeadMap::Grouped;
  if (value_heads % key_heads != 0) {
    return Error{fmt::format("{}: ssm.time_step_rank {} is not a multiple of ssm.group_count {}", src.path(),
                             value_heads, key_heads)};
  }
  if (inner != value_heads * state) {
    return Error{fmt::format("{}: ssm.inner_size {} != ssm.time_step_rank {} * ssm.state_size {}", src.path(),
                             inner, value_heads, state)};
  }
  if (conv_kernel > 64) {
    return Error{fmt::format("{}: ssm.conv_kernel {} is not supported (at most 64)", src.path(), conv_kernel)};
  }
  auto nextn = src.metadata().get_int(a + "nextn_predict_layers");
  if (!nextn) return nextn.error();
  const int64_t mtp = nextn->value_or(0);
  if (mtp < 0 || mtp >= c.n_layers) {
    return Error{fmt::format("{}: nextn_predict_layers {} does not fit block_count {}", src.path(), mtp,
                             c.n_layers)};
  }
  c.n_layers -= static_cast<int32_t>(mtp);  // the MTP blocks are not part of the main pass

  auto recurrent = src.metadata().get_array(a + "attention.recurrent_layers");
  if (!recurrent) return recurrent.error();
  const MetaArray* rec = *recurrent;
  if (rec && (rec->kind != MetaArray::Kind::Bool && rec->kind != MetaArray::Kind::Int)) {
    return Error{fmt::format("{}: metadata '{}attention.recurrent_layers' is not a bool array", src.path(), a)};
  }
  if (rec && static_cast<int64_t>(rec->size()) < c.n_layers) {
    return Error{fmt::format("{}: metadata '{}attention.recurrent_layers' has {} entries for {} layers",
                             src.path(), a, rec->size(), c.n_layers)};
  }

  c.layers.assign(c.n_layers, LayerSpec{});
  int32_t n_attention = 0, n_recurrent = 0;
  for (int32_t i = 0; i < c.n_layers; ++i) {
    LayerSpec& s = c.layers[i];
    const bool is_recurrent =
        rec ? (rec->kind == MetaArray::Kind::Bool ? rec->bools[i] != 0 : rec->ints[i] != 0)
            : (i + 1) % interval != 0;
    s.ffn = FfnKind::Dense;
    s.n_ff = c.n_ff;
    if (is_recurrent) {
      s.mixer = MixerKind::GatedDeltaNet;
      s.ssm_state = state;
      s.ssm_key_heads = key_heads;
      s.ssm_value_heads = value_heads;
      s.ssm_conv_kernel = conv_kernel;
      s.ssm_head_map = head_map;
      s.recurrent_ordinal = n_recurrent++;
    } else {
      s.mixer = MixerKind::Attention;
      s.attention = AttentionKind::Causal;
      s.attention_gate = true;
      s.n_heads = c.n_heads;
      s.n_kv_heads = c.n_kv_heads;
      s.head_dim = c.head_dim;
      s.attention_ordinal = n_attention++;
    }
  }
  return {};
}

Status bind_hybrid_mixer(WeightBinder& b, const ModelConfig& c, int32_t layer, BlockWeights& block) {
  const LayerSpec& s = c.layers[layer];
  const std::string p = fmt::format("blk.{}.", layer);
  ASSIGN_OR_RETURN(block.mixer_norm, b.vector_f32(p + "attn_norm.weight", c.n_embd, true));
  ASSIGN_OR_RETURN(block.ffn_norm, b.vector_f32(p + "post_attention_norm.weight", c.n_embd, true));
  if (s.mixer == MixerKind::Attention) {
    AttentionWeights a;
    ASSIGN_OR_RETURN(a.wq, b.matrix(p + "attn_q.weight", 2 * s.q_dim(), c.n_embd));
    ASSIGN_OR_RETURN(a.wk, b.matrix(p + "attn_k.weight", s.kv_dim(), c.n_embd));
    ASSIGN_OR_RETURN(a.wv, b.matrix(p + "attn_v.weight", s.kv_dim(), c.n_embd));
    ASSIGN_OR_RETURN(a.wo, b.matrix(p + "attn_output.weight", c.n_embd, s.q_dim()));
    ASSIGN_OR_RETURN(a.q_norm, b.vector_f32(p + "attn_q_norm.weight", s.head_dim, true));
    ASSIGN_OR_RETURN(a.k_norm, b.vector_f32(p + "attn_k_norm.weight", s.head_dim, true));
    block.mixer = a;
    return {};
  }
  const int32_t conv_dim = s.ssm_conv_dim(), value_dim = s.ssm_value_dim(), nv = s.ssm_value_heads;
  DeltaNetWeights d;
  auto source_format = b.source().metadata().get_string("spillway.source_format");
  if (!source_format) return source_format.error();
  if (b.has(p + "ssm_in.weight") && source_format->value_or("") == "huggingface") {
    // qwen3_next's in_proj_qkvz, grouped per key head (block_weights.h); the mixer splits it.
    if (s.ssm_head_map != DeltaNetHeadMap::Grouped) {
      return Error{fmt::format("{}: tensor '{}ssm_in.weight' needs grouped value heads", b.source().path(), p)};
    }
    d.fused_qkvz = true;
    ASSIGN_OR_RETURN(d.w_qkvz, b.matrix(p + "ssm_in.weight", int64_t{conv_dim} + value_dim, c.n_embd));
  } else if (b.has(p + "ssm_in.weight")) {
    return Error{fmt::format("{}: tensor '{}ssm_in.weight' (the legacy fused qkvz layout) is not supported; "
                             "reconvert the model with attn_qkv + attn_gate",
                             b.source().path(), p)};
  } else {
    ASSIGN_OR_RETURN(d.w_qkv, b.matrix(p + "attn_qkv.weight", conv_dim, c.n_embd));
    ASSIGN_OR_RETURN(d.w_gate, b.matrix(p + "attn_gate.weight", value_dim, c.n_embd));
  }
  if (b.has(p + "ssm_ba.weight")) {
    d.fused_ba = true;
    ASSIGN_OR_RETURN(d.w_ba, b.matrix(p + "ssm_ba.weight", 2 * nv, c.n_embd));
  } else {
    ASSIGN_OR_RETURN(d.w_beta, b.matrix(p + "ssm_beta.weight", nv, c.n_embd));
    ASSIGN_OR_RETURN(d.w_alpha, b.matrix(p + "ssm_alpha.weight", nv, c.n_embd));
  }
  SPILLWAY_TRY(b.require(p + "ssm_conv1d.weight", {s.ssm_conv_kernel, conv_dim}));
  ASSIGN_OR_RETURN(d.conv, b.vector_f32(p + "ssm_conv1d.weight", int64_t{s.ssm_conv_kernel} * conv_dim, true));
  ASSIGN_OR_RETURN(d.dt_bias, b.vector_f32(p + "ssm_dt.bias", nv, true));
  ASSIGN_OR_RETURN(d.a, b.vector_f32(p + "ssm_a", nv, true));
  ASSIGN_OR_RETURN(d.norm, b.vector_f32(p + "ssm_norm.weight", s.ssm_state, true));
  ASSIGN_OR_RETURN(d.w_out, b.matrix(p + "ssm_out.weight", c.n_embd, value_dim));
  block.mixer = d;
  return {};
}

Result<DenseFfnWeights> bind_dense_ffn(WeightBinder& b, const ModelConfig& c, int32_t layer) {
  const LayerSpec& s = c.layers[layer];
  const std::string p = fmt::format("blk.{}.", layer);
  DenseFfnWeights f;
  ASSIGN_OR_RETURN(f.w_gate, b.matrix(p + "ffn_gate.weight", s.n_ff, c.n_embd));
  ASSIGN_OR_RETURN(f.w_up, b.matrix(p + "ffn_up.weight", s.n_ff, c.n_embd));
  ASSIGN_OR_RETURN(f.w_down, b.matrix(p + "ffn_down.weight", c.n_embd, s.n_ff));
  return f;
}

}  // namespace spillway::engine
