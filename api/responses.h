// The response bodies of API.md "Responses": chat.completion, chat.completion.chunk,
// text_completion (whole and streamed), usage, and the model list.
//
// Inputs are plain values the server collected from the engine; logprobs come already
// rendered (api/logprobs.h) so their per-stream state (text offsets) stays with the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tool_calls.h"

namespace spillway::api {

enum class FinishReason { Stop, Length, ToolCalls };
const char* finish_reason_text(FinishReason reason);

// The same for every chunk of one response.
struct ResponseMeta {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// usage.diffusion of a diffusion model's response.
struct DiffusionUsage {
  int64_t forwards = 0;           // canvas forwards
  int64_t committed = 0;          // canvas positions committed (tokens_per_forward = committed / forwards)
  int64_t rows_evaluated = 0;     // canvas rows forwarded
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  std::optional<DiffusionUsage> diffusion = std::nullopt;  // rendered as usage.diffusion when set
};

nlohmann::ordered_json render_usage(const Usage& usage);

struct ChatChoice {
  int32_t index = 0;
  std::string content;               // written as null when empty and there are tool calls
  std::vector<ToolCall> tool_calls;
  FinishReason finish_reason = FinishReason::Stop;
  nlohmann::ordered_json logprobs = nullptr;  // render_chat_logprobs(), or null
};

nlohmann::ordered_json render_chat_completion(const ResponseMeta& meta,
                                              std::span<const ChatChoice> choices,
                                              const Usage& usage);

// One choice's part of a chunk.
struct ChatDelta {
  int32_t index = 0;
  bool first = false;                  // carries role "assistant" (and content "" if none)
  std::optional<std::string> content;  // new text, if any
  std::vector<ToolCall> tool_calls;    // complete calls (each chunk entry has its "index")
  int32_t first_tool_call_index = 0;   // index of tool_calls[0] within the message
  std::optional<FinishReason> finish_reason;
  nlohmann::ordered_json logprobs = nullptr;
};

// with_usage_field: stream_options.include_usage was set, so the chunk carries usage:null.
nlohmann::ordered_json render_chat_chunk(const ResponseMeta& meta, std::span<const ChatDelta> deltas,
                                         bool with_usage_field);
// The include_usage chunk: choices [] and the usage.
nlohmann::ordered_json render_chat_usage_chunk(const ResponseMeta& meta, const Usage& usage);

struct CompletionChoice {
  int32_t index = 0;
  std::string text;
  std::optional<FinishReason> finish_reason;  // null in stream chunks before the last
  nlohmann::ordered_json logprobs = nullptr;  // render_completion_logprobs(), or null
};

nlohmann::ordered_json render_completion(const ResponseMeta& meta,
                                         std::span<const CompletionChoice> choices,
                                         const Usage& usage);
nlohmann::ordered_json render_completion_chunk(const ResponseMeta& meta,
                                               std::span<const CompletionChoice> choices,
                                               bool with_usage_field);
nlohmann::ordered_json render_completion_usage_chunk(const ResponseMeta& meta, const Usage& usage);

struct ModelCard {
  std::string id;
  int64_t created = 0;
  std::string owned_by = "spillway";
  int32_t max_model_len = 0;  // extra field, as vLLM
};

nlohmann::ordered_json render_model(const ModelCard& model);
nlohmann::ordered_json render_model_list(std::span<const ModelCard> models);

}  // namespace spillway::api
