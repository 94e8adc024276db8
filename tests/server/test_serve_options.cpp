// `spillway serve` option helpers: SIZE values and model ids.
#include <gtest/gtest.h>

#include "server/serve_options.h"

namespace spillway::server {
namespace {

TEST(ServeOptions, ParseSize) {
  EXPECT_EQ(parse_size("1048576"), 1048576u);
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("4G"), 4ull << 30);
  EXPECT_EQ(parse_size("4g"), 4ull << 30);
  EXPECT_EQ(parse_size("64K"), 64ull << 10);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("16MB"), 16ull << 20);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("G"));
  EXPECT_FALSE(parse_size("12Q"));
  EXPECT_FALSE(parse_size("-5M"));
  EXPECT_FALSE(parse_size("1.5"));
  EXPECT_FALSE(parse_size("1..5G"));
  EXPECT_FALSE(parse_size("99999999999T"));
}

TEST(ServeOptions, ModelIdFromPath) {
  EXPECT_EQ(model_id_from_path("/models/stories260K.gguf"), "stories260K");
  EXPECT_EQ(model_id_from_path("models/Qwen2.5-0.5B-Instruct/"), "Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(model_id_from_path("tiny.GGUF.bin"), "tiny.GGUF.bin");
}

TEST(ServeOptions, DemoModelPathIsInACacheFolder) {
  const std::string path = default_demo_model_path();
  EXPECT_NE(path.find("spillway"), std::string::npos);
  EXPECT_EQ(path.substr(path.size() - 5), ".gguf");
}

}  // namespace
}  // namespace spillway::server
