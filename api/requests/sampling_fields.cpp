#include "api/requests/sampling_fields.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace spillway::api {

namespace {

constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

void read_stop(FieldReader& body, SamplingFields& out) {
  const nlohmann::ordered_json* stop = body.find("stop");
  if (!stop || !body.ok()) return;
  if (stop->is_string()) {
    if (!stop->get_ref<const std::string&>().empty()) out.stop.push_back(stop->get<std::string>());
    return;
  }
  if (!stop->is_array()) {
    body.fail(invalid_type("stop", "a string or an array of strings", json_type_phrase(*stop)));
    return;
  }
  if (stop->size() > static_cast<size_t>(kMaxStopStrings)) {
    body.fail(invalid_value("stop", fmt::format("Invalid 'stop': array too long. Expected an "
                                                "array with maximum length {}, but got an "
                                                "array with length {} instead.",
                                                kMaxStopStrings, stop->size())));
    return;
  }
  for (size_t i = 0; i < stop->size(); ++i) {
    const nlohmann::ordered_json& s = (*stop)[i];
    if (!s.is_string()) {
      body.fail(invalid_type(indexed("stop", i), "a string", json_type_phrase(s)));
      return;
    }
    if (!s.get_ref<const std::string&>().empty()) out.stop.push_back(s.get<std::string>());
  }
}

void read_logit_bias(FieldReader& body, SamplingFields& out) {
  const nlohmann::ordered_json* bias = body.object("logit_bias");
  if (!bias) return;
  for (auto it = bias->begin(); it != bias->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > kMaxTokenId) {
      body.fail(invalid_value("logit_bias",
                              fmt::format("Invalid key in 'logit_bias': '{}'. Keys must be "
                                          "token ids (non-negative integers as strings).",
                                          key)));
      return;
    }
    const std::string param = fmt::format("logit_bias.{}", key);
    if (!it->is_number()) {
      body.fail(invalid_type(param, "a number", json_type_phrase(*it)));
      return;
    }
    const double v = it->get<double>();
    if (!(v >= -100.0)) {
      body.fail(below_minimum(param, -100, v, false));
      return;
    }
    if (v > 100.0) {
      body.fail(above_maximum(param, 100, v, false));
      return;
    }
    out.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(v));
  }
}

void read_stop_token_ids(FieldReader& body, SamplingFields& out) {
  const nlohmann::ordered_json* ids = body.array("stop_token_ids");
  if (!ids) return;
  for (size_t i = 0; i < ids->size(); ++i) {
    std::optional<int64_t> id = as_integer((*ids)[i]);
    if (!id || *id < 0 || *id > kMaxTokenId) {
      body.fail(invalid_type(indexed("stop_token_ids", i), "a token id (a non-negative integer)",
                             json_type_phrase((*ids)[i])));
      return;
    }
    out.stop_token_ids.push_back(static_cast<int32_t>(*id));
  }
}

}  // namespace

void read_sampling_fields(FieldReader& body, SamplingFields& out, bool chat) {
  constexpr int64_t kMaxLength = int64_t{1} << 30;
  if (auto v = body.number("temperature", 0.0, 2.0)) out.temperature = *v;
  if (auto v = body.number("top_p", 0.0, 1.0)) out.top_p = *v;
  if (const nlohmann::ordered_json* k = body.find("top_k"); k && body.ok()) {
    // vLLM: -1 (or 0) disables top-k.
    if (auto v = body.integer("top_k", -1, kMaxLength)) out.top_k = *v < 0 ? 0 : static_cast<int32_t>(*v);
  }
  if (auto v = body.number("min_p", 0.0, 1.0)) out.min_p = *v;
  if (auto v = body.number("repetition_penalty", 0.0, 2.0)) {
    if (*v <= 0.0) {
      body.fail(invalid_value("repetition_penalty",
                              "Invalid 'repetition_penalty': it must be greater than 0."));
    } else {
      out.repetition_penalty = *v;
    }
  }
  if (auto v = body.number("presence_penalty", -2.0, 2.0)) out.presence_penalty = *v;
  if (auto v = body.number("frequency_penalty", -2.0, 2.0)) out.frequency_penalty = *v;
  read_logit_bias(body, out);
  if (auto v = body.integer("seed", std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max())) {
    out.seed = *v;
  }
  read_stop(body, out);
  read_stop_token_ids(body, out);

  std::optional<int64_t> max_tokens = body.integer("max_tokens", 1, kMaxLength);
  if (chat) {
    if (auto v = body.integer("max_completion_tokens", 1, kMaxLength)) max_tokens = v;
  }
  if (max_tokens) out.max_tokens = static_cast<int32_t>(*max_tokens);
  if (auto v = body.integer("min_tokens", 0, kMaxLength)) out.min_tokens = static_cast<int32_t>(*v);
  if (body.ok() && out.max_tokens && out.min_tokens > *out.max_tokens) {
    body.fail(invalid_value("min_tokens",
                            fmt::format("Invalid 'min_tokens': {} is greater than the maximum "
                                        "number of tokens to generate ({}).",
                                        out.min_tokens, *out.max_tokens)));
  }
  if (auto v = body.boolean("ignore_eos")) out.ignore_eos = *v;
  if (auto v = body.boolean("skip_special_tokens")) out.skip_special_tokens = *v;
  if (auto v = body.integer("n", 1, kMaxChoices)) out.n = static_cast<int32_t>(*v);
  if (auto v = body.boolean("stream")) out.stream = *v;
  if (const nlohmann::ordered_json* options = body.object("stream_options")) {
    if (!out.stream) {
      body.fail(invalid_value("stream_options",
                              "The 'stream_options' parameter is only allowed when 'stream' is "
                              "enabled."));
    } else {
      FieldReader so(*options, "stream_options");
      if (auto v = so.boolean("include_usage")) out.include_usage = *v;
      if (!so.ok()) body.fail(*so.error());
    }
  }
  if (auto v = body.string("user")) out.user = std::move(*v);
  read_diffusion_fields(body, out.diffusion);
  read_moe_fields(body, out.moe);
}

}  // namespace spillway::api
