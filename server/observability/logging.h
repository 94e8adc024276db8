// Server logging through spdlog: "[time] [level] message key=value ..." lines, or with
// --log-format json one JSON object per line ({"time","level","message", fields...}).
// Thread-safe; call init_logging() once before other threads start.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "server/serve_options.h"

namespace spillway::server {

void init_logging(LogFormat format);

// fields: a JSON object of extra key/values (may be null).
void log_info(std::string_view message, const nlohmann::ordered_json& fields = nullptr);
void log_warn(std::string_view message, const nlohmann::ordered_json& fields = nullptr);
void log_error(std::string_view message, const nlohmann::ordered_json& fields = nullptr);

}  // namespace spillway::server
