// Writers of Hugging Face model files for tests: safetensors files (well-formed, or with a
// header given verbatim to make broken ones) and a small byte-level BPE tokenizer.json.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace spillway::testing {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;           // "F32", "BF16", ...
  std::vector<int64_t> shape;  // safetensors (row-major) order
  std::vector<uint8_t> bytes;
};

// Writes `header_text` (padded with spaces to a multiple of `pad_to` bytes) after its
// 8-byte length, then `data`.
inline void write_safetensors_raw(const std::filesystem::path& path, std::string header_text,
                                  const std::vector<uint8_t>& data, size_t pad_to = 8) {
  while (header_text.size() % pad_to != 0) header_text += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t header_len = header_text.size();
  out.write(reinterpret_cast<const char*>(&header_len), 8);
  out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// The header a well-formed file of these entries has (data laid out in order, no gaps).
inline nlohmann::ordered_json safetensors_header(const std::vector<SafetensorsEntry>& entries) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    header[e.name] = {{"dtype", e.dtype},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  return header;
}

inline std::vector<uint8_t> safetensors_data(const std::vector<SafetensorsEntry>& entries) {
  std::vector<uint8_t> data;
  for (const SafetensorsEntry& e : entries) data.insert(data.end(), e.bytes.begin(), e.bytes.end());
  return data;
}

inline void write_safetensors(const std::filesystem::path& path,
                              const std::vector<SafetensorsEntry>& entries) {
  write_safetensors_raw(path, safetensors_header(entries).dump(), safetensors_data(entries));
}

// GPT-2's byte -> printable code point map (bytes_to_unicode), as UTF-8 strings.
inline std::vector<std::string> byte_level_alphabet() {
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    out[b] = s;
  }
  return out;
}

// A small GPT-2-style byte-level BPE tokenizer.json: the 256 byte symbols, a few merges
// ("Ġt", "he", "Ġthe"), and "<|endoftext|>" as a special added token.
inline void write_byte_level_tokenizer_json(const std::filesystem::path& dir) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  const std::vector<std::string> alphabet = byte_level_alphabet();
  int id = 0;
  for (const std::string& symbol : alphabet) vocab[symbol] = id++;
  const std::string space = alphabet[' '];  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {space, "t"}, {"h", "e"}, {space + "t", "he"}};
  nlohmann::ordered_json merge_list = nlohmann::ordered_json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  const int eot = id++;
  vocab["<|endoftext|>"] = eot;
  nlohmann::ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", eot}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
         {"rstrip", false}, {"normalized", false}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
        {"use_regex", true}}},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
        {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
        {"merges", merge_list}}},
  };
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump(2);
}

}  // namespace spillway::testing
