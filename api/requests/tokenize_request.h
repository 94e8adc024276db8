// POST /tokenize and POST /detokenize (vLLM's shapes; llama.cpp's field names accepted).
//
// /tokenize   {"model"?, "prompt": "text", "add_special_tokens"?: true, "return_token_strs"?}
//             or {"model"?, "messages": [...], "add_generation_prompt"?: true,
//                 "add_special_tokens"?: false, "tools"?, "chat_template_kwargs"?}
//             llama.cpp: "content" for "prompt", "add_special", "with_pieces".
//          -> {"count", "max_model_len", "tokens": [...], "token_strs"?: [...]}
// /detokenize {"model"?, "tokens": [...]} -> {"prompt": "text"} (+ "content", llama.cpp's name)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"

namespace spillway::api {

struct TokenizeRequest {
  std::optional<std::string> model;
  std::optional<std::string> prompt;                 // text form
  nlohmann::ordered_json messages = nullptr;         // chat form (template form), or null
  nlohmann::ordered_json tools = nullptr;
  nlohmann::ordered_json chat_template_kwargs = nullptr;
  bool add_generation_prompt = true;
  bool add_special_tokens = true;  // text form default true; chat form default false
  bool return_token_strs = false;
};

struct DetokenizeRequest {
  std::optional<std::string> model;
  std::vector<int32_t> tokens;
};

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body);
ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view body);

nlohmann::ordered_json render_tokenize_response(const std::vector<int32_t>& tokens,
                                                int32_t max_model_len,
                                                const std::vector<std::string>* token_strs);
nlohmann::ordered_json render_detokenize_response(const std::string& text);

}  // namespace spillway::api
