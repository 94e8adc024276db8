// The diffusion request fields (api/requests/diffusion_fields.h): the `diffusion` object,
// the peers' aliases, and 400s naming the field for unknown or invalid members.
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

TEST(DiffusionFields, AbsentMeansNotGiven) {
  auto r = parse(json::object());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->sampling.diffusion.given.empty());
  EXPECT_FALSE(r->sampling.diffusion.steps.has_value());
}

TEST(DiffusionFields, TheObjectAndItsMembers) {
  auto r = parse({{"diffusion", {{"steps", 64}, {"block_length", 32}, {"algorithm", "entropy"}, {"alg_temp", 0.5},
                                 {"eps", 0.01}, {"sampler", "turbo"}, {"threshold", json::array({0.9, 0.7, 4})},
                                 {"cache", "block"}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const DiffusionFields& d = r->sampling.diffusion;
  EXPECT_EQ(d.given, "diffusion");
  EXPECT_EQ(d.steps, 64);
  EXPECT_EQ(d.block_length, 32);
  EXPECT_EQ(d.algorithm, "entropy");
  EXPECT_DOUBLE_EQ(*d.alg_temp, 0.5);
  EXPECT_DOUBLE_EQ(*d.eps, 0.01);
  EXPECT_EQ(d.sampler, "turbo");
  EXPECT_DOUBLE_EQ(*d.threshold, 0.9);
  EXPECT_DOUBLE_EQ(*d.threshold_low, 0.7);
  EXPECT_EQ(d.threshold_switch, 4);
  EXPECT_EQ(d.cache, "block");
  EXPECT_FALSE(d.repeat_guard.has_value());
  r = parse({{"diffusion", {{"repeat_guard", true}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.diffusion.repeat_guard, 16);
  r = parse({{"diffusion", {{"repeat_guard", 5}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.diffusion.repeat_guard, 5);
  EXPECT_FALSE(r->sampling.diffusion.eos_tail_drop.has_value());
  r = parse({{"diffusion", {{"eos_tail_drop", true}, {"repair", false}, {"exact_top_k", true}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.diffusion.eos_tail_drop, true);
  EXPECT_EQ(r->sampling.diffusion.repair, false);
  EXPECT_EQ(r->sampling.diffusion.exact_top_k, true);
}

TEST(DiffusionFields, AliasesAndTheObjectWins) {
  auto r = parse({{"steps", 8}, {"block_length", 4}, {"remasking", "random"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.diffusion.given, "steps");
  EXPECT_EQ(r->sampling.diffusion.steps, 8);
  EXPECT_EQ(r->sampling.diffusion.block_length, 4);
  EXPECT_EQ(r->sampling.diffusion.algorithm, "random");
  r = parse({{"steps", 8}, {"diffusion", {{"steps", 16}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.diffusion.steps, 16);
  // The chat endpoint reads them too.
  json chat = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"remasking", "low_confidence"}};
  auto c = parse_chat_request(chat.dump());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->sampling.diffusion.given, "remasking");
  EXPECT_EQ(c->sampling.diffusion.algorithm, "low_confidence");
}

TEST(DiffusionFields, CompactCacheAndRefresh) {
  auto r = parse({{"diffusion", {{"cache", "compact"}, {"compact_refresh", 3}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sampling.diffusion.cache, "compact");
  EXPECT_EQ(r->sampling.diffusion.compact_refresh, 3);
  r = parse({{"diffusion", {{"cache", "compact"}}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->sampling.diffusion.compact_refresh.has_value());
}

TEST(DiffusionFields, InvalidFieldsAre400sNamingThem) {
  expect_400({{"diffusion", {{"stepz", 3}}}}, "diffusion.stepz");
  expect_400({{"diffusion", {{"steps", 0}}}}, "diffusion.steps");
  expect_400({{"diffusion", {{"steps", "many"}}}}, "diffusion.steps");
  expect_400({{"diffusion", {{"algorithm", "best"}}}}, "diffusion.algorithm");
  expect_400({{"diffusion", {{"eps", 1.0}}}}, "diffusion.eps");
  expect_400({{"diffusion", {{"sampler", "fast"}}}}, "diffusion.sampler");
  expect_400({{"diffusion", {{"threshold", 1.5}}}}, "diffusion.threshold");
  expect_400({{"diffusion", {{"threshold", json::array({0.9, 0.8})}}}}, "diffusion.threshold");
  expect_400({{"diffusion", {{"sampler", "reference"}, {"threshold", 0.9}}}}, "diffusion.threshold");
  expect_400({{"diffusion", {{"cache", "block"}}}}, "diffusion.cache");
  expect_400({{"diffusion", {{"cache", "dual"}}}}, "diffusion.cache");
  expect_400({{"diffusion", {{"compact_refresh", 2}}}}, "diffusion.compact_refresh");  // needs compact
  expect_400({{"diffusion", {{"cache", "compact"}, {"compact_refresh", -1}}}}, "diffusion.compact_refresh");
  expect_400({{"diffusion", 3}}, "diffusion");
  expect_400({{"diffusion", {{"repeat_guard", 1}}}}, "diffusion.repeat_guard");
  expect_400({{"diffusion", {{"eos_tail_drop", 1}}}}, "diffusion.eos_tail_drop");
  expect_400({{"diffusion", {{"repair", "yes"}}}}, "diffusion.repair");
  expect_400({{"diffusion", {{"exact_top_k", json::array()}}}}, "diffusion.exact_top_k");
  expect_400({{"remasking", "sometimes"}}, "remasking");
  expect_400({{"steps", -1}}, "steps");
}

}  // namespace
}  // namespace spillway::api
