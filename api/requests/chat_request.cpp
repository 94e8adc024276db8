#include "api/requests/chat_request.h"

#include <algorithm>

#include <fmt/format.h>

#include "api/requests/chat_messages.h"
#include "api/json_parse.h"
#include "api/requests/json_fields.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

void read_tool_choice(FieldReader& body, ChatRequest& out) {
  const json* choice = body.find("tool_choice");
  if (!choice || !body.ok()) return;
  if (choice->is_string()) {
    const std::string& s = choice->get_ref<const std::string&>();
    if (s == "none") {
      out.tool_choice = ToolChoice::None;
    } else if (s == "auto") {
      out.tool_choice = ToolChoice::Auto;
    } else if (s == "required") {
      if (out.tool_names.empty()) {
        body.fail(invalid_value("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is "
                                               "'required' but no 'tools' are specified."));
      }
      out.tool_choice = ToolChoice::Required;
    } else {
      body.fail(invalid_value("tool_choice",
                              fmt::format("Invalid value: '{}'. Supported values are: 'none', "
                                          "'auto' and 'required'.",
                                          s)));
    }
    return;
  }
  if (choice->is_object()) {
    FieldReader r(*choice, "tool_choice");
    std::optional<std::string> type = r.string("type", true);
    const json* function = r.object("function", true);
    if (!r.ok()) return body.fail(*r.error());
    if (*type != "function") {
      return body.fail(invalid_value("tool_choice.type",
                                     fmt::format("Invalid value: '{}'. Supported values are: 'function'.", *type)));
    }
    FieldReader f(*function, "tool_choice.function");
    std::optional<std::string> name = f.string("name", true);
    if (!f.ok()) return body.fail(*f.error());
    if (std::find(out.tool_names.begin(), out.tool_names.end(), *name) == out.tool_names.end()) {
      return body.fail(invalid_value(
          "tool_choice.function.name",
          out.tool_names.empty()
              ? fmt::format("Invalid value for 'tool_choice': no function named '{}' was specified "
                            "in the 'tools' parameter (no 'tools' are specified).", *name)
              : fmt::format("Invalid value for 'tool_choice': no function named '{}' was specified "
                            "in the 'tools' parameter.", *name)));
    }
    out.tool_choice = ToolChoice::Function;
    out.tool_choice_function = *name;
    return;
  }
  body.fail(invalid_type("tool_choice", "a string or an object", json_type_phrase(*choice)));
}

}  // namespace

ApiResult<json> parse_json_body(std::string_view body) {
  JsonParseError error;
  std::optional<json> parsed = parse_json_linear(body, &error);
  if (!parsed) {
    if (error.limit) return invalid_json(fmt::format("it has {}", error.message));
    return invalid_json(body.empty() ? "the body is empty" : fmt::format("it is not valid JSON: {}", error.message));
  }
  if (!parsed->is_object()) {
    return invalid_json(fmt::format("the body is {}, not a JSON object", json_type_phrase(*parsed)));
  }
  return std::move(*parsed);
}

ApiResult<ChatRequest> parse_chat_request(std::string_view raw) {
  ApiResult<json> parsed = parse_json_body(raw);
  if (!parsed) return parsed.error();
  const json& j = *parsed;
  FieldReader body(j, "");
  ChatRequest out;
  if (auto model = body.string("model", true)) out.model = std::move(*model);
  if (!body.ok()) return *body.error();

  const json* messages = body.find("messages");
  if (!messages) return missing_parameter("messages");
  ApiResult<json> prepared = read_chat_messages(*messages, "messages");
  if (!prepared) return prepared.error();
  out.messages = std::move(*prepared);

  if (const json* tools = body.find("tools")) {
    ApiResult<ChatTools> t = read_chat_tools(*tools, "tools");
    if (!t) return t.error();
    out.tools = std::move(t->tools);
    out.tool_names = std::move(t->names);
  }
  read_tool_choice(body, out);
  if (auto v = body.boolean("parallel_tool_calls")) out.parallel_tool_calls = *v;

  read_sampling_fields(body, out.sampling, /*chat=*/true);
  if (auto v = body.boolean("logprobs")) out.logprobs = *v;
  if (auto v = body.integer("top_logprobs", 0, kMaxTopLogprobs)) {
    out.top_logprobs = static_cast<int32_t>(*v);
    if (out.top_logprobs > 0 && !out.logprobs) {
      body.fail(invalid_value("top_logprobs",
                              "Invalid value for 'top_logprobs': 'logprobs' must be set to true "
                              "when 'top_logprobs' is used."));
    }
  }
  read_structured_fields(body, out.structured);
  if (const json* kwargs = body.object("chat_template_kwargs")) out.chat_template_kwargs = *kwargs;
  if (auto v = body.boolean("add_generation_prompt")) out.add_generation_prompt = *v;
  if (!body.ok()) return *body.error();
  return out;
}

}  // namespace spillway::api
