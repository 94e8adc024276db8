// One chat or completions request in flight: submits its prompts to the engine, turns the
// engine's updates into SSE chunks or one final body, cancels on disconnect, and records
// metrics and the request log line at the end.
//
// Thread contract: everything runs on the exchange's strand; the engine's sink only posts
// there. Lifetime: shared by the engine sinks and the exchange callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/api_error.h"
#include "api/logprobs.h"
#include "api/responses.h"
#include "api/tool_calls.h"
#include "runtime/engine_loop.h"
#include "server/http/http_exchange.h"
#include "server/server_context.h"

namespace spillway::server {

enum class JobKind { Chat, Completion };

struct JobSpec {
  JobKind kind = JobKind::Chat;
  api::ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  int32_t n = 1;                          // choices per prompt
  bool logprobs = false;                  // render token logprobs
  std::vector<std::string> tool_names;    // chat: non-empty = parse tool calls
  bool named_tool_choice = false;         // a forced named call ends with "stop" (as OpenAI)
  std::vector<std::string> echo_texts;    // completions with echo: the text of each prompt
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // One GenerationParams per prompt. Responds with 429 / 503 / 400 itself when the engine
  // refuses. Call on the exchange's strand.
  static void start(ServerContext& ctx, std::shared_ptr<HttpExchange> exchange, JobSpec spec,
                    std::vector<scheduler::GenerationParams> prompts);

  GenerationJob(ServerContext& ctx, std::shared_ptr<HttpExchange> exchange, JobSpec spec);

 private:
  struct Choice {
    int32_t index = 0;
    std::string text;                            // not streaming: all of it
    std::vector<scheduler::GeneratedToken> tokens;  // not streaming, with logprobs
    std::optional<scheduler::FinishReason> finish;
    std::optional<api::ToolCallStreamFilter> filter;  // streaming chat with tools
    std::vector<api::ToolCall> tool_calls;
    size_t text_offset = 0;                      // completions logprobs
    bool echoed = false;
  };
  struct Sub {
    scheduler::RequestId id = 0;
    bool finished = false;
    bool seen = false;
    int32_t prompt_tokens = 0;
    int32_t cached_tokens = 0;
    std::optional<scheduler::DiffusionUsage> diffusion;  // diffusion models
    int32_t completion_tokens = 0;
    std::optional<std::chrono::steady_clock::time_point> last_tokens_at;
    std::optional<std::string> error;
  };

  void on_update_safely(size_t sub, scheduler::RequestUpdate&& update);
  void on_update(size_t sub, scheduler::RequestUpdate&& update);
  void fail(const api::ApiError& error) noexcept;
  void on_client_gone();
  // The client stopped reading (paused) or reads again: pauses or resumes the engine work.
  void on_backpressure(bool paused);
  void end_pause();  // the paused gauge back down when the job ends while paused
  void stream_choice(Choice& choice, const scheduler::ChoiceUpdate& update);
  void finish();
  void finish_stream(const std::optional<api::ApiError>& failure);
  void respond_whole(const std::optional<api::ApiError>& failure);
  std::vector<api::TokenLogprobs> logprob_pieces(const std::vector<scheduler::GeneratedToken>& tokens) const;
  std::optional<api::FinishReason> wire_finish(Choice& choice, std::string& tail);
  api::Usage usage() const;
  void record(int status, const std::string& error);

  ServerContext& ctx_;
  std::shared_ptr<HttpExchange> exchange_;
  JobSpec spec_;
  std::vector<Sub> subs_;
  std::vector<Choice> choices_;
  bool done_ = false;
  bool client_gone_ = false;
  bool output_paused_ = false;  // the engine was told to pause this job's requests
  std::optional<std::chrono::steady_clock::time_point> first_token_at_;
  std::optional<double> queue_seconds_;
};

}  // namespace spillway::server
