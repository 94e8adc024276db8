// Tool-call extraction from model output (api/tool_calls.h) on arbitrary text, with and
// without declared tools.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::vector<std::string> kNone;
  static const std::vector<std::string> kTools = {"get_weather", "search"};
  (void)spillway::api::parse_tool_calls(text, kNone);
  (void)spillway::api::parse_tool_calls(text, kTools);
  return 0;
}
