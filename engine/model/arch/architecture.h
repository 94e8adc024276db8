// One model family: how its metadata becomes per-layer specs and how its tensors bind to
// BlockWeights. Each family is one file in this folder defining its Architecture; the
// registry (registry.cpp) lists them, keyed by GGUF `general.architecture` (Hugging Face
// `model_type` is mapped to the same names by format/hf_config.cpp).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "engine/format/model_source.h"
#include "engine/model/block_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_binder.h"

namespace spillway::engine {

struct Architecture {
  std::string_view name;
  ArchitectureTraits traits;
  // Fills config.layers (one LayerSpec per layer) once read_model_config has read the
  // model-wide hyper-parameters; may read more metadata. Errors name the file and key.
  Status (*describe_layers)(const ModelSource& source, ModelConfig& config) = nullptr;
  // Binds layer `layer`'s weights as its spec says. Errors name the file and tensor.
  Result<BlockWeights> (*bind_layer)(WeightBinder& binder, const ModelConfig& config,
                                     int32_t layer) = nullptr;
};

// nullptr when the architecture is not supported.
const Architecture* find_architecture(std::string_view name);
// "llama, qwen2, qwen3" — for error messages.
std::string supported_architectures();

// The families (one per file).
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();
const Architecture& qwen35_architecture();
const Architecture& qwen35moe_architecture();
const Architecture& qwen3next_architecture();
const Architecture& llada_architecture();
const Architecture& dream_architecture();
const Architecture& llada_moe_architecture();

}  // namespace spillway::engine
