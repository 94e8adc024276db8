// The Prometheus metrics of the server (prometheus-cpp), served at /metrics in text format
// 0.0.4. Names spillway_* in base units; the vllm: aliases routers read are added at the
// end. Labels are bounded: endpoint (known routes or "other"), status code, finish reason.
//
// Thread contract: every method is thread-safe. on_step / on_prefix_lookup run on the
// engine thread; the rest on HTTP threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/residency/expert_tier_histogram.h"
#include "runtime/engine_loop.h"

namespace spillway::server {

// Weight residency and the memory the pressure monitor sees (README, "Models bigger than
// memory"). Cumulative fields only grow.
struct ResidencyMetrics {
  int32_t resident_layers = 0;
  int32_t streamed_layers = 0;
  int64_t resident_weight_bytes = 0;
  uint64_t weight_bytes_read_total = 0;          // from disk, cumulative
  double stream_bandwidth_bytes_per_second = 0;  // while reading, over the last interval
  double io_stall_seconds_total = 0;             // cumulative
  int64_t memory_limit_bytes = 0;
  int64_t memory_available_bytes = 0;
  double memory_pressure_ratio = 0;              // PSI some avg10, 0..1
  int64_t shed_total = 0;                        // layers, cumulative
  int64_t readmit_total = 0;                     // layers, cumulative
  // The expert tier of MoE models (zeros when off); cumulative fields only grow.
  uint64_t moe_expert_hits_total = 0;
  uint64_t moe_expert_misses_total = 0;
  uint64_t moe_expert_bytes_read_total = 0;
  double moe_io_stall_seconds_total = 0;
  uint64_t moe_evictions_total = 0;
  int32_t moe_resident_experts = 0;
  int64_t moe_cache_bytes = 0;
  engine::ExpertReadSecondsHistogram moe_expert_read_seconds;         // cumulative
  engine::ExpertsPerLayerStepHistogram moe_experts_per_layer_step;    // cumulative
};

class ServerMetrics final : public scheduler::MetricsObserver {
 public:
  explicit ServerMetrics(std::string model_name);
  ~ServerMetrics() override;

  // An HTTP response went out (or the client left: status 499).
  void count_request(std::string_view path, int status);
  void count_finished(std::string_view finish_reason);  // stop, length, tool_calls, cancelled, error
  // A request with structured output (grammar metrics: README, "Structured output").
  void count_constrained_request();
  // A stream's output was paused (its client stopped reading) or is no longer (resumed or
  // ended); calls pair up.
  void output_paused(bool paused);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  // A diffusion request's progress since its previous update (usage.diffusion deltas).
  void add_diffusion(int64_t forwards, int64_t committed, int64_t rows_evaluated);
  // The same request's turbo counters and histograms from its usage before and now: tokens
  // per forward (the repair forward excluded) and forwards per finished block are observed
  // once per forward / block, as the average over what this update covers (exact when an
  // update covers one step, as the scheduler delivers them).
  void observe_diffusion(const scheduler::DiffusionUsage& before, const scheduler::DiffusionUsage& now);
  void observe_queue_time(double seconds);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  void set_ready(bool ready);
  void set_cache_config(int32_t block_size, int32_t num_blocks);
  // From the engine thread, between steps.
  void set_residency(const ResidencyMetrics& m);

  void on_step(const scheduler::StepStats& stats) override;
  void on_prefix_lookup(int32_t queried_tokens, int32_t hit_tokens) override;
  void on_prefix_discarded(int32_t tokens) override;

  // The exposition. snapshot: the engine's state, or nullopt while loading. with_vllm_aliases:
  // false for `promtool check metrics`.
  std::string render(const std::optional<runtime::EngineSnapshot>& snapshot,
                     bool with_vllm_aliases = true);

  // The endpoint label of a request path.
  static std::string_view endpoint_label(std::string_view path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway::server
