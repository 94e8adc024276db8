// The residency flags as serve, run and bench read them (cli/residency_flags.h).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/residency_flags.h"

namespace spillway::cli {
namespace {

Result<engine::ResidencyOptions> parse(std::vector<std::string> args) {
  CLI::App app;
  ResidencyFlags flags;
  add_residency_flags(app, flags);
  args.insert(args.begin(), "spillway");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return residency_options(flags);
}

TEST(ResidencyFlags, ReadModeAutoMeasuresDirectAndBufferedForce) {
  auto automatic = parse({});
  ASSERT_TRUE(automatic.ok()) << automatic.error().message;
  EXPECT_FALSE(automatic->direct_io.has_value());
  auto direct = parse({"--read-mode", "direct"});
  ASSERT_TRUE(direct.ok());
  ASSERT_TRUE(direct->direct_io.has_value());
  EXPECT_TRUE(*direct->direct_io);
  auto buffered = parse({"--read-mode", "buffered"});
  ASSERT_TRUE(buffered.ok());
  ASSERT_TRUE(buffered->direct_io.has_value());
  EXPECT_FALSE(*buffered->direct_io);
  EXPECT_THROW(parse({"--read-mode", "mmap"}), CLI::ValidationError);
}

TEST(ResidencyFlags, BadSizesAreErrorsNamingTheFlag) {
  auto budget = parse({"--memory-budget", "lots"});
  ASSERT_FALSE(budget.ok());
  EXPECT_NE(budget.error().message.find("--memory-budget"), std::string::npos) << budget.error().message;
  auto cache = parse({"--expert-cache", "-3"});
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.error().message.find("--expert-cache"), std::string::npos) << cache.error().message;
  auto ok = parse({"--memory-budget", "1.5G", "--expert-cache", "off"});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->memory_budget_bytes, int64_t{3} << 29);
  EXPECT_EQ(ok->expert_cache_bytes, -1);
}

// --row-piece-size: row pieces of 4 MiB by default, 0 for whole matrices, a size otherwise.
TEST(ResidencyFlags, RowPieceSizeDefaultsTo4MiBAnd0MeansWholeMatrices) {
  auto automatic = parse({});
  ASSERT_TRUE(automatic.ok()) << automatic.error().message;
  EXPECT_EQ(automatic->row_piece_bytes, uint64_t{4} << 20);
  auto whole = parse({"--row-piece-size", "0"});
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_EQ(whole->row_piece_bytes, 0u);
  auto eight = parse({"--row-piece-size", "8M"});
  ASSERT_TRUE(eight.ok()) << eight.error().message;
  EXPECT_EQ(eight->row_piece_bytes, uint64_t{8} << 20);
  auto bad = parse({"--row-piece-size", "small"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--row-piece-size"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace spillway::cli
