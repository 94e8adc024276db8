// Real models' chat templates render byte for byte as Python jinja2 renders them in
// transformers (../shared/testdata/chat_templates, made by render_with_jinja2.py).
#include <gtest/gtest.h>

#include "api/chat_template_test_util.h"

namespace spillway::api {
namespace {

using testing::chat_templates_dir;
using testing::fixed_strftime;
using testing::read_file;

void check_golden(const std::string& name) {
  const std::string source = read_file(chat_templates_dir() + name + ".jinja");
  ASSERT_FALSE(source.empty()) << "missing " << name << ".jinja";
  const auto cases = nlohmann::ordered_json::parse(read_file(chat_templates_dir() + name + ".expected.json"));
  ASSERT_TRUE(cases.is_array());
  ASSERT_GE(cases.size(), 3u);
  auto tmpl = ChatTemplate::parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.error().message;
  EXPECT_EQ(tmpl->source(), source);
  for (const auto& c : cases) {
    SCOPED_TRACE(name + " / " + c["name"].get<std::string>());
    ChatTemplateInputs in;
    in.messages = c["messages"];
    in.tools = c["tools"];
    in.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (!c["bos_token"].is_null()) in.bos_token = c["bos_token"].get<std::string>();
    if (!c["eos_token"].is_null()) in.eos_token = c["eos_token"].get<std::string>();
    ASSERT_EQ(c["strftime_now"], "2024-07-26T12:00:00");
    in.strftime_now = fixed_strftime;
    const auto out = tmpl->render(in);
    if (c["expected"].is_null()) {
      ASSERT_FALSE(out.ok()) << "expected an exception, got:\n" << *out;
      EXPECT_EQ(out.error().message, c["expected_exception"].get<std::string>());
    } else {
      ASSERT_TRUE(out.ok()) << out.error().message;
      EXPECT_EQ(*out, c["expected"].get<std::string>());
    }
  }
}

TEST(ChatTemplateGolden, Llama31) { check_golden("llama-3.1"); }
TEST(ChatTemplateGolden, Llama32) { check_golden("llama-3.2"); }
TEST(ChatTemplateGolden, Qwen25) { check_golden("qwen2.5"); }
TEST(ChatTemplateGolden, Qwen3) { check_golden("qwen3"); }
TEST(ChatTemplateGolden, MistralNemo) { check_golden("mistral-nemo"); }
TEST(ChatTemplateGolden, Gemma2) { check_golden("gemma-2"); }
TEST(ChatTemplateGolden, Phi35) { check_golden("phi-3.5"); }
TEST(ChatTemplateGolden, DeepseekR1DistillQwen) { check_golden("deepseek-r1-distill-qwen"); }
TEST(ChatTemplateGolden, Hermes2ProToolUse) { check_golden("hermes-2-pro-tool-use"); }
TEST(ChatTemplateGolden, GptOss) { check_golden("gpt-oss"); }

}  // namespace
}  // namespace spillway::api
