// What a client asks the engine for and what it gets back, already tokenized: the types
// the scheduler, the runtime and the server share (server/ renders chat templates and
// turns SubmitRejection into HTTP statuses).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/diffusion/params.h"
#include "engine/forward/mobile_params.h"
#include "engine/sampling/sampling.h"
#include "grammar/fsm.h"

namespace spillway::scheduler {

using RequestId = uint64_t;

// What the server asks for, already tokenized (server/ renders chat templates).
struct GenerationParams {
  std::vector<int32_t> prompt;          // non-empty; ids < n_vocab
  engine::SamplingParams sampling;      // includes seed, logprobs, top_logprobs
  int32_t max_tokens = -1;              // -1: until the context is full
  int32_t min_tokens = 0;               // end-of-generation ids and stop ids banned before this
  bool ignore_eos = false;              // end-of-generation ids do not stop the stream
  std::vector<std::string> stop;        // stop strings, matched across token boundaries;
                                        // the matched text is not included in the output
  std::vector<int32_t> stop_token_ids;  // extra ids that stop the stream (not in output text)
  int32_t n = 1;                        // choices; they share the prompt's KV blocks
  bool skip_special_tokens = true;      // detokenization of control tokens
  // Diffusion models only (SchedulerConfig::diffusion_model): how the canvas of
  // prompt + max_tokens masks is denoised; unset = the defaults (timestep schedule, one
  // token per step). steps <= 0 means max_tokens steps. An AR model rejects it.
  std::optional<engine::diffusion::DiffusionParams> diffusion;
  // Structured output (compiled by the server): every choice's tokens are masked by its own
  // matcher over this grammar; end-of-generation only where the grammar is complete. Needs
  // SchedulerConfig::token_trie; autoregressive models only.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // MoE models: this request's MoBiLE override (the body's "moe" object); unset: the
  // engine's --moe-little-experts / --moe-fallback-confidence. little_experts may not
  // exceed SchedulerConfig::moe_experts_used (checked at submit).
  std::optional<engine::MobileRequest> moe;
};

// What a diffusion request cost so far (RequestUpdate::diffusion).
struct DiffusionUsage {
  int32_t forwards = 0;            // canvas forwards (steps that committed; empty-block steps excluded)
  int32_t steps = 0;               // steps run, empty-block steps included
  int32_t committed = 0;           // canvas positions committed
  int64_t rows_evaluated = 0;      // canvas rows forwarded over all forwards
  // Turbo techniques (engine::diffusion::CanvasStats): top-1 fallback commits, masked
  // positions EOS tail-drop filled, repeat-guard trips (0/1), the repair forward (0/1) and
  // the positions it changed; blocks that ran a forward and ended, and their forwards.
  int32_t forced_top1 = 0;
  int32_t eos_tail_dropped = 0;
  int32_t repeat_guard_trips = 0;
  int32_t repair_forwards = 0;
  int32_t repair_changes = 0;
  int32_t blocks_finished = 0;
  int32_t block_forwards = 0;
  double tokens_per_forward() const { return forwards > 0 ? double(committed) / forwards : 0.0; }
};

enum class FinishReason {
  Stop,       // end-of-generation id, stop string or stop id
  Length,     // max_tokens, or the context is full
  Cancelled,  // cancel() or shutdown
  Error,      // the runner failed; RequestUpdate::error says why
};

struct GeneratedToken {
  int32_t id = -1;
  float logprob = 0.0f;                               // when sampling.logprobs
  std::vector<engine::TokenLogprob> top_logprobs;     // sampling.top_logprobs alternatives
};

struct ChoiceUpdate {
  int32_t index = 0;                   // 0 .. n-1
  std::string text;                    // text completed since the previous update: whole
                                       // UTF-8 sequences only, text that may still become a
                                       // stop string held back until it cannot
  std::vector<GeneratedToken> tokens;  // the tokens generated since the previous update
  std::optional<FinishReason> finish;  // set in this choice's last update
};

struct RequestUpdate {
  RequestId id = 0;
  std::vector<ChoiceUpdate> choices;   // only choices with something new
  bool finished = false;               // every choice finished: the last update of the request
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;    // prompt tokens served from the prefix cache
  int32_t completion_tokens = 0;       // over all choices, so far
  double queue_seconds = 0.0;          // from submit() to the first step that computed it
  std::optional<DiffusionUsage> diffusion;  // diffusion requests
  std::optional<std::string> error;    // with FinishReason::Error
};

// Called once per update, on the engine thread, in order; the last call has finished set.
using UpdateSink = std::function<void(RequestUpdate&&)>;

enum class SubmitError {
  QueueFull,     // max_waiting reached (HTTP 429)
  ShuttingDown,  // stop() was called (HTTP 503)
  Invalid,       // params do not fit this engine, e.g. prompt + min_tokens > max_context (400)
};

struct SubmitRejection {
  SubmitError kind;
  std::string message;  // user-facing
};

}  // namespace spillway::scheduler
