// One HTTP request and its response, as handlers see them (no Beast types).
//
// Thread contract: the handler is called on the connection's strand. respond(),
// start_stream(), write(), finish_stream(), on_client_gone() and on_backpressure() must be called on that
// strand: use post() from other threads (the engine thread). After the client is gone,
// writes are dropped silently. An exchange ends with exactly one respond() or one
// start_stream() ... finish_stream(); the connection then reads its next request.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spillway::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // as sent: path and query
  std::string path;           // target without the query
  std::string authorization;  // the Authorization header, or ""
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;
};

class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  virtual const HttpRequest& request() const = 0;
  // Runs fn on this connection's strand; callable from any thread. fn runs even when the
  // client is gone (it then writes nothing); it may be dropped only at server shutdown.
  virtual void post(std::function<void()> fn) = 0;

  virtual void respond(HttpResponse response) = 0;
  // Sends "200 text/event-stream" with chunked encoding. While the stream is open and
  // nothing was written for `heartbeat`, writes heartbeat_text.
  virtual void start_stream(std::chrono::milliseconds heartbeat, std::string heartbeat_text) = 0;
  virtual void write(std::string data) = 0;
  virtual void finish_stream() = 0;

  // fn runs once, on the strand, if the client disconnects (EOF, reset, write failure or
  // write timeout) before the exchange ended.
  virtual void on_client_gone(std::function<void()> fn) = 0;
  // Output back-pressure for a stream: fn(true) runs on the strand when the bytes written
  // and not yet taken by the socket pass `limit_bytes` (the client stopped reading; the
  // kernel's socket buffers are already full), fn(false) when they fall back to at most
  // limit_bytes / 2 (it reads again). Never after the exchange ended or the client left.
  virtual void on_backpressure(size_t limit_bytes, std::function<void(bool paused)> fn) = 0;
  virtual bool client_gone() const = 0;
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;

}  // namespace spillway::server
