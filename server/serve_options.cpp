#include "server/serve_options.h"

#include <cstdlib>
#include <filesystem>

#include "engine/platform/memory_probe.h"

namespace spillway::server {

std::optional<uint64_t> parse_size(std::string_view text) {
  const std::optional<int64_t> bytes = engine::parse_byte_size(text);
  if (!bytes) return std::nullopt;
  return static_cast<uint64_t>(*bytes);
}

std::string default_demo_model_path() {
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = std::filesystem::path(home) / ".cache";
  } else {
    base = std::filesystem::temp_directory_path();
  }
  return (base / "spillway" / "spillway-demo.gguf").string();
}

std::string model_id_from_path(std::string_view path) {
  std::filesystem::path p{std::string(path)};
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  std::string name = p.filename().string();
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") name.resize(name.size() - 5);
  return name.empty() ? std::string(path) : name;
}

}  // namespace spillway::server
