#include "support/paths.h"

namespace spillway::test_paths {

const std::string& testdata() {
  static const std::string path = SPILLWAY_TESTDATA;
  return path;
}

std::string testdata(const std::string& relative) { return testdata() + "/" + relative; }

const std::string& source() {
  static const std::string path = SPILLWAY_SOURCE_DIR;
  return path;
}

const std::string& binary() {
  static const std::string path = SPILLWAY_BINARY_DIR;
  return path;
}

}  // namespace spillway::test_paths
