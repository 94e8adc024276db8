// `spillway serve`: the lifecycle of API.md. Listen at once (/live answers), load and warm
// the model on a loader thread (/health 503 until then), serve, and on SIGTERM / SIGINT
// drain: /health 503, new requests 503 + Retry-After, in-flight requests and streams
// finish up to --drain-timeout (a second signal cuts it short), /metrics keeps serving;
// SIGHUP / SIGUSR1 / SIGUSR2 drain the same way, SIGPIPE is ignored;
// then exit 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "server/http/http_server.h"
#include "server/observability/logging.h"
#include "server/observability/metrics.h"
#include "server/model_service.h"
#include "server/router.h"
#include "server/routes.h"
#include "server/serve_options.h"
#include "server/server_context.h"

namespace spillway::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDrainSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "SIGTERM";
  }
}

// Raises the soft open-file limit to the hard one (connections are descriptors); returns
// the soft limit now in force, or -1 when unknown.
int raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > rlim_t(1) << 30) return 1 << 30;
  return static_cast<int>(limit.rlim_cur);
}

// Waits up to `timeout` for one of kDrainSignals (blocked in every thread); true when one came.
bool wait_for_signal(const sigset_t& signals, std::chrono::milliseconds timeout, int* which) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1000000);
  const int sig = sigtimedwait(&signals, nullptr, &ts);
  if (sig > 0 && which) *which = sig;
  return sig > 0;
}

int64_t file_time_or_now(const std::string& path) {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(path, ec);
  if (!ec) {
    auto sys = std::chrono::time_point_cast<std::chrono::seconds>(
        t - std::filesystem::file_time_type::clock::now() + std::chrono::system_clock::now());
    return sys.time_since_epoch().count();
  }
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int run_serve(const ServeOptions& options) {
  init_logging(options.log_format);

  // Signals are taken synchronously by this thread; every thread started below inherits
  // the mask. SIGHUP and SIGUSR1/2 drain like SIGTERM (their default action would kill the
  // process without a drain). SIGPIPE is ignored: a closed socket or log pipe is an error
  // of that write, not the end of the process.
  signal(SIGPIPE, SIG_IGN);
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : kDrainSignals) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const int fd_limit = raise_descriptor_limit();

  const std::string model_path = options.model.empty() ? options.demo_model : options.model;
  std::string model_id = options.model_id;
  if (model_id.empty()) model_id = options.model.empty() ? "spillway-demo" : model_id_from_path(options.model);

  ServerMetrics metrics(model_id);
  ModelService service(options, model_path, metrics);
  ServerContext ctx{options, model_id, file_time_or_now(model_path), metrics, service};
  Router router(ctx);

  HttpServerConfig http;
  http.host = options.host;
  http.port = static_cast<uint16_t>(options.port);
  http.max_body_bytes = options.max_body_bytes;
  http.max_connections = options.max_connections;
  http.host_policy = HostPolicy::for_listener(options.host, options.allowed_hosts);
  http.is_probe = [](std::string_view path) {
    const Route* route = find_route(path);
    return route && route->probe;
  };
  // Every connection is a descriptor; keep room for the model file, the log, the pool and
  // the probe reserve so the limit is reached as 503s, not as failed accepts.
  const int fd_headroom = 64 + http.probe_reserve_connections;
  if (fd_limit > 0 && http.max_connections > fd_limit - fd_headroom) {
    const int lowered = std::max(1, fd_limit - fd_headroom);
    log_warn("--max-connections exceeds the open-file limit; lowering it",
             {{"max_connections", http.max_connections}, {"open_file_limit", fd_limit}, {"lowered_to", lowered}});
    http.max_connections = lowered;
  }
  http.threads = options.http_threads;
  HttpServer server(
      http, [&router](std::shared_ptr<HttpExchange> ex) { router.handle(ex); },
      [&router](const api::ApiError& e, const std::string& path) {
        return router.transport_error(e, path);
      });
  Result<uint16_t> port = server.listen();
  if (!port) {
    log_error("cannot start", {{"error", port.error().message}});
    return 1;
  }
  server.start();
  log_info("listening", {{"host", options.host}, {"port", *port},
                         {"url", fmt::format("http://{}:{}", options.host, *port)},
                         {"model", model_path}, {"model_id", model_id},
                         {"api_key", options.api_key.empty() ? "off" : "on"}});

  std::atomic<bool> load_failed{false};
  std::thread loader([&] {
    Status st = service.load();
    if (!st) {
      if (ctx.lifecycle.load() != Lifecycle::Draining) {
        log_error("loading the model failed", {{"error", st.error().message}});
        ctx.lifecycle = Lifecycle::Failed;
        load_failed = true;
      }
      return;
    }
    Lifecycle expected = Lifecycle::Loading;
    if (ctx.lifecycle.compare_exchange_strong(expected, Lifecycle::Ready)) metrics.set_ready(true);
  });

  int sig = 0;
  while (!wait_for_signal(signals, std::chrono::milliseconds(100), &sig)) {
    if (load_failed) break;
  }

  int exit_code = 0;
  if (load_failed) {
    exit_code = 1;
  } else {
    ctx.lifecycle = Lifecycle::Draining;
    metrics.set_ready(false);
    log_info("draining", {{"signal", signal_name(sig)},
                          {"in_flight", ctx.in_flight.load()},
                          {"drain_timeout_seconds", options.drain_timeout_seconds}});
    const auto deadline =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options.drain_timeout_seconds * 1000));
    while (ctx.in_flight.load() > 0 && Clock::now() < deadline) {
      if (wait_for_signal(signals, std::chrono::milliseconds(50), nullptr)) {
        log_warn("second signal: cancelling the requests still running");
        break;
      }
    }
    if (ctx.in_flight.load() > 0) {
      log_warn("drain timeout: cancelling the requests still running", {{"in_flight", ctx.in_flight.load()}});
    }
  }
  // Stopping the engine finishes whatever still runs as cancelled; give those responses
  // (their last chunks and error events) a moment to be written before the connections close.
  service.stop();
  const auto flush_deadline = Clock::now() + std::chrono::seconds(5);
  while ((ctx.in_flight.load() > 0 || server.open_responses() > 0) && Clock::now() < flush_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  loader.join();
  server.stop();
  log_info("stopped", {{"exit_code", exit_code}});
  return exit_code;
}

}  // namespace spillway::server
