// Token log-probabilities in OpenAI's two wire formats.
//
// Chat:        {"content":[{"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]}],
//               "refusal":null}
// Completions: {"tokens":[..],"token_logprobs":[..],"top_logprobs":[{token:logprob,..}],
//               "text_offset":[..]}
// A token's text is its bytes, which may be a partial UTF-8 sequence: "token" carries it
// with invalid bytes replaced by U+FFFD, "bytes" the exact values. Logprobs are natural
// logs; -infinity is written as -9999.0 (as OpenAI).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spillway::api {

struct TokenPiece {
  std::string bytes;     // what the token stands for
  float logprob = 0.0f;
};

struct TokenLogprobs {
  TokenPiece chosen;
  std::vector<TokenPiece> top;  // best first
};

nlohmann::ordered_json render_chat_logprobs(std::span<const TokenLogprobs> tokens);

// text_offset: in: the character offset of the first token in the choice's text; out: the
// offset after the last (for the next chunk of a stream).
nlohmann::ordered_json render_completion_logprobs(std::span<const TokenLogprobs> tokens,
                                                  size_t& text_offset);

}  // namespace spillway::api
