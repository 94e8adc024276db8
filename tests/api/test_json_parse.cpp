// parse_json_linear against nlohmann's own parser (the reference for what a document means)
// and its additions: NUL bytes and over-deep nesting are errors, and an object with a
// million keys parses (ordered_json's parser is quadratic in the key count: this test
// would run past its ctest timeout with it).
#include <gtest/gtest.h>

#include <string>

#include "api/json_parse.h"
#include "api/requests/chat_messages.h"
#include "api/requests/chat_request.h"

namespace spillway::api {
namespace {

using json = nlohmann::ordered_json;

TEST(JsonParseLinear, SameValueAsNlohmannParse) {
  const char* documents[] = {
      R"({"a": 1, "b": [1, 2.5, -3, true, false, null], "c": {"d": "e\u00e9\ud83d\ude00"}})",
      R"([{"x": {}}, [], [[[]]], "s", 18446744073709551615, -9223372036854775808, 1e308])",
      R"({"dup": 1, "other": 2, "dup": {"nested": [3]}})",
      R"("just a string")",
      R"(  42  )",
      R"({"z": 1, "a": 2, "m": 3})",
  };
  for (const char* text : documents) {
    SCOPED_TRACE(text);
    std::optional<json> ours = parse_json_linear(text);
    ASSERT_TRUE(ours.has_value());
    const json reference = json::parse(text);
    EXPECT_EQ(*ours, reference);
    EXPECT_EQ(ours->dump(), reference.dump());  // member order included
  }
}

TEST(JsonParseLinear, RejectsWhatNlohmannRejects) {
  for (const char* text : {"", "{", "{\"a\":}", "[1,]", "{} {}", "tru", "{\"a\" 1}", "[1] x"}) {
    SCOPED_TRACE(text);
    JsonParseError error;
    EXPECT_FALSE(parse_json_linear(text, &error).has_value());
    EXPECT_FALSE(error.message.empty());
    EXPECT_TRUE(json::parse(text, nullptr, false).is_discarded());
  }
}

TEST(JsonParseLinear, NulByteIsAnErrorNotTheEnd) {
  const std::string text("{\"model\": \"m\"}\0{\"x\": 1}", 24);
  JsonParseError error;
  EXPECT_FALSE(parse_json_linear(text, &error).has_value());
  EXPECT_NE(error.message.find("NUL"), std::string::npos) << error.message;
  ApiResult<json> body = parse_json_body(text);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().status, 400);
}

TEST(JsonParseLinear, NestingIsBounded) {
  std::string ok(kMaxJsonDepth, '[');
  ok += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_linear(ok).has_value());
  std::string deep(kMaxJsonDepth + 1, '[');
  deep += std::string(kMaxJsonDepth + 1, ']');
  JsonParseError error;
  EXPECT_FALSE(parse_json_linear(deep, &error).has_value());
  EXPECT_NE(error.message.find("nesting"), std::string::npos) << error.message;
}

TEST(JsonParseLinear, MillionKeyObjectParses) {
  constexpr int kKeys = 1'000'000;
  std::string text = "{\"model\": \"m\", \"logit_bias\": {";
  for (int i = 0; i < kKeys; ++i) {
    if (i) text += ',';
    text += '"' + std::to_string(i) + "\":1";
  }
  text += "}}";
  std::optional<json> parsed = parse_json_linear(text);
  ASSERT_TRUE(parsed.has_value());
  const json& bias = (*parsed)["logit_bias"];
  ASSERT_EQ(bias.size(), size_t(kKeys));
  EXPECT_EQ(bias.begin().key(), "0");
  EXPECT_EQ(bias.find("999999")->get<int>(), 1);
}

// An array of `n` zeros: n + 1 values.
std::string zeros(size_t n) {
  std::string text = "[";
  for (size_t i = 0; i < n; ++i) text += i ? ",0" : "0";
  return text + "]";
}

TEST(JsonParseLinear, ValueCountIsBounded) {
  EXPECT_TRUE(parse_json_linear(zeros(99), nullptr, 100).has_value());
  JsonParseError error;
  EXPECT_FALSE(parse_json_linear(zeros(100), &error, 100).has_value());
  EXPECT_TRUE(error.limit);
  EXPECT_NE(error.message.find("more than 100 JSON values"), std::string::npos) << error.message;
  EXPECT_FALSE(parse_json_linear(R"({"a": [{}, {}], "b": {}})", nullptr, 4).has_value());  // 5 values
  EXPECT_TRUE(parse_json_linear(R"({"a": [{}, {}], "b": {}})", nullptr, 5).has_value());
  // Syntax errors are not limits.
  JsonParseError syntax;
  EXPECT_FALSE(parse_json_linear("[1,]", &syntax, 100).has_value());
  EXPECT_FALSE(syntax.limit);
}

// The default bound on a request body: 2-byte values ("0,") would cost 8x their text and
// more as a DOM; past kMaxJsonValues the body is a 400 that names the limit.
TEST(JsonParseLinear, RequestBodiesHaveAtMostKMaxJsonValues) {
  const std::string at_limit = R"({"p": )" + zeros(kMaxJsonValues - 2) + "}";  // object + array + zeros
  EXPECT_TRUE(parse_json_body(at_limit));
  const std::string over = R"({"p": )" + zeros(kMaxJsonValues - 1) + "}";
  ApiResult<json> body = parse_json_body(over);
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().status, 400);
  EXPECT_NE(body.error().message.find(std::to_string(kMaxJsonValues) + " JSON values"), std::string::npos)
      << body.error().message;
  EXPECT_EQ(body.error().message.find("not valid JSON"), std::string::npos) << body.error().message;
}

std::string chat_with_messages(size_t n) {
  std::string text = R"({"model": "m", "messages": [)";
  for (size_t i = 0; i < n; ++i) text += i ? R"(,{"role":"user","content":""})" : R"({"role":"user","content":""})";
  return text + "]}";
}

// Each message is copied into the template form and the Jinja values: their count is bounded.
TEST(ChatMessagesLimit, AtMostKMaxChatMessages) {
  ApiResult<ChatRequest> ok = parse_chat_request(chat_with_messages(kMaxChatMessages));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->messages.size(), kMaxChatMessages);
  ApiResult<ChatRequest> over = parse_chat_request(chat_with_messages(kMaxChatMessages + 1));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().status, 400);
  EXPECT_EQ(over.error().param, "messages");
  EXPECT_EQ(over.error().code, "array_above_max_length");
  EXPECT_NE(over.error().message.find("maximum length " + std::to_string(kMaxChatMessages)), std::string::npos)
      << over.error().message;
}

}  // namespace
}  // namespace spillway::api
