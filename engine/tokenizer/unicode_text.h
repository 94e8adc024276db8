// UTF-8 helpers for the tokenizers: the shared codec (common/utf8.h) under the names the
// tokenizer uses, replacing invalid bytes, and GPT-2's byte <-> unicode map (byte-level BPE
// vocabularies spell every byte as one printable code point).
//
// All functions are pure and thread-safe. "Valid" means well-formed UTF-8 as in Unicode
// (no overlongs, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace spillway::engine::unicode {

constexpr uint32_t kReplacementChar = 0xFFFD;
constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

inline size_t utf8_length_from_lead(uint8_t lead) { return utf8::length_from_lead(lead); }
// One well-formed code point at text[pos]: its length (1-4), or 0 (common/utf8.h).
inline size_t decode_utf8(std::string_view text, size_t pos, uint32_t* code_point) {
  return utf8::decode(text, pos, code_point);
}
inline void append_utf8(std::string& out, uint32_t code_point) { utf8::append(out, code_point); }
inline bool is_valid_utf8(std::string_view text) { return utf8::is_valid(text); }
inline size_t incomplete_utf8_tail(std::string_view text) { return utf8::incomplete_tail(text); }

// Replaces every byte that does not start a valid sequence by U+FFFD (one per byte, as
// llama.cpp does); valid text is returned unchanged.
std::string replace_invalid_utf8(std::string_view text);

// GPT-2's byte-level alphabet: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for
// themselves, the other 68 bytes for U+0100, U+0101, ... in byte order.
// byte_to_unicode returns the UTF-8 of the code point byte b stands for.
std::string_view byte_to_unicode(uint8_t b);
// The byte a code point of that alphabet stands for, or -1 when it is not in it.
int unicode_to_byte(uint32_t code_point);

}  // namespace spillway::engine::unicode
