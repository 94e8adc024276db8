// `spillway serve`'s flags: each also read from its SPILLWAY_<FLAG> environment variable;
// the server itself is server/serve.cpp (run_serve).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/mobile_flags.h"
#include "cli/residency_flags.h"
#include "server/serve_options.h"
#include "tools/demo_model.h"

namespace spillway::cli {

using server::LogFormat;
using server::ServeOptions;

namespace {

// CLI11 validator + converter for SIZE values.
std::function<std::string(std::string&)> size_transform() {
  return [](std::string& value) -> std::string {
    std::optional<uint64_t> bytes = server::parse_size(value);
    if (!bytes) return "'" + value + "' is not a size (examples: 512M, 4G, 1073741824)";
    value = std::to_string(*bytes);
    return {};
  };
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ServeOptions>();
  auto residency = std::make_shared<ResidencyFlags>();
  auto mobile = std::make_shared<MobileFlags>();
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
  env(cmd->add_flag("--diffusion-compact", o->diffusion_compact,
                    "Diffusion models: forward only each canvas's live rows (compacted active set) "
                    "unless a request names diffusion.cache"),
      "SPILLWAY_DIFFUSION_COMPACT");
  env(cmd->add_flag("--step-buckets", o->step_buckets,
                    "Pad every engine step's rows up to the step-plan ladder (attention-only models)"),
      "SPILLWAY_STEP_BUCKETS");
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
  env(cmd->add_option("--max-unsent-stream-bytes", o->max_unsent_stream_bytes,
                      "Output back-pressure: a stream whose client stops reading is paused (its "
                      "sequences keep their KV) once this much output waits beyond the socket "
                      "buffers; resumed when half of it was read; 0 = off (default 256K)")
          ->transform(CLI::Validator(size_transform(), "SIZE")),
      "SPILLWAY_MAX_UNSENT_STREAM_BYTES");
  env(cmd->add_option("--max-connections", o->max_connections,
                      "Open HTTP connections; more get 503")
          ->check(CLI::Range(1, 1 << 20))
          ->capture_default_str(),
      "SPILLWAY_MAX_CONNECTIONS");
  env(cmd->add_option("--allowed-hosts", o->allowed_hosts,
                      "Host names answered besides IP literals and localhost (DNS rebinding "
                      "protection; checked when listening on loopback or when given; '*' = any; "
                      "'.example.com' = its subdomains)")
          ->delimiter(','),
      "SPILLWAY_ALLOWED_HOSTS");
  env(cmd->add_option("--http-threads", o->http_threads, "Threads serving HTTP")
          ->check(CLI::Range(1, 64))
          ->capture_default_str(),
      "SPILLWAY_HTTP_THREADS");
  env(cmd->add_option("--sse-keepalive", o->sse_keepalive_seconds,
                      "Seconds of silence before a stream gets a ': keepalive' comment")
          ->check(CLI::Range(0.05, 3600.0))
          ->capture_default_str(),
      "SPILLWAY_SSE_KEEPALIVE");
  add_residency_flags(*cmd, *residency);
  add_mobile_flags(*cmd, *mobile);
  cmd->callback([o, residency, mobile, log_format, &exit_code] {
    ServeOptions options = *o;
    auto resolved = residency_options(*residency);
    if (!resolved) {
      fmt::print(stderr, "error: {}\n", resolved.error().message);
      exit_code = 2;
      return;
    }
    options.residency = *resolved;
    auto mobile_resolved = mobile_settings(*mobile);
    if (!mobile_resolved) {
      fmt::print(stderr, "error: {}\n", mobile_resolved.error().message);
      exit_code = 2;
      return;
    }
    options.mobile = *mobile_resolved;
    options.write_demo_model = tools::write_default_demo_model;
    options.log_format = *log_format == "json" ? LogFormat::Json : LogFormat::Text;
    if (options.demo_model.empty()) options.demo_model = server::default_demo_model_path();
    exit_code = server::run_serve(options);
  });
}

}  // namespace spillway::cli
