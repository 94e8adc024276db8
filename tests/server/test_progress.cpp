// ProgressReporter: a redrawn line on a terminal, a few plain log lines otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/observability/logging.h"
#include "server/observability/progress.h"

namespace spillway::server {
namespace {

// Runs fn with stderr (fd 2) redirected to a file; returns what was written.
template <typename Fn>
std::string capture_stderr(Fn fn) {
  const std::string path = "/tmp/spillway-test-progress-" + std::to_string(getpid()) + ".txt";
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE* file = std::fopen(path.c_str(), "w");
  EXPECT_NE(file, nullptr);
  dup2(fileno(file), STDERR_FILENO);
  fn();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::fclose(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ProgressReporter, PlainLogLinesAtQuartersWhenNotATerminal) {
  const std::string out = capture_stderr([] {
    init_logging(LogFormat::Json);
    ProgressReporter progress("building the demo model", "tensors", /*interactive=*/false);
    for (int done = 1; done <= 40; ++done) progress.update(done, 40);
    progress.update(40, 40);  // after the end: nothing more
  });
  init_logging(LogFormat::Text);
  const std::vector<std::string> lines = lines_of(out);
  ASSERT_EQ(lines.size(), 5u) << out;
  const std::vector<int> expected_percent = {2, 25, 50, 75, 100};
  const std::vector<int> expected_done = {1, 10, 20, 30, 40};
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto record = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(record["message"], "building the demo model");
    EXPECT_EQ(record["percent"], expected_percent[i]);
    EXPECT_EQ(record["done"], expected_done[i]);
    EXPECT_EQ(record["total"], 40);
    EXPECT_EQ(record["unit"], "tensors");
  }
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

TEST(ProgressReporter, OneRedrawnLineOnATerminal) {
  const std::string out = capture_stderr([] {
    ProgressReporter progress("reading weights", "bytes", /*interactive=*/true);
    for (int64_t done = 0; done <= (64 << 20); done += (1 << 20)) progress.update(done, 64 << 20);
  });
  EXPECT_EQ(lines_of(out).size(), 1u) << out;  // one line, redrawn with \r
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out.find('\r'), std::string::npos);
  const std::string final_draw = out.substr(out.rfind('\r') + 1);
  EXPECT_NE(final_draw.find("100%"), std::string::npos) << final_draw;
  EXPECT_NE(final_draw.find("64.0 MiB / 64.0 MiB"), std::string::npos) << final_draw;
  EXPECT_NE(final_draw.find("reading weights [########################]"), std::string::npos) << final_draw;
}

TEST(ProgressReporter, AnUnfinishedLineIsEndedOnDestruction) {
  const std::string out = capture_stderr([] {
    ProgressReporter progress("building the demo model", "tensors", /*interactive=*/true);
    progress.update(3, 40);
  });
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out.find("  7%"), std::string::npos) << out;
}

}  // namespace
}  // namespace spillway::server
