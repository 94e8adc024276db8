// Typed, range-checked reading of request fields, with OpenAI's error wording.
//
// A FieldReader reads the members of one JSON object. Absent and null members are "not
// given" (nullopt). The first problem is kept in error(); later reads after an error
// return nullopt and change nothing, so a parser can read every field and check once.
// Param names in errors are the reader's prefix + key ("messages[0].content").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/api_error.h"

namespace spillway::api {

class FieldReader {
 public:
  // `object` must outlive the reader. A non-object gives an invalid_type error at once,
  // named by `name` (the empty name means the request body).
  FieldReader(const nlohmann::ordered_json& object, std::string name);

  // The param name of a member: "key" at the top level, "name.key" below it.
  std::string param(std::string_view key) const;
  const nlohmann::ordered_json* find(std::string_view key) const;  // nullptr when absent or null
  bool has(std::string_view key) const { return find(key) != nullptr; }

  std::optional<std::string> string(std::string_view key, bool required = false);
  std::optional<bool> boolean(std::string_view key);
  std::optional<double> number(std::string_view key, double min, double max);
  // Integral decimals (3.0) are accepted as integers.
  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max);
  const nlohmann::ordered_json* object(std::string_view key, bool required = false);
  const nlohmann::ordered_json* array(std::string_view key, bool required = false);

  // Records an error found by the caller (kept only if none is recorded yet).
  void fail(ApiError error);
  bool ok() const { return !error_.has_value(); }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  const nlohmann::ordered_json* typed(std::string_view key, bool required, bool (*is_type)(const nlohmann::ordered_json&),
                              std::string_view expected);

  const nlohmann::ordered_json& object_;
  std::string name_;
  std::optional<ApiError> error_;
};

// "name[index]"
std::string indexed(std::string_view name, size_t index);

// Reads an integer out of a JSON value that should hold one (ints or integral decimals).
std::optional<int64_t> as_integer(const nlohmann::ordered_json& value);

}  // namespace spillway::api
