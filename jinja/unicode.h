// Python str semantics over UTF-8 bytes for the Jinja interpreter (classes and case from
// ICU's Unicode data; the codec is common/utf8.h): code points (len,
// indexing and slicing count code points, as Python does), str.isspace() whitespace,
// case mapping and str.isprintable() for repr().
//
// Invalid UTF-8 never fails: each invalid byte decodes to one code point U+DC80+byte (like
// Python's surrogateescape) and encodes back to that byte, so bytes round-trip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::jinja {

// Decodes the code point at s[pos] and advances pos past it. pos < s.size().
char32_t utf8_next(std::string_view s, size_t& pos);
void utf8_append(std::string& out, char32_t cp);

std::vector<char32_t> utf8_decode(std::string_view s);
std::string utf8_encode(const std::vector<char32_t>& cps);
// Byte offset of every code point start, plus s.size() at the end (size = count + 1).
std::vector<size_t> utf8_offsets(std::string_view s);
size_t utf8_length(std::string_view s);

// Python str.isspace() for one code point.
bool py_isspace(char32_t cp);
bool py_isprintable(char32_t cp);
bool py_isalpha(char32_t cp);   // general category L*
bool py_isdigit(char32_t cp);   // numeric type Decimal or Digit
bool py_isalnum(char32_t cp);
bool py_iscased_lower(char32_t cp);
bool py_iscased_upper(char32_t cp);

// Case mapping as Python's str.upper()/lower() (full mappings, from ICU's Unicode data);
// simple_* map one code point to one (the simple mappings).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
char32_t simple_upper(char32_t cp);
char32_t simple_lower(char32_t cp);

// Python str.strip/lstrip/rstrip: chars == nullptr strips whitespace, else the code
// points in *chars.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace spillway::jinja
