#include "engine/unicode_text.h"

#include <array>

namespace spillway::engine::unicode {

size_t utf8_length_from_lead(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// The allowed range of the second byte of a sequence starting with lead (Unicode Table 3-7);
// {0, 0} when lead cannot start a multi-byte sequence.
struct ByteRange {
  uint8_t lo, hi;
};
ByteRange second_byte_range(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {0x80, 0xBF};
  if (lead == 0xE0) return {0xA0, 0xBF};
  if (lead >= 0xE1 && lead <= 0xEC) return {0x80, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};
  if (lead >= 0xEE && lead <= 0xEF) return {0x80, 0xBF};
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {0x80, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};
  return {0, 0};
}

size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

size_t decode_utf8(std::string_view text, size_t pos, uint32_t* code_point) {
  if (pos >= text.size()) return 0;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const uint8_t lead = s[0];
  const size_t len = sequence_length(lead);
  if (len == 0 || len > avail) return 0;
  if (len == 1) {
    *code_point = lead;
    return 1;
  }
  const ByteRange second = second_byte_range(lead);
  if (s[1] < second.lo || s[1] > second.hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (!is_continuation(s[i])) return 0;
  }
  uint32_t cp = lead & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (s[i] & 0x3F);
  *code_point = cp;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
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

bool is_valid_utf8(std::string_view text) {
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = decode_utf8(text, pos, &cp);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = decode_utf8(text, pos, &cp);
    if (len == 0) {
      out.append(kReplacementUtf8);
      ++pos;
    } else {
      out.append(text.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const uint8_t b = s[n - k];
    if (is_continuation(b)) continue;  // look further back for the lead byte
    const size_t len = sequence_length(b);
    if (len <= k) return 0;  // ASCII, an invalid lead, or a sequence that is already complete
    // b announces len > k bytes: hold back only if what we have is a valid prefix.
    if (k >= 2) {
      const ByteRange second = second_byte_range(b);
      if (s[n - k + 1] < second.lo || s[n - k + 1] > second.hi) return 0;
    }
    return k;
  }
  return 0;
}

namespace {

struct ByteMap {
  std::array<std::string, 256> byte_utf8;
  std::array<int16_t, 0x200> cp_to_byte;  // the alphabet lies below U+0144
  ByteMap() {
    cp_to_byte.fill(-1);
    auto self = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = self(b) ? static_cast<uint32_t>(b) : 256u + next++;
      append_utf8(byte_utf8[b], cp);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t b) { return byte_map().byte_utf8[b]; }

int unicode_to_byte(uint32_t cp) {
  return cp < byte_map().cp_to_byte.size() ? byte_map().cp_to_byte[cp] : -1;
}

}  // namespace spillway::engine::unicode
