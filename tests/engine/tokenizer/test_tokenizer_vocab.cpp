// llama.cpp's tokenizer test vectors (../shared/testdata/vocab): every input of a vocab's
// .inp must give exactly the ids of its .out (add_special = false, parse_special = false),
// and the golden prompts (../shared/testdata/golden) their recorded prompt_tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer_test_util.h"

namespace spillway::engine {
namespace {

using test::ids_to_string;
using test::quoted;
using test::testdata;

class VocabSuite : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabSuite, MatchesLlamaCpp) {
  const std::string path = testdata(std::string("vocab/ggml-vocab-") + GetParam() + ".gguf");
  auto tok = test::load_tokenizer(path);
  ASSERT_TRUE(tok);
  const auto cases = test::read_vocab_cases(path);
  ASSERT_EQ(cases.size(), 46u);
  int passed = 0;
  for (const auto& c : cases) {
    const auto ids = tok->encode(c.input, /*add_special=*/false, /*parse_special=*/false);
    if (ids == c.expected) {
      ++passed;
    } else {
      ADD_FAILURE() << GetParam() << ": input " << quoted(c.input) << "\n  expected "
                    << ids_to_string(c.expected) << "\n  got      " << ids_to_string(ids);
    }
  }
  std::cout << "[ vocab  ] " << GetParam() << ": " << passed << "/" << cases.size()
            << " cases match llama.cpp\n";
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, VocabSuite,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "deepseek-llm",
                                           "deepseek-coder", "falcon", "starcoder", "refact", "mpt",
                                           "bert-bge"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

class GoldenPrompts : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenPrompts, PromptTokensMatch) {
  const std::string name = GetParam();
  auto tok = test::load_tokenizer(testdata("models/" + name + ".gguf"));
  ASSERT_TRUE(tok);
  std::istringstream lines(test::read_file(testdata("golden/" + name + ".jsonl")));
  int records = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    const std::string prompt = j.at("prompt");
    const auto expected = j.at("prompt_tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(prompt, /*add_special=*/true, /*parse_special=*/false), expected)
        << name << ": prompt " << quoted(prompt);
    ++records;
  }
  EXPECT_EQ(records, 5);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenPrompts,
                         ::testing::Values("stories260K", "stories260K-f16", "stories260K-q8_0",
                                           "llama-tiny-peaked-f16"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace spillway::engine
