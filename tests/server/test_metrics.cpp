// The metrics exposition: text format, names, types, the vllm: aliases, values taken from
// the engine snapshot and from the observer calls.
#include <gtest/gtest.h>

#include <string>

#include "metrics_sample.h"
#include "server/observability/metrics.h"

namespace spillway::server {
namespace {

using testing::sample;

TEST(ServerMetrics, ExpositionHasTypesHelpAndBaseUnits) {
  ServerMetrics m("org/model");
  const std::string text = m.render(std::nullopt);
  for (const char* line : {"# TYPE spillway_http_requests_total counter",
                           "# TYPE spillway_requests_running gauge",
                           "# TYPE spillway_time_to_first_token_seconds histogram",
                           "# TYPE spillway_inter_token_latency_seconds histogram",
                           "# TYPE spillway_e2e_request_latency_seconds histogram",
                           "# TYPE spillway_request_queue_time_seconds histogram",
                           "# TYPE spillway_step_batch_tokens histogram",
                           "# TYPE spillway_kv_cache_usage_ratio gauge",
                           "# TYPE vllm:num_requests_waiting gauge",
                           "# TYPE vllm:kv_cache_usage_perc gauge"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line;
  }
  EXPECT_NE(text.find("# HELP spillway_prompt_tokens_total "), std::string::npos);
  EXPECT_EQ(m.render(std::nullopt, /*with_vllm_aliases=*/false).find("vllm:"), std::string::npos);
}

// Issue #17: step-plan builds and padded rows per bucket (counters advanced from the
// snapshot's cumulative values, never backwards), diffusion rows per canvas step (histogram).
TEST(ServerMetrics, StepBucketsAndCanvasRows) {
  ServerMetrics m("m");
  runtime::EngineSnapshot s;
  s.step_plan_builds = 3;
  s.padded_rows_by_bucket = {{1, 0}, {64, 10}, {192, 5}};
  scheduler::StepStats step;
  step.batch_tokens = 50;
  step.canvas_rows = {40, 7};
  m.on_step(step);
  std::string text = m.render(s);
  EXPECT_EQ(sample(text, "spillway_step_plan_builds_total"), 3);
  EXPECT_EQ(sample(text, "spillway_step_padded_rows_total{bucket=\"64\"}"), 10);
  EXPECT_EQ(sample(text, "spillway_step_padded_rows_total{bucket=\"192\"}"), 5);
  EXPECT_EQ(text.find("spillway_step_padded_rows_total{bucket=\"1\"}"), std::string::npos);  // none padded
  EXPECT_EQ(sample(text, "spillway_diffusion_rows_per_step_count"), 2);
  EXPECT_EQ(sample(text, "spillway_diffusion_rows_per_step_bucket{le=\"8\"}"), 1);
  EXPECT_EQ(sample(text, "spillway_diffusion_rows_per_step_bucket{le=\"48\"}"), 2);
  s.step_plan_builds = 4;
  s.padded_rows_by_bucket = {{1, 0}, {64, 12}, {192, 5}};
  text = m.render(s);
  EXPECT_EQ(sample(text, "spillway_step_plan_builds_total"), 4);
  EXPECT_EQ(sample(text, "spillway_step_padded_rows_total{bucket=\"64\"}"), 12);
}

TEST(ServerMetrics, SnapshotAndObserverValues) {
  ServerMetrics m("m");
  runtime::EngineSnapshot s;
  s.running = 3;
  s.waiting = 2;
  s.kv_blocks_total = 100;
  s.kv_blocks_used = 25;
  s.kv_blocks_cached = 10;
  s.live_step_plans = 4;
  m.on_prefix_lookup(64, 48);
  m.on_prefix_lookup(16, 0);
  scheduler::StepStats step;
  step.batch_tokens = 40;
  step.batch_sequences = 3;
  step.preemptions = 2;
  step.seconds = 0.01;
  m.on_step(step);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/some/unknown/path/123", 404);
  m.count_finished("length");
  m.add_generation_tokens(7);
  m.set_cache_config(16, 100);
  const std::string text = m.render(s);
  EXPECT_EQ(sample(text, "spillway_requests_running"), 3);
  EXPECT_EQ(sample(text, "spillway_requests_waiting"), 2);
  EXPECT_DOUBLE_EQ(sample(text, "spillway_kv_cache_usage_ratio"), 0.25);
  EXPECT_EQ(sample(text, "spillway_kv_cache_blocks{state=\"free\"}"), 65);
  EXPECT_EQ(sample(text, "spillway_step_plans"), 4);
  EXPECT_EQ(sample(text, "spillway_prefix_cache_queried_tokens_total"), 80);
  EXPECT_EQ(sample(text, "spillway_prefix_cache_hit_tokens_total"), 48);
  EXPECT_EQ(sample(text, "spillway_preemptions_total"), 2);
  EXPECT_EQ(sample(text, "spillway_step_batch_tokens_count"), 1);
  EXPECT_EQ(sample(text, "spillway_step_batch_tokens_bucket{le=\"32\"}"), 0);
  EXPECT_EQ(sample(text, "spillway_step_batch_tokens_bucket{le=\"64\"}"), 1);
  EXPECT_EQ(sample(text, "spillway_generation_tokens_total"), 7);
  EXPECT_EQ(sample(text, "spillway_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"}"), 2);
  EXPECT_EQ(sample(text, "spillway_http_requests_total{endpoint=\"other\",status=\"404\"}"), 1)
      << "unknown paths share one label value";
  EXPECT_EQ(sample(text, "spillway_requests_finished_total{finish_reason=\"length\"}"), 1);
  EXPECT_EQ(sample(text, "vllm:num_requests_running{model_name=\"m\"}"), 3);
  EXPECT_DOUBLE_EQ(sample(text, "vllm:kv_cache_usage_perc{model_name=\"m\"}"), 0.25);
  EXPECT_EQ(sample(text, "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"}"), 1);
}

TEST(ServerMetrics, ExpertTierCountersAdvanceByWhatGrew) {
  ServerMetrics m("m");
  ResidencyMetrics r;
  r.moe_expert_hits_total = 30;
  r.moe_expert_misses_total = 10;
  r.moe_expert_bytes_read_total = 10 * 4096;
  r.moe_io_stall_seconds_total = 0.5;
  r.moe_evictions_total = 2;
  r.moe_resident_experts = 8;
  r.moe_cache_bytes = 8 * 4096;
  m.set_residency(r);
  r.moe_expert_hits_total = 35;
  r.moe_expert_misses_total = 11;
  m.set_residency(r);
  const std::string text = m.render(std::nullopt);
  EXPECT_NE(text.find("# TYPE spillway_moe_expert_requests_total counter"), std::string::npos);
  EXPECT_EQ(sample(text, "spillway_moe_expert_requests_total{result=\"hit\"}"), 35);
  EXPECT_EQ(sample(text, "spillway_moe_expert_requests_total{result=\"miss\"}"), 11);
  EXPECT_EQ(sample(text, "spillway_moe_expert_bytes_read_total"), 40960);
  EXPECT_DOUBLE_EQ(sample(text, "spillway_moe_io_stall_seconds_total"), 0.5);
  EXPECT_EQ(sample(text, "spillway_moe_evictions_total"), 2);
  EXPECT_EQ(sample(text, "spillway_moe_resident_experts"), 8);
  EXPECT_EQ(sample(text, "spillway_moe_cache_bytes"), 32768);
}

TEST(ServerMetrics, EndpointLabelsAreBounded) {
  EXPECT_EQ(ServerMetrics::endpoint_label("/v1/completions"), "/v1/completions");
  EXPECT_EQ(ServerMetrics::endpoint_label("/v1/models/org/x"), "/v1/models/{id}");
  EXPECT_EQ(ServerMetrics::endpoint_label("/v1/completions/x"), "other");
}

}  // namespace
}  // namespace spillway::server

namespace spillway::server {
namespace {

// Hybrid models: the runner's snapshot bytes are a gauge; its copy counts and seconds are
// cumulative in every engine snapshot and the counters advance by what grew between renders.
TEST(ServerMetrics, StateSnapshotBytesAndCopyTimes) {
  ServerMetrics m("m");
  EXPECT_NE(m.render(std::nullopt).find("# TYPE spillway_recurrent_state_snapshot_copy_seconds_total counter"),
            std::string::npos);
  runtime::EngineSnapshot s;
  s.state_snapshots = 3;
  s.state_snapshot_stats = {.bytes = 3 << 20, .saves_total = 4, .restores_total = 1,
                            .save_seconds_total = 0.25, .restore_seconds_total = 0.125};
  std::string text = m.render(s);
  EXPECT_EQ(sample(text, "spillway_recurrent_state_snapshots"), 3);
  EXPECT_EQ(sample(text, "spillway_recurrent_state_snapshot_bytes"), 3 << 20);
  EXPECT_EQ(sample(text, "spillway_recurrent_state_snapshot_copies_total{op=\"save\"}"), 4);
  EXPECT_EQ(sample(text, "spillway_recurrent_state_snapshot_copies_total{op=\"restore\"}"), 1);
  EXPECT_DOUBLE_EQ(sample(text, "spillway_recurrent_state_snapshot_copy_seconds_total{op=\"save\"}"), 0.25);
  s.state_snapshot_stats.saves_total = 6;
  s.state_snapshot_stats.restore_seconds_total = 0.5;
  text = m.render(s);
  text = m.render(s);  // rendering twice counts nothing twice
  EXPECT_EQ(sample(text, "spillway_recurrent_state_snapshot_copies_total{op=\"save\"}"), 6);
  EXPECT_DOUBLE_EQ(sample(text, "spillway_recurrent_state_snapshot_copy_seconds_total{op=\"restore\"}"), 0.5);
}

TEST(ServerMetrics, DiffusionTurboCountersHistogramsAndCanvasGauge) {
  ServerMetrics m("m");
  scheduler::DiffusionUsage a, b, c;
  b.forwards = 1;  // one step committing 3
  b.committed = 3;
  b.forced_top1 = 1;
  c = b;
  c.forwards = 5;  // three more denoising forwards (9 committed, 3 each), a block of 3 forwards
  c.committed = 12;  // ends, the repair forward changes 2, the tail-drop fills 5, the guard trips
  c.repair_forwards = 1;
  c.repair_changes = 2;
  c.eos_tail_dropped = 5;
  c.repeat_guard_trips = 1;
  c.blocks_finished = 1;
  c.block_forwards = 3;
  m.observe_diffusion(a, b);
  m.observe_diffusion(b, c);
  runtime::EngineSnapshot s;
  s.canvases_running = 2;
  const std::string text = m.render(s);
  EXPECT_EQ(sample(text, "spillway_diffusion_forced_commits_total"), 1);
  EXPECT_EQ(sample(text, "spillway_diffusion_repair_changes_total"), 2);
  EXPECT_EQ(sample(text, "spillway_diffusion_eos_tail_dropped_positions_total"), 5);
  EXPECT_EQ(sample(text, "spillway_diffusion_repeat_guard_trips_total"), 1);
  EXPECT_EQ(sample(text, "spillway_diffusion_canvases_running"), 2);
  // 1 + 3 denoising forwards (the repair excluded), each 3 tokens; one block of 3 forwards.
  EXPECT_EQ(sample(text, "spillway_diffusion_tokens_per_forward_count"), 4);
  EXPECT_EQ(sample(text, "spillway_diffusion_tokens_per_forward_sum"), 12);
  EXPECT_EQ(sample(text, "spillway_diffusion_tokens_per_forward_bucket{le=\"2\"}"), 0);
  EXPECT_EQ(sample(text, "spillway_diffusion_tokens_per_forward_bucket{le=\"3\"}"), 4);
  EXPECT_EQ(sample(text, "spillway_diffusion_steps_per_block_count"), 1);
  EXPECT_EQ(sample(text, "spillway_diffusion_steps_per_block_bucket{le=\"3\"}"), 1);
  EXPECT_NE(text.find("# TYPE spillway_diffusion_tokens_per_forward histogram"), std::string::npos);
}

}  // namespace
}  // namespace spillway::server
