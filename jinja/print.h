// Text forms of values, byte-exact with Python: str(), repr() and json.dumps() (the
// `tojson` filter of transformers: ensure_ascii=False, ", " / ": " separators, insertion
// order, optional indent).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/value.h"
#include "common/result.h"

namespace spillway::jinja {

// str(v): strings as they are, undefined as "", everything else as repr. The result (or
// out, for append_str) growing past max_bytes is an error ("string too large").
Result<std::string> py_str(const Value& v, size_t max_bytes = SIZE_MAX);
Result<std::string> py_repr(const Value& v, size_t max_bytes = SIZE_MAX);
Status append_str(std::string& out, const Value& v, size_t max_bytes = SIZE_MAX);

std::string float_repr(double d);
std::string string_repr(std::string_view s);

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps indent (an int n becomes n spaces)
  std::string item_separator = ", ";  // json.dumps uses "," when an indent is given
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
  size_t max_bytes = SIZE_MAX;
};
Result<std::string> to_json(const Value& v, const JsonOptions& options);

}  // namespace spillway::jinja
