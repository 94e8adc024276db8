#include "api/requests/tokenize_request.h"

#include <limits>

#include "api/requests/chat_messages.h"
#include "api/requests/chat_request.h"
#include "api/requests/json_fields.h"
#include "api/text_encoding.h"

namespace spillway::api {

namespace {
using json = nlohmann::ordered_json;
}

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view raw) {
  ApiResult<json> parsed = parse_json_body(raw);
  if (!parsed) return parsed.error();
  FieldReader body(*parsed, "");
  TokenizeRequest out;
  out.model = body.string("model");
  if (const json* messages = body.find("messages")) {
    ApiResult<json> prepared = read_chat_messages(*messages, "messages");
    if (!prepared) return prepared.error();
    out.messages = std::move(*prepared);
    out.add_special_tokens = false;
    if (const json* tools = body.find("tools")) {
      ApiResult<ChatTools> t = read_chat_tools(*tools, "tools");
      if (!t) return t.error();
      out.tools = std::move(t->tools);
    }
    if (const json* kwargs = body.object("chat_template_kwargs")) out.chat_template_kwargs = *kwargs;
    if (auto v = body.boolean("add_generation_prompt")) out.add_generation_prompt = *v;
  } else if (body.has("prompt")) {
    out.prompt = body.string("prompt");
  } else if (body.has("content")) {
    out.prompt = body.string("content");
  } else if (body.ok()) {
    return missing_parameter("prompt");
  }
  if (auto v = body.boolean("add_special")) out.add_special_tokens = *v;
  if (auto v = body.boolean("add_special_tokens")) out.add_special_tokens = *v;
  if (auto v = body.boolean("with_pieces")) out.return_token_strs = *v;
  if (auto v = body.boolean("return_token_strs")) out.return_token_strs = *v;
  if (!body.ok()) return *body.error();
  return out;
}

ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view raw) {
  ApiResult<json> parsed = parse_json_body(raw);
  if (!parsed) return parsed.error();
  FieldReader body(*parsed, "");
  DetokenizeRequest out;
  out.model = body.string("model");
  const json* tokens = body.array("tokens", true);
  if (!body.ok()) return *body.error();
  for (size_t i = 0; i < tokens->size(); ++i) {
    std::optional<int64_t> id = as_integer((*tokens)[i]);
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      return invalid_type(indexed("tokens", i), "a token id (a non-negative integer)",
                          json_type_phrase((*tokens)[i]));
    }
    out.tokens.push_back(static_cast<int32_t>(*id));
  }
  return out;
}

json render_tokenize_response(const std::vector<int32_t>& tokens, int32_t max_model_len,
                              const std::vector<std::string>* token_strs) {
  json out;
  out["count"] = tokens.size();
  out["max_model_len"] = max_model_len;
  out["tokens"] = tokens;
  if (token_strs) {
    json strs = json::array();
    for (const std::string& s : *token_strs) strs.push_back(valid_utf8(s));
    out["token_strs"] = std::move(strs);
  }
  return out;
}

json render_detokenize_response(const std::string& text) {
  json out;
  out["prompt"] = valid_utf8(text);
  out["content"] = out["prompt"];
  return out;
}

}  // namespace spillway::api
