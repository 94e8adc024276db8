// The end of every HTTP request: one info log line and the request counter.
#pragma once

#include <optional>
#include <string>

#include "server/server_context.h"

namespace spillway::server {

struct RequestRecord {
  std::string id;        // response id ("chatcmpl-...") or "" for simple routes
  std::string method;
  std::string path;
  int status = 200;      // 499: the client went away
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;
  std::optional<double> queue_ms;
  std::optional<double> ttft_ms;
  double total_ms = 0.0;
  std::string finish_reason;  // generation requests
  std::string error;          // the error message of a 4xx/5xx
};

void record_request(ServerContext& ctx, const RequestRecord& record);

}  // namespace spillway::server
