#include "api/sse.h"

namespace spillway::api {

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_event(const nlohmann::ordered_json& data) {
  std::string out = "data: ";
  out += dump_json(data);
  out += "\n\n";
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_comment(std::string_view text) {
  std::string out = ": ";
  out += text;
  out += "\n\n";
  return out;
}

}  // namespace spillway::api
