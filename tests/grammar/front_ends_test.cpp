// Unit tests of each front end (regex, choice, GBNF, JSON Schema) through the byte-level
// matcher: accept / reject strings.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "test_helpers.h"

namespace spillway::grammar {
namespace {

using testing::accepts;
using testing::must_compile;
using ojson = nlohmann::ordered_json;

TEST(Regex, LiteralsClassesQuantifiers) {
  auto g = must_compile(regex_grammar(R"([a-c]+\d{2,3}(x|yz)?)"));
  EXPECT_TRUE(accepts(g, "ab12"));
  EXPECT_TRUE(accepts(g, "c123yz"));
  EXPECT_TRUE(accepts(g, "a999x"));
  EXPECT_FALSE(accepts(g, "ab1"));
  EXPECT_FALSE(accepts(g, "ab1234"));
  EXPECT_FALSE(accepts(g, "d12"));
  EXPECT_FALSE(accepts(g, "a12y"));
}

TEST(Regex, DotAndNegatedClassMatchNonAscii) {
  auto g = must_compile(regex_grammar("[^0-9]."));
  EXPECT_TRUE(accepts(g, "\xC3\xA9\xE2\x82\xAC"));  // é€
  EXPECT_FALSE(accepts(g, "1a"));
  EXPECT_FALSE(accepts(g, "a\n"));
}

TEST(Regex, UnsupportedFeaturesAreErrors) {
  EXPECT_FALSE(regex_grammar("(?=a)b").ok());
  EXPECT_FALSE(regex_grammar(R"((a)\1)").ok());
  EXPECT_FALSE(regex_grammar("a(b").ok());
  EXPECT_NE(regex_grammar("(?<n>a)").error().message.find("lookaround or named group"), std::string::npos);
}

TEST(Choice, ExactlyOneOfTheChoices) {
  auto g = must_compile(Result<Grammar>(choice_grammar({"yes", "no", "maybe"})));
  EXPECT_TRUE(accepts(g, "yes"));
  EXPECT_TRUE(accepts(g, "maybe"));
  EXPECT_FALSE(accepts(g, "ye"));
  EXPECT_FALSE(accepts(g, "yesno"));
}

TEST(Gbnf, ArithmeticGrammar) {
  auto g = must_compile(gbnf_grammar(R"g(
root  ::= expr
expr  ::= term (("+" | "-") term)*   # sums
term  ::= factor ("*" factor)*
factor ::= [0-9]+ | "(" expr ")"
)g"));
  EXPECT_TRUE(accepts(g, "1+2*3"));
  EXPECT_TRUE(accepts(g, "(1+2)*30-4"));
  EXPECT_FALSE(accepts(g, "1+"));
  EXPECT_FALSE(accepts(g, "(1+2"));
}

TEST(Gbnf, UnicodeClassesAndRepetition) {
  auto g = must_compile(gbnf_grammar("root ::= [α-ω]{2,3} [^a-z]\n"));
  EXPECT_TRUE(accepts(g, "αβ1"));
  EXPECT_TRUE(accepts(g, "αβγ€"));
  EXPECT_FALSE(accepts(g, "α1"));
  EXPECT_FALSE(accepts(g, "αβa"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  EXPECT_NE(gbnf_grammar("rot ::= \"a\"").error().message.find("root"), std::string::npos);
  auto undefined = CompiledGrammar::compile(*gbnf_grammar("root ::= missing"));
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.error().message.find("missing"), std::string::npos);
  auto left = CompiledGrammar::compile(*gbnf_grammar("root ::= root \"a\" | \"b\""));
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.error().message.find("left-recursive"), std::string::npos);
}

std::shared_ptr<const CompiledGrammar> schema(const char* text, JsonSchemaOptions o = {}) {
  return must_compile(json_schema_grammar(ojson::parse(text), o));
}

TEST(JsonSchema, ObjectPropertiesInSchemaOrder) {
  auto g = schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
                      "required":["name"],"additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"name":"Bo","age":3})"));
  EXPECT_TRUE(accepts(g, R"({ "name": "Bo" })"));
  EXPECT_TRUE(accepts(g, "{\n  \"name\": \"x\",\n  \"age\": -1\n}"));
  EXPECT_FALSE(accepts(g, R"({"age":3})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Bo","age":3.5})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Bo","other":1})"));
  EXPECT_FALSE(accepts(g, R"({"name":"Bo",})"));
}

TEST(JsonSchema, AdditionalPropertiesAllowedByDefault) {
  auto g = schema(R"({"properties":{"a":{"type":"integer"}},"required":["a"]})");
  EXPECT_TRUE(accepts(g, R"({"x":"y","a":1,"ab":[1,{}]})"));
  EXPECT_FALSE(accepts(g, R"({"x":"y","a":"1"})"));
  EXPECT_FALSE(accepts(g, R"({"x":"y"})"));
  EXPECT_TRUE(accepts(g, R"("not an object")"));
  auto strict = schema(R"({"type":"object","properties":{"a":{"type":"integer"}}})", {.strict = true});
  EXPECT_FALSE(accepts(strict, R"({"x":1})"));
}

TEST(JsonSchema, IntegerRanges) {
  auto g = schema(R"({"type":"integer","minimum":-15,"exclusiveMaximum":120})");
  for (int v = -40; v < 200; ++v) EXPECT_EQ(accepts(g, std::to_string(v)), v >= -15 && v < 120) << v;
  EXPECT_FALSE(accepts(g, "007"));
  auto big = schema(R"({"type":"integer","minimum":1000})");
  EXPECT_TRUE(accepts(big, "123456"));
  EXPECT_FALSE(accepts(big, "999"));
}

TEST(JsonSchema, NumberBounds) {
  auto g = schema(R"({"type":"number","exclusiveMinimum":0,"maximum":5})");
  EXPECT_TRUE(accepts(g, "0.001"));
  EXPECT_TRUE(accepts(g, "5"));
  EXPECT_TRUE(accepts(g, "5.00"));
  EXPECT_TRUE(accepts(g, "4.999"));
  EXPECT_FALSE(accepts(g, "0"));
  EXPECT_FALSE(accepts(g, "0.0"));
  EXPECT_FALSE(accepts(g, "5.01"));
  EXPECT_FALSE(accepts(g, "-1"));
}

TEST(JsonSchema, StringsLengthPatternFormat) {
  auto len = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(accepts(len, R"("ab")"));
  EXPECT_TRUE(accepts(len, R"("a\u00e9c")"));
  EXPECT_TRUE(accepts(len, "\"\xC3\xA9\xC3\xA9\""));
  EXPECT_FALSE(accepts(len, R"("a")"));
  EXPECT_FALSE(accepts(len, R"("abcd")"));
  auto pat = schema(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})");
  EXPECT_TRUE(accepts(pat, R"("AB-12")"));
  EXPECT_FALSE(accepts(pat, R"("AB-")"));
  auto search = schema(R"({"type":"string","pattern":"o\""})");
  EXPECT_TRUE(accepts(search, R"("foo\"bar")"));
  EXPECT_FALSE(accepts(search, R"("foo")"));
  auto dt = schema(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(accepts(dt, R"("2024-02-29T13:01:02.5Z")"));
  EXPECT_FALSE(accepts(dt, R"("2024-13-01T00:00:00Z")"));
  auto date = schema(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(accepts(date, R"("2024-02-29")"));
  EXPECT_TRUE(accepts(date, R"("2000-02-29")"));
  EXPECT_FALSE(accepts(date, R"("1900-02-29")"));
  EXPECT_FALSE(accepts(date, R"("2023-02-29")"));
  EXPECT_FALSE(accepts(date, R"("2023-11-31")"));
  EXPECT_TRUE(accepts(date, R"("2023-12-31")"));
  auto uuid = schema(R"({"format":"uuid"})");
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567")"));
  EXPECT_TRUE(accepts(uuid, "12"));  // format applies to strings only
}

TEST(JsonSchema, ArraysTuplesAndCounts) {
  auto g = schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],
                      "items":{"type":"null"},"minItems":1,"maxItems":3})");
  EXPECT_TRUE(accepts(g, R"(["a"])"));
  EXPECT_TRUE(accepts(g, R"(["a", true, null])"));
  EXPECT_FALSE(accepts(g, R"([])"));
  EXPECT_FALSE(accepts(g, R"(["a",true,null,null])"));
  EXPECT_FALSE(accepts(g, R"([1])"));
}

TEST(JsonSchema, RecursiveRefsAnyOfNullable) {
  auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],
      "additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(accepts(g, R"({"v":1,"next":{"v":2,"next":null}})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"next":{"v":2}})"));
  auto n = schema(R"({"type":["string","null"]})");
  EXPECT_TRUE(accepts(n, "null"));
  EXPECT_TRUE(accepts(n, R"("x")"));
  EXPECT_FALSE(accepts(n, "1"));
}

// OpenAPI's "nullable": true adds null to the types; a non-boolean value is a schema error
// (a value, not an exception: {"nullable":[]} threw from nlohmann, found by fuzz.grammar).
TEST(JsonSchema, NullableAddsNullAndMustBeBoolean) {
  auto g = schema(R"({"type":"integer","nullable":true})");
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, "7"));
  auto plain = schema(R"({"type":"integer","nullable":false})");
  EXPECT_FALSE(accepts(plain, "null"));
  for (const char* bad : {R"({"type":"integer","nullable":[]})", R"({"nullable":"yes"})",
                          R"({"properties":{"a":{"nullable":1}}})"}) {
    SchemaIssue issue;
    auto r = json_schema_grammar(ojson::parse(bad), {}, &issue);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(issue.keyword, "nullable") << bad;
  }
}

TEST(JsonSchema, AllOfOfObjectsIsMerged) {
  auto g = schema(R"({"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
                               {"properties":{"b":{"type":"integer"}},"required":["b"]}]})");
  EXPECT_TRUE(accepts(g, R"({"a":"x","b":1})"));
  EXPECT_FALSE(accepts(g, R"({"a":"x"})"));
}

TEST(JsonSchema, EnumAndConst) {
  auto g = schema(R"({"enum":["red",1,null,{"k":[1]}]})");
  EXPECT_TRUE(accepts(g, R"("red")"));
  EXPECT_TRUE(accepts(g, "1.0"));
  EXPECT_TRUE(accepts(g, R"({"k":[1]})"));
  EXPECT_FALSE(accepts(g, R"("blue")"));
}

TEST(JsonSchema, UnsupportedKeywordNamesKeywordAndPointer) {
  SchemaIssue issue;
  auto r = json_schema_grammar(ojson::parse(R"({"properties":{"a/b":{"items":{"not":{}}}}})"), {}, &issue);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(issue.keyword, "not");
  EXPECT_EQ(issue.pointer, "/properties/a~1b/items/not");
  EXPECT_NE(r.error().message.find("'not'"), std::string::npos);
  EXPECT_NE(r.error().message.find("/properties/a~1b/items/not"), std::string::npos);
  auto ref = json_schema_grammar(ojson::parse(R"({"$ref":"#/$defs/missing"})"), {}, &issue);
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(issue.keyword, "$ref");
  auto remote = json_schema_grammar(ojson::parse(R"({"$ref":"http://x/y.json"})"), {}, &issue);
  ASSERT_FALSE(remote.ok());
}

TEST(JsonSchema, GenericJsonObjectMode) {
  auto g = must_compile(Result<Grammar>(json_object_grammar()));
  EXPECT_TRUE(accepts(g, R"({"a":[1,2.5e3,{"b":null}],"c":"\u00e9\n"})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, R"({"a":01})"));
  EXPECT_FALSE(accepts(g, R"({"a":"x)"));
  EXPECT_FALSE(accepts(g, "{\"a\":\"\x01\"}"));
  // Bounded whitespace: at most two newlines and 20 blanks between tokens.
  EXPECT_TRUE(accepts(g, "{\n\n    }"));
  EXPECT_FALSE(accepts(g, "{\n\n\n}"));
}

}  // namespace
}  // namespace spillway::grammar
