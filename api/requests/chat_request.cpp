#include "api/requests/chat_request.h"

#include <fmt/format.h>

#include "api/requests/chat_messages.h"
#include "api/json_parse.h"
#include "api/requests/json_fields.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

void read_response_format(FieldReader& body) {
  const json* format = body.object("response_format");
  if (!format) return;
  FieldReader r(*format, "response_format");
  std::optional<std::string> type = r.string("type", true);
  if (!r.ok()) return body.fail(*r.error());
  if (*type == "text") return;
  if (*type == "json_object" || *type == "json_schema") {
    return body.fail(unsupported_parameter(
        "response_format",
        fmt::format("response_format type '{}' is not supported yet: this server has no "
                    "constrained (grammar-guided) decoding. Use 'text', or ask for JSON in the "
                    "prompt.",
                    *type)));
  }
  body.fail(invalid_value("response_format.type",
                          fmt::format("Invalid value: '{}'. Supported values are: 'text', "
                                      "'json_object' and 'json_schema'.",
                                      *type)));
}

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
      body.fail(unsupported_parameter(
          "tool_choice", "tool_choice 'required' is not supported yet: forcing a tool call "
                         "needs constrained decoding, which this server does not have. Use "
                         "'auto' or 'none'."));
    } else {
      body.fail(invalid_value("tool_choice",
                              fmt::format("Invalid value: '{}'. Supported values are: 'none', "
                                          "'auto' and 'required'.",
                                          s)));
    }
    return;
  }
  if (choice->is_object()) {
    body.fail(unsupported_parameter(
        "tool_choice", "tool_choice naming a function is not supported yet: forcing a tool call "
                       "needs constrained decoding, which this server does not have. Use 'auto' "
                       "or 'none'."));
    return;
  }
  body.fail(invalid_type("tool_choice", "a string or an object", json_type_phrase(*choice)));
}

}  // namespace

ApiResult<json> parse_json_body(std::string_view body) {
  JsonParseError error;
  std::optional<json> parsed = parse_json_linear(body, &error);
  if (!parsed) {
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
  body.boolean("parallel_tool_calls");

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
  read_response_format(body);
  if (const json* kwargs = body.object("chat_template_kwargs")) out.chat_template_kwargs = *kwargs;
  if (auto v = body.boolean("add_generation_prompt")) out.add_generation_prompt = *v;
  if (!body.ok()) return *body.error();
  return out;
}

}  // namespace spillway::api
