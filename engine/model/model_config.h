// Hyperparameters of a decoder-only model, read from (GGUF-named) metadata: the model-wide
// ones, and one LayerSpec per layer that the model's architecture file (model/arch/)
// declares. Architectures are keyed by general.architecture (GGUF) / model_type (HF).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/format/model_source.h"
#include "engine/model/layer_spec.h"
#include "kernels/kernels.h"

namespace spillway::engine {

struct ArchitectureTraits {
  std::string_view name;
  bool qkv_bias = false;        // qwen2
  bool qk_norm = false;         // qwen3: RMSNorm over each head of q and k before rope
  kernels::RopeStyle gguf_rope = kernels::RopeStyle::Interleaved;  // rope layout of GGUF files
  float default_rms_eps = 1e-5f;
};

struct ModelConfig {
  std::string architecture;
  ArchitectureTraits traits;
  int32_t n_layers = 0;
  int32_t n_embd = 0;          // d_model
  // Model-wide defaults; each layer's own dims are in `layers`.
  int32_t n_ff = 0;            // MLP hidden size
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;        // key/value length per head
  int32_t n_vocab = 0;         // rows of token_embd
  int32_t n_ctx_train = 0;     // context length the model was trained with
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions multiplied by this
  int32_t rope_dim = 0;          // dims rotated per head (== head_dim unless partial)
  kernels::RopeStyle rope_style = kernels::RopeStyle::Interleaved;
  // Per-frequency divisors (rope_dim / 2 values) for llama3-style scaling; empty = none.
  std::vector<float> rope_freq_factors;

  std::vector<LayerSpec> layers;  // [n_layers], from the architecture file

  // Masked diffusion models (llada, dream; model/arch/diffusion_layers.h): the mask token
  // (tokenizer.ggml.mask_token_id; -1 for AR models) and diffusion.shift_logits (true: the
  // prediction for canvas position p is logits row p - 1, row 0 for p = 0).
  int32_t mask_token_id = -1;
  bool shift_logits = false;
  // Whether the model denoises canvases (its attention layers are bidirectional).
  bool is_diffusion() const;

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  // Layers whose mixer is attention: the layers of the KV cache.
  int32_t n_attention_layers() const;
};

// Reads and checks the hyperparameters and the layer specs. n_vocab is filled by the caller
// (from the embedding tensor). Errors name the model path and the key.
Result<ModelConfig> read_model_config(const ModelSource& source);

// llama3 rope scaling: the rope_dim/2 frequency divisors llama.cpp stores as rope_freqs.
std::vector<float> llama3_rope_freq_factors(int32_t rope_dim, float freq_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int32_t original_context_length);

}  // namespace spillway::engine
