#include "server/http/http_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "server/http/memory_trim.h"
#include "server/http/request_checks.h"

namespace spillway::server {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Shared {
  HttpServerConfig config;
  HttpHandler handler;
  HttpErrorResponder errors;
  std::atomic<int> connections{0};
  std::atomic<int> open_responses{0};  // requests read whose response is not fully written
};

api::ApiError too_many_connections(int limit) {
  return api::unavailable(fmt::format("Too many open connections (the limit is {}).", limit), 1);
}

std::string chunk(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

class Session;

// The handler's view of one request on a Session.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Session> session, HttpRequest request, uint64_t serial)
      : session_(std::move(session)), request_(std::move(request)), serial_(serial) {}
  // Everything a large request allocated (parse, template, tokenizer) is freed by now: hand
  // it back to the OS instead of leaving it in the HTTP threads' arenas (memory_trim.h).
  ~Exchange() override {
    if (request_.body.size() < kTrimAfterBodyBytes) return;
    request_.body = std::string();
    release_freed_heap_memory();
  }

  const HttpRequest& request() const override { return request_; }
  void post(std::function<void()> fn) override;
  void respond(HttpResponse response) override;
  void start_stream(std::chrono::milliseconds heartbeat, std::string heartbeat_text) override;
  void write(std::string data) override;
  void finish_stream() override;
  void on_client_gone(std::function<void()> fn) override { gone_callback_ = std::move(fn); }
  void on_backpressure(size_t limit_bytes, std::function<void(bool)> fn) override {
    backpressure_limit_ = limit_bytes;
    backpressure_callback_ = std::move(fn);
  }
  bool client_gone() const override { return gone_; }

  void notify_gone() {
    if (gone_) return;
    gone_ = true;
    backpressure_callback_ = nullptr;
    if (auto fn = std::move(gone_callback_)) fn();
  }
  // The bytes queued and not yet written changed to `unsent`.
  void notify_unsent(size_t unsent) {
    if (!backpressure_callback_ || ended_ || gone_) return;
    if (!paused_ && unsent > backpressure_limit_) {
      paused_ = true;
      backpressure_callback_(true);
    } else if (paused_ && unsent <= backpressure_limit_ / 2) {
      paused_ = false;
      backpressure_callback_(false);
    }
  }
  bool ended() const { return ended_; }

 private:
  friend class Session;
  std::shared_ptr<Session> session_;
  HttpRequest request_;
  uint64_t serial_;
  std::function<void()> gone_callback_;
  std::function<void(bool)> backpressure_callback_;
  size_t backpressure_limit_ = 0;
  bool paused_ = false;     // backpressure_callback_(true) was the last call
  bool gone_ = false;
  bool ended_ = false;      // respond() or finish_stream() called
  bool streaming_ = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, Shared& shared)
      : stream_(std::move(socket)), shared_(shared), heartbeat_timer_(stream_.get_executor()) {
    ++shared_.connections;
  }
  ~Session() {
    end_response();
    --shared_.connections;
  }

  auto executor() { return stream_.get_executor(); }

  // probe_only: a connection over the limit, in the probe reserve: only probe paths are served.
  void start(bool probe_only = false) {
    probe_only_ = probe_only;
    net::dispatch(executor(), [self = shared_from_this()] { self->read_header(); });
  }

  // Answers with an error and closes, without reading (too many connections).
  void reject(const api::ApiError& error) {
    net::dispatch(executor(), [self = shared_from_this(), error] {
      self->keep_alive_ = false;
      self->send_response(self->shared_.errors(error, ""));
    });
  }

  // --- used by Exchange, on the strand ---
  void respond(Exchange& ex, HttpResponse response) {
    if (ex.ended_ || ex.streaming_) return;  // a stream ends with finish_stream()
    ex.ended_ = true;
    ex.gone_callback_ = nullptr;
    if (closed_) return;
    send_response(std::move(response));
  }

  void start_stream(Exchange& ex, std::chrono::milliseconds heartbeat, std::string heartbeat_text) {
    if (ex.ended_ || ex.streaming_) return;
    ex.streaming_ = true;
    if (closed_) return;
    chunked_ = version_ >= 11;
    if (!chunked_) keep_alive_ = false;
    std::string head = "HTTP/1.1 200 OK\r\nServer: spillway\r\nContent-Type: text/event-stream\r\n"
                       "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
    head += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    if (chunked_) head += "Transfer-Encoding: chunked\r\n";
    head += "\r\n";
    enqueue_raw(std::move(head));
    heartbeat_ = heartbeat;
    heartbeat_text_ = std::move(heartbeat_text);
    arm_heartbeat(ex.serial_);
  }

  void write(Exchange& ex, std::string data) {
    if (ex.ended_ || !ex.streaming_ || closed_ || data.empty()) return;
    enqueue_raw(chunked_ ? chunk(data) : std::move(data));
  }

  void finish_stream(Exchange& ex) {
    if (ex.ended_ || !ex.streaming_) return;
    ex.ended_ = true;
    ex.gone_callback_ = nullptr;
    ex.backpressure_callback_ = nullptr;
    heartbeat_timer_.cancel();
    if (closed_) return;
    if (chunked_) enqueue_raw("0\r\n\r\n");
    finishing_ = true;
    if (!writing_) on_queue_drained();
  }

 private:
  void read_header() {
    if (closed_) return;
    parser_.emplace();
    configure_request_parser(*parser_, read_limits());
    stream_.expires_after(shared_.config.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // An error in the request itself: answer and close (the stream cannot be resynchronized).
  void fail_request(const api::ApiError& error, const std::string& path) {
    keep_alive_ = false;
    send_response(shared_.errors(error, path));
  }

  std::string current_path() const {
    if (!parser_ || !parser_->is_header_done()) return "";
    std::string target(parser_->get().target());
    return target.substr(0, target.find('?'));
  }

  RequestReadLimits read_limits() const {
    return {shared_.config.max_header_bytes, shared_.config.max_body_bytes};
  }

  bool handle_read_error(beast::error_code ec) {
    if (!ec) return false;
    if (std::optional<api::ApiError> response = read_error_response(ec, read_limits())) {
      // After a 413 the rest of the body may still be coming: let the client read the status.
      if (ec == http::error::body_limit) linger_after_response_ = true;
      fail_request(*response, current_path());
    } else {
      close();
    }
    return true;
  }

  void on_header(beast::error_code ec, std::size_t) {
    if (handle_read_error(ec)) return;
    auto& req = parser_->get();
    if (std::optional<api::ApiError> e = check_transfer_encoding(req)) {
      linger_after_response_ = true;  // a body of unknown length may follow: let the client read the status
      return fail_request(*e, current_path());
    }
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*cont),
                       [self = shared_from_this(), cont](beast::error_code wec, std::size_t) {
                         if (wec) return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(shared_.config.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_body, shared_from_this()));
  }

  void on_body(beast::error_code ec, std::size_t) {
    if (handle_read_error(ec)) return;
    stream_.expires_never();
    http::request<http::string_body> req = parser_->release();
    parser_.reset();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    const std::string host(req[http::field::host]);
    HttpRequest request = to_http_request(std::move(req));
    if (!shared_.config.host_policy.allows(host)) {
      keep_alive_ = false;
      begin_response();
      send_response(shared_.errors(host_not_allowed(host), request.path));
      return;
    }
    if (probe_only_ && !(shared_.config.is_probe && shared_.config.is_probe(request.path))) {
      keep_alive_ = false;
      begin_response();
      send_response(shared_.errors(too_many_connections(shared_.config.max_connections), request.path));
      return;
    }
    auto ex = std::make_shared<Exchange>(shared_from_this(), std::move(request), ++serial_);
    exchange_ = ex;
    begin_response();
    watch_for_disconnect(ex->serial_);
    try {
      shared_.handler(ex);
    } catch (...) {
      // Handlers catch their own errors; this is the last line of defence.
      if (!ex->ended_ && !ex->streaming_) {
        respond(*ex, shared_.errors(api::internal_error("Unexpected error in the request handler."),
                                    ex->request_.path));
      }
    }
  }

  // While a request runs, a readable socket with nothing to read means the client left.
  void watch_for_disconnect(uint64_t serial) {
    stream_.socket().async_wait(tcp::socket::wait_read,
                                [self = shared_from_this(), serial](beast::error_code ec) {
                                  self->on_readable(ec, serial);
                                });
  }

  void on_readable(beast::error_code ec, uint64_t serial) {
    auto ex = exchange_.lock();
    if (!ex || ex->serial_ != serial || ex->ended_ || closed_) return;
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      char byte;
      const ssize_t n = ::recv(stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // a pipelined request: stop watching
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        watch_for_disconnect(serial);
        return;
      }
    }
    client_gone();
  }

  void client_gone() {
    auto ex = exchange_.lock();
    close();
    if (ex && !ex->ended_) ex->notify_gone();
  }

  void send_response(HttpResponse response) {
    http::response<http::string_body> res{static_cast<http::status>(response.status), version_ ? version_ : 11};
    res.set(http::field::server, "spillway");
    res.set(http::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) res.set(name, value);
    res.body() = std::move(response.body);
    res.keep_alive(keep_alive_);
    res.prepare_payload();
    auto msg = std::make_shared<http::response<http::string_body>>(std::move(res));
    stream_.expires_after(shared_.config.write_timeout);
    http::async_write(stream_, *msg,
                      [self = shared_from_this(), msg](beast::error_code ec, std::size_t) {
                        self->stream_.expires_never();
                        self->end_response();
                        if (!ec && self->linger_after_response_) return self->linger();
                        if (ec || msg->need_eof()) return self->close();
                        self->read_header();
                      });
  }

  // After an early response to a request whose body is still arriving: stop sending, read
  // and discard what the client still sends (up to kLingerBytes or kLingerTime), then
  // close. Closing at once would reset the connection with unread data in the receive
  // buffer, and a client still sending its body would see the reset instead of our status.
  static constexpr uint64_t kLingerBytes = 64ull << 20;
  static constexpr std::chrono::seconds kLingerTime{5};
  void linger() {
    linger_after_response_ = false;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    linger_buffer_.resize(64 * 1024);
    stream_.expires_after(kLingerTime);
    discard_some();
  }
  void discard_some() {
    stream_.async_read_some(net::buffer(linger_buffer_), [self = shared_from_this()](beast::error_code ec,
                                                                                      std::size_t n) {
      self->lingered_bytes_ += n;
      if (ec || self->lingered_bytes_ >= kLingerBytes) {
        self->stream_.expires_never();
        return self->close();
      }
      self->discard_some();
    });
  }

  void enqueue_raw(std::string data) {
    unsent_bytes_ += data.size();
    queue_.push_back(std::move(data));
    if (!writing_) write_next();
    notify_unsent();
  }

  // Tells the current exchange how much output waits for the client (back-pressure).
  void notify_unsent() {
    if (auto ex = exchange_.lock()) ex->notify_unsent(unsent_bytes_);
  }

  void write_next() {
    if (closed_) return;
    if (queue_.empty()) {
      writing_ = false;
      on_queue_drained();
      return;
    }
    writing_ = true;
    stream_.expires_after(shared_.config.write_timeout);
    net::async_write(stream_, net::buffer(queue_.front()),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->client_gone();
                       self->last_write_ = Clock::now();
                       self->unsent_bytes_ -= self->queue_.front().size();
                       self->queue_.pop_front();
                       self->write_next();
                       self->notify_unsent();
                     });
  }

  void on_queue_drained() {
    if (!finishing_) return;
    finishing_ = false;
    stream_.expires_never();
    end_response();
    if (!keep_alive_) return close();
    read_header();
  }

  void arm_heartbeat(uint64_t serial) {
    if (heartbeat_.count() <= 0) return;
    heartbeat_timer_.expires_after(heartbeat_);
    heartbeat_timer_.async_wait([self = shared_from_this(), serial](beast::error_code ec) {
      if (ec) return;
      auto ex = self->exchange_.lock();
      if (!ex || ex->serial_ != serial || ex->ended_ || self->closed_) return;
      if (!self->writing_ && Clock::now() - self->last_write_ >= self->heartbeat_) {
        self->enqueue_raw(self->chunked_ ? chunk(self->heartbeat_text_) : self->heartbeat_text_);
      }
      self->arm_heartbeat(serial);
    });
  }

  // A response counts as open from its request's arrival until its last byte is written
  // (or the connection closes), so a shutdown can wait for responses already produced.
  void begin_response() {
    if (response_open_) return;
    response_open_ = true;
    ++shared_.open_responses;
  }
  void end_response() {
    if (!response_open_) return;
    response_open_ = false;
    --shared_.open_responses;
  }

  void close() {
    end_response();
    if (closed_) return;
    closed_ = true;
    heartbeat_timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  friend class Exchange;
  beast::tcp_stream stream_;
  Shared& shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::weak_ptr<Exchange> exchange_;
  uint64_t serial_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool closed_ = false;
  bool response_open_ = false;
  bool probe_only_ = false;
  bool linger_after_response_ = false;
  std::vector<char> linger_buffer_;
  uint64_t lingered_bytes_ = 0;
  // Streaming state.
  std::deque<std::string> queue_;
  size_t unsent_bytes_ = 0;  // in queue_ (the front one possibly partly written)
  bool writing_ = false;
  bool finishing_ = false;
  bool chunked_ = true;
  net::steady_timer heartbeat_timer_;
  std::chrono::milliseconds heartbeat_{0};
  std::string heartbeat_text_;
  Clock::time_point last_write_ = Clock::now();
};

void Exchange::post(std::function<void()> fn) {
  net::post(session_->executor(), std::move(fn));
}
void Exchange::respond(HttpResponse response) { session_->respond(*this, std::move(response)); }
void Exchange::start_stream(std::chrono::milliseconds heartbeat, std::string heartbeat_text) {
  session_->start_stream(*this, heartbeat, std::move(heartbeat_text));
}
void Exchange::write(std::string data) { session_->write(*this, std::move(data)); }
void Exchange::finish_stream() { session_->finish_stream(*this); }

}  // namespace

struct HttpServer::Impl {
  Shared shared;
  net::io_context ioc;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  net::steady_timer accept_pause{acceptor.get_executor()};
  // A descriptor held in reserve: out of descriptors, it is closed to accept one connection
  // and answer it 503, then reopened.
  int reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::string shed_response;  // the 503 written on a shed connection, made on first use
  std::vector<std::thread> threads;
  bool stopped = false;

  ~Impl() {
    if (reserve_fd >= 0) ::close(reserve_fd);
  }

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec == net::error::no_descriptors || ec.value() == ENFILE) {
        shed_one_connection();
        accept_pause.expires_after(std::chrono::milliseconds(50));
        accept_pause.async_wait([this](beast::error_code wec) {
          if (!wec && acceptor.is_open()) accept();
        });
        return;
      }
      if (!ec) {
        socket.set_option(tcp::no_delay(true), ec);
        auto session = std::make_shared<Session>(std::move(socket), shared);
        const int open = shared.connections.load();
        const int limit = shared.config.max_connections;
        if (open > limit + shared.config.probe_reserve_connections) {
          session->reject(too_many_connections(limit));
        } else {
          session->start(/*probe_only=*/open > limit);
        }
      }
      accept();
    });
  }

  // Out of descriptors: accept the oldest pending connection on the reserve descriptor and
  // answer it 503 at once (best effort, never blocking), so clients get an answer instead
  // of waiting in the backlog while the acceptor spins.
  void shed_one_connection() {
    if (reserve_fd < 0) return;
    ::close(reserve_fd);
    reserve_fd = -1;
    const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (shed_response.empty()) {
        HttpResponse r = shared.errors(api::unavailable("The server is out of file descriptors; retry later.", 1), "");
        shed_response = fmt::format("HTTP/1.1 {} Service Unavailable\r\nServer: spillway\r\nContent-Type: {}\r\n",
                                    r.status, r.content_type);
        for (const auto& [name, value] : r.headers) shed_response += fmt::format("{}: {}\r\n", name, value);
        shed_response += fmt::format("Connection: close\r\nContent-Length: {}\r\n\r\n{}", r.body.size(), r.body);
      }
      [[maybe_unused]] const ssize_t n =
          ::send(fd, shed_response.data(), shed_response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
    }
    reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
};

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler, HttpErrorResponder errors)
    : impl_(std::make_unique<Impl>()) {
  impl_->shared.config = std::move(config);
  impl_->shared.handler = std::move(handler);
  impl_->shared.errors = std::move(errors);
}

HttpServer::~HttpServer() { stop(); }

Result<uint16_t> HttpServer::listen() {
  const HttpServerConfig& c = impl_->shared.config;
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(c.host, ec);
  if (ec) return Error{fmt::format("--host '{}' is not an IP address: {}", c.host, ec.message())};
  const tcp::endpoint endpoint{address, c.port};
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Error{fmt::format("cannot listen on {}:{}: {}", c.host, c.port, ec.message())};
  return a.local_endpoint().port();
}

void HttpServer::start() {
  impl_->accept();
  const int n = std::max(1, impl_->shared.config.threads);
  for (int i = 0; i < n; ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

void HttpServer::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->accept_pause.cancel();
  });
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
}

int HttpServer::open_connections() const { return impl_->shared.connections.load(); }

int HttpServer::open_responses() const { return impl_->shared.open_responses.load(); }

}  // namespace spillway::server
