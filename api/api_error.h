// Errors of the OpenAI-compatible API as values: an HTTP status plus the four fields of
// OpenAI's error body. Every error body the server sends is made by error_body().
//
// Pure: no I/O. The server maps status + retry_after_seconds to HTTP headers.
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace spillway::api {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::optional<std::string> code;
  // Sent as Retry-After with 429 / 503.
  std::optional<int> retry_after_seconds;
};

// {"error":{"message","type","param","code"}}: the one place error bodies are made.
nlohmann::ordered_json error_body(const ApiError& error);

// 400s decided while reading a request.
ApiError invalid_json(std::string_view detail);
ApiError invalid_type(std::string_view param, std::string_view expected, std::string_view got);
ApiError invalid_value(std::string_view param, std::string message);
ApiError missing_parameter(std::string_view param);
ApiError unsupported_parameter(std::string_view param, std::string message);
ApiError below_minimum(std::string_view param, double minimum, double got, bool integer);
ApiError above_maximum(std::string_view param, double maximum, double got, bool integer);
ApiError context_length_exceeded(std::string message);
// Other statuses.
ApiError model_not_found(std::string_view model);                          // 404
ApiError path_not_found(std::string_view method, std::string_view path);    // 404
ApiError method_not_allowed(std::string_view method, std::string_view path);  // 405
ApiError invalid_api_key();                                                // 401
ApiError payload_too_large(uint64_t limit_bytes);                           // 413
ApiError overloaded(std::string message, int retry_after_seconds);         // 429
ApiError unavailable(std::string message, int retry_after_seconds);        // 503
ApiError internal_error(std::string message);                              // 500

// OpenAI's words for a JSON value's type: "a string", "an integer", "a decimal number", ...
std::string json_type_phrase(const nlohmann::ordered_json& value);

// A value or an ApiError.
template <class T>
using ApiResult = Result<T, ApiError>;

}  // namespace spillway::api
