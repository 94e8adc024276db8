// UTF-8 helpers for what goes into JSON: token pieces can be partial UTF-8 sequences.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::api {

// `text` with every invalid or truncated UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

// The byte values, as OpenAI's logprobs "bytes" field.
std::vector<int> utf8_bytes(std::string_view text);

// Number of code points in valid UTF-8 text (each invalid byte counts as one), as the
// character offsets of completions' text_offset.
size_t code_point_count(std::string_view text);

}  // namespace spillway::api
