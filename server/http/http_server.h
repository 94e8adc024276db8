// The HTTP/1.1 server (Boost.Beast): listener, keep-alive connections, body and header
// limits, timeouts, a bounded number of connections, a few I/O threads. The only
// translation unit that includes Beast. Routing and error bodies are the handler's.
//
// Protocol and resource rules it enforces itself (RFC 9112 where it applies):
// - a Transfer-Encoding whose final coding is not `chunked` is 400 and the connection is
//   closed (the body length cannot be known: reading on would let the body pass as a second
//   request); any coding besides `chunked` (`gzip, chunked`) is 501 and closes too;
// - a body over max_body_bytes is answered 413 and then read and discarded (up to a bound)
//   before the close, so clients that send the whole body before reading see the status;
// - out of file descriptors (EMFILE/ENFILE) the acceptor sheds the next connection with a
//   503 through a reserved descriptor and retries after a pause instead of spinning.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/api_error.h"
#include "common/result.h"
#include "server/http/host_policy.h"
#include "server/http/http_exchange.h"

namespace spillway::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: ephemeral
  uint64_t max_body_bytes = 16ull << 20;
  size_t max_header_bytes = 64 * 1024;
  int max_connections = 1024;
  // Connections beyond max_connections that may still be served when their request is a
  // probe (is_probe(path)): a busy server keeps answering its liveness probe and scrapes.
  // Other requests on them get 503.
  int probe_reserve_connections = 16;
  std::function<bool(std::string_view path)> is_probe;  // null: no probes
  HostPolicy host_policy;  // requests with a Host it refuses get 403
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
