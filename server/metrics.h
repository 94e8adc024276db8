// The Prometheus metrics of the server (prometheus-cpp), served at /metrics in text format
// 0.0.4. Names spillway_* in base units; the vllm: aliases routers read are added at the
// end. Labels are bounded: endpoint (known routes or "other"), status code, finish reason.
//
// Thread contract: every method is thread-safe. on_step / on_prefix_lookup run on the
// engine thread; the rest on HTTP threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "scheduler/engine_loop.h"

namespace spillway::server {

class ServerMetrics final : public scheduler::MetricsObserver {
 public:
  explicit ServerMetrics(std::string model_name);
  ~ServerMetrics() override;

  // An HTTP response went out (or the client left: status 499).
  void count_request(std::string_view path, int status);
  void count_finished(std::string_view finish_reason);  // stop, length, tool_calls, cancelled, error
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  void observe_queue_time(double seconds);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  void set_ready(bool ready);
  void set_cache_config(int32_t block_size, int32_t num_blocks);

  void on_step(const scheduler::StepStats& stats) override;
  void on_prefix_lookup(int32_t queried_tokens, int32_t hit_tokens) override;

  // The exposition. snapshot: the engine's state, or nullopt while loading. with_vllm_aliases:
  // false for `promtool check metrics`.
  std::string render(const std::optional<scheduler::EngineSnapshot>& snapshot,
                     bool with_vllm_aliases = true);

  // The endpoint label of a request path.
  static std::string_view endpoint_label(std::string_view path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::server
