// The exact UTF-8 automaton (no overlong forms, no surrogates, nothing above U+10FFFF),
// shared by the grammar building blocks, the string-loop check and the token slice.
// State 0 is a character boundary; utf8_step returns the next state or -1.
#pragma once

#include <cstdint>

namespace spillway::grammar {

inline int utf8_step(int state, uint8_t b) {
  switch (state) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if (b == 0xED) return 5;
      if (b >= 0xE1 && b <= 0xEF) return 2;
      if (b == 0xF0) return 6;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      if (b == 0xF4) return 7;
      return -1;
    case 1: return b >= 0x80 && b <= 0xBF ? 0 : -1;
    case 2: return b >= 0x80 && b <= 0xBF ? 1 : -1;
    case 3: return b >= 0x80 && b <= 0xBF ? 2 : -1;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    default: return -1;
  }
}

}  // namespace spillway::grammar
