// The loaded model and its engine: model file, tokenizer, chat prompt, kernel thread pool,
// engine loop. load() runs once on a loader thread while the HTTP server already listens;
// handlers use the accessors only after ready().
//
// Thread contract: load() and stop() from the lifecycle thread(s); ready(), snapshot() and
// (once ready) the accessors from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/result.h"
#include "engine/platform/memory_probe.h"
#include "runtime/engine_loop.h"
#include "server/model_backend.h"

namespace spillway::engine {
class Model;
class Tokenizer;
}  // namespace spillway::engine
namespace spillway::runtime {
struct EngineBootstrap;
}

namespace spillway::server {

struct ServeOptions;
class ServerMetrics;
class ChatPrompt;

class ModelService final : public ModelBackend {
 public:
  ModelService(const ServeOptions& options, std::string model_path, ServerMetrics& metrics);
  ~ModelService() override;

  // Builds the demo model when asked to and it is missing, opens the model, picks the
  // chat template, starts the engine and runs one short generation. Errors name the file.
  Status load();
  // Stops the engine: queued and running requests finish as cancelled. Idempotent.
  void stop();

  bool ready() const override { return ready_.load(std::memory_order_acquire); }
  std::optional<runtime::EngineSnapshot> snapshot() const override;
  std::variant<scheduler::RequestId, scheduler::SubmitRejection> submit(
      scheduler::GenerationParams params, scheduler::UpdateSink sink) override {
    return engine_->submit(std::move(params), std::move(sink));
  }
  void cancel(scheduler::RequestId id) override { engine_->cancel(id); }
  void set_output_paused(scheduler::RequestId id, bool paused) override { engine_->set_output_paused(id, paused); }
  const engine::Tokenizer& tokenizer() const override { return *tokenizer_; }
  const ChatPrompt& chat_prompt() const override { return *chat_prompt_; }
  int32_t max_context() const override { return max_context_; }
  int32_t n_vocab() const override { return n_vocab_; }
  bool diffusion_model() const override { return diffusion_model_.load(std::memory_order_acquire); }
  int32_t moe_experts_used() const override { return moe_experts_used_.load(std::memory_order_acquire); }

 private:
  Status ensure_demo_model();
  Status warm_up();
  // Engine thread, between steps: pressure control, then the residency metrics.
  void between_steps();
  // Engine thread: logs the controller's sheds and re-admissions since the last call.
  void log_residency_events();

  const ServeOptions& options_;
  std::string model_path_;
  ServerMetrics& metrics_;
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::unique_ptr<ChatPrompt> chat_prompt_;
  engine::LinuxMemorySource memory_;
  // Pool, residency, pressure controller. Declared before engine_: the engine's runner
  // uses all three until the engine stops.
  std::unique_ptr<runtime::EngineBootstrap> engine_parts_;
  uint64_t last_bytes_read_ = 0;       // engine thread: bandwidth over the last interval
  double last_read_seconds_ = 0;
  double stream_bandwidth_ = 0;
  size_t logged_residency_events_ = 0;  // engine thread: events already logged
  int64_t logged_shed_total_ = 0;       // and the totals when the event list was last seen
  int64_t logged_readmit_total_ = 0;
  std::unique_ptr<runtime::EngineLoop> engine_;
  int32_t max_context_ = 0;
  int32_t n_vocab_ = 0;
  std::atomic<bool> diffusion_model_{false};  // set at load
  std::atomic<int32_t> moe_experts_used_{0};  // set at load
  std::mutex engine_mu_;  // engine_ creation vs snapshot() / stop()
  std::atomic<bool> engine_started_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> ready_{false};
};

}  // namespace spillway::server
