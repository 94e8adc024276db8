// The sampling and stopping fields /v1/chat/completions and /v1/completions share
// (OpenAI's plus vLLM's extensions), read and range-checked. Values are the wire's; the
// server maps them onto engine parameters and checks what needs the model (token ids
// against the vocabulary).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/requests/diffusion_fields.h"
#include "api/requests/moe_fields.h"
#include "api/requests/json_fields.h"

namespace spillway::api {

struct SamplingFields {
  double temperature = 1.0;        // 0..2; 0 = greedy
  double top_p = 1.0;              // 0..1
  int32_t top_k = 0;               // 0 = off (vLLM's -1 is read as 0)
  double min_p = 0.0;              // 0..1
  double repetition_penalty = 1.0; // (0, 2]
  double presence_penalty = 0.0;   // -2..2
  double frequency_penalty = 0.0;  // -2..2
  std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> -100..100
  std::optional<int64_t> seed;
  std::vector<std::string> stop;        // up to 4, non-empty strings
  std::vector<int32_t> stop_token_ids;  // vLLM
  std::optional<int32_t> max_tokens;    // >= 1; max_completion_tokens wins over max_tokens
  int32_t min_tokens = 0;               // vLLM; <= max_tokens
  bool ignore_eos = false;              // vLLM
  std::optional<bool> skip_special_tokens;  // vLLM; default true
  int32_t n = 1;                        // 1..128
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  std::optional<std::string> user;
  DiffusionFields diffusion;            // diffusion models (diffusion_fields.h)
  MoeFields moe;                        // MoE models: MoBiLE override (moe_fields.h)
};

inline constexpr int32_t kMaxStopStrings = 4;
inline constexpr int32_t kMaxChoices = 128;
inline constexpr int32_t kMaxTopLogprobs = 20;

// Reads the shared fields from the request body. Chat reads max_completion_tokens and the
// deprecated max_tokens; completions only max_tokens.
void read_sampling_fields(FieldReader& body, SamplingFields& out, bool chat);

}  // namespace spillway::api
