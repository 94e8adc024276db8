// Tool calls in a model's output, in the common formats, turned into OpenAI tool_calls:
//   Hermes / Qwen 2.5 / Qwen 3:  <tool_call>{"name": .., "arguments": {..}}</tool_call> (repeated)
//   Mistral:  [TOOL_CALLS][{"name": .., "arguments": {..}}, ..]   or (v11+ tokenizers)
//             [TOOL_CALLS]name[ARGS]{..}  (optionally name[CALL_ID]id[ARGS]{..})
//   Llama 3.x JSON:  {"name": .., "parameters": {..}} (also "arguments"; several separated
//             by ';'; optionally after <|python_tag|>); the name must be one of the tools,
//             so ordinary JSON answers are not mistaken for calls.
// Output that does not parse as a call stays content, unchanged (as vLLM's parsers do).
// Pure functions; ToolCallStreamFilter belongs to one stream.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace spillway::api {

struct ToolCall {
  std::string id;         // "call_..."; assigned by the server
  std::string name;
  std::string arguments;  // JSON text of an object, as OpenAI's function.arguments
};

struct AssistantOutput {
  std::string content;               // the text that is not tool calls
  std::vector<ToolCall> tool_calls;  // empty: no call found
};

AssistantOutput parse_tool_calls(std::string_view text, std::span<const std::string> tool_names);

// Streams content while holding back what may become a tool call: a partial call marker
// at the end of the text, the trailing whitespace before it, and output that starts like a
// Llama JSON call. Once a marker is seen everything after it is held for finish().
class ToolCallStreamFilter {
 public:
  explicit ToolCallStreamFilter(std::vector<std::string> tool_names);
  // Appends generated text; returns the content that can be sent now.
  std::string push(std::string_view text);
  // At the end of the stream: the content not sent yet and the calls. The content pushed
  // and returned overall equals parse_tool_calls(all text).content when calls were found,
  // and all the text otherwise.
  AssistantOutput finish();

 private:
  std::vector<std::string> tool_names_;
  std::string text_;
  size_t emitted_ = 0;
  bool capturing_ = false;
};

// OpenAI's tool_calls array for a message: [{id, type:"function", function:{name, arguments}}].
nlohmann::ordered_json render_tool_calls(std::span<const ToolCall> calls);

}  // namespace spillway::api
