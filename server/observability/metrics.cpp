#include "server/observability/metrics.h"

#include "server/routes.h"
#include "engine/sampling/grammar_constraint.h"
#include "server/structured_output.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

namespace spillway::server {

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// vLLM's buckets.
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                  0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                  7.5,   10.0,  20.0, 40.0, 80.0, 160.0, 640.0,
                                                  2560.0};
const Histogram::BucketBoundaries kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,
                                                 0.3,  0.4,   0.5,  0.75,  1.0,  2.5,  5.0,
                                                 7.5,  10.0,  20.0, 40.0,  80.0};
const Histogram::BucketBoundaries kRequestBuckets = {0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,
                                                     5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
                                                     60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
                                                     7680.0};
const Histogram::BucketBoundaries kStepSecondsBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1,   0.25,   0.5,   1.0,  2.5,   5.0,
                                                         10.0};
const Histogram::BucketBoundaries kBatchTokenBuckets = {1,   2,   4,    8,    16,   32,  64,
                                                        128, 256, 512, 1024, 2048, 4096, 8192};
const Histogram::BucketBoundaries kBatchSequenceBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
const Histogram::BucketBoundaries kMoeReadSecondsBuckets(engine::kExpertReadSecondsBounds.begin(),
                                                         engine::kExpertReadSecondsBounds.end());
const Histogram::BucketBoundaries kMoeExpertsPerLayerStepBuckets(engine::kExpertsPerLayerStepBounds.begin(),
                                                                 engine::kExpertsPerLayerStepBounds.end());

// Adds to `h` what the engine's cumulative fixed-bucket histogram gained since `before`.
template <class H>
void advance_histogram(Histogram& h, const H& now, const H& before) {
  if (now.count <= before.count) return;
  const H d = now.since(before);
  h.ObserveMultiple(std::vector<double>(d.counts.begin(), d.counts.end()), d.sum);
}
const Histogram::BucketBoundaries kDiffusionTokensBuckets = {1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256};
const Histogram::BucketBoundaries kDiffusionStepsBuckets = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512};


}  // namespace

struct ServerMetrics::Impl {
  std::string model_name;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<prometheus::Registry> aliases = std::make_shared<prometheus::Registry>();

  Family<Counter>& http_requests = prometheus::BuildCounter()
      .Name("spillway_http_requests_total")
      .Help("HTTP requests answered, by endpoint and status code (499: the client left)")
      .Register(*registry);
  Family<Counter>& finished = prometheus::BuildCounter()
      .Name("spillway_requests_finished_total")
      .Help("Generation requests finished, by finish reason")
      .Register(*registry);
  Counter& prompt_tokens = prometheus::BuildCounter()
      .Name("spillway_prompt_tokens_total")
      .Help("Prompt tokens of finished generation requests")
      .Register(*registry).Add({});
  Counter& generation_tokens = prometheus::BuildCounter()
      .Name("spillway_generation_tokens_total")
      .Help("Tokens generated")
      .Register(*registry).Add({});
  Counter& diffusion_forwards = prometheus::BuildCounter()
      .Name("spillway_diffusion_forwards_total")
      .Help("Diffusion canvas forwards (denoising steps that ran the model)")
      .Register(*registry).Add({});
  Counter& diffusion_committed = prometheus::BuildCounter()
      .Name("spillway_diffusion_committed_tokens_total")
      .Help("Diffusion canvas positions committed")
      .Register(*registry).Add({});
  Counter& diffusion_rows = prometheus::BuildCounter()
      .Name("spillway_diffusion_rows_evaluated_total")
      .Help("Diffusion canvas rows forwarded (divided by committed tokens: cost per token)")
      .Register(*registry).Add({});
  Histogram& diffusion_rows_per_step = prometheus::BuildHistogram()
      .Name("spillway_diffusion_rows_per_step")
      .Help("Rows one diffusion canvas forwarded in one engine step (after compaction)")
      .Register(*registry).Add({}, Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 512,
                                                               1024, 2048});
  Counter& step_plan_builds = prometheus::BuildCounter()
      .Name("spillway_step_plan_builds_total")
      .Help("Step plans built (first engine step of each row-count bucket)")
      .Register(*registry).Add({});
  Family<Counter>& step_padded_rows = prometheus::BuildCounter()
      .Name("spillway_step_padded_rows_total")
      .Help("Padding rows added to engine steps to reach their bucket, by bucket (rows)")
      .Register(*registry);
  int64_t step_plan_builds_counted = 0;                 // render, under mu
  std::map<int32_t, int64_t> step_padded_rows_counted;  // render, under mu
  Histogram& diffusion_tokens_per_forward = prometheus::BuildHistogram()
      .Name("spillway_diffusion_tokens_per_forward")
      .Help("Diffusion canvas positions committed per denoising forward (the repair forward excluded)")
      .Register(*registry).Add({}, kDiffusionTokensBuckets);
  Histogram& diffusion_steps_per_block = prometheus::BuildHistogram()
      .Name("spillway_diffusion_steps_per_block")
      .Help("Diffusion denoising forwards per finished block")
      .Register(*registry).Add({}, kDiffusionStepsBuckets);
  Counter& diffusion_forced = prometheus::BuildCounter()
      .Name("spillway_diffusion_forced_commits_total")
      .Help("Turbo diffusion steps where no row passed the threshold and the top-1 was committed")
      .Register(*registry).Add({});
  Counter& diffusion_repair_changes = prometheus::BuildCounter()
      .Name("spillway_diffusion_repair_changes_total")
      .Help("Diffusion canvas positions the repair pass changed")
      .Register(*registry).Add({});
  Counter& diffusion_eos_dropped = prometheus::BuildCounter()
      .Name("spillway_diffusion_eos_tail_dropped_positions_total")
      .Help("Diffusion canvas positions after a committed end token filled without sampling (EOS tail-drop)")
      .Register(*registry).Add({});
  Counter& diffusion_repeat_trips = prometheus::BuildCounter()
      .Name("spillway_diffusion_repeat_guard_trips_total")
      .Help("Diffusion canvases the repeat guard ended")
      .Register(*registry).Add({});
  Gauge& diffusion_canvases = prometheus::BuildGauge()
      .Name("spillway_diffusion_canvases_running")
      .Help("Diffusion requests whose canvas is in the running set")
      .Register(*registry).Add({});
  Counter& prefix_queried = prometheus::BuildCounter()
      .Name("spillway_prefix_cache_queried_tokens_total")
      .Help("Prompt tokens looked up in the prefix cache")
      .Register(*registry).Add({});
  Counter& prefix_hit = prometheus::BuildCounter()
      .Name("spillway_prefix_cache_hit_tokens_total")
      .Help("Prompt tokens served from the prefix cache")
      .Register(*registry).Add({});
  Counter& prefix_discarded = prometheus::BuildCounter()
      .Name("spillway_prefix_cache_discarded_tokens_total")
      .Help("Hybrid models: KV-cached prompt tokens recomputed because no recurrent-state snapshot covered them")
      .Register(*registry).Add({});
  Family<Gauge>& state_slots = prometheus::BuildGauge()
      .Name("spillway_recurrent_state_slots")
      .Help("Hybrid models: recurrent-state slots by state: used (running sequences), free")
      .Register(*registry);
  Gauge& state_used = state_slots.Add({{"state", "used"}});
  Gauge& state_free = state_slots.Add({{"state", "free"}});
  Gauge& state_snapshots = prometheus::BuildGauge()
      .Name("spillway_recurrent_state_snapshots")
      .Help("Hybrid models: recurrent-state snapshots held by the prefix cache")
      .Register(*registry).Add({});
  Gauge& snapshot_bytes = prometheus::BuildGauge()
      .Name("spillway_recurrent_state_snapshot_bytes")
      .Help("Hybrid models: memory held by recurrent-state snapshots (prefix cache and running sequences' tails)")
      .Register(*registry).Add({});
  Family<Counter>& snapshot_copies = prometheus::BuildCounter()
      .Name("spillway_recurrent_state_snapshot_copies_total")
      .Help("Hybrid models: recurrent-state copies by op: save (state -> snapshot), restore (snapshot -> state)")
      .Register(*registry);
  Counter& snapshot_saves = snapshot_copies.Add({{"op", "save"}});
  Counter& snapshot_restores = snapshot_copies.Add({{"op", "restore"}});
  Family<Counter>& snapshot_copy_seconds = prometheus::BuildCounter()
      .Name("spillway_recurrent_state_snapshot_copy_seconds_total")
      .Help("Hybrid models: wall time of recurrent-state snapshot copies by op: save, restore")
      .Register(*registry);
  Counter& snapshot_save_seconds = snapshot_copy_seconds.Add({{"op", "save"}});
  Counter& snapshot_restore_seconds = snapshot_copy_seconds.Add({{"op", "restore"}});
  // MoBiLE big-little decoding (MoE models, runtime/mobile_step.h).
  Counter& moe_little_tokens = prometheus::BuildCounter()
      .Name("spillway_moe_little_tokens_total")
      .Help("MoBiLE: decode tokens accepted from the little pass (fewer experts)")
      .Register(*registry).Add({});
  Counter& moe_fallback_tokens = prometheus::BuildCounter()
      .Name("spillway_moe_fallback_tokens_total")
      .Help("MoBiLE: decode tokens recomputed with the full top-k after a low-confidence little pass")
      .Register(*registry).Add({});
  scheduler::MobileStats mobile_counted;  // cumulative values already counted (render, under mu)
  Counter& preemptions = prometheus::BuildCounter()
      .Name("spillway_preemptions_total")
      .Help("Sequences preempted for lack of KV blocks")
      .Register(*registry).Add({});
  Counter& steps = prometheus::BuildCounter()
      .Name("spillway_engine_steps_total")
      .Help("Engine steps (forward passes) run")
      .Register(*registry).Add({});

  Gauge& running = prometheus::BuildGauge()
      .Name("spillway_requests_running")
      .Help("Requests with a sequence in the running batch")
      .Register(*registry).Add({});
  Gauge& waiting = prometheus::BuildGauge()
      .Name("spillway_requests_waiting")
      .Help("Requests waiting to run (queued or preempted)")
      .Register(*registry).Add({});
  Gauge& kv_usage = prometheus::BuildGauge()
      .Name("spillway_kv_cache_usage_ratio")
      .Help("Fraction of KV cache blocks referenced by live sequences (0-1)")
      .Register(*registry).Add({});
  Family<Gauge>& kv_blocks = prometheus::BuildGauge()
      .Name("spillway_kv_cache_blocks")
      .Help("KV cache blocks by state: used (live sequences), cached (prefix cache, evictable), free")
      .Register(*registry);
  Gauge& kv_used = kv_blocks.Add({{"state", "used"}});
  Gauge& kv_cached = kv_blocks.Add({{"state", "cached"}});
  Gauge& kv_free = kv_blocks.Add({{"state", "free"}});
  Gauge& step_plans = prometheus::BuildGauge()
      .Name("spillway_step_plans")
      .Help("Live step plans (distinct padded batch shapes with a workspace)")
      .Register(*registry).Add({});
  Gauge& ready = prometheus::BuildGauge()
      .Name("spillway_ready")
      .Help("1 when the model is loaded and warmed and the server takes requests")
      .Register(*registry).Add({});

  // Weight residency and memory pressure.
  Counter& weight_bytes_read = prometheus::BuildCounter()
      .Name("spillway_weight_bytes_read_total")
      .Help("Weight bytes read from disk by layer streaming")
      .Register(*registry).Add({{"source", "disk"}});
  Gauge& stream_bandwidth = prometheus::BuildGauge()
      .Name("spillway_weight_stream_bandwidth_bytes_per_second")
      .Help("Read bandwidth of layer streaming while reading, over the last interval")
      .Register(*registry).Add({});
  Counter& io_stall = prometheus::BuildCounter()
      .Name("spillway_io_stall_seconds_total")
      .Help("Time the forward waited for a streamed layer to arrive from disk")
      .Register(*registry).Add({});
  Gauge& resident_layers = prometheus::BuildGauge()
      .Name("spillway_resident_layers")
      .Help("Decoder layers held in memory")
      .Register(*registry).Add({});
  Gauge& streamed_layers = prometheus::BuildGauge()
      .Name("spillway_streamed_layers")
      .Help("Decoder layers streamed from disk every forward step")
      .Register(*registry).Add({});
  Gauge& resident_weight_bytes = prometheus::BuildGauge()
      .Name("spillway_resident_weight_bytes")
      .Help("Weight bytes held in memory (non-layer weights and resident layers)")
      .Register(*registry).Add({});
  Gauge& memory_limit = prometheus::BuildGauge()
      .Name("spillway_memory_limit_bytes")
      .Help("The cgroup memory limit, or MemTotal without one")
      .Register(*registry).Add({});
  Gauge& memory_available = prometheus::BuildGauge()
      .Name("spillway_memory_available_bytes")
      .Help("Memory still available: limit minus working set, at most MemAvailable")
      .Register(*registry).Add({});
  Gauge& memory_pressure = prometheus::BuildGauge()
      .Name("spillway_memory_pressure_ratio")
      .Help("PSI memory pressure: share of the last 10 s some task stalled on memory")
      .Register(*registry).Add({});
  Counter& residency_shed = prometheus::BuildCounter()
      .Name("spillway_residency_shed_total")
      .Help("Layers moved from memory to streaming under memory pressure")
      .Register(*registry).Add({});
  Counter& residency_readmit = prometheus::BuildCounter()
      .Name("spillway_residency_readmit_total")
      .Help("Layers moved back into memory once pressure eased")
      .Register(*registry).Add({});
  // The expert tier (MoE models).
  Family<Counter>& moe_requests = prometheus::BuildCounter()
      .Name("spillway_moe_expert_requests_total")
      .Help("Routed experts a forward step asked the expert cache for, by result")
      .Register(*registry);
  Counter& moe_hits = moe_requests.Add({{"result", "hit"}});
  Counter& moe_misses = moe_requests.Add({{"result", "miss"}});
  Counter& moe_bytes_read = prometheus::BuildCounter()
      .Name("spillway_moe_expert_bytes_read_total")
      .Help("Routed-expert bytes read from disk into the expert cache")
      .Register(*registry).Add({});
  Counter& moe_io_stall = prometheus::BuildCounter()
      .Name("spillway_moe_io_stall_seconds_total")
      .Help("Time the forward waited for missed experts to arrive from disk")
      .Register(*registry).Add({});
  Counter& moe_evictions = prometheus::BuildCounter()
      .Name("spillway_moe_evictions_total")
      .Help("Cached experts replaced by others")
      .Register(*registry).Add({});
  Gauge& moe_resident_experts = prometheus::BuildGauge()
      .Name("spillway_moe_resident_experts")
      .Help("Routed experts held in the expert cache")
      .Register(*registry).Add({});
  Gauge& moe_cache_bytes = prometheus::BuildGauge()
      .Name("spillway_moe_cache_bytes")
      .Help("Bytes of the expert cache's slots")
      .Register(*registry).Add({});
  Histogram& moe_read_seconds = prometheus::BuildHistogram()
      .Name("spillway_moe_expert_read_seconds")
      .Help("Time one missed expert took to arrive from disk (read and retile)")
      .Register(*registry).Add({}, kMoeReadSecondsBuckets);
  Histogram& moe_experts_per_layer_step = prometheus::BuildHistogram()
      .Name("spillway_moe_experts_per_layer_step")
      .Help("Distinct routed experts one MoE layer ran in one forward step")
      .Register(*registry).Add({}, kMoeExpertsPerLayerStepBuckets);
  ResidencyMetrics residency_published;  // cumulative values already counted (engine thread)
  scheduler::StateSnapshotStats snapshots_counted;  // cumulative values already counted (render, under mu)

  Histogram& ttft = prometheus::BuildHistogram()
      .Name("spillway_time_to_first_token_seconds")
      .Help("Time from request arrival to its first generated token")
      .Register(*registry).Add({}, kTtftBuckets);
  Histogram& itl = prometheus::BuildHistogram()
      .Name("spillway_inter_token_latency_seconds")
      .Help("Time between consecutive token deliveries of a request")
      .Register(*registry).Add({}, kItlBuckets);
  Histogram& e2e = prometheus::BuildHistogram()
      .Name("spillway_e2e_request_latency_seconds")
      .Help("Time from request arrival to its last token")
      .Register(*registry).Add({}, kRequestBuckets);
  Histogram& queue = prometheus::BuildHistogram()
      .Name("spillway_request_queue_time_seconds")
      .Help("Time a request waited before its first engine step")
      .Register(*registry).Add({}, kRequestBuckets);
  Histogram& step_seconds = prometheus::BuildHistogram()
      .Name("spillway_step_duration_seconds")
      .Help("Wall time of one engine step (forward and sampling)")
      .Register(*registry).Add({}, kStepSecondsBuckets);
  Histogram& batch_tokens = prometheus::BuildHistogram()
      .Name("spillway_step_batch_tokens")
      .Help("Tokens forwarded per engine step")
      .Register(*registry).Add({}, kBatchTokenBuckets);
  Histogram& batch_sequences = prometheus::BuildHistogram()
      .Name("spillway_step_batch_sequences")
      .Help("Sequences per engine step")
      .Register(*registry).Add({}, kBatchSequenceBuckets);

  // vLLM's names, for routers and dashboards written for vLLM.
  Gauge& vllm_waiting = prometheus::BuildGauge()
      .Name("vllm:num_requests_waiting")
      .Help("Number of requests waiting to be processed.")
      .Register(*aliases).Add({{"model_name", model_name}});
  Gauge& vllm_running = prometheus::BuildGauge()
      .Name("vllm:num_requests_running")
      .Help("Number of requests in model execution batches.")
      .Register(*aliases).Add({{"model_name", model_name}});
  Gauge& vllm_kv_usage = prometheus::BuildGauge()
      .Name("vllm:kv_cache_usage_perc")
      .Help("KV-cache usage. 1 means 100 percent usage.")
      .Register(*aliases).Add({{"model_name", model_name}});
  Family<Gauge>& vllm_cache_config = prometheus::BuildGauge()
      .Name("vllm:cache_config_info")
      .Help("Information of the LLMEngine CacheConfig")
      .Register(*aliases);

  // Structured output (grammar/): compile and mask histograms are synced from the
  // process-wide counters at each render (deltas since the last one).
  Histogram& grammar_compile = prometheus::BuildHistogram()
      .Name("spillway_grammar_compile_seconds")
      .Help("Time to compile a structured-output constraint (compile cache misses)")
      .Register(*registry).Add({}, Histogram::BucketBoundaries(std::begin(GrammarCompileCounters::kCompileBucketBounds),
                                                               std::end(GrammarCompileCounters::kCompileBucketBounds)));
  Histogram& grammar_mask = prometheus::BuildHistogram()
      .Name("spillway_grammar_mask_seconds")
      .Help("Time to compute one token mask of a constrained sequence")
      .Register(*registry).Add({}, Histogram::BucketBoundaries(std::begin(engine::ConstraintCounters::kMaskBucketBounds),
                                                               std::end(engine::ConstraintCounters::kMaskBucketBounds)));
  Counter& output_pauses = prometheus::BuildCounter()
      .Name("spillway_output_pauses_total")
      .Help("Streams paused because their client stopped reading (output back-pressure)")
      .Register(*registry).Add({});
  Gauge& output_paused = prometheus::BuildGauge()
      .Name("spillway_output_paused_requests")
      .Help("Streaming requests paused now because their client is not reading")
      .Register(*registry).Add({});
  Counter& constrained_requests = prometheus::BuildCounter()
      .Name("spillway_grammar_constrained_requests_total")
      .Help("Requests with structured output (response_format, guided/structured_outputs, forced tool calls)")
      .Register(*registry).Add({});
  Counter& forced_tokens = prometheus::BuildCounter()
      .Name("spillway_grammar_forced_tokens_total")
      .Help("Tokens the grammar left as the only choice")
      .Register(*registry).Add({});
  Family<Counter>& grammar_cache = prometheus::BuildCounter()
      .Name("spillway_grammar_compile_cache_requests_total")
      .Help("Compile cache lookups, by result")
      .Register(*registry);
  Counter& grammar_cache_hits = grammar_cache.Add({{"result", "hit"}});
  Counter& grammar_cache_misses = grammar_cache.Add({{"result", "miss"}});
  Counter& grammar_errors = prometheus::BuildCounter()
      .Name("spillway_grammar_errors_total")
      .Help("Constraints refused at compile (400) or failed while generating (a mask cap)")
      .Register(*registry).Add({});
  GrammarCompileCounters compile_published;
  uint64_t mask_published[engine::ConstraintCounters::kMaskBuckets] = {};
  uint64_t mask_ns_published = 0, forced_published = 0, failures_published = 0;

  void sync_grammar() {
    const GrammarCompileCounters c = grammar_compile_counters();
    std::vector<double> inc(GrammarCompileCounters::kCompileBuckets);
    uint64_t total = 0;
    for (size_t b = 0; b < inc.size(); ++b) {
      inc[b] = static_cast<double>(c.compile_bucket[b] - compile_published.compile_bucket[b]);
      total += c.compile_bucket[b] - compile_published.compile_bucket[b];
    }
    if (total > 0) grammar_compile.ObserveMultiple(inc, c.compile_seconds - compile_published.compile_seconds);
    grammar_cache_hits.Increment(static_cast<double>(c.cache_hits - compile_published.cache_hits));
    grammar_cache_misses.Increment(static_cast<double>(c.cache_misses - compile_published.cache_misses));
    grammar_errors.Increment(static_cast<double>(c.compile_errors - compile_published.compile_errors));
    compile_published = c;

    engine::ConstraintCounters& m = engine::constraint_counters();
    std::vector<double> minc(engine::ConstraintCounters::kMaskBuckets);
    total = 0;
    for (size_t b = 0; b < minc.size(); ++b) {
      const uint64_t now = m.mask_bucket[b].load(std::memory_order_relaxed);
      minc[b] = static_cast<double>(now - mask_published[b]);
      total += now - mask_published[b];
      mask_published[b] = now;
    }
    const uint64_t ns = m.mask_nanoseconds.load(std::memory_order_relaxed);
    if (total > 0) grammar_mask.ObserveMultiple(minc, static_cast<double>(ns - mask_ns_published) * 1e-9);
    mask_ns_published = ns;
    const uint64_t forced = m.forced_tokens.load(std::memory_order_relaxed);
    forced_tokens.Increment(static_cast<double>(forced - forced_published));
    forced_published = forced;
    const uint64_t failures = m.failures.load(std::memory_order_relaxed);
    grammar_errors.Increment(static_cast<double>(failures - failures_published));
    failures_published = failures;
  }

  std::mutex mu;  // cache-config gauge creation; render()
  bool cache_config_set = false;

  explicit Impl(std::string name) : model_name(std::move(name)) {}
};

ServerMetrics::ServerMetrics(std::string model_name)
    : impl_(std::make_unique<Impl>(std::move(model_name))) {
  // Every endpoint's 200 series exists from the start, so rates work from the first scrape.
  for (const Route& route : kRoutes) {
    if (!route.prefix) impl_->http_requests.Add({{"endpoint", std::string(route.label)}, {"status", "200"}});
  }
  for (const char* r : {"stop", "length", "tool_calls", "cancelled", "error"}) {
    impl_->finished.Add({{"finish_reason", r}});
  }
}

ServerMetrics::~ServerMetrics() = default;

std::string_view ServerMetrics::endpoint_label(std::string_view path) {
  const Route* route = find_route(path);
  return route ? route->label : "other";
}

void ServerMetrics::count_request(std::string_view path, int status) {
  impl_->http_requests
      .Add({{"endpoint", std::string(endpoint_label(path))}, {"status", std::to_string(status)}})
      .Increment();
}

void ServerMetrics::count_finished(std::string_view reason) {
  impl_->finished.Add({{"finish_reason", std::string(reason)}}).Increment();
}

void ServerMetrics::count_constrained_request() { impl_->constrained_requests.Increment(); }

void ServerMetrics::output_paused(bool paused) {
  if (paused) {
    impl_->output_pauses.Increment();
    impl_->output_paused.Increment();
  } else {
    impl_->output_paused.Decrement();
  }
}

void ServerMetrics::add_prompt_tokens(int64_t n) { impl_->prompt_tokens.Increment(static_cast<double>(n)); }
void ServerMetrics::add_generation_tokens(int64_t n) {
  impl_->generation_tokens.Increment(static_cast<double>(n));
}
void ServerMetrics::add_diffusion(int64_t forwards, int64_t committed, int64_t rows_evaluated) {
  impl_->diffusion_forwards.Increment(static_cast<double>(forwards));
  impl_->diffusion_committed.Increment(static_cast<double>(committed));
  impl_->diffusion_rows.Increment(static_cast<double>(rows_evaluated));
}
void ServerMetrics::observe_diffusion(const scheduler::DiffusionUsage& before, const scheduler::DiffusionUsage& now) {
  Impl& m = *impl_;
  m.diffusion_forced.Increment(std::max(0, now.forced_top1 - before.forced_top1));
  m.diffusion_repair_changes.Increment(std::max(0, now.repair_changes - before.repair_changes));
  m.diffusion_eos_dropped.Increment(std::max(0, now.eos_tail_dropped - before.eos_tail_dropped));
  m.diffusion_repeat_trips.Increment(std::max(0, now.repeat_guard_trips - before.repeat_guard_trips));
  const int32_t forwards = (now.forwards - now.repair_forwards) - (before.forwards - before.repair_forwards);
  if (forwards > 0) {
    const double per = double(now.committed - before.committed) / forwards;
    for (int32_t i = 0; i < forwards; ++i) m.diffusion_tokens_per_forward.Observe(per);
  }
  const int32_t blocks = now.blocks_finished - before.blocks_finished;
  if (blocks > 0) {
    const double per = double(now.block_forwards - before.block_forwards) / blocks;
    for (int32_t i = 0; i < blocks; ++i) m.diffusion_steps_per_block.Observe(per);
  }
}
void ServerMetrics::observe_queue_time(double s) { impl_->queue.Observe(s); }
void ServerMetrics::observe_time_to_first_token(double s) { impl_->ttft.Observe(s); }
void ServerMetrics::observe_inter_token_latency(double s) { impl_->itl.Observe(s); }
void ServerMetrics::observe_e2e_latency(double s) { impl_->e2e.Observe(s); }
void ServerMetrics::set_ready(bool ready) { impl_->ready.Set(ready ? 1.0 : 0.0); }

void ServerMetrics::set_cache_config(int32_t block_size, int32_t num_blocks) {
  std::lock_guard lock(impl_->mu);
  if (impl_->cache_config_set) return;
  impl_->cache_config_set = true;
  impl_->vllm_cache_config
      .Add({{"block_size", std::to_string(block_size)}, {"num_gpu_blocks", std::to_string(num_blocks)}})
      .Set(1.0);
}

void ServerMetrics::set_residency(const ResidencyMetrics& m) {
  Impl& i = *impl_;
  ResidencyMetrics& last = i.residency_published;
  i.resident_layers.Set(m.resident_layers);
  i.streamed_layers.Set(m.streamed_layers);
  i.resident_weight_bytes.Set(static_cast<double>(m.resident_weight_bytes));
  i.stream_bandwidth.Set(m.stream_bandwidth_bytes_per_second);
  i.memory_limit.Set(static_cast<double>(m.memory_limit_bytes));
  i.memory_available.Set(static_cast<double>(m.memory_available_bytes));
  i.memory_pressure.Set(m.memory_pressure_ratio);
  // Counters advance by what grew since the last call (set_residency has one caller thread).
  if (m.weight_bytes_read_total > last.weight_bytes_read_total) {
    i.weight_bytes_read.Increment(static_cast<double>(m.weight_bytes_read_total - last.weight_bytes_read_total));
  }
  if (m.io_stall_seconds_total > last.io_stall_seconds_total) {
    i.io_stall.Increment(m.io_stall_seconds_total - last.io_stall_seconds_total);
  }
  if (m.shed_total > last.shed_total) i.residency_shed.Increment(static_cast<double>(m.shed_total - last.shed_total));
  if (m.readmit_total > last.readmit_total) {
    i.residency_readmit.Increment(static_cast<double>(m.readmit_total - last.readmit_total));
  }
  auto advance = [](Counter& c, auto now, auto before) {
    if (now > before) c.Increment(static_cast<double>(now - before));
  };
  advance(i.moe_hits, m.moe_expert_hits_total, last.moe_expert_hits_total);
  advance(i.moe_misses, m.moe_expert_misses_total, last.moe_expert_misses_total);
  advance(i.moe_bytes_read, m.moe_expert_bytes_read_total, last.moe_expert_bytes_read_total);
  advance(i.moe_io_stall, m.moe_io_stall_seconds_total, last.moe_io_stall_seconds_total);
  advance(i.moe_evictions, m.moe_evictions_total, last.moe_evictions_total);
  i.moe_resident_experts.Set(m.moe_resident_experts);
  i.moe_cache_bytes.Set(static_cast<double>(m.moe_cache_bytes));
  advance_histogram(i.moe_read_seconds, m.moe_expert_read_seconds, last.moe_expert_read_seconds);
  advance_histogram(i.moe_experts_per_layer_step, m.moe_experts_per_layer_step, last.moe_experts_per_layer_step);
  last = m;
}

void ServerMetrics::on_step(const scheduler::StepStats& stats) {
  impl_->steps.Increment();
  if (stats.preemptions > 0) impl_->preemptions.Increment(stats.preemptions);
  impl_->step_seconds.Observe(stats.seconds);
  impl_->batch_tokens.Observe(stats.batch_tokens);
  impl_->batch_sequences.Observe(stats.batch_sequences);
  for (int32_t rows : stats.canvas_rows) impl_->diffusion_rows_per_step.Observe(rows);
}

void ServerMetrics::on_prefix_lookup(int32_t queried_tokens, int32_t hit_tokens) {
  if (queried_tokens > 0) impl_->prefix_queried.Increment(queried_tokens);
  if (hit_tokens > 0) impl_->prefix_hit.Increment(hit_tokens);
}

void ServerMetrics::on_prefix_discarded(int32_t tokens) {
  if (tokens > 0) impl_->prefix_discarded.Increment(tokens);
}

std::string ServerMetrics::render(const std::optional<runtime::EngineSnapshot>& snapshot,
                                  bool with_vllm_aliases) {
  std::lock_guard lock(impl_->mu);
  if (snapshot) {
    const runtime::EngineSnapshot& s = *snapshot;
    const double total = s.kv_blocks_total;
    const double usage = total > 0 ? s.kv_blocks_used / total : 0.0;
    impl_->running.Set(s.running);
    impl_->waiting.Set(s.waiting);
    impl_->kv_usage.Set(usage);
    impl_->kv_used.Set(s.kv_blocks_used);
    impl_->kv_cached.Set(s.kv_blocks_cached);
    impl_->kv_free.Set(std::max(0, s.kv_blocks_total - s.kv_blocks_used - s.kv_blocks_cached));
    impl_->step_plans.Set(s.live_step_plans);
    impl_->diffusion_canvases.Set(s.canvases_running);
    impl_->state_used.Set(s.state_slots_used);
    impl_->state_free.Set(s.state_slots_total - s.state_slots_used);
    impl_->state_snapshots.Set(s.state_snapshots);
    const scheduler::StateSnapshotStats& st = s.state_snapshot_stats;
    scheduler::StateSnapshotStats& counted = impl_->snapshots_counted;
    impl_->snapshot_bytes.Set(static_cast<double>(st.bytes));
    auto advance = [](Counter& c, auto now, auto& before) {
      if (now > before) c.Increment(static_cast<double>(now - before));
      before = std::max(before, now);
    };
    advance(impl_->snapshot_saves, st.saves_total, counted.saves_total);
    advance(impl_->snapshot_restores, st.restores_total, counted.restores_total);
    advance(impl_->snapshot_save_seconds, st.save_seconds_total, counted.save_seconds_total);
    advance(impl_->snapshot_restore_seconds, st.restore_seconds_total, counted.restore_seconds_total);
    advance(impl_->moe_little_tokens, s.mobile_stats.little_tokens_total, impl_->mobile_counted.little_tokens_total);
    advance(impl_->moe_fallback_tokens, s.mobile_stats.fallback_tokens_total,
            impl_->mobile_counted.fallback_tokens_total);
    advance(impl_->step_plan_builds, s.step_plan_builds, impl_->step_plan_builds_counted);
    for (const auto& [bucket, rows] : s.padded_rows_by_bucket) {
      int64_t& before = impl_->step_padded_rows_counted[bucket];
      if (rows > before) {
        impl_->step_padded_rows.Add({{"bucket", std::to_string(bucket)}}).Increment(static_cast<double>(rows - before));
        before = rows;
      }
    }
    impl_->vllm_running.Set(s.running);
    impl_->vllm_waiting.Set(s.waiting);
    impl_->vllm_kv_usage.Set(usage);
  }
  impl_->sync_grammar();
  prometheus::TextSerializer serializer;
  std::string out = serializer.Serialize(impl_->registry->Collect());
  if (with_vllm_aliases) out += serializer.Serialize(impl_->aliases->Collect());
  return out;
}

}  // namespace spillway::server
