#include "api/requests/completion_request.h"

#include <limits>

#include <fmt/format.h>

#include "api/requests/chat_request.h"
#include "api/requests/json_fields.h"

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;

ApiError empty_prompt(const std::string& param) {
  return invalid_value(param, fmt::format("Invalid '{}': the prompt must not be empty.", param));
}

ApiResult<std::vector<int32_t>> read_token_ids(const json& ids, const std::string& param) {
  if (ids.empty()) return empty_prompt(param);
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    std::optional<int64_t> id = as_integer(ids[i]);
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      return invalid_type(indexed(param, i), "a token id (a non-negative integer)",
                          json_type_phrase(ids[i]));
    }
    out.push_back(static_cast<int32_t>(*id));
  }
  return out;
}

ApiResult<std::vector<CompletionPrompt>> read_prompts(const json& prompt) {
  constexpr std::string_view kExpected =
      "a string, an array of strings, an array of token ids or an array of arrays of token ids";
  std::vector<CompletionPrompt> out;
  if (prompt.is_string()) {
    out.push_back({prompt.get<std::string>(), {}});
    return out;
  }
  if (!prompt.is_array()) return invalid_type("prompt", kExpected, json_type_phrase(prompt));
  if (prompt.empty()) return empty_prompt("prompt");
  if (prompt[0].is_number()) {
    ApiResult<std::vector<int32_t>> ids = read_token_ids(prompt, "prompt");
    if (!ids) return ids.error();
    out.push_back({std::nullopt, std::move(*ids)});
    return out;
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    const json& p = prompt[i];
    const std::string param = indexed("prompt", i);
    if (p.is_string()) {
      out.push_back({p.get<std::string>(), {}});
    } else if (p.is_array()) {
      ApiResult<std::vector<int32_t>> ids = read_token_ids(p, param);
      if (!ids) return ids.error();
      out.push_back({std::nullopt, std::move(*ids)});
    } else {
      return invalid_type(param, "a string or an array of token ids", json_type_phrase(p));
    }
  }
  return out;
}

}  // namespace

ApiResult<CompletionRequest> parse_completion_request(std::string_view raw) {
  ApiResult<json> parsed = parse_json_body(raw);
  if (!parsed) return parsed.error();
  FieldReader body(*parsed, "");
  CompletionRequest out;
  if (auto model = body.string("model", true)) out.model = std::move(*model);
  if (!body.ok()) return *body.error();
  const json* prompt = body.find("prompt");
  if (!prompt) return missing_parameter("prompt");
  ApiResult<std::vector<CompletionPrompt>> prompts = read_prompts(*prompt);
  if (!prompts) return prompts.error();
  out.prompts = std::move(*prompts);

  read_sampling_fields(body, out.sampling, /*chat=*/false);
  read_structured_fields(body, out.structured);
  if (!out.sampling.max_tokens) {
    out.sampling.max_tokens = std::max(kCompletionDefaultMaxTokens, out.sampling.min_tokens);
  }
  if (auto v = body.boolean("echo")) out.echo = *v;
  if (auto v = body.integer("logprobs", 0, kMaxCompletionLogprobs)) {
    out.logprobs = static_cast<int32_t>(*v);
  }
  if (auto best_of = body.integer("best_of", 1, kMaxChoices)) {
    if (*best_of != out.sampling.n) {
      body.fail(unsupported_parameter(
          "best_of", fmt::format("best_of = {} different from n = {} is not supported yet.",
                                 *best_of, out.sampling.n)));
    }
  }
  if (auto suffix = body.string("suffix"); suffix && !suffix->empty()) {
    body.fail(unsupported_parameter(
        "suffix", "'suffix' is not supported by this model: the server has no fill-in-the-middle "
                  "support."));
  }
  if (!body.ok()) return *body.error();
  if (out.echo && out.logprobs) {
    return unsupported_parameter("echo", "'echo' together with 'logprobs' is not supported yet: "
                                         "the server does not compute prompt logprobs.");
  }
  const size_t choices = out.prompts.size() * static_cast<size_t>(out.sampling.n);
  if (choices > static_cast<size_t>(kMaxChoices)) {
    return invalid_value("n", fmt::format("Invalid 'n': {} prompts x n = {} gives {} choices; at "
                                          "most {} are allowed per request.",
                                          out.prompts.size(), out.sampling.n, choices,
                                          kMaxChoices));
  }
  return out;
}

}  // namespace spillway::api
