// parse_json_linear against nlohmann's own parser (the reference for what a document means)
// and its additions: NUL bytes and over-deep nesting are errors, and an object with a
// million keys parses (ordered_json's parser is quadratic in the key count: this test
// would run past its ctest timeout with it).
#include <gtest/gtest.h>

#include <string>

#include "api/json_parse.h"
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

}  // namespace
}  // namespace spillway::api
