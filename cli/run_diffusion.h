// `spillway run` on a masked-diffusion model (llada, dream): the prompt + max_tokens masks
// as one canvas, denoised by engine/diffusion's reference sampler; prints the canvas text
// (or one JSON object with --json) when it is done.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"

namespace spillway::cli {

struct DiffusionRunOptions {
  int32_t max_tokens = 128;       // canvas positions after the prompt
  int32_t steps = 0;              // 0: max_tokens (one token per step)
  int32_t block_length = 0;       // > 0: block schedule; 0: timestep schedule over the canvas
  float eps = 1e-3f;
  std::string algorithm = "confidence";
  float alg_temp = 0.0f;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  std::optional<uint64_t> seed;   // default 42 (llama-diffusion-cli's)
  bool json = false;
};

// Returns the process exit code (1 on a model error, 2 on bad options; messages on stderr).
int run_diffusion(const engine::Model& model, const engine::Tokenizer& tokenizer,
                  const std::vector<int32_t>& prompt, kernels::ThreadPool& pool,
                  engine::LayerWeightSource* weights, const DiffusionRunOptions& o);

}  // namespace spillway::cli
