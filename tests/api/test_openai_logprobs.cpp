// Logprobs in OpenAI's chat and completions formats.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "api/logprobs.h"
#include "api/text_encoding.h"

namespace spillway::api {
namespace {

using json = nlohmann::ordered_json;

TEST(Logprobs, ChatFormat) {
  std::vector<TokenLogprobs> tokens(2);
  tokens[0].chosen = {"Hi", -0.25f};
  tokens[0].top = {{"Hi", -0.25f}, {"Hey", -1.5f}};
  tokens[1].chosen = {" \xC3", -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(render_chat_logprobs(tokens), json::parse(R"({"content": [
    {"token": "Hi", "logprob": -0.25, "bytes": [72, 105],
     "top_logprobs": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105]},
                      {"token": "Hey", "logprob": -1.5, "bytes": [72, 101, 121]}]},
    {"token": " \ufffd", "logprob": -9999.0, "bytes": [32, 195], "top_logprobs": []}],
    "refusal": null})"));
}

TEST(Logprobs, CompletionsFormatWithOffsetsAcrossChunks) {
  std::vector<TokenLogprobs> first(2);
  first[0].chosen = {" caf\xC3\xA9", -0.5f};  // 5 code points
  first[0].top = {{" caf\xC3\xA9", -0.5f}, {" tea", -2.0f}};
  first[1].chosen = {"!", -1.0f};
  first[1].top = {{"?", -0.75f}};
  size_t offset = 10;
  EXPECT_EQ(render_completion_logprobs(first, offset), json::parse(R"({
    "tokens": [" café", "!"], "token_logprobs": [-0.5, -1.0],
    "top_logprobs": [{" café": -0.5, " tea": -2.0}, {"?": -0.75, "!": -1.0}],
    "text_offset": [10, 15]})"));
  EXPECT_EQ(offset, 16u);
  std::vector<TokenLogprobs> second(1);
  second[0].chosen = {"x", -0.125f};
  EXPECT_EQ(render_completion_logprobs(second, offset)["text_offset"], json::parse("[16]"));
}

TEST(TextEncoding, Utf8Helpers) {
  EXPECT_EQ(valid_utf8("ok\xE2\x82"), "ok\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("\xE2\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD") << "overlong";
  EXPECT_EQ(code_point_count("a\xE2\x82\xAC" "b"), 3u);
  EXPECT_EQ(utf8_bytes("\xE2\x82"), (std::vector<int>{226, 130}));
}

}  // namespace
}  // namespace spillway::api
