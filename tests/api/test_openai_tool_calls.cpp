// Tool-call parsing of model output (Hermes/Qwen, Mistral, Llama 3 JSON) and its
// streaming filter.
#include <gtest/gtest.h>

#include "api/tool_calls.h"

namespace spillway::api {
namespace {

const std::vector<std::string> kTools = {"get_weather", "search"};

TEST(ToolCalls, PlainTextIsContent) {
  AssistantOutput out = parse_tool_calls("The weather is nice.", kTools);
  EXPECT_EQ(out.content, "The weather is nice.");
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(ToolCalls, HermesQwen) {
  AssistantOutput out = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", "
      "\"arguments\": {\"q\": \"x\"}}\n</tool_call>",
      kTools);
  EXPECT_EQ(out.content, "Let me check.");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(out.tool_calls[1].name, "search");
  EXPECT_EQ(out.tool_calls[1].arguments, R"({"q":"x"})");
}

TEST(ToolCalls, HermesUnterminatedAndStringArguments) {
  AssistantOutput out = parse_tool_calls(
      "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": 1}\"}", kTools);
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"q":1})");
}

TEST(ToolCalls, HermesWithBrokenJsonStaysContent) {
  const std::string text = "<tool_call>{\"name\": \"search\", \"arguments\": {</tool_call>";
  AssistantOutput out = parse_tool_calls(text, kTools);
  EXPECT_EQ(out.content, text);
  EXPECT_TRUE(out.tool_calls.empty());
}

TEST(ToolCalls, MistralArray) {
  AssistantOutput out = parse_tool_calls(
      "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
      "{\"name\": \"search\", \"arguments\": {}}]",
      kTools);
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(out.tool_calls[1].name, "search");
}

TEST(ToolCalls, MistralArgsFormat) {
  AssistantOutput out = parse_tool_calls(
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]search[CALL_ID]abc123[ARGS]{}",
      kTools);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city":"Rome"})");
  EXPECT_EQ(out.tool_calls[1].name, "search");
  EXPECT_EQ(out.tool_calls[1].arguments, "{}");
}

TEST(ToolCalls, Llama3Json) {
  AssistantOutput out = parse_tool_calls(
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Lima\"}}", kTools);
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(out.tool_calls[0].arguments, R"({"city":"Lima"})");

  out = parse_tool_calls(
      "{\"name\": \"search\", \"parameters\": {\"q\": \"a\"}}; {\"name\": \"search\", "
      "\"parameters\": {\"q\": \"b\"}}",
      kTools);
  ASSERT_EQ(out.tool_calls.size(), 2u);
  EXPECT_EQ(out.tool_calls[1].arguments, R"({"q":"b"})");
}

TEST(ToolCalls, JsonThatIsNotACallOfAKnownToolStaysContent) {
  const std::string answer = "{\"name\": \"Alice\", \"parameters\": {\"age\": 3}}";
  AssistantOutput out = parse_tool_calls(answer, kTools);
  EXPECT_EQ(out.content, answer);
  EXPECT_TRUE(out.tool_calls.empty());
}

std::string stream_all(ToolCallStreamFilter& f, const std::vector<std::string>& pieces,
                       AssistantOutput& end) {
  std::string sent;
  for (const std::string& p : pieces) sent += f.push(p);
  end = f.finish();
  return sent + end.content;
}

TEST(ToolCallStreamFilter, PlainTextPassesThroughAsItComes) {
  ToolCallStreamFilter f(kTools);
  EXPECT_EQ(f.push("Hello"), "Hello");
  EXPECT_EQ(f.push(" world <"), " world") << "a possible marker start and the space before it wait";
  EXPECT_EQ(f.push("b>"), " <b>");
  AssistantOutput end = f.finish();
  EXPECT_EQ(end.content, "");
  EXPECT_TRUE(end.tool_calls.empty());
}

TEST(ToolCallStreamFilter, StreamedContentEqualsTheWholeParse) {
  const std::string text =
      "Sure.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>";
  std::vector<std::string> pieces;
  for (size_t i = 0; i < text.size(); i += 3) pieces.push_back(text.substr(i, 3));
  ToolCallStreamFilter f(kTools);
  AssistantOutput end;
  const std::string sent = stream_all(f, pieces, end);
  const AssistantOutput whole = parse_tool_calls(text, kTools);
  EXPECT_EQ(sent, whole.content);
  EXPECT_EQ(sent, "Sure.");
  ASSERT_EQ(end.tool_calls.size(), 1u);
  EXPECT_EQ(end.tool_calls[0].arguments, R"({"q":"x"})");
}

TEST(ToolCallStreamFilter, LeadingJsonIsHeldUntilTheEnd) {
  ToolCallStreamFilter f(kTools);
  EXPECT_EQ(f.push("{\"name\": \"search\", "), "");
  EXPECT_EQ(f.push("\"parameters\": {}}"), "");
  AssistantOutput end = f.finish();
  EXPECT_EQ(end.content, "");
  ASSERT_EQ(end.tool_calls.size(), 1u);

  ToolCallStreamFilter g(kTools);
  EXPECT_EQ(g.push("{\"x\": 1}"), "");
  end = g.finish();
  EXPECT_EQ(end.content, "{\"x\": 1}") << "not a call: all of it is content at the end";
  EXPECT_TRUE(end.tool_calls.empty());
}

TEST(ToolCallStreamFilter, NonCallAfterMarkerIsContentAtTheEnd) {
  const std::string text = "a [TOOL_CALLS] nonsense";
  ToolCallStreamFilter f(kTools);
  AssistantOutput end;
  EXPECT_EQ(stream_all(f, {"a [TOOL_", "CALLS] non", "sense"}, end), text);
  EXPECT_TRUE(end.tool_calls.empty());
}

TEST(ToolCalls, RenderToolCalls) {
  const ToolCall call{"call_9", "f", "{}"};
  EXPECT_EQ(render_tool_calls({&call, 1}), nlohmann::ordered_json::parse(R"([
    {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}])"));
}

}  // namespace
}  // namespace spillway::api
