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
};

constexpr std::string_view kLayerPrefix = "model.layers.";
constexpr size_t kMaxLayerDigits = 6;

}  // namespace

std::string gguf_tensor_name(std::string_view hf_name) {
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
  return "";
}

}  // namespace spillway::engine
