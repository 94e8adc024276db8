// Hugging Face model folders: config.json, model.safetensors or sharded
// model-0000N-of-0000M.safetensors with model.safetensors.index.json, tokenizer.json
// (+ tokenizer_config.json). Loaded into a ModelSource under GGUF names (see
// model_source.h): config.json keys become `<arch>.*` metadata, HF tensor names become
// GGUF tensor names, tokenizer.json becomes tokenizer.* metadata, and
// spillway.source_format = "huggingface" is set.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "engine/format/model_source.h"

namespace spillway::engine {

Result<std::unique_ptr<ModelSource>> open_hf_folder(const std::string& dir);

}  // namespace spillway::engine
