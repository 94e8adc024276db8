// POST /v1/completions: the request body read and validated into plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/requests/sampling_fields.h"
#include "api/requests/structured_fields.h"

namespace spillway::api {

// One prompt: text to tokenize, or token ids as given.
struct CompletionPrompt {
  std::optional<std::string> text;
  std::vector<int32_t> tokens;  // when text is not set; non-empty
};

struct CompletionRequest {
  std::string model;
  std::vector<CompletionPrompt> prompts;  // at least one; prompts.size() * n <= 128
  SamplingFields sampling;                // max_tokens defaults to 16, as OpenAI's
  bool echo = false;
  std::optional<int32_t> logprobs;        // 0..5: alternatives per token
  StructuredOutput structured;            // vLLM / llama-server / response_format fields
};

inline constexpr int32_t kCompletionDefaultMaxTokens = 16;
inline constexpr int32_t kMaxCompletionLogprobs = 5;

// prompt: a string, an array of strings, an array of token ids, or an array of arrays of
// token ids. suffix is a 400 (no fill-in-the-middle support); echo with logprobs is a 400
// (prompt logprobs are not computed yet); best_of other than n is a 400.
ApiResult<CompletionRequest> parse_completion_request(std::string_view body);

}  // namespace spillway::api
