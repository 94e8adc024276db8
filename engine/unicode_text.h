// UTF-8 helpers for the tokenizers: decoding and encoding code points, replacing invalid
// bytes, finding an incomplete sequence at the end of a buffer, and GPT-2's byte <-> unicode
// map (byte-level BPE vocabularies spell every byte as one printable code point).
//
// All functions are pure and thread-safe. "Valid" means well-formed UTF-8 as in Unicode
// (no overlongs, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spillway::engine::unicode {

constexpr uint32_t kReplacementChar = 0xFFFD;
constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// The sequence length a lead byte announces, as llama.cpp counts it (from the high nibble:
// 0x0_-0xB_ -> 1, 0xC_/0xD_ -> 2, 0xE_ -> 3, 0xF_ -> 4). Continuation bytes count as 1.
size_t utf8_length_from_lead(uint8_t lead);

// Decodes one valid code point at text[pos]. Returns its length in bytes (1-4) and sets
// *code_point, or returns 0 when the bytes at pos are not a valid sequence (also when the
// sequence is cut off by the end of text).
size_t decode_utf8(std::string_view text, size_t pos, uint32_t* code_point);

// Appends the UTF-8 encoding of code_point (must be <= 0x10FFFF and not a surrogate).
void append_utf8(std::string& out, uint32_t code_point);

// Replaces every byte that does not start a valid sequence by U+FFFD (one per byte, as
// llama.cpp does); valid text is returned unchanged.
std::string replace_invalid_utf8(std::string_view text);
bool is_valid_utf8(std::string_view text);

// Number of bytes at the end of text that form a proper prefix of a valid multi-byte
// sequence (0-3): what a streaming decoder must hold back until more bytes arrive.
size_t incomplete_utf8_tail(std::string_view text);

// GPT-2's byte-level alphabet: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for
// themselves, the other 68 bytes for U+0100, U+0101, ... in byte order.
// byte_to_unicode returns the UTF-8 of the code point byte b stands for.
std::string_view byte_to_unicode(uint8_t b);
// The byte a code point of that alphabet stands for, or -1 when it is not in it.
int unicode_to_byte(uint32_t code_point);

}  // namespace spillway::engine::unicode
