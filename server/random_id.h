// Random identifiers for responses ("chatcmpl-...") and tool calls ("call_...").
// Thread-safe (a generator per thread).
#pragma once

#include <random>
#include <string>
#include <string_view>

namespace spillway::server {

inline std::string random_id(std::string_view prefix, size_t length = 24) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id(prefix);
  for (size_t i = 0; i < length; ++i) id += kAlphabet[pick(rng)];
  return id;
}

}  // namespace spillway::server
