#include "server/serve_options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace spillway::server {

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  const std::string number(text.substr(0, i));
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return std::nullopt;
  std::string unit(text.substr(i));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "IB") unit.resize(unit.size() - 2);
  else if (unit.size() >= 2 && unit.back() == 'B') unit.pop_back();
  double multiplier = 1;
  if (unit.empty() || unit == "B") multiplier = 1;
  else if (unit == "K") multiplier = 1024.0;
  else if (unit == "M") multiplier = 1024.0 * 1024;
  else if (unit == "G") multiplier = 1024.0 * 1024 * 1024;
  else if (unit == "T") multiplier = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  const double bytes = value * multiplier;
  if (bytes >= 1.8e19) return std::nullopt;
  if (unit.empty() && number.find('.') != std::string::npos) return std::nullopt;  // "1.5" bytes
  return static_cast<uint64_t>(bytes);
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
