#include "server/model_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>

#include <fmt/format.h>

#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "engine/model/model.h"
#include "engine/sampling/grammar_constraint.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_bootstrap.h"
#include "runtime/engine_runner.h"
#include "server/chat_prompt.h"
#include "server/observability/logging.h"
#include "server/observability/metrics.h"
#include "server/observability/progress.h"
#include "server/serve_options.h"

namespace spillway::server {

namespace {

constexpr int32_t kBlockSize = 16;
constexpr uint64_t kDefaultKvCap = 1ull << 30;
constexpr int32_t kFallbackContext = 2048;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ModelService::ModelService(const ServeOptions& options, std::string model_path, ServerMetrics& metrics)
    : options_(options), model_path_(std::move(model_path)), metrics_(metrics) {}

ModelService::~ModelService() { stop(); }

Status ModelService::ensure_demo_model() {
  std::error_code ec;
  if (std::filesystem::exists(model_path_, ec)) return {};
  if (!options_.write_demo_model) return Error{fmt::format("no model at {} and no demo model builder", model_path_)};
  log_info("building the demo model", {{"path", model_path_}});
  ProgressReporter progress("building the demo model", "tensors",
                            ProgressReporter::interactive_for(options_.log_format));
  return options_.write_demo_model(
      model_path_, [&progress](int64_t done, int64_t total) { progress.update(done, total); });
}

Status ModelService::load() {
  const auto t0 = std::chrono::steady_clock::now();
  if (options_.model.empty()) SPILLWAY_TRY(ensure_demo_model());
  if (stopped_) return Error{"stopped while loading"};

  {
    std::error_code size_ec;
    const auto bytes = std::filesystem::is_regular_file(model_path_, size_ec)
                           ? std::filesystem::file_size(model_path_, size_ec)
                           : 0;
    log_info("loading the model", {{"path", model_path_}, {"file_bytes", size_ec ? 0 : bytes}});
  }
  auto model = engine::Model::open(model_path_);
  if (!model) return model.error();
  model_ = std::move(*model);
  const engine::ModelConfig& cfg = model_->config();
  auto tokenizer = engine::Tokenizer::from_metadata(model_->source().metadata(), model_path_);
  if (!tokenizer) return tokenizer.error();
  tokenizer_ = std::move(*tokenizer);
  n_vocab_ = std::min(cfg.n_vocab, tokenizer_->n_vocab());
  auto chat = ChatPrompt::create(model_->source().metadata(), *tokenizer_, cfg.architecture);
  if (!chat) return Error{fmt::format("{}: {}", model_path_, chat.error().message)};
  chat_prompt_ = std::move(*chat);

  // Context, weights under the memory budget, KV capacity.
  int32_t context = options_.ctx_size > 0 ? options_.ctx_size
                                          : (cfg.n_ctx_train > 0 ? cfg.n_ctx_train : kFallbackContext);
  engine::ResidencyOptions residency_opts = options_.residency;
  if (options_.kv_cache_bytes > 0) residency_opts.kv_reserve_bytes = static_cast<int64_t>(options_.kv_cache_bytes);
  ProgressReporter progress("reading the resident weights", "bytes",
                            ProgressReporter::interactive_for(options_.log_format));
  // The recurrent-state memory the runner will hold (hybrid models), for the plan.
  scheduler::SchedulerConfig state_config;
  state_config.max_running = options_.max_running;
  const int32_t state_slots = runtime::resolve_state_slots(state_config, cfg);
  const int32_t state_snapshots = runtime::resolve_state_snapshots(state_config, cfg);
  auto booted = runtime::bootstrap_engine(
      *model_,
      runtime::EngineBootstrapOptions{.residency = residency_opts,
                                      .context_tokens = context,
                                      .max_batch_tokens = options_.max_batch_tokens,
                                      .threads = options_.threads,
                                      .state_slots = state_slots,
                                      .state_snapshots = state_snapshots,
                                      .progress = resident_weights_progress(progress)},
      memory_);
  if (!booted) return booted.error();
  engine_parts_ = std::make_unique<runtime::EngineBootstrap>(std::move(*booted));
  const int threads = engine_parts_->threads;
  for (const std::string& line : engine_parts_->residency->describe(*model_)) log_info(line);
  const engine::ResidencyPlan& plan = engine_parts_->residency->plan;

  const int64_t token_bytes = engine::KvCache::bytes_per_token(cfg, runtime::kv_cache_type(cfg));
  uint64_t kv_bytes = options_.kv_cache_bytes;
  if (kv_bytes == 0 && plan.streamed_layers > 0 && !residency_opts.resident_layers) {
    // Streaming because the budget is short: the KV gets what the plan reserved for it
    // (--residency-priority); the rest of the budget went to resident layers.
    kv_bytes = static_cast<uint64_t>(plan.kv_reserve_bytes);
  } else if (kv_bytes == 0) {
    // Everything resident, or the resident count was chosen (--resident-layers):
    // max_running full contexts (at most 1 GiB, at least one context), within what the
    // budget leaves, never below the plan's reserve.
    const uint64_t wanted = static_cast<uint64_t>(token_bytes) * context * options_.max_running;
    const uint64_t by_default = std::max<uint64_t>(std::min(wanted, kDefaultKvCap),
                                                   static_cast<uint64_t>(token_bytes) * context);
    const int64_t room = plan.budget_bytes - plan.non_layer_bytes - plan.resident_layer_bytes -
                         plan.staging_bytes - plan.read_cache_bytes - plan.runtime_reserve_bytes;
    kv_bytes = std::max<uint64_t>(static_cast<uint64_t>(plan.kv_reserve_bytes),
                                  std::min<uint64_t>(by_default, static_cast<uint64_t>(std::max<int64_t>(room, 0))));
  }
  const int64_t n_blocks = static_cast<int64_t>(kv_bytes / (static_cast<uint64_t>(token_bytes) * kBlockSize));
  if (n_blocks < 1) {
    return Error{fmt::format("--kv-cache-bytes {} is smaller than one KV block ({} bytes)", kv_bytes,
                             token_bytes * kBlockSize)};
  }
  if (n_blocks * kBlockSize < context) {
    log_warn("the KV cache holds less than one full context; the context is reduced to fit",
             {{"kv_cache_tokens", n_blocks * kBlockSize}, {"ctx_size", context}});
    context = static_cast<int32_t>(n_blocks * kBlockSize);
  }
  max_context_ = context;

  scheduler::SchedulerConfig sc;
  sc.max_batch_tokens = options_.max_batch_tokens;
  sc.max_running = options_.max_running;
  sc.max_waiting = options_.max_waiting;
  sc.max_context = context;
  sc.block_size = kBlockSize;
  sc.n_kv_blocks = static_cast<int32_t>(std::min<int64_t>(n_blocks, INT32_MAX));
  sc.prefix_cache = true;
  sc.diffusion_model = cfg.is_diffusion();
  diffusion_model_.store(sc.diffusion_model, std::memory_order_release);
  sc.mask_token_id = cfg.mask_token_id;
  sc.shift_logits = cfg.shift_logits;
  sc.diffusion_compact = options_.diffusion_compact;
  sc.pad_step_buckets = options_.step_buckets;
  if (!sc.diffusion_model) {  // structured output: the vocabulary as a trie, once
    const auto trie_t0 = std::chrono::steady_clock::now();
    sc.token_trie = engine::build_token_trie(*tokenizer_);
    log_info("token trie built", {{"tokens", static_cast<uint64_t>(sc.token_trie->vocab_size())},
                                  {"seconds", seconds_since(trie_t0)}});
  }

  runtime::EngineRunnerOptions runner_options;
  runner_options.weights = engine_parts_->weights();
  runner_options.between_steps = [this] { between_steps(); };
  runner_options.mobile = options_.mobile;
  sc.moe_experts_used = engine::moe_top_k(cfg);
  moe_experts_used_.store(sc.moe_experts_used, std::memory_order_release);
  auto runner = runtime::make_engine_runner(*model_, *engine_parts_->pool, sc, std::move(runner_options));
  {
    std::lock_guard lock(engine_mu_);
    if (stopped_) return Error{"stopped while loading"};
    engine_ = std::make_unique<runtime::EngineLoop>(std::move(runner), *tokenizer_, sc, &metrics_);
    engine_->start();
    engine_started_.store(true, std::memory_order_release);
  }
  metrics_.set_cache_config(sc.block_size, sc.n_kv_blocks);
  log_info("model loaded",
           {{"path", model_path_}, {"architecture", cfg.architecture}, {"layers", cfg.n_layers},
            {"vocab", n_vocab_}, {"ctx_size", context}, {"kv_cache_blocks", sc.n_kv_blocks},
            {"kv_cache_bytes", static_cast<uint64_t>(sc.n_kv_blocks) * kBlockSize * token_bytes},
            {"recurrent_state_bytes_per_sequence", static_cast<uint64_t>(engine::RecurrentState::state_bytes(cfg))},
            {"recurrent_state_slots", state_slots}, {"recurrent_state_snapshots", state_snapshots},
            {"threads", threads}, {"chat_template", chat_prompt_->origin()},
            {"seconds", seconds_since(t0)}});
  SPILLWAY_TRY(warm_up());
  ready_.store(true, std::memory_order_release);
  log_info("ready", {{"seconds", seconds_since(t0)}});
  return {};
}

Status ModelService::warm_up() {
  scheduler::GenerationParams params;
  params.prompt = tokenize_prompt(*tokenizer_, "Hello", /*add_special=*/true);
  if (params.prompt.empty()) params.prompt.push_back(0);
  params.sampling.temperature = 0.0f;
  params.max_tokens = 2;
  params.ignore_eos = true;
  auto done = std::make_shared<std::promise<std::optional<std::string>>>();
  auto submitted = engine_->submit(std::move(params), [done](scheduler::RequestUpdate&& u) {
    if (!u.finished) return;
    if (u.error) {
      done->set_value(u.error);
    } else {
      done->set_value(std::nullopt);
    }
  });
  if (auto* rejection = std::get_if<scheduler::SubmitRejection>(&submitted)) {
    return Error{"warm-up generation refused: " + rejection->message};
  }
  std::optional<std::string> error = done->get_future().get();
  if (error) return Error{"warm-up generation failed: " + *error};
  if (stopped_) return Error{"stopped while warming up"};
  return {};
}

void ModelService::log_residency_events() {
  const engine::ResidencyController& controller = *engine_parts_->controller;
  const std::vector<engine::ResidencyEvent>& events = controller.events();
  for (; logged_residency_events_ < events.size(); ++logged_residency_events_) {
    const engine::ResidencyEvent& e = events[logged_residency_events_];
    nlohmann::ordered_json fields = {{"reason", e.reason},
                                     {"resident_layers", e.resident_layers_after},
                                     {"available_bytes", e.available_bytes},
                                     {"floor_bytes", e.floor_bytes},
                                     {"pressure_some_avg10", e.pressure_some_avg10}};
    if (e.layers_shed + e.expert_slots_shed > 0) {
      fields["layers_shed"] = e.layers_shed;
      fields["expert_slots_shed"] = e.expert_slots_shed;
      log_warn("memory pressure: resident weights shed", fields);
    } else {
      fields["layers_readmitted"] = e.layers_readmitted;
      fields["expert_slots_readmitted"] = e.expert_slots_readmitted;
      log_info("memory calm: weights re-admitted", fields);
    }
  }
  // Past the controller's event list (kMaxEvents), say only that something changed.
  if (events.size() >= engine::ResidencyController::kMaxEvents &&
      (controller.shed_total() != logged_shed_total_ || controller.readmit_total() != logged_readmit_total_)) {
    log_info("residency changed (event list full; totals only)",
             {{"shed_total", controller.shed_total()},
              {"readmit_total", controller.readmit_total()},
              {"resident_layers", engine_parts_->residency->weights->resident_layers()}});
  }
  logged_shed_total_ = controller.shed_total();
  logged_readmit_total_ = controller.readmit_total();
}

void ModelService::between_steps() {
  engine_parts_->between_steps();
  log_residency_events();
  const engine::ResidencyController& controller = *engine_parts_->controller;
  const engine::WeightResidency& w = *engine_parts_->residency->weights;
  const engine::StreamerStats io = w.streamer_stats();
  if (io.read_seconds - last_read_seconds_ >= 0.05) {
    stream_bandwidth_ = static_cast<double>(io.bytes_read - last_bytes_read_) /
                        (io.read_seconds - last_read_seconds_);
    last_bytes_read_ = io.bytes_read;
    last_read_seconds_ = io.read_seconds;
  }
  const engine::MemoryReading& memory = controller.last_reading();
  ResidencyMetrics m;
  m.resident_layers = w.resident_layers();
  m.streamed_layers = w.n_layers() - m.resident_layers;
  m.resident_weight_bytes = w.resident_weight_bytes();
  m.weight_bytes_read_total = io.bytes_read;
  m.stream_bandwidth_bytes_per_second = stream_bandwidth_;
  m.io_stall_seconds_total = io.stall_seconds;
  // Until the controller's first check, the reading taken when the plan was made.
  const engine::MemoryReading& shown = memory.limit_bytes > 0 ? memory : engine_parts_->residency->memory_at_start;
  m.memory_limit_bytes = shown.limit_bytes;
  m.memory_available_bytes = shown.available_bytes;
  m.memory_pressure_ratio = shown.pressure_some_avg10 / 100.0;
  m.shed_total = controller.shed_total();
  m.readmit_total = controller.readmit_total();
  if (w.expert_tier()) {
    const engine::ExpertCacheStats e = w.expert_cache_stats();
    m.moe_expert_hits_total = e.hits;
    m.moe_expert_misses_total = e.misses;
    m.moe_expert_bytes_read_total = e.bytes_read;
    m.moe_io_stall_seconds_total = e.stall_seconds;
    m.moe_evictions_total = e.evictions;
    m.moe_resident_experts = e.resident_experts;
    m.moe_cache_bytes = e.cache_bytes;
    m.moe_expert_read_seconds = e.read_time;
    m.moe_experts_per_layer_step = e.experts_per_layer_step;
  }
  metrics_.set_residency(m);
}

void ModelService::stop() {
  stopped_ = true;
  std::lock_guard lock(engine_mu_);
  if (engine_) engine_->stop();
}

std::optional<runtime::EngineSnapshot> ModelService::snapshot() const {
  if (!engine_started_.load(std::memory_order_acquire)) return std::nullopt;
  return engine_->snapshot();
}

}  // namespace spillway::server
