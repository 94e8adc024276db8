// What one decoder layer is: its mixer (how positions exchange information) and its FFN
// (what each position computes alone), with the dims of each. An architecture file
// (model/arch/) declares one LayerSpec per layer from the model's metadata; the forward
// (forward/) and the per-sequence state (state/) are driven by these specs alone.
#pragma once

#include <cstdint>

namespace spillway::engine {

enum class MixerKind : uint8_t {
  Attention,      // softmax attention over a paged KV cache (forward/attention_mixer.h)
  GatedDeltaNet,  // linear-attention recurrence with a fixed-size state (hybrid models)
};

enum class AttentionKind : uint8_t {
  Causal,         // position p sees [0, p]
  Bidirectional,  // inside a diffusion canvas every position sees the whole canvas
};

enum class FfnKind : uint8_t {
  Dense,  // SwiGLU MLP (forward/dense_ffn.h)
  Moe,    // routed experts (+ shared expert)
};

struct LayerSpec {
  MixerKind mixer = MixerKind::Attention;
  FfnKind ffn = FfnKind::Dense;
  AttentionKind attention = AttentionKind::Causal;  // attention mixers only

  // Attention dims (attention mixers): query heads, key/value heads, per-head size.
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  // Index of this layer among the model's attention layers (its layer in the KV cache);
  // -1 for other mixers.
  int32_t attention_ordinal = -1;

  int32_t n_ff = 0;  // dense FFN hidden size

  // MoE FFN (FfnKind::Moe; forward/moe_ffn.h): n_expert routed experts of hidden size
  // n_ff_expert, n_expert_used of them per token (top-k of the router's softmax); a shared
  // expert of hidden size n_ff_shared when > 0 (sigmoid-gated). moe_renormalize: the top-k
  // weights are divided by their sum (clamped at 6.1035e-5), as qwen3moe / qwen35moe /
  // qwen3next do; llada-moe does not. Then each weight is multiplied by
  // expert_weights_scale.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_expert = 0;
  int32_t n_ff_shared = 0;
  bool moe_renormalize = true;
  float expert_weights_scale = 1.0f;

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace spillway::engine
