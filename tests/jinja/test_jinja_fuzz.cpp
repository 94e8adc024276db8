// Robustness on malformed templates: every prefix and many random byte mutations of the
// real templates parse or fail with a syntax error naming a line, and render or fail with
// an error, deterministically and without crashing (CI runs this under ASan + UBSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "api/chat_template_test_util.h"

namespace spillway::api {
namespace {

using testing::chat_templates_dir;
using testing::fixed_strftime;
using testing::read_file;

const char* const kTemplates[] = {"llama-3.1", "llama-3.2", "qwen2.5", "qwen3", "mistral-nemo",
                                  "gemma-2", "phi-3.5", "deepseek-r1-distill-qwen", "hermes-2-pro-tool-use",
                                  "gpt-oss"};

ChatTemplateInputs tool_call_inputs() {
  const auto cases = nlohmann::ordered_json::parse(read_file(chat_templates_dir() + "qwen2.5.expected.json"));
  ChatTemplateInputs in;
  in.messages = cases[3]["messages"];
  in.tools = cases[3]["tools"];
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.strftime_now = fixed_strftime;
  return in;
}

// Parses and renders; returns a summary that must be identical on a second run.
std::string exercise(const std::string& source, const ChatTemplateInputs& in, int& parsed, int& rendered) {
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) {
    const std::string& m = tmpl.error().message;
    EXPECT_NE(m.find("line "), std::string::npos) << m;
    return "P:" + m;
  }
  ++parsed;
  auto out = tmpl->render(in);
  if (!out.ok()) {
    EXPECT_FALSE(out.error().message.empty());
    return "R:" + out.error().message;
  }
  ++rendered;
  return "O:" + *out;
}

TEST(JinjaFuzz, EveryPrefixOfEveryTemplate) {
  const ChatTemplateInputs in = tool_call_inputs();
  for (const char* name : kTemplates) {
    const std::string source = read_file(chat_templates_dir() + name + ".jinja");
    ASSERT_FALSE(source.empty());
    int parsed = 0, rendered = 0;
    // Every prefix for short templates; a stride keeping ~1500 prefixes for long ones.
    const size_t stride = std::max<size_t>(1, source.size() / 1500);
    for (size_t n = 0; n <= source.size(); n += stride) exercise(source.substr(0, n), in, parsed, rendered);
    // The whole template renders a plain conversation.
    ChatTemplateInputs user = in;
    user.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
    EXPECT_EQ(exercise(source, user, parsed, rendered).rfind("O:", 0), 0u) << name;
    EXPECT_GT(parsed, 0) << name;
  }
}

TEST(JinjaFuzz, RandomMutationsAreDeterministicErrorsOrRenders) {
  const ChatTemplateInputs in = tool_call_inputs();
  std::mt19937 rng(12345);
  const std::string alphabet = "{}%#-+()[]|.,:'\"\\ \n\tabcxyz019=<>!*~/";
  // SPILLWAY_FUZZ_TRIALS raises the number of mutations per template for longer local runs.
  const char* env = std::getenv("SPILLWAY_FUZZ_TRIALS");
  const int trials = env != nullptr ? std::max(150, std::atoi(env)) : 150;
  int total = 0, parsed = 0, rendered = 0;
  for (const char* name : kTemplates) {
    const std::string source = read_file(chat_templates_dir() + name + ".jinja");
    for (int trial = 0; trial < trials; ++trial) {
      std::string s = source;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        const size_t pos = rng() % s.size();
        switch (rng() % 4) {
          case 0: s[pos] = static_cast<char>(rng() % 256); break;
          case 1: s[pos] = alphabet[rng() % alphabet.size()]; break;
          case 2: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
          default: s.erase(pos, 1 + rng() % 8); break;
        }
      }
      ++total;
      int p1 = 0, r1 = 0;
      const std::string first = exercise(s, in, p1, r1);
      const std::string second = exercise(s, in, parsed, rendered);
      EXPECT_EQ(first, second) << name << " trial " << trial;
    }
  }
  EXPECT_EQ(total, 10 * trials);
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rendered, 50);
}

}  // namespace
}  // namespace spillway::api
