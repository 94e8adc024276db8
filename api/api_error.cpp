#include "api/api_error.h"

#include <cmath>

#include <fmt/format.h>

namespace spillway::api {

namespace {

ApiError make(int status, std::string message, std::optional<std::string> param,
              std::optional<std::string> code, std::string type = "invalid_request_error") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string number_text(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return fmt::format("{}", v);
}

}  // namespace

nlohmann::ordered_json error_body(const ApiError& error) {
  nlohmann::ordered_json inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param ? nlohmann::ordered_json(*error.param) : nullptr;
  inner["code"] = error.code ? nlohmann::ordered_json(*error.code) : nullptr;
  nlohmann::ordered_json body;
  body["error"] = std::move(inner);
  return body;
}

std::string json_type_phrase(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::null: return "null";
    case nlohmann::ordered_json::value_t::object: return "an object";
    case nlohmann::ordered_json::value_t::array: return "an array";
    case nlohmann::ordered_json::value_t::string: return "a string";
    case nlohmann::ordered_json::value_t::boolean: return "a boolean";
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return "an integer";
    case nlohmann::ordered_json::value_t::number_float: return "a decimal number";
    default: return "an unsupported value";
  }
}

ApiError invalid_json(std::string_view detail) {
  return make(400,
              fmt::format("We could not parse the JSON body of your request ({}). The API "
                          "expects a JSON object as the request body.",
                          detail),
              std::nullopt, std::nullopt);
}

ApiError invalid_type(std::string_view param, std::string_view expected, std::string_view got) {
  return make(400,
              fmt::format("Invalid type for '{}': expected {}, but got {} instead.", param,
                          expected, got),
              std::string(param), "invalid_type");
}

ApiError invalid_value(std::string_view param, std::string message) {
  return make(400, std::move(message), std::string(param), "invalid_value");
}

ApiError missing_parameter(std::string_view param) {
  return make(400, fmt::format("Missing required parameter: '{}'.", param), std::string(param),
              "missing_required_parameter");
}

ApiError unsupported_parameter(std::string_view param, std::string message) {
  return make(400, std::move(message), std::string(param), "unsupported_parameter");
}

ApiError below_minimum(std::string_view param, double minimum, double got, bool integer) {
  return make(400,
              fmt::format("Invalid '{}': {} below minimum value. Expected a value >= {}, but "
                          "got {} instead.",
                          param, integer ? "integer" : "decimal", number_text(minimum),
                          number_text(got)),
              std::string(param), integer ? "integer_below_min_value" : "decimal_below_min_value");
}

ApiError above_maximum(std::string_view param, double maximum, double got, bool integer) {
  return make(400,
              fmt::format("Invalid '{}': {} above maximum value. Expected a value <= {}, but "
                          "got {} instead.",
                          param, integer ? "integer" : "decimal", number_text(maximum),
                          number_text(got)),
              std::string(param), integer ? "integer_above_max_value" : "decimal_above_max_value");
}

ApiError context_length_exceeded(std::string message) {
  return make(400, std::move(message), std::string("messages"), "context_length_exceeded");
}

ApiError model_not_found(std::string_view model) {
  return make(404, fmt::format("The model `{}` does not exist.", model), std::string("model"),
              "model_not_found");
}

ApiError path_not_found(std::string_view method, std::string_view path) {
  return make(404, fmt::format("Invalid URL ({} {})", method, path), std::nullopt,
              "not_found");
}

ApiError method_not_allowed(std::string_view method, std::string_view path) {
  return make(405, fmt::format("Method {} is not allowed for {}", method, path), std::nullopt,
              "method_not_allowed");
}

ApiError invalid_api_key() {
  return make(401,
              "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>'.",
              std::nullopt, "invalid_api_key", "authentication_error");
}

ApiError payload_too_large(uint64_t limit_bytes) {
  return make(413,
              fmt::format("The request body is larger than the limit of {} bytes.", limit_bytes),
              std::nullopt, "request_too_large");
}

ApiError overloaded(std::string message, int retry_after_seconds) {
  ApiError e = make(429, std::move(message), std::nullopt, "overloaded", "server_error");
  e.retry_after_seconds = retry_after_seconds;
  return e;
}

ApiError unavailable(std::string message, int retry_after_seconds) {
  ApiError e = make(503, std::move(message), std::nullopt, "unavailable", "server_error");
  e.retry_after_seconds = retry_after_seconds;
  return e;
}

ApiError internal_error(std::string message) {
  return make(500, std::move(message), std::nullopt, "internal_error", "server_error");
}

}  // namespace spillway::api
