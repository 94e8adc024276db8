// The fallback templates render each family's prompt format: where a real template of the
// family is in the golden data and formats the conversation the same way, the outputs are
// compared with jinja2's render of it; the rest are hand-checked strings.
#include <gtest/gtest.h>

#include "api/chat_template_test_util.h"

namespace spillway::api {
namespace {

using testing::chat_templates_dir;
using testing::fixed_strftime;
using testing::read_file;

nlohmann::ordered_json golden(const std::string& name) {
  return nlohmann::ordered_json::parse(read_file(chat_templates_dir() + name + ".expected.json"));
}

const nlohmann::ordered_json& find_case(const nlohmann::ordered_json& cases, const std::string& name) {
  for (const auto& c : cases) {
    if (c["name"] == name) return c;
  }
  static const nlohmann::ordered_json none;
  return none;
}

std::string render_builtin(const std::string& family, const nlohmann::ordered_json& messages,
                           std::optional<std::string> bos, std::optional<std::string> eos,
                           bool add_generation_prompt = true) {
  const auto source = builtin_chat_template(family);
  EXPECT_TRUE(source.has_value()) << family;
  if (!source) return {};
  auto tmpl = ChatTemplate::parse(*source);
  EXPECT_TRUE(tmpl.ok()) << family << ": " << tmpl.error().message;
  if (!tmpl.ok()) return {};
  ChatTemplateInputs in;
  in.messages = messages;
  in.bos_token = std::move(bos);
  in.eos_token = std::move(eos);
  in.add_generation_prompt = add_generation_prompt;
  in.strftime_now = fixed_strftime;
  auto out = tmpl->render(in);
  if (!out.ok()) return "ERROR: " + out.error().message;
  return *out;
}

nlohmann::ordered_json conversation(const std::string& name) { return find_case(golden("qwen2.5"), name)["messages"]; }

TEST(BuiltinChatTemplates, UnknownFamily) {
  EXPECT_FALSE(builtin_chat_template("nope").has_value());
  EXPECT_FALSE(builtin_chat_template("").has_value());
}

TEST(BuiltinChatTemplates, Phi3MatchesPhi35) {
  for (const auto& c : golden("phi-3.5")) {
    EXPECT_EQ(render_builtin("phi3", c["messages"], "<s>", "<|endoftext|>"), c["expected"].get<std::string>())
        << c["name"];
  }
  EXPECT_EQ(render_builtin("phi3", conversation("user"), "<s>", "<|endoftext|>", false),
            "<|user|>\nHello! Write a haiku about llamas.<|end|>\n<|endoftext|>");
}

TEST(BuiltinChatTemplates, GemmaMatchesGemma2WithoutSystem) {
  const auto cases = golden("gemma-2");
  for (const char* name : {"user", "multi-turn"}) {
    const auto& c = find_case(cases, name);
    EXPECT_EQ(render_builtin("gemma", c["messages"], "<bos>", "<eos>"), c["expected"].get<std::string>()) << name;
  }
  // Gemma 2 rejects a system message; the fallback folds it into the first user turn.
  EXPECT_EQ(render_builtin("gemma", conversation("system+user"), "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nWhat is the capital of France?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(BuiltinChatTemplates, ChatmlMatchesQwen25WithASystemMessage) {
  const auto cases = golden("qwen2.5");
  const auto& c = find_case(cases, "system+user");
  EXPECT_EQ(render_builtin("chatml", c["messages"], std::nullopt, "<|im_end|>"), c["expected"].get<std::string>());
  EXPECT_EQ(render_builtin("chatml", conversation("multi-turn"), std::nullopt, "<|im_end|>"),
            "<|im_start|>user\nHi, my name is Ana.<|im_end|>\n<|im_start|>assistant\nHello Ana! How can I help you "
            "today?<|im_end|>\n<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(BuiltinChatTemplates, Llama3) {
  // Llama 3.1's template adds a dated system header that Llama 3's does not, so the
  // fallback's prompt is checked by hand.
  EXPECT_EQ(render_builtin("llama3", conversation("system+user"), "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_builtin("llama3", conversation("multi-turn"), std::nullopt, std::nullopt, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi, my name is Ana.<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello Ana! How can I help you today?<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is my name?<|eot_id|>");
  // The turns after the system header are those of Llama 3.1's template.
  const std::string llama31 = find_case(golden("llama-3.1"), "multi-turn")["expected"];
  const std::string ours = render_builtin("llama3", conversation("multi-turn"), "<|begin_of_text|>", "<|eot_id|>");
  const std::string turns = ours.substr(std::string("<|begin_of_text|>").size());
  ASSERT_GE(llama31.size(), turns.size());
  EXPECT_EQ(llama31.substr(llama31.size() - turns.size()), turns);
}

TEST(BuiltinChatTemplates, Llama2) {
  EXPECT_EQ(render_builtin("llama2", conversation("system+user"), "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nWhat is the capital of France? [/INST]");
  EXPECT_EQ(render_builtin("llama2", conversation("multi-turn"), "<s>", "</s>"),
            "<s>[INST] Hi, my name is Ana. [/INST] Hello Ana! How can I help you today? </s>"
            "<s>[INST] What is my name? [/INST]");
}

TEST(BuiltinChatTemplates, Mistral) {
  EXPECT_EQ(render_builtin("mistral", conversation("system+user"), "<s>", "</s>"),
            "<s>[INST] You are a helpful assistant.\n\nWhat is the capital of France?[/INST]");
  EXPECT_EQ(render_builtin("mistral", conversation("multi-turn"), "<s>", "</s>"),
            "<s>[INST] Hi, my name is Ana.[/INST] Hello Ana! How can I help you today?</s>"
            "[INST] What is my name?[/INST]");
  const std::string bad = render_builtin("mistral", nlohmann::ordered_json::parse(
      R"([{"role": "assistant", "content": "x"}])"), "<s>", "</s>");
  EXPECT_EQ(bad, "ERROR: After the optional system message, conversation roles must alternate "
                 "user/assistant/user/assistant/...");
}

}  // namespace
}  // namespace spillway::api
