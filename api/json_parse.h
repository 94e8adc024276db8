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
  bool limit = false;   // valid so far, but over kMaxJsonDepth or max_values
};

inline constexpr int kMaxJsonDepth = 512;
// Values (scalars, arrays and objects, keys not counted) in one document. A parsed value
// costs 16 bytes and more (an empty object ~64) while its text may be 2 bytes ("0,"), so
// this bounds the memory of a parsed request body (~100 MB at worst) whatever its size;
// legitimate bodies stay far below it (a logit_bias over a 256k vocabulary: 256k values).
inline constexpr size_t kMaxJsonValues = size_t{1} << 20;

// The value, or why `text` is not one JSON value (trailing garbage, NUL bytes, nesting
// deeper than kMaxJsonDepth and more than max_values values included).
std::optional<nlohmann::ordered_json> parse_json_linear(std::string_view text,
                                                        JsonParseError* error = nullptr,
                                                        size_t max_values = kMaxJsonValues);

}  // namespace spillway::api
