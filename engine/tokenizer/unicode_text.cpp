#include "engine/tokenizer/unicode_text.h"

#include <array>

namespace spillway::engine::unicode {

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
