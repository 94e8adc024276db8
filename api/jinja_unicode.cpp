#include "api/jinja_unicode.h"

#include <algorithm>

namespace spillway::api::jinja {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // invalid byte b decodes to U+DC00 + b

bool in(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

}  // namespace

char32_t utf8_next(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    ++pos;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    ++pos;
    return kEscapeBase + b0;
  }
  if (pos + len > s.size()) {
    ++pos;
    return kEscapeBase + b0;
  }
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) {
      ++pos;
      return kEscapeBase + b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || in(cp, 0xD800, 0xDFFF)) {
    ++pos;
    return kEscapeBase + b0;
  }
  pos += len;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (in(cp, kEscapeBase + 0x80, kEscapeBase + 0xFF)) {
    out.push_back(static_cast<char>(cp - kEscapeBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
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

bool py_isspace(char32_t cp) {
  return in(cp, 0x09, 0x0D) || in(cp, 0x1C, 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || in(cp, 0x2000, 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool py_isprintable(char32_t cp) {
  if (cp < 0x20 || in(cp, 0x7F, 0xA0) || cp == 0xAD) return false;
  if (cp < 0x600) return true;
  return !(in(cp, 0x600, 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F ||
           in(cp, 0x890, 0x891) || cp == 0x8E2 || cp == 0x1680 || cp == 0x180E ||
           in(cp, 0x2000, 0x200F) || in(cp, 0x2028, 0x202F) || in(cp, 0x205F, 0x206F) ||
           cp == 0x3000 || in(cp, 0xD800, 0xF8FF) || cp == 0xFEFF || in(cp, 0xFFF9, 0xFFFB) ||
           in(cp, 0xFFFE, 0xFFFF) || cp == 0x110BD || cp == 0x110CD ||
           in(cp, 0x13430, 0x1343F) || in(cp, 0x1BCA0, 0x1BCA3) || in(cp, 0x1D173, 0x1D17A) ||
           cp == 0xE0001 || in(cp, 0xE0020, 0xE007F) || cp >= 0xF0000);
}

char32_t simple_lower(char32_t cp) {
  if (cp < 0x80) return in(cp, 'A', 'Z') ? cp + 32 : cp;
  if (in(cp, 0xC0, 0xDE) && cp != 0xD7) return cp + 32;
  if (cp == 0x130) return 'i';
  if (in(cp, 0x100, 0x137) || in(cp, 0x14A, 0x177)) return (cp % 2 == 0) ? cp + 1 : cp;
  if (in(cp, 0x139, 0x148) || in(cp, 0x179, 0x17E)) return (cp % 2 == 1) ? cp + 1 : cp;
  if (cp == 0x178) return 0xFF;
  if (cp == 0x386) return 0x3AC;
  if (in(cp, 0x388, 0x38A)) return cp + 37;
  if (cp == 0x38C) return 0x3CC;
  if (in(cp, 0x38E, 0x38F)) return cp + 63;
  if (in(cp, 0x391, 0x3AB) && cp != 0x3A2) return cp + 32;
  if (in(cp, 0x400, 0x40F)) return cp + 80;
  if (in(cp, 0x410, 0x42F)) return cp + 32;
  if (in(cp, 0x460, 0x481) || in(cp, 0x48A, 0x4BF) || in(cp, 0x4D0, 0x52F)) {
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp == 0x4C0) return 0x4CF;
  if (in(cp, 0x4C1, 0x4CE)) return (cp % 2 == 1) ? cp + 1 : cp;
  if (in(cp, 0x531, 0x556)) return cp + 48;
  if (in(cp, 0x1E00, 0x1E95) || in(cp, 0x1EA0, 0x1EFF)) return (cp % 2 == 0) ? cp + 1 : cp;
  if (cp == 0x1E9E) return 0xDF;
  if (in(cp, 0xFF21, 0xFF3A)) return cp + 32;
  return cp;
}

char32_t simple_upper(char32_t cp) {
  if (cp < 0x80) return in(cp, 'a', 'z') ? cp - 32 : cp;
  if (in(cp, 0xE0, 0xFE) && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (cp == 0x131) return 'I';
  if (in(cp, 0x100, 0x137) || in(cp, 0x14A, 0x177)) return (cp % 2 == 1) ? cp - 1 : cp;
  if (in(cp, 0x139, 0x148) || in(cp, 0x179, 0x17E)) return (cp % 2 == 0) ? cp - 1 : cp;
  if (cp == 0x17F) return 'S';
  if (cp == 0x3AC) return 0x386;
  if (in(cp, 0x3AD, 0x3AF)) return cp - 37;
  if (cp == 0x3CC) return 0x38C;
  if (in(cp, 0x3CD, 0x3CE)) return cp - 63;
  if (cp == 0x3C2) return 0x3A3;
  if (in(cp, 0x3B1, 0x3CB)) return cp - 32;
  if (in(cp, 0x430, 0x44F)) return cp - 32;
  if (in(cp, 0x450, 0x45F)) return cp - 80;
  if (in(cp, 0x460, 0x481) || in(cp, 0x48A, 0x4BF) || in(cp, 0x4D0, 0x52F)) {
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp == 0x4CF) return 0x4C0;
  if (in(cp, 0x4C1, 0x4CE)) return (cp % 2 == 0) ? cp - 1 : cp;
  if (in(cp, 0x561, 0x586)) return cp - 48;
  if (in(cp, 0x1E00, 0x1E95) || in(cp, 0x1EA0, 0x1EFF)) return (cp % 2 == 1) ? cp - 1 : cp;
  if (in(cp, 0xFF41, 0xFF5A)) return cp - 32;
  return cp;
}

bool py_iscased_lower(char32_t cp) { return cp == 0xDF || simple_upper(cp) != cp; }
bool py_iscased_upper(char32_t cp) { return simple_lower(cp) != cp; }

bool py_isdigit(char32_t cp) { return in(cp, '0', '9'); }

bool py_isalpha(char32_t cp) {
  if (cp < 0x80) return in(cp, 'a', 'z') || in(cp, 'A', 'Z');
  if (cp == 0xAA || cp == 0xB5 || cp == 0xBA) return true;
  if (in(cp, 0xC0, 0x24F)) return cp != 0xD7 && cp != 0xF7;
  if (simple_lower(cp) != cp || simple_upper(cp) != cp) return true;
  return in(cp, 0x5D0, 0x5EA) || in(cp, 0x620, 0x64A) || in(cp, 0x904, 0x939) ||
         in(cp, 0xE01, 0xE30) || in(cp, 0x3041, 0x3096) || in(cp, 0x30A1, 0x30FA) ||
         in(cp, 0x3400, 0x4DBF) || in(cp, 0x4E00, 0x9FFF) || in(cp, 0xAC00, 0xD7A3);
}

bool py_isalnum(char32_t cp) { return py_isalpha(cp) || py_isdigit(cp); }

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t cp = utf8_next(s, pos);
    if (cp == 0xDF) {
      out += "SS";
    } else if (cp == 0x149) {
      utf8_append(out, 0x2BC);
      out += 'N';
    } else {
      utf8_append(out, simple_upper(cp));
    }
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t cp = utf8_next(s, pos);
    if (cp == 0x130) {
      out += 'i';
      utf8_append(out, 0x307);
    } else {
      utf8_append(out, simple_lower(cp));
    }
  }
  return out;
}

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

}  // namespace spillway::api::jinja
