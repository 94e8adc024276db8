#include "engine/platform/read_fault_injection.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace spillway::engine {

namespace {

const std::string& control_file_from_env() {
  // Function-local static: read once, thread-safe initialisation.
  static const std::string path = [] {
    const char* v = std::getenv("SPILLWAY_DEBUG_READ_FAULTS");
    return std::string(v ? v : "");
  }();
  return path;
}

bool enabled() {
  static const bool on = !control_file_from_env().empty();
  return on;
}

}  // namespace

const std::string& read_fault_control_file() { return control_file_from_env(); }

ReadFault injected_read_fault() {
  if (!enabled()) [[likely]] return ReadFault::None;
  const int fd = ::open(control_file_from_env().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ReadFault::None;
  char word[16] = {};
  const ssize_t n = ::read(fd, word, sizeof(word) - 1);
  ::close(fd);
  if (n <= 0) return ReadFault::None;
  if (std::strncmp(word, "eio", 3) == 0) return ReadFault::Eio;
  if (std::strncmp(word, "short", 5) == 0) return ReadFault::Short;
  return ReadFault::None;
}

}  // namespace spillway::engine
