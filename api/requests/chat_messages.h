// Chat messages: validated and turned into the form chat templates are rendered with
// (what transformers' apply_chat_template receives).
//
// Wire form: roles system, developer, user, assistant, tool; content a string, null, or
// an array of {type:"text", text} parts; assistant tool_calls with function.arguments as a
// JSON string. Template form: content one string (text parts joined by "\n") or null,
// "developer" renamed "system" (templates know only system), tool_calls arguments parsed
// into objects. Errors name the field, e.g. messages[2].content[0].type.
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"

namespace spillway::api {

// Messages in one request. Each is copied into the template form and into the Jinja
// interpreter's values (hundreds of bytes each, even when empty), so the count is bounded
// to keep a request's memory a small multiple of its body; more is a 400
// (array_above_max_length) naming the limit.
inline constexpr size_t kMaxChatMessages = 10000;

// `param` is the name of the messages field ("messages").
ApiResult<nlohmann::ordered_json> read_chat_messages(const nlohmann::ordered_json& messages,
                                                     std::string_view param);

struct ChatTools {
  nlohmann::ordered_json tools = nullptr;  // the tools array as given, or null
  std::vector<std::string> names;          // function names, in order
};

// The `tools` field: an array of {type:"function", function:{name, description?,
// parameters?}}.
ApiResult<ChatTools> read_chat_tools(const nlohmann::ordered_json& tools, std::string_view param);

}  // namespace spillway::api
