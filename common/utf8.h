// The UTF-8 codec every folder shares (the tokenizer, the Jinja interpreter, the API's text
// handling): strict decoding as Unicode defines well-formed UTF-8 (no overlongs, no
// surrogates, nothing above U+10FFFF), encoding, validation, and the incomplete tail a
// streaming decoder must hold back. What to do with invalid bytes is the caller's policy
// (the tokenizer replaces them with U+FFFD, Jinja escapes them as Python does).
//
// Header-only, pure, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spillway::utf8 {

namespace detail {
inline bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// The allowed range of the second byte after `lead` (Unicode Table 3-7); {0, 0} when lead
// cannot start a multi-byte sequence.
struct ByteRange {
  uint8_t lo, hi;
};
inline ByteRange second_byte_range(uint8_t lead) {
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

// Length of a well-formed sequence starting with lead; 0 when lead cannot start one.
inline size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}
}  // namespace detail

// The sequence length a lead byte announces, as llama.cpp counts it (from the high nibble:
// 0x0_-0xB_ -> 1, 0xC_/0xD_ -> 2, 0xE_ -> 3, 0xF_ -> 4). Continuation bytes count as 1.
inline size_t length_from_lead(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

// Decodes one well-formed code point at text[pos]: returns its length in bytes (1-4) and
// sets *code_point, or returns 0 when the bytes at pos are not a well-formed sequence (also
// when the sequence is cut off by the end of text, or pos is past it).
template <class CodePoint>
size_t decode(std::string_view text, size_t pos, CodePoint* code_point) {
  if (pos >= text.size()) return 0;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const uint8_t lead = s[0];
  const size_t len = detail::sequence_length(lead);
  if (len == 0 || len > avail) return 0;
  if (len == 1) {
    *code_point = lead;
    return 1;
  }
  const detail::ByteRange second = detail::second_byte_range(lead);
  if (s[1] < second.lo || s[1] > second.hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (!detail::is_continuation(s[i])) return 0;
  }
  uint32_t cp = lead & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (s[i] & 0x3F);
  *code_point = static_cast<CodePoint>(cp);
  return len;
}

// Appends the UTF-8 encoding of code_point (<= U+10FFFF; a surrogate is encoded as is,
// which is not well-formed: callers that hold surrogates decide what they mean).
inline void append(std::string& out, uint32_t cp) {
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

inline bool is_valid(std::string_view text) {
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = decode(text, pos, &cp);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

// Number of bytes at the end of text that form a proper prefix of a well-formed
// multi-byte sequence (0-3): what a streaming decoder must hold back until more arrive.
inline size_t incomplete_tail(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    const uint8_t b = s[n - k];
    if (detail::is_continuation(b)) continue;  // look further back for the lead byte
    const size_t len = detail::sequence_length(b);
    if (len <= k) return 0;  // ASCII, an invalid lead, or a sequence that is already complete
    // b announces len > k bytes: hold back only if what we have is a valid prefix.
    if (k >= 2) {
      const detail::ByteRange second = detail::second_byte_range(b);
      if (s[n - k + 1] < second.lo || s[n - k + 1] > second.hi) return 0;
    }
    return k;
  }
  return 0;
}

}  // namespace spillway::utf8
