// server/structured_output.h: what the compiled constraints accept, checked against the
// wire: each tool-call syntax's grammar accepts the calls that api::parse_tool_calls reads
// back (and refuses other names / bad arguments), tools' $defs and recursive $refs survive
// being combined, and compile errors are 400s whose param names the field and pointer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/requests/chat_request.h"
#include "api/tool_calls.h"
#include "grammar/matcher.h"
#include "server/structured_output.h"

namespace spillway::server {
namespace {

using json = nlohmann::ordered_json;

api::ChatRequest request(const json& body) {
  json b = body;
  b["model"] = "m";
  b["messages"] = json::array({{{"role", "user"}, {"content", "x"}}});
  auto r = api::parse_chat_request(b.dump());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return *r;
}

bool accepts(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& text) {
  grammar::Matcher m(g, nullptr);
  return m.accept_bytes(text) && m.is_accepting();
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "tree", "parameters": {"type": "object",
    "properties": {"root": {"$ref": "#/$defs/node"}}, "required": ["root"],
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}}}}
])");

TEST(StructuredOutput, EachToolCallSyntaxRoundTripsThroughTheParser) {
  const std::vector<std::string> names = {"get_weather", "tree"};
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}})";
  const std::string tree = R"({"name": "tree", "arguments": {"root": {"v": 1, "kids": [{"v": 2}]}}})";
  struct Case {
    ToolCallSyntax syntax;
    std::string one, two, bad;
  };
  const std::vector<Case> cases = {
      {ToolCallSyntax::Hermes, "<tool_call>\n" + weather + "\n</tool_call>",
       "<tool_call>\n" + weather + "\n</tool_call>\n<tool_call>\n" + tree + "\n</tool_call>",
       "<tool_call>\n" R"({"name": "nope", "arguments": {}})" "\n</tool_call>"},
      {ToolCallSyntax::Mistral, "[TOOL_CALLS][" + weather + "]", "[TOOL_CALLS][" + weather + ", " + tree + "]",
       "[TOOL_CALLS][" R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "k"}})" "]"},
      {ToolCallSyntax::Llama3Json, R"({"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}})",
       R"({"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}};{"name": "tree", "parameters": {"root": {"v": 3}}})",
       R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.syntax));
    api::ChatRequest required = request({{"tools", kTools}, {"tool_choice", "required"}});
    GrammarResult g = compile_tool_calls(required, c.syntax);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(accepts(*g, c.one));
    EXPECT_TRUE(accepts(*g, c.two));
    EXPECT_FALSE(accepts(*g, c.bad));
    EXPECT_FALSE(accepts(*g, ""));
    EXPECT_EQ(api::parse_tool_calls(c.one, names).tool_calls.size(), 1u);
    EXPECT_EQ(api::parse_tool_calls(c.two, names).tool_calls.size(), 2u);
    // parallel_tool_calls false: exactly one call.
    api::ChatRequest single = request({{"tools", kTools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}});
    GrammarResult g1 = compile_tool_calls(single, c.syntax);
    ASSERT_TRUE(g1.ok());
    EXPECT_TRUE(accepts(*g1, c.one));
    EXPECT_FALSE(accepts(*g1, c.two));
    // A named function: only that one.
    api::ChatRequest named = request({{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "tree"}}}}}});
    GrammarResult gn = compile_tool_calls(named, c.syntax);
    ASSERT_TRUE(gn.ok());
    EXPECT_FALSE(accepts(*gn, c.one));
  }
}

TEST(StructuredOutput, SchemaErrorsNameTheFieldAndPointer) {
  api::ChatRequest bad = request(json::parse(R"({"tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"type": "string", "format": "ipv9"}}}}}],
      "tool_choice": "required"})"));
  GrammarResult g = compile_tool_calls(bad, ToolCallSyntax::Hermes);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().status, 400);
  EXPECT_EQ(g.error().param, "tools[0].function.parameters#/properties/x/format");
  EXPECT_NE(g.error().message.find("format"), std::string::npos);

  api::StructuredOutput s;
  s.kind = api::StructuredOutput::Kind::JsonSchema;
  s.text = R"({"type": "object", "properties": {"a": {"type": "array", "contains": {"type": "integer"}}}})";
  s.param = "response_format.json_schema.schema";
  g = compile_structured_output(s);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().param, "response_format.json_schema.schema#/properties/a/contains");
  EXPECT_EQ(g.error().type, "invalid_request_error");

  s.kind = api::StructuredOutput::Kind::Regex;
  s.text = "[a-";
  s.param = "guided_regex";
  g = compile_structured_output(s);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().param, "guided_regex");
}

TEST(StructuredOutput, CompilesAreCachedAndCounted) {
  api::StructuredOutput s;
  s.kind = api::StructuredOutput::Kind::Choice;
  s.choices = {"counted-a", "counted-b"};
  s.param = "guided_choice";
  const GrammarCompileCounters before = grammar_compile_counters();
  GrammarResult a = compile_structured_output(s);
  GrammarResult b = compile_structured_output(s);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  const GrammarCompileCounters after = grammar_compile_counters();
  EXPECT_EQ(after.cache_misses - before.cache_misses, 1u);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 1u);
  EXPECT_EQ(after.compiles - before.compiles, 1u);
  EXPECT_TRUE(accepts(*a, "counted-b"));
  EXPECT_FALSE(accepts(*a, "counted-c"));
}

// A regex whose compile needs more work than grammar::CompileLimits::max_work (chains of '.'
// after a loop: ~100k automaton states) is a 400 naming the field, not a slow request. Under
// sanitizers the wall-clock cap may stop it first: also a 400.
TEST(StructuredOutput, TooComplexRegexIsA400) {
  api::StructuredOutput s;
  s.kind = api::StructuredOutput::Kind::Regex;
  s.text = "[a-z]*x............opic power sch";
  s.param = "guided_regex";
  GrammarResult g = compile_structured_output(s);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().status, 400);
  EXPECT_EQ(g.error().param, "guided_regex");
  const std::string& m = g.error().message;
  EXPECT_TRUE(m.find("too complex") != std::string::npos || m.find("longer than its cap") != std::string::npos) << m;
}

}  // namespace
}  // namespace spillway::server
