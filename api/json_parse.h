// Parsing untrusted JSON (request bodies, tool-call arguments) in time linear in its size.
//
// nlohmann::ordered_json keeps an object's members in a vector and looks for a duplicate key
// on every insert, so json::parse of an object with n keys costs O(n^2) (100k keys: seconds
// of an HTTP thread). This parser builds the same ordered_json through the SAX interface,
// appending members directly and finding duplicates with a hash set per open object; a
// duplicate key keeps the last value, as json::parse does. Nesting is bounded (the SAX
// parser itself is iterative; the bound protects code that later walks the value
// recursively).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace spillway::api {

struct JsonParseError {
  std::string message;  // what is wrong and where ("syntax error at byte 17: ...")
};

inline constexpr int kMaxJsonDepth = 512;

// The value, or why `text` is not one JSON value (trailing garbage, NUL bytes and nesting
// deeper than kMaxJsonDepth included).
std::optional<nlohmann::ordered_json> parse_json_linear(std::string_view text,
                                                        JsonParseError* error = nullptr);

}  // namespace spillway::api
