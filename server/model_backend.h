// What request handlers need from the loaded model: generation through the engine loop,
// the tokenizer, the chat prompt, the limits. ModelService is the real one; tests use a
// scripted fake.
//
// Thread contract: all methods may be called from any thread; the accessors below
// ready() only once ready() returned true.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>

#include "runtime/engine_loop.h"

namespace spillway::engine {
class Tokenizer;
}

namespace spillway::server {

class ChatPrompt;

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;

  virtual bool ready() const = 0;
  // The engine's state; nullopt before the engine exists.
  virtual std::optional<runtime::EngineSnapshot> snapshot() const = 0;

  virtual std::variant<scheduler::RequestId, scheduler::SubmitRejection> submit(
      scheduler::GenerationParams params, scheduler::UpdateSink sink) = 0;
  virtual void cancel(scheduler::RequestId id) = 0;
  // Output back-pressure (runtime::EngineLoop::set_output_paused): a paused request is not
  // scheduled until resumed; it keeps its KV.
  virtual void set_output_paused(scheduler::RequestId /*id*/, bool /*paused*/) {}

  virtual const engine::Tokenizer& tokenizer() const = 0;
  virtual const ChatPrompt& chat_prompt() const = 0;
  virtual int32_t max_context() const = 0;
  virtual int32_t n_vocab() const = 0;
  // A masked-diffusion model: requests are canvases (engine/diffusion), the `diffusion`
  // request fields apply.
  virtual bool diffusion_model() const { return false; }
  // MoE models: the largest top-k of the MoE layers (0: none); the `moe` request field
  // (MoBiLE) applies to MoE models only.
  virtual int32_t moe_experts_used() const { return 0; }
};

}  // namespace spillway::server
