#include "engine/format/hf_tensor_names.h"

#include <string>

namespace spillway::engine {

namespace {

struct NamePair {
  std::string_view hf;
  std::string_view gguf;
};

constexpr NamePair kGlobal[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// Suffixes after "model.layers.N." -> after "blk.N.".
constexpr NamePair kPerLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},  // MoE router (qwen3_moe)
    // Hybrids (qwen3_next, qwen3_5): the gated delta net and the shared expert. The folder
    // loader reshapes conv1d and marks A_log / the norms for their value transforms.
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"linear_attn.in_proj_qkvz.weight", "ssm_in.weight"},  // qwen3_next: q|k|v|z per key head
    {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},    // qwen3_next: b|a per key head
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
};

// MoE experts: "mlp.experts.E.{gate,up,down}_proj.weight" -> "ffn_{gate,up,down}_exps.E.weight"
// (one 2-D tensor per expert; GGUF files stack them into one 3-D tensor instead).
constexpr std::string_view kExpertPrefix = "mlp.experts.";
constexpr NamePair kExpertParts[] = {
    {"gate_proj.weight", "ffn_gate_exps"},
    {"up_proj.weight", "ffn_up_exps"},
    {"down_proj.weight", "ffn_down_exps"},
};

constexpr std::string_view kLayerPrefix = "model.layers.";
// Image-text checkpoints (qwen3_5) keep the language model under model.language_model.
constexpr std::string_view kLanguageModelPrefix = "model.language_model.";
constexpr size_t kMaxLayerDigits = 6;

}  // namespace

std::string gguf_tensor_name(std::string_view hf_name) {
  std::string unwrapped;
  if (hf_name.starts_with(kLanguageModelPrefix)) {
    unwrapped = "model." + std::string(hf_name.substr(kLanguageModelPrefix.size()));
    hf_name = unwrapped;
  }
  for (const NamePair& p : kGlobal) {
    if (hf_name == p.hf) return std::string(p.gguf);
  }
  if (!hf_name.starts_with(kLayerPrefix)) return "";
  std::string_view rest = hf_name.substr(kLayerPrefix.size());
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  // A canonical decimal layer index: no leading zeros, bounded length.
  if (digits == 0 || digits > kMaxLayerDigits || (digits > 1 && rest[0] == '0') ||
      digits == rest.size() || rest[digits] != '.') {
    return "";
  }
  const std::string_view layer = rest.substr(0, digits);
  const std::string_view suffix = rest.substr(digits + 1);
  for (const NamePair& p : kPerLayer) {
    if (suffix == p.hf) {
      std::string out = "blk.";
      out += layer;
      out += '.';
      out += p.gguf;
      return out;
    }
  }
  if (suffix.starts_with(kExpertPrefix)) {
    const std::string_view e = suffix.substr(kExpertPrefix.size());
    size_t n = 0;
    while (n < e.size() && e[n] >= '0' && e[n] <= '9') ++n;
    if (n == 0 || n > kMaxLayerDigits || (n > 1 && e[0] == '0') || n == e.size() || e[n] != '.') return "";
    for (const NamePair& p : kExpertParts) {
      if (e.substr(n + 1) == p.hf) {
        return "blk." + std::string(layer) + "." + std::string(p.gguf) + "." + std::string(e.substr(0, n)) + ".weight";
      }
    }
  }
  return "";
}

std::string hf_tensor_name(std::string_view gguf_name) {
  for (const NamePair& p : kGlobal) {
    if (gguf_name == p.gguf) return std::string(p.hf);
  }
  constexpr std::string_view kBlk = "blk.";
  if (!gguf_name.starts_with(kBlk)) return "";
  const std::string_view rest = gguf_name.substr(kBlk.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return "";
  const std::string layer(rest.substr(0, dot));
  const std::string_view suffix = rest.substr(dot + 1);
  const std::string prefix = std::string(kLayerPrefix) + layer + ".";
  if (suffix == "post_attention_norm.weight") return prefix + "post_attention_layernorm.weight";
  for (const NamePair& p : kPerLayer) {
    if (suffix == p.gguf) return prefix + std::string(p.hf);
  }
  for (const NamePair& p : kExpertParts) {  // ffn_gate_exps.E.weight
    if (suffix.starts_with(p.gguf) && suffix.size() > p.gguf.size() + 1 && suffix[p.gguf.size()] == '.' &&
        suffix.ends_with(".weight")) {
      const std::string_view e = suffix.substr(p.gguf.size() + 1, suffix.size() - p.gguf.size() - 1 - 7);
      return prefix + std::string(kExpertPrefix) + std::string(e) + "." + std::string(p.hf);
    }
  }
  return "";
}

}  // namespace spillway::engine
