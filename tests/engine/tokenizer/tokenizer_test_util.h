// Helpers shared by the tokenizer tests: llama.cpp's vocab test files
// (../shared/testdata/vocab/README.md) and loading a tokenizer from a GGUF file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "support/paths.h"

namespace spillway::engine::test {

using spillway::test_paths::testdata;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct VocabCase {
  std::string input;
  std::vector<int32_t> expected;
};

// One input per "\n__ggml_vocab_test__\n" separator; .out line i holds input i's ids.
inline std::vector<VocabCase> read_vocab_cases(const std::string& gguf_path) {
  const std::string inp = read_file(gguf_path + ".inp");
  const std::string out = read_file(gguf_path + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  size_t pos = 0;
  for (size_t next; (next = inp.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
    cases.push_back({inp.substr(pos, next - pos), {}});
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(lines, line)) {
      ADD_FAILURE() << gguf_path << ".out has fewer lines than inputs";
      break;
    }
    std::istringstream ids(line);
    for (int64_t id; ids >> id;) c.expected.push_back(static_cast<int32_t>(id));
  }
  return cases;
}

inline std::unique_ptr<ModelSource> open_vocab_source(const std::string& path) {
  auto source = open_gguf(path);
  EXPECT_TRUE(source.ok()) << (source.ok() ? "" : source.error().message);
  return source.ok() ? std::move(*source) : nullptr;
}

inline std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  auto source = open_vocab_source(path);
  if (!source) return nullptr;
  auto tok = Tokenizer::from_metadata(source->metadata(), path);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(*tok) : nullptr;
}

inline std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "]";
}

// Shows control characters so a failing case is readable.
inline std::string quoted(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '\n') s += "\\n";
    else if (c == '\t') s += "\\t";
    else if (c == '\r') s += "\\r";
    else s += c;
  }
  return s + "\"";
}

}  // namespace spillway::engine::test
