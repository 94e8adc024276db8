#include "api/requests/json_fields.h"

#include <cmath>

#include <fmt/format.h>

namespace spillway::api {

FieldReader::FieldReader(const nlohmann::ordered_json& object, std::string name)
    : object_(object), name_(std::move(name)) {
  if (!object_.is_object()) {
    if (name_.empty()) {
      error_ = invalid_json(fmt::format("the body is {}, not a JSON object",
                                        json_type_phrase(object_)));
    } else {
      error_ = invalid_type(name_, "an object", json_type_phrase(object_));
    }
  }
}

std::string FieldReader::param(std::string_view key) const {
  return name_.empty() ? std::string(key) : fmt::format("{}.{}", name_, key);
}

const nlohmann::ordered_json* FieldReader::find(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::fail(ApiError error) {
  if (!error_) error_ = std::move(error);
}

const nlohmann::ordered_json* FieldReader::typed(std::string_view key, bool required,
                                         bool (*is_type)(const nlohmann::ordered_json&),
                                         std::string_view expected) {
  if (error_) return nullptr;
  const nlohmann::ordered_json* v = find(key);
  if (!v) {
    if (required) fail(missing_parameter(param(key)));
    return nullptr;
  }
  if (!is_type(*v)) {
    fail(invalid_type(param(key), expected, json_type_phrase(*v)));
    return nullptr;
  }
  return v;
}

std::optional<std::string> FieldReader::string(std::string_view key, bool required) {
  const nlohmann::ordered_json* v =
      typed(key, required, [](const nlohmann::ordered_json& j) { return j.is_string(); }, "a string");
  if (!v) return std::nullopt;
  return v->get<std::string>();
}

std::optional<bool> FieldReader::boolean(std::string_view key) {
  const nlohmann::ordered_json* v =
      typed(key, false, [](const nlohmann::ordered_json& j) { return j.is_boolean(); }, "a boolean");
  if (!v) return std::nullopt;
  return v->get<bool>();
}

std::optional<double> FieldReader::number(std::string_view key, double min, double max) {
  const nlohmann::ordered_json* v =
      typed(key, false, [](const nlohmann::ordered_json& j) { return j.is_number(); }, "a number");
  if (!v) return std::nullopt;
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min) {
    fail(below_minimum(param(key), min, d, false));
    return std::nullopt;
  }
  if (d > max) {
    fail(above_maximum(param(key), max, d, false));
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> as_integer(const nlohmann::ordered_json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return std::nullopt;
    }
    return value.get<int64_t>();
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

std::optional<int64_t> FieldReader::integer(std::string_view key, int64_t min, int64_t max) {
  const nlohmann::ordered_json* v =
      typed(key, false, [](const nlohmann::ordered_json& j) { return j.is_number(); }, "an integer");
  if (!v) return std::nullopt;
  std::optional<int64_t> i = as_integer(*v);
  if (!i) {
    if (v->is_number_integer()) {
      fail(above_maximum(param(key), static_cast<double>(max), v->get<double>(), true));
    } else {
      fail(invalid_type(param(key), "an integer", json_type_phrase(*v)));
    }
    return std::nullopt;
  }
  if (*i < min) {
    fail(below_minimum(param(key), static_cast<double>(min), static_cast<double>(*i), true));
    return std::nullopt;
  }
  if (*i > max) {
    fail(above_maximum(param(key), static_cast<double>(max), static_cast<double>(*i), true));
    return std::nullopt;
  }
  return i;
}

const nlohmann::ordered_json* FieldReader::object(std::string_view key, bool required) {
  return typed(key, required, [](const nlohmann::ordered_json& j) { return j.is_object(); },
               "an object");
}

const nlohmann::ordered_json* FieldReader::array(std::string_view key, bool required) {
  return typed(key, required, [](const nlohmann::ordered_json& j) { return j.is_array(); }, "an array");
}

std::string indexed(std::string_view name, size_t index) {
  return fmt::format("{}[{}]", name, index);
}

}  // namespace spillway::api
