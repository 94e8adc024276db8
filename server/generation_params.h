// The wire's sampling and stopping fields mapped onto the engine's GenerationParams, with
// the checks that need the model: token ids against the vocabulary, prompt + max_tokens
// against the context (OpenAI's context_length_exceeded).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/requests/sampling_fields.h"
#include "runtime/engine_loop.h"

namespace spillway::server {

struct ModelLimits {
  int32_t n_vocab = 0;
  int32_t max_context = 0;
  bool diffusion = false;  // a diffusion model: the `diffusion` fields apply, logprobs do not
  int32_t moe_experts_used = 0;  // MoE models: the top-k (the `moe` field applies); 0: none
};

struct LogprobRequest {
  bool logprobs = false;     // the chosen tokens' logprobs
  int32_t top_logprobs = 0;  // alternatives per token
};

// prompt_param names the prompt in errors ("messages" or "prompt"). Diffusion fields on an
// autoregressive model are a 400 naming the field; on a diffusion model they become
// GenerationParams::diffusion (the scheduler checks them against the canvas and names the
// field too), max_tokens unset lets the scheduler pick a canvas that fits its step budget.
api::ApiResult<scheduler::GenerationParams> make_generation_params(
    const api::SamplingFields& fields, std::vector<int32_t> prompt, LogprobRequest logprobs,
    bool skip_special_default, const ModelLimits& limits, std::string_view prompt_param);

}  // namespace spillway::server
