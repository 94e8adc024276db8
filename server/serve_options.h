// `spillway serve` options: flags, their SPILLWAY_<FLAG> environment variables, defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <functional>

#include "common/result.h"
#include "engine/forward/mobile_params.h"
#include "engine/residency/residency_plan.h"

namespace spillway::server {

enum class LogFormat { Text, Json };

struct ServeOptions {
  std::string model;              // GGUF file or HF folder; empty: the demo model
  std::string demo_model;         // where the demo model is cached (built when missing)
  std::string model_id;           // empty: derived from the model path
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: an ephemeral port (logged)
  std::string api_key;            // empty: no authentication
  std::vector<std::string> allowed_hosts;  // --allowed-hosts (server/http/host_policy.h)
  int threads = 0;                // kernel threads; 0: physical cores
  int32_t ctx_size = 0;           // per-sequence context; 0: the model's training context
  int32_t max_batch_tokens = 512;
  int32_t max_running = 64;
  int32_t max_waiting = 256;
  uint64_t kv_cache_bytes = 0;    // 0: enough for max_running full contexts, at most 1 GiB
  double drain_timeout_seconds = 30.0;
  LogFormat log_format = LogFormat::Text;
  uint64_t max_body_bytes = 16ull << 20;
  int max_connections = 1024;
  int http_threads = 2;
  double sse_keepalive_seconds = 15.0;
  // Output back-pressure: a stream whose unsent output (queued beyond the socket's buffers)
  // passes this many bytes has its sequences paused until the client reads it down to half;
  // 0: off (output is buffered until the write timeout).
  uint64_t max_unsent_stream_bytes = 256 * 1024;
  bool diffusion_compact = false;  // --diffusion-compact: compacted active set by default (issue #17)
  bool step_buckets = false;       // --step-buckets: pad steps to the StepPlans ladder (issue #17)
  engine::ResidencyOptions residency;  // --memory-budget and friends (README, "Models bigger than memory")
  engine::MobileSettings mobile;       // MoE models: --moe-little-experts, --moe-fallback-confidence
  // Writes the demo model at a path (with progress) when `model` is empty; supplied by cli/
  // (tools/ builds it; server/ does not depend on tools/). Called on the loader thread.
  std::function<Status(const std::string& path,
                       const std::function<void(int64_t done, int64_t total)>& progress)>
      write_demo_model;
};

// "512M", "4G", "1.5GiB", "1048576" (binary multiples K, M, G, T; optional B / iB), as
// engine::parse_byte_size.
std::optional<uint64_t> parse_size(std::string_view text);

// The default demo-model cache: $XDG_CACHE_HOME/spillway or ~/.cache/spillway, file
// spillway-demo.gguf.
std::string default_demo_model_path();

// "org/Model-7B" from a path: the file name without .gguf, or the folder name.
std::string model_id_from_path(std::string_view path);

// Runs the server until SIGTERM / SIGINT and the drain; returns the exit code
// (server/serve.cpp).
int run_serve(const ServeOptions& options);

}  // namespace spillway::server
