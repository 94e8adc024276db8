// The MoBiLE request field (api/requests/moe_fields.h): the `moe` object's members, and 400s
// naming the field for unknown members and invalid values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/requests/chat_request.h"
#include "api/requests/completion_request.h"
#include "request_fixture.h"

namespace spillway::api {
namespace {

using json = nlohmann::ordered_json;

using testing::expect_400;
using testing::parse;

TEST(MoeFields, AbsentMeansNotGiven) {
  auto r = parse(json::object());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->sampling.moe.given);
  EXPECT_FALSE(r->sampling.moe.little_experts.has_value());
  EXPECT_FALSE(r->sampling.moe.fallback_confidence.has_value());
}

TEST(MoeFields, TheObjectAndItsMembers) {
  auto r = parse({{"moe", {{"little_experts", 2}, {"fallback_confidence", 0.8}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->sampling.moe.given);
  EXPECT_EQ(r->sampling.moe.little_experts, 2);
  EXPECT_DOUBLE_EQ(*r->sampling.moe.fallback_confidence, 0.8);
  r = parse({{"moe", {{"little_experts", "auto"}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.moe.little_experts, MoeFields::kAuto);
  EXPECT_FALSE(r->sampling.moe.fallback_confidence.has_value());
  r = parse({{"moe", {{"little_experts", "off"}, {"fallback_confidence", 0}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.moe.little_experts, MoeFields::kOff);
  EXPECT_DOUBLE_EQ(*r->sampling.moe.fallback_confidence, 0.0);
  r = parse({{"moe", json::object()}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->sampling.moe.given);
  // The chat endpoint reads it too.
  auto chat = parse_chat_request(json{{"model", "m"},
                                      {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                                      {"moe", {{"fallback_confidence", 1}}}}
                                     .dump());
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  EXPECT_DOUBLE_EQ(*chat->sampling.moe.fallback_confidence, 1.0);
}

TEST(MoeFields, InvalidValuesAre400sNamingTheField) {
  expect_400({{"moe", 2}}, "moe");
  expect_400({{"moe", {{"little_experts", 0}}}}, "moe.little_experts");
  expect_400({{"moe", {{"little_experts", -1}}}}, "moe.little_experts");
  expect_400({{"moe", {{"little_experts", 1.5}}}}, "moe.little_experts");
  expect_400({{"moe", {{"little_experts", "half"}}}}, "moe.little_experts");
  expect_400({{"moe", {{"fallback_confidence", -0.1}}}}, "moe.fallback_confidence");
  expect_400({{"moe", {{"fallback_confidence", 1.01}}}}, "moe.fallback_confidence");
  expect_400({{"moe", {{"fallback_confidence", "0.5"}}}}, "moe.fallback_confidence");
  expect_400({{"moe", {{"gamma", 0.5}}}}, "moe.gamma");
}

}  // namespace
}  // namespace spillway::api
