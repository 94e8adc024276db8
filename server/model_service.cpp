#include "server/model_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include <fmt/format.h>

#include "engine/demo_model.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "kernels/thread_pool.h"
#include "scheduler/engine_runner.h"
#include "server/chat_prompt.h"
#include "server/logging.h"
#include "server/metrics.h"
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
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(model_path_, ec)) return {};
  const fs::path path(model_path_);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) return Error{fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message())};
  auto options = engine::resolve_demo_model_options(engine::DemoModelOptions{});
  if (!options) return options.error();
  log_info("building the demo model", {{"path", model_path_}});
  // Written beside the target and renamed, so a concurrent start never sees half a file.
  const std::string tmp = fmt::format("{}.{}.tmp", model_path_, getpid());
  Status st = engine::write_demo_model(tmp, *options);
  if (!st) {
    fs::remove(tmp, ec);
    return st;
  }
  fs::rename(tmp, path, ec);
  if (ec) return Error{fmt::format("cannot move {} to {}: {}", tmp, model_path_, ec.message())};
  return {};
}

Status ModelService::load() {
  const auto t0 = std::chrono::steady_clock::now();
  if (options_.model.empty()) SPILLWAY_TRY(ensure_demo_model());
  if (stopped_) return Error{"stopped while loading"};

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

  // Context and KV capacity.
  int32_t context = options_.ctx_size > 0 ? options_.ctx_size
                                          : (cfg.n_ctx_train > 0 ? cfg.n_ctx_train : kFallbackContext);
  const int64_t token_bytes = engine::KvCache::bytes_per_token(cfg.n_layers, cfg.n_kv_heads,
                                                               cfg.head_dim, kernels::DType::F16);
  uint64_t kv_bytes = options_.kv_cache_bytes;
  if (kv_bytes == 0) {
    const uint64_t wanted = static_cast<uint64_t>(token_bytes) * context * options_.max_running;
    kv_bytes = std::max<uint64_t>(std::min(wanted, kDefaultKvCap),
                                  static_cast<uint64_t>(token_bytes) * context);
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

  int threads = options_.threads;
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  pool_ = std::make_unique<kernels::ThreadPool>(threads);
  auto runner = scheduler::make_engine_runner(*model_, *pool_, sc);
  {
    std::lock_guard lock(engine_mu_);
    if (stopped_) return Error{"stopped while loading"};
    engine_ = std::make_unique<scheduler::EngineLoop>(std::move(runner), *tokenizer_, sc, &metrics_);
    engine_->start();
    engine_started_.store(true, std::memory_order_release);
  }
  metrics_.set_cache_config(sc.block_size, sc.n_kv_blocks);
  log_info("model loaded",
           {{"path", model_path_}, {"architecture", cfg.architecture}, {"layers", cfg.n_layers},
            {"vocab", n_vocab_}, {"ctx_size", context}, {"kv_cache_blocks", sc.n_kv_blocks},
            {"kv_cache_bytes", static_cast<uint64_t>(sc.n_kv_blocks) * kBlockSize * token_bytes},
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

void ModelService::stop() {
  stopped_ = true;
  std::lock_guard lock(engine_mu_);
  if (engine_) engine_->stop();
}

std::optional<scheduler::EngineSnapshot> ModelService::snapshot() const {
  if (!engine_started_.load(std::memory_order_acquire)) return std::nullopt;
  return engine_->snapshot();
}

}  // namespace spillway::server
