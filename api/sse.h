// Server-sent events framing of API.md: "data: <json>\n\n" events, "data: [DONE]\n\n" at
// the end, ": keepalive\n\n" comment heartbeats. No "event:" lines, ever.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace spillway::api {

// One event; the JSON is dumped on one line (invalid UTF-8 replaced).
std::string sse_event(const nlohmann::ordered_json& data);
std::string sse_done();
std::string sse_comment(std::string_view text);

// Compact JSON text for HTTP bodies (invalid UTF-8 replaced, never throws).
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace spillway::api
