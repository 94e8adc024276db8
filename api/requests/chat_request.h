// POST /v1/chat/completions: the request body read and validated into plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/requests/sampling_fields.h"
#include "api/requests/structured_fields.h"

namespace spillway::api {

// none: no calls; auto: the model decides; required: one or more calls (forced by a
// grammar, finish_reason "tool_calls"); function: exactly one call of tool_choice_function
// (forced, finish_reason "stop" as OpenAI).
enum class ToolChoice { None, Auto, Required, Function };

struct ChatRequest {
  std::string model;
  nlohmann::ordered_json messages;         // template form (api/chat_messages.h)
  nlohmann::ordered_json tools = nullptr;  // the tools array, or null
  std::vector<std::string> tool_names;
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_function;        // ToolChoice::Function: a name in tool_names
  bool parallel_tool_calls = true;         // required: false = exactly one call
  StructuredOutput structured;             // response_format / vLLM / llama-server fields
  SamplingFields sampling;                 // max_tokens unset: up to the context
  bool logprobs = false;
  int32_t top_logprobs = 0;                // 0..20, only with logprobs
  nlohmann::ordered_json chat_template_kwargs = nullptr;  // object or null
  bool add_generation_prompt = true;       // vLLM extension

  // Tool calls are looked for in the output only when tools were given and allowed.
  bool parse_tool_calls() const { return !tool_names.empty() && tool_choice != ToolChoice::None; }
  // The output must be tool calls (a grammar forces them).
  bool forced_tool_calls() const {
    return tool_choice == ToolChoice::Required || tool_choice == ToolChoice::Function;
  }
};

// Parses the raw body. Unknown fields are ignored. tool_choice "required" without tools, or
// naming a function that is not in tools, is a 400 naming tool_choice.
ApiResult<ChatRequest> parse_chat_request(std::string_view body);

// Shared by the request parsers: the body as JSON, or the 400 for malformed JSON.
ApiResult<nlohmann::ordered_json> parse_json_body(std::string_view body);

}  // namespace spillway::api
