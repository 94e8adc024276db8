#include "api/requests/chat_messages.h"

#include <fmt/format.h>

#include "api/json_parse.h"
#include "api/requests/json_fields.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

// content: a string, or an array of text parts joined by "\n"; null when allowed.
ApiResult<json> read_content(const json& message, const std::string& param, bool null_allowed) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    if (null_allowed) return json(nullptr);
    return missing_parameter(param);
  }
  if (it->is_string()) return *it;
  if (!it->is_array()) {
    return invalid_type(param, "a string or an array of content parts", json_type_phrase(*it));
  }
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& part = (*it)[i];
    const std::string part_param = indexed(param, i);
    FieldReader r(part, part_param);
    std::optional<std::string> type = r.string("type", true);
    if (!r.ok()) return *r.error();
    std::optional<std::string> piece;
    if (*type == "text") {
      piece = r.string("text", true);
    } else if (*type == "refusal") {
      piece = r.string("refusal", true);
    } else {
      ApiError e = invalid_value(
          r.param("type"),
          fmt::format("Invalid content part type '{}' in '{}': this server accepts only text "
                      "content parts ({{\"type\": \"text\", \"text\": ...}}); images, audio and "
                      "files are not supported.",
                      *type, part_param));
      e.code = "unsupported_value";
      return e;
    }
    if (!r.ok()) return *r.error();
    if (i > 0) text += '\n';
    text += *piece;
  }
  return json(std::move(text));
}

ApiResult<json> read_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) return invalid_type(param, "an array", json_type_phrase(calls));
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string call_param = indexed(param, i);
    FieldReader r(calls[i], call_param);
    std::optional<std::string> id = r.string("id");
    std::optional<std::string> type = r.string("type");
    const json* function = r.object("function", true);
    if (!r.ok()) return *r.error();
    if (type && *type != "function") {
      return invalid_value(r.param("type"),
                           fmt::format("Invalid value for '{}': '{}'. Supported values are: "
                                       "'function'.",
                                       r.param("type"), *type));
    }
    FieldReader f(*function, r.param("function"));
    std::optional<std::string> name = f.string("name", true);
    if (!f.ok()) return *f.error();
    json arguments = json::object();
    if (const json* args = f.find("arguments")) {
      if (args->is_string()) {
        const std::string& text = args->get_ref<const std::string&>();
        if (!text.empty()) {
          std::optional<json> parsed = parse_json_linear(text);
          if (parsed) arguments = std::move(*parsed);
          if (!parsed) {
            return invalid_value(f.param("arguments"),
                                 fmt::format("Invalid '{}': the arguments must be a JSON "
                                             "string of an object; '{}' is not valid JSON.",
                                             f.param("arguments"), text));
          }
        }
      } else if (args->is_object()) {
        arguments = *args;  // some clients send the object itself
      } else {
        return invalid_type(f.param("arguments"), "a string", json_type_phrase(*args));
      }
    }
    json call;
    if (id) call["id"] = *id;
    call["type"] = "function";
    call["function"] = {{"name", *name}, {"arguments", std::move(arguments)}};
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace

ApiResult<json> read_chat_messages(const json& messages, std::string_view param_name) {
  const std::string param(param_name);
  if (!messages.is_array()) return invalid_type(param, "an array", json_type_phrase(messages));
  if (messages.empty()) {
    ApiError e = invalid_value(param, fmt::format("Invalid '{}': empty array. Expected an array "
                                                  "with minimum length 1, but got an empty "
                                                  "array instead.",
                                                  param));
    e.code = "empty_array";
    return e;
  }
  if (messages.size() > kMaxChatMessages) {
    ApiError e = invalid_value(param, fmt::format("Invalid '{}': array too long. Expected an array with maximum "
                                                  "length {}, but got an array with length {} instead.",
                                                  param, kMaxChatMessages, messages.size()));
    e.code = "array_above_max_length";
    return e;
  }
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string mparam = indexed(param, i);
    FieldReader r(messages[i], mparam);
    std::optional<std::string> role = r.string("role", true);
    std::optional<std::string> name = r.string("name");
    if (!r.ok()) return *r.error();
    const bool assistant = *role == "assistant";
    if (*role != "system" && *role != "developer" && *role != "user" && !assistant &&
        *role != "tool") {
      return invalid_value(r.param("role"),
                           fmt::format("Invalid value: '{}'. Supported values are: 'system', "
                                       "'developer', 'user', 'assistant' and 'tool'.",
                                       *role));
    }
    json message;
    message["role"] = *role == "developer" ? std::string("system") : *role;
    json tool_calls = nullptr;
    if (assistant) {
      if (const json* calls = r.find("tool_calls")) {
        ApiResult<json> parsed = read_tool_calls(*calls, r.param("tool_calls"));
        if (!parsed) return parsed.error();
        if (!parsed->empty()) tool_calls = std::move(*parsed);
      }
    }
    ApiResult<json> content = read_content(messages[i], r.param("content"), assistant);
    if (!content) return content.error();
    if (assistant && content->is_null() && tool_calls.is_null()) {
      return missing_parameter(r.param("content"));
    }
    message["content"] = std::move(*content);
    if (name) message["name"] = *name;
    if (!tool_calls.is_null()) message["tool_calls"] = std::move(tool_calls);
    if (*role == "tool") {
      std::optional<std::string> id = r.string("tool_call_id");
      if (!r.ok()) return *r.error();
      if (id) message["tool_call_id"] = *id;
    }
    if (assistant) {
      // Reasoning models' templates (Qwen3, DeepSeek-R1) read it back.
      std::optional<std::string> reasoning = r.string("reasoning_content");
      if (!r.ok()) return *r.error();
      if (reasoning) message["reasoning_content"] = *reasoning;
    }
    out.push_back(std::move(message));
  }
  return out;
}

ApiResult<ChatTools> read_chat_tools(const json& tools, std::string_view param_name) {
  const std::string param(param_name);
  ChatTools out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return invalid_type(param, "an array", json_type_phrase(tools));
  for (size_t i = 0; i < tools.size(); ++i) {
    FieldReader r(tools[i], indexed(param, i));
    std::optional<std::string> type = r.string("type", true);
    const json* function = r.object("function", true);
    if (!r.ok()) return *r.error();
    if (*type != "function") {
      return invalid_value(r.param("type"),
                           fmt::format("Invalid value: '{}'. Supported values are: 'function'.",
                                       *type));
    }
    FieldReader f(*function, r.param("function"));
    std::optional<std::string> name = f.string("name", true);
    f.string("description");
    f.object("parameters");
    if (!f.ok()) return *f.error();
    if (name->empty()) {
      return invalid_value(f.param("name"), fmt::format("Invalid '{}': empty string.",
                                                        f.param("name")));
    }
    out.names.push_back(*name);
  }
  if (!tools.empty()) out.tools = tools;
  return out;
}

}  // namespace spillway::api
