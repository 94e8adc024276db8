// `spillway serve`: the lifecycle of API.md. Listen at once (/live answers), load and warm
// the model on a loader thread (/health 503 until then), serve, and on SIGTERM / SIGINT
// drain: /health 503, new requests 503 + Retry-After, in-flight requests and streams
// finish up to --drain-timeout (a second signal cuts it short), /metrics keeps serving;
// then exit 0.
#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "server/http_server.h"
#include "server/logging.h"
#include "server/metrics.h"
#include "server/model_service.h"
#include "server/router.h"
#include "server/serve_options.h"
#include "server/server_context.h"

namespace spillway::server {

namespace {

using Clock = std::chrono::steady_clock;

// Waits up to `timeout` for SIGTERM / SIGINT (blocked in every thread); true when one came.
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
  // the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

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
    log_info("draining", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"},
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

namespace {

// CLI11 validator + converter for SIZE values.
std::function<std::string(std::string&)> size_transform() {
  return [](std::string& value) -> std::string {
    std::optional<uint64_t> bytes = parse_size(value);
    if (!bytes) return "'" + value + "' is not a size (examples: 512M, 4G, 1073741824)";
    value = std::to_string(*bytes);
    return {};
  };
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  auto log_format = std::make_shared<std::string>("text");
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve the OpenAI-compatible HTTP API (every flag can also be set as "
               "SPILLWAY_<FLAG>, e.g. SPILLWAY_KV_CACHE_BYTES=4G)");
  auto env = [](CLI::Option* opt, const char* name) { return opt->envname(name); };
  env(cmd->add_option("--model", o->model,
                      "GGUF file or Hugging Face folder (default: a small random-weight demo "
                      "model, built on first use)"),
      "SPILLWAY_MODEL");
  env(cmd->add_option("--demo-model", o->demo_model,
                      "Where the demo model is cached when --model is not given (default: "
                      "~/.cache/spillway/spillway-demo.gguf)"),
      "SPILLWAY_DEMO_MODEL");
  env(cmd->add_option("--model-id", o->model_id,
                      "Model name clients send as \"model\" (default: the file or folder name)"),
      "SPILLWAY_MODEL_ID");
  env(cmd->add_option("--host", o->host, "Address to listen on")->capture_default_str(),
      "SPILLWAY_HOST");
  env(cmd->add_option("--port", o->port, "TCP port; 0 picks a free one (logged)")
          ->check(CLI::Range(0, 65535))
          ->capture_default_str(),
      "SPILLWAY_PORT");
  env(cmd->add_option("--api-key", o->api_key,
                      "Require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize"),
      "SPILLWAY_API_KEY");
  env(cmd->add_option("--threads", o->threads, "Kernel threads (default: physical cores)")
          ->check(CLI::Range(0, 1024)),
      "SPILLWAY_THREADS");
  env(cmd->add_option("--ctx-size", o->ctx_size,
                      "Context per sequence, prompt + output (default: the model's)")
          ->check(CLI::Range(0, 1 << 24)),
      "SPILLWAY_CTX_SIZE");
  env(cmd->add_option("--max-batch-tokens", o->max_batch_tokens,
                      "Token budget of one engine step (decode + prefill chunks)")
          ->check(CLI::Range(1, 1 << 20))
          ->capture_default_str(),
      "SPILLWAY_MAX_BATCH_TOKENS");
  env(cmd->add_option("--max-running", o->max_running, "Sequences decoded together")
          ->check(CLI::Range(1, 1 << 16))
          ->capture_default_str(),
      "SPILLWAY_MAX_RUNNING");
  env(cmd->add_option("--max-waiting", o->max_waiting,
                      "Queued requests before new ones get 429")
          ->check(CLI::Range(1, 1 << 20))
          ->capture_default_str(),
      "SPILLWAY_MAX_WAITING");
  env(cmd->add_option("--kv-cache-bytes", o->kv_cache_bytes,
                      "KV cache size, e.g. 512M, 4G (default: max-running full contexts, at "
                      "most 1G)")
          ->transform(CLI::Validator(size_transform(), "SIZE")),
      "SPILLWAY_KV_CACHE_BYTES");
  env(cmd->add_option("--drain-timeout", o->drain_timeout_seconds,
                      "Seconds in-flight requests get to finish after SIGTERM")
          ->check(CLI::Range(0.0, 86400.0))
          ->capture_default_str(),
      "SPILLWAY_DRAIN_TIMEOUT");
  env(cmd->add_option("--log-format", *log_format, "text | json (one JSON object per line)")
          ->check(CLI::IsMember({"text", "json"}))
          ->capture_default_str(),
      "SPILLWAY_LOG_FORMAT");
  env(cmd->add_option("--max-body-bytes", o->max_body_bytes,
                      "Largest request body; larger gets 413 (default 16M)")
          ->transform(CLI::Validator(size_transform(), "SIZE")),
      "SPILLWAY_MAX_BODY_BYTES");
  env(cmd->add_option("--max-connections", o->max_connections,
                      "Open HTTP connections; more get 503")
          ->check(CLI::Range(1, 1 << 20))
          ->capture_default_str(),
      "SPILLWAY_MAX_CONNECTIONS");
  env(cmd->add_option("--http-threads", o->http_threads, "Threads serving HTTP")
          ->check(CLI::Range(1, 64))
          ->capture_default_str(),
      "SPILLWAY_HTTP_THREADS");
  env(cmd->add_option("--sse-keepalive", o->sse_keepalive_seconds,
                      "Seconds of silence before a stream gets a ': keepalive' comment")
          ->check(CLI::Range(0.05, 3600.0))
          ->capture_default_str(),
      "SPILLWAY_SSE_KEEPALIVE");
  add_residency_flags(*cmd, o->residency);
  cmd->callback([o, log_format, &exit_code] {
    ServeOptions options = *o;
    if (auto residency = residency_options(options.residency); !residency) {
      fmt::print(stderr, "error: {}\n", residency.error().message);
      exit_code = 2;
      return;
    }
    options.log_format = *log_format == "json" ? LogFormat::Json : LogFormat::Text;
    if (options.demo_model.empty()) options.demo_model = default_demo_model_path();
    exit_code = run_serve(options);
  });
}

}  // namespace spillway::server
