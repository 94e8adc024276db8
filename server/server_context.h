// What every request handler shares: options, lifecycle, metrics, the model service.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "server/serve_options.h"

namespace spillway::server {

class ServerMetrics;
class ModelBackend;

enum class Lifecycle {
  Loading,   // listening; the model is being loaded and warmed
  Ready,     // serving
  Draining,  // SIGTERM: in-flight requests finish, new ones get 503
  Failed,    // loading failed; the process is exiting
};

struct ServerContext {
  const ServeOptions& options;
  std::string model_id;
  int64_t model_created = 0;  // Unix seconds, for /v1/models
  ServerMetrics& metrics;
  ModelBackend& service;
  std::atomic<Lifecycle> lifecycle{Lifecycle::Loading};
  std::atomic<int> in_flight{0};  // generation requests whose engine work is not finished

  std::chrono::milliseconds sse_keepalive() const {
    return std::chrono::milliseconds(static_cast<int64_t>(options.sse_keepalive_seconds * 1000));
  }
};

}  // namespace spillway::server
