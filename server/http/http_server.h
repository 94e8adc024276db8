// The HTTP/1.1 server (Boost.Beast): listener, keep-alive connections, body and header
// limits, timeouts, a bounded number of connections, a few I/O threads. The only
// translation unit that includes Beast. Routing and error bodies are the handler's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/api_error.h"
#include "common/result.h"
#include "server/http/http_exchange.h"

namespace spillway::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: ephemeral
  uint64_t max_body_bytes = 16ull << 20;
  size_t max_header_bytes = 64 * 1024;
  int max_connections = 1024;
  int threads = 2;
  std::chrono::seconds header_timeout{60};  // waiting for a request's headers (keep-alive idle too)
  std::chrono::seconds body_timeout{60};
  std::chrono::seconds write_timeout{60};   // one write (a client that stopped reading)
};

// Turns an error found by the HTTP layer itself (413, 431, malformed request, too many
// connections) into a response; `path` is "" when unknown. Must not throw.
using HttpErrorResponder = std::function<HttpResponse(const api::ApiError& error, const std::string& path)>;

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, HttpHandler handler, HttpErrorResponder errors);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; returns the bound port. Starts no threads.
  Result<uint16_t> listen();
  // Starts accepting on the I/O threads.
  void start();
  // Closes the listener and every connection; joins the threads. Idempotent.
  void stop();

  int open_connections() const;
  // Requests received whose response has not been written to the end (any thread).
  int open_responses() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::server
