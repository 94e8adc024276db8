#include "jinja/unicode.h"

#include <unicode/uchar.h>
#include <unicode/ucasemap.h>

#include <algorithm>

#include "common/utf8.h"

namespace spillway::jinja {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // invalid byte b decodes to U+DC00 + b

bool in(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

}  // namespace

char32_t utf8_next(std::string_view s, size_t& pos) {
  char32_t cp = 0;
  const size_t len = utf8::decode(s, pos, &cp);
  if (len == 0) return kEscapeBase + static_cast<unsigned char>(s[pos++]);
  pos += len;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (in(cp, kEscapeBase + 0x80, kEscapeBase + 0xFF)) {
    out.push_back(static_cast<char>(cp - kEscapeBase));
  } else {
    utf8::append(out, cp);
  }
}

std::vector<char32_t> utf8_decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(utf8_next(s, pos));
  return out;
}

std::string utf8_encode(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) utf8_append(out, cp);
  return out;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  size_t pos = 0;
  while (pos < s.size()) {
    out.push_back(pos);
    utf8_next(s, pos);
  }
  out.push_back(s.size());
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b < 0x80) {
      ++pos;
    } else {
      utf8_next(s, pos);
    }
    ++n;
  }
  return n;
}

// Python's character classes are those of its unicodedata; ICU's UCD properties are the
// same data (up to the Unicode version of each).
bool py_isspace(char32_t cp) {
  const UCharDirection d = u_charDirection(static_cast<UChar32>(cp));
  return u_charType(static_cast<UChar32>(cp)) == U_SPACE_SEPARATOR || d == U_WHITE_SPACE_NEUTRAL ||
         d == U_BLOCK_SEPARATOR || d == U_SEGMENT_SEPARATOR;
}

bool py_isprintable(char32_t cp) {
  if (cp == ' ') return true;
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONTROL_CHAR:          // Cc
    case U_FORMAT_CHAR:           // Cf
    case U_SURROGATE:             // Cs (escaped bytes included)
    case U_PRIVATE_USE_CHAR:      // Co
    case U_UNASSIGNED:            // Cn
    case U_LINE_SEPARATOR:        // Zl
    case U_PARAGRAPH_SEPARATOR:   // Zp
    case U_SPACE_SEPARATOR:       // Zs
      return false;
    default:
      return true;
  }
}

char32_t simple_lower(char32_t cp) { return static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp))); }
char32_t simple_upper(char32_t cp) { return static_cast<char32_t>(u_toupper(static_cast<UChar32>(cp))); }

bool py_iscased_lower(char32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_LOWERCASE); }
bool py_iscased_upper(char32_t cp) { return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_UPPERCASE); }

bool py_isdigit(char32_t cp) {
  const int type = u_getIntPropertyValue(static_cast<UChar32>(cp), UCHAR_NUMERIC_TYPE);
  return type == U_NT_DECIMAL || type == U_NT_DIGIT;
}

bool py_isalpha(char32_t cp) { return u_isalpha(static_cast<UChar32>(cp)); }

bool py_isalnum(char32_t cp) {
  return py_isalpha(cp) || u_getIntPropertyValue(static_cast<UChar32>(cp), UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}

namespace {

// Python's str.upper()/lower(): full, locale-independent case mapping (ß -> SS, final
// sigma) of the well-formed runs; escaped invalid bytes are copied unchanged.
std::string map_case(std::string_view s, bool upper) {
  struct CaseMap {
    UCaseMap* map = nullptr;
    CaseMap() {
      UErrorCode error = U_ZERO_ERROR;
      map = ucasemap_open("", U_FOLD_CASE_DEFAULT, &error);
      if (U_FAILURE(error)) map = nullptr;
    }
    ~CaseMap() { ucasemap_close(map); }
  };
  static const CaseMap root;  // ICU case maps are safe to share between threads
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = pos;
    char32_t cp = 0;
    while (end < s.size()) {
      const size_t len = utf8::decode(s, end, &cp);
      if (len == 0) break;
      end += len;
    }
    if (end > pos) {
      const std::string_view run = s.substr(pos, end - pos);
      std::string mapped(run.size() * 3 + 16, '\0');
      UErrorCode error = U_ZERO_ERROR;
      const int32_t n = upper ? ucasemap_utf8ToUpper(root.map, mapped.data(), static_cast<int32_t>(mapped.size()),
                                                     run.data(), static_cast<int32_t>(run.size()), &error)
                              : ucasemap_utf8ToLower(root.map, mapped.data(), static_cast<int32_t>(mapped.size()),
                                                     run.data(), static_cast<int32_t>(run.size()), &error);
      if (root.map == nullptr || U_FAILURE(error)) {
        out.append(run);  // cannot happen with a buffer this large; never lose the text
      } else {
        out.append(mapped.data(), static_cast<size_t>(n));
      }
      pos = end;
    }
    if (pos < s.size()) out.push_back(s[pos++]);  // an invalid byte
  }
  return out;
}

}  // namespace

std::string py_upper(std::string_view s) { return map_case(s, true); }
std::string py_lower(std::string_view s) { return map_case(s, false); }

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars != nullptr) set = utf8_decode(*chars);
  auto strip_it = [&](char32_t cp) {
    if (chars == nullptr) return py_isspace(cp);
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  const std::vector<size_t> off = utf8_offsets(s);
  size_t begin = 0;
  size_t end = off.size() - 1;  // code point indices [begin, end)
  auto cp_at = [&](size_t i) {
    size_t p = off[i];
    return utf8_next(s, p);
  };
  if (left) {
    while (begin < end && strip_it(cp_at(begin))) ++begin;
  }
  if (right) {
    while (end > begin && strip_it(cp_at(end - 1))) --end;
  }
  return std::string(s.substr(off[begin], off[end] - off[begin]));
}

}  // namespace spillway::jinja
